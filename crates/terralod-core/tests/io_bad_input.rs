//! Bad input never panics: truncated and corrupted files of every format, headers that lie
//! about their size, zero sizes, non-finite values, and files that are not files at all.
//! Every error names the file and the problem.

mod io_common;

use io_common::*;
use std::time::{Duration, Instant};
use terralod_core::io::{Format, LoadOptions, Problem, decode, load};

/// One small valid file of every format, with the options that read it.
fn valid_files() -> Vec<(Format, Vec<u8>, LoadOptions)> {
    let gray16: Vec<u16> = (0..20).map(|v| v * 1000).collect();
    let ascii = "ncols 4\nnrows 3\nxllcorner 0\nyllcorner 0\ncellsize 30\nNODATA_value -1\n\
                 1 2 3 4\n5 -1 7 8\n9 10 11.5 12\n";
    let floats: Vec<f32> = (0..12).map(|v| v as f32 * 1.5).collect();
    vec![
        (
            Format::Png,
            png_bytes(
                5,
                4,
                png::ColorType::Grayscale,
                png::BitDepth::Sixteen,
                &be_bytes(&gray16),
            ),
            LoadOptions::default(),
        ),
        (
            Format::Png,
            interlaced_gray8_png(5, 4, &[7; 20]),
            LoadOptions::default(),
        ),
        (
            Format::GeoTiff,
            stripped_tiff(
                false,
                4,
                3,
                32,
                3,
                f32_bytes(&floats, false),
                vec![(tag::GDAL_NODATA, TagValue::Ascii("-1".into()))],
            ),
            LoadOptions::default(),
        ),
        (
            Format::Raw16,
            gray16.iter().flat_map(|v| v.to_le_bytes()).collect(),
            LoadOptions::default().with_raw_size(5, 4),
        ),
        (
            Format::RawF32,
            f32_bytes(&floats, false),
            LoadOptions::default().with_raw_size(4, 3),
        ),
        (
            Format::Hgt,
            [5i16; 9].iter().flat_map(|v| v.to_be_bytes()).collect(),
            LoadOptions::default(),
        ),
        (
            Format::AsciiGrid,
            ascii.as_bytes().to_vec(),
            LoadOptions::default(),
        ),
    ]
}

#[test]
fn every_valid_sample_file_decodes() {
    for (format, bytes, options) in valid_files() {
        let loaded = decode(&bytes, format, &options).unwrap_or_else(|e| panic!("{format}: {e}"));
        assert_eq!(loaded.source.format, format);
    }
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    for (format, bytes, options) in valid_files() {
        // Text cut inside its last value still holds every value (a shorter number).
        let last_value_start = bytes
            .trim_ascii_end()
            .iter()
            .rposition(u8::is_ascii_whitespace)
            .map_or(0, |p| p + 1);
        for length in 0..bytes.len() {
            let result = decode(&bytes[..length], format, &options);
            // A PNG cut inside its final IEND chunk still holds the whole image; everything
            // shorter must fail.
            let tolerated_tail = if format == Format::Png { 12 } else { 0 };
            // An HGT file's size is its length: a shorter square is a valid smaller tile.
            let smaller_tile = format == Format::Hgt
                && length % 2 == 0
                && (length / 2).isqrt().pow(2) == length / 2;
            let shorter_last_value = format == Format::AsciiGrid && length > last_value_start;
            if length + tolerated_tail < bytes.len() && !smaller_tile && !shorter_last_value {
                assert!(
                    result.is_err(),
                    "{format} cut to {length} of {} bytes decoded",
                    bytes.len()
                );
            }
        }
        assert!(matches!(decode(&[], format, &options), Err(Problem::Empty)));
    }
}

#[test]
fn corrupted_bytes_never_panic() {
    // Every byte replaced by a few values that break headers in different ways.
    for (format, bytes, options) in valid_files() {
        for position in 0..bytes.len() {
            for replacement in [0x00, 0xFF, 0x7F, bytes[position] ^ 0x01] {
                let mut corrupt = bytes.clone();
                corrupt[position] = replacement;
                let _ = decode(&corrupt, format, &options);
            }
        }
    }
}

