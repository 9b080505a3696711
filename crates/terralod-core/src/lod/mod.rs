//! Level-of-detail selection: the interface every LOD algorithm implements, the view it
//! selects for, the selection it returns and the registry that the CLI, the property tests
//! and the benches iterate over.
//!
//! # The interface
//!
//! An algorithm is built once per terrain ([`AlgorithmEntry::build`]) and then asked once
//! per frame for a [`Selection`] ([`LodAlgorithm::select`]). It owns every buffer the
//! selection borrows and reuses them across frames, so a warmed-up frame allocates nothing;
//! state carried across frames (frame stamps, incremental trees) lives inside it too.
//!
//! A selection is either explicit triangles over the static grid vertex buffer (vertex
//! `row * stride + col`, one index buffer filled per frame: algorithms Q and A; with
//! algorithm A's local detail the grid is subdivided, [`GridVertices::shift`]) or patches
//! instanced over index buffers shared by every patch (algorithms C and P). Both can be
//! expanded into a [`GridMesh`] ([`Selection::to_mesh`]) so one checker serves all.
//! Vertex morphing plugs in through [`MorphedHeight`]: the drawn height of a vertex that is
//! not at its sample's height.
//!
//! # The two modes
//!
//! - View-dependent ([`View::screen`]): the projected error of every sample in view stays
//!   within a tolerance in pixels of the viewport height; nodes outside the frustum may be
//!   culled.
//! - View-independent ([`View::world_error`]): every sample within a vertical distance of
//!   the mesh, full coverage, no culling (what martini and delatin produce).

pub mod adaptive;
pub mod bintree;
pub mod chunked;
pub mod patches;
pub mod presets;
pub mod quadtree;
pub mod stitched_patch;
pub mod streamed;
pub mod streamed_quadtree;

use crate::camera::{Aabb, BoxLanes, Camera, CameraError, Containment, ErrorProjector, Frustum};
use crate::heightfield::{GridPos, Heightfield};
use crate::mesh::GridMesh;
use crate::pyramid::Pyramid;
pub(crate) use crate::rounding::round_up;
use glam::{Vec3, Vec4};
use std::collections::HashMap;
use std::time::Duration;

pub use adaptive::{
    AdaptiveLod, AdaptiveOptions, Detail, DetailError, KeptFileError, KeptPages, PageError,
    PagedBuildError, PagingStats, TiledAdaptive, TilesBuildError,
};
pub use bintree::BintreeLod;
pub use chunked::{ChunkedLod, ChunkedOptions};
pub use patches::{PatchOptions, PatchPool, PatchStats, PatchesLod, PoolError};
pub use presets::{AutoTolerance, Quality};
pub use quadtree::QuadtreeLod;
pub use streamed::{StreamStats, StreamedLod};
pub use streamed_quadtree::{StreamedQuadtreeLod, StreamedQuadtreeStats};

/// The error bound a selection keeps.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Tolerance {
    /// Projected error, in pixels of the viewport height.
    Pixels(f32),
    /// Vertical error, in world units, everywhere (view-independent).
    WorldError(f32),
}

/// Why a view cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ViewError {
    #[error("tolerance {value} must be finite and greater than 0")]
    Tolerance { value: f32 },
    #[error("invalid camera: {0}")]
    Camera(CameraError),
}

/// Camera terms computed once per view, for the screen-space error bounds.
#[derive(Clone, Copy, Debug)]
struct ScreenTerms {
    camera: Camera,
    frustum: Frustum,
    projector: ErrorProjector,
    eye: Vec3,
    forward: Vec3,
    pixels_per_radian: f32,
}

/// What a selection is made for: a camera and a tolerance in pixels, or a world error.
#[derive(Clone, Copy, Debug)]
pub struct View {
    screen: Option<ScreenTerms>,
    tolerance: Tolerance,
    cull: bool,
}

impl View {
    /// A view-dependent view: projected error at most `pixels` for `camera`, with frustum
    /// culling (switch it off with [`View::with_cull`]).
    pub fn screen(camera: Camera, pixels: f32) -> Result<View, ViewError> {
        camera.validate().map_err(ViewError::Camera)?;
        check_tolerance(pixels)?;
        Ok(View {
            screen: Some(ScreenTerms {
                camera,
                frustum: camera.frustum(),
                projector: camera.error_projector(),
                eye: camera.eye,
                forward: camera.forward(),
                pixels_per_radian: camera.pixels_per_radian(),
            }),
            tolerance: Tolerance::Pixels(pixels),
            cull: true,
        })
    }

    /// A view-independent view: every sample within `max_error` world units (vertically)
    /// of the mesh, the whole terrain covered.
    pub fn world_error(max_error: f32) -> Result<View, ViewError> {
        check_tolerance(max_error)?;
        Ok(View {
            screen: None,
            tolerance: Tolerance::WorldError(max_error),
            cull: false,
        })
    }

    /// Switches frustum culling on or off (a view-independent view never culls). Without
    /// culling, nodes outside the view are drawn but not refined for the view's sake.
    pub fn with_cull(mut self, cull: bool) -> View {
        self.cull = cull && self.screen.is_some();
        self
    }

    /// The same view with another tolerance of the same kind (what the automatic τ
    /// controller changes from frame to frame).
    pub fn with_tolerance(mut self, value: f32) -> Result<View, ViewError> {
        check_tolerance(value)?;
        self.tolerance = match self.tolerance {
            Tolerance::Pixels(_) => Tolerance::Pixels(value),
            Tolerance::WorldError(_) => Tolerance::WorldError(value),
        };
        Ok(self)
    }

    pub fn camera(&self) -> Option<&Camera> {
        self.screen.as_ref().map(|s| &s.camera)
    }

    pub fn frustum(&self) -> Option<&Frustum> {
        self.screen.as_ref().map(|s| &s.frustum)
    }

    pub fn tolerance(&self) -> Tolerance {
        self.tolerance
    }

    /// Whether nodes outside the frustum are skipped.
    pub fn cull(&self) -> bool {
        self.cull
    }

    /// The one screen-space error function every algorithm uses, so they are compared
    /// like with like: an upper bound, in pixels, of how far apart on screen any two points
    /// of `aabb` that differ by at most `world_error` vertically are drawn. Infinite when
    /// the box reaches the near plane or behind the eye (such a box must be refined: a
    /// drawn point there may not even project). 0 for a view-independent view.
    ///
    /// With `view_angle_aware` the bound is the error projected through the camera's
    /// Jacobian ([`ErrorProjector::vertical_error_bound`]: article 000's error vector
    /// projected on the up axis, made safe off the view axis); otherwise the error is taken
    /// as pointing anywhere: for a displacement `δ` at view-space point `(x, y, z)` the
    /// screen moves `k |(z δx − x δz, z δy − y δz)| / (z z')` pixels, at most
    /// `k |δ| · |p| / (z z')`, so `k · e · D / Z²` bounds it over the box (`D` its farthest
    /// distance from the eye, `Z` its smallest depth). At the screen centre this is the
    /// classic `e · k / d` of H6; towards the corners it grows as it must.
    pub fn projected_error_bound(
        &self,
        world_error: f32,
        aabb: &Aabb,
        view_angle_aware: bool,
    ) -> f32 {
        let Some(s) = &self.screen else {
            return 0.0;
        };
        if world_error <= 0.0 {
            // Nothing moves, even at the near plane.
            return 0.0;
        }
        let centre = aabb.center() - s.eye;
        let extent = aabb.half_extent();
        let depth = s.forward.dot(centre) - s.forward.abs().dot(extent);
        if depth.is_nan() || depth <= s.camera.near {
            return f32::INFINITY;
        }
        if view_angle_aware {
            s.projector.vertical_error_bound(world_error, aabb)
        } else {
            let farthest = (centre.abs() + extent).length();
            world_error * s.pixels_per_radian * farthest / (depth * depth)
        }
    }

