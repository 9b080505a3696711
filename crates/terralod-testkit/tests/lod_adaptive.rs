//! Algorithm A's own guarantees, with the independent oracles: along random camera walks
//! (state carried from frame to frame) every frame is watertight, within τ with the
//! geomorphs applied, and identical (triangles and drawn heights) to what a fresh
//! instance selects for the same view; the same without morphing and with the article's
//! L∞ test; and along smooth walks (small steps and turns), where Update() skips most
//! squares, equal to fresh selections. With a build tolerance `T` (A5's sparse tree) the
//! same hold with the bound `max(M, T)` for a world error `M` and `τ` plus `T` projected
//! for a screen view. With pages held in a few frames (A8 step 2), every frame is
//! watertight and settles to the fresh selection once nothing waits for a page. The
//! number of cases is 24 unless `PROPTEST_CASES` says otherwise.

use glam::Vec3;
use proptest::prelude::*;
use terralod_core::camera::Aabb;
use terralod_core::lod::{
    AdaptiveLod, AdaptiveOptions, LodAlgorithm, LodOptions, MorphedHeight, Selection, View,
};
use terralod_core::{Camera, GridPos, Heightfield, Pyramid};
use terralod_testkit::check_projected_with_build_tolerance;
use terralod_testkit::fixtures::exact_heights;
use terralod_testkit::strategies::proptest_config;
use terralod_testkit::strategies::{arb_camera, arb_heightfield, arb_pixel_tolerance};
use terralod_testkit::{check_mesh, measure_error};

/// A terrain, a walk of cameras over it (with and without culling), and a tolerance.
fn arb_walk() -> impl Strategy<Value = (Heightfield, Vec<(Camera, bool)>, f32)> {
    arb_walk_over(40)
}

/// [`arb_walk`] over terrains of up to `max_side` samples a side.
fn arb_walk_over(max_side: u32) -> impl Strategy<Value = (Heightfield, Vec<(Camera, bool)>, f32)> {
    arb_heightfield(max_side)
        .prop_map(exact_heights)
        .prop_flat_map(|field| {
            let walk = prop::collection::vec((arb_camera(&field), any::<bool>()), 2..10);
            (Just(field), walk, arb_pixel_tolerance())
        })
}

/// Triangles and drawn heights of one selection.
type Frame = (Vec<[GridPos; 3]>, Vec<MorphedHeight>);

fn frame(selection: &Selection<'_>) -> Frame {
    let mut triangles = Vec::new();
    selection.for_each_triangle(|t| triangles.push(t));
    let morphs = match selection {
        Selection::Triangles { morphs, .. } => morphs.to_vec(),
        Selection::Patches { .. } | Selection::Listed { .. } => Vec::new(),
    };
    (triangles, morphs)
}

