//! Algorithm Q on the three cameras of `benches/lod.rs` (Grand Canyon, τ = 1 px, 1920 × 1080):
//! the build time of the pyramid and of the algorithm, then per camera the fastest and the
//! median `select` over `frames` runs, the triangles, nodes and a hash of the sorted
//! triangle list (an A/B of two builds must print the same hashes); a
//! plain binary for quick comparisons and profilers (`valgrind --tool=callgrind`). Run:
//! `cargo run --release -p terralod-benches --example quadtree_frames [frames] [camera]`.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Instant;
use terralod_benches::{gcanyon_cameras, load_gcanyon};
use terralod_core::lod::{LodAlgorithm, LodOptions, QuadtreeLod, Selection, View};
use terralod_core::pyramid::Pyramid;

fn main() {
    let frames: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let only = std::env::args().nth(2);
    let Some(field) = load_gcanyon() else {
        return;
    };
    let started = Instant::now();
    let pyramid = Pyramid::build(&field);
    let pyramid_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut lod = QuadtreeLod::new(&field, &pyramid, LodOptions::default());
    println!(
        "pyramid {pyramid_ms:.0} ms, quadtree records {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3 - pyramid_ms
    );
    for (name, camera) in gcanyon_cameras() {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let view = View::screen(camera, 1.0).expect("valid view");
        let mut times = Vec::with_capacity(frames);
        for _ in 0..frames.max(1) {
            let started = Instant::now();
            std::hint::black_box(lod.select(&view).triangle_count());
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        let (visited, drawn) = (lod.stats().nodes_visited, lod.stats().nodes_drawn);
        let Selection::Triangles { indices, .. } = lod.select(&view) else {
            unreachable!("quadtree selects triangles");
        };
        let mut triangles: Vec<[u32; 3]> = indices
            .chunks_exact(3)
            .map(|t| {
                // Rotate so the smallest index leads: the same triangle hashes the same
                // whichever vertex a fan starts it from.
                let r = (0..3).min_by_key(|&k| t[k]).unwrap_or(0);
                [t[r], t[(r + 1) % 3], t[(r + 2) % 3]]
            })
            .collect();
        triangles.sort_unstable();
        let mut hasher = DefaultHasher::new();
        triangles.hash(&mut hasher);
        println!(
            "{name}: fastest {:.3} ms, median {:.3} ms over {} frames, {} triangles, \
             {visited} nodes visited, {drawn} drawn, hash {:016x}",
            times[0],
            times[times.len() / 2],
            times.len(),
            triangles.len(),
            hasher.finish()
        );
    }
}
