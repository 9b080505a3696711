//! Algorithm Q (article 000): a screen-space-error quadtree selected from the root each
//! frame, drawn as 3 × 3 fans stitched to finer neighbours, one index buffer per frame.
//!
//! # Selection (Q2)
//!
//! From the root, in one pass: the frustum test (outside → invisible; fully inside → no
//! more tests below), then the error test: a node is drawn when its drawn-error bound passes
//! the view ([`View::accepts`]) or it is a leaf (3 × 3 samples, error 0), else subdivided.
//! A subdivided node none of whose descendants is drawn (all culled: a box that touches
//! the frustum while none of its children do) is drawn itself; nothing of it is in view,
//! and this keeps "smaller τ never gives fewer triangles".
//!
//! # The drawn-error bound
//!
//! A drawn node is a fan from its centre over all its boundary vertices: its corners, its
//! edge midpoints and, on an edge next to a finer drawn neighbour, every vertex that
//! neighbour draws there (Q4). Unstitched it is the pyramid's 3 × 3 fan `S`, within
//! `error` of every sample ([`crate::pyramid`]). A stitched triangle `(C, a, b)` lies inside
//! one fan triangle, where `S` is linear, and its surface differs from `S` by at most
//! `max(|h(a) − S(a)|, |h(b) − S(b)|) ≤ error`; so what is drawn is within `2 · error` of
//! every sample. The selection uses `2 · error`, valid whether or not the node ends up
//! stitched (which is only known once its neighbours are selected). The true and drawn
//! points of a sample both lie in the node's box (drawn heights interpolate samples), so
//! [`View::projected_error_bound`] of that box bounds the projected error.
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
//! the leaves, a leaf covers 4 samples: 4 bytes / 12 samples ≈ 0.33 bytes per sample.
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
use crate::camera::{Containment, Frustum};
use crate::heightfield::GridPos;
use crate::pyramid::Pyramid;
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
    /// Drawn extent in columns and rows (see the module docs).
    extent: (u32, u32),
    vertices: GridVertices,
    /// Per non-leaf level, one word per stored node (row-major).
    states: Vec<Vec<u32>>,
    stamp: u32,
    drawn: Vec<DrawnNode>,
    ring: Vec<u32>,
    edge: Vec<u32>,
    indices: Vec<u32>,
    stats: SelectionStats,
}

impl<'a> QuadtreeLod<'a> {
    pub fn new(pyramid: &'a Pyramid, options: LodOptions) -> QuadtreeLod<'a> {
        let finest = pyramid.levels() - 1;
        let (leaves_x, leaves_z) = pyramid.nodes(finest);
        let extent = (2 * leaves_x, 2 * leaves_z);
        let states = (0..finest)
            .map(|level| {
                let (nx, nz) = pyramid.nodes(level);
                vec![0u32; nx as usize * nz as usize]
            })
            .collect();
        QuadtreeLod {
            pyramid,
            options,
            finest,
            extent,
            vertices: GridVertices {
                stride: extent.0 + 1,
                rows: extent.1 + 1,
            },
            states,
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

    fn word_index(&self, level: usize, ix: u32, iz: u32) -> Option<usize> {
        let (nx, nz) = self.pyramid.nodes(level);
        (ix < nx && iz < nz).then(|| iz as usize * nx as usize + ix as usize)
    }

    fn set_word(&mut self, level: usize, index: usize, state: u32, children: u32) {
        self.states[level][index] = (self.stamp << STAMP_SHIFT) | (children << CHILD_SHIFT) | state;
    }

    /// The state of a node this frame.
    fn state(&self, level: usize, ix: u32, iz: u32) -> NodeState {
        if level < self.finest {
            let Some(i) = self.word_index(level, ix, iz) else {
                return NodeState::Unreached;
            };
            let word = self.states[level][i];
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
            let word = self.states[level - 1][p];
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

    /// Selection pass over one node; returns whether anything below it (or it) is drawn.
    fn visit(&mut self, pass: &Pass<'_>, level: usize, ix: u32, iz: u32, inside: bool) -> bool {
        let pyramid = self.pyramid;
        self.stats.nodes_visited += 1;
        let mapping = pyramid.mapping();
        let aabb = pyramid.aabb(level, ix, iz, &mapping);
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
        let leaf = level == self.finest;
        if outside && pass.view.cull() {
            if !leaf && let Some(i) = self.word_index(level, ix, iz) {
                self.set_word(level, i, INVISIBLE, 0);
            }
            return false;
        }
        let word = if leaf {
            None
        } else {
            self.word_index(level, ix, iz)
        };
        if let Some(i) = word {
            let size = pyramid.node_size(level);
            let origin = pyramid.node_origin(level, ix, iz);
            let beyond = origin.col + size > self.extent.0 || origin.row + size > self.extent.1;
            let error = 2.0 * pyramid.node(level, ix, iz).error;
            let refine =
                beyond || (!outside && !pass.view.accepts(error, &aabb, pass.view_angle_aware));
            if refine {
                self.set_word(level, i, SUBDIVIDED, 0);
                let mut any = false;
                for (cx, cz) in pyramid.children(level, ix, iz) {
                    any |= self.visit(pass, level + 1, cx, cz, inside);
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
        } else if level > 0
            && let Some(p) = self.word_index(level - 1, ix / 2, iz / 2)
        {
            self.states[level - 1][p] |= (1 << ((iz & 1) * 2 + (ix & 1))) << CHILD_SHIFT;
        }
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
        let size = self.pyramid.node_size(level);
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
        let size = self.pyramid.node_size(level);
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
        let size = self.pyramid.node_size(level);
        let GridPos { col: x0, row: z0 } = self.pyramid.node_origin(level, ix, iz);
        let (x1, z1) = (x0 + size, z0 + size);
        let v = self.vertices;
        let vertex = |col: u32, row: u32| v.index(GridPos::new(col, row));
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
        self.visit(&pass, 0, 0, 0, false);
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
        self.states.iter().map(|l| l.len() * size_of::<u32>()).sum()
    }
}
