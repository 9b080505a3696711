//! PNG loading: gray depths, gray stored as colour, alpha nodata, the colour packings
//! (checked on tiles encoded here from real data) and the real Grand Canyon set.

mod io_common;

use io_common::*;
use png::{BitDepth, ColorType};
use terralod_core::Samples;
use terralod_core::io::{Format, LoadOptions, Problem, RgbEncoding, decode, load};

#[test]
fn gray8_is_widened_to_u16_with_the_png_integer_as_raw() {
    let pixels = [0u8, 7, 128, 255, 1, 2];
    let loaded = decode_default(
        &png_bytes(3, 2, ColorType::Grayscale, BitDepth::Eight, &pixels),
        Format::Png,
    )
    .unwrap();
    assert_eq!(
        loaded.heightfield.samples(),
        &Samples::U16(pixels.map(u16::from).to_vec())
    );
    assert_eq!(loaded.source.sample_type, "u8");
    assert_eq!(loaded.source.format, Format::Png);
    assert_eq!(loaded.source.spacing_m, None);
    let mapping = loaded.heightfield.mapping();
    assert_eq!(
        (
            mapping.cell_size,
            mapping.height_scale,
            mapping.height_offset
        ),
        (1.0, 1.0, 0.0)
    );
}

#[test]
fn gray16_keeps_every_value() {
    let values = [0u16, 1, 256, 40_000, 65_535, 12_345];
    let loaded = decode_default(
        &png_bytes(
            2,
            3,
            ColorType::Grayscale,
            BitDepth::Sixteen,
            &be_bytes(&values),
        ),
        Format::Png,
    )
    .unwrap();
    assert_eq!(loaded.heightfield.samples(), &Samples::U16(values.to_vec()));
    assert_eq!(loaded.source.sample_type, "u16");
    assert_eq!(
        (loaded.heightfield.width(), loaded.heightfield.height()),
        (2, 3)
    );
}

#[test]
fn gray_stored_as_rgb_or_rgba_reads_as_gray() {
    let gray = [10u8, 20, 30, 40];
    let rgb: Vec<u8> = gray.iter().flat_map(|&g| [g, g, g]).collect();
    let rgba: Vec<u8> = gray.iter().flat_map(|&g| [g, g, g, 255]).collect();
    for (color, data) in [(ColorType::Rgb, rgb), (ColorType::Rgba, rgba)] {
        let loaded =
            decode_default(&png_bytes(2, 2, color, BitDepth::Eight, &data), Format::Png).unwrap();
        assert_eq!(
            loaded.heightfield.samples(),
            &Samples::U16(gray.map(u16::from).to_vec()),
            "{color:?}"
        );
        assert_eq!(loaded.heightfield.nodata_filled(), 0);
        assert_eq!(loaded.source.encoding, Some(RgbEncoding::Gray));
    }
    let wide: Vec<u16> = [300u16, 400, 500, 600]
        .iter()
        .flat_map(|&g| [g, g, g])
        .collect();
    let loaded = decode_default(
        &png_bytes(2, 2, ColorType::Rgb, BitDepth::Sixteen, &be_bytes(&wide)),
        Format::Png,
    )
    .unwrap();
    assert_eq!(
        loaded.heightfield.samples(),
        &Samples::U16(vec![300, 400, 500, 600])
    );
    assert_eq!(loaded.source.sample_type, "u16");
}

#[test]
fn colour_whose_channels_differ_asks_for_an_encoding() {
    let mut rgb: Vec<u8> = [5u8; 12].to_vec();
    rgb[3 * 3 + 1] = 6; // pixel (1, 1): G differs
    let bytes = png_bytes(2, 2, ColorType::Rgb, BitDepth::Eight, &rgb);
    for options in [
        LoadOptions::default(),
        LoadOptions::default().with_encoding(RgbEncoding::Gray),
    ] {
        let problem = decode(&bytes, Format::Png, &options).unwrap_err();
        assert!(
            matches!(
                problem,
                Problem::RgbNeedsEncoding {
                    col: 1,
                    row: 1,
                    wide: false
                }
            ),
            "{problem:?}"
        );
        assert!(
            problem.to_string().contains("--encoding terrain-rgb|rgb24"),
            "{problem}"
        );
    }
    // 16-bit colour: no encoding reads it, so none is suggested.
    let mut wide = vec![0u8; 24];
    wide[3 * 6 + 3] = 1; // pixel (1, 1): G's low byte differs
    let problem = decode(
        &png_bytes(2, 2, ColorType::Rgb, BitDepth::Sixteen, &wide),
        Format::Png,
        &LoadOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(problem, Problem::RgbNeedsEncoding { wide: true, .. }),
        "{problem:?}"
    );
    let message = problem.to_string();
    assert!(
        message.contains("16-bit grayscale") && !message.contains("--encoding"),
        "{message}"
    );
}

