//! Index buffers of a square patch at every level, split into an interior and four seams
//! so that patches of neighbouring levels stitch without cracks (article 001, shared by the
//! block algorithms C and P).
//!
//! # Layout
//!
//! A patch has `n = 2^k` segments a side; local vertex `(i, j)` (`0 ≤ i, j ≤ n`, `i` along
//! columns, `j` along rows) is index `j * (n + 1) + i`, the convention of
//! [`Selection::Patches`](super::Selection::Patches). Level `L` (`0 ≤ L ≤ k`) uses every
//! `s = 2^L`-th vertex. Below the coarsest level, a level's mesh is:
//!
//! - the *interior*: every cell of side `s` that does not touch the patch border;
//! - four *seams*, one per side: the trapezoid between the side (`0..=n` along it) and the
//!   interior's border on that side (`s..=n-s`, at depth `s`). Each comes in two variants:
//!   the side's vertices at step `s` (the neighbour across the side has the same level or a
//!   finer one, which stitches itself) or at step `2s` (the neighbour is one level coarser).
//!
//! Any choice of the four variants tiles the patch exactly with the interior: the four
//! trapezoids meet along the corner cells' diagonals `(0,0)–(s,s)` etc., so each seam's
//! vertices depend on its own side only. Along a side the vertices are exactly the side's
//! samples at the chosen step, so two patches whose seams agree (same level, or the finer
//! one using the coarser variant) share every vertex of their common edge: watertight.
//! The coarsest level (`s = n`) is one cell, two triangles, and has no seams (its
//! neighbours are never coarser). At `s = n/2` the interior is empty and the seams are fans
//! around the centre.
//!
//! # Diagonals
//!
//! Every cell is split by the diagonal that points at the patch centre (quadrant by
//! quadrant; the corner cells' trapezoid diagonals are such diagonals too). A cell of level
//! `L + 1` lies in one quadrant, so its four sub-cells of level `L` use the same direction
//! and the level-`L` mesh refines the level-`(L + 1)` mesh: every vertex of level `L` that
//! is not one of level `L + 1` (an *odd* vertex) is the midpoint of an edge of level
//! `L + 1`, and every level-`L` triangle lies inside one level-`(L + 1)` triangle. (A single
//! diagonal direction everywhere would break this at two of the four corners, whose
//! trapezoid diagonals run the other way.) Vertical morphing relies on it: an odd vertex
//! moved to the average of that edge's ends makes the level-`L` mesh the level-`(L + 1)`
//! surface.
//!
//! # Seams
//!
//! A seam is triangulated by a zipper walk along its outer polyline (the side) and its
//! inner one (the interior's border), always advancing the one whose next vertex comes
//! first along the side; on a tie the cell's diagonal towards the centre decides. This
//! works for any mix of steps, and for a same-level seam it gives exactly the grid cells
//! split as above. All triangles are counter-clockwise seen from above.

use std::fmt;

/// Largest supported `log2` of the patch side: local indices stay far inside `u32`.
pub const MAX_LOG2_SIDE: u32 = 12;

/// Why a stitched patch cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StitchedPatchError {
    #[error("patch side 2^{log2_side} is out of range (2^0 to 2^{max})")]
    SideOutOfRange { log2_side: u32, max: u32 },
}

/// A side of the patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// Row `j = 0` (smallest z).
    North,
    /// Column `i = n`.
    East,
    /// Row `j = n`.
    South,
    /// Column `i = 0`.
    West,
}

impl Side {
    pub const ALL: [Side; 4] = [Side::North, Side::East, Side::South, Side::West];

    fn slot(self) -> u32 {
        match self {
            Side::North => 0,
            Side::East => 1,
            Side::South => 2,
            Side::West => 3,
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::North => "north",
            Side::East => "east",
            Side::South => "south",
            Side::West => "west",
        })
    }
}

/// Which seam variant a side uses: what the neighbour across it draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeamNeighbour {
    /// The neighbour has the same level, a finer one (it stitches itself), or is absent:
    /// the side's vertices at this level's step.
    Same,
    /// The neighbour is exactly one level coarser: the side's vertices at twice the step.
    Coarser,
}

