//! GeoTIFFs imported by windows (`TiffFileSource`, what `terralod import` uses past
//! `--max-samples`): the same files as the import of the whole-file loader's heightfield,
//! for strips and tiles, compressed or not, every stored type and the file's spacing;
//! holes and damaged chunks are errors that name the file and the sample.

mod io_common;

use io_common::*;
use std::path::{Path, PathBuf};
use terralod_core::io::{LoadOptions, load};
use terralod_core::tiles::{ImportOptions, ImportSource, TiffFileSource, import_source};
use tiff::encoder::{Compression, DeflateLevel, colortype};

/// Imports the GeoTIFF at `path` twice, loaded whole and by windows, and checks that both
/// write the same files (more than one level, so strided windows are read too).
fn assert_same_import(path: &Path, tile_cells: u32) {
    let whole = load(path, &LoadOptions::default())
        .expect("the loader reads it")
        .heightfield;
    let windows = TiffFileSource::open(path).expect("the windowed source opens it");
    assert_eq!(windows.mapping(), whole.mapping(), "{}", path.display());
    assert_eq!(
        (windows.width(), windows.height()),
        (whole.width(), whole.height())
    );
    assert_imports_alike(path, &whole, &windows, tile_cells);
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("a writable scratch directory");
    path
}

/// The error of importing `path` by windows into `out` (which must fail).
fn windowed_import_error(path: &Path, out: &Path) -> String {
    let source = TiffFileSource::open(path).expect("the first chunk is intact");
    import_source(
        &source,
        out,
        &ImportOptions::with_tile_cells(16),
        &|_, _| {},
    )
    .expect_err("the import fails")
    .to_string()
}

/// A rough surface: neighbouring samples differ, so every tile has its own errors.
fn rough(col: u32, row: u32) -> f32 {
    let h = (col.wrapping_mul(2_654_435_761) ^ row.wrapping_mul(40_503)) % 5000;
    h as f32 * 0.25 + (col + row) as f32
}

#[test]
fn strips_import_as_the_loaded_file_does() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (width, height) = (301u32, 203u32);
    let heights: Vec<f32> = (0..height)
        .flat_map(|r| (0..width).map(move |c| rough(c, r)))
        .collect();
    let integers: Vec<u16> = heights.iter().map(|&h| h as u16).collect();
    let signed: Vec<i16> = heights.iter().map(|&h| h as i16 - 1000).collect();
    let size = (width, height);
    let deflate = Compression::Deflate(DeflateLevel::Balanced);
    for (name, bytes) in [
        (
            "f32.tif",
            encoded_strips::<colortype::Gray32Float>(
                Compression::Uncompressed,
                size,
                7,
                &heights,
                None,
            ),
        ),
        (
            "deflate_u16.tif",
            encoded_strips::<colortype::Gray16>(deflate, size, 10, &integers, None),
        ),
        (
            "i16.tif",
            encoded_strips::<colortype::GrayI16>(
                Compression::Uncompressed,
                size,
                64,
                &signed,
                None,
            ),
        ),
    ] {
        let path = write(dir.path(), name, &bytes);
        assert_same_import(&path, 32);
    }
}

/// RowsPerStrip may exceed the image ("2^32 − 1: one strip"): one chunk row.
#[test]
fn a_strip_claiming_more_rows_than_the_image_is_one_chunk_row() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (width, height) = (70u32, 50u32);
    let mut tags = gray_tags((width, height), (16, 1));
    tags.push((tag::ROWS_PER_STRIP, TagValue::Long(vec![u32::MAX])));
    let data: Vec<u8> = (0..height)
        .flat_map(|r| (0..width).map(move |c| rough(c, r) as u16))
        .flat_map(u16::to_le_bytes)
        .collect();
    let bytes = tiff_by_hand(
        false,
        tags,
        tag::STRIP_OFFSETS,
        tag::STRIP_BYTE_COUNTS,
        &[data],
    );
    let path = write(dir.path(), "all_rows.tif", &bytes);
    assert_same_import(&path, 16);
}

#[test]
fn tiles_import_as_the_loaded_file_does_with_the_files_spacing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // Projected, metres: 12.5 × 12.5 m cells.
    let geo = || {
        vec![
            (
                tag::MODEL_PIXEL_SCALE,
                TagValue::Double(vec![12.5, 12.5, 0.0]),
            ),
            (
                tag::MODEL_TIEPOINT,
                TagValue::Double(vec![0.0, 0.0, 0.0, 500_000.0, 4_000_000.0, 0.0]),
            ),
            (
                tag::GEO_KEY_DIRECTORY,
                TagValue::Short(vec![1, 1, 0, 2, 1024, 0, 1, 1, 3076, 0, 1, 9001]),
            ),
        ]
    };
    let size = (300, 211);
    let cases = [
        // u8 is widened to u16, int32 and float64 become f32, as the loader does.
        ("u8.tif", (8, 1), 16),
        ("u16.tif", (16, 1), 32),
        ("f32.tif", (32, 3), 64),
        ("i32.tif", (32, 2), 48),
        ("f64.tif", (64, 3), 32),
    ];
    for (name, format, tile) in cases {
        let bytes = tiled_tiff(false, size, tile, format, geo(), |c, r| {
            let h = rough(c, r);
            match format {
                (8, _) => vec![(h as u32 % 256) as u8],
                (16, _) => (h as u16).to_le_bytes().to_vec(),
                (32, 3) => h.to_le_bytes().to_vec(),
                (32, _) => (h as i32 - 700).to_le_bytes().to_vec(),
                _ => (f64::from(h) * 1.001).to_le_bytes().to_vec(),
            }
        });
        let path = write(dir.path(), name, &bytes);
        let source = TiffFileSource::open(&path).expect("opens");
        assert_eq!(source.mapping().cell_size, 12.5, "{name}");
        assert!(source.info().crs.is_some(), "{name}");
        assert_same_import(&path, 16);
    }
}

