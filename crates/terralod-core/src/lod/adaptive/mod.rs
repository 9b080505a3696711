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
//! Tests only fire for boxes not outside the frustum widened by a guard band
//! ([`AdaptiveOptions::guard_angle`], 5° a side by default) and without its far plane, so
//! nothing is refined for what is neither seen nor about to be (a far plane that follows
//! the eye would change every frame and expire every deadline; what lies beyond it is
//! refined by the error tests alone, and culled by Render()); Render() culls subtrees outside the true frustum
//! when the view culls. Without the band, ground about to enter the view is drawn by the
//! coarse fans of squares across the frustum's edge and jumps to its fine mesh the frame
//! it enters (4.6 px turning 3° a frame in the test, 4.7 px on the bench tour's turn in
//! place); a turn of up to the band's angle a frame finds it refined.
//!
//! # Incremental updates (A4) and determinism
//!
//! The state (flags, reference counts and which sub-squares are enabled, one `u32` per
//! pool slot, and a deadline) is kept across frames. Update() runs in two passes:
//!
//! 1. *Enable*: every enabled square whose deadline has passed is evaluated (the ones
//!    enabled during the pass too, parents before children), enabling what its tests want.
//!    A deadline (see `Motion`) is the camera motion up to which none of the square's
//!    answers can change, worked out from the plain bound and the frustum planes; a square
//!    holds a deadline due no later than any of its subtree's, so unchanged subtrees are
//!    skipped whole.
//! 2. *Disable*, finest level first, over the squares whose inputs changed: an edge vertex
//!    is disabled when its reference count (enabled sub-squares using it as a corner, 0–4,
//!    3 bits) is 0 and neither square sharing it wants it; a square when it is not the
//!    root, has no enabled edge vertex or sub-square and its box test fails: the article's
//!    rules.
//!
//! A sub-square's test only counts when its parent's does (a chain to the root), and a
//! vertex's side only when its square's does, so every passing test is reached from the
//! root through enabled squares. Dependencies point to coarser levels only (a square needs
//! its parent and two parent edge vertices; an edge vertex needs squares of its own
//! level), so the finest-first disable pass leaves exactly the least closed set that holds
//! every passing test, whatever the state before: the incremental mesh equals the mesh of
//! a fresh instance for the same view, triangle for triangle. The cost of an update
//! follows the squares whose answers may have changed. Render() follows the output, but
//! replays the walk of a subtree while the state bits and frustum answers it read are
//! unchanged (`recorded`): its triangles are copied, only its geomorphed heights are
//! computed again.

//! # Sparse storage and the build tolerance (A5)
//!
//! The squares live in a fixed-array pool (`tree`), each with the heights of the vertices
//! it owns, exactly as drawn: the heightfield is only read while building. A square whose
//! subtree error is at most the build tolerance `T` ([`AdaptiveOptions::build_tolerance`])
//! is stored without children, its interior being its fan; the tree is balanced (a
//! square with children has its four neighbours) so every corner a child needs can be
//! drawn, and an edge vertex that lies inside a coarser leaf's edge is never drawn, its
//! interpolation error counted in the square's fan error (kept within `T` by the build).
//! Every error is measured against the source heights, so the tests above hold as stated
//! wherever the tree is fine enough; where a leaf's fan error `L ≤ T` is more than a test
//! accepts, the leaf is drawn whole (its drawable edge vertices enabled) and its samples
//! are within `L` of the drawn surface. Hence, for every sample:
//!
//! - world-error view `M`: within `max(M, L)`, so within `M` whenever `T ≤ M` (`L` is
//!   charged to the morphs' share: their budget is `M − max(M/2, L)`);
//! - screen view `τ`: within `τ + B(L)`, `B(L)` the projected size of a vertical `L` over the
//!   box of the leaf drawing it, and within `τ` wherever `B(L)` is within the topology's
//!   share (`τ/2` with morphing, `τ` without).
//!
//! With `T = 0` (the default) `L = 0`: the sparse tree selects exactly what the full tree
//! does (tested), with the squares below which nothing has an error left out.
//!
//! # Local detail (A5, the article's road)
//!
//! [`AdaptiveLod::with_detail`] inserts a finer heightfield ([`Detail`]): the tree is built
//! over the terrain's grid subdivided `2^k` times and grows finer levels only under the
//! detail's footprint. Every guarantee above holds against the surface the detail defines
//! (module docs of `detail`); the selection's grid says so with [`GridVertices::shift`].
//!
//! # Padding
//!
//! As algorithm Q: squares that do not intersect the data are not stored, a square
//! reaching beyond the leaves' extent has all its stored children enabled and draws
//! nothing itself, so exactly the extent rectangle is drawn.

mod detail;
mod from_tiles;
mod page_file;
mod paging;
mod recorded;
mod records;
mod render;
use render::{Emitted, Listing, RenderBuffers};
mod tree;
mod update;

pub use detail::{Detail, DetailError};
pub use from_tiles::{KeptPages, TiledAdaptive, TilesBuildError};
pub use page_file::{KeptFileError, PageError};
pub use paging::PagedBuildError;

