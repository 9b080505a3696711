//! Algorithm Q (article 000): a screen-space-error quadtree selected from the root each
//! frame, drawn as 3 × 3 fans stitched to finer neighbours, one index buffer per frame.
//!
//! # Selection (Q2)
//!
//! From the root, in one pass: the frustum test (outside → invisible; a node is tested only
//! against the planes its parent crosses, as it lies inside the others), then the error
//! test: a node is drawn when its drawn-error bound passes the view ([`View::accepts`]),
//! else subdivided. Leaves (3 × 3 samples, error 0) are not tested: a subdivided node of the
//! last level above them draws all its stored leaves (its box is a conservative box for
//! their culling). A subdivided node none of whose descendants is drawn (all culled: a box
//! that touches the frustum while none of its children do) is drawn itself; nothing of it
//! is in view.
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
//! Every node is drawn as its plain fan during the selection, and a node that ends up
//! subdivided sets a side bit in the words of its same-level neighbours. After the
//! selection only the drawn nodes with a side bit are stitched: their fan is rebuilt, its
//! first 8 triangles over the plain fan's, the others appended. Most drawn nodes have no
//! finer neighbour, so most fans are written once and need no neighbour lookup at all.
//!
//! # Node states (Q3)
//!
//! One `u32` per non-leaf node holds the state (2 bits), which of its children are drawn
//! (4 bits: the leaves have no word of their own), which of its sides face a subdivided
//! neighbour (4 bits) and the frame stamp (22 bits). A word with another stamp is from an
//! earlier frame and reads as "not reached", so the states are never cleared; only when the
//! 22-bit stamp wraps (every 4 million frames, 19 hours at 60 Hz) is the array zeroed once,
//! so an old stamp can never alias. Non-leaf nodes are about a third of
//! the leaves, a leaf covers 4 samples: 4 bytes / 12 samples ≈ 0.33 bytes per sample (at
//! most 0.5 when both sides have 16 samples or more; a strip a few samples wide pays more,
//! 1.6 bytes for 3 × 40, as every level keeps at least one 2 × 2 block of nodes across it).
//! The words live in their own dense array per level, so the neighbour lookups of
//! stitching touch few cache lines; the node's box and drawn-error bound are a 12-byte
//! static record built once, like the pyramid (1 more byte per sample). Both arrays
//! use the same tiled Morton layout (`Layout`): four siblings are adjacent, and a
//! subtree three levels deep is one contiguous tile.
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
    GridVertices, LodAlgorithm, LodOptions, MorphedHeight, Pass, Selection, SelectionStats, View,
    round_up,
};
use crate::camera::{Aabb, Containment, Frustum};
use crate::heightfield::{GridPos, Heightfield, Samples};
use crate::pyramid::Pyramid;
use glam::Vec3;
use rayon::prelude::*;
use std::time::Instant;

/// Bits of a state word: state, drawn-children mask, finer-neighbour sides, frame stamp.
const STATE_MASK: u32 = 0b11;
const CHILD_SHIFT: u32 = 2;
const SIDE_SHIFT: u32 = 6;
const SIDE_MASK: u32 = 0b1111 << SIDE_SHIFT;
const STAMP_SHIFT: u32 = 10;
/// Stamps run `1..STAMP_LIMIT`; 0 is never current, so a zeroed array reads as unreached.
const STAMP_LIMIT: u32 = 1 << (32 - STAMP_SHIFT);

const SUBDIVIDED: u32 = 1;
const DRAW: u32 = 2;
const INVISIBLE: u32 = 3;

/// The sides of a node in the order its fan walks them (counter-clockwise seen from above):
/// towards −x, +z, +x, −z. Bit `side` of a word's side mask says the same-level neighbour
/// there is subdivided this frame.
const SIDES: [(i32, i32); 4] = [(-1, 0), (0, 1), (1, 0), (0, -1)];

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
}

/// A non-leaf node drawn this frame, with where its plain fan sits in the index buffer.
#[derive(Clone, Copy, Debug)]
struct DrawnNode {
    level: u32,
    ix: u32,
    iz: u32,
    /// Slot of its state word.
    slot: u32,
    /// First index of its plain fan.
    first: u32,
}

