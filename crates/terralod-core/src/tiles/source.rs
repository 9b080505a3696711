//! What a streaming LOD selection reads of a tiled terrain ([`TileSource`]): block bounds
//! always, a tile's heights only when it is resident. [`MemoryTiles`] is the source with
//! every tile resident, cut from a `Heightfield` (the registry's way to run the streamed
//! algorithm on any terrain); the disk cache of issue 9 implements the same trait.
//!
//! # Blocks
//!
//! A block is `B` cells a side of one level (`B` a power of two, `2 ≤ B ≤ N`): block
//! `(L, bx, by)` holds level-`L` samples `bx·B ..= bx·B + B` by `by·B ..= by·B + B` and lies
//! in the tile `(bx·B / N, by·B / N)` of level `L` ([`block_tile`]). Level `L` has
//! `⌈cells_L / B⌉` blocks a side ([`level_blocks`](super::level_blocks)); the roots are the blocks of the
//! coarsest level. The bounds of a block ([`BlockBounds`]) follow `docs/TILES.md`'s per-tile
//! error, restricted to the block, plus the accumulated error to full resolution.

use super::TerrainHeader;
pub use super::blocks::BlockBounds;
use super::blocks::BlockIndex;
pub use super::cache::TileKey;
use super::format::{MAX_TILE_CELLS, MIN_TILE_CELLS, SampleType, level_grids};
use crate::heightfield::{Heightfield, level_source};
use rayon::prelude::*;
use std::sync::Arc;

/// Tiled height data as the streamed selection sees it: bounds always, samples when resident.
pub trait TileSource {
    /// Sizes, levels, mapping, tile size `N`.
    fn header(&self) -> &TerrainHeader;
    /// `B`: cells a block side.
    fn block_cells(&self) -> u32;
    /// Bounds of an existing block (`bx`, `by` below [`level_blocks`](super::level_blocks)).
    fn block_bounds(&self, level: u32, bx: u32, by: u32) -> BlockBounds;
    /// The tile's samples as world heights ((N+1)² row-major), if resident; otherwise
    /// `None`, and the tile is requested (loaded in the background by the disk cache). Marks
    /// the tile as used this frame (the cache never evicts a tile used in the current frame).
    fn tile_heights(&mut self, key: TileKey) -> Option<Arc<[f32]>>;
    /// Called once at the start of every selection: integrates finished loads, evicts.
    fn begin_frame(&mut self);
}

/// The tile holding block `(level, bx, by)` and the block's origin inside it (in samples).
pub fn block_tile(
    tile_cells: u32,
    block_cells: u32,
    level: u32,
    bx: u32,
    by: u32,
) -> (TileKey, (u32, u32)) {
    let (x, y) = (bx * block_cells, by * block_cells);
    (
        (level, x / tile_cells, y / tile_cells),
        (x % tile_cells, y % tile_cells),
    )
}

/// Why a source cannot be built with the given sizes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error(
        "tile size {tile_cells} is not a power of two in {MIN_TILE_CELLS} ..= {MAX_TILE_CELLS} cells"
    )]
    TileSize { tile_cells: u32 },
    #[error("block size {block_cells} is not a power of two in 2 ..= the tile size {tile_cells}")]
    BlockSize { block_cells: u32, tile_cells: u32 },
}

/// Tile and block sizes of a [`MemoryTiles`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryTilesOptions {
    /// `N`: cells a tile side (a power of two, 2 ..= 4096).
    pub tile_cells: u32,
    /// `B`: cells a block side (a power of two, 2 ..= `N`).
    pub block_cells: u32,
}

impl MemoryTilesOptions {
    /// The defaults of issue 9: 256-cell tiles, 64-cell blocks.
    pub const DEFAULT: MemoryTilesOptions = MemoryTilesOptions {
        tile_cells: 256,
        block_cells: 64,
    };

    /// Sizes scaled to a terrain: `N = P / 16` (`P` the padded side in cells) clamped to
    /// `2 ..= 256`, `B = min(N, 64)`. A 4097² terrain gets the defaults; a terrain of a few
    /// dozen samples gets 2-cell tiles and blocks, so its coarsest level is one block of
    /// two cells (a plane is drawn with 8 triangles) and the hierarchy is deep enough to
    /// be tested.
    pub fn for_field(field: &Heightfield) -> MemoryTilesOptions {
        let side = field.width().max(field.height()) - 1;
        let padded = side.next_power_of_two();
        let tile_cells = (padded / 16).clamp(MIN_TILE_CELLS, 256);
        MemoryTilesOptions {
            tile_cells,
            block_cells: tile_cells.min(64),
        }
    }