#[test]
fn real_geotiffs_import_as_loaded() {
    let mut compared = 0;
    let names = ["olinda_dem_111x111_f32.tif", "whitebox_dem_237x188_f32.tif"];
    for name in names {
        let Some(path) = shared_data(name) else {
            continue;
        };
        if load(&path, &LoadOptions::default())
            .expect("loads")
            .heightfield
            .nodata_filled()
            > 0
        {
            // Holes are filled only when loaded whole (see the next test).
            assert!(TiffFileSource::open(&path).is_ok());
            continue;
        }
        assert_same_import(&path, 16);
        compared += 1;
    }
    if names.iter().all(|name| shared_data(name).is_some()) {
        assert!(compared > 0, "a real file without holes was compared");
    }
}

#[test]
fn holes_and_damaged_chunks_are_errors_naming_the_file_and_sample() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (width, height) = (40u32, 30u32);
    let mut heights: Vec<f32> = (0..width * height).map(|i| i as f32).collect();
    heights[(17 * width + 23) as usize] = -9999.0;
    let bytes = encoded_strips::<colortype::Gray32Float>(
        Compression::Uncompressed,
        (width, height),
        4,
        &heights,
        Some("-9999"),
    );
    let path = write(dir.path(), "hole.tif", &bytes);
    let message = windowed_import_error(&path, &dir.path().join("out"));
    assert!(
        message.contains("hole.tif")
            && message.contains("column 23, row 17")
            && message.contains("nodata"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join("out")).map_or(0, |d| d.count()),
        0,
        "nothing is left of a failed import"
    );

    // An infinity is refused as the loader refuses it.
    let mut infinite = heights.clone();
    infinite[(17 * width + 23) as usize] = f32::INFINITY;
    let bytes = encoded_strips::<colortype::Gray32Float>(
        Compression::Uncompressed,
        (width, height),
        4,
        &infinite,
        None,
    );
    let path = write(dir.path(), "infinite.tif", &bytes);
    let message = windowed_import_error(&path, &dir.path().join("out"));
    assert!(
        message.contains("infinite.tif") && message.contains("column 23, row 17 is inf"),
        "{message}"
    );

    // A tile whose bytes are cut short (the file ends inside its table) is refused at open.
    let tiled = tiled_tiff(false, (40, 30), 16, (16, 1), vec![], |c, r| {
        ((c + r) as u16).to_le_bytes().to_vec()
    });
    let cut = write(dir.path(), "cut.tif", &tiled[..tiled.len() - 100]);
    let error = TiffFileSource::open(&cut).expect_err("a truncated file is refused");
    assert!(
        error.to_string().contains("cut.tif") && error.to_string().contains("truncated"),
        "{error}"
    );

    // A Deflate strip whose bytes are damaged fails the import that reads it, naming the
    // file; the first strip still opens.
    let values: Vec<u16> = (0..width * height).map(|i| (i * 7 % 1000) as u16).collect();
    let mut deflated = encoded_strips::<colortype::Gray16>(
        Compression::Deflate(DeflateLevel::Balanced),
        (width, height),
        4,
        &values,
        None,
    );
    let middle = deflated.len() / 2;
    deflated[middle - 16..middle + 16].fill(0xA5);
    let path = write(dir.path(), "damaged.tif", &deflated);
    let message = windowed_import_error(&path, &dir.path().join("damaged"));
    assert!(message.contains("damaged.tif"), "{message}");
}

/// A header claiming strips or tiles too large to hold one at a time is refused before a
/// sample is decoded (a lying one would otherwise ask for terabytes).
#[test]
fn chunks_too_large_for_windows_are_refused_before_decoding() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (width, height) = (9000u32, 9000u32);
    let mut tags = gray_tags((width, height), (32, 3));
    // Deflate: a few bytes may claim any number of samples.
    tags.retain(|(tag, _)| *tag != tag::COMPRESSION);
    tags.push((tag::COMPRESSION, TagValue::Short(vec![8])));
    tags.push((tag::ROWS_PER_STRIP, TagValue::Long(vec![height])));
    let bytes = tiff_by_hand(
        false,
        tags,
        tag::STRIP_OFFSETS,
        tag::STRIP_BYTE_COUNTS,
        &[vec![0x78, 0x9c, 0x03, 0x00]],
    );
    let path = write(dir.path(), "one_strip.tif", &bytes);
    assert_eq!(
        TiffFileSource::claimed_size(&path).expect("a header"),
        (9000, 9000)
    );
    let error = TiffFileSource::open(&path).expect_err("a 309 MiB strip is refused");
    let message = error.to_string();
    assert!(
        message.contains("one_strip.tif") && message.contains("re-encode"),
        "{message}"
    );
}