    /// [`View::projected_error_bound`] of a unit error over `aabb` grown vertically, for any
    /// growth, with what does not depend on the growth computed once: algorithm A's
    /// morphs ask it of one box for several growths. `None` for a view-independent view.
    pub fn unit_projection(&self, aabb: &Aabb, view_angle_aware: bool) -> Option<UnitProjection> {
        let s = self.screen.as_ref()?;
        if view_angle_aware {
            return Some(UnitProjection::ViewAngleAware(*aabb));
        }
        let centre = aabb.center() - s.eye;
        let extent = aabb.half_extent();
        let reach = centre.abs() + extent;
        Some(UnitProjection::Plain {
            scale: s.pixels_per_radian,
            across: reach.x * reach.x + reach.z * reach.z,
            up: reach.y,
            depth: s.forward.dot(centre) - s.forward.abs().dot(extent),
            depth_per_growth: s.forward.y.abs(),
            near: s.camera.near,
        })
    }

    /// Whether a node with drawn error bound `world_error` and box `aabb` is fine enough
    /// for this view.
    #[inline(always)]
    pub fn accepts(&self, world_error: f32, aabb: &Aabb, view_angle_aware: bool) -> bool {
        match self.tolerance {
            Tolerance::WorldError(max) => world_error <= max,
            Tolerance::Pixels(px) => {
                if world_error <= 0.0 {
                    return true;
                }
                match (&self.screen, view_angle_aware) {
                    // The plain bound without its square root and division (hot path):
                    // e k D / Z² <= τ  ⟺  (e k)² D² <= τ² Z⁴ for Z > near > 0.
                    (Some(s), false) => {
                        let centre = aabb.center() - s.eye;
                        let extent = aabb.half_extent();
                        let depth = s.forward.dot(centre) - s.forward.abs().dot(extent);
                        if depth.is_nan() || depth <= s.camera.near {
                            return false;
                        }
                        let ek = world_error * s.pixels_per_radian;
                        let depth2 = depth * depth;
                        ek * ek * (centre.abs() + extent).length_squared()
                            <= px * px * depth2 * depth2
                    }
                    _ => self.projected_error_bound(world_error, aabb, view_angle_aware) <= px,
                }
            }
        }
    }
}

/// The projected size of a unit vertical error over a box grown vertically by `g`, from
/// [`View::unit_projection`]: the plain bound's terms (`k · D / Z²`, with `D` and `Z` of
/// the grown box: `D² = across + (up + g)²`, `Z = depth − |forward.y| g`), or the box for
/// the view-angle-aware bound.
#[derive(Clone, Copy, Debug)]
pub enum UnitProjection {
    Plain {
        scale: f32,
        across: f32,
        up: f32,
        depth: f32,
        depth_per_growth: f32,
        near: f32,
    },
    ViewAngleAware(Aabb),
}

impl UnitProjection {
    /// The bound for the box grown by `g ≥ 0` up and down (infinite where it reaches the
    /// near plane).
    #[inline(always)]
    pub fn grown(&self, view: &View, g: f32) -> f32 {
        match *self {
            UnitProjection::Plain {
                scale,
                across,
                up,
                depth,
                depth_per_growth,
                near,
            } => {
                let depth = depth - depth_per_growth * g;
                if depth.is_nan() || depth <= near {
                    return f32::INFINITY;
                }
                let farthest = (across + (up + g) * (up + g)).sqrt();
                scale * farthest / (depth * depth)
            }
            UnitProjection::ViewAngleAware(aabb) => {
                let reach = Vec3::new(0.0, g, 0.0);
                view.projected_error_bound(
                    1.0,
                    &Aabb::new(aabb.min - reach, aabb.max + reach),
                    true,
                )
            }
        }
    }
}

impl View {
    /// [`View::accepts`] of four boxes at once, the same arithmetic in each lane (the hot
    /// path, the plain bound, in vector registers; other bounds box by box): bit `k` set
    /// when box `k` with error `world_errors[k]` is accepted.
    #[inline(always)]
    pub(crate) fn accepts_lanes(
        &self,
        world_errors: Vec4,
        boxes: &BoxLanes,
        view_angle_aware: bool,
    ) -> u32 {
        let (Tolerance::Pixels(px), Some(s), false) =
            (self.tolerance, &self.screen, view_angle_aware)
        else {
            return (0..4)
                .filter(|&k| self.accepts(world_errors[k], &boxes.lane(k), view_angle_aware))
                .fold(0, |mask, k| mask | 1 << k);
        };
        let (eye, forward) = (s.eye.to_array(), s.forward.to_array());
        let half = Vec4::splat(0.5);
        let centre: [Vec4; 3] =
            std::array::from_fn(|a| half * (boxes.min[a] + boxes.max[a]) - Vec4::splat(eye[a]));
        let extent: [Vec4; 3] = std::array::from_fn(|a| half * (boxes.max[a] - boxes.min[a]));
        let f = forward.map(Vec4::splat);
        let depth = (f[0] * centre[0] + f[1] * centre[1] + f[2] * centre[2])
            - (f[0].abs() * extent[0] + f[1].abs() * extent[1] + f[2].abs() * extent[2]);
        let reach: [Vec4; 3] = std::array::from_fn(|a| centre[a].abs() + extent[a]);
        let farthest2 = reach[0] * reach[0] + reach[1] * reach[1] + reach[2] * reach[2];
        let ek = world_errors * s.pixels_per_radian;
        let depth2 = depth * depth;
        // As in `accepts`: a NaN depth, or one at or before the near plane, refines.
        let fine = depth.cmpgt(Vec4::splat(s.camera.near))
            & (ek * ek * farthest2).cmple(Vec4::splat(px * px) * depth2 * depth2);
        (world_errors.cmple(Vec4::ZERO) | fine).bitmask()
    }
}

fn check_tolerance(value: f32) -> Result<(), ViewError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(ViewError::Tolerance { value })
    }
}

/// Options shared by every algorithm (each reads the ones it understands).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LodOptions {
    /// Use the view-angle-aware screen error (article 000: the error vector projected on
    /// the camera's up axis, done as a true bound). Default off: the article's plain error.
    pub view_angle_aware: bool,
    /// Algorithm A's options (geomorphing, the article's L∞ test).
    pub adaptive: AdaptiveOptions,
    /// Algorithm P's pool, patch size, split factor and roughness weight.
    pub patches: PatchOptions,
    /// Algorithm C's options (block size, distance, error-aware levels, morphing).
    pub chunked: ChunkedOptions,
    /// The caller will select world-error views only (a mesh export, the peer
    /// comparison): an algorithm may leave out tables only screen views read, and build
    /// them if a screen view comes after all. The bintree skips its per-diamond errors.
    pub world_error_only: bool,
}

impl LodOptions {
    pub fn with_patches(mut self, patches: PatchOptions) -> Self {
        self.patches = patches;
        self
    }

    pub fn with_world_error_only(mut self, on: bool) -> Self {
        self.world_error_only = on;
        self
    }

