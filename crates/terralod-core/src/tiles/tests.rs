//! Round trips against brute-force recomputation, and fault injection on every file.

use super::blocks;
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
    let options = ImportOptions::with_tile_cells(tile_cells);
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
        // Two-cell tiles on a wide, short grid: 300 tiles a row at level 0 (wider than a
        // step of the import's least tiles), odd tile counts at several levels, ten levels;
        // and on a narrow, tall one: 2 tiles a row, 300 rows in three steps of 128 rows.
        (601, 23, 2),
        (5, 601, 2),
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

/// A window of a level is the level's samples there, read from the tiles it touches only
/// (across tile borders, at the last row and column, at every level and sample type), under
/// the level's mapping; a window outside the level, thinner than 2 samples or over the limit
/// is refused, and one over a damaged tile names it.
#[test]
fn a_window_of_a_level_is_its_samples_there() {
    for sample_type in sample_types() {
        let source = field(37, 29, sample_type, 5);
        let dir = tempfile::tempdir().expect("a temporary directory");
        import_into(&source, dir.path(), 8);
        let terrain = TiledTerrain::open(dir.path()).expect("opens");
        for level in 0..terrain.header().levels.len() as u32 {
            let whole = terrain.to_heightfield(level, u64::MAX).expect("fits");
            let (width, height) = (whole.width(), whole.height());
            let windows = [
                [0, 0, width, height],
                [0, 0, 2, 2],
                [width - 2, height - 2, 2, 2],
                [3, 5, 13, 11],
                [7, 1, width.saturating_sub(9), 2],
            ];
            let inside = |&[col, row, w, h]: &[u32; 4]| {
                w >= 2 && h >= 2 && col + w <= width && row + h <= height
            };
            for [col, row, w, h] in windows.into_iter().filter(inside) {
                let window = terrain
                    .window_heightfield(level, [col, row, w, h], u64::MAX)
                    .expect("inside the level");
                assert_eq!((window.width(), window.height()), (w, h));
                assert_eq!(window.mapping(), whole.mapping(), "level {level}");
                for j in 0..h {
                    for i in 0..w {
                        assert_eq!(
                            window.raw(i, j),
                            whole.raw(col + i, row + j),
                            "{sample_type:?} level {level} window {col},{row} {w}x{h} at {i},{j}"
                        );
                    }
                }
            }
        }
        for refused in [
            [36, 0, 2, 2],
            [0, 0, 1, 5],
            [0, 28, 4, 2],
            [u32::MAX, 0, 2, 2],
        ] {
            assert!(
                matches!(
                    terrain.window_heightfield(0, refused, u64::MAX),
                    Err(TileError::NoSuchWindow { .. })
                ),
                "{refused:?}"
            );
        }
        assert!(matches!(
            terrain.window_heightfield(0, [0, 0, 10, 10], 99),
            Err(TileError::TooLargeForMemory { samples: 100, .. })
        ));
        assert!(matches!(
            terrain.window_heightfield(9, [0, 0, 2, 2], u64::MAX),
            Err(TileError::NoSuchTile { level: 9, .. })
        ));
        // Only the tiles under the window are read: a damaged tile elsewhere is not seen.
        std::fs::remove_file(terrain.tile_path(0, 4, 3)).expect("the last tile exists");
        assert!(
            terrain
                .window_heightfield(0, [0, 0, 9, 9], u64::MAX)
                .is_ok()
        );
        let missing = terrain
            .window_heightfield(0, [30, 20, 7, 9], u64::MAX)
            .expect_err("the window reaches the deleted tile");
        assert!(missing.to_string().contains("4.tile"), "{missing}");
    }
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

/// `to_heightfield_standing_in`: a tile that cannot be read is interpolated from the next
/// coarser level that can (bilinearly, by the definition in `coarse_surfaces`), except the
/// samples it shares with a readable tile, which are exact; each failed tile is reported
/// once, and a chain unreadable up to the coarsest level is still an error. The exact
/// readers never stand in.
#[test]
fn unreadable_tiles_stand_in_from_the_coarser_level() {
    for sample_type in sample_types() {
        let source = field(33, 17, sample_type, 5);
        let dir = tempfile::tempdir().expect("a temporary directory");
        import_into(&source, dir.path(), 8);
        let terrain = TiledTerrain::open(dir.path()).expect("opens");
        let corrupt = terrain.tile_path(0, 1, 1);
        rewrite(&corrupt, |bytes| bytes[TILE_HEADER_LEN + 40] ^= 0x10);
        let missing = terrain.tile_path(0, 3, 0);
        std::fs::remove_file(&missing).expect("removable");
        assert!(terrain.to_heightfield(0, u64::MAX).is_err());

        let (assembled, stood_in) = terrain
            .to_heightfield_standing_in(0, u64::MAX)
            .expect("level 1 stands in");
        let named = |path: &Path| {
            stood_in.iter().any(|s| {
                s.fault.contains(&path.display().to_string()) && (s.level, s.from_level) == (0, 1)
            })
        };
        assert_eq!(stood_in.len(), 2, "{stood_in:?}");
        assert!(named(&corrupt) && named(&missing), "{stood_in:?}");
        let failed = [(1u32, 1u32), (3, 0)];
        let (tiles_x, tiles_y) = (4, 2);
        let readable = |c: u32, r: u32| {
            (0..tiles_y).any(|ty| {
                (0..tiles_x).any(|tx| {
                    (tx * 8..=tx * 8 + 8).contains(&c)
                        && (ty * 8..=ty * 8 + 8).contains(&r)
                        && !failed.contains(&(tx, ty))
                })
            })
        };
        let (mut exact, mut interpolated) = (0, 0);
        for r in 0..17 {
            for c in 0..33 {
                let got = f64::from(assembled.raw(c, r));
                if readable(c, r) {
                    assert_eq!(got, f64::from(source.raw(c, r)), "({c}, {r})");
                    exact += 1;
                } else {
                    let want = coarse_surfaces(&source, 0, u64::from(c), u64::from(r))[0];
                    let slack = match sample_type {
                        SampleType::F32 => 1e-3 * want.abs().max(1.0),
                        _ => 0.5,
                    };
                    assert!(
                        (got - want).abs() <= slack,
                        "({c}, {r}): {got} against {want}"
                    );
                    interpolated += 1;
                }
            }
        }
        // What only the failed tiles hold: the corrupt tile's 7 columns by 8 rows (its
        // south row is the level's last, in no other tile), the missing one's 8 by 8 (the
        // level's last column and first row).
        assert_eq!((exact, interpolated), (33 * 17 - 56 - 64, 56 + 64));

        // The level-1 tile over the corrupt one is unreadable too: level 2 stands in.
        let coarse = terrain.tile_path(1, 0, 0);
        rewrite(&coarse, |bytes| bytes[TILE_HEADER_LEN + 8] ^= 0x01);
        let (_, stood_in) = terrain
            .to_heightfield_standing_in(0, u64::MAX)
            .expect("level 2 stands in");
        assert!(
            stood_in
                .iter()
                .any(|s| s.fault.contains(&coarse.display().to_string())
                    && (s.level, s.from_level) == (1, 2)),
            "{stood_in:?}"
        );
        assert_eq!(stood_in.len(), 3, "each failed tile once: {stood_in:?}");
        // With the coarsest tile gone as well nothing can stand in.
        std::fs::remove_file(terrain.tile_path(2, 0, 0)).expect("removable");
        assert!(terrain.to_heightfield_standing_in(0, u64::MAX).is_err());
    }
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

/// A tile header whose checksums agree but whose statistics the samples contradict (a
/// negative error, min above max, a sample outside min ..= max) was accepted, and the
/// selection trusted it as bounds; the header and block index already refused such lies.
#[test]
fn a_tile_with_impossible_statistics_is_refused_even_with_fixed_checksums() {
    let (_dir, terrain) = damaged_copy();
    let impossible = |tx: u32, ty: u32| {
        matches!(
            terrain.read_tile(0, tx, ty),
            Err(TileError::Corrupt {
                reason: Corruption::Statistics { .. },
                ..
            })
        )
    };
    let word = |bytes: &[u8], at: usize| f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    // A negative error (bytes 40..44).
    rewrite(&terrain.tile_path(0, 0, 0), |bytes| {
        bytes[40..44].copy_from_slice(&(-1.0f32).to_le_bytes());
        fix_checksum(bytes, TILE_HEADER_LEN - 4);
    });
    assert!(impossible(0, 0));
    // Min (bytes 32..36) and max (36..40) swapped.
    rewrite(&terrain.tile_path(0, 1, 0), |bytes| {
        let (min, max) = (word(bytes, 32), word(bytes, 36));
        assert!(min < max, "a tile with relief");
        bytes[32..36].copy_from_slice(&max.to_le_bytes());
        bytes[36..40].copy_from_slice(&min.to_le_bytes());
        fix_checksum(bytes, TILE_HEADER_LEN - 4);
    });
    assert!(impossible(1, 0));
    // A sample far outside the range (raw samples are at most 3700), with the payload
    // checksum (bytes 44..48) made to agree.
    rewrite(&terrain.tile_path(0, 2, 0), |bytes| {
        let at = TILE_HEADER_LEN + 4 * 7;
        bytes[at..at + 4].copy_from_slice(&1.0e7f32.to_le_bytes());
        let payload = crc32fast::hash(&bytes[TILE_HEADER_LEN..]);
        bytes[44..48].copy_from_slice(&payload.to_le_bytes());
        fix_checksum(bytes, TILE_HEADER_LEN - 4);
    });
    assert!(impossible(2, 0));
    let message = terrain.read_tile(0, 2, 0).expect_err("refused").to_string();
    let path = terrain.tile_path(0, 2, 0).display().to_string();
    assert!(
        message.contains(&path) && message.contains("impossible statistics"),
        "{message}"
    );
    assert!(
        terrain.read_tile(0, 3, 0).is_ok(),
        "untouched tiles still read"
    );
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
    // A version-1 directory (before the block index) is refused, telling to re-import.
    let old = open_after(&|b| b[8] = 1);
    assert!(matches!(
        old,
        TileError::UnsupportedVersion { found: 1, .. }
    ));
    assert!(
        old.to_string().contains("import the terrain again"),
        "{old}"
    );
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
    // A cell size whose grid does not fit in f32 (every reader maps the grid).
    let overflow = open_after(&|b| {
        b[32..36].copy_from_slice(&3e38f32.to_le_bytes());
        fix_checksum(b, end);
    });
    assert!(
        matches!(overflow, TileError::Inconsistent { .. })
            && overflow.to_string().contains("overflows"),
        "{overflow}"
    );
    for (block_cells, what) in [(3u32, "power"), (16, "range"), (1, "range")] {
        let refused = open_after(&|b| {
            b[52..56].copy_from_slice(&block_cells.to_le_bytes());
            fix_checksum(b, end);
        });
        match what {
            "power" => assert!(
                matches!(refused, TileError::Inconsistent { .. }),
                "{refused}"
            ),
            _ => assert!(
                matches!(
                    refused,
                    TileError::OutOfRange {
                        what: "block size",
                        ..
                    }
                ),
                "{refused}"
            ),
        }
    }
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
        force: true,
        ..ImportOptions::with_tile_cells(8)
    };
    let out = dir.path().join("out");
    assert!(matches!(
        import(&source, &out, &ImportOptions::default(), &|_, _| {}),
        Err(TileError::NotEmpty { .. })
    ));
    std::fs::write(out.join("notes.txt"), b"keep me").expect("writable");
    import(&source, &out, &forced, &|_, _| {}).expect("forced import");
    let terrain = TiledTerrain::open(&out).expect("opens");
    assert_eq!(terrain.header().tile_cells, 8);
    // The first import's tiles (3 levels of 4-cell tiles) are gone, the user's file kept.
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("readable")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["0", "1", "blocks.tlod", "notes.txt", "terrain.tlod"]
    );
    let tiles: usize = std::fs::read_dir(out.join("0"))
        .expect("level 0")
        .map(|column| {
            std::fs::read_dir(column.expect("entry").path())
                .expect("a folder")
                .count()
        })
        .sum();
    assert_eq!(tiles, 4, "2 x 2 tiles of 8 cells");
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
            block_cells: 2,
            force: false,
        };
        assert!(matches!(
            import(&source, dir.path(), &options, &|_, _| {}),
            Err(TileError::InvalidTileSize { .. })
        ));
    }
    for block_cells in [0, 1, 3, 8] {
        let options = ImportOptions {
            tile_cells: 4,
            block_cells,
            force: false,
        };
        assert!(matches!(
            import(&source, dir.path(), &options, &|_, _| {}),
            Err(TileError::InvalidBlockSize { .. })
        ));
    }
    let calls = std::sync::Mutex::new(Vec::new());
    let options = ImportOptions::with_tile_cells(4);
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