/// A terrain, a camera, and a smooth walk from it: per frame a small eye step and a small
/// turn (where Update() skips most squares), and a tolerance.
fn arb_smooth_walk() -> impl Strategy<Value = (Heightfield, Camera, Vec<(Vec3, Vec3)>, f32)> {
    arb_heightfield(40)
        .prop_map(exact_heights)
        .prop_flat_map(|field| {
            let step = field.mapping().cell_size;
            let motion = (
                prop::array::uniform3(-step..step),
                prop::array::uniform3(-0.05f32..0.05),
            )
                .prop_map(|(eye, turn)| (Vec3::from(eye), Vec3::from(turn)));
            let walk = prop::collection::vec(motion, 2..16);
            (
                Just(field.clone()),
                arb_camera(&field),
                walk,
                arb_pixel_tolerance(),
            )
        })
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn smooth_walks_equal_fresh_selections((field, start, walk, tolerance) in arb_smooth_walk()) {
        let pyramid = Pyramid::build(&field);
        let mut walker = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
        let mut camera = start;
        for (step, (eye_step, turn)) in walk.iter().enumerate() {
            let forward = camera.forward();
            camera.eye += *eye_step;
            camera.target = camera.eye + (forward + *turn).normalize_or(forward);
            let Ok(view) = View::screen(camera, tolerance) else {
                continue;
            };
            let view = view.with_cull(step % 5 != 4);
            let carried = frame(&walker.select(&view));
            let mut fresh = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
            prop_assert!(carried == frame(&fresh.select(&view)), "step {}: differs from a fresh selection", step);
        }
    }

    #[test]
    fn walks_stay_watertight_within_tolerance_and_equal_fresh_selections(
        (field, walk, tolerance) in arb_walk(),
    ) {
        let pyramid = Pyramid::build(&field);
        for options in [
            AdaptiveOptions::default(),
            AdaptiveOptions::default().with_morph(false),
            AdaptiveOptions::default().with_linf_test(true),
            // Every vertex listed with its drawn height: the mesh comes from the
            // selection alone.
            AdaptiveOptions::default().with_list_vertices(true),
        ] {
            let mut walker =
                AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
            for (camera, cull) in &walk {
                let view = View::screen(*camera, tolerance).expect("valid view").with_cull(*cull);
                let selection = walker.select(&view);
                prop_assert!(selection.listed_heights_agree(), "{:?}", options);
                let carried = frame(&selection);
                let mesh = selection.to_mesh(&field);
                let mut fresh =
                    AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
                prop_assert!(carried == frame(&fresh.select(&view)), "{:?}: differs from a fresh selection", options);
                let report = check_mesh(&mesh, None);
                prop_assert!(report.is_watertight(), "{:?}: {}", options, report);
                let errors = measure_error(&field, &mesh, Some(camera)).expect("valid camera");
                let projected = errors.projected.expect("camera given");
                prop_assert_eq!(projected.clipped, 0);
                prop_assert!(
                    projected.max <= f64::from(tolerance) * (1.0 + 1e-4),
                    "{:?}: projected error {} > τ {}: {}", options, projected.max, tolerance, errors
                );
            }
        }
    }

    /// A8 steps 2 and 3: pages of 4 or 8 cells in a few frames (at least nine beyond
    /// those that never leave), coming and going along the walk, from memory or from
    /// disk (read in the background, awaited before each update or not; the file damaged
    /// on purpose or not)
    /// (each view selected until an update holds nothing back, at most 8 times): every
    /// frame watertight, and a frame that held nothing back equal to a fresh selection
    /// without paging and within τ.
    #[test]
    fn pages_in_frames_stay_watertight_and_settle_to_fresh_selections(
        (field, walk, tolerance) in arb_walk_over(72),
        page_cells in prop::sample::select(vec![4u32, 8]),
        frames in 1u32..16,
        (on_disk, awaited, damaged) in (any::<bool>(), any::<bool>(), any::<bool>()),
    ) {
        let pyramid = Pyramid::build(&field);
        let options = AdaptiveOptions::default().with_page_cells(page_cells);
        let mut paged = AdaptiveLod::with_options(
            &field, &pyramid, LodOptions::default(), options.with_page_frames(frames));
        if on_disk && paged.paging().is_some() {
            paged.spool_pages(&std::env::temp_dir()).expect("pages written");
            if damaged {
                // Fault injection: bytes spoilt through the file, so some pages fail
                // their checksum (and the ground around them stays coarser).
                use std::os::unix::fs::FileExt;
                let file = paged.page_file().expect("on disk");
                let len = file.metadata().expect("metadata").len();
                for k in 1..6 {
                    file.write_all_at(&[0x5a; 2], len * k / 6).expect("spoilt");
                }
            }
        }
        for (camera, cull) in &walk {
            let view = View::screen(*camera, tolerance).expect("valid view").with_cull(*cull);
            for _ in 0..8 {
                if awaited {
                    paged.await_pages();
                }
                let selection = paged.select(&view);
                let carried = frame(&selection);
                let mesh = selection.to_mesh(&field);
                let report = check_mesh(&mesh, None);
                prop_assert!(report.is_watertight(), "{} frames: {}", frames, report);
                if paged.paging().is_some_and(|p| p.held_back > 0) {
                    continue;
                }
                let mut fresh =
                    AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
                prop_assert!(carried == frame(&fresh.select(&view)), "differs from a fresh selection");
                let errors = measure_error(&field, &mesh, Some(camera)).expect("valid camera");
                let projected = errors.projected.expect("camera given");
                prop_assert!(projected.max <= f64::from(tolerance) * (1.0 + 1e-4), "{}", errors);
                break;
            }
        }
    }

    #[test]
    fn morphing_keeps_the_world_error_bound(
        field in arb_heightfield(40).prop_map(exact_heights),
        fraction in 0.01f32..0.5,
    ) {
        let pyramid = Pyramid::build(&field);
        let (lo, hi) = field.world_range();
        let max_error = ((hi - lo) * fraction).max(1e-3);
        let view = View::world_error(max_error).expect("valid");
        let mut lod = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
        let mesh = lod.select(&view).to_mesh(&field);
        let errors = measure_error(&field, &mesh, None).expect("no camera");
        prop_assert_eq!(errors.uncovered, 0);
        prop_assert!(errors.world.max <= f64::from(max_error) * (1.0 + 1e-6), "{}", errors);
    }
}

