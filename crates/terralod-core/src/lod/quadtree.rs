//! Algorithm Q (article 000): a screen-space-error quadtree selected from the root each
//! frame, drawn as 3 × 3 fans stitched to finer neighbours, one index buffer per frame.
//!
//! # Selection (Q2)
//!
//! From the root, in one pass: the frustum test (outside → invisible; fully inside → no
//! more tests below), then the error test: a node is drawn when its drawn-error bound passes
//! the view ([`View::accepts`]), else subdivided. Leaves (3 × 3 samples, error 0) are not
//! tested: a subdivided node of the last level above them draws all its stored leaves (its
//! box is a conservative box for their culling). A subdivided node none of whose descendants is drawn (all culled: a box that touches
//! the frustum while none of its children do) is drawn itself; nothing of it is in view.
//! A smaller τ never gives a coarser mesh where it is seen: every vertex in view stays. The
//! triangle count is monotone in τ without culling; with culling, refining a partly
//! visible node keeps only its visible children, which can be fewer triangles.
//!
//! # The drawn-error bound
//!
//! A drawn node is a fan from its centre over all its boundary vertices: its corners, its
//! edge midpoints and, on an edge next to a finer drawn neighbour, every vertex that
//! neighbour draws there (Q4). Unstitched it is the pyramid's 3 × 3 fan `S`, within
//! `error` of every sample ([`crate::pyramid`]). A stitched triangle `(C, a, b)` lies inside
//! one fan triangle, where `S` is linear, and its surface differs from `S` by at most
//! `max(|h(a) − S(a)|, |h(b) − S(b)|)`, `a` and `b` being samples on the node's edge. So
//! what is drawn is within `error + edge_error` of every sample, `edge_error` being the
//! largest `|h − S|` over the node's edge samples (at most `error`, often much less). The
//! selection uses that sum (plus the f32 rounding of drawn heights and a relative margin
//! of 2^-16 for the f32 arithmetic of the test, for nodes that are not exact), computed
//! once per node when the algorithm is built, valid whether or not the node ends up
//! stitched (only known once its neighbours are selected); the property tests check it
//! with the oracles. The true and drawn points of a sample both lie in the node's box
//! (drawn heights interpolate samples), so [`View::projected_error_bound`] of that box
//! bounds the projected error.
//!
//! # Stitching (Q4)
//!
//! On a shared edge the vertex set is the finer side's. A drawn node whose same-level
//! neighbour is subdivided walks that neighbour's subtree along the edge and collects what
//! is drawn there: a drawn node's corners and midpoint, an invisible (culled) or absent
//! node's corners. A drawn node whose neighbour is drawn at the same level, coarser, culled
//! or absent keeps its own midpoint. Both sides then list the same vertices on every edge
//! segment they share: no T-junction at any level difference.
//!
//! # Node states (Q3)
//!
//! One `u32` per non-leaf node holds the state (2 bits), which of its children are drawn
//! (4 bits: the leaves have no word of their own) and the frame stamp (26 bits). A word
//! with another stamp is from an earlier frame and reads as "not reached", so the states
//! are never cleared; only when the 26-bit stamp wraps (every 67 million frames) is the
//! array zeroed once, so an old stamp can never alias. Non-leaf nodes are about a third of
//! the leaves, a leaf covers 4 samples: 4 bytes / 12 samples ≈ 0.33 bytes per sample (at
//! most 0.5 when both sides have 16 samples or more; a strip a few samples wide pays more,
//! 1.6 bytes for 3 × 40, as every level keeps at least one 2 × 2 block of nodes across it).
//! The word sits in a 16-byte record with the node's box and drawn-error bound (static
//! data built once, like the pyramid: 1 more byte per sample); records are stored in 2 × 2
//! blocks of siblings, so visiting four children touches one cache line.
//!
//! # Padding
//!
//! The quadtree covers the padded `2^n + 1` square, but only nodes that intersect the data
//! exist ([`Pyramid`]), and a node reaching beyond the leaves' extent
//! (`2 · ceil((width − 1) / 2)` columns, the same for rows) is always subdivided. So what is
//! drawn is exactly the rectangle `[0, ext_w] × [0, ext_h]`: the data plus at most one
//! repeated column and row (when a side has an even number of samples). The vertex buffer
//! ([`GridVertices`]) is that rectangle.

