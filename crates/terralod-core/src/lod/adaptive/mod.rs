//! Algorithm A (article 002, after Thatcher Ulrich): an adaptive quadtree of squares updated
//! incrementally from frame to frame, drawn as triangle fans around the square centres.
//!
//! # Squares, Update() and Render() (A1, A2)
//!
//! A square has a centre, four corners and four edge vertices (the midpoints of its sides)
//! with enable flags, and four sub-squares (quadrants) with enable flags. A square owns
//! only its east and south edge vertices (the article's rule; on the grid's north and west
//! border it also owns those, as nobody else can). An enabled square needs its parent and
//! the two parent edge vertices that are its corners; an enabled edge vertex needs both
//! squares that share it. Enabling propagates along these dependencies
//! (`AdaptiveLod::enable_square`), so a vertex on a shared edge is drawn by both sides
//! or by neither, and every edge between drawn regions carries the same vertices on both
//! sides: no crack, no T-junction. Render() emits, for every enabled square, the fan
//! triangles of its quadrants that are not enabled sub-squares, skipping disabled edge
//! vertices (a disabled edge vertex never has an enabled quadrant next to it).
//!
//! # The tests (A3) and what they guarantee
//!
//! A quadrant `q` that square `P` draws itself lies under `P`'s plain 3 × 3 fan `S`, minus
//! the disabled edge vertices. `S` is within `fan_error(P)` of every sample (the pyramid);
//! dropping edge vertex `m` changes the surface by at most its interpolation error
//! `verr(m) = |h(m) − (h(a) + h(b)) / 2|` (the difference of the two surfaces is linear on
//! each half and largest at `m`). So the drawn error in `q` is at most
//! `fan_error(P) + verr(m)` for the disabled vertices next to it.
//!
//! - Vertex test, one per square sharing the vertex: square `Q` wants `m` when its side
//!   fails `View::accepts(fan_error(Q) + verr(m), box(Q))`.
//! - Box test of a sub-square `q`: wanted when `View::accepts(E(q), box(q))` fails, `E(q)`
//!   the largest error any test in `q`'s subtree uses, its parent's fan error included
//!   (the article's "maximum error of the vertices inside").
//!
//! `View::accepts` is the screen-space bound every algorithm shares (a true upper bound of
//! the projected error for any camera, fov and aspect; for a world-error view it is
//! `e ≤ M`). The article's L∞ test `error · Threshold > max(|dx|, |dy|, |dz|)` maps onto
//! it as follows: for a point in view at L∞ distance `L` from the eye, Euclidean distance
//! `D ≥ L` and depth `Z ≥ D / sqrt(1 + a² + b²)` (`a`, `b` the tangents of the half fields
//! of view), a vertical error `e` projects to at most `k e D / Z² ≤ k e (1 + a² + b²) / L`
//! pixels, `k` the pixels per radian. So `Threshold = k (1 + a² + b²) / τ` makes the
//! article's test conservative for points whose error segment stays in view; near the eye
//! and off-frustum it is not (`Z` can be tiny), which is why the box test uses the shared
//! bound. With [`AdaptiveOptions::linf_test`] the article's test is applied as well
//! (more triangles, never fewer).
//!
//! Tests only fire for boxes not outside the frustum, so nothing is refined for what is
//! not seen; Render() culls subtrees outside the frustum when the view culls.
//!
//! # Incremental updates (A4) and determinism
//!
//! The state (flags and reference counts, one `u32` per square) is kept across frames.
//! Update() runs in two passes:
//!
//! 1. *Enable*: every enabled square is evaluated once (the ones enabled during the pass
//!    too, parents before children), enabling what its tests want.
//! 2. *Disable*, finest level first: an edge vertex is disabled when its reference count
//!    (enabled sub-squares using it as a corner, 0–4, 3 bits) is 0 and neither square
//!    sharing it wants it; a square when it is not the root, has no enabled edge vertex or
//!    sub-square and its box test fails: the article's rules.
//!
//! A sub-square's test only counts when its parent's does (a chain to the root), and a
//! vertex's side only when its square's does, so every passing test is reached from the
//! root through enabled squares. Dependencies point to coarser levels only (a square needs
//! its parent and two parent edge vertices; an edge vertex needs squares of its own
//! level), so the finest-first disable pass leaves exactly the least closed set that holds
//! every passing test, whatever the state before: the incremental mesh equals the mesh of
//! a fresh instance for the same view, triangle for triangle. The cost of an update
//! follows the enabled squares (the output), not the data set.
//!
//! # Padding
//!
//! As algorithm Q: squares that do not intersect the data are not stored, a square
//! reaching beyond the leaves' extent has all its stored children enabled and draws
//! nothing itself, so exactly the extent rectangle is drawn.

