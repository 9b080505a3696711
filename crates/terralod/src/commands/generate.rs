//! `terralod generate`: write a procedural terrain to a 16-bit PNG or a raw f32 file.

use crate::progress;
use crate::terrain_args::parse_positive;
use anyhow::{Context, bail};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use terralod_core::generate::{GenerateOptions, MAX_SIZE, generate_with_progress};
use terralod_core::heightfield::MIN_SIDE;
use terralod_core::io::{self, Quantization};

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Samples per side (the terrain is size x size), 2 to 16385.
    #[arg(
        long,
        default_value_t = GenerateOptions::default().size,
        value_parser = clap::value_parser!(u32).range(i64::from(MIN_SIDE)..=i64::from(MAX_SIZE))
    )]
    pub size: u32,
    /// Seed: the same seed gives the same terrain on every platform.
    #[arg(long, default_value_t = GenerateOptions::default().seed)]
    pub seed: u64,
    /// World distance between samples, in metres.
    #[arg(
        long,
        default_value_t = GenerateOptions::default().cell_size,
        allow_negative_numbers = true,
        value_parser = parse_positive
    )]
    pub cell_size: f32,
    /// Output file: .png (16-bit grayscale) or .f32/.r32 (raw little-endian f32 metres).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: &GenerateArgs) -> anyhow::Result<()> {
    let extension = args
        .out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if !matches!(extension.as_str(), "png" | "f32" | "r32") {
        bail!(
            "{}: unsupported output format '{extension}' (use .png, .f32 or .r32)",
            args.out.display()
        );
    }
    io::check_destination(&args.out)?;
    let options = GenerateOptions::default()
        .with_size(args.size)
        .with_seed(args.seed)
        .with_cell_size(args.cell_size);
    let bar = progress::percent_bar(format!("generating {0} x {0}", args.size));
    let start = std::time::Instant::now();
    let field = generate_with_progress(&options, &|fraction| {
        bar.set_position((fraction.clamp(0.0, 1.0) * 1000.0) as u64);
    })
    .with_context(|| format!("generating a {0} x {0} terrain", args.size))?;
    bar.finish_and_clear();
    let generate_ms = start.elapsed().as_secs_f64() * 1e3;
    let (lo, hi) = field.world_range();
    let mapping_flags = if extension == "png" {
        let q = io::write_png16(
            &args.out,
            &field,
            Quantization::decimal(f64::from(lo), f64::from(hi)),
        )?;
        format!(
            "--cell-size {} --height-scale {} --height-offset {}",
            args.cell_size, q.scale, q.offset
        )
    } else {
        io::write_f32(&args.out, &field)?;
        format!(
            "--raw-size {0}x{0} --cell-size {1}",
            args.size, args.cell_size
        )
    };
    // `writeln!`, not `println!`, which panics when stdout is a closed pipe or full.
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "wrote {}: {1} x {1} samples, heights {lo:.1} .. {hi:.1} m, generated in {generate_ms:.0} ms",
        args.out.display(),
        args.size,
    )
    .and_then(|()| {
        writeln!(
            out,
            "read it back with: terralod info {} {mapping_flags}",
            args.out.display()
        )
    })
    .and_then(|()| out.flush())
    .context("cannot write to standard output")
}
