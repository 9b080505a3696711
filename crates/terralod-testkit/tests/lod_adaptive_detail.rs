//! Algorithm A with local detail (A5): a finer heightfield inserted into the tree. The
//! oracles judge the selection against the surface the detail defines, built here from
//! scratch (no code shared with the core): the detail's samples where it covers, the
//! terrain's samples (replaced by the detail's where it covers them) and, between them,
//! the terrain's full-resolution mesh (its finest 3 × 3 fans), on the grid subdivided
//! `2^k` times. Every selection is watertight, within τ of that surface (geomorphs
//! applied), deterministic and equal to a fresh instance's; a world error keeps every
//! fine sample within M; with a build tolerance T, within max(M, T) and τ plus T
//! projected. The number of cases is 24 unless `PROPTEST_CASES` says otherwise.

use glam::Vec3;
use proptest::prelude::*;
use terralod_core::camera::Aabb;
use terralod_core::lod::{
    AdaptiveLod, AdaptiveOptions, Detail, LodAlgorithm, LodOptions, Selection, View,
};
use terralod_core::{Camera, GridPos, Heightfield, Pyramid, WorldMapping};
use terralod_testkit::check_projected_with_build_tolerance;
use terralod_testkit::fixtures::exact_heights;
use terralod_testkit::strategies::{
    arb_camera, arb_heightfield, arb_pixel_tolerance, proptest_config,
};
use terralod_testkit::{check_mesh, measure_error};

/// Twice the signed area of `(a, b, c)`.
fn area2(a: (f64, f64), b: (f64, f64), c: (f64, f64)) -> f64 {
    (b.0 - a.0) * (c.1 - a.1) - (b.1 - a.1) * (c.0 - a.0)
}

/// The surface a detail defines, on the fine grid (`2^k` positions per terrain cell), as a
/// heightfield with the terrain's height mapping: its data rectangle is the terrain's.
fn fine_surface(
    terrain: &Heightfield,
    detail: &Heightfield,
    origin: (i64, i64),
    k: u32,
) -> Heightfield {
    let n = 1i64 << k;
    let (w, h) = (i64::from(terrain.width()), i64::from(terrain.height()));
    let (fw, fh) = ((w - 1) * n + 1, (h - 1) * n + 1);
    let covers = |c: i64, r: i64| {
        let (dc, dr) = (c - origin.0, r - origin.1);
        (0..i64::from(detail.width())).contains(&dc)
            && (0..i64::from(detail.height())).contains(&dr)
            && c < fw
            && r < fh
    };
    let detail_at =
        |c: i64, r: i64| f64::from(detail.raw((c - origin.0) as u32, (r - origin.1) as u32));
    // A terrain sample (the border repeated beyond the data), the detail's if it covers it.
    let sample = |bc: i64, br: i64| {
        let (bc, br) = (bc.min(w - 1), br.min(h - 1));
        if covers(bc * n, br * n) {
            detail_at(bc * n, br * n)
        } else {
            f64::from(terrain.raw(bc as u32, br as u32))
        }
    };
    let mut values = Vec::with_capacity((fw * fh) as usize);
    for r in 0..fh {
        for c in 0..fw {
            let value = if covers(c, r) {
                detail_at(c, r)
            } else if c % n == 0 && r % n == 0 {
                sample(c / n, r / n)
            } else {
                // The finest terrain square holding the point (2 cells, origin even), and
                // the one of its 8 fan triangles (centre, corner, edge midpoint) holding it.
                let (lx, lz) = (c / (2 * n) * 2, r / (2 * n) * 2);
                let p = (c as f64 / n as f64, r as f64 / n as f64);
                let centre = ((lx + 1) as f64, (lz + 1) as f64);
                let mut found = None;
                for (dx, dz) in [(-1, -1), (1, -1), (1, 1), (-1, 1)] {
                    let corner = (centre.0 + f64::from(dx), centre.1 + f64::from(dz));
                    for mid in [(corner.0, centre.1), (centre.0, corner.1)] {
                        let tri = [centre, corner, mid];
                        let total = area2(tri[0], tri[1], tri[2]);
                        let weights = [
                            area2(p, tri[1], tri[2]) / total,
                            area2(tri[0], p, tri[2]) / total,
                            area2(tri[0], tri[1], p) / total,
                        ];
                        if found.is_none() && weights.iter().all(|&wt| wt >= -1e-12) {
                            let height = |q: (f64, f64)| sample(q.0 as i64, q.1 as i64);
                            found = Some(
                                weights[0] * height(tri[0])
                                    + weights[1] * height(tri[1])
                                    + weights[2] * height(tri[2]),
                            );
                        }
                    }
                }
                found.expect("a fan triangle holds every point of its square")
            };
            values.push(value as f32);
        }
    }
    let mapping = terrain.mapping();
    Heightfield::from_f32(fw as u32, fh as u32, values)
        .and_then(|f| {
            f.with_mapping(WorldMapping {
                cell_size: mapping.cell_size / n as f32,
                ..mapping
            })
        })
        .expect("a valid fine surface")
}

