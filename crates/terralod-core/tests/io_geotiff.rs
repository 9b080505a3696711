//! GeoTIFF loading: the three real files, every accepted sample type, compressions, tiled
//! and big-endian layouts, nodata and the spacing from GeoTIFF tags.

mod io_common;

use io_common::*;
use terralod_core::Samples;
use terralod_core::io::{Format, LoadOptions, Problem, load};
use tiff::encoder::{Compression, DeflateLevel, Predictor, TiffEncoder, colortype};

fn assert_close(actual: f64, expected: f64, tolerance: f64) {
    assert!(
        (actual - expected).abs() <= tolerance,
        "{actual} is not within {tolerance} of {expected}"
    );
}

#[test]
fn dem_hills_has_949_nodata_samples_and_geographic_spacing() {
    let Some(path) = shared_data("dem_hills_333x218_f32.tif") else {
        return;
    };
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    let field = &loaded.heightfield;
    assert_eq!((field.width(), field.height()), (333, 218));
    assert_eq!(field.nodata_filled(), 949);
    assert_eq!(loaded.source.sample_type, "f32");
    assert_eq!(loaded.source.nodata_value, Some(-999_999.0));
    assert_eq!(loaded.source.compression.as_deref(), Some("none"));
    // Filled holes stay inside the range of the valid data (138.289–168.004 m).
    let (lo, hi) = field.raw_range();
    assert!(lo >= 138.28 && hi <= 168.01, "{lo}..{hi}");
    // Sidecar: 7.962 m E-W, 10.238 m N-S at latitude 39.422.
    let (east_west, north_south) = loaded.source.spacing_m.unwrap();
    assert_close(east_west, 7.962, 0.005);
    assert_close(north_south, 10.238, 0.005);
    assert_close(
        f64::from(field.mapping().cell_size),
        (7.962 + 10.238) / 2.0,
        0.005,
    );
    assert!(
        loaded
            .source
            .crs
            .as_deref()
            .unwrap()
            .starts_with("geographic")
    );
}

#[test]
fn whitebox_reads_with_its_metric_pixel_scale() {
    let Some(path) = shared_data("whitebox_dem_237x188_f32.tif") else {
        return;
    };
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    assert_eq!(
        (loaded.heightfield.width(), loaded.heightfield.height()),
        (237, 188)
    );
    assert_eq!(loaded.source.nodata_value, Some(-32768.0));
    let (east_west, north_south) = loaded.source.spacing_m.unwrap();
    assert_close(east_west, 89.983, 0.001);
    assert_close(north_south, 90.022, 0.001);
    let (lo, hi) = loaded.heightfield.raw_range();
    assert!(lo > -1000.0 && hi < 9000.0 && hi > lo, "{lo}..{hi}");
}

#[test]
fn olinda_is_projected_utm_with_90m_cells() {
    let Some(path) = shared_data("olinda_dem_111x111_f32.tif") else {
        return;
    };
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    assert_eq!(
        (loaded.heightfield.width(), loaded.heightfield.height()),
        (111, 111)
    );
    let (east_west, north_south) = loaded.source.spacing_m.unwrap();
    assert_close(east_west, 89.994, 0.001);
    assert_close(north_south, 89.994, 0.001);
    let crs = loaded.source.crs.unwrap();
    assert!(
        crs.starts_with("projected") && crs.contains("UTM Zone 25"),
        "{crs}"
    );
    assert_eq!(loaded.heightfield.nodata_filled(), 0);
}

/// Encodes a one-band image with the `tiff` crate (which writes strips).
fn encode<C: colortype::ColorType>(
    width: u32,
    height: u32,
    data: &[C::Inner],
    nodata: Option<&str>,
) -> Vec<u8>
where
    [C::Inner]: tiff::encoder::TiffValue,
{
    encoded_strips::<C>(
        Compression::Uncompressed,
        (width, height),
        height,
        data,
        nodata,
    )
}