    pub fn with_view_angle_aware(mut self, on: bool) -> Self {
        self.view_angle_aware = on;
        self
    }

    pub fn with_adaptive(mut self, adaptive: AdaptiveOptions) -> Self {
        self.adaptive = adaptive;
        self
    }
}

/// Per-frame statistics (feature Q7).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct SelectionStats {
    pub triangles: u64,
    /// Distinct vertices, when the algorithm counts them cheaply; otherwise
    /// [`Selection::distinct_vertices`] computes them.
    pub vertices: Option<u64>,
    pub nodes_visited: u64,
    pub nodes_drawn: u64,
    /// Wall time of selection plus index generation.
    #[serde(serialize_with = "serialize_ms")]
    pub select_time: Duration,
    /// Algorithm P's pool and tree statistics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patches: Option<PatchStats>,
}

fn serialize_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// The static grid vertex buffer a selection indexes: vertex `row * stride + col` sits at
/// grid position `(col, row)`, for `rows` rows. Positions beyond the data read the repeated
/// border.
///
/// With `shift = k > 0` (algorithm A with local detail) the grid is the terrain's grid
/// subdivided `2^k` times: position `(col, row)` lies at world `(col, row) · cell / 2^k`,
/// a position on the terrain's samples (both multiples of `2^k`) reads the sample
/// `(col, row) / 2^k` unless it is morphed, and every other position a selection draws is
/// listed in its morphs (its height comes from there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridVertices {
    pub stride: u32,
    pub rows: u32,
    pub shift: u32,
}

impl GridVertices {
    pub fn index(&self, pos: GridPos) -> u32 {
        pos.row * self.stride + pos.col
    }

    pub fn position(&self, index: u32) -> GridPos {
        GridPos::new(index % self.stride, index / self.stride)
    }

    /// The terrain sample a position reads when it is not morphed (the position itself
    /// without subdivision).
    pub fn sample(&self, pos: GridPos) -> GridPos {
        GridPos::new(pos.col >> self.shift, pos.row >> self.shift)
    }

    /// Number of vertices in the buffer.
    pub fn len(&self) -> usize {
        self.stride as usize * self.rows as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A vertex drawn at another height than its sample's (a geomorph in progress).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MorphedHeight {
    pub vertex: u32,
    /// World height as drawn.
    pub height: f32,
}

/// One patch of a patch selection: the shared index buffer `index_buffer` laid over the
/// grid from `origin`, local vertex `(i, j)` at grid position `origin + step · (i, j)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchInstance {
    pub origin: GridPos,
    pub step: u32,
    pub index_buffer: u32,
    /// The patch's level of detail, for display (the renderer's LOD colours): algorithm
    /// C's blocks all sample at step 1 and differ by index buffer.
    pub level: u32,
    /// Where the patch lies relative to the view frustum (P6's debug shading;
    /// [`Containment::Inside`] when there is no frustum).
    pub frustum: Containment,
    /// The slot of [`Selection::Patches`]'s `pool` holding this patch's vertices, normals
    /// and colours, or [`PatchInstance::NO_SLOT`] when the selection has no pool.
    pub slot: u32,
}

impl PatchInstance {
    /// The slot of an instance drawn from the grid (no pool).
    pub const NO_SLOT: u32 = u32::MAX;
}

/// Vertical morphing of a patch selection (algorithm C's `morph` option): every grid vertex
/// that is not on a patch corner lerps from its sample's height towards the average of the
/// two ends of the next coarser level's edge it bisects, by its own distance to the eye.
///
/// A vertex's *level* `m` is the coarsest level whose grid holds it: `min(tz(col),
/// tz(row))` (trailing zeros), below the patch's coarsest level `k`. At level `m + 1` it
/// is the midpoint of an edge: horizontal or vertical when one coordinate is an odd
/// multiple of `2^m`, else the diagonal of its cell that points at the patch centre (see
/// `stitched_patch`). Its distance `d` is the L∞ distance from the eye to the vertical line
/// through it, limited to the terrain's height range (algorithm C's distance), and the
/// morph factor is `clamp((d − (m · q + w)) · inv_range, 0, 1)`: 0 up to `m · q + w`, 1
/// from `(m + 1) · q`, the distance at which a block holding it turns coarser than `m`.
///
/// The drawn height depends on the vertex alone, never on the patch drawing it, so
/// patches sharing an edge draw it at the same heights: morphing never opens a crack.
/// [`Selection::to_mesh`] and the renderer's vertex shader evaluate the same `f32`
/// operations in the same order ([`PatchMorph::height`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PatchMorph {
    /// The eye the levels were chosen for (world units).
    pub eye: Vec3,
    /// Lowest and highest world height of the terrain.
    pub height_range: (f32, f32),
    /// `q`: distance per level (world units).
    pub level_distance: f32,
    /// `w`: where, past `m · q`, level `m`'s morph starts (the block width).
    pub morph_start: f32,
    /// `1 / (q − w)`, or `f32::MAX` when `q = w` (a step at `(m + 1) · q`).
    pub inv_range: f32,
    /// `log2` of the patch side: vertices of this level never morph.
    pub coarsest: u32,
}

impl PatchMorph {
    /// The drawn height of grid vertex `(col, row)`, `height(col, row)` giving sample
    /// heights as drawn (`f32`, border repeated) and `cell` the cell size.
    #[inline]
    pub fn height(&self, col: u32, row: u32, cell: f32, height: impl Fn(u32, u32) -> f32) -> f32 {
        let own = height(col, row);
        let level = col.trailing_zeros().min(row.trailing_zeros());
        if level >= self.coarsest {
            return own;
        }
        let s = 1u32 << level;
        let odd_col = (col >> level) & 1 == 1;
        let odd_row = (row >> level) & 1 == 1;
        let (a, b) = if odd_col && !odd_row {
            ((col - s, row), (col + s, row))
        } else if !odd_col && odd_row {
            ((col, row - s), (col, row + s))
        } else {
            // Both odd: the cell's diagonal towards the patch centre.
            let mask = (1u32 << self.coarsest) - 1;
            let half = 1u32 << (self.coarsest - 1);
            let west = col & mask < half;
            let north = row & mask < half;
            if west == north {
                ((col - s, row - s), (col + s, row + s))
            } else {
                ((col + s, row - s), (col - s, row + s))
            }
        };
        let x = col as f32 * cell;
        let z = row as f32 * cell;
        let dx = (self.eye.x - x).abs();
        let dz = (self.eye.z - z).abs();
        let dy = (self.height_range.0 - self.eye.y)
            .max(self.eye.y - self.height_range.1)
            .max(0.0);
        let d = dx.max(dz).max(dy);
        let start = level as f32 * self.level_distance + self.morph_start;
        let t = ((d - start) * self.inv_range).clamp(0.0, 1.0);
        let coarse = 0.5 * (height(a.0, a.1) + height(b.0, b.1));
        own + t * (coarse - own)
    }
}

