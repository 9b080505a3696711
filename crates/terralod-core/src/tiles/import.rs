//! The writer: cuts a heightfield into the tiles of every level, in parallel, each tile
//! written atomically, the header last (a directory without one is an unfinished import).

use super::blocks::{
    BLOCKS_FILE, BlockIndex, OwnBlockStats, level_blocks, own_block_stats, round_down, round_up,
};
use super::decimate::{coarser_tile, even_samples};
use super::format::{HEADER_FILE, LevelGrid, TerrainHeader, TileHeader, level_grids, tile_path};
use super::stats::{StatSample, fold_range, window_error};
use super::{MAX_SIDE, MAX_TILE_CELLS, MIN_TILE_CELLS, SampleType, TileError};
use crate::heightfield::{Heightfield, Samples, WorldMapping, level_source};
use crate::io::interrupt::Output;
use crate::io::write_file_atomically;
use rayon::prelude::*;
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How to import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImportOptions {
    /// Cells per tile side, a power of two; a tile holds `tile_cells + 1` samples per side.
    pub tile_cells: u32,
    /// Cells per block side of the block index (`blocks.tlod`), a power of two from 2 to
    /// `tile_cells`.
    pub block_cells: u32,
    /// Import into a directory that is not empty (its header is removed first, so an
    /// interrupted import is never mistaken for the old, complete one).
    pub force: bool,
}

impl Default for ImportOptions {
    /// 256-cell tiles: 257² samples, 129 KiB at 16 bits, 258 KiB in `f32`; 64-cell blocks.
    fn default() -> Self {
        Self::with_tile_cells(256)
    }
}

/// Cells per block side unless told otherwise (at most the tile size).
pub const DEFAULT_BLOCK_CELLS: u32 = 64;

impl ImportOptions {
    /// `tile_cells`-cell tiles with the default block size (capped at the tile size).
    pub fn with_tile_cells(tile_cells: u32) -> Self {
        Self {
            tile_cells,
            block_cells: DEFAULT_BLOCK_CELLS.min(tile_cells),
            force: false,
        }
    }
}

/// What an import wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportSummary {
    pub header: TerrainHeader,
    pub tiles: u64,
    /// Bytes of every tile file and the header.
    pub bytes: u64,
}

/// Where an import reads its level-0 samples: by windows, so a source larger than memory
/// (a raw file, a procedural terrain) is never held whole. Tile jobs call it in parallel.
pub trait ImportSource: Sync {
    fn width(&self) -> u32;
    fn height(&self) -> u32;
    fn sample_type(&self) -> SampleType;
    fn mapping(&self) -> WorldMapping;
    /// The samples at level-0 columns `cols` and rows `rows` (each ascending, inside the
    /// grid), row-major (`rows.len()` rows of `cols.len()`), in [`Self::sample_type`].
    fn read_window(&self, cols: &[u32], rows: &[u32]) -> Result<Samples, TileError>;
}

impl ImportSource for Heightfield {
    fn width(&self) -> u32 {
        Heightfield::width(self)
    }

    fn height(&self) -> u32 {
        Heightfield::height(self)
    }

    fn sample_type(&self) -> SampleType {
        SampleType::of(self.samples())
    }

    fn mapping(&self) -> WorldMapping {
        Heightfield::mapping(self)
    }

    fn read_window(&self, cols: &[u32], rows: &[u32]) -> Result<Samples, TileError> {
        fn gather<T: Copy>(values: &[T], width: usize, cols: &[u32], rows: &[u32]) -> Vec<T> {
            let mut out = Vec::with_capacity(cols.len() * rows.len());
            let (first, last) = (cols[0] as usize, cols[cols.len() - 1] as usize);
            let contiguous = last - first + 1 == cols.len();
            for &row in rows {
                let row = &values[row as usize * width..(row as usize + 1) * width];
                if contiguous {
                    out.extend_from_slice(&row[first..=last]);
                } else {
                    out.extend(cols.iter().map(|&c| row[c as usize]));
                }
            }
            out
        }
        let width = Heightfield::width(self) as usize;
        Ok(match self.samples() {
            Samples::U16(values) => Samples::U16(gather(values, width, cols, rows)),
            Samples::I16(values) => Samples::I16(gather(values, width, cols, rows)),
            Samples::F32(values) => Samples::F32(gather(values, width, cols, rows)),
        })
    }
}

/// Fewest tiles synced in one round (a round takes whole steps of [`TileWriter::write_all`]):
/// enough for the file system to commit many files per journal transaction.
const SYNC_BATCH: usize = 256;
/// Threads syncing one batch: concurrent `fsync`s share journal commits (group commit).
const SYNC_THREADS: usize = 32;

