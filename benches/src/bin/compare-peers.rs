//! Side-by-side comparison (issue 5, item 3): terralod's view-independent mode (every
//! registered algorithm) against martini and delatin on `2^k + 1` grids cut from the shared
//! data, at max errors 1, 2, 5, 10, 20 and 50 m; every mesh measured by the testkit oracle.
//!
//! Run: `cargo run --release -p terralod-benches --bin compare-peers -- [--runs N]
//! [--quick] [--out DIR] [--max-errors 1,2,5] [--file PATH ... [--side N] [--cell-size M]
//! [--height-scale S] [--height-offset O]]`. `--file` (repeatable; any format `terralod`
//! loads) compares on those terrains instead of the shared data: each is cut to its
//! centred `N × N` window, `N = 2^k + 1` (default: the largest that fits), under the
//! file's own mapping or the flags'. Writes `DIR/peers-comparison.md` (tables),
//! `DIR/peers-comparison.json` (raw numbers) and `DIR/peers-vertices-vs-error.svg`
//! (vertices against measured error, log-log); `DIR` defaults to `docs`. `--quick` runs the
//! Boulder grid only. Timings are medians of `--runs` runs (default 3; 1 for a delatin run
//! over 5 s); terralod's pyramid and algorithm build are timed apart from the selection and
//! included in its total, as are martini's preprocessing and delatin's whole run.

use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use terralod_benches::peers::{
    MartiniTerrain, Measured, PeerError, calibrate_martini, cut_square, delatin_mesh, delatin_raw,
    interpolate_vertices, median_time, terralod_mesh, triangles_by_node_side, world_heights,
};
use terralod_benches::{load_boulder, load_gcanyon};
use terralod_core::heightfield::Heightfield;
use terralod_core::lod::{LodAlgorithm, LodOptions, REGISTRY, View};
use terralod_core::pyramid::Pyramid;
use terralod_core::simplify::simplify;

/// The max errors of the comparison (`--max-errors` replaces them).
const MAX_ERRORS: [f64; 6] = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0];
/// The algorithm whose mesh the simplification pass starts from, and the tool's name.
const SIMPLIFIED_SEED: &str = "bintree";
const SIMPLIFIED: &str = "bintree + simplify";
/// Bisection steps when searching a requested error whose measured error meets a bound.
const CALIBRATION_STEPS: u32 = 7;

/// One mesh of one tool, with its timings.
#[derive(Clone, Debug, serde::Serialize)]
struct Row {
    dataset: String,
    tool: String,
    #[serde(flatten)]
    measured: Measured,
    /// Preprocessing independent of the max error (terralod: algorithm build, plus the
    /// pyramid for the algorithms that read it; martini: coordinates + errors; delatin:
    /// none).
    prepare_ms: f64,
    /// The mesh for this max error (terralod: `select`; martini: `construct_mesh`;
    /// delatin: `triangulate`).
    mesh_ms: f64,
    total_ms: f64,
    /// Only for the calibrated rows: the bound the measured error was held to.
    #[serde(skip_serializing_if = "Option::is_none")]
    measured_bound: Option<f64>,
    /// terralod only: triangles by the side (cells) of the node that drew them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    triangles_by_node_side: Vec<(u32, usize)>,
}

#[derive(Debug, serde::Serialize)]
struct Report {
    command: String,
    threads: usize,
    max_errors: Vec<f64>,
    datasets: Vec<DatasetInfo>,
    rows: Vec<Row>,
}

#[derive(Clone, Debug, serde::Serialize)]
struct DatasetInfo {
    name: String,
    source: String,
    window: String,
    cell_size: f32,
    height_scale: f32,
    pyramid_ms: f64,
}

struct Options {
    runs: usize,
    quick: bool,
    out: PathBuf,
    max_errors: Vec<f64>,
    /// Terrains to compare on instead of the shared data.
    files: Vec<PathBuf>,
    /// Window side for `files` (`2^k + 1`); `None`: the largest that fits.
    side: Option<u32>,
    cell_size: Option<f32>,
    height_scale: Option<f32>,
    height_offset: Option<f32>,
}

