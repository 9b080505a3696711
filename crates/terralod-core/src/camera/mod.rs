//! Perspective camera, frustum and screen-space error (features H5, H6).
//!
//! The camera is right-handed with y up and never rolls: its right axis is always
//! horizontal. View space looks down −z; clip space has wgpu's depth range 0..1 (near → 0,
//! far → 1) and y up. Pixel distances are in pixels of the viewport (square pixels), so a
//! tolerance in pixels means pixels of the viewport height, as everywhere in terralod.

mod frustum;
mod screen_error;

#[cfg(test)]
mod tests;

pub use screen_error::ErrorProjector;

use glam::{Mat4, Vec3, Vec4};

/// A perspective camera looking from `eye` towards `target`, y up.
///
/// The viewport is in pixels; screen-space tolerances are measured in pixels of its height.
/// The methods assume a valid camera: build it with [`Camera::new`] or check it with
/// [`Camera::validate`] after changing its fields.
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

/// Four boxes side by side, one vector per coordinate (`min[axis]`, lane `k` the k-th
/// box): the tests of four siblings of a quadtree run over all four at once.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BoxLanes {
    pub min: [Vec4; 3],
    pub max: [Vec4; 3],
}

impl BoxLanes {
    /// The box of lane `k`.
    pub fn lane(&self, k: usize) -> Aabb {
        Aabb {
            min: Vec3::new(self.min[0][k], self.min[1][k], self.min[2][k]),
            max: Vec3::new(self.max[0][k], self.max[1][k], self.max[2][k]),
        }
    }
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
    /// Order: left, right, bottom, top, near, far. Normals have unit length, so `n·p + d`
    /// is a distance in world units.
    pub planes: [glam::Vec4; 6],
}

impl Frustum {
    /// Index of the near plane in [`Frustum::planes`].
    pub const NEAR: usize = 4;
    /// Index of the far plane in [`Frustum::planes`].
    pub const FAR: usize = 5;
}

/// Why a camera is unusable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CameraError {
    #[error(
        "camera values must be finite (eye {eye}, target {target}, fov_y {fov_y}, near {near}, far {far})"
    )]
    NonFinite {
        eye: Vec3,
        target: Vec3,
        fov_y: f32,
        near: f32,
        far: f32,
    },
    #[error(
        "eye {eye} and its target give no view direction in f32 (the same point, or too \
         close or too far apart)"
    )]
    EyeAtTarget { eye: Vec3 },
    #[error("vertical field of view {fov_y} rad is outside [{MIN_FOV_Y}, π)")]
    FieldOfView { fov_y: f32 },
    #[error("near plane {near} must be greater than 0 and less than far plane {far}")]
    DepthRange { near: f32, far: f32 },
    #[error("viewport {width} x {height} has no pixels")]
    EmptyViewport { width: u32, height: u32 },
}

/// How close to vertical the view direction may come before [`Camera::up`] switches to its
/// fixed reference (the cross product with the world up axis gets too short to normalise).
const VERTICAL_LIMIT: f32 = 1e-6;

/// The narrowest vertical field of view, in radians (0.006°, a strong telescope's): below
/// it pixels per radian grow past what the `f32` error bounds can square.
pub const MIN_FOV_Y: f32 = 1e-4;

impl Camera {
    /// A validated camera.
    pub fn new(
        eye: Vec3,
        target: Vec3,
        fov_y: f32,
        viewport: (u32, u32),
        near: f32,
        far: f32,
    ) -> Result<Camera, CameraError> {
        let camera = Camera {
            eye,
            target,
            fov_y,
            viewport,
            near,
            far,
        };
        camera.validate()?;
        Ok(camera)
    }