use super::{GridVertices, LodAlgorithm, LodOptions, Selection, SelectionStats, View};
use crate::camera::{Aabb, Containment, Frustum};
use crate::heightfield::Heightfield;
use crate::pyramid::Pyramid;
use crate::rounding::{round_down, round_up};
use render::Morpher;
use std::marker::PhantomData;
use std::time::Instant;
use tree::{Sq, SquareTree};
use update::{ENABLED, WANTED};

// Issue 7 aims below 32 bytes a square (the article reached 36).
const _: () = assert!(AdaptiveLod::SQUARE_BYTES < 32);

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
    /// Build tolerance `T` of the sparse tree (A5), world units: a square whose subtree
    /// error is at most `T` is stored without children (its interior is its fan). Default
    /// 0: lossless, every square whose subtree has any error keeps its children. See the
    /// module docs for the bound a larger `T` keeps.
    pub build_tolerance: f32,
    /// Guard band of Update()'s frustum, radians: squares up to this angle outside the
    /// view are refined as if in it (Render() still culls with the true frustum), so a
    /// turn of up to this much a frame finds the ground entering the view refined, and
    /// it does not pop from the coarse fans drawn across the frustum's edge to fine ones.
    /// Default [`AdaptiveOptions::DEFAULT_GUARD_ANGLE`]; 0 switches it off.
    pub guard_angle: f32,
    /// Cells a side of the squares whose subtrees are *pages* (A8): each page lies in
    /// its own run of the pool, found through a table, so that it can be moved, dropped
    /// and read back on its own. 0, or a size no level has: one pool without pages.
    /// Default [`AdaptiveOptions::DEFAULT_PAGE_CELLS`]. No mesh depends on it.
    pub page_cells: u32,
    /// Frames for pages in the pool (A8 step 2): with `n > 0` at most `n` pages (and
    /// at least those that never leave, plus nine; at most one frame per page) are in
    /// the pool at once, the others copied in when Update() wants them (until then
    /// their roots are drawn as leaves, see [`AdaptiveLod::paging`]) and dropped when
    /// nothing needs them; when a view asks for more pages than fit, the nearest get
    /// the frames and the ground beyond a release radius is coarsened to free them.
    /// 0 (default), or frames too many for a pool: every page stays in the pool (a tree
    /// built page by page to disk, [`AdaptiveLod::from_tiles_on_disk`], is refused then).
    pub page_frames: u32,
    /// Select [`Selection::Listed`]: every drawn vertex with its grid position and drawn
    /// height, so nothing that draws or checks the selection reads the terrain's samples
    /// or a vertex buffer of the whole grid (A8 step 4: the tree's heights are all a tree
    /// paged from tiles has). The same mesh as without; the default (`false`) selects
    /// grid indices and morphs, which upload less and cost nothing to list.
    pub list_vertices: bool,
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
        build_tolerance: 0.0,
        guard_angle: AdaptiveOptions::DEFAULT_GUARD_ANGLE,
        page_cells: AdaptiveOptions::DEFAULT_PAGE_CELLS,
        page_frames: 0,
        list_vertices: false,
    };

    /// The default page: the subtree of a 256-cell square, the tile of `terralod import`'s
    /// default tile size.
    pub const DEFAULT_PAGE_CELLS: u32 = 256;

    /// The default guard band in degrees: 5°, the turn of a brisk mouse look or an
    /// orbit at 60 frames a second.
    pub const DEFAULT_GUARD_DEGREES: f32 = 5.0;
    /// [`AdaptiveOptions::DEFAULT_GUARD_DEGREES`] in radians.
    pub const DEFAULT_GUARD_ANGLE: f32 =
        AdaptiveOptions::DEFAULT_GUARD_DEGREES * std::f32::consts::PI / 180.0;

    pub fn with_linf_test(mut self, on: bool) -> Self {
        self.linf_test = on;
        self
    }

    pub fn with_morph(mut self, on: bool) -> Self {
        self.morph = on;
        self
    }

    /// Sets the guard band of Update()'s frustum (radians; negative or NaN values count
    /// as 0, more than a quarter turn as a quarter turn).
    pub fn with_guard_angle(mut self, angle: f32) -> Self {
        self.guard_angle = if angle > 0.0 {
            angle.min(std::f32::consts::FRAC_PI_2)
        } else {
            0.0
        };
        self
    }

    /// Sets the number of frames for pages (0: every page in the pool).
    pub fn with_page_frames(mut self, frames: u32) -> Self {
        self.page_frames = frames;
        self
    }

    /// Sets the size of the page roots' squares in cells (0: no pages).
    pub fn with_page_cells(mut self, cells: u32) -> Self {
        self.page_cells = cells;
        self
    }

    pub fn with_list_vertices(mut self, on: bool) -> Self {
        self.list_vertices = on;
        self
    }

    /// Sets the build tolerance (world units; negative or NaN values count as 0).
    pub fn with_build_tolerance(mut self, tolerance: f32) -> Self {
        self.build_tolerance = if tolerance > 0.0 { tolerance } else { 0.0 };
        self
    }
}

