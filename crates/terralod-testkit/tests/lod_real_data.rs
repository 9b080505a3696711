//! The guarantees of every registered algorithm on real elevation data (the SRTM Boulder
//! set, 758 × 758, 80 m spacing, 0.1 m per unit) for fixed cameras: crack-free, projected
//! error within τ, vertical error within M with full coverage. Skips, visibly, without the
//! data folder.

use glam::Vec3;
use std::path::Path;
use terralod_core::io::{LoadOptions, load};
use terralod_core::lod::{LodOptions, REGISTRY, View};
use terralod_core::{Camera, Heightfield, Pyramid, WorldMapping};
use terralod_testkit::{GridRect, check_mesh, measure_error};

const BOULDER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/data/srtm3_boulder_co_758.png"
);

fn boulder() -> Option<Heightfield> {
    let path = Path::new(BOULDER);
    if !path.exists() {
        eprintln!("SKIPPED: {BOULDER} not found");
        return None;
    }
    let loaded = load(path, &LoadOptions::default()).expect("the shared data loads");
    let field = loaded
        .heightfield
        .with_mapping(WorldMapping {
            cell_size: 80.0,
            height_scale: 0.1,
            height_offset: 0.0,
        })
        .expect("valid mapping");
    Some(field)
}

/// Cameras over the 60.6 km square (heights 1547–4320 m): oblique from the south-east
/// corner, low over the mountains looking west, straight down, inside the relief near a
/// corner with a wide lens, and below the terrain looking up.
fn cameras() -> Vec<Camera> {
    let camera = |eye: Vec3, target: Vec3, fov_deg: f32, viewport: (u32, u32), near: f32| {
        Camera::new(eye, target, fov_deg.to_radians(), viewport, near, 2.0e5)
            .expect("fixed cameras are valid")
    };
    vec![
        camera(
            Vec3::new(70_000.0, 12_000.0, 70_000.0),
            Vec3::new(30_000.0, 2_500.0, 30_000.0),
            60.0,
            (1920, 1080),
            1.0,
        ),
        camera(
            Vec3::new(45_000.0, 4_600.0, 30_000.0),
            Vec3::new(0.0, 2_000.0, 30_000.0),
            60.0,
            (1920, 1080),
            1.0,
        ),
        camera(
            Vec3::new(30_000.0, 15_000.0, 30_000.0),
            Vec3::new(30_000.0, 0.0, 30_000.0),
            60.0,
            (800, 800),
            1.0,
        ),
        camera(
            Vec3::new(2_000.0, 2_800.0, 58_000.0),
            Vec3::new(20_000.0, 2_500.0, 40_000.0),
            150.0,
            (3000, 400),
            0.5,
        ),
        camera(
            Vec3::new(30_000.0, 0.0, 30_000.0),
            Vec3::new(31_000.0, 5_000.0, 30_500.0),
            90.0,
            (640, 480),
            1.0,
        ),
    ]
}

#[test]
fn view_dependent_on_real_data() {
    let Some(field) = boulder() else { return };
    let pyramid = Pyramid::build(&field);
    let (lo, hi) = field.world_range();
    for entry in REGISTRY {
        // Each camera once (the measurement is the slow part in a debug build), with τ and
        // the view-angle-aware option varied across them.
        for (i, camera) in cameras().iter().enumerate() {
            let tau = [1.0f32, 4.0, 2.0, 1.0, 8.0][i];
            let options = LodOptions::default().with_view_angle_aware(i % 2 == 1);
            let mut algorithm = entry
                .build(&field, &pyramid, &options)
                .expect("the registry builds it");
            let view = View::screen(*camera, tau).expect("valid view");
            let mesh = algorithm.select(&view).to_mesh(&field);
            check_mesh(&mesh, None).assert_ok();
            let errors = measure_error(&field, &mesh, Some(camera)).expect("valid camera");
            let projected = errors.projected.expect("camera given");
            assert_eq!(projected.clipped, 0);
            assert!(projected.in_view > 0, "camera {i} sees the terrain");
            if !algorithm.error_bounded() {
                continue;
            }
            // Drawn heights are f32: allow their rounding (half an ulp of the largest
            // height, seen from the near plane at most) on top of τ.
            let rounding = f64::from(lo.abs().max(hi.abs())) * 2f64.powi(-24);
            let slack = rounding * f64::from(camera.viewport.1) / f64::from(camera.near);
            assert!(
                projected.max <= f64::from(tau) + slack.min(0.01),
                "{} camera {i} τ {tau}: {}",
                entry.name,
                errors
            );
        }
    }
}

