//! A8 step 2: algorithm A's pages held in a fixed number of *frames* of the pool, copied
//! in when Update() wants them and dropped when nothing needs them
//! (docs/ADAPTIVE_PAGING.md, "Neighbours across pages"). The pages that are not resident
//! wait in a copy of the tree as built; reading them from disk is step 3.
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
//!   always refined, whatever the view) never leave.

use super::Deadline;
use super::EXPIRED;
use super::tree::{MAX_SLOTS, NOT_RESIDENT, Sq, SquareTree};
use super::update::enabled_children;

/// No page at a position of the roots' level (the square there has no children).
const NO_PAGE: u32 = u32::MAX;

#[derive(Debug)]
pub(super) struct Paging {
    /// The tree as built, every page in place: where pages are copied from.
    store: SquareTree,
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
    /// Updates so far.
    update: u64,
    /// Squares that waited for a page in the last update.
    pub held_back: usize,
    /// Pages copied in and dropped so far.
    pub copied_in: usize,
    pub dropped: usize,
}

impl Paging {
    /// Takes `tree` (as built, with pages) apart: returns the top with `frames` frames
    /// after it (at least the pinned pages and nine more, at most one per page), the
    /// pinned pages copied in, and the paging that serves the others; or gives the tree
    /// back if those frames would not fit in a pool ([`MAX_SLOTS`]).
    pub fn new(tree: SquareTree, frames: usize) -> Result<(SquareTree, Paging), Box<SquareTree>> {
        let roots = tree.page_roots();
        let level = roots[0].level;
        let shape = tree.levels[level as usize];
        let mut grid = vec![NO_PAGE; shape.nx as usize * shape.nz as usize];
        for (j, root) in roots.iter().enumerate() {
            grid[(root.iz * shape.nx + root.ix) as usize] = j as u32;
        }
        let mut pinned = vec![false; roots.len()];
        for root in roots.iter().filter(|root| tree.straddles(**root)) {
            for j in around(&grid, shape.nx, shape.nz, root.ix, root.iz) {
                pinned[j as usize] = true;
            }
        }
        let frame_slots = tree.pages().iter().map(|p| p.slots).max().unwrap_or(0);
        let frames = (frames.max(pinned.iter().filter(|&&p| p).count() + 9)).min(roots.len());
        let top = tree.pages()[0].first as usize;
        if top + frames * frame_slots as usize >= MAX_SLOTS {
            return Err(Box::new(tree));
        }
        let mut live = tree.top_with_frames(frames, frame_slots as usize);
        let free = (0..frames)
            .rev()
            .map(|f| (top + f * frame_slots as usize) as u32)
            .collect();
        let mut paging = Paging {
            level,
            grid,
            nx: shape.nx,
            nz: shape.nz,
            complete: vec![false; pinned.len()],
            pinned,
            frame_slots,
            free,
            held: Vec::with_capacity(frames),
            asked_at: vec![0; roots.len()],
            queue: Vec::new(),
            queued: vec![false; roots.len()],
            roots,
            update: 0,
            held_back: 0,
            copied_in: 0,
            dropped: 0,
            store: tree,
        };
        for j in 0..paging.roots.len() {
            if paging.pinned[j] {
                let frame = paging.free.pop().expect("a frame per pinned page");
                live.copy_page(&paging.store, j, frame);
                paging.held.push(j as u32);
            }
        }
        for j in 0..paging.roots.len() {
            paging.complete[j] = paging.around_in_pool(&live, j);
        }
        Ok((live, paging))
    }

    /// Number of frames.
    pub fn frames(&self) -> usize {
        self.free.len() + self.held.len()
    }

    /// Number of pages in frames.
    pub fn resident(&self) -> usize {
        self.held.len()
    }

    /// Bytes of the copy pages come from.
    pub fn store_bytes(&self) -> usize {
        self.store.bytes()
    }

    /// Asks for page `j`.
    fn ask(&mut self, j: u32) {
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
        if self.complete[self.grid[(pz * self.nx + px) as usize] as usize] {
            return false;
        }
        let mut missing = false;
        for j in around(&self.grid, self.nx, self.nz, px, pz) {
            if tree.pages()[j as usize].first == NOT_RESIDENT {
                self.ask(j);
                missing = true;
            }
        }
        self.held_back += usize::from(missing);
        missing
    }

    /// A missing page root wants its children: asks for its page.
    pub fn wait_for(&mut self, j: usize) {
        self.ask(j as u32);
        self.held_back += 1;
    }

    /// Whether page `j` may leave: resident, not pinned, not asked for in the last update
    /// (so neither copied in during this one), and no page around it (itself included)
    /// has an enabled child of its root.
    fn droppable(&self, tree: &SquareTree, state: &[u32], j: usize) -> bool {
        let root = self.roots[j];
        tree.pages()[j].first != NOT_RESIDENT
            && !self.pinned[j]
            && self.asked_at[j] + 1 < self.update
            && around(&self.grid, self.nx, self.nz, root.ix, root.iz)
                .all(|k| enabled_children(state[self.roots[k as usize].id as usize]) == 0)
    }

    /// At the start of an update: copies in the pages asked for in the last one, in the
    /// order asked, dropping the least recently asked droppable pages for frames while
    /// none is free (the rest are asked for again by whatever still waits for them).
    /// Returns whether the pool changed.
    pub fn serve(
        &mut self,
        tree: &mut SquareTree,
        state: &mut [u32],
        deadline: &mut [Deadline],
    ) -> bool {
        self.held_back = 0;
        self.update += 1;
        let mut queue = std::mem::take(&mut self.queue);
        let mut changed = false;
        for &j in &queue {
            let j = j as usize;
            self.queued[j] = false;
            if tree.pages()[j].first != NOT_RESIDENT {
                continue;
            }
            let frame = match self.free.pop() {
                Some(frame) => frame,
                None => {
                    let victim = (0..self.held.len())
                        .filter(|&h| self.droppable(tree, state, self.held[h] as usize))
                        .min_by_key(|&h| self.asked_at[self.held[h] as usize]);
                    let Some(h) = victim else {
                        continue;
                    };
                    let k = self.held.swap_remove(h) as usize;
                    self.dropped += 1;
                    let frame = tree.drop_page(k).first;
                    self.refresh_around(tree, k);
                    frame
                }
            };
            tree.copy_page(&self.store, j, frame);
            self.held.push(j as u32);
            self.copied_in += 1;
            self.refresh_around(tree, j);
            let run = frame as usize..(frame + self.frame_slots) as usize;
            state[run.clone()].fill(0);
            deadline[run].fill(EXPIRED);
            changed = true;
        }
        queue.clear();
        self.queue = queue;
        changed
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