const USAGE: &str = "usage: compare-peers [--runs N] [--quick] [--out DIR] [--max-errors \
                     M1,M2,...] [--file PATH ... [--side N] [--cell-size M] [--height-scale S] \
                     [--height-offset O]]";

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        runs: 3,
        quick: false,
        out: PathBuf::from("docs"),
        max_errors: MAX_ERRORS.to_vec(),
        files: Vec::new(),
        side: None,
        cell_size: None,
        height_scale: None,
        height_offset: None,
    };
    let mut args = std::env::args().skip(1);
    let number = |flag: &str, value: Option<String>| -> Result<f32, String> {
        let value = value.ok_or_else(|| format!("{flag} needs a number"))?;
        value
            .parse::<f32>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("{flag} {value}: not a finite number"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => options.quick = true,
            "--runs" => {
                let value = args.next().ok_or("--runs needs a number")?;
                options.runs = value
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("--runs {value}: not a positive number"))?;
            }
            "--out" => options.out = PathBuf::from(args.next().ok_or("--out needs a folder")?),
            "--max-errors" => {
                let value = args.next().ok_or("--max-errors needs a list, like 1,2,5")?;
                options.max_errors = value
                    .split(',')
                    .map(|m| {
                        m.trim()
                            .parse::<f64>()
                            .ok()
                            .filter(|m| m.is_finite() && *m > 0.0)
                    })
                    .collect::<Option<Vec<f64>>>()
                    .filter(|list| !list.is_empty())
                    .ok_or_else(|| {
                        format!("--max-errors {value}: not a list of positive numbers")
                    })?;
            }
            "--file" => options
                .files
                .push(PathBuf::from(args.next().ok_or("--file needs a path")?)),
            "--side" => {
                let value = args.next().ok_or("--side needs a number")?;
                options.side = Some(
                    value
                        .parse::<u32>()
                        .ok()
                        .filter(|n| *n >= 3 && (n - 1).is_power_of_two())
                        .ok_or_else(|| {
                            format!("--side {value}: not 2^k + 1 (3, 5, 9, ..., 513, ...)")
                        })?,
                );
            }
            "--cell-size" => options.cell_size = Some(number("--cell-size", args.next())?),
            "--height-scale" => options.height_scale = Some(number("--height-scale", args.next())?),
            "--height-offset" => {
                options.height_offset = Some(number("--height-offset", args.next())?)
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let file_flags = options.side.is_some()
        || options.cell_size.is_some()
        || options.height_scale.is_some()
        || options.height_offset.is_some();
    if options.files.is_empty() && file_flags {
        return Err("--side and the mapping flags apply to --file terrains".into());
    }
    Ok(options)
}

/// The centred `2^k + 1` window of a terrain given with `--file`, under its mapping or the
/// flags'.
fn file_dataset(
    options: &Options,
    path: &std::path::Path,
) -> Result<(String, String, String, Heightfield), Box<dyn std::error::Error>> {
    let loaded = terralod_core::io::load(path, &terralod_core::io::LoadOptions::default())?;
    let stated = loaded.heightfield.mapping();
    let mapping = terralod_core::heightfield::WorldMapping {
        cell_size: options.cell_size.unwrap_or(stated.cell_size),
        height_scale: options.height_scale.unwrap_or(stated.height_scale),
        height_offset: options.height_offset.unwrap_or(stated.height_offset),
    };
    let field = loaded.heightfield.with_mapping(mapping)?;
    let fits = field.width().min(field.height());
    let side = match options.side {
        Some(side) if side <= fits => side,
        Some(side) => {
            return Err(format!(
                "{}: --side {side} does not fit its {} x {} samples",
                path.display(),
                field.width(),
                field.height()
            )
            .into());
        }
        None if fits >= 3 => (1u32 << (31 - (fits - 1).leading_zeros())) + 1,
        None => return Err(format!("{}: smaller than 3 x 3 samples", path.display()).into()),
    };
    let (col, row) = ((field.width() - side) / 2, (field.height() - side) / 2);
    let grid = cut_square(&field, col, row, side)?;
    let stem = path
        .file_stem()
        .map_or("file".into(), |s| s.to_string_lossy().into_owned());
    Ok((
        format!("{stem}-{side}"),
        format!(
            "{} ({} m cells, {} m/unit, offset {} m)",
            path.display(),
            mapping.cell_size,
            mapping.height_scale,
            mapping.height_offset
        ),
        format!(
            "centre {side} x {side} (columns {col}..={}, rows {row}..={})",
            col + side - 1,
            row + side - 1
        ),
        grid,
    ))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let options = match parse_args() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("error: {message}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(error) = run(&options) {
        eprintln!("error: {error}");
        std::process::exit(1);
    }
}

fn run(options: &Options) -> Result<(), Box<dyn std::error::Error>> {
    let mut datasets: Vec<(String, String, String, Heightfield)> = Vec::new();
    for path in &options.files {
        datasets.push(file_dataset(options, path)?);
    }
    if options.files.is_empty()
        && let Some(field) = load_boulder()
    {
        let grid = cut_square(&field, 0, 0, 513)?;
        datasets.push((
            "boulder-513".into(),
            "srtm3_boulder_co_758.png (80 m, 0.1 m/unit)".into(),
            "top-left 513 x 513".into(),
            grid,
        ));
    }
    if options.files.is_empty()
        && !options.quick
        && let Some(field) = load_gcanyon()
    {
        let col = (field.width() - 2049) / 2;
        let grid = cut_square(&field, col, 0, 2049)?;
        datasets.push((
            "gcanyon-2049".into(),
            "gcanyon_4097x2049_8bit.png (60 m, 10 m/unit)".into(),
            "centre 2049 x 2049 (columns 1024..=3072)".into(),
            grid,
        ));
    }
    if datasets.is_empty() {
        eprintln!("SKIPPED: no shared data, nothing to compare");
        return Ok(());
    }
    let mut rows = Vec::new();
    let mut infos = Vec::new();
    for (name, source, window, field) in &datasets {
        eprintln!("== {name}");
        let pyramid_time = compare(name, field, options.runs, &options.max_errors, &mut rows)?;
        let mapping = field.mapping();
        infos.push(DatasetInfo {
            name: name.to_string(),
            source: source.to_string(),
            window: window.to_string(),
            cell_size: mapping.cell_size,
            height_scale: mapping.height_scale,
            pyramid_ms: ms(pyramid_time),
        });
    }
    let report = Report {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        max_errors: options.max_errors.clone(),
        datasets: infos,
        rows,
    };
    std::fs::create_dir_all(&options.out)?;
    let json = options.out.join("peers-comparison.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)?;
    let markdown = options.out.join("peers-comparison.md");
    let text = tables(&report);
    std::fs::write(&markdown, &text)?;
    let svg = options.out.join("peers-vertices-vs-error.svg");
    plot(&report, &svg)?;
    println!("{text}");
    eprintln!(
        "wrote {}, {} and {}",
        markdown.display(),
        json.display(),
        svg.display()
    );
    Ok(())
}

/// Runs every tool on one grid; returns the pyramid build time.
fn compare(
    dataset: &str,
    field: &Heightfield,
    runs: usize,
    max_errors: &[f64],
    rows: &mut Vec<Row>,
) -> Result<Duration, PeerError> {
    let row = |tool: &str, measured: Measured, prepare: Duration, mesh: Duration| Row {
        dataset: dataset.to_string(),
        tool: tool.to_string(),
        measured,
        prepare_ms: ms(prepare),
        mesh_ms: ms(mesh),
        total_ms: ms(prepare + mesh),
        measured_bound: None,
        triangles_by_node_side: Vec::new(),
    };
    let log = |r: &Row| {
        eprintln!(
            "{:<28} M {:>4}: {:>8} vertices, {:>8} triangles, measured {:>8.3} m, {:>9.2} ms",
            r.tool,
            r.measured.requested_error,
            r.measured.vertices,
            r.measured.triangles,
            r.measured.measured_max_error,
            r.total_ms
        )
    };

    // terralod: every registered algorithm; one that does not cover the whole grid in the
    // view-independent mode is reported and left out.
    let (pyramid_time, pyramid) = median_time(runs, || Pyramid::build(field));
    for entry in REGISTRY {
        // World-error views only: an algorithm may leave out what only screen views read.
        let options = LodOptions::default().with_world_error_only(true);
        let (build_time, mut algorithm) = median_time(runs, || {
            entry
                .build(field, &pyramid, &options)
                .expect("the registry builds it")
        });
        // The pyramid is charged to the algorithms that read it.
        let prepare = if entry.uses_pyramid {
            pyramid_time + build_time
        } else {
            build_time
        };
        if !algorithm.error_bounded() {
            eprintln!("{}: not error-bounded, left out", entry.name);
            continue;
        }
        for &m in max_errors {
            let view = View::world_error(m as f32)?;
            let (select_time, _) = median_time(runs, || algorithm.select(&view).triangle_count());
            let mesh = terralod_mesh(algorithm.as_mut(), field, m as f32)?;
            let measured = Measured::of(field, &mesh, m)?;
            if measured.uncovered > 0 {
                eprintln!(
                    "{}: {} samples uncovered at M {m}: no full-coverage view-independent mode",
                    entry.name, measured.uncovered
                );
                break;
            }
            let measured_at_m = measured.clone();
            let mut r = row(entry.name, measured, prepare, select_time);
            r.triangles_by_node_side = triangles_by_node_side(&mesh);
            log(&r);
            rows.push(r);

            if entry.name == SIMPLIFIED_SEED {
                // The exported-mesh pass: the seed's mesh, decimated within the same M.
                let (simplify_time, simplified) = median_time(runs, || simplify(field, &mesh, m));
                let (simplified, _) = simplified?;
                let r = row(
                    SIMPLIFIED,
                    Measured::of(field, &simplified, m)?,
                    prepare,
                    select_time + simplify_time,
                );
                log(&r);
                rows.push(r);
            }

            // The same hierarchy with a bound as tight as the oracle allows: the largest
            // requested error whose measured error stays within M (an estimate of what a
            // tighter drawn-error bound would give; not a guarantee terralod can make).
            let at = |algorithm: &mut dyn LodAlgorithm, requested: f64| {
                let mesh = terralod_mesh(algorithm, field, requested as f32)?;
                Measured::of(field, &mesh, requested)
            };
            let mut best = (measured_at_m.measured_max_error <= m).then_some(measured_at_m);
            let loosest = at(algorithm.as_mut(), 4.0 * m)?;
            if loosest.measured_max_error <= m {
                best = Some(loosest);
            } else {
                let (mut low, mut high) = (m, 4.0 * m);
                for _ in 0..CALIBRATION_STEPS - 2 {
                    let mid = 0.5 * (low + high);
                    let measured = at(algorithm.as_mut(), mid)?;
                    if measured.measured_max_error <= m {
                        low = mid;
                        best = Some(measured);
                    } else {
                        high = mid;
                    }
                }
            }
            if let Some(measured) = best {
                let mut r = row(
                    &format!("{} (tight-bound estimate)", entry.name),
                    measured,
                    Duration::ZERO,
                    Duration::ZERO,
                );
                r.measured_bound = Some(m);
                log(&r);
                rows.push(r);
            }
        }
    }

    // martini: preprocessing once (coordinates for the size, errors for the terrain).
    let heights = world_heights(field);
    let (martini_prepare, terrain) = median_time(runs, || MartiniTerrain::new(field, &heights));
    let mut terrain = terrain?;
    for &m in max_errors {
        let (mesh_time, _) = median_time(runs, || terrain.mesh_raw(m));
        let mesh = terrain.mesh(field, m);
        let r = row(
            "martini",
            Measured::of(field, &mesh, m)?,
            martini_prepare,
            mesh_time,
        );
        log(&r);
        rows.push(r);
        let calibrated = calibrate_martini(&mut terrain, field, m, CALIBRATION_STEPS)?;
        let mut r = row(
            "martini (measured <= M)",
            calibrated,
            martini_prepare,
            mesh_time,
        );
        r.measured_bound = Some(m);
        log(&r);
        rows.push(r);
    }

    // delatin: one call does everything.
    for &m in max_errors {
        let (first, raw) = median_time(1, || delatin_raw(field, &heights, m));
        let raw = raw?;
        let time = if first > Duration::from_secs(5) {
            first
        } else {
            median_time(runs, || delatin_raw(field, &heights, m)).0
        };
        let mesh = delatin_mesh(field, &raw);
        let r = row(
            "delatin",
            Measured::of(field, &mesh, m)?,
            Duration::ZERO,
            time,
        );
        log(&r);
        rows.push(r);
    }
    Ok(pyramid_time)
}

fn find<'a>(rows: &'a [Row], dataset: &str, tool: &str, m: f64) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.dataset == dataset && r.tool == tool && r.measured.requested_error == m)
}