/// Own statistics of block `(bx, by)` of `level`, straight from the definitions: raw
/// min/max over its samples, and the largest distance to the coarser surface (the mean of
/// the two neighbours on a row or column, either diagonal's mean at a coarse cell's centre).
fn brute_own(
    field: &Heightfield,
    level: u32,
    bx: u32,
    by: u32,
    block_cells: u32,
    has_coarser: bool,
) -> (f64, f64, f64) {
    let b = u64::from(block_cells);
    let (x0, y0) = (u64::from(bx) * b, u64::from(by) * b);
    let at = |c: u64, r: u64| level_sample(field, level, c, r);
    let (mut lo, mut hi, mut error) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for row in y0..=y0 + b {
        for col in x0..=x0 + b {
            let h = at(col, row);
            lo = lo.min(h);
            hi = hi.max(h);
            if !has_coarser {
                continue;
            }
            let means = match (col % 2, row % 2) {
                (0, 0) => vec![],
                (1, 0) => vec![0.5 * (at(col - 1, row) + at(col + 1, row))],
                (0, _) => vec![0.5 * (at(col, row - 1) + at(col, row + 1))],
                _ => vec![
                    0.5 * (at(col - 1, row - 1) + at(col + 1, row + 1)),
                    0.5 * (at(col + 1, row - 1) + at(col - 1, row + 1)),
                ],
            };
            for mean in means {
                error = error.max((h - mean).abs());
            }
        }
    }
    (lo, hi, error)
}

