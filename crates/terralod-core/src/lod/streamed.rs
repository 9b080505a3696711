//! The streamed algorithm (issue 9, step 2): an error-driven quadtree over the blocks of a
//! tiled terrain that selects only from what is resident, through [`TileSource`]. While a
//! tile is missing the coarser block stands in (the tile is requested; no frame waits).
//!
//! # Blocks and the quadtree
//!
//! Block `(L, bx, by)` is `B` cells of level `L` (`tiles/source.rs`); its children are the
//! four level-`L − 1` blocks `(2bx + {0,1}, 2by + {0,1})`. The tree is the full quadtree
//! over the roots' extent: a child past the last block of its level (*virtual*: its
//! samples are all padding, repeated border samples) is drawn like any block, its heights
//! read clamped from the last tile of its row or column. A virtual block's footprint holds
//! no data sample except on its edge shared with a real block, where both draw the same
//! polyline, so the real block's bound covers it: a virtual block has bound 0 and its box
//! is that of the real block its samples are clamped into.
//!
//! # Selection (per frame)
//!
//! [`TileSource::begin_frame`], then a worklist from the roots (a root is drawn only once
//! its tile is resident). A leaf is kept when [`View::accepts`] its bound (below) on its box
//! (plan square × the block's full-resolution height range); else it is split when it is
//! above level 0 and the tiles of its visible children are resident (the call requests
//! them otherwise: the block is then *held back*). Boxes are culled with the tri-state test
//! against only the planes the parent crosses; culled blocks are leaves never drawn.
//!
//! **Balance** (drawn neighbours within one level, so [`StitchedPatch`]'s seams close every
//! edge): splitting a block first splits every drawn neighbour one level coarser (ROAM's
//! forced split, recursively). A forced split needs its own children's tiles too; when one
//! is missing the split that asked for it is refused, so the finer side stays coarser. So
//! the tree never needs a non-resident tile, and a block whose bound is not accepted while
//! its children's tiles are resident is split unless a forced split of a neighbour lacks a
//! tile (the only way resident data stays unused, and only until that tile arrives). A
//! block whose bound is accepted only *without* coarser seams (`error_to_finest`, below)
//! first has its coarser drawn neighbours force-split (cheaper than splitting itself, which
//! would split them too); only if one of those lacks a tile is the block split. Level-0
//! blocks (`error_to_finest = 0`) so always end with same-level seams when their tiles
//! allow. Culled blocks constrain nothing (they share no drawn edge).
//! Splits only ever add blocks, so the worklist ends; with every tile resident the result
//! is the least balanced tree that holds every wanted split, whatever the order. A tile
//! that failed (never resident) so keeps its parent block drawn, and with it four times
//! its footprint, the whole terrain when it is a child of the coarsest block (docs/TILES.md,
//! "The tile cache"): `streamed-quadtree` degrades per node instead.
//!
//! # The error bound of a drawn block, seams included
//!
//! `e(X) = error_to_finest + 2 · own_error` when `X` has a seam against a coarser drawn
//! neighbour, `error_to_finest` otherwise. A block is kept when the first is accepted, or
//! when the second is and no coarser drawn neighbour is left (they never come back: splits
//! only refine), so every drawn block's own bound is accepted when its tiles allow.
//!
//! - Same-level seams and the interior are level-`L` grid cells (either diagonal):
//!   `error_to_finest` bounds them at every level-0 sample (see `BlockBounds`: descending
//!   level by level one may choose each finer level's diagonals so that its triangles nest
//!   in the coarser ones; the difference of two nested surfaces is linear on each finer
//!   triangle, so at most `own_error` of the finer block, and these sum to the bound).
//! - A coarse-seam triangle `T` mixes level-`L` and level-`(L + 1)` vertices. Every such
//!   triangle lies inside one half `P` of a level-`(L + 1)` cell (tested below over every
//!   level and side of [`StitchedPatch`]), and `P`'s cell lies in `X` (blocks are unions of
//!   level-`(L + 1)` cells). On `T`, `T − P` is linear and at `T`'s vertices (level-`L`
//!   samples of `X`) at most `own_error`; `P − h0` at a level-0 sample is at most
//!   `own_error + error_to_finest` (nest a level-`L` surface in `P`, as above). Hence
//!   `error_to_finest + 2 · own_error`.
//!
//! # Output
//!
//! [`Selection::Patches`] with a [`PatchPool`]: one slot per drawn block, filled from its
//! tile's heights when the block starts being drawn and kept while it stays drawn (a slot
//! is freed the first frame its block is not drawn). Instances: origin in level-0 grid
//! coordinates, step `2^L`, the interior and one seam per side of [`StitchedPatch`]'s
//! finest level, `level = L`. The pool grows (a new pool, every slot refilled) only when a
//! frame draws more blocks than it holds, so a warmed-up frame allocates nothing.

