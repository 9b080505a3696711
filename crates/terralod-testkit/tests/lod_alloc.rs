//! No heap allocation per frame after warm-up, for every registered algorithm: a counting
//! global allocator watches the selection of frames the algorithm has seen before, on the
//! calling thread and, for algorithm A's parallel Render(), on rayon's worker threads.
//!
//! The allocator must implement `GlobalAlloc`, which is an unsafe trait: the workspace
//! denies unsafe code, and this file alone allows it for that one forwarding impl.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use terralod_core::lod::{
    AdaptiveLod, AdaptiveOptions, Detail, LodAlgorithm, LodOptions, REGISTRY, View,
};
use terralod_core::{Camera, Pyramid};
use terralod_testkit::fixtures::smooth_random;

thread_local! {
    /// Allocations made by this thread while counting is on (`None`: off).
    static COUNT: Cell<Option<u64>> = const { Cell::new(None) };
}

struct Counting;

// SAFETY: forwards every call unchanged to the system allocator; the counter is a
// thread-local `Cell` without destructor, so touching it never allocates or re-enters.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Whether allocations on rayon's worker threads are counted, and how many there were.
static WORKERS_COUNTED: AtomicBool = AtomicBool::new(false);
static WORKER_COUNT: AtomicU64 = AtomicU64::new(0);

/// Held by each test, so that only one test's work runs on rayon's workers while they are
/// counted.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn note() {
    let _ = COUNT.try_with(|c| {
        if let Some(n) = c.get() {
            c.set(Some(n + 1));
        }
    });
    // `current_thread_index` reads a thread-local pointer: no allocation, no re-entry.
    if WORKERS_COUNTED.load(Relaxed) && rayon::current_thread_index().is_some() {
        WORKER_COUNT.fetch_add(1, Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    COUNT.with(|c| c.set(Some(0)));
    f();
    COUNT.with(|c| c.replace(None)).unwrap_or(0)
}

/// Allocations `f` makes on this thread and on rayon's worker threads.
fn allocations_on_all_threads(f: impl FnOnce()) -> (u64, u64) {
    WORKER_COUNT.store(0, Relaxed);
    WORKERS_COUNTED.store(true, Relaxed);
    let own = allocations(f);
    WORKERS_COUNTED.store(false, Relaxed);
    (own, WORKER_COUNT.load(Relaxed))
}

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `f` on the one worker of a fresh rayon pool.
///
/// One thread, so that a frame's work runs in one order every time. A parallel loop
/// started from outside a pool hands its job to rayon's shared queue, which takes a block
/// of job slots every 63 jobs: an allocation that comes from rayon, not from the
/// algorithm, in whichever frame fills the block (the last test measures that amortised
/// case). And with more threads, which of the bintree's view-independent parts queues a
/// split leaf's children depends on timing, so a part's stack can outgrow its largest
/// depth so far (capacity kept: amortised too). On the pool's one worker, the
/// loops' jobs go to its own deque, which keeps its buffer, and every allocation counted is
/// one a fixed order of work makes.
fn on_one_pool_thread(f: impl FnOnce() + Send) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a thread pool");
    pool.install(f);
}

/// Allocations `f` makes on this thread and on every rayon worker (this one included when
/// it is a worker, so it may count twice: only zero means anything).
fn allocations_anywhere(f: impl FnOnce()) -> u64 {
    let (own, workers) = allocations_on_all_threads(f);
    own + workers
}

/// Every registered algorithm, and A with a local detail, listing its vertices and paging:
/// not one allocation in a frame it has seen before, on any thread (in a one-thread pool:
/// see [`on_one_pool_thread`]).
#[test]
fn a_warmed_up_frame_allocates_nothing() {
    let _turn = one_at_a_time();
    on_one_pool_thread(warmed_up_frames_allocate_nothing);
}