/// The block index by brute force over the heightfield, from the definitions in the
/// shared design (`BlockBounds`), rounded as the index rounds.
fn brute_block_index(field: &Heightfield, grids: &[LevelGrid], block_cells: u32) -> BlockIndex {
    let mapping = field.mapping();
    let (scale, offset) = (
        f64::from(mapping.height_scale),
        f64::from(mapping.height_offset),
    );
    let world = |raw: f64| raw * scale + offset;
    let mut levels: Vec<BlockLevel> = Vec::new();
    for (level, grid) in grids.iter().enumerate() {
        let level = level as u32;
        let blocks_x = (grid.width - 1).div_ceil(block_cells);
        let blocks_y = (grid.height - 1).div_ceil(block_cells);
        let mut bounds = Vec::new();
        for by in 0..blocks_y {
            for bx in 0..blocks_x {
                let has_coarser = (level as usize) + 1 < grids.len();
                let (_, _, raw_error) = brute_own(field, level, bx, by, block_cells, has_coarser);
                // Full resolution range: every level-0 sample of the footprint, clamped.
                let span = u64::from(block_cells) << level;
                let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
                for row in u64::from(by) * span..=u64::from(by + 1) * span {
                    for col in u64::from(bx) * span..=u64::from(bx + 1) * span {
                        let w = world(level_sample(field, 0, col, row));
                        lo = lo.min(w);
                        hi = hi.max(w);
                    }
                }
                let error_to_finest = if level == 0 {
                    0.0
                } else {
                    let finer: &BlockLevel = &levels[level as usize - 1];
                    let mut bound = 0.0f64;
                    for (cx, cy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                        let (cx, cy) = (2 * bx + cx, 2 * by + cy);
                        if cx < finer.blocks_x && cy < finer.blocks_y {
                            let c = finer.bounds[(cy * finer.blocks_x + cx) as usize];
                            bound =
                                bound.max(f64::from(c.own_error) + f64::from(c.error_to_finest));
                        }
                    }
                    blocks::round_up(bound)
                };
                bounds.push(BlockBounds {
                    min_height: blocks::round_down(lo),
                    max_height: blocks::round_up(hi),
                    own_error: blocks::round_up(raw_error * scale.abs()),
                    error_to_finest,
                });
            }
        }
        levels.push(BlockLevel {
            blocks_x,
            blocks_y,
            bounds,
        });
    }
    BlockIndex {
        block_cells,
        levels,
    }
}

