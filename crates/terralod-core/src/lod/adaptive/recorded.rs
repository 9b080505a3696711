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
use super::render::{Emitted, Listing, Morpher, Projected, SIDE_HALVES};
use super::tree::{Sq, SquareTree, position_beside};
use crate::camera::{Aabb, Containment, Frustum};
use crate::heightfield::GridPos;
use crate::lod::{ListedVertex, MorphedHeight};

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
    /// With [`AdaptiveOptions::list_vertices`](super::AdaptiveOptions::list_vertices):
    /// the same triangles by height slot (corner slots first, then one per vertex step).
    pub slot_indices: Vec<u32>,
    pub nodes_drawn: u64,
    /// The squares walked, in walk order, each followed by its vertices in `vertices`.
    squares: Vec<SquareStep>,
    vertices: Vec<VertexStep>,
    /// The squares that drew triangles, in the order the walk finished them.
    drawn: Vec<DrawnStep>,
}

/// The deepest level below a recorded subtree's root whose squares [`RecordedWalk::finish`]
/// links: its table then takes at most `(4^11 − 1) / 3` entries, 5.6 MB, per thread (the
/// canyon's subtrees are 4 levels deep: 1.3 KB). Deeper squares keep [`Across::Coded`].
pub(super) const MAX_LINKED_LEVELS: u32 = 10;

/// [`RecordedWalk::finish`]'s table entry of a position no square of the walk holds.
const NOT_WALKED: u32 = u32::MAX;

/// The first entry of the positions `k` levels below a subtree's root in
/// [`RecordedWalk::finish`]'s table: `(4^k − 1) / 3`.
fn level_offset(k: u32) -> usize {
    ((1usize << (2 * k)) - 1) / 3
}

thread_local! {
    /// [`RecordedWalk::finish`]'s table of positions, all [`NOT_WALKED`] between calls
    /// (allocated once per thread, at the largest subtree linked).
    static POSITIONS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
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
    /// For an edge vertex with a square across: that square's side test of it (read
    /// while recording, so the replay misses no cache line for it), and where its box
    /// comes from: [`Across::Walked`], its index among the squares walked;
    /// [`Across::Coded`], its vertical box codes (`min | max << 16`).
    across_error: f32,
    across_box: u32,
    kind: VertexKind,
    /// With local detail: listed even where drawn at the sample, which the grid lacks.
    replaced: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum VertexKind {
    /// The root's centre: drawn at its sample.
    Fixed,
    Centre,
    /// An edge vertex on `side`, and the square across it.
    Edge {
        side: u8,
        across: Across,
    },
}

/// The square across an edge vertex, as the replay projects its box.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Across {
    /// None (the grid's border, or a square not stored).
    None,
    /// A square this walk walked: the projection of its step's box serves (made once
    /// per square and replay, not once per vertex).
    Walked,
    /// A square not linked: outside this walk (culled, or in another subtree), or any
    /// square of a walk never linked (the walk above the subtrees). Its box from its
    /// position and codes.
    Coded,
}

/// A square that drew triangles: its box grows to the heights of its nine vertices as
/// drawn.
#[derive(Clone, Copy, Debug)]
struct DrawnStep {
    /// Its index in the squares walked.
    square: u32,
    corners: [u32; 4],
}

impl VertexStep {
    /// The vertical box codes of the square across, for [`Across::Coded`].
    #[inline(always)]
    fn across_codes(&self) -> (u16, u16) {
        (self.across_box as u16, (self.across_box >> 16) as u16)
    }
}

// The sizes BENCHMARKS reports (bytes per enabled square of a recording).
const _: () = assert!(size_of::<SquareStep>() == 40 && size_of::<VertexStep>() == 32);

impl RecordedWalk {
    /// Marks the walk as not to be replayed.
    pub fn forget(&mut self) {
        self.recorded = false;
    }

    /// Starts recording a new walk, culled against a frustum or not.
    pub fn begin(&mut self, culled: bool) {
        self.recorded = true;
        self.culled = culled;
        self.reads.clear();
        self.tests.clear();
        self.indices.clear();
        self.slot_indices.clear();
        self.nodes_drawn = 0;
        self.squares.clear();
        self.vertices.clear();
        self.drawn.clear();
    }

