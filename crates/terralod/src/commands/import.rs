//! `terralod import`: converts a heightfield (a file, or the built-in generator at a given
//! size) into the tiled multi-resolution pyramid of `docs/TILES.md`.

use crate::lod_args::parse_power_of_two;
use crate::progress;
use crate::terrain_args::TerrainArgs;
use anyhow::{Context, bail};
use clap::Args;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use terralod_core::generate::{
    GenerateOptions, MAX_PROCEDURAL_SIZE, ProceduralTerrain, generate_with_progress,
};
use terralod_core::heightfield::{MIN_SIDE, WorldMapping};
use terralod_core::io::Format;
use terralod_core::tiles::{self, ImportOptions, ImportSource};

/// Largest `--generate-size` made by the full generator (with erosion, in memory: about
/// 20 bytes per sample); larger sizes use the position-only fractal, generated tile by tile.
pub const ERODED_MAX_SIZE: u32 = 8193;

#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub terrain: TerrainArgs,
    /// Output directory (created; must be empty unless --force).
    #[arg(long)]
    pub out: PathBuf,
    /// Cells per tile side, a power of two from 2 to 4096 (a tile holds N + 1 samples per
    /// side; neighbouring tiles share their edge samples).
    #[arg(
        long,
        default_value_t = ImportOptions::default().tile_cells,
        value_parser = |t: &str| parse_power_of_two(t, tiles::MAX_TILE_CELLS)
    )]
    pub tile_size: u32,
    /// Cells per block side of the block index (what a streaming selection draws), a power
    /// of two from 2 to the tile size [default: 64, or the tile size if smaller].
    #[arg(long, value_parser = |t: &str| parse_power_of_two(t, tiles::MAX_TILE_CELLS))]
    pub block_size: Option<u32>,
    /// Import into a non-empty directory (its old header is removed first).
    #[arg(long)]
    pub force: bool,
    /// Without a file: generate the built-in terrain at this many samples per side. Above
    /// 8193 the terrain is the generator's noise without erosion, computed tile by tile
    /// (never held whole), stored as u16.
    #[arg(
        long,
        value_parser = clap::value_parser!(u32)
            .range(i64::from(MIN_SIDE)..=i64::from(MAX_PROCEDURAL_SIZE))
    )]
    pub generate_size: Option<u32>,
    /// Without a file: the generator's seed.
    #[arg(long)]
    pub seed: Option<u64>,
}

/// The last line of the output, for scripts; field names are part of the CLI's interface.
#[derive(Debug, Serialize)]
struct Summary<'a> {
    out: &'a str,
    width: u32,
    height: u32,
    sample_type: &'static str,
    tile_cells: u32,
    levels: usize,
    tiles: u64,
    bytes: u64,
    samples: u64,
    seconds: f64,
    samples_per_second: f64,
}

/// Refuses an output directory that is the source or holds it: `--force` would clear what
/// the import is still to read (a directory imported into itself, a file inside it).
fn refuse_source_in_output(args: &ImportArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.terrain.file
        && let (Ok(source), Ok(out)) = (
            std::fs::canonicalize(path),
            std::fs::canonicalize(&args.out),
        )
        && source.starts_with(&out)
    {
        bail!(
            "{}: the output holds {}, which this import reads; write elsewhere",
            args.out.display(),
            path.display()
        );
    }
    Ok(())
}

