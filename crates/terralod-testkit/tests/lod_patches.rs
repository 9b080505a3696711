//! Algorithm P with the independent oracles: watertight for any camera and patch size,
//! along camera walks that split and merge (state carried across frames), with a pool so
//! small it runs out, and within M everywhere in world-error mode. The number of cases is
//! 24 unless `PROPTEST_CASES` says otherwise.

use proptest::prelude::*;
use terralod_core::lod::{LodAlgorithm, PatchOptions, PatchesLod, View};
use terralod_core::{Camera, Heightfield, Pyramid};
use terralod_testkit::fixtures::smooth_random;
use terralod_testkit::strategies::proptest_config;
use terralod_testkit::strategies::{arb_camera, arb_heightfield};
use terralod_testkit::{GridRect, check_mesh, measure_error};

/// Selects for `view` and checks the mesh: watertight, tiling the drawn extent when
/// nothing is culled, no drawn point in view behind the near plane.
fn check_frame(
    lod: &mut PatchesLod<'_>,
    field: &Heightfield,
    view: &View,
) -> Result<(), TestCaseError> {
    let vertices = lod.grid_vertices();
    let mesh = lod.select(view).to_mesh(field);
    let region =
        (!view.cull()).then(|| GridRect::new(0, 0, vertices.stride - 1, vertices.rows - 1));
    let report = check_mesh(&mesh, region);
    prop_assert!(report.is_watertight(), "{}", report);
    if let Some(camera) = view.camera() {
        let exhausted = lod.patch_stats().refused_splits > 0;
        let errors = measure_error(field, &mesh, Some(camera)).expect("valid camera");
        let projected = errors.projected.expect("a camera was given");
        prop_assert!(exhausted || projected.clipped == 0, "{}", errors);
    }
    Ok(())
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn any_camera_and_patch_size_is_watertight(
        field in arb_heightfield(70),
        log2_side in 1u32..5,
        factor in 0.5f32..3.0,
        roughness in prop_oneof![Just(0.0f32), 0.0f32..50.0],
        cull in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let pyramid = Pyramid::build(&field);
        let options = PatchOptions::default()
            .with_patch_size(1 << log2_side)
            .with_split_factor(factor)
            .with_roughness(roughness);
        let mut lod = PatchesLod::new(&field, &pyramid, options);
        // A walk of three cameras: the tree carries its state from one to the next.
        for k in 0..3 {
            let camera = camera_for(&field, seed.wrapping_add(k));
            let view = View::screen(camera, 1.0).expect("valid view").with_cull(cull);
            check_frame(&mut lod, &field, &view)?;
        }
    }

    #[test]
    fn an_exhausted_pool_stays_watertight(
        field in arb_heightfield(70),
        spare in 0u32..12,
        seed in any::<u64>(),
    ) {
        let pyramid = Pyramid::build(&field);
        let minimum = PatchesLod::new(&field, &pyramid, PatchOptions::default()
            .with_patch_size(2).with_pool_capacity(1)).patch_stats().capacity;
        let options = PatchOptions::default()
            .with_patch_size(2)
            .with_pool_capacity(minimum + spare);
        let mut lod = PatchesLod::new(&field, &pyramid, options);
        for k in 0..4 {
            let view = View::screen(camera_for(&field, seed.wrapping_add(k)), 1.0)
                .expect("valid view")
                .with_cull(false);
            check_frame(&mut lod, &field, &view)?;
            prop_assert!(lod.patch_stats().in_use <= minimum + spare);
        }
    }

    #[test]
    fn world_error_mode_is_within_max_error(
        field in arb_heightfield(70),
        log2_side in 1u32..5,
        fraction in 0.0f32..0.5,
    ) {
        let pyramid = Pyramid::build(&field);
        let (lo, hi) = field.world_range();
        let max_error = ((hi - lo) * fraction).max(1e-3 * (hi - lo).max(1.0));
        // Room for the whole grid at full resolution: no exhaustion.
        let options = PatchOptions::default()
            .with_patch_size(1 << log2_side)
            .with_pool_capacity(4096);
        let mut lod = PatchesLod::new(&field, &pyramid, options);
        let view = View::world_error(max_error).expect("valid");
        check_frame(&mut lod, &field, &view)?;
        prop_assert!(!lod.patch_stats().exhausted);
        let mesh = lod.select(&view).to_mesh(&field);
        let errors = measure_error(&field, &mesh, None).expect("no camera");
        prop_assert_eq!(errors.uncovered, 0);
        let largest = f64::from(lo.abs().max(hi.abs()));
        prop_assert!(
            errors.world.max <= f64::from(max_error) + largest * 2f64.powi(-22),
            "vertical error {} > {}", errors.world.max, max_error
        );
    }
}

/// A deterministic camera from the strategy.
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

/// A flight low over a 257 × 257 terrain with patches of 8: splits and merges every few
/// frames, watertight and balanced all along, and a turn in place at the end changes
/// nothing in the tree.
#[test]
fn a_low_flight_splits_and_merges_and_stays_watertight() {
    let field = smooth_random(257, 257, 3, 120.0).expect("valid field");
    let pyramid = Pyramid::build(&field);
    let options = PatchOptions::default().with_patch_size(8);
    let mut lod = PatchesLod::new(&field, &pyramid, options);
    let (mut splits, mut merges) = (0, 0);
    let mut eye = glam::Vec3::ZERO;
    for k in 0..40 {
        let t = k as f32 / 39.0;
        eye = glam::Vec3::new(
            10.0 + 230.0 * t,
            130.0 + 60.0 * (6.0 * t).sin(),
            30.0 + 200.0 * t * t,
        );
        let camera = Camera::new(
            eye,
            eye + glam::Vec3::new(1.0, -0.3, 0.6),
            1.0,
            (960, 540),
            0.5,
            1e5,
        )
        .expect("valid camera");
        check_frame(&mut lod, &field, &View::screen(camera, 1.0).expect("valid"))
            .expect("a watertight frame");
        splits += lod.patch_stats().splits;
        merges += lod.patch_stats().merges;
    }
    assert!(
        splits > 20 && merges > 20,
        "{splits} splits, {merges} merges"
    );
    let mut drawn = Vec::new();
    for k in 0..12 {
        let angle = k as f32 * std::f32::consts::TAU / 12.0;
        let target = eye + glam::Vec3::new(angle.cos(), -0.2, angle.sin());
        let camera = Camera::new(eye, target, 1.0, (960, 540), 0.5, 1e5).expect("valid");
        lod.select(&View::screen(camera, 1.0).expect("valid"));
        let stats = lod.patch_stats();
        assert_eq!((stats.splits, stats.merges), (0, 0), "turn {k}");
        drawn.push(lod.stats().nodes_drawn);
    }
    // What is drawn depends on the direction (the frustum test), the tree does not.
    assert!(drawn.iter().min() < drawn.iter().max(), "{drawn:?}");
}
