//! `terralod mesh`: select a mesh with an LOD algorithm for a camera (or a world error) and
//! export it exactly as it would be drawn (feature H7).

use crate::camera_args::CameraArgs;
use crate::camera_path::{Pose, read_path};
use crate::detail_args::build_algorithm;
use crate::lod_args::LodArgs;
use crate::lod_args::settle_reads;
use crate::staged::StagedFiles;
use crate::stream_args::{
    SETTLE_LIMIT, StreamArgs, StreamedTerrain, check_page_file, settle, streams, to_stderr,
};
use crate::terrain_args::TerrainArgs;
use anyhow::{Context, bail};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use terralod_core::io::interrupt::Output;
use terralod_core::lod::{AlgorithmEntry, LodAlgorithm, SelectionStats, Tolerance, View};
use terralod_core::simplify::simplify;
use terralod_core::tiles::TileSource;
use terralod_core::{Camera, GridMesh, Heightfield, Pyramid, WorldMapping, io};

#[derive(Debug, Args)]
pub struct MeshArgs {
    #[command(flatten)]
    pub terrain: TerrainArgs,
    #[command(flatten)]
    pub lod: LodArgs,
    #[command(flatten)]
    pub camera: CameraArgs,
    /// Write the mesh in world coordinates: .obj (text) or .ply (binary little-endian).
    /// With --path, a name holding `{frame}` gets every frame's mesh (`{frame}` replaced by
    /// the frame's number, zero-padded); otherwise the last frame's.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A scripted camera walk, JSON as `bench --path` reads it (`[{"eye": [x, y, z],
    /// "target": [x, y, z]}, ...]`): one selection per pose in order, the algorithm's state
    /// carried from frame to frame as a running application draws them. --fov-y, --size,
    /// --near and --far apply to every pose; the summary is the last frame's, as walked
    /// (its select_ms included: no warm-up selection; with --page-frames the last frame
    /// is selected again until its pages are in, as a single view is).
    #[arg(long, value_name = "FILE.json", conflicts_with_all = ["eye", "target", "max_error"])]
    pub path: Option<PathBuf>,
    /// With --max-error: remove vertices from the selected mesh while every sample stays
    /// within the max error (an export pass, slower than the selection; fewer vertices).
    #[arg(long, requires = "max_error", conflicts_with_all = ["path", "pixel_error"])]
    pub simplify: bool,
    /// The tile cache, for `--algo streamed` over an imported directory.
    #[command(flatten)]
    pub stream: StreamArgs,
}

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MeshFormat {
    Obj,
    Ply,
}

fn mesh_format(path: &Path) -> anyhow::Result<MeshFormat> {
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match extension.as_str() {
        "obj" => Ok(MeshFormat::Obj),
        "ply" => Ok(MeshFormat::Ply),
        _ => bail!(
            "{}: unsupported mesh format '{extension}' (use .obj or .ply)",
            path.display()
        ),
    }
}

