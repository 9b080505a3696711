//! The streamed algorithm over a partially resident source: a wrapper around
//! `MemoryTiles` refuses some tiles (as a disk cache does while they load). Still
//! crack-free and covering, the coarser block drawn where a tile is missing, no panic; and
//! once every tile is resident, the same mesh as the all-resident source.

use std::collections::HashSet;
use std::sync::Arc;
use terralod_core::lod::{
    LodAlgorithm, LodOptions, StreamedLod, StreamedQuadtreeLod, StreamingLod, View,
};
use terralod_core::tiles::{
    DetailOptions, DetailTiles, MemoryTiles, MemoryTilesOptions, TerrainHeader, TileKey,
    TileSource, block_tile,
};
use terralod_core::{Aabb, Camera, Containment, GridPos, Heightfield, WorldMapping};
use terralod_testkit::fixtures::smooth_random;
use terralod_testkit::{GridRect, check_mesh, measure_error};

/// `MemoryTiles` that refuses the tiles `refuse` names, and records what was asked.
struct Partial {
    inner: MemoryTiles,
    refuse: fn(TileKey) -> bool,
    refused: HashSet<TileKey>,
    frames: u64,
}

impl TileSource for Partial {
    fn header(&self) -> &TerrainHeader {
        self.inner.header()
    }

    fn block_cells(&self) -> u32 {
        self.inner.block_cells()
    }

    fn block_bounds(&self, level: u32, bx: u32, by: u32) -> terralod_core::tiles::BlockBounds {
        self.inner.block_bounds(level, bx, by)
    }

    fn tile_heights(&mut self, key: TileKey) -> Option<Arc<[f32]>> {
        if (self.refuse)(key) {
            self.refused.insert(key);
            return None;
        }
        self.inner.tile_heights(key)
    }

    fn begin_frame(&mut self) {
        self.frames += 1;
    }
}

const OPTIONS: MemoryTilesOptions = MemoryTilesOptions {
    tile_cells: 4,
    block_cells: 2,
};

fn field() -> Heightfield {
    smooth_random(61, 47, 3, 40.0).expect("valid field")
}

fn cameras(field: &Heightfield) -> Vec<Camera> {
    let (w, d) = field.world_size();
    let centre = glam::Vec3::new(0.5 * w, 20.0, 0.5 * d);
    (0..8)
        .map(|k| {
            let a = k as f32 * 0.8;
            let eye = centre
                + glam::Vec3::new(
                    0.6 * w * a.cos(),
                    10.0 + 15.0 * (k % 3) as f32,
                    0.6 * d * a.sin(),
                );
            Camera::new(eye, centre, 1.0, (640, 480), 0.5, 1e4).expect("valid camera")
        })
        .collect()
}

fn triangles(lod: &mut dyn LodAlgorithm, view: &View) -> Vec<[GridPos; 3]> {
    let mut out = Vec::new();
    lod.select(view).for_each_triangle(|t| out.push(t));
    out
}

/// Level-0 tiles in a checkerboard, and every tile of level 1 with an odd column.
fn checkerboard(key: TileKey) -> bool {
    match key {
        (0, tx, ty) => (tx + ty) % 2 == 1,
        (1, tx, _) => tx % 2 == 1,
        _ => false,
    }
}

/// The tiles a streaming algorithm drew its last selection from.
trait DrawnTiles: StreamingLod<Source = Partial> {
    fn drawn_tiles(&self) -> Vec<TileKey>;
}

impl DrawnTiles for StreamedLod<Partial> {
    fn drawn_tiles(&self) -> Vec<TileKey> {
        let levels = &self.source().header().levels;
        self.drawn_blocks()
            .map(|(level, bx, by)| {
                let ((_, tx, ty), _) = block_tile(4, 2, level, bx, by);
                let grid = &levels[level as usize];
                // A virtual block's samples come from the last tile of its row or column.
                (level, tx.min(grid.tiles_x - 1), ty.min(grid.tiles_y - 1))
            })
            .collect()
    }
}

impl DrawnTiles for StreamedQuadtreeLod<Partial> {
    fn drawn_tiles(&self) -> Vec<TileKey> {
        self.drawn_nodes()
            .map(|(node, level)| node_tile(node, level))
            .collect()
    }
}

