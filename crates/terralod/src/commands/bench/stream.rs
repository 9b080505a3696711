//! `terralod bench DIR --algo streamed` (or `streamed-quadtree`): a flight over an imported
//! directory through the tile cache (issue 9): tiles load in the background under
//! `--cache-mb`, the selection draws what is resident. Reports, besides the usual
//! per-frame figures, what a streamed flight must keep: resident memory, how long any
//! frame waited on the cache, blocks (or nodes) drawn coarser because their tile was not
//! there yet, and every failed tile (once).

use super::{BenchArgs, Spread, cameras, path, write_json};
use crate::progress;
use crate::stream_args::{StreamedTerrain, StreamingAlgorithm, peak_resident_bytes, to_stderr};
use anyhow::Context;
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use terralod_core::lod::View;
use terralod_core::tiles::{DetailTiles, TileCache, TileError, TileSource, TiledTerrain};
use terralod_core::{Camera, GridMesh, Heightfield};
use terralod_testkit::{
    Window, WindowedMeasureError, check_mesh, measure_error, measure_error_by_windows_skipping,
};

/// Largest finest level (procedural detail included) the oracles generate whole to judge a
/// flight with `--detail-levels`; above it that flight is measured for time and memory
/// only.
const ORACLE_SAMPLES: u64 = 1 << 24;

/// What the flight's meshes are judged against.
enum Oracle {
    /// A terrain of any size without detail: the crack checker on the mesh the pool draws,
    /// the error oracle over level 0 read one tile at a time
    /// ([`measure_error_by_windows_skipping`]: the same maxima as over the whole level), so
    /// the oracle holds a few tiles, not the terrain; a tile it cannot read is left out of
    /// that frame's measure, and counted.
    Windowed,
    /// With procedural detail: the finest level as drawn, generated whole in memory.
    Whole(Heightfield),
}

/// One frame of a streamed flight.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct StreamFrame {
    pub select_ms: f64,
    pub triangles: u64,
    /// Blocks (`streamed`) or nodes (`streamed-quadtree`) drawn: the JSON names them so.
    #[serde(skip)]
    pub drawn: u64,
    /// Of them, drawn coarser than wanted because a tile was not resident.
    #[serde(skip)]
    pub held_back: u64,
    pub resident_bytes: u64,
    /// Procedural detail tiles held (`--detail-levels`).
    pub detail_bytes: u64,
    pub measured_px: Option<f64>,
    /// Samples whose true point is in view on a measured frame (what the oracle visited).
    pub measured_samples: Option<u64>,
    /// Level-0 samples the oracle left out on a measured frame: those of tiles it could
    /// not read (the flight drew a coarser level there).
    pub unreadable_samples: Option<u64>,
}

impl StreamFrame {
    /// The frame as JSON, its counts named in the algorithm's units (`blocks_drawn`…).
    fn to_json(self, unit: &str) -> serde_json::Result<serde_json::Value> {
        let mut value = serde_json::to_value(self)?;
        value[format!("{unit}_drawn")] = self.drawn.into();
        value[format!("{unit}_held_back")] = self.held_back.into();
        Ok(value)
    }
}

