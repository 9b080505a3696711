//! Detail tiles: seams and coarse samples shared exactly, bounds that hold against the
//! exact statistics of the generated terrain, memory back to its baseline.

use super::*;
use crate::camera::Camera;
use crate::heightfield::{Heightfield, WorldMapping};
use crate::lod::{LodAlgorithm, LodOptions, StreamedLod, StreamingLod, View};
use crate::tiles::{BlockIndex, MemoryTiles, MemoryTilesOptions, level_blocks};
use glam::Vec3;

fn bumpy(width: u32, height: u32) -> Heightfield {
    let values = (0..width * height)
        .map(|i| {
            let (x, y) = ((i % width) as f32, (i / width) as f32);
            40.0 * (x * 0.31).sin() * (y * 0.17).cos()
                + ((i.wrapping_mul(2_654_435_761)) >> 28) as f32
        })
        .collect();
    Heightfield::from_f32(width, height, values)
        .and_then(|f| {
            f.with_mapping(WorldMapping {
                cell_size: 4.0,
                height_scale: 0.5,
                height_offset: 100.0,
            })
        })
        .expect("valid field")
}

const SMALL: MemoryTilesOptions = MemoryTilesOptions {
    tile_cells: 8,
    block_cells: 4,
};

fn detail(field: &Heightfield, levels: u32) -> DetailTiles<MemoryTiles> {
    let inner = MemoryTiles::new(field, SMALL).expect("valid sizes");
    let options = DetailOptions {
        tiles_per_frame: u32::MAX,
        ..DetailOptions::DEFAULT.with_levels(levels)
    };
    DetailTiles::new(inner, options).expect("valid detail")
}

/// The streamed algorithm over `field` with `options`' detail.
fn streamed(field: &Heightfield, options: DetailOptions) -> StreamedLod<DetailTiles<MemoryTiles>> {
    let inner = MemoryTiles::new(field, SMALL).expect("valid");
    StreamedLod::new(
        DetailTiles::new(inner, options).expect("valid"),
        LodOptions::default(),
    )
}

/// A view from `eye` looking ahead and down, close enough to the ground to draw detail.
fn looking_down_ahead(eye: Vec3) -> View {
    let camera = Camera::new(
        eye,
        eye + Vec3::new(40.0, -30.0, 5.0),
        1.0,
        (800, 600),
        0.5,
        1e5,
    )
    .expect("valid camera");
    View::screen(camera, 1.0).expect("valid view")
}

#[test]
fn the_stored_levels_sit_under_the_detail() {
    let field = bumpy(37, 21);
    let stored = MemoryTiles::new(&field, SMALL).expect("valid");
    let tiles = detail(&field, 2);
    let header = tiles.header();
    assert_eq!((header.width, header.height), (145, 81));
    assert_eq!(header.mapping.cell_size, 1.0);
    assert_eq!(header.levels[2..], stored.header().levels[..]);
    assert_eq!(header.levels, crate::tiles::level_grids(145, 81, 8));
    assert!(header.min_height < stored.header().min_height);
    assert!(header.max_height > stored.header().max_height);
}

#[test]
fn no_detail_is_the_stored_terrain() {
    let field = bumpy(37, 21);
    let mut stored = MemoryTiles::new(&field, SMALL).expect("valid");
    let mut tiles = detail(&field, 0);
    assert_eq!(tiles.header(), stored.header());
    for (level, grid) in stored.header().levels.clone().iter().enumerate() {
        let level = level as u32;
        let (bx, by) = level_blocks(grid, 4);
        for (x, y) in [(0, 0), (bx - 1, by - 1)] {
            assert_eq!(
                tiles.block_bounds(level, x, y),
                stored.block_bounds(level, x, y)
            );
        }
        assert_eq!(
            tiles.tile_heights((level, 0, 0)),
            stored.tile_heights((level, 0, 0))
        );
    }
}