/// What an algorithm selected for one frame, borrowing the algorithm's own buffers.
#[derive(Clone, Copy, Debug)]
pub enum Selection<'a> {
    /// Explicit triangles (three indices each, counter-clockwise seen from above) into the
    /// static grid vertex buffer.
    Triangles {
        vertices: GridVertices,
        indices: &'a [u32],
        morphs: &'a [MorphedHeight],
    },
    /// Patches: every instance draws one of the shared index buffers, whose indices are
    /// local vertices `j * (patch_side + 1) + i` of a patch of `patch_side` cells a side.
    Patches {
        vertices: GridVertices,
        patch_side: u32,
        index_buffers: &'a [Vec<u32>],
        instances: &'a [PatchInstance],
        /// Vertical morphing of every drawn vertex, if the algorithm morphs.
        morph: Option<PatchMorph>,
        /// Algorithm P's pool: each instance's vertices, normals and colours are in its
        /// slot (the same vertices as the grid's, filled when the slot was assigned).
        /// `None`: instances are drawn from the grid.
        pool: Option<&'a PatchPool>,
    },
    /// Explicit triangles (three indices each, counter-clockwise seen from above) into
    /// `vertices`, which carry their grid positions and drawn heights: the selection needs
    /// neither the terrain's samples nor a vertex buffer of the whole grid (algorithm A
    /// with [`AdaptiveOptions::list_vertices`], for trees larger than one grid index or
    /// height texture can address). A vertex drawn by several pieces may be listed once
    /// per piece, always at the same height.
    Listed {
        vertices: &'a [ListedVertex],
        indices: &'a [u32],
        /// The grid's subdivision: position `(col, row)` lies at world `(col, row) · cell
        /// / 2^shift` (local detail, as [`GridVertices::shift`]).
        shift: u32,
    },
}

/// A vertex of a [`Selection::Listed`]: where it lies on the (subdivided) grid, and its
/// world height as drawn (morphing applied).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ListedVertex {
    pub pos: GridPos,
    pub height: f32,
}

impl Selection<'_> {
    /// Number of triangles drawn.
    pub fn triangle_count(&self) -> usize {
        match self {
            Selection::Triangles { indices, .. } | Selection::Listed { indices, .. } => {
                indices.len() / 3
            }
            Selection::Patches {
                index_buffers,
                instances,
                ..
            } => instances
                .iter()
                .map(|p| {
                    index_buffers
                        .get(p.index_buffer as usize)
                        .map_or(0, |b| b.len() / 3)
                })
                .sum(),
        }
    }

    /// Calls `f` with the grid positions of every triangle, in draw order.
    pub fn for_each_triangle(&self, mut f: impl FnMut([GridPos; 3])) {
        match *self {
            Selection::Triangles {
                vertices, indices, ..
            } => {
                for t in indices.chunks_exact(3) {
                    f([t[0], t[1], t[2]].map(|i| vertices.position(i)));
                }
            }
            Selection::Listed {
                vertices, indices, ..
            } => {
                for t in indices.chunks_exact(3) {
                    f([t[0], t[1], t[2]].map(|i| vertices[i as usize].pos));
                }
            }
            Selection::Patches {
                patch_side,
                index_buffers,
                instances,
                ..
            } => {
                let local_stride = patch_side + 1;
                for p in instances {
                    let Some(buffer) = index_buffers.get(p.index_buffer as usize) else {
                        continue;
                    };
                    for t in buffer.chunks_exact(3) {
                        f([t[0], t[1], t[2]].map(|i| {
                            GridPos::new(
                                p.origin.col + p.step * (i % local_stride),
                                p.origin.row + p.step * (i / local_stride),
                            )
                        }));
                    }
                }
            }
        }
    }

    /// The drawn triangles as a mesh with one vertex per grid position, heights as drawn
    /// (the sample's, border repeated beyond the data, or the morphed height; a pool's
    /// selection takes them from its slots, see [`Selection::to_mesh_as_carried`]).
    pub fn to_mesh(&self, field: &Heightfield) -> GridMesh {
        if let Some(mesh) = self.to_mesh_as_carried() {
            return mesh;
        }
        let (grid, morphs, patch_morph) = match *self {
            Selection::Triangles {
                vertices, morphs, ..
            } => {
                let morphs: HashMap<GridPos, f32> = morphs
                    .iter()
                    .map(|m| (vertices.position(m.vertex), m.height))
                    .collect();
                (vertices, morphs, None)
            }
            Selection::Patches {
                vertices, morph, ..
            } => (vertices, HashMap::new(), morph),
            Selection::Listed { .. } => unreachable!("a listed selection carries its heights"),
        };
        let cell = field.mapping().cell_size;
        let mut mesh = GridMesh::default();
        let mut vertex_of: HashMap<GridPos, u32> = HashMap::new();
        self.for_each_triangle(|corners| {
            let triangle = corners.map(|pos| {
                *vertex_of.entry(pos).or_insert_with(|| {
                    let height = match &patch_morph {
                        Some(morph) => morph.height(pos.col, pos.row, cell, |c, r| {
                            sample_height(field, GridPos::new(c, r))
                        }),
                        None => morphs
                            .get(&pos)
                            .copied()
                            .unwrap_or_else(|| sample_height(field, grid.sample(pos))),
                    };
                    mesh.push_vertex(pos, height)
                })
            });
            mesh.triangles.push(triangle);
        });
        mesh
    }

    /// For a selection that carries its drawn heights (a listed one, or patches drawn from
    /// a pool and not morphed): the drawn mesh with every height read from the selection,
    /// exactly what the renderer draws, and no heightfield needed (a streamed terrain has
    /// none in memory). `None` for any other selection.
    ///
    /// A listed vertex drawn by several pieces takes the height listed first; they are
    /// the same ([`Selection::listed_heights_agree`] checks it).
    pub fn to_mesh_as_carried(&self) -> Option<GridMesh> {
        if let Selection::Listed {
            vertices, indices, ..
        } = *self
        {
            let mut mesh = GridMesh::default();
            let mut vertex_of: HashMap<GridPos, u32> = HashMap::new();
            for t in indices.chunks_exact(3) {
                let triangle = [t[0], t[1], t[2]].map(|i| {
                    let v = vertices[i as usize];
                    *vertex_of
                        .entry(v.pos)
                        .or_insert_with(|| mesh.push_vertex(v.pos, v.height))
                });
                mesh.triangles.push(triangle);
            }
            return Some(mesh);
        }
        let Selection::Patches {
            patch_side,
            index_buffers,
            instances,
            morph: None,
            pool: Some(pool),
            ..
        } = *self
        else {
            return None;
        };
        let local_stride = patch_side + 1;
        let mut mesh = GridMesh::default();
        let mut vertex_of: HashMap<GridPos, u32> = HashMap::new();
        for p in instances {
            let Some(buffer) = index_buffers.get(p.index_buffer as usize) else {
                continue;
            };
            for t in buffer.chunks_exact(3) {
                let triangle = [t[0], t[1], t[2]].map(|local| {
                    let (i, j) = (local % local_stride, local / local_stride);
                    let pos = GridPos::new(p.origin.col + p.step * i, p.origin.row + p.step * j);
                    *vertex_of
                        .entry(pos)
                        .or_insert_with(|| mesh.push_vertex(pos, pool.position(p.slot, i, j).y))
                });
                mesh.triangles.push(triangle);
            }
        }
        Some(mesh)
    }

    /// For a listed selection: whether every vertex listed more than once (drawn by
    /// several pieces) is listed at the same height, to the bit, so the pieces meet.
    /// `true` for any other selection (their heights are per position).
    pub fn listed_heights_agree(&self) -> bool {
        let Selection::Listed { vertices, .. } = *self else {
            return true;
        };
        let mut heights: HashMap<GridPos, u32> = HashMap::new();
        vertices
            .iter()
            .all(|v| *heights.entry(v.pos).or_insert(v.height.to_bits()) == v.height.to_bits())
    }

    /// Number of distinct vertices the triangles use.
    pub fn distinct_vertices(&self) -> usize {
        self.count_distinct(DISTINCT_BITMAP_POSITIONS)
    }

    /// [`Selection::distinct_vertices`]: one bit per position of the corners' bounding
    /// rectangle when it has at most `bitmap_positions`, else the positions sorted. (A
    /// hash set of positions took a third of `terralod bench`'s time and left the
    /// caches cold for the next selection it timed.)
    fn count_distinct(&self, bitmap_positions: u64) -> usize {
        let (mut lo, mut hi) = ((u32::MAX, u32::MAX), (0, 0));
        let mut corners = 0usize;
        self.for_each_triangle(|triangle| {
            for p in triangle {
                lo = (lo.0.min(p.col), lo.1.min(p.row));
                hi = (hi.0.max(p.col), hi.1.max(p.row));
            }
            corners += 3;
        });
        if corners == 0 {
            return 0;
        }
        let width = u64::from(hi.0 - lo.0) + 1;
        let positions = width * (u64::from(hi.1 - lo.1) + 1);
        if positions <= bitmap_positions {
            let mut bits = vec![0u64; positions.div_ceil(64) as usize];
            let mut count = 0;
            self.for_each_triangle(|triangle| {
                for p in triangle {
                    let i = u64::from(p.row - lo.1) * width + u64::from(p.col - lo.0);
                    let (word, bit) = ((i / 64) as usize, 1u64 << (i % 64));
                    count += usize::from(bits[word] & bit == 0);
                    bits[word] |= bit;
                }
            });
            count
        } else {
            let mut keys = Vec::with_capacity(corners);
            self.for_each_triangle(|triangle| {
                keys.extend(triangle.map(|p| u64::from(p.row) << 32 | u64::from(p.col)));
            });
            keys.sort_unstable();
            keys.dedup();
            keys.len()
        }
    }
}

