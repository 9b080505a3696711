//! Raw `.r16`/`.f32`, SRTM `.hgt` and ESRI ASCII grid loading.

mod io_common;

use io_common::*;
use terralod_core::Samples;
use terralod_core::io::{ByteOrder, Format, LoadOptions, Problem, decode, load};

#[test]
fn r16_reads_both_byte_orders_with_an_explicit_size() {
    let values = [1u16, 2, 300, 65_535, 0, 42];
    let little: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let big: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
    let options = LoadOptions::default().with_raw_size(3, 2);
    let loaded = decode(&little, Format::Raw16, &options).unwrap();
    assert_eq!(loaded.heightfield.samples(), &Samples::U16(values.to_vec()));
    assert_eq!(
        (loaded.heightfield.width(), loaded.heightfield.height()),
        (3, 2)
    );
    assert_eq!(loaded.source.sample_type, "u16");
    let loaded = decode(
        &big,
        Format::Raw16,
        &options.with_byte_order(ByteOrder::Big),
    )
    .unwrap();
    assert_eq!(loaded.heightfield.samples(), &Samples::U16(values.to_vec()));
}

#[test]
fn raw_size_is_inferred_only_for_squares() {
    let square: Vec<u8> = (0..9u16).flat_map(|v| v.to_le_bytes()).collect();
    let loaded = decode(&square, Format::Raw16, &LoadOptions::default()).unwrap();
    assert_eq!(
        (loaded.heightfield.width(), loaded.heightfield.height()),
        (3, 3)
    );
    let floats: Vec<u8> = (0..16).flat_map(|v| (v as f32).to_le_bytes()).collect();
    let loaded = decode(&floats, Format::RawF32, &LoadOptions::default()).unwrap();
    assert_eq!(
        (loaded.heightfield.width(), loaded.heightfield.height()),
        (4, 4)
    );
    assert_eq!(loaded.heightfield.raw(3, 3), 15.0);

    let problem = decode(&square[..12], Format::Raw16, &LoadOptions::default()).unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::RawSizeUnknown {
                bytes: 12,
                sample_bytes: 2
            }
        ),
        "{problem:?}"
    );
    assert!(problem.to_string().contains("--raw-size WxH"), "{problem}");
    let problem = decode(&floats[..63], Format::RawF32, &LoadOptions::default()).unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::RawSizeUnknown {
                bytes: 63,
                sample_bytes: 4
            }
        ),
        "{problem:?}"
    );
}

#[test]
fn raw_length_must_match_the_size_exactly() {
    let bytes = vec![0u8; 24];
    let problem = decode(
        &bytes[..22],
        Format::Raw16,
        &LoadOptions::default().with_raw_size(4, 3),
    )
    .unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::Truncated {
                expected: 24,
                actual: 22
            }
        ),
        "{problem:?}"
    );
    let problem = decode(
        &bytes,
        Format::Raw16,
        &LoadOptions::default().with_raw_size(5, 2),
    )
    .unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::TrailingBytes {
                expected: 20,
                actual: 24
            }
        ),
        "{problem:?}"
    );
    let problem = decode(
        &bytes,
        Format::RawF32,
        &LoadOptions::default().with_raw_size(2, 2),
    )
    .unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::TrailingBytes {
                expected: 16,
                actual: 24
            }
        ),
        "{problem:?}"
    );
}

#[test]
fn f32_nan_is_nodata_and_infinity_an_error() {
    let values = [1.0f32, f32::NAN, 3.0, 5.0];
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
    let options = LoadOptions::default().with_byte_order(ByteOrder::Big);
    let loaded = decode(&bytes, Format::RawF32, &options).unwrap();
    assert_eq!(loaded.heightfield.nodata_filled(), 1);
    assert_eq!(loaded.heightfield.raw(1, 0), 3.0); // mean of 1 and 5

    let values = [1.0f32, 2.0, 3.0, f32::INFINITY];
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let problem = decode(&bytes, Format::RawF32, &LoadOptions::default()).unwrap_err();
    assert!(
        matches!(problem, Problem::Infinite { col: 1, row: 1, .. }),
        "{problem:?}"
    );

    let bytes: Vec<u8> = [f32::NAN; 4].iter().flat_map(|v| v.to_le_bytes()).collect();
    let problem = decode(&bytes, Format::RawF32, &LoadOptions::default()).unwrap_err();
    assert!(
        problem.to_string().contains("every sample is nodata"),
        "{problem}"
    );
}

