//! Procedural detail below the finest stored level (A9): a [`TileSource`] wrapper that adds
//! `k` finer levels to any tiled terrain, generated on demand from the stored finest level
//! with deterministic fractal noise, kept while the selection uses them and dropped when the
//! camera leaves.
//!
//! # The detail surface
//!
//! The stored level 0 becomes level `k`; detail level `j < k` has cells `2^(k − j)` times
//! finer. Level `j` is made from level `j + 1` by midpoint displacement: its samples at even
//! coordinates *are* level-`(j + 1)` samples (the pyramid's rule), an edge midpoint is the
//! mean of its edge's two ends and a cell centre the mean of its cell's four corners, each
//! plus `A_j · n`, with `n ∈ [−1, 1]` a hash of the seed, the level and the sample's global
//! coordinates, and `A_j = roughness · cell_j` (halving with the cell: a self-similar
//! fractal). A sample depends only on coarser samples and its own coordinates, so a tile
//! generated alone equals the same tile generated beside any other: tiles share their
//! edges exactly, whatever order the camera asks for them.
//!
//! # Bounds before generation
//!
//! The selection needs every block's bounds before its tile exists. They follow from the
//! stored block index (the errors there are against *either* diagonal of a cell):
//!
//! - *Twist.* For a cell of level `m` with corners `a, b, c, d` (diagonal pairs `a, c` and
//!   `b, d`), `w = a + c − b − d`. One corner is a level-`(m + 1)` sample; the cell lies in
//!   one triangle of its level-`(m + 1)` cell for one of the two diagonals, where that
//!   surface is linear (twist 0), and the other three corners are within the level's own
//!   error `e_m` of it: `|w| ≤ 3 e_m`.
//! - *Own error of a detail level.* A midpoint lies on its edge, in every triangulation:
//!   `|n A_j| ≤ A_j`. A centre is `A_j` from its cell's bilinear mean, which is `|w| / 4`
//!   from either diagonal's mean: `e_j ≤ w_(j+1) / 4 + A_j`. Undisplaced, the new samples
//!   are the bilinear interpolation of the coarser cell, whose quarters have a quarter of
//!   its twist; three of a quarter's corners are displaced: `w_j ≤ w_(j+1) / 4 + 3 A_j`.
//!   The chain starts from `w_k ≤ 3 e_k`, the stored level's own error (of the stored
//!   level-0 block holding the cell).
//! - *Error to finest*: the sum of the own errors below (the stored index's rule), so a
//!   stored block's grows by `D = Σ e_j`, taken with `e_k` bounded by its old error to
//!   finest (which is at least every level-`k` descendant's own error).
//! - *Height range*: every new sample is a convex combination of coarser ones plus at most
//!   `A_j`, so ranges widen by `Σ A_j`.
//!
//! Each bound gets a small margin for the `f32` arithmetic of the generation. The
//! property tests check all of them against the exact statistics of generated terrains.
//!
//! # Memory
//!
//! A detail tile is generated (synchronously, at most `tiles_per_frame` per frame; the
//! selection draws the coarser block meanwhile) when the selection first asks for it, and
//! dropped once `keep_frames` selections have passed without asking for it, or sooner when
//! the tiles held exceed `max_bytes` (least recently used first, never one of the last
//! two selections'). With the camera gone, memory returns to what the stored terrain alone
//! uses.

use super::TerrainHeader;
use super::blocks::BlockBounds;
use super::cache::TileKey;
use super::format::{LevelGrid, MAX_SIDE};
use super::source::TileSource;
use crate::heightfield::{Heightfield, WorldMapping};
use crate::rounding::{round_down, round_up};
use std::collections::HashMap;
use std::sync::Arc;

