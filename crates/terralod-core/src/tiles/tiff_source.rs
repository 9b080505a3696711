//! A GeoTIFF as an import source read by windows: a tile decodes only the file's strips or
//! tiles ("chunks") under it, and a cache shared by the tile jobs keeps the chunks decoded
//! last (neighbouring tiles share theirs), so a file larger than memory imports without
//! being loaded, as long as its chunks are small (a single-strip file is one chunk: it is
//! refused past [`MAX_CHUNK_BYTES`]). The samples and the mapping are those the whole-file
//! loader gives (`io::load`), so both imports write the same tiles; only nodata holes,
//! which the loader fills from the samples around them, cannot be read by windows.

use super::import::ImportSource;
use super::{ImportOptions, MAX_SIDE, SampleType, TileError};
use crate::heightfield::{HeightfieldError, Samples, WorldMapping};
use crate::io::geotiff::{Checked, decode_problem, open_checked, sample_limits};
use crate::io::{
    Format, LoadError, LoadOptions, Problem, SourceInfo, mapping_from_spacing, regular_file,
};
use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tiff::decoder::{Decoder, DecodingResult};

/// Largest chunk read by windows, decoded (a 256 MiB strip is 8,192 rows of 8,192 `f32`
/// samples): a larger one would hold much of the file at once, and a lying header could
/// claim terabytes. Such files are refused with a hint to re-encode them.
pub const MAX_CHUNK_BYTES: u64 = 256 << 20;
/// Decoded bytes the chunk cache keeps at least, and at most.
const MIN_CACHE_BYTES: u64 = 64 << 20;
const MAX_CACHE_BYTES: u64 = 1 << 30;

type FileDecoder = Decoder<BufReader<File>>;

/// A GeoTIFF read by windows.
pub struct TiffFileSource {
    path: PathBuf,
    file_length: u64,
    width: u32,
    height: u32,
    sample_type: SampleType,
    nodata: Option<f64>,
    /// Columns and rows of a full chunk (a strip is as wide as the image).
    chunk_cells: (u32, u32),
    chunks_across: u32,
    chunk_count: u32,
    info: SourceInfo,
    mapping: WorldMapping,
    /// Decoders not in use (a decoder reads one chunk at a time; jobs run in parallel).
    decoders: Mutex<Vec<FileDecoder>>,
    cache: Mutex<ChunkCache>,
}

impl std::fmt::Debug for TiffFileSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TiffFileSource")
            .field("path", &self.path)
            .field("size", &(self.width, self.height))
            .field("sample_type", &self.sample_type)
            .field("chunk_cells", &self.chunk_cells)
            .finish_non_exhaustive()
    }
}

/// Decoded chunks, least recently used dropped first past `budget` bytes.
#[derive(Default)]
struct ChunkCache {
    chunks: HashMap<u32, (Arc<Samples>, u64)>,
    bytes: u64,
    budget: u64,
    clock: u64,
}

impl ChunkCache {
    fn get(&mut self, index: u32) -> Option<Arc<Samples>> {
        self.clock += 1;
        let (chunk, used) = self.chunks.get_mut(&index)?;
        *used = self.clock;
        Some(chunk.clone())
    }

    /// Keeps `chunk`; past the budget, drops the oldest chunks down to three quarters of
    /// it (one sort per many inserts, not a scan per insert).
    fn insert(&mut self, index: u32, chunk: Arc<Samples>) {
        self.clock += 1;
        self.bytes += samples_bytes(&chunk);
        if let Some((old, _)) = self.chunks.insert(index, (chunk, self.clock)) {
            self.bytes -= samples_bytes(&old);
        }
        if self.bytes <= self.budget {
            return;
        }
        let mut by_age: Vec<(u64, u32)> = self
            .chunks
            .iter()
            .map(|(&i, &(_, used))| (used, i))
            .collect();
        by_age.sort_unstable();
        for (_, oldest) in by_age {
            if self.bytes <= self.budget / 4 * 3 || self.chunks.len() == 1 {
                break;
            }
            if let Some((old, _)) = self.chunks.remove(&oldest) {
                self.bytes -= samples_bytes(&old);
            }
        }
    }
}

fn samples_bytes(samples: &Samples) -> u64 {
    (samples.len() * samples.bytes_per_sample()) as u64
}

