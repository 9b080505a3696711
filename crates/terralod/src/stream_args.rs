//! Flags and helpers of the commands that stream an imported directory through the tile
//! cache (`--algo streamed` or `streamed-quadtree` over a directory, issue 9) instead of
//! loading it whole.

use crate::lod_args::settle_reads;
use crate::terrain_args::{Terrain, TerrainArgs};
use anyhow::{Context, bail};
use clap::Args;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use terralod_core::Aabb;
use terralod_core::Heightfield;
use terralod_core::lod::{
    self, KeptPages, LodAlgorithm, LodOptions, Reads, Selection, SelectionStats, StreamedSource,
    StreamingLod, TiledAdaptive, View,
};
use terralod_core::tiles::{
    DetailOptions, DetailTiles, MemoryTiles, MemoryTilesOptions, TileCache, TiledTerrain,
};

/// The tile cache of a streamed directory.
#[derive(Debug, Args)]
pub struct StreamArgs {
    /// With a streaming algorithm (`streamed`, `streamed-quadtree`) over an imported
    /// directory (streamed, not loaded): the tile cache's memory cap, in MiB of decoded tiles [default: 1024].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub cache_mb: Option<u32>,
    /// With a streaming algorithm over an imported directory: threads loading tiles
    /// [default: 2].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub loader_threads: Option<u32>,
    /// With a streaming algorithm over an imported directory: procedural detail levels below
    /// the finest stored one, each with cells half as wide, generated around the camera
    /// and dropped when it leaves (at most log2 of the tile size).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=8))]
    pub detail_levels: u32,
    /// Bump amplitude of the procedural detail, in cells of each detail level (0 ..= 4),
    /// with --detail-levels. [default: 0.25]
    #[arg(long, allow_negative_numbers = true)]
    pub detail_roughness: Option<f32>,
}

impl StreamArgs {
    /// Refuses the streaming flags where nothing streams (a file, or an algorithm other
    /// than the streaming ones): they would be ignored without a word.
    pub fn refuse_unless_streamed(&self, streamed: bool) -> anyhow::Result<()> {
        if let Some(flag) = self.flag_given().filter(|_| !streamed) {
            bail!(
                "{flag} applies to a streaming algorithm ({}) over an imported directory \
                 (terralod import makes one)",
                lod::streaming_names()
            );
        }
        if self.detail_roughness.is_some() && self.detail_levels == 0 {
            bail!("--detail-roughness shapes the procedural detail: give --detail-levels K too");
        }
        Ok(())
    }

