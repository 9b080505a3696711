//! Render() of algorithm A: triangle fans around the centres of the enabled squares,
//! skipping disabled edge vertices and the quadrants that enabled sub-squares draw.

use super::AdaptiveLod;
use super::records::{EAST, NORTH, SOUTH, WEST};
use super::update::ENABLED;
use crate::camera::{Containment, Frustum};
use crate::heightfield::GridPos;

/// The four edges of a square in fan order (counter-clockwise seen from above, as
/// algorithm Q's fans): the side, and the quadrants of its first and second half.
const EDGES: [(usize, u32, u32); 4] = [(WEST, 0, 2), (SOUTH, 2, 3), (EAST, 3, 1), (NORTH, 1, 0)];

impl AdaptiveLod<'_> {
    /// Emits the enabled square `(level, ix, iz)` and its enabled descendants; culls whole
    /// subtrees whose box is outside `frustum`.
    pub(super) fn render(&mut self, frustum: Option<&Frustum>, level: usize, ix: u32, iz: u32) {
        if let Some(frustum) = frustum
            && frustum.classify(&self.tree.aabb(level, ix, iz)) == Containment::Outside
        {
            return;
        }
        let mut enabled_children = 0u32;
        if level < self.finest {
            let child = self.tree.levels[level + 1];
            for k in 0..4 {
                let (cx, cz) = (2 * ix + (k & 1), 2 * iz + (k >> 1));
                if child.present(cx, cz) && self.state[child.id(cx, cz)] & ENABLED != 0 {
                    enabled_children |= 1 << k;
                    self.render(frustum, level + 1, cx, cz);
                }
            }
        }
        if self.tree.straddles(level, ix, iz) {
            // Every stored child is enabled and draws itself; the rest is padding.
            return;
        }
        let size = self.tree.levels[level].size;
        let half = size / 2;
        let stride = self.vertices.stride;
        let corner = self.vertices.index(GridPos::new(ix * size, iz * size));
        let (right, down) = (size, size * stride);
        let centre = corner + half * (stride + 1);
        // Per edge: start corner, midpoint, end corner, in fan order.
        let ends = [
            (corner, corner + half * stride, corner + down),
            (corner + down, corner + down + half, corner + down + right),
            (
                corner + down + right,
                corner + right + half * stride,
                corner + right,
            ),
            (corner + right, corner + half, corner),
        ];
        let before = self.indices.len();
        for ((side, first, second), (a, m, b)) in EDGES.into_iter().zip(ends) {
            if self.mid_enabled(level, ix, iz, side) {
                if enabled_children & (1 << first) == 0 {
                    self.indices.extend_from_slice(&[centre, a, m]);
                }
                if enabled_children & (1 << second) == 0 {
                    self.indices.extend_from_slice(&[centre, m, b]);
                }
            } else {
                // Both halves' quadrants are drawn here: an enabled quadrant would have
                // enabled this vertex.
                debug_assert_eq!(enabled_children & (1 << first | 1 << second), 0);
                self.indices.extend_from_slice(&[centre, a, b]);
            }
        }
        if self.indices.len() > before {
            self.stats.nodes_drawn += 1;
            self.drawn.push((level as u8, ix, iz));
        }
    }
}
