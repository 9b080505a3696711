//! Render()'s recorded walks: reusing a subtree's walk on the next frame.
//!
//! A walk of a subtree depends on the view through its frustum tests only. Everything
//! else it decides (which squares and edge vertices are drawn, the triangles, from which
//! coarse edge each vertex morphs) follows the state words it reads. So a walk is
//! recorded together with what it read and what the frustum answered. A later frame
//! whose reads and tests give the same answers replays it: it recomputes the drawn
//! heights (they move with the eye) and copies the triangles. Update() changes few
//! squares a frame, so most subtrees are replayed (BENCHMARKS, "Algorithm A: recorded
//! walks").
//!
//! The frame that records a walk also replays it for its heights, so there is one code
//! path for drawn heights, and a replayed frame equals a fresh one bit for bit.

use super::AdaptiveLod;
use super::render::{Emitted, Morpher, Projected};
use super::tree::{Sq, position_beside};
use crate::camera::{Aabb, Containment, Frustum};
use crate::lod::MorphedHeight;

/// Height slots taken by the walk's four corners (north-west, north-east, south-west,
/// south-east), given by the walk above it on every replay; vertex step `i` is slot
/// `CORNER_SLOTS + i`.
pub(super) const CORNER_SLOTS: [u32; 4] = [0, 1, 2, 3];

/// `VertexStep::vertex` of a vertex beyond the vertex buffer (a padding square's).
const NOT_IN_BUFFER: u32 = u32::MAX;

/// One walk of a subtree, with what it depends on.
#[derive(Debug, Default)]
pub(super) struct RecordedWalk {
    /// Whether it holds a walk (else one must be recorded before it is replayed).
    recorded: bool,
    /// Whether it was walked with frustum culling.
    culled: bool,
    /// State words read, in the order read.
    reads: Vec<StateRead>,
    /// Frustum tests made: box and answer, in the order made.
    tests: Vec<(Aabb, Containment)>,
    /// The triangles, as emitted.
    pub indices: Vec<u32>,
    pub nodes_drawn: u64,
    /// The squares walked, in walk order, each followed by its vertices in `vertices`.
    squares: Vec<SquareStep>,
    vertices: Vec<VertexStep>,
    /// The squares that drew triangles, in the order the walk finished them.
    drawn: Vec<DrawnStep>,
}

/// A state word read: its pool slot, the bits the walk used (a square's own drawn bits, or
/// the one edge-vertex bit it reads of a neighbour's word) and their values.
#[derive(Clone, Copy, Debug)]
struct StateRead {
    id: u32,
    mask: u32,
    bits: u32,
}

/// A square walked: its box, position (for the boxes of the squares across its edge
/// vertices), and its vertices' height slots.
#[derive(Clone, Copy, Debug)]
struct SquareStep {
    aabb: Aabb,
    ix: u32,
    iz: u32,
    level: u16,
    /// How many of the next vertex steps are this square's.
    vertices: u16,
    /// The height slot of its first vertex (its centre).
    first: u32,
}

/// A vertex a square adds: its centre or an enabled edge vertex.
#[derive(Clone, Copy, Debug)]
struct VertexStep {
    /// Its index in the vertex buffer, or [`NOT_IN_BUFFER`].
    vertex: u32,
    /// Its sample's height.
    sample: f32,
    /// The height slots of the coarse edge it lies on, whose mean is its base height.
    ends: [u32; 2],
    /// Its own square's test of it (the subtree error for a centre, the side error for
    /// an edge vertex).
    own_error: f32,
    /// For an edge vertex with a square across: that square's side test of it and its
    /// vertical box codes (read while recording, so the replay misses no cache line for
    /// them).
    across_error: f32,
    across_codes: (u16, u16),
    kind: VertexKind,
    /// With local detail: listed even where drawn at the sample, which the grid lacks.
    replaced: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum VertexKind {
    /// The root's centre: drawn at its sample.
    Fixed,
    Centre,
    /// An edge vertex on `side`, with a square across or not.
    Edge {
        side: u8,
        across: bool,
    },
}

/// A square that drew triangles: its box grows to the heights of its nine vertices as
/// drawn.
#[derive(Clone, Copy, Debug)]
struct DrawnStep {
    /// Its index in the squares walked.
    square: u32,
    corners: [u32; 4],
}

// The sizes BENCHMARKS reports (bytes per enabled square of a recording).
const _: () = assert!(size_of::<SquareStep>() == 40 && size_of::<VertexStep>() == 32);

impl RecordedWalk {
    /// Starts recording a new walk, culled against a frustum or not.
    pub fn begin(&mut self, culled: bool) {
        self.recorded = true;
        self.culled = culled;
        self.reads.clear();
        self.tests.clear();
        self.indices.clear();
        self.nodes_drawn = 0;
        self.squares.clear();
        self.vertices.clear();
        self.drawn.clear();
    }

    /// Reads the state word of pool slot `id`, noting the bits of `mask`, which are all
    /// the walk uses of it.
    #[inline(always)]
    pub fn read(&mut self, state: &[u32], id: u32, mask: u32) -> u32 {
        let word = state[id as usize];
        self.reads.push(StateRead {
            id,
            mask,
            bits: word & mask,
        });
        word
    }

    /// Tests `aabb` against `frustum`, noting the answer.
    #[inline(always)]
    pub fn test(&mut self, frustum: &Frustum, aabb: &Aabb) -> Containment {
        let containment = frustum.classify(aabb);
        self.tests.push((*aabb, containment));
        containment
    }

