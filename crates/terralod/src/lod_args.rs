//! LOD flags shared by `mesh`, `render` and `view` (the algorithm and the error bound), and
//! every algorithm's own options, shared with `bench` too.

use crate::detail_args::DetailArgs;
use crate::stream_args::TreeBuild;
use crate::stream_args::{self, StreamArgs};
use crate::terrain_args::{TerrainArgs, parse_positive};
use anyhow::{Context, bail};
use clap::Args;
use std::io::Write;
use std::time::{Duration, Instant};
use terralod_core::Camera;
use terralod_core::lod::{
    self, AdaptiveOptions, AlgorithmEntry, ChunkedOptions, LodAlgorithm, LodOptions, PatchOptions,
    View,
};

#[derive(Debug, Args)]
pub struct LodArgs {
    /// LOD algorithm, by its registry name (an unknown name lists them all). Default:
    /// quadtree for a view (streamed-quadtree over an imported directory over
    /// --max-samples, or with --cache-mb), bintree for --max-error (the fewest vertices
    /// for a max error, found without a table).
    #[arg(long, value_parser = parse_algorithm)]
    pub algo: Option<String>,
    /// View-dependent: projected error at most this many pixels.
    #[arg(
        long,
        value_name = "PX",
        allow_negative_numbers = true,
        value_parser = parse_positive,
        conflicts_with = "max_error"
    )]
    pub pixel_error: Option<f32>,
    /// View-independent: every sample within this vertical world distance of the mesh,
    /// the whole terrain covered, no culling.
    #[arg(long, value_name = "M", allow_negative_numbers = true, value_parser = parse_positive)]
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
    /// every sample within max(--max-error, M), or τ plus M projected. [default: 0]
    #[arg(
        long,
        value_name = "M",
        allow_negative_numbers = true,
        value_parser = parse_non_negative
    )]
    pub build_tolerance: Option<f32>,
    /// Algorithm adaptive: guard band of its culling, in degrees a side: ground up to
    /// this far outside the view is refined, so turning up to this much a frame does not
    /// pop (0 to 90; 0: refine only what is in view). [default: 5]
    #[arg(
        long,
        value_name = "DEG",
        allow_negative_numbers = true,
        value_parser = parse_guard_degrees
    )]
    pub adaptive_guard: Option<f32>,
    /// Algorithm adaptive: hold at most N pages (the subtrees of its --page-cells
    /// squares; at least nine more than those at the terrain's far edges, which stay) in
    /// frames in memory, with the others in an unnamed page file in the temporary folder
    /// ($TMPDIR), read in the background when a view wants them (up to 8 read ahead of
    /// a frame for them); ground waiting for a page is drawn coarser meanwhile, and a
    /// still image or export waits for it (0, or a terrain without a page: the whole tree
    /// in memory). [default: 0]
    #[arg(long, value_name = "N")]
    pub page_frames: Option<u32>,
    /// Algorithm adaptive: cells a side of the squares whose subtrees are its pages (a
    /// power of two from 2 to 65536). [default: 256]
    #[arg(long, value_name = "N", value_parser = |t: &str| parse_power_of_two(t, 65_536))]
    pub page_cells: Option<u32>,
    /// Algorithm adaptive built from an imported directory with --page-frames: keep its
    /// pages and tree in FILE instead of a page file gone with the run. A later run over
    /// the same tiles with the same mapping, --build-tolerance and --page-cells reads the
    /// tree back from it instead of building (seconds instead of minutes on a large
    /// terrain); a file of another build, or a damaged one, is built again and replaced
    /// (written beside it, then renamed).
    #[arg(long, value_name = "FILE")]
    pub page_file: Option<std::path::PathBuf>,
    /// Algorithm adaptive: select every drawn vertex with its position and drawn height
    /// instead of indices into the terrain's grid, so drawing and exporting read heights
    /// from the tree alone (A8 step 4, for trees larger than a grid index or height
    /// texture reaches); the same mesh, a little more to upload a frame.
    #[arg(long)]
    pub list_vertices: bool,
    /// Algorithm P (patches): pool slots allocated at start. [default: 1024]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub pool_capacity: Option<u32>,
    /// Algorithm P: cells per patch side (a power of two, 2 to 4096). [default: 32]
    #[arg(long, value_name = "N", value_parser = |t: &str| parse_power_of_two(t, 4096))]
    pub patch_size: Option<u32>,
    /// Algorithm P: split when the eye is closer than F patch sizes (the article: 2).
    /// [default: 2]
    #[arg(long, value_name = "F", value_parser = parse_positive)]
    pub split_factor: Option<f32>,
    /// Algorithm P: world distance added to the split distance per world unit of a
    /// patch's error bound (0: distance only). [default: 0]
    #[arg(long, value_name = "W", value_parser = parse_non_negative)]
    pub roughness: Option<f32>,
    #[command(flatten)]
    pub chunked: ChunkedArgs,
    #[command(flatten)]
    pub detail: DetailArgs,
}