    /// Checks the invariants [`Camera::new`] guarantees.
    pub fn validate(&self) -> Result<(), CameraError> {
        let finite = self.eye.is_finite()
            && self.target.is_finite()
            && self.fov_y.is_finite()
            && self.near.is_finite()
            && self.far.is_finite();
        if !finite {
            return Err(CameraError::NonFinite {
                eye: self.eye,
                target: self.target,
                fov_y: self.fov_y,
                near: self.near,
                far: self.far,
            });
        }
        let direction = self.target - self.eye;
        if direction.length_squared() == 0.0 || !direction.length_squared().is_finite() {
            return Err(CameraError::EyeAtTarget { eye: self.eye });
        }
        if !(self.fov_y >= MIN_FOV_Y && self.fov_y < std::f32::consts::PI) {
            return Err(CameraError::FieldOfView { fov_y: self.fov_y });
        }
        if !(self.near > 0.0 && self.far > self.near) {
            return Err(CameraError::DepthRange {
                near: self.near,
                far: self.far,
            });
        }
        if self.viewport.0 == 0 || self.viewport.1 == 0 {
            return Err(CameraError::EmptyViewport {
                width: self.viewport.0,
                height: self.viewport.1,
            });
        }
        Ok(())
    }

    /// Viewport width over height.
    pub fn aspect(&self) -> f32 {
        self.viewport.0 as f32 / self.viewport.1 as f32
    }

    /// Unit view direction.
    pub fn forward(&self) -> Vec3 {
        (self.target - self.eye).normalize()
    }

    /// Unit right axis of the screen; always horizontal (the camera never rolls).
    ///
    /// Looking straight up or down, where "horizontal and perpendicular to the view" is
    /// undefined, the screen's up axis is taken towards −z (north, the top of the
    /// heightfield image), so the right axis is +x looking down and −x looking up.
    pub fn right(&self) -> Vec3 {
        let forward = self.forward();
        let right = forward.cross(Vec3::Y);
        if right.length() > VERTICAL_LIMIT {
            right.normalize()
        } else {
            forward.cross(Vec3::NEG_Z).normalize()
        }
    }

    /// Unit up axis of the screen: perpendicular to the view direction and to the (always
    /// horizontal) right axis, with a non-negative world-y component.
    pub fn up(&self) -> Vec3 {
        self.right().cross(self.forward())
    }

    /// World to view space (right-handed, looking down −z).
    pub fn view_from_world(&self) -> Mat4 {
        glam::camera::rh::view::look_to_mat4(self.eye, self.forward(), self.up())
    }

    /// View to clip space, perspective, wgpu conventions (depth 0..1, y up).
    pub fn clip_from_view(&self) -> Mat4 {
        glam::camera::rh::proj::directx::perspective(self.fov_y, self.aspect(), self.near, self.far)
    }

    /// World to clip space.
    pub fn clip_from_world(&self) -> Mat4 {
        self.clip_from_view() * self.view_from_world()
    }

    /// The six planes of the view volume.
    ///
    /// The side planes come from the clip transform; the near and far planes are built from
    /// the view axis directly, because their matrix rows (`z`, `w − z`) cancel in `f32` at
    /// large far/near ratios (at 10^6 the far plane's normal is lost entirely).
    pub fn frustum(&self) -> Frustum {
        self.with_depth_planes(Frustum::from_clip_from_world(self.clip_from_world()))
    }

    /// `frustum` with its near and far planes built from the view axis (see
    /// [`Camera::frustum`]).
    fn with_depth_planes(&self, mut frustum: Frustum) -> Frustum {
        let forward = self.forward();
        let ahead = forward.dot(self.eye);
        frustum.planes[Frustum::NEAR] = forward.extend(-ahead - self.near);
        frustum.planes[Frustum::FAR] = (-forward).extend(ahead + self.far);
        frustum
    }

    /// The view volume with each side plane turned `angle` radians further out (the
    /// vertical field of view grows by `2 · angle`, the horizontal one likewise, both kept
    /// below a half turn); near and far planes as [`Camera::frustum`]. A selection that
    /// refines what lies in it has the parts a turn of up to `angle` brings into view
    /// refined already.
    pub fn frustum_widened(&self, angle: f32) -> Frustum {
        if angle.is_nan() || angle <= 0.0 {
            return self.frustum();
        }
        let widest = std::f32::consts::PI - 1e-3;
        let half_y = 0.5 * self.fov_y;
        let half_x = ((0.5 * self.fov_y).tan() * self.aspect()).atan();
        let fov_y = (2.0 * (half_y + angle)).min(widest);
        let fov_x = (2.0 * (half_x + angle)).min(widest);
        let aspect = (0.5 * fov_x).tan() / (0.5 * fov_y).tan();
        let clip_from_view =
            glam::camera::rh::proj::directx::perspective(fov_y, aspect, self.near, self.far);
        self.with_depth_planes(Frustum::from_clip_from_world(
            clip_from_view * self.view_from_world(),
        ))
    }