use super::{
    GridVertices, LodAlgorithm, LodOptions, MorphedHeight, Selection, SelectionStats, View,
};
use crate::camera::{Aabb, Containment, Frustum};
use crate::heightfield::{GridPos, Heightfield, Samples};
use crate::pyramid::Pyramid;
use glam::Vec3;
use rayon::prelude::*;
use std::time::Instant;

/// Bits of a state word: state, drawn-children mask, frame stamp.
const STATE_MASK: u32 = 0b11;
const CHILD_SHIFT: u32 = 2;
const STAMP_SHIFT: u32 = 6;
/// Stamps run `1..STAMP_LIMIT`; 0 is never current, so a zeroed array reads as unreached.
const STAMP_LIMIT: u32 = 1 << (32 - STAMP_SHIFT);

const SUBDIVIDED: u32 = 1;
const DRAW: u32 = 2;
const INVISIBLE: u32 = 3;

/// What a node is this frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeState {
    /// Not visited this frame (inside a drawn or culled ancestor) or not stored.
    Unreached,
    Subdivided,
    Draw,
    Invisible,
}

/// Which side of a node faces the edge being stitched: the children along it are
/// `(2x + offset, 2z + k)` on a vertical side, `(2x + k, 2z + offset)` on a horizontal one.
#[derive(Clone, Copy, Debug)]
struct Facing {
    vertical: bool,
    offset: u32,
}

/// What the selection reads and writes per non-leaf node.
#[derive(Clone, Copy, Debug, Default)]
struct NodeRecord {
    min_y: f32,
    max_y: f32,
    /// Bound of the vertical error of the node as drawn (stitched or not).
    drawn_error: f32,
    /// State, drawn-children mask and frame stamp (see the module docs).
    state: u32,
}

/// A node drawn this frame.
#[derive(Clone, Copy, Debug)]
struct DrawnNode {
    level: u32,
    ix: u32,
    iz: u32,
}

/// The per-frame inputs of the selection pass.
struct Pass<'v> {
    view: &'v View,
    frustum: Option<&'v Frustum>,
    view_angle_aware: bool,
}

/// Algorithm Q. Borrows the pyramid; owns its states and buffers.
#[derive(Debug)]
pub struct QuadtreeLod<'a> {
    pyramid: &'a Pyramid,
    options: LodOptions,
    finest: usize,
    /// Per level: nodes along x and z, and cells per node side.
    shape: Vec<(u32, u32, u32)>,
    /// Per non-leaf level, one record per stored node (row-major): box, drawn-error bound
    /// and state word side by side, so a visit touches one cache line.
    nodes: Vec<Vec<NodeRecord>>,
    /// Drawn extent in columns and rows (see the module docs).
    extent: (u32, u32),
    vertices: GridVertices,
    stamp: u32,
    drawn: Vec<DrawnNode>,
    ring: Vec<u32>,
    edge: Vec<u32>,
    indices: Vec<u32>,
    stats: SelectionStats,
}

