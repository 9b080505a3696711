//! The viewer's winit application: window and GPU set up on `resumed`, input to the fly
//! camera and the controls, one frame per redraw (selection, terrain pass, HUD pass), and
//! the surface kept alive through resizes, minimising and loss.

use super::controls::{Action, DebugViews, LodControls, action_for_key};
use super::fly_camera::{FlyCamera, MoveKeys};
use super::frame_times::FrameTimes;
use super::hud::{self, HudInfo};
use super::surface::{Acquired, WindowSurface};
use super::{ViewerConfig, ViewerReport};
use crate::camera_args::default_far;
use crate::commands::render::carries_heights;
use crate::commands::render::write_png;
use anyhow::{Context, anyhow};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use terralod_core::lod::{LodAlgorithm, REGISTRY, SelectionStats, View};
use terralod_core::{Aabb, Camera, height_at};
use terralod_render::OffscreenTarget;
use terralod_render::{DebugLines, FrameSettings, GpuContext, TerrainRenderer};
use winit::application::ApplicationHandler;
use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow};
use winit::keyboard::{KeyCode, PhysicalKey};
use winit::window::{Window, WindowId};

/// Frames kept for the HUD's graph.
const GRAPH_FRAMES: usize = 240;
/// A frame step longer than this (a stall, a drag of the window) moves the camera as if it
/// took this long, so the camera does not jump.
const MAX_STEP: Duration = Duration::from_millis(100);
/// How often a minimised window checks whether it can draw again.
const IDLE_POLL: Duration = Duration::from_millis(100);
/// Pixels of a trackpad's scroll that count as one wheel step.
const PIXELS_PER_SCROLL_STEP: f64 = 40.0;
const BOX_COLOUR: [u8; 4] = [255, 230, 40, 255];
const FRUSTUM_COLOUR: [u8; 4] = [255, 60, 200, 255];

/// The window and everything drawn into it; exists from `resumed` on.
struct Gpu {
    window: Arc<Window>,
    ctx: GpuContext,
    surface: WindowSurface,
    renderer: TerrainRenderer,
    egui_state: egui_winit::State,
    egui_renderer: egui_wgpu::Renderer,
    /// Made on the first screenshot, remade when the window size changes.
    screenshot: Option<OffscreenTarget>,
    adapter: String,
}

pub struct App<'a> {
    config: ViewerConfig<'a>,
    algorithm: Box<dyn LodAlgorithm + 'a>,
    /// The registry index `algorithm` was built from.
    built: usize,
    /// Algorithms built from the tiles and switched away from, by registry index: kept
    /// for a switch back, which would otherwise read every tile again.
    parked: Vec<(usize, Box<dyn LodAlgorithm + 'a>)>,
    controls: LodControls,
    views: DebugViews,
    fly: FlyCamera,
    keys: MoveKeys,
    frozen: Option<Camera>,
    gpu: Option<Gpu>,
    egui_ctx: egui::Context,
    frame_times: FrameTimes,
    /// Start of the last frame drawn (`None` after a skipped one).
    last_frame: Option<Instant>,
    frames_drawn: u64,
    screenshot_wanted: Option<PathBuf>,
    screenshots: Vec<PathBuf>,
    dragging: bool,
    cursor: Option<(f64, f64)>,
    stats: SelectionStats,
    boxes: Vec<Aabb>,
    lines: DebugLines,
    error: Option<anyhow::Error>,
}

impl std::fmt::Debug for App<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("algorithm", &self.algorithm.name())
            .field("frames_drawn", &self.frames_drawn)
            .finish_non_exhaustive()
    }
}

/// Builds registry entry `index`: a streaming algorithm over the tile cache of the
/// streamed directory when the viewer streams one (or one built from its tiles, see
/// [`ViewerConfig::built_from_tiles`]), every other entry (and the streaming ones
/// otherwise) over the loaded field.
fn build_algorithm<'a>(
    config: &ViewerConfig<'a>,
    index: usize,
) -> anyhow::Result<Box<dyn LodAlgorithm + 'a>> {
    let entry = &REGISTRY[index];
    match config.streamed {
        Some((terrain, args))
            if crate::stream_args::is_streaming(entry.name)
                || config.built_from_tiles.contains(&entry.name) =>
        {
            let bar = crate::progress::spinner(format!(
                "starting {} over {}",
                entry.name,
                terrain.tiled.dir().display()
            ));
            let page_file = config
                .page_file
                .filter(|_| config.built_from_tiles.contains(&entry.name));
            let note = |line: &str| bar.suspend(|| eprintln!("{line}"));
            let algorithm = terrain.algorithm(entry.name, args, config.options, page_file, &note);
            bar.finish_and_clear();
            Ok(Box::new(algorithm?))
        }
        _ => crate::detail_args::build_algorithm(
            entry,
            config.field,
            config.pyramid,
            &config.options,
            config.detail.as_ref(),
        ),
    }
}

