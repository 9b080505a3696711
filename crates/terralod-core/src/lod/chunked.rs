//! Algorithm C (article 001): the terrain in square blocks drawn by instancing shared index
//! buffers, one level per block, stitched to their neighbours by seam variants.
//!
//! # Blocks (C1, C5)
//!
//! Blocks have `n = 2^k` segments a side ([`ChunkedOptions::block_size`], at most the
//! padded grid's side) and tile the padded grid from its origin; only blocks that touch
//! the data exist, so what is drawn is `[0, blocks_x · n] × [0, blocks_z · n]`: the data
//! plus up to `n − 1` repeated border columns and rows (the padding convention,
//! `Heightfield::raw_clamped`). A block's box is its pyramid node's (exact min/max of its
//! samples). Larger blocks: fewer instances and tests on the CPU, more triangles on the GPU.
//!
//! # Index buffers (C3, C4)
//!
//! One [`StitchedPatch`] of `n` segments holds every level's interior and its seam
//! variants, built once at [`ChunkedLod::new`]; a selection borrows them. A drawn block is
//! the interior of its level plus one seam per side, the variant picked by the neighbour's
//! level ([`SeamNeighbour::for_levels`]): instances over the one static grid vertex
//! buffer, no geometry made per frame.
//!
//! # Levels from distance (C2)
//!
//! `level = floor(d / q)` clamped to `0..=k`, `q = lod_distance × w` (`w` the block width,
//! `lod_distance ≥ 1`), `d` the L∞ (largest per-axis) distance from the eye to the block's
//! *column*: its square in plan over the whole terrain's height range. Neighbours then
//! differ by at most one level for any camera: two 4-neighbour columns share a face, so
//! every point of one is within L∞ distance `w` of a point of the other (move it across
//! the face, along one axis, by at most `w`), hence `|d_a − d_b| ≤ w ≤ q`, and
//! `|x − y| ≤ 1` implies `|⌊x⌋ − ⌊y⌋| ≤ 1`, which clamping keeps. (The 3D distance to a
//! block's own box would not do: a tall block and a flat one side by side can be any
//! distance apart in y.) The level is computed in `f64` with `q` enlarged by `2^-20`, so
//! rounding cannot break the strict inequality. Default `lod_distance` 2: the two rings
//! of blocks nearest the eye stay at full resolution, and the morph range (below) is half
//! of each ring.
//!
//! # Error-aware levels (C7, option)
//!
//! At build, per block and level, the largest vertical distance between the samples and
//! that level's mesh, over the interior and every seam variant (so it covers whatever the
//! neighbours choose), measured exactly as the test kit's oracle does it (f32 drawn
//! heights, interpolated in f64) and rounded up; then made non-decreasing in the level
//! (running maximum), so refining a block never raises its bound. A block takes the
//! coarsest level whose bound the view accepts ([`View::accepts`] on its box); a block
//! that accepts none is *pinned* at level 0 with its neighbours at level 0 (same-level
//! seams only: exact). Then levels are lowered until neighbours are within one level
//! (a worklist; levels only go down, so it ends and every bound stays accepted).
//! [`View::world_error`] always uses this rule (it has no eye to measure distance from).
//!
//! # Near plane
//!
//! A block whose box reaches the near plane is pinned at level 0 too, in both modes: its
//! drawn points are its samples, so none is displaced behind the eye.
//!
//! # Visibility (C6)
//!
//! A flood fill over 4-neighbour blocks whose *column* meets the view volume: the frustum
//! cut to the terrain's height range projects in plan to a convex polygon (`Shadow`),
//! and a column meets the frustum exactly when its square meets that polygon. Closed
//! squares meeting a convex set are 4-connected, so the fill reaches every one from any
//! one of them, and it stops at the far plane. The seed is found in constant time: a point
//! of the view volume inside the terrain's box (the view axis, else the frustum's edges
//! clipped to the box, else the box's edges clipped to the frustum); none means nothing is
//! in view. Of the blocks reached, those whose own box is not outside are drawn, the box
//! tested against only the planes its column crosses (`ColumnPlanes`). Per-block frame
//! stamps mark what was reached, so nothing is cleared: the cost follows the visible area,
//! not the terrain's size. Without culling every block is drawn.

use super::stitched_patch::{SeamNeighbour, Side, StitchedPatch};
use super::{
    GridVertices, LodAlgorithm, LodOptions, PatchInstance, PatchMorph, Selection, SelectionStats,
    View, sample_height,
};
use crate::camera::{Aabb, Camera, Containment, Frustum};
use crate::heightfield::{GridPos, Heightfield};
use crate::pyramid::Pyramid;
use glam::Vec3;
use rayon::prelude::*;
use std::time::Instant;

/// Smallest and largest accepted block size, in segments.
pub const MIN_BLOCK_SIZE: u32 = 16;
pub const MAX_BLOCK_SIZE: u32 = 256;

/// Options of algorithm C.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChunkedOptions {
    /// Segments per block side: a power of two in `16..=256` (smaller terrains use their
    /// whole padded side).
    pub block_size: u32,
    /// `q` in block widths: each `q` of distance the next coarser level (at least 1).
    pub lod_distance: f32,
    /// Choose levels by error (C7) so the projected error stays within τ.
    pub error_aware: bool,
    /// Morph vertices towards the next coarser level with distance (distance rule only).
    pub morph: bool,
}

impl ChunkedOptions {
    /// 64-segment blocks, `q` = 2 block widths, distance rule, no morphing.
    pub const DEFAULT: ChunkedOptions = ChunkedOptions {
        block_size: 64,
        lod_distance: 2.0,
        error_aware: false,
        morph: false,
    };
}

impl Default for ChunkedOptions {
    fn default() -> Self {
        ChunkedOptions::DEFAULT
    }
}

/// Why chunked options are refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChunkedOptionsError {
    #[error("block size {value} must be a power of two from {min} to {max}")]
    BlockSize { value: u32, min: u32, max: u32 },
    #[error("lod distance {value} must be finite and at least 1 block width")]
    LodDistance { value: f32 },
    #[error("morphing follows the distance rule; it cannot be combined with error-aware levels")]
    MorphWithErrorAware,
}

impl ChunkedOptions {
    /// Checks the options (the algorithm itself clamps bad values instead of failing).
    pub fn validate(&self) -> Result<(), ChunkedOptionsError> {
        if !self.block_size.is_power_of_two()
            || !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&self.block_size)
        {
            return Err(ChunkedOptionsError::BlockSize {
                value: self.block_size,
                min: MIN_BLOCK_SIZE,
                max: MAX_BLOCK_SIZE,
            });
        }
        if !(self.lod_distance.is_finite() && self.lod_distance >= 1.0) {
            return Err(ChunkedOptionsError::LodDistance {
                value: self.lod_distance,
            });
        }
        if self.morph && self.error_aware {
            return Err(ChunkedOptionsError::MorphWithErrorAware);
        }
        Ok(())
    }

    /// The nearest valid options: block size rounded to a power of two and clamped,
    /// distance at least 1, morphing off with error-aware levels.
    fn sanitized(self) -> ChunkedOptions {
        let block_size = self
            .block_size
            .clamp(MIN_BLOCK_SIZE, MAX_BLOCK_SIZE)
            .next_power_of_two();
        let lod_distance = if self.lod_distance.is_finite() {
            self.lod_distance.max(1.0)
        } else {
            ChunkedOptions::DEFAULT.lod_distance
        };
        ChunkedOptions {
            block_size,
            lod_distance,
            error_aware: self.error_aware,
            morph: self.morph && !self.error_aware,
        }
    }
}

