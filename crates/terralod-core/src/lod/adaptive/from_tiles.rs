//! Algorithm A over an imported directory (issue 9): its tree built from the tiles
//! ([`AdaptiveLod::from_tiles`], the same tree as from the terrain in memory), its vertices
//! listed with their drawn heights so a renderer holding only a coarse level draws it, and
//! its pages on disk: what `--algo adaptive` gives a command over an imported directory,
//! beside the algorithms that stream tiles while they select.

use super::page_file::{BuildKey, KEY_BYTES, KeptFileError, OpenedKept};
use super::paging::{BuiltOnDisk, PageTarget, PagedBuildError, Paging};
use super::tree::{Budget, LevelShape, SquareTree, TilesSource, TreeBuilder};
use super::{AdaptiveLod, AdaptiveOptions, DetailError, EXPIRED};
use crate::camera::Aabb;
use crate::lod::{
    BuildError, LodAlgorithm, LodOptions, Reads, Selection, SelectionStats, StreamCounts,
    StreamedSource, StreamingLod, View,
};
use crate::tiles::{BLOCKS_FILE, HEADER_FILE, StandIn, TileError, TiledPyramid, TiledTerrain};
use std::path::Path;

/// Why algorithm A could not be built from an imported terrain's tiles.
#[derive(Debug, thiserror::Error)]
pub enum TilesBuildError {
    #[error(transparent)]
    Tile(#[from] TileError),
    #[error(transparent)]
    Grid(Box<BuildError>),
    #[error(transparent)]
    Tree(#[from] DetailError),
    #[error(transparent)]
    Pages(#[from] PagedBuildError),
    #[error(
        "algorithm adaptive builds its tree from the stored levels: procedural detail below \
         them (--detail-levels) is drawn by the streaming algorithms streamed and \
         streamed-quadtree"
    )]
    Detail,
    #[error(
        "a kept page file (--page-file) holds algorithm adaptive's pages, which it has only \
         with frames for them (--page-frames N)"
    )]
    KeptWithoutPages,
    #[error(transparent)]
    Kept(#[from] KeptFileError),
}

/// What became of a kept page file when the algorithm was built
/// ([`AdaptiveLod::from_tiles_kept`]).
#[derive(Debug)]
pub enum KeptPages {
    /// Opened: the tree read back from it, nothing built.
    Reused,
    /// Not there: built, and written there.
    Written,
    /// There but not usable (another build's, or damaged): built again, and replaced.
    Replaced(KeptFileError),
    /// Built, but not kept (what was there left alone): a coarser level stood in for
    /// unreadable tiles, which a later run would otherwise inherit.
    NotKept,
    /// Built without pages (no square of `--page-cells` has children below it): nothing
    /// to keep, the tree whole in memory.
    NoPages,
}

impl From<BuildError> for TilesBuildError {
    fn from(error: BuildError) -> Self {
        TilesBuildError::Grid(Box::new(error))
    }
}

