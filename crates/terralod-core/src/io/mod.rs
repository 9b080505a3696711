//! Loaders and writers for elevation formats (feature H2).
//!
//! Formats: PNG (8/16-bit gray, gray stored as RGB(A), Terrain-RGB and 24-bit RGB packings),
//! GeoTIFF, raw `.r16` / `.f32`, SRTM `.hgt` and ESRI ASCII grids. [`load`] reads a file,
//! [`decode`] the same formats from memory (used by the fuzzer).
//!
//! What every loader promises:
//! - The raw sample is the decoded value of the file (PNG integer, GeoTIFF value, metres for
//!   Terrain-RGB); the mapping has `height_scale` 1 and `height_offset` 0. When the file
//!   states its spacing, `cell_size` is the mean of the two metric spacings, else 1.
//! - A claimed size is checked against [`LoadOptions::max_samples`] before anything is
//!   allocated, so a lying header costs nothing.
//! - Nodata (a nodata value, NaN, alpha 0, HGT voids) is filled by
//!   [`Heightfield::with_nodata`]; infinities are errors that name the sample.
//! - Bad input is an error, never a panic.

mod ascii;
pub(crate) mod geotiff;
mod hgt;
pub mod interrupt;
pub(crate) mod png;
mod raw;
mod write;

pub use write::{
    Quantization, WriteError, WriteProblem, check_destination, write_f32, write_file_atomically,
    write_png16,
};

use crate::heightfield::{Heightfield, HeightfieldError, MIN_SIDE, Samples, WorldMapping};
use serde::Serialize;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read, Seek};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Default sample limit: 2^30 samples (2 GiB as 16-bit, 4 GiB as f32), far above the real
/// data sets and far below what a lying header could claim.
pub const DEFAULT_MAX_SAMPLES: u64 = 1 << 30;

/// Metres per degree of latitude (the mean meridian degree used by the data sidecars).
pub const METRES_PER_DEGREE_LATITUDE: f64 = 110_574.0;
/// Metres per degree of longitude at the equator; multiply by cos(latitude).
pub const METRES_PER_DEGREE_LONGITUDE: f64 = 111_320.0;

/// An elevation file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Format {
    Png,
    GeoTiff,
    /// Headerless 16-bit unsigned samples (`.r16`, `.raw`).
    Raw16,
    /// Headerless 32-bit float samples (`.r32`, `.f32`).
    RawF32,
    /// SRTM `.hgt`: n × n big-endian i16 samples, −32768 marks voids.
    Hgt,
    /// ESRI ASCII grid (`.asc`).
    AsciiGrid,
}

impl Format {
    pub const ALL: [Format; 6] = [
        Format::Png,
        Format::GeoTiff,
        Format::Raw16,
        Format::RawF32,
        Format::Hgt,
        Format::AsciiGrid,
    ];

    /// Short name, as accepted by `--format`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::GeoTiff => "geotiff",
            Format::Raw16 => "r16",
            Format::RawF32 => "f32",
            Format::Hgt => "hgt",
            Format::AsciiGrid => "ascii-grid",
        }
    }

    /// The format a file extension names (case-insensitive). `.raw` is read as 16-bit, the
    /// convention of Unity and World Machine height maps.
    pub fn from_extension(extension: &str) -> Option<Format> {
        match extension.to_ascii_lowercase().as_str() {
            "png" => Some(Format::Png),
            "tif" | "tiff" | "gtif" | "gtiff" => Some(Format::GeoTiff),
            "r16" | "raw" => Some(Format::Raw16),
            "r32" | "f32" => Some(Format::RawF32),
            "hgt" => Some(Format::Hgt),
            "asc" => Some(Format::AsciiGrid),
            _ => None,
        }
    }

    /// The format the first bytes of a file identify, for the formats that have a signature.
    pub fn from_signature(head: &[u8]) -> Option<Format> {
        const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";
        const TIFF: [&[u8]; 4] = [b"II*\0", b"MM\0*", b"II+\0", b"MM\0+"];
        if head.starts_with(PNG) {
            return Some(Format::Png);
        }
        if TIFF.iter().any(|magic| head.starts_with(magic)) {
            return Some(Format::GeoTiff);
        }
        let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
        let start = text.iter().position(|b| !b.is_ascii_whitespace())?;
        let word_end = text[start..]
            .iter()
            .position(|b| b.is_ascii_whitespace())
            .map_or(text.len(), |n| start + n);
        ascii::is_header_key(&text[start..word_end]).then_some(Format::AsciiGrid)
    }

    /// Detects the format from the signature first, then from the extension of `path`.
    pub fn detect(head: &[u8], path: Option<&Path>) -> Option<Format> {
        Format::from_signature(head).or_else(|| {
            let extension = path?.extension()?.to_str()?;
            Format::from_extension(extension)
        })
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    /// Accepts the names of [`Format::name`] and the file extensions.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(text))
            .or_else(|| Format::from_extension(text.trim_start_matches('.')))
            .ok_or_else(|| {
                format!(
                    "unknown format {text:?}: expected png, geotiff, r16, f32, hgt or ascii-grid"
                )
            })
    }
}

