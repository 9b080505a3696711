//! Timings of the oracles at the sizes the brief names (about 4 M samples, 10^6 triangles).
//! Ignored by default; run them in release:
//! `cargo test --release -p terralod-testkit --test perf -- --ignored --nocapture`.

use glam::Vec3;
use std::time::Instant;
use terralod_core::{Camera, GridMesh, Heightfield};
use terralod_testkit::fixtures::{full_grid_mesh, quadtree_mesh, smooth_random};
use terralod_testkit::{GridRect, check_mesh, measure_error};

/// A view-dependent-looking mesh: quadtree leaves shrink with the distance to `focus`
/// (a leaf is split while its size exceeds `distance / detail`).
fn lod_mesh(field: &Heightfield, focus: (f64, f64), detail: f64) -> GridMesh {
    lod_mesh_stitched(field, focus, detail, true)
}

fn lod_mesh_stitched(
    field: &Heightfield,
    focus: (f64, f64),
    detail: f64,
    stitched: bool,
) -> GridMesh {
    quadtree_mesh(field, stitched, |r| {
        let size = f64::from(r.col1 - r.col0);
        let centre = (
            f64::from(r.col0) + size / 2.0,
            f64::from(r.row0) + size / 2.0,
        );
        let distance = (centre.0 - focus.0).hypot(centre.1 - focus.1) - size;
        size > distance.max(1.0) / detail
    })
}

fn camera() -> Camera {
    Camera {
        eye: Vec3::new(700.0, 1400.0, 2300.0),
        target: Vec3::new(1000.0, 300.0, 1000.0),
        fov_y: 60f32.to_radians(),
        viewport: (1920, 1080),
        near: 1.0,
        far: 10_000.0,
    }
}

#[test]
#[ignore = "performance measurement; run in release with --ignored --nocapture"]
fn measure_error_over_four_million_samples() {
    let field = smooth_random(2049, 2049, 1, 1000.0).unwrap();
    for (name, mesh) in [
        ("full grid", full_grid_mesh(&field)),
        ("lod", lod_mesh(&field, (900.0, 1100.0), 4.0)),
    ] {
        let start = Instant::now();
        let world = measure_error(&field, &mesh, None).unwrap();
        let world_time = start.elapsed();
        let start = Instant::now();
        let both = measure_error(&field, &mesh, Some(&camera())).unwrap();
        let both_time = start.elapsed();
        eprintln!(
            "measure_error, {name}: {} samples, {} triangles: {:.2?} world only, {:.2?} with \
             camera\n  {both}",
            field.len(),
            mesh.triangles.len(),
            world_time,
            both_time
        );
        assert_eq!(world.uncovered, 0);
        assert_eq!(world.world, both.world);
    }
}

#[test]
#[ignore = "performance measurement; run in release with --ignored --nocapture"]
fn check_mesh_over_a_million_triangles() {
    let grid_field = smooth_random(708, 708, 2, 100.0).unwrap();
    let lod_field = smooth_random(2049, 2049, 3, 100.0).unwrap();
    for (name, mesh, region) in [
        (
            "full grid",
            full_grid_mesh(&grid_field),
            GridRect::of_field(&grid_field),
        ),
        (
            "lod",
            lod_mesh(&lod_field, (900.0, 1100.0), 90.0),
            GridRect::square(2049),
        ),
    ] {
        let start = Instant::now();
        let report = check_mesh(&mesh, Some(region));
        eprintln!(
            "check_mesh, {name}: {} triangles: {:.2?}\n  {report}",
            mesh.triangles.len(),
            start.elapsed()
        );
        report.assert_ok();
    }
    // The same size with a T-junction at every level change: the defect paths scale too.
    let broken = lod_mesh_stitched(&lod_field, (900.0, 1100.0), 90.0, false);
    let start = Instant::now();
    let report = check_mesh(&broken, Some(GridRect::square(2049)));
    eprintln!(
        "check_mesh, lod unstitched: {} triangles: {:.2?}\n  {report}",
        broken.triangles.len(),
        start.elapsed()
    );
    assert!(report.crack_edges.count > 0 && report.t_vertices.count > 0);
    assert_eq!(report.overlaps.count, 0);
}