/// Imports `field` into `dir` as a tiled pyramid. `progress(done, total)` is called after
/// every tile, from the worker threads.
pub fn import(
    field: &Heightfield,
    dir: &Path,
    options: &ImportOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<ImportSummary, TileError> {
    import_source(field, dir, options, progress)
}

/// Imports any [`ImportSource`] into `dir`, reading only the windows each level-0 tile
/// needs (the coarser levels are made from the finer ones' samples).
///
/// Durability: tiles are written to temporary files and renamed without waiting, then
/// synced in batches of at least 256 by many threads at once, each batch while the next rows
/// are encoded (one `fsync` per tile was the bound of the import), and then dropped from
/// the page cache; the directories are synced after every tile, and the block index and
/// the header are written (synced) only then. A crash at any point leaves either
/// no header (an unfinished import, refused by the reader) or every tile durable.
pub fn import_source(
    source: &dyn ImportSource,
    dir: &Path,
    options: &ImportOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<ImportSummary, TileError> {
    let field = source;
    check_import_target(dir, options)?;
    for (what, value) in [("width", field.width()), ("height", field.height())] {
        if !(2..=MAX_SIDE).contains(&value) {
            return Err(TileError::OutOfRange {
                path: dir.to_path_buf(),
                what,
                value: u64::from(value),
                min: 2,
                max: u64::from(MAX_SIDE),
            });
        }
    }
    // Before anything is written or removed (a `--force` import removes the old header).
    let levels = level_grids(field.width(), field.height(), options.tile_cells);
    check_room(
        dir,
        field.sample_type(),
        &levels,
        options.tile_cells,
        options.block_cells,
    )?;
    // Held until the header is written: an interruption takes the import back.
    let output = Output::begin()?;
    let prepared = prepare_directory(dir, options.force)?;
    let result = write_pyramid(field, dir, options, &output, progress);
    if result.is_err() {
        prepared.clean_up(dir);
    }
    result
}

/// The checks an import makes before it reads its source: the tile and block sizes, and
/// `dir` (absent, an empty directory, or any directory with `options.force`). Nothing is
/// written. A caller whose source is costly to make ready (a PNG spooled to disk, a file
/// loaded whole) checks first, so a wrong `--out` fails at once.
pub fn check_import_target(dir: &Path, options: &ImportOptions) -> Result<(), TileError> {
    let tile_cells = options.tile_cells;
    if !(MIN_TILE_CELLS..=MAX_TILE_CELLS).contains(&tile_cells) || !tile_cells.is_power_of_two() {
        return Err(TileError::InvalidTileSize { tile_cells });
    }
    let block_cells = options.block_cells;
    if !(MIN_TILE_CELLS..=tile_cells).contains(&block_cells) || !block_cells.is_power_of_two() {
        return Err(TileError::InvalidBlockSize {
            block_cells,
            tile_cells,
        });
    }
    if !dir.exists() {
        return Ok(());
    }
    if !dir.is_dir() {
        return Err(not_a_directory(dir));
    }
    let io = |source| TileError::Io {
        path: dir.to_path_buf(),
        source,
    };
    if !options.force && std::fs::read_dir(dir).map_err(io)?.next().is_some() {
        return Err(TileError::NotEmpty {
            path: dir.to_path_buf(),
        });
    }
    Ok(())
}

/// The error of an `--out` that exists and is not a directory.
fn not_a_directory(dir: &Path) -> TileError {
    TileError::Io {
        path: dir.to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory (--out names the directory to import into)",
        ),
    }
}

/// Bytes a tile's statistics and its blocks' take in memory while importing (the per-tile
/// result, the block index being assembled): generous round figures.
const MEMORY_PER_TILE: u64 = 64;
const MEMORY_PER_BLOCK: u64 = 48;

/// Refuses an import into `dir` whose tiles do not fit on the disk (that of the nearest
/// folder of `dir` that exists), or whose statistics (kept for the block index) and rows
/// of samples held between levels do not fit in the memory available, before anything is
/// written: a terrain of the largest accepted size would otherwise fill the disk, or be
/// killed for memory seconds in, leaving a half-written folder.
fn check_room(
    dir: &Path,
    sample_type: SampleType,
    levels: &[LevelGrid],
    tile_cells: u32,
    block_cells: u32,
) -> Result<(), TileError> {
    let side = u64::from(tile_cells) + 1;
    let tile_bytes = super::TILE_HEADER_LEN as u64 + side * side * sample_type.bytes() as u64;
    let tiles: u64 = levels.iter().map(LevelGrid::tiles).sum();
    let blocks = tiles * (u64::from(tile_cells / block_cells)).pow(2);
    let needed = tiles
        .saturating_mul(tile_bytes)
        .saturating_add(blocks.saturating_mul(12));
    let existing = dir
        .ancestors()
        .find(|a| a.is_dir())
        .unwrap_or(Path::new("."));
    if let Some(free) = free_bytes(existing)
        && needed > free
    {
        return Err(TileError::NoRoom {
            path: dir.to_path_buf(),
            needed,
            free,
        });
    }
    let memory = tiles
        .saturating_mul(MEMORY_PER_TILE)
        .saturating_add(blocks.saturating_mul(MEMORY_PER_BLOCK))
        .saturating_add(held_row_bytes(levels, tile_cells, sample_type));
    if let Some(available) = available_memory()
        && memory > available
    {
        return Err(TileError::StatisticsTooLarge {
            tiles,
            blocks,
            needed: memory,
            available,
        });
    }
    Ok(())
}

/// Bytes an unprivileged writer may still put in the file system of `dir`, where known.
fn free_bytes(dir: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        let stat = rustix::fs::statvfs(dir).ok()?;
        Some(stat.f_bavail.saturating_mul(stat.f_frsize))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// Memory the system can still give (`MemAvailable` of `/proc/meminfo`), where known.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Writes every tile, the block index and the header of `field` into the prepared `dir`.
fn write_pyramid(
    field: &dyn ImportSource,
    dir: &Path,
    options: &ImportOptions,
    output: &Output,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<ImportSummary, TileError> {
    let (tile_cells, block_cells) = (options.tile_cells, options.block_cells);
    let levels = level_grids(field.width(), field.height(), tile_cells);
    for (level, grid) in levels.iter().enumerate() {
        for ty in 0..grid.tiles_y {
            let row_dir = dir.join(level.to_string()).join(ty.to_string());
            std::fs::create_dir_all(&row_dir).map_err(|source| TileError::Io {
                path: row_dir,
                source,
            })?;
        }
    }
    let total: u64 = levels.iter().map(LevelGrid::tiles).sum();
    progress(0, total);
    let writer = TileWriter {
        source: field,
        dir,
        shape: TileShape {
            tile_cells,
            block_cells,
        },
        levels: &levels,
        output,
        progress,
        done: AtomicU64::new(0),
        total,
    };
    let results = match field.sample_type() {
        SampleType::U16 => writer.write_all::<u16>(),
        SampleType::I16 => writer.write_all::<i16>(),
        SampleType::F32 => writer.write_all::<f32>(),
    }?;
    let mut directories: Vec<PathBuf> = Vec::new();
    for (level, grid) in levels.iter().enumerate() {
        let level_dir = dir.join(level.to_string());
        directories.extend((0..grid.tiles_y).map(|ty| level_dir.join(ty.to_string())));
        directories.push(level_dir);
    }
    directories.push(dir.to_path_buf());
    sync_all(&directories, Synced::Directories)?;
    let (min_height, max_height) = results.iter().filter(|(level, ..)| *level == 0).fold(
        (f32::INFINITY, f32::NEG_INFINITY),
        |(lo, hi), (_, (a, b), _)| (lo.min(*a), hi.max(*b)),
    );
    let block_index = assemble_block_index(&levels, block_cells, results);
    let index_bytes = block_index.encode();
    let header = TerrainHeader {
        sample_type: field.sample_type(),
        width: field.width(),
        height: field.height(),
        tile_cells,
        block_cells,
        mapping: field.mapping(),
        min_height,
        max_height,
        levels,
    };
    // What the readers will check: heights whose span or errors overflow `f32` would
    // write a terrain that no command can open.
    if let Err(TileError::Inconsistent { what, .. }) =
        BlockIndex::decode(&index_bytes, &header, &dir.join(BLOCKS_FILE))
    {
        return Err(TileError::Source {
            what: format!(
                "the heights cannot be indexed in f32 (world range {min_height:e} ..= \
                 {max_height:e}): {what}"
            ),
        });
    }
    write_file_atomically(&dir.join(BLOCKS_FILE), |out| out.write_all(&index_bytes))?;
    // The index's rename must be durable before the header can appear.
    sync_all(&[dir.to_path_buf()], Synced::Directories)?;
    let header_bytes = header.encode();
    write_file_atomically(&dir.join(HEADER_FILE), |out| out.write_all(&header_bytes))?;
    let tiles = header.total_tiles();
    Ok(ImportSummary {
        bytes: tiles * header.tile_file_len() + (header_bytes.len() + index_bytes.len()) as u64,
        tiles,
        header,
    })
}

/// What writing the tiles of one import needs.
struct TileWriter<'a> {
    source: &'a dyn ImportSource,
    dir: &'a Path,
    shape: TileShape,
    levels: &'a [LevelGrid],
    output: &'a Output,
    progress: &'a (dyn Fn(u64, u64) + Sync),
    done: AtomicU64,
    total: u64,
}

/// A written row of tiles: each tile's statistics, its file (to sync), and its even samples
/// (for the coarser level; empty on the coarsest).
struct WrittenRow<T> {
    results: Vec<TileResult>,
    paths: Vec<PathBuf>,
    evens: Vec<Vec<T>>,
}

/// Fewest level-0 tiles written at a time, unless two rows hold more ([`rows_a_step`]):
/// enough to keep every core busy on a narrow terrain.
const STEP_TILES: u32 = 256;

impl TileWriter<'_> {
    /// Writes every tile of every level, samples of type `T`. Level 0 is read from the
    /// source a few rows of tiles at a time (two, or more to reach [`STEP_TILES`]), top
    /// to bottom (the order a raw file or a GeoTIFF's strips read best); a coarser row is
    /// written as soon as the two finer rows under it are, from their even samples
    /// ([`super::decimate`]), while the next rows of level 0 are read. The source is read
    /// once: the coarser levels are a third more samples, which a procedural source would
    /// compute again. Held between steps: the even samples of level 0's rows in hand and
    /// of a row or so a coarser level ([`held_row_bytes`]). (Two rows at once, or a coarser
    /// row beside level 0's: two threads then create files in different folders, each
    /// row's own; two threads in one folder wait on its lock, 17 % of a raw 16385²
    /// import's time on two cores.)
    ///
    /// The written files are synced in batches of at least [`SYNC_BATCH`], each on a
    /// thread of its own while the next rows are encoded (the cores would otherwise idle
    /// while the disk commits); every sync has finished when this returns.
    fn write_all<T: TileSample>(&self) -> Result<Vec<TileResult>, TileError> {
        let mut results: Vec<TileResult> = Vec::with_capacity(self.total as usize);
        // Per level, its last even row's even samples while the odd row under it is made.
        let mut waiting: Vec<Option<Vec<Vec<T>>>> = vec![None; self.levels.len() - 1];
        let tile_cells = self.shape.tile_cells;
        std::thread::scope(|scope| {
            let mut syncing: Option<std::thread::ScopedJoinHandle<'_, Result<(), TileError>>> =
                None;
            let mut unsynced: Vec<PathBuf> = Vec::new();
            let mut wrote = |rows: Vec<WrittenRow<T>>| {
                for mut row in rows {
                    results.append(&mut row.results);
                    unsynced.append(&mut row.paths);
                }
                if unsynced.len() < SYNC_BATCH {
                    return Ok(());
                }
                let batch = std::mem::take(&mut unsynced);
                let previous =
                    syncing.replace(scope.spawn(move || sync_all(&batch, Synced::Tiles)));
                previous.map_or(Ok(()), join_sync)
            };
            let mut run = || -> Result<(), TileError> {
                let LevelGrid {
                    tiles_x, tiles_y, ..
                } = self.levels[0];
                let step = rows_a_step(tiles_x);
                // Level 0's last rows and their even samples, for the coarser levels.
                let mut finer: Vec<(u32, Vec<Vec<T>>)> = Vec::new();
                for first in (0..tiles_y).step_by(step as usize).map(Some).chain([None]) {
                    let (coarser, next) = rayon::join(
                        || self.write_coarser(std::mem::take(&mut finer), &mut waiting),
                        || {
                            first.map_or(Ok(Vec::new()), |first| {
                                let rows = first..(first + step).min(tiles_y);
                                self.write_rows(0, rows, |tx, ty| {
                                    source_tile(self.source, tile_cells, tx, ty)
                                })
                            })
                        },
                    );
                    let (mut coarser, mut next) = (coarser?, next?);
                    finer = (first.unwrap_or(0)..)
                        .zip(next.iter_mut().map(|row| std::mem::take(&mut row.evens)))
                        .collect();
                    coarser.append(&mut next);
                    wrote(coarser)?;
                }
                Ok(())
            };
            let outcome = run();
            // The last sync is waited for even when writing failed.
            let synced = syncing.map_or(Ok(()), join_sync);
            outcome?;
            synced?;
            sync_all(&unsynced, Synced::Tiles)
        })?;
        debug_assert!(waiting.iter().all(Option::is_none), "every row was used");
        Ok(results)
    }

    /// Writes the coarser rows that level 0's rows `finer` (index and even samples, in
    /// order) complete, keeping in `waiting` the even rows whose odd row is still to come.
    fn write_coarser<T: TileSample>(
        &self,
        finer: Vec<(u32, Vec<Vec<T>>)>,
        waiting: &mut [Option<Vec<Vec<T>>>],
    ) -> Result<Vec<WrittenRow<T>>, TileError> {
        let half = self.shape.tile_cells as usize / 2 + 1;
        let mut written = Vec::new();
        for (ty, evens) in finer {
            let (mut level, mut row_y, mut evens) = (0, ty, evens);
            while level < waiting.len() {
                let last = row_y + 1 == self.levels[level].tiles_y;
                let (upper, lower) = match waiting[level].take() {
                    Some(upper) => (upper, Some(evens)),
                    None if last => (evens, None),
                    None => {
                        waiting[level] = Some(evens);
                        break;
                    }
                };
                (level, row_y) = (level + 1, row_y / 2);
                let mut row = self.write_rows(level as u32, row_y..row_y + 1, |tx, _| {
                    Ok(coarser_tile(&upper, lower.as_deref(), tx as usize, half))
                })?;
                evens = std::mem::take(&mut row[0].evens);
                written.append(&mut row);
            }
        }
        Ok(written)
    }

    /// Writes rows `rows` of `level`, tile `(tx, ty)`'s samples made by `samples(tx, ty)`,
    /// all in parallel; one [`WrittenRow`] a row.
    fn write_rows<T: TileSample>(
        &self,
        level: u32,
        rows: Range<u32>,
        samples: impl Fn(u32, u32) -> Result<Vec<T>, TileError> + Sync,
    ) -> Result<Vec<WrittenRow<T>>, TileError> {
        let grid = &self.levels[level as usize];
        let has_coarser = (level as usize) + 1 < self.levels.len();
        let side = self.shape.tile_cells as usize + 1;
        let tiles = rows
            .clone()
            .flat_map(|ty| (0..grid.tiles_x).map(move |tx| (tx, ty)))
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|(tx, ty)| {
                self.output.check()?;
                let values = samples(tx, ty)?;
                let job = TileJob {
                    shape: self.shape,
                    grid,
                    level,
                    tx,
                    ty,
                    has_coarser,
                    mapping: self.source.mapping(),
                };
                let (bytes, blocks) = encode_typed(&values, &job);
                let range = tile_range(&bytes);
                let path = tile_path(self.dir, level, tx, ty);
                write_unsynced(&path, &bytes)?;
                let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
                (self.progress)(done, self.total);
                let evens = if has_coarser {
                    even_samples(&values, side)
                } else {
                    Vec::new()
                };
                Ok(((level, range, blocks), path, evens))
            })
            .collect::<Result<Vec<_>, TileError>>()?;
        let mut written: Vec<WrittenRow<T>> = Vec::with_capacity(rows.len());
        for (tile, (result, path, evens)) in tiles.into_iter().enumerate() {
            if tile % grid.tiles_x as usize == 0 {
                written.push(WrittenRow {
                    results: Vec::new(),
                    paths: Vec::new(),
                    evens: Vec::new(),
                });
            }
            let row = written.last_mut().expect("a row was pushed");
            row.results.push(result);
            row.paths.push(path);
            row.evens.push(evens);
        }
        Ok(written)
    }
}

