//! Proves the brute-force error oracle on meshes with known vertical and projected errors.

use glam::Vec3;
use std::f32::consts::FRAC_PI_2;
use terralod_core::{Camera, GridMesh, GridPos, Heightfield, Samples, WorldMapping};
use terralod_testkit::fixtures::{
    full_grid_mesh, grid_mesh, plane, quadtree_mesh, smooth_random, spike, t_junction_mesh,
};
use terralod_testkit::{ErrorReport, GridRect, MeasureError, measure_error};

/// The one helper: measures and prints the report, so that failures explain themselves.
fn measure(field: &Heightfield, mesh: &GridMesh, camera: Option<&Camera>) -> ErrorReport {
    let report = measure_error(field, mesh, camera).expect("a valid camera");
    eprintln!("{report}");
    report
}

/// A 90° camera with an 800 × 600 viewport: pixel scale about `600 / (2 tan 45°) = 300`.
fn camera(eye: Vec3, target: Vec3) -> Camera {
    Camera {
        eye,
        target,
        fov_y: FRAC_PI_2,
        viewport: (800, 600),
        near: 0.5,
        far: 1000.0,
    }
}

/// `viewport_height / (2 tan(fov_y / 2))` for the f32 field of view the camera holds (a
/// hair above π/2, so a hair below 300).
fn pixel_scale() -> f64 {
    600.0 / (2.0 * (f64::from(FRAC_PI_2) / 2.0).tan())
}

/// The two-triangle mesh of the whole field: no vertex inside.
fn coarsest(field: &Heightfield) -> GridMesh {
    grid_mesh(field, GridRect::of_field(field), u32::MAX)
}

#[test]
fn full_resolution_mesh_has_zero_error_and_full_coverage() {
    let field = smooth_random(23, 18, 11, 700.0).unwrap();
    let looking = camera(Vec3::new(-10.0, 900.0, -10.0), Vec3::new(11.0, 300.0, 9.0));
    let report = measure(&field, &full_grid_mesh(&field), Some(&looking));
    assert_eq!(report.data_samples, 23 * 18);
    assert_eq!((report.covered, report.uncovered), (23 * 18, 0));
    assert_eq!((report.world.max, report.world.p99), (0.0, 0.0));
    let projected = report.projected.unwrap();
    assert!(projected.in_view > 0);
    assert_eq!((projected.max, projected.clipped), (0.0, 0));
}

#[test]
fn with_a_real_mapping_the_error_is_the_f32_rounding_of_the_heights() {
    let field = smooth_random(9, 9, 2, 3000.0)
        .unwrap()
        .with_mapping(WorldMapping {
            cell_size: 30.0,
            height_scale: 0.1,
            height_offset: 1500.0,
        })
        .unwrap();
    let report = measure(&field, &full_grid_mesh(&field), None);
    // Heights near 1800 m: half an f32 ulp there is 2^-14 m.
    assert!(report.world.max <= 2f64.powi(-14), "{}", report.world.max);
}

#[test]
fn a_missing_cell_leaves_exactly_its_inner_sample_uncovered() {
    let field = smooth_random(7, 7, 4, 10.0).unwrap();
    let mut mesh = grid_mesh(&field, GridRect::of_field(&field), 2);
    // Stride-2 cells are 3 × 3; cell (1, 1) spans samples 2..=4 and holds (3, 3) alone
    // inside; its border samples are shared with the neighbouring cells.
    let first = 2 * (3 + 1);
    mesh.triangles.drain(first..first + 2);
    let report = measure(&field, &mesh, None);
    assert_eq!(report.uncovered, 1);
    assert_eq!(report.covered, 48);
}

