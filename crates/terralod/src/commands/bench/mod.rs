//! `terralod bench`: the scenario benchmark (R3). Flies a camera path over a terrain and,
//! for every registered algorithm (or `--algo`), reports selection time, triangles,
//! vertices, nodes, memory and the projected error measured by the independent oracle;
//! measured frames also get the popping (how far the drawn surface jumped on screen since
//! the previous frame); `--check` runs the crack checker on every frame; `--scaling` repeats the path over
//! procedural terrains of growing size and the same extent.

mod path;
mod plot;
mod stream;
#[cfg(test)]
mod uploads;

use crate::detail_args::build_algorithm;
use crate::lod_args::AlgorithmOptionArgs;
use crate::progress;
use crate::staged::StagedFiles;
use crate::stream_args::{builds_from_tiles, check_page_file, is_streaming};
use crate::terrain_args::{TerrainArgs, parse_positive};
use anyhow::{Context, bail};
use clap::Args;
use glam::Vec3;
use path::Pose;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;
use terralod_core::generate::{GenerateOptions, generate};
use terralod_core::lod::{self, AlgorithmEntry, Detail, PatchStats, View};
use terralod_core::{Camera, GridMesh, Heightfield, Pyramid, WorldMapping};
use terralod_testkit::{check_mesh, measure_error, measure_popping};

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub terrain: TerrainArgs,
    /// Algorithms to run, by registry name (repeat the flag); default: every one (over an
    /// imported directory over --max-samples, or with --cache-mb: streamed-quadtree alone).
    #[arg(long = "algo", value_parser = crate::lod_args::parse_algorithm)]
    pub algos: Vec<String>,
    /// Projected error bound in pixels.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, value_parser = parse_positive)]
    pub pixel_error: f32,
    /// Frames of the default path (at most a million: every frame keeps its figures).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub frames: u32,
    /// Fly these poses instead: a JSON array of {"eye": [x, y, z], "target": [x, y, z]}.
    #[arg(long, value_name = "FILE.json", conflicts_with_all = ["speed", "frames"])]
    pub path: Option<PathBuf>,
    /// Fly a low loop at this speed (world units per second) instead of the default tour,
    /// one frame every 1/--fps seconds: a real-time flight.
    #[arg(long, value_name = "UNITS_PER_S", value_parser = crate::terrain_args::parse_positive)]
    pub speed: Option<f32>,
    /// Height of a --speed flight above the highest ground a little ahead, in world units
    /// (default: 0.5 % of the terrain's span plus 2 % of its height range).
    #[arg(
        long,
        requires = "speed",
        allow_negative_numbers = true,
        value_parser = crate::terrain_args::parse_positive
    )]
    pub altitude: Option<f32>,
    /// Frames per second of a --speed flight (0.1 to 10,000).
    #[arg(long, default_value_t = 60.0, requires = "speed", value_parser = parse_fps)]
    pub fps: f32,
    /// Viewport in pixels, as WxH.
    #[arg(
        long,
        value_name = "WxH",
        value_parser = crate::camera_args::parse_viewport,
        default_value = "1920x1080"
    )]
    pub size: (u32, u32),
    /// Vertical field of view in degrees.
    #[arg(
        long,
        default_value_t = 60.0,
        allow_negative_numbers = true,
        value_parser = crate::camera_args::parse_fov_y
    )]
    pub fov_y: f32,
    /// Near plane distance.
    #[arg(long, default_value_t = 1.0)]
    pub near: f32,
    /// Run the crack checker on every frame's mesh (slow).
    #[arg(long)]
    pub check: bool,
    /// Measure the projected error with the oracle every N frames (0: never).
    #[arg(long, default_value_t = 50)]
    pub measure_every: u32,
    /// Every N frames (0: never), also select the frame's view with a fresh instance of
    /// the algorithm: its time is the selection from scratch the carried state saves, and
    /// its mesh is compared with the carried one (drawn triangles and heights).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub scratch_every: u32,
    /// Write every figure, per frame too, as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write SVG plots (triangles and selection time along the path; time against size
    /// with --scaling) into this directory.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// Fly the path over procedural terrains of these sizes and one extent instead.
    #[arg(long)]
    pub scaling: bool,
    /// Sizes for --scaling (samples a side).
    #[arg(
        long,
        value_delimiter = ',',
        requires = "scaling",
        default_value = "1025,4097,16385",
        value_parser = parse_scaling_size
    )]
    pub scaling_sizes: Vec<u32>,
    /// With --scaling: every size shows the first size's surface (resampled, piecewise
    /// linear on the 2 x 2-cell fans the quadtrees draw) instead of the generator's finer
    /// detail, so only the sample count grows: the cost of size apart from that of detail.
    #[arg(long, requires = "scaling")]
    pub same_surface: bool,
    /// The tile cache, for `--algo streamed` alone over an imported directory.
    #[command(flatten)]
    pub stream: crate::stream_args::StreamArgs,
    /// Every algorithm's options (each algorithm reads its own).
    #[command(flatten)]
    pub algorithm: AlgorithmOptionArgs,
}

/// Median, 95th percentile and maximum.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Spread {
    pub median: f64,
    pub p95: f64,
    pub max: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        Spread {
            median: at(0.5),
            p95: at(0.95),
            max: at(1.0),
        }
    }
}