/// A terrain, a detail, its subdivision `k` and fine origin, cameras (with culling or
/// not) over the fine surface, and a tolerance.
type DetailScene = (
    Heightfield,
    Heightfield,
    u32,
    (i64, i64),
    Vec<(Camera, bool)>,
    f32,
);

fn arb_detail_scene() -> impl Strategy<Value = DetailScene> {
    (
        arb_heightfield(20).prop_map(exact_heights),
        arb_heightfield(24),
        1u32..=3,
        (-0.3f64..1.0, -0.3f64..1.0),
    )
        .prop_flat_map(|(terrain, detail, k, (u, v))| {
            let n = f64::from(1u32 << k);
            let origin = (
                (u * f64::from(terrain.width() - 1) * n).round() as i64,
                (v * f64::from(terrain.height() - 1) * n).round() as i64,
            );
            let fine = fine_surface(&terrain, &detail, origin, k);
            let cameras = prop::collection::vec((arb_camera(&fine), any::<bool>()), 1..5);
            (
                Just(terrain),
                Just(detail),
                Just(k),
                Just(origin),
                cameras,
                arb_pixel_tolerance(),
            )
        })
}

/// Triangles (fine positions) and drawn heights of a selection.
fn frame(selection: &Selection<'_>) -> (Vec<[GridPos; 3]>, Vec<(u32, f32)>) {
    let mut triangles = Vec::new();
    selection.for_each_triangle(|t| triangles.push(t));
    let morphs = match selection {
        Selection::Triangles { morphs, .. } => {
            morphs.iter().map(|m| (m.vertex, m.height)).collect()
        }
        Selection::Patches { .. } | Selection::Listed { .. } => Vec::new(),
    };
    (triangles, morphs)
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn detail_selections_are_watertight_and_within_tolerance_of_the_detail(
        (terrain, detail_field, k, origin, cameras, tolerance) in arb_detail_scene(),
        world_fraction in 0.0f32..0.3,
        morph in any::<bool>(),
        build_fraction in prop_oneof![Just(0.0f32), 0.0f32..0.3],
        list_vertices in any::<bool>(),
    ) {
        let fine_cell = terrain.mapping().cell_size / (1u32 << k) as f32;
        let world_origin = (origin.0 as f32 * fine_cell, origin.1 as f32 * fine_cell);
        let Ok(detail) = Detail::new(&terrain, &detail_field, world_origin, fine_cell) else {
            // Entirely off the terrain: refused (tested in the core).
            return Ok(());
        };
        prop_assert_eq!(detail.origin(), origin);
        let fine = fine_surface(&terrain, &detail_field, origin, k);
        let pyramid = Pyramid::build(&terrain);
        let (lo, hi) = fine.world_range();
        let build_tolerance = (hi - lo) * build_fraction;
        let options = AdaptiveOptions::default()
            .with_morph(morph)
            .with_build_tolerance(build_tolerance)
            .with_list_vertices(list_vertices);
        let build = || {
            AdaptiveLod::with_detail(&terrain, &pyramid, LodOptions::default(), options, &detail)
                .expect("placed on this terrain")
        };
        let mut walker = build();
        prop_assert_eq!(walker.grid_vertices().shift, k);
        let rounding = f64::from(lo.abs().max(hi.abs())) * 2f64.powi(-23);
        let max_error = ((hi - lo) * world_fraction).max(1e-3 * (hi - lo).max(1.0));
        let world = View::world_error(max_error).expect("valid");
        let mesh = walker.select(&world).to_mesh(&terrain);
        let report = check_mesh(&mesh, None);
        prop_assert!(report.is_watertight(), "{}", report);
        let errors = measure_error(&fine, &mesh, None).expect("no camera");
        prop_assert_eq!(errors.uncovered, 0, "{}", errors);
        prop_assert!(
            errors.world.max <= f64::from(max_error.max(build_tolerance)) * (1.0 + 1e-6) + rounding,
            "M {} T {}: {}", max_error, build_tolerance, errors
        );
        let side = (fine.padded_side() - 1) as f32 * fine.mapping().cell_size;
        let terrain_box = Aabb::new(Vec3::new(0.0, lo, 0.0), Vec3::new(side, hi, side));
        for (camera, cull) in &cameras {
            let view = View::screen(*camera, tolerance).expect("valid view").with_cull(*cull);
            let selection = walker.select(&view);
            prop_assert!(selection.listed_heights_agree());
            let carried = frame(&selection);
            let mesh = selection.to_mesh(&terrain);
            prop_assert!(carried == frame(&build().select(&view)), "differs from a fresh selection");
            let report = check_mesh(&mesh, None);
            prop_assert!(report.is_watertight(), "{}", report);
            // τ, plus the build tolerance projected over each sample's column; a column lies
            // in the terrain's box, so where the bound over that box is finite no sample is
            // skipped.
            let (_, skipped) = check_projected_with_build_tolerance(
                &fine, &mesh, camera, &view, tolerance, build_tolerance,
            )
            .map_err(TestCaseError::fail)?;
            let whole = view.projected_error_bound(build_tolerance, &terrain_box, false);
            prop_assert!(!whole.is_finite() || skipped == 0, "{} samples skipped", skipped);
        }
    }
}

