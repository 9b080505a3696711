//! LOD flags shared by `mesh`, `render` and `view`: the algorithm and the error bound.

use anyhow::{Context, bail};
use clap::Args;
use terralod_core::Camera;
use terralod_core::lod::{self, AlgorithmEntry, ChunkedOptions, LodOptions, View};

#[derive(Debug, Args)]
pub struct LodArgs {
    /// LOD algorithm, by its registry name (an unknown name lists them all).
    #[arg(long, default_value = "quadtree")]
    pub algo: String,
    /// View-dependent: projected error at most this many pixels.
    #[arg(long, value_name = "PX", allow_negative_numbers = true)]
    pub pixel_error: Option<f32>,
    /// View-independent: every sample within this vertical world distance of the mesh,
    /// the whole terrain covered, no culling.
    #[arg(long, value_name = "M", allow_negative_numbers = true)]
    pub max_error: Option<f32>,
    /// Keep the nodes outside the view (drawn, but not refined for the view).
    #[arg(long)]
    pub no_cull: bool,
    /// Use the view-angle-aware screen error (article 000), still a true bound.
    #[arg(long)]
    pub view_angle_aware: bool,
    #[command(flatten)]
    pub chunked: ChunkedArgs,
}

/// Algorithm C's flags (shared with `bench`).
#[derive(Debug, Args)]
pub struct ChunkedArgs {
    /// chunked: segments per block side, a power of two from 16 to 256.
    #[arg(long, value_name = "N", default_value_t = ChunkedOptions::DEFAULT.block_size, value_parser = parse_block_size)]
    pub block_size: u32,
    /// chunked: distance per level, in block widths (at least 1).
    #[arg(long, value_name = "Q", default_value_t = ChunkedOptions::DEFAULT.lod_distance, value_parser = parse_lod_distance)]
    pub lod_distance: f32,
    /// chunked: each block's level from its error, so the projected error stays within
    /// the pixel tolerance (or --max-error).
    #[arg(long)]
    pub error_aware: bool,
    /// chunked: morph vertices towards the coarser level with distance (no popping).
    #[arg(long, conflicts_with = "error_aware")]
    pub morph: bool,
}

impl ChunkedArgs {
    pub fn options(&self) -> ChunkedOptions {
        ChunkedOptions {
            block_size: self.block_size,
            lod_distance: self.lod_distance,
            error_aware: self.error_aware,
            morph: self.morph,
        }
    }
}

/// `--block-size`, checked by [`ChunkedOptions::validate`].
fn parse_block_size(text: &str) -> Result<u32, String> {
    let block_size = text.parse::<u32>().map_err(|e| e.to_string())?;
    ChunkedOptions {
        block_size,
        ..ChunkedOptions::DEFAULT
    }
    .validate()
    .map(|()| block_size)
    .map_err(|e| e.to_string())
}

/// `--lod-distance`, checked by [`ChunkedOptions::validate`].
fn parse_lod_distance(text: &str) -> Result<f32, String> {
    let lod_distance = text.parse::<f32>().map_err(|e| e.to_string())?;
    ChunkedOptions {
        lod_distance,
        ..ChunkedOptions::DEFAULT
    }
    .validate()
    .map(|()| lod_distance)
    .map_err(|e| e.to_string())
}

impl LodArgs {
    /// The registry entry named by `--algo`.
    pub fn entry(&self) -> anyhow::Result<&'static AlgorithmEntry> {
        lod::find(&self.algo).with_context(|| {
            format!(
                "unknown algorithm '{}' (available: {})",
                self.algo,
                lod::names()
            )
        })
    }

    pub fn options(&self) -> LodOptions {
        LodOptions {
            chunked: self.chunked.options(),
            ..LodOptions::default()
        }
        .with_view_angle_aware(self.view_angle_aware)
    }

    /// The view the algorithm selects for. `camera` is called only for a view-dependent
    /// selection; `default_pixels` is the tolerance when neither bound is given (None:
    /// one is required).
    pub fn view(
        &self,
        camera: impl FnOnce() -> anyhow::Result<Camera>,
        default_pixels: Option<f32>,
    ) -> anyhow::Result<View> {
        match (self.pixel_error, self.max_error) {
            (Some(_), Some(_)) => bail!("give either --pixel-error or --max-error, not both"),
            (None, Some(m)) => {
                if self.no_cull {
                    bail!("--max-error is view-independent: it takes no --no-cull");
                }
                View::world_error(m).context("--max-error")
            }
            (pixels, None) => {
                let Some(px) = pixels.or(default_pixels) else {
                    bail!("give --pixel-error PX (with --eye, --target) or --max-error M");
                };
                Ok(View::screen(camera()?, px)
                    .context("--pixel-error")?
                    .with_cull(!self.no_cull))
            }
        }
    }
}
