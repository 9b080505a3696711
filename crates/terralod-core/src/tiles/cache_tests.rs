//! The tile cache: loads in the background, keeps the budget, evicts least recently used,
//! and survives missing and corrupt tiles (fault injection), reporting each once.

use super::*;
use crate::heightfield::{Heightfield, Samples, WorldMapping};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A 65 × 49 field of distinct values, imported with 8-cell tiles: levels of 8 × 6, 4 × 3,
/// 2 × 2 and 1 tile.
fn imported(dir: &Path) -> (Heightfield, Arc<TiledTerrain>) {
    let (width, height) = (65u32, 49u32);
    let values = (0..width * height).map(|i| (i * 7 % 3001) as u16).collect();
    let field = Heightfield::new(width, height, Samples::U16(values))
        .and_then(|f| {
            f.with_mapping(WorldMapping {
                cell_size: 1.0,
                height_scale: 0.5,
                height_offset: -3.0,
            })
        })
        .expect("a valid field");
    import(&field, dir, &ImportOptions::with_tile_cells(8), &|_, _| {}).expect("imports");
    let terrain = TiledTerrain::open(dir).expect("opens");
    (field, Arc::new(terrain))
}

/// Asks for `keys` every frame until each is resident or reported, as a selection would.
fn drive(cache: &mut TileCache, keys: &[TileKey]) -> Vec<TileError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut reports = Vec::new();
    loop {
        cache.begin_frame();
        reports.extend(cache.take_reports());
        let mut waiting = false;
        for &key in keys {
            waiting |= cache.tile_heights(key).is_none() && cache.pending_loads() > 0;
        }
        if !waiting {
            return reports;
        }
        assert!(Instant::now() < deadline, "loads did not finish");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn tile_keys(terrain: &TiledTerrain, level: u32) -> Vec<TileKey> {
    let grid = terrain.header().levels[level as usize];
    (0..grid.tiles_y)
        .flat_map(|ty| (0..grid.tiles_x).map(move |tx| (level, tx, ty)))
        .collect()
}

#[test]
fn tiles_load_in_the_background_as_world_heights_within_the_budget() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (field, terrain) = imported(dir.path());
    let tile_bytes = 9 * 9 * 4;
    // The pinned coarsest tile and four more.
    let mut cache = TileCache::new(terrain.clone(), 5 * tile_bytes, 2).expect("a cache");
    assert_eq!(cache.tile_bytes(), tile_bytes);
    assert_eq!(cache.stats().resident_tiles, 1);
    assert!(
        cache.is_resident((3, 0, 0)),
        "the coarsest level is loaded at once"
    );
    assert_eq!(cache.block_cells(), 8);
    assert_eq!(
        cache.block_bounds(1, 2, 1),
        terrain.block_index().get(1, 2, 1)
    );

    // A miss queues one load, however often it is asked for.
    let key = (1, 2, 1);
    assert!(cache.tile_heights(key).is_none());
    assert!(cache.tile_heights(key).is_none());
    assert_eq!(cache.stats().requests, 1);
    assert_eq!(cache.pending_loads(), 1);
    assert!(drive(&mut cache, &[key]).is_empty());
    let heights = cache.tile_heights(key).expect("resident");
    for j in 0..9u32 {
        for i in 0..9u32 {
            let (col, row) = ((2 * 8 + i) * 2, (8 + j) * 2);
            let expected = field.world_y(col.min(64), row.min(48));
            assert_eq!(heights[(j * 9 + i) as usize], expected, "sample ({i}, {j})");
        }
    }

    // Level 0 has 48 tiles: streaming through all of them never exceeds the budget, and
    // evicts the least recently used first.
    for chunk in tile_keys(&terrain, 0).chunks(3) {
        drive(&mut cache, chunk);
        let stats = cache.stats();
        assert!(stats.resident_bytes <= cache.budget_bytes(), "{stats:?}");
        assert!(stats.peak_bytes <= cache.budget_bytes(), "{stats:?}");
        for &key in chunk {
            assert!(cache.is_resident(key), "{key:?} used this frame stays");
        }
    }
    let stats = cache.stats();
    assert!(stats.tiles_evicted >= 48 - 4, "{stats:?}");
    assert!(cache.is_resident((3, 0, 0)), "the pinned tile stays");
    assert!(!cache.is_resident((0, 0, 0)), "the oldest tile went first");
    // Evicted, then wanted again: loads again.
    assert!(drive(&mut cache, &[(0, 0, 0)]).is_empty());
    assert!(cache.is_resident((0, 0, 0)));
    let stats = cache.stats();
    assert_eq!(stats.failures, 0);
    assert!(stats.hits > 0 && stats.misses > 0);
    assert_eq!(
        stats.bytes_read,
        stats.loads_finished * terrain.header().tile_file_len()
    );
    // Never waiting for a load: a stall of the machine (a preempted debug build) is not a
    // failure, a frame blocked on its loads for seconds is.
    assert!(
        stats.longest_begin_frame < Duration::from_secs(2),
        "{stats:?}"
    );
}