#[test]
fn a_hidden_spike_gives_its_exact_vertical_error_and_p99_is_the_nearest_rank() {
    // 11 × 11 = 121 samples; p99 is the ceil(119.79) = 120th smallest error.
    let mapping = WorldMapping {
        cell_size: 1.0,
        height_scale: 2.0,
        height_offset: -3.0,
    };
    let field = spike(11, 11, 10.0, GridPos::new(5, 5), 15.0)
        .unwrap()
        .with_mapping(mapping)
        .unwrap();
    let report = measure(&field, &coarsest(&field), None);
    assert_eq!(report.world.max, 10.0, "5 raw units x height scale 2");
    let worst = report.world.worst.unwrap();
    assert_eq!(worst.pos, GridPos::new(5, 5));
    assert_eq!((worst.true_height, worst.drawn_height), (27.0, 17.0));
    assert_eq!(
        report.world.p99, 0.0,
        "119 zeros and one 10: the 120th is 0"
    );

    // With a second, smaller spike the 120th smallest is that spike's error.
    let mut values = vec![10.0f32; 121];
    values[5 * 11 + 5] = 15.0;
    values[2 * 11 + 7] = 13.0;
    let field = Heightfield::from_f32(11, 11, values).unwrap();
    let report = measure(&field, &coarsest(&field), None);
    assert_eq!((report.world.max, report.world.p99), (5.0, 3.0));
}

#[test]
fn integer_samples_are_measured_in_their_own_storage() {
    let mut values = vec![100u16; 25];
    values[12] = 160;
    let field = Heightfield::new(5, 5, Samples::U16(values))
        .unwrap()
        .with_mapping(WorldMapping {
            cell_size: 80.0,
            height_scale: 0.1,
            height_offset: 0.0,
        })
        .unwrap();
    let report = measure(&field, &coarsest(&field), None);
    assert!(
        (report.world.max - 6.0).abs() < 1e-6,
        "{}",
        report.world.max
    );
}

/// Plane at 10 with the sample (5,5) at 15, meshed by two triangles drawn at 10.
fn spike_scene() -> (Heightfield, GridMesh) {
    let field = spike(11, 11, 10.0, GridPos::new(5, 5), 15.0).unwrap();
    let mesh = coarsest(&field);
    (field, mesh)
}

#[test]
fn a_level_camera_sees_the_spike_at_the_analytic_pixel_distance() {
    let (field, mesh) = spike_scene();
    // Eye 50 units west of the spike at the plane's height, looking east at its foot: the
    // drawn point is at the centre, the true point 5 units above at depth 50, so
    // 5 * 300 / 50 = 30 pixels.
    let level = camera(Vec3::new(-45.0, 10.0, 5.0), Vec3::new(5.0, 10.0, 5.0));
    let report = measure(&field, &mesh, Some(&level));
    let projected = report.projected.unwrap();
    let expected = 5.0 * pixel_scale() / 50.0;
    assert!((projected.max - expected).abs() < 1e-9, "{}", projected.max);
    assert_eq!(projected.worst.unwrap().pos, GridPos::new(5, 5));
    // Every sample is within 5 units sideways at depth >= 45: all 121 in view.
    assert_eq!((projected.in_view, projected.clipped), (121, 0));

    // The same scene with 10-unit cells seen from 500 units: 5 * 300 / 500 = 3 pixels.
    let field = field
        .with_mapping(WorldMapping {
            cell_size: 10.0,
            ..WorldMapping::default()
        })
        .unwrap();
    let far = camera(Vec3::new(-450.0, 10.0, 50.0), Vec3::new(50.0, 10.0, 50.0));
    let projected = measure(&field, &mesh, Some(&far)).projected.unwrap();
    let expected = 5.0 * pixel_scale() / 500.0;
    assert!((projected.max - expected).abs() < 1e-9, "{}", projected.max);
}

#[test]
fn a_camera_looking_down_at_45_degrees_sees_the_analytic_pixel_distance() {
    let (field, mesh) = spike_scene();
    // Eye at (5, 10 + h, 5 + h) looking at the spike's foot (5, 10, 5). In view
    // coordinates the true point (5, 15, 5) has height 5/√2 and depth (2h − 5)/√2, the
    // drawn point is at the centre: 300 · 5 / (2h − 5) pixels.
    let h = 10.0f32;
    let down = camera(Vec3::new(5.0, 10.0 + h, 5.0 + h), Vec3::new(5.0, 10.0, 5.0));
    let projected = measure(&field, &mesh, Some(&down)).projected.unwrap();
    let expected = pixel_scale() * 5.0 / (2.0 * f64::from(h) - 5.0);
    assert!((projected.max - expected).abs() < 1e-9, "{}", projected.max);
    assert_eq!(projected.worst.unwrap().pos, GridPos::new(5, 5));
}