mod records;
mod render;
mod update;

use super::{
    GridVertices, LodAlgorithm, LodOptions, MorphedHeight, Selection, SelectionStats, View,
};
use crate::camera::{Aabb, Containment, Frustum};
use crate::heightfield::{GridPos, Heightfield};
use crate::pyramid::Pyramid;
use records::HeightTree;
use render::Morpher;
use std::time::Instant;
use update::{ENABLED, WANTED};

/// Share of the tolerance the topology gets when morphing; the morphs get the rest.
pub const MORPH_SHARE: f32 = 0.5;

/// Options of algorithm A.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveOptions {
    /// Also apply the article's L∞ distance test with `Threshold = k (1 + a² + b²) / τ`
    /// (see the module docs). Default off: the shared bound alone keeps τ.
    pub linf_test: bool,
    /// Geomorphing (A6): select the topology for half the tolerance and move vertices
    /// between their coarse and true heights with the other half. Default on (the article
    /// recommends it against popping).
    pub morph: bool,
}

impl Default for AdaptiveOptions {
    fn default() -> Self {
        AdaptiveOptions::DEFAULT
    }
}

impl AdaptiveOptions {
    /// The defaults, usable in constants.
    pub const DEFAULT: AdaptiveOptions = AdaptiveOptions {
        linf_test: false,
        morph: true,
    };

    pub fn with_linf_test(mut self, on: bool) -> Self {
        self.linf_test = on;
        self
    }

    pub fn with_morph(mut self, on: bool) -> Self {
        self.morph = on;
        self
    }
}

/// The tolerance value of a view (pixels or world units).
fn view_tolerance(view: &View) -> f32 {
    match view.tolerance() {
        super::Tolerance::Pixels(v) | super::Tolerance::WorldError(v) => v,
    }
}

/// The per-frame test inputs.
pub(crate) struct Tester<'v> {
    view: &'v View,
    frustum: Option<&'v Frustum>,
    view_angle_aware: bool,
    /// The article's threshold and the eye, when the L∞ test is on.
    linf: Option<(f32, glam::Vec3)>,
}

impl Tester<'_> {
    /// Where `aabb` lies against the frustum (inside for a view without one).
    #[inline]
    fn classify(&self, aabb: &Aabb) -> Containment {
        self.frustum
            .map_or(Containment::Inside, |frustum| frustum.classify(aabb))
    }

    /// Whether a test with error `error` over box `aabb` fails the view (the thing must be
    /// enabled).
    #[inline]
    fn needs(&self, error: f32, aabb: &Aabb) -> bool {
        error > 0.0 && self.classify(aabb) != Containment::Outside && self.fails(error, aabb)
    }

    /// [`Tester::needs`] for a box known not to be outside the frustum.
    #[inline]
    fn fails(&self, error: f32, aabb: &Aabb) -> bool {
        if error <= 0.0 {
            return false;
        }
        if let Some((threshold, eye)) = self.linf
            && error * threshold > aabb.distance_linf_to(eye)
        {
            return true;
        }
        !self.view.accepts(error, aabb, self.view_angle_aware)
    }
}

/// Algorithm A. Borrows the heightfield; owns its static tree, its state and its buffers.
#[derive(Debug)]
pub struct AdaptiveLod<'a> {
    field: &'a Heightfield,
    options: LodOptions,
    adaptive: AdaptiveOptions,
    tree: HeightTree,
    finest: usize,
    /// One word per square: flags, wanted bits, reference counts (see `update`).
    state: Vec<u32>,
    /// Enabled squares per level, in evaluation order, for the disable pass.
    lists: Vec<Vec<(u32, u32)>>,
    /// Squares enabled during the enable pass, to evaluate.
    pending: Vec<(u8, u32, u32)>,
    vertices: GridVertices,
    indices: Vec<u32>,
    morphs: Vec<MorphedHeight>,
    /// Squares that drew triangles in the last selection.
    /// (boxes grown to the drawn heights, which geomorphing can move out of them).
    drawn: Vec<Aabb>,
    stats: SelectionStats,
}

