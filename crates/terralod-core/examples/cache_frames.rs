//! Tile cache latency (issue 9): `cargo run --release -p terralod-core --example
//! cache_frames -- DIR BUDGET_MB FRAMES` flies a window of tiles across an imported terrain,
//! one frame every 4 ms: each frame calls `begin_frame`, then asks for the level-0 tiles
//! within 2 tiles of the camera and the level-1 and level-2 tiles within 3 of it. Prints the
//! cache's statistics: the longest `begin_frame` and `tile_heights` calls are the time a
//! frame waited on the cache (never on I/O, which runs on the loader threads).

use std::sync::Arc;
use std::time::{Duration, Instant};
use terralod_core::tiles::{TileCache, TiledTerrain};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(budget_mb), Some(frames)) = (args.get(1), args.get(2), args.get(3)) else {
        return Err("usage: cache_frames DIR BUDGET_MB FRAMES".into());
    };
    let terrain = Arc::new(TiledTerrain::open(std::path::Path::new(dir))?);
    let budget = budget_mb.parse::<u64>()? << 20;
    let frames: u32 = frames.parse()?;
    let mut cache = TileCache::new(terrain.clone(), budget, 2)?;
    let grid0 = terrain.header().levels[0];
    let start = Instant::now();
    let (mut drawn_fine, mut asked) = (0u64, 0u64);
    let mut frame_times: Vec<Duration> = Vec::with_capacity(frames as usize);
    for frame in 0..frames {
        let frame_start = Instant::now();
        cache.begin_frame();
        // A diagonal flight, one level-0 tile every 40 frames.
        let t = f64::from(frame) / 40.0;
        let (cx, cy) = (
            (t % f64::from(grid0.tiles_x)) as i64,
            ((t * 0.6) % f64::from(grid0.tiles_y)) as i64,
        );
        for (level, radius) in [(0u32, 2i64), (1, 3), (2, 3)] {
            let Some(grid) = terrain.header().levels.get(level as usize) else {
                continue;
            };
            let (lx, ly) = (cx >> level, cy >> level);
            for ty in (ly - radius).max(0)..=(ly + radius).min(i64::from(grid.tiles_y) - 1) {
                for tx in (lx - radius).max(0)..=(lx + radius).min(i64::from(grid.tiles_x) - 1) {
                    asked += 1;
                    if cache.tile_heights((level, tx as u32, ty as u32)).is_some() && level == 0 {
                        drawn_fine += 1;
                    }
                }
            }
        }
        frame_times.push(frame_start.elapsed());
        std::thread::sleep(Duration::from_millis(4));
    }
    frame_times.sort_unstable();
    let at = |q: f64| frame_times[((frame_times.len() - 1) as f64 * q) as usize];
    println!(
        "cache time per frame (begin_frame + every tile_heights): median {:?}, p99 {:?}, \
         p99.9 {:?}, max {:?}",
        at(0.5),
        at(0.99),
        at(0.999),
        at(1.0)
    );
    let reports = cache.take_reports();
    let stats = cache.stats();
    println!(
        "{frames} frames in {:.1} s, budget {budget_mb} MiB: {asked} tile asks, {drawn_fine} \
         level-0 hits; {stats:?}; {} failures reported",
        start.elapsed().as_secs_f64(),
        reports.len()
    );
    Ok(())
}
