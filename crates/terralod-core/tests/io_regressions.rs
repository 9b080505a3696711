//! Named regression tests: inputs that once broke a loader, kept so they stay fixed.
//!
//! Fuzz-found crashes go here (see docs/FUZZING.md). The `load_bytes` target has run for
//! 2.4 million inputs without a crash so far; the first case below was found by the
//! truncation sweep of `io_bad_input.rs`, the others by an adversarial review of the CLI
//! (hand-built files, pipes and devices, raised limits, extreme mappings).

mod io_common;

use io_common::*;
use std::path::Path;
use terralod_core::heightfield::{Heightfield, HeightfieldError, Samples, WorldMapping};
use terralod_core::io::{Format, LoadOptions, Problem, decode, load};

/// The png crate returns a complete image as soon as the last row is decoded; a file cut
/// after that point (zlib checksum, chunk CRC and IEND missing) used to load as if whole.
/// The loader now reads on to IEND, so any truncation is an error.
#[test]
fn png_cut_after_its_last_row_is_an_error() {
    let png = png_bytes(
        5,
        4,
        png::ColorType::Grayscale,
        png::BitDepth::Eight,
        &[9; 20],
    );
    let idat_end = png.len() - 12; // IEND is the last 12 bytes
    for cut in [idat_end - 4, idat_end - 1, idat_end] {
        let problem = decode_default(&png[..cut], Format::Png).unwrap_err();
        assert!(
            matches!(
                problem,
                Problem::UnexpectedEnd {
                    format: Format::Png
                } | Problem::Corrupt { .. }
            ),
            "cut at {cut}: {problem:?}"
        );
    }
    assert!(decode_default(&png, Format::Png).is_ok());
}

/// Opening a FIFO blocks until a writer comes and a device never ends, so `load` used to
/// hang on a pipe (and read `/dev/zero` as an ASCII grid until memory ran out). Only
/// regular files are loaded now.
#[cfg(unix)]
#[test]
fn pipes_and_devices_are_refused_without_blocking() {
    let dir = scratch_dir("fifo");
    let fifo = dir.join("heights.png");
    if !make_fifo(&fifo, "pipes_and_devices_are_refused_without_blocking") {
        return;
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    let path = fifo.clone();
    std::thread::spawn(move || {
        let result = load(&path, &LoadOptions::default()).map_err(|e| e.problem);
        let _ = sender.send(format!("{result:?}"));
    });
    let outcome = receiver
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("loading a FIFO must not block");
    assert!(outcome.contains("NotAFile"), "{outcome}");

    let options = LoadOptions::default().with_format(Format::AsciiGrid);
    let problem = load(Path::new("/dev/null"), &options).unwrap_err().problem;
    assert!(matches!(problem, Problem::NotAFile), "{problem:?}");
}

/// A TIFF whose strips all point at the same bytes is a tiny file that decodes to any
/// size: 32768 shared strips of 32768 f64 made a 260 kB file take 8 GiB and minutes.
/// Chunks that share bytes are refused before anything is decoded.
#[test]
fn tiff_strips_sharing_bytes_are_refused() {
    let (width, rows) = (4u32, 3u32);
    let strip = f32_bytes(&[1.0, 2.0, 3.0, 4.0], false);
    let tags = |offset: u32| {
        vec![
            (tag::IMAGE_WIDTH, TagValue::Long(vec![width])),
            (tag::IMAGE_LENGTH, TagValue::Long(vec![rows])),
            (tag::BITS_PER_SAMPLE, TagValue::Short(vec![32])),
            (tag::COMPRESSION, TagValue::Short(vec![1])),
            (tag::PHOTOMETRIC, TagValue::Short(vec![1])),
            (tag::SAMPLES_PER_PIXEL, TagValue::Short(vec![1])),
            (tag::ROWS_PER_STRIP, TagValue::Long(vec![1])),
            (tag::SAMPLE_FORMAT, TagValue::Short(vec![3])),
            (tag::STRIP_OFFSETS, TagValue::Long(vec![offset; 3])),
            (tag::STRIP_BYTE_COUNTS, TagValue::Long(vec![16; 3])),
        ]
    };
    // The one strip goes after the directory, under unused tag numbers; a first pass
    // measures where it lands.
    let build = |offset| {
        tiff_by_hand(
            false,
            tags(offset),
            65000,
            65001,
            std::slice::from_ref(&strip),
        )
    };
    let data_start = (build(0).len() - strip.len()) as u32;
    let shared = build(data_start);
    let problem = decode_default(&shared, Format::GeoTiff).unwrap_err();
    assert!(
        problem.to_string().contains("share bytes"),
        "{problem:?}: {problem}"
    );
}

/// The tiff crate reads an uncompressed strip's samples whatever its byte count says, so
/// a count too short for the strip read the bytes after it (the directory, or nothing) as
/// samples. Such a strip is an error now.
#[test]
fn uncompressed_tiff_strip_shorter_than_its_samples_is_refused() {
    let data = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], false);
    let mut tiff = stripped_tiff(false, 3, 2, 32, 3, data, Vec::new());
    assert!(decode_default(&tiff, Format::GeoTiff).is_ok());
    // The single byte count (24) sits inline in its directory entry: make it 8.
    let entry = tiff
        .windows(8)
        .position(|w| w[..4] == [0x17, 0x01, 0x04, 0x00] && w[4..] == [1, 0, 0, 0])
        .expect("StripByteCounts entry");
    tiff[entry + 8..entry + 12].copy_from_slice(&8u32.to_le_bytes());
    let problem = decode_default(&tiff, Format::GeoTiff).unwrap_err();
    assert!(
        problem.to_string().contains("holds 8 bytes"),
        "{problem:?}: {problem}"
    );
}

