//! The window's swap chain and depth buffer (reconfigured on resize, recreated when lost).

use anyhow::bail;
use terralod_render::GpuContext;
use terralod_render::target::depth_texture;

/// What acquiring a frame gave.
#[derive(Debug)]
pub enum Acquired {
    Frame(wgpu::SurfaceTexture),
    /// Nothing to draw into now (minimised, occluded, timed out): skip this frame.
    Skip,
    /// The surface is gone: create a new one from the window and try again.
    Lost,
}

/// The window surface, its configuration and a depth buffer of the same size.
#[derive(Debug)]
pub struct WindowSurface {
    surface: wgpu::Surface<'static>,
    config: wgpu::SurfaceConfiguration,
    /// The format drawn in: the sRGB form of the surface format, so shading comes out as
    /// it does in the headless renderer.
    view_format: wgpu::TextureFormat,
    depth: Option<wgpu::TextureView>,
    /// The last frame was suboptimal: configure again before the next.
    stale: bool,
}

impl WindowSurface {
    /// Configures `surface` at `size` (a zero side waits for the next resize). Without
    /// `vsync` frames are presented as soon as drawn, so the HUD shows what they cost.
    pub fn new(
        ctx: &GpuContext,
        surface: wgpu::Surface<'static>,
        size: (u32, u32),
        vsync: bool,
    ) -> anyhow::Result<WindowSurface> {
        let Some(mut config) =
            surface.get_default_config(&ctx.adapter, size.0.max(1), size.1.max(1))
        else {
            bail!(
                "{} cannot present to this window (no surface format)",
                ctx.summary()
            );
        };
        let caps = surface.get_capabilities(&ctx.adapter);
        if let Some(srgb) = caps.formats.iter().copied().find(|f| f.is_srgb()) {
            config.format = srgb;
        }
        let view_format = config.format.add_srgb_suffix();
        if view_format != config.format {
            config.view_formats = vec![view_format];
        }
        config.present_mode = if vsync {
            wgpu::PresentMode::AutoVsync
        } else {
            wgpu::PresentMode::AutoNoVsync
        };
        (config.width, config.height) = size;
        let mut window_surface = WindowSurface {
            surface,
            config,
            view_format,
            depth: None,
            stale: false,
        };
        window_surface.configure(ctx);
        Ok(window_surface)
    }

    pub fn view_format(&self) -> wgpu::TextureFormat {
        self.view_format
    }

    pub fn size(&self) -> (u32, u32) {
        (self.config.width, self.config.height)
    }

    /// Whether there is anything to draw into (a minimised window has no pixels).
    pub fn is_drawable(&self) -> bool {
        self.depth.is_some()
    }

    pub fn depth_view(&self) -> Option<&wgpu::TextureView> {
        self.depth.as_ref()
    }

    /// A colour view of an acquired frame, in [`WindowSurface::view_format`].
    pub fn colour_view(&self, frame: &wgpu::SurfaceTexture) -> wgpu::TextureView {
        frame.texture.create_view(&wgpu::TextureViewDescriptor {
            format: Some(self.view_format),
            ..Default::default()
        })
    }

    /// Follows a window resize (a zero side: minimised, nothing is configured).
    pub fn resize(&mut self, ctx: &GpuContext, size: (u32, u32)) {
        if size != self.size() || self.depth.is_none() {
            (self.config.width, self.config.height) = size;
            self.configure(ctx);
        }
    }

    /// Replaces a lost surface with a new one of the same window.
    pub fn replace(&mut self, ctx: &GpuContext, surface: wgpu::Surface<'static>) {
        self.surface = surface;
        self.configure(ctx);
    }

    /// Configures the surface and a depth buffer at the current size; the GPU's largest
    /// texture bounds both (a window can be larger than that on a big screen).
    fn configure(&mut self, ctx: &GpuContext) {
        let max_side = ctx.device.limits().max_texture_dimension_2d;
        self.config.width = self.config.width.min(max_side);
        self.config.height = self.config.height.min(max_side);
        if self.config.width == 0 || self.config.height == 0 {
            self.depth = None;
            return;
        }
        self.surface.configure(&ctx.device, &self.config);
        self.depth = Some(
            depth_texture(ctx, self.size()).create_view(&wgpu::TextureViewDescriptor::default()),
        );
    }

    /// The next frame to draw into; reconfigures an outdated surface on the way.
    pub fn acquire(&mut self, ctx: &GpuContext) -> Acquired {
        if self.stale {
            self.stale = false;
            self.configure(ctx);
        }
        if !self.is_drawable() {
            return Acquired::Skip;
        }
        for _ in 0..2 {
            match self.surface.get_current_texture() {
                wgpu::CurrentSurfaceTexture::Success(frame) => return Acquired::Frame(frame),
                wgpu::CurrentSurfaceTexture::Suboptimal(frame) => {
                    // Draw this one; the next is acquired after a fresh configuration.
                    self.stale = true;
                    return Acquired::Frame(frame);
                }
                wgpu::CurrentSurfaceTexture::Outdated => self.configure(ctx),
                wgpu::CurrentSurfaceTexture::Lost => return Acquired::Lost,
                wgpu::CurrentSurfaceTexture::Timeout
                | wgpu::CurrentSurfaceTexture::Occluded
                | wgpu::CurrentSurfaceTexture::Validation => return Acquired::Skip,
            }
        }
        Acquired::Skip
    }
}
