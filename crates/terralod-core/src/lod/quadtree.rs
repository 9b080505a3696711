//! Algorithm Q (article 000): a screen-space-error quadtree selected from the root each
//! frame, drawn as 3 × 3 fans stitched to finer neighbours, one index buffer per frame.
//!
//! # Selection (Q2)
//!
//! From the root, in one pass: the frustum test (outside → invisible; a node is tested only
//! against the planes its parent crosses, as it lies inside the others), then the error
//! test: a node is drawn when the error bound of the fan it would draw passes the view
//! ([`View::accepts`]), else subdivided. Leaves (3 × 3 samples, error 0) are not tested: a
//! subdivided node of the last level above them draws all its stored leaves (its box is a
//! conservative box for their culling). A subdivided node none of whose descendants is drawn
//! (all culled: a box that touches the frustum while none of its children do) is drawn
//! itself; nothing of it is in view. The four children of a subdivided node are tested
//! together, their boxes side by side in vector lanes ([`BoxLanes`]), with the same
//! arithmetic as the one-box tests.
//! A smaller τ never gives a coarser mesh where it is seen: every vertex in view stays. The
//! triangle count is monotone in τ without culling; with culling, refining a partly
//! visible node keeps only its visible children, which can be fewer triangles.
//!
//! # Error bounds: plain and stitched fans
//!
//! A drawn node is a fan from its centre `C` over all its boundary vertices: its corners,
//! its edge midpoints and, on an edge next to a finer drawn neighbour, every vertex that
//! neighbour draws there (Q4). Unstitched it is the pyramid's 3 × 3 fan `S`, within the
//! pyramid's `error` of every sample ([`crate::pyramid`]): its *plain* bound. Each of the
//! fan's 8 triangles has its outer edge on one side of the node; stitching side `k` replaces
//! the two triangles of that side by triangles `(C, a, b)` over the finer vertices `a`, `b`
//! of that edge, and leaves the other sides' triangles alone. On such a triangle the drawn
//! surface `T` differs from `S` by a linear function that is 0 at `C` and `h − S` at `a` and
//! `b`, so at a sample `p` it is at most `r(p) · E_k`, where `E_k` is the largest `|h − S|`
//! over the samples of edge `k` and `r(p) = 1 − λ_C(p)` (0 at the centre, 1 on the edge:
//! `max(|du|, |dv|) / half`). So the node drawn stitched on side `k` is within
//! `W_k = max over p in the side's triangles of |h(p) − S(p)| + r(p) · E_k` there, and the
//! whole node within `max(error, W_k over its stitched sides)` (`NodeRecord::bound`). The
//! bounds (plus the f32 rounding of drawn heights and a relative margin of 2^-16 for the
//! f32 arithmetic of the test, for nodes that are not exact) are computed once, when the
//! algorithm is built: `E_k` from the edges, `W_k` from a scan of every sample of every
//! node below `COARSE_NODE` (256) cells (one pass over the samples per level, through a
//! precomputed stencil for small nodes), `error + E_k` above. The true and drawn points of a sample both lie in the node's box
//! (drawn heights interpolate samples), so [`View::projected_error_bound`] of that box
//! bounds the projected error; the property tests check it with the oracles.
//!
//! Whether a node is stitched is only known once its neighbours are selected, so the
//! selection settles it in two steps. In the pass from the root, a node tests the bound of
//! the sides it already knows are finer: in the Morton order of the traversal its −x and −z
//! neighbours come first and have set its side bits when they were subdivided (see
//! below). A drawn node that learns of a finer side later (its +x or +z neighbour, or any
//! neighbour subdivided while settling) is queued; `settle` then tests each queued node
//! with all its finer sides and subdivides the ones that fail, which can make their
//! neighbours finer in turn, until nothing changes. Every node subdivided is one that fails
//! with sides it really has, so the result is the least set of subdivided nodes closed
//! under the test, whatever the order: deterministic, and monotone in τ. (Testing one
//! bound valid whatever the neighbours do, `error` plus the largest `|h − S|` of all four
//! edges, on every node, as this module did before, draws 1.4–1.55 × the triangles on the
//! Grand Canyon set: most nodes are never stitched, and most stitched ones on one side.)
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
//! A node that ends up subdivided sets a side bit in the words of its same-level
//! neighbours. Once the selection has settled, every drawn node is written: its plain fan
//! (one vectorised add of its corner to a fixed pattern) when no side bit is set, else its
//! stitched fan. Leaves are written as soon as they are drawn: no neighbour of a leaf is
//! finer.
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
//! The words of all levels live in one dense array, so the neighbour lookups of stitching
//! touch few cache lines; the node's box and error bounds are a 16-byte static record built
//! once, like the pyramid (1.3 more bytes per sample). Both arrays use the same tiled
//! Morton layout (`Layout`) per level: four siblings are adjacent, and a subtree three
//! levels deep is one contiguous tile.
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
use crate::camera::{Aabb, BoxLanes, Containment, Frustum};
use crate::heightfield::{GridPos, Heightfield, Samples};
use crate::pyramid::Pyramid;
use glam::{Vec3, Vec4};
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

/// What the selection reads per non-leaf node (16 bytes, built once).
#[derive(Clone, Copy, Debug, Default)]
struct NodeRecord {
    min_y: f32,
    max_y: f32,
    /// Bound of the vertical error of the node drawn as its plain fan.
    plain_error: f32,
    /// Per side (as in `SIDES`), the bound of the node stitched on that side, as
    /// `plain_error · q / 64` (`q` ≥ 64, rounded up: see [`stitched_steps`]).
    stitched: [u8; 4],
}

impl NodeRecord {
    /// Bound of the vertical error of the node drawn stitched on `sides` (bits as in
    /// `SIDES`; 0: the plain fan).
    #[inline(always)]
    fn bound(&self, sides: u32) -> f32 {
        if sides == 0 {
            return self.plain_error;
        }
        let mut steps = STITCH_UNIT;
        for (k, &q) in self.stitched.iter().enumerate() {
            if sides >> k & 1 != 0 {
                steps = steps.max(q);
            }
        }
        scaled_bound(self.plain_error, steps)
    }
}