impl AlgorithmOptionArgs {
    /// How algorithm A may be built from an imported directory's tiles: not with a local
    /// detail (inserted into the loaded level), page by page with `--page-frames`, else
    /// whole.
    pub fn tree_build(&self) -> TreeBuild {
        if self.detail.detail.is_some() {
            TreeBuild::Never
        } else if self.page_frames.unwrap_or(0) > 0 {
            TreeBuild::Paged {
                page_cells: self
                    .page_cells
                    .unwrap_or(AdaptiveOptions::DEFAULT_PAGE_CELLS),
            }
        } else {
            TreeBuild::Whole
        }
    }

    pub fn options(&self) -> LodOptions {
        let patches = PatchOptions::default();
        LodOptions {
            chunked: self.chunked.options(),
            ..LodOptions::default()
        }
        .with_view_angle_aware(self.view_angle_aware)
        .with_adaptive(
            AdaptiveOptions::default()
                .with_morph(!self.adaptive_no_morph)
                .with_linf_test(self.adaptive_linf)
                .with_build_tolerance(self.build_tolerance())
                .with_page_frames(self.page_frames.unwrap_or(0))
                .with_list_vertices(self.list_vertices)
                .with_page_cells(
                    self.page_cells
                        .unwrap_or(AdaptiveOptions::DEFAULT_PAGE_CELLS),
                )
                .with_guard_angle(
                    self.adaptive_guard
                        .unwrap_or(AdaptiveOptions::DEFAULT_GUARD_DEGREES)
                        .to_radians(),
                ),
        )
        .with_patches(
            patches
                .with_pool_capacity(self.pool_capacity.unwrap_or(patches.pool_capacity))
                .with_patch_size(self.patch_size.unwrap_or(patches.patch_size))
                .with_split_factor(self.split_factor.unwrap_or(patches.split_factor))
                .with_roughness(self.roughness.unwrap_or(patches.roughness)),
        )
    }

    /// Algorithm adaptive's build tolerance (0 unless given).
    pub fn build_tolerance(&self) -> f32 {
        self.build_tolerance.unwrap_or(0.0)
    }

    /// Refuses the flags that none of `algorithms` reads, so none is ignored without a
    /// word: an algorithm's own options, and `--view-angle-aware` where nothing projects
    /// an error (algorithm P, chunked by distance, or a `world_error` selection, which has
    /// no camera). The viewer runs every algorithm (Tab), so it takes them all.
    pub fn refuse_unread(&self, algorithms: &[&str], world_error: bool) -> anyhow::Result<()> {
        let chunked = &self.chunked;
        let owned = [
            ("--adaptive-no-morph", self.adaptive_no_morph, "adaptive"),
            ("--adaptive-linf", self.adaptive_linf, "adaptive"),
            (
                "--build-tolerance",
                self.build_tolerance.is_some(),
                "adaptive",
            ),
            (
                "--adaptive-guard",
                self.adaptive_guard.is_some(),
                "adaptive",
            ),
            ("--page-frames", self.page_frames.is_some(), "adaptive"),
            ("--page-cells", self.page_cells.is_some(), "adaptive"),
            ("--page-file", self.page_file.is_some(), "adaptive"),
            ("--list-vertices", self.list_vertices, "adaptive"),
            ("--pool-capacity", self.pool_capacity.is_some(), "patches"),
            ("--patch-size", self.patch_size.is_some(), "patches"),
            ("--split-factor", self.split_factor.is_some(), "patches"),
            ("--roughness", self.roughness.is_some(), "patches"),
            ("--block-size", chunked.block_size.is_some(), "chunked"),
            ("--lod-distance", chunked.lod_distance.is_some(), "chunked"),
            ("--error-aware", chunked.error_aware, "chunked"),
            ("--morph", chunked.morph, "chunked"),
        ];
        for (flag, given, owner) in owned {
            if given && !algorithms.contains(&owner) {
                bail!("{flag} is an option of algorithm {owner}: give --algo {owner}");
            }
        }
        if chunked.lod_distance.is_some() && (chunked.error_aware || world_error) {
            bail!(
                "--lod-distance sets chunked's levels by distance: it does not apply with \
                 --error-aware or --max-error (levels by error)"
            );
        }
        if self.view_angle_aware {
            if world_error {
                bail!(
                    "--view-angle-aware bounds the projected error: it does not apply with \
                     --max-error"
                );
            }
            let projects = |name: &&str| match *name {
                "patches" => false,
                "chunked" => chunked.error_aware,
                _ => true,
            };
            if !algorithms.iter().any(projects) {
                bail!(
                    "--view-angle-aware bounds the projected error, which {} does not use \
                     (chunked does with --error-aware)",
                    algorithms.join(", ")
                );
            }
        }
        Ok(())
    }
}

