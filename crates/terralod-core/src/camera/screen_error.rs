//! Screen-space error (feature H6): how many pixels a world-space error covers.
//!
//! # The bound for vertical errors
//!
//! A terrain error is vertical: the true surface point `p` and the drawn point `q` share x
//! and z, `q = p + e·ŷ`. In view coordinates (`x` right, `y` up, `z` depth along the view
//! direction, relative to the eye) a point projects to `k · (x / z, y / z)` pixels from the
//! screen centre, `k` being [`Camera::pixels_per_radian`]. Because the camera never rolls,
//! `ŷ` has no component along the right axis, and a short calculation gives the exact
//! displacement
//!
//! ```text
//! |P(q) − P(p)| = k · |e| · sqrt(γ² · x² + w²) / (z_p · z_q)
//! ```
//!
//! where `γ = ŷ · forward` (the sine of the pitch), `x` is the lateral offset of the points
//! and `w` their horizontal distance along the view heading (the same for both points).
//! Over a box holding both points, `|x| ≤ X`, `|w| ≤ W` and `z_p, z_q ≥ Z` (the box's
//! smallest depth, clamped to the near plane: nearer parts are clipped), so
//! `k · e · sqrt(γ² X² + W²) / Z²` bounds the displacement everywhere in the box.
//!
//! This is the view-angle-aware error of article 000 done safely: at the screen centre
//! (`x = 0`, `w = z · cos(pitch)`) it is exactly the article's projection of the error
//! vector on the camera's up axis, `e · |ŷ · up| · k / z`. Off the axis the article's
//! projection is not a bound: looking straight down it is 0, yet a vertical error at the
//! screen edge moves `k · e · ρ / z²` pixels (`ρ` its distance from the axis).

use super::{Aabb, Camera};
use glam::Vec3;

/// The view-dependent values of screen-space error tests, computed once per frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorProjector {
    eye: Vec3,
    right: Vec3,
    forward: Vec3,
    /// Horizontal unit vector along the view heading (perpendicular to `right` and ŷ).
    heading: Vec3,
    /// `ŷ · forward`: the sine of the pitch.
    sin_pitch: f32,
    pixels_per_radian: f32,
    near: f32,
}

impl ErrorProjector {
    pub fn new(camera: &Camera) -> ErrorProjector {
        let (forward, up, right) = (camera.forward(), camera.up(), camera.right());
        let (cos_pitch, sin_pitch) = (Vec3::Y.dot(up), Vec3::Y.dot(forward));
        ErrorProjector {
            eye: camera.eye,
            right,
            forward,
            heading: cos_pitch * forward - sin_pitch * up,
            sin_pitch,
            pixels_per_radian: camera.pixels_per_radian(),
            near: camera.near,
        }
    }

    /// See [`Camera::pixels_per_radian`].
    pub fn pixels_per_radian(&self) -> f32 {
        self.pixels_per_radian
    }

    /// See [`Camera::screen_error`]: nominal, not a bound off the view axis.
    pub fn screen_error(&self, world_error: f32, distance: f32) -> f32 {
        world_error * self.pixels_per_radian / distance.max(self.near)
    }

    /// Upper bound, in pixels, of how far any vertical segment of length `world_error`
    /// lying in `aabb` moves on screen between its ends (see the module docs). Parts of the
    /// box nearer than the near plane count as at the near plane (they are clipped). A
    /// node whose [`NodeBounds::error`](crate::pyramid::NodeBounds) passes this test
    /// against a tolerance in pixels is drawn within that tolerance.
    pub fn vertical_error_bound(&self, world_error: f32, aabb: &Aabb) -> f32 {
        let centre = aabb.center() - self.eye;
        let extent = aabb.half_extent();
        // Largest |a · (p − eye)| over the box, and the smallest depth.
        let reach = |axis: Vec3| axis.dot(centre).abs() + axis.abs().dot(extent);
        let lateral = reach(self.right);
        let ahead = reach(self.heading);
        let depth = (self.forward.dot(centre) - self.forward.abs().dot(extent)).max(self.near);
        let spread = (self.sin_pitch * lateral).hypot(ahead);
        world_error.abs() * self.pixels_per_radian * spread / (depth * depth)
    }
}