#[test]
fn every_sample_type_is_read_and_converted_as_documented() {
    let check = |bytes: Vec<u8>, sample_type: &str, expected: Samples| {
        let loaded = decode_default(&bytes, Format::GeoTiff).unwrap();
        assert_eq!(loaded.source.sample_type, sample_type);
        assert_eq!(loaded.heightfield.samples(), &expected, "{sample_type}");
    };
    check(
        encode::<colortype::Gray8>(2, 2, &[0, 1, 200, 255], None),
        "u8",
        Samples::U16(vec![0, 1, 200, 255]),
    );
    check(
        encode::<colortype::Gray16>(2, 2, &[0, 9, 40_000, 65_535], None),
        "u16",
        Samples::U16(vec![0, 9, 40_000, 65_535]),
    );
    check(
        encode::<colortype::GrayI8>(2, 2, &[-128, -1, 0, 127], None),
        "i8",
        Samples::I16(vec![-128, -1, 0, 127]),
    );
    check(
        encode::<colortype::GrayI16>(2, 2, &[-32_000, -1, 0, 8_848], None),
        "i16",
        Samples::I16(vec![-32_000, -1, 0, 8_848]),
    );
    check(
        encode::<colortype::GrayI32>(2, 2, &[-100_000, 0, 16_777_216, 123], None),
        "i32",
        Samples::F32(vec![-100_000.0, 0.0, 16_777_216.0, 123.0]),
    );
    check(
        encode::<colortype::Gray32>(2, 2, &[0, 1, 70_000, 5], None),
        "u32",
        Samples::F32(vec![0.0, 1.0, 70_000.0, 5.0]),
    );
    check(
        encode::<colortype::Gray32Float>(2, 2, &[-1.5, 0.25, 8848.86, 1e-3], None),
        "f32",
        Samples::F32(vec![-1.5, 0.25, 8848.86, 1e-3]),
    );
    check(
        encode::<colortype::Gray64Float>(2, 2, &[-1.5, 0.1, 8848.86, 1e6], None),
        "f64",
        Samples::F32(vec![-1.5, 0.1, 8848.86, 1e6]),
    );
}

#[test]
fn nodata_tag_marks_holes_in_integer_and_float_data() {
    let loaded = decode_default(
        &encode::<colortype::GrayI16>(3, 1 + 1, &[10, -9999, 30, 40, 50, 60], Some("-9999")),
        Format::GeoTiff,
    )
    .unwrap();
    assert_eq!(loaded.heightfield.nodata_filled(), 1);
    assert_eq!(loaded.heightfield.raw(1, 0), 30.0); // mean of 10, 30 and 50
    assert_eq!(loaded.source.nodata_value, Some(-9999.0));

    let loaded = decode_default(
        &encode::<colortype::GrayI32>(2, 2, &[-2_147_483_647, 4, 4, 4], Some("-2147483647")),
        Format::GeoTiff,
    )
    .unwrap();
    assert_eq!(loaded.heightfield.nodata_filled(), 1);
    assert_eq!(loaded.heightfield.samples(), &Samples::F32(vec![4.0; 4]));

    // float32 with GDAL's "lowest float" nodata, printed with 17 digits, and a NaN.
    let values = [f32::MIN, 2.0, f32::NAN, 2.0, 2.0, 2.0];
    let loaded = decode_default(
        &encode::<colortype::Gray32Float>(3, 2, &values, Some("-3.4028234663852886e+38")),
        Format::GeoTiff,
    )
    .unwrap();
    assert_eq!(loaded.heightfield.nodata_filled(), 2);
    assert_eq!(loaded.heightfield.raw_range(), (2.0, 2.0));

    // A nodata value that no sample has changes nothing.
    let loaded = decode_default(
        &encode::<colortype::Gray16>(2, 2, &[1, 2, 3, 4], Some("nan")),
        Format::GeoTiff,
    )
    .unwrap();
    assert_eq!(loaded.heightfield.nodata_filled(), 0);
}

#[test]
fn infinity_is_an_error_naming_the_sample() {
    let bytes =
        encode::<colortype::Gray32Float>(3, 2, &[1.0, 2.0, 3.0, 4.0, f32::NEG_INFINITY, 6.0], None);
    let problem = decode_default(&bytes, Format::GeoTiff).unwrap_err();
    assert!(
        matches!(problem, Problem::Infinite { col: 1, row: 1, .. }),
        "{problem:?}"
    );
    assert!(problem.to_string().contains("column 1, row 1"), "{problem}");
}