/// One frame's figures.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FrameRecord {
    /// The part of the default path (low flight, climb, orbit, turn in place).
    pub phase: &'static str,
    pub select_ms: f64,
    pub triangles: u64,
    pub vertices: u64,
    pub nodes_visited: u64,
    /// Max projected error in pixels (oracle), on measured frames.
    pub measured_px: Option<f64>,
    /// Largest jump of the drawn surface since the previous frame, in pixels (oracle), on
    /// measured frames after the first.
    pub popping_px: Option<f64>,
    /// Pieces drawn coarser than the view wants while their data is read in the
    /// background (algorithm A with `--page-frames`: squares waiting for pages).
    pub held_back: usize,
    /// The distance from the eye of the nearest piece held back (metres), when some was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nearest_held_back_m: Option<f32>,
    /// Algorithm P's pool and tree figures of the frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patches: Option<PatchStats>,
    /// With `--scratch-every`, on its frames: a fresh instance's selection of this view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scratch: Option<ScratchFrame>,
}

/// A frame selected again by a fresh instance (`--scratch-every`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ScratchFrame {
    /// The fresh instance's select time (its build not included).
    pub select_ms: f64,
    /// Whether its drawn triangles or heights differ from the carried selection's.
    pub differs: bool,
}

/// The carried selection against fresh ones over the `--scratch-every` frames.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ScratchRun {
    pub frames: usize,
    /// A fresh instance's select time on those frames.
    pub scratch_ms: Spread,
    /// The carried instance's select time on the same frames.
    pub next_ms: Spread,
    /// Median of the per-frame ratios scratch / next, and the smallest.
    pub ratio_median: f64,
    pub ratio_min: f64,
    /// Frames whose fresh mesh differs from the carried one.
    pub differing_frames: usize,
}

/// Algorithm P's pool over the whole path.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct PatchPoolRun {
    pub capacity: u32,
    pub peak_in_use: u32,
    pub in_use: Spread,
    pub splits_per_frame: Spread,
    pub merges_per_frame: Spread,
    /// Mean fill time per patch over every fill of the path, in microseconds.
    pub fill_us_per_patch: f64,
    pub fills: u64,
    /// Frames in which a wanted split was refused (pool exhausted).
    pub exhausted_frames: usize,
}

/// One algorithm's run over the path.
#[derive(Clone, Debug, Serialize)]
pub struct AlgorithmRun {
    pub algorithm: String,
    pub build_ms: f64,
    pub select_ms: Spread,
    pub triangles: Spread,
    pub vertices: Spread,
    pub nodes_visited: Spread,
    /// Per-node state and pyramid, bytes per sample (heights not included).
    pub state_bytes_per_sample: f64,
    pub pyramid_bytes_per_sample: f64,
    /// Over the measured frames: the largest projected error and the largest p99.
    pub measured_max_px: Option<f64>,
    pub measured_p99_px: Option<f64>,
    pub measured_frames: usize,
    /// With --check: frames whose mesh had a defect (cracks, T-junctions, overlaps).
    pub defective_frames: Option<usize>,
    /// Frames that held something back for data read in the background, and the reads
    /// that failed (algorithm A's pages on disk).
    pub held_back_frames: usize,
    pub read_failures: usize,
    /// Reads finished over the flight and their bytes (algorithm A's pages on disk).
    pub reads_loaded: usize,
    pub read_bytes: u64,
    /// Over the frames that held something back: the median distance from the eye of the
    /// nearest piece held back (metres; the ground nearer was drawn as the view asks).
    pub nearest_held_back_median_m: Option<f64>,
    /// Over the measured frames: the largest jump of the drawn surface from the previous
    /// frame to that one, in pixels (`measure_popping`), and the largest p99. Camera motion
    /// does not count; a geomorphing algorithm spreads its jumps over frames.
    pub popping_px: Option<f64>,
    pub popping_p99_px: Option<f64>,
    /// Algorithm P's pool figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_pool: Option<PatchPoolRun>,
    /// With `--scratch-every`: the carried selection against fresh ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scratch: Option<ScratchRun>,
    pub frames: Vec<FrameRecord>,
}