impl<'a> QuadtreeLod<'a> {
    /// Builds the algorithm; `pyramid` must be the pyramid of `field`.
    pub fn new(field: &Heightfield, pyramid: &'a Pyramid, options: LodOptions) -> QuadtreeLod<'a> {
        let finest = pyramid.levels() - 1;
        let shape = (0..=finest)
            .map(|level| {
                let (nx, nz) = pyramid.nodes(level);
                (nx, nz, pyramid.node_size(level))
            })
            .collect();
        let nodes = (0..finest)
            .map(|level| node_records(field, pyramid, level))
            .collect();
        let (leaves_x, leaves_z) = pyramid.nodes(finest);
        let extent = (2 * leaves_x, 2 * leaves_z);
        QuadtreeLod {
            pyramid,
            options,
            finest,
            shape,
            nodes,
            extent,
            vertices: GridVertices {
                stride: extent.0 + 1,
                rows: extent.1 + 1,
            },
            stamp: 0,
            drawn: Vec::new(),
            ring: Vec::new(),
            edge: Vec::new(),
            indices: Vec::new(),
            stats: SelectionStats::default(),
        }
    }

    /// The vertex buffer the selection indexes.
    pub fn grid_vertices(&self) -> GridVertices {
        self.vertices
    }

    #[inline]
    fn word_index(&self, level: usize, ix: u32, iz: u32) -> Option<usize> {
        let (nx, nz, _) = self.shape[level];
        (ix < nx && iz < nz).then(|| record_index(nx, ix, iz))
    }

    fn set_word(&mut self, level: usize, index: usize, state: u32, children: u32) {
        self.nodes[level][index].state =
            (self.stamp << STAMP_SHIFT) | (children << CHILD_SHIFT) | state;
    }

    /// The state of a node this frame.
    fn state(&self, level: usize, ix: u32, iz: u32) -> NodeState {
        if level < self.finest {
            let Some(i) = self.word_index(level, ix, iz) else {
                return NodeState::Unreached;
            };
            let word = self.nodes[level][i].state;
            if word >> STAMP_SHIFT != self.stamp {
                return NodeState::Unreached;
            }
            match word & STATE_MASK {
                SUBDIVIDED => NodeState::Subdivided,
                DRAW => NodeState::Draw,
                INVISIBLE => NodeState::Invisible,
                _ => NodeState::Unreached,
            }
        } else {
            // A leaf: its parent's word says whether it is drawn.
            if level == 0 || self.word_index(level, ix, iz).is_none() {
                return NodeState::Unreached;
            }
            let Some(p) = self.word_index(level - 1, ix / 2, iz / 2) else {
                return NodeState::Unreached;
            };
            let word = self.nodes[level - 1][p].state;
            if word >> STAMP_SHIFT != self.stamp || word & STATE_MASK != SUBDIVIDED {
                return NodeState::Unreached;
            }
            let bit = 1 << ((iz & 1) * 2 + (ix & 1));
            if (word >> CHILD_SHIFT) & bit != 0 {
                NodeState::Draw
            } else {
                NodeState::Invisible
            }
        }
    }

    /// Selection pass over one stored non-leaf node; returns whether anything below it (or
    /// it) is drawn. Leaves are drawn with their parent's tests: they have error 0, and
    /// their parent's box is a conservative box for their culling.
    fn visit(&mut self, pass: &Pass<'_>, level: usize, ix: u32, iz: u32, inside: bool) -> bool {
        self.stats.nodes_visited += 1;
        let (nx, _, size) = self.shape[level];
        let i = record_index(nx, ix, iz);
        let record = self.nodes[level][i];
        let (x0, z0) = (ix * size, iz * size);
        let cell = self.pyramid.mapping().cell_size;
        let aabb = Aabb {
            min: Vec3::new(x0 as f32 * cell, record.min_y, z0 as f32 * cell),
            max: Vec3::new(
                (x0 + size) as f32 * cell,
                record.max_y,
                (z0 + size) as f32 * cell,
            ),
        };
        let mut inside = inside;
        let mut outside = false;
        if let Some(frustum) = pass.frustum
            && !inside
        {
            match frustum.classify(&aabb) {
                Containment::Outside => outside = true,
                Containment::Inside => inside = true,
                Containment::Intersecting => {}
            }
        }
        if outside && pass.view.cull() {
            self.set_word(level, i, INVISIBLE, 0);
            return false;
        }
        let beyond = x0 + size > self.extent.0 || z0 + size > self.extent.1;
        let refine = beyond
            || (!outside
                && !pass
                    .view
                    .accepts(record.drawn_error, &aabb, pass.view_angle_aware));
        if refine {
            let (cnx, cnz, _) = self.shape[level + 1];
            if level + 1 == self.finest {
                // The stored leaves, all drawn.
                let mut mask = 0;
                for (bit, (dx, dz)) in [(0, 0), (1, 0), (0, 1), (1, 1)].into_iter().enumerate() {
                    let (cx, cz) = (2 * ix + dx, 2 * iz + dz);
                    if cx < cnx && cz < cnz {
                        mask |= 1 << bit;
                        self.drawn.push(DrawnNode {
                            level: self.finest as u32,
                            ix: cx,
                            iz: cz,
                        });
                    }
                }
                self.set_word(level, i, SUBDIVIDED, mask);
                return true;
            }
            self.set_word(level, i, SUBDIVIDED, 0);
            let mut any = false;
            for (dx, dz) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                let (cx, cz) = (2 * ix + dx, 2 * iz + dz);
                if cx < cnx && cz < cnz {
                    any |= self.visit(pass, level + 1, cx, cz, inside);
                }
            }
            if any {
                return true;
            }
            if beyond {
                // Never draw padding; nothing of this node is in view anyway.
                self.set_word(level, i, INVISIBLE, 0);
                return false;
            }
        }
        self.set_word(level, i, DRAW, 0);
        self.drawn.push(DrawnNode {
            level: level as u32,
            ix,
            iz,
        });
        true
    }