#[test]
fn a_packing_on_a_gray_image_is_an_error() {
    let bytes = png_bytes(2, 2, ColorType::Grayscale, BitDepth::Eight, &[1, 2, 3, 4]);
    let problem = decode(
        &bytes,
        Format::Png,
        &LoadOptions::default().with_encoding(RgbEncoding::TerrainRgb),
    )
    .unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::EncodingMismatch {
                encoding: RgbEncoding::TerrainRgb,
                ..
            }
        ),
        "{problem:?}"
    );
    let wide = png_bytes(2, 2, ColorType::Rgb, BitDepth::Sixteen, &[0; 24]);
    let problem = decode(
        &wide,
        Format::Png,
        &LoadOptions::default().with_encoding(RgbEncoding::Rgb24),
    )
    .unwrap_err();
    assert!(problem.to_string().contains("16-bit RGB"), "{problem}");
}

#[test]
fn alpha_zero_marks_nodata_in_gray_alpha_and_rgba() {
    // 3 × 2 gray+alpha: the hole at (1, 0) takes the mean of its neighbours 10, 30 and 50.
    let gray_alpha = [10u8, 255, 99, 0, 30, 255, 40, 255, 50, 255, 60, 255];
    let loaded = decode_default(
        &png_bytes(
            3,
            2,
            ColorType::GrayscaleAlpha,
            BitDepth::Eight,
            &gray_alpha,
        ),
        Format::Png,
    )
    .unwrap();
    assert_eq!(loaded.heightfield.nodata_filled(), 1);
    assert_eq!(loaded.heightfield.raw(1, 0), 30.0);
    let rgba = [7u8, 7, 7, 255, 9, 9, 9, 0, 11, 11, 11, 255, 13, 13, 13, 255];
    let loaded = decode_default(
        &png_bytes(2, 2, ColorType::Rgba, BitDepth::Eight, &rgba),
        Format::Png,
    )
    .unwrap();
    assert_eq!(loaded.heightfield.nodata_filled(), 1);
    assert_eq!(loaded.heightfield.raw(1, 0), 10.0); // mean of its neighbours 7 and 13
}

#[test]
fn palette_and_low_bit_depths_are_expanded() {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, 2, 2);
    encoder.set_color(ColorType::Indexed);
    encoder.set_depth(BitDepth::Eight);
    encoder.set_palette(vec![0, 0, 0, 50, 50, 50, 200, 200, 200]);
    let mut writer = encoder.write_header().unwrap();
    writer.write_image_data(&[0, 1, 2, 1]).unwrap();
    writer.finish().unwrap();
    let loaded = decode_default(&out, Format::Png).unwrap();
    assert_eq!(
        loaded.heightfield.samples(),
        &Samples::U16(vec![0, 50, 200, 50])
    );

    // 4-bit gray: rows are packed two pixels a byte.
    let loaded = decode_default(
        &png_bytes(2, 2, ColorType::Grayscale, BitDepth::Four, &[0x1F, 0x80]),
        Format::Png,
    )
    .unwrap();
    // Expansion scales 4-bit to 8-bit (x * 17): the PNG integer at 8 bits.
    assert_eq!(
        loaded.heightfield.samples(),
        &Samples::U16(vec![17, 255, 136, 0])
    );
}

#[test]
fn interlaced_png_decodes_like_a_plain_one() {
    let (width, height) = (11u32, 9u32);
    let pixels: Vec<u8> = (0..width * height).map(|i| (i * 7 % 251) as u8).collect();
    let loaded =
        decode_default(&interlaced_gray8_png(width, height, &pixels), Format::Png).unwrap();
    assert_eq!(
        loaded.heightfield.samples(),
        &Samples::U16(pixels.iter().map(|&p| u16::from(p)).collect())
    );
}