#[test]
fn every_format_rejects_the_others_files_without_panicking() {
    let files = valid_files();
    for (file_format, bytes, _) in &files {
        for format in Format::ALL {
            if format != *file_format {
                let _ = decode(bytes, format, &LoadOptions::default());
            }
        }
    }
}

/// A header claiming 10^6 × 10^6 samples must be refused from the header alone: were the
/// claim believed, the 10^12-sample buffer would abort the process instead of returning.
fn assert_refused_fast(format: Format, bytes: &[u8], options: &LoadOptions) {
    let start = Instant::now();
    let problem = decode(bytes, format, options).unwrap_err();
    assert!(
        matches!(problem, Problem::TooLarge { width: 1_000_000, height: 1_000_000, limit } if limit == options.max_samples),
        "{format}: {problem:?}"
    );
    let message = problem.to_string();
    assert!(
        message.contains("1000000 x 1000000") && message.contains(&options.max_samples.to_string()),
        "{message}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{format} took {:?}",
        start.elapsed()
    );
}

#[test]
fn headers_claiming_a_trillion_samples_are_refused_before_allocating() {
    let options = LoadOptions::default();
    assert_refused_fast(Format::Png, &png_claiming(1_000_000, 1_000_000), &options);
    assert_refused_fast(
        Format::GeoTiff,
        &stripped_tiff(false, 1_000_000, 1_000_000, 32, 3, vec![0; 16], vec![]),
        &options,
    );
    let ascii = "ncols 1000000\nnrows 1000000\ncellsize 1\n1 2 3\n";
    assert_refused_fast(Format::AsciiGrid, ascii.as_bytes(), &options);
    let raw = LoadOptions::default().with_raw_size(1_000_000, 1_000_000);
    assert_refused_fast(Format::Raw16, &[0; 16], &raw);
    assert_refused_fast(Format::RawF32, &[0; 16], &raw);
    // The limit is the caller's: a small one refuses a modest file.
    let small = LoadOptions::default().with_max_samples(15);
    let problem = decode(&[0; 32], Format::Raw16, &small).unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::TooLarge {
                width: 4,
                height: 4,
                limit: 15
            }
        ),
        "{problem:?}"
    );
    let problem = decode(&[0; 32], Format::Hgt, &small).unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::TooLarge {
                width: 4,
                height: 4,
                limit: 15
            }
        ),
        "{problem:?}"
    );
}

#[test]
fn zero_and_one_sample_sizes_are_refused() {
    for (width, height) in [(0, 5), (5, 0), (1, 1)] {
        let problem = decode(
            &png_claiming(width, height),
            Format::Png,
            &LoadOptions::default(),
        )
        .unwrap_err();
        // The png crate itself rejects zero sizes as a malformed header.
        assert!(
            matches!(problem, Problem::TooSmall { .. } | Problem::Corrupt { .. }),
            "{problem:?}"
        );
        let tiff = stripped_tiff(false, width, height, 16, 1, vec![0; 2], vec![]);
        let problem = decode(&tiff, Format::GeoTiff, &LoadOptions::default()).unwrap_err();
        assert!(
            matches!(problem, Problem::TooSmall { .. } | Problem::Corrupt { .. }),
            "{problem:?}"
        );
        let ascii = format!("ncols {width}\nnrows {height}\ncellsize 1\n1\n");
        let problem =
            decode(ascii.as_bytes(), Format::AsciiGrid, &LoadOptions::default()).unwrap_err();
        assert!(
            matches!(problem, Problem::TooSmall { width: w, height: h } if (w, h) == (u64::from(width), u64::from(height))),
            "{problem:?}"
        );
        let raw = LoadOptions::default().with_raw_size(width, height);
        let problem = decode(&[0; 2], Format::Raw16, &raw).unwrap_err();
        assert!(matches!(problem, Problem::TooSmall { .. }), "{problem:?}");
    }
    let problem = decode(&[0; 2], Format::Hgt, &LoadOptions::default()).unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::TooSmall {
                width: 1,
                height: 1
            }
        ),
        "{problem:?}"
    );
}

