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
    let start = Instant::now();
    let summary = import_source(
        source.as_ref(),
        std::path::Path::new(out),
        &ImportOptions::default(),
        &|_, _| {},
    )?;
    let seconds = start.elapsed().as_secs_f64();
    let samples = u64::from(source.width()) * u64::from(source.height());
    println!(
        "{kind} {size}x{size}: generated in {generated:.1} s; imported {} tiles, {:.1} MB in \
         {seconds:.2} s: {:.1} M samples/s",
        summary.tiles,
        summary.bytes as f64 / 1e6,
        samples as f64 / seconds / 1e6
    );
    Ok(())
}