impl SeamNeighbour {
    /// The variant a patch of level `own` uses against a neighbour of level `neighbour`
    /// (`None`: no neighbour). Neighbours more than one level coarser cannot be stitched;
    /// callers keep levels within one.
    pub fn for_levels(own: u32, neighbour: Option<u32>) -> SeamNeighbour {
        match neighbour {
            Some(level) if level > own => SeamNeighbour::Coarser,
            _ => SeamNeighbour::Same,
        }
    }
}

/// Slots per non-coarsest level: the interior and two variants for each of four sides.
const SLOTS_PER_LEVEL: u32 = 9;

/// The shared index buffers of a patch of `2^k` segments at every level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StitchedPatch {
    log2_side: u32,
    buffers: Vec<Vec<u32>>,
}

impl StitchedPatch {
    /// Builds every level's interior and seams for a patch of `2^log2_side` segments.
    pub fn new(log2_side: u32) -> Result<StitchedPatch, StitchedPatchError> {
        if log2_side > MAX_LOG2_SIDE {
            return Err(StitchedPatchError::SideOutOfRange {
                log2_side,
                max: MAX_LOG2_SIDE,
            });
        }
        Ok(StitchedPatch::clamped(log2_side))
    }

    /// [`StitchedPatch::new`] for a side clamped to the supported range (at most
    /// `2^`[`MAX_LOG2_SIDE`]): for callers that already bound the side, so no error.
    pub fn clamped(log2_side: u32) -> StitchedPatch {
        let log2_side = log2_side.min(MAX_LOG2_SIDE);
        let mut patch = StitchedPatch {
            log2_side,
            buffers: Vec::with_capacity((log2_side * SLOTS_PER_LEVEL + 1) as usize),
        };
        for level in 0..log2_side {
            let interior = patch.build_interior(level);
            patch.buffers.push(interior);
            for side in Side::ALL {
                for outer_step in [1 << level, 2 << level] {
                    let seam = patch.build_seam(level, side, outer_step);
                    patch.buffers.push(seam);
                }
            }
        }
        let single_cell = patch.build_single_cell();
        patch.buffers.push(single_cell);
        patch
    }

    /// Segments a side (`n`).
    pub fn side(&self) -> u32 {
        1 << self.log2_side
    }

    /// `k`: the coarsest level, two triangles for the whole patch.
    pub fn coarsest_level(&self) -> u32 {
        self.log2_side
    }

    /// Every index buffer, addressed by [`StitchedPatch::interior`] and
    /// [`StitchedPatch::seam`] (what [`Selection::Patches`](super::Selection::Patches)
    /// borrows).
    pub fn buffers(&self) -> &[Vec<u32>] {
        &self.buffers
    }

    /// Local vertex index of `(i, j)`.
    pub fn local_index(&self, i: u32, j: u32) -> u32 {
        j * (self.side() + 1) + i
    }

    /// The buffer holding the interior of `level` (at the coarsest level: the whole patch).
    /// Levels beyond the coarsest are clamped to it.
    pub fn interior(&self, level: u32) -> u32 {
        level.min(self.log2_side) * SLOTS_PER_LEVEL
    }

    /// The buffer holding the seam of `level` on `side` against `neighbour`; `None` at the
    /// coarsest level, which has no seams.
    pub fn seam(&self, level: u32, side: Side, neighbour: SeamNeighbour) -> Option<u32> {
        if level >= self.log2_side {
            return None;
        }
        let variant = match neighbour {
            SeamNeighbour::Same => 0,
            SeamNeighbour::Coarser => 1,
        };
        Some(level * SLOTS_PER_LEVEL + 1 + side.slot() * 2 + variant)
    }

    /// The level a buffer belongs to (for colouring or morphing by buffer).
    pub fn level_of_buffer(&self, buffer: u32) -> u32 {
        (buffer / SLOTS_PER_LEVEL).min(self.log2_side)
    }