/// The per-frame inputs of the selection pass.
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
    /// Per non-leaf level, the state words (state, drawn-children mask, frame stamp; see
    /// the module docs), laid out as the records: apart from them, so the neighbour
    /// lookups of stitching read a dense array (16 words a cache line).
    states: Vec<Vec<u32>>,
    /// Per non-leaf level, where each node's record and state word sit.
    layouts: Vec<Layout>,
    /// Drawn extent in columns and rows (see the module docs).
    extent: (u32, u32),
    vertices: GridVertices,
    stamp: u32,
    /// The non-leaf nodes drawn this frame, in drawing order, for the stitching pass.
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
        let layouts = (0..finest)
            .map(|level| {
                let (nx, nz) = pyramid.nodes(level);
                Layout::new(nx, nz)
            })
            .collect::<Vec<_>>();
        let states = layouts.iter().map(|l| vec![0; l.len]).collect();
        let (leaves_x, leaves_z) = pyramid.nodes(finest);
        let extent = (2 * leaves_x, 2 * leaves_z);
        QuadtreeLod {
            pyramid,
            options,
            finest,
            shape,
            nodes,
            states,
            layouts,
            extent,
            vertices: GridVertices {
                stride: extent.0 + 1,
                rows: extent.1 + 1,
                shift: 0,
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

    /// Whether node `(ix, iz)` of `level` is stored.
    #[inline(always)]
    fn stored(&self, level: usize, ix: u32, iz: u32) -> bool {
        let (nx, nz, _) = self.shape[level];
        ix < nx && iz < nz
    }

    /// The record slot of a stored non-leaf node, if it is one.
    #[inline(always)]
    fn word_index(&self, level: usize, ix: u32, iz: u32) -> Option<usize> {
        self.stored(level, ix, iz)
            .then(|| self.layouts[level].index(ix, iz))
    }

    /// Writes a node's state, keeping the finer-neighbour sides its neighbours set this
    /// frame.
    #[inline(always)]
    fn set_word(&mut self, level: usize, index: usize, state: u32, children: u32) {
        let stamp = self.stamp;
        let word = &mut self.states[level][index];
        let sides = if *word >> STAMP_SHIFT == stamp {
            *word & SIDE_MASK
        } else {
            0
        };
        *word = (stamp << STAMP_SHIFT) | sides | (children << CHILD_SHIFT) | state;
    }

    /// Tells the stored same-level neighbours of the subdivided node `(ix, iz)` (state word
    /// at `slot`) that they face a finer side: each gets the side facing back. Its siblings
    /// sit at `slot ^ 1` (across x) and `slot ^ 2` (across z) in the Morton tiles. A word not
    /// yet written this frame reads as unreached with that side.
    fn mark_neighbours(&mut self, level: usize, ix: u32, iz: u32, slot: usize) {
        let (nx, nz, _) = self.shape[level];
        let layout = self.layouts[level];
        // Side bits as in `SIDES`: the neighbour towards +x gets its −x side (0), and so on.
        let (x_sibling, x_cousin) = if ix & 1 == 0 {
            ((ix + 1, 0), ix.checked_sub(1).map(|x| (x, 2)))
        } else {
            ((ix - 1, 2), Some((ix + 1, 0)))
        };
        let (z_sibling, z_cousin) = if iz & 1 == 0 {
            ((iz + 1, 3), iz.checked_sub(1).map(|z| (z, 1)))
        } else {
            ((iz - 1, 1), Some((iz + 1, 3)))
        };
        if x_sibling.0 < nx {
            self.mark(level, slot ^ 1, x_sibling.1);
        }
        if z_sibling.0 < nz {
            self.mark(level, slot ^ 2, z_sibling.1);
        }
        if let Some((x, side)) = x_cousin
            && x < nx
        {
            self.mark(level, layout.index(x, iz), side);
        }
        if let Some((z, side)) = z_cousin
            && z < nz
        {
            self.mark(level, layout.index(ix, z), side);
        }
    }

    /// Sets side bit `side` in the word at `slot`, stamping a word of an earlier frame.
    #[inline(always)]
    fn mark(&mut self, level: usize, slot: usize, side: u32) {
        let stamp = self.stamp;
        let word = &mut self.states[level][slot];
        let current = if *word >> STAMP_SHIFT == stamp {
            *word
        } else {
            stamp << STAMP_SHIFT
        };
        *word = current | 1 << (SIDE_SHIFT + side);
    }

    /// Selection pass over one stored non-leaf node (record and state word at `i`; `planes`:
    /// the frustum planes its parent crosses, see [`Frustum::classify_planes`]);
    /// returns whether anything below it (or it) is drawn. Leaves are drawn with their
    /// parent's tests: they have error 0, and their parent's box is a conservative box for
    /// their culling.
    fn visit(
        &mut self,
        pass: &Pass<'_>,
        level: usize,
        ix: u32,
        iz: u32,
        i: usize,
        planes: u8,
    ) -> bool {
        self.stats.nodes_visited += 1;
        let size = self.shape[level].2;
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
        // Only the planes the parent crosses: it is inside the others, and so is this node.
        let mut planes = planes;
        let mut outside = false;
        if let Some(frustum) = pass.frustum
            && planes != 0
        {
            match frustum.classify_planes(&aabb, planes) {
                None => outside = true,
                Some(crossing) => planes = crossing,
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
                        // Drawn here: a leaf's fan needs no neighbour states.
                        mask |= 1 << bit;
                        self.emit_leaf(cx, cz);
                        self.stats.nodes_drawn += 1;
                    }
                }
                self.set_word(level, i, SUBDIVIDED, mask);
                self.mark_neighbours(level, ix, iz, i);
                return true;
            }
            self.set_word(level, i, SUBDIVIDED, 0);
            // Four siblings are adjacent in the Morton tiles, in this order.
            let first_child = self.layouts[level + 1].index(2 * ix, 2 * iz);
            let mut any = false;
            for (k, (dx, dz)) in [(0, 0), (1, 0), (0, 1), (1, 1)].into_iter().enumerate() {
                let (cx, cz) = (2 * ix + dx, 2 * iz + dz);
                if cx < cnx && cz < cnz {
                    any |= self.visit(pass, level + 1, cx, cz, first_child + k, planes);
                }
            }
            if any {
                self.mark_neighbours(level, ix, iz, i);
                return true;
            }
            if beyond {
                // Never draw padding; nothing of this node is in view anyway.
                self.set_word(level, i, INVISIBLE, 0);
                return false;
            }
        }
        // Drawn: its plain fan now, while its corner is at hand; the stitching pass rewrites
        // it if a neighbour turns out finer.
        self.set_word(level, i, DRAW, 0);
        self.drawn.push(DrawnNode {
            level: level as u32,
            ix,
            iz,
            slot: i as u32,
            first: self.indices.len() as u32,
        });
        self.emit_plain(x0, z0, size / 2);
        true
    }

    /// The state word of a stored non-leaf node if it was written this frame.
    #[inline(always)]
    fn current_word(&self, level: usize, ix: u32, iz: u32) -> Option<u32> {
        let i = self.word_index(level, ix, iz)?;
        let word = *self.states[level].get(i)?;
        (word >> STAMP_SHIFT == self.stamp).then_some(word)
    }

    /// Pushes the positions (cells from the shared line's start) of every vertex the
    /// subtree of the subdivided non-leaf node `(level, ix, iz)` (state word `word`) draws on
    /// its side `facing`, after `start` and up to its far end.
    fn collect(&mut self, level: usize, ix: u32, iz: u32, word: u32, facing: Facing, start: u32) {
        let half = self.shape[level].2 / 2;
        let (o, x, z) = (facing.offset, 2 * ix, 2 * iz);
        // The two children along the side, and their bits in the Morton order of siblings
        // (x in bit 0, z in bit 1): slots `first_child + bit`, bits of the leaves' mask.
        let (children, bits) = if facing.vertical {
            ([(x + o, z), (x + o, z + 1)], [o, 2 + o])
        } else {
            ([(x, z + o), (x + 1, z + o)], [2 * o, 2 * o + 1])
        };
        let child_level = level + 1;
        let leaves = child_level == self.finest;
        let first_child = if leaves {
            0
        } else {
            self.layouts[child_level].index(x, z)
        };
        let (cnx, cnz, _) = self.shape[child_level];
        for (k, (cx, cz)) in children.into_iter().enumerate() {
            let from = start + k as u32 * half;
            let drawn = if leaves {
                // A leaf: drawn when its bit is set (only stored leaves get one).
                word >> CHILD_SHIFT & (1 << bits[k]) != 0
            } else if cx < cnx && cz < cnz {
                let child = self.states[child_level][first_child + bits[k] as usize];
                let state = if child >> STAMP_SHIFT == self.stamp {
                    child & STATE_MASK
                } else {
                    0
                };
                if state == SUBDIVIDED {
                    self.collect(child_level, cx, cz, child, facing, from);
                    continue;
                }
                state == DRAW
            } else {
                false
            };
            // A drawn child adds its midpoint; a culled, unreached or absent one its end.
            if drawn {
                self.edge.push(from + half / 2);
            }
            self.edge.push(from + half);
        }
    }

    /// The same-level neighbour `(nx, nz)` and its state word, if it is subdivided this
    /// frame (the only case that stitches).
    #[inline(always)]
    fn subdivided(&self, level: usize, neighbour: Option<(u32, u32)>) -> Option<(u32, u32, u32)> {
        let (nx, nz) = neighbour?;
        let word = self.current_word(level, nx, nz)?;
        (word & STATE_MASK == SUBDIVIDED).then_some((nx, nz, word))
    }

    /// Appends the plain fan of the drawn leaf `(ix, iz)`: a leaf's neighbours are never
    /// finer, so it needs no lookups.
    #[inline]
    fn emit_leaf(&mut self, ix: u32, iz: u32) {
        self.emit_plain(2 * ix, 2 * iz, 1);
    }

    /// Appends the unstitched fan (8 triangles) of the node with corner `(x0, z0)` and
    /// half-side `half`, counter-clockwise seen from above, in the ring order of `stitch`.
    #[inline]
    fn emit_plain(&mut self, x0: u32, z0: u32, half: u32) {
        let step = half * self.vertices.stride;
        let corner = self.vertices.index(GridPos::new(x0, z0));
        let (row1, row2) = (corner + step, corner + 2 * step);
        let centre = row1 + half;
        let ring = [
            corner,
            row1,
            row2,
            row2 + half,
            row2 + 2 * half,
            row1 + 2 * half,
            corner + 2 * half,
            corner + half,
        ];
        self.indices.extend_from_slice(&[
            centre, ring[0], ring[1], centre, ring[1], ring[2], centre, ring[2], ring[3], centre,
            ring[3], ring[4], centre, ring[4], ring[5], centre, ring[5], ring[6], centre, ring[6],
            ring[7], centre, ring[7], ring[0],
        ]);
    }

    /// Replaces the plain fan of a drawn non-leaf node by its stitched fan when a
    /// neighbour is subdivided (its word's side bits say which): the first 8 triangles
    /// overwrite the plain fan in place, the others are appended (the order of triangles
    /// in the buffer does not matter).
    fn stitch(&mut self, node: DrawnNode) {
        let level = node.level as usize;
        let sides = (self.states[level][node.slot as usize] & SIDE_MASK) >> SIDE_SHIFT;
        if sides == 0 {
            // No finer neighbour: the plain fan stands.
            return;
        }
        let (ix, iz) = (node.ix, node.iz);
        let size = self.shape[level].2;
        let stride = self.vertices.stride;
        let corner = self.vertices.index(GridPos::new(ix * size, iz * size));
        let (right, down) = (size, size * stride);
        // Counter-clockwise seen from above, per side (as in `SIDES`): the corner it starts
        // from, the vertex where its line starts (lowest column or row), the vertex step
        // along the line, whether the ring walks it backwards, and how the neighbour's
        // children face it.
        let walks = [
            (corner, corner, stride, false, (true, 1)),
            (corner + down, corner + down, 1, false, (false, 0)),
            (
                corner + down + right,
                corner + right,
                stride,
                true,
                (true, 0),
            ),
            (corner + right, corner, 1, true, (false, 1)),
        ];
        self.ring.clear();
        for (k, (from, origin, along, backwards, (vertical, offset))) in
            walks.into_iter().enumerate()
        {
            self.ring.push(from);
            let neighbour = if sides >> k & 1 != 0 {
                let (dx, dz) = SIDES[k];
                self.subdivided(
                    level,
                    ix.checked_add_signed(dx).zip(iz.checked_add_signed(dz)),
                )
            } else {
                None
            };
            let Some((nx, nz, word)) = neighbour else {
                self.ring.push(origin + size / 2 * along);
                continue;
            };
            self.edge.clear();
            self.collect(level, nx, nz, word, Facing { vertical, offset }, 0);
            // The last position is the far corner, the next side's start.
            self.edge.pop();
            if backwards {
                for &at in self.edge.iter().rev() {
                    self.ring.push(origin + at * along);
                }
            } else {
                for &at in &self.edge {
                    self.ring.push(origin + at * along);
                }
            }
        }
        let centre = corner + size / 2 * (stride + 1);
        // Close the ring so triangle `t` is `(centre, ring[t], ring[t + 1])`.
        self.ring.push(corner);
        let first = node.first as usize;
        let in_place = &mut self.indices[first..first + 24];
        let mut edges = self.ring.windows(2);
        for (triangle, edge) in in_place.chunks_exact_mut(3).zip(&mut edges) {
            triangle.copy_from_slice(&[centre, edge[0], edge[1]]);
        }
        for edge in edges {
            self.indices.extend_from_slice(&[centre, edge[0], edge[1]]);
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
            for level in &mut self.states {
                level.fill(0);
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
                self.emit_leaf(0, 0);
                self.stats.nodes_drawn += 1;
            }
        } else {
            let root = self.layouts[0].index(0, 0);
            self.visit(&pass, 0, 0, 0, root, Frustum::ALL_PLANES);
        }
        let drawn = std::mem::take(&mut self.drawn);
        for &node in &drawn {
            self.stitch(node);
        }
        self.stats.nodes_drawn += drawn.len() as u64;
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
        self.states.iter().map(|l| l.len() * size_of::<u32>()).sum()
    }

    /// The drawn non-leaf nodes, then the drawn leaves, read back from this frame's state
    /// words (a debug view: it walks the last non-leaf level).
    fn drawn_boxes(&self, out: &mut Vec<Aabb>) {
        let mapping = self.pyramid.mapping();
        for node in &self.drawn {
            let (level, ix, iz) = (node.level as usize, node.ix, node.iz);
            out.push(self.pyramid.aabb(level, ix, iz, &mapping));
        }
        let Some(parent) = self.finest.checked_sub(1) else {
            return;
        };
        let (nx, nz, _) = self.shape[parent];
        for iz in 0..nz {
            for ix in 0..nx {
                let word = self.states[parent][self.layouts[parent].index(ix, iz)];
                if word >> STAMP_SHIFT != self.stamp || word & STATE_MASK != SUBDIVIDED {
                    continue;
                }
                for bit in 0..4 {
                    if word >> CHILD_SHIFT & (1 << bit) != 0 {
                        let (cx, cz) = (2 * ix + (bit & 1), 2 * iz + (bit >> 1));
                        out.push(self.pyramid.aabb(self.finest, cx, cz, &mapping));
                    }
                }
            }
        }
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
    // One band (row of tiles, see `Layout`) per task; slots beyond the stored nodes stay
    // default and are never read.
    let layout = Layout::new(nx, nz);
    let band = (layout.tiles_x as usize) << (2 * layout.bits);
    let mut out = vec![NodeRecord::default(); layout.len];
    out.par_chunks_mut(band)
        .enumerate()
        .for_each(|(bz, records)| {
            for (k, value) in records.iter_mut().enumerate() {
                let (ix, iz) = layout.node(bz as u32, k);
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
                };
            }
        });
    out
}

