//! Algorithm A along the low flight of `benches/lod.rs` (64 frames, 10 m apart unless the
//! second argument says otherwise, τ = 1 px, 1920 × 1080): per-frame time of the next frame
//! (state carried) and of a selection from scratch (state reset), and of Update() alone,
//! and of the same view selected again (Update() finds nothing due: Render() alone),
//! with the sparse tree built for the build tolerance of the third argument (metres,
//! default 0), and with a local detail when the fourth says `u16` or `f32`: 1025 × 1025
//! samples 15 m apart (4 × finer) around the flight's start, the terrain's own surface
//! there plus bumps (16-bit: ±1 raw unit, ±10 m; float: ±0.5 m). A plain
//! binary for profilers (`valgrind --tool=callgrind`). Run:
//! With a sixth argument `n > 0`, algorithm A holds its pages (256-cell squares' subtrees)
//! in `n` frames (A8 step 2) and reports what they did; with a seventh, `disk`, the pages
//! wait in a page file in the temporary folder, read on a loader thread (A8 step 3), and
//! the first pass over the flight (pages coming in) is timed frame by frame. Run:
//! `cargo run --release -p terralod-benches --example adaptive_frames [rounds] [step_m]
//! [build_tolerance_m] [none|u16|f32] [subdivision, default 4] [page frames, default 0]
//! [memory|disk]`.

use glam::Vec3;
use std::time::Instant;
use terralod_benches::{load_gcanyon, straight_flight};
use terralod_core::heightfield::{Heightfield, Samples};
use terralod_core::lod::{AdaptiveLod, AdaptiveOptions, Detail, LodAlgorithm, LodOptions};
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
    let kind = std::env::args().nth(4).unwrap_or_default();
    let factor: u32 = std::env::args()
        .nth(5)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4);
    let page_frames: u32 = std::env::args()
        .nth(6)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let on_disk = std::env::args().nth(7).is_some_and(|a| a == "disk");
    let Some(field) = load_gcanyon() else {
        return;
    };
    let pyramid = Pyramid::build(&field);
    let detail_field = match kind.as_str() {
        "u16" | "f32" => Some(bumpy_detail(&field, kind == "f32", factor)),
        _ => None,
    };
    let origin = (59_040.0, 53_760.0);
    let detail = detail_field.as_ref().map(|d| {
        Detail::new(&field, d, origin, 60.0 / factor as f32)
            .expect("the detail lies on the terrain")
    });
    let built = Instant::now();
    let options = AdaptiveOptions::default()
        .with_build_tolerance(tolerance)
        .with_page_frames(page_frames);
    let mut lod = match &detail {
        Some(detail) => {
            AdaptiveLod::with_detail(&field, &pyramid, LodOptions::default(), options, detail)
                .expect("placed on this terrain")
        }
        None => AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options),
    };
    let built_ms = built.elapsed().as_secs_f64() * 1e3;
    if on_disk {
        let spooled = Instant::now();
        lod.spool_pages(&std::env::temp_dir())
            .expect("pages written to the temporary folder");
        println!(
            "  pages written to an unnamed file in {} in {:.0} ms",
            lod.page_dir().expect("on disk").display(),
            spooled.elapsed().as_secs_f64() * 1e3
        );
    }
    println!(
        "build tolerance {tolerance} m, detail {kind:?}: {} squares ({} pool slots, {} pages) built \
         in {built_ms:.0} ms, {} static + {} state bytes = {:.2} bytes per square",
        lod.squares(),
        lod.pool_slots(),
        lod.pages(),
        lod.static_bytes(),
        lod.state_bytes(),
        lod.bytes_per_square(),
    );
    let eye0 = Vec3::new(60_000.0, 2_500.0, 61_440.0);
    let heading = (Vec3::new(160_000.0, 1_000.0, 70_000.0) - eye0).normalize();
    let views = straight_flight(eye0, heading, step, 64);
    // The first pass: the pages the flight wants come in (with frames for pages).
    let (mut first, mut longest, mut total, mut waited) = (0.0, 0.0f64, 0.0, 0);
    for (i, view) in views.iter().enumerate() {
        let started = Instant::now();
        lod.select(view);
        let ms = started.elapsed().as_secs_f64() * 1e3;
        if i == 0 {
            first = ms;
        } else {
            (longest, total) = (longest.max(ms), total + ms);
        }
        waited += lod.paging().map_or(0, |p| usize::from(p.held_back > 0));
    }
    if let Some(paging) = lod.paging() {
        println!(
            "  first pass: frame 0 (from scratch) {first:.2} ms, then longest {longest:.2} ms, \
             mean {:.2} ms; {waited} of {} frames held something back; pages read from disk {} \
             ({:.1} MB), copied in {}; longest start of an update (pages taken in) {:.3} ms",
            total / (views.len() - 1) as f64,
            views.len(),
            paging.loaded,
            paging.bytes_read as f64 / 1e6,
            paging.copied_in,
            paging.longest_serve.as_secs_f64() * 1e3,
        );
        // Then every page the flight asks for, so the runs below time selection alone.
        for view in &views {
            lod.await_pages();
            lod.select(view);
        }
    }
    let frames = rounds * views.len();
    let time = |lod: &mut AdaptiveLod<'_>, reset: bool, update_only: bool| {
        let started = Instant::now();
        let mut triangles = 0;
        let mut visits = 0;
        let mut reuse = (0, 0);
        let mut waited = 0;
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
                let (reused, walked) = lod.render_reuse();
                reuse = (reuse.0 + reused, reuse.1 + walked);
                waited += lod.paging().map_or(0, |p| usize::from(p.held_back > 0));
            }
        }
        let ms = started.elapsed().as_secs_f64() * 1e3 / frames as f64;
        let reused = reuse.0 as f64 / reuse.1.max(1) as f64;
        (
            ms,
            triangles / frames,
            visits / frames as u64,
            reused,
            waited,
        )
    };
    let (next, triangles, next_visits, next_reused, waited) = time(&mut lod, false, false);
    let enabled = lod.enabled_squares();
    if let Some(paging) = lod.paging() {
        println!(
            "  pages: {} of {} in {} frames after the next-frame run ({} released, radius \
             {:.0} m), {waited} of {frames} frames held something back, {} copied in and {} \
             dropped so far",
            paging.resident,
            lod.pages(),
            paging.frames,
            paging.released,
            paging.radius,
            paging.copied_in,
            paging.dropped,
        );
    }
    if lod.paging().is_some() {
        // How near the camera the ground held back comes, frame by frame of one more pass.
        let mut nearest: Vec<f32> = (views.iter())
            .map(|view| {
                lod.select(view);
                lod.paging().map_or(f32::INFINITY, |p| p.nearest_held_back)
            })
            .collect();
        nearest.sort_by(f32::total_cmp);
        println!(
            "  nearest square held back: least {:.0} m, median {:.0} m over the {} frames",
            nearest[0],
            nearest[nearest.len() / 2],
            nearest.len()
        );
    }
    let (next_update, ..) = time(&mut lod, false, true);
    // Render() alone: the same view selected again (Update() finds nothing due).
    let mut render_time = std::time::Duration::ZERO;
    for i in 0..frames {
        let view = &views[i % views.len()];
        lod.select(view);
        let started = Instant::now();
        lod.select(view);
        render_time += started.elapsed();
    }
    let render = render_time.as_secs_f64() * 1e3 / frames as f64;
    let (scratch, _, scratch_visits, ..) = time(&mut lod, true, false);
    let (scratch_update, ..) = time(&mut lod, true, true);
    if let Some(paging) = lod.paging() {
        // A reset leaves every page free to leave: the runs from scratch swap pages.
        println!(
            "  pages after the runs from scratch: {} copied in and {} dropped in all",
            paging.copied_in, paging.dropped,
        );
    }
    println!(
        "{frames} frames {step} m apart, {triangles} triangles, {} squares enabled: next frame {next:.2} ms \
         (update {next_update:.2}), from scratch {scratch:.2} ms (update {scratch_update:.2}), \
         ratio {:.2}",
        enabled,
        scratch / next,
    );
    println!(
        "  update ratio {:.2}, squares evaluated per frame: next {next_visits}, scratch {scratch_visits}; \
         the same view again (Render() alone) {render:.2} ms",
        scratch_update / next_update
    );
    println!(
        "  Render() replayed the recorded walks of {:.1} % of the squares it drew on the next \
         frame; its recorded walks and buffers hold {:.1} MB",
        100.0 * next_reused,
        lod.render_bytes() as f64 / 1e6,
    );
}