#[test]
fn a_budget_below_the_pinned_tiles_is_a_typed_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, terrain) = imported(dir.path());
    let refused = TileCache::new(terrain.clone(), 9 * 9 * 4, 1).expect_err("too small");
    assert!(
        matches!(
            refused,
            CacheError::BudgetTooSmall {
                pinned: 324,
                needed: 648,
                ..
            }
        ),
        "{refused}"
    );
    // A corrupt coarsest tile: the cache cannot promise a fallback, so `new` refuses.
    std::fs::remove_file(terrain.tile_path(3, 0, 0)).expect("removable");
    let refused = TileCache::new(terrain, 1 << 20, 1).expect_err("no coarsest level");
    assert!(
        matches!(refused, CacheError::Pinned(TileError::Missing { .. })),
        "{refused}"
    );
}

#[test]
fn corrupt_and_missing_tiles_are_reported_once_and_never_requested_again() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, terrain) = imported(dir.path());
    let damage = |key: TileKey, change: &dyn Fn(&Path)| {
        change(&terrain.tile_path(key.0, key.1, key.2));
        key
    };
    let flipped = damage((0, 1, 1), &|path| {
        let mut bytes = std::fs::read(path).expect("readable");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(path, bytes).expect("writable");
    });
    let truncated = damage((0, 3, 2), &|path| {
        let bytes = std::fs::read(path).expect("readable");
        std::fs::write(path, &bytes[..bytes.len() / 2]).expect("writable");
    });
    let deleted = damage((1, 0, 2), &|path| {
        std::fs::remove_file(path).expect("removable")
    });
    let copied = damage((2, 1, 1), &|path| {
        std::fs::copy(terrain.tile_path(2, 0, 0), path).expect("copyable");
    });
    let damaged = [flipped, truncated, deleted, copied];
    let mut cache = TileCache::new(terrain.clone(), 1 << 20, 3).expect("a cache");
    let everything: Vec<TileKey> = (0..3)
        .flat_map(|level| tile_keys(&terrain, level))
        .collect();
    let mut reports = drive(&mut cache, &everything);
    // More frames asking for everything again report nothing new and request nothing.
    let requests = cache.stats().requests;
    for _ in 0..3 {
        reports.extend(drive(&mut cache, &everything));
    }
    assert_eq!(
        cache.stats().requests,
        requests,
        "failed tiles are not requested again"
    );
    assert_eq!(reports.len(), damaged.len(), "{reports:?}");
    for key in damaged {
        let path = terrain.tile_path(key.0, key.1, key.2);
        let named: Vec<&TileError> = reports
            .iter()
            .filter(|error| error.to_string().contains(&*path.to_string_lossy()))
            .collect();
        assert_eq!(named.len(), 1, "{key:?} reported once: {reports:?}");
        assert!(cache.tile_heights(key).is_none(), "{key:?} never resident");
    }
    let kinds = |want: fn(&TileError) -> bool| reports.iter().filter(|e| want(e)).count();
    assert_eq!(kinds(|e| matches!(e, TileError::Missing { .. })), 1);
    assert_eq!(
        kinds(|e| matches!(
            e,
            TileError::Corrupt {
                reason: Corruption::PayloadChecksum { .. },
                ..
            }
        )),
        1
    );
    assert_eq!(
        kinds(|e| matches!(
            e,
            TileError::Corrupt {
                reason: Corruption::Length { .. },
                ..
            }
        )),
        1
    );
    assert_eq!(
        kinds(|e| matches!(
            e,
            TileError::Corrupt {
                reason: Corruption::Field { .. },
                ..
            }
        )),
        1,
        "the copied tile names another tile's coordinates"
    );
    // Every other tile loaded.
    let stats = cache.stats();
    assert_eq!(stats.failures, 4);
    for key in everything.iter().filter(|key| !damaged.contains(key)) {
        assert!(cache.is_resident(*key), "{key:?}");
    }
}

