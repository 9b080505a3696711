//! GeoTIFF elevation rasters through the `tiff` crate: single-band uint8/16/32, int8/16/32
//! and float32/64, stripped or tiled, with every compression the crate decodes (none, LZW,
//! Deflate, PackBits, ZSTD, JPEG, CCITT; both predictors). WebP is left out: it only holds
//! 8-bit colour, never a single elevation band. uint8 is widened to `u16` and int8 to `i16`; int32,
//! uint32, 64-bit integers and float64 become `f32` (integers beyond ±2^24 and float64
//! precision are rounded). The GDAL nodata tag (42113) marks holes; ModelPixelScale,
//! ModelTiepoint / ModelTransformation and the GeoKey directory give the spacing. Files whose
//! strip or tile table does not fit the file (chunks past its end, chunks sharing bytes,
//! uncompressed chunks shorter than their samples), orientations other than top-left and
//! WhiteIsZero gray (which the crate inverts) are refused before any sample is decoded.

use super::{
    Format, LoadOptions, Loaded, Problem, SourceInfo, check_claimed_size, degrees_to_metres,
    field_from_f32, field_with_holes, finish, looks_geographic, reserve_samples,
};
use crate::heightfield::Samples;
use std::io::{Read, Seek};
use tiff::decoder::{ChunkType, Decoder, DecodingResult, Limits};
use tiff::tags::Tag;
use tiff::{ColorType, TiffError};

/// Tag values (strip and tile tables, GeoTIFF keys) may take this much memory: enough for a
/// million chunks, small enough that a lying count costs nothing.
const MAX_TAG_BYTES: usize = 64 << 20;

// GeoKey ids and codes of the GeoTIFF 1.1 specification.
const GT_MODEL_TYPE: u16 = 1024;
const GT_CITATION: u16 = 1026;
const GEOGRAPHIC_TYPE: u16 = 2048;
const GEOG_ANGULAR_UNITS: u16 = 2054;
const PROJECTED_CS_TYPE: u16 = 3072;
const PROJ_LINEAR_UNITS: u16 = 3076;
const MODEL_PROJECTED: u16 = 1;
const MODEL_GEOGRAPHIC: u16 = 2;
const USER_DEFINED: u16 = 32767;

/// What the header checks found: a single-band raster of `width × height` samples of
/// `sample_bytes` bytes whose layout and tags can be read as elevations.
pub(crate) struct Checked {
    pub width: u32,
    pub height: u32,
    pub sample_bytes: u64,
    tags: Tags,
}

impl Checked {
    /// The nodata value (GDAL's tag), if any.
    pub fn nodata(&self) -> Option<f64> {
        self.tags.nodata
    }

    /// What the file says about itself, for samples stored as `sample_type`.
    pub fn source_info(&self, sample_type: &'static str) -> SourceInfo {
        let mut source = SourceInfo::new(Format::GeoTiff, sample_type);
        source.nodata_value = self.tags.nodata;
        source.compression = self.tags.compression.clone();
        let georeference = self.tags.georeference(self.width, self.height);
        source.spacing_m = georeference.spacing_m;
        source.spacing_note = Some(georeference.note);
        source.crs = georeference.crs;
        source
    }

    /// The problem of a failed decode (naming the compression where it is unsupported).
    pub fn decode_problem(&self, error: TiffError) -> Problem {
        decode_problem(error, self.tags.compression.as_deref())
    }
}

/// The problem of a failed decode of samples stored with `compression`.
pub(crate) fn decode_problem(error: TiffError, compression: Option<&str>) -> Problem {
    match error {
        TiffError::UnsupportedError(detail) => unsupported(format!(
            "{detail} (compression {})",
            compression.unwrap_or("unknown")
        )),
        other => tiff_problem(other),
    }
}

