//! Render() of algorithm A: triangle fans around the centres of the enabled squares,
//! skipping disabled edge vertices and the quadrants that enabled sub-squares draw, and
//! the geomorphed heights of their vertices (A6).
//!
//! # Geomorphing
//!
//! A vertex that a square adds (its centre, an edge vertex) lies on an edge of the coarser
//! surface drawn without it: its *base* height is the mean of that edge's two ends *as
//! drawn*. It is drawn at `base + t (h − base)`, `h` its sample's height, `r = h − base` its
//! residual, with `t = max(ramp, least)`:
//!
//! - `least` keeps the bound: `0` while `B(|r|) ≤ β`, else `1 − β / B(|r|)`, so the drawn
//!   vertex is never more than `β` pixels (on the shared bound `B`) from its sample. The
//!   topology is selected for `μ τ` and `β = (1 − μ) τ`. At a sample, the screen distance
//!   from the true point to the drawn one is at most the distance to the unmorphed surface
//!   (within `μ τ`: the topology's tests, on boxes that hold both points) plus the distance
//!   from there to the morphed surface: a vertical segment no longer than the largest
//!   vertex offset of its triangle, which may leave the square's box by that much, so `B`
//!   is taken over the boxes grown by `|r|` vertically (a box of every square whose
//!   triangles use the vertex: the one that adds it holds its descendants). So the bound
//!   holds with morphing applied, whatever `ramp` is.
//! - `ramp` is against popping: Update()'s own tests of the vertex (a centre: its square's
//!   subtree error over its box, as the parent tests it; an edge vertex: both squares'
//!   side tests), projected as `P`, give `ramp = (1 − μτ / P) / (1 − 1 / RAMP_END)`: 0
//!   where the tests enable the vertex, 1 at `RAMP_END` times that. Its shape spreads the
//!   motion evenly over the camera's approach: a step that moves the eye by a fraction
//!   `ε` of the distance changes `P` by about `ε P`, and the vertex's residual projects
//!   to at most about `P`, so the jump is `P · ε P · dramp/dP`, which is the constant
//!   `ε μτ / (1 − 1/RAMP_END)` for this ramp, where the linear ramp in `P` (used before)
//!   gave up to `ε RAMP_END² μτ / (RAMP_END − 1)` at its end, twice as much (0.31 → 0.19
//!   px on the bench tour's low flight, BENCHMARKS). Without a ramp a vertex appeared
//!   (and left) with `t = least > 0`: its residual holds the offsets of its edge's ends,
//!   which `least` keeps at `β` each, so it came in near `B(|r|) ≈ μτ + β` and jumped by
//!   about `μτ` (0.5 px at τ = 1). With it, the vertex is already at its sample when its
//!   children come, and appears on the coarse surface unless `least` says otherwise.
//!   (The ramp starts at the plain or view-angle-aware bound; with the optional L∞ test,
//!   which enables vertices earlier, such a vertex still appears at `least`.)
//!
//! `t` depends on the view only (no time), so the topology and the drawn heights are a
//! function of the view; what is left of popping moves with the camera's step (the ramp's
//! slope), and, at steps where the view changes much between frames, what the previous
//! frame's surface lacked for this one.

use super::recorded::{Across, CORNER_SLOTS, RecordedWalk, Replayed, VertexKind};
use super::records::{CENTRE, EAST, NORTH, SOUTH, WEST};
use super::tree::{ABSENT, OUTSIDE, Sq, SquareTree, side_error};
use super::update::{DRAWN_BITS, enabled_children, mid_bit};
use super::{AdaptiveLod, View};
use crate::camera::{Aabb, Containment, Frustum};
use crate::heightfield::GridPos;
use crate::lod::{ListedVertex, MorphedHeight, UnitProjection};

/// The per-frame morphing inputs.
pub(super) struct Morpher<'v> {
    pub view: &'v View,
    pub view_angle_aware: bool,
    /// Pixels (world units for a world-error view) a drawn vertex may sit from its sample;
    /// 0 switches morphing off.
    pub budget: f32,
    /// The tolerance Update() selects the topology for: where a vertex's own tests reach
    /// it, the vertex is enabled, and its ramp starts.
    pub topology: f32,
}

