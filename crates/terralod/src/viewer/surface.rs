//! The window's swap chain and depth buffer (reconfigured on resize, recreated when lost),
//! and the screenshot target a frame is drawn into a second time when one is asked for.

use anyhow::{Context, bail};
use terralod_render::{DEPTH_FORMAT, GpuContext};

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

fn depth_texture(ctx: &GpuContext, (width, height): (u32, u32)) -> wgpu::Texture {
    ctx.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("window depth"),
        size: wgpu::Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: DEPTH_FORMAT,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
        view_formats: &[],
    })
}

/// A colour and depth target in the window's format with a buffer to read it back: a
/// screenshot frame is drawn here as well as into the window (a surface texture cannot
/// always be copied from).
#[derive(Debug)]
pub struct ScreenshotTarget {
    colour: wgpu::Texture,
    colour_view: wgpu::TextureView,
    depth_view: wgpu::TextureView,
    readback: wgpu::Buffer,
    padded_row: u32,
    size: (u32, u32),
    format: wgpu::TextureFormat,
}

impl ScreenshotTarget {
    pub fn new(
        ctx: &GpuContext,
        size: (u32, u32),
        format: wgpu::TextureFormat,
    ) -> anyhow::Result<ScreenshotTarget> {
        if channel_order(format).is_none() {
            bail!("screenshots of a {format:?} window are not supported");
        }
        let (width, height) = size;
        let colour = ctx.device.create_texture(&wgpu::TextureDescriptor {
            label: Some("screenshot colour"),
            size: wgpu::Extent3d {
                width,
                height,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
            view_formats: &[],
        });
        let padded_row = (width * 4).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
        let readback = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("screenshot readback"),
            size: u64::from(padded_row) * u64::from(height),
            usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
            mapped_at_creation: false,
        });
        Ok(ScreenshotTarget {
            colour_view: colour.create_view(&wgpu::TextureViewDescriptor::default()),
            depth_view: depth_texture(ctx, size)
                .create_view(&wgpu::TextureViewDescriptor::default()),
            colour,
            readback,
            padded_row,
            size,
            format,
        })
    }

    pub fn size(&self) -> (u32, u32) {
        self.size
    }

    pub fn format(&self) -> wgpu::TextureFormat {
        self.format
    }

    pub fn colour_view(&self) -> &wgpu::TextureView {
        &self.colour_view
    }

    pub fn depth_view(&self) -> &wgpu::TextureView {
        &self.depth_view
    }

    /// Records the copy of the colour texture into the readback buffer.
    pub fn copy_out(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.copy_texture_to_buffer(
            self.colour.as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: &self.readback,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(self.padded_row),
                    rows_per_image: Some(self.size.1),
                },
            },
            wgpu::Extent3d {
                width: self.size.0,
                height: self.size.1,
                depth_or_array_layers: 1,
            },
        );
    }

    /// Waits for the copy recorded by [`ScreenshotTarget::copy_out`] (submitted) and
    /// returns the image.
    pub fn read(&self, ctx: &GpuContext) -> anyhow::Result<image::RgbaImage> {
        let (sender, receiver) = std::sync::mpsc::channel();
        self.readback
            .map_async(wgpu::MapMode::Read, .., move |result| {
                let _ = sender.send(result);
            });
        ctx.wait_idle()?;
        receiver
            .recv()
            .context("the screenshot's map callback never ran")?
            .context("cannot map the screenshot")?;
        let image = {
            let mapped = self
                .readback
                .get_mapped_range(..)
                .context("cannot read the screenshot")?;
            unpad_rows(&mapped, self.padded_row, self.size, self.format)
        };
        self.readback.unmap();
        image.context("the screenshot has an unexpected size")
    }
}

/// Whether a format stores red first (`Some(false)`) or blue first (`Some(true)`); `None`
/// for formats a PNG cannot take byte for byte.
fn channel_order(format: wgpu::TextureFormat) -> Option<bool> {
    match format {
        wgpu::TextureFormat::Rgba8Unorm | wgpu::TextureFormat::Rgba8UnormSrgb => Some(false),
        wgpu::TextureFormat::Bgra8Unorm | wgpu::TextureFormat::Bgra8UnormSrgb => Some(true),
        _ => None,
    }
}

/// An RGBA image from rows of `padded_row` bytes in `format`, opaque (a window's alpha
/// means nothing in a PNG).
fn unpad_rows(
    bytes: &[u8],
    padded_row: u32,
    (width, height): (u32, u32),
    format: wgpu::TextureFormat,
) -> Option<image::RgbaImage> {
    let blue_first = channel_order(format)?;
    let row_bytes = width as usize * 4;
    if (padded_row as usize) < row_bytes || bytes.len() < padded_row as usize * height as usize {
        return None;
    }
    let mut pixels = Vec::with_capacity(row_bytes * height as usize);
    for row in bytes
        .chunks_exact(padded_row as usize)
        .take(height as usize)
    {
        for texel in row[..row_bytes].chunks_exact(4) {
            let (r, b) = if blue_first {
                (texel[2], texel[0])
            } else {
                (texel[0], texel[2])
            };
            pixels.extend_from_slice(&[r, texel[1], b, 255]);
        }
    }
    image::RgbaImage::from_raw(width, height, pixels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_lose_their_padding_and_blue_first_texels_are_swapped() {
        // Two rows of two texels, padded to 12 bytes.
        let bytes = [
            1, 2, 3, 9, 4, 5, 6, 9, 0, 0, 0, 0, //
            7, 8, 9, 9, 10, 11, 12, 9, 0, 0, 0, 0,
        ];
        let rgba = unpad_rows(&bytes, 12, (2, 2), wgpu::TextureFormat::Rgba8UnormSrgb)
            .expect("valid layout");
        assert_eq!(rgba.get_pixel(1, 1).0, [10, 11, 12, 255]);
        let bgra =
            unpad_rows(&bytes, 12, (2, 2), wgpu::TextureFormat::Bgra8Unorm).expect("valid layout");
        assert_eq!(bgra.get_pixel(0, 0).0, [3, 2, 1, 255]);
        assert!(unpad_rows(&bytes, 12, (2, 3), wgpu::TextureFormat::Bgra8Unorm).is_none());
        assert!(unpad_rows(&bytes, 4, (2, 2), wgpu::TextureFormat::Bgra8Unorm).is_none());
        assert!(unpad_rows(&bytes, 12, (2, 2), wgpu::TextureFormat::Rgba16Float).is_none());
    }
}