impl BenchArgs {
    /// Without `--algo`, over an imported directory too large to load or with a flag of
    /// the tile cache, the flight streams the directory
    /// ([`crate::stream_args::default_to_streaming`]); `--scaling` generates its own.
    pub fn default_to_streaming(&mut self) {
        if self.scaling || !self.algos.is_empty() {
            return;
        }
        let mut algo = None;
        crate::stream_args::default_to_streaming(&mut algo, &self.terrain, &self.stream);
        self.algos.extend(algo);
    }
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let entries = selected_algorithms(&args.algos)?;
    let names: Vec<&str> = entries.iter().map(|entry| entry.name).collect();
    args.algorithm.refuse_unread(&names, false)?;
    if args.scratch_every > 0 && args.algorithm.page_frames.is_some_and(|n| n > 0) {
        bail!(
            "--scratch-every compares with fresh instances, which hold none of their pages \
             yet (they would draw the top of the tree): not with --page-frames"
        );
    }
    check_outputs(args)?;
    // One streaming algorithm (`--algo streamed` or `streamed-quadtree`) over an imported
    // directory streams it through the tile cache; any other run loads the directory's
    // finest level whole, as for a file.
    let streamed_dir = args
        .terrain
        .file
        .as_deref()
        .filter(|f| f.is_dir() && !args.scaling)
        .filter(|_| {
            let build = args.algorithm.tree_build();
            let builds = |a: &str| builds_from_tiles(&args.terrain, a, build);
            !args.algos.is_empty() && args.algos.iter().all(|a| is_streaming(a) || builds(a))
        });
    if streamed_dir.is_some() && args.algos.len() > 1 {
        bail!(
            "a streamed flight flies one algorithm: give one --algo of {} per run",
            terralod_core::lod::streaming_names()
        );
    }
    args.stream.refuse_unless_streamed(streamed_dir.is_some())?;
    check_page_file(
        &args.terrain,
        // One algorithm flies a streamed directory: with several, nothing keeps the file.
        match args.algos.as_slice() {
            [one] => one.as_str(),
            _ => "",
        },
        args.algorithm.tree_build(),
        args.algorithm.page_file.as_deref(),
    )?;
    let only_adaptive = args.algos.len() == 1 && args.algos[0] == "adaptive";
    let detail_field = args.algorithm.detail.load(
        if only_adaptive { "adaptive" } else { "" },
        args.terrain.max_samples,
    )?;
    if detail_field.is_some() && args.scaling {
        bail!("--detail does not apply to --scaling (generated terrains)");
    }
    if args.scaling {
        return run_scaling(args, &entries);
    }
    if let Some(dir) = streamed_dir {
        if args.scratch_every > 0 {
            bail!(
                "--scratch-every does not apply to a streamed flight (a fresh instance would \
                 start with an empty tile cache)"
            );
        }
        return stream::run(args, &args.algos[0], dir);
    }
    let terrain = args.terrain.load()?;
    let field = &terrain.heightfield;
    let poses = match (&args.path, args.speed) {
        (Some(path), _) => path::read_path(path)?,
        (None, Some(speed)) => path::constant_speed_flight(
            field,
            args.frames as usize,
            speed / args.fps,
            args.altitude,
        ),
        (None, None) => path::default_path(field, args.frames as usize),
    };
    let detail = detail_field
        .as_ref()
        .map(|d| args.algorithm.detail.place(field, d))
        .transpose()?;
    if detail.is_some() && args.measure_every > 0 {
        let _ = writeln!(
            std::io::stderr(),
            "with --detail the error and popping are not measured (the oracle would need the \
             whole terrain subdivided like the detail); --check still checks every frame"
        );
    }
    let (pyramid, pyramid_ms) = timed(|| Pyramid::build(field));
    let runs = entries
        .iter()
        .map(|entry| {
            fly(
                args,
                entry,
                field,
                &pyramid,
                pyramid_ms,
                &poses,
                detail.as_ref(),
            )
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: {} x {} samples, {} frames, tau = {} px, {} x {}, pyramid {:.1} ms",
        terrain.name,
        field.width(),
        field.height(),
        poses.len(),
        args.pixel_error,
        args.size.0,
        args.size.1,
        pyramid_ms
    )?;
    write_table(&mut out, &runs)?;
    // The plots and the JSON appear together or not at all.
    let staged = StagedFiles::default();
    if let Some(dir) = &args.plots {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        plot::along_path(&staged, dir, &runs, &poses)?;
    }
    let report = serde_json::json!({
        "terrain": terrain.name,
        "size": [field.width(), field.height()],
        "frames": poses.len(),
        "pixel_error": args.pixel_error,
        "viewport": [args.size.0, args.size.1],
        "pyramid_ms": pyramid_ms,
        "algorithms": runs,
    });
    if let Some(path) = &args.json {
        write_json(&staged, path, &report)?;
    }
    staged.commit().context("writing the outputs")?;
    if let Some(dir) = &args.plots {
        writeln!(out, "plots written to {}", dir.display())?;
    }
    writeln!(out, "{}", summary_line(&report, &runs))?;
    Ok(())
}

fn summary_line(report: &serde_json::Value, runs: &[AlgorithmRun]) -> serde_json::Value {
    // The last line: the headline figures without the per-frame arrays.
    let algorithms: Vec<_> = runs
        .iter()
        .map(|r| {
            serde_json::json!({
                "algorithm": r.algorithm,
                "select_ms": r.select_ms,
                "triangles": r.triangles,
                "measured_max_px": r.measured_max_px,
                "popping_px": r.popping_px,
                "defective_frames": r.defective_frames,
                "held_back_frames": r.held_back_frames,
                "nearest_held_back_median_m": r.nearest_held_back_median_m,
                "scratch": r.scratch,
            })
        })
        .collect();
    serde_json::json!({
        "terrain": report["terrain"],
        "frames": report["frames"],
        "pixel_error": report["pixel_error"],
        "algorithms": algorithms,
    })
}

fn selected_algorithms(names: &[String]) -> anyhow::Result<Vec<&'static AlgorithmEntry>> {
    if names.is_empty() {
        return Ok(lod::REGISTRY.iter().collect());
    }
    names
        .iter()
        .map(|name| {
            lod::find(name).with_context(|| {
                format!("unknown algorithm '{name}' (available: {})", lod::names())
            })
        })
        .collect()
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let value = f();
    (value, start.elapsed().as_secs_f64() * 1e3)
}