/// `q / STITCH_UNIT` is the factor a stitched bound is of the plain one.
const STITCH_UNIT: u8 = 64;

/// `plain · steps / 64` in `f32`, the one expression both the build and the test use (so
/// the stored steps are checked against what the test computes).
#[inline(always)]
fn scaled_bound(plain: f32, steps: u8) -> f32 {
    plain * (f32::from(steps) * (1.0 / f32::from(STITCH_UNIT)))
}

/// A non-leaf node drawn this frame, or queued to be tested again (see `settle`).
#[derive(Clone, Copy, Debug)]
struct DrawnNode {
    /// Slot of its record and state word.
    slot: u32,
    ix: u32,
    iz: u32,
    level: u8,
    /// The frustum planes its box crosses (its children are tested against these only).
    planes: u8,
}

/// Shape of one level: nodes along x and z, cells per node side, and where its nodes sit
/// in the record and state arrays (non-leaf levels).
#[derive(Clone, Copy, Debug)]
struct LevelShape {
    nx: u32,
    nz: u32,
    size: u32,
    layout: Layout,
    /// First slot of the level.
    base: usize,
}

impl LevelShape {
    #[inline(always)]
    fn stores(&self, ix: u32, iz: u32) -> bool {
        ix < self.nx && iz < self.nz
    }

    /// The slot of a node of this level.
    #[inline(always)]
    fn slot(&self, ix: u32, iz: u32) -> usize {
        self.base + self.layout.index(ix, iz)
    }
}

/// Algorithm Q. Borrows the pyramid; owns its states and buffers.
#[derive(Debug)]
pub struct QuadtreeLod<'a> {
    pyramid: &'a Pyramid,
    options: LodOptions,
    finest: usize,
    /// Per level, root first, the finest (leaves) last.
    levels: Vec<LevelShape>,
    /// One record per stored non-leaf node, all levels (see `LevelShape::base`): box and
    /// error bounds.
    records: Vec<NodeRecord>,
    /// The state words (state, drawn-children mask, sides, frame stamp; see the module
    /// docs), laid out as the records: apart from them, so the neighbour lookups of
    /// stitching read a dense array (16 words a cache line).
    states: Vec<u32>,
    /// Drawn extent in columns and rows (see the module docs).
    extent: (u32, u32),
    vertices: GridVertices,
    patterns: FanPatterns,
    stamp: u32,
    /// The non-leaf nodes drawn this frame, in drawing order (some subdivided later, while
    /// settling).
    drawn: Vec<DrawnNode>,
    /// Drawn nodes that learnt of a finer side after they were tested.
    queued: Vec<DrawnNode>,
    ring: Vec<u32>,
    edge: Vec<u32>,
    indices: Vec<u32>,
    stats: SelectionStats,
}