#[test]
fn dropping_the_cache_stops_its_loaders_promptly() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, terrain) = imported(dir.path());
    let mut cache = TileCache::new(terrain.clone(), 1 << 20, 2).expect("a cache");
    for key in tile_keys(&terrain, 0) {
        assert!(cache.tile_heights(key).is_none());
    }
    let start = Instant::now();
    drop(cache);
    assert!(start.elapsed() < Duration::from_secs(5));
    // The terrain is shared with nobody any more: every loader released its handle.
    assert_eq!(Arc::strong_count(&terrain), 1);
}

#[test]
fn queued_loads_no_frame_asks_for_any_more_are_dropped_and_can_be_asked_again() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, terrain) = imported(dir.path());
    let mut cache = TileCache::new(terrain.clone(), 1 << 20, 1).expect("a cache");
    let level0 = tile_keys(&terrain, 0);
    cache.begin_frame();
    for &key in &level0 {
        assert!(cache.tile_heights(key).is_none());
    }
    // Two frames that ask for nothing: whatever had not started is dropped.
    cache.begin_frame();
    cache.begin_frame();
    // Wait for the loads that had started; then every request is accounted for.
    let deadline = Instant::now() + Duration::from_secs(20);
    while cache.pending_loads() > 0 {
        assert!(Instant::now() < deadline, "running loads did not finish");
        std::thread::sleep(Duration::from_millis(1));
        cache.begin_frame();
    }
    let stats = cache.stats();
    let loaded = stats.loads_finished - 1; // the pinned coarsest tile
    assert_eq!(stats.requests, level0.len() as u64);
    assert_eq!(loaded + stats.requests_dropped, stats.requests, "{stats:?}");
    // Dropped tiles are not failed: asked for again, they load.
    assert!(drive(&mut cache, &level0).is_empty());
    for key in level0 {
        assert!(cache.is_resident(key), "{key:?}");
    }
}