/// Level-0 rows of tiles written at a time on a level of `tiles_x` tiles a row: an even
/// number, at least two, and enough to make [`STEP_TILES`] tiles.
fn rows_a_step(tiles_x: u32) -> u32 {
    STEP_TILES
        .div_ceil(tiles_x.max(1))
        .next_multiple_of(2)
        .max(2)
}

/// Bytes of the even samples an import holds between steps at most ([`TileWriter::write_all`]):
/// level 0's rows of two steps (those the coarser levels are being made from, and those
/// being read), and per coarser level three rows (one waiting for the row under it, the
/// two a coarser row is being made from).
fn held_row_bytes(levels: &[LevelGrid], tile_cells: u32, sample_type: SampleType) -> u64 {
    let half = u64::from(tile_cells / 2 + 1);
    let row = |grid: &LevelGrid| {
        u64::from(grid.tiles_x).saturating_mul(half * half * sample_type.bytes() as u64)
    };
    let finest = row(&levels[0]).saturating_mul(2 * u64::from(rows_a_step(levels[0].tiles_x)));
    levels[1..]
        .iter()
        .map(|grid| row(grid).saturating_mul(3))
        .fold(finest, u64::saturating_add)
}

/// Writes `bytes` to a temporary file beside `path` and renames it there, without waiting
/// for the disk; the caller syncs the file later (the rename keeps readers, and reruns,
/// from ever seeing a half-written tile). The file is closed: an import holds no tile open
/// between writing and syncing it, so its open files do not grow with its rows' width.
/// (Syncing through a new descriptor makes the data as durable; a write error the kernel
/// met in the background is reported to it since Linux 4.17, unless the file's inode left
/// memory between the close and the sync, seconds apart. A close error, which only some
/// network file systems give, is not seen.)
fn write_unsynced(path: &Path, bytes: &[u8]) -> Result<(), TileError> {
    let io = |source| TileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".partial");
    let temporary = PathBuf::from(temporary);
    let mut file = File::create(&temporary).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    std::fs::rename(&temporary, path).map_err(io)
}