/// How heights are packed into the channels of a colour PNG.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RgbEncoding {
    /// R = G = B carry one gray value (the default when the channels agree).
    Gray,
    /// Mapbox Terrain-RGB: `h = -10000 + (R·65536 + G·256 + B) · 0.1` metres.
    TerrainRgb,
    /// A 24-bit integer `R·65536 + G·256 + B` (exact in `f32`).
    Rgb24,
}

impl RgbEncoding {
    pub fn name(self) -> &'static str {
        match self {
            RgbEncoding::Gray => "gray",
            RgbEncoding::TerrainRgb => "terrain-rgb",
            RgbEncoding::Rgb24 => "rgb24",
        }
    }
}

impl fmt::Display for RgbEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RgbEncoding {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        [
            RgbEncoding::Gray,
            RgbEncoding::TerrainRgb,
            RgbEncoding::Rgb24,
        ]
        .into_iter()
        .find(|e| e.name().eq_ignore_ascii_case(text))
        .ok_or_else(|| format!("unknown encoding {text:?}: expected gray, terrain-rgb or rgb24"))
    }
}

/// Byte order of raw sample files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum ByteOrder {
    /// Little-endian: what x86 and ARM tools write by default.
    #[default]
    Little,
    Big,
}

impl FromStr for ByteOrder {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.to_ascii_lowercase().as_str() {
            "little" | "le" => Ok(ByteOrder::Little),
            "big" | "be" => Ok(ByteOrder::Big),
            _ => Err(format!(
                "unknown byte order {text:?}: expected little or big"
            )),
        }
    }
}

/// How to read a file. The defaults read every format whose files describe themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// Channel packing of colour PNGs; `None` accepts only R = G = B.
    pub encoding: Option<RgbEncoding>,
    /// Width × height of raw files; `None` infers a square from the file length.
    pub raw_size: Option<(u32, u32)>,
    /// Byte order of raw files (HGT is big-endian by definition and ignores it).
    pub byte_order: ByteOrder,
    /// Largest accepted sample count, checked before allocating (default
    /// [`DEFAULT_MAX_SAMPLES`]).
    pub max_samples: u64,
    /// Forces a format instead of detecting it (raw files have no signature).
    pub format: Option<Format>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            encoding: None,
            raw_size: None,
            byte_order: ByteOrder::Little,
            max_samples: DEFAULT_MAX_SAMPLES,
            format: None,
        }
    }
}

impl LoadOptions {
    pub fn with_encoding(mut self, encoding: RgbEncoding) -> Self {
        self.encoding = Some(encoding);
        self
    }

    pub fn with_raw_size(mut self, width: u32, height: u32) -> Self {
        self.raw_size = Some((width, height));
        self
    }

    pub fn with_byte_order(mut self, byte_order: ByteOrder) -> Self {
        self.byte_order = byte_order;
        self
    }

    pub fn with_max_samples(mut self, max_samples: u64) -> Self {
        self.max_samples = max_samples;
        self
    }

    pub fn with_format(mut self, format: Format) -> Self {
        self.format = Some(format);
        self
    }
}

/// A loaded heightfield and what the file said about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    pub heightfield: Heightfield,
    pub source: SourceInfo,
}

/// What the file said about its data, for `terralod info` and for choosing a cell size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourceInfo {
    pub format: Format,
    /// Sample type as stored in the file: "u8", "u16", "i16", "i32", "u32", "f32", "f64",
    /// or "rgb8" for packed colour PNGs.
    pub sample_type: &'static str,
    /// Metric spacing (east-west, north-south) when the file tells it.
    pub spacing_m: Option<(f64, f64)>,
    /// Where the spacing came from, or why there is none.
    pub spacing_note: Option<String>,
    /// The value that marks missing samples, when the format has one.
    pub nodata_value: Option<f64>,
    /// Compression of the stored data, when the format has a choice.
    pub compression: Option<String>,
    /// Channel packing used to decode a colour PNG.
    pub encoding: Option<RgbEncoding>,
    /// Coordinate reference system, as far as the file describes it.
    pub crs: Option<String>,
}