pub fn run(args: &ImportArgs) -> anyhow::Result<()> {
    // The time covers reading the source too (loading it, or spooling a large PNG).
    let start = Instant::now();
    let defaults = ImportOptions::with_tile_cells(args.tile_size);
    let options = ImportOptions {
        block_cells: args.block_size.unwrap_or(defaults.block_cells),
        force: args.force,
        ..defaults
    };
    // Before the source is read: loading or spooling it may take minutes.
    refuse_source_in_output(args)?;
    tiles::check_import_target(&args.out, &options)?;
    let (source, name): (Box<dyn ImportSource>, String) = match &args.terrain.file {
        Some(path) => {
            if args.generate_size.is_some() || args.seed.is_some() {
                bail!(
                    "{}: --generate-size and --seed apply to the built-in terrain only; give no file",
                    path.display()
                );
            }
            match raw_format(args, path) {
                Some(sample_type) => {
                    let format = match sample_type {
                        tiles::SampleType::U16 => Format::Raw16,
                        _ => Format::RawF32,
                    };
                    args.terrain.refuse_unused_by(Some(format), path)?;
                    raw_source(args, path, sample_type)?
                }
                None => match windowed_source(args, path)? {
                    Some(source) => source,
                    None => {
                        let terrain = args.terrain.load_exact()?;
                        (Box::new(terrain.heightfield), terrain.name)
                    }
                },
            }
        }
        None if args
            .generate_size
            .is_some_and(|size| size > ERODED_MAX_SIZE) =>
        {
            procedural(args)?
        }
        None => {
            let (field, name) = generate(args)?;
            (Box::new(field), name)
        }
    };
    let import = |source: &dyn ImportSource| {
        let bar = progress::bar(0, format!("importing into {}", args.out.display()));
        let summary = tiles::import_source(source, &args.out, &options, &|done, total| {
            bar.set_length(total);
            bar.set_position(done);
        });
        bar.finish_and_clear();
        summary
    };
    let mut summary = import(source.as_ref());
    let samples = u64::from(source.width()) * u64::from(source.height());
    // Done with the source (a PNG's spool is removed, and its interruption guard ends).
    drop(source);
    // A raw file read by windows refuses holes (non-finite samples); one that fits in
    // memory is loaded whole instead, which fills them as every other command does (the
    // failed import took back what it wrote).
    if matches!(summary, Err(tiles::TileError::Hole { .. })) && samples <= args.terrain.max_samples
    {
        let terrain = args.terrain.load_exact()?;
        summary = import(&terrain.heightfield);
    }
    let summary = summary.with_context(|| format!("importing {name}"))?;
    let seconds = start.elapsed().as_secs_f64();
    let header = &summary.header;
    let out_name = args.out.display().to_string();
    let report = Summary {
        out: &out_name,
        width: header.width,
        height: header.height,
        sample_type: header.sample_type.name(),
        tile_cells: header.tile_cells,
        levels: header.levels.len(),
        tiles: summary.tiles,
        bytes: summary.bytes,
        samples,
        seconds,
        samples_per_second: samples as f64 / seconds.max(1e-9),
    };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "imported {name} into {out_name}: {} levels, {} tiles of {2}x{2} samples, {3:.1} MB in {seconds:.2} s",
        report.levels,
        report.tiles,
        header.tile_side(),
        report.bytes as f64 / 1e6,
    )
    .and_then(|()| {
        serde_json::to_writer(&mut out, &report).map_err(std::io::Error::from)?;
        writeln!(out)
    })
    .and_then(|()| out.flush())
    .context("cannot write to standard output")
}

/// The sample type of a raw file (by `--format` or extension), which is imported by
/// windows; `None` for the other formats (HGT and ASCII are loaded whole, capped by
/// `--max-samples`; GeoTIFF and PNG are loaded whole up to it and read by windows past it).
fn raw_format(args: &ImportArgs, path: &Path) -> Option<tiles::SampleType> {
    let format = args.terrain.format.or_else(|| {
        path.extension()
            .and_then(|e| e.to_str())
            .and_then(Format::from_extension)
    })?;
    match format {
        Format::Raw16 => Some(tiles::SampleType::U16),
        Format::RawF32 => Some(tiles::SampleType::F32),
        _ => None,
    }
}