#[test]
fn looking_straight_down_at_the_spike_hides_it() {
    let (field, mesh) = spike_scene();
    // Both points are on the view axis: a vertical error straight below is invisible.
    let down = camera(Vec3::new(5.0, 40.0, 5.0), Vec3::new(5.0, 0.0, 5.0));
    let projected = measure(&field, &mesh, Some(&down)).projected.unwrap();
    assert_eq!(projected.max, 0.0);
    assert_eq!(projected.in_view, 121);
}

#[test]
fn samples_behind_the_camera_are_ignored() {
    // The spike at (1,5) is behind an eye at x = 5 looking east.
    let field = spike(11, 11, 10.0, GridPos::new(1, 5), 15.0).unwrap();
    let mesh = coarsest(&field);
    let east = camera(Vec3::new(5.0, 11.0, 5.0), Vec3::new(10.0, 11.0, 5.0));
    let report = measure(&field, &mesh, Some(&east));
    assert_eq!(report.world.max, 5.0);
    let projected = report.projected.unwrap();
    assert_eq!(projected.max, 0.0);
    // In view: depth d = col − 5 >= 1 (the point 1 below the eye lands 300/d <= 300 px
    // from the centre) and |row − 5| · 300 / d <= 400. Columns 6..=10 hold 3, 5, 9, 11, 11
    // such rows.
    assert_eq!(projected.in_view, 3 + 5 + 9 + 11 + 11);
}

#[test]
fn a_drawn_point_behind_the_eye_is_clipped_and_infinite() {
    let field = plane(11, 11, 10.0).unwrap();
    let mut mesh = full_grid_mesh(&field);
    let centre = 5 * 11 + 5;
    mesh.heights[centre] = 20.0;
    // The eye 2 above the plane looks straight down: the true point (5,10,5) is 2 ahead,
    // the drawn one (5,20,5) is 8 behind.
    let down = camera(Vec3::new(5.0, 12.0, 5.0), Vec3::new(5.0, 0.0, 5.0));
    let report = measure(&field, &mesh, Some(&down));
    let projected = report.projected.unwrap();
    assert_eq!(projected.clipped, 1);
    assert_eq!(projected.max, f64::INFINITY);
    assert_eq!(projected.worst.unwrap().pos, GridPos::new(5, 5));
    assert_eq!(report.world.max, 10.0);
}

#[test]
fn a_crack_shows_as_the_worse_side_of_the_junction() {
    // A coarse triangle pair over (0..2, 0..2) and fine quads on (2..3, 0..2) with a
    // vertex at (2,1), where the field has a bump of 4: the fine side draws it, the coarse
    // edge interpolates 0. The sample is covered by both and keeps the worst error.
    let mut values = vec![0.0f32; 4 * 3];
    values[4 + 2] = 4.0;
    let field = Heightfield::from_f32(4, 3, values).unwrap();
    let mut mesh = t_junction_mesh();
    mesh.heights[4] = 4.0; // the fine vertex (2,1) draws the bump
    let report = measure(&field, &mesh, None);
    let worst = report.world.worst.unwrap();
    assert_eq!((worst.pos, report.world.max), (GridPos::new(2, 1), 4.0));
    assert_eq!(worst.drawn_height, 0.0);
    assert_eq!(report.covered, 12);
}

#[test]
fn vertices_beyond_the_data_are_fine_and_their_samples_ignored() {
    // A 6 × 5 field meshed over its padded 9 × 9 square at full detail.
    let field = smooth_random(6, 5, 8, 40.0).unwrap();
    let mesh = quadtree_mesh(&field, true, |_| true);
    let report = measure(&field, &mesh, None);
    assert_eq!((report.covered, report.uncovered), (30, 0));
    assert_eq!(report.world.max, 0.0);
}

#[test]
fn bad_triangles_are_skipped_and_bad_cameras_are_errors() {
    let field = plane(3, 3, 1.0).unwrap();
    let mut mesh = full_grid_mesh(&field);
    mesh.triangles.push([0, 1, 99]);
    mesh.triangles.push([0, 1, 2]); // collinear: row 0
    mesh.heights.pop(); // vertex 8 has no height: its two triangles are skipped
    let report = measure(&field, &mesh, None);
    assert_eq!(report.skipped_triangles, 4);
    assert_eq!(report.uncovered, 1, "sample (2,2) lost its triangles");

    let mut nan = full_grid_mesh(&field);
    nan.heights[4] = f32::NAN;
    let report = measure(&field, &nan, None);
    assert_eq!(report.world.max, f64::INFINITY);

    let bad = Camera {
        near: -1.0,
        ..camera(Vec3::ZERO, Vec3::X)
    };
    assert_eq!(
        measure_error(&field, &mesh, Some(&bad)),
        Err(MeasureError::ClipDistances {
            near: -1.0,
            far: 1000.0
        })
    );
}

