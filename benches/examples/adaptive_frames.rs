//! Algorithm A along the low flight of `benches/lod.rs` (64 frames, 10 m apart unless the
//! second argument says otherwise, τ = 1 px, 1920 × 1080): per-frame time of the next frame
//! (state carried) and of a selection from scratch (state reset), and of Update() alone,
//! with the sparse tree built for the build tolerance of the third argument (metres,
//! default 0); a plain binary for profilers (`valgrind --tool=callgrind`). Run:
//! `cargo run --release -p terralod-benches --example adaptive_frames [rounds] [step_m]
//! [build_tolerance_m]`.

use glam::Vec3;
use std::time::Instant;
use terralod_benches::{load_gcanyon, straight_flight};
use terralod_core::lod::{AdaptiveLod, AdaptiveOptions, LodAlgorithm, LodOptions};
use terralod_core::pyramid::Pyramid;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2);
    let step: f32 = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10.0);
    let tolerance: f32 = std::env::args()
        .nth(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0.0);
    let Some(field) = load_gcanyon() else {
        return;
    };
    let pyramid = Pyramid::build(&field);
    let built = Instant::now();
    let options = AdaptiveOptions::default().with_build_tolerance(tolerance);
    let mut lod = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
    println!(
        "build tolerance {tolerance} m: {} squares ({} pool slots) built in {:.0} ms, \
         {} static + {} state bytes = {:.2} bytes per square",
        lod.squares(),
        lod.pool_slots(),
        built.elapsed().as_secs_f64() * 1e3,
        lod.static_bytes(),
        lod.state_bytes(),
        lod.bytes_per_square(),
    );
    let eye0 = Vec3::new(60_000.0, 2_500.0, 61_440.0);
    let heading = (Vec3::new(160_000.0, 1_000.0, 70_000.0) - eye0).normalize();
    let views = straight_flight(eye0, heading, step, 64);
    for view in &views {
        lod.select(view);
    }
    let frames = rounds * views.len();
    let time = |lod: &mut AdaptiveLod<'_>, reset: bool, update_only: bool| {
        let started = Instant::now();
        let mut triangles = 0;
        let mut visits = 0;
        for i in 0..frames {
            if reset {
                lod.reset();
            }
            let view = &views[i % views.len()];
            if update_only {
                lod.update(view);
            } else {
                triangles += lod.select(view).triangle_count();
                visits += lod.stats().nodes_visited;
            }
        }
        let ms = started.elapsed().as_secs_f64() * 1e3 / frames as f64;
        (ms, triangles / frames, visits / frames as u64)
    };
    let (next, triangles, next_visits) = time(&mut lod, false, false);
    let (next_update, ..) = time(&mut lod, false, true);
    let (scratch, _, scratch_visits) = time(&mut lod, true, false);
    let (scratch_update, ..) = time(&mut lod, true, true);
    println!(
        "{frames} frames {step} m apart, {triangles} triangles, {} squares enabled: next frame {next:.2} ms \
         (update {next_update:.2}), from scratch {scratch:.2} ms (update {scratch_update:.2}), \
         ratio {:.2}",
        lod.enabled_squares(),
        scratch / next,
    );
    println!(
        "  update ratio {:.2}, squares evaluated per frame: next {next_visits}, scratch {scratch_visits}",
        scratch_update / next_update
    );
}