pub fn run(args: &BenchArgs, name: &str, dir: &Path) -> anyhow::Result<()> {
    let terrain = StreamedTerrain::open(dir, &args.terrain)?;
    let tiled = &terrain.tiled;
    let plan = &terrain.plan;
    let wants_oracle = args.check || args.measure_every > 0;
    let oracle = if !wants_oracle {
        None
    } else if args.stream.detail_levels == 0 {
        Some(Oracle::Windowed)
    } else {
        let bar = progress::spinner("assembling the finest level for the oracles");
        let field = terrain.finest_field(&args.stream, ORACLE_SAMPLES);
        bar.finish_and_clear();
        match field {
            Ok(field) => Some(Oracle::Whole(field)),
            Err(error) => {
                eprintln!("oracles off: {error:#}");
                None
            }
        }
    };
    let poses = match (&args.path, args.speed) {
        (Some(file), _) => path::read_path(file)?,
        (None, Some(speed)) => {
            path::constant_speed_flight(plan, args.frames as usize, speed / args.fps, args.altitude)
        }
        (None, None) => path::default_path(plan, args.frames as usize),
    };
    let cameras = cameras(args, plan, &poses)?;
    // The flight selects with the inner algorithm (whose stream statistics it reads) and
    // prints the failed tiles through the progress bar (`report_with`).
    // Preprocessing: the tile cache started, and algorithm A's tree built from the tiles.
    let building = Instant::now();
    let page_file = args.algorithm.page_file.as_deref();
    let mut algorithm = terrain.algorithm(
        name,
        &args.stream,
        args.algorithm.options(),
        page_file,
        &to_stderr,
    )?;
    let build_ms = building.elapsed().as_secs_f64() * 1e3;
    let bar = progress::bar(poses.len() as u64, "streamed over the path");
    let mut frames = Vec::with_capacity(poses.len());
    let mut defective = args.check.then_some(0usize);
    // A --speed flight runs in real time: frame i starts no earlier than i / fps after the
    // first, so the loaders get the wall time a real flight gives them (unpaced, the whole
    // flight would pass in a fraction of a second and every tile would look late).
    let frame_time = args
        .speed
        .map(|_| Duration::from_secs_f64(1.0 / f64::from(args.fps)));
    let start = Instant::now();
    // The oracles' time is taken out of the schedule: the flight after a measured frame
    // goes on as if the frame had taken its own time only.
    let mut judged = Duration::ZERO;
    for (i, camera) in cameras.iter().enumerate() {
        if let Some(frame_time) = frame_time
            && let Some(wait) =
                (start + judged + frame_time * i as u32).checked_duration_since(Instant::now())
        {
            std::thread::sleep(wait);
        }
        let view = View::screen(*camera, args.pixel_error)?;
        let selection = algorithm.0.select(&view);
        let measure = args.measure_every > 0 && i.is_multiple_of(args.measure_every as usize);
        // The largest projected error of a measured frame and the samples in view.
        let mut measured: Option<(f64, u64)> = None;
        // On a frame measured by tiles: the samples of the tiles the oracle could not read.
        let mut unread: Option<u64> = None;
        let judging = Instant::now();
        if let Some(oracle) = &oracle
            && (measure || args.check)
        {
            let mesh = match oracle {
                Oracle::Whole(field) => selection.to_mesh(field),
                Oracle::Windowed => selection
                    .to_mesh_as_carried()
                    .context("a streamed selection draws from its pool")?,
            };
            if measure {
                measured = match oracle {
                    Oracle::Whole(field) => measure_error(field, &mesh, Some(camera))
                        .with_context(|| format!("measuring frame {i}"))?
                        .projected
                        .map(|p| (p.max, p.in_view)),
                    Oracle::Windowed => {
                        bar.set_message(format!("measuring frame {i}"));
                        let measured = measure_by_tiles(tiled, &mesh, camera);
                        bar.set_message("");
                        match measured {
                            Ok((measured, unreadable)) => {
                                if let Some((samples, count, first)) = &unreadable {
                                    // The flight drew a coarser level over those tiles;
                                    // the rest of the frame is measured.
                                    bar.suspend(|| {
                                        eprintln!(
                                            "frame {i}: measured without {count} unreadable \
                                             windows of level 0 ({samples} samples, a \
                                             window a tile), first: {first}"
                                        );
                                    });
                                }
                                unread = Some(unreadable.map_or(0, |(samples, ..)| samples));
                                measured
                            }
                            Err(error) => {
                                bar.suspend(|| {
                                    eprintln!("frame {i}: not measured: {error}");
                                });
                                None
                            }
                        }
                    }
                };
            }
            if let Some(count) = defective.as_mut() {
                let report = check_mesh(&mesh, None);
                if !report.is_watertight() {
                    *count += 1;
                    eprintln!(
                        "frame {i}: {} defects, first: {}",
                        report.defects().len(),
                        report.defects().first().map_or("", String::as_str)
                    );
                }
            }
        }
        judged += judging.elapsed();
        let stats = *algorithm.0.stats();
        let stream = algorithm.0.stream_counts();
        algorithm.report_with(|line| bar.suspend(|| eprintln!("frame {i}: {line}")));
        frames.push(StreamFrame {
            select_ms: stats.select_time.as_secs_f64() * 1e3,
            triangles: stats.triangles,
            drawn: stream.drawn,
            held_back: stream.held_back,
            resident_bytes: algorithm.0.source().inner().stats().resident_bytes,
            detail_bytes: algorithm.0.source().stats().bytes,
            measured_px: measured.map(|(px, _)| px),
            measured_samples: measured.map(|(_, samples)| samples),
            unreadable_samples: unread,
        });
        bar.inc(1);
    }
    bar.finish_and_clear();
    report(
        args,
        dir,
        &header_line(tiled, algorithm.0.source()),
        &*algorithm.0,
        build_ms,
        &frames,
        defective,
    )
}

/// The largest projected error of `mesh` for `camera` over level 0 of `tiled`, read one
/// tile at a time (0 when no sample is in view, as the whole oracle says), and the samples
/// in view; the tiles that cannot be read are left out, and counted: their samples, how
/// many, and the first one's error.
fn measure_by_tiles(
    tiled: &TiledTerrain,
    mesh: &GridMesh,
    camera: &Camera,
) -> Result<MeasuredByTiles, WindowedMeasureError<TileError>> {
    let header = tiled.header();
    let (report, unreadable) = measure_error_by_windows_skipping(
        (header.width, header.height),
        tiled.level_mapping(0),
        header.tile_cells,
        mesh,
        Some(camera),
        |window| {
            let Window {
                origin,
                width,
                height,
            } = window;
            tiled.window_heightfield(0, [origin.col, origin.row, width, height], u64::MAX)
        },
    )?;
    let unreadable = unreadable.first().map(|(_, first)| {
        (
            report.unreadable_samples,
            unreadable.len(),
            first.to_string(),
        )
    });
    Ok((report.projected.map(|p| (p.max, p.in_view)), unreadable))
}