/// The fly camera at the configured start, its speed scaled to the terrain: crossing it
/// takes about 20 s, and the wheel reaches a walk and a fast jet from there.
fn start_camera(config: &ViewerConfig<'_>) -> FlyCamera {
    let (w, d) = config.field.world_size();
    let span = w.max(d).max(1.0);
    let mut fly = FlyCamera::looking_at(
        config.start_eye,
        config.start_target,
        span / 20.0,
        (span * 1e-5, span * 2.0),
    );
    if config.follow_terrain {
        fly.set_follow_terrain(true, |x, z| height_at(config.field, x, z));
    }
    fly
}

impl<'a> App<'a> {
    pub fn new(config: ViewerConfig<'a>) -> anyhow::Result<App<'a>> {
        let controls = config.controls.clone();
        let built = controls.algorithm();
        let algorithm = build_algorithm(&config, built)?;
        let fly = start_camera(&config);
        Ok(App {
            algorithm,
            built,
            parked: Vec::new(),
            views: config.views,
            frozen: config.frozen,
            screenshot_wanted: None,
            controls,
            fly,
            keys: MoveKeys::default(),
            gpu: None,
            egui_ctx: egui::Context::default(),
            frame_times: FrameTimes::new(GRAPH_FRAMES),
            last_frame: None,
            frames_drawn: 0,
            screenshots: Vec::new(),
            dragging: false,
            cursor: None,
            stats: SelectionStats::default(),
            boxes: Vec::new(),
            lines: DebugLines::new(),
            error: None,
            config,
        })
    }

    /// The run's outcome once the event loop has returned.
    pub fn finish(self) -> anyhow::Result<ViewerReport> {
        if let Some(error) = self.error {
            return Err(error);
        }
        if let Some(wanted) = self.config.frames
            && self.frames_drawn < wanted
        {
            return Err(anyhow!(
                "the window closed after {} of {wanted} frames",
                self.frames_drawn
            ));
        }
        Ok(ViewerReport {
            frames: self.frames_drawn,
            adapter: self
                .gpu
                .as_ref()
                .map_or(String::new(), |g| g.adapter.clone()),
            algorithm: self.controls.algorithm_name().to_owned(),
            size: self.gpu.as_ref().map_or((0, 0), |g| g.surface.size()),
            triangles: self.stats.triangles,
            mean_frame_ms: self.frame_times.recent_mean(GRAPH_FRAMES),
            tolerance: self
                .config
                .world_error
                .is_none()
                .then(|| self.controls.tolerance()),
            screenshots: self.screenshots,
        })
    }

    fn fail(&mut self, event_loop: &ActiveEventLoop, error: anyhow::Error) {
        self.error.get_or_insert(error);
        event_loop.exit();
    }

    fn ground(&self) -> impl Fn(f32, f32) -> Option<f32> + 'a {
        let field = self.config.field;
        move |x, z| height_at(field, x, z)
    }

