//! LOD selection plus index generation (features Q2–Q5, Q7) for every registered algorithm
//! on the 4097 × 2049 Grand Canyon data (60 m cells, 10 m per unit), 1920 × 1080, 60° fov,
//! τ = 1 px, single-threaded, three fixed cameras; plus the article's triangle table, and
//! every error-bounded algorithm's view-independent selection.
//!
//! Run: `cargo bench -p terralod-benches --bench lod`. Before the timings it prints, per
//! algorithm and camera, the triangles at full detail, after culling only and at τ = 1, 2,
//! 4 px (and at τ = 1 with the view-angle-aware error), and the per-node state in bytes per
//! sample. Skips (with a message) without the data.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use terralod_benches::{gcanyon_cameras as cameras, load_gcanyon, straight_flight};
use terralod_core::heightfield::Heightfield;
use terralod_core::lod::{AdaptiveLod, LodAlgorithm, LodOptions, REGISTRY, View};
use terralod_core::pyramid::Pyramid;

fn table(field: &Heightfield, pyramid: &Pyramid) {
    let samples = field.len() as f64;
    for entry in REGISTRY {
        let mut algorithm = entry
            .build(field, pyramid, &LodOptions::default())
            .expect("the registry builds it");
        for (name, camera) in cameras() {
            // Full detail: every sample; after culling only: the smallest tolerance (every
            // node refines to the leaves) with culling.
            let full = 2 * (field.width() as u64 - 1) * (field.height() as u64 - 1);
            let mut row = format!("{} {name}: full {full}", entry.name);
            let finest = View::screen(camera, f32::MIN_POSITIVE).expect("valid");
            row += &format!(
                ", culled only {}",
                algorithm.select(&finest).triangle_count()
            );
            for tau in [1.0, 2.0, 4.0] {
                let view = View::screen(camera, tau).expect("valid");
                let triangles = algorithm.select(&view).triangle_count();
                let stats = algorithm.stats();
                row += &format!(
                    ", τ {tau}: {triangles} ({} nodes visited, {:.2} ms)",
                    stats.nodes_visited,
                    stats.select_time.as_secs_f64() * 1e3
                );
            }
            let aware = View::screen(camera, 1.0).expect("valid");
            let mut angle_aware = entry
                .build(
                    field,
                    pyramid,
                    &LodOptions::default().with_view_angle_aware(true),
                )
                .expect("the registry builds it");
            row += &format!(
                ", τ 1 view-angle-aware: {}",
                angle_aware.select(&aware).triangle_count()
            );
            eprintln!("{row}");
        }
        eprintln!(
            "{}: node state {} bytes, {:.3} bytes per sample",
            entry.name,
            algorithm.state_bytes(),
            algorithm.state_bytes() as f64 / samples
        );
    }
}

fn lod_select(c: &mut Criterion) {
    let Some(field) = load_gcanyon() else {
        return;
    };
    let pyramid = Pyramid::build(&field);
    table(&field, &pyramid);
    let mut group = c.benchmark_group("lod_select_gcanyon_1080p_1px");
    for entry in REGISTRY {
        let mut algorithm = entry
            .build(&field, &pyramid, &LodOptions::default())
            .expect("the registry builds it");
        for (name, camera) in cameras() {
            let view = View::screen(camera, 1.0).expect("valid");
            group.bench_function(format!("{}/{name}", entry.name), |b| {
                b.iter(|| black_box(algorithm.select(black_box(&view)).triangle_count()))
            });
        }
    }
    group.finish();
}

/// Algorithm A along a low flight (64 frames, 10 m apart, τ = 1 px): the next frame's
/// update with the state carried, against a selection from scratch (state reset) for the
/// same cameras. Prints the tree's bytes per square and per sample first.
fn adaptive_update(c: &mut Criterion) {
    let Some(field) = load_gcanyon() else {
        return;
    };
    let pyramid = Pyramid::build(&field);
    let mut lod = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
    eprintln!(
        "adaptive: {} squares, {} bytes per square ({} static + {} state and deadline), {:.2} bytes per sample",
        lod.squares(),
        AdaptiveLod::SQUARE_BYTES,
        lod.static_bytes() / lod.squares(),
        lod.state_bytes() / lod.squares(),
        (lod.static_bytes() + lod.state_bytes()) as f64 / field.len() as f64
    );
    let (_, low_flight) = cameras()[1];
    let heading = (low_flight.target - low_flight.eye).normalize();
    let views = straight_flight(low_flight.eye, heading, 10.0, 64);
    for view in &views {
        lod.select(view);
    }
    eprintln!(
        "adaptive low flight: {} triangles, {} squares enabled",
        lod.stats().triangles,
        lod.enabled_squares()
    );
    let mut group = c.benchmark_group("adaptive_update_gcanyon_low_flight_1px");
    let mut frame = 0;
    group.bench_function("next_frame", |b| {
        b.iter(|| {
            frame = (frame + 1) % views.len();
            black_box(lod.select(&views[frame]).triangle_count())
        })
    });
    group.bench_function("from_scratch", |b| {
        b.iter(|| {
            frame = (frame + 1) % views.len();
            lod.reset();
            black_box(lod.select(&views[frame]).triangle_count())
        })
    });
    group.finish();
}

/// The view-independent mode of every error-bounded algorithm (`mesh --max-error`), built
/// for world-error views only, on the whole canyon at M = 10 and 50 m.
fn view_independent(c: &mut Criterion) {
    let Some(field) = load_gcanyon() else {
        return;
    };
    let pyramid = Pyramid::build(&field);
    let options = LodOptions::default().with_world_error_only(true);
    let mut group = c.benchmark_group("view_independent_gcanyon");
    group.sample_size(10);
    for entry in REGISTRY {
        let mut algorithm = entry
            .build(&field, &pyramid, &options)
            .expect("the registry builds it");
        if !algorithm.error_bounded() {
            continue;
        }
        for max_error in [10.0, 50.0] {
            let view = View::world_error(max_error).expect("valid");
            group.bench_function(format!("{}/{max_error}m", entry.name), |b| {
                b.iter(|| black_box(algorithm.select(black_box(&view)).triangle_count()))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, lod_select, adaptive_update, view_independent);
criterion_main!(benches);