/// The world box of everything an algorithm can draw over `field`: the padded grid's
/// square (a straddling square's box reaches over it) and the height range.
fn terrain_box(field: &Heightfield) -> Aabb {
    let (lo, hi) = field.world_range();
    let side = (field.padded_side() - 1) as f32 * field.mapping().cell_size;
    Aabb::new(Vec3::new(0.0, lo, 0.0), Vec3::new(side, hi, side))
}

proptest! {
    #![proptest_config(proptest_config())]

    /// A sparse tree built for tolerance `T`: every selection is watertight and equal to a
    /// fresh instance's; a world error `M` keeps every sample within `max(M, T)` with the
    /// terrain covered; a screen view keeps every sample's projected error within `τ` plus
    /// the projected size of `T` over its column (`check_projected_with_tolerance`; only
    /// samples whose column reaches the near plane are skipped, none when the terrain's
    /// whole box is clear of it).
    #[test]
    fn a_build_tolerance_adds_at_most_itself(
        (field, walk, tolerance) in arb_walk(),
        build_fraction in 0.0f32..0.4,
        world_fraction in 0.0f32..0.5,
    ) {
        let pyramid = Pyramid::build(&field);
        let (lo, hi) = field.world_range();
        let build_tolerance = (hi - lo) * build_fraction;
        let options = AdaptiveOptions::default().with_build_tolerance(build_tolerance);
        let build = || AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        let mut walker = build();
        let rounding = f64::from(lo.abs().max(hi.abs())) * 2f64.powi(-23);
        let max_error = ((hi - lo) * world_fraction).max(1e-3 * (hi - lo).max(1.0));
        let world = View::world_error(max_error).expect("valid");
        let mesh = walker.select(&world).to_mesh(&field);
        prop_assert!(check_mesh(&mesh, None).is_watertight());
        let errors = measure_error(&field, &mesh, None).expect("no camera");
        prop_assert_eq!(errors.uncovered, 0);
        let allowed = f64::from(max_error.max(build_tolerance)) * (1.0 + 1e-6) + rounding;
        prop_assert!(errors.world.max <= allowed, "T {}: {} > {}", build_tolerance, errors, allowed);
        for (camera, cull) in &walk {
            let view = View::screen(*camera, tolerance).expect("valid view").with_cull(*cull);
            let selection = walker.select(&view);
            let carried = frame(&selection);
            let mesh = selection.to_mesh(&field);
            prop_assert!(carried == frame(&build().select(&view)), "differs from a fresh selection");
            let report = check_mesh(&mesh, None);
            prop_assert!(report.is_watertight(), "{}", report);
            let (_, skipped) = check_projected_with_build_tolerance(
                &field, &mesh, camera, &view, tolerance, build_tolerance,
            )
            .map_err(TestCaseError::fail)?;
            // Every column lies in the terrain's box: where the bound over that box is
            // finite, no sample is skipped (the check is never weaker than one over the box).
            let whole = view.projected_error_bound(build_tolerance, &terrain_box(&field), false);
            prop_assert!(!whole.is_finite() || skipped == 0, "{} samples skipped", skipped);
        }
    }
}