    /// Creates the window, the GPU context for it, the renderers and the HUD state.
    fn create_gpu(&self, event_loop: &ActiveEventLoop) -> anyhow::Result<Gpu> {
        let (width, height) = self.config.size;
        let attributes = Window::default_attributes()
            .with_title(format!("terralod: {}", self.config.terrain_name))
            .with_inner_size(winit::dpi::PhysicalSize::new(width, height));
        let window = Arc::new(
            event_loop
                .create_window(attributes)
                .context("cannot create the window")?,
        );
        // With the display handle, an OpenGL fallback can present too (Vulkan ignores it).
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_with_display_handle_from_env(
                Box::new(event_loop.owned_display_handle()),
            ));
        let surface = instance
            .create_surface(Arc::clone(&window))
            .context("cannot create a GPU surface for the window")?;
        let ctx = GpuContext::for_surface(instance, &surface)?;
        let size = window.inner_size();
        let surface =
            WindowSurface::new(&ctx, surface, (size.width, size.height), self.config.vsync)?;
        let renderer = TerrainRenderer::new(
            &ctx,
            self.config.field,
            self.config.texture.as_ref(),
            surface.view_format(),
        )?;
        let max_side = ctx.device.limits().max_texture_dimension_2d as usize;
        let egui_state = egui_winit::State::new(
            self.egui_ctx.clone(),
            egui::ViewportId::ROOT,
            &*window,
            Some(window.scale_factor() as f32),
            window.theme(),
            Some(max_side),
        );
        let egui_renderer = egui_wgpu::Renderer::new(
            &ctx.device,
            surface.view_format(),
            egui_wgpu::RendererOptions::default(),
        );
        let adapter = ctx.summary().to_string();
        Ok(Gpu {
            window,
            ctx,
            surface,
            renderer,
            egui_state,
            egui_renderer,
            screenshot: None,
            adapter,
        })
    }

    fn apply(&mut self, action: Action, event_loop: &ActiveEventLoop) {
        if self.views.apply(action) {
            return;
        }
        match action {
            Action::ToggleFreeze => {
                self.frozen = match self.frozen {
                    Some(_) => None,
                    None => self.current_camera().ok(),
                }
            }
            Action::ToggleFollowTerrain => {
                let on = !self.fly.follows_terrain();
                let ground = self.ground();
                self.fly.set_follow_terrain(on, ground);
            }
            Action::ToggleAuto => self.controls.set_auto(!self.controls.is_auto()),
            Action::Preset(quality) => self.controls.set_preset(quality),
            Action::NextAlgorithm => {
                self.controls.next_algorithm();
            }
            Action::Screenshot => {
                let path = self.config.screenshot.clone().unwrap_or_else(|| {
                    let seconds = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs());
                    PathBuf::from(format!(
                        "terralod-{seconds}-{}.png",
                        self.screenshots.len() + 1
                    ))
                });
                self.screenshot_wanted = Some(path);
            }
            Action::ResetView => {
                let speed = self.fly.speed();
                self.fly = start_camera(&self.config);
                self.fly.scroll((speed / self.fly.speed()).log(1.25));
            }
            Action::Quit => event_loop.exit(),
            Action::ToggleWireframe
            | Action::ToggleLodColours
            | Action::ToggleBoxes
            | Action::ToggleFog
            | Action::ToggleHud => {}
        }
    }

    /// The fly camera as a [`Camera`] for the window's current size.
    fn current_camera(&self) -> anyhow::Result<Camera> {
        let viewport = match &self.gpu {
            Some(gpu) => gpu.surface.size(),
            None => self.config.size,
        };
        let far = self
            .config
            .far
            .unwrap_or_else(|| default_far(self.config.field, self.fly.position, self.config.near));
        self.fly
            .camera(
                self.config.fov_y,
                (viewport.0.max(1), viewport.1.max(1)),
                self.config.near,
                far,
            )
            .context("the fly camera")
    }

    /// The view the algorithm selects for, from `camera` (the frozen one when frozen).
    fn view_for(&self, camera: Camera) -> anyhow::Result<View> {
        let view = match self.config.world_error {
            Some(metres) => View::world_error(metres)?,
            None => View::screen(camera, self.controls.tolerance())?.with_cull(self.config.cull),
        };
        Ok(view)
    }

    /// Over a terrain larger than the GPU's largest texture: algorithm A lists its
    /// vertices from now on (rebuilt if it runs unlisted), and a starting algorithm that
    /// draws from the grid is refused (see `commands::render::carried_heights_options`).
    fn fit_renderer(&mut self, renderer: &TerrainRenderer) -> anyhow::Result<()> {
        let name = self.algorithm.name();
        let options = crate::commands::render::carried_heights_options(
            renderer,
            name,
            self.config.options,
            self.config.field,
        )?;
        let relist = options.adaptive.list_vertices != self.config.options.adaptive.list_vertices;
        self.config.options = options;
        // Built from the tiles, it lists its vertices already.
        if relist && name == "adaptive" && !self.config.built_from_tiles.contains(&name) {
            self.algorithm = build_algorithm(&self.config, self.built)?;
        }
        Ok(())
    }

    /// Rebuilds the algorithm when the controls chose another one. Over decimated
    /// textures an algorithm that draws from the grid is skipped for the next one that
    /// carries its heights.
    fn sync_algorithm(&mut self, event_loop: &ActiveEventLoop) {
        let mut wanted = self.controls.algorithm();
        let grid_drawn = self
            .gpu
            .as_ref()
            .is_none_or(|gpu| gpu.renderer.draws_grid_selections());
        if wanted != self.built && !grid_drawn {
            let (carrier, skipped) = LodControls::first_allowed_from(wanted, carries_heights);
            if !skipped.is_empty() {
                eprintln!(
                    "{} draw from the terrain's grid, which is larger than this GPU's \
                     largest texture: on to {}",
                    skipped.join(", "),
                    REGISTRY[carrier].name
                );
                wanted = carrier;
                self.controls.set_algorithm(wanted);
            }
        }
        if wanted != self.built {
            let parked = self.parked.iter().position(|(index, _)| *index == wanted);
            let algorithm = match parked {
                Some(k) => Ok(self.parked.swap_remove(k).1),
                None => build_algorithm(&self.config, wanted),
            };
            match algorithm {
                Ok(algorithm) => {
                    let left = std::mem::replace(&mut self.algorithm, algorithm);
                    let left_index = std::mem::replace(&mut self.built, wanted);
                    if self.config.built_from_tiles.contains(&left.name()) {
                        self.parked.push((left_index, left));
                    }
                }
                Err(error) => self.fail(event_loop, error),
            }
        }
    }

    fn redraw(&mut self, event_loop: &ActiveEventLoop) -> anyhow::Result<()> {
        let Some(gpu) = self.gpu.as_mut() else {
            return Ok(());
        };
        let frame = match gpu.surface.acquire(&gpu.ctx) {
            Acquired::Frame(frame) => frame,
            Acquired::Skip => {
                self.last_frame = None;
                return Ok(());
            }
            Acquired::Lost => {
                let surface = gpu
                    .ctx
                    .instance
                    .create_surface(Arc::clone(&gpu.window))
                    .context("cannot recreate the lost window surface")?;
                gpu.surface.replace(&gpu.ctx, surface);
                self.last_frame = None;
                return Ok(());
            }
        };
        let now = Instant::now();
        let step = match self.last_frame.replace(now) {
            Some(previous) => {
                let elapsed = now - previous;
                let ms = elapsed.as_secs_f32() * 1e3;
                self.frame_times.push(ms);
                self.controls.frame_done(ms);
                elapsed.min(MAX_STEP)
            }
            None => Duration::ZERO,
        };
        let ground = self.ground();
        self.fly.update(&self.keys, step.as_secs_f32(), ground);
        let camera = self.current_camera()?;
        let view = self.view_for(self.frozen.unwrap_or(camera))?;

        self.lines.clear();
        if self.views.boxes {
            // The boxes of this very selection: select once more for them (the selection
            // borrows the algorithm until it is uploaded, and the boxes go up with it).
            self.algorithm.select(&view);
            self.boxes.clear();
            self.algorithm.drawn_boxes(&mut self.boxes);
            for aabb in &self.boxes {
                self.lines.add_box(aabb, BOX_COLOUR);
            }
        }
        if let Some(frozen) = &self.frozen {
            let (w, d) = self.config.field.world_size();
            self.lines
                .add_frustum(frozen, 0.6 * w.max(d), FRUSTUM_COLOUR);
        }
        let settings = FrameSettings {
            wireframe: self.views.wireframe,
            color_by_lod: self.views.lod_colours,
            color_by_frustum: self.views.frustum_shades,
            fog_density: if self.views.fog { None } else { Some(0.0) },
            ..FrameSettings::new(camera)
        };
        let Some(gpu) = self.gpu.as_mut() else {
            return Ok(());
        };
        {
            let selection = self.algorithm.select(&view);
            gpu.renderer
                .prepare(&gpu.ctx, &selection, &settings, &self.lines)?;
        }
        self.stats = *self.algorithm.stats();
        crate::lod_args::report_faults(&mut *self.algorithm);

        // The HUD.
        let raw_input = gpu.egui_state.take_egui_input(&gpu.window);
        let info = HudInfo {
            adapter: &gpu.adapter,
            terrain: &self.config.terrain_name,
            frame_times: &self.frame_times,
            stats: self.stats,
            world_error: self.config.world_error,
            eye: self.fly.position,
            speed: self.fly.speed(),
            frozen: self.frozen.is_some(),
            following: self.fly.follows_terrain().then(|| self.fly.clearance()),
        };
        let mut actions = Vec::new();
        let show_hud = self.views.hud;
        let (controls, views) = (&mut self.controls, &mut self.views);
        let mut output = self.egui_ctx.run_pass(raw_input, |ctx| {
            if show_hud {
                actions = hud::show(ctx, &info, controls, views);
            }
        });
        gpu.egui_state
            .handle_platform_output(&gpu.window, output.platform_output);
        let paint_jobs = self
            .egui_ctx
            .tessellate(output.shapes, output.pixels_per_point);
        // Taken whole, so nothing unapplied is left to drop (egui asserts on that).
        let mut textures = std::mem::take(&mut output.textures_delta);
        for (id, deltas) in textures.set.drain() {
            for delta in deltas {
                gpu.egui_renderer
                    .update_texture(&gpu.ctx.device, &gpu.ctx.queue, id, &delta);
            }
        }
        let freed: Vec<egui::TextureId> = textures.free.drain().collect();
        let size = gpu.surface.size();
        let screen = egui_wgpu::ScreenDescriptor {
            size_in_pixels: [size.0, size.1],
            pixels_per_point: output.pixels_per_point,
        };

        let mut encoder = gpu
            .ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("viewer frame"),
            });
        let egui_commands = gpu.egui_renderer.update_buffers(
            &gpu.ctx.device,
            &gpu.ctx.queue,
            &mut encoder,
            &paint_jobs,
            &screen,
        );
        let colour = gpu.surface.colour_view(&frame);
        let depth = gpu
            .surface
            .depth_view()
            .context("the window surface has no depth buffer")?;
        draw(&mut encoder, gpu, &colour, depth, &paint_jobs, &screen);

        // A screenshot: the same frame drawn again into a texture that can be read back.
        let screenshot = self.screenshot_wanted.take();
        if screenshot.is_some() {
            let format = gpu.surface.view_format();
            let stale = gpu
                .screenshot
                .as_ref()
                .is_none_or(|t| t.size() != size || t.format() != format);
            if stale {
                gpu.screenshot = Some(OffscreenTarget::with_format(&gpu.ctx, size, format)?);
            }
            if let Some(target) = &gpu.screenshot {
                draw(
                    &mut encoder,
                    gpu,
                    target.colour_view(),
                    target.depth_view(),
                    &paint_jobs,
                    &screen,
                );
                target.copy_out(&mut encoder);
            }
        }
        gpu.ctx
            .queue
            .submit(egui_commands.into_iter().chain([encoder.finish()]));
        gpu.window.pre_present_notify();
        gpu.ctx.queue.present(frame);
        for id in &freed {
            gpu.egui_renderer.free_texture(id);
        }
        gpu.ctx.check_errors()?;
        if let (Some(path), Some(target)) = (screenshot, &gpu.screenshot) {
            let image = target.read(&gpu.ctx)?;
            write_png(&path, &image).with_context(|| format!("writing {}", path.display()))?;
            println!("screenshot written to {}", path.display());
            self.screenshots.push(path);
        }
        self.frames_drawn += 1;

        for action in actions {
            self.apply(action, event_loop);
        }
        self.sync_algorithm(event_loop);
        if let Some(wanted) = self.config.frames {
            if self.frames_drawn >= wanted {
                event_loop.exit();
            } else if self.frames_drawn + 1 == wanted
                && let Some(path) = &self.config.screenshot
            {
                self.screenshot_wanted = Some(path.clone());
            }
        }
        Ok(())
    }

    fn keyboard(
        &mut self,
        key: KeyCode,
        pressed: bool,
        repeat: bool,
        event_loop: &ActiveEventLoop,
    ) {
        let keys = &mut self.keys;
        let held = match key {
            KeyCode::KeyW => &mut keys.forward,
            KeyCode::KeyS => &mut keys.back,
            KeyCode::KeyA => &mut keys.left,
            KeyCode::KeyD => &mut keys.right,
            KeyCode::KeyE | KeyCode::Space => &mut keys.up,
            KeyCode::KeyQ => &mut keys.down,
            KeyCode::ArrowLeft => &mut keys.turn_left,
            KeyCode::ArrowRight => &mut keys.turn_right,
            KeyCode::ArrowUp => &mut keys.turn_up,
            KeyCode::ArrowDown => &mut keys.turn_down,
            KeyCode::ShiftLeft | KeyCode::ShiftRight => &mut keys.fast,
            _ => {
                if pressed
                    && !repeat
                    && let Some(action) = action_for_key(key)
                {
                    self.apply(action, event_loop);
                    self.sync_algorithm(event_loop);
                }
                return;
            }
        };
        *held = pressed;
    }
}