impl<'a> AdaptiveLod<'a> {
    /// Builds the algorithm with `options.adaptive`; `pyramid` must be the pyramid of
    /// `field`.
    pub fn new(field: &'a Heightfield, pyramid: &Pyramid, options: LodOptions) -> AdaptiveLod<'a> {
        Self::with_options(field, pyramid, options, options.adaptive)
    }

    /// Builds the algorithm with its own options.
    pub fn with_options(
        field: &'a Heightfield,
        pyramid: &Pyramid,
        options: LodOptions,
        adaptive: AdaptiveOptions,
    ) -> AdaptiveLod<'a> {
        let tree = HeightTree::build(field, pyramid);
        let finest = tree.levels.len() - 1;
        let mut state = vec![0; tree.records.len()];
        state[0] = ENABLED | WANTED;
        let vertices = GridVertices {
            stride: tree.extent.0 + 1,
            rows: tree.extent.1 + 1,
        };
        AdaptiveLod {
            field,
            options,
            adaptive,
            finest,
            state,
            lists: vec![Vec::new(); finest + 1],
            pending: Vec::new(),
            vertices,
            tree,
            indices: Vec::new(),
            morphs: Vec::new(),
            drawn: Vec::new(),
            stats: SelectionStats::default(),
        }
    }

    /// The vertex buffer the selection indexes.
    pub fn grid_vertices(&self) -> GridVertices {
        self.vertices
    }

    /// Number of enabled squares.
    pub fn enabled_squares(&self) -> usize {
        self.lists.iter().map(Vec::len).sum()
    }

    /// Bytes of one square: its static record plus its state word.
    pub const SQUARE_BYTES: usize = size_of::<records::SquareRecord>() + size_of::<u32>();

    /// Number of squares stored.
    pub fn squares(&self) -> usize {
        self.tree.records.len()
    }

    /// Forgets the state carried across frames (back to the root alone), in time
    /// proportional to the enabled squares: the next selection starts from scratch.
    pub fn reset(&mut self) {
        for level in 0..=self.finest {
            let shape = self.tree.levels[level];
            for &(ix, iz) in &self.lists[level] {
                self.state[shape.id(ix, iz)] = 0;
            }
            self.lists[level].clear();
        }
        self.state[0] = ENABLED | WANTED;
    }

    /// Bytes of the static tree (records of every stored square).
    pub fn static_bytes(&self) -> usize {
        self.tree.bytes()
    }

    /// Update() only: brings the state to `view` without drawing.
    ///
    /// With morphing on, the topology is selected for [`MORPH_SHARE`] of the view's
    /// tolerance; the rest is the morphs' (see `render`).
    pub fn update(&mut self, view: &View) {
        let topology = if self.adaptive.morph {
            view.with_tolerance(view_tolerance(view) * MORPH_SHARE)
                .unwrap_or(*view)
        } else {
            *view
        };
        let tester = self.tester(&topology);
        self.enable_pass(&tester);
        self.disable_pass();
    }

    fn tester<'v>(&self, view: &'v View) -> Tester<'v> {
        let linf = match (self.adaptive.linf_test, view.camera(), view.tolerance()) {
            (true, Some(camera), super::Tolerance::Pixels(px)) => {
                let b = (0.5 * camera.fov_y).tan();
                let a = b * camera.aspect();
                let threshold = camera.pixels_per_radian() * (1.0 + a * a + b * b) / px;
                Some((threshold, camera.eye))
            }
            _ => None,
        };
        Tester {
            view,
            frustum: view.frustum(),
            view_angle_aware: self.options.view_angle_aware,
            linf,
        }
    }
}

impl LodAlgorithm for AdaptiveLod<'_> {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn select(&mut self, view: &View) -> Selection<'_> {
        let started = Instant::now();
        self.stats = SelectionStats::default();
        self.update(view);
        self.indices.clear();
        self.morphs.clear();
        self.drawn.clear();
        let frustum = if view.cull() { view.frustum() } else { None };
        let morpher = Morpher {
            view,
            view_angle_aware: self.options.view_angle_aware,
            budget: if self.adaptive.morph {
                // A hair under the share, for the f32 arithmetic of the drawn heights.
                view_tolerance(view) * (1.0 - MORPH_SHARE) * (1.0 - 2f32.powi(-10))
            } else {
                0.0
            },
        };
        let size = self.tree.levels[0].size;
        let root = [(0, 0), (size, 0), (0, size), (size, size)]
            .map(|(c, r)| self.height_at(GridPos::new(c, r)));
        self.render(frustum, &morpher, (0, 0, 0), root);
        self.morphs.sort_unstable_by_key(|m| m.vertex);
        self.morphs.dedup_by_key(|m| m.vertex);
        self.stats.triangles = (self.indices.len() / 3) as u64;
        self.stats.select_time = started.elapsed();
        Selection::Triangles {
            vertices: self.vertices,
            indices: &self.indices,
            morphs: &self.morphs,
        }
    }

    fn stats(&self) -> &SelectionStats {
        &self.stats
    }

    fn state_bytes(&self) -> usize {
        self.state.len() * size_of::<u32>()
    }

    fn drawn_boxes(&self, out: &mut Vec<Aabb>) {
        out.extend_from_slice(&self.drawn);
    }
}

#[cfg(test)]
mod tests;