#[test]
fn compressed_strips_decode() {
    let (width, height) = (37u32, 23u32);
    let values: Vec<u16> = (0..width * height)
        .map(|i| ((i * 37) % 1000) as u16)
        .collect();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("lzw", {
            let mut out = std::io::Cursor::new(Vec::new());
            let mut encoder = TiffEncoder::new(&mut out)
                .unwrap()
                .with_compression(Compression::Lzw)
                .with_predictor(Predictor::Horizontal);
            encoder
                .write_image::<colortype::Gray16>(width, height, &values)
                .unwrap();
            out.into_inner()
        }),
        ("deflate", {
            let mut out = std::io::Cursor::new(Vec::new());
            let mut encoder = TiffEncoder::new(&mut out)
                .unwrap()
                .with_compression(Compression::Deflate(DeflateLevel::Balanced));
            encoder
                .write_image::<colortype::Gray16>(width, height, &values)
                .unwrap();
            out.into_inner()
        }),
        ("packbits", {
            let mut out = std::io::Cursor::new(Vec::new());
            let mut encoder = TiffEncoder::new(&mut out)
                .unwrap()
                .with_compression(Compression::Packbits);
            encoder
                .write_image::<colortype::Gray16>(width, height, &values)
                .unwrap();
            out.into_inner()
        }),
    ];
    for (name, bytes) in cases {
        let loaded = decode_default(&bytes, Format::GeoTiff).unwrap();
        assert_eq!(loaded.source.compression.as_deref(), Some(name));
        assert_eq!(
            loaded.heightfield.samples(),
            &Samples::U16(values.clone()),
            "{name}"
        );
    }
}

/// A tiled TIFF with 16 × 16 tiles over a 40 × 20 image: 3 × 2 tiles, the right and bottom
/// ones partly padding.
fn tiled(
    big_endian: bool,
    bits: u16,
    sample_format: u16,
    value: impl Fn(u32, u32) -> Vec<u8>,
) -> Vec<u8> {
    tiled_tiff(
        big_endian,
        (40, 20),
        16,
        (bits, sample_format),
        vec![],
        value,
    )
}

#[test]
fn tiled_tiffs_in_both_byte_orders_decode() {
    let height_at = |col: u32, row: u32| (col * 100 + row) as f32 * 0.5;
    for big_endian in [false, true] {
        let bytes = tiled(big_endian, 32, 3, |c, r| {
            f32_bytes(&[height_at(c, r)], big_endian)
        });
        let loaded = decode_default(&bytes, Format::GeoTiff).unwrap();
        assert_eq!(
            (loaded.heightfield.width(), loaded.heightfield.height()),
            (40, 20)
        );
        for row in 0..20 {
            for col in 0..40 {
                assert_eq!(
                    loaded.heightfield.raw(col, row),
                    height_at(col, row),
                    "({col}, {row}) big-endian {big_endian}"
                );
            }
        }
        let bytes = tiled(big_endian, 16, 1, |c, r| {
            let v = (c * 100 + r) as u16;
            if big_endian {
                v.to_be_bytes().to_vec()
            } else {
                v.to_le_bytes().to_vec()
            }
        });
        let loaded = decode_default(&bytes, Format::GeoTiff).unwrap();
        assert_eq!(loaded.heightfield.raw(39, 19), 3919.0);
        assert_eq!(loaded.heightfield.raw(17, 16), 1716.0);
    }
}

#[test]
fn more_than_one_band_is_refused() {
    let mut out = std::io::Cursor::new(Vec::new());
    TiffEncoder::new(&mut out)
        .unwrap()
        .write_image::<colortype::RGB8>(2, 2, &[0; 12])
        .unwrap();
    let problem = decode_default(&out.into_inner(), Format::GeoTiff).unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::Unsupported {
                format: Format::GeoTiff,
                ..
            }
        ),
        "{problem:?}"
    );
    assert!(
        problem.to_string().contains("3 samples per pixel"),
        "{problem}"
    );
}

fn geo_tags(
    model: u16,
    linear_unit: Option<u16>,
    scale: (f64, f64),
    tie: (f64, f64),
) -> Vec<(u16, TagValue)> {
    let mut keys = vec![1, 1, 0, 1, 1024, 0, 1, model];
    if let Some(unit) = linear_unit {
        keys[3] = 2;
        keys.extend([3076, 0, 1, unit]);
    }
    vec![
        (
            tag::MODEL_PIXEL_SCALE,
            TagValue::Double(vec![scale.0, scale.1, 0.0]),
        ),
        (
            tag::MODEL_TIEPOINT,
            TagValue::Double(vec![0.0, 0.0, 0.0, tie.0, tie.1, 0.0]),
        ),
        (tag::GEO_KEY_DIRECTORY, TagValue::Short(keys)),
    ]
}