impl AdaptiveLod<'_> {
    /// Builds the algorithm over an imported terrain's tiles instead of a heightfield: the
    /// tree [`AdaptiveLod::with_options`] builds over the terrain's finest level (bit for
    /// bit for 16-bit samples, see [`TiledPyramid`] for `f32`), without that level or its
    /// pyramid in memory (the tree itself is: [`AdaptiveLod::from_tiles_on_disk`] writes
    /// it page by page). Tiles that cannot be read are stood in for
    /// ([`TiledPyramid::stand_ins`]); fails on one no level can stand in for, and on a grid
    /// past `u32` indices unless the vertices are listed.
    pub fn from_tiles(
        tiles: &TiledPyramid,
        options: LodOptions,
        adaptive: AdaptiveOptions,
    ) -> Result<AdaptiveLod<'static>, TilesBuildError> {
        check_indices(tiles.terrain(), adaptive)?;
        let source = TilesSource::new(tiles);
        let tree = super::tree::build(
            &source,
            adaptive.build_tolerance,
            adaptive.page_cells,
            Budget::UNLIMITED,
        );
        if let Some(failure) = source.failure() {
            return Err(failure.into());
        }
        Ok(AdaptiveLod::from_tree(tree?, options, adaptive, None))
    }

    /// [`AdaptiveLod::from_tiles`] with frames for pages (`adaptive.page_frames` > 0): the
    /// pages are written to a page file in `dir` as they are built, a few at a time, so
    /// neither level 0 nor the tree is ever whole in memory (step 5 of
    /// docs/ADAPTIVE_PAGING.md). The same algorithm as `from_tiles` followed by
    /// [`AdaptiveLod::spool_pages`], but for frames too many for a pool, refused here
    /// ([`PagedBuildError::Frames`]). Without frames, `from_tiles`.
    pub fn from_tiles_on_disk(
        tiles: &TiledPyramid,
        options: LodOptions,
        adaptive: AdaptiveOptions,
        dir: &std::path::Path,
    ) -> Result<AdaptiveLod<'static>, TilesBuildError> {
        if adaptive.page_frames == 0 {
            return Self::from_tiles(tiles, options, adaptive);
        }
        check_indices(tiles.terrain(), adaptive)?;
        let (tree, paging, _) = build_paged(tiles, adaptive, PageTarget::Spool(dir))?;
        Ok(Self::paged(tree, paging, options, adaptive))
    }

    /// The algorithm read back from a page file kept at `path` (`--page-file`) for the
    /// build `adaptive` makes over `terrain`: no tile is read (the level shapes come from
    /// the header, the rest from the file: its top read back and checked, its pinned pages
    /// read, the others served from it as Update() wants them). `Ok(Err)` when the file is
    /// not there or not usable (another build's, damaged): build then
    /// ([`AdaptiveLod::from_tiles_kept`]). Fails on frames that do not fit in a pool.
    pub fn from_kept(
        terrain: &TiledTerrain,
        options: LodOptions,
        adaptive: AdaptiveOptions,
        path: &Path,
    ) -> Result<Result<AdaptiveLod<'static>, KeptFileError>, TilesBuildError> {
        if adaptive.page_frames == 0 {
            return Err(TilesBuildError::KeptWithoutPages);
        }
        check_indices(terrain, adaptive)?;
        let key = build_key(terrain, adaptive)?;
        let opened = match OpenedKept::open(path, &key) {
            Ok(opened) => opened,
            // Not a page file, or not readable: refused, never replaced unseen.
            Err(refused @ (KeptFileError::NotKept { .. } | KeptFileError::Read { .. })) => {
                return Err(refused.into());
            }
            Err(unusable) => return Ok(Err(unusable)),
        };
        let header = terrain.header();
        let levels = crate::pyramid::level_nodes(header.width, header.height)
            .map(|(size, nx, nz)| LevelShape { size, nx, nz })
            .collect();
        let top = match SquareTree::decode_top(&opened.top, levels) {
            Ok(top) => top,
            Err(problem) => {
                let path = path.to_path_buf();
                return Ok(Err(KeptFileError::Damaged { path, problem }));
            }
        };
        Ok(
            match Paging::from_kept(
                top,
                opened,
                adaptive.page_frames as usize,
                adaptive.page_cells,
            ) {
                Ok(Ok((tree, paging))) => Ok(Self::paged(tree, Some(paging), options, adaptive)),
                Ok(Err(frames)) => return Err(frames.into()),
                Err(unusable) => Err(unusable),
            },
        )
    }

    /// [`AdaptiveLod::from_tiles_on_disk`] with the pages written to a file kept at
    /// `path` for later runs (`--page-file`, read back by [`AdaptiveLod::from_kept`]):
    /// written whole under a temporary name beside it and synced, then renamed over what
    /// was there, and `kept` returned (what the caller found there: written anew, or
    /// replaced). Not kept, and what was there left alone, when the build fails, when a
    /// coarser level stood in for a tile that could not be read (a later run would inherit
    /// the stand-in: [`KeptPages::NotKept`]) or when the tree has no pages
    /// ([`KeptPages::NoPages`]: the algorithm then runs without, as without the file).
    pub fn from_tiles_kept(
        tiles: &TiledPyramid,
        options: LodOptions,
        adaptive: AdaptiveOptions,
        path: &Path,
        kept: KeptPages,
    ) -> Result<(AdaptiveLod<'static>, KeptPages), TilesBuildError> {
        if adaptive.page_frames == 0 {
            return Err(TilesBuildError::KeptWithoutPages);
        }
        check_indices(tiles.terrain(), adaptive)?;
        let key = build_key(tiles.terrain(), adaptive)?;
        let (tree, paging, pending) = build_paged(tiles, adaptive, PageTarget::Kept { path, key })?;
        let status = match pending {
            None => KeptPages::NoPages,
            Some(_) if !tiles.stand_ins().is_empty() => KeptPages::NotKept,
            Some(pending) => {
                pending.keep().map_err(PagedBuildError::from)?;
                kept
            }
        };
        Ok((Self::paged(tree, paging, options, adaptive), status))
    }

    /// The algorithm over a tree built or read page by page.
    fn paged(
        tree: SquareTree,
        paging: Option<Paging>,
        options: LodOptions,
        adaptive: AdaptiveOptions,
    ) -> AdaptiveLod<'static> {
        let (state, deadline) = (vec![0; tree.slots()], vec![EXPIRED; tree.slots()]);
        AdaptiveLod::from_parts(tree, paging, state, deadline, options, adaptive, None)
    }
}

