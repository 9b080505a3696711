//! The block index: per block of `B` cells at every level, the height range of the full
//! resolution surface it covers and its errors, so a streaming selection can decide what to
//! draw before loading a tile. Defined in `docs/TILES.md` ("The block index").
//!
//! The import computes each block's own statistics inside the tile job that already holds
//! the block's samples ([`own_block_stats`]), then one cheap bottom-up pass over the blocks
//! ([`BlockIndex::from_own_stats`]) gives the full-resolution range and `error_to_finest`.

use super::format::{FORMAT_VERSION, LevelGrid, TerrainHeader, check_fields, check_sealed};
use super::import::error_against_coarser;
use super::stats::{StatSample, fold_range_of_rows, window_error};
use super::{Corruption, TileError};
use crate::heightfield::{Heightfield, WorldMapping, level_source};
pub(super) use crate::rounding::{round_down, round_up};
use rayon::prelude::*;
use std::path::Path;

/// Name of the block index file in a tiled terrain's directory (written before the header).
pub const BLOCKS_FILE: &str = "blocks.tlod";
const BLOCKS_MAGIC: &[u8; 8] = b"TLODBLKS";
/// Magic, version, block size, level count, reserved.
const BLOCKS_FIXED_LEN: usize = 24;
/// Blocks across and down of one level.
const BLOCKS_LEVEL_LEN: usize = 8;
/// Four `f32` per block.
const BLOCK_RECORD_LEN: usize = 16;

/// What the selection knows of a block before its tile is loaded (from the block index).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockBounds {
    /// Lowest and highest world height of every level-0 sample the block covers (so the box
    /// holds the full-resolution surface, not just the block's own samples).
    pub min_height: f32,
    pub max_height: f32,
    /// Largest vertical distance (world units) between one of the block's own level-L
    /// samples and the level-(L+1) surface at that sample (as a tile's `error`, over the
    /// block's samples only). 0 at the coarsest level.
    pub own_error: f32,
    /// A bound of the vertical distance between the level-0 samples the block covers and
    /// the block's level-L surface (either diagonal in every cell): 0 at level 0, and the
    /// largest `own_error + error_to_finest` of its children above.
    pub error_to_finest: f32,
}

/// A block's statistics over its own level-L samples only (what one tile job can compute).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OwnBlockStats {
    /// World height range of the block's own samples, rounded outwards.
    pub min_height: f32,
    pub max_height: f32,
    /// As [`BlockBounds::own_error`].
    pub own_error: f32,
}

/// The blocks of one level, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockLevel {
    pub blocks_x: u32,
    pub blocks_y: u32,
    /// Indexed `by * blocks_x + bx`.
    pub bounds: Vec<BlockBounds>,
}

/// Block bounds of every level, finest first.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockIndex {
    /// `B`: cells per block side, a power of two, 2 ..= the tile size.
    pub block_cells: u32,
    pub levels: Vec<BlockLevel>,
}

/// Blocks per side of a level `samples` wide: `⌈cells / B⌉`, cells at least 1.
pub fn blocks_per_side(samples: u32, block_cells: u32) -> u32 {
    samples.saturating_sub(1).max(1).div_ceil(block_cells)
}

/// The block counts `(blocks_x, blocks_y)` of a level grid.
pub fn level_blocks(grid: &LevelGrid, block_cells: u32) -> (u32, u32) {
    (
        blocks_per_side(grid.width, block_cells),
        blocks_per_side(grid.height, block_cells),
    )
}