/// The instance of shared index buffer `index_buffer` for the block at `origin` drawn at
/// `level` (the one place instances are made, so a new instance field is one edit).
fn patch_instance(
    origin: GridPos,
    index_buffer: u32,
    level: u32,
    frustum: Containment,
) -> PatchInstance {
    PatchInstance {
        origin,
        step: 1,
        index_buffer,
        level,
        frustum,
        slot: PatchInstance::NO_SLOT,
    }
}

/// Per-block flag: pinned at level 0 with same-level seams (see the module docs).
const PINNED: u8 = 0x80;
const LEVEL_MASK: u8 = 0x7f;

/// A block drawn this frame: its coordinates (kept, so that no hot loop divides by the
/// row length) and where it lies relative to the frustum (P6's debug shading).
#[derive(Clone, Copy, Debug)]
struct DrawnBlock {
    bx: u32,
    bz: u32,
    frustum: Containment,
}

/// Algorithm C. Owns its index buffers, block data and per-frame buffers.
#[derive(Debug)]
pub struct ChunkedLod<'a> {
    field: &'a Heightfield,
    options: LodOptions,
    chunked: ChunkedOptions,
    patch: StitchedPatch,
    /// Segments per block side (`n`) and the coarsest level (`k`).
    block_side: u32,
    coarsest: u32,
    blocks_x: u32,
    blocks_z: u32,
    /// Per block: its box (exact heights) and its column (the terrain's height range).
    boxes: Vec<Aabb>,
    columns: Vec<Aabb>,
    /// Per block, `coarsest + 1` error bounds, non-decreasing in the level: computed at
    /// build with `error_aware`, else on the first view-independent selection (empty
    /// until then).
    bounds: Vec<f32>,
    terrain_box: Aabb,
    /// `q` in world units, slightly enlarged (see the module docs).
    lod_distance: f64,
    /// `q` and `w` in world units as given, for morphing.
    morph_distances: (f32, f32),
    vertices: GridVertices,
    frame: u32,
    /// Per block: the frame its column was tested, the frame it was drawn.
    reached: Vec<u32>,
    drawn_in: Vec<u32>,
    /// Per block: level and [`PINNED`], valid for blocks drawn this frame.
    levels: Vec<u8>,
    /// Work list of the flood fill and of the level constraints, as block coordinates.
    queue: Vec<(u32, u32)>,
    /// Blocks drawn this frame.
    drawn: Vec<DrawnBlock>,
    /// This frame's view volume in plan, for the column tests.
    shadow: Shadow,
    /// This frame's frustum planes over the columns.
    column_planes: ColumnPlanes,
    /// A block's side in world units.
    block_width: f32,
    /// Triangles per shared index buffer (so counting them reads no buffer).
    buffer_triangles: Vec<u32>,
    instances: Vec<PatchInstance>,
    stats: SelectionStats,
}

impl<'a> ChunkedLod<'a> {
    /// Builds the blocks and index buffers; `pyramid` must be the pyramid of `field`.
    /// Invalid chunked options are clamped to the nearest valid ones.
    pub fn new(field: &'a Heightfield, pyramid: &Pyramid, options: LodOptions) -> ChunkedLod<'a> {
        let chunked = options.chunked.sanitized();
        let padded_cells = pyramid.padded_side() - 1;
        let block_side = chunked.block_size.min(padded_cells);
        let coarsest = block_side.trailing_zeros();
        let level = (padded_cells.trailing_zeros() - coarsest) as usize;
        debug_assert_eq!(pyramid.node_size(level), block_side);
        let patch = match StitchedPatch::new(coarsest) {
            Ok(patch) => patch,
            Err(_) => unreachable!("block sides are at most 256 segments"),
        };
        let (blocks_x, blocks_z) = pyramid.nodes(level);
        let mapping = field.mapping();
        let boxes: Vec<Aabb> = (0..blocks_z)
            .flat_map(|bz| (0..blocks_x).map(move |bx| (bx, bz)))
            .map(|(bx, bz)| pyramid.aabb(level, bx, bz, &mapping))
            .collect();
        let lo = boxes.iter().map(|b| b.min.y).fold(f32::INFINITY, f32::min);
        let hi = boxes
            .iter()
            .map(|b| b.max.y)
            .fold(f32::NEG_INFINITY, f32::max);
        let columns = boxes
            .iter()
            .map(|b| {
                Aabb::new(
                    Vec3::new(b.min.x, lo, b.min.z),
                    Vec3::new(b.max.x, hi, b.max.z),
                )
            })
            .collect();
        let width = f64::from(block_side) * f64::from(mapping.cell_size);
        let extent =
            |blocks: u32| (f64::from(blocks * block_side) * f64::from(mapping.cell_size)) as f32;
        let terrain_box = Aabb::new(
            Vec3::new(0.0, lo, 0.0),
            Vec3::new(extent(blocks_x), hi, extent(blocks_z)),
        );
        let bounds = if chunked.error_aware {
            error_bounds(field, &patch, blocks_x, blocks_z)
        } else {
            Vec::new()
        };
        let count = (blocks_x * blocks_z) as usize;
        let buffer_triangles = patch
            .buffers()
            .iter()
            .map(|b| (b.len() / 3) as u32)
            .collect();
        ChunkedLod {
            field,
            options,
            chunked,
            patch,
            block_side,
            coarsest,
            blocks_x,
            blocks_z,
            boxes,
            columns,
            bounds,
            terrain_box,
            lod_distance: f64::from(chunked.lod_distance) * width * (1.0 + 2f64.powi(-20)),
            morph_distances: (
                (f64::from(chunked.lod_distance) * width) as f32,
                width as f32,
            ),
            vertices: GridVertices {
                stride: blocks_x * block_side + 1,
                rows: blocks_z * block_side + 1,
                shift: 0,
            },
            frame: 0,
            reached: vec![0; count],
            drawn_in: vec![0; count],
            levels: vec![0; count],
            queue: Vec::new(),
            drawn: Vec::new(),
            shadow: Shadow::default(),
            column_planes: ColumnPlanes::default(),
            block_width: width as f32,
            buffer_triangles,
            instances: Vec::new(),
            stats: SelectionStats::default(),
        }
    }

    /// Segments per block side as built.
    pub fn block_side(&self) -> u32 {
        self.block_side
    }

    /// Blocks along x and z.
    pub fn blocks(&self) -> (u32, u32) {
        (self.blocks_x, self.blocks_z)
    }

    /// The options in effect (after clamping).
    pub fn chunked_options(&self) -> ChunkedOptions {
        self.chunked
    }

    /// The error bound of block `(bx, bz)` at `level` (world units; covers every seam
    /// variant; non-decreasing in the level), once computed (see `bounds`).
    pub fn error_bound(&self, bx: u32, bz: u32, level: u32) -> Option<f32> {
        let block = (bz * self.blocks_x + bx) as usize;
        self.bounds
            .get(block * (self.coarsest as usize + 1) + level.min(self.coarsest) as usize)
            .copied()
    }

    /// The distance rule (C2) for block `(bx, bz)` seen from `eye`:
    /// `floor(d / q)` clamped to `0..=k`, `d` the L∞ distance to the block's column.
    pub fn distance_level(&self, eye: Vec3, bx: u32, bz: u32) -> u32 {
        let column = &self.columns[(bz * self.blocks_x + bx) as usize];
        let outside = |lo: f32, hi: f32, at: f32| {
            let (lo, hi, at) = (f64::from(lo), f64::from(hi), f64::from(at));
            (lo - at).max(at - hi).max(0.0)
        };
        let d = outside(column.min.x, column.max.x, eye.x)
            .max(outside(column.min.y, column.max.y, eye.y))
            .max(outside(column.min.z, column.max.z, eye.z));
        // `d ≥ 0`: truncation is the floor (and saturates far away).
        ((d / self.lod_distance) as u32).min(self.coarsest)
    }

    /// The blocks drawn by the last selection, as `(bx, bz, level)`.
    pub fn drawn_blocks(&self) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
        self.drawn.iter().map(|d| {
            let block = self.index(d.bx, d.bz);
            (d.bx, d.bz, u32::from(self.levels[block] & LEVEL_MASK))
        })
    }