/// The level-`level` surface at level-0 sample `(col, row)` under both triangulations of
/// the level's cell there (one per diagonal), padded as the tiles are.
fn level_surfaces(field: &Heightfield, level: u32, col: u64, row: u64) -> [f64; 2] {
    let step = 1u64 << level;
    let (i, j) = (col / step, row / step);
    let (u, v) = (
        (col % step) as f64 / step as f64,
        (row % step) as f64 / step as f64,
    );
    let at = |c: u64, r: u64| level_sample(field, level, c, r);
    let (a, b, c, d) = (at(i, j), at(i + 1, j), at(i, j + 1), at(i + 1, j + 1));
    let falling = if u >= v {
        a + u * (b - a) + v * (d - b)
    } else {
        a + v * (c - a) + u * (d - c)
    };
    let rising = if u + v <= 1.0 {
        a + u * (b - a) + v * (c - a)
    } else {
        d + (1.0 - u) * (c - d) + (1.0 - v) * (b - d)
    };
    [falling, rising]
}

#[test]
fn the_block_index_matches_the_definitions_and_bounds_the_finest_surface() {
    // (width, height, tile cells, block cells): square, non-square, odd, padded sizes.
    let cases = [
        (17, 17, 4, 2, SampleType::U16),
        (23, 10, 8, 4, SampleType::I16),
        (9, 40, 4, 4, SampleType::F32),
        (33, 5, 8, 2, SampleType::U16),
        (2, 3, 2, 2, SampleType::F32),
        (30, 30, 16, 8, SampleType::I16),
    ];
    for (seed, &(width, height, tile_cells, block_cells, sample_type)) in cases.iter().enumerate() {
        let source = field(width, height, sample_type, seed as u64 + 40);
        let dir = tempfile::tempdir().expect("a temporary directory");
        let options = ImportOptions {
            block_cells,
            ..ImportOptions::with_tile_cells(tile_cells)
        };
        import(&source, dir.path(), &options, &|_, _| {}).expect("imports");
        let terrain = TiledTerrain::open(dir.path()).expect("opens");
        let grids = terrain.header().levels.clone();
        let expected = brute_block_index(&source, &grids, block_cells);
        let case = format!("{width} x {height}, tiles {tile_cells}, blocks {block_cells}");
        assert_eq!(terrain.header().block_cells, block_cells, "{case}");
        assert_eq!(
            terrain.block_index(),
            &expected,
            "{case}: the imported index"
        );
        assert_eq!(
            BlockIndex::from_heightfield(&source, &grids, block_cells),
            expected,
            "{case}: the in-memory index"
        );
        // Soundness: every level-0 sample a block covers lies within error_to_finest of
        // the block's surface (either diagonal) and within its height range.
        let scale = f64::from(source.mapping().height_scale).abs();
        let offset = f64::from(source.mapping().height_offset);
        let world = |raw: f64| raw * f64::from(source.mapping().height_scale) + offset;
        for (level, blocks) in expected.levels.iter().enumerate() {
            let span = u64::from(block_cells) << level;
            for by in 0..blocks.blocks_y {
                for bx in 0..blocks.blocks_x {
                    let bounds = expected.get(level as u32, bx, by);
                    let rows = (u64::from(by) * span)..=(u64::from(by + 1) * span);
                    let cols = (u64::from(bx) * span)..=(u64::from(bx + 1) * span);
                    for row in rows.clone().filter(|&r| r < u64::from(height)) {
                        for col in cols.clone().filter(|&c| c < u64::from(width)) {
                            let raw = level_sample(&source, 0, col, row);
                            let h = world(raw);
                            assert!(
                                f64::from(bounds.min_height) <= h
                                    && h <= f64::from(bounds.max_height),
                                "{case}: range of block ({bx}, {by}) of level {level}"
                            );
                            for surface in level_surfaces(&source, level as u32, col, row) {
                                let distance = (raw - surface).abs() * scale;
                                assert!(
                                    distance <= f64::from(bounds.error_to_finest) + 1e-3,
                                    "{case}: block ({bx}, {by}) of level {level} at ({col}, \
                                     {row}): {distance} > {}",
                                    bounds.error_to_finest
                                );
                            }
                        }
                    }
                }
            }
        }
        // The coarser levels really are approximations (the test is not vacuous).
        assert!(
            expected.levels.len() < 2
                || expected.levels[1]
                    .bounds
                    .iter()
                    .any(|b| b.error_to_finest > 0.0),
            "{case}"
        );
    }
}