use super::stitched_patch::{SeamNeighbour, Side, StitchedPatch};
use super::{
    GridVertices, LodAlgorithm, LodOptions, Pass, PatchInstance, PatchPool, Selection,
    SelectionStats, StreamCounts, StreamingLod, View, round_up,
};
use crate::camera::{Aabb, Containment, Frustum};
use crate::heightfield::GridPos;
use crate::tiles::level_blocks;
use crate::tiles::source::{BlockBounds, TileKey, TileSource};
use glam::Vec3;
use std::time::Instant;

/// Slots of a new pool; it doubles when a frame draws more blocks.
const INITIAL_SLOTS: u32 = 64;

/// A block's state in this frame's tree (valid while its stamp is the frame's).
const LEAF: u8 = 1;
const SPLIT: u8 = 2;
const CULLED: u8 = 3;

const NONE: u32 = u32::MAX;

/// What [`StreamedLod`] counted in its last selection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StreamStats {
    /// Blocks drawn.
    pub blocks_drawn: u64,
    /// Blocks that wanted to split but were drawn at their own level because a child's
    /// tile (or a forced neighbour's) was not resident.
    pub blocks_held_back: u64,
    /// Pool slots filled this frame (blocks newly drawn).
    pub slots_filled: u64,
    /// Slots of the pool.
    pub pool_capacity: u32,
}

/// A block: level and coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    level: u32,
    bx: u32,
    by: u32,
}

/// Shape of one level in the full quadtree over the roots.
#[derive(Clone, Copy, Debug)]
struct LevelShape {
    /// Blocks across and down in the full quadtree (`roots << (top − L)`).
    across: u32,
    down: u32,
    /// Blocks that exist (touch the level's samples).
    real_x: u32,
    real_y: u32,
    /// Level samples, for clamping.
    width: u32,
    height: u32,
    tiles_x: u32,
    tiles_y: u32,
    /// First index of this level in the per-block arrays.
    offset: usize,
}

/// Why a split did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    /// Level 0.
    Finest,
    /// A tile needed by it or by a forced neighbour split is not resident.
    MissingTile,
}

/// The streamed LOD algorithm over any [`TileSource`].
pub struct StreamedLod<S: TileSource> {
    source: S,
    view_angle_aware: bool,
    block_cells: u32,
    tile_cells: u32,
    cell_size: f32,
    patch: StitchedPatch,
    buffer_triangles: Vec<u32>,
    levels: Vec<LevelShape>,
    /// Per block: the frame it joined the tree, its state, the frustum planes it crosses.
    stamp: Vec<u32>,
    state: Vec<u8>,
    planes: Vec<u8>,
    /// Per block: its pool slot (or [`NONE`]) and the last frame it was drawn.
    slot_of: Vec<u32>,
    drawn_at: Vec<u32>,
    /// Per slot: the block (flat index) it holds, or [`NONE`].
    owner: Vec<u32>,
    pool: PatchPool,
    frame: u32,
    worklist: Vec<Block>,
    in_tree: Vec<Block>,
    drawn: Vec<(Block, Containment)>,
    instances: Vec<PatchInstance>,
    stats: SelectionStats,
    stream: StreamStats,
}

impl<S: TileSource> std::fmt::Debug for StreamedLod<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamedLod")
            .field("block_cells", &self.block_cells)
            .field("tile_cells", &self.tile_cells)
            .field("levels", &self.levels.len())
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