/// Own statistics of every block inside one tile, from the tile's `(N + 1)²` raw samples
/// (row-major, padded as stored). Calls `emit(bx, by, stats)` for each block of the tile
/// that exists in `grid` (blocks wholly in the padding are skipped). `has_coarser` is false
/// on the coarsest level, whose errors are 0. `B` divides `N`, so every block's samples lie
/// in the tile, and `B` is even, so the block's local parity is the level's.
///
/// Returns the raw (unmapped) lowest and highest sample and error of the whole tile when
/// its blocks cover all of it (no block of the tile lies wholly in the padding): the
/// tile's own statistics, without a second pass.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn own_block_stats<T: StatSample>(
    samples: &[T],
    tile_cells: u32,
    tx: u32,
    ty: u32,
    grid: &LevelGrid,
    block_cells: u32,
    mapping: &WorldMapping,
    has_coarser: bool,
    mut emit: impl FnMut(u32, u32, OwnBlockStats),
) -> Option<(f64, f64, f64)> {
    let side = tile_cells as usize + 1;
    let b = block_cells as usize;
    let per_tile = tile_cells / block_cells;
    let (blocks_x, blocks_y) = level_blocks(grid, block_cells);
    let mut covered = true;
    let mut tile = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for local_y in 0..per_tile {
        let by = ty * per_tile + local_y;
        if by >= blocks_y {
            covered = false;
            break;
        }
        for local_x in 0..per_tile {
            let bx = tx * per_tile + local_x;
            if bx >= blocks_x {
                covered = false;
                break;
            }
            let (x0, y0) = (local_x as usize * b, local_y as usize * b);
            let rows = (0..=b).map(|j| {
                let start = (y0 + j) * side + x0;
                &samples[start..=start + b]
            });
            let range = fold_range_of_rows(b + 1, rows, (T::HIGHEST, T::LOWEST));
            let (lo, hi): (f64, f64) = (range.0.into(), range.1.into());
            let raw_error = if has_coarser {
                window_error(samples, side, (x0, y0), b + 1)
            } else {
                0.0
            };
            tile = (tile.0.min(lo), tile.1.max(hi), tile.2.max(raw_error));
            emit(bx, by, own_stats(lo, hi, raw_error, mapping));
        }
    }
    covered.then_some(tile)
}

/// World statistics from raw ones: heights mapped in `f64` and rounded outwards.
fn own_stats(raw_lo: f64, raw_hi: f64, raw_error: f64, mapping: &WorldMapping) -> OwnBlockStats {
    let (scale, offset) = (
        f64::from(mapping.height_scale),
        f64::from(mapping.height_offset),
    );
    let (a, b) = (raw_lo * scale + offset, raw_hi * scale + offset);
    OwnBlockStats {
        min_height: round_down(a.min(b)),
        max_height: round_up(a.max(b)),
        own_error: round_up(raw_error * scale.abs()),
    }
}

impl BlockIndex {
    /// The bottom-up pass: `own[L]` holds level `L`'s own statistics (indexed
    /// `by * blocks_x + bx`, sized by [`level_blocks`]); returns the full bounds.
    pub fn from_own_stats(
        block_cells: u32,
        own: Vec<Vec<OwnBlockStats>>,
        grids: &[LevelGrid],
    ) -> Self {
        let mut levels: Vec<BlockLevel> = Vec::with_capacity(own.len());
        for (level, (stats, grid)) in own.into_iter().zip(grids).enumerate() {
            let (blocks_x, blocks_y) = level_blocks(grid, block_cells);
            debug_assert_eq!(stats.len(), blocks_x as usize * blocks_y as usize);
            let finer = level.checked_sub(1).map(|l| &levels[l]);
            let mut bounds = Vec::with_capacity(stats.len());
            for by in 0..blocks_y {
                for bx in 0..blocks_x {
                    let s = stats[(by * blocks_x + bx) as usize];
                    let mut block = BlockBounds {
                        min_height: s.min_height,
                        max_height: s.max_height,
                        own_error: s.own_error,
                        error_to_finest: 0.0,
                    };
                    if let Some(finer) = finer {
                        let mut to_finest: f64 = 0.0;
                        for (cx, cy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                            let (cx, cy) = (2 * bx + cx, 2 * by + cy);
                            if cx < finer.blocks_x && cy < finer.blocks_y {
                                let c = finer.bounds[(cy * finer.blocks_x + cx) as usize];
                                block.min_height = block.min_height.min(c.min_height);
                                block.max_height = block.max_height.max(c.max_height);
                                to_finest = to_finest
                                    .max(f64::from(c.own_error) + f64::from(c.error_to_finest));
                            }
                        }
                        block.error_to_finest = round_up(to_finest);
                    }
                    bounds.push(block);
                }
            }
            levels.push(BlockLevel {
                blocks_x,
                blocks_y,
                bounds,
            });
        }
        BlockIndex {
            block_cells,
            levels,
        }
    }