/// 1025 × 1025 samples `factor` times finer than `field` from the world position the
/// flight starts near: the terrain's full-resolution surface (bilinear between its
/// samples) plus bumps, as 16-bit raw units or as floats.
fn bumpy_detail(field: &Heightfield, float: bool, factor: u32) -> Heightfield {
    let side = 1025u32;
    let (c0, r0) = (59_040.0 / 60.0, 53_760.0 / 60.0);
    let mut values = Vec::with_capacity((side * side) as usize);
    for j in 0..side {
        for i in 0..side {
            let n = f64::from(factor);
            let (x, z) = (c0 + f64::from(i) / n, r0 + f64::from(j) / n);
            let (c, r) = (x.floor() as u32, z.floor() as u32);
            let (fx, fz) = (x - x.floor(), z - z.floor());
            let h = |c: u32, r: u32| f64::from(field.raw_clamped(c, r));
            let base = (1.0 - fz) * ((1.0 - fx) * h(c, r) + fx * h(c + 1, r))
                + fz * ((1.0 - fx) * h(c, r + 1) + fx * h(c + 1, r + 1));
            let bump = f64::from((i * 7 + j * 13) % 3) - 1.0;
            values.push(if float {
                base + bump * 0.05
            } else {
                (base + bump).round()
            });
        }
    }
    let samples = if float {
        Samples::F32(values.iter().map(|&v| v as f32).collect())
    } else {
        Samples::U16(
            values
                .iter()
                .map(|&v| v.clamp(0.0, 65_535.0) as u16)
                .collect(),
        )
    };
    Heightfield::new(side, side, samples).expect("a valid detail")
}