#[test]
fn a_corrupt_or_lying_block_index_gives_its_typed_error() {
    let (dir, terrain) = damaged_copy();
    let path = dir.path().join(blocks::BLOCKS_FILE);
    let original = std::fs::read(&path).expect("readable");
    assert_eq!(
        original.len() as u64,
        BlockIndex::encoded_len(terrain.header())
    );
    let open_after = |change: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = original.clone();
        change(&mut bytes);
        std::fs::write(&path, &bytes).expect("writable");
        TiledTerrain::open(dir.path()).expect_err("refused")
    };
    let end = original.len() - 4;
    for at in 0..original.len() {
        let refused = open_after(&|b| b[at] ^= 0x10);
        assert!(
            matches!(
                refused,
                TileError::BadMagic { .. }
                    | TileError::UnsupportedVersion { .. }
                    | TileError::Corrupt { .. }
            ),
            "byte {at}: {refused}"
        );
    }
    for len in [0, 7, 30, end, original.len() + 1] {
        let refused = open_after(&|b| b.resize(len, 0));
        assert!(
            matches!(
                refused,
                TileError::BadMagic { .. }
                    | TileError::Corrupt {
                        reason: Corruption::Length { .. },
                        ..
                    }
            ),
            "length {len}: {refused}"
        );
    }
    // Lies with a fixed checksum: another block size, other counts, impossible records.
    let lies: [(usize, u32); 5] = [
        (12, 4),
        (24, 9),
        (end - 16, f32::NAN.to_bits()),
        (end - 12, 1e9f32.to_bits()),
        (end - 8, 1.0f32.to_bits()),
    ];
    for (at, value) in lies {
        let refused = open_after(&|b| {
            b[at..at + 4].copy_from_slice(&value.to_le_bytes());
            fix_checksum(b, end);
        });
        assert!(
            matches!(
                refused,
                TileError::Inconsistent { .. } | TileError::Corrupt { .. }
            ),
            "word at {at}: {refused}"
        );
    }
    std::fs::remove_file(&path).expect("removable");
    assert!(matches!(
        TiledTerrain::open(dir.path()),
        Err(TileError::Missing { path: missing }) if missing == path
    ));
}