/// float64 samples beyond the f32 range used to be reported as "inf", a value the file
/// does not hold; the error now names the real value.
#[test]
fn float64_beyond_f32_is_named_not_called_infinite() {
    let data: Vec<u8> = [1.0f64, 2.0, 1e300, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let tiff = stripped_tiff(false, 2, 2, 64, 3, data, Vec::new());
    let problem = decode_default(&tiff, Format::GeoTiff).unwrap_err();
    assert!(
        matches!(problem, Problem::OutOfRange { col: 0, row: 1, value } if value == 1e300),
        "{problem:?}"
    );
}

/// A file spacing that is finite in f64 but 0 or infinite as an f32 cell size (ASCII
/// `cellsize 1e-320`) made loading fail with an invalid mapping, even with `--cell-size`
/// given. It is dropped with a note now, like any unusable spacing.
#[test]
fn spacing_that_vanishes_in_f32_is_dropped_with_a_note() {
    for cell_size in ["1e-320", "3e38"] {
        let text = format!("ncols 3\nnrows 2\ncellsize {cell_size}\n1 2 3\n4 5 6\n");
        let loaded = decode_default(text.as_bytes(), Format::AsciiGrid).unwrap();
        assert_eq!(loaded.heightfield.mapping().cell_size, 1.0, "{cell_size}");
        assert_eq!(loaded.source.spacing_m, None);
        let note = loaded.source.spacing_note.unwrap_or_default();
        assert!(note.contains("not usable"), "{note}");
    }
}

/// A mapping whose heights or extent overflow f32 (`--height-scale 1e38` on raw values in
/// the thousands) used to be accepted, and `info` printed infinite or null world heights.
#[test]
fn world_mapping_that_overflows_f32_is_refused() {
    let field = Heightfield::new(3, 2, Samples::U16(vec![0, 1, 2, 3, 4, 60_000])).unwrap();
    let mapping = |cell_size, height_scale, height_offset| WorldMapping {
        cell_size,
        height_scale,
        height_offset,
    };
    for bad in [
        mapping(1.0, 1e34, 0.0),
        mapping(1.0, -1e34, 0.0),
        mapping(1.0, 1e33, 3.3e38),
        mapping(2e38, 1.0, 0.0),
    ] {
        let error = field.clone().with_mapping(bad).unwrap_err();
        assert!(
            matches!(error, HeightfieldError::WorldOverflow { .. }),
            "{bad:?}: {error:?}"
        );
    }
    let fine = field.with_mapping(mapping(1e37, 1e33, -1e38)).unwrap();
    let (lo, hi) = fine.world_range();
    assert!(lo.is_finite() && hi.is_finite());
}

/// With `--max-samples` raised to the maximum, a `--raw-size` of 2^31 x 2^31 f32 samples
/// overflowed the expected byte count (a panic in debug builds, a wrapped "0 bytes
/// expected" in release).
#[test]
fn raw_size_whose_byte_count_overflows_reads_as_truncated() {
    let options = LoadOptions::default()
        .with_max_samples(u64::MAX)
        .with_raw_size(1 << 31, 1 << 31);
    let problem = decode(&[0u8; 16], Format::RawF32, &options).unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::Truncated {
                expected: u64::MAX,
                actual: 16
            }
        ),
        "{problem:?}"
    );
}