pub fn run(args: &MeshArgs) -> anyhow::Result<()> {
    let entry = args.lod.only_entry()?;
    let format = args.out.as_deref().map(mesh_format).transpose()?;
    if let Some(out) = &args.out {
        let detail = args.lod.algorithm.detail.detail.as_deref();
        args.terrain
            .refuse_as_output(out, [args.path.as_deref(), detail])?;
        // A per-frame pattern is checked frame by frame once the walk's length is known.
        if !names_frames(out) {
            terralod_core::io::check_destination(out)?;
        }
    }
    if args.lod.max_error.is_some() && args.camera.any_given() {
        bail!("--max-error is view-independent: it takes no camera flags");
    }
    let walk = args
        .path
        .as_deref()
        .map(|path| read_path(path).map(|poses| (path, poses)))
        .transpose()?;
    let frames = match (&args.out, format) {
        (Some(out), Some(format)) if names_frames(out) => {
            let Some((_, poses)) = &walk else {
                bail!(
                    "{}: `{{frame}}` in --out names one file per frame of a --path walk",
                    out.display()
                );
            };
            let files = FrameFiles {
                pattern: out,
                format,
                frames: poses.len(),
                staged: StagedFiles::default(),
                output: std::cell::OnceCell::new(),
            };
            for frame in 0..poses.len() {
                terralod_core::io::check_destination(&files.path(frame))?;
            }
            Some(files)
        }
        _ => None,
    };
    let walk = walk.as_ref().map(|(path, poses)| Walk {
        path,
        poses,
        frames: frames.as_ref(),
        held_back: std::cell::Cell::new(0),
    });
    let build = args.lod.algorithm.tree_build();
    let page_file = args.lod.algorithm.page_file.as_deref();
    check_page_file(&args.terrain, entry.name, build, page_file)?;
    let streamed = streams(&args.terrain, entry.name, build);
    args.stream.refuse_unless_streamed(streamed.is_some())?;
    let detail = args
        .lod
        .algorithm
        .detail
        .load(entry.name, args.terrain.max_samples)?;
    let selected = match streamed {
        Some(dir) => select_streamed(args, entry.name, dir, walk.as_ref()),
        None => select_loaded(args, entry, detail.as_ref(), walk.as_ref()),
    };
    // A complete walk moves its frames into place; one that fails part-way (or is
    // interrupted) takes back what it wrote, leaving the files that were there.
    let selected = selected?;
    if let Some(files) = &frames {
        if let Some(output) = files.output.get() {
            output.check()?;
        }
        files.staged.commit().context("writing the walk's frames")?;
    }
    let Selected {
        mesh,
        stats,
        state_bytes,
        mapping,
        tolerance,
        cull,
        extra,
        tolerance_held,
        data_end,
    } = selected;
    // Each frame of a walk draws what is in memory when it comes, as a viewer would: one
    // drawn while its pages or tiles were read does not hold the tolerance.
    let walk_held_back = walk.as_ref().map_or(0, |w| w.held_back.get());
    let tolerance_held = tolerance_held && walk_held_back == 0;
    // The export holds the data's ground as drawn, not the padding some algorithms draw
    // beyond it (which the renderer discards).
    let mesh = mesh.clipped_to(data_end);
    match (&args.out, format) {
        // Written frame by frame.
        _ if frames.is_some() => {}
        (Some(path), Some(format)) => write_mesh(path, format, &mesh, &mapping)
            .with_context(|| format!("writing {}", path.display()))?,
        _ => {}
    }
    let headline = format!(
        "{}: {} vertices, {} triangles, {} nodes visited, {:.3} ms{}",
        entry.name,
        mesh.positions.len(),
        mesh.triangles.len(),
        stats.nodes_visited,
        stats.select_time.as_secs_f64() * 1e3,
        args.out
            .as_ref()
            .map(|p| format!(", written to {}", p.display()))
            .unwrap_or_default()
    );
    let mut summary = serde_json::json!({
        "algorithm": entry.name,
        "vertices": mesh.positions.len(),
        "triangles": mesh.triangles.len(),
        "nodes_visited": stats.nodes_visited,
        "nodes_drawn": stats.nodes_drawn,
        "select_ms": stats.select_time.as_secs_f64() * 1e3,
        "tolerance": tolerance,
        "tolerance_held": tolerance_held,
        "cull": cull,
        "view_angle_aware": args.lod.algorithm.view_angle_aware,
        "state_bytes": state_bytes,
    });
    for (key, value) in extra {
        summary[key] = value;
    }
    if let Some(walk) = &walk {
        summary["path"] = serde_json::json!({
            "file": walk.path.display().to_string(),
            "frames": walk.poses.len(),
            "files_written": walk.frames.map_or(0, |f| f.frames),
            "frames_held_back": walk_held_back,
        });
        if walk_held_back > 0 {
            eprintln!(
                "{walk_held_back} frames of the walk drew ground coarser than the tolerance asks \
                 for while their {} were read (the last frame waited for them); \
                 \"tolerance_held\": false",
                if streamed.is_some() { "tiles" } else { "pages" }
            );
        }
    }
    // `writeln!`, not `println!`, which panics when stdout is a closed pipe or full.
    let mut out = std::io::stdout().lock();
    writeln!(out, "{headline}\n{summary}")
        .and_then(|()| out.flush())
        .context("cannot write to standard output")
}