/// The tree of `tiles` built page by page, its pages written to `target` as they are built
/// ([`Paging::build_on_disk`]); fails on a tile no level stands in for.
fn build_paged(
    tiles: &TiledPyramid,
    adaptive: AdaptiveOptions,
    target: PageTarget<'_>,
) -> Result<BuiltOnDisk, TilesBuildError> {
    let source = TilesSource::new(tiles);
    let built = TreeBuilder::new(
        &source,
        adaptive.build_tolerance,
        adaptive.page_cells,
        Budget::UNLIMITED,
    )
    .map_err(PagedBuildError::from)
    .and_then(|builder| Paging::build_on_disk(builder, adaptive.page_frames as usize, target));
    if let Some(failure) = source.failure() {
        return Err(failure.into());
    }
    Ok(built?)
}

/// The version of the tree a kept page file holds: raised whenever the build rules change,
/// so that files of older builds are built again.
const KEPT_TREE_VERSION: u32 = 1;

/// What a kept page file must have been built from: this builder's version, the CRC-32s
/// of the tiles' header and block index (every block's bounds and error) and the block
/// index's length, the time the header was written (each import writes it last, so a
/// re-import of the same size is another build even where every block's statistics
/// agree), the level-0 mapping, the build tolerance and the page size.
fn build_key(terrain: &TiledTerrain, adaptive: AdaptiveOptions) -> Result<BuildKey, KeptFileError> {
    let dir = terrain.dir();
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|source| KeptFileError::Read { path, source })
    };
    let (header, blocks) = (read(HEADER_FILE)?, read(BLOCKS_FILE)?);
    let header_path = dir.join(HEADER_FILE);
    let written = std::fs::metadata(&header_path)
        .and_then(|m| m.modified())
        .map_err(|source| KeptFileError::Read {
            path: header_path,
            source,
        })?
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mapping = terrain.level_mapping(0);
    let words = [
        KEPT_TREE_VERSION,
        written.as_secs() as u32,
        (written.as_secs() >> 32) as u32,
        written.subsec_nanos(),
        crc32fast::hash(&header),
        crc32fast::hash(&blocks),
        blocks.len() as u32,
        mapping.cell_size.to_bits(),
        mapping.height_scale.to_bits(),
        mapping.height_offset.to_bits(),
        adaptive.build_tolerance.to_bits(),
        adaptive.page_cells,
    ];
    let mut key = [0; KEY_BYTES];
    for (bytes, word) in key.chunks_exact_mut(4).zip(words) {
        bytes.copy_from_slice(&word.to_le_bytes());
    }
    Ok(key)
}

/// The options of algorithm A over `tiles`: vertices listed (a renderer holding a coarse
/// level draws them); refused over procedural detail, which the tree does not hold.
fn listed(
    tiles: &StreamedSource,
    options: LodOptions,
) -> Result<(LodOptions, AdaptiveOptions), BuildError> {
    if tiles.options().levels > 0 {
        return Err(TilesBuildError::Detail.into());
    }
    let adaptive = options.adaptive.with_list_vertices(true);
    Ok((options.with_adaptive(adaptive), adaptive))
}

/// The pyramid of the finest level of `tiles`, without assembling it.
fn pyramid_of(tiles: &StreamedSource) -> Result<TiledPyramid, BuildError> {
    Ok(TiledPyramid::build(tiles.inner().terrain()).map_err(TilesBuildError::from)?)
}

/// Refuses a grid past `u32` indices unless the vertices are listed.
fn check_indices(terrain: &TiledTerrain, adaptive: AdaptiveOptions) -> Result<(), TilesBuildError> {
    if !adaptive.list_vertices {
        let header = terrain.header();
        crate::lod::check_indices(header.width, header.height)?;
    }
    Ok(())
}

/// Algorithm A built from an imported directory's tiles, beside the directory's tile cache
/// (which it does not read while selecting: the tree holds its heights; the cache serves
/// the commands' reports and a renderer's coarse level as for the streaming algorithms).
pub struct TiledAdaptive {
    lod: AdaptiveLod<'static>,
    tiles: StreamedSource,
    /// Tiles that could not be read while the tree was built, and the coarser level that
    /// stood in: all of them, and those not yet reported.
    stood_in: usize,
    unreported: Vec<StandIn>,
}

/// A level-0 tile that stood in while the tree was built, as a fault to report.
#[derive(Debug)]
struct StoodIn(StandIn);