/// With a checkerboard of tiles missing: every selection watertight, nothing drawn from a
/// missing tile, some block or node held back, and without a camera still covering the
/// whole terrain, coarser than the all-resident mesh; once every tile arrives, the
/// all-resident meshes frame by frame; without the roots' tiles nothing drawn, no panic.
fn missing_tiles_draw_coarser_without_cracks<L: DrawnTiles>(
    lod: &mut L,
    reference: &mut dyn LodAlgorithm,
    field: &Heightfield,
) {
    let name = lod.name();
    let (cols, rows) = (field.width() - 1, field.height() - 1);
    let mut views: Vec<View> = cameras(field)
        .into_iter()
        .flat_map(|c| [0.5, 3.0].map(|t| View::screen(c, t).expect("valid view")))
        .collect();
    views.push(View::world_error(0.01).expect("valid"));
    let mut held_back = 0;
    for view in &views {
        let mesh = lod.select(view).to_mesh(field);
        let report = check_mesh(&mesh, None);
        assert!(report.is_watertight(), "{name}: {report}");
        held_back += lod.stream_counts().held_back;
        for tile in lod.drawn_tiles() {
            assert!(!checkerboard(tile), "{name}: drawn from missing {tile:?}");
        }
        if view.camera().is_none() {
            let errors = measure_error(field, &mesh, None).expect("no camera");
            assert_eq!(errors.uncovered, 0, "{name}");
            let max = mesh
                .positions
                .iter()
                .fold((0, 0), |m, p| (m.0.max(p.col), m.1.max(p.row)));
            assert!(max.0 >= cols && max.1 >= rows, "{name}");
            let report = check_mesh(&mesh, Some(GridRect::new(0, 0, max.0, max.1)));
            assert!(report.is_watertight(), "{name}: {report}");
            // Nothing of level 0 could be drawn where its tile is missing.
            let full = triangles(reference, view);
            assert!(mesh.triangles.len() < full.len(), "{name}");
        }
    }
    assert!(held_back > 0, "{name}: something waited for a tile");
    assert!(
        !lod.source().refused.is_empty(),
        "{name}: missing tiles were asked for"
    );

    lod.source_mut().refuse = |_| false;
    for view in &views {
        assert_eq!(triangles(lod, view), triangles(reference, view), "{name}");
        assert_eq!(lod.stream_counts().held_back, 0, "{name}");
    }

    lod.source_mut().refuse = |_| true;
    let top = lod.source().header().levels.len() as u32 - 1;
    let frames = lod.source().frames;
    for view in [&views[0], views.last().expect("views")] {
        assert_eq!(lod.select(view).triangle_count(), 0, "{name}");
    }
    assert!(lod.source().refused.contains(&(top, 0, 0)), "{name}");
    assert_eq!(lod.source().frames, frames + 2, "{name}");
}

fn partial(field: &Heightfield) -> Partial {
    Partial {
        inner: MemoryTiles::new(field, OPTIONS).expect("valid"),
        refuse: checkerboard,
        refused: HashSet::new(),
        frames: 0,
    }
}

#[test]
fn missing_tiles_draw_coarser_blocks_without_cracks() {
    let field = field();
    let mut lod = StreamedLod::new(partial(&field), LodOptions::default());
    let mut reference = StreamedLod::new(
        MemoryTiles::new(&field, OPTIONS).expect("valid"),
        LodOptions::default(),
    );
    missing_tiles_draw_coarser_without_cracks(&mut lod, &mut reference, &field);
}

#[test]
fn missing_tiles_draw_larger_nodes_without_cracks() {
    let field = field();
    let mut lod = StreamedQuadtreeLod::new(partial(&field), LodOptions::default())
        .with_builds_per_frame(u32::MAX);
    let mut reference = StreamedQuadtreeLod::new(
        MemoryTiles::new(&field, OPTIONS).expect("valid"),
        LodOptions::default(),
    )
    .with_builds_per_frame(u32::MAX);
    missing_tiles_draw_coarser_without_cracks(&mut lod, &mut reference, &field);
}

/// With every tile resident the oracle's projected error stays within τ on terrains deep
/// enough for several levels of blocks, including seams (the registry's fields fit one
/// 256-cell tile).
#[test]
fn all_resident_keeps_tolerance() {
    for (field, options) in fields_with_levels() {
        let mut lod = StreamedLod::new(
            MemoryTiles::new(&field, options).expect("valid"),
            LodOptions::default(),
        );
        views_within_tolerance(&mut lod, &field);
    }
}

/// Terrains deep enough for several levels of tiles and blocks: the test field with tiny
/// tiles, and a larger one with 16-cell tiles.
fn fields_with_levels() -> [(Heightfield, MemoryTilesOptions); 2] {
    [
        (field(), OPTIONS),
        (
            smooth_random(129, 97, 9, 60.0).expect("valid"),
            MemoryTilesOptions {
                tile_cells: 16,
                block_cells: 4,
            },
        ),
    ]
}