/// Where a level's nodes sit in its record and state arrays: square tiles of `2^bits`
/// nodes a side, row-major, each in Morton order inside. 2 × 2 siblings are adjacent (16
/// bytes of state words, 48 of records), a subtree three levels deep is one 64-node tile,
/// and same-level neighbours are mostly in the same tile: fewer cache and TLB misses in
/// both passes than a row-major array. Tiles are 8, 4 or 2 nodes a side, the largest that pad the level little.
#[derive(Clone, Copy, Debug)]
struct Layout {
    bits: u32,
    tiles_x: u32,
    len: usize,
}

/// `x`'s low three bits spread to the even bit positions (Morton order inside a tile).
const SPREAD: [u32; 8] = [
    0b0, 0b1, 0b100, 0b101, 0b1_0000, 0b1_0001, 0b1_0100, 0b1_0101,
];

impl Layout {
    fn new(nx: u32, nz: u32) -> Layout {
        let with_bits = |bits: u32| {
            let tiles_x = nx.div_ceil(1 << bits);
            let tiles_z = nz.div_ceil(1 << bits);
            Layout {
                bits,
                tiles_x,
                len: (tiles_x as usize * tiles_z as usize) << (2 * bits),
            }
        };
        // The largest tiles that pad the level by at most an eighth, else 2 × 2 blocks.
        let nodes = nx as usize * nz as usize;
        [3, 2]
            .into_iter()
            .map(with_bits)
            .find(|layout| layout.len <= nodes + nodes / 8)
            .unwrap_or_else(|| with_bits(1))
    }

    /// The record slot of node `(ix, iz)`.
    #[inline(always)]
    fn index(self, ix: u32, iz: u32) -> usize {
        let mask = (1 << self.bits) - 1;
        let tile = (iz >> self.bits) as usize * self.tiles_x as usize + (ix >> self.bits) as usize;
        let within = SPREAD[(ix & mask) as usize] | (SPREAD[(iz & mask) as usize] << 1);
        (tile << (2 * self.bits)) + within as usize
    }

    /// The node at `slot` of the band (one row of tiles) `band_row`: the inverse of `index`.
    fn node(self, band_row: u32, slot: usize) -> (u32, u32) {
        let tile = (slot >> (2 * self.bits)) as u32;
        let within = slot as u32 & ((1 << (2 * self.bits)) - 1);
        let (mut wx, mut wz) = (0, 0);
        for bit in 0..self.bits {
            wx |= ((within >> (2 * bit)) & 1) << bit;
            wz |= ((within >> (2 * bit + 1)) & 1) << bit;
        }
        ((tile << self.bits) + wx, (band_row << self.bits) + wz)
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
