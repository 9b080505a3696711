//! An offscreen colour and depth target, and reading a frame back into an image.

use crate::RenderError;
use crate::context::GpuContext;
use crate::terrain::DEPTH_FORMAT;

/// The colour format of offscreen frames (sRGB, 8 bits a channel, like a PNG).
pub const COLOUR_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8UnormSrgb;

/// Colour and depth textures of one size, and a staging buffer to read the colour back.
#[derive(Debug)]
pub struct OffscreenTarget {
    colour: wgpu::Texture,
    colour_view: wgpu::TextureView,
    depth_view: wgpu::TextureView,
    readback: wgpu::Buffer,
    padded_row: u32,
    size: (u32, u32),
}

impl OffscreenTarget {
    pub fn new(
        ctx: &GpuContext,
        (width, height): (u32, u32),
    ) -> Result<OffscreenTarget, RenderError> {
        let max_side = ctx.device.limits().max_texture_dimension_2d;
        if width == 0 || height == 0 || width > max_side || height > max_side {
            return Err(RenderError::TooLarge {
                what: "image".into(),
                width,
                height,
                max_side,
            });
        }
        let extent = wgpu::Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        };
        let texture = |label, format, usage| {
            ctx.device.create_texture(&wgpu::TextureDescriptor {
                label: Some(label),
                size: extent,
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format,
                usage,
                view_formats: &[],
            })
        };
        let colour = texture(
            "frame colour",
            COLOUR_FORMAT,
            wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        );
        let depth = texture(
            "frame depth",
            DEPTH_FORMAT,
            wgpu::TextureUsages::RENDER_ATTACHMENT,
        );
        let padded_row = (width * 4).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
        let readback = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("frame readback"),
            size: u64::from(padded_row) * u64::from(height),
            usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
            mapped_at_creation: false,
        });
        Ok(OffscreenTarget {
            colour_view: colour.create_view(&wgpu::TextureViewDescriptor::default()),
            depth_view: depth.create_view(&wgpu::TextureViewDescriptor::default()),
            colour,
            readback,
            padded_row,
            size: (width, height),
        })
    }

    pub fn size(&self) -> (u32, u32) {
        self.size
    }

    pub fn colour_view(&self) -> &wgpu::TextureView {
        &self.colour_view
    }

    pub fn depth_view(&self) -> &wgpu::TextureView {
        &self.depth_view
    }

    /// Records the copy of the colour texture into the staging buffer (call before
    /// submitting the encoder, then [`OffscreenTarget::read`]).
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

    /// Waits for the copy recorded by [`OffscreenTarget::copy_out`] and returns the image.
    pub fn read(&self, ctx: &GpuContext) -> Result<image::RgbaImage, RenderError> {
        let (sender, receiver) = std::sync::mpsc::channel();
        self.readback
            .map_async(wgpu::MapMode::Read, .., move |result| {
                let _ = sender.send(result);
            });
        ctx.wait_idle()?;
        receiver
            .recv()
            .map_err(|_| RenderError::Readback("the map callback never ran".into()))?
            .map_err(|e| RenderError::Readback(e.to_string()))?;
        let (width, height) = self.size;
        let mut pixels = Vec::with_capacity((width * height * 4) as usize);
        {
            let mapped = self
                .readback
                .get_mapped_range(..)
                .map_err(|e| RenderError::Readback(e.to_string()))?;
            for row in mapped.chunks_exact(self.padded_row as usize) {
                pixels.extend_from_slice(&row[..(width * 4) as usize]);
            }
        }
        self.readback.unmap();
        image::RgbaImage::from_raw(width, height, pixels)
            .ok_or_else(|| RenderError::Readback("image size mismatch".into()))
    }
}