    pub fn validate(&self) -> Result<(), SourceError> {
        let tile_cells = self.tile_cells;
        if !tile_cells.is_power_of_two() || !(MIN_TILE_CELLS..=MAX_TILE_CELLS).contains(&tile_cells)
        {
            return Err(SourceError::TileSize { tile_cells });
        }
        let block_cells = self.block_cells;
        if !block_cells.is_power_of_two() || !(2..=tile_cells).contains(&block_cells) {
            return Err(SourceError::BlockSize {
                block_cells,
                tile_cells,
            });
        }
        Ok(())
    }
}

impl Default for MemoryTilesOptions {
    fn default() -> Self {
        MemoryTilesOptions::DEFAULT
    }
}

/// A [`TileSource`] with every tile resident, cut from a heightfield at build exactly as
/// `terralod import` cuts it (same levels, same padding by repetition, heights
/// [`WorldMapping::world_y`](crate::heightfield::WorldMapping::world_y), as the tile cache and every loaded algorithm compute them).
///
/// Memory: every level's tiles as `f32`, about `4/3 · 4` bytes per sample (the levels
/// sum to 4/3 of level 0), against 2 bytes per sample of a 16-bit field.
#[derive(Debug)]
pub struct MemoryTiles {
    header: TerrainHeader,
    block_cells: u32,
    /// Per level, the tiles row-major (`ty * tiles_x + tx`).
    tiles: Vec<Vec<Arc<[f32]>>>,
    /// Every block's bounds, as an import writes them.
    index: BlockIndex,
    frames: u64,
}

impl MemoryTiles {
    /// Cuts `field` into tiles of `options.tile_cells` cells with blocks of
    /// `options.block_cells` cells.
    pub fn new(field: &Heightfield, options: MemoryTilesOptions) -> Result<Self, SourceError> {
        options.validate()?;
        Ok(MemoryTiles::build(field, options))
    }

    /// [`MemoryTiles::new`] with [`MemoryTilesOptions::for_field`] (always valid).
    pub fn for_field(field: &Heightfield) -> MemoryTiles {
        MemoryTiles::build(field, MemoryTilesOptions::for_field(field))
    }

    fn build(field: &Heightfield, options: MemoryTilesOptions) -> MemoryTiles {
        let n = options.tile_cells;
        let levels = level_grids(field.width(), field.height(), n);
        let (min_height, max_height) = field.world_range();
        let header = TerrainHeader {
            sample_type: SampleType::of(field.samples()),
            width: field.width(),
            height: field.height(),
            tile_cells: n,
            block_cells: options.block_cells,
            mapping: field.mapping(),
            min_height,
            max_height,
            levels,
        };
        let tiles = header
            .levels
            .iter()
            .enumerate()
            .map(|(level, grid)| {
                (0..grid.tiles_y)
                    .flat_map(|ty| (0..grid.tiles_x).map(move |tx| (tx, ty)))
                    .collect::<Vec<_>>()
                    .into_par_iter()
                    .map(|(tx, ty)| cut_tile(field, n, level as u32, tx, ty))
                    .collect()
            })
            .collect();
        let index = BlockIndex::from_heightfield(field, &header.levels, options.block_cells);
        MemoryTiles {
            header,
            block_cells: options.block_cells,
            tiles,
            index,
            frames: 0,
        }
    }

    /// Selections (calls of [`TileSource::begin_frame`]) so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Bytes of tiles and bounds held.
    pub fn memory_bytes(&self) -> usize {
        let tiles: usize = self.tiles.iter().flatten().map(|t| t.len() * 4).sum();
        let bounds: usize = self.index.levels.iter().map(|l| l.bounds.len()).sum();
        tiles + bounds * size_of::<BlockBounds>()
    }
}

impl TileSource for MemoryTiles {
    fn header(&self) -> &TerrainHeader {
        &self.header
    }

