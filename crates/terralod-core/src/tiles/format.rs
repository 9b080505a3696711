//! Byte layout of the header file and of a tile file, and the level/tile grid they imply.
//! All integers and floats are little-endian; `docs/TILES.md` has the same tables.

use super::{Corruption, TileError};
use crate::heightfield::{Samples, WorldMapping, level_side};
use std::path::{Path, PathBuf};

/// Name of the header file in a tiled terrain's directory; written last by an import.
pub const HEADER_FILE: &str = "terrain.tlod";
/// The one format version this build writes and reads (2: the block index and the block
/// size in the header; version-1 directories must be imported again).
pub const FORMAT_VERSION: u32 = 2;
/// Largest accepted side of the source grid, in samples (2^22 + 1: 4200 km at 1 m).
pub const MAX_SIDE: u32 = (1 << 22) + 1;
/// Smallest tile, in cells per side.
pub const MIN_TILE_CELLS: u32 = 2;
/// Largest tile, in cells per side (4097² `f32` samples = 64 MiB per tile).
pub const MAX_TILE_CELLS: u32 = 4096;
/// Length of a tile file's header; the payload starts here (64-byte aligned).
pub const TILE_HEADER_LEN: usize = 64;

const HEADER_MAGIC: &[u8; 8] = b"TLODTERR";
const TILE_MAGIC: &[u8; 8] = b"TLODTILE";
/// Fixed part of the header file, before the per-level records.
const HEADER_FIXED_LEN: usize = 56;
const LEVEL_RECORD_LEN: usize = 16;
/// Most levels a valid grid can have: sides up to 2^22 + 1 with 2-cell tiles.
const MAX_LEVELS: u32 = 22;

/// The stored type of every sample, the source's own (16-bit sources stay 16-bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleType {
    U16,
    I16,
    F32,
}

impl SampleType {
    pub fn of(samples: &Samples) -> SampleType {
        match samples {
            Samples::U16(_) => SampleType::U16,
            Samples::I16(_) => SampleType::I16,
            Samples::F32(_) => SampleType::F32,
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            SampleType::U16 | SampleType::I16 => 2,
            SampleType::F32 => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SampleType::U16 => "u16",
            SampleType::I16 => "i16",
            SampleType::F32 => "f32",
        }
    }

    pub(super) fn code(self) -> u32 {
        match self {
            SampleType::U16 => 1,
            SampleType::I16 => 2,
            SampleType::F32 => 3,
        }
    }

    fn from_code(code: u32) -> Option<SampleType> {
        match code {
            1 => Some(SampleType::U16),
            2 => Some(SampleType::I16),
            3 => Some(SampleType::F32),
            _ => None,
        }
    }
}

/// The grid of one level: its samples (before tiling) and its tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelGrid {
    /// Samples per row of the level: `⌈(W − 1) / 2^L⌉ + 1`.
    pub width: u32,
    pub height: u32,
    /// Tiles per row: `⌈(width − 1) / N⌉`.
    pub tiles_x: u32,
    pub tiles_y: u32,
}

impl LevelGrid {
    pub fn tiles(&self) -> u64 {
        u64::from(self.tiles_x) * u64::from(self.tiles_y)
    }
}

/// The levels of a `width × height` grid cut in tiles of `tile_cells` cells: level 0 is the
/// source, each next one half as fine, down to the first level held by a single tile.
/// The caller checks the sizes (at least 2, at most [`MAX_SIDE`]; a valid tile size).
pub fn level_grids(width: u32, height: u32, tile_cells: u32) -> Vec<LevelGrid> {
    let mut levels = Vec::new();
    for level in 0..=MAX_LEVELS {
        let (w, h) = (level_side(width, level), level_side(height, level));
        let grid = LevelGrid {
            width: w,
            height: h,
            tiles_x: (w - 1).div_ceil(tile_cells),
            tiles_y: (h - 1).div_ceil(tile_cells),
        };
        levels.push(grid);
        if grid.tiles() == 1 {
            break;
        }
    }
    levels
}

