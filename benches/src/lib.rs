//! Benchmark crate of terralod: the benches live in `benches/`; this library holds what they
//! share.

pub mod peers;

use std::path::PathBuf;
use terralod_core::heightfield::{Heightfield, WorldMapping};
use terralod_core::io::{self, LoadOptions};

/// Path of a file in the shared real-data folder beside the checkout, or `None` after a
/// visible `SKIPPED` line when it is absent.
pub fn shared_data(name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data")).join(name);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!("SKIPPED: {} is absent", path.display());
        None
    }
}

/// The 4097 × 2049 Grand Canyon set at 60 m spacing and 10 m per unit (the data README's
/// mapping), loaded by terralod's own PNG loader; `None` (after a visible `SKIPPED` line)
/// when the shared data is absent or does not load.
pub fn load_gcanyon() -> Option<Heightfield> {
    load_shared("gcanyon_4097x2049_8bit.png", 60.0, 10.0)
}

/// The 758 × 758 Boulder SRTM3 set at 80 m spacing and 0.1 m per unit (the data README's
/// square spacing and the PNG's scale), as 16-bit samples; `None` (after a visible
/// `SKIPPED` line) when the shared data is absent or does not load.
pub fn load_boulder() -> Option<Heightfield> {
    load_shared("srtm3_boulder_co_758.png", 80.0, 0.1)
}

/// A file of the shared data with a world mapping; `None` after a visible `SKIPPED` line.
fn load_shared(name: &str, cell_size: f32, height_scale: f32) -> Option<Heightfield> {
    let path = shared_data(name)?;
    let loaded = match io::load(&path, &LoadOptions::default()) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("SKIPPED: {error}");
            return None;
        }
    };
    let mapping = WorldMapping {
        cell_size,
        height_scale,
        height_offset: 0.0,
    };
    loaded.heightfield.with_mapping(mapping).ok()
}

/// `count` screen views (τ = 1 px, 1920 × 1080, 60°) flying straight from `eye` along
/// `heading` in steps of `step` world units: the next-frame workload of the benches. Each
/// camera looks at a point 10 km ahead: one 1 m ahead (as before 2026-12-04) rounds, in
/// `f32` tens of kilometres from the origin, to a view direction that wobbles by up to
/// 0.008 rad from one frame to the next, a shaking camera rather than a straight flight.
pub fn straight_flight(
    eye: glam::Vec3,
    heading: glam::Vec3,
    step: f32,
    count: usize,
) -> Vec<terralod_core::lod::View> {
    use terralod_core::{Camera, lod::View};
    (0..count)
        .map(|i| {
            let eye = eye + heading * (step * i as f32);
            let camera = Camera::new(
                eye,
                eye + heading * 1e4,
                60f32.to_radians(),
                (1920, 1080),
                1.0,
                1e6,
            )
            .expect("valid camera");
            View::screen(camera, 1.0).expect("valid view")
        })
        .collect()
}

/// The three cameras of the table (world metres; the data spans 245,760 × 122,880 m,
/// heights 130–1870 m): an oblique overview, a low flight looking along the canyon, and
/// straight down from 20 km. 1920 × 1080, 60°, near 1 m, far 1000 km.
pub fn gcanyon_cameras() -> [(&'static str, terralod_core::Camera); 3] {
    let camera = |eye: glam::Vec3, target: glam::Vec3| {
        terralod_core::Camera::new(eye, target, 60f32.to_radians(), (1920, 1080), 1.0, 1.0e6)
            .expect("fixed cameras are valid")
    };
    [
        (
            "overview",
            camera(
                glam::Vec3::new(122_880.0, 40_000.0, 160_000.0),
                glam::Vec3::new(122_880.0, 0.0, 61_440.0),
            ),
        ),
        (
            "low-flight",
            camera(
                glam::Vec3::new(60_000.0, 2_500.0, 61_440.0),
                glam::Vec3::new(160_000.0, 1_000.0, 70_000.0),
            ),
        ),
        (
            "down",
            camera(
                glam::Vec3::new(122_880.0, 20_000.0, 61_440.0),
                glam::Vec3::new(122_880.0, 0.0, 61_440.0),
            ),
        ),
    ]
}