/// A registered algorithm's name (an unknown one is a bad flag, exit 2, listing them).
pub fn parse_algorithm(text: &str) -> Result<String, String> {
    match lod::find(text) {
        Some(entry) => Ok(entry.name.to_owned()),
        None => Err(format!(
            "unknown algorithm '{text}' (available: {})",
            lod::names()
        )),
    }
}

/// A power of two from 2 to `max`.
pub fn parse_power_of_two(text: &str, max: u32) -> Result<u32, String> {
    let n: u32 = text.parse().map_err(|e| format!("{e}"))?;
    if n.is_power_of_two() && (2..=max).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} is not a power of two from 2 to {max}"))
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

/// Selections of one view in a row, waiting for the algorithm's background reads
/// (algorithm A's pages) in between, until no read can bring more of what the view asks
/// for: so a still image or an export shows the data the view wants. Reads that fail are
/// reported once each on stderr, and what needed them stays coarser. Refuses a view that
/// still waits for pages no frame can take (`--page-frames` too small for it), and gives
/// up after `limit`.
pub fn settle_reads(
    algorithm: &mut dyn LodAlgorithm,
    view: &View,
    limit: Duration,
) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        algorithm.select(view);
        report_faults(algorithm);
        let reads = algorithm.reads();
        if reads.pending == 0 {
            let waiting = reads.held_back - reads.faulty;
            if waiting > 0 {
                bail!(
                    "--page-frames is too small for this view: it needs more pages than \
                     the frames hold, so {waiting} squares stay coarser than the tolerance \
                     asks (the ground beyond the nearest pages); raise --page-frames"
                );
            }
            return Ok(());
        }
        if start.elapsed() > limit {
            bail!(
                "pages still coming after {:.0} s ({} pending)",
                limit.as_secs_f64(),
                reads.pending
            );
        }
        algorithm.await_reads();
    }
}

/// Shows on stderr the background reads that failed since the last call (each is
/// reported once by the algorithm).
pub fn report_faults(algorithm: &mut dyn LodAlgorithm) {
    for fault in algorithm.take_faults() {
        let _ = writeln!(
            std::io::stderr(),
            "warning: {fault}; drawing the ground around it coarser"
        );
    }
}

/// Algorithm C's flags (shared with `bench`).
#[derive(Debug, Args)]
pub struct ChunkedArgs {
    /// chunked: segments per block side, a power of two from 16 to 256. [default: 64]
    #[arg(long, value_name = "N", value_parser = parse_block_size)]
    pub block_size: Option<u32>,
    /// chunked: distance per level, in block widths (at least 1). [default: 2]
    #[arg(long, value_name = "Q", value_parser = parse_lod_distance)]
    pub lod_distance: Option<f32>,
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
        let defaults = ChunkedOptions::DEFAULT;
        ChunkedOptions {
            block_size: self.block_size.unwrap_or(defaults.block_size),
            lod_distance: self.lod_distance.unwrap_or(defaults.lod_distance),
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
    /// Without `--algo`, over an imported directory too large to load or with a flag of
    /// the tile cache, a view-dependent run streams the directory
    /// ([`stream_args::default_to_streaming`]).
    pub fn default_to_streaming(&mut self, terrain: &TerrainArgs, stream: &StreamArgs) {
        if self.max_error.is_none() {
            stream_args::default_to_streaming(&mut self.algo, terrain, stream);
        }
    }

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

    /// The registry entry of a command that runs that one algorithm (`mesh`, `render`),
    /// once the flags it would not read are refused
    /// ([`AlgorithmOptionArgs::refuse_unread`]).
    pub fn only_entry(&self) -> anyhow::Result<&'static AlgorithmEntry> {
        let entry = self.entry()?;
        self.algorithm
            .refuse_unread(&[entry.name], self.max_error.is_some())?;
        Ok(entry)
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
                let tolerance = self.algorithm.build_tolerance();
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