// The testkit's helper, compiled here too: the core's tests cannot depend on the testkit,
// which depends on the core.
#[path = "../../../terralod-testkit/src/files.rs"]
mod files;
use files::directory_files;

#[test]
fn a_raw_file_read_by_windows_imports_exactly_as_the_loaded_field() {
    use crate::io::ByteOrder;
    for (sample_type, order) in [
        (SampleType::U16, ByteOrder::Little),
        (SampleType::U16, ByteOrder::Big),
        (SampleType::F32, ByteOrder::Little),
        (SampleType::F32, ByteOrder::Big),
    ] {
        let source = field(37, 21, sample_type, 12);
        let scratch = tempfile::tempdir().expect("a temporary directory");
        let raw_path = scratch.path().join("terrain.raw");
        let mut bytes = Vec::new();
        for i in 0..source.len() {
            let value = source.samples().get(i);
            match (sample_type, order) {
                (SampleType::U16, ByteOrder::Little) => {
                    bytes.extend_from_slice(&(value as u16).to_le_bytes())
                }
                (SampleType::U16, _) => bytes.extend_from_slice(&(value as u16).to_be_bytes()),
                (_, ByteOrder::Little) => bytes.extend_from_slice(&value.to_le_bytes()),
                _ => bytes.extend_from_slice(&value.to_be_bytes()),
            }
        }
        std::fs::write(&raw_path, &bytes).expect("writable");
        let raw = RawFileSource::open(&raw_path, (37, 21), sample_type, order, source.mapping())
            .expect("opens");
        let options = ImportOptions::with_tile_cells(8);
        let (from_field, from_raw) = (scratch.path().join("a"), scratch.path().join("b"));
        import(&source, &from_field, &options, &|_, _| {}).expect("imports");
        import_source(&raw, &from_raw, &options, &|_, _| {}).expect("imports");
        let (a, b) = (directory_files(&from_field), directory_files(&from_raw));
        assert!(a.len() > 10);
        assert_eq!(a, b, "{sample_type:?} {order:?}: identical files");

        std::fs::write(&raw_path, &bytes[..bytes.len() - 1]).expect("writable");
        let short = RawFileSource::open(&raw_path, (37, 21), sample_type, order, source.mapping());
        assert!(matches!(
            short,
            Err(TileError::Corrupt {
                reason: Corruption::Length { .. },
                ..
            })
        ));
    }
}