    /// The index of an in-memory heightfield cut into `grids` (as [`super::level_grids`]
    /// gives for a tile size): level `L` sample `(i, j)` is the padded source sample
    /// `(i · 2^L, j · 2^L)`. For in-memory sources and tests; an import builds the same
    /// values tile by tile.
    pub fn from_heightfield(field: &Heightfield, grids: &[LevelGrid], block_cells: u32) -> Self {
        let coarsest = grids.len().saturating_sub(1);
        let own = grids
            .iter()
            .enumerate()
            .map(|(level, grid)| {
                let (blocks_x, blocks_y) = level_blocks(grid, block_cells);
                let side = block_cells as usize + 1;
                let sample = |i: u64, j: u64| -> f64 {
                    let col = level_source(i, level as u32, field.width());
                    let row = level_source(j, level as u32, field.height());
                    f64::from(field.raw(col, row))
                };
                // Blocks in parallel, each job with its own sample buffer.
                (0..blocks_x * blocks_y)
                    .into_par_iter()
                    .map_init(
                        || Vec::with_capacity(side * side),
                        |block, i| {
                            let (bx, by) = (i % blocks_x, i / blocks_x);
                            block.clear();
                            let (x0, y0) = (
                                u64::from(bx) * u64::from(block_cells),
                                u64::from(by) * u64::from(block_cells),
                            );
                            for j in 0..side as u64 {
                                for i in 0..side as u64 {
                                    block.push(sample(x0 + i, y0 + j));
                                }
                            }
                            let (lo, hi) = block
                                .iter()
                                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                                    (lo.min(v), hi.max(v))
                                });
                            let raw_error = if level < coarsest {
                                error_against_coarser(block, side)
                            } else {
                                0.0
                            };
                            own_stats(lo, hi, raw_error, &field.mapping())
                        },
                    )
                    .collect::<Vec<OwnBlockStats>>()
            })
            .collect();
        Self::from_own_stats(block_cells, own, grids)
    }

    /// The bounds of block `(bx, by)` of `level`. Out-of-range coordinates are clamped
    /// to the level's last block (and a level past the coarsest to the coarsest), so a
    /// caller never panics; the selection only asks for blocks that exist.
    pub fn get(&self, level: u32, bx: u32, by: u32) -> BlockBounds {
        let Some(blocks) = self
            .levels
            .get(level as usize)
            .or_else(|| self.levels.last())
        else {
            return BlockBounds {
                min_height: 0.0,
                max_height: 0.0,
                own_error: 0.0,
                error_to_finest: 0.0,
            };
        };
        let bx = bx.min(blocks.blocks_x - 1);
        let by = by.min(blocks.blocks_y - 1);
        blocks.bounds[(by * blocks.blocks_x + bx) as usize]
    }
}

impl BlockIndex {
    /// The file's exact length for a terrain with this header (known before reading).
    pub fn encoded_len(header: &TerrainHeader) -> u64 {
        let blocks: u64 = header
            .levels
            .iter()
            .map(|grid| {
                let (x, y) = level_blocks(grid, header.block_cells);
                u64::from(x) * u64::from(y)
            })
            .sum();
        BLOCKS_FIXED_LEN as u64
            + header.levels.len() as u64 * BLOCKS_LEVEL_LEN as u64
            + blocks * BLOCK_RECORD_LEN as u64
            + 4
    }