    /// The height slot the next vertex step will fill.
    #[inline(always)]
    pub fn next_slot(&self) -> u32 {
        (CORNER_SLOTS.len() + self.vertices.len()) as u32
    }

    /// A vertex of the square being recorded: its index in the vertex buffer (`None`
    /// beyond it), sample, coarse edge's slots and own test, and for an edge vertex with
    /// a square across, that square's test of it and box codes.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn push_vertex(
        &mut self,
        vertex: Option<u32>,
        sample: f32,
        ends: [u32; 2],
        own_error: f32,
        kind: VertexKind,
        across: (f32, (u16, u16)),
        replaced: bool,
    ) -> u32 {
        let slot = self.next_slot();
        self.vertices.push(VertexStep {
            vertex: vertex.unwrap_or(NOT_IN_BUFFER),
            sample,
            ends,
            own_error,
            across_error: across.0,
            across_codes: across.1,
            kind,
            replaced,
        });
        slot
    }

    /// Ends the vertices of the square `sq` (box `aabb`), whose first vertex took slot
    /// `first`; returns its index among the squares walked.
    #[inline(always)]
    pub fn push_square(&mut self, sq: Sq, aabb: Aabb, first: u32) -> u32 {
        let index = self.squares.len() as u32;
        self.squares.push(SquareStep {
            aabb,
            ix: sq.ix,
            iz: sq.iz,
            level: sq.level as u16,
            vertices: (self.next_slot() - first) as u16,
            first,
        });
        index
    }

    /// The square walked as `square` drew triangles, with its corners' slots.
    #[inline(always)]
    pub fn push_drawn(&mut self, square: u32, corners: [u32; 4]) {
        self.nodes_drawn += 1;
        self.drawn.push(DrawnStep { square, corners });
    }

    /// Squares walked.
    pub fn squares(&self) -> usize {
        self.squares.len()
    }

    /// Bytes held (capacity), for the memory figures.
    pub fn bytes(&self) -> usize {
        self.reads.capacity() * size_of::<StateRead>()
            + self.tests.capacity() * size_of::<(Aabb, Containment)>()
            + self.indices.capacity() * size_of::<u32>()
            + self.squares.capacity() * size_of::<SquareStep>()
            + self.vertices.capacity() * size_of::<VertexStep>()
            + self.drawn.capacity() * size_of::<DrawnStep>()
    }
}

impl AdaptiveLod<'_> {
    /// Whether `walk` is what walking its subtree now would record: every state word it
    /// read has the same values in the bits it used, and every frustum test the same
    /// answer (so the walk would take the same path and read the same things).
    pub(super) fn walk_still_holds(&self, walk: &RecordedWalk, frustum: Option<&Frustum>) -> bool {
        walk.recorded
            && walk.culled == frustum.is_some()
            && walk
                .reads
                .iter()
                .all(|read| self.state[read.id as usize] & read.mask == read.bits)
            && frustum.is_none_or(|f| {
                walk.tests
                    .iter()
                    .all(|(aabb, containment)| f.classify(aabb) == *containment)
            })
    }

    /// Replays `walk` with corner heights `corners`: the drawn heights of its vertices
    /// into `heights` (by slot), the morphs and drawn boxes into `out` (not the
    /// triangles, which the caller copies from the walk).
    pub(super) fn replay(
        &self,
        walk: &RecordedWalk,
        corners: [f32; 4],
        morpher: &Morpher<'_>,
        heights: &mut Vec<f32>,
        out: &mut Emitted,
    ) {
        heights.clear();
        heights.extend_from_slice(&corners);
        let morphing = morpher.budget > 0.0;
        let mut steps = walk.vertices.iter();
        for square in &walk.squares {
            // The projected size of a unit error over the box, for every vertex the
            // square morphs.
            let projected = if morphing {
                morpher.project(&square.aabb)
            } else {
                Projected::UNUSED
            };
            for step in steps.by_ref().take(square.vertices.into()) {
                let [a, b] = step.ends;
                let base = 0.5 * (heights[a as usize] + heights[b as usize]);
                let sample = step.sample;
                let own = (&projected, step.own_error);
                let height = match step.kind {
                    VertexKind::Fixed => sample,
                    VertexKind::Centre => morpher.height(sample, base, own, || None),
                    VertexKind::Edge { .. } if sample == base || !morphing => sample,
                    VertexKind::Edge { side, across } => morpher.height(sample, base, own, || {
                        across.then(|| {
                            let (ix, iz) = position_beside(square.ix, square.iz, side.into());
                            let level = u32::from(square.level);
                            let codes = step.across_codes;
                            let across_box = self.tree.aabb_at(level, ix, iz, codes);
                            (morpher.project(&across_box), step.across_error)
                        })
                    }),
                };
                heights.push(height);
                if step.vertex != NOT_IN_BUFFER && (height != sample || step.replaced) {
                    out.morphs.push(MorphedHeight {
                        vertex: step.vertex,
                        height,
                    });
                }
            }
        }
        for drawn in &walk.drawn {
            let square = &walk.squares[drawn.square as usize];
            let own = &heights[square.first as usize..][..square.vertices.into()];
            let (lo, hi) = drawn
                .corners
                .iter()
                .map(|&slot| heights[slot as usize])
                .chain(own.iter().copied())
                .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), h| {
                    (lo.min(h), hi.max(h))
                });
            let mut drawn_box = square.aabb;
            drawn_box.min.y = drawn_box.min.y.min(lo);
            drawn_box.max.y = drawn_box.max.y.max(hi);
            out.drawn.push(drawn_box);
        }
        out.nodes_drawn += walk.nodes_drawn;
    }
}