    /// The first flag given that only a streaming algorithm reads.
    pub fn flag_given(&self) -> Option<&'static str> {
        [
            ("--detail-levels", self.detail_levels > 0),
            ("--cache-mb", self.cache_mb.is_some()),
            ("--loader-threads", self.loader_threads.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }

    /// The tile cache's cap in bytes.
    pub fn cache_bytes(&self) -> u64 {
        u64::from(self.cache_mb.unwrap_or(1024)) << 20
    }

    /// Threads loading tiles.
    pub fn loaders(&self) -> usize {
        self.loader_threads.unwrap_or(2) as usize
    }

    pub fn detail(&self) -> DetailOptions {
        DetailOptions {
            roughness: self
                .detail_roughness
                .unwrap_or(DetailOptions::DEFAULT.roughness),
            ..DetailOptions::DEFAULT.with_levels(self.detail_levels)
        }
    }
}

/// The algorithm `mesh`, `render`, `view` and `bench` stream an imported directory with
/// when no `--algo` is given and the directory is not to be loaded whole: the streamed
/// form of the default `quadtree`.
pub const STREAMING_DEFAULT: &str = "streamed-quadtree";

/// Why a run given no `--algo` streams `terrain`'s directory with [`STREAMING_DEFAULT`]
/// instead of loading its finest level whole: that level is over `--max-samples`, or a
/// flag of the tile cache was given (which only a streaming algorithm reads). `None` for
/// a file, the built-in terrain, or a directory whose header cannot be read (loading it
/// then says why).
pub fn streaming_reason(terrain: &TerrainArgs, stream: &StreamArgs) -> Option<String> {
    let dir = terrain.file.as_deref().filter(|f| f.is_dir())?;
    if let Some(flag) = stream.flag_given() {
        return Some(format!("{flag} is given"));
    }
    let header = TiledTerrain::read_header(dir).ok()?;
    let samples = u64::from(header.width) * u64::from(header.height);
    (samples > terrain.max_samples).then(|| {
        format!(
            "its finest level has {samples} samples, over --max-samples {}",
            terrain.max_samples
        )
    })
}

/// Sets `algo` to [`STREAMING_DEFAULT`] where no algorithm is named and
/// [`streaming_reason`] says the directory streams, and says so on stderr.
pub fn default_to_streaming(algo: &mut Option<String>, terrain: &TerrainArgs, stream: &StreamArgs) {
    if algo.is_some() {
        return;
    }
    if let Some(reason) = streaming_reason(terrain, stream) {
        let dir = terrain.file.as_deref().unwrap_or(Path::new(""));
        let _ = writeln!(
            std::io::stderr(),
            "note: {}: {reason}: streaming it with --algo {STREAMING_DEFAULT}",
            dir.display()
        );
        *algo = Some(STREAMING_DEFAULT.to_owned());
    }
}

/// Largest level a streamed command plans cameras and paths on: the finest level of at most
/// this many samples is assembled in memory (16 MB of `f32` at most).
const PLAN_SAMPLES: u64 = 1 << 22;

/// Prints a note of [`StreamedTerrain::algorithm`] on stderr.
pub fn to_stderr(line: &str) {
    eprintln!("{line}");
}

/// Whether registered algorithm `algorithm` streams an imported directory's tiles through
/// the tile cache (the others load its finest level, or build from its tiles: see
/// [`streams`]).
pub fn is_streaming(algorithm: &str) -> bool {
    lod::find(algorithm).is_some_and(|entry| entry.streams_tiles)
}

/// Whether and how algorithm A may be built from an imported directory's tiles instead of
/// loading its finest level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeBuild {
    /// Not from the tiles: the command inserts a local detail, which only a tree built
    /// from the loaded level takes, or draws from memory (the viewer).
    Never,
    /// The tree whole in memory (no `--page-frames`): within `--max-samples`.
    Whole,
    /// Page by page, each page written to the page file as it is built
    /// (`--page-frames`), the pages the subtrees of squares of `page_cells` cells: any
    /// size, where the terrain has such squares with children below them (else the tree
    /// has no pages and is built whole).
    Paged { page_cells: u32 },
}

/// Whether algorithm `algorithm` over the imported directory of `terrain` is built from its
/// tiles without loading its finest level (algorithm A: the same tree as from the loaded
/// level) when built as `build` says: paged at any size where the tree has pages; whole
/// only within `--max-samples`, since that tree is as large as the level (past it the load
/// refuses).
pub fn builds_from_tiles(terrain: &TerrainArgs, algorithm: &str, build: TreeBuild) -> bool {
    let Some(dir) = terrain.file.as_deref().filter(|f| f.is_dir()) else {
        return false;
    };
    let builds = lod::find(algorithm).is_some_and(|e| e.stream.is_some() && !e.streams_tiles);
    builds
        && match build {
            TreeBuild::Never => false,
            TreeBuild::Whole | TreeBuild::Paged { .. } => {
                TiledTerrain::read_header(dir).is_ok_and(|header| {
                    let within =
                        u64::from(header.width) * u64::from(header.height) <= terrain.max_samples;
                    let root = (header.width.max(header.height) - 1).next_power_of_two();
                    let paged = matches!(build, TreeBuild::Paged { page_cells }
                        if page_cells > 2 && page_cells < root);
                    within || paged
                })
            }
        }
}

