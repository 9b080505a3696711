//! PNGs imported through a spool (`PngFileSource`, what `terralod import` uses past
//! `--max-samples`): the same files as the import of the whole-file loader's heightfield,
//! for every packing the loader reads; holes, interlacing, damage and interruption are
//! errors that name the file, and no spool is left behind.

mod io_common;

use io_common::*;
use png::{BitDepth, ColorType};
use std::path::{Path, PathBuf};
use terralod_core::io::{LoadOptions, RgbEncoding, load};
use terralod_core::tiles::{ImportSource, PngFileSource};

/// Imports the PNG at `path` twice, loaded whole and through a spool in `spool_dir`, and
/// checks that both write the same files (more than one level, so strided windows are read
/// too) and that the spool is gone afterwards.
fn assert_same_import(path: &Path, options: &LoadOptions, spool_dir: &Path) {
    let whole = load(path, options)
        .expect("the loader reads it")
        .heightfield;
    let rows = std::cell::Cell::new(0);
    let spooled = PngFileSource::spool(path, options, spool_dir, &|done, total| {
        assert!(done <= total && done >= rows.get());
        rows.set(done);
    })
    .expect("the spool is written");
    assert_eq!(
        rows.get(),
        u64::from(whole.height()),
        "progress reaches the end"
    );
    assert_eq!(spooled.mapping(), whole.mapping(), "{}", path.display());
    assert_eq!(
        (spooled.width(), spooled.height()),
        (whole.width(), whole.height())
    );
    assert_eq!(
        spool_files(spool_dir).len(),
        1,
        "one spool while the source lives"
    );
    assert_imports_alike(path, &whole, &spooled, 16);
    drop(spooled);
    assert!(spool_files(spool_dir).is_empty(), "the spool is removed");
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("a writable scratch directory");
    path
}

/// A rough 16-bit surface: neighbouring samples differ, so every tile has its own errors.
fn rough(col: u32, row: u32) -> u16 {
    ((col.wrapping_mul(2_654_435_761) ^ row.wrapping_mul(40_503)) % 5000 + col + row) as u16
}

const SIZE: (u32, u32) = (151, 103);

fn pixels(channels: usize, sample: impl Fn(u32, u32, usize) -> u8) -> Vec<u8> {
    let (width, height) = SIZE;
    (0..height)
        .flat_map(|r| (0..width).map(move |c| (c, r)))
        .flat_map(|(c, r)| (0..channels).map(move |k| (c, r, k)))
        .map(|(c, r, k)| sample(c, r, k))
        .collect()
}

#[test]
fn every_packing_imports_as_the_loaded_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let spool = tempfile::tempdir().expect("a temporary directory");
    let (width, height) = SIZE;
    let wide: Vec<u16> = (0..height)
        .flat_map(|r| (0..width).map(move |c| rough(c, r)))
        .collect();
    let cases: [(&str, Vec<u8>, LoadOptions); 6] = [
        (
            "gray8.png",
            png_bytes(
                width,
                height,
                ColorType::Grayscale,
                BitDepth::Eight,
                &pixels(1, |c, r, _| rough(c, r) as u8),
            ),
            LoadOptions::default(),
        ),
        (
            "gray16.png",
            png_bytes(
                width,
                height,
                ColorType::Grayscale,
                BitDepth::Sixteen,
                &be_bytes(&wide),
            ),
            LoadOptions::default(),
        ),
        (
            "gray-alpha.png",
            png_bytes(
                width,
                height,
                ColorType::GrayscaleAlpha,
                BitDepth::Eight,
                &pixels(2, |c, r, k| if k == 0 { rough(c, r) as u8 } else { 200 }),
            ),
            LoadOptions::default(),
        ),
        (
            "rgb-gray.png",
            png_bytes(
                width,
                height,
                ColorType::Rgb,
                BitDepth::Eight,
                &pixels(3, |c, r, _| (rough(c, r) >> 3) as u8),
            ),
            LoadOptions::default(),
        ),
        (
            "terrain-rgb.png",
            png_bytes(
                width,
                height,
                ColorType::Rgb,
                BitDepth::Eight,
                &pixels(3, |c, r, k| {
                    [1, (rough(c, r) >> 8) as u8, rough(c, r) as u8][k]
                }),
            ),
            LoadOptions::default().with_encoding(RgbEncoding::TerrainRgb),
        ),
        (
            "rgba-24.png",
            png_bytes(
                width,
                height,
                ColorType::Rgba,
                BitDepth::Eight,
                &pixels(4, |c, r, k| {
                    [0, (rough(c, r) >> 8) as u8, rough(c, r) as u8, 255][k]
                }),
            ),
            LoadOptions::default().with_encoding(RgbEncoding::Rgb24),
        ),
    ];
    for (name, bytes, options) in cases {
        let path = write(dir.path(), name, &bytes);
        assert_same_import(&path, &options, spool.path());
    }
    // Expanded before conversion: a palette with transparency (no entry drawn is
    // transparent), 4-bit gray, and 16-bit gray with alpha.
    let indices = pixels(1, |c, r, _| (rough(c, r) % 16) as u8);
    let mut palette_png = Vec::new();
    let mut encoder = png::Encoder::new(&mut palette_png, width, height);
    encoder.set_color(ColorType::Indexed);
    encoder.set_depth(BitDepth::Eight);
    encoder.set_palette((0..16u8).flat_map(|i| [i * 15; 3]).collect::<Vec<u8>>());
    encoder.set_trns((0..16).map(|_| 255u8).collect::<Vec<u8>>());
    let mut writer = encoder.write_header().expect("png header");
    writer.write_image_data(&indices).expect("png data");
    writer.finish().expect("png finish");
    let nibbles: Vec<u8> = (0..height)
        .flat_map(|r| {
            (0..width.div_ceil(2)).map(move |pair| {
                let hi = (rough(2 * pair, r) % 16) as u8;
                let lo = (rough(2 * pair + 1, r) % 16) as u8;
                hi << 4 | if 2 * pair + 1 < width { lo } else { 0 }
            })
        })
        .collect();
    let gray_alpha16: Vec<u16> = wide.iter().flat_map(|&v| [v, 65_535]).collect();
    for (name, bytes) in [
        ("palette.png", palette_png),
        (
            "gray4.png",
            png_bytes(
                width,
                height,
                ColorType::Grayscale,
                BitDepth::Four,
                &nibbles,
            ),
        ),
        (
            "gray-alpha16.png",
            png_bytes(
                width,
                height,
                ColorType::GrayscaleAlpha,
                BitDepth::Sixteen,
                &be_bytes(&gray_alpha16),
            ),
        ),
    ] {
        let path = write(dir.path(), name, &bytes);
        assert_same_import(&path, &LoadOptions::default(), spool.path());
    }
}