impl<'a> QuadtreeLod<'a> {
    /// Builds the algorithm; `pyramid` must be the pyramid of `field`.
    pub fn new(field: &Heightfield, pyramid: &'a Pyramid, options: LodOptions) -> QuadtreeLod<'a> {
        let finest = pyramid.levels() - 1;
        let mut base = 0;
        let levels: Vec<LevelShape> = (0..=finest)
            .map(|level| {
                let (nx, nz) = pyramid.nodes(level);
                let layout = Layout::new(nx, nz);
                let shape = LevelShape {
                    nx,
                    nz,
                    size: pyramid.node_size(level),
                    layout,
                    base,
                };
                if level < finest {
                    base += layout.len;
                }
                shape
            })
            .collect();
        let mut records = Vec::with_capacity(base);
        for (level, shape) in levels[..finest].iter().enumerate() {
            records.extend(node_records(field, pyramid, level, shape.layout));
        }
        let (leaves_x, leaves_z) = pyramid.nodes(finest);
        let extent = (2 * leaves_x, 2 * leaves_z);
        let patterns = FanPatterns::new(&levels, extent.0 + 1);
        QuadtreeLod {
            pyramid,
            options,
            finest,
            levels,
            records,
            states: vec![0; base],
            extent,
            vertices: GridVertices {
                stride: extent.0 + 1,
                rows: extent.1 + 1,
                shift: 0,
            },
            patterns,
            stamp: 0,
            drawn: Vec::new(),
            queued: Vec::new(),
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

    /// The sides of a word written this frame (none for an older word).
    #[inline(always)]
    fn current_sides(&self, word: u32) -> u32 {
        if word >> STAMP_SHIFT == self.stamp {
            (word & SIDE_MASK) >> SIDE_SHIFT
        } else {
            0
        }
    }

    /// Writes a node's state, keeping the finer-neighbour sides its neighbours set this
    /// frame.
    #[inline(always)]
    fn set_word(&mut self, slot: usize, state: u32, children: u32) {
        let stamp = self.stamp;
        let word = &mut self.states[slot];
        let sides = if *word >> STAMP_SHIFT == stamp {
            *word & SIDE_MASK
        } else {
            0
        };
        *word = (stamp << STAMP_SHIFT) | sides | (children << CHILD_SHIFT) | state;
    }

    /// Tells the stored same-level neighbours of the subdivided node `(ix, iz)` (state word
    /// at `slot`) that they face a finer side: each gets the side facing back. Its siblings
    /// sit at `slot ^ 1` (across x) and `slot ^ 2` (across z) in the Morton tiles (a level's
    /// base is a multiple of 4). A word not yet written this frame reads as unreached with
    /// that side.
    fn mark_neighbours(&mut self, level: usize, ix: u32, iz: u32, slot: usize) {
        let shape = self.levels[level];
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
        if x_sibling.0 < shape.nx {
            self.mark(level, slot ^ 1, x_sibling.1, (x_sibling.0, iz));
        }
        if z_sibling.0 < shape.nz {
            self.mark(level, slot ^ 2, z_sibling.1, (ix, z_sibling.0));
        }
        if let Some((x, side)) = x_cousin
            && x < shape.nx
        {
            self.mark(level, shape.slot(x, iz), side, (x, iz));
        }
        if let Some((z, side)) = z_cousin
            && z < shape.nz
        {
            self.mark(level, shape.slot(ix, z), side, (ix, z));
        }
    }

    /// Sets side bit `side` in the word at `slot` (node `at` of `level`), stamping a word
    /// of an earlier frame. A node already drawn learns of a finer side: it is queued to be
    /// tested again (`settle`).
    #[inline(always)]
    fn mark(&mut self, level: usize, slot: usize, side: u32, at: (u32, u32)) {
        let stamp = self.stamp;
        let word = &mut self.states[slot];
        let current = if *word >> STAMP_SHIFT == stamp {
            *word
        } else {
            stamp << STAMP_SHIFT
        };
        let bit = 1 << (SIDE_SHIFT + side);
        *word = current | bit;
        if current & STATE_MASK == DRAW && current & bit == 0 {
            self.queued.push(DrawnNode {
                slot: slot as u32,
                ix: at.0,
                iz: at.1,
                level: level as u8,
                planes: Frustum::ALL_PLANES,
            });
        }
    }

    /// The box of a stored non-leaf node.
    #[inline(always)]
    fn node_box(&self, level: usize, ix: u32, iz: u32, record: &NodeRecord) -> Aabb {
        let size = self.levels[level].size;
        let (x0, z0) = (ix * size, iz * size);
        let cell = self.pyramid.mapping().cell_size;
        Aabb {
            min: Vec3::new(x0 as f32 * cell, record.min_y, z0 as f32 * cell),
            max: Vec3::new(
                (x0 + size) as f32 * cell,
                record.max_y,
                (z0 + size) as f32 * cell,
            ),
        }
    }

    /// Selection pass over one stored non-leaf node (record and state word at `slot`;
    /// `planes`: the frustum planes its parent crosses, see [`Frustum::classify_planes`]);
    /// returns whether anything below it (or it) is drawn.
    fn visit(
        &mut self,
        pass: &Pass<'_>,
        level: usize,
        ix: u32,
        iz: u32,
        slot: usize,
        planes: u8,
    ) -> bool {
        self.stats.nodes_visited += 1;
        let record = self.records[slot];
        let aabb = self.node_box(level, ix, iz, &record);
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
            self.set_word(slot, INVISIBLE, 0);
            return false;
        }
        let size = self.levels[level].size;
        let beyond = (ix + 1) * size > self.extent.0 || (iz + 1) * size > self.extent.1;
        // The sides it already knows are finer (its −x and −z neighbours came first).
        let refine = beyond
            || (!outside && {
                let sides = self.current_sides(self.states[slot]);
                !pass
                    .view
                    .accepts(record.bound(sides), &aabb, pass.view_angle_aware)
            });
        if refine {
            if self.subdivide(pass, level, ix, iz, slot, planes) {
                return true;
            }
            if beyond {
                // Never draw padding; nothing of this node is in view anyway.
                self.set_word(slot, INVISIBLE, 0);
                return false;
            }
        }
        self.set_word(slot, DRAW, 0);
        self.drawn.push(DrawnNode {
            slot: slot as u32,
            ix,
            iz,
            level: level as u8,
            planes,
        });
        true
    }

    /// Subdivides the non-leaf node `(level, ix, iz)` (record and word at `slot`, its box
    /// crossing `planes`): visits its stored children, or draws its leaves. Returns whether
    /// anything below it is drawn; if so its same-level neighbours are told they face a
    /// finer side. If not (every child culled) its word says subdivided; the caller decides.
    fn subdivide(
        &mut self,
        pass: &Pass<'_>,
        level: usize,
        ix: u32,
        iz: u32,
        slot: usize,
        planes: u8,
    ) -> bool {
        let children = self.levels[level + 1];
        if level + 1 == self.finest {
            // The stored leaves, all drawn (the first one always exists). Leaves have error
            // 0 and no finer neighbour, so their fans are written now.
            let (x0, z0) = (4 * ix, 4 * iz);
            let mask: u32 = if children.stores(2 * ix + 1, 2 * iz + 1) {
                self.emit_pattern(x0, z0, Pattern::Leaves);
                0b1111
            } else {
                let mut mask = 0;
                for (bit, (dx, dz)) in [(0, 0), (1, 0), (0, 1), (1, 1)].into_iter().enumerate() {
                    if children.stores(2 * ix + dx, 2 * iz + dz) {
                        mask |= 1 << bit;
                        self.emit_pattern(x0 + 2 * dx, z0 + 2 * dz, Pattern::Leaf);
                    }
                }
                mask
            };
            self.stats.nodes_drawn += u64::from(mask.count_ones());
            self.set_word(slot, SUBDIVIDED, mask);
            self.mark_neighbours(level, ix, iz, slot);
            return true;
        }
        self.set_word(slot, SUBDIVIDED, 0);
        let any = self.visit_children(pass, level + 1, (2 * ix, 2 * iz), planes);
        if any {
            self.mark_neighbours(level, ix, iz, slot);
        }
        any
    }

    /// [`QuadtreeLod::visit`] of the four children of a node (`first`: the first child's
    /// coordinates, even) whose box crosses `planes`: their frustum and error tests run on
    /// the four at once, then each is drawn or subdivided in order. A child whose sides
    /// changed since (a sibling before it was subdivided) is tested again with them.
    fn visit_children(
        &mut self,
        pass: &Pass<'_>,
        level: usize,
        first: (u32, u32),
        planes: u8,
    ) -> bool {
        let shape = self.levels[level];
        let (x, z) = first;
        let first_slot = shape.slot(x, z);
        // Four siblings are adjacent in the Morton tiles, in this order: x in bit 0.
        let at = |k: usize| (x + (k as u32 & 1), z + (k as u32 >> 1));
        let stored: [bool; 4] = std::array::from_fn(|k| {
            let (cx, cz) = at(k);
            shape.stores(cx, cz)
        });
        let records: [NodeRecord; 4] = std::array::from_fn(|k| self.records[first_slot + k]);
        // The same coordinates as `node_box`, lane k the k-th child.
        let cell = self.pyramid.mapping().cell_size;
        let edge = |i: u32| (i * shape.size) as f32 * cell;
        let (x0, x1, x2) = (edge(x), edge(x + 1), edge(x + 2));
        let (z0, z1, z2) = (edge(z), edge(z + 1), edge(z + 2));
        let boxes = BoxLanes {
            min: [
                Vec4::new(x0, x1, x0, x1),
                Vec4::from_array(records.map(|r| r.min_y)),
                Vec4::new(z0, z0, z1, z1),
            ],
            max: [
                Vec4::new(x1, x2, x1, x2),
                Vec4::from_array(records.map(|r| r.max_y)),
                Vec4::new(z1, z1, z2, z2),
            ],
        };
        let (outside, crossing) = match pass.frustum {
            Some(frustum) if planes != 0 => frustum.classify_planes_lanes(&boxes, planes),
            _ => (0, [0; 4]),
        };
        let sides: [u32; 4] =
            std::array::from_fn(|k| self.current_sides(self.states[first_slot + k]));
        let errors = Vec4::from_array(std::array::from_fn(|k| records[k].bound(sides[k])));
        let accepted = pass
            .view
            .accepts_lanes(errors, &boxes, pass.view_angle_aware);
        let mut any = false;
        for k in 0..4 {
            if !stored[k] {
                continue;
            }
            self.stats.nodes_visited += 1;
            let slot = first_slot + k;
            let outside = outside >> k & 1 != 0;
            if outside && pass.view.cull() {
                self.set_word(slot, INVISIBLE, 0);
                continue;
            }
            let (cx, cz) = at(k);
            let beyond =
                (cx + 1) * shape.size > self.extent.0 || (cz + 1) * shape.size > self.extent.1;
            let refine = beyond
                || (!outside && {
                    let now = self.current_sides(self.states[slot]);
                    if now == sides[k] {
                        accepted >> k & 1 == 0
                    } else {
                        !pass.view.accepts(
                            records[k].bound(now),
                            &boxes.lane(k),
                            pass.view_angle_aware,
                        )
                    }
                });
            if refine {
                if self.subdivide(pass, level, cx, cz, slot, crossing[k]) {
                    any = true;
                    continue;
                }
                if beyond {
                    // Never draw padding; nothing of this node is in view anyway.
                    self.set_word(slot, INVISIBLE, 0);
                    continue;
                }
            }
            self.set_word(slot, DRAW, 0);
            self.drawn.push(DrawnNode {
                slot: slot as u32,
                ix: cx,
                iz: cz,
                level: level as u8,
                planes: crossing[k],
            });
            any = true;
        }
        any
    }

    /// Settles the stitching (see the module docs): tests every queued node, still drawn,
    /// with all its finer sides, and subdivides the ones that fail; subdividing queues the
    /// drawn neighbours it makes finer, until the queue is empty.
    fn settle(&mut self, pass: &Pass<'_>) {
        while let Some(node) = self.queued.pop() {
            let slot = node.slot as usize;
            let word = self.states[slot];
            if word & STATE_MASK != DRAW {
                continue;
            }
            let (level, ix, iz) = (node.level as usize, node.ix, node.iz);
            let record = self.records[slot];
            let aabb = self.node_box(level, ix, iz, &record);
            let sides = self.current_sides(word);
            // Without culling a node outside the view is drawn untested, as in `visit`.
            let outside = !pass.view.cull()
                && pass
                    .frustum
                    .is_some_and(|f| f.classify_planes(&aabb, node.planes).is_none());
            if outside
                || pass
                    .view
                    .accepts(record.bound(sides), &aabb, pass.view_angle_aware)
            {
                continue;
            }
            if !self.subdivide(pass, level, ix, iz, slot, node.planes) {
                // Every child is culled: nothing of the node is in view, it stays drawn.
                self.set_word(slot, DRAW, 0);
            }
        }
    }

    /// The state word of a stored non-leaf node if it was written this frame.
    #[inline(always)]
    fn current_word(&self, level: usize, ix: u32, iz: u32) -> Option<u32> {
        let shape = self.levels[level];
        if !shape.stores(ix, iz) {
            return None;
        }
        let word = self.states[shape.slot(ix, iz)];
        (word >> STAMP_SHIFT == self.stamp).then_some(word)
    }

    /// Pushes the positions (cells from the shared line's start) of every vertex the
    /// subtree of the subdivided non-leaf node `(level, ix, iz)` (state word `word`) draws on
    /// its side `facing`, after `start` and up to its far end.
    fn collect(&mut self, level: usize, ix: u32, iz: u32, word: u32, facing: Facing, start: u32) {
        let half = self.levels[level].size / 2;
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
        let shape = self.levels[child_level];
        let first_child = if leaves { 0 } else { shape.slot(x, z) };
        for (k, (cx, cz)) in children.into_iter().enumerate() {
            let from = start + k as u32 * half;
            let drawn = if leaves {
                // A leaf: drawn when its bit is set (only stored leaves get one).
                word >> CHILD_SHIFT & (1 << bits[k]) != 0
            } else if shape.stores(cx, cz) {
                let child = self.states[first_child + bits[k] as usize];
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

    /// Appends the fan `pattern` (see [`FanPatterns`]) of the node with corner `(x0, z0)`.
    #[inline(always)]
    fn emit_pattern(&mut self, x0: u32, z0: u32, pattern: Pattern) {
        let corner = self.vertices.index(GridPos::new(x0, z0));
        match pattern {
            Pattern::Plain(level) => {
                push_offset(&mut self.indices, &self.patterns.plain[level], corner)
            }
            Pattern::Leaf => push_offset(&mut self.indices, &self.patterns.leaf, corner),
            Pattern::Leaves => push_offset(&mut self.indices, &self.patterns.leaves, corner),
        }
    }

    /// Writes the fan of a drawn non-leaf node: its plain fan, or, when same-level
    /// neighbours are subdivided (its word's side bits say which), the fan over every
    /// vertex the finer sides draw on the shared edges. Skips a node subdivided while
    /// settling.
    fn emit_drawn(&mut self, node: DrawnNode) {
        let word = self.states[node.slot as usize];
        if word & STATE_MASK != DRAW {
            return;
        }
        self.stats.nodes_drawn += 1;
        let (level, ix, iz) = (node.level as usize, node.ix, node.iz);
        let size = self.levels[level].size;
        let sides = (word & SIDE_MASK) >> SIDE_SHIFT;
        if sides == 0 {
            self.emit_pattern(ix * size, iz * size, Pattern::Plain(level));
            return;
        }
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
        for edge in self.ring.windows(2) {
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
            self.states.fill(0);
            self.stamp = 1;
        }
        self.drawn.clear();
        self.queued.clear();
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
                self.emit_pattern(0, 0, Pattern::Leaf);
                self.stats.nodes_drawn += 1;
            }
        } else {
            let root = self.levels[0].slot(0, 0);
            self.visit(&pass, 0, 0, 0, root, Frustum::ALL_PLANES);
            self.settle(&pass);
        }
        let drawn = std::mem::take(&mut self.drawn);
        for &node in &drawn {
            self.emit_drawn(node);
        }
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
        self.states.len() * size_of::<u32>()
    }

    /// The drawn non-leaf nodes, then the drawn leaves, read back from this frame's state
    /// words (a debug view: it walks the last non-leaf level).
    fn drawn_boxes(&self, out: &mut Vec<Aabb>) {
        let mapping = self.pyramid.mapping();
        for node in &self.drawn {
            if self.states[node.slot as usize] & STATE_MASK == DRAW {
                let (level, ix, iz) = (node.level as usize, node.ix, node.iz);
                out.push(self.pyramid.aabb(level, ix, iz, &mapping));
            }
        }
        let Some(parent) = self.finest.checked_sub(1) else {
            return;
        };
        let shape = self.levels[parent];
        for iz in 0..shape.nz {
            for ix in 0..shape.nx {
                let word = self.states[shape.slot(ix, iz)];
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

/// Appends `pattern + corner`: the sum is formed in a fixed-size array (vector adds),
/// then copied in one piece.
#[inline(always)]
fn push_offset<const N: usize>(indices: &mut Vec<u32>, pattern: &[u32; N], corner: u32) {
    let mut fan = *pattern;
    for index in &mut fan {
        *index += corner;
    }
    indices.extend_from_slice(&fan);
}

/// Which fan pattern to write.
#[derive(Clone, Copy, Debug)]
enum Pattern {
    Plain(usize),
    Leaf,
    Leaves,
}

/// The index patterns of plain fans, as vertex offsets from the node's corner: a fan is
/// one vectorised add of its corner to a pattern.
#[derive(Clone, Debug)]
struct FanPatterns {
    /// Per level, the plain fan of its nodes: 8 triangles from the centre, counter-clockwise
    /// seen from above, the ring starting at the corner (the order `emit_drawn` walks).
    plain: Vec<[u32; 24]>,
    /// A leaf's plain fan.
    leaf: [u32; 24],
    /// The four leaves of a node of the last non-leaf level.
    leaves: [u32; 96],
}

impl FanPatterns {
    fn new(levels: &[LevelShape], stride: u32) -> FanPatterns {
        let fan = |half: u32| {
            let at = |col: u32, row: u32| row * half * stride + col * half;
            let centre = at(1, 1);
            let ring = [
                at(0, 0),
                at(0, 1),
                at(0, 2),
                at(1, 2),
                at(2, 2),
                at(2, 1),
                at(2, 0),
                at(1, 0),
            ];
            let mut out = [0; 24];
            for (t, triangle) in out.chunks_exact_mut(3).enumerate() {
                triangle.copy_from_slice(&[centre, ring[t], ring[(t + 1) % 8]]);
            }
            out
        };
        let leaf = fan(1);
        let mut leaves = [0; 96];
        for (k, block) in leaves.chunks_exact_mut(24).enumerate() {
            let (dx, dz) = (k as u32 & 1, k as u32 >> 1);
            let offset = 2 * dz * stride + 2 * dx;
            for (out, &index) in block.iter_mut().zip(&leaf) {
                *out = index + offset;
            }
        }
        FanPatterns {
            plain: levels.iter().map(|shape| fan(shape.size / 2)).collect(),
            leaf,
            leaves,
        }
    }
}

/// The records of every stored node of a non-leaf level, in `layout` order: the pyramid's
/// box and error (the plain bound) and the per-side stitched bounds (see the module docs;
/// world units, rounded upwards).
fn node_records(
    field: &Heightfield,
    pyramid: &Pyramid,
    level: usize,
    layout: Layout,
) -> Vec<NodeRecord> {
    let (nx, nz) = pyramid.nodes(level);
    let size = pyramid.node_size(level);
    let (lo, hi) = field.raw_range();
    // f32 sources: the arithmetic of `side_errors` rounds (about ten roundings of values up
    // to 3 · max|raw| · half, divided by half); integer sources are exact there.
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
    let bound = |exact: f64| {
        if exact == 0.0 {
            0.0
        } else {
            round_up(exact * (1.0 + 2f64.powi(-16)) + rounding)
        }
    };
    // One band (row of tiles, see `Layout`) per task; slots beyond the stored nodes stay
    // default and are never read.
    let band = (layout.tiles_x as usize) << (2 * layout.bits);
    let mut out = vec![NodeRecord::default(); layout.len];
    out.par_chunks_mut(band).enumerate().for_each_init(
        || SideScan::new(size / 2),
        |scan, (bz, records)| {
            for (k, value) in records.iter_mut().enumerate() {
                let (ix, iz) = layout.node(bz as u32, k);
                if ix >= nx || iz >= nz {
                    continue;
                }
                let bounds = pyramid.node(level, ix, iz);
                let mut plain = bound(f64::from(bounds.error));
                // The pyramid's error in raw units, for the coarse nodes' bound.
                let own_raw = if scale > 0.0 {
                    f64::from(bounds.error) / scale
                } else {
                    0.0
                };
                let stitched = scan
                    .side_errors(field, ix * size, iz * size, size / 2, own_raw)
                    .map(|raw| {
                        if raw == 0.0 {
                            0.0
                        } else {
                            bound((raw + 4.0 * slack) * scale)
                        }
                    });
                // A stitched bound beyond the steps' range (only for bounds within a few
                // ulps of 0) raises the plain one: still a bound.
                let largest = stitched.iter().copied().fold(0.0f32, f32::max);
                while scaled_bound(plain, u8::MAX) < largest {
                    plain = (largest / 3.0).max(plain.next_up());
                }
                *value = NodeRecord {
                    min_y: bounds.min_y,
                    max_y: bounds.max_y,
                    plain_error: plain,
                    stitched: stitched.map(|side| stitched_steps(plain, side)),
                };
            }
        },
    );
    out
}

/// The smallest `q` in `STITCH_UNIT..=255` with `scaled_bound(plain, q) ≥ side`.
fn stitched_steps(plain: f32, side: f32) -> u8 {
    if side <= plain {
        return STITCH_UNIT;
    }
    // The estimate, then up past what the f32 arithmetic of the test rounds away.
    let estimate = (f64::from(side) / f64::from(plain) * f64::from(STITCH_UNIT)).ceil();
    let mut q = estimate.clamp(f64::from(STITCH_UNIT), f64::from(u8::MAX)) as u8;
    while q < u8::MAX && scaled_bound(plain, q) < side {
        q += 1;
    }
    q
}

/// One row segment of a fan triangle pair: the fan is `base + a · slope` (scaled by half)
/// at depth `a`, and the stitched perturbation adds `a · reach`.
#[derive(Clone, Copy, Debug)]
struct Line {
    base: f64,
    slope: f64,
    reach: f64,
}

impl Line {
    /// The largest `|sample · h − fan(a)| + a · reach` over `samples`, the first at depth
    /// `first_a`, each next one `step` further. Four running maxima, so the loop is not
    /// one chain of dependent comparisons.
    fn worst(self, samples: &[f64], h: f64, first_a: f64, step: f64) -> f64 {
        let mut lanes = [0.0f64; 4];
        let mut depths = [0, 1, 2, 3].map(|j| first_a + step * f64::from(j));
        let chunks = samples.chunks_exact(4);
        let tail = chunks.remainder();
        for chunk in chunks {
            for ((&sample, lane), a) in chunk.iter().zip(&mut lanes).zip(&mut depths) {
                let x = (sample * h - (self.base + *a * self.slope)).abs() + *a * self.reach;
                if x > *lane {
                    *lane = x;
                }
                *a += 4.0 * step;
            }
        }
        for (&sample, &a) in tail.iter().zip(&depths) {
            let x = (sample * h - (self.base + a * self.slope)).abs() + a * self.reach;
            if x > lanes[0] {
                lanes[0] = x;
            }
        }
        lanes.into_iter().fold(0.0, f64::max)
    }
}

/// Nodes of at least this many cells a side take `error + E_k` as their stitched bounds
/// (no scan of their samples): they are few and only drawn far away, where the tighter
/// bound changes next to nothing (0.06 % of the triangles on the Grand Canyon set), and
/// scanning them would cost as much as all the small nodes of a level.
const COARSE_NODE: u32 = 256;

/// Nodes of at most this many samples a side are scanned through a [`Stencil`].
const SMALL_NODE: u32 = 33;

/// Appends `n` raw samples of `row` from column `x0` to `out`, the border repeated.
fn fetch_row(out: &mut Vec<f64>, field: &Heightfield, x0: u32, row: u32, n: u32) {
    fn copy<T: Copy + Into<f64>>(out: &mut Vec<f64>, line: &[T], x0: u32, n: u32) {
        let (x0, n) = (x0 as usize, n as usize);
        let start = out.len();
        let inside = &line[x0.min(line.len() - 1)..(x0 + n).min(line.len())];
        out.extend(inside.iter().map(|&sample| sample.into()));
        let border = line[line.len() - 1].into();
        out.resize(start + n, border);
    }
    let row = row.min(field.height() - 1);
    let width = field.width() as usize;
    let range = row as usize * width..(row as usize + 1) * width;
    match field.samples() {
        Samples::U16(v) => copy(out, &v[range], x0, n),
        Samples::I16(v) => copy(out, &v[range], x0, n),
        Samples::F32(v) => copy(out, &v[range], x0, n),
    }
}

/// Appends the `n × n` samples from `(x0, z0)` to `window`, row by row, the border
/// repeated.
#[inline]
fn fill_window<T: Copy + Into<f64>>(
    window: &mut Vec<f64>,
    samples: &[T],
    field: &Heightfield,
    x0: u32,
    z0: u32,
    n: u32,
) {
    let (width, height) = (field.width() as usize, field.height() as usize);
    let (x0, z0, n) = (x0 as usize, z0 as usize, n as usize);
    for row in z0..z0 + n {
        let line = &samples[row.min(height - 1) * width..][..width];
        if x0 + n <= width {
            window.extend(line[x0..x0 + n].iter().map(|&sample| sample.into()));
        } else {
            window.extend((x0..x0 + n).map(|col| line[col.min(width - 1)].into()));
        }
    }
}

/// What [`SideScan::side_errors`] needs per thread: scratch rows, and for small nodes the
/// level's stencil and a window of the node's samples.
#[derive(Debug)]
struct SideScan {
    row: Vec<f64>,
    window: Vec<f64>,
    stencil: Option<Stencil>,
}

/// Where the samples of a node's window (`2 · half + 1` a side, row-major) lie in its fan,
/// for nodes of one half-side `half`, grouped by fan triangle (side `k` and the half of
/// the side towards corner `c`, group `2k + c`): per sample its depth `a` towards the
/// side's edge and its distance `b` from the side's midline, so `half · S = centre · half +
/// a · (mid − centre) + b · (corner − mid)` there. Samples on a shared line are listed in
/// every group they touch. `edges` holds those on the edge (`a = half`).
#[derive(Clone, Debug)]
struct Stencil {
    edges: [Vec<StencilEntry>; 8],
    cells: [Vec<StencilEntry>; 8],
}

#[derive(Clone, Copy, Debug)]
struct StencilEntry {
    sample: u32,
    a: f64,
    b: f64,
}

/// Per fan triangle `2k + c` (see [`Stencil`]), its mid and corner among the 9 fan vertices
/// (row-major, 3 a side).
const TRIANGLE_VERTICES: [(usize, usize); 8] = [
    (3, 0), // −x side, towards −z
    (3, 6), // −x side, towards +z
    (7, 6), // +z side, towards −x
    (7, 8), // +z side, towards +x
    (5, 2), // +x side, towards −z
    (5, 8), // +x side, towards +z
    (1, 0), // −z side, towards −x
    (1, 2), // −z side, towards +x
];

impl Stencil {
    fn new(half: u32) -> Stencil {
        let n = 2 * half as i32 + 1;
        let hi = half as i32;
        let mut stencil = Stencil {
            edges: Default::default(),
            cells: Default::default(),
        };
        for dv in 0..n {
            for du in 0..n {
                let (u, v) = (du - hi, dv - hi);
                let sample = (dv * n + du) as u32;
                // (side, depth, signed position along the side): x sides where |u| ≥ |v|,
                // z sides where |u| ≤ |v| (the diagonals in both; the centre in none).
                let mut on = Vec::new();
                if u.abs() >= v.abs() && u != 0 {
                    on.push((if u < 0 { 0 } else { 2 }, u.abs(), v));
                }
                if u.abs() <= v.abs() && v != 0 {
                    on.push((if v > 0 { 1 } else { 3 }, v.abs(), u));
                }
                for (side, a, b) in on {
                    // On the midline (b = 0) the sample is in both triangles of the side.
                    let halves: &[usize] = match b.signum() {
                        -1 => &[0],
                        1 => &[1],
                        _ => &[0, 1],
                    };
                    for &c in halves {
                        let group = 2 * side + c;
                        let entry = StencilEntry {
                            sample,
                            a: f64::from(a),
                            b: f64::from(b.abs()),
                        };
                        if a == hi {
                            stencil.edges[group].push(entry);
                        }
                        stencil.cells[group].push(entry);
                    }
                }
            }
        }
        stencil
    }
}

impl SideScan {
    /// The scan of nodes with half-side `half`.
    fn new(half: u32) -> SideScan {
        SideScan {
            row: Vec::new(),
            window: Vec::new(),
            stencil: (2 * half < SMALL_NODE).then(|| Stencil::new(half)),
        }
    }

    /// Per side of the node with corner `(x0, z0)` and half-side `half` (as in `SIDES`),
    /// `W_k = max |h(p) − S(p)| + r(p) · E_k` over the samples `p` of the two fan triangles
    /// on that side (see the module docs), in raw units. Samples beyond the data repeat the
    /// border. Everything is scaled by `half` (exact: a power of two), so for integer
    /// sources every value is an integer and exact.
    ///
    /// In the frame of side `k`, with depth `a` towards its edge (0 at the centre, `half`
    /// on it) and `b` along it, `half · S = centre · (half − a) + mid · (a − |b|) +
    /// corner · |b|` (`corner` the one on `b`'s side): linear in `a` along a row of an x
    /// side, in `|b|` along a row of a z side. Small nodes go through the level's stencil;
    /// large ones row by row, each row a few linear segments.
    fn side_errors(
        &mut self,
        field: &Heightfield,
        x0: u32,
        z0: u32,
        half: u32,
        own: f64,
    ) -> [f64; 4] {
        let n = 2 * half + 1;
        let h = f64::from(half);
        let Some(stencil) = &self.stencil else {
            return self.large_side_errors(field, x0, z0, half, own);
        };
        let window = &mut self.window;
        window.clear();
        match field.samples() {
            Samples::U16(v) => fill_window(window, v, field, x0, z0, n),
            Samples::I16(v) => fill_window(window, v, field, x0, z0, n),
            Samples::F32(v) => fill_window(window, v, field, x0, z0, n),
        }
        let at = |du: u32, dv: u32| window[(dv * n + du) as usize];
        let vertices: [f64; 9] = std::array::from_fn(|i| {
            let (du, dv) = (i as u32 % 3, i as u32 / 3);
            at(du * half, dv * half)
        });
        let centre = vertices[4];
        // The largest `|sample · h − fan| + a · reach` of one group, in a register.
        let scan = |entries: &[StencilEntry], group: usize, reach: f64| {
            let (mid, corner) = TRIANGLE_VERTICES[group];
            let (da, db) = (vertices[mid] - centre, vertices[corner] - vertices[mid]);
            let base = centre * h;
            let mut worst = 0.0f64;
            for e in entries {
                let fan = base + e.a * da + e.b * db;
                let value = (window[e.sample as usize] * h - fan).abs() + e.a * reach;
                if value > worst {
                    worst = value;
                }
            }
            worst
        };
        // Per side, the larger of its two triangles.
        let per_side = |groups: &[Vec<StencilEntry>; 8], reach: [f64; 4]| -> [f64; 4] {
            std::array::from_fn(|k| {
                let (left, right) = (2 * k, 2 * k + 1);
                scan(&groups[left], left, reach[k]).max(scan(&groups[right], right, reach[k]))
            })
        };
        let edge = per_side(&stencil.edges, [0.0; 4]);
        let worst = per_side(&stencil.cells, edge.map(|e| e / h));
        worst.map(|w| w / h)
    }

    /// [`SideScan::side_errors`] of a large node, row by row.
    fn large_side_errors(
        &mut self,
        field: &Heightfield,
        x0: u32,
        z0: u32,
        half: u32,
        own: f64,
    ) -> [f64; 4] {
        let n = 2 * half + 1;
        let h = f64::from(half);
        let hi = half as i32;
        let line = &mut self.row;
        let sample = |du: u32, dv: u32| f64::from(field.raw_clamped(x0 + du, z0 + dv));
        // Heights of the fan's 9 vertices at offsets {−1, 0, 1} · half from the centre.
        let vertex = |du: u32, dv: u32| sample(du * half, dv * half);
        let centre = vertex(1, 1);
        let mids = [vertex(0, 1), vertex(1, 2), vertex(2, 1), vertex(1, 0)];
        // Per side, the corner towards −b and towards +b (b along +z on the x sides, along
        // +x on the z sides).
        let corners = [
            (vertex(0, 0), vertex(0, 2)),
            (vertex(0, 2), vertex(2, 2)),
            (vertex(2, 0), vertex(2, 2)),
            (vertex(0, 0), vertex(2, 0)),
        ];
        let corner = |k: usize, b: i32| if b < 0 { corners[k].0 } else { corners[k].1 };
        // Edge deviations `half · E_k`: on the edge the fan is `mid · (h − |b|) + corner · |b|`.
        let on_edge = |k: usize, b: i32, sample: f64| {
            let t = f64::from(b.abs());
            (sample * h - (mids[k] * (h - t) + corner(k, b) * t)).abs()
        };
        let mut edge = [0.0f64; 4];
        for (dv, v) in (-hi..=hi).enumerate() {
            let dv = dv as u32;
            edge[0] = edge[0].max(on_edge(0, v, sample(0, dv)));
            edge[2] = edge[2].max(on_edge(2, v, sample(n - 1, dv)));
        }
        for (k, dv) in [(3, 0), (1, n - 1)] {
            for du in 0..n {
                edge[k] = edge[k].max(on_edge(k, du as i32 - hi, sample(du, dv)));
            }
        }
        if 2 * half >= COARSE_NODE {
            // `|h − S| ≤ own` everywhere and `r ≤ 1`: the bound without the scan.
            return edge.map(|e| own + e / h);
        }
        // The triangles: per row, the x sides' segments `|u| ≥ |v|` and the z side's
        // `|u| ≤ |v|` (the diagonals in both).
        let mut worst = [0.0f64; 4];
        for (dv, v) in (-hi..=hi).enumerate() {
            line.clear();
            fetch_row(line, field, x0, z0 + dv as u32, n);
            let row: &[f64] = line;
            let depth = v.unsigned_abs();
            let along = f64::from(depth);
            // Side 0 holds u = −half ..= −|v| (a = −u), side 2 u = |v| ..= half (a = u).
            for (k, samples, first_a, step) in [
                (0, &row[..=(half - depth) as usize], h, -1.0),
                (2, &row[(half + depth) as usize..], along, 1.0),
            ] {
                let line = Line {
                    base: centre * h + (corner(k, v) - mids[k]) * along,
                    slope: mids[k] - centre,
                    reach: edge[k] / h,
                };
                worst[k] = worst[k].max(line.worst(samples, h, first_a, step));
            }
            if v != 0 {
                // a = |v|; t = |u| from 0 to |v| on either half.
                let k = if v > 0 { 1 } else { 3 };
                let extra = along * edge[k] / h;
                let base = centre * (h - along) + mids[k] * along;
                for (samples, far, first_t, step) in [
                    (
                        &row[(half - depth) as usize..=half as usize],
                        corners[k].0,
                        along,
                        -1.0,
                    ),
                    (
                        &row[half as usize..=(half + depth) as usize],
                        corners[k].1,
                        0.0,
                        1.0,
                    ),
                ] {
                    let line = Line {
                        base,
                        slope: far - mids[k],
                        reach: 0.0,
                    };
                    worst[k] = worst[k].max(line.worst(samples, h, first_t, step) + extra);
                }
            }
        }
        worst.map(|w| w / h)
    }
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
            Selection::Patches { .. } | Selection::Listed { .. } => Vec::new(),
        }
    }

    #[test]
    fn the_frame_stamp_wraps_without_aliasing() {
        let field = bumpy(97, 70);
        let pyramid = Pyramid::build(&field);
        // The first frame after the wrap draws the root alone, so the words a finer frame
        // stamped 1 before it are not rewritten, and must not be read as current.
        let mut views = views(&field);
        views.insert(0, View::world_error(1e9).expect("valid"));
        let mut fresh = QuadtreeLod::new(&field, &pyramid, LodOptions::default());
        let expected: Vec<Vec<u32>> = views.iter().map(|v| triangles(&mut fresh, v)).collect();
        let mut old = QuadtreeLod::new(&field, &pyramid, LodOptions::default());
        triangles(&mut old, &View::world_error(1e-3).expect("valid"));
        old.stamp = STAMP_LIMIT - 1;
        // Words that carry the current stamp: exactly those the frame wrote, as many as a
        // fresh instance's for the same view.
        let current = |q: &QuadtreeLod<'_>| {
            q.states
                .iter()
                .filter(|&&w| w >> STAMP_SHIFT == q.stamp)
                .count()
        };
        for round in 0..4 {
            for (view, want) in views.iter().zip(&expected) {
                assert_eq!(&triangles(&mut old, view), want, "round {round}");
                triangles(&mut fresh, view);
                assert_eq!(current(&old), current(&fresh), "round {round}");
            }
        }
        assert!(old.stamp < 32, "the stamp wrapped");
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