    /// Pushes the positions (along the shared line) of every vertex the subtree of node
    /// `(level, ix, iz)` draws on its side `facing`, after `start` and up to its far end.
    fn collect(&mut self, level: usize, ix: u32, iz: u32, facing: Facing, start: u32) {
        let size = self.shape[level].2;
        match self.state(level, ix, iz) {
            NodeState::Subdivided => {
                let half = size / 2;
                let (o, x, z) = (facing.offset, 2 * ix, 2 * iz);
                let (a, b) = if facing.vertical {
                    ((x + o, z), (x + o, z + 1))
                } else {
                    ((x, z + o), (x + 1, z + o))
                };
                self.collect(level + 1, a.0, a.1, facing, start);
                self.collect(level + 1, b.0, b.1, facing, start + half);
            }
            NodeState::Draw => {
                self.edge.push(start + size / 2);
                self.edge.push(start + size);
            }
            NodeState::Unreached | NodeState::Invisible => self.edge.push(start + size),
        }
    }

    /// The vertices strictly inside one edge of a drawn node, ascending along the edge, in
    /// `self.edge`. `neighbour` is the same-level node across the edge, if any.
    fn edge_vertices(
        &mut self,
        level: usize,
        neighbour: Option<(u32, u32)>,
        facing: Facing,
        start: u32,
    ) {
        self.edge.clear();
        let size = self.shape[level].2;
        match neighbour {
            Some((nx, nz)) if self.state(level, nx, nz) == NodeState::Subdivided => {
                self.collect(level, nx, nz, facing, start);
                self.edge.pop();
            }
            _ => self.edge.push(start + size / 2),
        }
    }