impl<S: TileSource> StreamedLod<S> {
    /// The algorithm over `source` (its header and block size fix the tree).
    pub fn new(source: S, options: LodOptions) -> StreamedLod<S> {
        let header = source.header().clone();
        let block_cells = source.block_cells().max(2).next_power_of_two();
        let top = header.levels.len() - 1;
        let (roots_x, roots_y) = level_blocks(&header.levels[top], block_cells);
        let mut levels = Vec::with_capacity(header.levels.len());
        let mut offset = 0;
        for (level, grid) in header.levels.iter().enumerate() {
            let (real_x, real_y) = level_blocks(grid, block_cells);
            let shift = (top - level) as u32;
            let shape = LevelShape {
                across: roots_x << shift,
                down: roots_y << shift,
                real_x,
                real_y,
                width: grid.width,
                height: grid.height,
                tiles_x: grid.tiles_x,
                tiles_y: grid.tiles_y,
                offset,
            };
            offset += shape.across as usize * shape.down as usize;
            levels.push(shape);
        }
        let patch = StitchedPatch::clamped(block_cells.trailing_zeros());
        let buffer_triangles = patch
            .buffers()
            .iter()
            .map(|b| (b.len() / 3) as u32)
            .collect();
        let range = (header.min_height, header.max_height);
        StreamedLod {
            view_angle_aware: options.view_angle_aware,
            block_cells,
            tile_cells: header.tile_cells,
            cell_size: header.mapping.cell_size,
            patch,
            buffer_triangles,
            levels,
            stamp: vec![0; offset],
            state: vec![0; offset],
            planes: vec![0; offset],
            slot_of: vec![NONE; offset],
            drawn_at: vec![0; offset],
            owner: vec![NONE; INITIAL_SLOTS as usize],
            pool: PatchPool::with_height_range(block_cells, INITIAL_SLOTS, range),
            frame: 0,
            worklist: Vec::new(),
            in_tree: Vec::new(),
            drawn: Vec::new(),
            instances: Vec::new(),
            stats: SelectionStats::default(),
            stream: StreamStats::default(),
            source,
        }
    }

    /// Counters of the last selection.
    pub fn stream_stats(&self) -> &StreamStats {
        &self.stream
    }

    /// The pool of the last selection.
    pub fn pool(&self) -> &PatchPool {
        &self.pool
    }

