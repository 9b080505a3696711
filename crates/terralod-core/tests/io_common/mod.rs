//! Shared helpers of the loader tests: shared-data paths, scratch folders, and encoders that
//! build small PNG and TIFF files (including the tiled and interlaced layouts the crates'
//! encoders do not write).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

// The testkit's helper, compiled here too: the core's tests cannot depend on the testkit,
// which depends on the core.
#[path = "../../../terralod-testkit/src/files.rs"]
pub mod files;
use terralod_core::heightfield::Heightfield;
use terralod_core::io::{Format, LoadOptions, Loaded, Problem, decode};
use terralod_core::tiles::{ImportOptions, ImportSource, import, import_source};

/// Path of a file in `../shared/data`, or `None` after a visible SKIPPED message.
pub fn shared_data(name: &str) -> Option<PathBuf> {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data")).join(name);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!("SKIPPED: {} is absent", path.display());
        None
    }
}

/// The PNG spool files (`PngFileSource::spool`) left in `dir`.
pub fn spool_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("a readable directory")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with(".terralod-png-spool-"))
        })
        .collect()
}

/// An empty scratch folder for one test.
pub fn scratch_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("io-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch folder");
    dir
}

/// Imports the loaded `whole` and the windowed `source` of the file at `path` into two
/// temporary directories as `tile_cells`-cell tiles and checks that both write the same
/// files (more than two levels, so strided windows are read too).
pub fn assert_imports_alike(
    path: &Path,
    whole: &Heightfield,
    source: &dyn ImportSource,
    tile_cells: u32,
) {
    let options = ImportOptions::with_tile_cells(tile_cells);
    let (a, b) = (
        tempfile::tempdir().expect("a temporary directory"),
        tempfile::tempdir().expect("a temporary directory"),
    );
    let loaded = import(whole, a.path(), &options, &|_, _| {}).expect("whole import");
    assert!(loaded.header.levels.len() >= 3, "{}", path.display());
    import_source(source, b.path(), &options, &|_, _| {}).expect("windowed import");
    let (expected, actual) = (
        files::directory_files(a.path()),
        files::directory_files(b.path()),
    );
    assert_eq!(
        expected.keys().collect::<Vec<_>>(),
        actual.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &expected {
        assert!(
            actual[name] == *bytes,
            "{}: {} differs",
            path.display(),
            name.display()
        );
    }
}

/// Decodes with default options.
pub fn decode_default(bytes: &[u8], format: Format) -> Result<Loaded, Problem> {
    decode(bytes, format, &LoadOptions::default())
}

/// Raw samples of a loaded heightfield as f32, row-major.
pub fn raw_values(loaded: &Loaded) -> Vec<f32> {
    let field = &loaded.heightfield;
    (0..field.height())
        .flat_map(|row| (0..field.width()).map(move |col| field.raw(col, row)))
        .collect()
}

/// A PNG made by the `png` crate's encoder.
pub fn png_bytes(
    width: u32,
    height: u32,
    color: png::ColorType,
    depth: png::BitDepth,
    data: &[u8],
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(color);
    encoder.set_depth(depth);
    let mut writer = encoder.write_header().expect("png header");
    writer.write_image_data(data).expect("png data");
    writer.finish().expect("png finish");
    out
}

/// 16-bit samples as the big-endian bytes PNG stores.
pub fn be_bytes(values: &[u16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in bytes {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

/// zlib stream of stored (uncompressed) deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = if data.is_empty() {
        vec![&[]]
    } else {
        data.chunks(65535).collect()
    };
    for (i, block) in blocks.iter().enumerate() {
        out.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend(adler32(data).to_be_bytes());
    out
}

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend((data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend(crc.to_be_bytes());
}

/// An 8-bit gray Adam7-interlaced PNG, written by hand (the `png` encoder writes no
/// interlaced images).
pub fn interlaced_gray8_png(width: u32, height: u32, pixels: &[u8]) -> Vec<u8> {
    const PASSES: [(u32, u32, u32, u32); 7] = [
        (0, 0, 8, 8),
        (4, 0, 8, 8),
        (0, 4, 4, 8),
        (2, 0, 4, 4),
        (0, 2, 2, 4),
        (1, 0, 2, 2),
        (0, 1, 1, 2),
    ];
    let mut raw = Vec::new();
    for (x0, y0, dx, dy) in PASSES {
        if x0 >= width || y0 >= height {
            continue;
        }
        for y in (y0..height).step_by(dy as usize) {
            raw.push(0); // filter: none
            for x in (x0..width).step_by(dx as usize) {
                raw.push(pixels[(y * width + x) as usize]);
            }
        }
    }
    png_from_raw_stream(width, height, 0, 8, 1, &raw)
}

/// A PNG from an unfiltered scanline stream (filter bytes included) and header fields.
pub fn png_from_raw_stream(
    width: u32,
    height: u32,
    color: u8,
    depth: u8,
    interlace: u8,
    raw: &[u8],
) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend(width.to_be_bytes());
    header.extend(height.to_be_bytes());
    header.extend([depth, color, 0, 0, interlace]);
    png_chunk(&mut out, b"IHDR", &header);
    png_chunk(&mut out, b"IDAT", &zlib_stored(raw));
    png_chunk(&mut out, b"IEND", &[]);
    out
}

/// A PNG header that claims `width × height` samples, with a single tiny IDAT.
pub fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    png_from_raw_stream(width, height, 0, 8, 0, &[0, 0, 0])
}

/// Values of one TIFF tag for [`tiff_by_hand`].
#[derive(Clone, Debug)]
pub enum TagValue {
    Short(Vec<u16>),
    Long(Vec<u32>),
    Double(Vec<f64>),
    Ascii(String),
}

/// A baseline TIFF built byte by byte: `tags` (sorted here) plus chunk data appended after
/// the directory; `chunks` are the strip or tile payloads whose offsets and byte counts go
/// into the tags named by `offsets_tag` and `counts_tag`.
pub fn tiff_by_hand(
    big_endian: bool,
    mut tags: Vec<(u16, TagValue)>,
    offsets_tag: u16,
    counts_tag: u16,
    chunks: &[Vec<u8>],
) -> Vec<u8> {
    let u16b = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let u32b = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let f64b = |v: f64| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    // Offsets are placeholders now, fixed once the layout is known.
    tags.push((offsets_tag, TagValue::Long(vec![0; chunks.len()])));
    tags.push((
        counts_tag,
        TagValue::Long(chunks.iter().map(|c| c.len() as u32).collect()),
    ));
    tags.sort_by_key(|(tag, _)| *tag);
    let entries_len = 2 + tags.len() * 12 + 4;
    let directory_offset = 8u32;
    let extra_offset = directory_offset as usize + entries_len;
    let mut extra: Vec<u8> = Vec::new();
    let encoded: Vec<(u16, u16, u32, Vec<u8>)> = tags
        .iter()
        .map(|(tag, value)| match value {
            TagValue::Short(v) => (
                *tag,
                3,
                v.len() as u32,
                v.iter().flat_map(|&x| u16b(x)).collect(),
            ),
            TagValue::Long(v) => (
                *tag,
                4,
                v.len() as u32,
                v.iter().flat_map(|&x| u32b(x)).collect(),
            ),
            TagValue::Double(v) => (
                *tag,
                12,
                v.len() as u32,
                v.iter().flat_map(|&x| f64b(x)).collect(),
            ),
            TagValue::Ascii(s) => {
                let mut bytes = s.as_bytes().to_vec();
                bytes.push(0);
                (*tag, 2, bytes.len() as u32, bytes)
            }
        })
        .collect();
    // Place out-of-line values and remember where each went.
    let mut placements = Vec::new();
    for (_, _, _, bytes) in &encoded {
        if bytes.len() > 4 {
            placements.push(Some(extra_offset + extra.len()));
            extra.extend_from_slice(bytes);
            if extra.len() % 2 == 1 {
                extra.push(0);
            }
        } else {
            placements.push(None);
        }
    }
    let data_start = extra_offset + extra.len();
    let mut chunk_offsets = Vec::new();
    let mut position = data_start;
    for chunk in chunks {
        chunk_offsets.push(position as u32);
        position += chunk.len();
    }
    // Patch the chunk offsets into their value bytes.
    let offsets_bytes: Vec<u8> = chunk_offsets.iter().flat_map(|&x| u32b(x)).collect();
    let mut out = Vec::new();
    out.extend_from_slice(if big_endian { b"MM" } else { b"II" });
    out.extend(u16b(42));
    out.extend(u32b(directory_offset));
    out.extend(u16b(tags.len() as u16));
    for ((tag, kind, count, bytes), placement) in encoded.iter().zip(&placements) {
        let bytes = if *tag == offsets_tag {
            &offsets_bytes
        } else {
            bytes
        };
        out.extend(u16b(*tag));
        out.extend(u16b(*kind));
        out.extend(u32b(*count));
        match placement {
            Some(offset) => out.extend(u32b(*offset as u32)),
            None => {
                let mut inline = [0u8; 4];
                inline[..bytes.len()].copy_from_slice(bytes);
                out.extend(inline);
            }
        }
    }
    out.extend(u32b(0)); // no next directory
    // Out-of-line values, with the offsets tag patched too when it lives out of line.
    for ((tag, _, _, bytes), placement) in encoded.iter().zip(&placements) {
        if placement.is_some() {
            out.extend_from_slice(if *tag == offsets_tag {
                &offsets_bytes
            } else {
                bytes
            });
            if bytes.len() % 2 == 1 {
                out.push(0);
            }
        }
    }
    assert_eq!(out.len(), data_start);
    for chunk in chunks {
        out.extend_from_slice(chunk);
    }
    out
}

/// Tag numbers used by the hand-built TIFFs.
pub mod tag {
    pub const IMAGE_WIDTH: u16 = 256;
    pub const IMAGE_LENGTH: u16 = 257;
    pub const BITS_PER_SAMPLE: u16 = 258;
    pub const COMPRESSION: u16 = 259;
    pub const PHOTOMETRIC: u16 = 262;
    pub const STRIP_OFFSETS: u16 = 273;
    pub const SAMPLES_PER_PIXEL: u16 = 277;
    pub const ROWS_PER_STRIP: u16 = 278;
    pub const STRIP_BYTE_COUNTS: u16 = 279;
    pub const TILE_WIDTH: u16 = 322;
    pub const TILE_LENGTH: u16 = 323;
    pub const TILE_OFFSETS: u16 = 324;
    pub const TILE_BYTE_COUNTS: u16 = 325;
    pub const SAMPLE_FORMAT: u16 = 339;
    pub const MODEL_PIXEL_SCALE: u16 = 33550;
    pub const MODEL_TIEPOINT: u16 = 33922;
    pub const GEO_KEY_DIRECTORY: u16 = 34735;
    pub const GDAL_NODATA: u16 = 42113;
}

/// The tags of an uncompressed single-band image of `bits`-bit samples of `sample_format`.
pub fn gray_tags(
    (width, height): (u32, u32),
    (bits, sample_format): (u16, u16),
) -> Vec<(u16, TagValue)> {
    vec![
        (tag::IMAGE_WIDTH, TagValue::Long(vec![width])),
        (tag::IMAGE_LENGTH, TagValue::Long(vec![height])),
        (tag::BITS_PER_SAMPLE, TagValue::Short(vec![bits])),
        (tag::COMPRESSION, TagValue::Short(vec![1])),
        (tag::PHOTOMETRIC, TagValue::Short(vec![1])),
        (tag::SAMPLES_PER_PIXEL, TagValue::Short(vec![1])),
        (tag::SAMPLE_FORMAT, TagValue::Short(vec![sample_format])),
    ]
}

/// A single-strip, uncompressed, single-band TIFF of `bits`-bit samples (`sample_format`
/// 1 = unsigned, 2 = signed, 3 = float) with extra tags.
pub fn stripped_tiff(
    big_endian: bool,
    width: u32,
    height: u32,
    bits: u16,
    sample_format: u16,
    data: Vec<u8>,
    extra_tags: Vec<(u16, TagValue)>,
) -> Vec<u8> {
    let mut tags = gray_tags((width, height), (bits, sample_format));
    tags.push((tag::ROWS_PER_STRIP, TagValue::Long(vec![height])));
    tags.extend(extra_tags);
    tiff_by_hand(
        big_endian,
        tags,
        tag::STRIP_OFFSETS,
        tag::STRIP_BYTE_COUNTS,
        &[data],
    )
}

/// An uncompressed, single-band TIFF of `size` samples in `tile × tile` tiles (those on
/// the right and bottom partly padding, which holds 9999 where `value` would be read),
/// `bits`-bit samples of `sample_format` (1 = unsigned, 2 = signed, 3 = float), with
/// extra tags; `value(col, row)` gives each sample's bytes.
pub fn tiled_tiff(
    big_endian: bool,
    (width, height): (u32, u32),
    tile: u32,
    (bits, sample_format): (u16, u16),
    extra_tags: Vec<(u16, TagValue)>,
    value: impl Fn(u32, u32) -> Vec<u8>,
) -> Vec<u8> {
    let mut chunks = Vec::new();
    for tile_row in 0..height.div_ceil(tile) {
        for tile_col in 0..width.div_ceil(tile) {
            let mut chunk = Vec::new();
            for y in 0..tile {
                for x in 0..tile {
                    let (col, row) = (tile_col * tile + x, tile_row * tile + y);
                    // Padding carries a value that must never show up.
                    let (col, row) = if col < width && row < height {
                        (col, row)
                    } else {
                        (9999, 9999)
                    };
                    chunk.extend(value(col, row));
                }
            }
            chunks.push(chunk);
        }
    }
    let mut tags = gray_tags((width, height), (bits, sample_format));
    tags.push((tag::TILE_WIDTH, TagValue::Short(vec![tile as u16])));
    tags.push((tag::TILE_LENGTH, TagValue::Short(vec![tile as u16])));
    tags.extend(extra_tags);
    tiff_by_hand(
        big_endian,
        tags,
        tag::TILE_OFFSETS,
        tag::TILE_BYTE_COUNTS,
        &chunks,
    )
}

/// A stripped TIFF of `rows` rows per strip through the `tiff` crate's encoder, with a
/// nodata tag if given.
pub fn encoded_strips<C: tiff::encoder::colortype::ColorType>(
    compression: tiff::encoder::Compression,
    (width, height): (u32, u32),
    rows: u32,
    data: &[C::Inner],
    nodata: Option<&str>,
) -> Vec<u8>
where
    [C::Inner]: tiff::encoder::TiffValue,
{
    let mut out = std::io::Cursor::new(Vec::new());
    let mut encoder = tiff::encoder::TiffEncoder::new(&mut out)
        .unwrap()
        .with_compression(compression);
    let mut image = encoder.new_image::<C>(width, height).unwrap();
    image.rows_per_strip(rows).unwrap();
    if let Some(nodata) = nodata {
        image
            .encoder()
            .write_tag(tiff::tags::Tag::GdalNodata, nodata)
            .unwrap();
    }
    image.write_data(data).unwrap();
    out.into_inner()
}

/// f32 samples as TIFF bytes in the given order.
pub fn f32_bytes(values: &[f32], big_endian: bool) -> Vec<u8> {
    values
        .iter()
        .flat_map(|v| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        })
        .collect()
}

/// Makes a named pipe at `path` (with `mkfifo`); false, saying so, where that cannot be
/// done (the test then skips).
#[cfg(unix)]
pub fn make_fifo(path: &Path, test: &str) -> bool {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    let ok = made.is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: {test}: mkfifo is not available");
    }
    ok
}