fn find_bound<'a>(rows: &'a [Row], dataset: &str, tool: &str, m: f64) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.dataset == dataset && r.tool == tool && r.measured_bound == Some(m))
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "–".to_string()
    }
}

fn tables(report: &Report) -> String {
    let rows = &report.rows;
    let mut out = String::new();
    out += &format!(
        "Command: `{}`; {} hardware threads (rayon uses them for terralod's pyramid; martini \
         and delatin are single-threaded).\n\n",
        report.command, report.threads
    );
    for info in &report.datasets {
        let d = &info.name;
        out += &format!(
            "### {d}: {}, {}\n\nPyramid build: {:.1} ms (in the prepare time of the \
             algorithms that read it; not bintree's or streamed's).\n\n",
            info.source, info.window, info.pyramid_ms
        );
        out += "| M (m) | tool | vertices | triangles | measured max (m) | p99 (m) | prepare (ms) \
                | mesh (ms) | total (ms) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
        for &m in &report.max_errors {
            for r in rows.iter().filter(|r| {
                &r.dataset == d && r.measured.requested_error == m && r.measured_bound.is_none()
            }) {
                out += &format!(
                    "| {m} | {} | {} | {} | {:.3} | {:.3} | {:.1} | {:.1} | {:.1} |\n",
                    r.tool,
                    r.measured.vertices,
                    r.measured.triangles,
                    r.measured.measured_max_error,
                    r.measured.measured_p99_error,
                    r.prepare_ms,
                    r.mesh_ms,
                    r.total_ms
                );
            }
        }
        out += "\nAt equal measured error (every mesh measured ≤ M; martini's requested error \
                lowered by bisection until its measured error is ≤ M):\n\n";
        // The tools with meshes on this grid (those without a view-independent mode are
        // left out of the run, so of the tables).
        let names = REGISTRY.iter().map(|e| e.name).chain([SIMPLIFIED]);
        for name in names.filter(|&name| rows.iter().any(|r| &r.dataset == d && r.tool == name)) {
            let tight = format!("{name} (tight-bound estimate)");
            out += &format!(
                "| M (m) | {name} vertices | martini ≤ M vertices (requested) | delatin vertices \
                 | {name} / martini | {name} / delatin | {name} time / martini time | delatin \
                 time / {name} time | {name} tight-bound estimate vertices (requested) |\n\
                 | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
            );
            for &m in &report.max_errors {
                let (Some(t), Some(mc), Some(mr), Some(dl)) = (
                    find(rows, d, name, m),
                    find_bound(rows, d, "martini (measured <= M)", m),
                    find(rows, d, "martini", m),
                    find(rows, d, "delatin", m),
                ) else {
                    continue;
                };
                let tv = t.measured.vertices as f64;
                let tight_text = find_bound(rows, d, &tight, m).map_or("–".to_string(), |r| {
                    format!(
                        "{} ({:.3})",
                        r.measured.vertices, r.measured.requested_error
                    )
                });
                out += &format!(
                    "| {m} | {} | {} ({:.3}) | {} | {} | {} | {} | {} | {tight_text} |\n",
                    t.measured.vertices,
                    mc.measured.vertices,
                    mc.measured.requested_error,
                    dl.measured.vertices,
                    ratio(tv, mc.measured.vertices as f64),
                    ratio(tv, dl.measured.vertices as f64),
                    ratio(t.total_ms, mr.total_ms),
                    ratio(dl.total_ms, t.total_ms),
                );
            }
            out += &format!(
                "\nAt {name}'s own measured error (peers' vertices interpolated log-log between \
                 their measured points):\n\n| M (m) | {name} measured (m) | {name} vertices | \
                 martini vertices | delatin vertices | {name} / martini | {name} / delatin |\n\
                 | --- | --- | --- | --- | --- | --- | --- |\n"
            );
            let curve = |tool: &str| -> Vec<(f64, usize)> {
                rows.iter()
                    .filter(|r| &r.dataset == d && r.tool.starts_with(tool))
                    .map(|r| (r.measured.measured_max_error, r.measured.vertices))
                    .collect()
            };
            let (martini_curve, delatin_curve) = (curve("martini"), curve("delatin"));
            for &m in &report.max_errors {
                let Some(t) = find(rows, d, name, m) else {
                    continue;
                };
                let e = t.measured.measured_max_error;
                let tv = t.measured.vertices as f64;
                let mi = interpolate_vertices(&martini_curve, e);
                let di = interpolate_vertices(&delatin_curve, e);
                let show = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0}"));
                out += &format!(
                    "| {m} | {e:.3} | {} | {} | {} | {} | {} |\n",
                    t.measured.vertices,
                    show(mi),
                    show(di),
                    mi.map_or("–".to_string(), |v| ratio(tv, v)),
                    di.map_or("–".to_string(), |v| ratio(tv, v)),
                );
            }
            out += &format!(
                "\nWhere {name}'s triangles go (triangles by the side, in cells, of the node that \
                 drew them):\n\n| M (m) | by node side |\n| --- | --- |\n"
            );
            for &m in &report.max_errors {
                let Some(t) = find(rows, d, name, m) else {
                    continue;
                };
                let parts: Vec<String> = t
                    .triangles_by_node_side
                    .iter()
                    .map(|(side, n)| format!("{side}: {n}"))
                    .collect();
                out += &format!("| {m} | {} |\n", parts.join(", "));
            }
            out += "\n";
        }
    }
    out
}