/// Records the terrain pass and the HUD pass over `colour` and `depth`.
fn draw(
    encoder: &mut wgpu::CommandEncoder,
    gpu: &Gpu,
    colour: &wgpu::TextureView,
    depth: &wgpu::TextureView,
    paint_jobs: &[egui::ClippedPrimitive],
    screen: &egui_wgpu::ScreenDescriptor,
) {
    {
        let mut pass = TerrainRenderer::begin_pass(encoder, colour, depth);
        gpu.renderer.draw(&mut pass);
    }
    if paint_jobs.is_empty() {
        return;
    }
    let pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
        label: Some("hud"),
        color_attachments: &[Some(wgpu::RenderPassColorAttachment {
            view: colour,
            depth_slice: None,
            resolve_target: None,
            ops: wgpu::Operations {
                load: wgpu::LoadOp::Load,
                store: wgpu::StoreOp::Store,
            },
        })],
        depth_stencil_attachment: None,
        timestamp_writes: None,
        occlusion_query_set: None,
        multiview_mask: None,
    });
    // egui-wgpu wants a pass that does not borrow the encoder; nothing else records into
    // the encoder until it is dropped.
    let mut pass = pass.forget_lifetime();
    gpu.egui_renderer.render(&mut pass, paint_jobs, screen);
}