/// The outcome of a sync thread (a panic in it becomes an I/O error, not a panic here).
fn join_sync(
    handle: std::thread::ScopedJoinHandle<'_, Result<(), TileError>>,
) -> Result<(), TileError> {
    handle.join().unwrap_or_else(|_| Err(sync_panicked()))
}

fn sync_panicked() -> TileError {
    TileError::Io {
        path: PathBuf::new(),
        source: std::io::Error::other("a sync thread panicked"),
    }
}

/// What [`sync_all`] syncs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Synced {
    /// Written tiles: opened for writing (what syncing a file asks on some systems), and
    /// their pages dropped from the page cache once synced ([`drop_cached`]).
    Tiles,
    /// Folders, so that the renames in them are durable: opened for reading.
    Directories,
}

/// Opens and syncs every file (or directory) of `paths` on up to [`SYNC_THREADS`] threads
/// at once, so that the file system commits them together.
fn sync_all(paths: &[PathBuf], what: Synced) -> Result<(), TileError> {
    if paths.is_empty() {
        return Ok(());
    }
    let per_thread = paths.len().div_ceil(SYNC_THREADS);
    std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .chunks(per_thread)
            .map(|chunk| {
                scope.spawn(move || {
                    for path in chunk {
                        let io = |source| TileError::Io {
                            path: path.clone(),
                            source,
                        };
                        let file = match what {
                            Synced::Tiles => File::options().write(true).open(path),
                            Synced::Directories => File::open(path),
                        }
                        .map_err(io)?;
                        file.sync_all().map_err(io)?;
                        if what == Synced::Tiles {
                            drop_cached(&file);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(join_sync)
    })
}

/// Drops a synced file's pages from the page cache (advice: a failure changes nothing).
/// An import streams its whole output through the cache; left there, the written tiles
/// grow it by gigabytes, and on the development VM the kernel's copy into a growing cache
/// slowed with it (a 16385² import: 2.2 s, then 2.8, then 4.0 s as the cache grew by 1.4
/// GB a run; dropped, 1.4–2.2 s every run; docs/BENCHMARKS.md, "Import: written tiles
/// dropped from the page cache").
fn drop_cached(file: &File) {
    #[cfg(target_os = "linux")]
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed);
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

/// An encoded tile file and its blocks' own statistics.
type EncodedTile = (Vec<u8>, Vec<(u32, u32, OwnBlockStats)>);

/// What one tile job returns: its level, world height range and its blocks' own statistics.
type TileResult = (u32, (f32, f32), Vec<(u32, u32, OwnBlockStats)>);

/// The block index from every tile job's block statistics (each block comes from exactly
/// one tile: blocks never straddle tiles).
fn assemble_block_index(
    levels: &[LevelGrid],
    block_cells: u32,
    results: Vec<TileResult>,
) -> BlockIndex {
    let placeholder = OwnBlockStats {
        min_height: 0.0,
        max_height: 0.0,
        own_error: 0.0,
    };
    let mut own: Vec<Vec<OwnBlockStats>> = levels
        .iter()
        .map(|grid| {
            let (x, y) = level_blocks(grid, block_cells);
            vec![placeholder; x as usize * y as usize]
        })
        .collect();
    for (level, _, blocks) in results {
        let (blocks_x, _) = level_blocks(&levels[level as usize], block_cells);
        for (bx, by, stats) in blocks {
            own[level as usize][(by * blocks_x + bx) as usize] = stats;
        }
    }
    BlockIndex::from_own_stats(block_cells, own, levels)
}

/// The tile and block sizes of an import.
#[derive(Clone, Copy, Debug)]
struct TileShape {
    tile_cells: u32,
    block_cells: u32,
}

/// Creates `dir` if needed; refuses a non-empty one unless `force`, and then removes its
/// header first so that the directory reads as unfinished until this import completes.
fn prepare_directory(dir: &Path, force: bool) -> Result<Prepared, TileError> {
    let io = |source| TileError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let existed = dir.exists();
    if existed && !dir.is_dir() {
        return Err(not_a_directory(dir));
    }
    std::fs::create_dir_all(dir).map_err(io)?;
    let empty = std::fs::read_dir(dir).map_err(io)?.next().is_none();
    if empty {
        return Ok(if existed {
            Prepared::WasEmpty
        } else {
            Prepared::Created
        });
    }
    if !force {
        return Err(TileError::NotEmpty {
            path: dir.to_path_buf(),
        });
    }
    let header = dir.join(HEADER_FILE);
    match std::fs::remove_file(&header) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(TileError::Io {
                path: header,
                source,
            });
        }
    }
    // Then the earlier import's own files, so none of its tiles outlives it beside the
    // new ones.
    remove_import_files(dir)?;
    Ok(Prepared::Forced)
}

/// Removes an import's own files from `dir` (its levels' folders, block index and their
/// temporaries); anything else in the folder stays.
fn remove_import_files(dir: &Path) -> Result<(), TileError> {
    let io = |source| TileError::Io {
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        let removed = if entry.file_type().map_err(io)?.is_dir() {
            name.parse::<u32>()
                .is_ok()
                .then(|| std::fs::remove_dir_all(&path))
        } else {
            let temporary =
                |file: &str| name.starts_with(&format!(".{file}.")) && name.ends_with(".tmp");
            (name == BLOCKS_FILE || temporary(BLOCKS_FILE) || temporary(HEADER_FILE))
                .then(|| std::fs::remove_file(&path))
        };
        if let Some(Err(source)) = removed {
            return Err(TileError::Io { path, source });
        }
    }
    Ok(())
}

/// What the output directory was before an import, so a failed import can leave it so.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Prepared {
    /// Made by this import: removed on failure.
    Created,
    /// Empty: emptied again on failure.
    WasEmpty,
    /// Another import's (`--force`, already removed): this import's files are removed,
    /// anything else stays.
    Forced,
}

impl Prepared {
    /// Removes what a failed import wrote (best effort: the import's own error is the
    /// one reported).
    fn clean_up(self, dir: &Path) {
        match self {
            Prepared::Created => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Prepared::WasEmpty => {
                if let Ok(entries) = std::fs::read_dir(dir) {
                    for entry in entries.flatten() {
                        let path = entry.path();
                        let _ = if entry.file_type().is_ok_and(|t| t.is_dir()) {
                            std::fs::remove_dir_all(&path)
                        } else {
                            std::fs::remove_file(&path)
                        };
                    }
                }
            }
            Prepared::Forced => {
                let _ = remove_import_files(dir);
            }
        }
    }
}

/// The stored world height range of an encoded tile (read back from its header).
fn tile_range(bytes: &[u8]) -> (f32, f32) {
    let float =
        |at: usize| f32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    (float(32), float(36))
}

/// A sample type as stored in a tile.
trait TileSample: StatSample + Send + Sync {
    const TYPE: SampleType;
    fn extend_le(values: &[Self], out: &mut Vec<u8>);
    /// The values of `samples` when they are of this type.
    fn from_samples(samples: Samples) -> Option<Vec<Self>>;
}

/// Appends `values` little-endian, `N` bytes each, in a loop the compiler vectorises.
fn extend_le_bytes<T: Copy, const N: usize>(
    values: &[T],
    out: &mut Vec<u8>,
    to_le: impl Fn(T) -> [u8; N],
) {
    let start = out.len();
    out.resize(start + values.len() * N, 0);
    for (bytes, &value) in out[start..].chunks_exact_mut(N).zip(values) {
        bytes.copy_from_slice(&to_le(value));
    }
}

impl TileSample for u16 {
    const TYPE: SampleType = SampleType::U16;
    fn extend_le(values: &[Self], out: &mut Vec<u8>) {
        extend_le_bytes(values, out, Self::to_le_bytes);
    }
    fn from_samples(samples: Samples) -> Option<Vec<Self>> {
        match samples {
            Samples::U16(values) => Some(values),
            _ => None,
        }
    }
}

impl TileSample for i16 {
    const TYPE: SampleType = SampleType::I16;
    fn extend_le(values: &[Self], out: &mut Vec<u8>) {
        extend_le_bytes(values, out, Self::to_le_bytes);
    }
    fn from_samples(samples: Samples) -> Option<Vec<Self>> {
        match samples {
            Samples::I16(values) => Some(values),
            _ => None,
        }
    }
}

impl TileSample for f32 {
    const TYPE: SampleType = SampleType::F32;
    fn extend_le(values: &[Self], out: &mut Vec<u8>) {
        extend_le_bytes(values, out, Self::to_le_bytes);
    }
    fn from_samples(samples: Samples) -> Option<Vec<Self>> {
        match samples {
            Samples::F32(values) => Some(values),
            _ => None,
        }
    }
}

/// The samples of level-0 tile `(tx, ty)`, `side × side` row-major, from the window of the
/// source it covers (clamped at the grid's edge: the padding of the layout).
fn source_tile<T: TileSample>(
    source: &dyn ImportSource,
    tile_cells: u32,
    tx: u32,
    ty: u32,
) -> Result<Vec<T>, TileError> {
    let side = tile_cells + 1;
    let source_index = |tile_index: u32, samples: u32, i: u32| -> u32 {
        let index = u64::from(tile_index) * u64::from(tile_cells) + u64::from(i);
        level_source(index, 0, samples)
    };
    let cols: Vec<u32> = (0..side)
        .map(|i| source_index(tx, source.width(), i))
        .collect();
    let rows: Vec<u32> = (0..side)
        .map(|j| source_index(ty, source.height(), j))
        .collect();
    // Padding repeats the last column and row: read each distinct one once.
    let distinct = |v: &[u32]| v.iter().position(|&x| x == v[v.len() - 1]).unwrap_or(0) + 1;
    let (n_cols, n_rows) = (distinct(&cols), distinct(&rows));
    let window = source.read_window(&cols[..n_cols], &rows[..n_rows])?;
    let (len, sample_type) = (window.len(), SampleType::of(&window));
    match T::from_samples(window) {
        Some(values) if len == n_cols * n_rows => {
            Ok(pad_window(values, n_cols, n_rows, side as usize))
        }
        _ => Err(TileError::Source {
            what: format!(
                "a {n_cols} x {n_rows} window came back as {len} {} samples",
                sample_type.name()
            ),
        }),
    }
}

/// Extends a `cols × rows` window to `side × side` by repeating its last column and row.
fn pad_window<T: Copy>(values: Vec<T>, cols: usize, rows: usize, side: usize) -> Vec<T> {
    if cols == side && rows == side {
        return values;
    }
    let mut out = Vec::with_capacity(side * side);
    for j in 0..side {
        let row = &values[j.min(rows - 1) * cols..(j.min(rows - 1) + 1) * cols];
        out.extend_from_slice(row);
        out.extend(std::iter::repeat_n(row[cols - 1], side - cols));
    }
    out
}

/// One tile to write.
struct TileJob<'a> {
    shape: TileShape,
    grid: &'a LevelGrid,
    level: u32,
    tx: u32,
    ty: u32,
    has_coarser: bool,
    mapping: WorldMapping,
}