    fn next_frame(&mut self) {
        self.frame = self.frame.wrapping_add(1);
        if self.frame == 0 {
            // Wrapped: an old stamp could alias; clear once.
            self.reached.fill(0);
            self.drawn_in.fill(0);
            self.frame = 1;
        }
    }

    /// Index of block `(bx, bz)` in the per-block arrays.
    #[inline]
    fn index(&self, bx: u32, bz: u32) -> usize {
        (bz * self.blocks_x + bx) as usize
    }

    /// The neighbour of block `(bx, bz)` across `side`, if the terrain has one there.
    #[inline]
    fn neighbour(&self, bx: u32, bz: u32, side: Side) -> Option<(u32, u32)> {
        match side {
            Side::North => (bz > 0).then(|| (bx, bz - 1)),
            Side::East => (bx + 1 < self.blocks_x).then_some((bx + 1, bz)),
            Side::South => (bz + 1 < self.blocks_z).then_some((bx, bz + 1)),
            Side::West => (bx > 0).then(|| (bx - 1, bz)),
        }
    }

    fn draw(&mut self, bx: u32, bz: u32, frustum: Containment) {
        let block = self.index(bx, bz);
        self.drawn_in[block] = self.frame;
        self.drawn.push(DrawnBlock { bx, bz, frustum });
    }

    /// Marks every block drawn (no culling).
    fn draw_all(&mut self) {
        for bz in 0..self.blocks_z {
            for bx in 0..self.blocks_x {
                self.draw(bx, bz, Containment::Inside);
            }
        }
        self.stats.nodes_visited = u64::from(self.blocks_x * self.blocks_z);
    }

    /// The block whose square (in plan) holds `point`, clamped to the terrain.
    fn block_at(&self, point: Vec3) -> (u32, u32) {
        let width = self.terrain_box.max.x / self.blocks_x as f32;
        let depth = self.terrain_box.max.z / self.blocks_z as f32;
        let bx = ((point.x / width).floor().max(0.0) as u32).min(self.blocks_x - 1);
        let bz = ((point.z / depth).floor().max(0.0) as u32).min(self.blocks_z - 1);
        (bx, bz)
    }

    /// Points of the terrain's box inside the view volume, to seed the flood fill from, in
    /// constant time: the view axis's part between the near and far planes first, then
    /// the frustum's twelve edges clipped to the box, then the box's twelve edges clipped
    /// to the frustum. Two convex solids that meet have an edge of one meeting the other,
    /// so when every candidate misses, no column meets the view volume.
    fn seed_points(
        &self,
        camera: &Camera,
        frustum: &Frustum,
    ) -> impl Iterator<Item = Vec3> + use<> {
        let corners = frustum_corners(camera);
        let terrain = self.terrain_box;
        let frustum = *frustum;
        let forward = camera.forward();
        let axis = (
            camera.eye + forward * camera.near,
            camera.eye + forward * camera.far,
        );
        let box_corners = terrain.corners();
        std::iter::once(axis)
            .chain(
                Aabb::EDGES
                    .iter()
                    .map(move |&(a, b)| (corners[a], corners[b])),
            )
            .filter_map(move |(a, b)| segment_in_box(a, b, &terrain))
            .chain(Aabb::EDGES.iter().filter_map(move |&(a, b)| {
                segment_in_frustum(box_corners[a], box_corners[b], &frustum)
            }))
    }

    /// Tests block `(bx, bz)`'s column once this frame: true when it meets the view
    /// volume (its square meets the shadow).
    #[inline]
    fn reach(&mut self, bx: u32, bz: u32) -> bool {
        let block = self.index(bx, bz);
        if self.reached[block] == self.frame {
            return false;
        }
        self.reached[block] = self.frame;
        self.stats.nodes_visited += 1;
        let (x0, z0) = (bx as f32 * self.block_width, bz as f32 * self.block_width);
        self.shadow
            .meets(x0, z0, x0 + self.block_width, z0 + self.block_width)
    }

    /// Visits a reached block whose column meets the view volume: drawn when its box does
    /// (tested against the planes its column crosses only).
    #[inline]
    fn visit(&mut self, frustum: &Frustum, bx: u32, bz: u32) {
        let planes = self.column_planes.crossing(bx, bz);
        let containment = if planes == 0 {
            Containment::Inside
        } else {
            match frustum.classify_planes(&self.boxes[self.index(bx, bz)], planes) {
                None => return,
                Some(0) => Containment::Inside,
                Some(_) => Containment::Intersecting,
            }
        };
        self.draw(bx, bz, containment);
    }

