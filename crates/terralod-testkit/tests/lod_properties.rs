//! The guarantees of every registered LOD algorithm, proven with the independent oracles:
//! crack-free for any camera, projected error within τ, vertical error within M with full
//! coverage, deterministic, planar → coarsest, spike → full resolution, monotone in τ.
//! The number of cases is 24 unless `PROPTEST_CASES` says otherwise.

use proptest::prelude::*;
use terralod_core::lod::{AlgorithmEntry, LodOptions, REGISTRY, Selection, View};
use terralod_core::simplify::simplify;
use terralod_core::{Camera, GridMesh, GridPos, Heightfield, Pyramid, Samples, WorldMapping};
use terralod_testkit::fixtures::{exact_heights, spike, tilted_plane};
use terralod_testkit::strategies::proptest_config;
use terralod_testkit::strategies::{arb_camera, arb_heightfield, arb_pixel_tolerance};
use terralod_testkit::{GridRect, check_mesh, measure_error};

/// Both option sets every algorithm must keep its bounds under.
fn option_sets() -> [LodOptions; 2] {
    [
        LodOptions::default(),
        LodOptions::default().with_view_angle_aware(true),
    ]
}

/// Selects once with a fresh instance of `entry` and returns the mesh and whether the
/// algorithm promises to keep the view's tolerance (`LodAlgorithm::error_bounded`).
fn select_mesh(
    entry: &AlgorithmEntry,
    field: &Heightfield,
    pyramid: &Pyramid,
    options: &LodOptions,
    view: &View,
) -> (GridMesh, bool) {
    let mut algorithm = entry
        .build(field, pyramid, options)
        .expect("the registry builds it");
    let bounded = algorithm.error_bounded();
    (algorithm.select(view).to_mesh(field), bounded)
}

/// Indices of one selection, for determinism checks.
fn indices(selection: &Selection<'_>) -> Vec<[GridPos; 3]> {
    let mut out = Vec::new();
    selection.for_each_triangle(|t| out.push(t));
    out
}

/// Whether a sample's true point is in view, by the oracle's camera model (f64, own code).
fn in_view(camera: &Camera, p: glam::DVec3) -> bool {
    let eye = camera.eye.as_dvec3();
    let forward = (camera.target.as_dvec3() - eye).normalize();
    let cross = forward.cross(glam::DVec3::Y);
    let right = if cross.length() < 1e-9 {
        glam::DVec3::X
    } else {
        cross.normalize()
    };
    let up = right.cross(forward);
    let d = p - eye;
    let (x, y, z) = (d.dot(right), d.dot(up), d.dot(forward));
    let s = f64::from(camera.viewport.1) / (2.0 * (0.5 * f64::from(camera.fov_y)).tan());
    z >= f64::from(camera.near)
        && z <= f64::from(camera.far)
        && (s * x / z).abs() <= 0.5 * f64::from(camera.viewport.0)
        && (s * y / z).abs() <= 0.5 * f64::from(camera.viewport.1)
}

/// Data samples inside or on the edge of some triangle.
fn covered_samples(field: &Heightfield, mesh: &GridMesh) -> Vec<bool> {
    let (w, h) = (field.width() as i64, field.height() as i64);
    let mut covered = vec![false; (w * h) as usize];
    for t in &mesh.triangles {
        let p = t.map(|i| {
            let q = mesh.positions[i as usize];
            (i64::from(q.col), i64::from(q.row))
        });
        let edge = |a: (i64, i64), b: (i64, i64), c: (i64, i64)| {
            (b.0 - a.0) * (c.1 - a.1) - (b.1 - a.1) * (c.0 - a.0)
        };
        let area = edge(p[0], p[1], p[2]);
        let (c0, c1) = (
            p.iter().map(|q| q.0).min().unwrap_or(0),
            p.iter().map(|q| q.0).max().unwrap_or(0),
        );
        let (r0, r1) = (
            p.iter().map(|q| q.1).min().unwrap_or(0),
            p.iter().map(|q| q.1).max().unwrap_or(0),
        );
        for r in r0.max(0)..=r1.min(h - 1) {
            for c in c0.max(0)..=c1.min(w - 1) {
                let q = (c, r);
                let e = [
                    edge(p[0], p[1], q),
                    edge(p[1], p[2], q),
                    edge(p[2], p[0], q),
                ];
                if e.iter().all(|&v| v * area.signum() >= 0) {
                    covered[(r * w + c) as usize] = true;
                }
            }
        }
    }
    covered
}