/// The windowed oracle is the whole-data oracle, window by window: on a 49 × 37 field under
/// a quadtree mesh reaching past the data (the padded grid), with a degenerate and an
/// out-of-range triangle added, every count, maximum and worst sample agrees with
/// `measure_error`'s for windows of 2 to 64 samples, with and without a camera, and the
/// windows read are only those some triangle reaches.
#[test]
fn the_windowed_oracle_equals_the_whole_one() {
    use terralod_testkit::{
        Window, WindowedMeasureError, for_each_projected_sample, measure_error_by_windows,
        measure_error_by_windows_skipping,
    };
    let raw = smooth_random(49, 37, 11, 40.0).expect("valid field");
    let mapping = WorldMapping {
        cell_size: 3.0,
        height_scale: 1.5,
        height_offset: -7.0,
    };
    let field = raw.clone().with_mapping(mapping).expect("valid mapping");
    // Leaves of 1 to 8 cells, coarse far from the south-west, heights off the samples.
    let mut mesh = quadtree_mesh(&field, true, |rect| {
        let size = rect.col1 - rect.col0;
        size > 8 || (rect.col0 < 24 && rect.row1 > 20 && size > 1)
    });
    for (i, h) in mesh.heights.iter_mut().enumerate() {
        *h += (i % 7) as f32 * 0.25 - 0.5;
    }
    let first = mesh.triangles[0];
    mesh.triangles.push([first[0], first[0], first[1]]);
    mesh.triangles.push([0, 1, u32::MAX]);
    let window_of = |w: Window| -> Result<Heightfield, String> {
        let Samples::F32(values) = raw.samples() else {
            return Err("not f32".into());
        };
        let mut out = Vec::new();
        for row in w.origin.row..w.origin.row + w.height {
            let start = (row * raw.width() + w.origin.col) as usize;
            out.extend_from_slice(&values[start..start + w.width as usize]);
        }
        Heightfield::new(w.width, w.height, Samples::F32(out)).map_err(|e| e.to_string())
    };
    let low = camera(Vec3::new(-20.0, 60.0, 130.0), Vec3::new(90.0, 0.0, 40.0));
    for camera in [None, Some(&low)] {
        let whole = measure(&field, &mesh, camera);
        assert!(whole.world.max > 0.0 && whole.skipped_triangles == 2);
        for side in [2, 5, 16, 64] {
            let windowed =
                measure_error_by_windows((49, 37), mapping, side, &mesh, camera, window_of)
                    .expect("every window reads");
            assert_eq!(windowed.data_samples, whole.data_samples, "side {side}");
            assert_eq!(windowed.covered, whole.covered, "side {side}");
            assert_eq!(windowed.uncovered, whole.uncovered, "side {side}");
            assert_eq!(windowed.skipped_triangles, 2, "side {side}");
            assert_eq!(windowed.world_max, whole.world.max, "side {side}");
            assert_eq!(windowed.world_worst, whole.world.worst, "side {side}");
            match (&windowed.projected, &whole.projected) {
                (Some(w), Some(p)) => {
                    assert!(p.in_view > 0 && p.max > 0.0);
                    assert_eq!(
                        (w.in_view, w.clipped, w.max, w.worst),
                        (p.in_view, p.clipped, p.max, p.worst),
                        "side {side}"
                    );
                }
                (None, None) => {}
                other => panic!("side {side}: {other:?}"),
            }
        }
    }
    // Ties go to the lowest row, then column, whatever order the triangles (and windows)
    // come in: every sample of this mesh is 1 too high, and its triangles run backwards.
    let flat = plane(49, 37, 0.0).expect("valid field");
    let mut raised = full_grid_mesh(&flat);
    raised.heights.iter_mut().for_each(|h| *h = 1.0);
    raised.triangles.reverse();
    let whole = measure(&flat, &raised, None);
    let flat_window = |w: Window| -> Result<Heightfield, String> {
        plane(w.width, w.height, 0.0).map_err(|e| e.to_string())
    };
    let windowed =
        measure_error_by_windows((49, 37), flat.mapping(), 8, &raised, None, flat_window)
            .expect("reads");
    for worst in [whole.world.worst, windowed.world_worst] {
        assert_eq!(
            worst.map(|w| (w.pos, w.error)),
            Some((GridPos::new(0, 0), 1.0))
        );
    }
    // Only the windows a triangle reaches are read: one triangle in one corner.
    let corner = GridMesh {
        positions: vec![GridPos::new(0, 0), GridPos::new(0, 3), GridPos::new(3, 0)],
        heights: vec![0.0; 3],
        triangles: vec![[0, 1, 2]],
    };
    let report =
        measure_error_by_windows((49, 37), mapping, 8, &corner, None, window_of).expect("reads");
    assert_eq!((report.windows_read, report.covered), (1, 10));
    // A read that fails or comes back in another shape is an error naming the window.
    let failed = measure_error_by_windows((49, 37), mapping, 8, &corner, None, |_| {
        Err::<Heightfield, _>("disk on fire")
    });
    let message = failed.expect_err("the read failed").to_string();
    assert!(
        message.contains("at (0, 0)") && message.contains("disk on fire"),
        "{message}"
    );
    let shaped = measure_error_by_windows((49, 37), mapping, 8, &corner, None, |_| {
        window_of(Window {
            origin: GridPos::new(0, 0),
            width: 4,
            height: 4,
        })
    });
    assert!(matches!(shaped, Err(WindowedMeasureError::Shape { .. })));

    // Windows that cannot be read (tiles corrupted on purpose) are left out when asked:
    // the rest measures exactly what a per-sample visit finds outside them.
    let strict = measure_error_by_windows((49, 37), mapping, 8, &mesh, Some(&low), window_of)
        .expect("every window reads");
    let (all, none) =
        measure_error_by_windows_skipping((49, 37), mapping, 8, &mesh, Some(&low), window_of)
            .expect("every window reads");
    assert_eq!((all, none.len()), (strict, 0));
    let broken = [GridPos::new(8, 16), GridPos::new(16, 8)];
    let failing = |w: Window| {
        if broken.contains(&w.origin) {
            Err(format!("flipped byte at {:?}", w.origin))
        } else {
            window_of(w)
        }
    };
    let failed = measure_error_by_windows((49, 37), mapping, 8, &mesh, Some(&low), failing);
    assert!(matches!(failed, Err(WindowedMeasureError::Read { .. })));
    let (report, unreadable) =
        measure_error_by_windows_skipping((49, 37), mapping, 8, &mesh, Some(&low), failing)
            .expect("measures the rest");
    let origins: Vec<GridPos> = unreadable.iter().map(|(w, _)| w.origin).collect();
    assert_eq!(
        origins,
        [GridPos::new(16, 8), GridPos::new(8, 16)],
        "row order"
    );
    assert!(unreadable[0].1.contains("flipped byte"));
    assert_eq!(report.unreadable_samples, 2 * 8 * 8);
    assert_eq!(report.windows_read, strict.windows_read - 2);
    // Both broken windows lie inside the data's first 40 columns and 24 rows, where the
    // window of a sample is its position divided by 8.
    let skipped = |pos: GridPos| broken.contains(&GridPos::new(pos.col / 8 * 8, pos.row / 8 * 8));
    let (mut max, mut seen) = (0.0f64, std::collections::HashSet::new());
    for_each_projected_sample(&field, &mesh, &low, |sample| {
        if !skipped(sample.pos) {
            max = max.max(sample.error);
            seen.insert(sample.pos);
        }
    })
    .expect("a valid camera");
    let projected = report.projected.expect("a camera was given");
    let strict_projected = strict.projected.expect("a camera was given");
    assert!(projected.in_view < strict_projected.in_view);
    assert_eq!((projected.max, projected.in_view), (max, seen.len() as u64));
    assert!(report.covered < strict.covered);
    assert_eq!(
        report.covered + report.uncovered + report.unreadable_samples,
        report.data_samples
    );
}