/// With frames for pages ([`AdaptiveOptions::page_frames`]), the top and frames the
/// algorithm runs in and what serves them; else the tree as it is.
fn split_pages(
    tree: SquareTree,
    adaptive: AdaptiveOptions,
) -> (SquareTree, Option<paging::Paging>) {
    if adaptive.page_frames == 0 || tree.pages().is_empty() {
        return (tree, None);
    }
    match paging::Paging::new(tree, adaptive.page_frames as usize) {
        Ok((live, paging)) => (live, Some(paging)),
        Err(tree) => (*tree, None),
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
    /// The terms of the plain screen bound, when the slack of a test can be worked out
    /// (a screen view, the plain bound, no L∞ test): eye, unit forward, pixels per radian,
    /// τ, near.
    plain: Option<(glam::Vec3, glam::Vec3, f32, f32, f32)>,
}

/// Relative safety margin of a slack against the `f32` arithmetic of the tests.
const SLACK_SAFETY: f32 = 1e-4;

impl Tester<'_> {
    /// Where `aabb` lies against the frustum (inside for a view without one), and the
    /// slack: how far (in [`Motion`] units) the planes may move against the box before
    /// the answer can change.
    fn classify_slack(&self, aabb: &Aabb) -> (Containment, f32) {
        let Some(frustum) = self.frustum else {
            return (Containment::Inside, f32::INFINITY);
        };
        let containment = frustum.classify(aabb);
        if self.plain.is_none() {
            return (containment, 0.0);
        }
        // Per plane: the largest and smallest signed distance over the box, less a margin
        // for the rounding of the planes and the outside test's own relative slack.
        let (mut inside, mut outside, mut reached, mut cut) =
            (f32::INFINITY, 0.0f32, f32::INFINITY, 0.0f32);
        for plane in &frustum.planes {
            let normal = plane.truncate();
            let positive = normal.cmpge(glam::Vec3::ZERO);
            let far_corner = glam::Vec3::select(positive, aabb.max, aabb.min);
            let near_corner = glam::Vec3::select(positive, aabb.min, aabb.max);
            let margin = 2.0 * SLACK_SAFETY * (normal.abs().dot(far_corner.abs()) + plane.w.abs());
            let reach = normal.dot(far_corner) + plane.w;
            let low = normal.dot(near_corner) + plane.w;
            // Inside while every plane has the whole box; outside while one plane has none
            // of it; crossing while no plane loses all of it and one still cuts it.
            inside = inside.min(low - margin);
            outside = outside.max(-reach - margin);
            reached = reached.min(reach - margin);
            cut = cut.max(-low - margin);
        }
        let slack = match containment {
            Containment::Inside => inside,
            Containment::Outside => outside,
            Containment::Intersecting => reached.min(cut),
        };
        (containment, slack.max(0.0))
    }

    /// Distance from the eye to the farthest point of `aabb` (at most), 0 without a camera.
    fn reach(&self, aabb: &Aabb) -> f32 {
        self.plain.map_or(0.0, |(eye, ..)| {
            ((aabb.center() - eye).abs() + aabb.half_extent()).length()
        })
    }

    /// [`Tester::fails`] and its slack: how far (in [`Motion`] units) the camera may move
    /// before the answer can change. With the plain bound `e k D / Z² ≤ τ` (`Z` the box's
    /// least depth, `D` its farthest corner): a motion `m` changes `Z` and `D` by at most
    /// `m`; the quadratic in `m` is bounded by its tangent (accepted) or by a linear bound
    /// for `m ≤ Z` (rejected).
    fn fails_slack(&self, error: f32, aabb: &Aabb) -> (bool, f32) {
        if error <= 0.0 {
            return (false, f32::INFINITY);
        }
        let Some((eye, forward, pixels_per_radian, px, near)) = self.plain else {
            let slack = if self.view.camera().is_none() {
                f32::INFINITY
            } else {
                0.0
            };
            return (self.fails(error, aabb), slack);
        };
        let centre = aabb.center() - eye;
        let extent = aabb.half_extent();
        let depth = forward.dot(centre) - forward.abs().dot(extent);
        let far = (centre.abs() + extent).length_squared();
        let ek = error * pixels_per_radian;
        if depth.is_nan() || depth <= near {
            debug_assert!(self.fails(error, aabb));
            return (true, (near - depth).max(0.0));
        }
        let depth2 = depth * depth;
        let accepted = ek * ek * far <= px * px * depth2 * depth2;
        debug_assert_eq!(!accepted, self.fails(error, aabb));
        let (depth, far, ek, px, near) = (
            f64::from(depth),
            f64::from(far).sqrt(),
            f64::from(ek),
            f64::from(px),
            f64::from(near),
        );
        let gap = px * depth * depth - ek * far;
        let rounding = f64::from(SLACK_SAFETY) * 0.1 * (px * depth * depth + ek * far);
        let slack = if accepted {
            ((gap - rounding) / (2.0 * px * depth + ek)).min(depth - near)
        } else {
            ((-gap - rounding) / (ek + 3.0 * px * depth)).min(depth)
        } - f64::from(SLACK_SAFETY) * far;
        (!accepted, slack.max(0.0) as f32)
    }

    /// Whether a test with error `error` over box `aabb` (not outside the frustum) fails
    /// the view: the thing must be enabled.
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

/// The camera motion accumulated since the deadlines were last restarted: `moved`, the
/// eye's path length, and `turned`, the summed `‖ΔR‖` of its rotation. A point at distance
/// `d` from the eye then moved against every frustum plane and the view direction by at
/// most `moved + turned · d`. A square whose tests have slack `s` there (see
/// [`Tester::fails_slack`]) keeps its answers while `moved + d · turned` grows by less
/// than `s`: its deadline is that line, whatever mix of moving and turning the camera
/// makes (see [`Motion::deadline`]).
#[derive(Clone, Copy, Debug)]
struct Motion {
    /// The last view's camera (eye, right, up, forward) and what else it depends on: the
    /// state is re-tested in full when any of the latter changes.
    last: Option<([glam::Vec3; 4], ViewKey)>,
    moved: f64,
    turned: f64,
    /// The terrain's size: the distance at which `turned` is weighed to decide a restart,
    /// once `moved + size · turned` passes [`RESTART_SIZES`] of it (the limits are f32).
    size: f64,
}

/// Terrain sizes of motion after which the deadlines are restarted.
const RESTART_SIZES: f64 = 64.0;

/// A deadline of [`Motion`], `[d, limit]`: due once `moved + d · turned` reaches `limit`.
pub(super) type Deadline = [f32; 2];

/// A deadline that is due at once.
pub(super) const EXPIRED: Deadline = [0.0, f32::NEG_INFINITY];

/// A deadline that is never due (until a restart).
const NEVER: Deadline = [0.0, f32::INFINITY];

/// What the tests depend on besides the eye and orientation.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ViewKey {
    tolerance: super::Tolerance,
    /// Vertical field of view, viewport and near distance (not the far one: Update()
    /// ignores the far plane).
    lens: Option<(f32, (u32, u32), f32)>,
}

