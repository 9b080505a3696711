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
    if let Some(dir) = args.terrain.file.as_deref().filter(|path| path.is_dir()) {
        return run_tiled(dir, &args.terrain, args.json);
    }
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
    print_report(args.json, &report, write_text)
}

/// Prints `report` as one JSON line or as text. Written with `writeln!`, not `println!`,
/// which panics when stdout is a closed pipe or a full disk.
fn print_report<R: Serialize>(
    json: bool,
    report: &R,
    text: impl FnOnce(&mut std::io::StdoutLock<'static>, &R) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, report)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        text(&mut out, report)
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

/// What `info DIR` reports about an imported (tiled) terrain: its header, no tile read.
#[derive(Debug, Serialize)]
struct TiledReport {
    source: String,
    format: String,
    stored_sample_type: &'static str,
    width: u32,
    height: u32,
    samples: u64,
    tile_cells: u32,
    block_cells: u32,
    levels: Vec<(u32, u32, u32, u32)>,
    tiles: u64,
    tile_file_bytes: u64,
    cell_size: f32,
    height_scale: f32,
    height_offset: f32,
    world_min: f32,
    world_max: f32,
}

/// Describes an imported directory under the mapping flags given, as the other commands
/// draw it (the tiles store raw samples; the header's range is mapped with them).
fn run_tiled(dir: &std::path::Path, flags: &TerrainArgs, json: bool) -> anyhow::Result<()> {
    flags.refuse_unused_by(None, dir)?;
    let terrain = terralod_core::tiles::TiledTerrain::open(dir)?;
    let mapping = flags.mapping_over(terrain.header().mapping);
    let terrain = terrain.with_mapping(mapping).with_context(|| {
        format!(
            "{}: --cell-size/--height-scale/--height-offset",
            dir.display()
        )
    })?;
    let header = terrain.header();
    let report = TiledReport {
        source: dir.display().to_string(),
        format: format!("terralod tiles v{}", terralod_core::tiles::FORMAT_VERSION),
        stored_sample_type: header.sample_type.name(),
        width: header.width,
        height: header.height,
        samples: u64::from(header.width) * u64::from(header.height),
        tile_cells: header.tile_cells,
        block_cells: header.block_cells,
        levels: header
            .levels
            .iter()
            .map(|g| (g.width, g.height, g.tiles_x, g.tiles_y))
            .collect(),
        tiles: header.total_tiles(),
        tile_file_bytes: header.tile_file_len(),
        cell_size: header.mapping.cell_size,
        height_scale: header.mapping.height_scale,
        height_offset: header.mapping.height_offset,
        world_min: header.min_height,
        world_max: header.max_height,
    };
    print_report(json, &report, write_tiled_text)
}

fn write_tiled_text(out: &mut impl Write, r: &TiledReport) -> std::io::Result<()> {
    writeln!(out, "{}", r.source)?;
    writeln!(
        out,
        "  format        {} ({} samples)",
        r.format, r.stored_sample_type
    )?;
    writeln!(
        out,
        "  size          {} x {} = {} samples",
        r.width, r.height, r.samples
    )?;
    writeln!(
        out,
        "  tiles         {} of {} x {} samples ({} bytes each file)",
        r.tiles,
        r.tile_cells + 1,
        r.tile_cells + 1,
        r.tile_file_bytes
    )?;
    writeln!(
        out,
        "  blocks        {} x {} cells (block index blocks.tlod)",
        r.block_cells, r.block_cells
    )?;
    for (level, (width, height, tiles_x, tiles_y)) in r.levels.iter().enumerate() {
        writeln!(
            out,
            "  level {level:<7} {width} x {height} samples, {tiles_x} x {tiles_y} tiles"
        )?;
    }
    writeln!(out, "  cell size     {} (level 0)", r.cell_size)?;
    writeln!(
        out,
        "  world heights {} .. {} (y = raw * {} + {})",
        r.world_min, r.world_max, r.height_scale, r.height_offset
    )
}