fn hgt_bytes(values: &[i16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

#[test]
fn hgt_is_big_endian_i16_with_voids_filled() {
    let values = [100i16, -32768, 300, -5, 500, 600, 700, 800, 900];
    let loaded = decode(&hgt_bytes(&values), Format::Hgt, &LoadOptions::default()).unwrap();
    assert_eq!(
        (loaded.heightfield.width(), loaded.heightfield.height()),
        (3, 3)
    );
    assert_eq!(loaded.source.sample_type, "i16");
    assert_eq!(loaded.source.nodata_value, Some(-32768.0));
    assert_eq!(loaded.heightfield.nodata_filled(), 1);
    assert_eq!(loaded.heightfield.raw(1, 0), 300.0); // mean of 100, 300 and 500
    assert_eq!(loaded.heightfield.raw(0, 1), -5.0);
    // In memory there is no file name, so no latitude and no spacing.
    assert_eq!(loaded.source.spacing_m, None);

    let problem = decode(&hgt_bytes(&[1; 6]), Format::Hgt, &LoadOptions::default()).unwrap_err();
    assert!(
        matches!(problem, Problem::HgtNotSquare { bytes: 12 }),
        "{problem:?}"
    );
    let problem = decode(&[0; 9], Format::Hgt, &LoadOptions::default()).unwrap_err();
    assert!(
        matches!(problem, Problem::HgtNotSquare { bytes: 9 }),
        "{problem:?}"
    );
}

#[test]
fn hgt_spacing_comes_from_the_tile_name() {
    let dir = scratch_dir("hgt-name");
    // A 1201 × 1201 tile (3 arc-seconds) at N40W106.
    let bytes = hgt_bytes(&vec![1500; 1201 * 1201]);
    let path = dir.join("N40W106.hgt");
    std::fs::write(&path, &bytes).unwrap();
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.source.format, Format::Hgt);
    let (east_west, north_south) = loaded.source.spacing_m.unwrap();
    let step = 3.0 / 3600.0;
    let expected_ew = step * 111_320.0 * 40.5f64.to_radians().cos();
    assert!((east_west - expected_ew).abs() < 1e-9, "{east_west}");
    assert!(
        (north_south - step * 110_574.0).abs() < 1e-9,
        "{north_south}"
    );
    assert!(
        (f64::from(loaded.heightfield.mapping().cell_size)
            - (expected_ew + step * 110_574.0) / 2.0)
            .abs()
            < 1e-3
    );

    // Southern tiles: the centre latitude is south-edge + 0.5.
    let small = hgt_bytes(&[1; 4]);
    let path = dir.join("s23e047.SRTMGL1.hgt");
    std::fs::write(&path, &small).unwrap();
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    let (east_west, _) = loaded.source.spacing_m.unwrap();
    assert!((east_west - 111_320.0 * 22.5f64.to_radians().cos()).abs() < 1e-6);

    let path = dir.join("tile.hgt");
    std::fs::write(&path, &small).unwrap();
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.source.spacing_m, None);
    assert!(loaded.source.spacing_note.unwrap().contains("N40W106"));
}

#[test]
fn boulder_ascii_grid_equals_the_png_times_a_tenth() {
    let (Some(asc), Some(png)) = (
        shared_data("srtm3_boulder_co_758.asc"),
        shared_data("srtm3_boulder_co_758.png"),
    ) else {
        return;
    };
    let grid = load(&asc, &LoadOptions::default()).unwrap();
    let image = load(&png, &LoadOptions::default()).unwrap();
    assert_eq!(grid.source.format, Format::AsciiGrid);
    assert_eq!(grid.source.nodata_value, Some(0.0));
    assert_eq!(grid.heightfield.nodata_filled(), 0);
    assert_eq!(
        (grid.heightfield.width(), grid.heightfield.height()),
        (758, 758)
    );
    let Samples::F32(metres) = grid.heightfield.samples() else {
        panic!("ASCII grids are f32")
    };
    let Samples::U16(tenths) = image.heightfield.samples() else {
        panic!("the PNG is u16")
    };
    for (i, (&m, &t)) in metres.iter().zip(tenths).enumerate() {
        assert_eq!(m, (f64::from(t) * 0.1) as f32, "sample {i}");
    }
    // Sidecar: 70.907 m E-W, 92.145 m N-S at latitude 40.150.
    let (east_west, north_south) = grid.source.spacing_m.unwrap();
    assert!((east_west - 70.907).abs() < 0.005, "{east_west}");
    assert!((north_south - 92.145).abs() < 0.005, "{north_south}");
}

fn ascii(text: &str) -> Result<terralod_core::io::Loaded, Problem> {
    decode(text.as_bytes(), Format::AsciiGrid, &LoadOptions::default())
}