    /// Ends the recording: an edge vertex whose square across was walked too takes its
    /// projection from that square's step on replay. (Without it, every square across
    /// stays [`Across::Coded`]: the same boxes, projected once per vertex.)
    ///
    /// The squares are found by position in a dense table of the subtree's positions,
    /// level under level, kept per thread and cleared after use; squares more than
    /// [`MAX_LINKED_LEVELS`] below the root (a tree grown very deep by local detail) are
    /// left unlinked.
    pub fn finish(&mut self, tree: &SquareTree) {
        let Some(root) = self.squares.first() else {
            return;
        };
        let (top, x0, z0) = (u32::from(root.level), root.ix, root.iz);
        let depth = self.squares.iter().map(|s| u32::from(s.level) - top).max();
        let depth = depth.unwrap_or(0).min(MAX_LINKED_LEVELS);
        // Slot of a position `k` levels below the root, if it lies in the subtree.
        let slot = |k: u32, ix: u32, iz: u32| {
            if k > depth {
                return None;
            }
            let (dx, dz) = (ix.wrapping_sub(x0 << k), iz.wrapping_sub(z0 << k));
            let side = 1u32 << k;
            (dx < side && dz < side).then(|| level_offset(k) + ((dz << k) + dx) as usize)
        };
        POSITIONS.with_borrow_mut(|table| {
            let size = level_offset(depth + 1);
            if table.len() < size {
                table.resize(size, NOT_WALKED);
            }
            for (i, s) in self.squares.iter().enumerate() {
                let k = u32::from(s.level) - top;
                if let Some(at) = slot(k, s.ix, s.iz) {
                    table[at] = i as u32;
                }
            }
            let mut steps = self.vertices.iter_mut();
            for square in &self.squares {
                for step in steps.by_ref().take(square.vertices.into()) {
                    let VertexKind::Edge {
                        side,
                        across: Across::Coded,
                    } = step.kind
                    else {
                        continue;
                    };
                    let (ix, iz) = position_beside(square.ix, square.iz, usize::from(side));
                    let k = u32::from(square.level) - top;
                    let Some(walked) = slot(k, ix, iz).map(|at| table[at]) else {
                        continue;
                    };
                    // Checked, so a table left dirty by a panic elsewhere cannot link
                    // a wrong square.
                    let found = self.squares.get(walked as usize);
                    if found.is_none_or(|s| (s.level, s.ix, s.iz) != (square.level, ix, iz)) {
                        continue;
                    }
                    // The one stored square at that position: the box the codes give.
                    debug_assert!({
                        let coded =
                            tree.aabb_at(u32::from(square.level), ix, iz, step.across_codes());
                        self.squares[walked as usize].aabb == coded
                    });
                    step.kind = VertexKind::Edge {
                        side,
                        across: Across::Walked,
                    };
                    step.across_box = walked;
                }
            }
            for s in &self.squares {
                let k = u32::from(s.level) - top;
                if let Some(at) = slot(k, s.ix, s.iz) {
                    table[at] = NOT_WALKED;
                }
            }
        });
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
        let (lo, hi) = across.1;
        self.vertices.push(VertexStep {
            vertex: vertex.unwrap_or(NOT_IN_BUFFER),
            sample,
            ends,
            own_error,
            across_error: across.0,
            across_box: u32::from(lo) | u32::from(hi) << 16,
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
            + (self.indices.capacity() + self.slot_indices.capacity()) * size_of::<u32>()
            + self.squares.capacity() * size_of::<SquareStep>()
            + self.vertices.capacity() * size_of::<VertexStep>()
            + self.drawn.capacity() * size_of::<DrawnStep>()
    }

    /// Appends the walk's vertices, one per height slot, to `out` (the walk's root
    /// corners at `corners`, drawn heights `heights` by slot from its last replay), and
    /// its triangles by their index there.
    pub fn list(
        &self,
        tree: &SquareTree,
        corners: [GridPos; 4],
        heights: &[f32],
        out: &mut Listing,
    ) {
        let base = out.vertices.len() as u32;
        let listed = |pos, slot: usize| ListedVertex {
            pos,
            height: heights[slot],
        };
        out.vertices.extend(
            corners
                .iter()
                .enumerate()
                .map(|(slot, &pos)| listed(pos, slot)),
        );
        let mut steps = self.vertices.iter();
        for square in &self.squares {
            let half = tree.levels[usize::from(square.level)].size / 2;
            let (x0, z0) = (square.ix * 2 * half, square.iz * 2 * half);
            for (k, step) in steps.by_ref().take(square.vertices.into()).enumerate() {
                let (hx, hz) = match step.kind {
                    VertexKind::Fixed | VertexKind::Centre => (1, 1),
                    VertexKind::Edge { side, .. } => SIDE_HALVES[usize::from(side)],
                };
                let pos = GridPos::new(x0 + hx * half, z0 + hz * half);
                out.vertices.push(listed(pos, square.first as usize + k));
            }
        }
        out.indices
            .extend(self.slot_indices.iter().map(|&slot| base + slot));
    }

    /// The boxes of the squares that drew triangles, grown to the heights of their nine
    /// vertices as drawn (`heights`, by slot, from this walk's last replay).
    pub fn drawn_boxes(&self, heights: &[f32], out: &mut Vec<Aabb>) {
        for drawn in &self.drawn {
            let square = &self.squares[drawn.square as usize];
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
            out.push(drawn_box);
        }
    }
}

/// A replay's output beside the triangles, kept with its walk: the drawn heights by slot
/// (the drawn boxes are worked out from them when asked) and the projection of each
/// square's box (scratch).
#[derive(Debug, Default)]
pub(super) struct Replayed {
    pub heights: Vec<f32>,
    projected: Vec<Projected>,
}

impl Replayed {
    pub fn bytes(&self) -> usize {
        self.heights.capacity() * size_of::<f32>()
            + self.projected.capacity() * size_of::<Projected>()
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
    /// into `replayed` (by slot), the morphs into `out` (not the triangles, which the
    /// caller copies from the walk).
    pub(super) fn replay(
        &self,
        walk: &RecordedWalk,
        corners: [f32; 4],
        morpher: &Morpher<'_>,
        replayed: &mut Replayed,
        out: &mut Emitted,
    ) {
        let Replayed { heights, projected } = replayed;
        heights.clear();
        heights.extend_from_slice(&corners);
        let morphing = morpher.budget > 0.0;
        // The projected size of a unit error over each square's box, for every vertex
        // the square morphs or that lies across from it.
        projected.clear();
        if morphing {
            projected.extend(walk.squares.iter().map(|s| morpher.project(&s.aabb)));
        }
        let mut steps = walk.vertices.iter();
        for (i, square) in walk.squares.iter().enumerate() {
            let own_box = projected.get(i).unwrap_or(&Projected::UNUSED);
            for step in steps.by_ref().take(square.vertices.into()) {
                let [a, b] = step.ends;
                let base = 0.5 * (heights[a as usize] + heights[b as usize]);
                let sample = step.sample;
                let own = (own_box, step.own_error);
                let height = match step.kind {
                    VertexKind::Fixed => sample,
                    VertexKind::Centre => morpher.height(sample, base, own, || None),
                    VertexKind::Edge { .. } if sample == base || !morphing => sample,
                    VertexKind::Edge { side, across } => morpher.height(sample, base, own, || {
                        let across_box = match across {
                            Across::None => return None,
                            Across::Walked => projected[step.across_box as usize],
                            Across::Coded => {
                                let (ix, iz) = position_beside(square.ix, square.iz, side.into());
                                let level = u32::from(square.level);
                                let codes = step.across_codes();
                                morpher.project(&self.tree.aabb_at(level, ix, iz, codes))
                            }
                        };
                        Some((across_box, step.across_error))
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
        out.nodes_drawn += walk.nodes_drawn;
    }
}

#[cfg(test)]
impl RecordedWalk {
    /// Checks the links [`RecordedWalk::finish`] made against a search of every square
    /// walked: an edge vertex is linked exactly when a square of the walk lies across it,
    /// and to that square (never, for squares too deep below the walk's root to link).
    /// Returns how many are linked, and how many are left unlinked for being too deep
    /// though a square of the walk lies across them.
    pub fn check_links(&self) -> (usize, usize) {
        let top = self.squares.first().map_or(0, |s| s.level);
        let (mut linked, mut too_deep_unlinked) = (0, 0);
        let mut steps = self.vertices.iter();
        for square in &self.squares {
            for step in steps.by_ref().take(square.vertices.into()) {
                let VertexKind::Edge { side, across } = step.kind else {
                    continue;
                };
                let (ix, iz) = position_beside(square.ix, square.iz, usize::from(side));
                let found = self
                    .squares
                    .iter()
                    .position(|s| s.level == square.level && (s.ix, s.iz) == (ix, iz));
                let too_deep = u32::from(square.level - top) > MAX_LINKED_LEVELS;
                match across {
                    Across::None => {}
                    Across::Walked => {
                        assert!(!too_deep, "a square too deep to link was linked");
                        assert_eq!(found, Some(step.across_box as usize));
                        linked += 1;
                    }
                    Across::Coded => {
                        assert!(too_deep || found.is_none(), "a walked square left unlinked");
                        too_deep_unlinked += usize::from(found.is_some());
                    }
                }
            }
        }
        (linked, too_deep_unlinked)
    }
}