/// Refuses `--page-file` where nothing would keep it: it holds the pages of algorithm
/// adaptive built from an imported directory's tiles page by page (`build` paged and
/// [`builds_from_tiles`]); checks that its folder exists and that it names no input.
pub fn check_page_file(
    terrain: &TerrainArgs,
    algorithm: &str,
    build: TreeBuild,
    page_file: Option<&Path>,
) -> anyhow::Result<()> {
    let Some(path) = page_file else {
        return Ok(());
    };
    if !matches!(build, TreeBuild::Paged { .. }) || !builds_from_tiles(terrain, algorithm, build) {
        bail!(
            "--page-file keeps the pages of algorithm adaptive built from an imported \
             directory's tiles with --page-frames N (and without --detail): not for this run"
        );
    }
    // A folder (the directory itself too) or a missing folder is refused here.
    terralod_core::io::check_destination(path)?;
    // Inside the directory it would sit among the tiles (and could be named after one).
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
    let folder = std::fs::canonicalize(folder.unwrap_or(Path::new(".")))?;
    if let Some(dir) = terrain.file.as_deref()
        && folder.starts_with(std::fs::canonicalize(dir)?)
    {
        bail!(
            "{}: --page-file lies inside the imported directory {}: keep it elsewhere",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// The imported directory of `terrain` when `algorithm` streams its tiles or is built from
/// them ([`builds_from_tiles`]), instead of loading it.
pub fn streams<'a>(
    terrain: &'a TerrainArgs,
    algorithm: &str,
    build: TreeBuild,
) -> Option<&'a Path> {
    let dir = terrain.file.as_deref().filter(|f| f.is_dir())?;
    (is_streaming(algorithm) || builds_from_tiles(terrain, algorithm, build)).then_some(dir)
}

/// An opened directory: the tiles, and a coarse level of it for planning cameras.
#[derive(Debug)]
pub struct StreamedTerrain {
    pub tiled: Arc<TiledTerrain>,
    /// The finest level of at most 4 M samples (its own mapping, cells `2^level` wide):
    /// cameras, paths and far planes need the terrain's shape, not its detail.
    pub plan: Heightfield,
}

impl StreamedTerrain {
    /// Opens `dir` under its import's mapping, with the mapping flags given replacing
    /// their parts of it (the tiles store raw samples, so this is the terrain imported with
    /// that mapping). A plan level with a bad tile is skipped for the next coarser one.
    pub fn open(dir: &Path, terrain: &TerrainArgs) -> anyhow::Result<StreamedTerrain> {
        terrain.refuse_unused_by(None, dir)?;
        let tiled =
            TiledTerrain::open(dir).with_context(|| format!("opening {}", dir.display()))?;
        let mapping = terrain.mapping_over(tiled.header().mapping);
        let tiled = Arc::new(tiled.with_mapping(mapping).with_context(|| {
            format!(
                "{}: --cell-size/--height-scale/--height-offset",
                dir.display()
            )
        })?);
        let mut last_error = None;
        for (level, grid) in tiled.header().levels.iter().enumerate() {
            if u64::from(grid.width) * u64::from(grid.height) > PLAN_SAMPLES {
                continue;
            }
            match tiled.to_heightfield(level as u32, PLAN_SAMPLES) {
                Ok(plan) => return Ok(StreamedTerrain { tiled, plan }),
                Err(error) => last_error = Some(error),
            }
        }
        let error = last_error.map_or_else(
            || anyhow::anyhow!("no level of at most {PLAN_SAMPLES} samples"),
            anyhow::Error::from,
        );
        Err(error.context(format!("planning over {}", dir.display())))
    }

    /// Streaming algorithm `name` (see [`is_streaming`]) over a new tile cache of this
    /// directory. What became of a page file goes to `note`, a line at a time (the viewer
    /// prints it around its spinner).
    pub fn algorithm(
        &self,
        name: &str,
        args: &StreamArgs,
        options: LodOptions,
        page_file: Option<&Path>,
        note: &dyn Fn(&str),
    ) -> anyhow::Result<ReportingStream> {
        let cache = TileCache::new(self.tiled.clone(), args.cache_bytes(), args.loaders())
            .with_context(|| {
                format!("starting the tile cache of {}", self.tiled.dir().display())
            })?;
        let tiles = DetailTiles::new(cache, args.detail())
            .with_context(|| format!("adding detail to {}", self.tiled.dir().display()))?;
        if let Some(path) = page_file {
            // Only algorithm A keeps pages; `check_page_file` refuses the flag elsewhere.
            if name != "adaptive" {
                bail!("--page-file keeps algorithm adaptive's pages; {name} has none");
            }
            let (algorithm, kept) = TiledAdaptive::with_page_file(tiles, options, path)
                .with_context(|| {
                    format!("building adaptive over {}", self.tiled.dir().display())
                })?;
            let path = path.display();
            note(&match kept {
                KeptPages::Reused => format!("{path}: algorithm adaptive's tree read back"),
                KeptPages::Written => format!("{path}: algorithm adaptive's tree kept"),
                KeptPages::Replaced(why) => {
                    format!("warning: {why}: algorithm adaptive's tree built again and kept")
                }
                KeptPages::NotKept => format!(
                    "warning: {path}: not kept (left as it was): a coarser level stood in for \
                     tiles that could not be read, which a later run would inherit"
                ),
                KeptPages::NoPages => format!(
                    "warning: {path}: not kept: algorithm adaptive's tree has no pages \
                     (no square of --page-cells has children below it)"
                ),
            });
            return Ok(ReportingStream(Box::new(algorithm)));
        }
        match lod::find(name).and_then(|entry| entry.stream) {
            Some(stream) => {
                let algorithm = stream(tiles, options).with_context(|| {
                    format!("building {name} over {}", self.tiled.dir().display())
                })?;
                Ok(ReportingStream(algorithm))
            }
            None => bail!(
                "{name} does not stream a directory; these do: {}",
                lod::streaming_names()
            ),
        }
    }

    /// The finest level as drawn (detail included) for the oracles, if it has at most
    /// `max_samples` samples: the detail is generated over level 0 exactly as the flight's
    /// tiles generate it.
    pub fn finest_field(&self, args: &StreamArgs, max_samples: u64) -> anyhow::Result<Heightfield> {
        let detail = args.detail();
        let header = self.tiled.header();
        let widen = |samples: u32| (u64::from(samples) - 1) * (1u64 << detail.levels) + 1;
        let samples = widen(header.width) * widen(header.height);
        if samples > max_samples {
            bail!("the finest level has {samples} samples, more than {max_samples}");
        }
        let stored = self.tiled.to_heightfield(0, max_samples)?;
        if detail.levels == 0 {
            return Ok(stored);
        }
        let sizes = MemoryTilesOptions {
            tile_cells: header.tile_cells,
            block_cells: header.block_cells,
        };
        let mut tiles = DetailTiles::new(MemoryTiles::new(&stored, sizes)?, detail)?;
        tiles
            .to_heightfield()
            .context("every tile of an in-memory terrain is resident")
    }
}

/// What a drawing command (`render`, `view`) draws: an imported directory it streams
/// (a streaming algorithm over a directory), or a terrain loaded whole.
pub enum DrawnTerrain {
    Streamed(StreamedTerrain),
    Loaded(Terrain),
}

impl DrawnTerrain {
    /// Streams `args.file` when it is a directory that `algorithm` streams or is built
    /// from as `build` says ([`streams`]), else loads.
    pub fn open(
        args: &TerrainArgs,
        algorithm: &str,
        build: TreeBuild,
    ) -> anyhow::Result<DrawnTerrain> {
        Ok(match streams(args, algorithm, build) {
            Some(dir) => DrawnTerrain::Streamed(StreamedTerrain::open(dir, args)?),
            None => DrawnTerrain::Loaded(args.load()?),
        })
    }

    /// The field the renderer, the cameras and the loaded algorithms use: the whole terrain,
    /// or a streamed directory's planning level (the streamed slots carry the drawn heights).
    pub fn field(&self) -> &Heightfield {
        match self {
            DrawnTerrain::Streamed(s) => &s.plan,
            DrawnTerrain::Loaded(t) => &t.heightfield,
        }
    }

    pub fn name(&self) -> String {
        match self {
            DrawnTerrain::Streamed(s) => s.tiled.dir().display().to_string(),
            DrawnTerrain::Loaded(t) => t.name.clone(),
        }
    }

    pub fn streamed(&self) -> Option<&StreamedTerrain> {
        match self {
            DrawnTerrain::Streamed(s) => Some(s),
            DrawnTerrain::Loaded(_) => None,
        }
    }
}

/// A streaming algorithm over the tile cache of a directory.
pub type StreamingAlgorithm = dyn StreamingLod<Source = StreamedSource>;

/// A streaming algorithm over a tile cache, as a plain [`LodAlgorithm`] for the viewer and
/// the renderer: before each selection it prints, once each, the tiles that failed to load
/// since the last one (the coarser level stands in for them).
pub struct ReportingStream(pub Box<StreamingAlgorithm>);

impl std::fmt::Debug for ReportingStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ReportingStream")
            .field(&self.0.name())
            .finish()
    }
}