/// A directory read under another mapping is the same terrain imported with it: the
/// samples decode with the new mapping, and the carried-over height ranges and errors
/// bound the exact ones of the remapped field, within a few ulps of them.
#[test]
fn another_mapping_reads_as_an_import_with_it() {
    // The test field's scale is −0.25: the new one flips the heights back up.
    let mapping = WorldMapping {
        cell_size: 7.0,
        height_scale: 3.5,
        height_offset: -40.0,
    };
    for sample_type in sample_types() {
        let source = field(37, 29, sample_type, 11);
        let dir = tempfile::tempdir().expect("a temporary directory");
        import_into(&source, dir.path(), 8);
        let terrain = TiledTerrain::open(dir.path())
            .and_then(|t| t.with_mapping(mapping).map_err(TileError::from))
            .expect("opens under the new mapping");
        let remapped = source.clone().with_mapping(mapping).expect("valid");
        let header = terrain.header().clone();
        assert_eq!(header.mapping, mapping);
        let (lo, hi) = remapped.world_range();
        assert!(header.min_height <= lo && header.max_height >= hi);

        let level0 = terrain.to_heightfield(0, u64::MAX).expect("readable");
        assert_eq!(level0.mapping(), mapping);
        for (col, row) in [(0, 0), (36, 28), (17, 5)] {
            assert_eq!(level0.world_y(col, row), remapped.world_y(col, row));
        }

        let close = |bound: f32, exact: f32| {
            (f64::from(bound) - f64::from(exact)).abs() <= 1e-5 * f64::from(exact.abs()) + 1e-4
        };
        let exact = BlockIndex::from_heightfield(&remapped, &header.levels, header.block_cells);
        for (level, blocks) in exact.levels.iter().enumerate() {
            for (i, truth) in blocks.bounds.iter().enumerate() {
                let bound = terrain.block_index().levels[level].bounds[i];
                let at = format!("{sample_type:?} level {level} block {i}: {bound:?} {truth:?}");
                assert!(bound.min_height <= truth.min_height, "{at}");
                assert!(bound.max_height >= truth.max_height, "{at}");
                assert!(bound.own_error >= truth.own_error, "{at}");
                assert!(bound.error_to_finest >= truth.error_to_finest, "{at}");
                for (b, t) in [
                    (bound.min_height, truth.min_height),
                    (bound.max_height, truth.max_height),
                    (bound.own_error, truth.own_error),
                ] {
                    assert!(close(b, t), "{at}");
                }
            }
        }
        let tile = terrain.read_tile(0, 1, 1).expect("readable");
        let (lo, hi) = (tile.min_height, tile.max_height);
        for j in 8..=16 {
            for i in 8..=16 {
                let y = remapped.world_y(i, j);
                assert!(lo <= y && y <= hi, "{y} outside {lo} ..= {hi}");
            }
        }
    }
}
