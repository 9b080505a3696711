//! `terralod mesh`: select a mesh with an LOD algorithm for a camera (or a world error) and
//! export it exactly as it would be drawn (feature H7).

use crate::camera_args::CameraArgs;
use crate::terrain_args::TerrainArgs;
use anyhow::{Context, bail};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use terralod_core::lod::{self, LodOptions, View};
use terralod_core::{GridMesh, Pyramid, WorldMapping, io};

#[derive(Debug, Args)]
pub struct MeshArgs {
    #[command(flatten)]
    pub terrain: TerrainArgs,
    /// LOD algorithm, by its registry name (quadtree).
    #[arg(long, default_value = "quadtree")]
    pub algo: String,
    /// View-dependent: projected error at most this many pixels (needs --eye, --target).
    #[arg(long, value_name = "PX", allow_negative_numbers = true)]
    pub pixel_error: Option<f32>,
    /// View-independent: every sample within this vertical world distance of the mesh,
    /// the whole terrain covered, no culling.
    #[arg(long, value_name = "M", allow_negative_numbers = true)]
    pub max_error: Option<f32>,
    #[command(flatten)]
    pub camera: CameraArgs,
    /// Keep the nodes outside the view (drawn, but not refined for the view).
    #[arg(long)]
    pub no_cull: bool,
    /// Use the view-angle-aware screen error (article 000), still a true bound.
    #[arg(long)]
    pub view_angle_aware: bool,
    /// Write the mesh in world coordinates: .obj (text) or .ply (binary little-endian).
    #[arg(long)]
    pub out: Option<PathBuf>,
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
    let entry = lod::find(&args.algo).with_context(|| {
        format!(
            "unknown algorithm '{}' (available: {})",
            args.algo,
            lod::names()
        )
    })?;
    let format = args.out.as_deref().map(mesh_format).transpose()?;
    let terrain = args.terrain.load()?;
    let field = &terrain.heightfield;
    let view = match (args.pixel_error, args.max_error) {
        (Some(_), Some(_)) => bail!("give either --pixel-error or --max-error, not both"),
        (None, None) => bail!("give --pixel-error PX (with --eye, --target) or --max-error M"),
        (Some(px), None) => {
            let camera = args.camera.camera(field)?;
            View::screen(camera, px)
                .context("--pixel-error")?
                .with_cull(!args.no_cull)
        }
        (None, Some(m)) => {
            if args.camera.any_given() || args.no_cull {
                bail!("--max-error is view-independent: it takes no camera flags and no --no-cull");
            }
            View::world_error(m).context("--max-error")?
        }
    };
    let pyramid = Pyramid::build(field);
    let options = LodOptions::default().with_view_angle_aware(args.view_angle_aware);
    let mut algorithm = (entry.build)(field, &pyramid, &options);
    // The first frame grows the buffers; the second is the steady-state cost we report.
    algorithm.select(&view);
    let selection = algorithm.select(&view);
    let mesh = selection.to_mesh(field);
    let stats = *algorithm.stats();
    if let (Some(path), Some(format)) = (&args.out, format) {
        write_mesh(path, format, &mesh, &field.mapping())
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
    let summary = serde_json::json!({
        "algorithm": entry.name,
        "vertices": mesh.positions.len(),
        "triangles": mesh.triangles.len(),
        "nodes_visited": stats.nodes_visited,
        "nodes_drawn": stats.nodes_drawn,
        "select_ms": stats.select_time.as_secs_f64() * 1e3,
        "tolerance": view.tolerance(),
        "cull": view.cull(),
        "view_angle_aware": args.view_angle_aware,
        "state_bytes": algorithm.state_bytes(),
    });
    // `writeln!`, not `println!`, which panics when stdout is a closed pipe or full.
    let mut out = std::io::stdout().lock();
    writeln!(out, "{headline}\n{summary}")
        .and_then(|()| out.flush())
        .context("cannot write to standard output")
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