/// Checks the outputs before the flight, so a run of minutes does not end on a bad path:
/// `--json` in an existing folder and naming no input, the `--plots` folder made.
fn check_outputs(args: &BenchArgs) -> anyhow::Result<()> {
    if let Some(json) = &args.json {
        let folder = json.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(folder) = folder.filter(|f| !f.is_dir()) {
            bail!(
                "{}: the folder {} does not exist",
                json.display(),
                folder.display()
            );
        }
        let detail = args.algorithm.detail.detail.as_deref();
        args.terrain
            .refuse_as_output(json, [args.path.as_deref(), detail])?;
    }
    if let Some(dir) = &args.plots {
        if dir.exists() && !dir.is_dir() {
            bail!(
                "--plots {}: it is not a folder (--plots names the folder the plots go in)",
                dir.display()
            );
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(())
}

/// Parses `--fps`: a real-time flight waits `1 / fps` between frames, so rates that make
/// that wait absurd (or not a duration at all) are refused.
fn parse_fps(text: &str) -> Result<f32, String> {
    let fps = crate::terrain_args::parse_positive(text)?;
    if !(0.1..=10_000.0).contains(&fps) {
        return Err(format!("'{text}' is not a frame rate from 0.1 to 10000"));
    }
    Ok(fps)
}

/// The camera of every pose, made before the flight: the far plane needs the terrain's
/// height range, a scan of every sample that must not run (and flush the caches) between
/// two timed selections.
fn cameras(args: &BenchArgs, field: &Heightfield, poses: &[Pose]) -> anyhow::Result<Vec<Camera>> {
    let (lo, hi) = field.world_range();
    poses
        .iter()
        .enumerate()
        .map(|(i, pose)| {
            camera(args, field.world_size(), (lo, hi), pose).with_context(|| match &args.path {
                Some(file) => format!("{}: pose {i}", file.display()),
                None => format!("frame {i} of the path"),
            })
        })
        .collect()
}

fn camera(
    args: &BenchArgs,
    (w, d): (f32, f32),
    (lo, hi): (f32, f32),
    pose: &Pose,
) -> anyhow::Result<Camera> {
    let eye = Vec3::from(pose.eye);
    let far = [0.0, w]
        .iter()
        .flat_map(|&x| [0.0, d].map(move |z| (x, z)))
        .flat_map(|(x, z)| [lo, hi].map(move |y| eye.distance(Vec3::new(x, y, z))))
        .fold(2.0 * args.near, f32::max)
        * 1.01;
    if !far.is_finite() {
        bail!(
            "the distance from the eye {:?} to the terrain's far corner (extent {w} x {d}, \
             heights {lo} .. {hi}) overflows f32: lower --cell-size or --height-scale",
            pose.eye
        );
    }
    Camera::new(
        eye,
        Vec3::from(pose.target),
        args.fov_y.to_radians(),
        args.size,
        args.near,
        far,
    )
    .with_context(|| format!("camera at {:?} looking at {:?}", pose.eye, pose.target))
}

/// Flies `poses` with one algorithm (with the local detail inserted, if any: its error is
/// then not measured).
fn fly(
    args: &BenchArgs,
    entry: &AlgorithmEntry,
    field: &Heightfield,
    pyramid: &Pyramid,
    pyramid_ms: f64,
    poses: &[Pose],
    detail: Option<&Detail<'_>>,
) -> anyhow::Result<AlgorithmRun> {
    let options = args.algorithm.options();
    let (algorithm, build_ms) = timed(|| build_algorithm(entry, field, pyramid, &options, detail));
    let mut algorithm = algorithm?;
    let measure_every = if detail.is_some() {
        0
    } else {
        args.measure_every
    };
    let bar = progress::bar(poses.len() as u64, format!("{} over the path", entry.name));
    let mut frames = Vec::with_capacity(poses.len());
    let (mut measured_max, mut measured_p99, mut measured_frames) = (None::<f64>, None::<f64>, 0);
    let mut defective = args.check.then_some(0usize);
    let (mut popping_max, mut popping_p99) = (None::<f64>, None::<f64>);
    let measured = |i: usize| measure_every > 0 && i.is_multiple_of(measure_every as usize);
    // Frame 0 is a selection from scratch already.
    let from_scratch =
        |i: usize| args.scratch_every > 0 && i > 0 && i.is_multiple_of(args.scratch_every as usize);
    // The mesh of the frame before a measured one, for the popping measurement.
    let mut previous_mesh = None;
    let mut warned_exhausted = false;
    let cameras = cameras(args, field, poses)?;
    for (i, &camera) in cameras.iter().enumerate() {
        let view = View::screen(camera, args.pixel_error)?;
        let selection = algorithm.select(&view);
        let measure = measured(i);
        let vertices = selection.distinct_vertices() as u64;
        let (mut measured_px, mut popping_px) = (None, None);
        let mut carried_mesh = None;
        if measure || args.check || measured(i + 1) || from_scratch(i) {
            let mesh = selection.to_mesh(field);
            if let (true, Some(before)) = (measure, previous_mesh.take()) {
                let popping = measure_popping(field, &before, &mesh, &camera)
                    .with_context(|| format!("measuring popping at frame {i}"))?;
                popping_px = Some(popping.max);
                popping_max = Some(popping_max.map_or(popping.max, |m| m.max(popping.max)));
                popping_p99 = Some(popping_p99.map_or(popping.p99, |m| m.max(popping.p99)));
            }
            if measure {
                let report = measure_error(field, &mesh, Some(&camera))
                    .with_context(|| format!("measuring frame {i}"))?;
                if let Some(projected) = report.projected {
                    measured_px = Some(projected.max);
                    measured_max =
                        Some(measured_max.map_or(projected.max, |m| m.max(projected.max)));
                    measured_p99 =
                        Some(measured_p99.map_or(projected.p99, |m| m.max(projected.p99)));
                    measured_frames += 1;
                }
            }
            if let Some(count) = defective.as_mut() {
                let report = check_mesh(&mesh, None);
                if !report.is_watertight() {
                    *count += 1;
                    let _ = writeln!(
                        std::io::stderr(),
                        "frame {i}: {} defects, first: {}",
                        report.defects().len(),
                        report.defects().first().map_or("", String::as_str)
                    );
                }
            }
            if from_scratch(i) {
                carried_mesh = Some(mesh);
            } else if measured(i + 1) {
                previous_mesh = Some(mesh);
            }
        }
        let scratch = match carried_mesh {
            Some(carried) => {
                let fresh = build_algorithm(entry, field, pyramid, &options, detail)?;
                let scratch = select_from_scratch(fresh, &view, field, &carried);
                if measured(i + 1) {
                    previous_mesh = Some(carried);
                }
                Some(scratch)
            }
            None => None,
        };
        for fault in algorithm.take_faults() {
            let _ = writeln!(std::io::stderr(), "{}: frame {i}: {fault}", entry.name);
        }
        let reads = algorithm.reads();
        let stats = algorithm.stats();
        if let Some(p) = &stats.patches
            && p.refused_splits > 0
            && !warned_exhausted
        {
            warned_exhausted = true;
            let _ = writeln!(
                std::io::stderr(),
                "{}: pool of {} patches exhausted at frame {i}: coarser patches kept",
                entry.name,
                p.capacity
            );
        }
        frames.push(FrameRecord {
            phase: match args.speed {
                Some(_) => "constant speed",
                None => path::phase(i, poses.len()),
            },
            select_ms: stats.select_time.as_secs_f64() * 1e3,
            triangles: stats.triangles,
            vertices,
            nodes_visited: stats.nodes_visited,
            measured_px,
            popping_px,
            held_back: reads.held_back,
            nearest_held_back_m: reads.nearest_held_back,
            patches: stats.patches,
            scratch,
        });
        bar.inc(1);
    }
    bar.finish_and_clear();
    let spread = |f: fn(&FrameRecord) -> f64| Spread::of(&frames.iter().map(f).collect::<Vec<_>>());
    let samples = field.len() as f64;
    // The pyramid is charged to the algorithms that read it.
    let (pyramid_ms, pyramid_bytes) = if entry.uses_pyramid {
        (pyramid_ms, pyramid.memory_bytes())
    } else {
        (0.0, 0)
    };
    let reads = algorithm.reads();
    Ok(AlgorithmRun {
        algorithm: entry.name.to_string(),
        build_ms: build_ms + pyramid_ms,
        select_ms: spread(|f| f.select_ms),
        triangles: spread(|f| f.triangles as f64),
        vertices: spread(|f| f.vertices as f64),
        nodes_visited: spread(|f| f.nodes_visited as f64),
        state_bytes_per_sample: algorithm.state_bytes() as f64 / samples,
        pyramid_bytes_per_sample: pyramid_bytes as f64 / samples,
        measured_max_px: measured_max,
        measured_p99_px: measured_p99,
        measured_frames,
        defective_frames: defective,
        held_back_frames: frames.iter().filter(|f| f.held_back > 0).count(),
        read_failures: reads.failed,
        reads_loaded: reads.loaded,
        read_bytes: reads.bytes_read,
        nearest_held_back_median_m: median_nearest_held_back(&frames),
        popping_px: popping_max,
        popping_p99_px: popping_p99,
        patch_pool: patch_pool_run(&frames),
        scratch: scratch_run(&frames),
        frames,
    })
}

/// Selects `view` with a fresh instance and compares its mesh with `carried`.
fn select_from_scratch(
    mut fresh: Box<dyn lod::LodAlgorithm + '_>,
    view: &View,
    field: &Heightfield,
    carried: &GridMesh,
) -> ScratchFrame {
    let mesh = fresh.select(view).to_mesh(field);
    ScratchFrame {
        select_ms: fresh.stats().select_time.as_secs_f64() * 1e3,
        differs: drawn_triangles(&mesh) != drawn_triangles(carried),
    }
}

/// A mesh as what it draws: each triangle by its corners' grid positions and drawn
/// heights (bits), turned to start at its least corner (the winding kept), sorted; so
/// two meshes compare equal whatever their vertex and triangle order.
fn drawn_triangles(mesh: &GridMesh) -> Vec<[(u32, u32, u32); 3]> {
    let corner = |v: u32| {
        let p = mesh.positions[v as usize];
        (p.row, p.col, mesh.heights[v as usize].to_bits())
    };
    let mut triangles: Vec<_> = mesh
        .triangles
        .iter()
        .map(|t| {
            let c = t.map(corner);
            let least = (0..3).min_by_key(|&k| c[k]).unwrap_or(0);
            [c[least], c[(least + 1) % 3], c[(least + 2) % 3]]
        })
        .collect();
    triangles.sort_unstable();
    triangles
}

/// The `--scratch-every` frames' figures, if the run has them.
fn scratch_run(frames: &[FrameRecord]) -> Option<ScratchRun> {
    let pairs: Vec<(f64, &ScratchFrame)> = frames
        .iter()
        .filter_map(|f| f.scratch.as_ref().map(|s| (f.select_ms, s)))
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let mut ratios: Vec<f64> = pairs
        .iter()
        .map(|(next, s)| s.select_ms / next.max(1e-9))
        .collect();
    ratios.sort_by(f64::total_cmp);
    Some(ScratchRun {
        frames: pairs.len(),
        scratch_ms: Spread::of(&pairs.iter().map(|(_, s)| s.select_ms).collect::<Vec<_>>()),
        next_ms: Spread::of(&pairs.iter().map(|(next, _)| *next).collect::<Vec<_>>()),
        ratio_median: Spread::of(&ratios).median,
        ratio_min: ratios[0],
        differing_frames: pairs.iter().filter(|(_, s)| s.differs).count(),
    })
}

/// Algorithm P's pool figures over the path, if the frames have them.
/// The median, over the frames that held something back, of the distance from the eye of
/// the nearest piece held back.
fn median_nearest_held_back(frames: &[FrameRecord]) -> Option<f64> {
    let mut nearest: Vec<f64> = frames
        .iter()
        .filter_map(|f| f.nearest_held_back_m.map(f64::from))
        .collect();
    nearest.sort_by(f64::total_cmp);
    nearest.get(nearest.len() / 2).copied()
}

fn patch_pool_run(frames: &[FrameRecord]) -> Option<PatchPoolRun> {
    let stats: Vec<PatchStats> = frames.iter().filter_map(|f| f.patches).collect();
    let last = stats.last()?;
    let spread = |f: fn(&PatchStats) -> u32| {
        Spread::of(&stats.iter().map(|s| f64::from(f(s))).collect::<Vec<_>>())
    };
    let fills: u64 = stats.iter().map(|s| u64::from(s.fills)).sum();
    let fill_seconds: f64 = stats
        .iter()
        .map(|s| s.fill_time_per_patch.as_secs_f64() * f64::from(s.fills))
        .sum();
    Some(PatchPoolRun {
        capacity: last.capacity,
        peak_in_use: last.peak_in_use,
        in_use: spread(|s| s.in_use),
        splits_per_frame: spread(|s| s.splits),
        merges_per_frame: spread(|s| s.merges),
        fill_us_per_patch: if fills > 0 {
            fill_seconds * 1e6 / fills as f64
        } else {
            0.0
        },
        fills,
        exhausted_frames: stats.iter().filter(|s| s.refused_splits > 0).count(),
    })
}

fn write_table(out: &mut impl Write, runs: &[AlgorithmRun]) -> std::io::Result<()> {
    writeln!(
        out,
        "| algorithm | build ms | select ms median / p95 / max | triangles median / max | \
         vertices median / max | nodes visited median | state B/sample | pyramid B/sample | \
         measured px max / p99 | defective frames | popping px max / p99 |"
    )?;
    writeln!(out, "|{}", " --- |".repeat(11))?;
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    for r in runs {
        writeln!(
            out,
            "| {} | {:.1} | {:.3} / {:.3} / {:.3} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} | {:.2} | {:.2} | {} / {} | {} | {} / {} |",
            r.algorithm,
            r.build_ms,
            r.select_ms.median,
            r.select_ms.p95,
            r.select_ms.max,
            r.triangles.median,
            r.triangles.max,
            r.vertices.median,
            r.vertices.max,
            r.nodes_visited.median,
            r.state_bytes_per_sample,
            r.pyramid_bytes_per_sample,
            opt(r.measured_max_px),
            opt(r.measured_p99_px),
            r.defective_frames
                .map_or("-".to_string(), |d| d.to_string()),
            opt(r.popping_px),
            opt(r.popping_p99_px),
        )?;
    }
    for r in runs {
        if let Some(s) = &r.scratch {
            writeln!(
                out,
                "{}: from scratch on {} frames: select median {:.3} ms against {:.3} ms carried \
                 (scratch / carried per frame: median {:.2}, least {:.2}); fresh meshes differ \
                 on {} of {}",
                r.algorithm,
                s.frames,
                s.scratch_ms.median,
                s.next_ms.median,
                s.ratio_median,
                s.ratio_min,
                s.differing_frames,
                s.frames
            )?;
        }
    }
    for r in runs
        .iter()
        .filter(|r| r.held_back_frames > 0 || r.read_failures > 0)
    {
        let nearest = r.nearest_held_back_median_m.map_or(String::new(), |m| {
            format!(" (nearest held back median {m:.0} m from the eye)")
        });
        writeln!(
            out,
            "{}: {} of {} frames held ground back for want of pages{nearest}; {} pages \
             read ({:.1} MB), {} unreadable",
            r.algorithm,
            r.held_back_frames,
            r.frames.len(),
            r.reads_loaded,
            r.read_bytes as f64 / f64::from(1 << 20),
            r.read_failures
        )?;
    }
    for r in runs {
        if let Some(p) = &r.patch_pool {
            writeln!(
                out,
                "{}: pool {} slots, in use median {:.0} / peak {}; splits per frame median {:.0} \
                 / max {:.0}, merges median {:.0} / max {:.0}; {} fills, {:.1} us per patch; \
                 {} frames exhausted",
                r.algorithm,
                p.capacity,
                p.in_use.median,
                p.peak_in_use,
                p.splits_per_frame.median,
                p.splits_per_frame.max,
                p.merges_per_frame.median,
                p.merges_per_frame.max,
                p.fills,
                p.fill_us_per_patch,
                p.exhausted_frames
            )?;
        }
    }
    Ok(())
}

fn write_json(
    staged: &StagedFiles,
    path: &std::path::Path,
    value: &serde_json::Value,
) -> anyhow::Result<()> {
    staged
        .write(path, |out| {
            serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::other)?;
            writeln!(out)
        })
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// `coarse` resampled onto `size × size` samples of `cell_size` (`size − 1` a power-of-two
/// multiple of its cells): piecewise linear on the triangles every 2 × 2-cell fan of the
/// quadtrees draws (each cell cut by the diagonal through its corner with two odd
/// coordinates, the fan's centre). A fan of the fine grid over whole coarse cells then has
/// exactly the coarse grid's error, and finer fans none beyond rounding: the same surface,
/// more samples.
fn resample_on_fans(
    coarse: &Heightfield,
    size: u32,
    cell_size: f32,
) -> anyhow::Result<Heightfield> {
    let (cells, fine_cells) = (coarse.width() - 1, size - 1);
    if coarse.width() != coarse.height() {
        bail!("--same-surface: the first terrain is not square");
    }
    check_refines(coarse.width(), size)?;
    let step = f64::from(cells) / f64::from(fine_cells);
    let height = |col: u32, row: u32| f64::from(coarse.raw(col, row));
    let mut values = Vec::new();
    values
        .try_reserve_exact(size as usize * size as usize)
        .with_context(|| format!("--same-surface: no memory for {size} x {size} samples"))?;
    for row in 0..size {
        let v = f64::from(row) * step;
        let cy = (v as u32).min(cells - 1);
        let fy = v - f64::from(cy);
        for col in 0..size {
            let u = f64::from(col) * step;
            let cx = (u as u32).min(cells - 1);
            let fx = u - f64::from(cx);
            let [h00, h10, h01, h11] =
                [(cx, cy), (cx + 1, cy), (cx, cy + 1), (cx + 1, cy + 1)].map(|(c, r)| height(c, r));
            // The fan's centre is (cx, cy) or (cx + 1, cy + 1) when cx and cy have the same
            // parity: the cut runs from (0, 0) to (1, 1); otherwise from (1, 0) to (0, 1).
            let h = if cx % 2 == cy % 2 {
                if fx >= fy {
                    h00 + fx * (h10 - h00) + fy * (h11 - h10)
                } else {
                    h00 + fy * (h01 - h00) + fx * (h11 - h01)
                }
            } else if fx + fy <= 1.0 {
                h00 + fx * (h10 - h00) + fy * (h01 - h00)
            } else {
                h11 + (1.0 - fx) * (h01 - h11) + (1.0 - fy) * (h10 - h11)
            };
            values.push(h as f32);
        }
    }
    let mapping = WorldMapping {
        cell_size,
        ..coarse.mapping()
    };
    Ok(Heightfield::from_f32(size, size, values)?.with_mapping(mapping)?)
}

/// Refuses a `--scaling-sizes` list before anything runs (a bad last size used to fail
/// after the first sizes had been flown): every size generable, and with
/// `--same-surface` each a power-of-two refinement of the first.
fn check_scaling_sizes(sizes: &[u32], same_surface: bool) -> anyhow::Result<()> {
    let Some(&first) = sizes.first() else {
        bail!("--scaling-sizes: no size given");
    };
    for &size in sizes {
        if same_surface {
            check_refines(first, size)?;
        }
    }
    Ok(())
}

/// One `--scaling-sizes` size: one the generator can make, 3 samples a side at least (a
/// bad value is a bad flag, exit 2).
fn parse_scaling_size(text: &str) -> Result<u32, String> {
    let size: u32 = text.trim().parse().map_err(|e| format!("'{text}': {e}"))?;
    if size < 3 {
        return Err(format!("{size} is too small (3 samples a side at least)"));
    }
    GenerateOptions::default()
        .with_size(size)
        .validate()
        .map_err(|e| format!("{size}: {e}"))?;
    Ok(size)
}

/// `--same-surface` resamples the first size onto `size`: its cells must split the first
/// one's into a power of two each.
fn check_refines(first: u32, size: u32) -> anyhow::Result<()> {
    let (cells, fine) = (first - 1, size - 1);
    if !fine.is_multiple_of(cells) || !(fine / cells).is_power_of_two() {
        bail!("--same-surface: {size} is not the first size ({first}) refined by a power of two");
    }
    Ok(())
}

/// What the oracles found on a run, for a line of text: the measured error and popping
/// on the measured frames, and the defective frames with `--check` (empty when neither
/// ran).
fn oracle_text(run: &AlgorithmRun) -> String {
    let mut text = String::new();
    if let (Some(max), Some(p99)) = (run.measured_max_px, run.measured_p99_px) {
        text += &format!(
            ", measured px max {max:.3} p99 {p99:.3} ({} frames)",
            run.measured_frames
        );
    }
    if let Some(popping) = run.popping_px {
        text += &format!(", popping px max {popping:.3}");
    }
    if let Some(defective) = run.defective_frames {
        text += &format!(", defective frames {defective}");
    }
    if run.held_back_frames > 0 || run.read_failures > 0 {
        text += &format!(
            ", frames waiting for pages {}, pages unreadable {}",
            run.held_back_frames, run.read_failures
        );
    }
    if let Some(nearest) = run.nearest_held_back_median_m {
        text += &format!(", nearest held back median {nearest:.0} m");
    }
    text
}

/// `--scaling`: the default path over procedural terrains of each size, one extent.
fn run_scaling(args: &BenchArgs, entries: &[&'static AlgorithmEntry]) -> anyhow::Result<()> {
    if args.terrain.file.is_some() || args.path.is_some() || args.speed.is_some() {
        bail!("--scaling generates its own terrains and path: give no FILE, --path or --speed");
    }
    check_scaling_sizes(&args.scaling_sizes, args.same_surface)?;
    let extent = GenerateOptions::default().cell_size * 1024.0;
    let mut rows = Vec::new();
    let mut poses: Option<Vec<Pose>> = None;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "scaling: procedural terrains over {extent} m, {} frames, tau = {} px",
        args.frames, args.pixel_error
    )?;
    let mut first: Option<Heightfield> = None;
    for &size in &args.scaling_sizes {
        let cell_size = extent / (size - 1) as f32;
        let field = match &first {
            Some(coarse) if args.same_surface => {
                let bar = progress::spinner(format!("resampling to {size} x {size}"));
                let field = resample_on_fans(coarse, size, cell_size)?;
                bar.finish_and_clear();
                field
            }
            _ => {
                let bar = progress::spinner(format!("generating {size} x {size}"));
                let field = generate(&GenerateOptions {
                    size,
                    cell_size,
                    ..GenerateOptions::default()
                })
                .with_context(|| format!("generating {size} x {size}"))?;
                bar.finish_and_clear();
                field
            }
        };
        // The path is planned on the first terrain so every size flies the same poses.
        let poses = poses.get_or_insert_with(|| path::default_path(&field, args.frames as usize));
        let (pyramid, pyramid_ms) = timed(|| Pyramid::build(&field));
        for entry in entries {
            let run = fly(args, entry, &field, &pyramid, pyramid_ms, poses, None)?;
            writeln!(
                out,
                "{size:>6}² {:<10} select median {:.3} ms, p95 {:.3} ms, triangles median {:.0}, \
                 nodes visited median {:.0}{}",
                run.algorithm,
                run.select_ms.median,
                run.select_ms.p95,
                run.triangles.median,
                run.nodes_visited.median,
                oracle_text(&run)
            )?;
            rows.push((size, run));
        }
        if args.same_surface && first.is_none() {
            first = Some(field);
        }
    }
    let staged = StagedFiles::default();
    if let Some(dir) = &args.plots {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        plot::scaling(&staged, dir, &rows)?;
    }
    let summary: Vec<_> = rows
        .iter()
        .map(|(size, r)| {
            serde_json::json!({
                "size": size,
                "algorithm": r.algorithm,
                "select_ms": r.select_ms,
                "triangles": r.triangles,
                "nodes_visited": r.nodes_visited,
                "build_ms": r.build_ms,
                "measured_max_px": r.measured_max_px,
                "measured_p99_px": r.measured_p99_px,
                "measured_frames": r.measured_frames,
                "popping_px": r.popping_px,
                "defective_frames": r.defective_frames,
            })
        })
        .collect();
    let report = serde_json::json!({ "scaling": summary });
    if let Some(path) = &args.json {
        write_json(&staged, path, &report)?;
    }
    staged.commit().context("writing the outputs")?;
    if let Some(dir) = &args.plots {
        writeln!(out, "plot written to {}", dir.display())?;
    }
    writeln!(out, "{report}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use terralod_core::heightfield::GridPos;
    use terralod_core::lod::{LodAlgorithm, LodOptions, QuadtreeLod};

    /// The fresh-against-carried comparison ignores vertex and triangle order and where a
    /// triangle's corners start, but sees a height, a winding or a triangle changed.
    #[test]
    fn drawn_triangles_ignore_order_but_nothing_drawn() {
        let at = |col, row| GridPos { col, row };
        let mesh = GridMesh {
            positions: vec![at(0, 0), at(1, 0), at(0, 1), at(1, 1)],
            heights: vec![1.0, 2.0, 3.0, 4.0],
            triangles: vec![[0, 2, 1], [1, 2, 3]],
        };
        // The same surface: vertices listed backwards, triangles swapped and rotated.
        let reordered = GridMesh {
            positions: mesh.positions.iter().rev().copied().collect(),
            heights: mesh.heights.iter().rev().copied().collect(),
            triangles: vec![[2, 3, 1], [0, 2, 1]],
        };
        assert_eq!(drawn_triangles(&mesh), drawn_triangles(&reordered));
        let mut higher = reordered.clone();
        higher.heights[0] += 1e-3;
        assert_ne!(drawn_triangles(&mesh), drawn_triangles(&higher));
        let mut flipped = reordered.clone();
        flipped.triangles[1] = [0, 1, 2];
        assert_ne!(drawn_triangles(&mesh), drawn_triangles(&flipped));
        let mut other = mesh.clone();
        other.triangles = vec![[0, 2, 3], [0, 3, 1]];
        assert_ne!(drawn_triangles(&mesh), drawn_triangles(&other));
    }

    #[test]
    fn the_same_surface_keeps_the_coarse_samples_and_the_quadtree_mesh() {
        let coarse = generate(&GenerateOptions::default().with_size(33)).expect("valid");
        let cell = coarse.mapping().cell_size;
        let fine = resample_on_fans(&coarse, 129, cell / 4.0).expect("4 x finer");
        for row in 0..33 {
            for col in 0..33 {
                assert_eq!(fine.raw(col * 4, row * 4), coarse.raw(col, row));
            }
        }
        let (lo, hi) = coarse.world_range();
        for fraction in [0.003, 0.01, 0.03, 0.1] {
            let view = View::world_error((hi - lo) * fraction).expect("valid");
            let count = |field: &Heightfield| {
                let pyramid = Pyramid::build(field);
                let mut lod = QuadtreeLod::new(field, &pyramid, LodOptions::default());
                lod.select(&view).triangle_count()
            };
            assert_eq!(count(&fine), count(&coarse), "M = {fraction} of the range");
        }
        assert!(resample_on_fans(&coarse, 97, cell / 3.0).is_err());
    }
}
