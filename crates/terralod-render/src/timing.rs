//! Frame timing: GPU time of the terrain pass from timestamp queries (where the adapter has
//! them) and the wall time of a whole frame, for `render --frames` and the benchmarks.

use crate::RenderError;
use crate::context::GpuContext;
use crate::lines::DebugLines;
use crate::target::OffscreenTarget;
use crate::terrain::{FrameSettings, TerrainRenderer};
use std::time::Instant;
use terralod_core::lod::Selection;

/// Timestamp queries around one pass, resolved and read back after the frame.
#[derive(Debug)]
pub struct GpuTimer {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    readback: wgpu::Buffer,
    /// Nanoseconds per timestamp tick.
    period: f32,
}

impl GpuTimer {
    /// `None` when the device has no timestamp queries (then only wall time is measured).
    pub fn new(ctx: &GpuContext) -> Option<GpuTimer> {
        if !ctx
            .device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
        {
            return None;
        }
        let queries = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("frame timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let buffer = |label, usage| {
            ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: 16,
                usage,
                mapped_at_creation: false,
            })
        };
        Some(GpuTimer {
            queries,
            resolved: buffer(
                "timestamps resolved",
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            ),
            readback: buffer(
                "timestamps readback",
                wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
            ),
            period: ctx.queue.get_timestamp_period(),
        })
    }

    fn writes(&self) -> wgpu::RenderPassTimestampWrites<'_> {
        wgpu::RenderPassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        }
    }

    fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.resolve_query_set(&self.queries, 0..2, &self.resolved, 0);
        encoder.copy_buffer_to_buffer(&self.resolved, 0, &self.readback, 0, 16);
    }

    /// Milliseconds between the two timestamps (after the frame was waited for).
    fn read_ms(&self, ctx: &GpuContext) -> Result<f64, RenderError> {
        let (sender, receiver) = std::sync::mpsc::channel();
        self.readback.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = sender.send(r);
        });
        ctx.wait_idle()?;
        receiver
            .recv()
            .map_err(|_| RenderError::Readback("timestamps never mapped".into()))?
            .map_err(|e| RenderError::Readback(e.to_string()))?;
        let ticks = {
            let view = self
                .readback
                .get_mapped_range(..)
                .map_err(|e| RenderError::Readback(e.to_string()))?;
            let stamps: [u64; 2] = bytemuck::pod_read_unaligned(&view[..16]);
            stamps[1].saturating_sub(stamps[0])
        };
        self.readback.unmap();
        Ok(ticks as f64 * f64::from(self.period) * 1e-6)
    }
}

/// What one timed frame cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameTiming {
    /// GPU time of the terrain pass, when timestamps are available.
    pub gpu_ms: Option<f64>,
    /// Upload, encode, submit and wait for the frame to finish, on the wall clock.
    pub wall_ms: f64,
}

/// Draws one frame of `selection` into `target` and waits for it; returns its timing.
pub fn timed_frame(
    ctx: &GpuContext,
    renderer: &mut TerrainRenderer,
    target: &OffscreenTarget,
    timer: Option<&GpuTimer>,
    selection: &Selection<'_>,
    settings: &FrameSettings,
    lines: &DebugLines,
) -> Result<FrameTiming, RenderError> {
    let start = Instant::now();
    renderer.prepare(ctx, selection, settings, lines)?;
    let mut encoder = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("timed frame"),
        });
    {
        let mut pass = TerrainRenderer::begin_timed_pass(
            &mut encoder,
            target.colour_view(),
            target.depth_view(),
            timer.map(GpuTimer::writes),
        );
        renderer.draw(&mut pass);
    }
    if let Some(timer) = timer {
        timer.resolve(&mut encoder);
    }
    ctx.queue.submit([encoder.finish()]);
    ctx.wait_idle()?;
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    let gpu_ms = timer.map(|t| t.read_ms(ctx)).transpose()?;
    Ok(FrameTiming { gpu_ms, wall_ms })
}