impl std::fmt::Display for StoodIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.0;
        write!(
            f,
            "{}: a coarser level stands in (level {} interpolated from level {})",
            s.fault, s.level, s.from_level
        )
    }
}

impl std::error::Error for StoodIn {}

impl std::fmt::Debug for TiledAdaptive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TiledAdaptive")
            .field("squares", &self.lod.squares())
            .finish_non_exhaustive()
    }
}

impl TiledAdaptive {
    /// Builds the tree from the directory of `tiles` (vertices listed, pages on disk in
    /// the temporary folder when `options` asks for frames). A tile that cannot be read is
    /// stood in for by the coarser level, reported once by [`LodAlgorithm::take_faults`]
    /// and counted in [`Reads::failed`].
    pub fn new(tiles: StreamedSource, options: LodOptions) -> Result<TiledAdaptive, BuildError> {
        let (options, adaptive) = listed(&tiles, options)?;
        let pyramid = pyramid_of(&tiles)?;
        let dir = std::env::temp_dir();
        let lod = AdaptiveLod::from_tiles_on_disk(&pyramid, options, adaptive, &dir)?;
        Ok(TiledAdaptive::over(lod, tiles, pyramid.stand_ins()))
    }

    /// [`TiledAdaptive::new`] with its pages in a file kept at `path` for later runs: read
    /// back from it when it holds this build ([`AdaptiveLod::from_kept`], no tile read),
    /// else built and kept there ([`AdaptiveLod::from_tiles_kept`]); and what became of
    /// the file.
    pub fn with_page_file(
        tiles: StreamedSource,
        options: LodOptions,
        path: &Path,
    ) -> Result<(TiledAdaptive, KeptPages), BuildError> {
        let (options, adaptive) = listed(&tiles, options)?;
        let found = if path.exists() {
            match AdaptiveLod::from_kept(tiles.inner().terrain(), options, adaptive, path)? {
                Ok(lod) => {
                    return Ok((
                        TiledAdaptive::over(lod, tiles, Vec::new()),
                        KeptPages::Reused,
                    ));
                }
                Err(unusable) => KeptPages::Replaced(unusable),
            }
        } else {
            KeptPages::Written
        };
        let pyramid = pyramid_of(&tiles)?;
        let (lod, kept) = AdaptiveLod::from_tiles_kept(&pyramid, options, adaptive, path, found)?;
        Ok((TiledAdaptive::over(lod, tiles, pyramid.stand_ins()), kept))
    }

    /// The algorithm `lod` beside `tiles`, reporting the tiles stood in for while it was
    /// built.
    fn over(lod: AdaptiveLod<'static>, tiles: StreamedSource, stood_in: Vec<StandIn>) -> Self {
        TiledAdaptive {
            lod,
            tiles,
            stood_in: stood_in.len(),
            unreported: stood_in,
        }
    }

    /// The algorithm itself.
    pub fn adaptive(&self) -> &AdaptiveLod<'static> {
        &self.lod
    }
}

impl LodAlgorithm for TiledAdaptive {
    fn name(&self) -> &'static str {
        self.lod.name()
    }

    fn select(&mut self, view: &View) -> Selection<'_> {
        self.lod.select(view)
    }

    fn stats(&self) -> &SelectionStats {
        self.lod.stats()
    }

    fn state_bytes(&self) -> usize {
        self.lod.state_bytes()
    }

    fn error_bounded(&self) -> bool {
        self.lod.error_bounded()
    }

    fn drawn_boxes(&self, out: &mut Vec<Aabb>) {
        self.lod.drawn_boxes(out);
    }

    fn reads(&self) -> Reads {
        let reads = self.lod.reads();
        Reads {
            failed: reads.failed + self.stood_in,
            ..reads
        }
    }

    fn await_reads(&mut self) {
        self.lod.await_reads();
    }

    fn take_faults(&mut self) -> Vec<Box<dyn std::error::Error + Send + Sync>> {
        let mut faults = self.lod.take_faults();
        for stood_in in self.unreported.drain(..) {
            faults.push(Box::new(StoodIn(stood_in)));
        }
        faults
    }
}

impl StreamingLod for TiledAdaptive {
    type Source = StreamedSource;

    fn source(&self) -> &StreamedSource {
        &self.tiles
    }

    fn source_mut(&mut self) -> &mut StreamedSource {
        &mut self.tiles
    }

    /// Squares drawn, and those drawn coarser than the view wants because their pages are
    /// not in the pool (the tree holds its heights: no tile is read while selecting).
    fn stream_counts(&self) -> StreamCounts {
        StreamCounts {
            unit: "squares",
            drawn: self.lod.stats().nodes_drawn,
            held_back: self.lod.reads().held_back as u64,
            deferred: 0,
        }
    }
}