#[test]
fn non_finite_values_are_nodata_or_errors_in_every_float_format() {
    let nan_and_inf = [1.0f32, f32::NAN, 2.0, f32::INFINITY];
    let raw = f32_bytes(&nan_and_inf, false);
    let tiff = stripped_tiff(false, 2, 2, 32, 3, raw.clone(), vec![]);
    let ascii = "ncols 2\nnrows 2\ncellsize 1\n1 NaN\n2 -Infinity\n";
    for (format, bytes) in [
        (Format::RawF32, raw),
        (Format::GeoTiff, tiff),
        (Format::AsciiGrid, ascii.as_bytes().to_vec()),
    ] {
        let problem = decode(&bytes, format, &LoadOptions::default()).unwrap_err();
        assert!(
            matches!(problem, Problem::Infinite { col: 1, row: 1, .. }),
            "{format}: {problem:?}"
        );
    }
}

#[test]
fn load_names_the_file_in_every_error() {
    let dir = scratch_dir("bad-files");
    let check = |path: &std::path::Path, is_expected: fn(&Problem) -> bool| {
        let error = load(path, &LoadOptions::default()).unwrap_err();
        assert!(
            is_expected(&error.problem),
            "{}: {:?}",
            path.display(),
            error.problem
        );
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("{}: ", path.display())),
            "{message}"
        );
    };
    check(&dir.join("missing.png"), |p| matches!(p, Problem::NotFound));
    check(&dir, |p| matches!(p, Problem::IsDirectory));
    let empty = dir.join("empty.png");
    std::fs::write(&empty, b"").unwrap();
    check(&empty, |p| matches!(p, Problem::Empty));
    let unknown = dir.join("notes.txt");
    std::fs::write(&unknown, b"hello, terrain").unwrap();
    check(&unknown, |p| matches!(p, Problem::UnknownFormat));
    let fake_png = dir.join("fake.png");
    std::fs::write(&fake_png, b"not a png at all").unwrap();
    check(&fake_png, |p| {
        matches!(
            p,
            Problem::Corrupt {
                format: Format::Png,
                ..
            }
        )
    });
    let truncated = dir.join("cut.tif");
    let tiff = stripped_tiff(false, 4, 3, 32, 3, vec![0; 48], vec![]);
    std::fs::write(&truncated, &tiff[..tiff.len() - 10]).unwrap();
    check(&truncated, |p| {
        matches!(
            p,
            Problem::UnexpectedEnd {
                format: Format::GeoTiff
            } | Problem::Truncated { .. }
                | Problem::Corrupt { .. }
        )
    });
}

#[test]
fn signatures_win_over_extensions_and_forced_formats_win_over_both() {
    let dir = scratch_dir("detection");
    let png = png_bytes(
        2,
        2,
        png::ColorType::Grayscale,
        png::BitDepth::Eight,
        &[1, 2, 3, 4],
    );
    let misnamed = dir.join("heights.tif");
    std::fs::write(&misnamed, &png).unwrap();
    assert_eq!(
        load(&misnamed, &LoadOptions::default())
            .unwrap()
            .source
            .format,
        Format::Png
    );
    let ascii = dir.join("grid.txt");
    std::fs::write(&ascii, "  NCOLS 2\nnrows 2\ncellsize 1\n1 2 3 4\n").unwrap();
    assert_eq!(
        load(&ascii, &LoadOptions::default()).unwrap().source.format,
        Format::AsciiGrid
    );
    let raw = dir.join("heights.bin");
    std::fs::write(&raw, [0u8; 8]).unwrap();
    assert!(matches!(
        load(&raw, &LoadOptions::default()).unwrap_err().problem,
        Problem::UnknownFormat
    ));
    let forced = LoadOptions::default().with_format(Format::Raw16);
    assert_eq!(load(&raw, &forced).unwrap().heightfield.width(), 2);
}
