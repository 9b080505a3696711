//! Algorithm A over an imported directory (issue 9): its tree built from the tiles
//! ([`AdaptiveLod::from_tiles`], the same tree as from the terrain in memory), its vertices
//! listed with their drawn heights so a renderer holding only a coarse level draws it, and
//! its pages on disk: what `--algo adaptive` gives a command over an imported directory,
//! beside the algorithms that stream tiles while they select.

use super::paging::{PagedBuildError, Paging};
use super::tree::{Budget, TilesSource, TreeBuilder};
use super::{AdaptiveLod, AdaptiveOptions, DetailError, EXPIRED};
use crate::camera::Aabb;
use crate::lod::{
    BuildError, LodAlgorithm, LodOptions, Reads, Selection, SelectionStats, StreamCounts,
    StreamedSource, StreamingLod, View,
};
use crate::tiles::{StandIn, TileError, TiledPyramid};

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
        check_indices(tiles, adaptive)?;
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
        check_indices(tiles, adaptive)?;
        let source = TilesSource::new(tiles);
        let built = TreeBuilder::new(
            &source,
            adaptive.build_tolerance,
            adaptive.page_cells,
            Budget::UNLIMITED,
        )
        .map_err(PagedBuildError::from)
        .and_then(|builder| Paging::build_on_disk(builder, adaptive.page_frames as usize, dir));
        if let Some(failure) = source.failure() {
            return Err(failure.into());
        }
        let (tree, paging) = built?;
        let (state, deadline) = (vec![0; tree.slots()], vec![EXPIRED; tree.slots()]);
        Ok(AdaptiveLod::from_parts(
            tree, paging, state, deadline, options, adaptive, None,
        ))
    }
}

/// Refuses a grid past `u32` indices unless the vertices are listed.
fn check_indices(tiles: &TiledPyramid, adaptive: AdaptiveOptions) -> Result<(), TilesBuildError> {
    if !adaptive.list_vertices {
        let header = tiles.terrain().header();
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
        if tiles.options().levels > 0 {
            return Err(TilesBuildError::Detail.into());
        }
        let pyramid =
            TiledPyramid::build(tiles.inner().terrain()).map_err(TilesBuildError::from)?;
        let adaptive = options.adaptive.with_list_vertices(true);
        let options = options.with_adaptive(adaptive);
        let lod =
            AdaptiveLod::from_tiles_on_disk(&pyramid, options, adaptive, &std::env::temp_dir())?;
        let unreported = pyramid.stand_ins();
        Ok(TiledAdaptive {
            lod,
            tiles,
            stood_in: unreported.len(),
            unreported,
        })
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
