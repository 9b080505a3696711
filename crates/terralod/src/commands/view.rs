//! `terralod view`: the interactive viewer (a window, a fly camera, an egui HUD; see
//! `crate::viewer`). `--frames N --screenshot FILE` draws N frames, saves the last, exits.

use crate::camera_args::CameraArgs;
use crate::commands::render::{check_png, load_texture};
use crate::lod_args::LodArgs;
use crate::look_args::LookArgs;
use crate::stream_args::{DrawnTerrain, StreamArgs, TreeBuild, builds_from_tiles, check_page_file};
use crate::terrain_args::{TerrainArgs, parse_positive};
use crate::viewer::{self, DebugViews, LodControls, ViewerConfig};
use anyhow::Context;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use terralod_core::Pyramid;
use terralod_core::lod::{Quality, REGISTRY, Tolerance};

#[derive(Debug, Args)]
pub struct ViewArgs {
    #[command(flatten)]
    pub terrain: TerrainArgs,
    #[command(flatten)]
    pub lod: LodArgs,
    #[command(flatten)]
    pub camera: CameraArgs,
    #[command(flatten)]
    pub look: LookArgs,
    /// Quality preset, a range for τ: high 0.5-1, medium 1-3, low 3-8 px.
    #[arg(long, value_parser = str::parse::<Quality>)]
    pub quality: Option<Quality>,
    /// Move τ within the preset's range to hold --target-ms.
    #[arg(long)]
    pub auto: bool,
    /// Frame time the automatic τ holds, in milliseconds.
    #[arg(long, default_value_t = 16.7, value_parser = parse_positive)]
    pub target_ms: f32,
    /// Start following the terrain (the eye stays above the ground).
    #[arg(long)]
    pub follow_terrain: bool,
    /// Start with the HUD hidden (H shows it).
    #[arg(long)]
    pub no_hud: bool,
    /// Wait for the display's refresh (frame times then show the refresh, not the cost).
    #[arg(long)]
    pub vsync: bool,
    /// Draw this many frames, then exit.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub frames: Option<u64>,
    /// PNG for screenshots: the last frame with --frames, else each P press.
    #[arg(long, value_name = "FILE")]
    pub screenshot: Option<PathBuf>,
    /// The tile cache, for `--algo streamed` over an imported directory.
    #[command(flatten)]
    pub stream: StreamArgs,
}

pub fn run(args: &ViewArgs) -> anyhow::Result<()> {
    let entry = args.lod.entry()?;
    if let Some(path) = &args.screenshot {
        check_png(path)?;
    }
    let event_loop = viewer::open_display()?;
    let texture = args.look.texture.as_deref().map(load_texture).transpose()?;
    let detail_field = args
        .lod
        .algorithm
        .detail
        .load(entry.name, args.terrain.max_samples)?;
    // `--algo streamed` over an imported directory streams it: the viewer then holds only
    // its planning level, and the other algorithms (switched to live) draw that level.
    // Algorithm A is built from the tiles only when asked to page (`--page-frames`, the
    // tree then built page by page at any size, once); otherwise from the loaded level,
    // where every algorithm draws the whole terrain.
    let build = match args.lod.algorithm.tree_build() {
        paged @ TreeBuild::Paged { .. } => paged,
        TreeBuild::Whole | TreeBuild::Never => TreeBuild::Never,
    };
    let page_file = args.lod.algorithm.page_file.as_deref();
    check_page_file(&args.terrain, entry.name, build, page_file)?;
    let terrain = DrawnTerrain::open(&args.terrain, entry.name, build)?;
    args.stream
        .refuse_unless_streamed(terrain.streamed().is_some())?;
    let (field, terrain_name) = (terrain.field(), terrain.name());
    let streamed = terrain.streamed();
    let detail = detail_field
        .as_ref()
        .map(|d| args.lod.algorithm.detail.place(field, d))
        .transpose()?;
    let camera = args.camera.camera_or_default(field)?;
    let frozen = args.look.frozen.camera(&camera)?;
    // Checks the flags' combination once (both bounds, --no-cull with --max-error, τ > 0).
    let view = args.lod.view(|| Ok(frozen.unwrap_or(camera)), Some(1.0))?;
    let world_error = match view.tolerance() {
        Tolerance::WorldError(metres) => Some(metres),
        Tolerance::Pixels(_) => None,
    };
    let algorithm = REGISTRY
        .iter()
        .position(|e| e.name == entry.name)
        .unwrap_or(0);
    let controls = LodControls::new(
        algorithm,
        args.quality,
        args.lod.pixel_error,
        args.auto,
        args.target_ms,
    );
    let pyramid = Pyramid::build(field);
    let config = ViewerConfig {
        field,
        pyramid: &pyramid,
        streamed: streamed.map(|s| (s, &args.stream)),
        page_file,
        built_from_tiles: match streamed {
            Some(_) => REGISTRY
                .iter()
                .map(|e| e.name)
                .filter(|name| builds_from_tiles(&args.terrain, name, build))
                .collect(),
            None => Vec::new(),
        },
        detail,
        terrain_name,
        texture,
        // Listed when the terrain may be larger than the GPU's textures (the same mesh),
        // so it is not built twice once the GPU is known.
        options: crate::commands::render::listed_when_large(args.lod.options(), field),
        controls,
        views: DebugViews {
            wireframe: args.look.wireframe,
            lod_colours: args.look.lod_colours(),
            frustum_shades: args.look.frustum_shades(),
            boxes: args.look.boxes,
            fog: !args.look.no_fog,
            hud: !args.no_hud,
        },
        world_error,
        cull: view.cull(),
        start_eye: camera.eye,
        start_target: camera.target,
        fov_y: camera.fov_y,
        near: camera.near,
        far: args.camera.far,
        size: camera.viewport,
        frozen,
        follow_terrain: args.follow_terrain,
        vsync: args.vsync,
        frames: args.frames,
        screenshot: args.screenshot.clone(),
    };
    let report = viewer::run(event_loop, config)?;
    if args.frames.is_none() {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: {} frames of {} x {} on {}, {} triangles in the last\n{}",
        report.algorithm,
        report.frames,
        report.size.0,
        report.size.1,
        report.adapter,
        report.triangles,
        serde_json::to_string(&report).context("cannot describe the run")?
    )
    .and_then(|()| out.flush())
    .context("cannot write to standard output")
}
