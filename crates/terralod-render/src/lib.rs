//! The wgpu renderer of terralod: draws any selection of the LOD registry (explicit
//! triangles or patch instances) into any colour and depth target, headless or into a
//! window surface (the window itself belongs to the caller; this crate has no winit).
//!
//! - [`GpuContext`]: instance, adapter, device and queue.
//! - [`TerrainRenderer`]: static data (heights, full-resolution normals, an optional
//!   colour texture) uploaded once; per frame only the selection's indices or instances.
//!   Lighting, a height and slope colour ramp, fog and sky, reversed-Z depth. Algorithm
//!   P's pool slots live in one GPU buffer, a slot uploaded only when it was refilled.
//! - [`DebugLines`]: node boxes and the frozen LOD camera's frustum.
//! - [`OffscreenTarget`]: render to a texture and read it back as an image.

mod buffers;
pub mod context;
pub mod lines;
mod morph_list;
mod normals;
mod slots;
pub mod target;
pub mod terrain;
pub mod timing;

pub use context::{AdapterSummary, GpuContext};
pub use lines::{DebugLines, LineVertex};
pub use slots::SLOT_VERTEX_BYTES;
pub use target::{COLOUR_FORMAT, OffscreenTarget};
pub use terrain::{DEPTH_FORMAT, FrameSettings, SHADER_SOURCE, TerrainRenderer, UploadStats};
pub use timing::{FrameTiming, GpuTimer, timed_frame};

use terralod_core::lod::Selection;

/// Why the GPU could not do what was asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RenderError {
    #[error("no GPU adapter found ({0}); install a Vulkan driver (Debian: mesa-vulkan-drivers)")]
    NoAdapter(String),
    #[error("GPU not supported: {0}")]
    Unsupported(String),
    #[error("GPU device error: {0}")]
    Device(String),
    #[error("{what} of {width} x {height} exceeds the GPU's texture limit of {max_side} a side")]
    TooLarge {
        what: String,
        width: u32,
        height: u32,
        max_side: u32,
    },
    #[error("reading the frame back failed: {0}")]
    Readback(String),
    #[error(
        "the terrain of {width} x {height} samples is larger than the GPU's largest texture \
         ({max_side} a side): only a selection that carries its heights can be drawn \
         (algorithm adaptive with --list-vertices, or patches, streamed or streamed-quadtree \
         with a pool that fits one storage binding)"
    )]
    NeedsCarriedHeights {
        width: u32,
        height: u32,
        max_side: u32,
    },
}

/// Draws one frame of `selection` into `target` and reads it back.
pub fn render_to_image(
    ctx: &GpuContext,
    renderer: &mut TerrainRenderer,
    target: &OffscreenTarget,
    selection: &Selection<'_>,
    settings: &FrameSettings,
    lines: &DebugLines,
) -> Result<image::RgbaImage, RenderError> {
    renderer.prepare(ctx, selection, settings, lines)?;
    let mut encoder = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("frame"),
        });
    {
        let mut pass =
            TerrainRenderer::begin_pass(&mut encoder, target.colour_view(), target.depth_view());
        renderer.draw(&mut pass);
    }
    target.copy_out(&mut encoder);
    ctx.queue.submit([encoder.finish()]);
    target.read(ctx)
}