/// What the header file says about the whole terrain.
#[derive(Clone, Debug, PartialEq)]
pub struct TerrainHeader {
    pub sample_type: SampleType,
    /// Level-0 size in samples.
    pub width: u32,
    pub height: u32,
    /// Cells per tile side; a tile holds `tile_cells + 1` samples per side.
    pub tile_cells: u32,
    /// Cells per block side of the block index (`blocks.tlod`): a power of two,
    /// 2 ..= `tile_cells`.
    pub block_cells: u32,
    /// The world mapping of level 0; level `L` has `cell_size · 2^L`.
    pub mapping: WorldMapping,
    /// World height range of the whole terrain (exact bounds rounded outwards).
    pub min_height: f32,
    pub max_height: f32,
    /// One grid per level, finest first.
    pub levels: Vec<LevelGrid>,
}

impl TerrainHeader {
    /// Samples per tile side.
    pub fn tile_side(&self) -> u32 {
        self.tile_cells + 1
    }

    /// Bytes of one tile file: header and payload.
    pub fn tile_file_len(&self) -> u64 {
        let side = u64::from(self.tile_side());
        TILE_HEADER_LEN as u64 + side * side * self.sample_type.bytes() as u64
    }

    pub fn total_tiles(&self) -> u64 {
        self.levels.iter().map(LevelGrid::tiles).sum()
    }

    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_FIXED_LEN + self.levels.len() * 16 + 4);
        out.extend_from_slice(HEADER_MAGIC);
        for value in [
            FORMAT_VERSION,
            self.sample_type.code(),
            self.width,
            self.height,
            self.tile_cells,
            self.levels.len() as u32,
        ] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        for value in [
            self.mapping.cell_size,
            self.mapping.height_scale,
            self.mapping.height_offset,
            self.min_height,
            self.max_height,
        ] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.extend_from_slice(&self.block_cells.to_le_bytes());
        debug_assert_eq!(out.len(), HEADER_FIXED_LEN);
        for grid in &self.levels {
            for value in [grid.width, grid.height, grid.tiles_x, grid.tiles_y] {
                out.extend_from_slice(&value.to_le_bytes());
            }
        }
        let checksum = crc32fast::hash(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Largest header file a valid terrain can have; longer files are refused unread.
    pub(super) const MAX_ENCODED_LEN: u64 =
        (HEADER_FIXED_LEN + (MAX_LEVELS as usize + 1) * LEVEL_RECORD_LEN + 4) as u64;

    /// Parses and checks a header file's bytes: magic, version, checksum, sizes within
    /// bounds, and the level grids equal to what the sizes imply.
    pub(super) fn decode(bytes: &[u8], path: &Path) -> Result<TerrainHeader, TileError> {
        let path_buf = || path.to_path_buf();
        if bytes.len() < 8 || &bytes[..8] != HEADER_MAGIC {
            return Err(TileError::BadMagic { path: path_buf() });
        }
        if bytes.len() < HEADER_FIXED_LEN + 4 {
            return Err(corrupt(
                path,
                Corruption::Length {
                    expected: (HEADER_FIXED_LEN + 4) as u64,
                    actual: bytes.len() as u64,
                },
            ));
        }
        let word = |i: usize| u32_at(bytes, 8 + 4 * i);
        let version = word(0);
        if version != FORMAT_VERSION {
            return Err(TileError::UnsupportedVersion {
                path: path_buf(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let level_count = word(5);
        let expected_len =
            HEADER_FIXED_LEN as u64 + u64::from(level_count) * LEVEL_RECORD_LEN as u64 + 4;
        check_sealed(path, bytes, expected_len, |stored, computed| {
            Corruption::HeaderChecksum { stored, computed }
        })?;
        let sample_type = SampleType::from_code(word(1)).ok_or_else(|| TileError::OutOfRange {
            path: path_buf(),
            what: "sample type code",
            value: u64::from(word(1)),
            min: 1,
            max: 3,
        })?;
        let (width, height, tile_cells) = (word(2), word(3), word(4));
        check_range(path, "width", width, 2, MAX_SIDE)?;
        check_range(path, "height", height, 2, MAX_SIDE)?;
        check_range(
            path,
            "tile size",
            tile_cells,
            MIN_TILE_CELLS,
            MAX_TILE_CELLS,
        )?;
        if !tile_cells.is_power_of_two() {
            return Err(TileError::Inconsistent {
                path: path_buf(),
                what: format!("tile size {tile_cells} is not a power of two"),
            });
        }
        let block_cells = u32_at(bytes, 52);
        check_range(path, "block size", block_cells, MIN_TILE_CELLS, tile_cells)?;
        if !block_cells.is_power_of_two() {
            return Err(TileError::Inconsistent {
                path: path_buf(),
                what: format!("block size {block_cells} is not a power of two"),
            });
        }
        let float = |i: usize| f32::from_le_bytes(bytes[i..i + 4].try_into().unwrap_or([0; 4]));
        let mapping = WorldMapping {
            cell_size: float(32),
            height_scale: float(36),
            height_offset: float(40),
        };
        // The mapping must keep the grid and every sample the stored type can hold finite
        // (every reader maps them; `f32` samples are checked when read).
        let type_range = match sample_type {
            SampleType::U16 => Some((0.0, f32::from(u16::MAX))),
            SampleType::I16 => Some((f32::from(i16::MIN), f32::from(i16::MAX))),
            SampleType::F32 => None,
        };
        if let Err(problem) = mapping.check_grid(width, height, type_range) {
            return Err(TileError::Inconsistent {
                path: path_buf(),
                what: format!("unusable world mapping {mapping:?}: {problem}"),
            });
        }
        let (min_height, max_height) = (float(44), float(48));
        if !(min_height.is_finite() && max_height.is_finite() && min_height <= max_height) {
            return Err(TileError::Inconsistent {
                path: path_buf(),
                what: format!("height range {min_height} .. {max_height}"),
            });
        }
        let expected_levels = level_grids(width, height, tile_cells);
        if expected_levels.len() as u64 != u64::from(level_count) {
            return Err(TileError::Inconsistent {
                path: path_buf(),
                what: format!(
                    "{level_count} levels for a {width} x {height} grid of {tile_cells}-cell \
                     tiles, which has {}",
                    expected_levels.len()
                ),
            });
        }
        for (level, expected) in expected_levels.iter().enumerate() {
            let at = HEADER_FIXED_LEN + level * LEVEL_RECORD_LEN;
            let stored = LevelGrid {
                width: u32_at(bytes, at),
                height: u32_at(bytes, at + 4),
                tiles_x: u32_at(bytes, at + 8),
                tiles_y: u32_at(bytes, at + 12),
            };
            if stored != *expected {
                return Err(TileError::Inconsistent {
                    path: path_buf(),
                    what: format!("level {level} is {stored:?}, the sizes imply {expected:?}"),
                });
            }
        }
        Ok(TerrainHeader {
            sample_type,
            width,
            height,
            tile_cells,
            block_cells,
            mapping,
            min_height,
            max_height,
            levels: expected_levels,
        })
    }
}

/// What a tile file's header says about the tile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct TileHeader {
    pub sample_type: SampleType,
    pub level: u32,
    pub tx: u32,
    pub ty: u32,
    pub side: u32,
    pub min_height: f32,
    pub max_height: f32,
    pub error: f32,
    pub payload_checksum: u32,
}

impl TileHeader {
    /// The 64 header bytes: magic, version, fields, zeros, then a CRC-32 of bytes 0..60.
    pub fn encode(&self) -> [u8; TILE_HEADER_LEN] {
        let mut out = [0u8; TILE_HEADER_LEN];
        out[..8].copy_from_slice(TILE_MAGIC);
        let words = [
            FORMAT_VERSION,
            self.sample_type.code(),
            self.level,
            self.tx,
            self.ty,
            self.side,
            self.min_height.to_bits(),
            self.max_height.to_bits(),
            self.error.to_bits(),
            self.payload_checksum,
        ];
        for (i, word) in words.iter().enumerate() {
            out[8 + 4 * i..12 + 4 * i].copy_from_slice(&word.to_le_bytes());
        }
        let checksum = crc32fast::hash(&out[..TILE_HEADER_LEN - 4]);
        out[TILE_HEADER_LEN - 4..].copy_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Checks the header bytes of the tile `expected` names (its level, coordinates, sample
    /// type and side must match) and returns the stored heights, error and payload checksum.
    pub fn decode(
        bytes: &[u8; TILE_HEADER_LEN],
        expected: &TileHeader,
        path: &Path,
    ) -> Result<TileHeader, TileError> {
        if &bytes[..8] != TILE_MAGIC {
            return Err(TileError::BadMagic {
                path: path.to_path_buf(),
            });
        }
        let word = |i: usize| u32_at(bytes, 8 + 4 * i);
        if word(0) != FORMAT_VERSION {
            return Err(TileError::UnsupportedVersion {
                path: path.to_path_buf(),
                found: word(0),
                supported: FORMAT_VERSION,
            });
        }
        let stored = u32_at(bytes, TILE_HEADER_LEN - 4);
        let computed = crc32fast::hash(&bytes[..TILE_HEADER_LEN - 4]);
        if stored != computed {
            return Err(corrupt(
                path,
                Corruption::HeaderChecksum { stored, computed },
            ));
        }
        let fields = [
            ("sample type", word(1), expected.sample_type.code()),
            ("level", word(2), expected.level),
            ("tile column", word(3), expected.tx),
            ("tile row", word(4), expected.ty),
            ("side", word(5), expected.side),
        ];
        check_fields(path, &fields)?;
        let reserved = &bytes[48..TILE_HEADER_LEN - 4];
        if reserved.iter().any(|&b| b != 0) {
            return Err(corrupt(
                path,
                Corruption::Field {
                    field: "reserved",
                    stored: 1,
                    expected: 0,
                },
            ));
        }
        let (min_height, max_height, error) = (
            f32::from_bits(word(6)),
            f32::from_bits(word(7)),
            f32::from_bits(word(8)),
        );
        for (what, value) in [
            ("min height", min_height),
            ("max height", max_height),
            ("error", error),
        ] {
            if !value.is_finite() {
                return Err(corrupt(path, Corruption::NonFinite { what }));
            }
        }
        Ok(TileHeader {
            min_height,
            max_height,
            error,
            payload_checksum: word(9),
            ..*expected
        })
    }
}

/// Where tile `(tx, ty)` of `level` lives: `DIR/level/ty/tx.tile` (at most one tile row per
/// directory, so no directory holds more entries than a level has tile columns).
pub fn tile_path(dir: &Path, level: u32, tx: u32, ty: u32) -> PathBuf {
    dir.join(level.to_string())
        .join(ty.to_string())
        .join(format!("{tx}.tile"))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    if let Some(slice) = bytes.get(at..at + 4) {
        word.copy_from_slice(slice);
    }
    u32::from_le_bytes(word)
}

fn check_range(
    path: &Path,
    what: &'static str,
    value: u32,
    min: u32,
    max: u32,
) -> Result<(), TileError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(TileError::OutOfRange {
            path: path.to_path_buf(),
            what,
            value: u64::from(value),
            min: u64::from(min),
            max: u64::from(max),
        })
    }
}

/// Checks stored fields against what the reader expects: `(name, stored, expected)`.
pub(super) fn check_fields(
    path: &Path,
    fields: &[(&'static str, u32, u32)],
) -> Result<(), TileError> {
    match fields
        .iter()
        .find(|(_, stored, expected)| stored != expected)
    {
        Some(&(field, stored, expected)) => Err(corrupt(
            path,
            Corruption::Field {
                field,
                stored: u64::from(stored),
                expected: u64::from(expected),
            },
        )),
        None => Ok(()),
    }
}

/// Checks a whole file of `bytes` that ends in the CRC-32 of everything before it: first its
/// length against `expected`, then the checksum (`mismatch` names which one failed).
pub(super) fn check_sealed(
    path: &Path,
    bytes: &[u8],
    expected: u64,
    mismatch: impl FnOnce(u32, u32) -> Corruption,
) -> Result<(), TileError> {
    if bytes.len() as u64 != expected || bytes.len() < 4 {
        return Err(corrupt(
            path,
            Corruption::Length {
                expected,
                actual: bytes.len() as u64,
            },
        ));
    }
    let body = &bytes[..bytes.len() - 4];
    let (stored, computed) = (u32_at(bytes, body.len()), crc32fast::hash(body));
    if stored != computed {
        return Err(corrupt(path, mismatch(stored, computed)));
    }
    Ok(())
}

pub(super) fn corrupt(path: &Path, reason: Corruption) -> TileError {
    TileError::Corrupt {
        path: path.to_path_buf(),
        reason,
    }
}