impl TiffFileSource {
    /// The size a GeoTIFF claims, from its header alone (nothing else is checked), to
    /// choose between loading it whole and reading it by windows.
    pub fn claimed_size(path: &Path) -> Result<(u32, u32), LoadError> {
        let fail = |problem| LoadError {
            path: path.to_path_buf(),
            problem,
        };
        regular_file(path).map_err(fail)?;
        let file = File::open(path).map_err(|error| fail(Problem::Io(error)))?;
        let mut decoder = Decoder::new(BufReader::with_capacity(1 << 16, file))
            .map_err(|error| fail(decode_problem(error, None)))?;
        decoder
            .dimensions()
            .map_err(|error| fail(decode_problem(error, None)))
    }

    /// Opens `path` and checks it as the whole-file loader does (but for the sample count,
    /// which windows do not hold at once: a side may reach [`MAX_SIDE`], a chunk
    /// [`MAX_CHUNK_BYTES`]), decoding its first chunk for the stored type.
    pub fn open(path: &Path) -> Result<TiffFileSource, LoadError> {
        let fail = |problem| LoadError {
            path: path.to_path_buf(),
            problem,
        };
        let file_length = regular_file(path).map_err(fail)?.len();
        let (decoder, checked) = open_decoder(path, file_length).map_err(fail)?;
        let (chunk_cells, chunk_count) = layout(&decoder, &checked).map_err(fail)?;
        let Checked { width, height, .. } = checked;
        let mut source = TiffFileSource {
            path: path.to_path_buf(),
            file_length,
            width,
            height,
            sample_type: SampleType::F32,
            nodata: checked.nodata(),
            chunk_cells,
            chunks_across: width.div_ceil(chunk_cells.0),
            chunk_count,
            info: checked.source_info("f32"),
            mapping: WorldMapping::default(),
            decoders: Mutex::new(vec![decoder]),
            cache: Mutex::default(),
        };
        // The first chunk tells the stored type (the loader's: u8 and u16 as u16, i8 and
        // i16 as i16, every other type as f32). Its holes are not errors yet: a file with
        // holes is loaded whole.
        let (stored, first) = source.decode_chunk(0, false).map_err(|error| match error {
            ChunkError::Problem(problem) => fail(problem),
            ChunkError::Tile(error) => fail(Problem::Corrupt {
                format: Format::GeoTiff,
                detail: error.to_string(),
            }),
        })?;
        source.sample_type = SampleType::of(&first);
        source.info = checked.source_info(stored);
        let (w, h) = (width, height);
        source.mapping = mapping_from_spacing(&mut source.info, |mapping| {
            mapping.check_grid(w, h, None).is_ok()
        })
        .unwrap_or_default();
        Ok(source.with_tile_cells(ImportOptions::default().tile_cells))
    }

    /// Sizes the chunk cache for imports of `tile_cells`-cell tiles: the chunks under one
    /// band of level-0 tiles per import thread, and half again (the tile jobs of a band
    /// share its chunks; each thread works in one band at a time), within 64 MiB ..= 1 GiB. A
    /// band larger than that is decoded again for every tile that needs it.
    pub fn with_tile_cells(self, tile_cells: u32) -> TiffFileSource {
        let (cols, rows) = self.chunk_cells;
        let tile_rows = u64::from(tile_cells) + 1;
        let band_rows = (tile_rows.div_ceil(u64::from(rows)) + 1) * u64::from(rows);
        let row_bytes =
            u64::from(self.chunks_across) * u64::from(cols) * self.sample_type.bytes() as u64;
        let threads = rayon::current_num_threads() as u64;
        let budget = band_rows
            .saturating_mul(row_bytes)
            .saturating_mul(threads)
            .saturating_mul(3)
            / 2;
        lock(&self.cache).budget = budget.clamp(MIN_CACHE_BYTES, MAX_CACHE_BYTES);
        self
    }

    /// What the file says about itself (spacing, nodata, compression, CRS).
    pub fn info(&self) -> &SourceInfo {
        &self.info
    }

    /// Replaces the mapping (the file's spacing as the cell size, as the whole-file
    /// loader gives it). Fails when it is invalid or takes the grid's extent to infinity.
    pub fn with_mapping(
        mut self,
        mapping: WorldMapping,
    ) -> Result<TiffFileSource, HeightfieldError> {
        mapping.check_grid(self.width, self.height, None)?;
        self.mapping = mapping;
        Ok(self)
    }