/// Positions up to which [`Selection::distinct_vertices`] counts with a bitmap (8 MiB).
const DISTINCT_BITMAP_POSITIONS: u64 = 1 << 26;

/// World height of the sample at `pos` (border repeated beyond the data), computed in `f64`
/// and rounded once, so a drawn vertex is as close to the true height as `f32` allows.
pub fn sample_height(field: &Heightfield, pos: GridPos) -> f32 {
    let mapping = field.mapping();
    let raw = f64::from(field.raw_clamped(pos.col, pos.row));
    (raw * f64::from(mapping.height_scale) + f64::from(mapping.height_offset)) as f32
}

/// A level-of-detail algorithm, built for one terrain, selecting once per frame.
pub trait LodAlgorithm: Send {
    /// The registry name.
    fn name(&self) -> &'static str;

    /// Selects what to draw for `view`. State carried across frames lives in `self`; the
    /// selection borrows buffers `self` reuses, so a warmed-up call allocates nothing.
    fn select(&mut self, view: &View) -> Selection<'_>;

    /// Statistics of the last [`LodAlgorithm::select`].
    fn stats(&self) -> &SelectionStats;

    /// Bytes of per-node state kept across frames, on top of the heights and pyramid.
    fn state_bytes(&self) -> usize;

    /// Whether selections keep a screen view's tolerance: projected error within τ pixels.
    /// Distance-driven algorithms (the articles' C and P, without their error options)
    /// return `false`; the property tests then hold them to crack-freedom, coverage and
    /// determinism only. (A world-error view's M, vertical error within M with full
    /// coverage, drives every algorithm.) Default: `true`.
    fn error_bounded(&self) -> bool {
        true
    }

    /// Appends the world boxes of what the last [`LodAlgorithm::select`] drew (nodes,
    /// blocks or patches), for the renderer's debug view. Default: none.
    fn drawn_boxes(&self, out: &mut Vec<Aabb>) {
        let _ = out;
    }

    /// What the last [`LodAlgorithm::select`] left to data read in the background
    /// (algorithm A's pages on disk): a still image selects again, after
    /// [`LodAlgorithm::await_reads`], while something is pending. Default: nothing.
    fn reads(&self) -> Reads {
        Reads::default()
    }

    /// Blocks until the background reads asked for so far are done (the next selection
    /// uses them). Default: nothing to wait for.
    fn await_reads(&mut self) {}

    /// Data that could not be read in the background since the last call (a corrupt
    /// page), each reported once; what needed it is drawn coarser. Default: none.
    fn take_faults(&mut self) -> Vec<Box<dyn std::error::Error + Send + Sync>> {
        Vec::new()
    }
}

/// Background reads as the last selection left them ([`LodAlgorithm::reads`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reads {
    /// Pieces drawn coarser than the view wants for want of data (algorithm A: squares),
    /// and of those the ones that wait only for data that could not be read.
    pub held_back: usize,
    pub faulty: usize,
    /// The distance from the eye of the nearest piece held back (`None` when none was, or
    /// the view has no eye): nearer ground was drawn as the view asks.
    pub nearest_held_back: Option<f32>,
    /// Reads that selecting again can use: under way, or possible now.
    pub pending: usize,
    /// Reads that failed so far (never tried again).
    pub failed: usize,
    /// Reads finished so far, and the bytes they read.
    pub loaded: usize,
    pub bytes_read: u64,
}

/// What a streaming selection counted in its last frame, in its own units (the blocks of
/// `streamed`, the nodes of `streamed-quadtree`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamCounts {
    /// "blocks" or "nodes", for reports.
    pub unit: &'static str,
    pub drawn: u64,
    /// Drawn coarser than the view wants because a tile was not resident.
    pub held_back: u64,
    /// Resident tiles the selection left for a later frame (work it spreads over frames),
    /// so a still image selects again until none is left.
    pub deferred: u64,
}

/// An algorithm that selects from a [`TileSource`](crate::tiles::TileSource), drawing only
/// what is resident (issue 9): what the commands that stream a directory need of it.
pub trait StreamingLod: LodAlgorithm {
    type Source: crate::tiles::TileSource;
    fn source(&self) -> &Self::Source;
    /// The source, e.g. to change what is resident or to take its reports.
    fn source_mut(&mut self) -> &mut Self::Source;
    fn stream_counts(&self) -> StreamCounts;
}

/// What a hierarchical selection pass reads at every node: the view, its frustum (when it
/// culls) and whether the view-angle-aware bound is on.
pub(crate) struct Pass<'v> {
    pub view: &'v View,
    pub frustum: Option<&'v Frustum>,
    pub view_angle_aware: bool,
}

impl<'v> Pass<'v> {
    /// The pass of `view` with its frustum only when the view culls.
    pub fn culling(view: &'v View, view_angle_aware: bool) -> Pass<'v> {
        Pass {
            view,
            frustum: if view.cull() { view.frustum() } else { None },
            view_angle_aware,
        }
    }

    /// The tri-state frustum test of a node inside a parent crossing `planes`: `None` when
    /// its box is outside, else the planes it crosses (those its children are tested
    /// against). The box is worked out only when there is a plane to test.
    pub fn crossing(&self, planes: u8, aabb: impl FnOnce() -> Aabb) -> Option<u8> {
        match self.frustum {
            Some(frustum) if planes != 0 => frustum.classify_planes(&aabb(), planes),
            _ => Some(0),
        }
    }
}

/// Builds an algorithm for a terrain.
pub type BuildFn = for<'a> fn(
    &'a Heightfield,
    &'a Pyramid,
    &LodOptions,
) -> Result<Box<dyn LodAlgorithm + 'a>, BuildError>;