impl ReportingStream {
    fn report(&mut self) {
        self.report_with(|line| eprintln!("{line}"));
    }

    /// Hands each tile that failed since the last call, once, to `print` as one line.
    pub fn report_with(&mut self, mut print: impl FnMut(&str)) {
        for report in self.0.source_mut().inner_mut().take_reports() {
            print(&format!("{report}; the coarser level stands in"));
        }
    }
}

impl LodAlgorithm for ReportingStream {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn select(&mut self, view: &View) -> Selection<'_> {
        self.report();
        self.0.select(view)
    }

    fn stats(&self) -> &SelectionStats {
        self.0.stats()
    }

    fn state_bytes(&self) -> usize {
        self.0.state_bytes()
    }

    fn error_bounded(&self) -> bool {
        self.0.error_bounded()
    }

    fn drawn_boxes(&self, out: &mut Vec<Aabb>) {
        self.0.drawn_boxes(out);
    }

    fn reads(&self) -> Reads {
        self.0.reads()
    }

    fn await_reads(&mut self) {
        self.0.await_reads();
    }

    fn take_faults(&mut self) -> Vec<Box<dyn std::error::Error + Send + Sync>> {
        self.0.take_faults()
    }
}

/// How long a still image or an export waits for the tiles its view asks for.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(300);