impl SourceInfo {
    fn new(format: Format, sample_type: &'static str) -> Self {
        Self {
            format,
            sample_type,
            spacing_m: None,
            spacing_note: None,
            nodata_value: None,
            compression: None,
            encoding: None,
            crs: None,
        }
    }
}

/// A file that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct LoadError {
    pub path: PathBuf,
    pub problem: Problem,
}

/// Why elevation data could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("cannot read: {0}")]
    Io(std::io::Error),
    #[error("file not found")]
    NotFound,
    #[error("is a directory, not an elevation file")]
    IsDirectory,
    #[error("is not a regular file (a pipe, device or socket); copy the data to a file first")]
    NotAFile,
    #[error("file is empty")]
    Empty,
    #[error(
        "unknown format: no known signature and no known extension \
         (.png, .tif, .tiff, .r16, .raw, .r32, .f32, .hgt, .asc); pass --format"
    )]
    UnknownFormat,
    #[error("truncated: {expected} bytes expected, {actual} found")]
    Truncated { expected: u64, actual: u64 },
    #[error("{actual} bytes where {expected} were expected: trailing data or a wrong --raw-size")]
    TrailingBytes { expected: u64, actual: u64 },
    #[error("not enough memory for {width} x {height} samples")]
    OutOfMemory { width: u64, height: u64 },
    #[error("{format} data end early: the file is truncated")]
    UnexpectedEnd { format: Format },
    #[error(
        "header claims {width} x {height} samples, more than the limit of {limit} \
         (raise it with --max-samples)"
    )]
    TooLarge { width: u64, height: u64, limit: u64 },
    #[error(
        "size {width} x {height} is too small: at least {MIN_SIDE} x {MIN_SIDE} samples are needed"
    )]
    TooSmall { width: u64, height: u64 },
    #[error(
        "cannot infer the size of a raw file of {bytes} bytes: not a square of \
         {sample_bytes}-byte samples; pass --raw-size WxH"
    )]
    RawSizeUnknown { bytes: u64, sample_bytes: u8 },
    #[error("an HGT file holds n x n 2-byte samples; {bytes} bytes is not such a square")]
    HgtNotSquare { bytes: u64 },
    #[error(
        "colour image whose channels differ (first at column {col}, row {row}): {}",
        if *wide {
            "16-bit colour packs heights in no encoding terralod reads; convert it to 16-bit \
             grayscale"
        } else {
            "pass --encoding terrain-rgb|rgb24 to say how heights are packed"
        }
    )]
    RgbNeedsEncoding { col: u32, row: u32, wide: bool },
    #[error("--encoding {encoding} needs an 8-bit RGB image, this one is {found}")]
    EncodingMismatch {
        encoding: RgbEncoding,
        found: String,
    },
    #[error("unsupported {format} data: {detail}")]
    Unsupported { format: Format, detail: String },
    #[error("corrupt {format} data: {detail}")]
    Corrupt { format: Format, detail: String },
    #[error(
        "sample at column {col}, row {row} is {value}: NaN marks nodata, infinities are errors"
    )]
    Infinite { col: u32, row: u32, value: f32 },
    #[error("sample at column {col}, row {row} is {value:e}, beyond the range of f32")]
    OutOfRange { col: u32, row: u32, value: f64 },
    #[error("ASCII grid header, line {line}: {detail}")]
    AsciiHeader { line: usize, detail: String },
    #[error("ASCII grid value {token:?} at column {col}, row {row} is not a number")]
    AsciiValue { col: u64, row: u64, token: String },
    #[error("ASCII grid header claims {expected} values (ncols x nrows), the file holds {actual}")]
    ValueCount { expected: u64, actual: u64 },
    #[error(transparent)]
    Heightfield(#[from] HeightfieldError),
}

impl From<std::io::Error> for Problem {
    fn from(error: std::io::Error) -> Self {
        Problem::Io(error)
    }
}

