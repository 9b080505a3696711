//! The tiled multi-resolution pyramid on disk (issue 9, step 1): `terralod import` writes it,
//! [`TiledTerrain`] reads it back tile by tile. The format is specified in `docs/TILES.md`.
//!
//! # Layout
//!
//! Level 0 is the source grid; level `L + 1` keeps every other sample of level `L` in both
//! directions, so its samples *are* level-`L` samples (no resampling, no error at shared
//! vertices). The source is extended beyond its last row and column by repeating them (as
//! `Heightfield::raw_clamped` pads), so level `L` sample `(i, j)` is the source sample at
//! `(min(i · 2^L, W − 1), min(j · 2^L, H − 1))` and level `L` has `⌈(W − 1) / 2^L⌉ + 1`
//! columns.
//!
//! A tile covers `N` cells (`N` a power of two) and holds `N + 1` samples per side: its last
//! row and column are the first row and column of the next tile. A tile can therefore be
//! meshed on its own, and two neighbouring tiles of one level share their edge samples
//! exactly (no crack); tiles of adjacent levels share every coarse sample (the tile of level
//! `L + 1` at `(tx, ty)` covers the four level-`L` tiles `(2tx.., 2ty..)`). Every tile has the
//! same size, even at the right and bottom borders (padded by repetition), so a reader can
//! pool tile buffers.
//!
//! Each tile records its world height range and its error against the next coarser level:
//! the largest vertical distance between one of its samples and the coarser level's surface
//! at that sample (see [`Tile::error`]).

mod blocks;
mod cache;
#[cfg(test)]
mod cache_tests;
mod decimate;
mod detail;
mod format;
mod import;
mod png_source;
mod raw_source;
mod read;
pub mod source;
mod stats;
#[cfg(test)]
mod tests;
mod tiff_source;
mod tiled_pyramid;

pub use blocks::{
    BLOCKS_FILE, BlockBounds, BlockIndex, BlockLevel, OwnBlockStats, blocks_per_side, level_blocks,
};
pub use cache::{CacheError, CacheStats, TileCache, TileKey};
pub use detail::{DetailError, DetailOptions, DetailStats, DetailTiles};
pub use format::{
    FORMAT_VERSION, HEADER_FILE, LevelGrid, MAX_SIDE, MAX_TILE_CELLS, MIN_TILE_CELLS, SampleType,
    TILE_HEADER_LEN, TerrainHeader, level_grids,
};
pub use import::{
    DEFAULT_BLOCK_CELLS, ImportOptions, ImportSource, ImportSummary, check_import_target, import,
    import_source,
};
pub use png_source::PngFileSource;
pub use raw_source::RawFileSource;
pub use read::{StandIn, Tile, TiledTerrain};
pub use source::{MemoryTiles, MemoryTilesOptions, SourceError, TileSource, block_tile};
pub use tiff_source::{MAX_CHUNK_BYTES, TiffFileSource};
pub use tiled_pyramid::TiledPyramid;

use crate::io::WriteError;
use std::path::PathBuf;

impl From<crate::io::interrupt::Interrupted> for TileError {
    fn from(_: crate::io::interrupt::Interrupted) -> Self {
        TileError::Interrupted
    }
}

/// Why a tiled terrain could not be written or read. Every variant about a file names it.
#[derive(Debug, thiserror::Error)]
pub enum TileError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{}: no header file: not a tiled terrain, or an import that did not finish",
        path.display()
    )]
    Unfinished { path: PathBuf },
    #[error("{}: missing (no such file)", path.display())]
    Missing { path: PathBuf },
    #[error("interrupted: what the import wrote is taken back")]
    Interrupted,
    #[error("{}: bad magic bytes: not a terralod tiles file", path.display())]
    BadMagic { path: PathBuf },
    #[error(
        "{}: unsupported format version {found} (this build reads version {supported}): \
         import the terrain again with this build",
        path.display()
    )]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("{}: {what} {value} is out of range ({min} ..= {max})", path.display())]
    OutOfRange {
        path: PathBuf,
        what: &'static str,
        value: u64,
        min: u64,
        max: u64,
    },
    #[error("{}: inconsistent header: {what}", path.display())]
    Inconsistent { path: PathBuf, what: String },
    #[error("{}: corrupt: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: Corruption },
    #[error("tile ({tx}, {ty}) of level {level} is outside the tile grid")]
    NoSuchTile { level: u32, tx: u32, ty: u32 },
    #[error(
        "a window of {width} x {height} samples at ({col}, {row}) is not inside level {level} \
         (at least 2 x 2 samples, within the level's)"
    )]
    NoSuchWindow {
        level: u32,
        col: u32,
        row: u32,
        width: u32,
        height: u32,
    },
    #[error(
        "tile size {tile_cells} is not a power of two in {MIN_TILE_CELLS} ..= {MAX_TILE_CELLS} cells"
    )]
    InvalidTileSize { tile_cells: u32 },
    #[error(
        "block size {block_cells} is not a power of two in {MIN_TILE_CELLS} ..= {tile_cells} \
         (the tile size)"
    )]
    InvalidBlockSize { block_cells: u32, tile_cells: u32 },
    #[error("{} is not empty: use --force to import over it", path.display())]
    NotEmpty { path: PathBuf },
    #[error(
        "{}: the import writes about {:.1} GB, more than the {:.1} GB free there",
        path.display(),
        *needed as f64 / 1e9,
        *free as f64 / 1e9
    )]
    NoRoom {
        path: PathBuf,
        needed: u64,
        free: u64,
    },
    #[error(
        "the import of {tiles} tiles and {blocks} blocks holds about {:.1} GB in memory \
         (their statistics, and a row of tiles' samples a level), more than the {:.1} GB available: give a larger \
         --block-size (fewer blocks), or import on a machine with more memory",
        *needed as f64 / 1e9,
        *available as f64 / 1e9
    )]
    StatisticsTooLarge {
        tiles: u64,
        blocks: u64,
        needed: u64,
        available: u64,
    },
    #[error("level {level} has {samples} samples, over the limit of {limit} for one heightfield")]
    TooLargeForMemory {
        level: u32,
        samples: u64,
        limit: u64,
    },
    #[error("import source: {what}")]
    Source { what: String },
    #[error(
        "{}: a sample is not a finite number (holes need the whole-file loader, which fills \
         them)",
        path.display()
    )]
    Hole { path: PathBuf },
    #[error(transparent)]
    Load(#[from] crate::io::LoadError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Heightfield(#[from] crate::HeightfieldError),
}

/// How a tile file (or the header) fails its checks.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Corruption {
    #[error("{actual} bytes, expected {expected}")]
    Length { expected: u64, actual: u64 },
    #[error("header checksum {stored:08x} does not match the content ({computed:08x})")]
    HeaderChecksum { stored: u32, computed: u32 },
    #[error("payload checksum {stored:08x} does not match the content ({computed:08x})")]
    PayloadChecksum { stored: u32, computed: u32 },
    #[error("field {field} is {stored}, expected {expected}")]
    Field {
        field: &'static str,
        stored: u64,
        expected: u64,
    },
    #[error("{what} is not a finite number")]
    NonFinite { what: &'static str },
    #[error(
        "impossible statistics: heights {min} ..= {max} and error {error} for samples of world \
         heights {lo} ..= {hi}"
    )]
    Statistics {
        min: f32,
        max: f32,
        error: f32,
        lo: f64,
        hi: f64,
    },
}
