//! Algorithm C beyond the registry-wide properties (which run it with 64-segment blocks,
//! one block on their small grids): with 16-segment blocks, several blocks a side, the
//! flood fill draws every block truly in view and none the box test rules out, neighbours stay within one level
//! in every mode, and the error-aware option keeps the view's tolerance by the oracles.

use proptest::prelude::*;
use terralod_core::lod::{ChunkedLod, ChunkedOptions, LodAlgorithm, LodOptions, View};
use terralod_core::{Aabb, Camera, Containment, Pyramid};
use terralod_testkit::fixtures::exact_heights;
use terralod_testkit::strategies::proptest_config;
use terralod_testkit::strategies::{arb_camera, arb_heightfield, arb_pixel_tolerance, arb_scene};
use terralod_testkit::{GridRect, check_mesh, measure_error};

fn options(error_aware: bool, view_angle_aware: bool) -> LodOptions {
    LodOptions {
        view_angle_aware,
        chunked: ChunkedOptions {
            block_size: 16,
            lod_distance: 1.0,
            error_aware,
            morph: false,
        },
        ..LodOptions::default()
    }
}

/// How deep `aabb` and `camera`'s view volume overlap, in world units: the smallest
/// overlap of their projections over the separating axes of two convex solids (the box's
/// axes, the frustum's face normals and the cross products of their edges), negative
/// when an axis separates them. Exact up to f64 rounding: independent of the conservative
/// plane test and of the algorithm's plan shadow.
fn overlap_depth(camera: &Camera, aabb: &Aabb) -> f64 {
    let v = |p: glam::Vec3| [f64::from(p.x), f64::from(p.y), f64::from(p.z)];
    let (forward, right, up) = (v(camera.forward()), v(camera.right()), v(camera.up()));
    let eye = v(camera.eye);
    let tan = (0.5 * f64::from(camera.fov_y)).tan();
    let aspect = f64::from(camera.aspect());
    let mut frustum = Vec::new();
    for distance in [f64::from(camera.near), f64::from(camera.far)] {
        for (sx, sy) in [(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)] {
            frustum.push(std::array::from_fn::<f64, 3, _>(|k| {
                eye[k]
                    + forward[k] * distance
                    + right[k] * sx * distance * tan * aspect
                    + up[k] * sy * distance * tan
            }));
        }
    }
    let boxed: Vec<[f64; 3]> = aabb.corners().iter().map(|&c| v(c)).collect();
    let sub = |a: [f64; 3], b: [f64; 3]| [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    let cross = |a: [f64; 3], b: [f64; 3]| {
        [
            a[1] * b[2] - a[2] * b[1],
            a[2] * b[0] - a[0] * b[2],
            a[0] * b[1] - a[1] * b[0],
        ]
    };
    let box_axes = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    let mut edges = vec![right, up];
    edges.extend((0..4).map(|i| sub(frustum[i + 4], frustum[i])));
    let mut axes = box_axes.to_vec();
    // Face normals: the near/far faces (forward) and the four side faces.
    axes.push(forward);
    axes.extend((0..4).map(|i| cross(edges[2 + i], edges[2 + (i + 1) % 4])));
    for e in &edges {
        axes.extend(box_axes.iter().map(|&a| cross(*e, a)));
    }
    let mut depth = f64::INFINITY;
    for axis in axes {
        let length = axis.iter().map(|x| x * x).sum::<f64>().sqrt();
        if length < 1e-12 {
            continue;
        }
        let project = |points: &[[f64; 3]]| {
            points
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                    let d = (p[0] * axis[0] + p[1] * axis[1] + p[2] * axis[2]) / length;
                    (lo.min(d), hi.max(d))
                })
        };
        let ((a0, a1), (b0, b1)) = (project(&frustum), project(&boxed));
        depth = depth.min(a1.min(b1) - a0.max(b0));
    }
    depth
}