/// Selects `view` until no requested tile is still loading (each one resident or failed),
/// so a single image or export shows the data the view asks for; gives up after `limit`,
/// or as soon as the cache has evicted tiles while loading more than twice what it holds
/// (plus 32) for this one view: a view that fits loads each tile it needs once, coarse to
/// fine at most 4/3 of its finest set, so its budget cannot hold the view and it would
/// never settle; or once two selections in a row are refused tiles for want of room with
/// nothing loading (the tiles the view draws fill the budget; see [`TileCache`]). Failed
/// tiles are reported once each on stderr. Then, for an algorithm
/// that reads its own data in the background (algorithm A's pages), waits for those reads
/// as [`settle_reads`] does. Returns the number of selections made.
pub fn settle(
    algorithm: &mut ReportingStream,
    view: &View,
    limit: Duration,
) -> anyhow::Result<u32> {
    let start = Instant::now();
    let before = algorithm.0.source().inner().stats();
    let mut refused_before = before.requests_over_budget;
    let mut refused_with_nothing_loading = false;
    let mut selections = 0;
    loop {
        algorithm.select(view);
        selections += 1;
        algorithm.report();
        let tiles = algorithm.0.source();
        // Loads under way, and detail tiles and tile pyramids left for the next selection.
        let loading = tiles.inner().pending_loads() as u64;
        let pending = loading + tiles.stats().deferred + algorithm.0.stream_counts().deferred;
        let now = tiles.inner().stats();
        // Tiles the cache refused for want of room (`TileCache::tile_heights`): once a
        // selection after the last one that refused still refuses, with nothing loading,
        // the tiles this view uses fill the budget (detail tiles over a refused stored
        // tile count as deferred every selection, so only loads are asked to be done).
        let refused = now.requests_over_budget > refused_before;
        refused_before = now.requests_over_budget;
        if pending == 0 && !refused {
            settle_reads(algorithm, view, limit.saturating_sub(start.elapsed()))?;
            return Ok(selections);
        }
        let refused_with_nothing_loading_now = refused && loading == 0;
        if refused_with_nothing_loading_now && refused_with_nothing_loading {
            bail!(
                "--cache-mb is too small for this view: the {} tiles ({:.1} MiB) it draws \
                 fill the tile cache, and it asks for more; raise --cache-mb",
                now.resident_tiles,
                now.resident_bytes as f64 / f64::from(1 << 20),
            );
        }
        refused_with_nothing_loading = refused_with_nothing_loading_now;
        // A view that fits loads each tile it needs once; one that does not keeps
        // evicting what it loaded.
        let (loads, evictions) = (
            now.loads_finished - before.loads_finished,
            now.tiles_evicted - before.tiles_evicted,
        );
        if evictions > 0 && loads > 2 * now.resident_tiles as u64 + 32 {
            bail!(
                "--cache-mb is too small for this view: the tile cache holds {} tiles ({:.1} \
                 MiB) and evicted {evictions} while loading {loads} for one view; raise \
                 --cache-mb",
                now.resident_tiles,
                now.peak_bytes as f64 / f64::from(1 << 20),
            );
        }
        if start.elapsed() > limit {
            bail!(
                "tiles still loading after {:.0} s ({pending} pending)",
                limit.as_secs_f64(),
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Peak resident memory of this process (`VmHWM`), in bytes, where the system reports it.
pub fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