#[test]
fn view_independent_on_real_data() {
    let Some(field) = boulder() else { return };
    let pyramid = Pyramid::build(&field);
    let (lo, hi) = field.world_range();
    for entry in REGISTRY {
        let mut algorithm = entry
            .build(&field, &pyramid, &LodOptions::default())
            .expect("the registry builds it");
        let mut previous = 0;
        for max_error in [80.0f32, 25.0] {
            let view = View::world_error(max_error).expect("valid view");
            let selection = algorithm.select(&view);
            let triangles = selection.triangle_count();
            let mesh = selection.to_mesh(&field);
            let cols = mesh.positions.iter().map(|p| p.col).max().unwrap_or(0);
            let rows = mesh.positions.iter().map(|p| p.row).max().unwrap_or(0);
            check_mesh(&mesh, Some(GridRect::new(0, 0, cols, rows))).assert_ok();
            let errors = measure_error(&field, &mesh, None).expect("no camera");
            assert_eq!(errors.uncovered, 0);
            if !algorithm.error_bounded() {
                continue;
            }
            let rounding = f64::from(lo.abs().max(hi.abs())) * 2f64.powi(-23);
            assert!(
                errors.world.max <= f64::from(max_error) + rounding,
                "{}",
                errors
            );
            assert!(
                triangles > previous,
                "{} M {max_error}: {triangles}",
                entry.name
            );
            previous = triangles;
        }
    }
}

const GCANYON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/data/gcanyon_4097x2049_8bit.png"
);

/// The Grand Canyon set at the bench's cameras and τ = 1 px: 8 M samples, so it is slow in
/// a debug build. Run it with
/// `cargo test --release -p terralod-testkit --test lod_real_data -- --ignored`.
#[test]
#[ignore = "8 M samples: run in release with --ignored"]
fn grand_canyon_at_one_pixel() {
    let path = Path::new(GCANYON);
    if !path.exists() {
        eprintln!("SKIPPED: {GCANYON} not found");
        return;
    }
    let field = load(path, &LoadOptions::default())
        .expect("the shared data loads")
        .heightfield
        .with_mapping(WorldMapping {
            cell_size: 60.0,
            height_scale: 10.0,
            height_offset: 0.0,
        })
        .expect("valid mapping");
    let pyramid = Pyramid::build(&field);
    let camera = |eye: Vec3, target: Vec3| {
        Camera::new(eye, target, 60f32.to_radians(), (1920, 1080), 1.0, 1.0e6).expect("valid")
    };
    let cameras = [
        camera(
            Vec3::new(122_880.0, 40_000.0, 160_000.0),
            Vec3::new(122_880.0, 0.0, 61_440.0),
        ),
        camera(
            Vec3::new(60_000.0, 2_500.0, 61_440.0),
            Vec3::new(160_000.0, 1_000.0, 70_000.0),
        ),
        camera(
            Vec3::new(122_880.0, 20_000.0, 61_440.0),
            Vec3::new(122_880.0, 0.0, 61_440.0),
        ),
    ];
    for entry in REGISTRY {
        let mut algorithm = entry
            .build(&field, &pyramid, &LodOptions::default())
            .expect("the registry builds it");
        for (i, camera) in cameras.iter().enumerate() {
            let view = View::screen(*camera, 1.0).expect("valid view");
            let mesh = algorithm.select(&view).to_mesh(&field);
            check_mesh(&mesh, None).assert_ok();
            let errors = measure_error(&field, &mesh, Some(camera)).expect("valid camera");
            let projected = errors.projected.expect("camera given");
            eprintln!(
                "{} camera {i}: {} triangles, max {:.4} px, p99 {:.4} px over {} samples in view",
                entry.name,
                mesh.triangles.len(),
                projected.max,
                projected.p99,
                projected.in_view
            );
            assert_eq!(projected.clipped, 0);
            assert!(
                !algorithm.error_bounded() || projected.max <= 1.0,
                "{} camera {i}: {}",
                entry.name,
                errors
            );
        }
    }
}
