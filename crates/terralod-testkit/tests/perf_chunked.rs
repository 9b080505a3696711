//! Timings and triangle counts of algorithm C (the figures in `docs/BENCHMARKS.md`).
//! Ignored by default; run them in release:
//! `cargo test --release -p terralod-testkit --test perf_chunked -- --ignored --nocapture --test-threads 1`.

use glam::Vec3;
use std::path::Path;
use std::time::{Duration, Instant};
use terralod_core::lod::{ChunkedOptions, LodAlgorithm, LodOptions, REGISTRY, View};
use terralod_core::{Camera, Heightfield, LoadOptions, Pyramid, Samples, WorldMapping, load};
use terralod_testkit::measure_error;

const GCANYON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/data/gcanyon_4097x2049_8bit.png"
);

fn camera(eye: Vec3, target: Vec3) -> Camera {
    camera_to(eye, target, 1.0e6)
}

/// A camera whose far plane (view distance) is `far`.
fn camera_to(eye: Vec3, target: Vec3, far: f32) -> Camera {
    Camera::new(eye, target, 60f32.to_radians(), (1920, 1080), 1.0, far).expect("valid")
}

/// The three cameras of the Q benchmark (world metres, 60 m cells).
fn bench_cameras() -> [(&'static str, Camera); 3] {
    [
        (
            "overview",
            camera(
                Vec3::new(122_880.0, 40_000.0, 160_000.0),
                Vec3::new(122_880.0, 0.0, 61_440.0),
            ),
        ),
        (
            "low-flight",
            camera(
                Vec3::new(60_000.0, 2_500.0, 61_440.0),
                Vec3::new(160_000.0, 1_000.0, 70_000.0),
            ),
        ),
        (
            "down",
            camera(
                Vec3::new(122_880.0, 20_000.0, 61_440.0),
                Vec3::new(122_880.0, 0.0, 61_440.0),
            ),
        ),
    ]
}

/// A flight over `[0, extent]²`: a low pass, a climb and an orbit, `frames` poses.
fn path(extent_x: f32, extent_z: f32, frames: usize) -> Vec<Camera> {
    path_to(extent_x, extent_z, frames, 1.0e6)
}

/// [`path`] with the far plane at `far`.
fn path_to(extent_x: f32, extent_z: f32, frames: usize, far: f32) -> Vec<Camera> {
    (0..frames)
        .map(|i| {
            let t = i as f32 / frames as f32;
            let angle = t * std::f32::consts::TAU;
            let height = 1_500.0 + 30_000.0 * (0.5 - 0.5 * (2.0 * angle).cos());
            let eye = Vec3::new(
                extent_x * (0.5 + 0.35 * angle.cos()),
                height,
                extent_z * (0.5 + 0.35 * angle.sin()),
            );
            let target = Vec3::new(
                extent_x * (0.5 + 0.1 * (angle + 1.0).cos()),
                500.0,
                extent_z * (0.5 + 0.1 * (angle + 1.0).sin()),
            );
            camera_to(eye, target, far)
        })
        .collect()
}

/// Median and largest select time over `cameras` (each selected twice, the second timed),
/// the most triangles and the median of blocks visited.
fn fly(lod: &mut dyn LodAlgorithm, cameras: &[Camera]) -> (Duration, Duration, u64, u64) {
    let mut times = Vec::new();
    let mut visited = Vec::new();
    let mut triangles = 0;
    for camera in cameras {
        let view = View::screen(*camera, 1.0).expect("valid");
        lod.select(&view);
        let started = Instant::now();
        lod.select(&view);
        times.push(started.elapsed());
        triangles = triangles.max(lod.stats().triangles);
        visited.push(lod.stats().nodes_visited);
    }
    times.sort_unstable();
    visited.sort_unstable();
    (
        times[times.len() / 2],
        times[times.len() - 1],
        triangles,
        visited[visited.len() / 2],
    )
}

fn chunked(options: ChunkedOptions) -> LodOptions {
    LodOptions {
        chunked: options,
        ..LodOptions::default()
    }
}

fn grand_canyon() -> Option<Heightfield> {
    let path = Path::new(GCANYON);
    if !path.exists() {
        eprintln!("SKIPPED: {GCANYON} not found");
        return None;
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
    Some(field)
}

#[test]
#[ignore = "release only: timings on the Grand Canyon set"]
fn chunked_on_the_grand_canyon() {
    let Some(field) = grand_canyon() else {
        return;
    };
    let pyramid = Pyramid::build(&field);
    let entry = |name: &str| {
        REGISTRY
            .iter()
            .find(|e| e.name == name)
            .expect("registered")
    };
    let chunked_entry = entry("chunked");
    let flight = path(245_760.0, 122_880.0, 200);
    for block_size in [32, 64, 128] {
        let options = chunked(ChunkedOptions {
            block_size,
            ..ChunkedOptions::DEFAULT
        });
        let started = Instant::now();
        let mut lod = chunked_entry
            .build(&field, &pyramid, &options)
            .expect("the registry builds it");
        let build = started.elapsed();
        let (median, max, triangles, visited) = fly(lod.as_mut(), &flight);
        println!(
            "path, distance rule, {block_size}-segment blocks: build {build:?}, select median {median:?} max {max:?}, up to {triangles} triangles, {visited} blocks visited (median)"
        );
        let near_flight = path_to(245_760.0, 122_880.0, 200, VIEW_DISTANCE);
        let (median, max, triangles, visited) = fly(lod.as_mut(), &near_flight);
        println!(
            "path, far plane {VIEW_DISTANCE} m, {block_size}-segment blocks: select median {median:?} max {max:?}, up to {triangles} triangles, {visited} blocks visited (median)"
        );
    }
    let started = Instant::now();
    let mut aware = chunked_entry
        .build(
            &field,
            &pyramid,
            &chunked(ChunkedOptions {
                error_aware: true,
                ..ChunkedOptions::DEFAULT
            }),
        )
        .expect("the registry builds it");
    println!("error-aware build (error bounds) {:?}", started.elapsed());
    let (median, max, triangles, _) = fly(aware.as_mut(), &flight);
    println!(
        "path, error-aware 1 px: select median {median:?} max {max:?}, up to {triangles} triangles"
    );
    let mut distance = chunked_entry
        .build(&field, &pyramid, &LodOptions::default())
        .expect("the registry builds it");
    let mut quadtree = entry("quadtree")
        .build(&field, &pyramid, &LodOptions::default())
        .expect("the registry builds it");
    for (name, camera) in bench_cameras() {
        let measured = |lod: &mut dyn LodAlgorithm, pixels: f32| {
            let view = View::screen(camera, pixels).expect("valid");
            let mesh = lod.select(&view).to_mesh(&field);
            let started = Instant::now();
            lod.select(&view);
            let time = started.elapsed();
            let errors = measure_error(&field, &mesh, Some(&camera)).expect("valid camera");
            (
                lod.stats().triangles,
                errors.projected.expect("camera").max,
                time,
            )
        };
        let (d_tris, d_px, d_time) = measured(distance.as_mut(), 1.0);
        println!(
            "{name}: distance rule q = 2w: {d_tris} triangles, measured {d_px:.2} px, select {d_time:?}"
        );
        for pixels in [1.0, d_px as f32] {
            let (a_tris, a_px, a_time) = measured(aware.as_mut(), pixels);
            let (q_tris, q_px, q_time) = measured(quadtree.as_mut(), pixels);
            println!(
                "{name}: τ {pixels:.2} px: error-aware {a_tris} triangles ({a_px:.2} px, {a_time:?}); quadtree {q_tris} triangles ({q_px:.2} px, {q_time:?})"
            );
        }
    }
}

/// A realistic view distance (a hazy day, as flight simulators draw 30–100 km): what a
/// renderer's far plane is, unlike the bench's, which takes in the whole terrain.
const VIEW_DISTANCE: f32 = 35_000.0;

/// A smooth synthetic terrain of `side²` samples (16-bit, cheap to make at any size): a
/// function of the sample's position, so two sizes agree where they overlap.
fn synthetic(side: u32, cell_size: f32) -> Heightfield {
    let samples = (0..side * side)
        .map(|i| {
            let (c, r) = ((i % side) as f32 / 4096.0, (i / side) as f32 / 4096.0);
            let v = (c * 37.0).sin() * (r * 23.0).cos() + 0.5 * (c * 91.0 + r * 57.0).sin();
            (20_000.0 + 12_000.0 * v) as u16
        })
        .collect();
    Heightfield::new(side, side, Samples::U16(samples))
        .expect("valid")
        .with_mapping(WorldMapping {
            cell_size,
            height_scale: 0.1,
            height_offset: 0.0,
        })
        .expect("valid mapping")
}

/// C6: the same cells (60 m), the same world path over the first 245,760 m and the same
/// terrain there: the 16385² terrain is 16 × larger in the world, 16 × more blocks. With
/// a finite view distance the flood fill meets the same blocks on both (the path keeps
/// its far plane inside the smaller one), so the cost is flat; with the far plane over
/// the whole terrain (the bench's), the larger one is more in view.
#[test]
#[ignore = "release only: 16385² samples"]
fn chunked_scaling() {
    let entry = REGISTRY
        .iter()
        .find(|e| e.name == "chunked")
        .expect("registered");
    for side in [4097u32, 16385] {
        let field = synthetic(side, 60.0);
        let pyramid = Pyramid::build(&field);
        let mut lod = entry
            .build(&field, &pyramid, &LodOptions::default())
            .expect("the registry builds it");
        for far in [VIEW_DISTANCE, 1.0e6] {
            let flight = path_to(245_760.0, 245_760.0, 200, far);
            let (median, max, triangles, visited) = fly(lod.as_mut(), &flight);
            println!(
                "{side}² samples, 60 m cells, far plane {far} m: select median {median:?} max {max:?}, up to {triangles} triangles, {visited} blocks visited (median)"
            );
        }
    }
}

/// The selection alone, flown many times (for a profiler: `perf record` on this test).
#[test]
#[ignore = "release only: a profiling loop on the Grand Canyon set"]
fn chunked_select_loop() {
    let Some(field) = grand_canyon() else {
        return;
    };
    let pyramid = Pyramid::build(&field);
    let entry = REGISTRY
        .iter()
        .find(|e| e.name == "chunked")
        .expect("registered");
    let mut lod = entry
        .build(&field, &pyramid, &LodOptions::default())
        .expect("the registry builds it");
    let flight = path(245_760.0, 122_880.0, 200);
    let started = Instant::now();
    let mut medians = Vec::new();
    while started.elapsed() < Duration::from_secs(5) {
        medians.push(fly(lod.as_mut(), &flight).0);
    }
    medians.sort_unstable();
    println!(
        "{} flights, median of the medians {:?}",
        medians.len(),
        medians[medians.len() / 2]
    );
}

/// Where `--morph`'s remaining popping comes from: the largest jump between two
/// consecutive frames at the same ten places of the path, flown in 200 and in 2,000
/// frames. A jump that shrinks tenfold with the camera's step is the morph itself (its
/// factor moves by `step / (q − w)` a frame); a jump that does not is a discontinuity.
#[test]
#[ignore = "release only: popping on the Grand Canyon set"]
fn chunked_popping_against_camera_speed() {
    let Some(field) = grand_canyon() else {
        return;
    };
    let pyramid = Pyramid::build(&field);
    let entry = REGISTRY
        .iter()
        .find(|e| e.name == "chunked")
        .expect("registered");
    for (morph, lod_distance) in [(false, 2.0), (true, 2.0), (true, 4.0)] {
        let options = chunked(ChunkedOptions {
            morph,
            lod_distance,
            ..ChunkedOptions::DEFAULT
        });
        let mut lod = entry
            .build(&field, &pyramid, &options)
            .expect("the registry builds it");
        for frames in [200usize, 2_000] {
            let flight = path(245_760.0, 122_880.0, frames);
            let mut worst = Vec::new();
            for place in 0..10 {
                let i = place * frames / 10 + frames / 20;
                let before = lod
                    .select(&View::screen(flight[i], 1.0).expect("valid"))
                    .to_mesh(&field);
                let after = lod
                    .select(&View::screen(flight[i + 1], 1.0).expect("valid"))
                    .to_mesh(&field);
                let popping =
                    terralod_testkit::measure_popping(&field, &before, &after, &flight[i + 1])
                        .expect("valid camera");
                let step = flight[i].eye.distance(flight[i + 1].eye);
                worst.push(format!(
                    "{:.2} px ({step:.0} m, {} triangles)",
                    popping.max,
                    lod.stats().triangles
                ));
            }
            println!(
                "morph {morph}, q = {lod_distance} w, {frames} frames: largest jump per place (camera step): {}",
                worst.join(", ")
            );
        }
    }
}