fn encode_typed<T: TileSample>(samples: &[T], job: &TileJob<'_>) -> EncodedTile {
    let TileJob {
        shape,
        grid,
        level,
        tx,
        ty,
        has_coarser,
        mapping,
    } = *job;
    let tile_cells = shape.tile_cells;
    let side = tile_cells as usize + 1;
    let (scale, offset) = (
        f64::from(mapping.height_scale),
        f64::from(mapping.height_offset),
    );
    let mut blocks = Vec::new();
    // In AVX-512 or AVX2 lanes where the CPU has them (in baseline ones, 11–13 % of an
    // import's time).
    let covered = crate::wide_lanes::run(
        #[inline(always)]
        || {
            own_block_stats(
                samples,
                tile_cells,
                tx,
                ty,
                grid,
                shape.block_cells,
                &mapping,
                has_coarser,
                |bx, by, stats| blocks.push((bx, by, stats)),
            )
        },
    );
    // When the tile's blocks cover it, its statistics are theirs (same values, same
    // arithmetic); a tile reaching past the grid also has padding samples to look at.
    let whole_tile = || {
        let (lo, hi) = fold_range(samples, (T::HIGHEST, T::LOWEST));
        let error = if has_coarser {
            window_error(samples, side, (0, 0), side)
        } else {
            0.0
        };
        (lo.into(), hi.into(), error)
    };
    debug_assert!(covered.is_none_or(|stats| stats == whole_tile()));
    let (raw_lo, raw_hi, raw_error) = covered.unwrap_or_else(whole_tile);
    let (a, b) = (raw_lo * scale + offset, raw_hi * scale + offset);
    let mut out = Vec::with_capacity(super::TILE_HEADER_LEN + side * side * T::TYPE.bytes());
    out.resize(super::TILE_HEADER_LEN, 0);
    T::extend_le(samples, &mut out);
    let header = TileHeader {
        sample_type: T::TYPE,
        level,
        tx,
        ty,
        side: side as u32,
        min_height: round_down(a.min(b)),
        max_height: round_up(a.max(b)),
        error: round_up(raw_error * scale.abs()),
        payload_checksum: crc32fast::hash(&out[super::TILE_HEADER_LEN..]),
    };
    out[..super::TILE_HEADER_LEN].copy_from_slice(&header.encode());
    (out, blocks)
}

