//! PNG height maps: 8/16-bit gray (8-bit widened to `u16`, raw = the PNG integer), gray stored
//! as RGB(A) with R = G = B, and colour packings chosen by [`RgbEncoding`]. An alpha of 0 (an
//! alpha channel or a `tRNS` colour) marks nodata. Palette and sub-byte images are expanded to
//! 8 bits first (a 4-bit gray 1 reads as 17: the expansion scales to the 8-bit range).
//!
//! [`PngRows`] decodes one row at a time: the whole-file loader fills a heightfield with it,
//! and the import of a PNG larger than memory (`tiles::PngFileSource`) spools it to disk.

use super::{
    Format, LoadOptions, Loaded, Problem, RgbEncoding, SourceInfo, check_claimed_size,
    field_with_holes, finish, reserve_samples,
};
use crate::heightfield::Samples;
use ::png::{BitDepth, ColorType, Decoder, DecodingError, Limits, Reader, Transformations};
use std::io::{BufRead, Seek};

/// Memory the decoder may use beyond its output (text chunks, ICC profiles, row buffers).
const DECODER_MEMORY: usize = 64 << 20;

/// A decoder of `reader` within [`DECODER_MEMORY`], its header read (nothing decoded).
fn header_read<R: BufRead + Seek>(reader: R) -> Result<(Decoder<R>, (u64, u64)), Problem> {
    let mut decoder = Decoder::new_with_limits(
        reader,
        Limits {
            bytes: DECODER_MEMORY,
        },
    );
    let info = decoder.read_header_info().map_err(png_problem)?;
    let size = (u64::from(info.width), u64::from(info.height));
    Ok((decoder, size))
}

/// The size a PNG claims in its header, nothing else checked or decoded.
pub(crate) fn claimed_size<R: BufRead + Seek>(reader: R) -> Result<(u64, u64), Problem> {
    Ok(header_read(reader)?.1)
}

pub(super) fn decode<R: BufRead + Seek>(
    reader: R,
    options: &LoadOptions,
) -> Result<Loaded, Problem> {
    let mut rows = PngRows::open(reader, options)?;
    let (width, height) = rows.size();
    let count = width as usize * height as usize;
    let mut output = match rows.packing {
        Packing::Gray => PngSamples::Gray(reserve_samples(count, width, height)?),
        Packing::Colour(_) => PngSamples::Colour(reserve_samples(count, width, height)?),
    };
    let mut holes: Option<Vec<bool>> = None;
    let mut hole = |col: u32, row: u32| {
        holes.get_or_insert_with(|| vec![false; count])
            [row as usize * width as usize + col as usize] = true;
    };

    if rows.interlaced() {
        let size = rows.reader.output_buffer_size().ok_or(Problem::TooLarge {
            width: u64::from(width),
            height: u64::from(height),
            limit: options.max_samples,
        })?;
        // Ask first (a refusal is an error, not an abort), then take zeroed pages that cost
        // no memory until the decoder writes them.
        drop(reserve_samples::<u8>(size, width, height)?);
        let mut buffer = vec![0u8; size];
        let frame = rows.reader.next_frame(&mut buffer).map_err(png_problem)?;
        for (row, line) in buffer
            .chunks_exact(frame.line_size)
            .take(height as usize)
            .enumerate()
        {
            convert_row(
                line,
                row as u32,
                &rows.layout,
                rows.packing,
                &mut output,
                &mut hole,
            )?;
        }
    } else {
        for row in 0..height {
            rows.read_row(row, &mut output, &mut hole)?;
        }
    }
    let source = rows.finish()?;
    let samples = match output {
        PngSamples::Gray(values) => Samples::U16(values),
        PngSamples::Colour(values) => Samples::F32(values),
    };
    let field = field_with_holes(width, height, samples, holes)?;
    finish(field, source)
}

