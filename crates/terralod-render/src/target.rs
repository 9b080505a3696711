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
    format: wgpu::TextureFormat,
    /// Whether texels are stored blue first (a BGRA window's format).
    blue_first: bool,
}

/// Whether `format` stores blue first (`Some(true)`) or red first; `None` for formats an
/// 8-bit RGBA image cannot take byte for byte.
fn blue_first(format: wgpu::TextureFormat) -> Option<bool> {
    use wgpu::TextureFormat as F;
    match format {
        F::Rgba8Unorm | F::Rgba8UnormSrgb => Some(false),
        F::Bgra8Unorm | F::Bgra8UnormSrgb => Some(true),
        _ => None,
    }
}

/// A depth texture of `size` in [`DEPTH_FORMAT`], for a window or an offscreen target.
pub fn depth_texture(ctx: &GpuContext, (width, height): (u32, u32)) -> wgpu::Texture {
    ctx.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("depth"),
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

impl OffscreenTarget {
    /// A target in [`COLOUR_FORMAT`].
    pub fn new(ctx: &GpuContext, size: (u32, u32)) -> Result<OffscreenTarget, RenderError> {
        Self::with_format(ctx, size, COLOUR_FORMAT)
    }

    /// A target in another 8-bit RGBA or BGRA format (a window's, for screenshots that
    /// match what the window shows); the image read back is always RGBA.
    pub fn with_format(
        ctx: &GpuContext,
        (width, height): (u32, u32),
        format: wgpu::TextureFormat,
    ) -> Result<OffscreenTarget, RenderError> {
        let Some(blue_first) = blue_first(format) else {
            return Err(RenderError::Unsupported(format!(
                "reading back {format:?} frames"
            )));
        };
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
            format,
            wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        );
        let depth = depth_texture(ctx, (width, height));
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
            format,
            blue_first,
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
        let image = {
            let mapped = self
                .readback
                .get_mapped_range(..)
                .map_err(|e| RenderError::Readback(e.to_string()))?;
            unpad_rows(&mapped, self.padded_row, self.size, self.blue_first)
        };
        self.readback.unmap();
        image.ok_or_else(|| RenderError::Readback("image size mismatch".into()))
    }
}

/// An opaque RGBA image from rows of `padded_row` bytes (frames are opaque: an overlay's
/// blending may leave alpha below 1, which means nothing in a PNG).
fn unpad_rows(
    bytes: &[u8],
    padded_row: u32,
    (width, height): (u32, u32),
    blue_first: bool,
) -> Option<image::RgbaImage> {
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
        let rgba = unpad_rows(&bytes, 12, (2, 2), false).expect("valid layout");
        assert_eq!(rgba.get_pixel(1, 1).0, [10, 11, 12, 255]);
        let bgra = unpad_rows(&bytes, 12, (2, 2), true).expect("valid layout");
        assert_eq!(bgra.get_pixel(0, 0).0, [3, 2, 1, 255]);
        assert!(unpad_rows(&bytes, 12, (2, 3), true).is_none());
        assert!(unpad_rows(&bytes, 4, (2, 2), true).is_none());
        assert_eq!(blue_first(wgpu::TextureFormat::Rgba16Float), None);
    }
}