    /// Level and block coordinates of the blocks drawn by the last selection.
    pub fn drawn_blocks(&self) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
        self.drawn.iter().map(|(b, _)| (b.level, b.bx, b.by))
    }

    fn index(&self, b: Block) -> usize {
        let shape = &self.levels[b.level as usize];
        shape.offset + (b.by * shape.across + b.bx) as usize
    }

    fn in_tree_now(&self, i: usize) -> bool {
        self.stamp[i] == self.frame
    }

    fn top(&self) -> u32 {
        (self.levels.len() - 1) as u32
    }

    /// Bounds of a block; a virtual block has its clamped real block's height range and
    /// no error (see the module docs).
    fn bounds(&self, b: Block) -> BlockBounds {
        let shape = &self.levels[b.level as usize];
        if b.bx < shape.real_x && b.by < shape.real_y {
            self.source.block_bounds(b.level, b.bx, b.by)
        } else {
            let real = self.source.block_bounds(
                b.level,
                b.bx.min(shape.real_x - 1),
                b.by.min(shape.real_y - 1),
            );
            BlockBounds {
                own_error: 0.0,
                error_to_finest: 0.0,
                ..real
            }
        }
    }

    fn aabb(&self, b: Block, bounds: &BlockBounds) -> Aabb {
        let span = self.block_cells << b.level;
        let (x0, z0) = (b.bx * span, b.by * span);
        let cell = self.cell_size;
        let (xa, xb) = (x0 as f32 * cell, (x0 + span) as f32 * cell);
        let (za, zb) = (z0 as f32 * cell, (z0 + span) as f32 * cell);
        Aabb {
            min: Vec3::new(xa.min(xb), bounds.min_height, za.min(zb)),
            max: Vec3::new(xa.max(xb), bounds.max_height, za.max(zb)),
        }
    }

    /// The tile a block's samples are read from (its own; a virtual block's clamped one).
    fn tile_of(&self, b: Block) -> TileKey {
        let shape = &self.levels[b.level as usize];
        let n = self.tile_cells;
        let tx = (b.bx * self.block_cells / n).min(shape.tiles_x - 1);
        let ty = (b.by * self.block_cells / n).min(shape.tiles_y - 1);
        (b.level, tx, ty)
    }

    /// Puts `b` in this frame's tree as a leaf (or culled), tested against `planes`.
    fn insert(&mut self, b: Block, planes: u8, pass: &Pass<'_>) {
        let i = self.index(b);
        self.stamp[i] = self.frame;
        let (state, crossing) = self.classify(b, planes, pass);
        self.state[i] = state;
        self.planes[i] = crossing;
        self.in_tree.push(b);
        if state == LEAF {
            self.worklist.push(b);
        }
    }

    fn classify(&self, b: Block, planes: u8, pass: &Pass<'_>) -> (u8, u8) {
        match pass.crossing(planes, || self.aabb(b, &self.bounds(b))) {
            None => (CULLED, 0),
            Some(crossing) => (LEAF, crossing),
        }
    }

    fn children(b: Block) -> [Block; 4] {
        [(0, 0), (1, 0), (0, 1), (1, 1)].map(|(dx, dy)| Block {
            level: b.level - 1,
            bx: 2 * b.bx + dx,
            by: 2 * b.by + dy,
        })
    }

    /// The block across `side` at the same level, if inside the tree's extent.
    fn across(&self, b: Block, side: Side) -> Option<Block> {
        let shape = &self.levels[b.level as usize];
        let (bx, by) = match side {
            Side::North => (Some(b.bx), b.by.checked_sub(1)),
            Side::South => (Some(b.bx), (b.by + 1 < shape.down).then_some(b.by + 1)),
            Side::West => (b.bx.checked_sub(1), Some(b.by)),
            Side::East => ((b.bx + 1 < shape.across).then_some(b.bx + 1), Some(b.by)),
        };
        Some(Block {
            level: b.level,
            bx: bx?,
            by: by?,
        })
    }

    /// The block of this frame's tree that covers the area across `side` of `b` at `b`'s
    /// level or coarser, and its state.
    fn neighbour(&self, b: Block, side: Side) -> Option<(Block, u8)> {
        let mut n = self.across(b, side)?;
        let top = self.top();
        loop {
            let i = self.index(n);
            if self.in_tree_now(i) {
                return Some((n, self.state[i]));
            }
            if n.level == top {
                return None;
            }
            n = Block {
                level: n.level + 1,
                bx: n.bx / 2,
                by: n.by / 2,
            };
        }
    }

    /// Splits leaf `b`, first force-splitting its drawn neighbours one level coarser.
    fn try_split(&mut self, b: Block, pass: &Pass<'_>) -> Result<(), Refusal> {
        let i = self.index(b);
        if self.state[i] == SPLIT {
            return Ok(());
        }
        if b.level == 0 {
            return Err(Refusal::Finest);
        }
        let planes = self.planes[i];
        let kids = Self::children(b);
        let mut last_tile = None;
        for kid in kids {
            if self.classify(kid, planes, pass).0 == CULLED {
                continue;
            }
            let tile = self.tile_of(kid);
            if last_tile != Some(tile) {
                if self.source.tile_heights(tile).is_none() {
                    return Err(Refusal::MissingTile);
                }
                last_tile = Some(tile);
            }
        }
        for side in Side::ALL {
            if let Some((n, LEAF)) = self.neighbour(b, side)
                && n.level > b.level
            {
                self.try_split(n, pass).map_err(|_| Refusal::MissingTile)?;
            }
        }
        self.state[i] = SPLIT;
        for kid in kids {
            self.insert(kid, planes, pass);
        }
        Ok(())
    }

    fn select_tree(&mut self, pass: &Pass<'_>) {
        let top = self.top();
        let shape = self.levels[top as usize];
        for by in 0..shape.down {
            for bx in 0..shape.across {
                let root = Block { level: top, bx, by };
                let tile = self.tile_of(root);
                if self.source.tile_heights(tile).is_some() {
                    self.insert(root, Frustum::ALL_PLANES, pass);
                }
            }
        }
        while let Some(b) = self.worklist.pop() {
            let i = self.index(b);
            if self.state[i] != LEAF {
                continue;
            }
            self.stats.nodes_visited += 1;
            let bounds = self.bounds(b);
            let aabb = self.aabb(b, &bounds);
            let full =
                round_up(f64::from(bounds.error_to_finest) + 2.0 * f64::from(bounds.own_error));
            if pass.view.accepts(full, &aabb, pass.view_angle_aware) {
                continue;
            }
            // Accepted with same-level seams: split the coarser neighbours instead (the
            // cheaper fix: splitting this block would have to split them anyway).
            let same_level_ok =
                pass.view
                    .accepts(bounds.error_to_finest, &aabb, pass.view_angle_aware);
            if same_level_ok && self.split_coarser_neighbours(b, pass) {
                continue;
            }
            match self.try_split(b, pass) {
                Ok(()) => {}
                // A level-0 block gets here only when its coarser neighbours could not be
                // split (a tile missing) and its coarse seams fail the view.
                Err(Refusal::MissingTile | Refusal::Finest) => self.stream.blocks_held_back += 1,
            }
        }
    }

    /// Force-splits the drawn neighbours of `b` one level coarser; whether none is left.
    fn split_coarser_neighbours(&mut self, b: Block, pass: &Pass<'_>) -> bool {
        let mut all = true;
        for side in Side::ALL {
            if let Some((n, LEAF)) = self.neighbour(b, side)
                && n.level > b.level
            {
                all &= self.try_split(n, pass).is_ok();
            }
        }
        all
    }

    /// Assigns pool slots: frees those of blocks no longer drawn, fills new ones.
    fn assign_slots(&mut self) {
        let frame = self.frame;
        for k in 0..self.drawn.len() {
            let i = self.index(self.drawn[k].0);
            self.drawn_at[i] = frame;
        }
        for slot in 0..self.owner.len() {
            let owner = self.owner[slot];
            if owner != NONE && self.drawn_at[owner as usize] != frame {
                self.slot_of[owner as usize] = NONE;
                self.owner[slot] = NONE;
                self.pool.give_back(slot as u32);
            }
        }
        let needed = self
            .drawn
            .iter()
            .filter(|(b, _)| self.slot_of[self.index(*b)] == NONE)
            .count() as u32;
        if needed > self.pool.free_slots() {
            // Grow, keeping the filled slots (refilling them all made the frame that grew
            // the pool the slowest of a flight).
            let capacity = (self.pool.capacity() * 2).max(self.pool.in_use() + needed);
            self.pool.grow(capacity);
            self.owner.resize(capacity as usize, NONE);
        }
        for k in 0..self.drawn.len() {
            let b = self.drawn[k].0;
            let i = self.index(b);
            // Marks the tile used this frame (the cache keeps it), refilled or not.
            let Some(tile) = self.source.tile_heights(self.tile_of(b)) else {
                continue;
            };
            if self.slot_of[i] != NONE {
                continue;
            }
            let Some(slot) = self.pool.take() else {
                continue;
            };
            self.fill(slot, b, &tile);
            self.slot_of[i] = slot;
            self.owner[slot as usize] = i as u32;
            self.stream.slots_filled += 1;
        }
    }

    /// Fills `slot` with block `b`'s vertices from its tile's heights; the ring around the
    /// block (for normals) is clamped to the level's samples and to the tile.
    fn fill(&mut self, slot: u32, b: Block, tile: &[f32]) {
        let shape = self.levels[b.level as usize];
        let n = i64::from(self.tile_cells);
        let (_, tx, ty) = self.tile_of(b);
        let (tx0, ty0) = (i64::from(tx) * n, i64::from(ty) * n);
        let bc = i64::from(self.block_cells);
        let (gx0, gy0) = (i64::from(b.bx) * bc, i64::from(b.by) * bc);
        let (last_x, last_y) = (i64::from(shape.width) - 1, i64::from(shape.height) - 1);
        let side = n + 1;
        let height = |i: i64, j: i64| {
            let x = (gx0 + i).clamp(0, last_x);
            let y = (gy0 + j).clamp(0, last_y);
            let lx = (x - tx0).clamp(0, n);
            let ly = (y - ty0).clamp(0, n);
            tile[(ly * side + lx) as usize]
        };
        let step = 1u32 << b.level;
        let origin = GridPos::new(
            b.bx * self.block_cells * step,
            b.by * self.block_cells * step,
        );
        self.pool
            .fill_with(slot, origin, step, self.cell_size, height);
    }

    fn emit(&mut self) {
        let mut triangles = 0u64;
        for k in 0..self.drawn.len() {
            let (b, frustum) = self.drawn[k];
            let slot = self.slot_of[self.index(b)];
            if slot == NONE {
                continue;
            }
            let step = 1u32 << b.level;
            let origin = GridPos::new(
                b.bx * self.block_cells * step,
                b.by * self.block_cells * step,
            );
            let mut buffers = [NONE; 5];
            buffers[0] = self.patch.interior(0);
            for (s, side) in Side::ALL.into_iter().enumerate() {
                let coarser = matches!(
                    self.neighbour(b, side),
                    Some((n, LEAF)) if n.level > b.level
                );
                let variant = if coarser {
                    SeamNeighbour::Coarser
                } else {
                    SeamNeighbour::Same
                };
                buffers[s + 1] = self.patch.seam(0, side, variant).unwrap_or(NONE);
            }
            for buffer in buffers {
                let count = self
                    .buffer_triangles
                    .get(buffer as usize)
                    .copied()
                    .unwrap_or(0);
                if count == 0 {
                    continue;
                }
                triangles += u64::from(count);
                self.instances.push(PatchInstance {
                    origin,
                    step,
                    index_buffer: buffer,
                    level: b.level,
                    frustum,
                    slot,
                });
            }
        }
        self.stats.triangles = triangles;
    }
}