/// Drawn blocks' levels: 4-neighbours at most one level apart.
fn assert_neighbours_within_one(lod: &ChunkedLod<'_>) -> Result<(), TestCaseError> {
    let drawn: std::collections::HashMap<(u32, u32), u32> = lod
        .drawn_blocks()
        .map(|(x, z, level)| ((x, z), level))
        .collect();
    for (&(x, z), &level) in &drawn {
        for other in [(x + 1, z), (x, z + 1)] {
            if let Some(&l) = drawn.get(&other) {
                prop_assert!(
                    level.abs_diff(l) <= 1,
                    "({}, {}) level {} next to {:?} level {}",
                    x,
                    z,
                    level,
                    other,
                    l
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(proptest_config())]

    /// C6: the flood fill draws every block whose box truly meets the view volume
    /// (exact separating-axis test, with a rounding margin) and only blocks the plane
    /// test does not rule out, whatever the camera.
    #[test]
    fn the_flood_fill_finds_every_block_in_view((field, camera, pixels) in arb_scene(100)) {
        let pyramid = Pyramid::build(&field);
        let view = View::screen(camera, pixels).unwrap();
        let mut lod = ChunkedLod::new(&field, &pyramid, options(false, false));
        lod.select(&view.with_cull(false));
        let mut all = Vec::new();
        lod.drawn_boxes(&mut all);
        let frustum = camera.frustum();
        let key = |b: &Aabb| (b.min.x.to_bits(), b.min.z.to_bits());
        let scale = f64::from(camera.eye.abs().max_element().max(camera.far).max(1.0));
        lod.select(&view);
        let mut drawn = Vec::new();
        lod.drawn_boxes(&mut drawn);
        let drawn: std::collections::HashSet<_> = drawn.iter().map(key).collect();
        for b in &all {
            let depth = overlap_depth(&camera, b);
            if depth > 1e-4 * scale {
                prop_assert!(drawn.contains(&key(b)), "{:?} meets the view by {} but is not drawn", b, depth);
            }
            if drawn.contains(&key(b)) {
                prop_assert!(frustum.classify(b) != Containment::Outside, "{:?} drawn but outside", b);
            }
        }
        prop_assert!(lod.stats().nodes_visited <= all.len() as u64);
    }

    /// The distance rule (and the near-plane pins) keep drawn neighbours within one level,
    /// and the mesh is watertight with nothing displaced behind the near plane.
    #[test]
    fn the_distance_rule_is_crack_free((field, camera, pixels) in arb_scene(100)) {
        let pyramid = Pyramid::build(&field);
        let view = View::screen(camera, pixels).unwrap();
        let mut lod = ChunkedLod::new(&field, &pyramid, options(false, false));
        for cull in [true, false] {
            let mesh = lod.select(&view.with_cull(cull)).to_mesh(&field);
            assert_neighbours_within_one(&lod)?;
            let report = check_mesh(&mesh, None);
            prop_assert!(report.is_watertight(), "cull {}: {}", cull, report);
            let errors = measure_error(&field, &mesh, Some(&camera)).unwrap();
            prop_assert_eq!(errors.projected.unwrap().clipped, 0);
        }
    }

    /// Morphing moves vertices by their own distance, so the mesh stays watertight (one
    /// height per position) whatever the levels around.
    #[test]
    fn morphed_selections_stay_watertight(
        (field, camera, pixels) in arb_scene(100),
        lod_distance in 1.0f32..3.0,
    ) {
        let pyramid = Pyramid::build(&field);
        let view = View::screen(camera, pixels).unwrap();
        let options = LodOptions {
            chunked: ChunkedOptions { morph: true, lod_distance, ..options(false, false).chunked },
            ..LodOptions::default()
        };
        let mut lod = ChunkedLod::new(&field, &pyramid, options);
        for cull in [true, false] {
            let selection = lod.select(&view.with_cull(cull));
            let morphed = matches!(selection, terralod_core::lod::Selection::Patches { morph: Some(_), .. });
            prop_assert!(morphed);
            let mesh = selection.to_mesh(&field);
            let report = check_mesh(&mesh, None);
            prop_assert!(report.is_watertight(), "cull {}: {}", cull, report);
        }
    }

    /// C7: error-aware levels keep the projected error within τ (exact heights, both
    /// screen-error models), crack-free.
    #[test]
    fn error_aware_levels_keep_the_tolerance(
        field in arb_heightfield(100).prop_map(exact_heights),
        camera_and_pixels in Just(()).prop_flat_map(|_| (any::<u64>(), arb_pixel_tolerance())),
        view_angle_aware in any::<bool>(),
    ) {
        let (seed, pixels) = camera_and_pixels;
        let camera = {
            use proptest::strategy::ValueTree;
            use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&seed.to_le_bytes());
            let mut runner = TestRunner::new_with_rng(
                Config::default(),
                TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
            );
            arb_camera(&field).new_tree(&mut runner).unwrap().current()
        };
        let pyramid = Pyramid::build(&field);
        let view = View::screen(camera, pixels).unwrap();
        let mut lod = ChunkedLod::new(&field, &pyramid, options(true, view_angle_aware));
        prop_assert!(lod.error_bounded());
        let mesh = lod.select(&view).to_mesh(&field);
        assert_neighbours_within_one(&lod)?;
        let report = check_mesh(&mesh, None);
        prop_assert!(report.is_watertight(), "{}", report);
        let errors = measure_error(&field, &mesh, Some(&camera)).unwrap();
        let projected = errors.projected.unwrap();
        prop_assert_eq!(projected.clipped, 0);
        prop_assert!(
            projected.max <= f64::from(pixels) * (1.0 + 1e-4),
            "projected error {} > τ {}: {}", projected.max, pixels, errors
        );
    }

    /// C7 for a view-independent view: full coverage, every sample within M.
    #[test]
    fn error_aware_levels_keep_a_world_error(
        field in arb_heightfield(100),
        fraction in 0.0f32..0.5,
    ) {
        let pyramid = Pyramid::build(&field);
        let (lo, hi) = field.world_range();
        let max_error = ((hi - lo) * fraction).max(1e-3 * (hi - lo).max(1.0));
        let largest = f64::from(lo.abs().max(hi.abs()));
        for error_aware in [false, true] {
            let mut lod = ChunkedLod::new(&field, &pyramid, options(error_aware, false));
            let mesh = lod.select(&View::world_error(max_error).unwrap()).to_mesh(&field);
            assert_neighbours_within_one(&lod)?;
            let cols = mesh.positions.iter().map(|p| p.col).max().unwrap_or(0);
            let rows = mesh.positions.iter().map(|p| p.row).max().unwrap_or(0);
            let report = check_mesh(&mesh, Some(GridRect::new(0, 0, cols, rows)));
            prop_assert!(report.is_watertight(), "{}", report);
            let errors = measure_error(&field, &mesh, None).unwrap();
            prop_assert_eq!(errors.uncovered, 0);
            prop_assert!(
                errors.world.max <= f64::from(max_error) + largest * 2f64.powi(-23),
                "vertical error {} > {}", errors.world.max, max_error
            );
        }
    }
}
