//! Headerless raw samples: `.r16` (u16) and `.r32`/`.f32` (f32), row-major, row 0 north.
//!
//! The size comes from [`LoadOptions::raw_size`], or is inferred as a square when the sample
//! count is a perfect square. The file length must match the size exactly: a short file is
//! truncated, a long one has trailing data or a wrong size.

use super::{
    ByteOrder, Format, LoadOptions, Loaded, Problem, SourceInfo, check_claimed_size,
    exact_square_root, field_from_f32, field_with_holes, finish,
};
use crate::heightfield::Samples;
use std::io::Read;

pub(super) fn decode<R: Read>(
    reader: R,
    length: u64,
    format: Format,
    options: &LoadOptions,
) -> Result<Loaded, Problem> {
    let sample_bytes: u8 = if format == Format::Raw16 { 2 } else { 4 };
    let (width, height) = match options.raw_size {
        Some((w, h)) => (u64::from(w), u64::from(h)),
        None => infer_square(length, sample_bytes)?,
    };
    let (width, height) = check_claimed_size(width, height, options)?;
    let count = u64::from(width) * u64::from(height);
    // With a raised --max-samples the byte count of a huge --raw-size can overflow; no
    // file is that long, so it reads as truncated.
    let expected = count.saturating_mul(u64::from(sample_bytes));
    if length < expected {
        return Err(Problem::Truncated {
            expected,
            actual: length,
        });
    }
    if length > expected {
        return Err(Problem::TrailingBytes {
            expected,
            actual: length,
        });
    }
    let count = count as usize;
    let order = options.byte_order;
    let field = if format == Format::Raw16 {
        let values = read_samples(reader, count, |b: [u8; 2]| match order {
            ByteOrder::Little => u16::from_le_bytes(b),
            ByteOrder::Big => u16::from_be_bytes(b),
        })?;
        field_with_holes(width, height, Samples::U16(values), None)?
    } else {
        let values = read_samples(reader, count, |b: [u8; 4]| match order {
            ByteOrder::Little => f32::from_le_bytes(b),
            ByteOrder::Big => f32::from_be_bytes(b),
        })?;
        field_from_f32(width, height, values, None)?
    };
    let mut source = SourceInfo::new(
        format,
        if format == Format::Raw16 {
            "u16"
        } else {
            "f32"
        },
    );
    source.spacing_note = Some("raw files carry no spacing; cell size left at 1".to_owned());
    finish(field, source)
}

/// Size of a square raw file, or an error asking for `--raw-size`.
fn infer_square(length: u64, sample_bytes: u8) -> Result<(u64, u64), Problem> {
    let unknown = Problem::RawSizeUnknown {
        bytes: length,
        sample_bytes,
    };
    if !length.is_multiple_of(u64::from(sample_bytes)) {
        return Err(unknown);
    }
    let side = exact_square_root(length / u64::from(sample_bytes)).ok_or(unknown)?;
    Ok((side, side))
}

/// Reads `count` fixed-size samples in blocks, so the only large allocation is the result
/// (whose size the caller has checked against the real file length and the limit).
pub(super) fn read_samples<R: Read, T, const N: usize>(
    mut reader: R,
    count: usize,
    convert: impl Fn([u8; N]) -> T,
) -> Result<Vec<T>, Problem> {
    const BLOCK_SAMPLES: usize = 1 << 14;
    let mut values = Vec::with_capacity(count);
    let mut block = vec![0u8; BLOCK_SAMPLES * N];
    let mut remaining = count;
    while remaining > 0 {
        let samples = remaining.min(BLOCK_SAMPLES);
        let bytes = &mut block[..samples * N];
        reader
            .read_exact(bytes)
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::UnexpectedEof => Problem::Truncated {
                    expected: (count * N) as u64,
                    actual: ((count - remaining) * N) as u64,
                },
                _ => Problem::Io(error),
            })?;
        values.extend(bytes.chunks_exact(N).map(|chunk| {
            let mut sample = [0u8; N];
            sample.copy_from_slice(chunk);
            convert(sample)
        }));
        remaining -= samples;
    }
    Ok(values)
}