impl<S: TileSource + Send> LodAlgorithm for StreamedLod<S> {
    fn name(&self) -> &'static str {
        "streamed"
    }

    fn select(&mut self, view: &View) -> Selection<'_> {
        let started = Instant::now();
        self.source.begin_frame();
        self.frame = self.frame.wrapping_add(1).max(1);
        if self.frame == 1 {
            // Wrapped (or first frame): no stale stamp may equal a new frame.
            self.stamp.fill(0);
            self.drawn_at.fill(0);
        }
        self.stats = SelectionStats::default();
        self.stream = StreamStats::default();
        self.worklist.clear();
        self.in_tree.clear();
        self.drawn.clear();
        self.instances.clear();
        let pass = Pass::culling(view, self.view_angle_aware);
        let frustum = pass.frustum;
        self.select_tree(&pass);
        for k in 0..self.in_tree.len() {
            let b = self.in_tree[k];
            let i = self.index(b);
            if self.state[i] == LEAF {
                let containment = match (frustum, self.planes[i]) {
                    (None, _) | (_, 0) => Containment::Inside,
                    _ => Containment::Intersecting,
                };
                self.drawn.push((b, containment));
            }
        }
        self.assign_slots();
        self.emit();
        self.stats.nodes_drawn = self.drawn.len() as u64;
        self.stream.blocks_drawn = self.drawn.len() as u64;
        self.stream.pool_capacity = self.pool.capacity();
        self.stats.select_time = started.elapsed();
        let top = &self.levels[self.levels.len() - 1];
        let extent = (self.block_cells << self.top()) * top.across.max(top.down);
        Selection::Patches {
            vertices: GridVertices {
                stride: extent + 1,
                rows: extent + 1,
                shift: 0,
            },
            patch_side: self.block_cells,
            index_buffers: self.patch.buffers(),
            instances: &self.instances,
            morph: None,
            pool: Some(&self.pool),
        }
    }

    fn stats(&self) -> &SelectionStats {
        &self.stats
    }

    fn state_bytes(&self) -> usize {
        self.stamp.len() * (4 + 1 + 1 + 4 + 4)
            + self.owner.len() * 4
            + self.pool.memory_bytes()
            + self.worklist.capacity() * size_of::<Block>()
            + self.in_tree.capacity() * size_of::<Block>()
            + self.drawn.capacity() * size_of::<(Block, Containment)>()
            + self.instances.capacity() * size_of::<PatchInstance>()
    }

    fn drawn_boxes(&self, out: &mut Vec<Aabb>) {
        for (b, _) in &self.drawn {
            out.push(self.aabb(*b, &self.bounds(*b)));
        }
    }
}

impl<S: TileSource + Send> StreamingLod for StreamedLod<S> {
    type Source = S;

    fn source(&self) -> &S {
        &self.source
    }

    fn source_mut(&mut self) -> &mut S {
        &mut self.source
    }

    fn stream_counts(&self) -> StreamCounts {
        StreamCounts {
            unit: "blocks",
            drawn: self.stream.blocks_drawn,
            held_back: self.stream.blocks_held_back,
            deferred: 0,
        }
    }
}

#[cfg(test)]
mod tests;
