//! The reader: opens a tiled terrain (checking its header), reads and checks single tiles,
//! and assembles a whole level when it fits in memory.
//!
//! Nothing is allocated from a size a file states before that size was checked against the
//! header (itself bounded): a tile file's length must equal what the header implies.

use super::blocks::{BLOCKS_FILE, BlockIndex};
use super::format::{HEADER_FILE, LevelGrid, TerrainHeader, TileHeader, corrupt, tile_path};
use super::stats::{StatSample, fold_range};
use super::{Corruption, SampleType, TILE_HEADER_LEN, TileError};
use crate::heightfield::{Heightfield, HeightfieldError, Samples, WorldMapping};
use crate::rounding::{round_down, round_up};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// An imported terrain on disk, its header checked.
#[derive(Clone, Debug)]
pub struct TiledTerrain {
    dir: PathBuf,
    header: TerrainHeader,
    blocks: BlockIndex,
    /// The mapping the directory was imported with (the header's, unless
    /// [`TiledTerrain::with_mapping`] replaced it).
    imported_mapping: WorldMapping,
}

/// One tile as read and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Tile {
    pub level: u32,
    pub tx: u32,
    pub ty: u32,
    /// Samples per side (`tile_cells + 1`).
    pub side: u32,
    /// World height range of the tile's samples (exact bounds rounded outwards to `f32`).
    pub min_height: f32,
    pub max_height: f32,
    /// The tile's error against the next coarser level, in world units (rounded upwards):
    /// the largest vertical distance between one of its samples and the coarser level's
    /// surface there (bilinear, or either triangulation of each coarse cell). 0 on the
    /// coarsest level. An LOD algorithm that draws the coarser tile instead of this one
    /// errs by at most this much at these samples.
    pub error: f32,
    /// `side × side` raw samples, row-major, in the terrain's sample type.
    pub samples: Samples,
}

/// A tile [`TiledTerrain::to_heightfield_standing_in`] could not read, and the level that
/// stood in for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StandIn {
    /// Why the tile could not be read (the error, naming the file).
    pub fault: String,
    /// The tile's level, and the coarser level whose samples were interpolated there.
    pub level: u32,
    pub from_level: u32,
}

impl TiledTerrain {
    /// Opens the tiled terrain in `dir`, reading and checking its header. A directory
    /// without a header (an unfinished import) is refused with [`TileError::Unfinished`].
    pub fn open(dir: &Path) -> Result<TiledTerrain, TileError> {
        let header = TiledTerrain::read_header(dir)?;
        let blocks_path = dir.join(BLOCKS_FILE);
        let bytes = read_bounded(&blocks_path, BlockIndex::encoded_len(&header), |path| {
            TileError::Missing { path }
        })?;
        let blocks = BlockIndex::decode(&bytes, &header, &blocks_path)?;
        Ok(TiledTerrain {
            dir: dir.to_path_buf(),
            imported_mapping: header.mapping,
            header,
            blocks,
        })
    }

    /// Reads and checks the header of the tiled terrain in `dir` alone (not the block
    /// index, which grows with the terrain): enough to know its size.
    pub fn read_header(dir: &Path) -> Result<TerrainHeader, TileError> {
        let path = dir.join(HEADER_FILE);
        let bytes = read_bounded(&path, TerrainHeader::MAX_ENCODED_LEN, |path| {
            TileError::Unfinished { path }
        })?;
        TerrainHeader::decode(&bytes, &path)
    }

    /// The terrain under another world mapping (the `--cell-size`, `--height-scale` and
    /// `--height-offset` of a command), as if imported with it: tiles store raw samples, so
    /// every reader decodes them with the new mapping; the header's height range, the block
    /// index and each tile's statistics, stored in the import's world units, are carried
    /// over exactly as the affine map between the two mappings (rounded outwards, so they
    /// stay bounds).
    pub fn with_mapping(mut self, mapping: WorldMapping) -> Result<TiledTerrain, HeightfieldError> {
        mapping.validate()?;
        if mapping == self.header.mapping {
            return Ok(self);
        }
        let remap = Remap::between(self.header.mapping, mapping);
        let (min, max) = remap.range(self.header.min_height, self.header.max_height);
        // Refused as a loaded file's mapping is (`Heightfield::check_mapping`): a world
        // height or extent beyond `f32` would be reported as infinite, or drawn so.
        let width = (self.header.width - 1) as f32 * mapping.cell_size;
        let depth = (self.header.height - 1) as f32 * mapping.cell_size;
        if ![min, max, width, depth].iter().all(|v| v.is_finite()) {
            return Err(HeightfieldError::WorldOverflow {
                min,
                max,
                width,
                depth,
            });
        }
        (self.header.min_height, self.header.max_height) = (min, max);
        for level in &mut self.blocks.levels {
            for block in &mut level.bounds {
                (block.min_height, block.max_height) =
                    remap.range(block.min_height, block.max_height);
                block.own_error = remap.error(block.own_error);
                block.error_to_finest = remap.error(block.error_to_finest);
            }
        }
        self.header.mapping = mapping;
        Ok(self)
    }