/// A view that wants more tiles than the budget holds keeps the ones it got, first asked
/// first served, and loads nothing more while it stays (before, each frame's loads evicted
/// tiles the next frame asked for again: a 32 MB budget under a 16385² flight read 3.4–7.3
/// GB in 300 frames). When the view moves on, its tiles make room for the next view's.
#[test]
fn a_view_larger_than_the_budget_keeps_what_it_draws_instead_of_thrashing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, terrain) = imported(dir.path());
    let tile_bytes = 9 * 9 * 4;
    // The pinned coarsest tile and four more; the view asks for ten level-0 tiles a frame.
    let mut cache = TileCache::new(terrain.clone(), 5 * tile_bytes, 2).expect("a cache");
    let level0 = tile_keys(&terrain, 0);
    let (view, next_view) = (&level0[..10], &level0[10..13]);
    // Frames of `keys`, waiting for the loads each frame queued, as a paced flight would.
    let fly = |cache: &mut TileCache, keys: &[TileKey], frames: usize| {
        for _ in 0..frames {
            cache.begin_frame();
            for &key in keys {
                cache.tile_heights(key);
            }
            let deadline = Instant::now() + Duration::from_secs(20);
            while cache.pending_loads() > 0 {
                assert!(Instant::now() < deadline, "loads did not finish");
                std::thread::sleep(Duration::from_millis(1));
                cache.begin_frame();
                for &key in keys {
                    cache.tile_heights(key);
                }
            }
        }
    };
    fly(&mut cache, view, 3);
    let settled = cache.stats();
    let resident: Vec<bool> = view.iter().map(|&key| cache.is_resident(key)).collect();
    assert_eq!(
        resident,
        [
            true, true, true, true, false, false, false, false, false, false
        ],
        "the first four asked for hold the budget: {settled:?}"
    );
    assert_eq!(settled.loads_finished, 1 + 4, "{settled:?}");
    assert_eq!(settled.tiles_evicted, 0, "{settled:?}");
    assert!(settled.requests_over_budget > 0, "{settled:?}");

    // Thirty more frames of the same view: not one more load, the same tiles.
    fly(&mut cache, view, 30);
    let stats = cache.stats();
    assert_eq!(stats.loads_finished, settled.loads_finished, "{stats:?}");
    assert_eq!(stats.tiles_evicted, 0, "{stats:?}");
    assert_eq!(stats.loads_over_budget, 0, "{stats:?}");
    for (&key, &was) in view.iter().zip(&resident) {
        assert_eq!(cache.is_resident(key), was, "{key:?}");
    }
    assert!(stats.resident_bytes <= cache.budget_bytes(), "{stats:?}");

    // The view moves on: its tiles leave use after a frame and the next view loads.
    fly(&mut cache, next_view, 3);
    for &key in next_view {
        assert!(cache.is_resident(key), "{key:?}: {:?}", cache.stats());
    }
    let stats = cache.stats();
    assert_eq!(stats.tiles_evicted, 3, "{stats:?}");
    assert!(stats.peak_bytes <= cache.budget_bytes(), "{stats:?}");

    // Two frames that ask for nothing: no tile is in use. Then a frame asks first for a
    // missing tile (room: it is queued) and then for the four resident ones (in use
    // again): the load finds no tile to evict and is dropped, and the view keeps its four.
    cache.begin_frame();
    cache.begin_frame();
    let kept: Vec<TileKey> = level0
        .iter()
        .copied()
        .filter(|&key| cache.is_resident(key))
        .collect();
    assert_eq!(kept.len(), 4);
    let missing = *level0.iter().find(|&&key| !cache.is_resident(key)).unwrap();
    cache.begin_frame();
    assert!(cache.tile_heights(missing).is_none());
    assert_eq!(cache.pending_loads(), 1);
    for &key in &kept {
        assert!(cache.tile_heights(key).is_some());
    }
    // Frames of the same view until the load is in (each asks again, so the load stays
    // wanted and the four stay in use, however long the loader takes).
    let deadline = Instant::now() + Duration::from_secs(20);
    while cache.pending_loads() > 0 {
        assert!(Instant::now() < deadline, "the load did not finish");
        std::thread::sleep(Duration::from_millis(1));
        cache.begin_frame();
        cache.tile_heights(missing);
        for &key in &kept {
            assert!(cache.tile_heights(key).is_some());
        }
    }
    let stats = cache.stats();
    assert_eq!(stats.loads_over_budget, 1, "{stats:?}");
    for &key in &kept {
        assert!(cache.is_resident(key), "{key:?}: {stats:?}");
    }
    assert!(!cache.is_resident(missing));
}