/// A GeoTIFF or PNG of more than `--max-samples` samples, read by windows (never loaded
/// whole); `None` for other files and for those loaded whole (whose nodata holes are
/// filled).
fn windowed_source(
    args: &ImportArgs,
    path: &Path,
) -> anyhow::Result<Option<(Box<dyn ImportSource>, String)>> {
    let format = match args.terrain.format {
        Some(format) => Some(format),
        None => {
            let mut head = [0u8; 16];
            let read = std::fs::File::open(path)
                .and_then(|mut file| std::io::Read::read(&mut file, &mut head))
                .unwrap_or(0);
            Format::detect(&head[..read], Some(path))
        }
    };
    if path.is_dir() {
        return Ok(None);
    }
    // The header's size decides, before any sample is decoded.
    let (width, height) = match format {
        Some(Format::GeoTiff) => {
            let (w, h) = tiles::TiffFileSource::claimed_size(path)?;
            (u64::from(w), u64::from(h))
        }
        Some(Format::Png) => tiles::PngFileSource::claimed_size(path)?,
        _ => return Ok(None),
    };
    if width.saturating_mul(height) <= args.terrain.max_samples {
        return Ok(None);
    }
    args.terrain.refuse_unused_by(format, path)?;
    let name = path.display().to_string();
    let mapping_error = || format!("{name}: --cell-size/--height-scale/--height-offset");
    let source: Box<dyn ImportSource> = if format == Some(Format::Png) {
        // PNG rows decode in order only: decoded once into a spool file beside the output.
        let bar = progress::bar(height, format!("decoding {name}"));
        let source = tiles::PngFileSource::spool(
            path,
            &args.terrain.load_options(),
            &spool_dir(&args.out),
            &|done, _| bar.set_position(done),
        );
        bar.finish_and_clear();
        let source = source?;
        let mapping = args.terrain.mapping_over(source.mapping());
        Box::new(source.with_mapping(mapping).with_context(mapping_error)?)
    } else {
        let source = tiles::TiffFileSource::open(path)?.with_tile_cells(args.tile_size);
        let mapping = args.terrain.mapping_over(source.mapping());
        Box::new(source.with_mapping(mapping).with_context(mapping_error)?)
    };
    Ok(Some((source, name)))
}

/// Where a PNG's spool goes: the nearest existing folder above the output, resolved (so
/// `--out .` or `--out x/..` put it beside the output, not in it); the system's temporary
/// folder may be memory.
fn spool_dir(out: &Path) -> PathBuf {
    let absolute = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
    let nearest = absolute
        .ancestors()
        .find_map(|dir| Some((dir, dir.canonicalize().ok()?)));
    match nearest {
        // The output exists: beside it.
        Some((dir, real)) if dir == absolute => real
            .parent()
            .map_or_else(|| real.clone(), Path::to_path_buf),
        Some((_, real)) => real,
        None => PathBuf::from("."),
    }
}

/// A raw file read by windows (never loaded whole): its size from `--raw-size` or, for a
/// square, its length; the mapping flags applied to raw's defaults (1, 1, 0).
fn raw_source(
    args: &ImportArgs,
    path: &Path,
    sample_type: tiles::SampleType,
) -> anyhow::Result<(Box<dyn ImportSource>, String)> {
    let name = path.display().to_string();
    let size = match args.terrain.raw_size {
        Some(size) => size,
        None => {
            let length = std::fs::metadata(path)
                .with_context(|| format!("reading {name}"))?
                .len();
            let count = length / sample_type.bytes() as u64;
            let side = (count as f64).sqrt().round() as u64;
            if side * side != count || count * sample_type.bytes() as u64 != length {
                bail!(
                    "{name}: cannot infer the size of a raw file of {length} bytes; pass --raw-size WxH"
                );
            }
            let side = u32::try_from(side).with_context(|| format!("{name}: too large"))?;
            (side, side)
        }
    };
    let mapping = WorldMapping {
        cell_size: args.terrain.cell_size.unwrap_or(1.0),
        height_scale: args.terrain.height_scale.unwrap_or(1.0),
        height_offset: args.terrain.height_offset.unwrap_or(0.0),
    };
    let source = tiles::RawFileSource::open(
        path,
        size,
        sample_type,
        args.terrain.byte_order.unwrap_or_default(),
        mapping,
    )
    .with_context(|| format!("opening {name}"))?;
    Ok((Box::new(source), name))
}

