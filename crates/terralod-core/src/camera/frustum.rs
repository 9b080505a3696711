//! Frustum planes from a clip transform and box classification (feature H5).

use super::{Aabb, BoxLanes, Containment, Frustum};
use glam::{BVec4A, Mat4, Vec3, Vec4};

/// Relative slack of the outside test, so rounding never culls a box that touches the view.
const OUTSIDE_SLACK: f32 = 1e-5;

impl Frustum {
    /// The six inward planes (normalised) of the clip volume of `clip_from_world`, with
    /// wgpu's clip conventions: `-w <= x <= w`, `-w <= y <= w`, `0 <= z <= w`.
    ///
    /// Each clip inequality is linear in the world point, so its plane is a combination of
    /// the matrix rows (the Gribb–Hartmann extraction).
    pub fn from_clip_from_world(clip_from_world: Mat4) -> Frustum {
        let m = clip_from_world;
        let (x, y, z, w) = (m.row(0), m.row(1), m.row(2), m.row(3));
        let planes = [w + x, w - x, w + y, w - y, z, w - z].map(|p| {
            let length = p.truncate().length();
            if length > 0.0 { p / length } else { p }
        });
        Frustum { planes }
    }

    /// Signed distance of `point` to plane `index` (positive inside).
    pub fn distance(&self, index: usize, point: Vec3) -> f32 {
        let p = self.planes[index];
        p.truncate().dot(point) + p.w
    }

    /// Whether `point` is inside all six planes.
    pub fn contains_point(&self, point: Vec3) -> bool {
        (0..6).all(|i| self.distance(i, point) >= 0.0)
    }

    /// Where `aabb` lies. Conservative: a box with any point in the view volume is never
    /// [`Containment::Outside`] (a box outside near a frustum edge may be reported
    /// [`Containment::Intersecting`]). [`Containment::Inside`] means every point of the
    /// box is inside all six planes.
    pub fn classify(&self, aabb: &Aabb) -> Containment {
        match self.classify_planes(aabb, Frustum::ALL_PLANES) {
            None => Containment::Outside,
            Some(0) => Containment::Inside,
            Some(_) => Containment::Intersecting,
        }
    }

    /// Bits of all six planes, for [`Frustum::classify_planes`].
    pub const ALL_PLANES: u8 = 0b11_1111;

    /// [`Frustum::classify`] against the planes whose bits are set in `planes` (bit `i`:
    /// plane `i`) only: `None` when the box is outside one of them, else the planes among
    /// them that it crosses (0: inside all). A box inside a plane has every box nested in
    /// it inside too, so a hierarchy tests a child against the planes its parent crosses.
    #[inline]
    pub fn classify_planes(&self, aabb: &Aabb, planes: u8) -> Option<u8> {
        let mut crossing = 0;
        for (i, plane) in self.planes.iter().enumerate() {
            let bit = 1 << i;
            if planes & bit == 0 {
                continue;
            }
            let normal = plane.truncate();
            let positive = normal.cmpge(Vec3::ZERO);
            // The corner furthest along the normal, and the one furthest against it.
            let far_corner = Vec3::select(positive, aabb.max, aabb.min);
            let near_corner = Vec3::select(positive, aabb.min, aabb.max);
            let reach = normal.dot(far_corner) + plane.w;
            let scale = normal.abs().dot(far_corner.abs()) + plane.w.abs();
            if reach < -OUTSIDE_SLACK * scale {
                return None;
            }
            if normal.dot(near_corner) + plane.w < 0.0 {
                crossing |= bit;
            }
        }
        Some(crossing)
    }

    /// [`Frustum::classify_planes`] of four boxes at once, the same arithmetic in each
    /// lane: per lane, whether the box is outside one of the planes (bit `k` of the first
    /// value), and the planes it crosses (meaningful when it is not outside).
    #[inline]
    pub fn classify_planes_lanes(&self, boxes: &BoxLanes, planes: u8) -> (u32, [u8; 4]) {
        let mut outside = BVec4A::FALSE;
        let mut crossing = [0u8; 4];
        for (i, plane) in self.planes.iter().enumerate() {
            let bit = 1 << i;
            if planes & bit == 0 {
                continue;
            }
            let normal = plane.truncate().to_array();
            let n = normal.map(Vec4::splat);
            let w = Vec4::splat(plane.w);
            // Per axis, the coordinates of the corners furthest along and against the
            // normal; then the dot products as in `classify_planes`.
            let [(f0, m0), (f1, m1), (f2, m2)] = [0, 1, 2].map(|axis| {
                if normal[axis] >= 0.0 {
                    (boxes.max[axis], boxes.min[axis])
                } else {
                    (boxes.min[axis], boxes.max[axis])
                }
            });
            let reach = n[0] * f0 + n[1] * f1 + n[2] * f2;
            let scale = n[0].abs() * f0.abs() + n[1].abs() * f1.abs() + n[2].abs() * f2.abs();
            let nearest = n[0] * m0 + n[1] * m1 + n[2] * m2;
            outside |= (reach + w).cmplt(Vec4::splat(-OUTSIDE_SLACK) * (scale + w.abs()));
            let crosses = (nearest + w).cmplt(Vec4::ZERO).bitmask();
            for (k, lane) in crossing.iter_mut().enumerate() {
                if crosses >> k & 1 != 0 {
                    *lane |= bit;
                }
            }
        }
        (outside.bitmask(), crossing)
    }
}