/// A selected mesh and what the summary line reports of it.
struct Selected {
    mesh: GridMesh,
    stats: SelectionStats,
    state_bytes: usize,
    mapping: WorldMapping,
    tolerance: Tolerance,
    cull: bool,
    /// More entries of the summary (`detail`, `simplify`, `streamed`).
    extra: Vec<(&'static str, serde_json::Value)>,
    /// The data's last column and row on the mesh's grid: what lies beyond is padding,
    /// cut off the export ([`GridMesh::clipped_to`]).
    data_end: (u32, u32),
    /// Whether the mesh keeps the tolerance everywhere: not where a tile failed and a
    /// coarser level stands in, and never for a screen view of an algorithm that
    /// τ does not bound (chunked and patches by distance, adaptive built with a tolerance).
    tolerance_held: bool,
}

/// Whether `algorithm`'s selections for `view` keep its tolerance wherever their data is
/// in memory (a world-error view's M drives every algorithm).
fn keeps_tolerance(algorithm: &dyn LodAlgorithm, view: &View) -> bool {
    matches!(view.tolerance(), Tolerance::WorldError(_)) || algorithm.error_bounded()
}

/// A scripted camera walk (`--path`).
struct Walk<'a> {
    path: &'a Path,
    poses: &'a [Pose],
    /// Where every frame's mesh goes, if `--out` asks for each.
    frames: Option<&'a FrameFiles<'a>>,
    /// Frames written before the last that drew ground coarser than the tolerance asks
    /// for, their pages or tiles still being read (the last frame waits for them).
    held_back: std::cell::Cell<usize>,
}

impl Walk<'_> {
    /// The view of every pose, cameras made by `camera_at` (an error names the pose).
    fn views(
        &self,
        args: &MeshArgs,
        camera_at: impl Fn(&Pose) -> anyhow::Result<Camera>,
    ) -> anyhow::Result<Vec<View>> {
        self.poses
            .iter()
            .enumerate()
            .map(|(i, pose)| {
                args.lod.view(|| camera_at(pose), None).with_context(|| {
                    format!(
                        "{}: pose {i} (eye {:?}, target {:?})",
                        self.path.display(),
                        pose.eye,
                        pose.target
                    )
                })
            })
            .collect()
    }

    /// Whether every frame's mesh is written.
    fn writes_frames(&self) -> bool {
        self.frames.is_some()
    }

    /// Writes frame `frame`'s mesh when every frame is asked for.
    fn frame_done(
        &self,
        frame: usize,
        mesh: &GridMesh,
        mapping: &WorldMapping,
        data_end: (u32, u32),
    ) -> anyhow::Result<()> {
        let Some(files) = self.frames else {
            return Ok(());
        };
        // From the first frame on, an interruption takes the walk's frames back.
        match files.output.get() {
            Some(output) => output.check()?,
            None => {
                let _ = files.output.set(Output::begin()?);
            }
        }
        let path = files.path(frame);
        let trimmed = mesh.clone().clipped_to(data_end);
        // The path last, so the writer's own "path: reason" is not read twice.
        files
            .staged
            .write(&path, |out| {
                encode_mesh(out, files.format, &trimmed, mapping)
            })
            .with_context(|| format!("frame {frame}: writing {}", path.display()))?;
        Ok(())
    }
}

/// One mesh file per frame of a walk: `{frame}` in `pattern` becomes the frame's number.
struct FrameFiles<'a> {
    pattern: &'a Path,
    format: MeshFormat,
    frames: usize,
    /// The frames written so far, moved into place once the whole walk is written and
    /// removed if it fails, so a failed or interrupted walk leaves the files that were
    /// there as they were.
    staged: StagedFiles,
    /// Held from the first frame written (see `terralod_core::io::interrupt`).
    output: std::cell::OnceCell<Output>,
}

impl FrameFiles<'_> {
    fn path(&self, frame: usize) -> PathBuf {
        let width = (self.frames.max(1) - 1).to_string().len();
        let name = self.pattern.to_string_lossy();
        PathBuf::from(name.replace("{frame}", &format!("{frame:0width$}")))
    }
}

/// Whether an output path asks for one file per frame.
fn names_frames(path: &Path) -> bool {
    path.to_str().is_some_and(|p| p.contains("{frame}"))
}