/// Opens a GeoTIFF and checks everything but its samples: the size against
/// `options.max_samples`, a single band, the orientation, the photometric interpretation
/// and the strip or tile table against the file's length. The decoder reads tags under
/// small limits; set the image's before decoding samples.
pub(crate) fn open_checked<R: Read + Seek>(
    reader: R,
    file_length: u64,
    options: &LoadOptions,
) -> Result<(Decoder<R>, Checked), Problem> {
    let mut decoder = Decoder::new(reader).map_err(tiff_problem)?;
    let (width, height) = decoder.dimensions().map_err(tiff_problem)?;
    let (width, height) = check_claimed_size(u64::from(width), u64::from(height), options)?;
    let colour = decoder.colortype().map_err(tiff_problem)?;
    if colour.num_samples() != 1 {
        return Err(unsupported(format!(
            "{} samples per pixel ({colour:?}); only single-band rasters hold elevations",
            colour.num_samples()
        )));
    }
    let sample_bytes = match colour {
        ColorType::Gray(bits @ (8 | 16 | 32 | 64)) => u64::from(bits / 8),
        _ => return Err(unsupported(format!("pixel type {colour:?}"))),
    };
    // Tags are read under small limits: the tiff crate sizes a tag's value vector by the
    // decoding buffer limit, so under the image's limits a lying tag count could reserve
    // terabytes (and abort) before a single value is read.
    let mut decoder = decoder.with_limits(tag_limits());
    let tags = read_tags(&mut decoder);
    // The tiff crate ignores Orientation: rows stored bottom-up or transposed would load
    // mirrored or rotated without a word.
    if let Some(orientation) = tags.orientation.filter(|&o| o != 1) {
        return Err(unsupported(format!(
            "orientation {orientation} (only 1, rows top-down and columns left to right, is read)"
        )));
    }
    // For WhiteIsZero gray the tiff crate returns inverted samples (65535 - v, 1 - v):
    // elevations would come out upside down.
    if tags.photometric == Some(0) {
        return Err(unsupported(
            "photometric interpretation WhiteIsZero (the decoder would invert the heights)"
                .to_owned(),
        ));
    }
    check_chunk_table(&mut decoder, file_length, width, height, sample_bytes)?;
    let checked = Checked {
        width,
        height,
        sample_bytes,
        tags,
    };
    Ok((decoder, checked))
}

/// The limits tags are read under.
fn tag_limits() -> Limits {
    let mut limits = Limits::default();
    limits.decoding_buffer_size = MAX_TAG_BYTES;
    limits.ifd_value_size = MAX_TAG_BYTES;
    limits
}

/// Limits for decoding up to `bytes` bytes of samples at once.
pub(crate) fn sample_limits(bytes: usize) -> Limits {
    let mut limits = Limits::default();
    limits.decoding_buffer_size = bytes;
    limits.intermediate_buffer_size = bytes;
    limits.ifd_value_size = MAX_TAG_BYTES;
    limits
}

pub(super) fn decode<R: Read + Seek>(
    reader: R,
    file_length: u64,
    options: &LoadOptions,
) -> Result<Loaded, Problem> {
    let (decoder, checked) = open_checked(reader, file_length, options)?;
    let Checked {
        width,
        height,
        sample_bytes,
        ..
    } = checked;
    let buffer_bytes = usize::try_from(options.max_samples.saturating_mul(8)).unwrap_or(usize::MAX);
    let mut decoder = decoder.with_limits(sample_limits(buffer_bytes));
    // The tiff crate allocates its result with `vec!`, which aborts the process when memory
    // is refused (a lying header under a raised --max-samples): ask the allocator first.
    let result_bytes = (u64::from(width) * u64::from(height)).saturating_mul(sample_bytes);
    drop(reserve_samples::<u8>(
        usize::try_from(result_bytes).unwrap_or(usize::MAX),
        width,
        height,
    )?);
    let data = decoder
        .read_image()
        .map_err(|error| checked.decode_problem(error))?;
    let count = width as usize * height as usize;
    if data_len(&data) < count {
        return Err(Problem::UnexpectedEnd {
            format: Format::GeoTiff,
        });
    }
    let nodata = checked.nodata();
    let (sample_type, field) = match data {
        DecodingResult::U8(v) => (
            "u8",
            integer_field(width, height, widen::<u8, u16>(&v[..count]), nodata)?,
        ),
        DecodingResult::U16(mut v) => {
            v.truncate(count);
            ("u16", integer_field(width, height, v, nodata)?)
        }
        DecodingResult::I8(v) => (
            "i8",
            integer_field(width, height, widen::<i8, i16>(&v[..count]), nodata)?,
        ),
        DecodingResult::I16(mut v) => {
            v.truncate(count);
            ("i16", integer_field(width, height, v, nodata)?)
        }
        DecodingResult::U32(v) => ("u32", float_field(width, height, &v[..count], nodata)?),
        DecodingResult::I32(v) => ("i32", float_field(width, height, &v[..count], nodata)?),
        DecodingResult::U64(v) => ("u64", float_field(width, height, &v[..count], nodata)?),
        DecodingResult::I64(v) => ("i64", float_field(width, height, &v[..count], nodata)?),
        DecodingResult::F64(v) => ("f64", float_field(width, height, &v[..count], nodata)?),
        DecodingResult::F32(mut v) => {
            v.truncate(count);
            let nodata = nodata.map(|n| n as f32);
            ("f32", field_from_f32(width, height, v, nodata)?)
        }
        DecodingResult::F16(_) => return Err(unsupported("16-bit float samples".to_owned())),
    };

    finish(field, checked.source_info(sample_type))
}