    /// Whether the cell with corners `(x0, y0)` and `(x0 + s, y0 + s)` is split by its main
    /// diagonal `(x0, y0)–(x0 + s, y0 + s)`: true in the north-west and south-east
    /// quadrants, where that diagonal points at the centre.
    fn main_diagonal(&self, x0: u32, y0: u32, s: u32) -> bool {
        let half = self.side() / 2;
        let west = x0 + s <= half;
        let north = y0 + s <= half;
        west == north
    }

    fn push_cell(&self, out: &mut Vec<u32>, x0: u32, y0: u32, s: u32) {
        let (x1, y1) = (x0 + s, y0 + s);
        if self.main_diagonal(x0, y0, s) {
            self.push_triangle(out, [(x0, y0), (x1, y0), (x1, y1)]);
            self.push_triangle(out, [(x0, y0), (x1, y1), (x0, y1)]);
        } else {
            self.push_triangle(out, [(x1, y0), (x1, y1), (x0, y1)]);
            self.push_triangle(out, [(x1, y0), (x0, y1), (x0, y0)]);
        }
    }

    /// Appends a triangle, wound counter-clockwise seen from above whatever order the
    /// corners come in.
    fn push_triangle(&self, out: &mut Vec<u32>, corners: [(u32, u32); 3]) {
        let [a, b, c] = corners.map(|(i, j)| (i64::from(i), i64::from(j)));
        // Twice the signed area seen from above (see the test kit's `grid_math`): positive
        // for counter-clockwise.
        let up_area2 = (b.1 - a.1) * (c.0 - a.0) - (b.0 - a.0) * (c.1 - a.1);
        debug_assert!(up_area2 != 0, "degenerate triangle {corners:?}");
        let [p, q, r] = corners.map(|(i, j)| self.local_index(i, j));
        if up_area2 > 0 {
            out.extend([p, q, r]);
        } else {
            out.extend([p, r, q]);
        }
    }

    fn build_interior(&self, level: u32) -> Vec<u32> {
        let s = 1 << level;
        let cells = self.side() / s;
        let mut out = Vec::with_capacity((cells.saturating_sub(2).pow(2) * 6) as usize);
        for b in 1..cells.saturating_sub(1) {
            for a in 1..cells - 1 {
                self.push_cell(&mut out, a * s, b * s, s);
            }
        }
        out
    }

    fn build_single_cell(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(6);
        self.push_cell(&mut out, 0, 0, self.side());
        out
    }

    /// Local `(i, j)` of the point `along` the side at `depth` from it.
    fn on_side(&self, side: Side, along: u32, depth: u32) -> (u32, u32) {
        let n = self.side();
        match side {
            Side::North => (along, depth),
            Side::South => (along, n - depth),
            Side::West => (depth, along),
            Side::East => (n - depth, along),
        }
    }

