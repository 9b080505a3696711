//! A8 steps 2 and 3: algorithm A's pages held in a fixed number of *frames* of the pool,
//! copied in when Update() wants them and dropped when nothing needs them
//! (docs/ADAPTIVE_PAGING.md, "Neighbours across pages"). The pages wait in memory, as
//! taken out of the tree as built, or on disk ([`Paging::spool`], `page_file`), read on
//! a loader thread: a page asked for in one update is requested at its end and copied in
//! at the start of the first update after it arrived, so no update waits on the disk.
//! Pages are served nearest the eye first, so the ground nearest the camera gets the
//! frames when there are fewer than the view asks for; and when the frames cannot hold
//! what the view asks for, the pages beyond a radius from the eye are *released*: their
//! squares want nothing, so they coarsen and give their frames to nearer ground (forced
//! coarsening, [`Paging::end_update`]).
//!
//! The rules that keep the mesh whole while pages come and go:
//!
//! - a square below the page roots that is wanted and in view is evaluated only while
//!   the 3 × 3 pages around its own are resident (what it enables can reach that far);
//!   otherwise it wants nothing, asks for the missing pages and is tested again next
//!   frame ([`Paging::blocks`]);
//! - a missing page root whose subtree test fails asks for its page the same way;
//! - a page is dropped only when neither it nor a page beside it has an enabled square
//!   below its root ([`Paging::droppable`]), so refined ground keeps its neighbourhood;
//! - the pages within one page of a root reaching beyond the data (whose squares are
//!   always refined, whatever the view) never leave;
//! - a released page's squares, its root included, want nothing (wanting less never
//!   cracks the mesh), and it may leave once its own root has no enabled child while no
//!   page beside it that is not released is refined.

use super::Deadline;
use super::EXPIRED;
use super::detail::DetailError;
use super::page_file::{
    BuildKey, KeptFileError, KeptWriter, OpenedKept, PageError, PageShape, PageSpool, PendingKept,
    Received,
};
use super::tree::{
    BuiltPage, LevelShape, MAX_SLOTS, NOT_RESIDENT, PageData, ROOT, Source, Sq, SquareTree,
    TreeBuilder,
};
use super::update::enabled_children;
use rayon::prelude::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// Pages copied in per update at most, so taking pages in stays a small part of a
/// frame (on the Grand Canyon, 256-cell pages, an update taking 8 in spends about 1 ms;
/// docs/BENCHMARKS.md):
/// the others wait for the next updates, as pages still being read do.
pub(super) const PAGES_PER_UPDATE: usize = 8;

/// No page at a position of the roots' level (the square there has no children).
const NO_PAGE: u32 = u32::MAX;

/// Where the pages that are not in the pool wait.
#[derive(Debug)]
enum Store {
    /// The tree as built, every page in place.
    Memory(Box<SquareTree>),
    /// On disk, read by a loader thread.
    Disk(PageSpool),
}

#[derive(Debug)]
pub(super) struct Paging {
    store: Store,
    /// Levels a page has below its root.
    depth: u32,
    /// Whether vertex heights are `f32`.
    floats: bool,
    /// The page roots' level.
    pub level: u32,
    /// Per position of the roots' level (row-major, `nx` a row), its page or [`NO_PAGE`].
    grid: Vec<u32>,
    nx: u32,
    nz: u32,
    /// Per page, its root.
    roots: Vec<Sq>,
    /// Per page, whether it never leaves.
    pinned: Vec<bool>,
    /// Per page, whether the pages around it (itself included) are all in the pool.
    complete: Vec<bool>,
    /// Slots per frame: the longest page's.
    frame_slots: u32,
    /// First slots of the frames holding no page.
    free: Vec<u32>,
    /// The pages in frames (what a search for a page to drop looks at).
    held: Vec<u32>,
    /// Per page, the update that last asked for it.
    asked_at: Vec<u64>,
    /// Pages asked for in the last update, each once (a square that still wants a page
    /// asks again in the next).
    queue: Vec<u32>,
    queued: Vec<bool>,
    /// Per page, whether the loader is reading it, and how many it is reading.
    loading: Vec<bool>,
    in_flight: usize,
    /// Pages read but not yet copied in (for want of a frame).
    ready: Vec<(u32, PageData)>,
    /// Per page, whether it could not be read (it is never asked for again).
    failed: Vec<bool>,
    /// Pages that could not be read, not yet taken ([`Paging::take_faults`]).
    faults: Vec<PageError>,
    /// Updates so far.
    update: u64,
    /// Squares that waited for a page in the last update, and of those the ones that
    /// wait only for pages that could not be read.
    pub held_back: usize,
    pub held_by_faults: usize,
    /// The distance from the eye of the nearest square held back in the last update
    /// (infinite if none was): nearer ground was drawn as its tests ask.
    pub nearest_held: f32,
    /// Pages copied in and dropped so far, read from disk, and found unreadable.
    pub copied_in: usize,
    pub dropped: usize,
    pub loaded: usize,
    pub failures: usize,
    /// The longest start of an update so far (taking in what was read, copying pages in,
    /// dropping others): what paging adds to a frame.
    pub longest_serve: Duration,
    /// Pages whose root's box lies farther than this from the eye are released. Infinite
    /// until the frames cannot hold what a view asks for; views without an eye never
    /// release.
    radius: f32,
    /// Per page, whether it is released (kept up to date for the pages in frames).
    released: Vec<bool>,
    /// This update's eye.
    eye: Option<glam::Vec3>,
    /// Released pages whose root wanted children in this update, each once.
    demand: Vec<u32>,
    demanded: Vec<bool>,
    /// Pages released or kept again at the end of the last update.
    turned: usize,
    /// Scratch of [`Paging::fitting_radius`]: pages by distance, and per page the last
    /// round that counted it.
    near: Vec<(f32, u32)>,
    counted: Vec<u64>,
    round: u64,
    /// Whether pages waited to be copied in at the end of the last update: then every
    /// page beyond the radius is released; otherwise those whose neighbours are all in
    /// frames are kept (they refine at no cost in frames).
    waiting: bool,
    /// Pages that never leave.
    pinned_count: usize,
    /// The radius a crowded update shrank to, for the eye at `ceiling_eye`: while the
    /// eye stays there, the radius grows no larger (so a still camera settles instead of
    /// swinging between a radius that crowds the frames and one that does not).
    ceiling: f32,
    ceiling_eye: glam::Vec3,
}