/// The per-sample check of the build tolerance's screen bound runs where a bound over the
/// terrain's whole box cannot (the old check skipped these views): low cameras over a rough
/// terrain, looking across it from within its footprint (its box reaches behind the eye), with `T` a fifth of the
/// relief. The check holds, and all but a small share of the samples in view are checked
/// (those skipped have a column reaching the near plane, where the documented bound is
/// infinite).
#[test]
fn the_build_tolerance_bound_is_checked_where_the_terrain_box_reaches_the_eye() {
    let field = exact_heights(
        terralod_testkit::fixtures::smooth_random(65, 65, 5, 30.0).expect("valid field"),
    );
    let pyramid = Pyramid::build(&field);
    let (lo, hi) = field.world_range();
    let build_tolerance = 0.2 * (hi - lo);
    let options = AdaptiveOptions::default().with_build_tolerance(build_tolerance);
    let mut lod = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
    let (w, d) = field.world_size();
    let (mut checked, mut skipped) = (0, 0);
    for step in 0..8 {
        let t = step as f32 / 8.0;
        let angle = t * std::f32::consts::TAU;
        let eye = Vec3::new(
            0.5 * w + 0.3 * w * angle.cos(),
            hi + (0.05 + 0.2 * t) * (hi - lo),
            0.5 * d + 0.3 * d * angle.sin(),
        );
        // Down towards the centre: the box's top reaches behind the eye.
        let target = Vec3::new(0.5 * w, lo, 0.5 * d);
        let camera = Camera::new(eye, target, 1.0, (320, 240), 1.0, 1e5).expect("valid camera");
        let view = View::screen(camera, 1.0).expect("valid view");
        assert!(
            !view
                .projected_error_bound(build_tolerance, &terrain_box(&field), false)
                .is_finite(),
            "step {step}: the terrain's box must reach the eye ({eye}, {:?})",
            terrain_box(&field)
        );
        let mesh = lod.select(&view).to_mesh(&field);
        let (c, s) = check_projected_with_build_tolerance(
            &field,
            &mesh,
            &camera,
            &view,
            1.0,
            build_tolerance,
        )
        .unwrap_or_else(|e| panic!("step {step}: {e}"));
        checked += c;
        skipped += s;
    }
    assert!(
        checked > 1000 && skipped * 20 < checked,
        "{checked} checked, {skipped} skipped"
    );
}

/// Morphing moves vertices: somewhere along a descent over rough terrain a drawn height
/// differs from its sample, and it never differs by more than the vertex's distance to
/// the coarse surface allows (checked above through the error bound).
#[test]
fn a_descent_morphs_vertices() {
    let field = terralod_testkit::fixtures::smooth_random(65, 65, 5, 300.0).expect("valid");
    let pyramid = Pyramid::build(&field);
    let mut lod = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
    let mut morphed = 0;
    for step in 0..20 {
        let eye = glam::Vec3::new(10.0, 2000.0 - 95.0 * step as f32, 10.0);
        let camera = Camera::new(
            eye,
            glam::Vec3::new(40.0, 0.0, 40.0),
            1.0,
            (800, 600),
            0.5,
            1e5,
        )
        .expect("valid camera");
        let view = View::screen(camera, 1.0).expect("valid view");
        if let Selection::Triangles { morphs, .. } = lod.select(&view) {
            morphed += morphs.len();
        }
    }
    assert!(morphed > 0, "no vertex was ever morphed");
}