/// What [`measure_by_tiles`] found: the largest error and the samples in view, and the
/// unreadable windows' samples, count and first error (a window is a tile, the last of a
/// row or column wider when the data's cells are not a whole number of tiles).
type MeasuredByTiles = (Option<(f64, u64)>, Option<(u64, usize, String)>);

/// The terrain as flown: the stored sizes, and the detail grid's when detail is added.
fn header_line(tiled: &TiledTerrain, tiles: &DetailTiles<TileCache>) -> String {
    let h = tiled.header();
    let mut line = format!(
        "{}: {} x {} samples, {} levels, {}-cell tiles",
        tiled.dir().display(),
        h.width,
        h.height,
        h.levels.len(),
        h.tile_cells
    );
    let levels = tiles.options().levels;
    if levels > 0 {
        let drawn = tiles.header();
        line += &format!(
            ", {levels} detail levels below ({} x {} samples, {} m cells)",
            drawn.width, drawn.height, drawn.mapping.cell_size
        );
    }
    line
}

fn report(
    args: &BenchArgs,
    dir: &Path,
    header: &str,
    algorithm: &StreamingAlgorithm,
    build_ms: f64,
    frames: &[StreamFrame],
    defective: Option<usize>,
) -> anyhow::Result<()> {
    let spread = |f: fn(&StreamFrame) -> f64| Spread::of(&frames.iter().map(f).collect::<Vec<_>>());
    let cache = algorithm.source().inner().stats();
    let detail = algorithm.source().stats();
    let measured: Vec<f64> = frames.iter().filter_map(|f| f.measured_px).collect();
    let unit = algorithm.stream_counts().unit;
    let reads = algorithm.reads();
    let summary = serde_json::json!({
        "terrain": dir.display().to_string(),
        "algorithm": algorithm.name(),
        "build_ms": build_ms,
        "state_mb": algorithm.state_bytes() as f64 / f64::from(1 << 20),
        "frames": frames.len(),
        "pixel_error": args.pixel_error,
        "cache_mb": args.stream.cache_bytes() >> 20,
        "paced_fps": args.speed.map(|_| args.fps),
        "select_ms": spread(|f| f.select_ms),
        "triangles": spread(|f| f.triangles as f64),
        format!("{unit}_drawn"): spread(|f| f.drawn as f64),
        format!("frames_with_{unit}_held_back"): frames.iter().filter(|f| f.held_back > 0).count(),
        "resident_mb": spread(|f| f.resident_bytes as f64 / f64::from(1 << 20)),
        "cache": {
            "budget_mb": algorithm.source().inner().budget_bytes() as f64 / f64::from(1 << 20),
            "peak_resident_mb": cache.peak_bytes as f64 / f64::from(1 << 20),
            "loads": cache.loads_finished,
            "requests": cache.requests,
            "hits": cache.hits,
            "misses": cache.misses,
            "evicted": cache.tiles_evicted,
            // A view wanting more than the budget: refused, not thrashed (`TileCache`).
            "requests_over_budget": cache.requests_over_budget,
            "loads_over_budget": cache.loads_over_budget,
            "failed_tiles": cache.failures,
            "bytes_read": cache.bytes_read,
            "longest_begin_frame_ms": cache.longest_begin_frame.as_secs_f64() * 1e3,
            "longest_tile_heights_ms": cache.longest_tile_heights.as_secs_f64() * 1e3,
        },
        "detail": {
            "levels": algorithm.source().options().levels,
            "peak_mb": detail.peak_bytes as f64 / f64::from(1 << 20),
            "generated_tiles": detail.generated,
            "dropped_tiles": detail.dropped,
            "mb": spread(|f| f.detail_bytes as f64 / f64::from(1 << 20)),
        },
        // Algorithm A's pages, read from its page file beside the tiles (zero for the
        // algorithms whose every read is a tile's, above).
        "background_reads": {
            "loaded": reads.loaded,
            "failed": reads.failed,
            "bytes_read": reads.bytes_read,
        },
        "peak_process_mb": peak_resident_bytes().map(|b| b as f64 / f64::from(1 << 20)),
        "measured_max_px": measured.iter().copied().reduce(f64::max),
        "measured_frames": measured.len(),
        // Of them, those measured without the level-0 windows (tiles) the oracle could not
        // read.
        "frames_with_unreadable_windows_left_out": frames
            .iter()
            .filter(|f| f.unreadable_samples.is_some_and(|samples| samples > 0))
            .count(),
        "defective_frames": defective,
    });
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{header}, {} frames, tau = {} px",
        frames.len(),
        args.pixel_error
    )?;
    writeln!(out, "{}", serde_json::to_string_pretty(&summary)?)?;
    if let Some(path) = &args.json {
        let mut full = summary.clone();
        full["per_frame"] = frames
            .iter()
            .map(|f| f.to_json(unit))
            .collect::<serde_json::Result<Vec<_>>>()?
            .into();
        let staged = crate::staged::StagedFiles::default();
        write_json(&staged, path, &full)?;
        staged.commit().context("writing the outputs")?;
    }
    writeln!(out, "{summary}")?;
    Ok(())
}