/// A PNG opened for decoding row by row: its header checked against
/// [`LoadOptions::max_samples`], its packing chosen from the colour type and
/// [`LoadOptions::encoding`].
pub(crate) struct PngRows<R: BufRead + Seek> {
    reader: Reader<R>,
    layout: Layout,
    packing: Packing,
    height: u32,
}

impl<R: BufRead + Seek> PngRows<R> {
    pub(crate) fn open(reader: R, options: &LoadOptions) -> Result<Self, Problem> {
        // The header alone is parsed here: the claimed size is checked before any image
        // buffer.
        let (mut decoder, (width, height)) = header_read(reader)?;
        let (width, height) = check_claimed_size(width, height, options)?;
        let row_bytes = (width as usize).saturating_mul(8);
        decoder.set_limits(Limits {
            bytes: DECODER_MEMORY.saturating_add(row_bytes.saturating_mul(4)),
        });
        decoder.set_transformations(Transformations::EXPAND);
        let reader = decoder.read_info().map_err(png_problem)?;
        let (color, depth) = reader.output_color_type();
        let channels = match color {
            ColorType::Grayscale => 1,
            ColorType::GrayscaleAlpha => 2,
            ColorType::Rgb => 3,
            ColorType::Rgba => 4,
            ColorType::Indexed => {
                return Err(Problem::Unsupported {
                    format: Format::Png,
                    detail: "palette image that could not be expanded".to_owned(),
                });
            }
        };
        let wide = match depth {
            BitDepth::Eight => false,
            BitDepth::Sixteen => true,
            other => {
                return Err(Problem::Unsupported {
                    format: Format::Png,
                    detail: format!("bit depth {other:?} after expansion"),
                });
            }
        };
        let packing = match (options.encoding, channels) {
            (None | Some(RgbEncoding::Gray), _) => Packing::Gray,
            (Some(encoding), 3 | 4) if !wide => Packing::Colour(encoding),
            (Some(encoding), _) => {
                return Err(Problem::EncodingMismatch {
                    encoding,
                    found: format!("{}-bit {}", if wide { 16 } else { 8 }, color_name(color)),
                });
            }
        };
        Ok(PngRows {
            reader,
            layout: Layout {
                width: width as usize,
                channels,
                wide,
            },
            packing,
            height,
        })
    }

    pub(crate) fn size(&self) -> (u32, u32) {
        (self.layout.width as u32, self.height)
    }

    /// Adam7 interlacing spreads every row over seven passes: such a file decodes whole only.
    pub(crate) fn interlaced(&self) -> bool {
        self.reader.info().interlaced
    }

    /// Whether the samples are `u16` gray (else `f32` from a colour packing).
    pub(crate) fn gray(&self) -> bool {
        matches!(self.packing, Packing::Gray)
    }

    /// Decodes the next row of a file that is not interlaced (`row` counts from 0, for the
    /// errors and `hole`) onto the end of `output`, calling `hole(col, row)` for each
    /// sample of alpha 0.
    pub(crate) fn read_row(
        &mut self,
        row: u32,
        output: &mut PngSamples,
        hole: &mut dyn FnMut(u32, u32),
    ) -> Result<(), Problem> {
        let line = self
            .reader
            .next_row()
            .map_err(png_problem)?
            .ok_or(Problem::UnexpectedEnd {
                format: Format::Png,
            })?;
        convert_row(line.data(), row, &self.layout, self.packing, output, hole)
    }

    /// Reads on to IEND (a file cut after its last row is an error, like any truncation)
    /// and tells what the file held.
    pub(crate) fn finish(mut self) -> Result<SourceInfo, Problem> {
        self.reader.finish().map_err(png_problem)?;
        let sample_type = match (self.packing, self.layout.wide) {
            (Packing::Colour(_), _) => "rgb8",
            (Packing::Gray, false) => "u8",
            (Packing::Gray, true) => "u16",
        };
        let mut source = SourceInfo::new(Format::Png, sample_type);
        source.compression = Some("deflate".to_owned());
        source.spacing_note = Some("PNG carries no spacing; cell size left at 1".to_owned());
        if let Packing::Colour(encoding) = self.packing {
            source.encoding = Some(encoding);
        } else if self.layout.channels >= 3 {
            source.encoding = Some(RgbEncoding::Gray);
        }
        Ok(source)
    }
}