/// Vertices against measured error, log-log, one line per tool per dataset.
fn plot(report: &Report, path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    // Series: (dataset, tool) → points sorted by error; calibrated rows join their tool's
    // curve only for martini (they are martini meshes too), the tight-bound estimate is its
    // own series.
    let mut series: BTreeMap<(String, String), Vec<(f64, f64)>> = BTreeMap::new();
    for r in &report.rows {
        let tool = if r.tool.starts_with("martini") {
            "martini".to_string()
        } else {
            r.tool.clone()
        };
        let (e, v) = (r.measured.measured_max_error, r.measured.vertices as f64);
        // Below a centimetre (f32 rounding of exact meshes) nothing is visible on this scale.
        if e >= 0.01 && v > 0.0 {
            series
                .entry((r.dataset.clone(), tool))
                .or_default()
                .push((e, v));
        }
    }
    for points in series.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points.dedup_by(|a, b| a.0 == b.0);
    }
    let all = series.values().flatten();
    let (mut e_min, mut e_max, mut v_min, mut v_max) = (f64::MAX, 0.0f64, f64::MAX, 0.0f64);
    for &(e, v) in all {
        e_min = e_min.min(e);
        e_max = e_max.max(e);
        v_min = v_min.min(v);
        v_max = v_max.max(v);
    }
    if e_max <= 0.0 {
        return Ok(());
    }
    let root = SVGBackend::new(path, (900, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Vertices against measured max vertical error",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (e_min * 0.8..e_max * 1.25).log_scale(),
            (v_min * 0.8..v_max * 1.25).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("measured max vertical error (m)")
        .y_desc("vertices")
        .x_label_formatter(&|e| format!("{e}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    let colour = |tool: &str| {
        if tool.starts_with("martini") {
            RGBColor(214, 39, 40)
        } else if tool.starts_with("delatin") {
            RGBColor(31, 119, 180)
        } else if tool.contains("simplify") {
            RGBColor(148, 103, 189)
        } else if tool.contains("tight") {
            RGBColor(150, 150, 150)
        } else {
            RGBColor(44, 160, 44)
        }
    };
    for ((dataset, tool), points) in &series {
        let c = colour(tool);
        let canyon = dataset.contains("canyon");
        let style = ShapeStyle::from(c).stroke_width(if canyon { 3 } else { 1 });
        chart
            .draw_series(LineSeries::new(points.iter().copied(), style))?
            .label(format!("{tool}, {dataset}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        if canyon {
            chart.draw_series(
                points
                    .iter()
                    .map(|&p| TriangleMarker::new(p, 5, ShapeStyle::from(c).filled())),
            )?;
        } else {
            chart.draw_series(
                points
                    .iter()
                    .map(|&p| Circle::new(p, 3, ShapeStyle::from(c).filled())),
            )?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()?;
    root.present()?;
    Ok(())
}
