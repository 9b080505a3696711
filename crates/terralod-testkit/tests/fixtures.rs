//! The fixtures are what they claim: exact shapes, reproducible random relief, valid meshes.

use terralod_core::{GridPos, Heightfield};
use terralod_testkit::fixtures::{
    grid_mesh, plane, quadtree_mesh, random_spikes, smooth_random, spike, steps, tilted_plane,
};
use terralod_testkit::{GridRect, check_mesh, measure_error};

fn values(field: &Heightfield) -> Vec<f32> {
    (0..field.len()).map(|i| field.samples().get(i)).collect()
}

#[test]
fn exact_shapes_hold_the_values_they_describe() {
    assert!(values(&plane(3, 2, 7.5).unwrap()).iter().all(|&v| v == 7.5));
    let tilted = tilted_plane(4, 3, 1.0, 2.0, -3.0).unwrap();
    assert_eq!(tilted.raw(3, 2), 1.0 + 6.0 - 6.0);
    assert_eq!(tilted.raw(2, 1), 1.0 + 4.0 - 3.0);
    let peak = spike(5, 4, 1.0, GridPos::new(3, 1), 9.0).unwrap();
    assert_eq!(values(&peak).iter().filter(|&&v| v == 9.0).count(), 1);
    assert_eq!(peak.raw(3, 1), 9.0);
    let terraces = steps(7, 2, 3, 10.0).unwrap();
    assert_eq!(
        (0..7).map(|c| terraces.raw(c, 1)).collect::<Vec<_>>(),
        vec![0.0, 0.0, 0.0, 10.0, 10.0, 10.0, 20.0]
    );
    assert!(
        plane(1, 5, 0.0).is_err(),
        "sizes are validated, not panicked on"
    );
}

#[test]
fn random_relief_is_reproducible_bounded_and_smooth() {
    let a = smooth_random(40, 30, 42, 100.0).unwrap();
    assert_eq!(a, smooth_random(40, 30, 42, 100.0).unwrap());
    assert_ne!(a, smooth_random(40, 30, 43, 100.0).unwrap());
    let (lo, hi) = a.raw_range();
    assert!(lo >= 0.0 && hi <= 100.0 && hi - lo > 10.0, "{lo}..{hi}");
    // Smoothstep value noise changes by at most 1.5 / period of its range per sample in
    // each octave: about 0.16 of the amplitude overall.
    for row in 0..30 {
        for col in 0..39 {
            assert!((a.raw(col + 1, row) - a.raw(col, row)).abs() <= 20.0);
        }
    }
    let spiky = random_spikes(20, 20, 7, 5, 50.0, 30.0).unwrap();
    let off_plane = values(&spiky).iter().filter(|&&v| v != 50.0).count();
    assert!((1..=5).contains(&off_plane));
    assert!(values(&spiky).iter().all(|&v| (20.0..=80.0).contains(&v)));
}

#[test]
fn a_tilted_plane_needs_no_more_than_two_triangles() {
    let field = tilted_plane(17, 9, 100.0, 0.5, -0.25).unwrap();
    let coarsest = grid_mesh(&field, GridRect::of_field(&field), u32::MAX);
    assert_eq!(coarsest.triangles.len(), 2);
    let report = measure_error(&field, &coarsest, None).unwrap();
    assert!(report.world.max < 1e-5, "{report}");
}

#[test]
fn grid_meshes_cover_sub_regions_at_any_stride() {
    let field = smooth_random(20, 12, 1, 10.0).unwrap();
    let region = GridRect::new(3, 2, 17, 11);
    for step in [1, 2, 5, 100] {
        let mesh = grid_mesh(&field, region, step);
        check_mesh(&mesh, Some(region)).assert_ok();
    }
}

#[test]
fn an_unsplit_quadtree_is_a_four_triangle_fan() {
    let field = plane(9, 9, 0.0).unwrap();
    let root = quadtree_mesh(&field, true, |_| false);
    assert_eq!((root.positions.len(), root.triangles.len()), (5, 4));
    check_mesh(&root, Some(GridRect::square(9))).assert_ok();
    // Unstitched, every leaf of two or more cells is the 8-triangle fan of article 000.
    let unstitched = quadtree_mesh(&field, false, |_| false);
    assert_eq!(unstitched.triangles.len(), 8);
    check_mesh(&unstitched, Some(GridRect::square(9))).assert_ok();
}