/// The view-dependent guarantees for one scene, for every algorithm and option set.
fn check_screen(field: &Heightfield, camera: &Camera, tolerance: f32) -> Result<(), TestCaseError> {
    let pyramid = Pyramid::build(field);
    let view = View::screen(*camera, tolerance).expect("valid camera and tolerance");
    for entry in REGISTRY {
        for options in &option_sets() {
            let (mesh, bounded) = select_mesh(entry, field, &pyramid, options, &view);
            let report = check_mesh(&mesh, None);
            prop_assert!(
                report.is_watertight(),
                "{} {:?}: {}",
                entry.name,
                options,
                report
            );
            let errors = measure_error(field, &mesh, Some(camera)).expect("valid camera");
            let projected = errors.projected.expect("a camera was given");
            prop_assert_eq!(projected.clipped, 0, "{}", entry.name);
            prop_assert!(
                !bounded || projected.max <= f64::from(tolerance) * (1.0 + 1e-4),
                "{} {:?}: projected error {} > τ {}: {}",
                entry.name,
                options,
                projected.max,
                tolerance,
                errors
            );
            // No hole in view: every sample whose true point is in view is covered.
            let covered = covered_samples(field, &mesh);
            let mapping = field.mapping();
            for row in 0..field.height() {
                for col in 0..field.width() {
                    let p = glam::DVec3::new(
                        f64::from(col) * f64::from(mapping.cell_size),
                        f64::from(field.raw(col, row)) * f64::from(mapping.height_scale)
                            + f64::from(mapping.height_offset),
                        f64::from(row) * f64::from(mapping.cell_size),
                    );
                    let i = (row * field.width() + col) as usize;
                    prop_assert!(
                        covered[i] || !in_view(camera, p),
                        "{}: sample ({}, {}) is in view but not drawn",
                        entry.name,
                        col,
                        row
                    );
                }
            }
        }
    }
    Ok(())
}

fn arb_exact_scene(max_side: u32) -> impl Strategy<Value = (Heightfield, Camera, f32)> {
    arb_heightfield(max_side)
        .prop_map(exact_heights)
        .prop_flat_map(|field| {
            let camera = arb_camera(&field);
            (Just(field), camera, arb_pixel_tolerance())
        })
}