/// Where the page roots lie on their level, and which pages never leave: the pages
/// within one page of a root reaching beyond the data (whose squares are always refined).
struct Placement {
    level: u32,
    /// Per position of the roots' level (row-major, `nx` a row), its page or [`NO_PAGE`].
    grid: Vec<u32>,
    nx: u32,
    nz: u32,
    pinned: Vec<bool>,
}

impl Placement {
    fn new(levels: &[LevelShape], roots: &[Sq], straddles: impl Fn(Sq) -> bool) -> Placement {
        let level = roots[0].level;
        let shape = levels[level as usize];
        let mut grid = vec![NO_PAGE; shape.nx as usize * shape.nz as usize];
        for (j, root) in roots.iter().enumerate() {
            grid[(root.iz * shape.nx + root.ix) as usize] = j as u32;
        }
        let mut pinned = vec![false; roots.len()];
        for root in roots.iter().filter(|root| straddles(**root)) {
            for j in around(&grid, shape.nx, shape.nz, root.ix, root.iz) {
                pinned[j as usize] = true;
            }
        }
        Placement {
            level,
            grid,
            nx: shape.nx,
            nz: shape.nz,
            pinned,
        }
    }

    /// The frames made when `asked` are: at least the pinned pages and nine more, at most
    /// one per page.
    fn frames(&self, asked: usize) -> usize {
        let pinned = self.pinned.iter().filter(|&&p| p).count();
        asked.max(pinned + 9).min(self.pinned.len())
    }
}

/// Why algorithm A's tree could not be built with its pages written straight to disk.
#[derive(Debug, thiserror::Error)]
pub enum PagedBuildError {
    #[error(transparent)]
    Page(#[from] PageError),
    #[error(transparent)]
    Tree(#[from] DetailError),
    #[error(
        "{frames} frames of {frame_slots} slots for pages do not fit in algorithm \
         adaptive's pool of at most 2^31 slots: lower --page-frames or --page-cells"
    )]
    Frames { frames: usize, frame_slots: u32 },
}

/// The frames made when `asked` are (see [`Placement::frames`]), if they fit in a pool
/// after the top `top`, each `frame_slots` long.
fn fitted_frames(
    top: &SquareTree,
    placement: &Placement,
    asked: usize,
    frame_slots: u32,
) -> Result<usize, PagedBuildError> {
    let frames = placement.frames(asked);
    if top.slots() + frames * frame_slots as usize >= MAX_SLOTS {
        return Err(PagedBuildError::Frames {
            frames,
            frame_slots,
        });
    }
    Ok(frames)
}

/// What a build on disk gives: the live tree, its paging (`None` without pages), and a
/// kept file waiting to be kept ([`PageTarget::Kept`]).
pub(super) type BuiltOnDisk = (SquareTree, Option<Paging>, Option<PendingKept>);

/// The pages of a build on disk, as written: a spool, or a kept file still to finish.
enum Written {
    Spool(PageSpool),
    Kept(KeptWriter, BuildKey),
}