impl Motion {
    /// Advances to `view`; true when every enabled square must be tested again.
    fn advance(&mut self, view: &View) -> bool {
        let key = ViewKey {
            tolerance: view.tolerance(),
            lens: view.camera().map(|c| (c.fov_y, c.viewport, c.near)),
        };
        let pose = view.camera().map_or([glam::Vec3::ZERO; 4], |c| {
            [c.eye, c.right(), c.up(), c.forward()]
        });
        let full = match self.last {
            Some((last, last_key)) if last_key == key => {
                let moved = f64::from((pose[0] - last[0]).length());
                let turned = (1..4)
                    .map(|i| f64::from((pose[i] - last[i]).length_squared()))
                    .sum::<f64>()
                    .sqrt();
                // Margins for the f32 rounding of the camera's eye and axes.
                self.moved += moved * (1.0 + 1e-5);
                self.turned += turned * (1.0 + 1e-5) + 1e-6;
                self.moved + self.size * self.turned > RESTART_SIZES * self.size
            }
            _ => true,
        };
        if full {
            self.moved = 0.0;
            self.turned = 0.0;
        }
        self.last = Some((pose, key));
        full
    }

    /// The deadline of a square tested now with slack `slack` and farthest point `far`
    /// from the eye. A line in `(moved, turned)` holds every mix of moving and turning
    /// that cannot change the answers; a pair of limits (one for each, the first
    /// version) had to split the slack between them, and a camera whose orientation
    /// wobbles from step to step (`f32` eyes and targets) used up the turning half in a
    /// step or two.
    fn deadline(&self, slack: f32, far: f32) -> Deadline {
        if slack == f32::INFINITY {
            return NEVER;
        }
        let limit = self.moved + f64::from(far) * self.turned + f64::from(slack);
        // A box beyond `f32` (or not a number) is tested again every frame.
        if !far.is_finite() || limit.is_nan() {
            return EXPIRED;
        }
        [far, round_down(limit)]
    }

    /// Whether a deadline has passed.
    #[inline]
    fn due(&self, deadline: Deadline) -> bool {
        self.moved + f64::from(deadline[0]) * self.turned >= f64::from(deadline[1])
    }

    /// A deadline due no later than either of two (a subtree's, from its squares'). From
    /// here, each leaves room for a triangle of motions (moving alone up to its `moving`
    /// room, turning alone up to its `turning` room, and the mixes between); the line
    /// through the smaller of each room bounds a triangle inside both (the rooms'
    /// region is convex). Taking the larger distance and the lower limit instead would
    /// also do, but a subtree of near and far squares would then be due long before any
    /// of them under a camera that turns a little every step.
    pub(super) fn earlier(&self, a: Deadline, b: Deadline) -> Deadline {
        // Room left: moving alone, turning alone.
        let room = |d: Deadline| {
            let moving = f64::from(d[1]) - self.moved - f64::from(d[0]) * self.turned;
            (moving, moving / f64::from(d[0]))
        };
        let ((moving_a, turning_a), (moving_b, turning_b)) = (room(a), room(b));
        if moving_a.is_nan() || moving_b.is_nan() {
            return EXPIRED;
        }
        let (moving, turning) = (moving_a.min(moving_b), turning_a.min(turning_b));
        if moving <= 0.0 {
            return EXPIRED;
        }
        if moving == f64::INFINITY {
            return NEVER;
        }
        // The distance rounded up and the limit down: the line stays inside.
        let far = if turning == f64::INFINITY {
            0.0
        } else {
            round_up(moving / turning)
        };
        [
            far,
            round_down(self.moved + f64::from(far) * self.turned + moving),
        ]
    }
}