/// Every tile's coarse samples are the next coarser level's, neighbours share their edges,
/// and a tile generated alone (in another order) is the same.
#[test]
fn tiles_share_edges_and_coarse_samples_in_any_order() {
    let field = bumpy(37, 21);
    let mut forward = detail(&field, 3);
    let mut backward = detail(&field, 3);
    let header = forward.header().clone();
    let n = header.tile_cells as usize;
    let side = n + 1;
    for level in 0..3u32 {
        let grid = header.levels[level as usize];
        let keys: Vec<TileKey> = (0..grid.tiles_y)
            .flat_map(|ty| (0..grid.tiles_x).map(move |tx| (level, tx, ty)))
            .collect();
        for &key in keys.iter().rev() {
            backward.tile_heights(key).expect("generated");
        }
        for &(_, tx, ty) in &keys {
            let tile = forward.tile_heights((level, tx, ty)).expect("generated");
            assert_eq!(
                tile,
                backward.tile_heights((level, tx, ty)).expect("generated")
            );
            if tx + 1 < grid.tiles_x {
                let right = forward
                    .tile_heights((level, tx + 1, ty))
                    .expect("generated");
                for j in 0..side {
                    assert_eq!(tile[j * side + n], right[j * side]);
                }
            }
            if ty + 1 < grid.tiles_y {
                let below = forward
                    .tile_heights((level, tx, ty + 1))
                    .expect("generated");
                assert_eq!(tile[n * side..], below[..side]);
            }
            // Even samples are the coarser level's (its tile covers four of these).
            let coarse = forward
                .tile_heights((level + 1, tx / 2, ty / 2))
                .expect("resident");
            let (cx, cy) = ((tx as usize % 2) * n / 2, (ty as usize % 2) * n / 2);
            for j in (0..side).step_by(2) {
                for i in (0..side).step_by(2) {
                    assert_eq!(
                        tile[j * side + i],
                        coarse[(cy + j / 2) * side + cx + i / 2],
                        "level {level} tile ({tx}, {ty}) sample ({i}, {j})"
                    );
                }
            }
        }
    }
    // Not a smooth interpolation: the detail displaces.
    let flat = forward.tile_heights((0, 0, 0)).expect("generated");
    let stored = forward.tile_heights((3, 0, 0)).expect("resident");
    assert_ne!(flat[1], 0.5 * (stored[0] + flat[2]));
}

/// The bounds hold against the exact statistics of the generated terrain (the block index
/// an import of it would write), at every level: the ones given before any tile is seen
/// (from the stored index alone) and the ones from the twists measured in resident stored
/// tiles, which are tighter.
#[test]
fn bounds_hold_against_the_generated_terrain() {
    // A large offset with a small scale: the stored heights' rounding is that of the
    // offset, not of the heights.
    let far_offset = WorldMapping {
        cell_size: 4.0,
        height_scale: 0.2,
        height_offset: -1e4,
    };
    for (field, levels) in [
        (bumpy(37, 21), 2),
        (bumpy(17, 17), 3),
        (bumpy(5, 9), 1),
        (bumpy(3, 3), 3),
        (bumpy(33, 17).with_mapping(far_offset).expect("valid"), 2),
    ] {
        let mut tiles = detail(&field, levels);
        let generated = tiles.to_heightfield().expect("resident");
        let header = tiles.header().clone();
        let exact = BlockIndex::from_heightfield(&generated, &header.levels, 4);
        let mut looseness = Vec::new();
        for measured in [false, true] {
            if measured {
                // Every stored level-0 tile passes through, so its twists are measured.
                let grid = header.levels[levels as usize];
                for ty in 0..grid.tiles_y {
                    for tx in 0..grid.tiles_x {
                        tiles.tile_heights((levels, tx, ty)).expect("resident");
                    }
                }
            }
            let mut total = (0.0, 0.0);
            for (level, blocks) in exact.levels.iter().enumerate() {
                for by in 0..blocks.blocks_y {
                    for bx in 0..blocks.blocks_x {
                        let truth = blocks.bounds[(by * blocks.blocks_x + bx) as usize];
                        let bound = tiles.block_bounds(level as u32, bx, by);
                        let at = format!(
                            "{levels} levels, block ({level}, {bx}, {by}): {bound:?} against {truth:?}"
                        );
                        assert!(bound.min_height <= truth.min_height, "{at}");
                        assert!(bound.max_height >= truth.max_height, "{at}");
                        assert!(bound.own_error >= truth.own_error, "{at}");
                        assert!(bound.error_to_finest >= truth.error_to_finest, "{at}");
                        if (level as u32) < levels {
                            total.0 += f64::from(bound.own_error);
                            total.1 += f64::from(truth.own_error);
                        }
                    }
                }
            }
            looseness.push(total.0 / total.1);
        }
        // Measured twists tighten the detail levels' bounds (unless a stored tile is a
        // single cell wide), to within 3× of the truth on the whole.
        assert!(
            looseness[1] <= looseness[0],
            "{levels} levels: {looseness:?}"
        );
        if header.levels.len() as u32 > levels + 1 {
            assert!(looseness[1] < 3.0, "{levels} levels: {looseness:?}");
        }
        eprintln!("{levels} levels: own error bound / truth {looseness:?}");
        assert!(header.min_height <= generated.world_range().0);
        assert!(header.max_height >= generated.world_range().1);
    }
}