/// How much detail to add and how long to keep it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DetailOptions {
    /// `k`: detail levels below the stored finest level (0 = none: a pass-through).
    pub levels: u32,
    /// Displacement amplitude of a level, in units of its cell size.
    pub roughness: f32,
    /// Seed of the noise.
    pub seed: u64,
    /// Selections a tile is kept without being asked for.
    pub keep_frames: u32,
    /// Tiles generated in one selection at most (more wait for the next one).
    pub tiles_per_frame: u32,
    /// Bytes of generated tiles held beyond which the least recently used go first (tiles
    /// the last two selections asked for are kept even beyond it).
    pub max_bytes: u64,
}

impl DetailOptions {
    pub const DEFAULT: DetailOptions = DetailOptions {
        levels: 0,
        roughness: 0.25,
        seed: 0x7e77_a10d,
        keep_frames: 60,
        tiles_per_frame: 4,
        max_bytes: 256 << 20,
    };

    pub fn with_levels(mut self, levels: u32) -> Self {
        self.levels = levels;
        self
    }
}

impl Default for DetailOptions {
    fn default() -> Self {
        DetailOptions::DEFAULT
    }
}

/// Why detail cannot be added to a terrain.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DetailError {
    #[error(
        "{levels} detail levels need tiles of at least 2^{levels} cells (these have {tile_cells})"
    )]
    TooDeep { levels: u32, tile_cells: u32 },
    #[error("{levels} detail levels make the terrain {samples} samples wide, above {MAX_SIDE}")]
    TooLarge { levels: u32, samples: u64 },
    #[error("detail roughness must be finite and in 0 ..= 4, not {0}")]
    Roughness(f32),
}

/// What a [`DetailTiles`] holds and has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DetailStats {
    /// Generated tiles held now, and the bytes held (tiles and measured twists).
    pub tiles: u64,
    pub bytes: u64,
    /// Most bytes held at once.
    pub peak_bytes: u64,
    /// Tiles generated and dropped so far.
    pub generated: u64,
    pub dropped: u64,
    /// Requests since the last [`TileSource::begin_frame`] (in the selection under way or
    /// just made) for tiles left for the next one: the frame's budget was spent or the
    /// stored tile under them was not resident. 0 once the view has all its detail.
    pub deferred: u64,
}

struct Generated {
    heights: Arc<[f32]>,
    used: u64,
}

struct Twists {
    largest: Box<[f32]>,
    used: u64,
}

/// A tiled terrain with `k` procedural detail levels below its stored finest level.
pub struct DetailTiles<S: TileSource> {
    inner: S,
    options: DetailOptions,
    header: TerrainHeader,
    /// `A_j` per detail level, world units.
    amplitude: Vec<f64>,
    /// Bound of the `f32` rounding of one generated level.
    slack: f64,
    /// `Σ A_j` plus rounding: how far detail reaches beyond the stored height range.
    reach: f64,
    tiles: HashMap<TileKey, Generated>,
    /// Per stored level-0 tile seen resident: the largest twist of its cells in each
    /// square of `B / 2` cells (a level-`(k − 1)` block's footprint), row-major.
    twists: HashMap<(u32, u32), Twists>,
    frame: u64,
    made_this_frame: u32,
    stats: DetailStats,
}