fn arb_any_scene(max_side: u32) -> impl Strategy<Value = (Heightfield, Camera, f32)> {
    arb_heightfield(max_side).prop_flat_map(|field| {
        let camera = arb_camera(&field);
        (Just(field), camera, arb_pixel_tolerance())
    })
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn view_dependent_is_crack_free_and_within_tolerance((field, camera, tolerance) in arb_exact_scene(40)) {
        check_screen(&field, &camera, tolerance)?;
    }

    #[test]
    fn any_mapping_is_crack_free_and_deterministic((field, camera, tolerance) in arb_any_scene(40)) {
        let pyramid = Pyramid::build(&field);
        let view = View::screen(camera, tolerance).expect("valid view");
        for entry in REGISTRY {
            for cull in [true, false] {
                let view = view.with_cull(cull);
                let options = LodOptions::default();
                let mut first = entry.build(&field, &pyramid, &options)
.expect("the registry builds it");
                let mut second = entry.build(&field, &pyramid, &options)
.expect("the registry builds it");
                let a = indices(&first.select(&view));
                // State carried across frames must not change the result.
                let _ = first.select(&View::world_error(1e9).expect("valid"));
                let again = indices(&first.select(&view));
                let b = indices(&second.select(&view));
                prop_assert_eq!(&a, &b, "{}: not deterministic", entry.name);
                prop_assert_eq!(&a, &again, "{}: depends on earlier frames", entry.name);
                let mesh = first.select(&view).to_mesh(&field);
                let report = check_mesh(&mesh, None);
                prop_assert!(report.is_watertight(), "{} cull {}: {}", entry.name, cull, report);
                // Within τ up to the f32 rounding of drawn heights (exact heights are
                // checked strictly above): a vertical δ at depth z ≥ near moves at most
                // k δ sqrt(1 + a² + b²) / near pixels, a and b the viewport's tangents.
                let errors = measure_error(&field, &mesh, Some(&camera)).expect("valid camera");
                let projected = errors.projected.expect("camera given");
                prop_assert_eq!(projected.clipped, 0);
                if !first.error_bounded() {
                    continue;
                }
                let (lo, hi) = field.world_range();
                let delta = f64::from(lo.abs().max(hi.abs())) * 2f64.powi(-23);
                let k = f64::from(camera.viewport.1) / (2.0 * (0.5 * f64::from(camera.fov_y)).tan());
                let (a, b) = (
                    f64::from(camera.viewport.0) / (2.0 * k),
                    f64::from(camera.viewport.1) / (2.0 * k),
                );
                let slack = k * delta * (1.0 + a * a + b * b).sqrt() / f64::from(camera.near);
                prop_assert!(
                    projected.max <= f64::from(tolerance) * (1.0 + 1e-4) + slack,
                    "{}: {} > {} + {}: {}", entry.name, projected.max, tolerance, slack, errors
                );
            }
        }
    }

    #[test]
    fn view_independent_covers_everything_within_max_error(
        field in arb_heightfield(40),
        fraction in 0.0f32..0.5,
    ) {
        let pyramid = Pyramid::build(&field);
        let (lo, hi) = field.world_range();
        let max_error = ((hi - lo) * fraction).max(1e-3 * (hi - lo).max(1.0));
        let view = View::world_error(max_error).expect("valid");
        let largest = f64::from(lo.abs().max(hi.abs()));
        for entry in REGISTRY {
            let (mesh, bounded) = select_mesh(entry, &field, &pyramid, &LodOptions::default(), &view);
            // It tiles its bounding rectangle, which holds the data.
            let cols = mesh.positions.iter().map(|p| p.col).max().unwrap_or(0);
            let rows = mesh.positions.iter().map(|p| p.row).max().unwrap_or(0);
            prop_assert!(cols + 1 >= field.width() && rows + 1 >= field.height());
            let report = check_mesh(&mesh, Some(GridRect::new(0, 0, cols, rows)));
            prop_assert!(report.is_watertight(), "{}: {}", entry.name, report);
            let errors = measure_error(&field, &mesh, None).expect("no camera");
            prop_assert_eq!(errors.uncovered, 0);
            prop_assert!(
                !bounded || errors.world.max <= f64::from(max_error) + largest * 2f64.powi(-23),
                "{}: vertical error {} > {}", entry.name, errors.world.max, max_error
            );

            // The export pass (`mesh --simplify`) on every algorithm's mesh: still a
            // watertight tiling of the same rectangle, every sample covered, never worse
            // than max(M, the input's error), and no more vertices.
            let (simplified, stats) =
                simplify(&field, &mesh, f64::from(max_error)).expect("a valid mesh");
            let report = check_mesh(&simplified, Some(GridRect::new(0, 0, cols, rows)));
            prop_assert!(report.is_watertight(), "{} simplified: {}", entry.name, report);
            let after = measure_error(&field, &simplified, None).expect("no camera");
            prop_assert_eq!(after.uncovered, 0);
            let allowed = errors.world.max.max(f64::from(max_error)) + largest * 2f64.powi(-23);
            prop_assert!(
                after.world.max <= allowed,
                "{} simplified: vertical error {} > {}", entry.name, after.world.max, allowed
            );
            prop_assert!(stats.vertices_after <= stats.vertices_before);
        }
    }

    #[test]
    fn smaller_tolerance_never_gives_fewer_triangles(
        (field, camera, tolerance) in arb_any_scene(40),
        factor in 0.05f32..1.0,
    ) {
        // Without culling the count is monotone. With culling, refining a partly visible
        // node may keep only its visible children (fewer triangles), so there the claim is
        // "never coarser where it is seen": every vertex of the coarse mesh whose point is
        // in view is a vertex of the fine one.
        let pyramid = Pyramid::build(&field);
        let coarse = View::screen(camera, tolerance).expect("valid view");
        let fine = coarse.with_tolerance(tolerance * factor).expect("valid tolerance");
        for entry in REGISTRY {
            let mut algorithm = entry.build(&field, &pyramid, &LodOptions::default())
.expect("the registry builds it");
            if !algorithm.error_bounded() {
                continue; // τ does not drive it
            }
            let few = algorithm.select(&coarse.with_cull(false)).triangle_count();
            let many = algorithm.select(&fine.with_cull(false)).triangle_count();
            prop_assert!(many >= few, "{}: τ {} gives {} triangles, τ {} gives {}",
                entry.name, tolerance, few, tolerance * factor, many);
            let coarse_mesh = algorithm.select(&coarse).to_mesh(&field);
            let fine_mesh = algorithm.select(&fine).to_mesh(&field);
            let fine_vertices: std::collections::HashSet<GridPos> =
                fine_mesh.positions.iter().copied().collect();
            let mapping = field.mapping();
            for (pos, height) in coarse_mesh.positions.iter().zip(&coarse_mesh.heights) {
                let p = glam::DVec3::new(
                    f64::from(pos.col) * f64::from(mapping.cell_size),
                    f64::from(*height),
                    f64::from(pos.row) * f64::from(mapping.cell_size),
                );
                prop_assert!(
                    fine_vertices.contains(pos) || !in_view(&camera, p),
                    "{}: vertex {:?} in view at τ {} is gone at τ {}",
                    entry.name, pos, tolerance, tolerance * factor
                );
            }
        }
    }

    #[test]
    fn planar_terrain_gives_the_coarsest_mesh(
        n in 1u32..6,
        slope in -3i32..4,
        camera_seed in any::<u64>(),
    ) {
        let side = (1 << n) + 1;
        // 16-bit samples: their pyramid error is exact, 0 for a plane (f32 sources carry a
        // rounding slack, which refines where a node reaches the near plane).
        let plane = tilted_plane(side, side, 100.0, slope as f32, 2.0).expect("valid plane");
        let raw = (0..side * side).map(|i| plane.raw(i % side, i / side) as u16).collect();
        let field = Heightfield::new(side, side, Samples::U16(raw)).expect("valid plane");
        let pyramid = Pyramid::build(&field);
        let views = [
            View::world_error(1e-6).expect("valid"),
            View::screen(camera_for(&field, camera_seed), 0.05).expect("valid"),
        ];
        for entry in REGISTRY {
            for view in &views {
                let mut algorithm = entry.build(&field, &pyramid, &LodOptions::default())
.expect("the registry builds it");
                if !algorithm.error_bounded() {
                    continue; // roughness does not drive it
                }
                let triangles = algorithm.select(view).triangle_count();
                prop_assert!(triangles <= 8, "{}: {} triangles for a plane", entry.name, triangles);
            }
        }
    }
}

