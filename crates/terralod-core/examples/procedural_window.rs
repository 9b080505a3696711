//! Time a procedural tile window (issue 9): `cargo run --release -p terralod-core --example
//! procedural_window -- [SIZE] [WINDOWS]` reads WINDOWS (128) windows of 257² samples from
//! the SIZE² (16385) procedural terrain, as an import reads its level-0 tiles, on one
//! thread, and prints nanoseconds a sample and the sum of the samples (a check that two
//! builds compute the same terrain).

use std::time::Instant;
use terralod_core::generate::{GenerateOptions, ProceduralTerrain};
use terralod_core::heightfield::Samples;
use terralod_core::tiles::ImportSource;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let size: u32 = args.next().map_or(Ok(16_385), |s| s.parse())?;
    let windows: u32 = args.next().map_or(Ok(128), |s| s.parse())?;
    let terrain = ProceduralTerrain::new(&GenerateOptions::default().with_size(size).with_seed(7))?;
    let tiles = ((size - 1) / 256).max(1);
    let start = Instant::now();
    let mut checksum = 0u64; // the sum of every sample read
    for k in 0..windows {
        // Tiles spread over the map, the same ones for every build.
        let (tx, ty) = (k * 7 % tiles, k * 13 % tiles);
        let cols: Vec<u32> = (0..257).map(|i| (tx * 256 + i).min(size - 1)).collect();
        let rows: Vec<u32> = (0..257).map(|i| (ty * 256 + i).min(size - 1)).collect();
        let Samples::U16(values) = terrain.read_window(&cols, &rows)? else {
            return Err("16-bit samples expected".into());
        };
        // A plain sum (a serial hash would cost a nanosecond a sample itself).
        checksum += values.iter().map(|&v| u64::from(v)).sum::<u64>();
    }
    let seconds = start.elapsed().as_secs_f64();
    let samples = f64::from(windows) * 257.0 * 257.0;
    println!(
        "{size}²: {windows} windows of 257² in {seconds:.3} s, {:.2} ns a sample, sum of the samples {checksum}",
        seconds * 1e9 / samples
    );
    Ok(())
}