    /// Pixels covered by one radian seen at the screen centre:
    /// `k = viewport_height / (2 tan(fov_y / 2))`. A size `e` seen face-on at distance `d`
    /// on the view axis covers `e * k / d` pixels.
    pub fn pixels_per_radian(&self) -> f32 {
        self.viewport.1 as f32 / (2.0 * (0.5 * self.fov_y).tan())
    }

    /// The nominal screen-space error of H6: `world_error * k / distance`, the distance
    /// clamped to the near plane.
    ///
    /// This is exact for an error seen face-on at the screen centre and is what the
    /// articles use, but it is **not** an upper bound off the view axis: perspective
    /// magnifies towards the screen edges (a vertical error near the corner of a level
    /// 1-radian 16:9 view covers about 1.5 times this value). For a guaranteed bound on
    /// vertical errors use [`ErrorProjector::vertical_error_bound`].
    pub fn screen_error(&self, world_error: f32, distance: f32) -> f32 {
        world_error * self.pixels_per_radian() / distance.max(self.near)
    }

    /// Euclidean distance from the eye to the nearest point of `aabb` (0 inside).
    pub fn distance_to_aabb(&self, aabb: &Aabb) -> f32 {
        aabb.distance_to(self.eye)
    }

    /// The view-dependent values for many screen-error tests, computed once.
    pub fn error_projector(&self) -> ErrorProjector {
        ErrorProjector::new(self)
    }
}

impl Aabb {
    pub fn new(min: Vec3, max: Vec3) -> Aabb {
        Aabb { min, max }
    }

    pub fn center(&self) -> Vec3 {
        0.5 * (self.min + self.max)
    }

    /// Half the size along each axis.
    pub fn half_extent(&self) -> Vec3 {
        0.5 * (self.max - self.min)
    }

    /// The twelve edges of a box as pairs of indices into [`Aabb::corners`]: corners one
    /// bit apart (also the edges of any hexahedron numbered the same way, a frustum's).
    pub const EDGES: [(usize, usize); 12] = [
        (0, 1),
        (2, 3),
        (4, 5),
        (6, 7),
        (0, 2),
        (1, 3),
        (4, 6),
        (5, 7),
        (0, 4),
        (1, 5),
        (2, 6),
        (3, 7),
    ];

    /// The eight corners (bit 0 picks max x, bit 1 max y, bit 2 max z).
    pub fn corners(&self) -> [Vec3; 8] {
        std::array::from_fn(|i| {
            Vec3::new(
                if i & 1 == 0 { self.min.x } else { self.max.x },
                if i & 2 == 0 { self.min.y } else { self.max.y },
                if i & 4 == 0 { self.min.z } else { self.max.z },
            )
        })
    }

    pub fn contains(&self, point: Vec3) -> bool {
        point.cmpge(self.min).all() && point.cmple(self.max).all()
    }

    /// Per-axis distance from `point` to the box (0 on axes where it is within the box).
    fn outside(&self, point: Vec3) -> Vec3 {
        (self.min - point).max(point - self.max).max(Vec3::ZERO)
    }

    /// Euclidean distance from `point` to the nearest point of the box (0 inside).
    pub fn distance_to(&self, point: Vec3) -> f32 {
        self.outside(point).length()
    }

    /// Largest per-axis distance (L∞, Chebyshev) from `point` to the box: the distance of
    /// article 002's box test, `max(|c - v| - extent)` over the axes (the article calls it
    /// "L1"), clamped at 0 inside. Never more than the Euclidean distance, so a screen error
    /// computed with it is never less than with the Euclidean one.
    pub fn distance_linf_to(&self, point: Vec3) -> f32 {
        self.outside(point).max_element()
    }

    /// Sum of the per-axis distances (L1, Manhattan) from `point` to the box. At least the
    /// Euclidean distance, so a screen error computed with it can be too small.
    pub fn distance_l1_to(&self, point: Vec3) -> f32 {
        self.outside(point).element_sum()
    }
}