    /// Appends the fan of one drawn node to the index buffer.
    fn emit(&mut self, node: DrawnNode) {
        let level = node.level as usize;
        let (ix, iz) = (node.ix, node.iz);
        let size = self.shape[level].2;
        let (x0, z0) = (ix * size, iz * size);
        let (x1, z1) = (x0 + size, z0 + size);
        let v = self.vertices;
        let vertex = |col: u32, row: u32| v.index(GridPos::new(col, row));
        if level == self.finest {
            // A leaf's neighbours are never finer: its plain fan, no lookups.
            let (xm, zm) = (x0 + 1, z0 + 1);
            let c = vertex(xm, zm);
            let ring = [
                vertex(x0, z0),
                vertex(x0, zm),
                vertex(x0, z1),
                vertex(xm, z1),
                vertex(x1, z1),
                vertex(x1, zm),
                vertex(x1, z0),
                vertex(xm, z0),
            ];
            for k in 0..8 {
                self.indices
                    .extend_from_slice(&[c, ring[k], ring[(k + 1) % 8]]);
            }
            return;
        }
        self.ring.clear();

        // Counter-clockwise seen from above: down the left edge, right along the bottom, up
        // the right edge, left along the top.
        let left = ix.checked_sub(1).map(|n| (n, iz));
        self.edge_vertices(
            level,
            left,
            Facing {
                vertical: true,
                offset: 1,
            },
            z0,
        );
        self.ring.push(vertex(x0, z0));
        for &row in &self.edge {
            self.ring.push(vertex(x0, row));
        }
        self.edge_vertices(
            level,
            Some((ix, iz + 1)),
            Facing {
                vertical: false,
                offset: 0,
            },
            x0,
        );
        self.ring.push(vertex(x0, z1));
        for &col in &self.edge {
            self.ring.push(vertex(col, z1));
        }
        self.edge_vertices(
            level,
            Some((ix + 1, iz)),
            Facing {
                vertical: true,
                offset: 0,
            },
            z0,
        );
        self.ring.push(vertex(x1, z1));
        for &row in self.edge.iter().rev() {
            self.ring.push(vertex(x1, row));
        }
        let top = iz.checked_sub(1).map(|n| (ix, n));
        self.edge_vertices(
            level,
            top,
            Facing {
                vertical: false,
                offset: 1,
            },
            x0,
        );
        self.ring.push(vertex(x1, z0));
        for &col in self.edge.iter().rev() {
            self.ring.push(vertex(col, z0));
        }

        let centre = vertex(x0 + size / 2, z0 + size / 2);
        let n = self.ring.len();
        for i in 0..n {
            let next = if i + 1 == n { 0 } else { i + 1 };
            self.indices
                .extend_from_slice(&[centre, self.ring[i], self.ring[next]]);
        }
    }
}

impl LodAlgorithm for QuadtreeLod<'_> {
    fn name(&self) -> &'static str {
        "quadtree"
    }

    fn select(&mut self, view: &View) -> Selection<'_> {
        let started = Instant::now();
        self.stamp += 1;
        if self.stamp == STAMP_LIMIT {
            for level in &mut self.nodes {
                for node in level {
                    node.state = 0;
                }
            }
            self.stamp = 1;
        }
        self.drawn.clear();
        self.indices.clear();
        self.stats = SelectionStats::default();
        let pass = Pass {
            view,
            frustum: view.frustum(),
            view_angle_aware: self.options.view_angle_aware,
        };
        if self.finest == 0 {
            // A single leaf: nothing to select.
            let culled = pass.view.cull()
                && pass.frustum.is_some_and(|f| {
                    let mapping = self.pyramid.mapping();
                    f.classify(&self.pyramid.aabb(0, 0, 0, &mapping)) == Containment::Outside
                });
            if !culled {
                self.drawn.push(DrawnNode {
                    level: 0,
                    ix: 0,
                    iz: 0,
                });
            }
        } else {
            self.visit(&pass, 0, 0, 0, false);
        }
        let drawn = std::mem::take(&mut self.drawn);
        for &node in &drawn {
            self.emit(node);
        }
        self.stats.nodes_drawn = drawn.len() as u64;
        self.drawn = drawn;
        self.stats.triangles = (self.indices.len() / 3) as u64;
        self.stats.select_time = started.elapsed();
        Selection::Triangles {
            vertices: self.vertices,
            indices: &self.indices,
            morphs: &[] as &[MorphedHeight],
        }
    }

    fn stats(&self) -> &SelectionStats {
        &self.stats
    }

    fn state_bytes(&self) -> usize {
        self.nodes.iter().map(|l| l.len() * size_of::<u32>()).sum()
    }
}