/// A box as the morphs see it: the projected size of a unit vertical error over it, and
/// what grows it (every bound of [`View::projected_error_bound`] is linear in the error,
/// so a square's projection serves all its vertices).
#[derive(Clone, Copy, Debug)]
pub(super) struct Projected {
    /// `None` for a world-error view, whose errors are not projected.
    unit: Option<UnitProjection>,
    /// The bound over the box itself (1 for a world-error view, infinite where the box
    /// reaches the near plane).
    factor: f32,
}

impl Projected {
    /// For a frame without morphing (never asked).
    pub(super) const UNUSED: Projected = Projected {
        unit: None,
        factor: 0.0,
    };
}

/// How far past the topology's tolerance a vertex's own test goes before the ramp puts it
/// on its sample: it crosses the morph over a doubling of its projected error.
const RAMP_END: f32 = 2.0;

impl Morpher<'_> {
    /// The projection of a unit error over `aabb`.
    #[inline(always)]
    pub(super) fn project(&self, aabb: &Aabb) -> Projected {
        let unit = self.view.unit_projection(aabb, self.view_angle_aware);
        Projected {
            unit,
            factor: unit.map_or(1.0, |u| u.grown(self.view, 0.0)),
        }
    }

    /// The projected size of a unit error over `box` grown vertically by `grow`.
    #[inline(always)]
    fn grown(&self, projected: &Projected, grow: f32) -> f32 {
        projected.unit.map_or(1.0, |u| u.grown(self.view, grow))
    }

    /// The drawn height of a vertex with sample height `h` on a coarse edge at height
    /// `base`, tested with error `own.1` by the square whose box projects as `own.0`, and
    /// by the square `other` gives, if any (asked only when `own` leaves it open).
    pub(super) fn height(
        &self,
        h: f32,
        base: f32,
        own: (&Projected, f32),
        other: impl FnOnce() -> Option<(Projected, f32)>,
    ) -> f32 {
        let r = h - base;
        if self.budget <= 0.0 || r == 0.0 {
            return h;
        }
        // The bound of `error` through a factor (no error moves nothing, even at the near
        // plane).
        let scaled = |error: f32, factor: f32| if error > 0.0 { error * factor } else { 0.0 };
        // The ramp: 0 where Update() enables the vertex (so it appears, and leaves, on
        // the coarse surface), 1 once its tests reach `RAMP_END` times that; the largest
        // of the tests decides, so one past the end settles it.
        let (own_box, own_error) = own;
        let mut tested = scaled(own_error, own_box.factor);
        if tested >= RAMP_END * self.topology {
            return h;
        }
        let other = other();
        if let Some((projected, error)) = &other {
            tested = tested.max(scaled(*error, projected.factor));
        }
        // Even in `1 / P` (see the module docs): the same jump per relative step all
        // along the ramp.
        let ramp = (1.0 - self.topology / tested) / (1.0 - 1.0 / RAMP_END);
        if ramp >= 1.0 || ramp.is_nan() {
            return h;
        }
        // The budget: never farther than `budget` from the sample, on the boxes grown by
        // the offset (the drawn point may leave a box by up to |r|).
        let size = [
            Some(own_box),
            other.as_ref().map(|(projected, _)| projected),
        ]
        .into_iter()
        .flatten()
        .map(|projected| scaled(r.abs(), self.grown(projected, r.abs())))
        .fold(0.0f32, f32::max);
        let least = if size <= self.budget {
            0.0
        } else if !size.is_finite() {
            return h;
        } else {
            1.0 - self.budget / size
        };
        base + ramp.max(least) * r
    }
}

/// Per side (east, south, north, west): the edge vertex's offset from the square's
/// north-west corner in half sides, and the corners (north-west, north-east, south-west,
/// south-east) at the ends of its edge.
const SIDE_VERTICES: [((u32, u32), (usize, usize)); 4] = [
    (SIDE_HALVES[0], (1, 3)),
    (SIDE_HALVES[1], (2, 3)),
    (SIDE_HALVES[2], (0, 1)),
    (SIDE_HALVES[3], (0, 2)),
];