#[test]
fn boulder_imports_through_a_spool_as_loaded() {
    let Some(path) = shared_data("srtm3_boulder_co_758.png") else {
        return;
    };
    let spool = tempfile::tempdir().expect("a temporary directory");
    assert_same_import(&path, &LoadOptions::default(), spool.path());
}

/// The error of spooling `path` (which must fail), after checking that no spool is left.
fn spool_error(path: &Path, options: &LoadOptions) -> String {
    let spool = tempfile::tempdir().expect("a temporary directory");
    let error = PngFileSource::spool(path, options, spool.path(), &|_, _| {})
        .expect_err("the spool fails")
        .to_string();
    assert!(spool_files(spool.path()).is_empty(), "{error}: spool left");
    error
}

#[test]
fn holes_interlacing_and_damage_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (width, height) = SIZE;

    let holed = write(
        dir.path(),
        "holed.png",
        &png_bytes(
            width,
            height,
            ColorType::GrayscaleAlpha,
            BitDepth::Eight,
            &pixels(2, |c, r, k| u8::from(k == 0 || (c, r) != (70, 41)) * 9),
        ),
    );
    let error = spool_error(&holed, &LoadOptions::default());
    assert!(
        error.contains("holed.png") && error.contains("column 70, row 41"),
        "{error}"
    );

    let interlaced = write(
        dir.path(),
        "interlaced.png",
        &interlaced_gray8_png(width, height, &pixels(1, |c, r, _| rough(c, r) as u8)),
    );
    let error = spool_error(&interlaced, &LoadOptions::default());
    assert!(
        error.contains("interlaced.png") && error.contains("interlac"),
        "{error}"
    );

    let whole = png_bytes(
        width,
        height,
        ColorType::Grayscale,
        BitDepth::Sixteen,
        &be_bytes(&vec![7; (width * height) as usize]),
    );
    for cut in [whole.len() / 2, whole.len() - 13] {
        let truncated = write(dir.path(), "cut.png", &whole[..cut]);
        let error = spool_error(&truncated, &LoadOptions::default());
        assert!(error.contains("cut.png"), "{error}");
    }

    let colour = write(
        dir.path(),
        "colour.png",
        &png_bytes(
            width,
            height,
            ColorType::Rgb,
            BitDepth::Eight,
            &pixels(3, |c, _, k| (c as u8).wrapping_add(k as u8)),
        ),
    );
    let error = spool_error(&colour, &LoadOptions::default());
    assert!(
        error.contains("colour.png") && error.contains("--encoding"),
        "{error}"
    );

    let missing = dir.path().join("missing.png");
    assert!(spool_error(&missing, &LoadOptions::default()).contains("missing.png"));
    let claimed =
        PngFileSource::claimed_size(&write(dir.path(), "claiming.png", &png_claiming(70_000, 3)))
            .expect("the header is read");
    assert_eq!(claimed, (70_000, 3));
    // Wider than the tiled format allows: refused before anything is spooled (by the
    // side, also where the sample count is beyond any limit too).
    let wide = write(dir.path(), "wide.png", &png_claiming(5_000_000, 5_000_000));
    let error = spool_error(&wide, &LoadOptions::default());
    assert!(
        error.contains("wide.png") && error.contains("width 5000000"),
        "{error}"
    );
}
