//! Perspective camera, frustum and screen-space error (features H5, H6).

use glam::Vec3;

/// A perspective camera looking from `eye` towards `target`, y up.
///
/// The viewport is in pixels; screen-space tolerances are measured in pixels of its height.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    pub eye: Vec3,
    pub target: Vec3,
    /// Vertical field of view in radians, in (0, π).
    pub fov_y: f32,
    /// Viewport width and height in pixels.
    pub viewport: (u32, u32),
    /// Near and far plane distances, 0 < near < far.
    pub near: f32,
    pub far: f32,
}

/// An axis-aligned box in world space.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Aabb {
    pub min: Vec3,
    pub max: Vec3,
}

/// Where a box lies relative to a frustum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Containment {
    Outside,
    Intersecting,
    Inside,
}

/// The six planes of a camera's view volume.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frustum {
    /// Planes as (normal, d) with the normal pointing inwards: inside when `n·p + d >= 0`.
    pub planes: [glam::Vec4; 6],
}