/// Per side (east, south, north, west): the edge vertex's offset from the square's
/// north-west corner in half sides.
pub(super) const SIDE_HALVES: [(u32, u32); 4] = [(2, 1), (1, 2), (1, 0), (0, 1)];

/// The four edges of a square in fan order (counter-clockwise seen from above, as
/// algorithm Q's fans): the side, the quadrants of its first and second half, and the
/// corners (north-west, north-east, south-west, south-east) it runs between.
const EDGES: [(usize, u32, u32, (usize, usize)); 4] = [
    (WEST, 0, 2, (0, 2)),
    (SOUTH, 2, 3, (2, 3)),
    (EAST, 3, 1, (3, 1)),
    (NORTH, 1, 0, (1, 0)),
];

/// What Render() emits: triangles and morphed heights. (The boxes of the squares that
/// drew triangles are worked out only when asked: [`RenderBuffers::drawn_boxes`].)
#[derive(Debug, Default)]
pub(super) struct Emitted {
    pub indices: Vec<u32>,
    pub morphs: Vec<MorphedHeight>,
    pub nodes_drawn: u64,
}

impl Emitted {
    pub fn clear(&mut self) {
        self.indices.clear();
        self.morphs.clear();
        self.nodes_drawn = 0;
    }
}

/// Render()'s output as a [`Selection::Listed`](crate::lod::Selection::Listed): every
/// walk's vertices, one per height slot (so a vertex two walks or two squares share is
/// listed by each, at the same height), and the triangles by their index there.
#[derive(Debug, Default)]
pub(super) struct Listing {
    pub vertices: Vec<ListedVertex>,
    pub indices: Vec<u32>,
}

/// Levels from the subtrees whose walks are recorded and reused (and walked in parallel)
/// down to the finest: small enough that Update()'s changes of a frame leave most of
/// them alone (85 % of the squares replayed on the bench flight, 29 % with subtrees
/// three levels taller), large enough that the walk above them is short.
const SUBTREE_LEVELS: usize = 4;

/// The deepest level of those subtrees: at most `4^7` positions, so a tree grown deep
/// by local detail keeps the positions' table small.
const MAX_SUBTREE_DEPTH: usize = 7;

/// Enabled squares from which the subtrees are walked in parallel. Below, rayon's
/// overhead outweighs the walk; above, its job queue allocates a block of job slots once
/// every few dozen frames (amortised to none). The other allocations of a frame are a
/// subtree position's buffers, the first time it is drawn or walked at a new largest size,
/// and a thread's table for linking recorded walks, the first time that thread records a
/// walk deeper than any before (at most once per level, see `recorded`): a frame like
/// one seen before allocates nothing on one thread, and at most those few table growths
/// on several.
pub(super) const PARALLEL_SQUARES: usize = 16_384;

/// A subtree left for the second part of the walk: its root square, neighbours, the
/// height slots of its corners in the walk above, and whether its box still has to be
/// tested against the frustum (else it lies wholly inside).
#[derive(Clone, Copy, Debug)]
struct Subtree {
    sq: Sq,
    around: [u32; 4],
    corners: [u32; 4],
    cull: bool,
}

/// Where the walk stops to leave subtrees for the second part (`None`: it walks all).
struct Split<'s> {
    depth: u32,
    subtrees: &'s mut Vec<Subtree>,
}

/// `RenderBuffers::part_at` of a position never drawn.
const NO_PART: u32 = u32::MAX;

/// A subtree position's recorded walk and what its replay emits.
#[derive(Debug, Default)]
struct Part {
    /// This frame's subtree there, with its corners' drawn heights (`None`: not drawn).
    subtree: Option<(Subtree, [f32; 4])>,
    walk: RecordedWalk,
    /// Whether this frame replayed the walk without walking the subtree.
    reused: bool,
    replayed: Replayed,
    emitted: Emitted,
}

/// Render()'s buffers, kept across frames: the recorded walks, and the capacity of the
/// rest.
#[derive(Debug, Default)]
pub(super) struct RenderBuffers {
    /// The walk down to the subtrees (recorded every frame) and its drawn heights.
    top: RecordedWalk,
    top_replayed: Replayed,
    subtrees: Vec<Subtree>,
    /// One per subtree position drawn so far, in the order first drawn.
    parts: Vec<Part>,
    /// The part of each subtree position, `iz * 2^depth + ix` ([`NO_PART`]: none yet).
    part_at: Vec<u32>,
    /// Squares of the last frame whose walk was replayed, and all squares walked.
    pub reused: (usize, usize),
}