#[test]
fn ascii_header_variants_are_accepted() {
    let text = "NCOLS 3\r\nNRows 2\r\nXLLCENTER 500000\r\nyllcenter 4000000\r\nDX 10\r\ndy 20\r\n\
                1 2.5 -3e1\r\n4\r\n5 6\r\n";
    let loaded = ascii(text).unwrap();
    assert_eq!(
        loaded.heightfield.samples(),
        &Samples::F32(vec![1.0, 2.5, -30.0, 4.0, 5.0, 6.0])
    );
    assert_eq!(loaded.source.spacing_m, Some((10.0, 20.0)));
    assert_eq!(loaded.source.nodata_value, None);
    assert!(
        loaded
            .source
            .spacing_note
            .unwrap()
            .contains("assumed metres")
    );

    let text = "\u{feff}ncols 2\nnrows 2\ncellsize 5\nNODATA_value -9999\nxllcorner 0\nyllcorner 0\n1 -9999\nnan 3\n";
    let loaded = ascii(text).unwrap();
    assert_eq!(loaded.heightfield.nodata_filled(), 2);
    assert_eq!(loaded.source.nodata_value, Some(-9999.0));
    assert_eq!(loaded.heightfield.mapping().cell_size, 5.0);
}

#[test]
fn ascii_value_count_and_value_errors_are_precise() {
    let header = "ncols 3\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n";
    let problem = ascii(&format!("{header}1 2 3\n4 5\n")).unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::ValueCount {
                expected: 6,
                actual: 5
            }
        ),
        "{problem:?}"
    );
    let problem = ascii(&format!("{header}1 2 3\n4 5 6\n7\n")).unwrap_err();
    assert!(
        matches!(
            problem,
            Problem::ValueCount {
                expected: 6,
                actual: 7
            }
        ),
        "{problem:?}"
    );
    let problem = ascii(&format!("{header}1 2 3\n4 x5 6\n")).unwrap_err();
    assert!(
        matches!(&problem, Problem::AsciiValue { col: 1, row: 1, token } if token == "x5"),
        "{problem:?}"
    );
    let problem = ascii(&format!("{header}1 2 3\n4 inf 6\n")).unwrap_err();
    assert!(
        matches!(problem, Problem::Infinite { col: 1, row: 1, .. }),
        "{problem:?}"
    );
}

#[test]
fn ascii_header_errors_name_the_line() {
    let cases = [
        ("nrows 2\ncellsize 1\n1 2 3 4\n", "ncols is missing"),
        ("ncols 2\nnrows 2\n1 2 3 4\n", "cellsize"),
        (
            "ncols 2\nnrows 2\ncellsize 1\nbogus 3\n1 2 3 4\n",
            "line 4: unknown key \"bogus\"",
        ),
        (
            "ncols 2\nncols 2\nnrows 2\ncellsize 1\n1 2 3 4\n",
            "line 2: key ncols appears twice",
        ),
        (
            "ncols 2.5\nnrows 2\ncellsize 1\n1 2 3 4\n",
            "not a whole number",
        ),
        (
            "ncols 2\nnrows 2\ncellsize -1\n1 2 3 4\n",
            "must be positive",
        ),
        ("ncols 2\nnrows 2\ncellsize\n1 2 3 4\n", "has no value"),
        (
            "ncols 2 3\nnrows 2\ncellsize 1\n1 2 3 4\n",
            "more than one value",
        ),
        (
            "ncols two\nnrows 2\ncellsize 1\n1 2 3 4\n",
            "is not a number",
        ),
    ];
    for (text, expected) in cases {
        let problem = ascii(text).unwrap_err();
        assert!(
            problem.to_string().contains(expected),
            "{text:?}: {problem}"
        );
    }
}

#[test]
fn ascii_grid_spacing_uses_a_prj_sidecar() {
    let dir = scratch_dir("asc-prj");
    let grid = "ncols 2\nnrows 2\nxllcorner 100\nyllcorner 200\ncellsize 0.5\n1 2\n3 4\n";
    let path = dir.join("feet.asc");
    std::fs::write(&path, grid).unwrap();
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.source.spacing_m, Some((0.5, 0.5)));
    std::fs::write(
        dir.join("feet.prj"),
        "PROJCS[\"x\",GEOGCS[\"y\"],UNIT[\"Foot\",0.3048]]",
    )
    .unwrap();
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.source.spacing_m, Some((0.5 * 0.3048, 0.5 * 0.3048)));
    assert!(loaded.source.crs.unwrap().starts_with("projected"));

    let geographic = "ncols 2\nnrows 2\nxllcorner 10\nyllcorner 59.5\ncellsize 0.5\n1 2\n3 4\n";
    let path = dir.join("degrees.asc");
    std::fs::write(&path, geographic).unwrap();
    std::fs::write(
        dir.join("degrees.prj"),
        "GEOGCS[\"WGS 84\",DATUM[\"WGS_1984\"]]",
    )
    .unwrap();
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    let (east_west, north_south) = loaded.source.spacing_m.unwrap();
    assert!((east_west - 0.5 * 111_320.0 * 60f64.to_radians().cos()).abs() < 1e-6);
    assert!((north_south - 0.5 * 110_574.0).abs() < 1e-6);
}