#[test]
fn spacing_follows_the_geokeys() {
    let data = f32_bytes(&[1.0; 16], false);
    let load_with = |tags| {
        decode_default(
            &stripped_tiff(false, 4, 4, 32, 3, data.clone(), tags),
            Format::GeoTiff,
        )
        .unwrap()
    };

    let projected = load_with(geo_tags(1, None, (30.0, 30.0), (500_000.0, 4_000_000.0)));
    assert_eq!(projected.source.spacing_m, Some((30.0, 30.0)));
    assert_eq!(projected.heightfield.mapping().cell_size, 30.0);

    let feet = load_with(geo_tags(
        1,
        Some(9002),
        (10.0, 20.0),
        (500_000.0, 4_000_000.0),
    ));
    assert_eq!(feet.source.spacing_m, Some((3.048, 6.096)));

    // 1 arc-second at the equator: the raster's centre lies at latitude 0.
    let tie_latitude = 2.0 / 3600.0;
    let geographic = load_with(geo_tags(
        2,
        None,
        (1.0 / 3600.0, 1.0 / 3600.0),
        (10.0, tie_latitude),
    ));
    let (east_west, north_south) = geographic.source.spacing_m.unwrap();
    assert_close(east_west, 111_320.0 / 3600.0, 1e-6);
    assert_close(north_south, 110_574.0 / 3600.0, 1e-6);

    // No model type: degrees recognised by their size and place, else metres assumed.
    let mut guessed = geo_tags(2, None, (1.0 / 3600.0, 1.0 / 3600.0), (10.0, tie_latitude));
    guessed.pop();
    let guessed = load_with(guessed);
    assert_close(
        guessed.source.spacing_m.unwrap().1,
        110_574.0 / 3600.0,
        1e-6,
    );
    assert!(
        guessed
            .source
            .spacing_note
            .unwrap()
            .contains("look like degrees")
    );

    let none = load_with(Vec::new());
    assert_eq!(none.source.spacing_m, None);
    assert_eq!(none.heightfield.mapping().cell_size, 1.0);
}

/// A zstd frame holding `data` as one raw (stored) block, written by hand.
fn zstd_stored(data: &[u8]) -> Vec<u8> {
    assert!(data.len() < 256, "one-byte content size");
    let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0x20, data.len() as u8];
    let block_header = 1 | ((data.len() as u32) << 3); // last block, raw, size
    frame.extend(&block_header.to_le_bytes()[..3]);
    frame.extend_from_slice(data);
    frame
}

#[test]
fn zstd_compressed_strips_decode() {
    let values: Vec<u16> = (0..16).map(|v| v * 111).collect();
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let tags = vec![
        (tag::IMAGE_WIDTH, TagValue::Long(vec![4])),
        (tag::IMAGE_LENGTH, TagValue::Long(vec![4])),
        (tag::BITS_PER_SAMPLE, TagValue::Short(vec![16])),
        (tag::COMPRESSION, TagValue::Short(vec![50000])),
        (tag::PHOTOMETRIC, TagValue::Short(vec![1])),
        (tag::SAMPLES_PER_PIXEL, TagValue::Short(vec![1])),
        (tag::ROWS_PER_STRIP, TagValue::Long(vec![4])),
    ];
    let bytes = tiff_by_hand(
        false,
        tags,
        tag::STRIP_OFFSETS,
        tag::STRIP_BYTE_COUNTS,
        &[zstd_stored(&data)],
    );
    let loaded = decode_default(&bytes, Format::GeoTiff).unwrap();
    assert_eq!(loaded.source.compression.as_deref(), Some("zstd"));
    assert_eq!(loaded.heightfield.samples(), &Samples::U16(values));
}

#[test]
fn an_unsupported_compression_is_named() {
    let tags = vec![
        (tag::IMAGE_WIDTH, TagValue::Long(vec![2])),
        (tag::IMAGE_LENGTH, TagValue::Long(vec![2])),
        (tag::BITS_PER_SAMPLE, TagValue::Short(vec![32])),
        (tag::COMPRESSION, TagValue::Short(vec![34887])),
        (tag::PHOTOMETRIC, TagValue::Short(vec![1])),
        (tag::SAMPLES_PER_PIXEL, TagValue::Short(vec![1])),
        (tag::ROWS_PER_STRIP, TagValue::Long(vec![2])),
        (tag::SAMPLE_FORMAT, TagValue::Short(vec![3])),
    ];
    let bytes = tiff_by_hand(
        false,
        tags,
        tag::STRIP_OFFSETS,
        tag::STRIP_BYTE_COUNTS,
        &[vec![0; 16]],
    );
    let problem = decode_default(&bytes, Format::GeoTiff).unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::Unsupported {
                format: Format::GeoTiff,
                ..
            }
        ),
        "{problem:?}"
    );
    assert!(problem.to_string().contains("lerc"), "{problem}");
}