#[test]
fn bad_options_are_refused() {
    let field = bumpy(9, 9);
    let inner = || MemoryTiles::new(&field, SMALL).expect("valid");
    assert_eq!(
        DetailTiles::new(inner(), DetailOptions::DEFAULT.with_levels(4)).err(),
        Some(DetailError::TooDeep {
            levels: 4,
            tile_cells: 8
        })
    );
    for roughness in [f32::NAN, -1.0, 5.0] {
        let options = DetailOptions {
            roughness,
            ..DetailOptions::DEFAULT.with_levels(1)
        };
        assert!(matches!(
            DetailTiles::new(inner(), options),
            Err(DetailError::Roughness(_))
        ));
    }
}

/// Memory back to its baseline: seen from far away, no detail tile is held; flying low
/// generates them around the camera; once it is far away again they are all dropped within
/// `keep_frames` selections, and what is held equals what the far view held before.
#[test]
fn memory_returns_to_its_baseline_when_the_camera_leaves() {
    let field = bumpy(65, 65);
    let stored_bytes = MemoryTiles::new(&field, SMALL)
        .expect("valid")
        .memory_bytes();
    let options = DetailOptions {
        keep_frames: 5,
        tiles_per_frame: 2,
        ..DetailOptions::DEFAULT.with_levels(2)
    };
    let mut lod = streamed(&field, options);
    let (w, d) = field.world_size();
    let far = Camera::new(
        Vec3::new(0.5 * w, 20.0 * w, 0.5 * d),
        Vec3::new(0.5 * w, 0.0, 0.5 * d + 1.0),
        1.0,
        (800, 600),
        10.0,
        1e6,
    )
    .expect("valid camera");
    let far = View::screen(far, 1.0).expect("valid view");
    for _ in 0..3 {
        lod.select(&far);
    }
    let baseline = lod.source().stats();
    assert_eq!((baseline.tiles, baseline.generated), (0, 0));
    assert!(lod.drawn_blocks().all(|(level, _, _)| level >= 2));

    let mut most = 0;
    for frame in 0..30 {
        let t = frame as f32 / 30.0;
        let view = looking_down_ahead(Vec3::new(0.2 * w + t * 0.5 * w, 140.0, 0.5 * d));
        lod.select(&view);
        most = most.max(lod.source().stats().tiles);
    }
    let stats = lod.source().stats();
    assert!(most > 0, "no detail was generated near the ground");
    assert!(stats.generated >= most);
    assert!(stats.bytes > baseline.bytes);
    let finest = lod.drawn_blocks().map(|(level, _, _)| level).min();
    assert_eq!(finest, Some(0), "the finest detail level is drawn");

    for _ in 0..=options.keep_frames {
        lod.select(&far);
    }
    let stats = lod.source().stats();
    assert_eq!((stats.tiles, stats.bytes), (0, baseline.bytes), "{stats:?}");
    assert_eq!(stats.dropped, stats.generated);
    assert_eq!(lod.source().inner().memory_bytes(), stored_bytes);
}

/// A byte cap below what the view needs and one tile per selection: the selections still
/// settle (no tile the view draws is evicted to make room for another), on the mesh an
/// unlimited source draws, holding more than the cap only while the view needs it.
#[test]
fn a_cap_below_the_view_still_settles_on_the_same_mesh() {
    let field = bumpy(65, 65);
    let (w, d) = field.world_size();
    let view = looking_down_ahead(Vec3::new(0.3 * w, 120.0, 0.5 * d));
    let mut unlimited = streamed(
        &field,
        DetailOptions {
            tiles_per_frame: u32::MAX,
            ..DetailOptions::DEFAULT.with_levels(2)
        },
    );
    unlimited.select(&view);
    let wanted: Vec<_> = unlimited.drawn_blocks().collect();
    let needed = unlimited.source().stats().tiles;
    assert!(needed > 4, "the view needs {needed} detail tiles");

    let one_tile = 9 * 9 * 4;
    let mut capped = streamed(
        &field,
        DetailOptions {
            tiles_per_frame: 1,
            max_bytes: one_tile,
            ..DetailOptions::DEFAULT.with_levels(2)
        },
    );
    let mut selections = 0;
    loop {
        capped.select(&view);
        selections += 1;
        if capped.source().stats().deferred == 0 {
            break;
        }
        assert!(
            selections < 10 * needed,
            "no end after {selections} selections"
        );
    }
    assert!(selections >= needed, "one tile a selection");
    assert_eq!(capped.drawn_blocks().collect::<Vec<_>>(), wanted);
    let stats = capped.source().stats();
    assert!(stats.tiles >= needed && stats.bytes > one_tile, "{stats:?}");
}