/// Largest raw distance between a sample of the tile and the next coarser level's surface
/// there. The coarser level keeps the even samples; a sample between two of them on a row
/// or column is compared with their mean; a sample at the centre of a coarse cell with the
/// mean of either diagonal's ends, whichever is farther, which bounds bilinear interpolation
/// (the mean of both) and either triangulation of the coarse cell.
pub(super) fn error_against_coarser<T: Copy + Into<f64>>(samples: &[T], side: usize) -> f64 {
    error_in_window(samples, side, (0, 0), side)
}

/// [`error_against_coarser`] of the `side × side` window at `origin` (column, row; both
/// even, so the window's parity is the grid's) of a grid `stride` samples wide. Every
/// sample's neighbours in the formula lie in the window, so a tile's error is the largest
/// of its blocks' errors when the blocks cover it.
pub(super) fn error_in_window<T: Copy + Into<f64>>(
    samples: &[T],
    stride: usize,
    (x0, y0): (usize, usize),
    side: usize,
) -> f64 {
    let row = |j: usize| &samples[(y0 + j) * stride + x0..(y0 + j) * stride + x0 + side];
    let value = |row: &[T], i: usize| -> f64 { row[i].into() };
    let mut error: f64 = 0.0;
    for j in (0..side).step_by(2) {
        let here = row(j);
        for i in (1..side).step_by(2) {
            let between = 0.5 * (value(here, i - 1) + value(here, i + 1));
            error = error.max((value(here, i) - between).abs());
        }
    }
    for j in (1..side).step_by(2) {
        let (above, here, below) = (row(j - 1), row(j), row(j + 1));
        for i in (0..side).step_by(2) {
            let between = 0.5 * (value(above, i) + value(below, i));
            error = error.max((value(here, i) - between).abs());
        }
        for i in (1..side).step_by(2) {
            let h = value(here, i);
            let falling = 0.5 * (value(above, i - 1) + value(below, i + 1));
            let rising = 0.5 * (value(above, i + 1) + value(below, i - 1));
            error = error.max((h - falling).abs()).max((h - rising).abs());
        }
    }
    error
}