/// The position-only fractal at `--generate-size` (over [`ERODED_MAX_SIZE`]): nothing is
/// generated here, the import computes each tile's samples. `--height-scale` multiplies the
/// generator's own step (metres per u16 unit), `--height-offset` replaces its 0.
fn procedural(args: &ImportArgs) -> anyhow::Result<(Box<dyn ImportSource>, String)> {
    let defaults = GenerateOptions::default();
    let size = args.generate_size.unwrap_or(defaults.size);
    let options = defaults
        .with_size(size)
        .with_seed(args.seed.unwrap_or(0))
        .with_cell_size(
            args.terrain
                .cell_size
                .unwrap_or(GenerateOptions::default().cell_size),
        );
    let name = format!("the procedural terrain ({size} x {size}, no erosion)");
    let terrain = ProceduralTerrain::new(&options).with_context(|| name.clone())?;
    let base = terrain.mapping();
    let mapping = WorldMapping {
        cell_size: base.cell_size,
        height_scale: base.height_scale * args.terrain.height_scale.unwrap_or(1.0),
        height_offset: args.terrain.height_offset.unwrap_or(0.0),
    };
    mapping
        .validate()
        .with_context(|| format!("{name}: --cell-size/--height-scale/--height-offset"))?;
    Ok((Box::new(Mapped { terrain, mapping }), name))
}

/// The procedural terrain under the mapping the flags asked for.
#[derive(Debug)]
struct Mapped {
    terrain: ProceduralTerrain,
    mapping: WorldMapping,
}

impl ImportSource for Mapped {
    fn width(&self) -> u32 {
        self.terrain.width()
    }
    fn height(&self) -> u32 {
        self.terrain.height()
    }
    fn sample_type(&self) -> tiles::SampleType {
        self.terrain.sample_type()
    }
    fn mapping(&self) -> WorldMapping {
        self.mapping
    }
    fn read_window(
        &self,
        cols: &[u32],
        rows: &[u32],
    ) -> Result<terralod_core::heightfield::Samples, tiles::TileError> {
        self.terrain.read_window(cols, rows)
    }
}

/// The built-in terrain at `--generate-size` (default: the built-in size) and `--seed`,
/// with the mapping flags applied as `TerrainArgs::load` does.
fn generate(args: &ImportArgs) -> anyhow::Result<(terralod_core::Heightfield, String)> {
    let defaults = GenerateOptions::default();
    let options = defaults
        .clone()
        .with_size(args.generate_size.unwrap_or(defaults.size))
        .with_seed(args.seed.unwrap_or(defaults.seed))
        .with_cell_size(args.terrain.cell_size.unwrap_or(defaults.cell_size));
    let bar = progress::percent_bar(format!("generating {0} x {0}", options.size));
    let field = generate_with_progress(&options, &|fraction| {
        bar.set_position((fraction.clamp(0.0, 1.0) * 1000.0) as u64);
    });
    bar.finish_and_clear();
    let name = format!("the built-in terrain ({0} x {0})", options.size);
    let field = field.with_context(|| format!("generating {name}"))?;
    let mapping = WorldMapping {
        cell_size: options.cell_size,
        height_scale: args.terrain.height_scale.unwrap_or(1.0),
        height_offset: args.terrain.height_offset.unwrap_or(0.0),
    };
    let field = field
        .with_mapping(mapping)
        .with_context(|| format!("{name}: --cell-size/--height-scale/--height-offset"))?;
    Ok((field, name))
}