/// The records of every stored node of a non-leaf level: the pyramid's box and the
/// drawn-error bound `error + edge_error` (see the module docs, world units, rounded
/// upwards), state unset.
fn node_records(field: &Heightfield, pyramid: &Pyramid, level: usize) -> Vec<NodeRecord> {
    let (nx, nz) = pyramid.nodes(level);
    let size = pyramid.node_size(level);
    let half = size / 2;
    let (lo, hi) = field.raw_range();
    // f32 sources: the interpolation below rounds; cover it as the pyramid does.
    let slack = match field.samples() {
        Samples::F32(_) => f64::from(lo.abs().max(hi.abs())) * 2f64.powi(-45),
        Samples::U16(_) | Samples::I16(_) => 0.0,
    };
    let scale = f64::from(field.mapping().height_scale.abs());
    // Drawn vertex heights are f32, each within half an ulp of the truth: a node that is not
    // exact (error > 0) carries that rounding, and a relative margin for the f32 arithmetic
    // of the screen-space test, in its bound.
    let (world_lo, world_hi) = field.world_range();
    let rounding = f64::from(world_lo.abs().max(world_hi.abs())) * 2f64.powi(-23);
    let h = |col: u32, row: u32| f64::from(field.raw_clamped(col, row));
    // Largest |h − S| along the segment from `a` to `b` (2 · half cells, midpoint `m`),
    // where S is linear from a to m and from m to b.
    let edge = |a: (u32, u32), b: (u32, u32)| {
        let (dc, dr) = ((b.0 - a.0) / size, (b.1 - a.1) / size);
        let at = |t: u32| (a.0 + dc * t, a.1 + dr * t);
        let (ha, hm, hb) = (h(a.0, a.1), h(at(half).0, at(half).1), h(b.0, b.1));
        let inv = 1.0 / f64::from(half);
        let mut worst = 0.0f64;
        for t in 1..half {
            let w = f64::from(t) * inv;
            let (c, r) = at(t);
            worst = worst.max((h(c, r) - (ha + (hm - ha) * w)).abs());
            let (c, r) = at(size - t);
            worst = worst.max((h(c, r) - (hb + (hm - hb) * w)).abs());
        }
        worst
    };
    // Blocks of 2 × 2 siblings (see `record_index`); one band of blocks per task, slots
    // beyond the stored nodes stay default and are never read.
    let band = 4 * nx.div_ceil(2) as usize;
    let mut out = vec![NodeRecord::default(); band * nz.div_ceil(2) as usize];
    out.par_chunks_mut(band)
        .enumerate()
        .for_each(|(bz, records)| {
            for (k, value) in records.iter_mut().enumerate() {
                let (block, within) = ((k / 4) as u32, k as u32 % 4);
                let (ix, iz) = (2 * block + (within & 1), 2 * bz as u32 + (within >> 1));
                if ix >= nx || iz >= nz {
                    continue;
                }
                let (x0, z0) = (ix * size, iz * size);
                let (x1, z1) = (x0 + size, z0 + size);
                let raw = edge((x0, z0), (x1, z0))
                    .max(edge((x0, z1), (x1, z1)))
                    .max(edge((x0, z0), (x0, z1)))
                    .max(edge((x1, z0), (x1, z1)));
                let edge_error = if raw == 0.0 {
                    0.0
                } else {
                    (raw + slack) * scale
                };
                let bounds = pyramid.node(level, ix, iz);
                *value = NodeRecord {
                    min_y: bounds.min_y,
                    max_y: bounds.max_y,
                    drawn_error: {
                        let exact = f64::from(bounds.error) + edge_error;
                        if exact == 0.0 {
                            0.0
                        } else {
                            round_up(exact * (1.0 + 2f64.powi(-16)) + rounding)
                        }
                    },
                    state: 0,
                };
            }
        });
    out
}

/// Where node `(ix, iz)` of a level `nx` nodes wide sits in its record array: 2 × 2
/// siblings side by side (one 64-byte cache line of records), blocks row-major, so a visit
/// of four children touches one line.
#[inline]
fn record_index(nx: u32, ix: u32, iz: u32) -> usize {
    let block = (iz >> 1) as usize * nx.div_ceil(2) as usize + (ix >> 1) as usize;
    4 * block + (((iz & 1) << 1) | (ix & 1)) as usize
}