    /// The bytes of `blocks.tlod`: magic, version, `B`, level count, reserved 0, per level
    /// the block counts, every record (min, max, own error, error to finest; `f32`), CRC-32.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(BLOCKS_MAGIC);
        for word in [
            FORMAT_VERSION,
            self.block_cells,
            self.levels.len() as u32,
            0,
        ] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        for level in &self.levels {
            out.extend_from_slice(&level.blocks_x.to_le_bytes());
            out.extend_from_slice(&level.blocks_y.to_le_bytes());
        }
        for level in &self.levels {
            for block in &level.bounds {
                for value in [
                    block.min_height,
                    block.max_height,
                    block.own_error,
                    block.error_to_finest,
                ] {
                    out.extend_from_slice(&value.to_le_bytes());
                }
            }
        }
        let checksum = crc32fast::hash(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Parses and checks `blocks.tlod` against the (already checked) header: magic,
    /// version, length, checksum, block size and counts equal to the header's, and every
    /// record plausible (finite, `min ≤ max` within the terrain's range, errors ≥ 0, no
    /// error to finest at level 0 and no own error at the coarsest level).
    pub fn decode(
        bytes: &[u8],
        header: &TerrainHeader,
        path: &Path,
    ) -> Result<BlockIndex, TileError> {
        let inconsistent = |what: String| TileError::Inconsistent {
            path: path.to_path_buf(),
            what,
        };
        if bytes.len() < 8 || &bytes[..8] != BLOCKS_MAGIC {
            return Err(TileError::BadMagic {
                path: path.to_path_buf(),
            });
        }
        let word = |at: usize| {
            bytes
                .get(at..at + 4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        if word(8) != FORMAT_VERSION {
            return Err(TileError::UnsupportedVersion {
                path: path.to_path_buf(),
                found: word(8),
                supported: FORMAT_VERSION,
            });
        }
        check_sealed(
            path,
            bytes,
            Self::encoded_len(header),
            |stored, computed| Corruption::PayloadChecksum { stored, computed },
        )?;
        let fields = [
            ("block size", word(12), header.block_cells),
            ("level count", word(16), header.levels.len() as u32),
            ("reserved", word(20), 0),
        ];
        check_fields(path, &fields)?;
        let mut at = BLOCKS_FIXED_LEN + header.levels.len() * BLOCKS_LEVEL_LEN;
        let coarsest = header.levels.len() - 1;
        let mut levels = Vec::with_capacity(header.levels.len());
        for (level, grid) in header.levels.iter().enumerate() {
            let counts_at = BLOCKS_FIXED_LEN + level * BLOCKS_LEVEL_LEN;
            let stored = (word(counts_at), word(counts_at + 4));
            let (blocks_x, blocks_y) = level_blocks(grid, header.block_cells);
            if stored != (blocks_x, blocks_y) {
                return Err(inconsistent(format!(
                    "level {level} has {} x {} blocks, the header implies {blocks_x} x {blocks_y}",
                    stored.0, stored.1
                )));
            }
            let count = blocks_x as usize * blocks_y as usize;
            let mut bounds = Vec::with_capacity(count);
            for index in 0..count {
                let float = |i: usize| f32::from_bits(word(at + 4 * i));
                let block = BlockBounds {
                    min_height: float(0),
                    max_height: float(1),
                    own_error: float(2),
                    error_to_finest: float(3),
                };
                at += BLOCK_RECORD_LEN;
                let plausible = [
                    block.min_height,
                    block.max_height,
                    block.own_error,
                    block.error_to_finest,
                ]
                .iter()
                .all(|v| v.is_finite())
                    && header.min_height <= block.min_height
                    && block.min_height <= block.max_height
                    && block.max_height <= header.max_height
                    && block.own_error >= 0.0
                    && block.error_to_finest >= 0.0
                    && (level > 0 || block.error_to_finest == 0.0)
                    && (level < coarsest || block.own_error == 0.0);
                if !plausible {
                    let (bx, by) = (index as u32 % blocks_x, index as u32 / blocks_x);
                    return Err(inconsistent(format!(
                        "block ({bx}, {by}) of level {level} has impossible bounds {block:?}"
                    )));
                }
                bounds.push(block);
            }
            levels.push(BlockLevel {
                blocks_x,
                blocks_y,
                bounds,
            });
        }
        Ok(BlockIndex {
            block_cells: header.block_cells,
            levels,
        })
    }
}