    /// The zipper walk between the side at `outer_step` and the interior's border (step
    /// `s = 2^level`, depth `s`, from `s` to `n - s`: one point when `s = n/2`).
    fn build_seam(&self, level: u32, side: Side, outer_step: u32) -> Vec<u32> {
        let n = self.side();
        let s = 1 << level;
        let half = n / 2;
        let outer_last = n / outer_step;
        let inner_last = (n - 2 * s) / s;
        let mut out = Vec::with_capacity(((outer_last + inner_last) * 3) as usize);
        let (mut a, mut b) = (0, 0);
        while a < outer_last || b < inner_last {
            let next_outer = (a < outer_last).then(|| (a + 1) * outer_step);
            let next_inner = (b < inner_last).then(|| s + (b + 1) * s);
            let advance_outer = match (next_outer, next_inner) {
                (Some(o), Some(i)) if o == i => o > half,
                (Some(o), Some(i)) => o < i,
                (Some(_), None) => true,
                (None, _) => false,
            };
            let outer = self.on_side(side, a * outer_step, 0);
            let inner = self.on_side(side, s + b * s, s);
            if advance_outer {
                let next = self.on_side(side, (a + 1) * outer_step, 0);
                self.push_triangle(&mut out, [outer, next, inner]);
                a += 1;
            } else {
                let next = self.on_side(side, s + (b + 1) * s, s);
                self.push_triangle(&mut out, [outer, next, inner]);
                b += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    type Point = (i64, i64);

    fn corners(patch: &StitchedPatch, buffer: &[u32]) -> Vec<[Point; 3]> {
        let stride = patch.side() + 1;
        buffer
            .chunks_exact(3)
            .map(|t| [t[0], t[1], t[2]].map(|v| (i64::from(v % stride), i64::from(v / stride))))
            .collect()
    }

    fn up_area2([a, b, c]: [Point; 3]) -> i64 {
        (b.1 - a.1) * (c.0 - a.0) - (b.0 - a.0) * (c.1 - a.1)
    }

    fn on_border(n: i64, p: Point, q: Point) -> bool {
        (p.0 == q.0 && (p.0 == 0 || p.0 == n)) || (p.1 == q.1 && (p.1 == 0 || p.1 == n))
    }

    /// The level's interior plus the chosen seams.
    fn assemble(
        patch: &StitchedPatch,
        level: u32,
        variants: [SeamNeighbour; 4],
    ) -> Vec<[Point; 3]> {
        let mut triangles = corners(patch, &patch.buffers()[patch.interior(level) as usize]);
        for (side, variant) in Side::ALL.into_iter().zip(variants) {
            if let Some(seam) = patch.seam(level, side, variant) {
                triangles.extend(corners(patch, &patch.buffers()[seam as usize]));
            }
        }
        triangles
    }

    /// Exact tiling of the `n × n` square: every triangle counter-clockwise with positive
    /// area, areas summing to the square's, every directed edge used once and every edge
    /// not on the border matched by its reverse (no gap, no overlap, no T-junction inside).
    fn assert_tiles(n: u32, triangles: &[[Point; 3]], what: &str) {
        let n = i64::from(n);
        let mut edges = HashSet::new();
        let mut area2 = 0;
        for &t in triangles {
            let a = up_area2(t);
            assert!(a > 0, "{what}: triangle {t:?} is not counter-clockwise");
            area2 += a;
            for k in 0..3 {
                assert!(
                    edges.insert((t[k], t[(k + 1) % 3])),
                    "{what}: edge used twice in one direction"
                );
            }
        }
        assert_eq!(area2, 2 * n * n, "{what}: areas do not sum to the square");
        for &(p, q) in &edges {
            assert!(
                edges.contains(&(q, p)) || on_border(n, p, q),
                "{what}: edge {p:?}-{q:?} is open inside the patch"
            );
        }
    }

    fn all_variants() -> impl Iterator<Item = [SeamNeighbour; 4]> {
        (0..16u32).map(|bits| {
            [0, 1, 2, 3].map(|k| {
                if bits >> k & 1 == 1 {
                    SeamNeighbour::Coarser
                } else {
                    SeamNeighbour::Same
                }
            })
        })
    }

    #[test]
    fn every_seam_choice_tiles_the_patch_exactly() {
        for log2_side in 0..=5 {
            let patch = StitchedPatch::new(log2_side).expect("valid side");
            for level in 0..=log2_side {
                for variants in all_variants() {
                    let triangles = assemble(&patch, level, variants);
                    assert_tiles(
                        patch.side(),
                        &triangles,
                        &format!("side {} level {level} {variants:?}", patch.side()),
                    );
                }
            }
        }
    }

    #[test]
    fn the_side_vertices_are_the_samples_at_the_seam_step() {
        let patch = StitchedPatch::new(4).expect("valid side");
        let n = i64::from(patch.side());
        for level in 0..=patch.coarsest_level() {
            for variants in all_variants() {
                let triangles = assemble(&patch, level, variants);
                let vertices: HashSet<Point> = triangles.iter().flatten().copied().collect();
                for (side, variant) in Side::ALL.into_iter().zip(variants) {
                    let coarser =
                        variant == SeamNeighbour::Coarser && level < patch.coarsest_level();
                    let step = i64::from(1u32 << (level + u32::from(coarser)));
                    let along: Vec<i64> = vertices
                        .iter()
                        .filter_map(|&(i, j)| match side {
                            Side::North => (j == 0).then_some(i),
                            Side::South => (j == n).then_some(i),
                            Side::West => (i == 0).then_some(j),
                            Side::East => (i == n).then_some(j),
                        })
                        .collect::<HashSet<_>>()
                        .into_iter()
                        .collect();
                    let mut along = along;
                    along.sort_unstable();
                    let expected: Vec<i64> = (0..=n / step).map(|t| t * step).collect();
                    assert_eq!(along, expected, "level {level} {side} {variant:?}");
                }
            }
        }
    }

    /// Every level-`L` triangle (any seams) lies inside one level-`(L + 1)` triangle
    /// (same-level seams), and every vertex of level `L` that is not one of level `L + 1` is the
    /// midpoint of a level-`(L + 1)` edge: what vertical morphing needs.
    #[test]
    fn each_level_refines_the_next_coarser_one() {
        for log2_side in 1..=5 {
            let patch = StitchedPatch::new(log2_side).expect("valid side");
            let same = [SeamNeighbour::Same; 4];
            for (level, variants) in
                (0..log2_side).flat_map(|l| all_variants().map(move |v| (l, v)))
            {
                let fine = assemble(&patch, level, variants);
                let coarse = assemble(&patch, level + 1, same);
                let mut midpoints = HashMap::new();
                for t in &coarse {
                    for k in 0..3 {
                        let (p, q) = (t[k], t[(k + 1) % 3]);
                        midpoints.insert(((p.0 + q.0) / 2, (p.1 + q.1) / 2), (p, q));
                    }
                }
                let coarse_step = 2i64 << level;
                for t in &fine {
                    for &v in t {
                        if v.0 % coarse_step != 0 || v.1 % coarse_step != 0 {
                            let (p, q) = midpoints
                                .get(&v)
                                .unwrap_or_else(|| panic!("odd vertex {v:?} bisects no edge"));
                            assert_eq!((p.0 + q.0, p.1 + q.1), (2 * v.0, 2 * v.1));
                        }
                    }
                    let inside_one = coarse.iter().any(|&c| {
                        t.iter()
                            .all(|&v| (0..3).all(|k| up_area2([c[k], c[(k + 1) % 3], v]) >= 0))
                    });
                    assert!(
                        inside_one,
                        "level {level} triangle {t:?} straddles a coarser edge"
                    );
                }
            }
        }
    }

    #[test]
    fn the_coarsest_levels_are_two_triangles_and_fans() {
        let patch = StitchedPatch::new(3).expect("valid side");
        let k = patch.coarsest_level();
        assert_eq!(patch.buffers()[patch.interior(k) as usize].len(), 6);
        assert_eq!(patch.seam(k, Side::North, SeamNeighbour::Same), None);
        assert!(patch.buffers()[patch.interior(k - 1) as usize].is_empty());
        for side in Side::ALL {
            let same = patch.seam(k - 1, side, SeamNeighbour::Same).expect("seam");
            let coarser = patch
                .seam(k - 1, side, SeamNeighbour::Coarser)
                .expect("seam");
            assert_eq!(
                patch.buffers()[same as usize].len(),
                6,
                "{side}: two fan triangles"
            );
            assert_eq!(
                patch.buffers()[coarser as usize].len(),
                3,
                "{side}: one triangle"
            );
            assert_eq!(patch.level_of_buffer(same), k - 1);
        }
        assert_eq!(patch.level_of_buffer(patch.interior(k)), k);
        assert_eq!(patch.buffers().len(), (k * SLOTS_PER_LEVEL + 1) as usize);
    }

    #[test]
    fn oversized_patches_are_refused() {
        assert_eq!(
            StitchedPatch::new(MAX_LOG2_SIDE + 1),
            Err(StitchedPatchError::SideOutOfRange {
                log2_side: MAX_LOG2_SIDE + 1,
                max: MAX_LOG2_SIDE
            })
        );
        assert_eq!(StitchedPatch::clamped(3), StitchedPatch::new(3).unwrap());
        assert_eq!(
            SeamNeighbour::for_levels(2, Some(3)),
            SeamNeighbour::Coarser
        );
        assert_eq!(SeamNeighbour::for_levels(2, Some(1)), SeamNeighbour::Same);
        assert_eq!(SeamNeighbour::for_levels(2, None), SeamNeighbour::Same);
    }
}