/// The camera of a pose, lens and planes from the flags.
fn pose_camera(args: &MeshArgs, field: &Heightfield, pose: &Pose) -> anyhow::Result<Camera> {
    args.camera
        .camera_at(field, pose.eye.into(), pose.target.into())
}

/// Loads the terrain whole and selects (then simplifies, with --simplify), with the local
/// detail `detail_field` inserted when given.
fn select_loaded(
    args: &MeshArgs,
    entry: &AlgorithmEntry,
    detail_field: Option<&Heightfield>,
    walk: Option<&Walk<'_>>,
) -> anyhow::Result<Selected> {
    let terrain = args.terrain.load()?;
    let field = &terrain.heightfield;
    let detail = detail_field
        .map(|d| args.lod.algorithm.detail.place(field, d))
        .transpose()?;
    if detail.is_some() && args.simplify {
        bail!("--simplify checks the terrain's own samples: it does not apply with --detail");
    }
    let views = match walk {
        Some(walk) => walk.views(args, |pose| pose_camera(args, field, pose))?,
        None => vec![args.lod.view(|| args.camera.camera(field), None)?],
    };
    let pyramid = Pyramid::build(field);
    let mut algorithm =
        build_algorithm(entry, field, &pyramid, &args.lod.options(), detail.as_ref())?;
    // Vertices on the grid subdivided for the detail (world x, z from its cell size).
    let mapping = WorldMapping {
        cell_size: detail.map_or(field.mapping().cell_size, |d| d.cell_size()),
        ..field.mapping()
    };
    let shift = detail.as_ref().map_or(0, |d| d.shift());
    let data_end = ((field.width() - 1) << shift, (field.height() - 1) << shift);
    if walk.is_none() {
        // The first frame grows the buffers (and waits for the pages the view asks for);
        // the next is the steady-state cost we report.
        settle_reads(&mut *algorithm, &views[0], SETTLE_LIMIT)?;
    }
    let last = views.len() - 1;
    let mut mesh = GridMesh::default();
    let paged = args.lod.algorithm.page_frames.is_some_and(|n| n > 0);
    for (frame, view) in views.iter().enumerate() {
        // A walk's frames draw what is in memory when they come; the last one waits for
        // its pages, as a single view does.
        if let Some(walk) = walk.filter(|_| frame == last && paged) {
            settle_reads(&mut *algorithm, view, SETTLE_LIMIT)
                .with_context(|| format!("the last pose ({frame}) of {}", walk.path.display()))?;
        }
        let selection = algorithm.select(view);
        let wanted = frame == last || walk.is_some_and(Walk::writes_frames);
        let drawn = wanted.then(|| selection.to_mesh(field));
        // A split the pool refused leaves a patch coarser than the tolerance asks for.
        if let Some(pool) = algorithm.stats().patches.filter(|p| p.refused_splits > 0) {
            let at = walk.map_or(String::new(), |w| {
                format!(" at frame {frame} of {}", w.path.display())
            });
            bail!(
                "the pool of {} patches is exhausted{at}: the mesh would keep coarser patches \
                 than the tolerance asks for; raise --pool-capacity",
                pool.capacity
            );
        }
        if let Some(drawn) = drawn {
            if let Some(walk) = walk {
                walk.frame_done(frame, &drawn, &mapping, data_end)?;
                if frame < last && walk.writes_frames() && algorithm.reads().held_back > 0 {
                    walk.held_back.set(walk.held_back.get() + 1);
                }
            }
            mesh = drawn;
        }
    }
    let view = &views[last];
    let stats = *algorithm.stats();
    // Squares drawn coarser than wanted after the view settled: their pages failed.
    let reads = algorithm.reads();
    if reads.held_back > 0 {
        let _ = writeln!(
            std::io::stderr(),
            "{} squares drawn coarser for want of pages ({} pages could not be read), so the \
             tolerance is not held everywhere (\"tolerance_held\": false)",
            reads.held_back,
            reads.failed
        );
    }
    let mut extra: Vec<_> = detail
        .as_ref()
        .map(|d| {
            (
                "detail",
                serde_json::json!({
                    "cell_size": d.cell_size(),
                    "subdivision": 1u32 << d.shift(),
                    "footprint": d.footprint(),
                }),
            )
        })
        .into_iter()
        .collect();
    if let Some(max_error) = args.lod.max_error.filter(|_| args.simplify) {
        let start = Instant::now();
        // Cut to the data first: the collapses keep its border where it is.
        let mesh_in_data = mesh.clipped_to(data_end);
        let (simplified, simplify_stats) = simplify(field, &mesh_in_data, f64::from(max_error))
            .context("simplifying the selected mesh")?;
        mesh = simplified;
        extra.push((
            "simplify",
            serde_json::json!({
                "vertices_before": simplify_stats.vertices_before,
                "collapses": simplify_stats.collapses,
                "simplify_ms": start.elapsed().as_secs_f64() * 1e3,
            }),
        ));
    }
    Ok(Selected {
        data_end,
        mesh,
        stats,
        state_bytes: algorithm.state_bytes(),
        mapping,
        tolerance: view.tolerance(),
        cull: view.cull(),
        extra,
        tolerance_held: reads.held_back == 0
            && terrain.stood_in == 0
            && keeps_tolerance(&*algorithm, view),
    })
}