/// Checks the strip or tile table against the file before any sample buffer exists: every
/// chunk lies inside the file, no two chunks share bytes (shared chunks let a tiny file
/// decode to gigabytes) and an uncompressed chunk holds all its samples (the tiff
/// crate reads past a short byte count).
fn check_chunk_table<R: Read + Seek>(
    decoder: &mut Decoder<R>,
    file_length: u64,
    width: u32,
    height: u32,
    sample_bytes: u64,
) -> Result<(), Problem> {
    let tiled = decoder.get_chunk_type() == ChunkType::Tile;
    let (kind, offsets_tag, counts_tag) = if tiled {
        ("tile", Tag::TileOffsets, Tag::TileByteCounts)
    } else {
        ("strip", Tag::StripOffsets, Tag::StripByteCounts)
    };
    let mut unsigned = |tag: Tag| -> Result<Option<Vec<u64>>, Problem> {
        decoder
            .find_tag(tag)
            .map_err(tiff_problem)?
            .map(|value| value.into_u64_vec().map_err(tiff_problem))
            .transpose()
    };
    let (Some(offsets), Some(counts)) = (unsigned(offsets_tag)?, unsigned(counts_tag)?) else {
        // A missing table is reported by the decoder itself.
        return Ok(());
    };
    let first = |values: Option<Vec<u64>>| values.and_then(|v| v.first().copied());
    let compression = first(unsigned(Tag::Compression)?).unwrap_or(1);
    let (width, height) = (u64::from(width), u64::from(height));
    // Tiles always hold a full tile; strips hold `rows_per_strip` rows, the last one fewer.
    let tile_samples = if tiled {
        let tile_width = first(unsigned(Tag::TileWidth)?).unwrap_or(0);
        let tile_length = first(unsigned(Tag::TileLength)?).unwrap_or(0);
        Some(tile_width.saturating_mul(tile_length))
    } else {
        None
    };
    let rows_per_strip = first(unsigned(Tag::RowsPerStrip)?)
        .unwrap_or(height)
        .clamp(1, height);
    let needed_bytes = |index: u64| {
        let samples = tile_samples.unwrap_or_else(|| {
            let rows = height
                .saturating_sub(index.saturating_mul(rows_per_strip))
                .min(rows_per_strip);
            rows * width
        });
        samples.saturating_mul(sample_bytes)
    };
    let mut ranges = Vec::with_capacity(offsets.len());
    for (index, (&offset, &count)) in offsets.iter().zip(&counts).enumerate() {
        let end = offset.saturating_add(count);
        if end > file_length {
            return Err(Problem::Truncated {
                expected: end,
                actual: file_length,
            });
        }
        let needed = needed_bytes(index as u64);
        if compression == 1 && count < needed {
            return Err(Problem::Corrupt {
                format: Format::GeoTiff,
                detail: format!(
                    "uncompressed {kind} {index} holds {count} bytes, its samples need {needed}"
                ),
            });
        }
        if count > 0 {
            ranges.push((offset, end, index));
        }
    }
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let ((_, end, first), (start, _, second)) = (pair[0], pair[1]);
        if start < end {
            return Err(Problem::Corrupt {
                format: Format::GeoTiff,
                detail: format!("{kind}s {first} and {second} share bytes of the file"),
            });
        }
    }
    Ok(())
}

fn unsupported(detail: String) -> Problem {
    Problem::Unsupported {
        format: Format::GeoTiff,
        detail,
    }
}