/// What a file's surroundings tell a decoder: its name (HGT tiles encode their position in
/// it) and an ESRI `.prj` sidecar (ASCII grids keep their coordinate system there).
#[derive(Clone, Debug, Default)]
struct Hints {
    file_name: Option<String>,
    projection: Option<String>,
}

/// Loads an elevation file. The format comes from [`LoadOptions::format`], else from the
/// file's signature, else from its extension.
pub fn load(path: &Path, options: &LoadOptions) -> Result<Loaded, LoadError> {
    load_file(path, options).map_err(|problem| LoadError {
        path: path.to_path_buf(),
        problem,
    })
}

/// Decodes elevation data held in memory. Raw formats take their size from `options`,
/// HGT and ASCII grids get no spacing from a file name or sidecar.
pub fn decode(bytes: &[u8], format: Format, options: &LoadOptions) -> Result<Loaded, Problem> {
    if bytes.is_empty() {
        return Err(Problem::Empty);
    }
    let hints = Hints::default();
    match format {
        Format::AsciiGrid => ascii::decode(bytes, options, &hints),
        _ => decode_reader(
            Cursor::new(bytes),
            bytes.len() as u64,
            format,
            options,
            &hints,
        ),
    }
}

/// The metadata of `path`, refused unless it is a regular file. Opening a FIFO blocks until
/// a writer comes, and a device such as /dev/zero never ends: only regular files have a
/// length to check claimed sizes against. Every file input is checked with this first
/// (elevation files here; the CLI's camera paths and textures too).
pub fn regular_file(path: &Path) -> Result<std::fs::Metadata, Problem> {
    let metadata = std::fs::metadata(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => Problem::NotFound,
        _ => Problem::Io(error),
    })?;
    if metadata.is_dir() {
        return Err(Problem::IsDirectory);
    }
    if !metadata.is_file() {
        return Err(Problem::NotAFile);
    }
    Ok(metadata)
}

fn load_file(path: &Path, options: &LoadOptions) -> Result<Loaded, Problem> {
    let metadata = regular_file(path)?;
    let file = File::open(path)?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let head = reader.fill_buf()?;
    if head.is_empty() {
        return Err(Problem::Empty);
    }
    let format = options
        .format
        .or_else(|| Format::detect(head, Some(path)))
        .ok_or(Problem::UnknownFormat)?;
    let hints = Hints {
        file_name: path.file_name().map(|n| n.to_string_lossy().into_owned()),
        projection: (format == Format::AsciiGrid)
            .then(|| read_projection_sidecar(path))
            .flatten(),
    };
    let length = metadata.len();
    match format {
        Format::AsciiGrid => {
            let mut text = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
            reader.read_to_end(&mut text)?;
            ascii::decode(&text, options, &hints)
        }
        _ => decode_reader(reader, length, format, options, &hints),
    }
}