/// A detail that differs from the terrain (a road with bumps a fine cell apart, cut
/// through rough ground, its border between terrain samples): at full resolution the mesh
/// draws its samples, finer vertices appear only around the footprint, and the terrain
/// elsewhere keeps its own resolution.
#[test]
fn a_road_is_drawn_at_its_resolution_and_only_there() {
    let terrain = exact_heights(
        terralod_testkit::fixtures::smooth_random(33, 33, 4, 200.0).expect("valid field"),
    );
    let k = 2;
    let bumps = (0..41 * 9)
        .map(|i| 50.0 + ((i % 41 + i / 41) % 3) as f32 * 0.25)
        .collect();
    let road = Heightfield::from_f32(41, 9, bumps).expect("valid road");
    let origin = (25i64, 41i64);
    let fine_cell = terrain.mapping().cell_size / 4.0;
    let detail = Detail::new(
        &terrain,
        &road,
        (origin.0 as f32 * fine_cell, origin.1 as f32 * fine_cell),
        fine_cell,
    )
    .expect("on the terrain");
    let pyramid = Pyramid::build(&terrain);
    let mut lod = AdaptiveLod::with_detail(
        &terrain,
        &pyramid,
        LodOptions::default(),
        // Without morphing, so the drawn heights are the samples'.
        AdaptiveOptions::default().with_morph(false),
        &detail,
    )
    .expect("placed on this terrain");
    let plain = AdaptiveLod::new(&terrain, &pyramid, LodOptions::default());
    assert!(
        lod.squares() > plain.squares(),
        "{} squares, {} without the road",
        lod.squares(),
        plain.squares()
    );
    let mesh = lod
        .select(&View::world_error(1e-3).expect("valid"))
        .to_mesh(&terrain);
    check_mesh(&mesh, None).assert_ok();
    let fine = fine_surface(&terrain, &road, origin, k);
    let errors = measure_error(&fine, &mesh, None).expect("no camera");
    assert_eq!(errors.uncovered, 0, "{errors}");
    assert!(errors.world.max <= 1e-3, "{errors}");
    // Road samples are vertices at their height, and positions off the terrain's samples
    // lie within two finest terrain squares (the ones touching the road and one more:
    // 4 cells, 16 fine positions) of the road.
    let [x0, z0, x1, z1] = detail.footprint();
    let (mut on_road, mut off_grid_vertices) = (0, 0);
    for (pos, height) in mesh.positions.iter().zip(&mesh.heights) {
        let off_grid = pos.col % 4 != 0 || pos.row % 4 != 0;
        if off_grid {
            off_grid_vertices += 1;
            assert!(
                pos.col + 16 >= x0
                    && pos.col <= x1 + 16
                    && pos.row + 16 >= z0
                    && pos.row <= z1 + 16,
                "{pos:?} far from the road"
            );
        }
        if (x0..=x1).contains(&pos.col) && (z0..=z1).contains(&pos.row) {
            let (c, r) = (pos.col - 25, pos.row - 41);
            assert_eq!(*height, road.raw(c, r), "{pos:?}");
            on_road += 1;
        }
    }
    // Bumps a fine cell apart need fine vertices (samples on a straight line between two
    // others need none).
    assert!(
        off_grid_vertices > 41 * 9 / 2,
        "{off_grid_vertices} fine vertices"
    );
    assert!(on_road >= off_grid_vertices / 2, "{on_road} road vertices");
}