    /// The flood fill of C6 (see the module docs).
    fn flood_fill(&mut self, frustum: &Frustum, camera: &Camera) {
        let mut shadow = std::mem::take(&mut self.shadow);
        let (lo, hi) = (self.terrain_box.min.y, self.terrain_box.max.y);
        shadow.build(camera, lo, hi);
        self.shadow = shadow;
        let extent = self.terrain_box.max.x.max(self.terrain_box.max.z);
        self.column_planes = ColumnPlanes::new(frustum, self.block_width, lo, hi, extent);
        let mut seeded = None;
        let mut candidates = false;
        for point in self.seed_points(camera, frustum) {
            candidates = true;
            let (bx, bz) = self.block_at(point);
            if self.reach(bx, bz) {
                seeded = Some((bx, bz));
                break;
            }
        }
        let Some((bx, bz)) = seeded else {
            if !candidates {
                // The view volume misses the terrain's box: nothing to draw.
                return;
            }
            // No candidate's column meets the view volume. A candidate is a point of the
            // view volume and the terrain's box, so only rounding can get here: test
            // every column to settle it (unseen on the benchmark paths).
            for bz in 0..self.blocks_z {
                for bx in 0..self.blocks_x {
                    if self.reach(bx, bz) {
                        self.visit(frustum, bx, bz);
                    }
                }
            }
            return;
        };
        self.queue.clear();
        self.visit(frustum, bx, bz);
        self.queue.push((bx, bz));
        while let Some((bx, bz)) = self.queue.pop() {
            for side in Side::ALL {
                if let Some((nx, nz)) = self.neighbour(bx, bz, side)
                    && self.reach(nx, nz)
                {
                    self.visit(frustum, nx, nz);
                    self.queue.push((nx, nz));
                }
            }
        }
    }

    /// Each drawn block's level and pin before the neighbour constraints.
    fn choose_levels(&mut self, view: &View) {
        let by_error = self.chunked.error_aware || view.camera().is_none();
        let camera = view.camera();
        let forward = camera.map(|c| c.forward());
        let levels = self.coarsest as usize + 1;
        for i in 0..self.drawn.len() {
            let DrawnBlock { bx, bz, .. } = self.drawn[i];
            let block = self.index(bx, bz);
            let aabb = &self.boxes[block];
            // The same test as `View::projected_error_bound`'s infinite bound: the box
            // reaches the near plane.
            let at_near = match (camera, forward) {
                (Some(camera), Some(forward)) => {
                    let depth = forward.dot(aabb.center() - camera.eye)
                        - forward.abs().dot(aabb.half_extent());
                    depth.is_nan() || depth <= camera.near
                }
                _ => false,
            };
            let value = match camera {
                Some(camera) if !by_error => {
                    if at_near {
                        PINNED
                    } else {
                        self.distance_level(camera.eye, bx, bz) as u8
                    }
                }
                _ => {
                    let bounds = &self.bounds[block * levels..][..levels];
                    (0..levels)
                        .rev()
                        .find(|&level| {
                            view.accepts(bounds[level], aabb, self.options.view_angle_aware)
                        })
                        .map_or(PINNED, |level| level as u8)
                }
            };
            self.levels[block] = value;
        }
    }

    /// Lowers levels until drawn neighbours are within one level and pinned blocks have
    /// level-0 neighbours. Only blocks that may violate it start the worklist: every drawn
    /// block for the error rule, the pinned ones for the distance rule (which keeps
    /// neighbours within one level by itself).
    fn relax(&mut self, by_error: bool) {
        self.queue.clear();
        for d in &self.drawn {
            if by_error || self.levels[(d.bz * self.blocks_x + d.bx) as usize] & PINNED != 0 {
                self.queue.push((d.bx, d.bz));
            }
        }
        while let Some((bx, bz)) = self.queue.pop() {
            let value = self.levels[self.index(bx, bz)];
            let level = value & LEVEL_MASK;
            let cap = if value & PINNED != 0 {
                level
            } else {
                level + 1
            };
            for side in Side::ALL {
                let Some((nx, nz)) = self.neighbour(bx, bz, side) else {
                    continue;
                };
                let n = self.index(nx, nz);
                if self.drawn_in[n] == self.frame && self.levels[n] & LEVEL_MASK > cap {
                    self.levels[n] = (self.levels[n] & PINNED) | cap;
                    self.queue.push((nx, nz));
                }
            }
        }
    }

    /// The morph of a distance-rule selection with the `morph` option (see [`PatchMorph`]).
    ///
    /// No popping: a block turns from level `L` to `L + 1` when its column's distance `d_b`
    /// reaches `(L + 1) · q`; each of its vertices is at least that far (`d_v ≥ d_b`), so
    /// every vertex of level `L` is fully morphed by then, onto the level-`(L + 1)` edge it
    /// bisects. Those edges' ends are not morphed at that moment: a vertex of level
    /// `m ≥ L + 1` in the block is within `d_b + w` (the square's L∞ extent), and its
    /// morph starts at `m · q + w ≥ (L + 1) · q + w`. So at the switch the morphed
    /// level-`L` mesh is the level-`(L + 1)` mesh (`stitched_patch`: each level refines
    /// the next). Seams stay closed for any factor, against a coarser neighbour too: a
    /// vertex's height is a function of the vertex alone.
    fn morph(&self, view: &View) -> Option<PatchMorph> {
        let camera = view.camera()?;
        if !self.chunked.morph || self.chunked.error_aware {
            return None;
        }
        let (q, w) = self.morph_distances;
        Some(PatchMorph {
            eye: camera.eye,
            height_range: (self.terrain_box.min.y, self.terrain_box.max.y),
            level_distance: q,
            morph_start: w,
            inv_range: if q > w { 1.0 / (q - w) } else { f32::MAX },
            coarsest: self.coarsest,
        })
    }

    /// The instances of every drawn block.
    fn emit(&mut self) {
        let mut triangles = 0u64;
        for i in 0..self.drawn.len() {
            let DrawnBlock { bx, bz, frustum } = self.drawn[i];
            let level = u32::from(self.levels[self.index(bx, bz)] & LEVEL_MASK);
            let origin = GridPos::new(bx * self.block_side, bz * self.block_side);
            let mut push = |buffer: u32, instances: &mut Vec<PatchInstance>| {
                let count = self.buffer_triangles[buffer as usize];
                if count > 0 {
                    triangles += u64::from(count);
                    instances.push(patch_instance(origin, buffer, level, frustum));
                }
            };
            push(self.patch.interior(level), &mut self.instances);
            if level >= self.coarsest {
                continue;
            }
            for side in Side::ALL {
                let neighbour_level = self
                    .neighbour(bx, bz, side)
                    .map(|(nx, nz)| self.index(nx, nz))
                    .filter(|&n| self.drawn_in[n] == self.frame)
                    .map(|n| u32::from(self.levels[n] & LEVEL_MASK));
                debug_assert!(neighbour_level.is_none_or(|l| l <= level + 1));
                let variant = SeamNeighbour::for_levels(level, neighbour_level);
                if let Some(seam) = self.patch.seam(level, side, variant) {
                    push(seam, &mut self.instances);
                }
            }
        }
        self.stats.triangles = triangles;
    }
}