/// Selects from every test camera at τ = 0.5 and 2 px: each mesh watertight and within τ
/// by the oracle. Returns the views.
fn views_within_tolerance(lod: &mut dyn LodAlgorithm, field: &Heightfield) -> Vec<View> {
    let mut views = Vec::new();
    for camera in cameras(field) {
        for tolerance in [0.5, 2.0] {
            let view = View::screen(camera, tolerance).expect("valid");
            let mesh = lod.select(&view).to_mesh(field);
            assert!(check_mesh(&mesh, None).is_watertight());
            let errors = measure_error(field, &mesh, Some(&camera)).expect("camera");
            let projected = errors.projected.expect("camera");
            assert!(
                projected.max <= f64::from(tolerance) * (1.0 + 1e-4) + 1e-3,
                "{} > {tolerance}",
                projected.max
            );
            views.push(view);
        }
    }
    views
}

/// Procedural detail below the stored levels (A9): the streamed meshes over the detail
/// terrain are watertight and within τ of its finest level (the generated terrain whole),
/// with the cameras low enough that the finest detail level is drawn.
#[test]
fn procedural_detail_keeps_tolerance() {
    // 10 m cells: the detail levels have 5 and 2.5 m cells with 1.25 and 0.6 m bumps.
    let field = smooth_random(65, 49, 5, 50.0)
        .and_then(|f| {
            let mapping = WorldMapping {
                cell_size: 10.0,
                ..f.mapping()
            };
            f.with_mapping(mapping)
        })
        .expect("valid");
    let stored = MemoryTiles::new(
        &field,
        MemoryTilesOptions {
            tile_cells: 16,
            block_cells: 4,
        },
    )
    .expect("valid");
    let options = DetailOptions {
        tiles_per_frame: u32::MAX,
        ..DetailOptions::DEFAULT.with_levels(2)
    };
    let mut lod = StreamedLod::new(
        DetailTiles::new(stored, options).expect("valid"),
        LodOptions::default(),
    );
    let generated = lod.source_mut().to_heightfield().expect("resident");
    assert_eq!(
        (generated.width(), generated.height()),
        (257, 193),
        "two levels: cells 4 × finer"
    );
    let (w, d) = field.world_size();
    let centre = glam::Vec3::new(0.5 * w, 30.0, 0.5 * d);
    let views = (0..6).map(|k| {
        let a = k as f32 * 1.1;
        let (r, h) = [(0.3, 40.0), (1.5, 120.0), (4.0, 400.0)][k % 3];
        let eye = centre + glam::Vec3::new(r * w * a.cos(), h, r * d * a.sin());
        Camera::new(eye, centre, 1.0, (640, 480), 0.5, 1e5).expect("valid camera")
    });
    let (mut finest_drawn, mut simplified) = (false, false);
    for camera in views {
        for tolerance in [0.5, 2.0] {
            let view = View::screen(camera, tolerance).expect("valid");
            let mesh = lod.select(&view).to_mesh(&generated);
            let report = check_mesh(&mesh, None);
            assert!(report.is_watertight(), "{report}");
            let errors = measure_error(&generated, &mesh, Some(&camera)).expect("camera");
            let projected = errors.projected.expect("camera");
            assert!(
                projected.max <= f64::from(tolerance) * (1.0 + 1e-4) + 1e-3,
                "{} > {tolerance}",
                projected.max
            );
            simplified |= projected.max > 0.1 * f64::from(tolerance);
            finest_drawn |= lod.drawn_blocks().any(|(level, _, _)| level == 0);
            assert_eq!(lod.stream_stats().blocks_held_back, 0);
        }
    }
    assert!(finest_drawn, "no camera reached the finest detail level");
    assert!(simplified, "every view drew the detail in full");
}

/// The level-`level` tile holding node `(k, ix, iz)` of the streamed quadtree (4-cell tiles).
fn node_tile((k, ix, iz): (u32, u32, u32), level: u32) -> TileKey {
    let shift = level + OPTIONS.tile_cells.trailing_zeros();
    (level, (ix << k) >> shift, (iz << k) >> shift)
}

