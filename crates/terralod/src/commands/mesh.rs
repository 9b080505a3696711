//! `terralod mesh`: select a mesh with an LOD algorithm for a camera (or a world error) and
//! export it exactly as it would be drawn (feature H7).

use crate::camera_args::CameraArgs;
use crate::detail_args::build_algorithm;
use crate::lod_args::LodArgs;
use crate::stream_args::{SETTLE_LIMIT, StreamArgs, StreamedTerrain, settle, streams};
use crate::terrain_args::TerrainArgs;
use anyhow::{Context, bail};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use terralod_core::lod::{AlgorithmEntry, LodAlgorithm, SelectionStats, Tolerance};
use terralod_core::simplify::simplify;
use terralod_core::tiles::TileSource;
use terralod_core::{GridMesh, Heightfield, Pyramid, WorldMapping, io};

#[derive(Debug, Args)]
pub struct MeshArgs {
    #[command(flatten)]
    pub terrain: TerrainArgs,
    #[command(flatten)]
    pub lod: LodArgs,
    #[command(flatten)]
    pub camera: CameraArgs,
    /// Write the mesh in world coordinates: .obj (text) or .ply (binary little-endian).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// With --max-error: remove vertices from the selected mesh while every sample stays
    /// within the max error (an export pass, slower than the selection; fewer vertices).
    #[arg(long, requires = "max_error")]
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
    let entry = args.lod.entry()?;
    let format = args.out.as_deref().map(mesh_format).transpose()?;
    if args.lod.max_error.is_some() && args.camera.any_given() {
        bail!("--max-error is view-independent: it takes no camera flags");
    }
    let streamed = streams(args.terrain.file.as_deref(), entry.name);
    args.stream.refuse_detail_unless(streamed.is_some())?;
    let detail = args
        .lod
        .algorithm
        .detail
        .load(entry.name, args.terrain.max_samples)?;
    let selected = match streamed {
        Some(dir) => select_streamed(args, dir)?,
        None => select_loaded(args, entry, detail.as_ref())?,
    };
    let Selected {
        mesh,
        stats,
        state_bytes,
        mapping,
        tolerance,
        cull,
        extra,
    } = selected;
    if let (Some(path), Some(format)) = (&args.out, format) {
        write_mesh(path, format, &mesh, &mapping)
            .with_context(|| format!("writing {}", path.display()))?;
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
        "cull": cull,
        "view_angle_aware": args.lod.algorithm.view_angle_aware,
        "state_bytes": state_bytes,
    });
    if let Some((key, value)) = extra {
        summary[key] = value;
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
    /// One more entry of the summary (`simplify` or `streamed`).
    extra: Option<(&'static str, serde_json::Value)>,
}

/// Loads the terrain whole and selects (then simplifies, with --simplify), with the local
/// detail `detail_field` inserted when given.
fn select_loaded(
    args: &MeshArgs,
    entry: &AlgorithmEntry,
    detail_field: Option<&Heightfield>,
) -> anyhow::Result<Selected> {
    let terrain = args.terrain.load()?;
    let field = &terrain.heightfield;
    let detail = detail_field
        .map(|d| args.lod.algorithm.detail.place(field, d))
        .transpose()?;
    if detail.is_some() && args.simplify {
        bail!("--simplify checks the terrain's own samples: it does not apply with --detail");
    }
    let view = args.lod.view(|| args.camera.camera(field), None)?;
    let pyramid = Pyramid::build(field);
    let mut algorithm =
        build_algorithm(entry, field, &pyramid, &args.lod.options(), detail.as_ref())?;
    // The first frame grows the buffers; the second is the steady-state cost we report.
    algorithm.select(&view);
    let selection = algorithm.select(&view);
    let mut mesh = selection.to_mesh(field);
    let stats = *algorithm.stats();
    let mut extra = detail.as_ref().map(|d| {
        (
            "detail",
            serde_json::json!({
                "cell_size": d.cell_size(),
                "subdivision": 1u32 << d.shift(),
                "footprint": d.footprint(),
            }),
        )
    });
    // Vertices on the grid subdivided for the detail (world x, z from its cell size).
    let mapping = WorldMapping {
        cell_size: detail.map_or(field.mapping().cell_size, |d| d.cell_size()),
        ..field.mapping()
    };
    if let Some(max_error) = args.lod.max_error.filter(|_| args.simplify) {
        let start = Instant::now();
        let (simplified, simplify_stats) = simplify(field, &mesh, f64::from(max_error))
            .context("simplifying the selected mesh")?;
        mesh = simplified;
        extra = Some((
            "simplify",
            serde_json::json!({
                "vertices_before": simplify_stats.vertices_before,
                "collapses": simplify_stats.collapses,
                "simplify_ms": start.elapsed().as_secs_f64() * 1e3,
            }),
        ));
    }
    Ok(Selected {
        mesh,
        stats,
        state_bytes: algorithm.state_bytes(),
        mapping,
        tolerance: view.tolerance(),
        cull: view.cull(),
        extra,
    })
}

/// Streams an imported directory through the tile cache (`--algo streamed`): selects until
/// every tile the view asks for is resident (or failed, reported), then exports the mesh
/// drawn from the pool, with no heightfield of the whole terrain in memory.
fn select_streamed(args: &MeshArgs, dir: &Path) -> anyhow::Result<Selected> {
    if args.simplify {
        bail!(
            "{}: --simplify needs the whole terrain in memory; it does not apply to a \
             streamed directory",
            dir.display()
        );
    }
    let terrain = StreamedTerrain::open(dir, &args.terrain)?;
    let view = args.lod.view(|| args.camera.camera(&terrain.plan), None)?;
    let mut algorithm = terrain.algorithm(&args.stream, args.lod.options())?;
    let selections = settle(&mut algorithm, &view, SETTLE_LIMIT)?;
    let selection = algorithm.select(&view);
    let mesh = selection
        .to_mesh_from_pool()
        .context("the streamed selection draws from its pool")?;
    let stream = *algorithm.0.stream_stats();
    let tiles = algorithm.0.source();
    let (cache, detail) = (tiles.inner().stats(), tiles.stats());
    Ok(Selected {
        mesh,
        stats: *algorithm.stats(),
        state_bytes: algorithm.state_bytes(),
        // The drawn grid's: finer than the stored one with detail levels.
        mapping: tiles.header().mapping,
        tolerance: view.tolerance(),
        cull: view.cull(),
        extra: Some((
            "streamed",
            serde_json::json!({
                "selections_to_settle": selections + 1,
                "blocks_drawn": stream.blocks_drawn,
                "blocks_held_back": stream.blocks_held_back,
                "tiles_resident": cache.resident_tiles,
                "resident_bytes": cache.resident_bytes,
                "failed_tiles": cache.failures,
                "detail_levels": tiles.options().levels,
                "detail_tiles": detail.tiles,
                "detail_bytes": detail.bytes,
            }),
        )),
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
    io::write_file_atomically(path, |mut out| match format {
        MeshFormat::Obj => write_obj(&mut out, mesh, mapping),
        MeshFormat::Ply => write_ply(&mut out, mesh, mapping),
    })?;
    Ok(())
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