    /// Chunk `index`, from the cache or decoded now (two jobs wanting the same chunk at
    /// once may both decode it).
    fn chunk(&self, index: u32) -> Result<Arc<Samples>, TileError> {
        if let Some(chunk) = lock(&self.cache).get(index) {
            return Ok(chunk);
        }
        let (_, chunk) = self
            .decode_chunk(index, true)
            .map_err(|error| match error {
                ChunkError::Tile(error) => error,
                ChunkError::Problem(problem) => TileError::Source {
                    what: format!("{}: {problem}", self.path.display()),
                },
            })?;
        let chunk = Arc::new(chunk);
        lock(&self.cache).insert(index, chunk.clone());
        Ok(chunk)
    }

    /// Decodes chunk `index` into the loader's sample type, with the stored type's name;
    /// with `refuse_holes`, a nodata or NaN sample is an error naming it (an infinite one
    /// always is, as in the loader).
    fn decode_chunk(
        &self,
        index: u32,
        refuse_holes: bool,
    ) -> Result<(&'static str, Samples), ChunkError> {
        // `chunk_data_dimensions` panics past the table.
        if index >= self.chunk_count {
            return Err(ChunkError::Problem(Problem::Corrupt {
                format: Format::GeoTiff,
                detail: format!("chunk {index} is past the {} in the file", self.chunk_count),
            }));
        }
        let taken = lock(&self.decoders).pop();
        let mut decoder = match taken {
            Some(decoder) => decoder,
            None => open_decoder(&self.path, self.file_length)?.0,
        };
        let (data_cols, data_rows) = decoder.chunk_data_dimensions(index);
        let decoded = decoder.read_chunk(index);
        lock(&self.decoders).push(decoder);
        let data =
            decoded.map_err(|error| decode_problem(error, self.info.compression.as_deref()))?;
        let count = data_cols as usize * data_rows as usize;
        let origin = self.chunk_origin(index);
        let position = |i: usize| {
            (
                origin.0 + (i % data_cols as usize) as u32,
                origin.1 + (i / data_cols as usize) as u32,
            )
        };
        // A hole (nodata or NaN), which only the whole-file loader fills, or an infinity,
        // which it refuses too.
        let hole = |i: usize, value: f64| {
            let (col, row) = position(i);
            if value.is_infinite() {
                return ChunkError::Problem(Problem::Infinite {
                    col,
                    row,
                    value: value as f32,
                });
            }
            let what = if value.is_nan() {
                "not a number"
            } else {
                "the nodata value"
            };
            ChunkError::Tile(TileError::Source {
                what: format!(
                    "{}: the sample at column {col}, row {row} is {what}; holes are filled \
                     only when the file is loaded whole (raise --max-samples)",
                    self.path.display(),
                ),
            })
        };
        let short = || {
            ChunkError::Problem(Problem::UnexpectedEnd {
                format: Format::GeoTiff,
            })
        };
        let nodata = self.nodata;
        // Integers kept as integers: a hole is a sample equal to nodata.
        macro_rules! kept {
            ($values:expr, $name:literal, $variant:ident, $t:ty) => {{
                let mut values = $values;
                if values.len() < count {
                    return Err(short());
                }
                values.truncate(count);
                // In place where the type stays (u16, i16).
                let values: Vec<$t> = values.into_iter().map(<$t>::from).collect();
                let at = nodata
                    .filter(|_| refuse_holes)
                    .and_then(|n| values.iter().position(|&v| f64::from(v) == n));
                if let Some(i) = at {
                    return Err(hole(i, f64::from(values[i])));
                }
                ($name, Samples::$variant(values))
            }};
        }
        // Other types to f32, as the loader converts them.
        macro_rules! widened {
            ($values:expr, $name:literal) => {{
                let mut out = Vec::with_capacity(count);
                for (i, &v) in $values.get(..count).ok_or_else(short)?.iter().enumerate() {
                    #[allow(clippy::cast_lossless, clippy::cast_precision_loss)]
                    let wide = v as f64;
                    let narrow = wide as f32;
                    if wide.is_infinite()
                        || (refuse_holes && (nodata == Some(wide) || wide.is_nan()))
                    {
                        return Err(hole(i, wide));
                    }
                    if wide.is_finite() && !narrow.is_finite() {
                        let (col, row) = position(i);
                        return Err(ChunkError::Problem(Problem::OutOfRange {
                            col,
                            row,
                            value: wide,
                        }));
                    }
                    out.push(narrow);
                }
                ($name, Samples::F32(out))
            }};
        }
        Ok(match data {
            DecodingResult::U8(v) => kept!(v, "u8", U16, u16),
            DecodingResult::U16(v) => kept!(v, "u16", U16, u16),
            DecodingResult::I8(v) => kept!(v, "i8", I16, i16),
            DecodingResult::I16(v) => kept!(v, "i16", I16, i16),
            DecodingResult::U32(v) => widened!(v, "u32"),
            DecodingResult::I32(v) => widened!(v, "i32"),
            DecodingResult::U64(v) => widened!(v, "u64"),
            DecodingResult::I64(v) => widened!(v, "i64"),
            DecodingResult::F64(v) => widened!(v, "f64"),
            DecodingResult::F32(mut values) => {
                if values.len() < count {
                    return Err(short());
                }
                values.truncate(count);
                // The loader compares nodata in f32.
                let nodata = nodata.map(|n| n as f32);
                let bad = values.iter().position(|&h| {
                    h.is_infinite() || (refuse_holes && (h.is_nan() || nodata == Some(h)))
                });
                if let Some(i) = bad {
                    return Err(hole(i, f64::from(values[i])));
                }
                ("f32", Samples::F32(values))
            }
            DecodingResult::F16(_) => {
                return Err(ChunkError::Problem(Problem::Unsupported {
                    format: Format::GeoTiff,
                    detail: "16-bit float samples".to_owned(),
                }));
            }
        })
    }