impl LodAlgorithm for ChunkedLod<'_> {
    fn name(&self) -> &'static str {
        "chunked"
    }

    fn select(&mut self, view: &View) -> Selection<'_> {
        let started = Instant::now();
        self.next_frame();
        self.drawn.clear();
        self.instances.clear();
        self.stats = SelectionStats::default();
        match (view.cull(), view.frustum(), view.camera()) {
            (true, Some(frustum), Some(camera)) => {
                let (frustum, camera) = (*frustum, *camera);
                self.flood_fill(&frustum, &camera);
            }
            _ => self.draw_all(),
        }
        if self.bounds.is_empty() && view.camera().is_none() {
            self.bounds = error_bounds(self.field, &self.patch, self.blocks_x, self.blocks_z);
        }
        self.choose_levels(view);
        self.relax(self.chunked.error_aware || view.camera().is_none());
        self.emit();
        self.stats.nodes_drawn = self.drawn.len() as u64;
        let morph = self.morph(view);
        self.stats.select_time = started.elapsed();
        Selection::Patches {
            vertices: self.vertices,
            patch_side: self.block_side,
            index_buffers: self.patch.buffers(),
            instances: &self.instances,
            morph,
            pool: None,
        }
    }

    fn stats(&self) -> &SelectionStats {
        &self.stats
    }

    fn state_bytes(&self) -> usize {
        self.reached.len() * size_of::<u32>()
            + self.drawn_in.len() * size_of::<u32>()
            + self.levels.len()
            + self.bounds.len() * size_of::<f32>()
            + self.boxes.len() * 2 * size_of::<Aabb>()
    }

    fn error_bounded(&self) -> bool {
        self.chunked.error_aware
    }

    fn drawn_boxes(&self, out: &mut Vec<Aabb>) {
        out.extend(
            self.drawn
                .iter()
                .map(|d| self.boxes[self.index(d.bx, d.bz)]),
        );
    }
}

/// The six frustum planes evaluated on the grid of columns: every column has the same
/// height range and a block-aligned square, so a plane's value at a column's far and near
/// corners is linear in the block coordinates (two multiply-adds each, instead of a box
/// test). It tells which planes a column crosses; a block's box, inside its column, needs
/// testing against those only.
#[derive(Clone, Copy, Debug, Default)]
struct ColumnPlanes {
    /// Per plane: `(a, b, c)`: the plane's smallest value over column `(bx, bz)` (at the
    /// corner nearest outside) is `a bx + b bz + c`, `c` lowered by a rounding slack so
    /// that "inside" is never claimed for a box that is not.
    planes: [[f32; 3]; 6],
}

impl ColumnPlanes {
    fn new(frustum: &Frustum, width: f32, lo: f32, hi: f32, extent: f32) -> ColumnPlanes {
        let mut planes = [[0.0; 3]; 6];
        for (out, plane) in planes.iter_mut().zip(&frustum.planes) {
            let n = plane.truncate();
            let pick = |positive: bool, low: f32, high: f32| if positive { high } else { low };
            let near = n.x * pick(n.x >= 0.0, width, 0.0)
                + n.y * pick(n.y >= 0.0, hi, lo)
                + n.z * pick(n.z >= 0.0, width, 0.0)
                + plane.w;
            // Generous against the f32 rounding of these sums and of the boxes' corners.
            let slack = 1e-4
                * (n.abs()
                    .dot(Vec3::new(extent, lo.abs().max(hi.abs()), extent))
                    + plane.w.abs());
            *out = [n.x * width, n.z * width, near - slack];
        }
        ColumnPlanes { planes }
    }

    /// The planes (bits as [`Frustum::classify_planes`]) that column `(bx, bz)` is not
    /// surely inside of.
    #[inline]
    fn crossing(&self, bx: u32, bz: u32) -> u8 {
        let (x, z) = (bx as f32, bz as f32);
        let mut mask = 0;
        for (i, [a, b, near]) in self.planes.iter().enumerate() {
            if a * x + b * z + near < 0.0 {
                mask |= 1 << i;
            }
        }
        mask
    }
}

/// Most vertices the plan shadow can have: 8 frustum corners and 2 points per edge.
const MAX_SHADOW_POINTS: usize = 32;

/// The plan shadow (x, z) of the view volume cut to the terrain's height range: a convex
/// polygon. A column meets the view volume exactly when its square meets this polygon,
/// which the separating-axis test below decides with a few multiply-adds per block (the
/// box test of a tall, thin column at a frustum edge often cannot rule it out).
#[derive(Clone, Debug, Default)]
struct Shadow {
    /// Edge lines `(a, b, c)`: a point is outside the edge when `a x + b z + c > 0`; `c`
    /// already includes the rounding slack.
    edges: Vec<[f32; 3]>,
    /// The polygon's bounding rectangle (slack included): `[min x, min z, max x, max z]`.
    bounds: [f32; 4],
    /// False when the view volume misses the height range.
    any: bool,
}