/// Why an algorithm cannot be built over a terrain (sizes and options are user input: a
/// refusal, never a panic or an aborted allocation).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(
        "a {width} x {height} terrain has more vertices than 32-bit indices reach; import \
         it (terralod import) and draw it with --algo streamed"
    )]
    BeyondIndices { width: u32, height: u32 },
    #[error(
        "bintree covers the whole {side} x {side} square grid this {width} x {height} \
         terrain pads to, beyond the {max} x {max} it takes; use --algo quadtree or adaptive, which \
         store only what touches the data",
        max = bintree::MAX_PADDED_SIDE
    )]
    BintreeTooLarge { side: u32, width: u32, height: u32 },
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error(transparent)]
    Pages(#[from] PageError),
    #[error(transparent)]
    Tiles(#[from] TilesBuildError),
}

/// Refuses a terrain whose grid (plus the repeated border column and row the algorithms
/// may draw) has more vertex positions than `u32` indices address.
pub fn check_indices(width: u32, height: u32) -> Result<(), BuildError> {
    let positions = (u64::from(width) + 1) * (u64::from(height) + 1);
    if positions > u64::from(u32::MAX) {
        return Err(BuildError::BeyondIndices { width, height });
    }
    Ok(())
}

/// One registered algorithm.
#[derive(Clone, Copy)]
pub struct AlgorithmEntry {
    pub name: &'static str,
    pub summary: &'static str,
    /// How the algorithm avoids cracks between levels.
    pub crack_handling: &'static str,
    /// Whether `build` reads the shared [`Pyramid`]: benchmarks charge its build time and
    /// memory only to the algorithms that use it.
    pub uses_pyramid: bool,
    /// Whether its selections are patches ([`Selection::Patches`]), each placed against
    /// the LOD frustum (what a renderer's frustum shading colours).
    pub draws_patches: bool,
    /// Whether it can select with its heights carried in the selection (a pool's slots,
    /// or [`Selection::Listed`] with [`AdaptiveOptions::list_vertices`]), so a renderer
    /// that holds the terrain's textures decimated can draw it.
    pub carries_heights: bool,
    /// The algorithm's own constructor; [`AlgorithmEntry::build`] checks what every
    /// algorithm needs first.
    construct: BuildFn,
    /// Whether it selects from an imported directory's tiles as they stream in (through the
    /// tile cache, drawing coarser data while a tile loads): `streamed` and
    /// `streamed-quadtree`. Algorithm A has a [`AlgorithmEntry::stream`] constructor too,
    /// but builds its tree from the tiles once and then reads none.
    pub streams_tiles: bool,
    /// For an algorithm that works over an imported directory without loading its finest
    /// level (issue 9): its constructor over the directory's tile cache, which the commands
    /// use instead of loading the directory. The streaming algorithms select from the
    /// tiles; algorithm A builds its tree from them ([`adaptive::TiledAdaptive`]).
    pub stream: Option<StreamFn>,
}

/// The tiles a streaming command selects from: an imported directory's cache, with any
/// procedural detail below it.
pub type StreamedSource = crate::tiles::DetailTiles<crate::tiles::TileCache>;

/// Builds a streaming algorithm over a directory's tiles.
pub type StreamFn = fn(
    StreamedSource,
    LodOptions,
) -> Result<Box<dyn StreamingLod<Source = StreamedSource>>, BuildError>;

/// The registered algorithms that stream a directory's tiles, comma separated (for
/// messages).
pub fn streaming_names() -> String {
    REGISTRY
        .iter()
        .filter(|e| e.streams_tiles)
        .map(|e| e.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl AlgorithmEntry {
    /// Builds the algorithm over `field`, refusing a grid beyond `u32` indices (every
    /// algorithm draws through them) and whatever the algorithm itself cannot take.
    pub fn build<'a>(
        &self,
        field: &'a Heightfield,
        pyramid: &'a Pyramid,
        options: &LodOptions,
    ) -> Result<Box<dyn LodAlgorithm + 'a>, BuildError> {
        check_indices(field.width(), field.height())?;
        (self.construct)(field, pyramid, options)
    }
}

impl std::fmt::Debug for AlgorithmEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlgorithmEntry")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Every algorithm, in the order the CLI lists them. Adding an algorithm is one module and
/// one line here; the property tests and benches pick it up.
pub static REGISTRY: &[AlgorithmEntry] = &[
    AlgorithmEntry {
        name: "quadtree",
        summary: "screen-space-error quadtree of article 000: 3x3 fans from the root, \
              frustum culled, one index buffer per frame",
        crack_handling: "a coarse node's edge collects every vertex its finer neighbours draw \
                     on it, at any level difference",
        uses_pyramid: true,
        draws_patches: false,
        carries_heights: false,
        streams_tiles: false,
        construct: |field, pyramid, options| {
            Ok(Box::new(QuadtreeLod::new(field, pyramid, *options)))
        },
        stream: None,
    },
    AlgorithmEntry {
        name: "chunked",
        summary: "blocks of article 001: one level per block from distance (or error), \
                  shared index buffers instanced, flood-fill visibility",
        crack_handling: "neighbours differ by at most one level; the finer block draws the \
                         seam variant that matches its coarser neighbour's edge",
        uses_pyramid: true,
        draws_patches: true,
        carries_heights: false,
        streams_tiles: false,
        construct: |field, pyramid, options| {
            Ok(Box::new(ChunkedLod::new(field, pyramid, *options)))
        },
        stream: None,
    },
    AlgorithmEntry {
        name: "adaptive",
        summary: "Ulrich's adaptive quadtree of article 002: squares with enabled edge vertices \
              and sub-squares, updated incrementally across frames, drawn as fans",
        crack_handling: "enabling a vertex enables both squares sharing it, enabling a \
                     sub-square its parent's edge vertices at its corners",
        uses_pyramid: true,
        draws_patches: false,
        carries_heights: true,
        streams_tiles: false,
        construct: |field, pyramid, options| {
            let lod = AdaptiveLod::new(field, pyramid, *options);
            Ok(Box::new(lod.with_pages_in(&std::env::temp_dir())?))
        },
        stream: Some(|tiles, options| Ok(Box::new(adaptive::TiledAdaptive::new(tiles, options)?))),
    },
    AlgorithmEntry {
        name: "patches",
        summary: "Land-o-Rama's patch pool (article 003): equal-size patches from a pool \
              allocated at start, split and merged by distance only, frustum tested \
              only when drawing",
        crack_handling: "balanced quadtree (neighbours within one level), seams of the shared \
                     stitched patch, the coarse variant against a coarser neighbour",
        uses_pyramid: true,
        draws_patches: true,
        carries_heights: true,
        streams_tiles: false,
        construct: |field, pyramid, options| {
            Ok(Box::new(PatchesLod::try_new(
                field,
                pyramid,
                options.patches,
            )?))
        },
        stream: None,
    },
    AlgorithmEntry {
        name: "bintree",
        summary: "right-triangle bintree (RTIN, as martini) with exact per-diamond errors: \
              the finest-grained error-driven mesh, view-dependent or not",
        crack_handling: "a diamond's two triangles split together, and errors and boxes grow \
                     towards the root, so a split never lacks its parents (a conforming mesh)",
        uses_pyramid: false,
        draws_patches: false,
        carries_heights: false,
        streams_tiles: false,
        construct: |field, _pyramid, options| {
            let side = field.padded_side();
            if side > bintree::MAX_PADDED_SIDE {
                return Err(BuildError::BintreeTooLarge {
                    side,
                    width: field.width(),
                    height: field.height(),
                });
            }
            Ok(Box::new(BintreeLod::new(field, *options)))
        },
        stream: None,
    },
    AlgorithmEntry {
        name: "streamed",
        summary: "error-driven quadtree over the blocks of a tiled terrain (issue 9), drawing \
              only what is resident and the coarser block while a tile loads; here over \
              in-memory tiles",
        crack_handling: "restricted quadtree (forced splits of coarser neighbours when their \
                     tiles are resident), stitched seams against a one-level-coarser neighbour",
        uses_pyramid: false,
        draws_patches: true,
        carries_heights: true,
        streams_tiles: true,
        construct: |field, _pyramid, options| {
            Ok(Box::new(StreamedLod::new(
                crate::tiles::MemoryTiles::for_field(field),
                *options,
            )))
        },
        stream: Some(|tiles, options| Ok(Box::new(StreamedLod::new(tiles, options)))),
    },
    AlgorithmEntry {
        name: "streamed-quadtree",
        summary: "algorithm Q's quadtree of 3 x 3 fans over a tiled terrain (issue 9): node \
              bounds from a pyramid of each resident tile, the coarser node drawn while a \
              tile loads; here over in-memory tiles",
        crack_handling: "restricted quadtree (forced splits of larger neighbours when their \
                     tiles are resident), a fan skips its edge midpoint against a larger \
                     neighbour",
        uses_pyramid: false,
        draws_patches: true,
        carries_heights: true,
        streams_tiles: true,
        construct: |field, _pyramid, options| {
            Ok(Box::new(
                StreamedQuadtreeLod::new(crate::tiles::MemoryTiles::for_field(field), *options)
                    .with_builds_per_frame(u32::MAX),
            ))
        },
        stream: Some(|tiles, options| Ok(Box::new(StreamedQuadtreeLod::new(tiles, options)))),
    },
];

/// The registered algorithm called `name`.
pub fn find(name: &str) -> Option<&'static AlgorithmEntry> {
    REGISTRY.iter().find(|e| e.name == name)
}