/// Reads `NAME.prj` next to an ASCII grid; small and optional, so any failure means "none".
fn read_projection_sidecar(path: &Path) -> Option<String> {
    const MAX_PRJ_BYTES: u64 = 64 * 1024;
    let prj = path.with_extension("prj");
    let file = File::open(prj).ok()?;
    let mut text = String::new();
    file.take(MAX_PRJ_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

fn decode_reader<R: BufRead + Seek>(
    mut reader: R,
    length: u64,
    format: Format,
    options: &LoadOptions,
    hints: &Hints,
) -> Result<Loaded, Problem> {
    if length == 0 {
        return Err(Problem::Empty);
    }
    match format {
        Format::Png => png::decode(reader, options),
        Format::GeoTiff => geotiff::decode(reader, length, options),
        Format::Raw16 | Format::RawF32 => raw::decode(reader, length, format, options),
        Format::Hgt => hgt::decode(reader, length, options, hints),
        Format::AsciiGrid => {
            let mut text = Vec::new();
            reader.read_to_end(&mut text)?;
            ascii::decode(&text, options, hints)
        }
    }
}

/// Checks a size claimed by a header against the limit, before anything is allocated.
fn check_claimed_size(
    width: u64,
    height: u64,
    options: &LoadOptions,
) -> Result<(u32, u32), Problem> {
    if width < u64::from(MIN_SIDE) || height < u64::from(MIN_SIDE) {
        return Err(Problem::TooSmall { width, height });
    }
    let limit = options.max_samples;
    let too_large = width.checked_mul(height).is_none_or(|n| n > limit);
    match (u32::try_from(width), u32::try_from(height)) {
        (Ok(w), Ok(h)) if !too_large => Ok((w, h)),
        _ => Err(Problem::TooLarge {
            width,
            height,
            limit,
        }),
    }
}

/// Builds a heightfield from float samples: NaN and `nodata` mark holes, infinities are
/// errors that name the sample.
fn field_from_f32(
    width: u32,
    height: u32,
    values: Vec<f32>,
    nodata: Option<f32>,
) -> Result<Heightfield, Problem> {
    let mut holes: Option<Vec<bool>> = None;
    for (i, &v) in values.iter().enumerate() {
        let is_hole = v.is_nan() || nodata.is_some_and(|n| v == n);
        if !is_hole && v.is_infinite() {
            return Err(Problem::Infinite {
                col: (i % width as usize) as u32,
                row: (i / width as usize) as u32,
                value: v,
            });
        }
        if is_hole {
            holes.get_or_insert_with(|| vec![false; values.len()])[i] = true;
        }
    }
    field_with_holes(width, height, Samples::F32(values), holes)
}

/// Builds a heightfield, filling the holes when there are any.
fn field_with_holes(
    width: u32,
    height: u32,
    samples: Samples,
    holes: Option<Vec<bool>>,
) -> Result<Heightfield, Problem> {
    let field = match holes {
        Some(mask) => Heightfield::with_nodata(width, height, samples, &mask)?,
        None => Heightfield::new(width, height, samples)?,
    };
    Ok(field)
}

/// Finished result of a decoder: sets the cell size to the mean metric spacing, or drops a
/// spacing that is not usable (not positive, 0 or infinite as `f32`, or a world extent
/// beyond `f32`) with a note, so `--cell-size` can still override it.
fn finish(mut heightfield: Heightfield, mut source: SourceInfo) -> Result<Loaded, Problem> {
    if let Some(mapping) = mapping_from_spacing(&mut source, |mapping| {
        heightfield.check_mapping(mapping).is_ok()
    }) {
        heightfield = heightfield.with_mapping(mapping)?;
    }
    Ok(Loaded {
        heightfield,
        source,
    })
}

/// The mapping whose cell size is the file's spacing (the mean of its two axes), when the
/// spacing is usable and `fits` the data; otherwise `None`, and `source` says why.
pub(crate) fn mapping_from_spacing(
    source: &mut SourceInfo,
    fits: impl FnOnce(&WorldMapping) -> bool,
) -> Option<WorldMapping> {
    let (a, b) = source.spacing_m?;
    let mapping = WorldMapping {
        cell_size: ((a + b) / 2.0) as f32,
        ..WorldMapping::default()
    };
    if a.is_finite() && b.is_finite() && a > 0.0 && b > 0.0 && fits(&mapping) {
        return Some(mapping);
    }
    source.spacing_m = None;
    source.spacing_note = Some(format!(
        "the file's spacing ({a}, {b}) is not usable; cell size left at 1"
    ));
    None
}

/// An empty vector with room for `count` samples, or an error when the allocator refuses:
/// with a raised `--max-samples`, a lying header must not abort the process.
fn reserve_samples<T>(count: usize, width: u32, height: u32) -> Result<Vec<T>, Problem> {
    let mut values = Vec::new();
    values
        .try_reserve_exact(count)
        .map_err(|_| Problem::OutOfMemory {
            width: u64::from(width),
            height: u64::from(height),
        })?;
    Ok(values)
}

/// Metric spacing (east-west, north-south) of a grid in degrees, at its centre latitude.
fn degrees_to_metres(dx_degrees: f64, dy_degrees: f64, centre_latitude: f64) -> Option<(f64, f64)> {
    if !(-90.0..=90.0).contains(&centre_latitude) {
        return None;
    }
    let east_west =
        dx_degrees.abs() * METRES_PER_DEGREE_LONGITUDE * centre_latitude.to_radians().cos();
    let north_south = dy_degrees.abs() * METRES_PER_DEGREE_LATITUDE;
    (east_west > 0.0 && north_south > 0.0).then_some((east_west, north_south))
}

/// Whether a grid with this origin and spacing plausibly lies in longitude/latitude degrees:
/// used only when the file does not say. Cells of at most 0.01° (about 1 km) inside the
/// globe; a metric grid with centimetre cells at the origin is the rare false positive.
fn looks_geographic(x: f64, y: f64, dx: f64, dy: f64, columns: u64, rows: u64) -> bool {
    let (dx, dy) = (dx.abs(), dy.abs());
    dx > 0.0
        && dy > 0.0
        && dx <= 0.01
        && dy <= 0.01
        && (-180.0..=360.0).contains(&x)
        && (-90.0..=90.0).contains(&y)
        && dx * columns as f64 <= 360.0
        && dy * rows as f64 <= 180.0
}

/// Square root of `n` when `n` is a perfect square.
fn exact_square_root(n: u64) -> Option<u64> {
    let root = n.isqrt();
    (root * root == n).then_some(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_come_before_extensions() {
        let png = b"\x89PNG\r\n\x1a\n....";
        assert_eq!(
            Format::detect(png, Some(Path::new("a.tif"))),
            Some(Format::Png)
        );
        assert_eq!(Format::detect(b"II*\0rest", None), Some(Format::GeoTiff));
        assert_eq!(Format::detect(b"MM\0*rest", None), Some(Format::GeoTiff));
        assert_eq!(
            Format::detect(b"II+\0\x08\0\0\0", None),
            Some(Format::GeoTiff)
        );
        assert_eq!(
            Format::detect(b"\xEF\xBB\xBF\r\n NCols 5\n", None),
            Some(Format::AsciiGrid)
        );
        assert_eq!(
            Format::detect(b"ncolsx 5", Some(Path::new("x.hgt"))),
            Some(Format::Hgt)
        );
        assert_eq!(
            Format::detect(b"\0\x01", Some(Path::new("dir/N40W106.HGT"))),
            Some(Format::Hgt)
        );
        assert_eq!(
            Format::detect(b"\0\x01", Some(Path::new("a.R16"))),
            Some(Format::Raw16)
        );
        assert_eq!(
            Format::detect(b"\0\x01", Some(Path::new("a.r32"))),
            Some(Format::RawF32)
        );
        assert_eq!(Format::detect(b"\0\x01", Some(Path::new("a.bin"))), None);
        assert_eq!(Format::detect(b"   ", None), None);
    }

    #[test]
    fn names_parse_back() {
        for format in Format::ALL {
            assert_eq!(format.name().parse::<Format>(), Ok(format));
        }
        assert_eq!(".tiff".parse::<Format>(), Ok(Format::GeoTiff));
        assert!(
            "jpeg"
                .parse::<Format>()
                .unwrap_err()
                .contains("unknown format")
        );
        assert_eq!(
            "Terrain-RGB".parse::<RgbEncoding>(),
            Ok(RgbEncoding::TerrainRgb)
        );
        assert_eq!("be".parse::<ByteOrder>(), Ok(ByteOrder::Big));
        assert!("middle".parse::<ByteOrder>().is_err());
    }

    #[test]
    fn claimed_sizes_are_checked_without_overflow() {
        let options = LoadOptions::default();
        assert_eq!(
            check_claimed_size(4097, 2049, &options).unwrap(),
            (4097, 2049)
        );
        assert!(matches!(
            check_claimed_size(u64::MAX, u64::MAX, &options),
            Err(Problem::TooLarge { .. })
        ));
        let unlimited = LoadOptions::default().with_max_samples(u64::MAX);
        assert!(matches!(
            check_claimed_size(1 << 33, 2, &unlimited),
            Err(Problem::TooLarge { .. })
        ));
        assert!(matches!(
            check_claimed_size(1, 9, &options),
            Err(Problem::TooSmall {
                width: 1,
                height: 9
            })
        ));
    }

    #[test]
    fn degrees_become_metres_at_the_centre_latitude() {
        let (east_west, north_south) = degrees_to_metres(1.0, 1.0, 60.0).unwrap();
        assert!((east_west - METRES_PER_DEGREE_LONGITUDE / 2.0).abs() < 1e-6);
        assert_eq!(north_south, METRES_PER_DEGREE_LATITUDE);
        assert_eq!(degrees_to_metres(1.0, 1.0, 91.0), None);
        assert_eq!(degrees_to_metres(1.0, 1.0, f64::NAN), None);
        assert!(looks_geographic(-105.8, 39.8, 0.000833, 0.000833, 758, 758));
        assert!(!looks_geographic(
            664_737.0,
            4_895_782.0,
            90.0,
            90.0,
            237,
            188
        ));
        assert!(!looks_geographic(0.0, 0.0, 0.5, 0.5, 100, 100));
    }
}