/// Where a build on disk ([`Paging::build_on_disk`]) writes its pages.
pub(super) enum PageTarget<'p> {
    /// A spool without a name in this folder, gone with the run.
    Spool(&'p Path),
    /// A page file kept at this path for later runs of the build `key` names
    /// (`--page-file`): written beside it, then renamed to it.
    Kept { path: &'p Path, key: BuildKey },
}

impl Paging {
    /// Takes `tree` (as built, with pages) apart: returns the top with `frames` frames
    /// after it (at least the pinned pages and nine more, at most one per page), the
    /// pinned pages copied in, and the paging that serves the others; or gives the tree
    /// back if those frames would not fit in a pool ([`MAX_SLOTS`]).
    pub fn new(tree: SquareTree, frames: usize) -> Result<(SquareTree, Paging), Box<SquareTree>> {
        let roots = tree.page_roots();
        let placement = Placement::new(&tree.levels, &roots, |sq| tree.straddles(sq));
        let frame_slots = tree.pages().iter().map(|p| p.slots).max().unwrap_or(0);
        let frames = placement.frames(frames);
        let top = tree.pages()[0].first as usize;
        if top + frames * frame_slots as usize >= MAX_SLOTS {
            return Err(Box::new(tree));
        }
        let mut live = tree.top_with_frames(frames, frame_slots as usize);
        let store = Store::Memory(Box::new(tree));
        let paging = Paging::start(&mut live, placement, roots, frames, store, &[]);
        Ok((live, paging))
    }

    /// Builds the tree of `builder` with its pages written to a page file in `dir` as
    /// they are built, a few at a time (step 5 of docs/ADAPTIVE_PAGING.md), so the tree
    /// is never whole in memory: returns what [`Paging::new`] returns for the tree built
    /// whole, pages and all ([`build`](super::tree::build)), then spooled
    /// ([`Paging::spool_to`]). Without pages, the tree as built and no paging. Frames too
    /// many for a pool are an error here ([`PagedBuildError::Frames`]), where `new` gives
    /// the tree back to run without frames: this tree cannot be whole in memory.
    pub fn build_on_disk<S: Source>(
        builder: TreeBuilder<'_, S>,
        frames: usize,
        target: PageTarget<'_>,
    ) -> Result<BuiltOnDisk, PagedBuildError> {
        let pages = builder.pages();
        if pages == 0 {
            return Ok((builder.finish(&[]), None, None));
        }
        let roots: Vec<Sq> = (0..pages).map(|j| builder.root(j)).collect();
        let levels = builder.levels().to_vec();
        let placement = Placement::new(&levels, &roots, |sq| builder.straddles(sq));
        let shape = PageShape {
            floats: builder.float_heights(),
            depth: (levels.len() - 1) as u32 - placement.level,
        };
        // Built a batch at a time across the threads, handed to the writer in order.
        let batch = 2 * rayon::current_num_threads();
        let mut built: std::collections::VecDeque<BuiltPage> = Default::default();
        let mut summaries = Vec::with_capacity(pages);
        let mut kept = Vec::new();
        let mut failure = None;
        // A kept file holds every page (a later run reads its pinned ones there); a
        // spool leaves the pinned ones out, since they never leave the frames.
        let file_holds_pinned = matches!(target, PageTarget::Kept { .. });
        let page = |j: usize| -> Option<PageData> {
            if built.is_empty() && failure.is_none() {
                let next = j..(j + batch).min(pages);
                match next
                    .into_par_iter()
                    .map(|k| builder.page(k))
                    .collect::<Result<Vec<_>, _>>()
                {
                    Ok(batch) => built.extend(batch),
                    Err(e) => failure = Some(e),
                }
            }
            let BuiltPage { data, summary } = built.pop_front()?;
            summaries.push(summary);
            match (placement.pinned[j], file_holds_pinned) {
                (true, true) => {
                    kept.push((j, data.clone()));
                    Some(data)
                }
                (true, false) => {
                    kept.push((j, data));
                    None
                }
                (false, _) => Some(data),
            }
        };
        let written = match target {
            PageTarget::Spool(dir) => Written::Spool(PageSpool::write(dir, pages, page, shape)?),
            PageTarget::Kept { path, key } => {
                Written::Kept(KeptWriter::write(path, pages, page, shape.floats)?, key)
            }
        };
        if let Some(e) = failure {
            return Err(e.into());
        }
        let frame_slots = summaries.iter().map(|p| p.slots()).max().unwrap_or(0);
        let live = builder.finish(&summaries);
        let (spool, pending) = match written {
            Written::Spool(spool) => (spool, None),
            Written::Kept(writer, key) => {
                let mut top = Vec::new();
                live.encode_top(&mut top);
                let (spool, pending) = writer.finish(&top, &key, shape)?;
                (spool, Some(pending))
            }
        };
        let frames = fitted_frames(&live, &placement, frames, frame_slots)?;
        let (live, paging) =
            Self::start_on_disk(live, placement, roots, (frames, frame_slots), spool, &kept);
        Ok((live, Some(paging), pending))
    }

    /// [`Paging::start`] over the pages of `spool` with `frames` frames of `frame_slots`
    /// slots (as long as the longest page) grown after the top `live`.
    fn start_on_disk(
        mut live: SquareTree,
        placement: Placement,
        roots: Vec<Sq>,
        (frames, frame_slots): (usize, u32),
        spool: PageSpool,
        kept: &[(usize, PageData)],
    ) -> (SquareTree, Paging) {
        live.grow(frames * frame_slots as usize);
        let store = Store::Disk(spool);
        let paging = Paging::start(&mut live, placement, roots, frames, store, kept);
        (live, paging)
    }

    /// The paging of a top read back from a kept page file (`opened`, its top decoded
    /// into `live`): its page roots checked to lie on one level, `frames` frames after
    /// the top as [`Paging::build_on_disk`] makes them (`Ok(Err)` when they do not fit
    /// in a pool), the pinned pages read from the file and copied in, the other pages
    /// served from it. `Err` when the file is not usable after all.
    pub fn from_kept(
        live: SquareTree,
        opened: OpenedKept,
        frames: usize,
        page_cells: u32,
    ) -> Result<Result<(SquareTree, Paging), PagedBuildError>, KeptFileError> {
        let path = opened.path().to_path_buf();
        let damaged = |problem| KeptFileError::Damaged {
            path: path.clone(),
            problem,
        };
        let Some(level) = live.levels.iter().position(|l| l.size == page_cells) else {
            return Err(damaged("its levels have no squares of --page-cells"));
        };
        let level = level as u32;
        let roots = live.page_roots_on(level).map_err(damaged)?;
        let pages = live.pages().len();
        if roots.len() != pages || pages == 0 {
            return Err(damaged("its top's page roots and page table disagree"));
        }
        let placement = Placement::new(&live.levels, &roots, |sq| live.straddles(sq));
        let page_slots: Vec<u32> = live.pages().iter().map(|p| p.slots).collect();
        // A page holds the squares of its root's subtree, a block of four per square with
        // children, and pads to a rank word: at most this many slots.
        let depth = live.levels.len() as u32 - 1 - level;
        let most = (4u64.saturating_pow(depth) / 3 * 4).saturating_add(64);
        if page_slots.iter().any(|&slots| u64::from(slots) > most) {
            return Err(damaged("a page is longer than its levels can fill"));
        }
        let frame_slots = page_slots.iter().copied().max().unwrap_or(0);
        let frames = match fitted_frames(&live, &placement, frames, frame_slots) {
            Ok(frames) => frames,
            Err(too_many) => return Ok(Err(too_many)),
        };
        let shape = PageShape {
            floats: live.float_heights(),
            depth,
        };
        let mut spool = opened.serve(&page_slots, shape)?;
        let pinned: Vec<usize> = (0..pages).filter(|&j| placement.pinned[j]).collect();
        for &j in &pinned {
            spool.request(j as u32);
        }
        let mut kept = Vec::with_capacity(pinned.len());
        for _ in &pinned {
            match spool.receive(true) {
                Received::Page((j, Ok(page))) => kept.push((j as usize, page)),
                Received::Page((_, Err(_))) => {
                    return Err(damaged("a page that never leaves the pool cannot be read"));
                }
                Received::Nothing | Received::Stopped => {
                    return Err(damaged("the page loader stopped"));
                }
            }
        }
        let frames = (frames, frame_slots);
        Ok(Ok(Self::start_on_disk(
            live, placement, roots, frames, spool, &kept,
        )))
    }

    /// The paging of `live` (the top and `frames` frames after it, each as long as the
    /// longest page), with the pinned pages copied in: from the store when it is in
    /// memory, else from `kept`.
    fn start(
        live: &mut SquareTree,
        placement: Placement,
        roots: Vec<Sq>,
        frames: usize,
        store: Store,
        kept: &[(usize, PageData)],
    ) -> Paging {
        let pages = roots.len();
        let frame_slots = live.pages().iter().map(|p| p.slots).max().unwrap_or(0);
        let top = live.slots() - frames * frame_slots as usize;
        let free = (0..frames)
            .rev()
            .map(|f| (top + f * frame_slots as usize) as u32)
            .collect();
        let pinned_count = placement.pinned.iter().filter(|&&p| p).count();
        let mut paging = Paging {
            depth: (live.levels.len() - 1) as u32 - placement.level,
            floats: live.float_heights(),
            level: placement.level,
            grid: placement.grid,
            nx: placement.nx,
            nz: placement.nz,
            complete: vec![false; pages],
            pinned: placement.pinned,
            frame_slots,
            free,
            held: Vec::with_capacity(frames),
            asked_at: vec![0; pages],
            // Each page is queued, wanted or waiting once at most, so these never grow
            // once made (no allocation per frame).
            queue: Vec::with_capacity(pages),
            queued: vec![false; pages],
            loading: vec![false; pages],
            in_flight: 0,
            ready: Vec::new(),
            failed: vec![false; pages],
            faults: Vec::new(),
            roots,
            update: 0,
            held_back: 0,
            held_by_faults: 0,
            nearest_held: f32::INFINITY,
            copied_in: 0,
            dropped: 0,
            loaded: 0,
            failures: 0,
            longest_serve: Duration::ZERO,
            radius: f32::INFINITY,
            released: vec![false; pages],
            eye: None,
            demand: Vec::with_capacity(pages),
            demanded: vec![false; pages],
            turned: 0,
            waiting: false,
            pinned_count,
            ceiling: f32::INFINITY,
            ceiling_eye: glam::Vec3::ZERO,
            near: Vec::with_capacity(frames + 2 * pages),
            counted: vec![0; pages],
            round: 0,
            store,
        };
        for j in 0..pages {
            if paging.pinned[j] {
                let frame = paging.free.pop().expect("a frame per pinned page");
                let root = paging.roots[j].id;
                match &paging.store {
                    Store::Memory(store) => live.page_in(j, root, store.page(j), frame),
                    Store::Disk(_) => {
                        let (_, page) = kept.iter().find(|(k, _)| *k == j).expect("kept");
                        live.page_in(j, root, page.view(), frame);
                    }
                }
                paging.held.push(j as u32);
            }
        }
        for j in 0..pages {
            paging.complete[j] = paging.around_in_pool(live, j);
        }
        paging
    }

    /// Number of frames.
    pub fn frames(&self) -> usize {
        self.free.len() + self.held.len()
    }

    /// Number of pages in frames.
    pub fn resident(&self) -> usize {
        self.held.len()
    }

    /// Number of pages in frames that are released (coarsening to leave).
    pub fn released(&self) -> usize {
        self.held
            .iter()
            .filter(|&&k| self.released[k as usize])
            .count()
    }

    /// The release radius: pages farther from the eye are held coarse.
    pub fn radius(&self) -> f32 {
        self.radius
    }

    /// Bytes of the pages kept in memory (not on disk) for copying in.
    pub fn store_bytes(&self) -> usize {
        match &self.store {
            Store::Memory(store) => store.bytes(),
            Store::Disk(_) => 0,
        }
    }

    /// The page file, when the pages are on disk.
    pub fn spool(&self) -> Option<&PageSpool> {
        match &self.store {
            Store::Memory(_) => None,
            Store::Disk(spool) => Some(spool),
        }
    }

    /// Bytes of page files read so far.
    pub fn bytes_read(&self) -> u64 {
        match &self.store {
            Store::Memory(_) => 0,
            Store::Disk(spool) => spool.bytes_read(),
        }
    }

    /// Pages the loader is reading.
    pub fn loading(&self) -> usize {
        self.in_flight
    }

    /// Moves the pages kept in memory to a page file in `dir`, read back by a loader
    /// thread from now on. On failure the pages stay in memory.
    pub fn spool_to(&mut self, dir: &Path) -> Result<(), PageError> {
        let Store::Memory(store) = &self.store else {
            return Ok(());
        };
        let shape = PageShape {
            floats: self.floats,
            depth: self.depth,
        };
        // Pinned pages never leave the pool: they are not written.
        let page = |j: usize| (!self.pinned[j]).then(|| store.page_out(j));
        self.store = Store::Disk(PageSpool::write(dir, self.roots.len(), page, shape)?);
        Ok(())
    }

    /// The pages asked for in the last update, in the order the next copies them in,
    /// and each page's root and whether it never leaves.
    #[cfg(test)]
    pub fn asked(&self) -> (&[u32], &[Sq], &[bool]) {
        (&self.queue, &self.roots, &self.pinned)
    }

    /// The pages in frames, each with whether it is released.
    #[cfg(test)]
    pub fn held(&self) -> Vec<(u32, bool)> {
        let released = |k: u32| self.released[k as usize];
        self.held.iter().map(|&k| (k, released(k))).collect()
    }

    /// The pages that could not be read since the last call, each reported once.
    pub fn take_faults(&mut self) -> Vec<PageError> {
        std::mem::take(&mut self.faults)
    }

    /// Asks for page `j` (unless it could not be read).
    fn ask(&mut self, j: u32) {
        if self.failed[j as usize] {
            return;
        }
        self.asked_at[j as usize] = self.update;
        if !std::mem::replace(&mut self.queued[j as usize], true) {
            self.queue.push(j);
        }
    }

    /// Whether `sq` (below the roots' level) must wait for pages: asks for those missing
    /// around its own.
    pub fn blocks(&mut self, tree: &SquareTree, sq: Sq) -> bool {
        let shift = sq.level - self.level;
        let (px, pz) = (sq.ix >> shift, sq.iz >> shift);
        let own = self.grid[(pz * self.nx + px) as usize] as usize;
        if self.released[own] {
            self.hold(tree, sq);
            return true;
        }
        if self.complete[own] {
            return false;
        }
        let (mut missing, mut coming) = (false, false);
        for j in around(&self.grid, self.nx, self.nz, px, pz) {
            if tree.pages()[j as usize].first == NOT_RESIDENT {
                self.ask(j);
                missing = true;
                coming |= !self.failed[j as usize];
            }
        }
        if missing {
            self.hold(tree, sq);
        }
        self.held_by_faults += usize::from(missing && !coming);
        missing
    }

    /// A missing page root wants its children: asks for its page, unless it lies beyond
    /// the release radius.
    pub fn wait_for(&mut self, tree: &SquareTree, j: usize) {
        self.hold(tree, self.roots[j]);
        if self.distance_of(tree, j) > self.radius {
            self.want(j);
            return;
        }
        self.ask(j as u32);
        self.held_by_faults += usize::from(self.failed[j]);
    }

    /// Whether a page root `sq` (resident) must leave its children alone because its page
    /// is released; `wants` says whether its subtree test fails (then it is held back).
    pub fn starves(&mut self, tree: &SquareTree, sq: Sq, wants: impl FnOnce() -> bool) -> bool {
        let j = self.grid[(sq.iz * self.nx + sq.ix) as usize];
        if j == NO_PAGE
            || !self.released[j as usize]
            || tree.pages()[j as usize].first == NOT_RESIDENT
        {
            return false;
        }
        if wants() {
            self.hold(tree, sq);
            self.want(j as usize);
        }
        true
    }

    /// Square `sq` is held back (left coarser than its tests ask).
    fn hold(&mut self, tree: &SquareTree, sq: Sq) {
        self.held_back += 1;
        if let Some(eye) = self.eye {
            let distance = tree.aabb(sq).distance_to(eye);
            self.nearest_held = self.nearest_held.min(distance);
        }
    }

    /// Released page `j` wants refining.
    fn want(&mut self, j: usize) {
        if !std::mem::replace(&mut self.demanded[j], true) {
            self.demand.push(j as u32);
        }
    }

    /// Distance of page `j`'s root box from this update's eye (0 without one).
    fn distance_of(&self, tree: &SquareTree, j: usize) -> f32 {
        self.eye
            .map_or(0.0, |eye| tree.aabb(self.roots[j]).distance_to(eye))
    }

    /// Whether page `j` may leave at the start of update `update`: resident, not pinned,
    /// not asked for in the update before (so neither copied in during this one), its
    /// root without an enabled child, and no page around it that is not released either
    /// (refined ground keeps its neighbourhood; released pages are on their way out).
    fn droppable(&self, tree: &SquareTree, state: &[u32], j: usize, update: u64) -> bool {
        let root = self.roots[j];
        let refined = |k: u32| enabled_children(state[self.roots[k as usize].id as usize]) != 0;
        tree.pages()[j].first != NOT_RESIDENT
            && !self.pinned[j]
            && self.asked_at[j] + 1 < update
            && !refined(j as u32)
            && around(&self.grid, self.nx, self.nz, root.ix, root.iz)
                .all(|k| self.released[k as usize] || !refined(k))
    }

    /// Frames the next update can give pages, counted up to `limit`: free, or holding a
    /// page that may leave then.
    fn room(&self, tree: &SquareTree, state: &[u32], limit: usize) -> usize {
        let next = self.update + 1;
        let droppable = self
            .held
            .iter()
            .filter(|&&k| self.droppable(tree, state, k as usize, next));
        let wanted = limit.saturating_sub(self.free.len());
        self.free.len().min(limit) + droppable.take(wanted).count()
    }

    /// Pages the next updates can copy in or ask the loader for (as many as there are
    /// frames for, or will be once pages are released and leave), and those being read:
    /// while there are some, selecting again brings more of what the view asked for.
    pub fn pending(&self, tree: &SquareTree, state: &[u32]) -> usize {
        let missing = self.queue.iter().filter(|&&j| {
            tree.pages()[j as usize].first == NOT_RESIDENT && !self.loading[j as usize]
        });
        let missing = missing.count();
        let room = self.room(tree, state, missing);
        let to_come = if room < missing {
            room + self.leaving(state)
        } else {
            room
        };
        missing.min(to_come) + self.in_flight + self.turned
    }

    /// Released pages in frames that are coarsening and will be free to leave: refined,
    /// but no page beside them that is not released is (which would keep them).
    fn leaving(&self, state: &[u32]) -> usize {
        let refined = |k: u32| enabled_children(state[self.roots[k as usize].id as usize]) != 0;
        let leaving = self.held.iter().filter(|&&k| {
            let root = self.roots[k as usize];
            self.released[k as usize]
                && refined(k)
                && around(&self.grid, self.nx, self.nz, root.ix, root.iz)
                    .all(|n| self.released[n as usize] || !refined(n))
        });
        leaving.count()
    }

    /// At the end of an update: puts the pages asked for in order of their distance from
    /// `eye` (nearest first: the ground nearest the camera gets frames first, as the
    /// next update copies in in this order), moves the release radius, then
    /// [`Paging::dispatch`].
    ///
    /// The radius is worked out ([`Paging::fitting_radius`]) when pages wait that the
    /// frames cannot take, or released pages want refining (so it grows back when the
    /// view asks for less), and is infinite otherwise; but while the eye stays where the
    /// frames were crowded, it grows no larger than the radius they shrank to then.
    /// Pages beyond it are released from the next update on: their squares want
    /// nothing, so they coarsen and leave, nearer ground taking their frames.
    pub fn end_update(&mut self, tree: &SquareTree, state: &[u32], deadline: &mut [Deadline]) {
        if let Some(eye) = self.eye {
            let distance = |j: u32| tree.aabb(self.roots[j as usize]).distance_to(eye);
            self.queue
                .sort_unstable_by(|&a, &b| distance(a).total_cmp(&distance(b)));
            self.move_radius(tree, state);
        }
        self.release(tree, deadline);
        self.dispatch(tree, state);
    }

    /// The largest radius whose pages fit in the frames: the pages in frames that are
    /// refined or asked for, and those missing that are asked for or want refining,
    /// nearest first, each taken with the pages around it (which its squares
    /// need in frames to refine), until the next one would not fit.
    fn fitting_radius(&mut self, tree: &SquareTree, state: &[u32]) -> f32 {
        let mut near = std::mem::take(&mut self.near);
        near.clear();
        // Pages in frames count while refined or asked for: the others may leave.
        let needed = self.held.iter().filter(|&&k| {
            enabled_children(state[self.roots[k as usize].id as usize]) != 0
                || self.asked_at[k as usize] == self.update
        });
        let missing = (self.queue.iter().chain(&self.demand))
            .filter(|&&j| tree.pages()[j as usize].first == NOT_RESIDENT);
        let pages = needed.chain(missing);
        near.extend(pages.map(|&j| (self.distance_of(tree, j as usize), j)));
        near.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let budget = self.frames() - self.pinned_count;
        // Pages counted in this round have `counted[k] == round`.
        self.round += 1;
        let round = self.round;
        let mut taken = 0;
        let mut radius = f32::INFINITY;
        for &(distance, j) in &near {
            let root = self.roots[j as usize];
            let (mut new, mut n) = ([0; 9], 0);
            for k in around(&self.grid, self.nx, self.nz, root.ix, root.iz) {
                if !self.pinned[k as usize] && self.counted[k as usize] != round {
                    new[n] = k;
                    n += 1;
                }
            }
            if taken + n > budget {
                radius = distance.next_down();
                break;
            }
            for &k in &new[..n] {
                self.counted[k as usize] = round;
            }
            taken += n;
        }
        self.near = near;
        radius
    }

    /// Works the release radius out again (see [`Paging::end_update`]).
    fn move_radius(&mut self, tree: &SquareTree, state: &[u32]) {
        let waiting = (self.queue.iter())
            .filter(|&&j| tree.pages()[j as usize].first == NOT_RESIDENT)
            .count();
        self.waiting = waiting > 0;
        let crowded = waiting > 0 && self.room(tree, state, waiting) < waiting;
        let fitting = if crowded || !self.demand.is_empty() {
            self.fitting_radius(tree, state)
        } else {
            f32::INFINITY
        };
        let eye = self.eye.unwrap_or_default();
        if eye.distance(self.ceiling_eye) > 0.01 * self.ceiling {
            self.ceiling = f32::INFINITY;
        }
        if crowded {
            // Crowded frames never grow the radius (pages released earlier may still be
            // on their way out).
            if fitting < self.radius {
                (self.ceiling, self.ceiling_eye) = (fitting, eye);
                self.radius = fitting;
            }
        } else {
            self.radius = fitting.min(self.ceiling);
        }
    }

    /// With the pages on disk, requests the pages the next
    /// update would copy in if they were at hand (the first ones asked for, as many as it
    /// has frames for, free or holding a page that may leave then, and at most
    /// [`PAGES_PER_UPDATE`]) that are neither read nor being read. So pages are read
    /// only for frames that can take them (a few are let go when the view moves on
    /// first), and once read, the next update copies in what it would from memory.
    fn dispatch(&mut self, tree: &SquareTree, state: &[u32]) {
        let Store::Disk(spool) = &self.store else {
            return;
        };
        if self.queue.is_empty() {
            return;
        }
        let room = self.room(tree, state, PAGES_PER_UPDATE.min(self.queue.len()));
        for &j in self.queue.iter().take(room) {
            let j = j as usize;
            if !self.loading[j] && !self.ready.iter().any(|&(k, _)| k as usize == j) {
                spool.request(j as u32);
                self.loading[j] = true;
                self.in_flight += 1;
            }
        }
    }

    /// Takes in the pages the loader has read (waiting until it has read every page
    /// requested, if `wait`): those read become ready, those that failed are reported;
    /// if the loader has stopped, the pages it was to read fail.
    pub fn receive(&mut self, wait: bool) {
        let Store::Disk(spool) = &mut self.store else {
            return;
        };
        loop {
            let (j, result) = match spool.receive(wait && self.in_flight > 0) {
                Received::Page(page) => page,
                Received::Nothing => return,
                Received::Stopped => {
                    for j in 0..self.loading.len() {
                        if !std::mem::take(&mut self.loading[j]) {
                            continue;
                        }
                        self.failures += 1;
                        self.failed[j] = true;
                        self.faults.push(spool.stopped(j));
                    }
                    self.in_flight = 0;
                    return;
                }
            };
            self.loading[j as usize] = false;
            self.in_flight -= 1;
            match result {
                Ok(page) => {
                    self.loaded += 1;
                    self.ready.push((j, page));
                }
                Err(fault) => {
                    self.failures += 1;
                    self.failed[j as usize] = true;
                    self.faults.push(fault);
                }
            }
        }
    }

    /// At the start of an update: copies in the pages asked for in the last one that are
    /// at hand (in memory, or read from disk), in the order asked and at most
    /// [`PAGES_PER_UPDATE`], dropping the least
    /// recently asked droppable pages for frames while none is free; pages read but not
    /// asked for since are let go (whatever still waits for a page asks again). Returns
    /// whether the pool changed.
    pub fn serve(
        &mut self,
        tree: &mut SquareTree,
        state: &mut [u32],
        deadline: &mut [Deadline],
        eye: Option<glam::Vec3>,
    ) -> bool {
        let started = Instant::now();
        self.held_back = 0;
        self.held_by_faults = 0;
        self.nearest_held = f32::INFINITY;
        self.update += 1;
        self.eye = eye;
        for &j in &self.demand {
            self.demanded[j as usize] = false;
        }
        self.demand.clear();
        if eye.is_none() {
            self.radius = f32::INFINITY;
        }
        self.receive(false);
        let mut queue = std::mem::take(&mut self.queue);
        let mut copied = 0;
        for &j in &queue {
            let j = j as usize;
            self.queued[j] = false;
            if tree.pages()[j].first != NOT_RESIDENT || copied == PAGES_PER_UPDATE {
                continue;
            }
            let ready = self.ready.iter().position(|&(k, _)| k as usize == j);
            if ready.is_none() && matches!(self.store, Store::Disk(_)) {
                continue;
            }
            let Some(frame) = self.frame(tree, state) else {
                continue;
            };
            let root = self.roots[j].id;
            match (&self.store, ready) {
                (_, Some(r)) => tree.page_in(j, root, self.ready.swap_remove(r).1.view(), frame),
                (Store::Memory(store), None) => tree.page_in(j, root, store.page(j), frame),
                (Store::Disk(_), None) => unreachable!("checked above"),
            }
            self.held.push(j as u32);
            self.copied_in += 1;
            self.released[j] = self.distance_of(tree, j) > self.radius;
            self.refresh_around(tree, j);
            let run = frame as usize..(frame + self.frame_slots) as usize;
            state[run.clone()].fill(0);
            deadline[run].fill(EXPIRED);
            copied += 1;
        }
        let update = self.update;
        let asked_at = &self.asked_at;
        self.ready
            .retain(|&(j, _)| asked_at[j as usize] + 1 >= update);
        queue.clear();
        self.queue = queue;
        self.longest_serve = self.longest_serve.max(started.elapsed());
        copied > 0
    }

    /// Brings the pages in frames to the release radius and this update's eye, for the
    /// next update (so what it may drop is known when pages are requested): pages beyond
    /// it are released, but while no page waits for a frame, those with every page
    /// around them in frames are kept (refining them takes no frame). A page released or
    /// kept again is tested anew (its squares' and its ancestors' deadlines expire).
    fn release(&mut self, tree: &SquareTree, deadline: &mut [Deadline]) {
        self.turned = 0;
        for &k in &self.held {
            let k = k as usize;
            if self.pinned[k] {
                continue;
            }
            let beyond = self.distance_of(tree, k) > self.radius;
            let released = beyond && (self.waiting || !self.complete[k]);
            if std::mem::replace(&mut self.released[k], released) == released {
                continue;
            }
            self.turned += 1;
            let first = tree.pages()[k].first as usize;
            deadline[first..first + self.frame_slots as usize].fill(EXPIRED);
            let mut id = self.roots[k].id;
            loop {
                deadline[id as usize] = EXPIRED;
                if id == ROOT {
                    break;
                }
                id = tree.parent(id);
            }
        }
    }

    /// A frame for a page: a free one, else the frame of a page that may leave (dropped:
    /// a released one first, else the least recently asked), else none.
    fn frame(&mut self, tree: &mut SquareTree, state: &[u32]) -> Option<u32> {
        if let Some(frame) = self.free.pop() {
            return Some(frame);
        }
        let h = (0..self.held.len())
            .filter(|&h| self.droppable(tree, state, self.held[h] as usize, self.update))
            .min_by_key(|&h| {
                let k = self.held[h] as usize;
                (!self.released[k], self.asked_at[k])
            })?;
        let k = self.held.swap_remove(h) as usize;
        self.dropped += 1;
        let frame = tree.drop_page(k).first;
        self.refresh_around(tree, k);
        Some(frame)
    }

    /// Whether the pages around page `j` (itself included) are all in the pool.
    fn around_in_pool(&self, tree: &SquareTree, j: usize) -> bool {
        let root = self.roots[j];
        around(&self.grid, self.nx, self.nz, root.ix, root.iz)
            .all(|k| tree.pages()[k as usize].first != NOT_RESIDENT)
    }

    /// Page `j` came or went: refreshes the "all around in the pool" flags it takes part
    /// in (its own and its neighbours').
    fn refresh_around(&mut self, tree: &SquareTree, j: usize) {
        let root = self.roots[j];
        for k in around(&self.grid, self.nx, self.nz, root.ix, root.iz) {
            self.complete[k as usize] = self.around_in_pool(tree, k as usize);
        }
    }
}

/// The pages of the 3 × 3 positions around `(px, pz)` on the roots' level (itself
/// included), read out of `grid` first, so the caller may change the paging meanwhile.
fn around(grid: &[u32], nx: u32, nz: u32, px: u32, pz: u32) -> impl Iterator<Item = u32> + use<> {
    let mut near = [NO_PAGE; 9];
    let positions = (pz.saturating_sub(1)..(pz + 2).min(nz))
        .flat_map(|z| (px.saturating_sub(1)..(px + 2).min(nx)).map(move |x| (x, z)));
    for (slot, (x, z)) in near.iter_mut().zip(positions) {
        *slot = grid[(z * nx + x) as usize];
    }
    near.into_iter().filter(|&j| j != NO_PAGE)
}