/// The smallest `f32` at least `value` (non-negative).
fn round_up(value: f64) -> f32 {
    let rounded = value as f32;
    if f64::from(rounded) < value {
        rounded.next_up()
    } else {
        rounded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camera::Camera;

    fn bumpy(width: u32, height: u32) -> Heightfield {
        let values = (0..width * height)
            .map(|i| {
                let (c, r) = ((i % width) as f32, (i / width) as f32);
                (c * 0.37).sin() * 20.0 + (r * 0.21).cos() * 15.0 + ((c * r) % 7.0)
            })
            .collect();
        Heightfield::from_f32(width, height, values).expect("valid field")
    }

    fn views(field: &Heightfield) -> Vec<View> {
        let (w, d) = field.world_size();
        let camera = |eye: Vec3, target: Vec3| {
            Camera::new(eye, target, 1.2, (800, 600), 0.5, 1e4).expect("valid camera")
        };
        vec![
            View::screen(
                camera(Vec3::new(-5.0, 40.0, -5.0), Vec3::new(w, 0.0, d)),
                1.0,
            )
            .expect("valid"),
            View::screen(
                camera(Vec3::new(w * 0.5, 8.0, d * 0.5), Vec3::new(0.0, 0.0, d)),
                0.5,
            )
            .expect("valid"),
            View::world_error(3.0).expect("valid"),
        ]
    }

    fn triangles(q: &mut QuadtreeLod<'_>, view: &View) -> Vec<u32> {
        match q.select(view) {
            Selection::Triangles { indices, .. } => indices.to_vec(),
            Selection::Patches { .. } => Vec::new(),
        }
    }

    #[test]
    fn the_frame_stamp_wraps_without_aliasing() {
        let field = bumpy(97, 70);
        let pyramid = Pyramid::build(&field);
        let views = views(&field);
        let mut fresh = QuadtreeLod::new(&field, &pyramid, LodOptions::default());
        let expected: Vec<Vec<u32>> = views.iter().map(|v| triangles(&mut fresh, v)).collect();
        let mut old = QuadtreeLod::new(&field, &pyramid, LodOptions::default());
        old.stamp = STAMP_LIMIT - 4;
        for round in 0..4 {
            for (view, want) in views.iter().zip(&expected) {
                assert_eq!(&triangles(&mut old, view), want, "round {round}");
            }
        }
        assert!(old.stamp < 16, "the stamp wrapped");
    }

    #[test]
    fn node_state_stays_under_half_a_byte_per_sample() {
        // (Strips under 16 samples wide pay more: a 3 x 40 strip needs 1.6 bytes.)
        for (w, h) in [
            (97, 70),
            (257, 129),
            (300, 1000),
            (2, 2),
            (16, 40),
            (1000, 17),
        ] {
            let field = bumpy(w, h);
            let pyramid = Pyramid::build(&field);
            let q = QuadtreeLod::new(&field, &pyramid, LodOptions::default());
            let per_sample = q.state_bytes() as f64 / field.len() as f64;
            assert!(per_sample <= 0.5, "{w} x {h}: {per_sample}");
        }
    }

    #[test]
    fn the_drawn_area_is_the_leaves_extent() {
        for (w, h) in [(97, 70), (40, 33), (2, 2), (5, 9)] {
            let field = bumpy(w, h);
            let pyramid = Pyramid::build(&field);
            let mut q = QuadtreeLod::new(&field, &pyramid, LodOptions::default());
            let grid = q.grid_vertices();
            let indices = triangles(&mut q, &View::world_error(1e9).expect("valid"));
            let max_col = indices.iter().map(|&i| grid.position(i).col).max();
            let max_row = indices.iter().map(|&i| grid.position(i).row).max();
            assert_eq!(max_col, Some(2 * (w - 1).div_ceil(2)), "{w} x {h}");
            assert_eq!(max_row, Some(2 * (h - 1).div_ceil(2)), "{w} x {h}");
        }
    }
}