impl<S: TileSource> std::fmt::Debug for DetailTiles<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DetailTiles")
            .field("options", &self.options)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<S: TileSource> DetailTiles<S> {
    /// `inner` with `options.levels` detail levels below its finest level.
    pub fn new(inner: S, options: DetailOptions) -> Result<Self, DetailError> {
        let k = options.levels;
        let stored = inner.header().clone();
        if !options.roughness.is_finite() || !(0.0..=4.0).contains(&options.roughness) {
            return Err(DetailError::Roughness(options.roughness));
        }
        if k > stored.tile_cells.trailing_zeros() {
            return Err(DetailError::TooDeep {
                levels: k,
                tile_cells: stored.tile_cells,
            });
        }
        let widen = |samples: u32| (u64::from(samples) - 1) * (1u64 << k) + 1;
        let (width, height) = (widen(stored.width), widen(stored.height));
        if width.max(height) > u64::from(MAX_SIDE) {
            return Err(DetailError::TooLarge {
                levels: k,
                samples: width.max(height),
            });
        }
        let (width, height) = (width as u32, height as u32);
        // The detail levels halve exactly down to the stored level 0; above them the levels
        // are the stored ones (the sizes `level_grids` gives, without its stop at one tile).
        let mut levels: Vec<LevelGrid> = (0..k)
            .map(|j| {
                let (w, h) = (((width - 1) >> j) + 1, ((height - 1) >> j) + 1);
                LevelGrid {
                    width: w,
                    height: h,
                    tiles_x: (w - 1).div_ceil(stored.tile_cells),
                    tiles_y: (h - 1).div_ceil(stored.tile_cells),
                }
            })
            .collect();
        levels.extend_from_slice(&stored.levels);
        let detail_cell = f64::from(stored.mapping.cell_size) / f64::from(1u32 << k);
        let amplitude: Vec<f64> = (0..k)
            .map(|j| f64::from(options.roughness) * detail_cell * f64::from(1u32 << j))
            .collect();
        // Stored heights are `fl(fl(raw · s) + o)`: their rounding follows `|raw · s| + |o|`,
        // which a large offset makes much more than the heights themselves.
        let offset = f64::from(stored.mapping.height_offset);
        let scaled = (f64::from(stored.min_height) - offset)
            .abs()
            .max((f64::from(stored.max_height) - offset).abs());
        let magnitude = scaled + offset.abs() + f64::from(stored.max_height.abs());
        let total: f64 = amplitude.iter().sum();
        let slack = if k == 0 {
            0.0
        } else {
            (magnitude + total) * 2f64.powi(-21)
        };
        let reach = total + f64::from(k) * slack;
        let mut mapping = stored.mapping;
        mapping.cell_size = detail_cell as f32;
        let header = TerrainHeader {
            width,
            height,
            mapping,
            min_height: round_down(f64::from(stored.min_height) - reach),
            max_height: round_up(f64::from(stored.max_height) + reach),
            levels,
            ..stored
        };
        Ok(DetailTiles {
            inner,
            options,
            header,
            amplitude,
            slack,
            reach,
            tiles: HashMap::new(),
            twists: HashMap::new(),
            frame: 0,
            made_this_frame: 0,
            stats: DetailStats::default(),
        })
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    pub fn options(&self) -> &DetailOptions {
        &self.options
    }

    pub fn stats(&self) -> DetailStats {
        self.stats
    }

    /// The finest level of the detail terrain, whole, as a heightfield of world heights
    /// (scale 1, offset 0, the detail's cells): for oracles and exports of small terrains.
    /// Generates every finest tile without keeping it; `None` while a stored tile it needs
    /// is not resident (it is requested).
    pub fn to_heightfield(&mut self) -> Option<Heightfield> {
        let (w, h, n) = (
            self.header.width,
            self.header.height,
            self.header.tile_cells,
        );
        let grid = self.header.levels[0];
        let mut values = vec![0.0f32; w as usize * h as usize];
        for ty in 0..grid.tiles_y {
            for tx in 0..grid.tiles_x {
                let tile = if self.options.levels == 0 {
                    self.inner.tile_heights((0, tx, ty))?
                } else {
                    let depth = self.options.levels;
                    let stored = self.inner.tile_heights((0, tx >> depth, ty >> depth))?;
                    self.generate(0, tx, ty, &stored)
                };
                for j in 0..=n.min(h - 1 - ty * n) {
                    let row = (ty * n + j) as usize * w as usize;
                    let count = n.min(w - 1 - tx * n) as usize + 1;
                    let from = j as usize * (n as usize + 1);
                    let at = row + (tx * n) as usize;
                    values[at..at + count].copy_from_slice(&tile[from..from + count]);
                }
            }
        }
        let mapping = WorldMapping {
            cell_size: self.header.mapping.cell_size,
            height_scale: 1.0,
            height_offset: 0.0,
        };
        Heightfield::from_f32(w, h, values)
            .and_then(|f| f.with_mapping(mapping))
            .ok()
    }

    /// The own errors `e_j` of the detail levels (index `j`) under a stored finest-level
    /// cell whose twist is at most `twist`.
    fn own_errors(&self, twist: f64) -> impl Iterator<Item = (u32, f64)> + '_ {
        let k = self.options.levels;
        (0..k).rev().scan(twist, move |w, j| {
            let amplitude = self.amplitude[j as usize];
            let e = *w / 4.0 + amplitude + self.slack;
            // The new cells are quarters of a bilinear patch (twist `w / 4`) with three
            // corners displaced.
            *w = *w / 4.0 + 3.0 * amplitude + 4.0 * self.slack;
            Some((j, e))
        })
    }

    /// Bound of the twist of the stored finest level's cells under block `(level, bx, by)`
    /// (a stored level-0 block or a detail block), `block` its stored level-0 block's
    /// bounds: measured once the stored tile has been resident, else from the index.
    fn stored_twist(&self, level: u32, bx: u32, by: u32, block: &BlockBounds) -> f64 {
        if let Some(measured) = self.measured_twist(level, bx, by) {
            return measured;
        }
        if self.inner.header().levels.len() > 1 {
            3.0 * f64::from(block.own_error)
        } else {
            // No coarser level to measure against: the range bounds every corner.
            2.0 * (f64::from(block.max_height) - f64::from(block.min_height))
        }
    }

    /// Cells a side of the squares the twist is measured over, and squares a tile side.
    fn twist_square(&self) -> (u32, u32) {
        let square = (self.header.block_cells / 2).max(1);
        (square, self.header.tile_cells / square)
    }

    fn measured_twist(&self, level: u32, bx: u32, by: u32) -> Option<f64> {
        let k = self.options.levels;
        let (square, per_tile) = self.twist_square();
        let b = self.header.block_cells;
        // The squares under the block: four for a stored block, the one holding a detail
        // block (it covers `B / 2^(k − level)` stored cells, a divisor of `B / 2`).
        let (first, count) = if level >= k {
            ((2 * bx, 2 * by), 2)
        } else {
            let depth = k - level;
            (
                (((bx * b) >> depth) / square, ((by * b) >> depth) / square),
                1,
            )
        };
        let mut largest = 0.0f32;
        for sy in first.1..first.1 + count {
            for sx in first.0..first.0 + count {
                let tile = self.twists.get(&(sx / per_tile, sy / per_tile))?;
                let local = (sy % per_tile) * per_tile + sx % per_tile;
                largest = largest.max(tile.largest[local as usize]);
            }
        }
        Some(f64::from(largest))
    }

    /// Measures the twists of stored level-0 tile `(tx, ty)` the first time it is seen
    /// resident (and marks them used).
    fn note_stored_tile(&mut self, tx: u32, ty: u32, heights: &[f32]) {
        let frame = self.frame;
        if let Some(twists) = self.twists.get_mut(&(tx, ty)) {
            twists.used = frame;
            return;
        }
        let (square, per_tile) = self.twist_square();
        let side = self.header.tile_cells as usize + 1;
        let mut largest = vec![0.0f32; (per_tile * per_tile) as usize];
        for j in 0..side - 1 {
            for i in 0..side - 1 {
                let h = |i: usize, j: usize| f64::from(heights[j * side + i]);
                let twist = (h(i, j) + h(i + 1, j + 1) - h(i + 1, j) - h(i, j + 1)).abs();
                let at = (j / square as usize) * per_tile as usize + i / square as usize;
                largest[at] = largest[at].max(round_up(twist));
            }
        }
        self.twists.insert(
            (tx, ty),
            Twists {
                largest: largest.into(),
                used: frame,
            },
        );
        self.account(self.tiles.len());
    }

    fn generate(&self, level: u32, tx: u32, ty: u32, stored: &[f32]) -> Arc<[f32]> {
        let n = self.header.tile_cells as usize;
        let depth = self.options.levels - level;
        let m = n >> depth;
        // The window of the stored tile under this tile, and its global origin.
        let (ox, oy) = (
            (tx as usize & ((1 << depth) - 1)) * m,
            (ty as usize & ((1 << depth) - 1)) * m,
        );
        let mut gx = (u64::from(tx) * n as u64) >> depth;
        let mut gy = (u64::from(ty) * n as u64) >> depth;
        let mut side = m + 1;
        let mut grid: Vec<f32> = Vec::with_capacity((n + 1) * (n + 1));
        for j in 0..side {
            let start = (oy + j) * (n + 1) + ox;
            grid.extend_from_slice(&stored[start..start + side]);
        }
        let mut finer: Vec<f32> = Vec::with_capacity((n + 1) * (n + 1));
        for l in (level..self.options.levels).rev() {
            let amplitude = self.amplitude[l as usize] as f32;
            let seed = self.options.seed;
            let fine_side = 2 * side - 1;
            finer.clear();
            finer.resize(fine_side * fine_side, 0.0);
            (gx, gy) = (2 * gx, 2 * gy);
            let noise =
                |i: usize, j: usize| amplitude * unit_noise(seed, l, gx + i as u64, gy + j as u64);
            let coarse = |i: usize, j: usize| grid[j * side + i];
            for j in 0..side {
                for i in 0..side {
                    finer[2 * j * fine_side + 2 * i] = coarse(i, j);
                }
            }
            for j in 0..fine_side {
                for i in 0..fine_side {
                    let value = match (i % 2, j % 2) {
                        (0, 0) => continue,
                        (1, 0) => 0.5 * (coarse(i / 2, j / 2) + coarse(i / 2 + 1, j / 2)),
                        (0, _) => 0.5 * (coarse(i / 2, j / 2) + coarse(i / 2, j / 2 + 1)),
                        _ => {
                            let (ci, cj) = (i / 2, j / 2);
                            0.25 * ((coarse(ci, cj) + coarse(ci + 1, cj + 1))
                                + (coarse(ci + 1, cj) + coarse(ci, cj + 1)))
                        }
                    };
                    finer[j * fine_side + i] = value + noise(i, j);
                }
            }
            std::mem::swap(&mut grid, &mut finer);
            side = fine_side;
        }
        debug_assert_eq!(side, n + 1);
        grid.into()
    }

    fn evict(&mut self, keep_used_at_least: u64) {
        let before = self.tiles.len();
        self.tiles.retain(|_, t| t.used >= keep_used_at_least);
        self.twists.retain(|_, t| t.used >= keep_used_at_least);
        self.account(before);
    }

    /// Drops least recently used tiles until under the byte cap, but none the last two
    /// selections asked for: a view that needs more than the cap keeps what it draws
    /// (evicting those would regenerate them every frame and never settle).
    fn enforce_cap(&mut self) {
        let tile_bytes = self.tile_bytes();
        while self.tiles.len() as u64 * tile_bytes > self.options.max_bytes {
            let oldest = self
                .tiles
                .iter()
                .filter(|(_, t)| t.used + 1 < self.frame)
                .min_by_key(|(key, t)| (t.used, **key))
                .map(|(key, _)| *key);
            let Some(key) = oldest else { break };
            let before = self.tiles.len();
            self.tiles.remove(&key);
            self.account(before);
        }
    }

    /// Updates the counters after `before` tiles became `self.tiles.len()`.
    fn account(&mut self, before: usize) {
        self.stats.dropped += before.saturating_sub(self.tiles.len()) as u64;
        self.stats.tiles = self.tiles.len() as u64;
        let twist_bytes: usize = self.twists.values().map(|t| t.largest.len() * 4).sum();
        self.stats.bytes = self.stats.tiles * self.tile_bytes() + twist_bytes as u64;
        self.stats.peak_bytes = self.stats.peak_bytes.max(self.stats.bytes);
    }

    fn tile_bytes(&self) -> u64 {
        let side = u64::from(self.header.tile_cells) + 1;
        side * side * size_of::<f32>() as u64
    }
}

