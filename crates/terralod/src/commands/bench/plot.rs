//! SVG plots of a benchmark run (plotters' SVG backend: no system fonts needed).

use super::{AlgorithmRun, path::Pose};
use crate::staged::StagedFiles;
use anyhow::Context;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// What draws a plot on its SVG area.
type Draw<'a> =
    dyn FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), Box<dyn std::error::Error>> + 'a;

/// Draws an SVG of `size` pixels in memory, then stages it for `path` (a full disk or a
/// failed plot leaves no partial file; the run's outputs appear together).
fn write_svg(
    out: &StagedFiles,
    path: &Path,
    size: (u32, u32),
    draw: Box<Draw<'_>>,
) -> anyhow::Result<()> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw(&root)
            .and_then(|()| root.present().map_err(Into::into))
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("drawing {}", path.display()))?;
    }
    out.write(path, |file| file.write_all(svg.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))
}

const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Triangles and selection time per frame along the path, one line per algorithm.
pub fn along_path(
    out: &StagedFiles,
    dir: &Path,
    runs: &[AlgorithmRun],
    poses: &[Pose],
) -> anyhow::Result<()> {
    line_chart(
        out,
        &dir.join("triangles.svg"),
        "Triangles per frame along the path",
        "triangles",
        runs,
        poses.len(),
        |f| f.triangles as f64,
    )?;
    line_chart(
        out,
        &dir.join("select-time.svg"),
        "Selection time per frame along the path",
        "ms",
        runs,
        poses.len(),
        |f| f.select_ms,
    )
}

fn line_chart(
    out: &StagedFiles,
    path: &Path,
    title: &str,
    unit: &str,
    runs: &[AlgorithmRun],
    frames: usize,
    value: fn(&super::FrameRecord) -> f64,
) -> anyhow::Result<()> {
    let max = runs
        .iter()
        .flat_map(|r| r.frames.iter().map(value))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    write_svg(
        out,
        path,
        (960, 480),
        Box::new(|root| {
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(root)
                .caption(title, ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(64)
                .build_cartesian_2d(0usize..frames.max(1), 0.0..max * 1.05)?;
            chart
                .configure_mesh()
                .x_desc("frame (low flight, climb, orbit, turn in place)")
                .y_desc(unit)
                .draw()?;
            for (run, colour) in runs.iter().zip(COLOURS.iter().cycle()) {
                chart
                    .draw_series(LineSeries::new(
                        run.frames.iter().enumerate().map(|(i, f)| (i, value(f))),
                        colour,
                    ))?
                    .label(run.algorithm.as_str())
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour));
            }
            chart
                .configure_series_labels()
                .border_style(BLACK)
                .background_style(WHITE.mix(0.8))
                .draw()?;
            Ok(())
        }),
    )
}

/// Median selection time against terrain size (log-log), one line per algorithm.
pub fn scaling(out: &StagedFiles, dir: &Path, rows: &[(u32, AlgorithmRun)]) -> anyhow::Result<()> {
    let path = dir.join("scaling.svg");
    let sizes: Vec<f64> = rows.iter().map(|(s, _)| f64::from(*s)).collect();
    let (lo, hi) = sizes
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    let max_ms = rows
        .iter()
        .map(|(_, r)| r.select_ms.median)
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let mut algorithms: Vec<&str> = rows.iter().map(|(_, r)| r.algorithm.as_str()).collect();
    algorithms.dedup();
    write_svg(
        out,
        &path,
        (720, 480),
        Box::new(|root| {
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(root)
                .caption(
                    "Median selection time against terrain size",
                    ("sans-serif", 20),
                )
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(64)
                .build_cartesian_2d((lo * 0.8..hi * 1.25).log_scale(), 0.0..max_ms * 1.2)?;
            chart
                .configure_mesh()
                .x_desc("samples a side (same world extent)")
                .y_desc("ms")
                .draw()?;
            for (name, colour) in algorithms.iter().zip(COLOURS.iter().cycle()) {
                let points: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|(_, r)| r.algorithm == *name)
                    .map(|(s, r)| (f64::from(*s), r.select_ms.median))
                    .collect();
                chart
                    .draw_series(LineSeries::new(points.clone(), colour))?
                    .label(*name)
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour));
                chart.draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 4, colour.filled())),
                )?;
            }
            chart
                .configure_series_labels()
                .border_style(BLACK)
                .background_style(WHITE.mix(0.8))
                .draw()?;
            Ok(())
        }),
    )
}
