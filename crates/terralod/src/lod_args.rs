//! LOD flags shared by `mesh`, `render` and `view` (the algorithm and the error bound), and
//! every algorithm's own options, shared with `bench` too.

use crate::detail_args::DetailArgs;
use anyhow::{Context, bail};
use clap::Args;
use terralod_core::Camera;
use terralod_core::lod::{
    self, AdaptiveOptions, AlgorithmEntry, ChunkedOptions, LodOptions, PatchOptions, View,
};

#[derive(Debug, Args)]
pub struct LodArgs {
    /// LOD algorithm, by its registry name (an unknown name lists them all). Default:
    /// quadtree for a view, bintree for --max-error (the fewest vertices for a max error,
    /// found without a table).
    #[arg(long)]
    pub algo: Option<String>,
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
    #[command(flatten)]
    pub algorithm: AlgorithmOptionArgs,
}

/// Every algorithm's own options (shared by `mesh`, `render`, `view` and `bench`).
#[derive(Debug, Args)]
pub struct AlgorithmOptionArgs {
    /// Use the view-angle-aware screen error (article 000), still a true bound.
    #[arg(long)]
    pub view_angle_aware: bool,
    /// Algorithm adaptive: no geomorphing (the topology then gets all of the tolerance).
    #[arg(long)]
    pub adaptive_no_morph: bool,
    /// Algorithm adaptive: also apply article 002's L∞ distance test (more triangles).
    #[arg(long)]
    pub adaptive_linf: bool,
    /// Algorithm adaptive: build tolerance of its sparse tree, in world units: squares
    /// whose subtree error is at most M keep no children (0: lossless). Selections keep
    /// every sample within max(--max-error, M), or τ plus M projected.
    #[arg(long, value_name = "M", default_value_t = 0.0, value_parser = parse_non_negative)]
    pub build_tolerance: f32,
    /// Algorithm adaptive: guard band of its culling, in degrees a side: ground up to
    /// this far outside the view is refined, so turning up to this much a frame does not
    /// pop (0 to 90; 0: refine only what is in view).
    #[arg(long, value_name = "DEG", default_value_t = AdaptiveOptions::DEFAULT_GUARD_DEGREES,
          value_parser = parse_guard_degrees)]
    pub adaptive_guard: f32,
    /// Algorithm P (patches): pool slots allocated at start.
    #[arg(long, value_name = "N", default_value_t = lod::patches::DEFAULT_POOL_CAPACITY,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub pool_capacity: u32,
    /// Algorithm P: cells per patch side (a power of two, 2 to 4096).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = parse_patch_size)]
    pub patch_size: u32,
    /// Algorithm P: split when the eye is closer than F patch sizes (the article: 2).
    #[arg(long, value_name = "F", default_value_t = 2.0, value_parser = parse_positive)]
    pub split_factor: f32,
    /// Algorithm P: world distance added to the split distance per world unit of a
    /// patch's error bound (0: distance only).
    #[arg(long, value_name = "W", default_value_t = 0.0, value_parser = parse_non_negative)]
    pub roughness: f32,
    #[command(flatten)]
    pub chunked: ChunkedArgs,
    #[command(flatten)]
    pub detail: DetailArgs,
}

impl AlgorithmOptionArgs {
    pub fn options(&self) -> LodOptions {
        LodOptions {
            chunked: self.chunked.options(),
            ..LodOptions::default()
        }
        .with_view_angle_aware(self.view_angle_aware)
        .with_adaptive(
            AdaptiveOptions::default()
                .with_morph(!self.adaptive_no_morph)
                .with_linf_test(self.adaptive_linf)
                .with_build_tolerance(self.build_tolerance)
                .with_guard_angle(self.adaptive_guard.to_radians()),
        )
        .with_patches(
            PatchOptions::default()
                .with_pool_capacity(self.pool_capacity)
                .with_patch_size(self.patch_size)
                .with_split_factor(self.split_factor)
                .with_roughness(self.roughness),
        )
    }
}

fn parse_patch_size(text: &str) -> Result<u32, String> {
    let n: u32 = text.parse().map_err(|e| format!("{e}"))?;
    if n.is_power_of_two() && (2..=4096).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} is not a power of two from 2 to 4096"))
    }
}

fn parse_positive(text: &str) -> Result<f32, String> {
    let v: f32 = text.parse().map_err(|e| format!("{e}"))?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} must be finite and greater than 0"))
    }
}

fn parse_guard_degrees(text: &str) -> Result<f32, String> {
    let v = parse_non_negative(text)?;
    if v <= 90.0 {
        Ok(v)
    } else {
        Err(format!("{v} is more than 90 degrees"))
    }
}

fn parse_non_negative(text: &str) -> Result<f32, String> {
    let v: f32 = text.parse().map_err(|e| format!("{e}"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} must be finite and at least 0"))
    }
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
    /// The algorithm's name: `--algo`, or the default for the bound given.
    pub fn algo(&self) -> &str {
        match (&self.algo, self.max_error) {
            (Some(name), _) => name,
            (None, Some(_)) => "bintree",
            (None, None) => "quadtree",
        }
    }

    /// The registry entry named by `--algo`.
    pub fn entry(&self) -> anyhow::Result<&'static AlgorithmEntry> {
        lod::find(self.algo()).with_context(|| {
            format!(
                "unknown algorithm '{}' (available: {})",
                self.algo(),
                lod::names()
            )
        })
    }

    /// The algorithm options; with `--max-error` the selections are view-independent
    /// only, so tables only screen views read are left out.
    pub fn options(&self) -> LodOptions {
        self.algorithm
            .options()
            .with_world_error_only(self.max_error.is_some())
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
                let tolerance = self.algorithm.build_tolerance;
                if self.algo() == "adaptive" && m < tolerance {
                    bail!(
                        "--max-error {m} is below --build-tolerance {tolerance}: the adaptive \
                         tree keeps the samples only within {tolerance}"
                    );
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