impl<S: TileSource> TileSource for DetailTiles<S> {
    fn header(&self) -> &TerrainHeader {
        &self.header
    }

    fn block_cells(&self) -> u32 {
        self.inner.block_cells()
    }

    fn block_bounds(&self, level: u32, bx: u32, by: u32) -> BlockBounds {
        let k = self.options.levels;
        if k == 0 {
            return self.inner.block_bounds(level, bx, by);
        }
        let widen = |b: BlockBounds, own_error: f64, error_to_finest: f64| BlockBounds {
            min_height: round_down(f64::from(b.min_height) - self.reach),
            max_height: round_up(f64::from(b.max_height) + self.reach),
            own_error: round_up(own_error),
            error_to_finest: round_up(error_to_finest),
        };
        if level >= k {
            let stored = self.inner.block_bounds(level - k, bx, by);
            let twist = if level == k {
                self.stored_twist(level, bx, by, &stored)
            } else {
                3.0 * f64::from(stored.error_to_finest)
            };
            let below: f64 = self.own_errors(twist).map(|(_, e)| e).sum();
            // The stored errors are of exact heights; tiles hold them rounded to `f32`.
            let rounding = f64::from(level - k + 1) * self.slack;
            return widen(
                stored,
                f64::from(stored.own_error) + self.slack,
                f64::from(stored.error_to_finest) + below + rounding,
            );
        }
        let depth = k - level;
        let stored = self.inner.block_bounds(0, bx >> depth, by >> depth);
        let (mut own, mut below) = (0.0, 0.0);
        for (j, e) in self.own_errors(self.stored_twist(level, bx, by, &stored)) {
            if j == level {
                own = e;
            } else if j < level {
                below += e;
            }
        }
        widen(stored, own, below)
    }