/// Geomorphing against popping: along a slow low flight over rough terrain (a tenth of a
/// cell per frame, so the view barely moves between frames) the drawn surface never jumps
/// by more than a quarter of a pixel from one frame to the next, while the topology
/// changes under it; without morphing, the same flight pops by more than that. (A
/// vertex that appeared off the coarse surface, as when the morph only kept the budget,
/// jumped by up to the topology's share of τ: 0.5 px.)
#[test]
fn a_slow_flight_pops_under_a_quarter_pixel() {
    let field = terralod_testkit::fixtures::smooth_random(129, 129, 11, 40.0).expect("valid");
    let pyramid = Pyramid::build(&field);
    let flight: Vec<Camera> = (0..48)
        .map(|frame| {
            let eye = Vec3::new(4.0 + 0.1 * frame as f32, 60.0, 20.0 + 0.05 * frame as f32);
            Camera::new(
                eye,
                eye + Vec3::new(60.0, -45.0, 40.0),
                1.0,
                (800, 600),
                0.5,
                1e4,
            )
            .expect("valid camera")
        })
        .collect();
    let (mut worst, mut changes) = ([0.0f64; 2], [0usize; 2]);
    for (morph, (worst, changes)) in [true, false]
        .into_iter()
        .zip(worst.iter_mut().zip(&mut changes))
    {
        let options = AdaptiveOptions::default().with_morph(morph);
        let mut lod = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        let mut before: Option<(terralod_core::GridMesh, usize)> = None;
        for camera in &flight {
            let selection = lod.select(&View::screen(*camera, 1.0).expect("valid view"));
            let mesh = selection.to_mesh(&field);
            let triangles = selection.triangle_count();
            if let Some((previous, previous_triangles)) = &before {
                let popping = terralod_testkit::measure_popping(&field, previous, &mesh, camera)
                    .expect("valid camera");
                *worst = worst.max(popping.max);
                *changes += usize::from(*previous_triangles != triangles);
            }
            before = Some((mesh, triangles));
        }
    }
    assert!(
        changes.iter().all(|&c| c > 10),
        "frames of topology change, with and without morphing: {changes:?}"
    );
    assert!(worst[0] <= 0.25, "morphing: {:.3} px", worst[0]);
    assert!(worst[1] > 0.25, "without morphing: {:.3} px", worst[1]);
}

/// Turning in place 3° a frame: without the guard band the ground entering the view was
/// drawn by the coarse fans of squares across the frustum's edge the frame before, and
/// jumps to its fine mesh at once; with it (5°, the default) that ground is refined
/// already. Debug build, a 129² rough terrain seen from low down.
#[test]
fn a_turn_within_the_guard_band_does_not_pop() {
    let field = terralod_testkit::fixtures::smooth_random(129, 129, 11, 40.0).expect("valid");
    let pyramid = Pyramid::build(&field);
    let eye = Vec3::new(64.0, 55.0, 64.0);
    let turn: Vec<Camera> = (0..40)
        .map(|frame| {
            let heading = (3.0 * frame as f32).to_radians();
            let look = Vec3::new(heading.cos(), -0.6, heading.sin());
            Camera::new(eye, eye + look, 1.0, (800, 600), 0.5, 1e4).expect("valid camera")
        })
        .collect();
    let worst = |guard: f32| {
        let options = AdaptiveOptions::default().with_guard_angle(guard);
        let mut lod = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        let mut before: Option<terralod_core::GridMesh> = None;
        let mut worst = 0.0f64;
        for camera in &turn {
            let view = View::screen(*camera, 1.0).expect("valid view");
            let mesh = lod.select(&view).to_mesh(&field);
            let report = measure_error(&field, &mesh, Some(camera)).expect("valid camera");
            let projected = report.projected.expect("a screen view").max;
            assert!(projected <= 1.0, "guard {guard}: {projected} px over τ");
            if let Some(previous) = &before {
                let popping = terralod_testkit::measure_popping(&field, previous, &mesh, camera)
                    .expect("valid camera");
                worst = worst.max(popping.max);
            }
            before = Some(mesh);
        }
        worst
    };
    let (guarded, unguarded) = (worst(AdaptiveOptions::DEFAULT_GUARD_ANGLE), worst(0.0));
    eprintln!("popping: guarded {guarded:.3} px, unguarded {unguarded:.3} px");
    assert!(guarded <= 0.25, "with the guard band: {guarded:.3} px");
    assert!(unguarded > 0.25, "without: {unguarded:.3} px");
}
