//! `terralod info`: what a terrain file holds, for a person or (`--json`) a script.

use crate::terrain_args::TerrainArgs;
use anyhow::Context;
use clap::Args;
use serde::Serialize;
use std::io::Write;

#[derive(Debug, Args)]
pub struct InfoArgs {
    #[command(flatten)]
    pub terrain: TerrainArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Everything `info` reports; the JSON field names are part of the CLI's interface.
#[derive(Debug, Serialize)]
struct Report {
    source: String,
    format: String,
    file_sample_type: String,
    stored_sample_type: &'static str,
    width: u32,
    height: u32,
    samples: u64,
    cell_size: f32,
    cell_size_from: &'static str,
    file_spacing_m: Option<(f64, f64)>,
    spacing_note: Option<String>,
    world_size: (f32, f32),
    raw_min: f32,
    raw_max: f32,
    height_scale: f32,
    height_offset: f32,
    world_min: f32,
    world_max: f32,
    nodata_value: Option<f64>,
    nodata_filled: u64,
    memory_bytes: usize,
    bytes_per_sample: usize,
    padded_side: u32,
}

pub fn run(args: &InfoArgs) -> anyhow::Result<()> {
    let terrain = args.terrain.load()?;
    let field = &terrain.heightfield;
    let mapping = field.mapping();
    let (raw_min, raw_max) = field.raw_range();
    let (world_min, world_max) = field.world_range();
    let source = terrain.source.as_ref();
    let report = Report {
        source: terrain.name.clone(),
        format: source.map_or("procedural".into(), |s| s.format.to_string()),
        file_sample_type: source.map_or("f32", |s| s.sample_type).to_string(),
        stored_sample_type: field.samples().type_name(),
        width: field.width(),
        height: field.height(),
        samples: field.len() as u64,
        cell_size: mapping.cell_size,
        cell_size_from: match (args.terrain.cell_size, source.and_then(|s| s.spacing_m)) {
            (Some(_), _) => "--cell-size",
            (None, Some(_)) => "file",
            (None, None) if source.is_none() => "generator",
            (None, None) => "default",
        },
        file_spacing_m: source.and_then(|s| s.spacing_m),
        spacing_note: source.and_then(|s| s.spacing_note.clone()),
        world_size: field.world_size(),
        raw_min,
        raw_max,
        height_scale: mapping.height_scale,
        height_offset: mapping.height_offset,
        world_min,
        world_max,
        nodata_value: source.and_then(|s| s.nodata_value),
        nodata_filled: field.nodata_filled(),
        memory_bytes: field.memory_bytes(),
        bytes_per_sample: field.samples().bytes_per_sample(),
        padded_side: field.padded_side(),
    };
    // Written with `writeln!`, not `println!`, which panics when stdout is a closed pipe
    // or a full disk.
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &report)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        write_text(&mut out, &report)
    }
    .and_then(|()| out.flush())
    .context("cannot write to standard output")
}

fn write_text(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    writeln!(out, "{}", r.source)?;
    writeln!(
        out,
        "  format        {} ({} samples, stored as {})",
        r.format, r.file_sample_type, r.stored_sample_type
    )?;
    writeln!(
        out,
        "  size          {} x {} = {} samples",
        r.width, r.height, r.samples
    )?;
    writeln!(
        out,
        "  cell size     {} (from {})",
        r.cell_size, r.cell_size_from
    )?;
    if let Some((ew, ns)) = r.file_spacing_m {
        writeln!(out, "  file spacing  {ew:.3} m E-W x {ns:.3} m N-S")?;
    }
    if let Some(note) = &r.spacing_note {
        writeln!(out, "                {note}")?;
    }
    writeln!(
        out,
        "  world extent  {} x {}",
        r.world_size.0, r.world_size.1
    )?;
    writeln!(out, "  raw range     {} .. {}", r.raw_min, r.raw_max)?;
    writeln!(
        out,
        "  world heights {} .. {} (y = raw * {} + {})",
        r.world_min, r.world_max, r.height_scale, r.height_offset
    )?;
    match r.nodata_value {
        Some(v) => writeln!(
            out,
            "  nodata        value {v}, {} samples filled",
            r.nodata_filled
        )?,
        None => writeln!(out, "  nodata        {} samples filled", r.nodata_filled)?,
    }
    writeln!(
        out,
        "  memory        {} bytes ({} per sample)",
        r.memory_bytes, r.bytes_per_sample
    )?;
    writeln!(
        out,
        "  padded grid   {0} x {0} (power of two plus one, border repeated)",
        r.padded_side
    )
}