/// The fine grid of a selection with local detail: positions off the terrain's samples,
/// and samples the footprint covers (`last`: the data's last fine column and row, for the
/// padding rule), are drawn at heights the grid's own do not give.
#[derive(Clone, Copy, Debug)]
struct FineGrid {
    shift: u32,
    footprint: [u32; 4],
    last: (u32, u32),
}

impl FineGrid {
    /// Whether the grid's own height at `pos` is not the drawn one.
    #[inline]
    fn replaced(&self, pos: crate::heightfield::GridPos) -> bool {
        let mask = (1 << self.shift) - 1;
        if (pos.col | pos.row) & mask != 0 {
            return true;
        }
        let (col, row) = (pos.col.min(self.last.0), pos.row.min(self.last.1));
        let [x0, z0, x1, z1] = self.footprint;
        (x0..=x1).contains(&col) && (z0..=z1).contains(&row)
    }
}

/// What algorithm A's frames for pages hold and did ([`AdaptiveLod::paging`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PagingStats {
    /// Pages in the pool.
    pub resident: usize,
    pub frames: usize,
    /// Pages in the pool that are released: farther from the eye than the frames can
    /// afford, their squares want nothing, so they coarsen and leave for nearer ground
    /// (forced coarsening).
    pub released: usize,
    /// The release radius: pages whose root's box lies farther from the eye are held
    /// coarse (world units; infinite while the frames hold what the view asks for).
    pub radius: f32,
    /// Squares the last update held back for want of a page: a missing page root drawn
    /// as a leaf though its subtree test fails, or a square beside a missing page left
    /// as it is (its bound may then not hold).
    pub held_back: usize,
    /// The distance from the eye of the nearest square held back (infinite if none was):
    /// nearer ground was drawn as the tolerance asks.
    pub nearest_held_back: f32,
    /// Pages copied in and dropped so far.
    pub copied_in: usize,
    pub dropped: usize,
    /// Whether the pages wait on disk ([`AdaptiveLod::spool_pages`]), else in memory.
    pub on_disk: bool,
    /// Pages read from disk so far, being read now, and that could not be read.
    pub loaded: usize,
    pub loading: usize,
    pub failures: usize,
    /// Bytes of the page file read so far.
    pub bytes_read: u64,
    /// The longest time an update spent taking pages in and copying them to frames
    /// (never reading: the loader thread reads).
    pub longest_serve: std::time::Duration,
}

