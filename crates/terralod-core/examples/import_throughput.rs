//! Import throughput (issue 9): `cargo run --release -p terralod-core --example
//! import_throughput -- SIZE OUT_DIR [eroded|procedural]` generates a SIZE² terrain and
//! times `tiles::import` (generation excluded), as `terralod import --generate-size SIZE`
//! does, printing samples per second. The CLI links the renderer, whose release build
//! takes far longer on the shared machine; the import code is the same.

use std::time::Instant;
use terralod_core::generate::{GenerateOptions, ProceduralTerrain, generate};
use terralod_core::tiles::{ImportOptions, ImportSource, import_source};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(size), Some(out)) = (args.get(1), args.get(2)) else {
        return Err("usage: import_throughput SIZE OUT_DIR [eroded|procedural]".into());
    };
    let size: u32 = size.parse()?;
    let kind = args.get(3).map_or("eroded", String::as_str);
    let options = GenerateOptions::default().with_size(size).with_seed(7);
    let start = Instant::now();
    let source: Box<dyn ImportSource> = match kind {
        "procedural" => Box::new(ProceduralTerrain::new(&options)?),
        _ => Box::new(generate(&options)?),
    };
    let generated = start.elapsed().as_secs_f64();
    let cpu_before = cpu_seconds();
    let start = Instant::now();
    let summary = import_source(
        source.as_ref(),
        std::path::Path::new(out),
        &ImportOptions::default(),
        &|_, _| {},
    )?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let samples = u64::from(source.width()) * u64::from(source.height());
    println!(
        "{kind} {size}x{size}: generated in {generated:.1} s; imported {} tiles, {:.1} MB in \
         {seconds:.2} s ({} CPU): {:.1} M samples/s",
        summary.tiles,
        summary.bytes as f64 / 1e6,
        cpu.map_or("unknown".to_owned(), |c| format!("{c:.2} s")),
        samples as f64 / seconds / 1e6
    );
    Ok(())
}

/// User + system CPU time of this process so far (Linux `/proc/self/stat`, 100 ticks/s).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}