    /// Level-0 column and row of chunk `index`'s first sample.
    fn chunk_origin(&self, index: u32) -> (u32, u32) {
        (
            (index % self.chunks_across) * self.chunk_cells.0,
            (index / self.chunks_across) * self.chunk_cells.1,
        )
    }
}

/// Why a chunk could not be used: the file's problem (named with the path by the caller)
/// or an error that already names it.
enum ChunkError {
    Problem(Problem),
    Tile(TileError),
}

impl From<Problem> for ChunkError {
    fn from(problem: Problem) -> Self {
        ChunkError::Problem(problem)
    }
}

/// A decoder of `path`, its header checked, ready to decode chunks of at most
/// [`MAX_CHUNK_BYTES`] (the decoder refuses a larger one instead of allocating it).
fn open_decoder(path: &Path, file_length: u64) -> Result<(FileDecoder, Checked), Problem> {
    let reader = BufReader::with_capacity(1 << 16, File::open(path)?);
    // Windows hold a chunk at a time, not the image: the sample count is not capped here.
    let options = LoadOptions {
        max_samples: u64::MAX,
        ..LoadOptions::default()
    };
    let (decoder, checked) = open_checked(reader, file_length, &options)?;
    for (what, side) in [("width", checked.width), ("height", checked.height)] {
        if side > MAX_SIDE {
            return Err(Problem::Unsupported {
                format: Format::GeoTiff,
                detail: format!("a {what} of {side} samples (an import takes at most {MAX_SIDE})"),
            });
        }
    }
    let (cols, rows) = decoder.chunk_dimensions();
    // As decoded: up to 8 bytes a sample, and the result at least 4 (f32). A strip never
    // holds more rows than the image (RowsPerStrip may say 2^32 − 1: "all of them").
    let rows = rows.min(checked.height);
    let chunk_bytes = u64::from(cols)
        .saturating_mul(u64::from(rows))
        .saturating_mul(checked.sample_bytes.max(4));
    if chunk_bytes > MAX_CHUNK_BYTES {
        return Err(Problem::Unsupported {
            format: Format::GeoTiff,
            detail: format!(
                "strips or tiles of {cols} x {rows} samples ({:.0} MiB decoded, at most {} MiB \
                 are read by windows); re-encode it with smaller strips or tiles (gdal_translate \
                 -co TILED=YES) or load it whole with a larger --max-samples",
                chunk_bytes as f64 / f64::from(1 << 20),
                MAX_CHUNK_BYTES >> 20
            ),
        });
    }
    let limit = usize::try_from(chunk_bytes * 2).unwrap_or(usize::MAX);
    Ok((decoder.with_limits(sample_limits(limit)), checked))
}