fn data_len(data: &DecodingResult) -> usize {
    match data {
        DecodingResult::U8(v) => v.len(),
        DecodingResult::U16(v) => v.len(),
        DecodingResult::U32(v) => v.len(),
        DecodingResult::U64(v) => v.len(),
        DecodingResult::F16(v) => v.len(),
        DecodingResult::F32(v) => v.len(),
        DecodingResult::F64(v) => v.len(),
        DecodingResult::I8(v) => v.len(),
        DecodingResult::I16(v) => v.len(),
        DecodingResult::I32(v) => v.len(),
        DecodingResult::I64(v) => v.len(),
    }
}

fn widen<T: Copy, U: From<T>>(values: &[T]) -> Vec<U> {
    values.iter().map(|&v| U::from(v)).collect()
}

/// A sample type kept as integers (`u16` or `i16`).
trait IntegerSample: Copy + Into<f64> {
    fn samples(values: Vec<Self>) -> Samples;
}

impl IntegerSample for u16 {
    fn samples(values: Vec<Self>) -> Samples {
        Samples::U16(values)
    }
}

impl IntegerSample for i16 {
    fn samples(values: Vec<Self>) -> Samples {
        Samples::I16(values)
    }
}

fn integer_field<T: IntegerSample>(
    width: u32,
    height: u32,
    values: Vec<T>,
    nodata: Option<f64>,
) -> Result<crate::Heightfield, Problem> {
    let holes = nodata
        .filter(|n| values.iter().any(|&v| v.into() == *n))
        .map(|n| values.iter().map(|&v| v.into() == n).collect());
    field_with_holes(width, height, T::samples(values), holes)
}

/// A sample type converted to `f32`.
trait WideSample: Copy {
    fn to_f64(self) -> f64;
}