impl RenderBuffers {
    /// Forgets every recorded walk (their slots may hold other squares now).
    pub fn forget(&mut self) {
        self.top.forget();
        for part in &mut self.parts {
            part.walk.forget();
        }
    }

    /// Bytes held by the recorded walks and the parts' buffers (capacity).
    pub fn bytes(&self) -> usize {
        let emitted = |e: &Emitted| {
            e.indices.capacity() * size_of::<u32>()
                + e.morphs.capacity() * size_of::<MorphedHeight>()
        };
        self.top.bytes()
            + self.top_replayed.bytes()
            + self.part_at.capacity() * size_of::<u32>()
            + self.parts.capacity() * size_of::<Part>()
            + self
                .parts
                .iter()
                .map(|p| p.walk.bytes() + p.replayed.bytes() + emitted(&p.emitted))
                .sum::<usize>()
    }

    /// The last frame's triangles as a listing (recorded with
    /// [`AdaptiveOptions::list_vertices`](super::AdaptiveOptions::list_vertices)), in
    /// the order of its grid-indexed triangles.
    pub fn list(&self, tree: &SquareTree, depth: u32, out: &mut Listing) {
        out.vertices.clear();
        out.indices.clear();
        self.top.list(
            tree,
            corner_positions(tree, Sq::ROOT),
            &self.top_replayed.heights,
            out,
        );
        for subtree in &self.subtrees {
            let part = &self.parts[self.part_at[position(subtree.sq, depth)] as usize];
            let corners = corner_positions(tree, subtree.sq);
            part.walk.list(tree, corners, &part.replayed.heights, out);
        }
    }

    /// The boxes of the squares the last frame drew triangles of, in the order of its
    /// triangles, grown to their drawn heights (which geomorphing can move out of the
    /// stored box).
    pub fn drawn_boxes(&self, depth: u32, out: &mut Vec<Aabb>) {
        self.top.drawn_boxes(&self.top_replayed.heights, out);
        for subtree in &self.subtrees {
            let part = &self.parts[self.part_at[position(subtree.sq, depth)] as usize];
            part.walk.drawn_boxes(&part.replayed.heights, out);
        }
    }
}

#[cfg(test)]
impl RenderBuffers {
    /// [`RecordedWalk::check_links`] over the subtrees' recorded walks: how many edge
    /// vertices take the projection of a square walked beside them, and how many do not
    /// for lying too deep below their walk's root.
    pub fn check_links(&self) -> (usize, usize) {
        self.parts
            .iter()
            .map(|p| p.walk.check_links())
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
    }
}

/// Appends a square's triangle fan to `out`, its vertices named by `centre`, `corners`
/// (north-west, north-east, south-west, south-east) and the enabled edge vertices `mids`
/// (east, south, north, west): per edge, in fan order, one triangle to the corners or two
/// to the edge vertex, leaving out the quadrants enabled children draw. Returns whether
/// it drew anything.
fn fan(
    centre: u32,
    corners: [u32; 4],
    mids: [Option<u32>; 4],
    enabled_children: u32,
    out: &mut Vec<u32>,
) -> bool {
    let before = out.len();
    for (side, first, second, (a, b)) in EDGES {
        let (a, b) = (corners[a], corners[b]);
        match mids[side] {
            Some(m) => {
                if enabled_children & (1 << first) == 0 {
                    out.extend_from_slice(&[centre, a, m]);
                }
                if enabled_children & (1 << second) == 0 {
                    out.extend_from_slice(&[centre, m, b]);
                }
            }
            None => {
                // Both halves' quadrants are drawn here: an enabled quadrant would have
                // enabled this vertex.
                debug_assert_eq!(enabled_children & (1 << first | 1 << second), 0);
                out.extend_from_slice(&[centre, a, b]);
            }
        }
    }
    out.len() > before
}