/// The registered names, comma separated (for error messages and help).
pub fn names() -> String {
    REGISTRY
        .iter()
        .map(|e| e.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::Vec3;

    /// Distinct vertices by bitmap and by sorting (the fallback for huge rectangles)
    /// against a hash set of the positions, on random triangles of a 300 × 200 buffer.
    #[test]
    fn distinct_vertices_are_counted_by_bitmap_and_by_sorting() {
        let vertices = GridVertices {
            stride: 300,
            rows: 200,
            shift: 0,
        };
        let mut seed = 7u64;
        for n in [0usize, 1, 5, 1000, 20_000] {
            let indices: Vec<u32> = (0..3 * n)
                .map(|_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    // A corner of the buffer's middle band, often repeated.
                    (seed >> 33) as u32 % 9_000 + 20_000
                })
                .collect();
            let selection = Selection::Triangles {
                vertices,
                indices: &indices,
                morphs: &[],
            };
            let mut seen = std::collections::HashSet::new();
            selection.for_each_triangle(|t| seen.extend(t));
            assert_eq!(selection.distinct_vertices(), seen.len(), "{n} triangles");
            assert_eq!(
                selection.count_distinct(0),
                seen.len(),
                "{n} triangles, sorted"
            );
        }
    }

    fn field(side: u32) -> Heightfield {
        let values = (0..side * side).map(|i| (i % 7) as f32).collect();
        Heightfield::from_f32(side, side, values).expect("valid field")
    }

    /// What cannot be built is refused by the registry itself (a library caller of
    /// `build` used to get a panic or an aborted allocation).
    #[test]
    fn the_registry_refuses_what_cannot_be_built() {
        assert!(check_indices(65534, 65534).is_ok());
        let refused = check_indices(65536, 65536).expect_err("2^32 + vertices");
        assert!(refused.to_string().contains("65536 x 65536"), "{refused}");
        assert!(check_indices(u32::MAX, 1).is_err());
        // Thin enough to be small, padded to a square beyond what bintree takes.
        let thin = Heightfield::from_f32(bintree::MAX_PADDED_SIDE + 1, 2, vec![0.0; 2 * 32770])
            .expect("valid field");
        let pyramid = Pyramid::build(&thin);
        let bintree = find("bintree").expect("registered");
        let refused = bintree.build(&thin, &pyramid, &LodOptions::default());
        assert!(matches!(refused, Err(BuildError::BintreeTooLarge { .. })));
        let small = field(33);
        let pyramid = Pyramid::build(&small);
        let mut options = LodOptions::default();
        options.patches.pool_capacity = u32::MAX;
        let patches = find("patches").expect("registered");
        let refused = patches.build(&small, &pyramid, &options);
        assert!(matches!(refused, Err(BuildError::Pool(_))));
        for entry in REGISTRY {
            assert!(
                entry
                    .build(&small, &pyramid, &LodOptions::default())
                    .is_ok()
            );
        }
    }

    /// An algorithm registered as not reading the pyramid selects the same mesh with the
    /// pyramid of another terrain (so benchmarks may leave the pyramid's cost out of it).
    #[test]
    fn algorithms_without_the_pyramid_ignore_it() {
        let terrain = field(33);
        let (own, other) = (Pyramid::build(&terrain), Pyramid::build(&field(5)));
        let view = View::world_error(0.5).expect("valid");
        let mut checked = 0;
        for entry in REGISTRY.iter().filter(|e| !e.uses_pyramid) {
            let mesh = |pyramid: &Pyramid| {
                let mut algorithm = entry
                    .build(&terrain, pyramid, &LodOptions::default())
                    .expect("the registry builds it");
                algorithm.select(&view).to_mesh(&terrain)
            };
            let (a, b) = (mesh(&own), mesh(&other));
            assert!(a.triangles.len() > 8, "{}", entry.name);
            assert_eq!(a.triangles, b.triangles, "{}", entry.name);
            assert_eq!(a.positions, b.positions, "{}", entry.name);
            checked += 1;
        }
        assert_eq!(checked, 3, "bintree, streamed and streamed-quadtree");
    }

    /// What the registry says of each algorithm's selections (which the command line
    /// and the renderer rely on) is what they are: patches or not, heights carried (a
    /// pool's slots, or listed vertices) when the algorithm is asked to list them.
    #[test]
    fn the_registry_says_what_selections_are() {
        let terrain = field(65);
        let pyramid = Pyramid::build(&terrain);
        let camera = Camera::new(
            Vec3::new(-20.0, 30.0, -20.0),
            Vec3::new(32.0, 0.0, 32.0),
            1.0,
            (640, 480),
            0.5,
            500.0,
        )
        .expect("valid camera");
        let view = View::screen(camera, 1.0).expect("valid view");
        let options = LodOptions::default()
            .with_adaptive(AdaptiveOptions::default().with_list_vertices(true));
        for entry in REGISTRY {
            let mut algorithm = entry
                .build(&terrain, &pyramid, &options)
                .expect("the registry builds it");
            let selection = algorithm.select(&view);
            assert!(selection.triangle_count() > 0, "{}", entry.name);
            let patches = matches!(selection, Selection::Patches { .. });
            let carried = match selection {
                Selection::Listed { .. } => true,
                Selection::Patches { pool, morph, .. } => pool.is_some() && morph.is_none(),
                _ => false,
            };
            assert_eq!(patches, entry.draws_patches, "{} draws patches", entry.name);
            assert_eq!(
                carried, entry.carries_heights,
                "{} carries heights",
                entry.name
            );
        }
    }

    #[test]
    fn patches_expand_to_grid_triangles() {
        // One patch of 1 cell (two triangles, counter-clockwise seen from above), laid at
        // two places with two steps.
        let buffers = vec![vec![0, 2, 3, 0, 3, 1]];
        let instances = [
            PatchInstance {
                origin: GridPos::new(0, 0),
                step: 1,
                index_buffer: 0,
                level: 0,
                frustum: Containment::Inside,
                slot: PatchInstance::NO_SLOT,
            },
            PatchInstance {
                origin: GridPos::new(2, 0),
                step: 2,
                index_buffer: 0,
                level: 1,
                frustum: Containment::Inside,
                slot: PatchInstance::NO_SLOT,
            },
        ];
        let selection = Selection::Patches {
            vertices: GridVertices {
                stride: 5,
                rows: 5,
                shift: 0,
            },
            patch_side: 1,
            index_buffers: &buffers,
            instances: &instances,
            morph: None,
            pool: None,
        };
        assert_eq!(selection.triangle_count(), 4);
        let f = field(5);
        let mesh = selection.to_mesh(&f);
        assert_eq!(mesh.triangles.len(), 4);
        assert_eq!(mesh.positions.len(), 8);
        assert_eq!(selection.distinct_vertices(), 8);
        let second = mesh.triangles[2].map(|i| mesh.positions[i as usize]);
        assert_eq!(
            second,
            [GridPos::new(2, 0), GridPos::new(2, 2), GridPos::new(4, 2)]
        );
        for (pos, height) in mesh.positions.iter().zip(&mesh.heights) {
            assert_eq!(*height, sample_height(&f, *pos));
        }
    }

    #[test]
    fn morphed_heights_are_drawn() {
        let vertices = GridVertices {
            stride: 3,
            rows: 3,
            shift: 0,
        };
        let indices = [0, 3, 4];
        let morphs = [MorphedHeight {
            vertex: 4,
            height: 42.5,
        }];
        let selection = Selection::Triangles {
            vertices,
            indices: &indices,
            morphs: &morphs,
        };
        let mesh = selection.to_mesh(&field(3));
        let centre = mesh
            .positions
            .iter()
            .position(|&p| p == GridPos::new(1, 1))
            .expect("the morphed vertex is drawn");
        assert_eq!(mesh.heights[centre], 42.5);
        assert_eq!(
            vertices.position(vertices.index(GridPos::new(2, 1))),
            GridPos::new(2, 1)
        );
    }

    #[test]
    fn views_refuse_bad_tolerances_and_cameras() {
        let camera = Camera {
            eye: Vec3::new(0.0, 10.0, 0.0),
            target: Vec3::new(10.0, 0.0, 10.0),
            fov_y: 1.0,
            viewport: (640, 480),
            near: 1.0,
            far: 100.0,
        };
        for bad in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            assert!(matches!(
                View::screen(camera, bad),
                Err(ViewError::Tolerance { .. })
            ));
            assert!(View::world_error(bad).is_err());
        }
        let broken = Camera {
            near: 0.0,
            ..camera
        };
        assert!(matches!(
            View::screen(broken, 1.0),
            Err(ViewError::Camera(_))
        ));
        let view = View::world_error(2.0).expect("valid");
        assert!(
            !view.with_cull(true).cull(),
            "a view-independent view never culls"
        );
        assert_eq!(view.tolerance(), Tolerance::WorldError(2.0));
    }

    #[test]
    fn the_bound_refuses_boxes_at_the_near_plane_and_grows_off_axis() {
        let camera = Camera {
            eye: Vec3::ZERO,
            target: Vec3::new(0.0, 0.0, -1.0),
            fov_y: 1.0,
            viewport: (1000, 1000),
            near: 1.0,
            far: 1000.0,
        };
        let view = View::screen(camera, 1.0).expect("valid");
        let at =
            |x: f32, z: f32| Aabb::new(Vec3::new(x, -0.5, z), Vec3::new(x + 1.0, 0.5, z + 1.0));
        assert_eq!(
            view.projected_error_bound(1.0, &at(0.0, -1.5), false),
            f32::INFINITY
        );
        assert_eq!(view.projected_error_bound(0.0, &at(0.0, -1.5), false), 0.0);
        let centre = view.projected_error_bound(1.0, &at(-0.5, -100.0), false);
        let k = camera.pixels_per_radian();
        assert!(centre >= k / 100.0, "at least the nominal e k / d");
        let aside = view.projected_error_bound(1.0, &at(40.0, -100.0), false);
        assert!(aside > centre);
        for aware in [false, true] {
            let bound = view.projected_error_bound(1.0, &at(40.0, -100.0), aware);
            assert_eq!(view.accepts(1.0, &at(40.0, -100.0), aware), bound <= 1.0);
        }
    }

    /// The unit projection of a box, grown by `g`, is the plain bound over the grown box (to
    /// the f32 rounding of the other order of operations), infinite where the grown box
    /// reaches the near plane, and nothing for a world-error view. (The view-angle-aware
    /// variant calls the bound on the grown box itself; it is run here for its growth.)
    #[test]
    fn a_unit_projection_grows_as_the_grown_box_s_bound() {
        let camera = Camera::new(
            Vec3::new(3.0, 40.0, 7.0),
            Vec3::new(60.0, 10.0, -80.0),
            1.0,
            (1280, 720),
            0.5,
            1e4,
        )
        .expect("valid");
        let view = View::screen(camera, 1.0).expect("valid");
        let boxes = [
            Aabb::new(Vec3::new(20.0, 0.0, -60.0), Vec3::new(36.0, 25.0, -44.0)),
            Aabb::new(
                Vec3::new(-300.0, -5.0, -900.0),
                Vec3::new(-200.0, 90.0, -800.0),
            ),
            Aabb::new(Vec3::new(0.0, 30.0, 0.0), Vec3::new(8.0, 39.0, 8.0)),
        ];
        for aabb in &boxes {
            for aware in [false, true] {
                let unit = view.unit_projection(aabb, aware).expect("a screen view");
                for g in [0.0f32, 0.25, 3.0, 40.0] {
                    let reach = Vec3::new(0.0, g, 0.0);
                    let grown = Aabb::new(aabb.min - reach, aabb.max + reach);
                    let expected = view.projected_error_bound(1.0, &grown, aware);
                    let got = unit.grown(&view, g);
                    if expected.is_infinite() {
                        assert_eq!(got, expected, "{aabb:?} + {g}");
                    } else {
                        assert!(
                            (got - expected).abs() <= 1e-5 * expected,
                            "{aabb:?} + {g} ({aware}): {got} against {expected}"
                        );
                    }
                }
            }
        }
        // The third box lies just under the eye; grown by 40 it holds the eye.
        let unit = view
            .unit_projection(&boxes[2], false)
            .expect("a screen view");
        assert_eq!(unit.grown(&view, 40.0), f32::INFINITY);
        assert!(
            View::world_error(1.0)
                .expect("valid")
                .unit_projection(&boxes[0], false)
                .is_none()
        );
    }
}
