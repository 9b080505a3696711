//! Debug lines drawn over the terrain: node and patch boxes, the frozen LOD camera's
//! frustum. Built on the CPU each frame they are shown (they are few).

use glam::{Vec3, Vec4};
use terralod_core::{Aabb, Camera};

/// One line end: world position and an RGBA colour.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct LineVertex {
    pub position: [f32; 3],
    pub colour: [u8; 4],
}

/// A list of line segments, reused across frames.
#[derive(Clone, Debug, Default)]
pub struct DebugLines {
    vertices: Vec<LineVertex>,
}

impl DebugLines {
    pub fn new() -> DebugLines {
        DebugLines::default()
    }

    pub fn clear(&mut self) {
        self.vertices.clear();
    }

    pub fn vertices(&self) -> &[LineVertex] {
        &self.vertices
    }

    pub fn is_empty(&self) -> bool {
        self.vertices.is_empty()
    }

    pub fn add_segment(&mut self, a: Vec3, b: Vec3, colour: [u8; 4]) {
        self.vertices.push(LineVertex {
            position: a.to_array(),
            colour,
        });
        self.vertices.push(LineVertex {
            position: b.to_array(),
            colour,
        });
    }

    /// The 12 edges of `aabb`.
    pub fn add_box(&mut self, aabb: &Aabb, colour: [u8; 4]) {
        let corners = aabb.corners();
        for (a, b) in Aabb::EDGES {
            self.add_segment(corners[a], corners[b], colour);
        }
    }

    /// The view volume of `camera`, its far plane pulled in to `max_distance` so it stays
    /// readable, with the lines from the eye to the far corners.
    pub fn add_frustum(&mut self, camera: &Camera, max_distance: f32, colour: [u8; 4]) {
        let far = camera.far.min(max_distance).max(camera.near * 2.0);
        let forward = camera.forward();
        let up = camera.up();
        let right = camera.right();
        let half_height = (0.5 * camera.fov_y).tan();
        let half_width = half_height * camera.aspect();
        let corners_at = |distance: f32| {
            [(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)].map(|(sx, sy): (f32, f32)| {
                camera.eye
                    + distance * (forward + right * (sx * half_width) + up * (sy * half_height))
            })
        };
        let near = corners_at(camera.near);
        let far_corners = corners_at(far);
        for i in 0..4 {
            let j = (i + 1) % 4;
            self.add_segment(near[i], near[j], colour);
            self.add_segment(far_corners[i], far_corners[j], colour);
            self.add_segment(camera.eye, far_corners[i], colour);
        }
        // The view axis, to tell the frustum's direction at a glance.
        self.add_segment(camera.eye, camera.eye + forward * far, colour);
    }
}

/// An RGBA colour from floats in 0..1.
pub fn rgba(colour: Vec4) -> [u8; 4] {
    (colour.clamp(Vec4::ZERO, Vec4::ONE) * 255.0)
        .round()
        .to_array()
        .map(|c| c as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_box_has_twelve_edges_of_its_sides() {
        let mut lines = DebugLines::new();
        let aabb = Aabb::new(Vec3::ZERO, Vec3::new(1.0, 2.0, 3.0));
        lines.add_box(&aabb, [255; 4]);
        assert_eq!(lines.vertices().len(), 24);
        let mut lengths: Vec<f32> = lines
            .vertices()
            .chunks(2)
            .map(|s| Vec3::from(s[0].position).distance(Vec3::from(s[1].position)))
            .collect();
        lengths.sort_by(f32::total_cmp);
        assert_eq!(
            lengths,
            [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0]
        );
    }
}