/// Streams an imported directory through the tile cache (`--algo streamed` or
/// `streamed-quadtree`): selects until every tile the view asks for is resident (or
/// failed, reported), then exports the mesh drawn from the pool, with no heightfield of
/// the whole terrain in memory.
fn select_streamed(
    args: &MeshArgs,
    entry_name: &str,
    dir: &Path,
    walk: Option<&Walk<'_>>,
) -> anyhow::Result<Selected> {
    if args.simplify {
        bail!(
            "{}: --simplify needs the whole terrain in memory; it does not apply to a \
             streamed directory",
            dir.display()
        );
    }
    let terrain = StreamedTerrain::open(dir, &args.terrain)?;
    let views = match walk {
        Some(walk) => walk.views(args, |pose| pose_camera(args, &terrain.plan, pose))?,
        None => vec![args.lod.view(|| args.camera.camera(&terrain.plan), None)?],
    };
    let page_file = args.lod.algorithm.page_file.as_deref();
    let mut algorithm = terrain.algorithm(
        entry_name,
        &args.stream,
        args.lod.options(),
        page_file,
        &to_stderr,
    )?;
    // The drawn grid's: finer than the stored one with detail levels.
    let header = algorithm.0.source().header();
    let (mapping, data_end) = (header.mapping, (header.width - 1, header.height - 1));
    let (last, before) = views.split_last().expect("at least one view");
    // A walk's frames draw what is resident when they come (tiles load meanwhile); the
    // last one waits until its tiles are in, as a single view does.
    for (frame, view) in before.iter().enumerate() {
        let selection = algorithm.select(view);
        if let Some(walk) = walk.filter(|w| w.writes_frames()) {
            let drawn = selection
                .to_mesh_as_carried()
                .context("the streamed selection draws from its pool")?;
            walk.frame_done(frame, &drawn, &mapping, data_end)?;
            if algorithm.0.stream_counts().held_back > 0 {
                walk.held_back.set(walk.held_back.get() + 1);
            }
        }
    }
    let view = last;
    let failed_before = algorithm.0.source().inner().stats().failures;
    let selections = settle(&mut algorithm, view, SETTLE_LIMIT).map_err(|e| match walk {
        Some(walk) => e.context(format!(
            "the last pose ({}) of {}",
            before.len(),
            walk.path.display()
        )),
        None => e,
    })?;
    let selection = algorithm.select(view);
    let mesh = selection
        .to_mesh_as_carried()
        .context("the streamed selection draws from its pool")?;
    if let Some(walk) = walk {
        walk.frame_done(before.len(), &mesh, &mapping, data_end)?;
    }
    let stream = algorithm.0.stream_counts();
    let tiles = algorithm.0.source();
    let (cache, detail) = (tiles.inner().stats(), tiles.stats());
    // Blocks drawn coarser than wanted: their tiles failed (now or at an earlier pose of a
    // walk; a failed tile is never asked for again) or were not resident.
    // For algorithm A built from the tiles, `held_back` counts the squares waiting for
    // pages; and the tiles that stood in while its tree was built are failed reads
    // (reported on stderr once each).
    let tolerance_held =
        stream.held_back == 0 && algorithm.reads().failed == 0 && keeps_tolerance(&algorithm, view);
    if stream.held_back > 0 {
        let failed = cache.failures - failed_before;
        eprintln!(
            "{}: {} {} drawn from a coarser level ({failed} tiles failed while this view \
             settled, {} in all), so the tolerance is not held everywhere \
             (\"tolerance_held\": false)",
            dir.display(),
            stream.held_back,
            stream.unit,
            cache.failures
        );
    }
    Ok(Selected {
        data_end,
        tolerance_held,
        mesh,
        stats: *algorithm.stats(),
        state_bytes: algorithm.state_bytes(),
        mapping,
        tolerance: view.tolerance(),
        cull: view.cull(),
        extra: vec![(
            "streamed",
            serde_json::json!({
                "selections_to_settle": selections + 1,
                format!("{}_drawn", stream.unit): stream.drawn,
                format!("{}_held_back", stream.unit): stream.held_back,
                "tiles_resident": cache.resident_tiles,
                "resident_bytes": cache.resident_bytes,
                "failed_tiles": cache.failures,
                "detail_levels": tiles.options().levels,
                "detail_tiles": detail.tiles,
                "detail_bytes": detail.bytes,
            }),
        )],
    })
}