/// Encodes heights as a Terrain-RGB or 24-bit tile, as a tile server would.
fn rgb_tile(width: u32, height: u32, packed: impl Iterator<Item = u32>) -> Vec<u8> {
    let data: Vec<u8> = packed
        .flat_map(|v| [(v >> 16) as u8, (v >> 8) as u8, v as u8])
        .collect();
    png_bytes(width, height, ColorType::Rgb, BitDepth::Eight, &data)
}

#[test]
fn terrain_rgb_and_rgb24_decode_tiles_made_from_real_heights() {
    let Some(path) = shared_data("srtm3_boulder_co_758.png") else {
        return;
    };
    let boulder = load(&path, &LoadOptions::default()).unwrap();
    let Samples::U16(raw) = boulder.heightfield.samples() else {
        panic!("the Boulder PNG is 16-bit gray")
    };
    let (w, h) = (boulder.heightfield.width(), boulder.heightfield.height());

    // Heights are raw × 0.1 m; Terrain-RGB stores (h + 10000) / 0.1 = raw + 100000.
    let tile = rgb_tile(w, h, raw.iter().map(|&r| u32::from(r) + 100_000));
    let options = LoadOptions::default().with_encoding(RgbEncoding::TerrainRgb);
    let terrain = decode(&tile, Format::Png, &options).unwrap();
    assert_eq!(terrain.source.encoding, Some(RgbEncoding::TerrainRgb));
    assert_eq!(terrain.source.sample_type, "rgb8");
    let Samples::F32(metres) = terrain.heightfield.samples() else {
        panic!("terrain-rgb gives f32")
    };
    for (&r, &m) in raw.iter().zip(metres) {
        let expected = f64::from(r) * 0.1;
        assert!((f64::from(m) - expected).abs() < 1e-3, "{m} vs {expected}");
    }
    assert!((terrain.heightfield.raw_range().0 - 1547.0).abs() < 0.01);

    let tile = rgb_tile(w, h, raw.iter().map(|&r| u32::from(r) * 211 + 3));
    let packed = decode(
        &tile,
        Format::Png,
        &LoadOptions::default().with_encoding(RgbEncoding::Rgb24),
    )
    .unwrap();
    let Samples::F32(values) = packed.heightfield.samples() else {
        panic!("rgb24 gives f32")
    };
    assert!(
        raw.iter()
            .zip(values)
            .all(|(&r, &v)| v == (u32::from(r) * 211 + 3) as f32)
    );
}

#[test]
fn terrain_rgb_extremes() {
    let tile = rgb_tile(2, 2, [0, 100_000, 0xFF_FFFF, 100_001].into_iter());
    let loaded = decode(
        &tile,
        Format::Png,
        &LoadOptions::default().with_encoding(RgbEncoding::TerrainRgb),
    )
    .unwrap();
    let values = raw_values(&loaded);
    assert_eq!(values[0], -10_000.0);
    assert_eq!(values[1], 0.0);
    assert!((values[2] - 1_667_721.5).abs() < 0.2);
    assert!((values[3] - 0.1).abs() < 1e-4);
}

#[test]
fn grand_canyon_8bit_rgb_reads_as_gray() {
    let Some(path) = shared_data("gcanyon_4097x2049_8bit.png") else {
        return;
    };
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    let field = &loaded.heightfield;
    assert_eq!((field.width(), field.height()), (4097, 2049));
    assert_eq!(loaded.source.sample_type, "u8");
    assert_eq!(loaded.source.encoding, Some(RgbEncoding::Gray));
    // 130–1870 m at 10 m per unit.
    assert_eq!(field.raw_range(), (13.0, 187.0));
    assert_eq!(field.nodata_filled(), 0);
}

#[test]
fn boulder_16bit_matches_its_sidecar() {
    let Some(path) = shared_data("srtm3_boulder_co_758.png") else {
        return;
    };
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    assert_eq!(
        (loaded.heightfield.width(), loaded.heightfield.height()),
        (758, 758)
    );
    assert_eq!(loaded.source.sample_type, "u16");
    // 1547–4320 m at 0.1 m per unit.
    assert_eq!(loaded.heightfield.raw_range(), (15_470.0, 43_200.0));
}
