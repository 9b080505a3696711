//! `terralod`: the command-line tool (info, generate, mesh, render, view, bench, import).
//! One module per subcommand under `commands/`; the interactive viewer under `viewer/`.

mod camera_args;
mod camera_path;
mod commands;
mod detail_args;
mod lod_args;
mod look_args;
mod progress;
mod staged;
mod stream_args;
mod terrain_args;
mod viewer;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;
use terralod_core::io::interrupt;

/// Real-time continuous level of detail for very large heightfield terrains.
#[derive(Debug, Parser)]
#[command(name = "terralod", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Describe a terrain: size, spacing, height range, nodata, memory.
    Info(commands::info::InfoArgs),
    /// Generate a procedural terrain (fBm, ridges, erosion) and write it to a file.
    Generate(commands::generate::GenerateArgs),
    /// Select a mesh with an LOD algorithm for a camera (or a world error) and export it.
    Mesh(commands::mesh::MeshArgs),
    /// Render a terrain headless to a PNG (built-in terrain and a default camera when
    /// given nothing).
    Render(commands::render::RenderArgs),
    /// Fly a camera path and measure every algorithm: time, triangles, memory, measured
    /// error, cracks (`--check`); `--scaling` over growing procedural terrains.
    Bench(commands::bench::BenchArgs),
    /// Fly over a terrain in a window: live LOD algorithm, preset, τ and debug views
    /// (`--frames N --screenshot FILE` draws N frames and exits).
    View(commands::view::ViewArgs),
    /// Convert a terrain (a file, or the built-in generator at a given size) into a tiled
    /// multi-resolution pyramid on disk (docs/TILES.md).
    Import(commands::import::ImportArgs),
}

/// Exit status of an interrupted run (128 + SIGINT, as shells report it).
const INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The viewer keeps the default (the window's own close is its way out).
    if !matches!(cli.command, Command::View(_)) {
        take_back_on_interrupt();
    }
    let result = match cli.command {
        Command::Info(args) => commands::info::run(&args),
        Command::Generate(args) => commands::generate::run(&args),
        Command::Mesh(mut args) => {
            args.lod.default_to_streaming(&args.terrain, &args.stream);
            commands::mesh::run(&args)
        }
        Command::Render(mut args) => {
            args.lod.default_to_streaming(&args.terrain, &args.stream);
            commands::render::run(&args)
        }
        Command::Bench(mut args) => {
            args.default_to_streaming();
            commands::bench::run(&args)
        }
        Command::View(mut args) => {
            args.lod.default_to_streaming(&args.terrain, &args.stream);
            commands::view::run(&args)
        }
        Command::Import(args) => commands::import::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stops early (`terralod info | head -1`) is not an error.
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) if interrupt::requested() => {
            let _ = writeln!(std::io::stderr(), "error: {}", one_line(&error));
            ExitCode::from(INTERRUPTED)
        }
        Err(error) => {
            // `writeln!` because `eprintln!` panics when stderr cannot be written.
            let _ = writeln!(std::io::stderr(), "error: {}", one_line(&error));
            ExitCode::FAILURE
        }
    }
}

/// How soon after the first interruption a second one still counts as the same: a
/// supervisor such as GNU `timeout` signals the process and then its whole group at once,
/// which is one request, not an impatient second one.
const SAME_INTERRUPTION: std::time::Duration = std::time::Duration::from_secs(1);

/// Ctrl-C, `SIGTERM` and `SIGHUP`: with an output being written, the writer is asked to
/// stop and take back what it wrote (its error then ends the run); with none, or at a
/// second signal a second or more after the first, the run ends at once. Either way the
/// exit status is 130.
fn take_back_on_interrupt() {
    let first = std::sync::OnceLock::<std::time::Instant>::new();
    let handler = move || {
        let again = interrupt::requested();
        if !again && interrupt::request() {
            let _ = first.set(std::time::Instant::now());
            let _ = writeln!(
                std::io::stderr(),
                "interrupted: taking back what was being written (interrupt again to stop at once)"
            );
            return;
        }
        if first.get().is_some_and(|t| t.elapsed() < SAME_INTERRUPTION) {
            return;
        }
        let _ = writeln!(std::io::stderr(), "interrupted");
        std::process::exit(i32::from(INTERRUPTED));
    };
    // Without a handler the signal's default still ends the run (leaving temporaries).
    let _ = ctrlc::set_handler(handler);
}

/// One clear line: the context chain joined by ": ", without the causes an error's own
/// message already ends with (`path: reason` errors also report the reason as their
/// source).
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line == text || line.ends_with(&format!(": {text}")) {
            continue;
        }
        // `path: reason` under a context that ends with the path ("writing x.obj") says
        // the path once.
        let text = match text.split_once(": ") {
            Some((path, reason)) if line == path || line.ends_with(&format!(" {path}")) => {
                reason.to_owned()
            }
            _ => text,
        };
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .root_cause()
        .downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_cause_already_in_its_message_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "File exists");
        let error = anyhow::Error::new(terralod_core::tiles::TileError::Io {
            path: "out".into(),
            source: io,
        })
        .context("importing x");
        assert_eq!(super::one_line(&error), "importing x: out: File exists");
        let plain = anyhow::anyhow!("root").context("middle").context("top");
        assert_eq!(super::one_line(&plain), "top: middle: root");
        // A cause that only looks like the line's tail is kept.
        let tail = anyhow::anyhow!("1").context("reading tile 1");
        assert_eq!(super::one_line(&tail), "reading tile 1: 1");
        // A context that names the file the error names: the path once.
        let write = anyhow::Error::new(terralod_core::io::WriteError {
            path: "out/x.obj".into(),
            problem: terralod_core::io::WriteProblem::Interrupted,
        })
        .context("writing out/x.obj");
        assert_eq!(
            super::one_line(&write),
            "writing out/x.obj: interrupted: nothing written"
        );
        // Not when the context only ends with a longer name.
        let other = anyhow::anyhow!("x.obj: gone").context("writing out/x.obj");
        assert_eq!(super::one_line(&other), "writing out/x.obj: x.obj: gone");
    }
}