    fn tile_heights(&mut self, (level, tx, ty): TileKey) -> Option<Arc<[f32]>> {
        let k = self.options.levels;
        if level > k || k == 0 {
            return self.inner.tile_heights((level - k, tx, ty));
        }
        if level == k {
            let heights = self.inner.tile_heights((0, tx, ty))?;
            self.note_stored_tile(tx, ty, &heights);
            return Some(heights);
        }
        let grid = self.header.levels.get(level as usize)?;
        if tx >= grid.tiles_x || ty >= grid.tiles_y {
            return None;
        }
        if let Some(tile) = self.tiles.get_mut(&(level, tx, ty)) {
            tile.used = self.frame;
            return Some(Arc::clone(&tile.heights));
        }
        let depth = k - level;
        let stored = self.inner.tile_heights((0, tx >> depth, ty >> depth));
        let Some(stored) = stored.filter(|_| self.made_this_frame < self.options.tiles_per_frame)
        else {
            self.stats.deferred += 1;
            return None;
        };
        self.note_stored_tile(tx >> depth, ty >> depth, &stored);
        let heights = self.generate(level, tx, ty, &stored);
        self.made_this_frame += 1;
        self.stats.generated += 1;
        let before = self.tiles.len();
        self.tiles.insert(
            (level, tx, ty),
            Generated {
                heights: Arc::clone(&heights),
                used: self.frame,
            },
        );
        self.account(before);
        self.enforce_cap();
        Some(heights)
    }

    fn begin_frame(&mut self) {
        self.inner.begin_frame();
        self.stats.deferred = 0;
        self.made_this_frame = 0;
        self.frame += 1;
        if let Some(oldest_kept) = self.frame.checked_sub(u64::from(self.options.keep_frames)) {
            self.evict(oldest_kept);
        }
    }
}

/// A deterministic value in `[−1, 1]` for a sample of a level (SplitMix64's finaliser over
/// the seed, level and coordinates).
fn unit_noise(seed: u64, level: u32, x: u64, y: u64) -> f32 {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let h = mix(mix(mix(seed ^ u64::from(level)).wrapping_add(x)).wrapping_add(y));
    // 24 high bits: exact in f32.
    (h >> 40) as f32 * (2.0 / 16_777_215.0) - 1.0
}

#[cfg(test)]
mod tests;
