//! LOD flags shared by `mesh`, `render` and `view`: the algorithm and the error bound.

use anyhow::{Context, bail};
use clap::Args;
use terralod_core::Camera;
use terralod_core::lod::{self, AdaptiveOptions, AlgorithmEntry, LodOptions, View};

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
    /// Algorithm adaptive: no geomorphing (the topology then gets all of the tolerance).
    #[arg(long)]
    pub adaptive_no_morph: bool,
    /// Algorithm adaptive: also apply article 002's L∞ distance test (more triangles).
    #[arg(long)]
    pub adaptive_linf: bool,
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
        LodOptions::default()
            .with_view_angle_aware(self.view_angle_aware)
            .with_adaptive(
                AdaptiveOptions::default()
                    .with_morph(!self.adaptive_no_morph)
                    .with_linf_test(self.adaptive_linf),
            )
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