/// With `--max-samples` raised to the maximum, a header claiming more samples than the
/// address space holds made the loaders' `Vec::with_capacity` (PNG) or the tiff crate's
/// `vec!` abort the process. The allocation is asked for first now, and a refusal is an
/// error.
#[test]
fn lying_headers_under_an_unlimited_sample_count_do_not_abort() {
    let unlimited = LoadOptions::default().with_max_samples(u64::MAX);
    let png = png_claiming(i32::MAX as u32, i32::MAX as u32);
    let problem = decode(&png, Format::Png, &unlimited).unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::OutOfMemory { .. } | Problem::Corrupt { .. }
        ),
        "{problem:?}"
    );
    // Deflate strips escape the strip-length check: 2^31 x 2^16 f32 samples is 512 TiB.
    let tiff = tiff_by_hand(
        false,
        vec![
            (tag::IMAGE_WIDTH, TagValue::Long(vec![1 << 31])),
            (tag::IMAGE_LENGTH, TagValue::Long(vec![1 << 16])),
            (tag::BITS_PER_SAMPLE, TagValue::Short(vec![32])),
            (tag::COMPRESSION, TagValue::Short(vec![8])),
            (tag::PHOTOMETRIC, TagValue::Short(vec![1])),
            (tag::SAMPLES_PER_PIXEL, TagValue::Short(vec![1])),
            (tag::ROWS_PER_STRIP, TagValue::Long(vec![1 << 16])),
            (tag::SAMPLE_FORMAT, TagValue::Short(vec![3])),
        ],
        tag::STRIP_OFFSETS,
        tag::STRIP_BYTE_COUNTS,
        &[vec![0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]],
    );
    let problem = decode(&tiff, Format::GeoTiff, &unlimited).unwrap_err();
    assert!(
        matches!(problem, Problem::OutOfMemory { .. }),
        "{problem:?}"
    );
}

/// The tiff crate ignores the Orientation tag, so a raster stored bottom-up (orientation
/// 4) loaded upside down without a word. Any orientation but the default is refused now.
#[test]
fn tiff_orientation_other_than_top_left_is_refused() {
    let data = f32_bytes(&[1.0, 2.0, 3.0, 4.0], false);
    let orientation = |value| vec![(274, TagValue::Short(vec![value]))];
    let normal = stripped_tiff(false, 2, 2, 32, 3, data.clone(), orientation(1));
    assert!(decode_default(&normal, Format::GeoTiff).is_ok());
    for value in [2, 4, 5, 8] {
        let flipped = stripped_tiff(false, 2, 2, 32, 3, data.clone(), orientation(value));
        let problem = decode_default(&flipped, Format::GeoTiff).unwrap_err();
        assert!(
            matches!(&problem, Problem::Unsupported { detail, .. } if detail.contains("orientation")),
            "{value}: {problem:?}"
        );
    }
}

/// The tiff crate sizes a tag's value vector from its count, checked only against the
/// decoding buffer limit, which grows with `--max-samples`. With the limit raised, a
/// GeoKey directory claiming 2^55 values asked for an exbibyte and aborted the process. Tags
/// are read under small limits now; a lying optional tag is ignored.
#[test]
fn lying_tag_count_under_an_unlimited_sample_count_does_not_abort() {
    use tiff::encoder::{TiffEncoder, colortype};
    use tiff::tags::Tag;
    let mut out = std::io::Cursor::new(Vec::new());
    let mut encoder = TiffEncoder::new_big(&mut out).unwrap();
    let mut image = encoder.new_image::<colortype::Gray16>(2, 2).unwrap();
    let keys: &[u16] = &[1, 1, 0, 1, 1024, 0, 1, 1];
    image
        .encoder()
        .write_tag(Tag::GeoKeyDirectoryTag, keys)
        .unwrap();
    image.write_data(&[1u16, 2, 3, 4][..]).unwrap();
    let mut bytes = out.into_inner();
    // BigTIFF entry: tag 34735, type SHORT, then an 8-byte count.
    let entry = bytes
        .windows(4)
        .position(|w| w == [0xAF, 0x87, 0x03, 0x00])
        .expect("GeoKeyDirectory entry");
    bytes[entry + 4..entry + 12].copy_from_slice(&(1u64 << 55).to_le_bytes());
    let unlimited = LoadOptions::default().with_max_samples(u64::MAX);
    let loaded = decode(&bytes, Format::GeoTiff, &unlimited).unwrap();
    assert_eq!(raw_values(&loaded), [1.0, 2.0, 3.0, 4.0]);
}

/// The tiff crate inverts WhiteIsZero gray samples (65535 - v for uint16, 1 - v for
/// float32), so such a DEM loaded with its heights upside down and no warning. It is
/// refused now; BlackIsZero (the GDAL default) reads as before.
#[test]
fn tiff_white_is_zero_is_refused_not_inverted() {
    let data = f32_bytes(&[10.0, 20.0, 30.0, 40.0], false);
    let with = |value| {
        let mut tiff = stripped_tiff(false, 2, 2, 32, 3, data.clone(), Vec::new());
        // stripped_tiff writes BlackIsZero (1); patch the inline value of its entry.
        let entry = tiff
            .windows(8)
            .position(|w| w == [0x06, 0x01, 0x03, 0x00, 1, 0, 0, 0])
            .expect("PhotometricInterpretation entry");
        tiff[entry + 8..entry + 10].copy_from_slice(&u16::to_le_bytes(value));
        tiff
    };
    let black_is_zero = decode_default(&with(1), Format::GeoTiff).unwrap();
    assert_eq!(raw_values(&black_is_zero), [10.0, 20.0, 30.0, 40.0]);
    let problem = decode_default(&with(0), Format::GeoTiff).unwrap_err();
    assert!(
        matches!(&problem, Problem::Unsupported { detail, .. } if detail.contains("WhiteIsZero")),
        "{problem:?}"
    );
}