macro_rules! wide_sample {
    ($($t:ty),*) => {$(
        impl WideSample for $t {
            #[allow(clippy::cast_lossless, clippy::cast_precision_loss)]
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
wide_sample!(u32, i32, u64, i64, f64);

/// Converts to `f32`; nodata is compared in the source type's precision (as f64) so a value
/// like int32 −2147483647 is not confused with its rounded neighbours. A finite float64
/// beyond the `f32` range is an error that names it, not an infinity.
fn float_field<T: WideSample>(
    width: u32,
    height: u32,
    values: &[T],
    nodata: Option<f64>,
) -> Result<crate::Heightfield, Problem> {
    let mut converted = Vec::with_capacity(values.len());
    for (i, &v) in values.iter().enumerate() {
        let v = v.to_f64();
        let narrow = v as f32;
        if nodata.is_some_and(|n| v == n) {
            converted.push(f32::NAN);
        } else if v.is_finite() && !narrow.is_finite() {
            return Err(Problem::OutOfRange {
                col: (i % width as usize) as u32,
                row: (i / width as usize) as u32,
                value: v,
            });
        } else {
            converted.push(narrow);
        }
    }
    field_from_f32(width, height, converted, None)
}

/// The tags a heightfield needs, read leniently: a malformed optional tag is ignored (the
/// samples are still good), a malformed required one fails later in `read_image`.
#[derive(Debug, Default)]
struct Tags {
    compression: Option<String>,
    orientation: Option<u16>,
    photometric: Option<u16>,
    nodata: Option<f64>,
    pixel_scale: Option<Vec<f64>>,
    tiepoint: Option<Vec<f64>>,
    transformation: Option<Vec<f64>>,
    geokeys: Option<Vec<u16>>,
    ascii_params: Option<String>,
}

fn read_tags<R: Read + Seek>(decoder: &mut Decoder<R>) -> Tags {
    let mut find = |tag: Tag| decoder.find_tag(tag).ok().flatten();
    Tags {
        orientation: find(Tag::Orientation).and_then(|v| v.into_u16().ok()),
        photometric: find(Tag::PhotometricInterpretation).and_then(|v| v.into_u16().ok()),
        compression: find(Tag::Compression)
            .and_then(|v| v.into_u16().ok())
            .map(compression_name),
        nodata: find(Tag::GdalNodata)
            .and_then(|v| v.into_string().ok())
            .and_then(|text| {
                text.trim_matches(|c: char| c == '\0' || c.is_whitespace())
                    .parse()
                    .ok()
            }),
        pixel_scale: find(Tag::ModelPixelScaleTag).and_then(|v| v.into_f64_vec().ok()),
        tiepoint: find(Tag::ModelTiepointTag).and_then(|v| v.into_f64_vec().ok()),
        transformation: find(Tag::ModelTransformationTag).and_then(|v| v.into_f64_vec().ok()),
        geokeys: find(Tag::GeoKeyDirectoryTag).and_then(|v| v.into_u16_vec().ok()),
        ascii_params: find(Tag::GeoAsciiParamsTag).and_then(|v| v.into_string().ok()),
    }
}

fn compression_name(code: u16) -> String {
    match code {
        1 => "none".to_owned(),
        2 => "ccitt-rle".to_owned(),
        3 => "ccitt-fax3".to_owned(),
        4 => "ccitt-fax4".to_owned(),
        5 => "lzw".to_owned(),
        6 => "old-jpeg".to_owned(),
        7 => "jpeg".to_owned(),
        8 | 32946 => "deflate".to_owned(),
        32773 => "packbits".to_owned(),
        34887 => "lerc".to_owned(),
        34925 => "lzma".to_owned(),
        50000 => "zstd".to_owned(),
        50001 => "webp".to_owned(),
        other => format!("code {other}"),
    }
}

/// Spacing and coordinate system as far as the tags tell them.
#[derive(Debug)]
struct Georeference {
    spacing_m: Option<(f64, f64)>,
    note: String,
    crs: Option<String>,
}

impl Tags {
    fn geokey(&self, id: u16) -> Option<GeoKeyValue<'_>> {
        let keys = self.geokeys.as_deref()?;
        let count = usize::from(*keys.get(3)?);
        keys.get(4..)?
            .chunks_exact(4)
            .take(count)
            .find(|entry| entry[0] == id)
            .and_then(|entry| match entry[1] {
                0 => Some(GeoKeyValue::Short(entry[3])),
                location if location == Tag::GeoAsciiParamsTag.to_u16() => {
                    let text = self.ascii_params.as_deref()?;
                    let start = usize::from(entry[3]);
                    let end = start.checked_add(usize::from(entry[2]))?;
                    let text = text.get(start..end.min(text.len()))?;
                    Some(GeoKeyValue::Text(text.trim_end_matches(['|', '\0'])))
                }
                _ => None,
            })
    }

    fn geokey_short(&self, id: u16) -> Option<u16> {
        match self.geokey(id)? {
            GeoKeyValue::Short(value) => Some(value),
            GeoKeyValue::Text(_) => None,
        }
    }

    /// Pixel size (x, y) in CRS units and the CRS coordinates of the raster centre.
    fn pixel_geometry(&self, width: u32, height: u32) -> Option<((f64, f64), (f64, f64))> {
        let (w, h) = (f64::from(width), f64::from(height));
        if let Some(m) = self.transformation.as_deref().filter(|m| m.len() >= 8) {
            let scale = (m[0].hypot(m[4]), m[1].hypot(m[5]));
            let centre = (
                m[0] * w / 2.0 + m[1] * h / 2.0 + m[3],
                m[4] * w / 2.0 + m[5] * h / 2.0 + m[7],
            );
            return Some((scale, centre));
        }
        let scale = self.pixel_scale.as_deref().filter(|s| s.len() >= 2)?;
        let (sx, sy) = (scale[0].abs(), scale[1].abs());
        let centre = match self.tiepoint.as_deref().filter(|t| t.len() >= 6) {
            Some(t) => (t[3] + (w / 2.0 - t[0]) * sx, t[4] - (h / 2.0 - t[1]) * sy),
            None => (f64::NAN, f64::NAN),
        };
        Some(((sx, sy), centre))
    }

    fn georeference(&self, width: u32, height: u32) -> Georeference {
        let model = self.geokey_short(GT_MODEL_TYPE);
        let crs = self.crs_description(model);
        let Some(((sx, sy), (cx, cy))) = self.pixel_geometry(width, height) else {
            return Georeference {
                spacing_m: None,
                note: "no ModelPixelScale or ModelTransformation tag; cell size left at 1"
                    .to_owned(),
                crs,
            };
        };
        let geographic = |note: String, degrees_per_unit: f64| {
            let (dx, dy) = (sx * degrees_per_unit, sy * degrees_per_unit);
            let latitude = cy * degrees_per_unit;
            match degrees_to_metres(dx, dy, latitude) {
                Some(spacing) => Georeference {
                    spacing_m: Some(spacing),
                    note: format!(
                        "{note}: {dx:.6e} x {dy:.6e} degrees at centre latitude {latitude:.3}"
                    ),
                    crs: crs.clone(),
                },
                None => Georeference {
                    spacing_m: None,
                    note: format!(
                        "{note}, but the centre latitude {latitude} is not usable; cell size left at 1"
                    ),
                    crs: crs.clone(),
                },
            }
        };
        let projected = |note: String, metres_per_unit: f64| Georeference {
            spacing_m: Some((sx * metres_per_unit, sy * metres_per_unit)),
            note,
            crs: crs.clone(),
        };
        match model {
            Some(MODEL_GEOGRAPHIC) => match self.geokey_short(GEOG_ANGULAR_UNITS) {
                None | Some(9102) => geographic("geographic (GeoKey)".to_owned(), 1.0),
                Some(9101) => geographic(
                    "geographic in radians (GeoKey)".to_owned(),
                    180.0 / std::f64::consts::PI,
                ),
                Some(code) => Georeference {
                    spacing_m: None,
                    note: format!(
                        "geographic with angular unit code {code}, which is not supported; cell size left at 1"
                    ),
                    crs,
                },
            },
            Some(MODEL_PROJECTED) => {
                let unit = self.geokey_short(PROJ_LINEAR_UNITS);
                match unit.map_or(Some(("metres", 1.0)), linear_unit) {
                    Some((name, metres)) => {
                        projected(format!("projected (GeoKey), pixel scale in {name}"), metres)
                    }
                    None => Georeference {
                        spacing_m: None,
                        note: format!(
                            "projected with linear unit code {}, which is not supported; cell size left at 1",
                            unit.unwrap_or(0)
                        ),
                        crs,
                    },
                }
            }
            Some(other) => Georeference {
                spacing_m: None,
                note: format!(
                    "model type {other} is neither projected nor geographic; cell size left at 1"
                ),
                crs,
            },
            None if looks_geographic(cx, cy, sx, sy, u64::from(width), u64::from(height)) => {
                geographic(
                    "no model type GeoKey; coordinates look like degrees".to_owned(),
                    1.0,
                )
            }
            None => projected(
                "no model type GeoKey; pixel scale assumed in metres".to_owned(),
                1.0,
            ),
        }
    }

    fn crs_description(&self, model: Option<u16>) -> Option<String> {
        let (kind, code_key) = match model {
            Some(MODEL_PROJECTED) => ("projected", PROJECTED_CS_TYPE),
            Some(MODEL_GEOGRAPHIC) => ("geographic", GEOGRAPHIC_TYPE),
            _ => ("unknown model", 0),
        };
        let code = self
            .geokey_short(code_key)
            .filter(|&c| c != USER_DEFINED && c != 0);
        let citation = match self.geokey(GT_CITATION) {
            Some(GeoKeyValue::Text(text)) if !text.is_empty() => Some(text),
            _ => None,
        };
        if model.is_none() && citation.is_none() {
            return None;
        }
        let mut text = kind.to_owned();
        if let Some(code) = code {
            text.push_str(&format!(", EPSG:{code}"));
        }
        if let Some(citation) = citation {
            text.push_str(&format!(" ({citation})"));
        }
        Some(text)
    }
}

#[derive(Debug)]
enum GeoKeyValue<'a> {
    Short(u16),
    Text(&'a str),
}

/// Name and size in metres of an EPSG linear unit.
fn linear_unit(code: u16) -> Option<(&'static str, f64)> {
    match code {
        9001 => Some(("metres", 1.0)),
        9002 => Some(("feet", 0.3048)),
        9003 => Some(("US survey feet", 1200.0 / 3937.0)),
        9036 => Some(("kilometres", 1000.0)),
        _ => None,
    }
}

fn tiff_problem(error: TiffError) -> Problem {
    match error {
        TiffError::IoError(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
            Problem::UnexpectedEnd {
                format: Format::GeoTiff,
            }
        }
        TiffError::IoError(error) => Problem::Io(error),
        TiffError::UnsupportedError(detail) => unsupported(detail.to_string()),
        TiffError::LimitsExceeded => Problem::Corrupt {
            format: Format::GeoTiff,
            detail: "a tag or chunk exceeds the decoder's memory limits".to_owned(),
        },
        other => Problem::Corrupt {
            format: Format::GeoTiff,
            detail: other.to_string(),
        },
    }
}