    /// The block index (`blocks.tlod`), read and checked at [`TiledTerrain::open`].
    pub fn block_index(&self) -> &BlockIndex {
        &self.blocks
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn header(&self) -> &TerrainHeader {
        &self.header
    }

    /// The file of tile `(tx, ty)` of `level` (whether or not it exists).
    pub fn tile_path(&self, level: u32, tx: u32, ty: u32) -> PathBuf {
        tile_path(&self.dir, level, tx, ty)
    }

    /// The world mapping of `level`: cells `2^level` times as wide as level 0's.
    pub fn level_mapping(&self, level: u32) -> WorldMapping {
        WorldMapping {
            cell_size: self.header.mapping.cell_size * (1u64 << level.min(63)) as f32,
            ..self.header.mapping
        }
    }

    /// Reads tile `(tx, ty)` of `level` and checks it: length, magic, version, header
    /// checksum, that it is the tile asked for, payload checksum, finite samples.
    pub fn read_tile(&self, level: u32, tx: u32, ty: u32) -> Result<Tile, TileError> {
        let exists = self
            .header
            .levels
            .get(level as usize)
            .is_some_and(|grid| tx < grid.tiles_x && ty < grid.tiles_y);
        if !exists {
            return Err(TileError::NoSuchTile { level, tx, ty });
        }
        let path = self.tile_path(level, tx, ty);
        let expected_len = self.header.tile_file_len();
        let bytes = read_bounded(&path, expected_len, |path| TileError::Missing { path })?;
        if bytes.len() as u64 != expected_len {
            return Err(corrupt(
                &path,
                Corruption::Length {
                    expected: expected_len,
                    actual: bytes.len() as u64,
                },
            ));
        }
        let (head, payload) = bytes.split_at(TILE_HEADER_LEN);
        let head: &[u8; TILE_HEADER_LEN] = head.try_into().map_err(|_| {
            corrupt(
                &path,
                Corruption::Length {
                    expected: expected_len,
                    actual: bytes.len() as u64,
                },
            )
        })?;
        let side = self.header.tile_side();
        let expected = TileHeader {
            sample_type: self.header.sample_type,
            level,
            tx,
            ty,
            side,
            min_height: 0.0,
            max_height: 0.0,
            error: 0.0,
            payload_checksum: 0,
        };
        let stored = TileHeader::decode(head, &expected, &path)?;
        let computed = crc32fast::hash(payload);
        if computed != stored.payload_checksum {
            return Err(corrupt(
                &path,
                Corruption::PayloadChecksum {
                    stored: stored.payload_checksum,
                    computed,
                },
            ));
        }
        let samples = decode_samples(self.header.sample_type, payload);
        if let Samples::F32(values) = &samples
            && values.iter().any(|v| !v.is_finite())
        {
            return Err(corrupt(&path, Corruption::NonFinite { what: "a sample" }));
        }
        // The selection trusts the statistics as bounds (as the header's and the block
        // index's, refused when impossible at open): a negative error, or samples outside
        // the range, are corruption. The import computed the range with this arithmetic
        // (f64, the import's mapping, rounded outwards), so a true range always passes.
        let (scale, offset) = (
            f64::from(self.imported_mapping.height_scale),
            f64::from(self.imported_mapping.height_offset),
        );
        let (raw_lo, raw_hi) = raw_range(&samples);
        let (a, b) = (raw_lo * scale + offset, raw_hi * scale + offset);
        let (lo, hi) = (a.min(b), a.max(b));
        if !(stored.error >= 0.0
            && f64::from(stored.min_height) <= lo
            && hi <= f64::from(stored.max_height))
        {
            return Err(corrupt(
                &path,
                Corruption::Statistics {
                    min: stored.min_height,
                    max: stored.max_height,
                    error: stored.error,
                    lo,
                    hi,
                },
            ));
        }
        // The tile's statistics are in the import's world units.
        let remap = Remap::between(self.imported_mapping, self.header.mapping);
        let (min_height, max_height) = remap.range(stored.min_height, stored.max_height);
        Ok(Tile {
            level,
            tx,
            ty,
            side,
            min_height,
            max_height,
            error: remap.error(stored.error),
            samples,
        })
    }

    /// Assembles `level` into one heightfield (its own mapping, cells `2^level` wide),
    /// reading and checking every tile. Refuses a level of more than `max_samples` samples
    /// before allocating.
    pub fn to_heightfield(&self, level: u32, max_samples: u64) -> Result<Heightfield, TileError> {
        let grid = self.level_grid(level)?;
        self.window_heightfield(level, [0, 0, grid.width, grid.height], max_samples)
    }

    /// Assembles the window `[col, row, width, height]` of `level` (level sample
    /// coordinates, at least 2 × 2, inside the level) into a heightfield under the level's
    /// mapping, whose sample `(0, 0)` is the level's `(col, row)`: reads and checks only the
    /// tiles the window touches, so a terrain far larger than memory can be visited window
    /// by window. Refuses a window of more than `max_samples` samples before allocating.
    pub fn window_heightfield(
        &self,
        level: u32,
        window: [u32; 4],
        max_samples: u64,
    ) -> Result<Heightfield, TileError> {
        self.assemble(level, window, max_samples, false)
            .map(|(field, _)| field)
    }

    /// [`TiledTerrain::to_heightfield`], with the tiles that cannot be read (missing,
    /// corrupt, unreadable) stood in for by the next coarser level that can be, its samples
    /// interpolated bilinearly, instead of failing: the samples such a tile shares with a
    /// readable neighbour are that neighbour's, so the field is whole and exact outside the
    /// failed tiles' interiors. Returns the field and what stood in where (each failed tile
    /// once); fails only when a whole chain of tiles up to the coarsest level is unreadable.
    pub fn to_heightfield_standing_in(
        &self,
        level: u32,
        max_samples: u64,
    ) -> Result<(Heightfield, Vec<StandIn>), TileError> {
        let grid = self.level_grid(level)?;
        self.assemble(level, [0, 0, grid.width, grid.height], max_samples, true)
    }

    /// Level `level`'s tile `(tx, ty)` as a heightfield of `(N + 1)²` samples under the
    /// level's mapping, padded beyond the data as the tile file is. A tile that cannot be
    /// read is stood in for as [`TiledTerrain::to_heightfield_standing_in`] does (samples it
    /// shares with a readable neighbour are the neighbour's, the others interpolated from
    /// the coarser level), and what stood in is returned beside it; so tiles read one at a
    /// time agree where they meet, as the level assembled whole does. Returned with it:
    /// every tile that stood in for it (coarser tiles too, when the one that would stand
    /// in cannot be read either), and any neighbour read around it that stood in.
    pub fn tile_standing_in(
        &self,
        level: u32,
        tx: u32,
        ty: u32,
    ) -> Result<(Heightfield, Vec<StandIn>), TileError> {
        let mapping = self.level_mapping(level);
        let whole = |samples: Samples, side: u32| {
            Heightfield::new(side, side, samples)
                .and_then(|f| f.with_mapping(mapping))
                .map_err(|e| TileError::Inconsistent {
                    path: self.tile_path(level, tx, ty),
                    what: e.to_string(),
                })
        };
        let fault = match self.read_tile(level, tx, ty) {
            Ok(tile) => return Ok((whole(tile.samples, tile.side)?, Vec::new())),
            Err(fault @ (TileError::Interrupted | TileError::NoSuchTile { .. })) => {
                return Err(fault);
            }
            Err(fault) => fault,
        };
        // The tile and one sample around it, so its shared samples come from readable
        // neighbours.
        let grid = self.level_grid(level)?;
        let n = self.header.tile_cells;
        let span = |start: u32, size: u32| {
            let first = start.saturating_sub(1).min(size - 2);
            let last = (start + n + 1).min(size - 1).max(first + 1);
            (first, last - first + 1)
        };
        let (c0, w) = span(tx * n, grid.width);
        let (r0, h) = span(ty * n, grid.height);
        let (field, mut stood_in) = self.assemble(level, [c0, r0, w, h], u64::MAX, true)?;
        let text = fault.to_string();
        if !stood_in.iter().any(|s| s.fault == text) {
            stood_in.push(StandIn {
                fault: text,
                level,
                from_level: level + 1,
            });
        }
        let side = n + 1;
        let at = |i: u32, j: u32| {
            let c = (tx * n + i).min(grid.width - 1) - c0;
            let r = (ty * n + j).min(grid.height - 1) - r0;
            (r * w + c) as usize
        };
        let index = (0..side).flat_map(|j| (0..side).map(move |i| (i, j)));
        let samples = match field.samples() {
            Samples::U16(v) => Samples::U16(index.map(|(i, j)| v[at(i, j)]).collect()),
            Samples::I16(v) => Samples::I16(index.map(|(i, j)| v[at(i, j)]).collect()),
            Samples::F32(v) => Samples::F32(index.map(|(i, j)| v[at(i, j)]).collect()),
        };
        Ok((whole(samples, side)?, stood_in))
    }

    /// The window of `level` as a heightfield; with `stand_in`, unreadable tiles are
    /// interpolated from the coarser level ([`TiledTerrain::to_heightfield_standing_in`]).
    fn assemble(
        &self,
        level: u32,
        [col, row, width, height]: [u32; 4],
        max_samples: u64,
        stand_in: bool,
    ) -> Result<(Heightfield, Vec<StandIn>), TileError> {
        let grid = self.level_grid(level)?;
        let inside = |start: u32, len: u32, size: u32| {
            len >= 2 && u64::from(start) + u64::from(len) <= u64::from(size)
        };
        if !inside(col, width, grid.width) || !inside(row, height, grid.height) {
            return Err(TileError::NoSuchWindow {
                level,
                col,
                row,
                width,
                height,
            });
        }
        let count = u64::from(width) * u64::from(height);
        if count > max_samples {
            return Err(TileError::TooLargeForMemory {
                level,
                samples: count,
                limit: max_samples,
            });
        }
        let mut assembled = match self.header.sample_type {
            SampleType::U16 => Samples::U16(zeroed(count, level)?),
            SampleType::I16 => Samples::I16(zeroed(count, level)?),
            SampleType::F32 => Samples::F32(zeroed(count, level)?),
        };
        let cells = self.header.tile_cells;
        let (last_col, last_row) = (col + width - 1, row + height - 1);
        // Tiles share their borders: the last sample of a level lies in the last tile.
        let tile_of = |sample: u32, tiles: u32| (sample / cells).min(tiles - 1);
        let out_width = width as usize;
        let tiles_x = tile_of(col, grid.tiles_x)..=tile_of(last_col, grid.tiles_x);
        let tiles_y = tile_of(row, grid.tiles_y)..=tile_of(last_row, grid.tiles_y);
        let mut failed = Vec::new();
        for ty in tiles_y.clone() {
            for tx in tiles_x.clone() {
                let tile = match self.read_tile(level, tx, ty) {
                    Ok(tile) => tile,
                    Err(fault) if stand_in && !matches!(fault, TileError::Interrupted) => {
                        failed.push((tx, ty, fault));
                        continue;
                    }
                    Err(fault) => return Err(fault),
                };
                let side = tile.side as usize;
                // The part of the window this tile holds (its samples tx·N ..= tx·N + N).
                let (tile_col, tile_row) = (tx * cells, ty * cells);
                let cols = col.max(tile_col)..=last_col.min(tile_col + cells);
                let rows = row.max(tile_row)..=last_row.min(tile_row + cells);
                let n = (cols.end() - cols.start() + 1) as usize;
                let copy = |dst: &mut dyn FnMut(usize, usize, usize)| {
                    for r in rows.clone() {
                        let out = (r - row) as usize * out_width + (cols.start() - col) as usize;
                        let src =
                            (r - tile_row) as usize * side + (cols.start() - tile_col) as usize;
                        dst(out, src, n);
                    }
                };
                match (&mut assembled, &tile.samples) {
                    (Samples::U16(out), Samples::U16(src)) => copy(&mut |d, s, n| {
                        out[d..d + n].copy_from_slice(&src[s..s + n]);
                    }),
                    (Samples::I16(out), Samples::I16(src)) => copy(&mut |d, s, n| {
                        out[d..d + n].copy_from_slice(&src[s..s + n]);
                    }),
                    (Samples::F32(out), Samples::F32(src)) => copy(&mut |d, s, n| {
                        out[d..d + n].copy_from_slice(&src[s..s + n]);
                    }),
                    // read_tile decodes in the header's sample type, so this cannot happen.
                    _ => {
                        return Err(TileError::Inconsistent {
                            path: self.tile_path(level, tx, ty),
                            what: "sample type differs from the header's".into(),
                        });
                    }
                }
            }
        }
        let mut stood_in: Vec<StandIn> = Vec::new();
        let unreadable: Vec<(u32, u32)> = failed.iter().map(|&(tx, ty, _)| (tx, ty)).collect();
        for (tx, ty, fault) in failed {
            // Whether a readable tile of the window holds the sample (tiles share their
            // borders: a sample on one lies in two tiles, on a corner in four).
            let holders = |sample: u32, tiles: std::ops::RangeInclusive<u32>| {
                let t = sample / cells;
                [Some(t), t.checked_sub(1)]
                    .into_iter()
                    .flatten()
                    .filter(move |&t| {
                        tiles.contains(&t) && t * cells <= sample && sample <= t * cells + cells
                    })
            };
            let readable = |c: u32, r: u32| {
                holders(r, tiles_y.clone())
                    .any(|ty| holders(c, tiles_x.clone()).any(|tx| !unreadable.contains(&(tx, ty))))
            };
            let coarser = level + 1;
            let Some(coarse_grid) = self.header.levels.get(coarser as usize) else {
                return Err(fault);
            };
            // The part of the window the tile holds, and the coarser samples around it.
            let (tile_col, tile_row) = (tx * cells, ty * cells);
            let cols = col.max(tile_col)..=last_col.min(tile_col + cells);
            let rows = row.max(tile_row)..=last_row.min(tile_row + cells);
            let span = |first: u32, last: u32, size: u32| {
                let end = last.div_ceil(2).min(size - 1);
                let start = (first / 2).min(end - 1);
                (start, end - start + 1)
            };
            let (c0, cw) = span(*cols.start(), *cols.end(), coarse_grid.width);
            let (r0, rh) = span(*rows.start(), *rows.end(), coarse_grid.height);
            let (coarse, deeper) = self.assemble(coarser, [c0, r0, cw, rh], u64::MAX, true)?;
            let at = |c: u32, r: u32| {
                // Level sample `c` is coarser sample `c / 2`; clamped at the level's end.
                let lerp = |v: u32, start: u32, len: u32| {
                    let x = (f64::from(v) / 2.0 - f64::from(start)).min(f64::from(len - 1));
                    let i = (x.floor() as u32).min(len - 2);
                    (i, x - f64::from(i))
                };
                let (i, fx) = lerp(c, c0, cw);
                let (j, fz) = lerp(r, r0, rh);
                let h = |i: u32, j: u32| f64::from(coarse.raw(i, j));
                let north = h(i, j) * (1.0 - fx) + h(i + 1, j) * fx;
                let south = h(i, j + 1) * (1.0 - fx) + h(i + 1, j + 1) * fx;
                north * (1.0 - fz) + south * fz
            };
            for r in rows.clone() {
                for c in cols.clone() {
                    if readable(c, r) {
                        continue;
                    }
                    let k = (r - row) as usize * out_width + (c - col) as usize;
                    let value = at(c, r);
                    match &mut assembled {
                        Samples::U16(out) => out[k] = value.round().clamp(0.0, 65535.0) as u16,
                        Samples::I16(out) => {
                            out[k] = value.round().clamp(-32768.0, 32767.0) as i16;
                        }
                        Samples::F32(out) => out[k] = value as f32,
                    }
                }
            }
            // A coarse tile under several failed ones is reported once.
            for stand_in in deeper.into_iter().chain([StandIn {
                fault: fault.to_string(),
                level,
                from_level: coarser,
            }]) {
                if !stood_in.iter().any(|s| s.fault == stand_in.fault) {
                    stood_in.push(stand_in);
                }
            }
        }
        let field = Heightfield::new(width, height, assembled)?;
        Ok((field.with_mapping(self.level_mapping(level))?, stood_in))
    }

    /// The grid of `level`, or `NoSuchTile` for a level the terrain does not have.
    fn level_grid(&self, level: u32) -> Result<LevelGrid, TileError> {
        self.header
            .levels
            .get(level as usize)
            .copied()
            .ok_or(TileError::NoSuchTile {
                level,
                tx: 0,
                ty: 0,
            })
    }
}

/// The affine map `y' = y · scale + offset` between the world heights of two mappings of
/// the same raw samples.
#[derive(Clone, Copy, Debug)]
struct Remap {
    scale: f64,
    offset: f64,
    /// `|to.offset| + |from.offset · scale|`: the size of what `offset` was computed from.
    magnitude: f64,
}

impl Remap {
    fn between(from: WorldMapping, to: WorldMapping) -> Remap {
        let scale = f64::from(to.height_scale) / f64::from(from.height_scale);
        let moved = f64::from(from.height_offset) * scale;
        Remap {
            scale,
            offset: f64::from(to.height_offset) - moved,
            magnitude: f64::from(to.height_offset).abs() + moved.abs(),
        }
    }