/// World position of every vertex, as drawn.
fn world_positions(mesh: &GridMesh, mapping: &WorldMapping) -> impl Iterator<Item = [f32; 3]> {
    (0..mesh.positions.len() as u32).map(|i| mesh.world_position(i, mapping).to_array())
}

/// Writes the mesh atomically: to a temporary file next to `path`, renamed over it once
/// complete, removed on failure.
fn write_mesh(
    path: &Path,
    format: MeshFormat,
    mesh: &GridMesh,
    mapping: &WorldMapping,
) -> anyhow::Result<()> {
    io::write_file_atomically(path, |out| encode_mesh(out, format, mesh, mapping))?;
    Ok(())
}

/// The mesh in `format`, in world coordinates.
fn encode_mesh(
    mut out: &mut dyn Write,
    format: MeshFormat,
    mesh: &GridMesh,
    mapping: &WorldMapping,
) -> std::io::Result<()> {
    match format {
        MeshFormat::Obj => write_obj(&mut out, mesh, mapping),
        MeshFormat::Ply => write_ply(&mut out, mesh, mapping),
    }
}

/// Wavefront OBJ: `v x y z` in world units, faces 1-based, counter-clockwise seen from
/// above (normals up).
fn write_obj(out: &mut impl Write, mesh: &GridMesh, mapping: &WorldMapping) -> std::io::Result<()> {
    writeln!(
        out,
        "# terralod mesh: world coordinates, y up, faces counter-clockwise from above"
    )?;
    for [x, y, z] in world_positions(mesh, mapping) {
        writeln!(out, "v {x} {y} {z}")?;
    }
    for [a, b, c] in &mesh.triangles {
        writeln!(out, "f {} {} {}", a + 1, b + 1, c + 1)?;
    }
    Ok(())
}

/// Binary little-endian PLY: float x, y, z per vertex; a uchar-counted list of uint
/// indices per face, counter-clockwise seen from above.
fn write_ply(out: &mut impl Write, mesh: &GridMesh, mapping: &WorldMapping) -> std::io::Result<()> {
    write!(
        out,
        "ply\nformat binary_little_endian 1.0\ncomment terralod mesh: world coordinates, y up\n\
         element vertex {}\nproperty float x\nproperty float y\nproperty float z\n\
         element face {}\nproperty list uchar uint vertex_indices\nend_header\n",
        mesh.positions.len(),
        mesh.triangles.len()
    )?;
    for position in world_positions(mesh, mapping) {
        for v in position {
            out.write_all(&v.to_le_bytes())?;
        }
    }
    for triangle in &mesh.triangles {
        out.write_all(&[3])?;
        for i in triangle {
            out.write_all(&i.to_le_bytes())?;
        }
    }
    Ok(())
}