/// A full chunk's columns and rows and the number of chunks.
fn layout(decoder: &FileDecoder, checked: &Checked) -> Result<((u32, u32), u32), Problem> {
    let (cols, rows) = decoder.chunk_dimensions();
    // One chunk row when a chunk claims more rows than the image has.
    let rows = rows.min(checked.height);
    if cols == 0 || rows == 0 {
        return Err(Problem::Corrupt {
            format: Format::GeoTiff,
            detail: format!("chunks of {cols} x {rows} samples"),
        });
    }
    // Strips are as wide as the image: one across.
    let across = u64::from(checked.width.div_ceil(cols));
    let down = u64::from(checked.height.div_ceil(rows));
    let count = across * down;
    let count = u32::try_from(count).map_err(|_| Problem::Corrupt {
        format: Format::GeoTiff,
        detail: format!("{count} chunks"),
    })?;
    Ok(((cols, rows), count))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A job that panicked leaves the cache or the decoder list whole (every change is
    // one insert or push), so its state can be used.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ImportSource for TiffFileSource {
    fn width(&self) -> u32 {
        self.width
    }

    fn height(&self) -> u32 {
        self.height
    }

    fn sample_type(&self) -> SampleType {
        self.sample_type
    }

    fn mapping(&self) -> WorldMapping {
        self.mapping
    }

    fn read_window(&self, cols: &[u32], rows: &[u32]) -> Result<Samples, TileError> {
        Ok(match self.sample_type {
            SampleType::U16 => Samples::U16(self.gather(cols, rows, |chunk| match chunk {
                Samples::U16(values) => Some(values),
                _ => None,
            })?),
            SampleType::I16 => Samples::I16(self.gather(cols, rows, |chunk| match chunk {
                Samples::I16(values) => Some(values),
                _ => None,
            })?),
            SampleType::F32 => Samples::F32(self.gather(cols, rows, |chunk| match chunk {
                Samples::F32(values) => Some(values),
                _ => None,
            })?),
        })
    }
}

impl TiffFileSource {
    /// The samples at `cols` × `rows`, row-major, from the chunks under them, taken as
    /// `T` by `typed`. One chunk is held at a time: per band of chunk rows, each chunk
    /// gives its columns of every row of the band.
    fn gather<T: Copy + Default>(
        &self,
        cols: &[u32],
        rows: &[u32],
        typed: impl Fn(&Samples) -> Option<&Vec<T>>,
    ) -> Result<Vec<T>, TileError> {
        let (chunk_cols, chunk_rows) = self.chunk_cells;
        // The runs of columns in one chunk: (chunk column, first and end index in `cols`).
        let mut runs: Vec<(u32, usize, usize)> = Vec::new();
        for (i, &col) in cols.iter().enumerate() {
            let across = col / chunk_cols;
            match runs.last_mut() {
                Some(run) if run.0 == across => run.2 = i + 1,
                _ => runs.push((across, i, i + 1)),
            }
        }
        let mut out = vec![T::default(); cols.len() * rows.len()];
        let mut first = 0;
        while first < rows.len() {
            let band_row = rows[first] / chunk_rows;
            let end = first + rows[first..].partition_point(|&r| r / chunk_rows == band_row);
            for &(across, start, stop) in &runs {
                let index = band_row * self.chunks_across + across;
                let chunk = self.chunk(index)?;
                let values = typed(&chunk).ok_or_else(|| TileError::Source {
                    what: format!(
                        "{}: chunk {index} holds another sample type than the first chunk",
                        self.path.display()
                    ),
                })?;
                // Chunks on the right edge hold only the image's columns.
                let data_cols = (self.width - across * chunk_cols).min(chunk_cols) as usize;
                for (r, &row) in rows[first..end].iter().enumerate() {
                    let line = (row % chunk_rows) as usize * data_cols;
                    let target = &mut out[(first + r) * cols.len()..][start..stop];
                    for (slot, &col) in target.iter_mut().zip(&cols[start..stop]) {
                        *slot = values[line + (col % chunk_cols) as usize];
                    }
                }
            }
            first = end;
        }
        Ok(out)
    }
}