/// A deterministic camera from the strategy, for tests that need just one.
fn camera_for(field: &Heightfield, seed: u64) -> Camera {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    arb_camera(field)
        .new_tree(&mut runner)
        .expect("the camera strategy always yields")
        .current()
}

#[test]
fn a_spike_forces_full_resolution_around_it() {
    for (side, at) in [(33, (16, 16)), (40, (3, 30)), (17, (16, 0))] {
        let field = spike(side, side, 0.0, GridPos::new(at.0, at.1), 50.0).expect("valid");
        let pyramid = Pyramid::build(&field);
        let view = View::world_error(1.0).expect("valid");
        for entry in REGISTRY {
            let (mesh, bounded) =
                select_mesh(entry, &field, &pyramid, &LodOptions::default(), &view);
            if !bounded {
                continue; // roughness does not drive it
            }
            // The spike is a vertex, and every triangle touching it stays within one cell
            // of it (a longer edge from it would leave samples far off the surface). Its
            // neighbours need not be vertices: an exact-error mesh interpolates the flat
            // ground around it exactly without them.
            let spike_pos = GridPos::new(at.0, at.1);
            let Some(spike_vertex) = mesh.positions.iter().position(|&p| p == spike_pos) else {
                panic!("{}: the spike {spike_pos:?} is not a vertex", entry.name);
            };
            for t in mesh
                .triangles
                .iter()
                .filter(|t| t.contains(&(spike_vertex as u32)))
            {
                for &v in t {
                    let p = mesh.positions[v as usize];
                    assert!(
                        p.col.abs_diff(at.0) <= 1 && p.row.abs_diff(at.1) <= 1,
                        "{}: a triangle reaches from the spike to {p:?}",
                        entry.name
                    );
                }
            }
            // And far from it the mesh stays coarse.
            assert!(
                mesh.triangles.len() < (side as usize - 1).pow(2),
                "{}",
                entry.name
            );
        }
    }
}

#[test]
fn registry_names_are_unique_and_found() {
    for (i, entry) in REGISTRY.iter().enumerate() {
        assert!(REGISTRY[..i].iter().all(|e| e.name != entry.name));
        assert_eq!(
            terralod_core::lod::find(entry.name).map(|e| e.name),
            Some(entry.name)
        );
        assert!(!entry.summary.is_empty() && !entry.crack_handling.is_empty());
    }
    assert!(terralod_core::lod::find("no-such-algorithm").is_none());
}

/// Found by proptest: at a far/near ratio of 10^6 the far plane taken from the clip matrix
/// lost its normal in f32 and culled a terrain 35 km away that is in view (a hole).
#[test]
fn regression_far_plane_at_a_huge_far_near_ratio() {
    let row = [0i16, 0, 37, 37];
    let samples = (0..10).flat_map(|_| row).collect();
    let field = Heightfield::new(4, 10, Samples::I16(samples))
        .and_then(|f| {
            f.with_mapping(WorldMapping {
                cell_size: 0.5,
                height_scale: 1.0,
                height_offset: 0.0,
            })
        })
        .expect("valid field");
    let camera = Camera::new(
        glam::Vec3::new(-35048.746, 18.5, -2411.7522),
        glam::Vec3::ZERO,
        1f32.to_radians(),
        (1, 1),
        0.037,
        37000.0,
    )
    .expect("valid camera");
    check_screen(&field, &camera, 0.5).expect("no hole in view, error within τ");
}
