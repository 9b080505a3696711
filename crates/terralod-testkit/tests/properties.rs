//! Property tests of the oracles over random fields, meshes and cameras. The number of
//! cases is 48 unless `PROPTEST_CASES` says otherwise (small in CI, large locally).

use proptest::prelude::*;
use terralod_core::{GridMesh, Heightfield, WorldMapping};
use terralod_testkit::fixtures::{full_grid_mesh, grid_mesh, quadtree_mesh, smooth_random};
use terralod_testkit::strategies::{arb_camera, arb_heightfield, arb_scene};
use terralod_testkit::{GridRect, check_mesh, measure_error, up_area2};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// The same samples with heights equal to the raw values, so that f32 mesh heights are
/// exact and any error the oracle finds is the oracle's.
fn exact_heights(field: Heightfield) -> Heightfield {
    let cell_size = field.mapping().cell_size;
    field
        .with_mapping(WorldMapping {
            cell_size,
            ..WorldMapping::default()
        })
        .expect("a positive cell size from a valid mapping")
}

/// A deterministic coin per quadtree node, so that a seed picks a random refinement.
fn coin(seed: u64, rect: GridRect, percent: u64) -> bool {
    let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
    for v in [rect.col0, rect.row0, rect.col1] {
        h = (h ^ u64::from(v)).wrapping_mul(0x100_0000_01b3);
        h ^= h >> 29;
    }
    h % 100 < percent
}

fn coarsest(field: &Heightfield) -> GridMesh {
    grid_mesh(field, GridRect::of_field(field), u32::MAX)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn full_grid_is_watertight_with_rounding_error_only(field in arb_heightfield(24)) {
        let mesh = full_grid_mesh(&field);
        let report = check_mesh(&mesh, Some(GridRect::of_field(&field)));
        prop_assert!(report.is_watertight(), "{}", report);
        let errors = measure_error(&field, &mesh, None).unwrap();
        prop_assert_eq!(errors.uncovered, 0);
        // Each drawn height is the f64 truth rounded once to f32.
        let (lo, hi) = field.world_range();
        let largest = f64::from(lo.abs().max(hi.abs()));
        prop_assert!(errors.world.max <= largest * 2f64.powi(-24), "{}", errors);
    }

    #[test]
    fn exact_heights_show_no_error_from_any_camera(
        (field, camera) in arb_heightfield(20).prop_map(exact_heights).prop_flat_map(|f| {
            let camera = arb_camera(&f);
            (Just(f), camera)
        })
    ) {
        let report = measure_error(&field, &full_grid_mesh(&field), Some(&camera)).unwrap();
        prop_assert_eq!(report.world.max, 0.0);
        let projected = report.projected.unwrap();
        prop_assert_eq!((projected.max, projected.clipped), (0.0, 0));
        prop_assert!(projected.in_view <= report.covered);
    }

    #[test]
    fn every_generated_camera_is_accepted_and_reports_are_consistent(
        (field, camera, tolerance) in arb_scene(16)
    ) {
        prop_assert!(tolerance > 0.0 && tolerance.is_finite());
        let report = measure_error(&field, &coarsest(&field), Some(&camera)).unwrap();
        prop_assert_eq!(report.covered + report.uncovered, report.data_samples);
        prop_assert_eq!(report.uncovered, 0);
        prop_assert!(report.world.p99 <= report.world.max);
        let projected = report.projected.unwrap();
        prop_assert!(projected.clipped <= projected.in_view);
        prop_assert!(projected.in_view <= report.covered);
        prop_assert!(projected.p99 <= projected.max);
        prop_assert_eq!(projected.worst.is_some(), projected.in_view > 0);
    }

    #[test]
    fn stitched_quadtree_meshes_are_watertight_and_cover_the_data(
        field in arb_heightfield(33),
        seed in any::<u64>(),
    ) {
        let mesh = quadtree_mesh(&field, true, |r| coin(seed, r, 60));
        let side = field.padded_side();
        let report = check_mesh(&mesh, Some(GridRect::square(side)));
        prop_assert!(report.is_watertight(), "{}", report);
        prop_assert_eq!(report.duplicate_vertices.count, 0);
        prop_assert_eq!(measure_error(&field, &mesh, None).unwrap().uncovered, 0);
    }

    #[test]
    fn unstitched_quadtree_meshes_crack_exactly_when_levels_differ(seed in any::<u64>()) {
        let field = smooth_random(17, 17, seed, 10.0).unwrap();
        let (mut smallest, mut largest) = (u32::MAX, 0);
        let mesh = quadtree_mesh(&field, false, |r| {
            let size = r.col1 - r.col0;
            let split = size > 2 && coin(seed, r, 50);
            if !split {
                smallest = smallest.min(size);
                largest = largest.max(size);
            }
            split
        });
        let report = check_mesh(&mesh, Some(GridRect::square(17)));
        let uniform = smallest == largest;
        prop_assert_eq!(report.is_watertight(), uniform, "{}", report);
        prop_assert_eq!(report.crack_edges.is_empty(), uniform);
        prop_assert_eq!(report.t_vertices.is_empty(), uniform);
        prop_assert_eq!(report.coverage.unwrap().uncovered_area2, 0);
    }

    #[test]
    fn a_removed_triangle_is_a_hole_of_its_own_area_and_never_a_crack(
        seed in any::<u64>(),
        pick in any::<prop::sample::Index>(),
    ) {
        let field = smooth_random(17, 17, seed, 10.0).unwrap();
        let mut mesh = quadtree_mesh(&field, true, |r| coin(seed, r, 60));
        let removed = mesh.triangles.remove(pick.index(mesh.triangles.len()));
        let [a, b, c] = removed.map(|i| mesh.positions[i as usize]);
        let area2 = up_area2(a, b, c).unwrap();
        let local = check_mesh(&mesh, None);
        prop_assert!(local.is_watertight(), "{}", local);
        let report = check_mesh(&mesh, Some(GridRect::square(17)));
        prop_assert_eq!(report.coverage.unwrap().uncovered_area2, i128::from(area2));
        prop_assert!(report.open_edges.count >= 1);
    }
}
