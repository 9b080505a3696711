//! Round trips against brute-force recomputation, and fault injection on every file.

use super::*;
use crate::heightfield::{Heightfield, Samples, WorldMapping};
use std::path::Path;

/// A rough pseudo-random field (an LCG), so every tile has its own error.
fn field(width: u32, height: u32, sample_type: SampleType, seed: u64) -> Heightfield {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as u32
    };
    let count = (width * height) as usize;
    let samples = match sample_type {
        SampleType::U16 => Samples::U16((0..count).map(|_| (next() % 4000) as u16).collect()),
        SampleType::I16 => {
            Samples::I16((0..count).map(|_| (next() % 3000) as i16 - 1500).collect())
        }
        SampleType::F32 => Samples::F32(
            (0..count)
                .map(|_| (next() % 100_000) as f32 * 0.037)
                .collect(),
        ),
    };
    Heightfield::new(width, height, samples)
        .and_then(|f| {
            f.with_mapping(WorldMapping {
                cell_size: 2.5,
                height_scale: -0.25,
                height_offset: 100.0,
            })
        })
        .expect("a valid test field")
}

fn import_into(field: &Heightfield, dir: &Path, tile_cells: u32) -> ImportSummary {
    let options = ImportOptions {
        tile_cells,
        force: false,
    };
    import(field, dir, &options, &|_, _| {}).expect("import succeeds")
}

/// Level-`level` sample `(col, row)` straight from the definition: the source sample at
/// `(col · 2^level, row · 2^level)`, clamped to the grid.
fn level_sample(field: &Heightfield, level: u32, col: u64, row: u64) -> f64 {
    let c = (col << level).min(u64::from(field.width() - 1)) as u32;
    let r = (row << level).min(u64::from(field.height() - 1)) as u32;
    f64::from(field.raw(c, r))
}

/// The coarser level's surface at level-`level` position `(col, row)`, by bilinear
/// interpolation over level `level + 1`, and the two triangulations of the coarse cell.
fn coarse_surfaces(field: &Heightfield, level: u32, col: u64, row: u64) -> [f64; 3] {
    let coarse = |c: u64, r: u64| level_sample(field, level + 1, c, r);
    let (c0, r0) = (col / 2, row / 2);
    let (fx, fz) = ((col % 2) as f64 * 0.5, (row % 2) as f64 * 0.5);
    let (a, b, c, d) = (
        coarse(c0, r0),
        coarse(c0 + 1, r0),
        coarse(c0, r0 + 1),
        coarse(c0 + 1, r0 + 1),
    );
    let bilinear =
        a * (1.0 - fx) * (1.0 - fz) + b * fx * (1.0 - fz) + c * (1.0 - fx) * fz + d * fx * fz;
    if fx > 0.0 && fz > 0.0 {
        [bilinear, 0.5 * (a + d), 0.5 * (b + c)]
    } else {
        [bilinear; 3]
    }
}

fn sample_types() -> [SampleType; 3] {
    [SampleType::U16, SampleType::I16, SampleType::F32]
}

#[test]
fn level_grids_halve_down_to_one_tile() {
    let grids = level_grids(4097, 2049, 256);
    assert_eq!(grids.len(), 5);
    assert_eq!(
        grids[0],
        LevelGrid {
            width: 4097,
            height: 2049,
            tiles_x: 16,
            tiles_y: 8
        }
    );
    assert_eq!((grids[1].width, grids[1].height), (2049, 1025));
    assert_eq!(grids[4].tiles(), 1);
    // An even width: the last column is padded at coarser levels.
    let grids = level_grids(10, 3, 2);
    assert_eq!(
        grids.iter().map(|g| g.width).collect::<Vec<_>>(),
        [10, 6, 4, 3]
    );
    assert_eq!(level_grids(2, 2, 2).len(), 1);
}