/// The grid positions of the corners of `sq` (north-west, north-east, south-west,
/// south-east).
fn corner_positions(tree: &SquareTree, sq: Sq) -> [GridPos; 4] {
    let size = tree.levels[sq.level as usize].size;
    let (x0, z0) = (sq.ix * size, sq.iz * size);
    [(0, 0), (size, 0), (0, size), (size, size)].map(|(dx, dz)| GridPos::new(x0 + dx, z0 + dz))
}

/// A subtree position's index in [`RenderBuffers::part_at`], subtrees `depth` levels down.
fn position(sq: Sq, depth: u32) -> usize {
    ((sq.iz << depth) + sq.ix) as usize
}

impl AdaptiveLod<'_> {
    /// Render(): emits the enabled squares into `out` from the root (drawn corner heights
    /// `corners`). The squares above the subtrees ([`SUBTREE_LEVELS`] above the finest)
    /// are walked every frame; each subtree replays its walk of an earlier frame where that
    /// still holds, else is walked again (in parallel above [`PARALLEL_SQUARES`]), into
    /// its part. The parts are appended in order, so the output is the same on any number
    /// of threads and equals a fresh walk's.
    pub(super) fn render_all(
        &self,
        out: &mut Emitted,
        buffers: &mut RenderBuffers,
        frustum: Option<&Frustum>,
        morpher: &Morpher<'_>,
        corners: [f32; 4],
    ) {
        use rayon::prelude::*;
        let depth = self.subtree_depth();
        let RenderBuffers {
            top,
            top_replayed,
            subtrees,
            parts,
            part_at,
            reused,
        } = buffers;
        subtrees.clear();
        top.begin(frustum.is_some());
        let mut split = Split { depth, subtrees };
        let root = Sq::ROOT;
        self.record(
            top,
            frustum,
            root,
            &[OUTSIDE; 4],
            CORNER_SLOTS,
            Some(&mut split),
        );
        // The top is recorded every frame, so it is not linked (`RecordedWalk::finish`):
        // linking it cost more than the projections it saved (BENCHMARKS, "one
        // projection per square on replay": 17.87 G against 17.75 G instructions).
        self.replay(top, corners, morpher, top_replayed, out);
        out.indices.extend_from_slice(&top.indices);
        let positions = 1usize << (2 * depth);
        if part_at.len() < positions {
            part_at.resize(positions, NO_PART);
        }
        for part in parts.iter_mut() {
            part.subtree = None;
        }
        for subtree in subtrees.iter() {
            let at = &mut part_at[position(subtree.sq, depth)];
            if *at == NO_PART {
                *at = parts.len() as u32;
                parts.push(Part::default());
            }
            let corners = subtree
                .corners
                .map(|slot| top_replayed.heights[slot as usize]);
            parts[*at as usize].subtree = Some((*subtree, corners));
        }
        let walk = |part: &mut Part| {
            let Some((subtree, corners)) = part.subtree else {
                return;
            };
            let frustum = frustum.filter(|_| subtree.cull);
            part.reused = self.walk_still_holds(&part.walk, frustum);
            if !part.reused {
                part.walk.begin(frustum.is_some());
                let (sq, around) = (subtree.sq, &subtree.around);
                self.record(&mut part.walk, frustum, sq, around, CORNER_SLOTS, None);
                part.walk.finish(&self.tree);
            }
            part.emitted.clear();
            self.replay(
                &part.walk,
                corners,
                morpher,
                &mut part.replayed,
                &mut part.emitted,
            );
        };
        // The same parts either way, so the same output.
        if self.enabled >= PARALLEL_SQUARES {
            parts.par_iter_mut().for_each(walk);
        } else {
            parts.iter_mut().for_each(walk);
        }
        *reused = (0, top.squares());
        for subtree in subtrees.iter() {
            let part = &parts[part_at[position(subtree.sq, depth)] as usize];
            out.indices.extend_from_slice(&part.walk.indices);
            out.morphs.extend_from_slice(&part.emitted.morphs);
            out.nodes_drawn += part.emitted.nodes_drawn;
            let squares = part.walk.squares();
            reused.1 += squares;
            if part.reused {
                reused.0 += squares;
            }
        }
    }

    /// The level of the subtrees whose walks are recorded apart.
    pub(super) fn subtree_depth(&self) -> u32 {
        self.finest
            .saturating_sub(SUBTREE_LEVELS)
            .clamp(1, MAX_SUBTREE_DEPTH) as u32
    }

    /// Records the walk of the enabled square `sq` (neighbours `around`) and its enabled
    /// descendants into `walk`, its corners' heights in slots `corners` (north-west,
    /// north-east, south-west, south-east); culls whole subtrees whose box is outside
    /// `frustum`. With `split`, the subtrees `split.depth` levels down are listed there
    /// instead of walked.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        walk: &mut RecordedWalk,
        frustum: Option<&Frustum>,
        sq: Sq,
        around: &[u32; 4],
        corners: [u32; 4],
        mut split: Option<&mut Split<'_>>,
    ) {
        let aabb = self.tree.aabb(sq);
        // A square wholly inside the frustum has its subtree inside.
        let frustum = match frustum.map(|f| (f, walk.test(f, &aabb))) {
            Some((_, Containment::Outside)) => return,
            Some((f, Containment::Intersecting)) => Some(f),
            _ => None,
        };
        let size = self.tree.levels[sq.level as usize].size;
        let half = size / 2;
        // Positions, as a straddling square's vertices may lie beyond the vertex buffer.
        let (x0, z0) = (sq.ix * size, sq.iz * size);
        let at = |dx: u32, dz: u32| GridPos::new(x0 + dx, z0 + dz);
        let word = walk.read(&self.state, sq.id, DRAWN_BITS);
        // The centre lies on the parent's diagonal through it, edge vertices on their
        // edges.
        let (ends, kind) = if sq.level == 0 {
            ([corners[0]; 2], VertexKind::Fixed)
        } else if matches!(sq.quadrant(), 0 | 3) {
            ([corners[0], corners[3]], VertexKind::Centre)
        } else {
            ([corners[1], corners[2]], VertexKind::Centre)
        };
        let record = &self.tree.records[sq.id as usize];
        let centre = self.record_vertex(
            walk,
            at(half, half),
            self.tree.vertex_height(sq.id, CENTRE),
            ends,
            record.subtree_error(),
            kind,
            (0.0, (0, 0)),
        );
        // Per side (east, south, north, west): the vertex's slot, if enabled.
        let mut mids = [None; 4];
        for (side, &((hx, hz), ends)) in SIDE_VERTICES.iter().enumerate() {
            let enabled = self
                .owner(sq, side, Some(around))
                .is_some_and(|(o, owned)| {
                    let bit = mid_bit(owned);
                    let owner_word = if o.id == sq.id {
                        word
                    } else {
                        walk.read(&self.state, o.id, bit)
                    };
                    owner_word & bit != 0
                });
            if !enabled {
                continue;
            }
            // Update()'s side tests of the vertex, from both its squares.
            let vertex_error = self.tree.stored_vertex_error(sq, side, Some(around[side]));
            let n = around[side];
            let across = if n < ABSENT {
                let across = &self.tree.records[n as usize];
                (
                    side_error(across.fan_error(), vertex_error),
                    across.box_codes(),
                )
            } else {
                (0.0, (0, 0))
            };
            let kind = VertexKind::Edge {
                side: side as u8,
                across: if n < ABSENT {
                    Across::Coded
                } else {
                    Across::None
                },
            };
            mids[side] = Some(self.record_vertex(
                walk,
                at(hx * half, hz * half),
                self.mid_height(sq, side, around),
                [corners[ends.0], corners[ends.1]],
                side_error(record.fan_error(), vertex_error),
                kind,
                across,
            ));
        }
        let square = walk.push_square(sq, aabb, centre);
        let enabled_children = enabled_children(word);
        if enabled_children != 0 {
            let first = self.tree.first_child(sq.id);
            for k in (0..4).filter(|k| enabled_children & 1 << k != 0) {
                // An enabled child's two edge vertices on this square's sides are on.
                let m = |side: usize| mids[side].unwrap_or(centre);
                let child_corners = match k {
                    0 => [corners[0], m(NORTH), m(WEST), centre],
                    1 => [m(NORTH), corners[1], centre, m(EAST)],
                    2 => [m(WEST), centre, corners[2], m(SOUTH)],
                    _ => [centre, m(EAST), m(SOUTH), corners[3]],
                };
                let child_around = self.tree.child_neighbours(first, k, around);
                let child = sq.child(first, k);
                match split.as_deref_mut() {
                    Some(split) if child.level >= split.depth => {
                        split.subtrees.push(Subtree {
                            sq: child,
                            around: child_around,
                            corners: child_corners,
                            cull: frustum.is_some(),
                        });
                    }
                    split => self.record(walk, frustum, child, &child_around, child_corners, split),
                }
            }
        }
        if self.tree.straddles(sq) {
            // Every stored child is enabled and draws itself; the rest is padding.
            return;
        }
        let drew = if self.adaptive.list_vertices {
            // By height slot: the listing's vertices.
            fan(
                centre,
                corners,
                mids,
                enabled_children,
                &mut walk.slot_indices,
            )
        } else {
            // Vertex indices, only now: a straddling square's corners may lie beyond the
            // buffer, where `u32` index arithmetic can overflow (a finely subdivided grid).
            let stride = self.vertices.stride;
            let corner = self.vertices.index(at(0, 0));
            let (right, down) = (size, size * stride);
            let corners = [corner, corner + right, corner + down, corner + down + right];
            let mid_index = [
                corner + right + half * stride,
                corner + down + half,
                corner + half,
                corner + half * stride,
            ];
            let mids = [0, 1, 2, 3].map(|side| mids[side].map(|_| mid_index[side]));
            let centre = corner + half * (stride + 1);
            fan(centre, corners, mids, enabled_children, &mut walk.indices)
        };
        if drew {
            walk.push_drawn(square, corners);
        }
    }

    /// Records a vertex at `pos` of the square being recorded (see
    /// [`RecordedWalk::push_vertex`]).
    #[allow(clippy::too_many_arguments)]
    fn record_vertex(
        &self,
        walk: &mut RecordedWalk,
        pos: GridPos,
        sample: f32,
        ends: [u32; 2],
        own_error: f32,
        kind: VertexKind,
        across: (f32, (u16, u16)),
    ) -> u32 {
        let (vertex, replaced) = self.grid_index(pos).unzip();
        let replaced = replaced.unwrap_or(false);
        walk.push_vertex(vertex, sample, ends, own_error, kind, across, replaced)
    }

    /// A position's index in the vertex buffer (`None` beyond it: a padding square's
    /// vertex), and whether local detail replaces the grid's own height there (so the
    /// vertex is listed among the morphs even where drawn at its sample).
    /// (`None` for every position when the vertices are listed: nothing reads the grid
    /// index then, and a tree past `u32` grid indices has none.)
    #[inline(always)]
    fn grid_index(&self, pos: GridPos) -> Option<(u32, bool)> {
        let inside = !self.adaptive.list_vertices
            && pos.col < self.vertices.stride
            && pos.row < self.vertices.rows;
        inside.then(|| {
            let replaced = self.fine.is_some_and(|f| f.replaced(pos));
            (self.vertices.index(pos), replaced)
        })
    }

    /// The stored height of the edge vertex on `side` of `sq` (which must be drawable).
    #[inline(always)]
    fn mid_height(&self, sq: Sq, side: usize, around: &[u32; 4]) -> f32 {
        match side {
            EAST | SOUTH => self.tree.vertex_height(sq.id, side),
            NORTH if sq.iz == 0 => self.tree.border_vertex(sq, NORTH).height,
            WEST if sq.ix == 0 => self.tree.border_vertex(sq, WEST).height,
            _ => {
                let owned = if side == NORTH { SOUTH } else { EAST };
                self.tree.vertex_height(around[side], owned)
            }
        }
    }

    /// Records a drawn height other than the grid's own, for a vertex in the buffer: a
    /// morphed one, or with local detail one the grid's sample does not give.
    pub(super) fn push_morph(&self, out: &mut Emitted, pos: GridPos, sample: f32, height: f32) {
        if let Some((vertex, replaced)) = self.grid_index(pos)
            && (height != sample || replaced)
        {
            out.morphs.push(MorphedHeight { vertex, height });
        }
    }
}