impl Shadow {
    /// The shadow of `camera`'s view volume over heights `lo..=hi` (the buffers reused).
    fn build(&mut self, camera: &Camera, lo: f32, hi: f32) {
        let corners = frustum_corners(camera);
        let mut points = [(0.0f32, 0.0f32); MAX_SHADOW_POINTS];
        let mut count = 0;
        for c in corners {
            if (lo..=hi).contains(&c.y) {
                points[count] = (c.x, c.z);
                count += 1;
            }
        }
        for (a, b) in Aabb::EDGES.map(|(a, b)| (corners[a], corners[b])) {
            for level in [lo, hi] {
                let (da, db) = (a.y - level, b.y - level);
                if (da < 0.0) != (db < 0.0) {
                    let p = a + (b - a) * (da / (da - db));
                    points[count] = (p.x, p.z);
                    count += 1;
                }
            }
        }
        self.edges.clear();
        self.any = count > 0;
        if !self.any {
            return;
        }
        let points = &mut points[..count];
        let scale = points
            .iter()
            .fold(0.0f32, |m, p| m.max(p.0.abs()).max(p.1.abs()));
        // Relative slack far above f32 rounding of the corners and of the tests.
        let slack = scale.max(1.0) * 1e-4;
        let (mut x0, mut z0, mut x1, mut z1) = (f32::MAX, f32::MAX, f32::MIN, f32::MIN);
        for p in points.iter() {
            (x0, z0, x1, z1) = (x0.min(p.0), z0.min(p.1), x1.max(p.0), z1.max(p.1));
        }
        self.bounds = [x0 - slack, z0 - slack, x1 + slack, z1 + slack];
        // Andrew's monotone chain; the hull is counter-clockwise with x right, z up.
        points.sort_unstable_by(|p, q| p.0.total_cmp(&q.0).then(p.1.total_cmp(&q.1)));
        let cross = |o: (f32, f32), a: (f32, f32), b: (f32, f32)| {
            (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
        };
        let mut hull = [(0.0f32, 0.0f32); 2 * MAX_SHADOW_POINTS];
        let mut len = 0;
        for pass in 0..2 {
            let start = len;
            for i in 0..count {
                let p = if pass == 0 {
                    points[i]
                } else {
                    points[count - 1 - i]
                };
                while len >= start + 2 && cross(hull[len - 2], hull[len - 1], p) <= 0.0 {
                    len -= 1;
                }
                hull[len] = p;
                len += 1;
            }
            // The last point of each chain starts the other.
            len -= 1;
        }
        if len < 3 {
            // Degenerate (a segment or a point): the bounding rectangle alone decides.
            return;
        }
        for i in 0..len {
            let (p, q) = (hull[i], hull[(i + 1) % len]);
            let (a, b) = (q.1 - p.1, p.0 - q.0);
            let norm = a.hypot(b);
            if norm > 0.0 {
                self.edges.push([a, b, -(a * p.0 + b * p.1) - slack * norm]);
            }
        }
    }

    /// Whether the square `[x0, x1] × [z0, z1]` meets the shadow (conservatively).
    #[inline]
    fn meets(&self, x0: f32, z0: f32, x1: f32, z1: f32) -> bool {
        let [bx0, bz0, bx1, bz1] = self.bounds;
        if !self.any || x1 < bx0 || x0 > bx1 || z1 < bz0 || z0 > bz1 {
            return false;
        }
        self.edges.iter().all(|&[a, b, c]| {
            // The square's corner furthest inside the edge.
            let x = if a > 0.0 { x0 } else { x1 };
            let z = if b > 0.0 { z0 } else { z1 };
            a * x + b * z + c <= 0.0
        })
    }
}

/// The view volume's corners, numbered as [`Aabb::corners`] with the axes right, up and
/// forward (bit 2: on the far plane).
fn frustum_corners(camera: &Camera) -> [Vec3; 8] {
    let (forward, right, up) = (camera.forward(), camera.right(), camera.up());
    let tan = (0.5 * camera.fov_y).tan();
    let aspect = camera.aspect();
    std::array::from_fn(|i| {
        let distance = if i & 4 == 0 { camera.near } else { camera.far };
        let (half_height, half_width) = (distance * tan, distance * tan * aspect);
        let sign = |bit: usize| if i & bit == 0 { -1.0 } else { 1.0 };
        camera.eye
            + forward * distance
            + right * (sign(1) * half_width)
            + up * (sign(2) * half_height)
    })
}

/// The middle of the part of segment `a`–`b` inside `aabb` (slab clipping), if any: the
/// middle, not an end, so that rounding keeps it inside.
fn segment_in_box(a: Vec3, b: Vec3, aabb: &Aabb) -> Option<Vec3> {
    let d = b - a;
    let (mut t0, mut t1) = (0.0f32, 1.0f32);
    for axis in 0..3 {
        let (lo, hi) = (aabb.min[axis], aabb.max[axis]);
        if d[axis] == 0.0 {
            if a[axis] < lo || a[axis] > hi {
                return None;
            }
        } else {
            let (u, v) = ((lo - a[axis]) / d[axis], (hi - a[axis]) / d[axis]);
            t0 = t0.max(u.min(v));
            t1 = t1.min(u.max(v));
        }
    }
    // NaN (a degenerate segment) fails this too.
    (t0 <= t1).then(|| a + d * (0.5 * (t0 + t1)))
}

/// The middle of the part of segment `a`–`b` inside the six planes of `frustum`, if any.
fn segment_in_frustum(a: Vec3, b: Vec3, frustum: &Frustum) -> Option<Vec3> {
    let (mut t0, mut t1) = (0.0f32, 1.0f32);
    for plane in 0..6 {
        let (da, db) = (frustum.distance(plane, a), frustum.distance(plane, b));
        if da < 0.0 && db < 0.0 {
            return None;
        }
        if da < 0.0 {
            t0 = t0.max(da / (da - db));
        } else if db < 0.0 {
            t1 = t1.min(da / (da - db));
        }
    }
    (t0 <= t1).then(|| a + (b - a) * (0.5 * (t0 + t1)))
}

/// Per block, per level: the largest vertical error of that level's mesh with any seam
/// variant, as the oracle measures it (rounded up), then non-decreasing in the level.
fn error_bounds(
    field: &Heightfield,
    patch: &StitchedPatch,
    blocks_x: u32,
    blocks_z: u32,
) -> Vec<f32> {
    let n = patch.side();
    let k = patch.coarsest_level();
    let mapping = field.mapping();
    let (scale, offset) = (
        f64::from(mapping.height_scale),
        f64::from(mapping.height_offset),
    );
    let (lo, hi) = field.world_range();
    // The interpolation below rounds in f64; cover it generously.
    let slack = f64::from(lo.abs().max(hi.abs())) * 2f64.powi(-40);
    let side = (n + 1) as usize;
    (0..blocks_x * blocks_z)
        .into_par_iter()
        .flat_map_iter(|block| {
            let origin = GridPos::new(block % blocks_x * n, block / blocks_x * n);
            let mut drawn = vec![0.0f64; side * side];
            let mut truth = vec![0.0f64; side * side];
            for j in 0..=n {
                for i in 0..=n {
                    let pos = GridPos::new(origin.col + i, origin.row + j);
                    let at = j as usize * side + i as usize;
                    drawn[at] = f64::from(sample_height(field, pos));
                    truth[at] = f64::from(field.raw_clamped(pos.col, pos.row)) * scale + offset;
                }
            }
            let mut running = 0.0f32;
            (0..=k)
                .map(|level| {
                    let mut worst = buffer_error(
                        &patch.buffers()[patch.interior(level) as usize],
                        side,
                        &drawn,
                        &truth,
                    );
                    for s in Side::ALL {
                        for variant in [SeamNeighbour::Same, SeamNeighbour::Coarser] {
                            if let Some(seam) = patch.seam(level, s, variant) {
                                worst = worst.max(buffer_error(
                                    &patch.buffers()[seam as usize],
                                    side,
                                    &drawn,
                                    &truth,
                                ));
                            }
                        }
                    }
                    let bound = if worst == 0.0 {
                        0.0
                    } else {
                        round_up(worst * (1.0 + 2f64.powi(-16)) + slack)
                    };
                    running = running.max(bound);
                    running
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Largest `|truth − drawn surface|` over the samples inside or on the triangles of
/// `buffer` (local indices of a patch `side` vertices wide), interpolated as the oracle
/// does (exact integer barycentric weights, f64).
fn buffer_error(buffer: &[u32], side: usize, drawn: &[f64], truth: &[f64]) -> f64 {
    let stride = side as i64;
    let mut worst = 0.0f64;
    for t in buffer.chunks_exact(3) {
        let p = [t[0], t[1], t[2]].map(|v| (i64::from(v) % stride, i64::from(v) / stride));
        let area = |a: (i64, i64), b: (i64, i64), c: (i64, i64)| {
            (b.1 - a.1) * (c.0 - a.0) - (b.0 - a.0) * (c.1 - a.1)
        };
        let area2 = area(p[0], p[1], p[2]);
        if area2 <= 0 {
            continue;
        }
        let h = [t[0], t[1], t[2]].map(|v| drawn[v as usize]);
        let (c0, c1) = (
            p.iter().map(|q| q.0).min().unwrap_or(0),
            p.iter().map(|q| q.0).max().unwrap_or(0),
        );
        let (r0, r1) = (
            p.iter().map(|q| q.1).min().unwrap_or(0),
            p.iter().map(|q| q.1).max().unwrap_or(0),
        );
        for r in r0..=r1 {
            for c in c0..=c1 {
                let x = (c, r);
                let (wa, wb, wc) = (
                    area(p[1], p[2], x),
                    area(p[2], p[0], x),
                    area(p[0], p[1], x),
                );
                if wa < 0 || wb < 0 || wc < 0 {
                    continue;
                }
                let surface =
                    (wa as f64 * h[0] + wb as f64 * h[1] + wc as f64 * h[2]) / area2 as f64;
                worst = worst.max((truth[(r * stride + c) as usize] - surface).abs());
            }
        }
    }
    worst
}

/// `value` as an `f32` no smaller than it.
fn round_up(value: f64) -> f32 {
    let rounded = value as f32;
    if f64::from(rounded) < value {
        rounded.next_up()
    } else {
        rounded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heightfield::Samples;
    use crate::test_support::lcg_values;
    use proptest::prelude::*;

    fn field(width: u32, height: u32, seed: u64) -> Heightfield {
        let samples = lcg_values((width * height) as usize, seed, 1000);
        Heightfield::new(width, height, Samples::U16(samples)).expect("valid field")
    }

    fn options(block_size: u32, lod_distance: f32, error_aware: bool) -> LodOptions {
        LodOptions {
            chunked: ChunkedOptions {
                block_size,
                lod_distance,
                error_aware,
                morph: false,
            },
            ..LodOptions::default()
        }
    }

    /// Every pair of 4-neighbours, as block coordinates.
    fn neighbour_pairs(bx: u32, bz: u32) -> Vec<((u32, u32), (u32, u32))> {
        let mut pairs = Vec::new();
        for z in 0..bz {
            for x in 0..bx {
                if x + 1 < bx {
                    pairs.push(((x, z), (x + 1, z)));
                }
                if z + 1 < bz {
                    pairs.push(((x, z), (x, z + 1)));
                }
            }
        }
        pairs
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// C2: for any eye (inside, above, below or far outside the terrain), any terrain
        /// and any `q ≥ w`, the distance rule gives 4-neighbours levels at most one apart.
        #[test]
        fn the_distance_rule_keeps_neighbours_within_one_level(
            seed in any::<u64>(),
            width in 17u32..120,
            height in 17u32..120,
            cell in 0.01f32..100.0,
            lod_distance in 1.0f32..3.0,
            eye in (-2.0f32..3.0, -2.0f32..3.0, -2.0f32..3.0),
        ) {
            let field = field(width, height, seed)
                .with_mapping(crate::WorldMapping { cell_size: cell, height_scale: cell, height_offset: 0.0 })
                .expect("valid mapping");
            let pyramid = Pyramid::build(&field);
            let lod = ChunkedLod::new(&field, &pyramid, options(16, lod_distance, false));
            let (bx, bz) = lod.blocks();
            let (w, d) = field.world_size();
            let eye = Vec3::new(eye.0 * w, eye.1 * 1000.0 * cell, eye.2 * d);
            for (a, b) in neighbour_pairs(bx, bz) {
                let (la, lb) = (lod.distance_level(eye, a.0, a.1), lod.distance_level(eye, b.0, b.1));
                prop_assert!(la.abs_diff(lb) <= 1, "{:?} level {} next to {:?} level {}", a, la, b, lb);
            }
        }
    }

    #[test]
    fn levels_grow_with_distance_up_to_two_triangles_per_block() {
        let field = field(129, 129, 3);
        let pyramid = Pyramid::build(&field);
        let lod = ChunkedLod::new(&field, &pyramid, options(16, 1.0, false));
        assert_eq!(lod.blocks(), (8, 8));
        let eye = Vec3::new(-8.0, 500.0, 0.0);
        assert_eq!(lod.distance_level(eye, 0, 0), 0);
        // Block (3, 0) starts 56 cells away: level 3 with q = 16.
        assert_eq!(lod.distance_level(eye, 3, 0), 3);
        assert_eq!(lod.distance_level(eye, 7, 7), 4, "clamped to the coarsest");
        // Far above, every block is at the coarsest level.
        let high = Vec3::new(64.0, 1000.0 + 16.0 * 5.0, 64.0);
        assert_eq!(lod.distance_level(high, 4, 4), 4);
    }

    /// C6: with a far plane, the flood fill meets the same blocks whatever lies beyond it,
    /// so a terrain 4 × wider costs the same; looking over the horizon (the view axis above
    /// the terrain) it still seeds from the frustum's edges instead of testing every block.
    #[test]
    fn the_flood_fill_follows_the_view_not_the_terrain() {
        let terrain = |side: u32| {
            let samples = (0..side * side)
                .map(|i| ((i % side) * 7 + (i / side) * 13) as u16 % 1000)
                .collect();
            Heightfield::new(side, side, Samples::U16(samples)).expect("valid field")
        };
        let cameras = [
            Camera::new(
                Vec3::new(128.0, 1030.0, 128.0),
                Vec3::new(180.0, 950.0, 150.0),
                1.0,
                (640, 480),
                1.0,
                60.0,
            ),
            // Level, over the horizon: the view axis stays above the terrain.
            Camera::new(
                Vec3::new(128.0, 1030.0, 128.0),
                Vec3::new(200.0, 1030.0, 120.0),
                1.0,
                (640, 480),
                1.0,
                60.0,
            ),
        ]
        .map(|c| c.expect("valid camera"));
        let mut visited = Vec::new();
        for side in [257, 1025] {
            let field = terrain(side);
            let pyramid = Pyramid::build(&field);
            let mut lod = ChunkedLod::new(&field, &pyramid, options(16, 2.0, false));
            for camera in cameras {
                let view = View::screen(camera, 1.0).expect("valid");
                if let Selection::Patches { instances, .. } = lod.select(&view) {
                    // The LOD colours show the block's level, not the sampling step.
                    let patch = StitchedPatch::new(4).expect("valid");
                    for instance in instances {
                        assert_eq!(instance.level, patch.level_of_buffer(instance.index_buffer));
                    }
                }
                assert!(lod.stats().nodes_drawn > 0);
                visited.push((lod.stats().nodes_visited, lod.stats().nodes_drawn));
            }
        }
        assert_eq!(
            visited[..2],
            visited[2..],
            "visited and drawn on 257² and 1025²"
        );
        // A fraction of the 257² terrain's 256 blocks: the fill stops at the view's edge.
        assert!(visited.iter().all(|&(v, _)| v < 64), "{visited:?}");
    }

    #[test]
    fn small_terrains_use_one_block_of_their_padded_side() {
        let field = field(20, 9, 5);
        let pyramid = Pyramid::build(&field);
        let mut lod = ChunkedLod::new(&field, &pyramid, LodOptions::default());
        assert_eq!(lod.block_side(), 32);
        assert_eq!(lod.blocks(), (1, 1));
        let selection = lod.select(&View::world_error(1e9).expect("valid"));
        assert_eq!(selection.triangle_count(), 2);
    }

    #[test]
    fn bad_options_are_refused_and_clamped() {
        let bad = ChunkedOptions {
            block_size: 48,
            ..ChunkedOptions::DEFAULT
        };
        assert_eq!(
            bad.validate(),
            Err(ChunkedOptionsError::BlockSize {
                value: 48,
                min: MIN_BLOCK_SIZE,
                max: MAX_BLOCK_SIZE
            })
        );
        assert_eq!(bad.sanitized().block_size, 64);
        for value in [0.5, f32::NAN, f32::INFINITY] {
            let bad = ChunkedOptions {
                lod_distance: value,
                ..ChunkedOptions::DEFAULT
            };
            assert!(matches!(
                bad.validate(),
                Err(ChunkedOptionsError::LodDistance { .. })
            ));
            assert!(bad.sanitized().validate().is_ok());
        }
        let both = ChunkedOptions {
            error_aware: true,
            morph: true,
            ..ChunkedOptions::DEFAULT
        };
        assert_eq!(
            both.validate(),
            Err(ChunkedOptionsError::MorphWithErrorAware)
        );
        assert!(both.sanitized().validate().is_ok());
        assert!(ChunkedOptions::DEFAULT.validate().is_ok());
    }

    #[test]
    fn error_bounds_rise_with_the_level_and_vanish_at_full_resolution_on_planes() {
        let field = field(65, 65, 9);
        let pyramid = Pyramid::build(&field);
        let lod = ChunkedLod::new(&field, &pyramid, options(16, 2.0, true));
        for level in 1..=4 {
            assert!(lod.error_bound(1, 2, level) >= lod.error_bound(1, 2, level - 1));
        }
        assert!(lod.error_bound(1, 2, 4) > Some(0.0));
        let lazy = ChunkedLod::new(&field, &pyramid, options(16, 2.0, false));
        assert_eq!(lazy.error_bound(1, 2, 4), None);
        let plane = Heightfield::new(
            65,
            65,
            Samples::U16((0..65 * 65).map(|i| (i % 65) as u16 * 3).collect()),
        )
        .expect("valid plane");
        let pyramid = Pyramid::build(&plane);
        let lod = ChunkedLod::new(&plane, &pyramid, options(16, 2.0, true));
        assert_eq!(lod.error_bound(3, 3, 4), Some(0.0));
    }

    /// The surface of `mesh` at grid point `(c, r)` (f64 barycentric interpolation).
    fn surface_at(mesh: &crate::GridMesh, c: i64, r: i64) -> Option<f64> {
        for t in &mesh.triangles {
            let p = t.map(|v| {
                let q = mesh.positions[v as usize];
                (
                    i64::from(q.col),
                    i64::from(q.row),
                    f64::from(mesh.heights[v as usize]),
                )
            });
            let area = |a: (i64, i64), b: (i64, i64), x: (i64, i64)| {
                (b.1 - a.1) * (x.0 - a.0) - (b.0 - a.0) * (x.1 - a.1)
            };
            let (a, b, cc) = ((p[0].0, p[0].1), (p[1].0, p[1].1), (p[2].0, p[2].1));
            let total = area(a, b, cc);
            let w = [area(b, cc, (c, r)), area(cc, a, (c, r)), area(a, b, (c, r))];
            if w.iter().all(|&x| x >= 0) {
                return Some(
                    (w[0] as f64 * p[0].2 + w[1] as f64 * p[1].2 + w[2] as f64 * p[2].2)
                        / total as f64,
                );
            }
        }
        None
    }

    /// At the distance where a block turns coarser, its morphed level-`L` mesh (any seams)
    /// is the level-`(L + 1)` surface: no pop when it switches.
    #[test]
    fn at_the_switch_distance_the_morphed_mesh_is_the_coarser_one() {
        let field = field(33, 33, 21);
        let pyramid = Pyramid::build(&field);
        let lod = ChunkedLod::new(&field, &pyramid, options(16, 2.0, false));
        let patch = &lod.patch;
        let (q, w) = lod.morph_distances;
        let (lo, hi) = (lod.terrain_box.min.y, lod.terrain_box.max.y);
        let origin = GridPos::new(16, 16);
        for level in 0..patch.coarsest_level() {
            // Straight above the block at vertical distance (L + 1) q: every vertex is at
            // L∞ distance exactly (L + 1) q.
            let eye = Vec3::new(24.0, hi + (level + 1) as f32 * q, 24.0);
            let morph = PatchMorph {
                eye,
                height_range: (lo, hi),
                level_distance: q,
                morph_start: w,
                inv_range: 1.0 / (q - w),
                coarsest: patch.coarsest_level(),
            };
            let mesh_of = |level: u32, variant: SeamNeighbour, morph: Option<PatchMorph>| {
                let mut instances = vec![patch_instance(
                    origin,
                    patch.interior(level),
                    level,
                    Containment::Inside,
                )];
                for side in Side::ALL {
                    if let Some(seam) = patch.seam(level, side, variant) {
                        instances.push(patch_instance(origin, seam, level, Containment::Inside));
                    }
                }
                Selection::Patches {
                    vertices: lod.vertices,
                    patch_side: patch.side(),
                    index_buffers: patch.buffers(),
                    instances: &instances,
                    morph,
                    pool: None,
                }
                .to_mesh(&field)
            };
            let coarse = mesh_of(level + 1, SeamNeighbour::Same, None);
            for variant in [SeamNeighbour::Same, SeamNeighbour::Coarser] {
                let fine = mesh_of(level, variant, Some(morph));
                let unmorphed = mesh_of(level, variant, None);
                let mut moved = false;
                for r in 16..=32 {
                    for c in 16..=32 {
                        let (a, b) = (surface_at(&fine, c, r), surface_at(&coarse, c, r));
                        let (a, b) = (a.expect("covered"), b.expect("covered"));
                        assert!(
                            (a - b).abs() <= 1e-3,
                            "level {level} {variant:?} at ({c}, {r}): {a} vs {b}"
                        );
                        moved |= surface_at(&unmorphed, c, r) != Some(a);
                    }
                }
                assert!(
                    moved || level + 1 == patch.coarsest_level(),
                    "level {level}: nothing morphed"
                );
            }
            // Closer than the morph range, nothing moves.
            let near = PatchMorph {
                eye: Vec3::new(24.0, hi + level as f32 * q + 0.5 * w, 24.0),
                ..morph
            };
            let fine = mesh_of(level, SeamNeighbour::Same, Some(near));
            for (pos, height) in fine.positions.iter().zip(&fine.heights) {
                let m = pos.col.trailing_zeros().min(pos.row.trailing_zeros());
                if m == level {
                    assert_eq!(*height, sample_height(&field, *pos));
                }
            }
        }
    }
}