#[test]
fn round_trip_matches_the_source_and_a_brute_force_recomputation() {
    let cases = [
        (37, 21, 8),
        (65, 65, 16),
        (2, 2, 2),
        (130, 257, 64),
        (9, 40, 4),
    ];
    for (case, &(width, height, cells)) in cases.iter().enumerate() {
        for sample_type in sample_types() {
            let source = field(width, height, sample_type, case as u64);
            let dir = tempfile::tempdir().expect("a temporary directory");
            let summary = import_into(&source, dir.path(), cells);
            let terrain = TiledTerrain::open(dir.path()).expect("the import opens");
            let header = terrain.header();
            assert_eq!(header, &summary.header);
            assert_eq!(header.sample_type, sample_type);
            assert_eq!((header.width, header.height), (width, height));
            assert_eq!(header.mapping, source.mapping());
            let (lo, hi) = source.world_range();
            assert!(header.min_height <= lo && header.max_height >= hi);
            let scale = f64::from(source.mapping().height_scale);
            let offset = f64::from(source.mapping().height_offset);
            let coarsest = header.levels.len() as u32 - 1;
            for (level, grid) in header.levels.iter().enumerate() {
                let level = level as u32;
                for ty in 0..grid.tiles_y {
                    for tx in 0..grid.tiles_x {
                        let tile = terrain.read_tile(level, tx, ty).expect("a valid tile");
                        let side = u64::from(tile.side);
                        assert_eq!(tile.samples.len() as u64, side * side);
                        let (mut min, mut max, mut error) =
                            (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
                        for j in 0..side {
                            for i in 0..side {
                                let col = u64::from(tx) * u64::from(cells) + i;
                                let row = u64::from(ty) * u64::from(cells) + j;
                                let raw = level_sample(&source, level, col, row);
                                let stored = f64::from(tile.samples.get((j * side + i) as usize));
                                assert_eq!(
                                    stored, raw,
                                    "level {level} tile ({tx}, {ty}) ({i}, {j})"
                                );
                                let world = raw * scale + offset;
                                min = min.min(world);
                                max = max.max(world);
                                if level < coarsest {
                                    for surface in coarse_surfaces(&source, level, col, row) {
                                        error = error.max((raw - surface).abs() * scale.abs());
                                    }
                                }
                            }
                        }
                        assert!(
                            f64::from(tile.min_height) <= min
                                && min - f64::from(tile.min_height) < 1e-3
                        );
                        assert!(
                            f64::from(tile.max_height) >= max
                                && f64::from(tile.max_height) - max < 1e-3
                        );
                        assert!(
                            f64::from(tile.error) >= error && f64::from(tile.error) - error < 1e-3,
                            "level {level} tile ({tx}, {ty}): stored {} brute force {error}",
                            tile.error
                        );
                    }
                }
                let assembled = terrain.to_heightfield(level, u64::MAX).expect("fits");
                assert_eq!(
                    (assembled.width(), assembled.height()),
                    (grid.width, grid.height)
                );
                assert_eq!(
                    assembled.mapping().cell_size,
                    source.mapping().cell_size * (1u32 << level) as f32
                );
                for row in 0..grid.height {
                    for col in 0..grid.width {
                        assert_eq!(
                            f64::from(assembled.raw(col, row)),
                            level_sample(&source, level, u64::from(col), u64::from(row))
                        );
                    }
                }
                if level == 0 {
                    assert_eq!(assembled.samples(), source.samples());
                }
            }
            assert_eq!(
                terrain
                    .read_tile(coarsest + 1, 0, 0)
                    .unwrap_err()
                    .to_string(),
                TileError::NoSuchTile {
                    level: coarsest + 1,
                    tx: 0,
                    ty: 0
                }
                .to_string()
            );
        }
    }
}

#[test]
fn to_heightfield_refuses_a_level_over_the_limit_before_reading() {
    let source = field(33, 33, SampleType::U16, 7);
    let dir = tempfile::tempdir().expect("a temporary directory");
    import_into(&source, dir.path(), 8);
    let terrain = TiledTerrain::open(dir.path()).expect("opens");
    assert!(matches!(
        terrain.to_heightfield(0, 1000),
        Err(TileError::TooLargeForMemory { samples: 1089, .. })
    ));
    assert_eq!(terrain.to_heightfield(1, 1000).expect("fits").width(), 17);
}

/// A small import whose files the fault tests damage.
fn damaged_copy() -> (tempfile::TempDir, TiledTerrain) {
    let source = field(33, 17, SampleType::F32, 3);
    let dir = tempfile::tempdir().expect("a temporary directory");
    import_into(&source, dir.path(), 8);
    let terrain = TiledTerrain::open(dir.path()).expect("opens");
    (dir, terrain)
}

fn rewrite(path: &Path, change: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(path).expect("readable");
    change(&mut bytes);
    std::fs::write(path, bytes).expect("writable");
}

/// Stores a fixed checksum over `bytes[..end]` at `end`, as a liar would.
fn fix_checksum(bytes: &mut [u8], end: usize) {
    let checksum = crc32fast::hash(&bytes[..end]);
    bytes[end..end + 4].copy_from_slice(&checksum.to_le_bytes());
}

#[test]
fn a_flipped_payload_byte_is_a_payload_checksum_error_naming_the_tile() {
    let (_dir, terrain) = damaged_copy();
    let path = terrain.tile_path(0, 1, 1);
    rewrite(&path, |bytes| bytes[TILE_HEADER_LEN + 100] ^= 0x10);
    match terrain.read_tile(0, 1, 1) {
        Err(
            error @ TileError::Corrupt {
                reason: Corruption::PayloadChecksum { .. },
                ..
            },
        ) => assert!(error.to_string().contains(&path.display().to_string())),
        other => panic!("expected a payload checksum error, got {other:?}"),
    }
    assert!(
        terrain.read_tile(0, 0, 1).is_ok(),
        "other tiles stay readable"
    );
}

#[test]
fn truncated_extended_and_deleted_tiles_are_typed_errors() {
    let (_dir, terrain) = damaged_copy();
    let path = terrain.tile_path(0, 2, 0);
    rewrite(&path, |bytes| bytes.truncate(bytes.len() - 7));
    assert!(matches!(
        terrain.read_tile(0, 2, 0),
        Err(TileError::Corrupt { path: p, reason: Corruption::Length { .. } }) if p == path
    ));
    let path = terrain.tile_path(0, 3, 0);
    rewrite(&path, |bytes| bytes.extend_from_slice(&[0; 3]));
    assert!(matches!(
        terrain.read_tile(0, 3, 0),
        Err(TileError::Corrupt { path: p, reason: Corruption::Length { .. } }) if p == path
    ));
    let path = terrain.tile_path(1, 0, 0);
    std::fs::write(&path, b"").expect("writable");
    assert!(matches!(
        terrain.read_tile(1, 0, 0),
        Err(TileError::Corrupt {
            reason: Corruption::Length { actual: 0, .. },
            ..
        })
    ));
    let path = terrain.tile_path(1, 1, 0);
    std::fs::remove_file(&path).expect("removable");
    assert!(matches!(terrain.read_tile(1, 1, 0), Err(TileError::Missing { path: p }) if p == path));
    assert!(terrain.to_heightfield(1, u64::MAX).is_err());
}

#[test]
fn a_tile_header_that_lies_is_refused_even_with_a_fixed_checksum() {
    let (_dir, terrain) = damaged_copy();
    let path = terrain.tile_path(0, 0, 0);
    // The side field (bytes 28..32) claims a huge tile; the checksum is made to agree.
    rewrite(&path, |bytes| {
        bytes[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
        fix_checksum(bytes, TILE_HEADER_LEN - 4);
    });
    assert!(matches!(
        terrain.read_tile(0, 0, 0),
        Err(TileError::Corrupt {
            reason: Corruption::Field { field: "side", .. },
            ..
        })
    ));
    // A tile copied over another one: right format, wrong coordinates.
    std::fs::copy(terrain.tile_path(0, 2, 1), terrain.tile_path(0, 1, 1)).expect("copy");
    assert!(matches!(
        terrain.read_tile(0, 1, 1),
        Err(TileError::Corrupt {
            reason: Corruption::Field {
                field: "tile column",
                ..
            },
            ..
        })
    ));
    // A NaN error with a fixed checksum.
    let path = terrain.tile_path(0, 3, 1);
    rewrite(&path, |bytes| {
        bytes[40..44].copy_from_slice(&f32::NAN.to_le_bytes());
        fix_checksum(bytes, TILE_HEADER_LEN - 4);
    });
    assert!(matches!(
        terrain.read_tile(0, 3, 1),
        Err(TileError::Corrupt {
            reason: Corruption::NonFinite { what: "error" },
            ..
        })
    ));
}

#[test]
fn every_single_byte_change_of_a_tile_or_the_header_is_caught() {
    let (dir, terrain) = damaged_copy();
    let path = terrain.tile_path(1, 1, 0);
    let original = std::fs::read(&path).expect("readable");
    for at in 0..original.len() {
        let mut bytes = original.clone();
        bytes[at] ^= 0xA5;
        std::fs::write(&path, &bytes).expect("writable");
        assert!(
            terrain.read_tile(1, 1, 0).is_err(),
            "byte {at} changed unnoticed"
        );
    }
    let header = dir.path().join(HEADER_FILE);
    let original = std::fs::read(&header).expect("readable");
    for at in 0..original.len() {
        let mut bytes = original.clone();
        bytes[at] ^= 0xA5;
        std::fs::write(&header, &bytes).expect("writable");
        let error = TiledTerrain::open(dir.path()).expect_err("a changed header is refused");
        assert!(
            error.to_string().contains(&header.display().to_string()),
            "{error}"
        );
    }
}

#[test]
fn a_corrupt_or_lying_header_gives_its_typed_error() {
    let (dir, _terrain) = damaged_copy();
    let header = dir.path().join(HEADER_FILE);
    let original = std::fs::read(&header).expect("readable");
    let open_after = |change: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = original.clone();
        change(&mut bytes);
        std::fs::write(&header, &bytes).expect("writable");
        TiledTerrain::open(dir.path()).expect_err("refused")
    };
    let end = original.len() - 4;
    assert!(matches!(
        open_after(&|b| b[0] = b'X'),
        TileError::BadMagic { .. }
    ));
    assert!(matches!(
        open_after(&|b| b[8] = 2),
        TileError::UnsupportedVersion { found: 2, .. }
    ));
    assert!(matches!(
        open_after(&|b| b[20] ^= 1),
        TileError::Corrupt {
            reason: Corruption::HeaderChecksum { .. },
            ..
        }
    ));
    // Lies with a fixed checksum: an absurd width, a width the levels disagree with, a
    // tile size that is not a power of two.
    assert!(matches!(
        open_after(&|b| {
            b[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
            fix_checksum(b, end);
        }),
        TileError::OutOfRange { what: "width", .. }
    ));
    assert!(matches!(
        open_after(&|b| {
            b[16..20].copy_from_slice(&34u32.to_le_bytes());
            fix_checksum(b, end);
        }),
        TileError::Inconsistent { .. }
    ));
    assert!(matches!(
        open_after(&|b| {
            b[24..28].copy_from_slice(&12u32.to_le_bytes());
            fix_checksum(b, end);
        }),
        TileError::Inconsistent { .. }
    ));
    assert!(matches!(
        open_after(&|b| b.truncate(30)),
        TileError::Corrupt {
            reason: Corruption::Length { .. },
            ..
        }
    ));
    assert!(matches!(
        open_after(&|b| b.resize(100_000, 0)),
        TileError::Corrupt {
            reason: Corruption::Length { .. },
            ..
        }
    ));
}

#[test]
fn an_import_without_its_header_is_refused_as_unfinished() {
    let (dir, _terrain) = damaged_copy();
    std::fs::remove_file(dir.path().join(HEADER_FILE)).expect("removable");
    assert!(matches!(
        TiledTerrain::open(dir.path()),
        Err(TileError::Unfinished { path }) if path == dir.path().join(HEADER_FILE)
    ));
    let empty = tempfile::tempdir().expect("a temporary directory");
    assert!(matches!(
        TiledTerrain::open(empty.path()),
        Err(TileError::Unfinished { .. })
    ));
}

#[test]
fn import_refuses_a_non_empty_directory_unless_forced() {
    let source = field(17, 17, SampleType::U16, 5);
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("notes.txt"), b"keep me").expect("writable");
    let refused = import(&source, dir.path(), &ImportOptions::default(), &|_, _| {});
    assert!(matches!(refused, Err(TileError::NotEmpty { path }) if path == dir.path()));
    assert!(!dir.path().join(HEADER_FILE).exists());
    // A second import over a finished one, forced, with another tile size.
    import_into(
        &field(17, 17, SampleType::U16, 6),
        &dir.path().join("out"),
        4,
    );
    let forced = ImportOptions {
        tile_cells: 8,
        force: true,
    };
    let out = dir.path().join("out");
    assert!(matches!(
        import(&source, &out, &ImportOptions::default(), &|_, _| {}),
        Err(TileError::NotEmpty { .. })
    ));
    import(&source, &out, &forced, &|_, _| {}).expect("forced import");
    let terrain = TiledTerrain::open(&out).expect("opens");
    assert_eq!(terrain.header().tile_cells, 8);
    assert_eq!(
        terrain.to_heightfield(0, u64::MAX).expect("fits").samples(),
        source.samples()
    );
}

#[test]
fn import_refuses_invalid_tile_sizes_and_reports_progress() {
    let source = field(17, 9, SampleType::I16, 1);
    let dir = tempfile::tempdir().expect("a temporary directory");
    for tile_cells in [0, 1, 3, 12, 8192] {
        let options = ImportOptions {
            tile_cells,
            force: false,
        };
        assert!(matches!(
            import(&source, dir.path(), &options, &|_, _| {}),
            Err(TileError::InvalidTileSize { .. })
        ));
    }
    let calls = std::sync::Mutex::new(Vec::new());
    let options = ImportOptions {
        tile_cells: 4,
        force: false,
    };
    let summary = import(&source, dir.path(), &options, &|done, total| {
        calls.lock().expect("not poisoned").push((done, total));
    })
    .expect("imports");
    let calls = calls.into_inner().expect("not poisoned");
    assert_eq!(calls.len() as u64, summary.tiles + 1);
    assert!(
        calls
            .iter()
            .any(|&(done, total)| done == total && total == summary.tiles)
    );
    assert_eq!(
        summary.bytes,
        dir_bytes(dir.path()),
        "the summary counts every byte written"
    );
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("readable")
        .map(|entry| {
            let entry = entry.expect("an entry");
            let metadata = entry.metadata().expect("metadata");
            if metadata.is_dir() {
                dir_bytes(&entry.path())
            } else {
                metadata.len()
            }
        })
        .sum()
}