/// The streamed quadtree's bounds over several levels of tiles (the registry's fields fit
/// one 256-cell tile): within τ by the oracle, watertight and covering the leaves'
/// extent; and with one tile pyramid built per frame, still watertight while the bounds
/// tighten, the all-resident meshes once every pyramid is built.
#[test]
fn streamed_quadtree_keeps_tolerance_over_levels_of_tiles() {
    for (field, options) in fields_with_levels() {
        let mut lod = StreamedQuadtreeLod::new(
            MemoryTiles::new(&field, options).expect("valid"),
            LodOptions::default(),
        )
        .with_builds_per_frame(u32::MAX);
        let mut views = views_within_tolerance(&mut lod, &field);
        let max_error = 0.05 * (field.world_range().1 - field.world_range().0);
        let view = View::world_error(max_error).expect("valid");
        let mesh = lod.select(&view).to_mesh(&field);
        let even = |samples: u32| (samples - 1).div_ceil(2) * 2;
        let region = GridRect::new(0, 0, even(field.width()), even(field.height()));
        let report = check_mesh(&mesh, Some(region));
        assert!(report.is_watertight(), "{report}");
        let errors = measure_error(&field, &mesh, None).expect("no camera");
        assert_eq!(errors.uncovered, 0);
        assert!(
            errors.world.max <= f64::from(max_error),
            "{}",
            errors.world.max
        );
        views.push(view);

        let mut slow = StreamedQuadtreeLod::new(
            MemoryTiles::new(&field, options).expect("valid"),
            LodOptions::default(),
        )
        .with_builds_per_frame(1);
        for view in &views {
            let mut frames = 0;
            loop {
                let mesh = slow.select(view).to_mesh(&field);
                assert!(check_mesh(&mesh, None).is_watertight());
                frames += 1;
                if slow.counters().tiles_built == 0 {
                    break;
                }
                assert!(frames < 1000, "the pyramids are never all built");
            }
            let (a, b) = (triangles(&mut slow, view), triangles(&mut lod, view));
            assert!(a == b, "{} against {} triangles", a.len(), b.len());
        }
    }
}

/// Procedural detail (A9) under the streamed quadtree: watertight and within τ of the
/// generated terrain, with nodes drawn from the detail level (level 0 of the detail grid).
#[test]
fn streamed_quadtree_over_procedural_detail_keeps_tolerance() {
    let field = smooth_random(33, 33, 5, 40.0).expect("valid");
    let stored = MemoryTiles::new(&field, OPTIONS).expect("valid");
    let options = DetailOptions {
        tiles_per_frame: u32::MAX,
        ..DetailOptions::DEFAULT.with_levels(1)
    };
    let mut lod = StreamedQuadtreeLod::new(
        DetailTiles::new(stored, options).expect("valid"),
        LodOptions::default(),
    )
    .with_builds_per_frame(u32::MAX);
    let generated = lod.source_mut().to_heightfield().expect("resident");
    let mut detail_drawn = false;
    for camera in cameras(&generated) {
        let view = View::screen(camera, 1.0).expect("valid");
        let mesh = lod.select(&view).to_mesh(&generated);
        assert!(check_mesh(&mesh, None).is_watertight());
        let errors = measure_error(&generated, &mesh, Some(&camera)).expect("camera");
        let projected = errors.projected.expect("camera");
        assert!(projected.max <= 1.0 + 1e-3, "{}", projected.max);
        detail_drawn |= lod.drawn_nodes().any(|(_, level)| level == 0);
    }
    assert!(detail_drawn, "no node drawn from the detail level");
}

/// The streamed quadtree asks only for tiles under what the view sees: with every level-0
/// tile refused (so each one asked for is recorded), none asked for lies wholly outside the
/// frustum.
#[test]
fn streamed_quadtree_asks_only_for_visible_tiles() {
    let field = smooth_random(129, 97, 9, 60.0).expect("valid");
    let options = MemoryTilesOptions {
        tile_cells: 16,
        block_cells: 4,
    };
    let (lo, hi) = field.world_range();
    let cell = field.mapping().cell_size;
    for camera in cameras(&field) {
        let source = Partial {
            inner: MemoryTiles::new(&field, options).expect("valid"),
            refuse: |(level, _, _)| level == 0,
            refused: HashSet::new(),
            frames: 0,
        };
        let mut lod =
            StreamedQuadtreeLod::new(source, LodOptions::default()).with_builds_per_frame(u32::MAX);
        let view = View::screen(camera, 0.5).expect("valid");
        lod.select(&view);
        let frustum = view.frustum().expect("a screen view");
        let asked = &lod.source().refused;
        assert!(!asked.is_empty(), "the view wants level 0 somewhere");
        for &(_, tx, ty) in asked {
            let side = 16.0 * cell;
            let square = Aabb {
                min: glam::Vec3::new(tx as f32 * side, lo, ty as f32 * side),
                max: glam::Vec3::new((tx + 1) as f32 * side, hi, (ty + 1) as f32 * side),
            };
            assert_ne!(
                frustum.classify(&square),
                Containment::Outside,
                "tile ({tx}, {ty}) asked for outside the view"
            );
        }
    }
}