    fn is_identity(&self) -> bool {
        self.scale == 1.0 && self.offset == 0.0
    }

    /// The image of the range `lo ..= hi`, rounded outwards (with a margin for the `f64`
    /// arithmetic).
    fn range(&self, lo: f32, hi: f32) -> (f32, f32) {
        if self.is_identity() {
            return (lo, hi);
        }
        let (a, b) = (
            f64::from(lo) * self.scale + self.offset,
            f64::from(hi) * self.scale + self.offset,
        );
        // `offset` itself carries the rounding of `from.offset · scale`, which may cancel
        // against `to.offset`: the margin scales with both terms.
        let margin = (a.abs().max(b.abs()) + self.offset.abs() + self.magnitude) * 2f64.powi(-40);
        (round_down(a.min(b) - margin), round_up(a.max(b) + margin))
    }

    /// A vertical distance under the new mapping, rounded upwards.
    fn error(&self, error: f32) -> f32 {
        if self.is_identity() || error == 0.0 {
            return error;
        }
        round_up(f64::from(error) * self.scale.abs() * (1.0 + 2f64.powi(-40)))
    }
}

/// A zeroed buffer of `count` samples, reserved fallibly (a refused allocation is an error).
fn zeroed<T: Copy + Default>(count: u64, level: u32) -> Result<Vec<T>, TileError> {
    let too_large = || TileError::TooLargeForMemory {
        level,
        samples: count,
        limit: usize::MAX as u64,
    };
    let count = usize::try_from(count).map_err(|_| too_large())?;
    let mut values = Vec::new();
    values.try_reserve_exact(count).map_err(|_| too_large())?;
    values.resize(count, T::default());
    Ok(values)
}

/// Reads a regular file of at most `limit` bytes (one more is read to detect a longer
/// file, reported by the caller's length check); a missing file becomes `missing(path)`.
fn read_bounded(
    path: &Path,
    limit: u64,
    missing: impl FnOnce(PathBuf) -> TileError,
) -> Result<Vec<u8>, TileError> {
    let io = |source| TileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(missing(path.to_path_buf()));
        }
        Err(error) => return Err(io(error)),
    };
    let metadata = file.metadata().map_err(io)?;
    if !metadata.is_file() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    if metadata.len() > limit {
        return Err(corrupt(
            path,
            Corruption::Length {
                expected: limit,
                actual: metadata.len(),
            },
        ));
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
}

/// The smallest and largest of `samples` (finite ones), exactly, as `f64`: the import's
/// own laned fold, in the samples' type.
fn raw_range(samples: &Samples) -> (f64, f64) {
    fn range<T: StatSample>(v: &[T]) -> (f64, f64) {
        let (lo, hi) = fold_range(v, (T::HIGHEST, T::LOWEST));
        (lo.into(), hi.into())
    }
    match samples {
        Samples::U16(v) => range(v),
        Samples::I16(v) => range(v),
        Samples::F32(v) => range(v),
    }
}

fn decode_samples(sample_type: SampleType, payload: &[u8]) -> Samples {
    match sample_type {
        SampleType::U16 => Samples::U16(
            payload
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
                .collect(),
        ),
        SampleType::I16 => Samples::I16(
            payload
                .chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]]))
                .collect(),
        ),
        SampleType::F32 => Samples::F32(
            payload
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        ),
    }
}