fn warmed_up_frames_allocate_nothing() {
    let field = smooth_random(129, 97, 11, 200.0).expect("valid field");
    let pyramid = Pyramid::build(&field);
    let (w, d) = field.world_size();
    // A camera path: orbit around the terrain at two heights, plus a view-independent frame.
    let mut views = Vec::new();
    for step in 0..24 {
        let angle = step as f32 * std::f32::consts::TAU / 24.0;
        let height = if step % 2 == 0 { 60.0 } else { 400.0 };
        let centre = glam::Vec3::new(0.5 * w, 100.0, 0.5 * d);
        let eye = centre + glam::Vec3::new(0.6 * w * angle.cos(), height, 0.6 * d * angle.sin());
        let camera = Camera::new(eye, centre, 1.0, (1280, 720), 0.5, 1e5).expect("valid");
        views.push(View::screen(camera, 1.0).expect("valid"));
    }
    views.push(View::world_error(2.0).expect("valid"));
    // Not trivially empty: the test would prove nothing on empty selections.
    for entry in REGISTRY {
        let mut algorithm = entry
            .build(&field, &pyramid, &LodOptions::default())
            .expect("the registry builds it");
        let mut triangles = 0;
        for view in &views {
            triangles += algorithm.select(view).triangle_count();
        }
        assert!(triangles > 1000, "{}: {triangles}", entry.name);
        let count = allocations_anywhere(|| {
            for _ in 0..3 {
                for view in &views {
                    std::hint::black_box(algorithm.select(view).triangle_count());
                }
            }
        });
        assert_eq!(
            count, 0,
            "{}: {count} allocations in warmed-up frames",
            entry.name
        );
    }
    // Algorithm A with a local detail (A5): a finer, bumpy patch of 65 × 49 samples.
    let bumps = (0..65 * 49).map(|i| ((i * 7919) % 23) as f32).collect();
    let road = terralod_core::Heightfield::from_f32(65, 49, bumps).expect("valid detail");
    let cell = field.mapping().cell_size / 4.0;
    let detail =
        Detail::new(&field, &road, (40.0 * cell, 60.0 * cell), cell).expect("on the terrain");
    let options = LodOptions::default();
    let mut lod = AdaptiveLod::with_detail(&field, &pyramid, options, options.adaptive, &detail)
        .expect("placed on this terrain");
    for view in &views {
        lod.select(view);
    }
    let count = allocations_anywhere(|| {
        for _ in 0..3 {
            for view in &views {
                std::hint::black_box(lod.select(view).triangle_count());
            }
        }
    });
    assert_eq!(count, 0, "adaptive with detail: {count} allocations");
    // Algorithm A listing its vertices (A8 step 4).
    let listing = AdaptiveOptions::default().with_list_vertices(true);
    let mut listed = AdaptiveLod::with_options(&field, &pyramid, options, listing);
    for _ in 0..3 {
        for view in &views {
            listed.select(view);
        }
    }
    let count = allocations_anywhere(|| {
        for _ in 0..3 {
            for view in &views {
                std::hint::black_box(listed.select(view).triangle_count());
            }
        }
    });
    assert_eq!(
        count, 0,
        "adaptive listing its vertices: {count} allocations"
    );
    // Algorithm A with its pages (8-cell squares' subtrees) in 20 frames, fewer than the
    // views ask for: pages copied in from memory, dropped, released and coarsened.
    let adaptive = AdaptiveOptions::default()
        .with_page_cells(8)
        .with_page_frames(20);
    let mut paged = AdaptiveLod::with_options(&field, &pyramid, options, adaptive);
    // Five passes: the pages in the frames differ from pass to pass (the path is not
    // periodic for them), and the update's and Render()'s lists reach their largest
    // sizes within these (each of 2 to 12 allocations in a few frames of the first three).
    for _ in 0..5 {
        for view in &views {
            paged.select(view);
        }
    }
    let (mut released, dropped) = (0, paged.paging().expect("paged").dropped);
    let count = allocations_anywhere(|| {
        for _ in 0..3 {
            for view in &views {
                std::hint::black_box(paged.select(view).triangle_count());
                released = released.max(paged.paging().map_or(0, |p| p.released));
            }
        }
    });
    let stats = paged.paging().expect("paged");
    assert!(
        stats.dropped > dropped && released > 0,
        "{released} released, {dropped} dropped before: {stats:?}"
    );
    assert_eq!(
        count, 0,
        "adaptive with pages in frames: {count} allocations"
    );
    // The counter works: a fresh algorithm allocates in its first frames.
    let fresh = allocations(|| {
        let mut algorithm = REGISTRY[0]
            .build(&field, &pyramid, &LodOptions::default())
            .expect("the registry builds it");
        std::hint::black_box(algorithm.select(&views[0]).triangle_count());
    });
    assert!(fresh > 0);
}