    fn block_cells(&self) -> u32 {
        self.block_cells
    }

    fn block_bounds(&self, level: u32, bx: u32, by: u32) -> BlockBounds {
        self.index.get(level, bx, by)
    }

    fn tile_heights(&mut self, (level, tx, ty): TileKey) -> Option<Arc<[f32]>> {
        let grid = self.header.levels.get(level as usize)?;
        if tx >= grid.tiles_x || ty >= grid.tiles_y {
            return None;
        }
        Some(Arc::clone(
            &self.tiles[level as usize][(ty * grid.tiles_x + tx) as usize],
        ))
    }

    fn begin_frame(&mut self) {
        self.frames += 1;
    }
}

/// World heights of tile `(tx, ty)` of `level`.
fn cut_tile(field: &Heightfield, n: u32, level: u32, tx: u32, ty: u32) -> Arc<[f32]> {
    let side = u64::from(n) + 1;
    let mapping = field.mapping();
    let mut heights = Vec::with_capacity((side * side) as usize);
    for j in 0..side {
        let row = level_source(u64::from(ty) * u64::from(n) + j, level, field.height());
        for i in 0..side {
            let col = level_source(u64::from(tx) * u64::from(n) + i, level, field.width());
            heights.push(mapping.world_y(field.raw(col, row)));
        }
    }
    heights.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heightfield::{Samples, WorldMapping};
    use crate::tiles::{LevelGrid, level_blocks};

    fn field(width: u32, height: u32, seed: u32) -> Heightfield {
        let values = (0..width * height)
            .map(|i| {
                let x = i.wrapping_mul(2_654_435_761).wrapping_add(seed);
                (x >> 20) as u16
            })
            .collect();
        Heightfield::new(width, height, Samples::U16(values))
            .and_then(|f| {
                f.with_mapping(WorldMapping {
                    cell_size: 2.0,
                    height_scale: -0.25,
                    height_offset: 10.0,
                })
            })
            .expect("valid field")
    }

    /// World height of level-`level` sample `(i, j)`, straight from the definition.
    fn level_height(f: &Heightfield, level: u32, i: u64, j: u64) -> f32 {
        let m = f.mapping();
        let col = level_source(i, level, f.width());
        let row = level_source(j, level, f.height());
        m.world_y(f.raw(col, row))
    }

    #[test]
    fn tiles_hold_the_padded_level_samples() {
        let f = field(23, 14, 3);
        let options = MemoryTilesOptions {
            tile_cells: 4,
            block_cells: 2,
        };
        let mut tiles = MemoryTiles::new(&f, options).expect("valid options");
        let header = tiles.header().clone();
        assert_eq!(header.levels, level_grids(23, 14, 4));
        for (level, grid) in header.levels.iter().enumerate() {
            let level = level as u32;
            for ty in 0..grid.tiles_y {
                for tx in 0..grid.tiles_x {
                    let heights = tiles.tile_heights((level, tx, ty)).expect("resident");
                    assert_eq!(heights.len(), 25);
                    for j in 0..5u32 {
                        for i in 0..5u32 {
                            let expected = level_height(
                                &f,
                                level,
                                u64::from(tx * 4 + i),
                                u64::from(ty * 4 + j),
                            );
                            assert_eq!(heights[(j * 5 + i) as usize], expected);
                        }
                    }
                }
            }
            assert!(tiles.tile_heights((level, grid.tiles_x, 0)).is_none());
        }
        assert!(tiles.tile_heights((9, 0, 0)).is_none());
    }

    #[test]
    fn blocks_map_to_their_tile() {
        assert_eq!(block_tile(8, 2, 3, 5, 2), ((3, 1, 0), (2, 4)));
        assert_eq!(block_tile(4, 4, 0, 3, 1), ((0, 3, 1), (0, 0)));
        let grid = LevelGrid {
            width: 18,
            height: 2,
            tiles_x: 5,
            tiles_y: 1,
        };
        assert_eq!(level_blocks(&grid, 4), (5, 1));
        // Every block lies inside its tile: origin + B <= N.
        for bx in 0..32 {
            let ((_, tx, _), (x, _)) = block_tile(8, 2, 0, bx, 0);
            assert!(x + 2 <= 8);
            assert_eq!(tx * 8 + x, bx * 2);
        }
    }

    #[test]
    fn options_are_checked() {
        let bad = [(3, 2), (1, 1), (8192, 64), (8, 16), (8, 1), (8, 3)];
        for (tile_cells, block_cells) in bad {
            let options = MemoryTilesOptions {
                tile_cells,
                block_cells,
            };
            assert!(options.validate().is_err(), "{options:?}");
        }
        assert!(MemoryTilesOptions::DEFAULT.validate().is_ok());
        let sized = |side: u32| {
            let f = Heightfield::from_f32(side, 2, vec![0.0; side as usize * 2]).expect("valid");
            let o = MemoryTilesOptions::for_field(&f);
            (o.tile_cells, o.block_cells)
        };
        assert_eq!(sized(4097), (256, 64), "the defaults at 4097");
        assert_eq!(sized(2049), (128, 64));
        assert_eq!(sized(33), (2, 2));
        for side in [2, 3, 5, 33, 40, 129, 4097, 70_000] {
            let f = Heightfield::from_f32(side, 2, vec![0.0; side as usize * 2]).expect("valid");
            assert!(MemoryTilesOptions::for_field(&f).validate().is_ok());
        }
    }

    /// The bounds of every block against brute force over its samples (both definitions
    /// computed independently of `BlockIndex::from_heightfield`).
    #[test]
    fn block_bounds_match_brute_force() {
        for (w, h, n, b) in [(23, 14, 4, 2), (17, 17, 8, 4), (40, 9, 4, 4), (5, 5, 2, 2)] {
            let f = field(w, h, w * h);
            let options = MemoryTilesOptions {
                tile_cells: n,
                block_cells: b,
            };
            let tiles = MemoryTiles::new(&f, options).expect("valid");
            let levels = tiles.header().levels.clone();
            let scale = f64::from(f.mapping().height_scale).abs();
            // Level-L sample in raw units.
            let raw = |level: u32, i: i64, j: i64| {
                let col = ((i.max(0) as u64) << level).min(u64::from(w - 1)) as u32;
                let row = ((j.max(0) as u64) << level).min(u64::from(h - 1)) as u32;
                f64::from(f.raw(col, row))
            };
            let mut etf_prev: Vec<Vec<f64>> = Vec::new();
            for (level, grid) in levels.iter().enumerate() {
                let l = level as u32;
                let (nx, ny) = level_blocks(grid, b);
                let mut etf_here = Vec::new();
                for by in 0..ny {
                    for bx in 0..nx {
                        let got = tiles.block_bounds(l, bx, by);
                        // Height range over the level-0 footprint.
                        let span = i64::from(b) << l;
                        let (x0, y0) = (i64::from(bx) * span, i64::from(by) * span);
                        let mut lo = f32::INFINITY;
                        let mut hi = f32::NEG_INFINITY;
                        for y in y0..=y0 + span {
                            for x in x0..=x0 + span {
                                let v = level_height(&f, 0, x as u64, y as u64);
                                lo = lo.min(v);
                                hi = hi.max(v);
                            }
                        }
                        assert!(got.min_height <= lo && got.max_height >= hi);
                        assert!(got.max_height - got.min_height <= (hi - lo) + 1e-3);
                        // Own error against the coarser level's triangles (both diagonals).
                        let mut own: f64 = 0.0;
                        if level + 1 < levels.len() {
                            for j in 0..=i64::from(b) {
                                for i in 0..=i64::from(b) {
                                    let (gi, gj) = (i64::from(bx * b) + i, i64::from(by * b) + j);
                                    let here = raw(l, gi, gj);
                                    let mean = |a: (i64, i64), c: (i64, i64)| {
                                        0.5 * (raw(l, a.0, a.1) + raw(l, c.0, c.1))
                                    };
                                    let d = match (gi % 2, gj % 2) {
                                        (0, 0) => 0.0,
                                        (1, 0) => (here - mean((gi - 1, gj), (gi + 1, gj))).abs(),
                                        (0, 1) => (here - mean((gi, gj - 1), (gi, gj + 1))).abs(),
                                        _ => (here - mean((gi - 1, gj - 1), (gi + 1, gj + 1)))
                                            .abs()
                                            .max(
                                                (here - mean((gi + 1, gj - 1), (gi - 1, gj + 1)))
                                                    .abs(),
                                            ),
                                    };
                                    own = own.max(d);
                                }
                            }
                        }
                        let own = own * scale;
                        assert!(f64::from(got.own_error) >= own);
                        assert!(f64::from(got.own_error) <= own * (1.0 + 1e-6) + 1e-9);
                        // Error to finest: the recursive definition.
                        let etf = if level == 0 {
                            0.0
                        } else {
                            let (fx, fy) = level_blocks(&levels[level - 1], b);
                            let mut e: f64 = 0.0;
                            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                                let (cx, cy) = (2 * bx + dx, 2 * by + dy);
                                if cx < fx && cy < fy {
                                    let c = tiles.block_bounds(l - 1, cx, cy);
                                    e = e.max(
                                        f64::from(c.own_error)
                                            + etf_prev[level - 1][(cy * fx + cx) as usize],
                                    );
                                }
                            }
                            e
                        };
                        assert!(f64::from(got.error_to_finest) >= etf);
                        assert!(f64::from(got.error_to_finest) <= etf * (1.0 + 1e-5) + 1e-9);
                        etf_here.push(f64::from(got.error_to_finest));
                    }
                }
                etf_prev.push(etf_here);
            }
            let top = levels.len() - 1;
            let (nx, ny) = level_blocks(&levels[top], b);
            for by in 0..ny {
                for bx in 0..nx {
                    assert_eq!(tiles.block_bounds(top as u32, bx, by).own_error, 0.0);
                }
            }
        }
    }

    /// Error to finest really bounds the distance from every level-0 sample to the
    /// block's level-L surface, either diagonal in every cell.
    #[test]
    fn error_to_finest_bounds_the_level_surface() {
        let f = field(19, 19, 77);
        let b = 2;
        let tiles = MemoryTiles::new(
            &f,
            MemoryTilesOptions {
                tile_cells: 2,
                block_cells: b,
            },
        )
        .expect("valid");
        let levels = tiles.header().levels.clone();
        for (level, grid) in levels.iter().enumerate().skip(1) {
            let l = level as u32;
            let s = 1i64 << l;
            let (nx, ny) = level_blocks(grid, b);
            for by in 0..ny {
                for bx in 0..nx {
                    let bound = f64::from(tiles.block_bounds(l, bx, by).error_to_finest);
                    let span = i64::from(b) * s;
                    let (x0, y0) = (i64::from(bx) * span, i64::from(by) * span);
                    for y in y0..=y0 + span {
                        for x in x0..=x0 + span {
                            if x >= 19 || y >= 19 {
                                continue;
                            }
                            let truth = f64::from(level_height(&f, 0, x as u64, y as u64));
                            // The level-L cell holding (x, y), its corners' heights.
                            let (cx, cy) = (
                                ((x - x0) / s).min(i64::from(b) - 1),
                                ((y - y0) / s).min(i64::from(b) - 1),
                            );
                            let (ax, ay) = (x0 + cx * s, y0 + cy * s);
                            let corner = |dx: i64, dy: i64| {
                                f64::from(level_height(
                                    &f,
                                    l,
                                    ((ax + dx * s) / s) as u64,
                                    ((ay + dy * s) / s) as u64,
                                ))
                            };
                            let (u, v) = ((x - ax) as f64 / s as f64, (y - ay) as f64 / s as f64);
                            let (h00, h10, h01, h11) =
                                (corner(0, 0), corner(1, 0), corner(0, 1), corner(1, 1));
                            // Main diagonal (0,0)-(1,1).
                            let main = if u >= v {
                                h00 + u * (h10 - h00) + v * (h11 - h10)
                            } else {
                                h00 + v * (h01 - h00) + u * (h11 - h01)
                            };
                            // Other diagonal (1,0)-(0,1).
                            let other = if u + v <= 1.0 {
                                h00 + u * (h10 - h00) + v * (h01 - h00)
                            } else {
                                h11 + (1.0 - u) * (h01 - h11) + (1.0 - v) * (h10 - h11)
                            };
                            for surface in [main, other] {
                                assert!(
                                    (surface - truth).abs() <= bound + 1e-3,
                                    "level {l} block ({bx}, {by}) sample ({x}, {y}): {} > {bound}",
                                    (surface - truth).abs()
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
