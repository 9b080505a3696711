//! The interactive viewer of `terralod view`: a winit window drawn by terralod-render, an
//! egui HUD on top, a fly camera, and live switches for the LOD algorithm, preset,
//! tolerance and debug views.
//!
//! - [`fly_camera`]: keys and mouse to camera motion, terrain following (pure logic).
//! - [`controls`]: what keys and the HUD change (pure state).
//! - [`frame_times`]: the frame time window behind the HUD's graph.
//! - [`hud`]: the egui panel.
//! - [`surface`]: the swap chain and depth buffer (screenshots use the renderer's
//!   `OffscreenTarget` in the window's format).
//! - `app`: the winit event loop that ties them together.

mod app;
pub mod controls;
pub mod fly_camera;
pub mod frame_times;
pub mod hud;
pub mod surface;

use crate::stream_args::{StreamArgs, StreamedTerrain};
use anyhow::Context;
use glam::Vec3;
use std::path::PathBuf;
use terralod_core::lod::{Detail, LodOptions};
use terralod_core::{Camera, Heightfield, Pyramid};
use winit::event_loop::EventLoop;

pub use controls::{DebugViews, LodControls};

/// Everything the viewer starts from. The heightfield and pyramid are borrowed for the
/// whole event loop: the LOD algorithms borrow them in turn.
#[derive(Debug)]
pub struct ViewerConfig<'a> {
    pub field: &'a Heightfield,
    pub pyramid: &'a Pyramid,
    /// An imported directory `view DIR --algo streamed` streams: the `streamed` entry then
    /// runs over its tile cache, and `field` is its planning level (what the other
    /// algorithms, the renderer's normals and the terrain following use).
    pub streamed: Option<(&'a StreamedTerrain, &'a StreamArgs)>,
    /// The entries built from the streamed directory's tiles rather than drawn over
    /// `field` (algorithm adaptive with `--page-frames`: its tree page by page, at any
    /// size). Each is built once and kept while another algorithm is drawn, since the
    /// build reads every tile.
    pub built_from_tiles: Vec<&'static str>,
    /// Where algorithm adaptive built from the tiles keeps its pages (`--page-file`).
    pub page_file: Option<&'a std::path::Path>,
    /// A local detail inserted into algorithm adaptive's tree (`--detail`); the other
    /// algorithms draw the terrain without it.
    pub detail: Option<Detail<'a>>,
    /// For the window title and the HUD.
    pub terrain_name: String,
    /// A colour image laid over the terrain.
    pub texture: Option<image::RgbaImage>,
    pub options: LodOptions,
    pub controls: LodControls,
    pub views: DebugViews,
    /// `Some` for a view-independent selection (`--max-error`).
    pub world_error: Option<f32>,
    pub cull: bool,
    /// Where the fly camera starts (and returns to with R).
    pub start_eye: Vec3,
    pub start_target: Vec3,
    pub fov_y: f32,
    pub near: f32,
    /// A fixed far plane; `None` reaches the farthest corner of the terrain from the eye.
    pub far: Option<f32>,
    /// Initial window size in pixels.
    pub size: (u32, u32),
    /// A LOD camera frozen from the start (`--lod-eye`, `--lod-target`).
    pub frozen: Option<Camera>,
    pub follow_terrain: bool,
    pub vsync: bool,
    /// Draw this many frames, then exit.
    pub frames: Option<u64>,
    /// Where screenshots go: the last frame with `frames`, the P key otherwise.
    pub screenshot: Option<PathBuf>,
}

/// What a run of the viewer did, for the command's summary.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ViewerReport {
    pub frames: u64,
    pub adapter: String,
    pub algorithm: String,
    pub size: (u32, u32),
    pub triangles: u64,
    /// Mean time between frames over the last frames drawn.
    pub mean_frame_ms: Option<f32>,
    pub tolerance: Option<f32>,
    pub screenshots: Vec<PathBuf>,
}

/// Connects to the display (first, so a missing one is reported before any work).
pub fn open_display() -> anyhow::Result<EventLoop<()>> {
    EventLoop::new().context(
        "cannot open a window: no display (set DISPLAY or WAYLAND_DISPLAY, or run under xvfb-run -a)",
    )
}

/// Opens the window and runs until it is closed (or `frames` are drawn).
pub fn run(event_loop: EventLoop<()>, config: ViewerConfig<'_>) -> anyhow::Result<ViewerReport> {
    let mut viewer = app::App::new(config)?;
    event_loop
        .run_app(&mut viewer)
        .context("the window's event loop failed")?;
    viewer.finish()
}