/// Algorithm A. Owns its sparse tree (built from a heightfield, whose heights it then holds
/// itself), its state and its buffers.
#[derive(Debug)]
pub struct AdaptiveLod<'a> {
    _field: PhantomData<&'a Heightfield>,
    options: LodOptions,
    adaptive: AdaptiveOptions,
    tree: SquareTree,
    finest: usize,
    /// One word per pool slot: flags, wanted bits, reference counts (see `update`).
    state: Vec<u32>,
    /// Squares evaluated this frame, per level, for clearing their marks.
    lists: Vec<Vec<Sq>>,
    /// Squares enabled during the enable pass, to evaluate.
    pending: Vec<Sq>,
    /// Per level, squares whose disable rules may hold after this frame's enable pass.
    candidates: Vec<Vec<Sq>>,
    /// Per square, a deadline (see [`Motion`]) due no later than any of the enabled
    /// squares of its subtree: nothing in it needs testing before.
    deadline: Vec<Deadline>,
    motion: Motion,
    /// Whether this update tests every enabled square (the view changed otherwise than by
    /// its eye and orientation, or the state was reset).
    full: bool,
    enabled: usize,
    vertices: GridVertices,
    /// What the last selection drew.
    emitted: Emitted,
    render_buffers: RenderBuffers,
    /// The last frame's triangles and vertices, with
    /// [`AdaptiveOptions::list_vertices`].
    listing: Listing,
    /// With local detail: which drawn positions the grid's own heights do not give.
    fine: Option<FineGrid>,
    /// With frames for pages: the pages not in the pool and the frames.
    paging: Option<paging::Paging>,
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
        let tree = tree::build_from_field(
            field,
            pyramid,
            adaptive.build_tolerance,
            adaptive.page_cells,
        );
        Self::from_tree(tree, options, adaptive, None)
    }

    /// [`AdaptiveLod::with_detail`]: a tree too large for memory (or for `budget`, per
    /// allocation) is refused with [`DetailError::TooLarge`] before it is built.
    fn with_detail_within(
        field: &'a Heightfield,
        pyramid: &Pyramid,
        options: LodOptions,
        adaptive: AdaptiveOptions,
        detail: &Detail<'_>,
        budget: tree::Budget,
    ) -> Result<AdaptiveLod<'a>, DetailError> {
        if !detail.fits(field) {
            return Err(DetailError::Terrain);
        }
        detail.check_indices(adaptive.list_vertices)?;
        let source = detail::DetailSource::new(field, pyramid, *detail, budget)?;
        let tree = tree::build(
            &source,
            adaptive.build_tolerance,
            adaptive.page_cells,
            budget,
        )?;
        let (tree, paging) = split_pages(tree, adaptive);
        // The per-frame state: a word and a deadline per pool slot.
        let mut state = budget.vec::<u32>(tree.slots())?;
        let mut deadline = budget.vec::<Deadline>(tree.slots())?;
        state.resize(tree.slots(), 0);
        deadline.resize(tree.slots(), EXPIRED);
        let fine = FineGrid {
            shift: detail.shift(),
            footprint: detail.footprint(),
            last: (
                (field.width() - 1) << detail.shift(),
                (field.height() - 1) << detail.shift(),
            ),
        };
        Ok(Self::from_parts(
            tree,
            paging,
            state,
            deadline,
            options,
            adaptive,
            Some(fine),
        ))
    }

    /// Builds the algorithm with a finer heightfield inserted (A5's local detail, see
    /// [`Detail`]): the tree grows `detail.shift()` more levels under the detail's
    /// footprint only, the selection's grid is the terrain's subdivided `2^shift` times
    /// ([`GridVertices::shift`]), and every bound holds against the surface the detail
    /// defines (the detail where it covers, the terrain's full-resolution surface
    /// elsewhere; module docs of `detail`). `detail` must have been placed on `field`.
    pub fn with_detail(
        field: &'a Heightfield,
        pyramid: &Pyramid,
        options: LodOptions,
        adaptive: AdaptiveOptions,
        detail: &Detail<'_>,
    ) -> Result<AdaptiveLod<'a>, DetailError> {
        let budget = tree::Budget::UNLIMITED;
        Self::with_detail_within(field, pyramid, options, adaptive, detail, budget)
    }

    /// The algorithm over a built tree.
    fn from_tree(
        tree: SquareTree,
        options: LodOptions,
        adaptive: AdaptiveOptions,
        fine: Option<FineGrid>,
    ) -> Self {
        let (tree, paging) = split_pages(tree, adaptive);
        let (state, deadline) = (vec![0; tree.slots()], vec![EXPIRED; tree.slots()]);
        Self::from_parts(tree, paging, state, deadline, options, adaptive, fine)
    }

    /// The algorithm over a built tree and its zeroed state and expired deadlines.
    #[allow(clippy::too_many_arguments)]
    fn from_parts(
        tree: SquareTree,
        paging: Option<paging::Paging>,
        mut state: Vec<u32>,
        deadline: Vec<Deadline>,
        options: LodOptions,
        adaptive: AdaptiveOptions,
        fine: Option<FineGrid>,
    ) -> Self {
        let finest = tree.levels.len() - 1;
        state[0] = ENABLED | WANTED;
        let vertices = GridVertices {
            stride: tree.extent.0 + 1,
            rows: tree.extent.1 + 1,
            shift: fine.map_or(0, |f| f.shift),
        };
        AdaptiveLod {
            _field: PhantomData,
            options,
            adaptive,
            finest,
            state,
            lists: vec![Vec::new(); finest + 1],
            pending: Vec::new(),
            candidates: vec![Vec::new(); finest + 1],
            deadline,
            motion: Motion {
                last: None,
                moved: 0.0,
                turned: 0.0,
                size: f64::from(tree.levels[0].size as f32 * tree.cell_size),
            },
            full: true,
            enabled: 1,
            vertices,
            tree,
            emitted: Emitted::default(),
            render_buffers: RenderBuffers::default(),
            listing: Listing::default(),
            fine,
            paging,
            stats: SelectionStats::default(),
        }
    }

    /// The vertex buffer the selection indexes.
    pub fn grid_vertices(&self) -> GridVertices {
        self.vertices
    }

    /// With frames for pages ([`AdaptiveOptions::page_frames`]): what they hold and did.
    pub fn paging(&self) -> Option<PagingStats> {
        self.paging.as_ref().map(|p| PagingStats {
            resident: p.resident(),
            frames: p.frames(),
            released: p.released(),
            radius: p.radius(),
            held_back: p.held_back,
            nearest_held_back: p.nearest_held,
            copied_in: p.copied_in,
            dropped: p.dropped,
            on_disk: p.spool().is_some(),
            loaded: p.loaded,
            loading: p.loading(),
            failures: p.failures,
            bytes_read: p.bytes_read(),
            longest_serve: p.longest_serve,
        })
    }

    /// With frames for pages: moves the pages waiting in memory to a file in `dir` (a
    /// spool without a name, gone with the algorithm or the process), read back on a
    /// loader thread
    /// when Update() asks for them; no update waits for a read. On failure (or without
    /// frames, [`PageError::NotPaged`]) nothing changes and no file is left.
    pub fn spool_pages(&mut self, dir: &std::path::Path) -> Result<(), PageError> {
        self.paging
            .as_mut()
            .ok_or(PageError::NotPaged)?
            .spool_to(dir)
    }

    /// With frames for pages, the algorithm with its pages on disk in `dir`
    /// ([`AdaptiveLod::spool_pages`]); without, the algorithm as it is. What the registry
    /// and the command line build: frames are there to bound memory.
    pub fn with_pages_in(mut self, dir: &std::path::Path) -> Result<Self, PageError> {
        if self.paging.is_some() {
            self.spool_pages(dir)?;
        }
        Ok(self)
    }

    /// The folder of the page file, when the pages are on disk.
    pub fn page_dir(&self) -> Option<&std::path::Path> {
        let paging = self.paging.as_ref()?;
        paging.spool().map(|spool| spool.dir())
    }

    /// The page file, when the pages are on disk: it has no name (so it goes with the
    /// process, however that ends), and this handle is for inspecting it, or damaging
    /// it on purpose in tests of the fault handling.
    pub fn page_file(&self) -> Option<&std::fs::File> {
        let paging = self.paging.as_ref()?;
        paging.spool().map(|spool| spool.file())
    }

    /// Blocks until every page requested from disk has been read (they are copied in
    /// by the next update): for tests and measurements that want a settled state.
    pub fn await_pages(&mut self) {
        if let Some(paging) = &mut self.paging {
            paging.receive(true);
        }
    }

    /// Pages that could not be read from disk since the last call, each reported once
    /// (their roots stay leaves: the ground around them is drawn coarser).
    pub fn take_page_faults(&mut self) -> Vec<PageError> {
        self.paging
            .as_mut()
            .map_or_else(Vec::new, |p| p.take_faults())
    }

    /// Number of enabled squares.
    pub fn enabled_squares(&self) -> usize {
        self.enabled
    }

    /// Of the squares below the subtrees' roots that the last Render() went through (see
    /// `recorded`; those that draw nothing themselves included): how many came from a
    /// replayed walk of an earlier frame, and how many in all.
    pub fn render_reuse(&self) -> (usize, usize) {
        self.render_buffers.reused
    }

    /// Bytes Render() keeps across frames: its recorded walks and their output buffers
    /// (the listing's included).
    pub fn render_bytes(&self) -> usize {
        self.render_buffers.bytes()
            + self.listing.vertices.capacity() * size_of::<crate::lod::ListedVertex>()
            + self.listing.indices.capacity() * size_of::<u32>()
    }

    /// Bytes of one pool slot of a 16-bit source: its static record, its three vertex
    /// heights (16-bit codes; `f32` for float sources, 6 bytes more), its state word and
    /// its deadline. The pool adds per block of four slots its parent's index and per 64
    /// slots a rank word (1.25 bytes a slot), see [`AdaptiveLod::bytes_per_square`].
    pub const SQUARE_BYTES: usize = size_of::<records::SquareRecord>()
        + size_of::<[u16; 3]>()
        + size_of::<u32>()
        + size_of::<Deadline>();

    /// Number of squares stored.
    pub fn squares(&self) -> usize {
        self.tree.squares()
    }

    /// Number of pages (A8; see [`AdaptiveOptions::page_cells`]).
    pub fn pages(&self) -> usize {
        self.tree.pages().len()
    }

    /// Number of pool slots (the squares, the slots of children beyond the data and the
    /// empty blocks that start the top's levels and the pages on a rank word).
    pub fn pool_slots(&self) -> usize {
        self.tree.slots()
    }

    /// Everything the tree and its state take, per stored square.
    pub fn bytes_per_square(&self) -> f64 {
        (self.static_bytes() + self.state_bytes()) as f64 / self.squares() as f64
    }

    /// Whether vertex heights are stored as 16-bit codes (else as `f32`).
    pub fn height_codes(&self) -> bool {
        self.tree.heights.exact()
    }

    /// Forgets the state carried across frames (back to the root alone), in time
    /// proportional to the enabled squares: the next selection starts from scratch.
    pub fn reset(&mut self) {
        self.clear_subtree(tree::ROOT);
        self.state[0] = ENABLED | WANTED;
        self.deadline[0] = EXPIRED;
        self.enabled = 1;
        self.motion.last = None;
    }

    /// Clears the state of the enabled square `id` and its enabled descendants.
    fn clear_subtree(&mut self, id: u32) {
        let children = update::enabled_children(self.state[id as usize]);
        self.state[id as usize] = 0;
        if children != 0 {
            let first = self.tree.first_child(id);
            for k in (0..4).filter(|k| children & 1 << k != 0) {
                self.clear_subtree(first + k);
            }
        }
    }

    /// Bytes of the static tree (records with their heights, block parents, rank words,
    /// border vertices).
    pub fn static_bytes(&self) -> usize {
        // With frames for pages kept in memory, the pages waiting there too.
        self.tree.bytes() + self.paging.as_ref().map_or(0, |p| p.store_bytes())
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
        let guard = topology.camera().map(|camera| self.guard_frustum(camera));
        if let Some(paging) = &mut self.paging
            && paging.serve(
                &mut self.tree,
                &mut self.state,
                &mut self.deadline,
                topology.camera().map(|camera| camera.eye),
            )
        {
            // Recorded walks may hold slots of frames that now hold other squares.
            self.render_buffers.forget();
        }
        let tester = self.tester(&topology, guard.as_ref());
        self.full = self.motion.advance(&topology);
        self.enable_pass(&tester);
        self.disable_pass();
        if let Some(paging) = &mut self.paging {
            paging.end_update(&self.tree, &self.state, &mut self.deadline);
        }
    }

    /// Update()'s frustum: the camera's, widened by the guard band, without a far plane
    /// (the near one twice): a far plane that follows the eye, as `terralod bench` and
    /// the viewer's may, would change every frame and re-test every square. Beyond it the
    /// error tests still bound the refinement, and Render() culls with the true frustum.
    fn guard_frustum(&self, camera: &crate::camera::Camera) -> Frustum {
        let mut guard = camera.frustum_widened(self.adaptive.guard_angle);
        guard.planes[Frustum::FAR] = guard.planes[Frustum::NEAR];
        guard
    }

    /// The tests for `view`, refining what lies in `frustum` (the view's, widened by the
    /// guard band).
    fn tester<'v>(&self, view: &'v View, frustum: Option<&'v Frustum>) -> Tester<'v> {
        let linf = match (self.adaptive.linf_test, view.camera(), view.tolerance()) {
            (true, Some(camera), super::Tolerance::Pixels(px)) => {
                let b = (0.5 * camera.fov_y).tan();
                let a = b * camera.aspect();
                let threshold = camera.pixels_per_radian() * (1.0 + a * a + b * b) / px;
                Some((threshold, camera.eye))
            }
            _ => None,
        };
        let plain = match (view.camera(), view.tolerance()) {
            (Some(camera), super::Tolerance::Pixels(px))
                if linf.is_none() && !self.options.view_angle_aware =>
            {
                Some((
                    camera.eye,
                    camera.forward(),
                    camera.pixels_per_radian(),
                    px,
                    camera.near,
                ))
            }
            _ => None,
        };
        Tester {
            view,
            frustum,
            view_angle_aware: self.options.view_angle_aware,
            linf,
            plain,
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
        let frustum = if view.cull() { view.frustum() } else { None };
        let morpher = Morpher {
            view,
            view_angle_aware: self.options.view_angle_aware,
            budget: if self.adaptive.morph {
                let share = match view.tolerance() {
                    super::Tolerance::Pixels(px) => px * (1.0 - MORPH_SHARE),
                    // The build tolerance is charged here: where a leaf is coarser than
                    // the topology's share, its error takes that much of the morphs'.
                    super::Tolerance::WorldError(m) => {
                        (m - (m * MORPH_SHARE).max(self.tree.leaf_error())).max(0.0)
                    }
                };
                // A hair under the share, for the f32 arithmetic of the drawn heights.
                share * (1.0 - 2f32.powi(-10))
            } else {
                0.0
            },
            topology: view_tolerance(view) * MORPH_SHARE,
        };
        let root = self.tree.root_corners;
        let side = self.tree.levels[0].size;
        let mut emitted = std::mem::take(&mut self.emitted);
        emitted.clear();
        for (k, (col, row)) in [(0, 0), (side, 0), (0, side), (side, side)]
            .into_iter()
            .enumerate()
        {
            // Drawn by every square at that corner, listed once (with local detail).
            let corner = crate::heightfield::GridPos::new(col, row);
            self.push_morph(&mut emitted, corner, root[k], root[k]);
        }
        // An edge vertex drawn by both its squares is listed by both, with the same height
        // (consumers take either; sorting them out cost 8 % of a frame).
        let mut buffers = std::mem::take(&mut self.render_buffers);
        self.render_all(&mut emitted, &mut buffers, frustum, &morpher, root);
        self.render_buffers = buffers;
        self.emitted = emitted;
        self.stats.nodes_drawn = self.emitted.nodes_drawn;
        self.stats.triangles = (self.emitted.indices.len() / 3) as u64;
        if self.adaptive.list_vertices {
            let depth = self.subtree_depth();
            self.render_buffers
                .list(&self.tree, depth, &mut self.listing);
            self.stats.triangles = (self.listing.indices.len() / 3) as u64;
            self.stats.select_time = started.elapsed();
            return Selection::Listed {
                vertices: &self.listing.vertices,
                indices: &self.listing.indices,
                shift: self.vertices.shift,
            };
        }
        self.stats.select_time = started.elapsed();
        Selection::Triangles {
            vertices: self.vertices,
            indices: &self.emitted.indices,
            morphs: &self.emitted.morphs,
        }
    }

    fn stats(&self) -> &SelectionStats {
        &self.stats
    }

    fn state_bytes(&self) -> usize {
        self.state.len() * size_of::<u32>() + self.deadline.len() * size_of::<Deadline>()
    }

    /// A tree built with a tolerance `T > 0` keeps a screen view's samples within
    /// `τ + B(L)`, `L ≤ T` a leaf's fan error, not within `τ` (module docs).
    fn error_bounded(&self) -> bool {
        self.adaptive.build_tolerance == 0.0
    }

    fn drawn_boxes(&self, out: &mut Vec<Aabb>) {
        self.render_buffers.drawn_boxes(self.subtree_depth(), out);
    }

    fn reads(&self) -> super::Reads {
        self.paging
            .as_ref()
            .map_or_else(super::Reads::default, |p| super::Reads {
                held_back: p.held_back,
                faulty: p.held_by_faults,
                nearest_held_back: p.nearest_held.is_finite().then_some(p.nearest_held),
                pending: p.pending(&self.tree, &self.state),
                failed: p.failures,
                loaded: p.loaded,
                bytes_read: p.bytes_read(),
            })
    }

    fn await_reads(&mut self) {
        self.await_pages();
    }

    fn take_faults(&mut self) -> Vec<Box<dyn std::error::Error + Send + Sync>> {
        let faults = self.take_page_faults().into_iter();
        faults
            .map(|f| Box::new(f) as Box<dyn std::error::Error + Send + Sync>)
            .collect()
    }
}

#[cfg(test)]
mod tests;