/// Algorithm P allocates its pool, tree and buffers once, in `new`: not one allocation
/// afterwards, from the first frame on, along a long random walk (low and high, inside the
/// terrain, far away, turning) with the default pool and with one so small it runs out.
#[test]
fn the_patch_pool_never_allocates_after_start_up() {
    let _turn = one_at_a_time();
    use terralod_core::lod::{LodAlgorithm, PatchOptions, PatchesLod};
    let field = smooth_random(129, 97, 5, 20.0).expect("valid field");
    let pyramid = Pyramid::build(&field);
    let (w, d) = field.world_size();
    // xorshift: deterministic, and free of allocation itself.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut views = Vec::new();
    let mut eye = glam::Vec3::new(0.5 * w, 80.0, 0.5 * d);
    for _ in 0..400 {
        let step = glam::Vec3::new(random() - 0.5, random() - 0.5, random() - 0.5) * 30.0;
        eye = (eye + step).clamp(
            glam::Vec3::new(-0.2 * w, -10.0, -0.2 * d),
            glam::Vec3::new(1.2 * w, 120.0, 1.2 * d),
        );
        let angle = random() * std::f32::consts::TAU;
        let target = eye + glam::Vec3::new(angle.cos(), random() - 0.7, angle.sin());
        let camera = Camera::new(eye, target, 1.0, (1280, 720), 0.3, 1e5).expect("valid");
        views.push(
            View::screen(camera, 1.0)
                .expect("valid")
                .with_cull(random() < 0.8),
        );
    }
    views.push(View::world_error(0.5).expect("valid"));
    for capacity in [PatchOptions::default().pool_capacity, 12] {
        let options = PatchOptions::default()
            .with_patch_size(8)
            .with_pool_capacity(capacity);
        let mut lod = PatchesLod::new(&field, &pyramid, options);
        let mut splits = 0;
        let count = allocations(|| {
            for view in &views {
                std::hint::black_box(lod.select(view).triangle_count());
                splits += lod.patch_stats().splits;
            }
        });
        let least = if capacity == 12 { 1 } else { 100 };
        assert!(splits >= least, "capacity {capacity}: {splits} splits");
        assert_eq!(count, 0, "capacity {capacity}: {count} allocations");
        assert_eq!(lod.patch_stats().exhausted, capacity == 12);
    }
}

/// Algorithm A walks its subtrees in parallel once enough squares are enabled (16,384):
/// warmed-up frames then allocate nothing on the calling thread or on rayon's workers,
/// but for rayon's own job queue, which takes a block of job slots now and then (counted
/// here on both sides, and amortised: fewer than one allocation in eight frames).
#[test]
fn a_warmed_up_parallel_frame_of_adaptive_allocates_next_to_nothing() {
    let _turn = one_at_a_time();
    let field = smooth_random(513, 513, 3, 300.0).expect("valid field");
    let pyramid = Pyramid::build(&field);
    let (w, d) = field.world_size();
    let mut views = Vec::new();
    for step in 0..16 {
        let angle = step as f32 * std::f32::consts::TAU / 16.0;
        let centre = glam::Vec3::new(0.5 * w, 100.0, 0.5 * d);
        let eye = centre + glam::Vec3::new(0.3 * w * angle.cos(), 150.0, 0.3 * d * angle.sin());
        let camera = Camera::new(eye, centre, 1.0, (1920, 1080), 0.5, 1e5).expect("valid");
        views.push(View::screen(camera, 0.5).expect("valid"));
    }
    let mut lod = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
    for view in &views {
        lod.select(view);
        assert!(
            lod.enabled_squares() >= 16_384,
            "{} squares: Render() would not run in parallel",
            lod.enabled_squares()
        );
    }
    let rounds = 4;
    let (own, workers) = allocations_on_all_threads(|| {
        for _ in 0..rounds {
            for view in &views {
                std::hint::black_box(lod.select(view).triangle_count());
            }
        }
    });
    let frames = (rounds * views.len()) as u64;
    assert!(
        8 * (own + workers) < frames,
        "{own} allocations on the calling thread and {workers} on the workers in {frames} frames"
    );
    // The worker count works: a parallel collect allocates there.
    let (_, collected) = allocations_on_all_threads(|| {
        use rayon::prelude::*;
        let parts: Vec<Vec<u64>> = (0..64u64).into_par_iter().map(|i| vec![i; 100]).collect();
        std::hint::black_box(parts);
    });
    assert!(collected > 0);
}