impl ApplicationHandler for App<'_> {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.gpu.is_some() {
            return;
        }
        match self
            .create_gpu(event_loop)
            .and_then(|gpu| self.fit_renderer(&gpu.renderer).map(|()| gpu))
        {
            Ok(gpu) => {
                gpu.window.request_redraw();
                self.gpu = Some(gpu);
                if self.config.frames == Some(1)
                    && let Some(path) = &self.config.screenshot
                {
                    self.screenshot_wanted = Some(path.clone());
                }
            }
            Err(error) => self.fail(event_loop, error),
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _: WindowId, event: WindowEvent) {
        let Some(gpu) = self.gpu.as_mut() else {
            return;
        };
        let response = gpu.egui_state.on_window_event(&gpu.window, &event);
        match event {
            WindowEvent::CloseRequested | WindowEvent::Destroyed => event_loop.exit(),
            WindowEvent::Resized(size) => {
                gpu.surface.resize(&gpu.ctx, (size.width, size.height));
                gpu.window.request_redraw();
            }
            WindowEvent::RedrawRequested => {
                if let Err(error) = self.redraw(event_loop) {
                    self.fail(event_loop, error);
                }
            }
            WindowEvent::Focused(false) => {
                self.keys = MoveKeys::default();
                self.dragging = false;
            }
            WindowEvent::KeyboardInput { event, .. } => {
                let pressed = event.state == ElementState::Pressed;
                // A release always counts, so no key stays held when egui took the press.
                if (!pressed || !self.egui_ctx.egui_wants_keyboard_input())
                    && let PhysicalKey::Code(key) = event.physical_key
                {
                    self.keyboard(key, pressed, event.repeat, event_loop);
                }
            }
            WindowEvent::MouseInput { state, button, .. } => {
                let look_button = matches!(button, MouseButton::Left | MouseButton::Right);
                match state {
                    ElementState::Pressed if look_button && !response.consumed => {
                        self.dragging = !self.egui_ctx.is_pointer_over_egui();
                    }
                    ElementState::Released if look_button => self.dragging = false,
                    _ => {}
                }
            }
            WindowEvent::CursorMoved { position, .. } => {
                let now = (position.x, position.y);
                if self.dragging
                    && let Some(previous) = self.cursor
                {
                    self.fly
                        .look((now.0 - previous.0) as f32, (now.1 - previous.1) as f32);
                }
                self.cursor = Some(now);
            }
            WindowEvent::CursorLeft { .. } => self.cursor = None,
            WindowEvent::MouseWheel { delta, .. } if !response.consumed => {
                let steps = match delta {
                    MouseScrollDelta::LineDelta(_, y) => f64::from(y),
                    MouseScrollDelta::PixelDelta(p) => p.y / PIXELS_PER_SCROLL_STEP,
                };
                self.fly.scroll(steps as f32);
            }
            _ => {}
        }
    }

    fn about_to_wait(&mut self, event_loop: &ActiveEventLoop) {
        let Some(gpu) = &self.gpu else {
            return;
        };
        // Draw continuously (the frame time graph and the automatic τ need frames); a
        // minimised window only looks now and then whether it can draw again.
        gpu.window.request_redraw();
        if gpu.surface.is_drawable() {
            event_loop.set_control_flow(ControlFlow::Poll);
        } else {
            event_loop.set_control_flow(ControlFlow::WaitUntil(Instant::now() + IDLE_POLL));
        }
    }
}