/// Decoded samples in the loader's types: gray as `u16`, colour packings as `f32`.
#[derive(Debug)]
pub(crate) enum PngSamples {
    Gray(Vec<u16>),
    Colour(Vec<f32>),
}

impl PngSamples {
    pub(crate) fn clear(&mut self) {
        match self {
            PngSamples::Gray(values) => values.clear(),
            PngSamples::Colour(values) => values.clear(),
        }
    }

    /// Appends the samples' little-endian bytes to `out`.
    pub(crate) fn extend_le_bytes(&self, out: &mut Vec<u8>) {
        match self {
            PngSamples::Gray(values) => values
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
            PngSamples::Colour(values) => values
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Packing {
    Gray,
    Colour(RgbEncoding),
}

#[derive(Debug)]
struct Layout {
    width: usize,
    channels: usize,
    wide: bool,
}

fn convert_row(
    line: &[u8],
    row: u32,
    layout: &Layout,
    packing: Packing,
    output: &mut PngSamples,
    hole: &mut dyn FnMut(u32, u32),
) -> Result<(), Problem> {
    let bytes = if layout.wide { 2 } else { 1 };
    let stride = layout.channels * bytes;
    let line = line
        .get(..layout.width * stride)
        .ok_or(Problem::UnexpectedEnd {
            format: Format::Png,
        })?;
    let has_alpha = layout.channels.is_multiple_of(2);
    let sample = |pixel: &[u8], channel: usize| -> u16 {
        if layout.wide {
            u16::from_be_bytes([pixel[2 * channel], pixel[2 * channel + 1]])
        } else {
            u16::from(pixel[channel])
        }
    };
    for (col, pixel) in line.chunks_exact(stride).enumerate() {
        if has_alpha && sample(pixel, layout.channels - 1) == 0 {
            hole(col as u32, row);
        }
        match (&mut *output, packing) {
            (PngSamples::Gray(values), _) => {
                let gray = sample(pixel, 0);
                if layout.channels >= 3 && (sample(pixel, 1) != gray || sample(pixel, 2) != gray) {
                    return Err(Problem::RgbNeedsEncoding {
                        col: col as u32,
                        row,
                        wide: layout.wide,
                    });
                }
                values.push(gray);
            }
            (PngSamples::Colour(values), encoding) => {
                let packed =
                    (u32::from(pixel[0]) << 16) | (u32::from(pixel[1]) << 8) | u32::from(pixel[2]);
                values.push(match encoding {
                    Packing::Colour(RgbEncoding::TerrainRgb) => {
                        (-10_000.0 + f64::from(packed) * 0.1) as f32
                    }
                    _ => packed as f32,
                });
            }
        }
    }
    Ok(())
}

fn color_name(color: ColorType) -> &'static str {
    match color {
        ColorType::Grayscale => "gray",
        ColorType::GrayscaleAlpha => "gray+alpha",
        ColorType::Rgb => "RGB",
        ColorType::Rgba => "RGBA",
        ColorType::Indexed => "palette",
    }
}

fn png_problem(error: DecodingError) -> Problem {
    match error {
        DecodingError::IoError(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
            Problem::UnexpectedEnd {
                format: Format::Png,
            }
        }
        DecodingError::IoError(error) => Problem::Io(error),
        DecodingError::LimitsExceeded => Problem::Unsupported {
            format: Format::Png,
            detail: "the image needs more memory than the decoder allows".to_owned(),
        },
        other => Problem::Corrupt {
            format: Format::Png,
            detail: other.to_string(),
        },
    }
}
