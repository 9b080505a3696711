//! Update() of algorithm A: the enable pass over the enabled squares (tests, propagation to
//! parents and neighbours) and the disable pass, finest level first, that drops exactly
//! what no test and no dependency holds any more.

use super::records::{EAST, NORTH, SOUTH, WEST};
use super::tree::{ABSENT, OUTSIDE, Sq, side_error};
use super::{AdaptiveLod, Deadline, EXPIRED, Tester};
use crate::camera::Containment;

/// Bits of a square's state word (the article's "mesh tree" per square).
pub(super) const ENABLED: u32 = 1;
/// Set by the parent's evaluation: the square's box test passes (and its parent's does).
pub(super) const WANTED: u32 = 1 << 1;
/// Evaluated in this frame's enable pass (cleared at the end of the update).
const EVALUATED: u32 = 1 << 2;
/// Enable flags of the edge vertices the square owns: east, south, and on the grid's
/// north and west border also north and west.
const MID_SHIFT: u32 = 3;
/// This square's side of the vertex test of each of its four edge vertices.
const SIDE_WANT_SHIFT: u32 = 7;
/// Reference counts (0–4, 3 bits each) of the owned edge vertices: enabled sub-squares
/// that have the vertex as a corner.
const REF_SHIFT: u32 = 11;
const REF_MASK: u32 = 0b111;
/// In this frame's candidates of the disable pass.
const CANDIDATE: u32 = 1 << 23;
/// Which of the four sub-squares are enabled (bit `k`: quadrant `k`), so the walks skip
/// a leaf's child block without touching it (its records and state words: two cache
/// lines).
const CHILDREN_SHIFT: u32 = 24;

/// The bits Render() reads: which owned edge vertices and which sub-squares are enabled
/// (a square's own flag is implied by its parent's sub-square bit).
pub(super) const DRAWN_BITS: u32 = 0b1111 << MID_SHIFT | 0b1111 << CHILDREN_SHIFT;

/// The quadrants of the enabled sub-squares of a square with state `word`, as bits.
#[inline(always)]
pub(super) fn enabled_children(word: u32) -> u32 {
    word >> CHILDREN_SHIFT & 0b1111
}

#[inline(always)]
fn child_bit(k: u32) -> u32 {
    1 << (CHILDREN_SHIFT + k)
}

/// The two parent edge vertices that are corners of child `k` (bit 0: east half, bit 1:
/// south half).
#[inline(always)]
pub(super) fn parent_sides(k: u32) -> [usize; 2] {
    [
        if k & 1 == 0 { WEST } else { EAST },
        if k & 2 == 0 { NORTH } else { SOUTH },
    ]
}

#[inline(always)]
pub(super) fn mid_bit(side: usize) -> u32 {
    1 << (MID_SHIFT + side as u32)
}

#[inline(always)]
fn side_want_bit(side: usize) -> u32 {
    1 << (SIDE_WANT_SHIFT + side as u32)
}

#[inline(always)]
pub(super) fn ref_count(word: u32, side: usize) -> u32 {
    (word >> (REF_SHIFT + 3 * side as u32)) & REF_MASK
}

/// The side across an owned edge vertex (east or south) as the other square sees it.
#[inline(always)]
fn back(side: usize) -> usize {
    if side == EAST { WEST } else { NORTH }
}

impl AdaptiveLod<'_> {
    /// The square that owns the edge vertex on `side` of `sq`, and the owned side; `None`
    /// when the vertex can never be drawn (the square across is not stored). `around` are
    /// the neighbours of `sq` when the caller knows them (else they are looked up).
    #[inline(always)]
    pub(super) fn owner(
        &self,
        sq: Sq,
        side: usize,
        around: Option<&[u32; 4]>,
    ) -> Option<(Sq, usize)> {
        let owned = match side {
            NORTH if sq.iz > 0 => SOUTH,
            WEST if sq.ix > 0 => EAST,
            _ => return Some((sq, side)),
        };
        let n = around.map_or_else(|| self.tree.neighbour(sq.id, side), |a| a[side]);
        (n < ABSENT).then(|| (sq.beside(n, side), owned))
    }

    /// Whether the edge vertex on `side` of `sq` is enabled.
    #[inline(always)]
    pub(super) fn mid_enabled(&self, sq: Sq, side: usize, around: Option<&[u32; 4]>) -> bool {
        self.owner(sq, side, around)
            .is_some_and(|(o, owned)| self.state[o.id as usize] & mid_bit(owned) != 0)
    }

    /// Enables a square: its parent first, then the two parent edge vertices that are its
    /// corners (counted), which enable the neighbours sharing them.
    pub(super) fn enable_square(&mut self, sq: Sq) {
        if self.state[sq.id as usize] & ENABLED != 0 {
            return;
        }
        let parent = (sq.level > 0).then(|| sq.parent(self.tree.parent(sq.id)));
        if let Some(parent) = parent {
            self.enable_square(parent);
        }
        self.mark_enabled(sq);
        if let Some(parent) = parent {
            self.enable_corners(parent, sq.quadrant(), None);
        }
    }

    fn mark_enabled(&mut self, sq: Sq) {
        self.state[sq.id as usize] |= ENABLED;
        if sq.level > 0 {
            self.state[self.tree.parent(sq.id) as usize] |= child_bit(sq.quadrant());
        }
        self.deadline[sq.id as usize] = EXPIRED;
        self.enabled += 1;
        self.pending.push(sq);
    }

    /// Counts and enables the two edge vertices of `parent` that are corners of its child
    /// `k` (balance makes both drawable: a square with children has all its neighbours).
    fn enable_corners(&mut self, parent: Sq, k: u32, around: Option<&[u32; 4]>) {
        for side in parent_sides(k) {
            let Some((owner, owned)) = self.owner(parent, side, around) else {
                debug_assert!(false, "a corner of an enabled square cannot be drawn");
                continue;
            };
            self.state[owner.id as usize] += 1 << (REF_SHIFT + 3 * owned as u32);
            let across = if owner.id == parent.id {
                around.map(|a| a[owned])
            } else {
                Some(parent.id)
            };
            self.enable_mid(owner, owned, across);
        }
    }

    /// Enables an owned edge vertex and both squares that share it; `across` is the square
    /// on the other side when the caller knows it.
    fn enable_mid(&mut self, owner: Sq, owned: usize, across: Option<u32>) {
        let id = owner.id as usize;
        if self.state[id] & mid_bit(owned) != 0 {
            return;
        }
        self.state[id] |= mid_bit(owned);
        self.enable_square(owner);
        if owned == EAST || owned == SOUTH {
            let n = across.unwrap_or_else(|| self.tree.neighbour(owner.id, owned));
            if n < ABSENT {
                self.enable_square(owner.beside(n, owned));
            }
        }
    }

    /// Makes `sq` a candidate of this frame's disable pass.
    fn add_candidate(&mut self, sq: Sq) {
        let id = sq.id as usize;
        if self.state[id] & CANDIDATE == 0 {
            self.state[id] |= CANDIDATE;
            self.candidates[sq.level as usize].push(sq);
        }
    }

    /// Evaluates an enabled square (neighbours `around`): its side of its edge vertices'
    /// tests and its children's box tests, enabling what passes. Returns its deadline (see
    /// `Motion`): until then no answer can change. What changed becomes a candidate of the
    /// disable pass.
    fn evaluate(&mut self, tester: &Tester<'_>, sq: Sq, around: &[u32; 4]) -> Deadline {
        self.stats.nodes_visited += 1;
        let id = sq.id as usize;
        let wanted = sq.level == 0 || self.state[id] & WANTED != 0;
        let aabb = self.tree.aabb(sq);
        // One frustum test for the square's own tests; its children need their own only
        // when it crosses the frustum.
        let (mut containment, mut slack) = if wanted {
            tester.classify_slack(&aabb)
        } else {
            (Containment::Outside, f32::INFINITY)
        };
        // Below the page roots, what a square enables can reach the pages around its own:
        // while one is missing, a square that could enable anything (wanted and in view)
        // wants nothing and asks for them (module docs of `paging`).
        let blocked = containment != Containment::Outside
            && match &mut self.paging {
                Some(paging) if sq.level > paging.level => paging.blocks(&self.tree, sq),
                _ => false,
            };
        if blocked {
            containment = Containment::Outside;
        }
        // A page root whose page is released leaves its children alone (they coarsen and
        // the page leaves its frame for nearer ground).
        let starved = containment != Containment::Outside
            && match &mut self.paging {
                Some(paging) if sq.level == paging.level => {
                    let tree = &self.tree;
                    paging.starves(tree, sq, || {
                        tester.fails(tree.records[id].subtree_error(), &aabb)
                    })
                }
                _ => false,
            };
        let mut side_bits = 0;
        if containment != Containment::Outside {
            let fan = self.tree.records[id].fan_error();
            for (side, &across) in around.iter().enumerate() {
                if across == ABSENT {
                    // A vertex inside a coarser leaf's edge: never drawn (its error is in
                    // the fan error).
                    continue;
                }
                let vertex = self.tree.stored_vertex_error(sq, side, Some(across));
                let (fails, side_slack) = tester.fails_slack(side_error(fan, vertex), &aabb);
                slack = slack.min(side_slack);
                if fails {
                    side_bits |= side_want_bit(side);
                }
            }
        }
        let old = self.state[id];
        let changed = (old ^ side_bits) >> SIDE_WANT_SHIFT & 0b1111;
        self.state[id] = (old & !(0b1111 << SIDE_WANT_SHIFT)) | side_bits | EVALUATED;
        self.lists[sq.level as usize].push(sq);
        for side in 0..4 {
            if changed & (1 << side) != 0
                && let Some((owner, _)) = self.owner(sq, side, Some(around))
            {
                self.add_candidate(owner);
            }
        }
        // A missing page root whose subtree test fails asks for its page.
        let waiting = if let Some(paging) = &mut self.paging
            && let Some(j) = self.tree.missing_page(sq.id)
            && containment != Containment::Outside
            && tester.fails(self.tree.records[id].subtree_error(), &aabb)
        {
            debug_assert!(!self.tree.straddles(sq), "a pinned page is missing");
            paging.wait_for(&self.tree, j);
            true
        } else {
            false
        };
        if self.tree.has_children(sq.id) {
            let straddles = self.tree.straddles(sq);
            debug_assert!(!(blocked && straddles), "a pinned page is missing");
            let first = self.tree.first_child(sq.id);
            for k in 0..4 {
                let cid = (first + k) as usize;
                if self.tree.records[cid].is_outside() {
                    continue;
                }
                let child = sq.child(first, k);
                let want = !blocked && straddles
                    || (containment != Containment::Outside && !starved && {
                        let error = self.tree.records[cid].subtree_error();
                        let child_box = self.tree.aabb(child);
                        let (fails, test_slack) = if containment == Containment::Inside {
                            tester.fails_slack(error, &child_box)
                        } else if error <= 0.0 {
                            (false, f32::INFINITY)
                        } else {
                            match tester.classify_slack(&child_box) {
                                (Containment::Outside, outside) => (false, outside),
                                (_, seen) => {
                                    let (fails, test) = tester.fails_slack(error, &child_box);
                                    (fails, seen.min(test))
                                }
                            }
                        };
                        slack = slack.min(test_slack);
                        fails
                    });
                let was = self.state[cid] & WANTED != 0;
                if want {
                    if !was {
                        // Its own tests depend on this bit: test it again.
                        self.state[cid] |= WANTED;
                        self.deadline[cid] = EXPIRED;
                    }
                    if self.state[cid] & ENABLED == 0 {
                        // The parent is enabled (it is being evaluated).
                        self.mark_enabled(child);
                        self.enable_corners(sq, k, Some(around));
                    }
                } else if was {
                    self.state[cid] &= !WANTED;
                    self.deadline[cid] = EXPIRED;
                    self.add_candidate(child);
                }
            }
        }
        for side in 0..4 {
            if side_bits & side_want_bit(side) != 0
                && let Some((owner, owned)) = self.owner(sq, side, Some(around))
            {
                let across = if owner.id == sq.id {
                    around[owned]
                } else {
                    sq.id
                };
                self.enable_mid(owner, owned, Some(across));
            }
        }
        if blocked || starved || waiting {
            return EXPIRED;
        }
        self.motion.deadline(slack, tester.reach(&aabb))
    }

    /// Evaluates `sq` (neighbours `around`) and then its enabled descendants, skipping every
    /// subtree whose deadline has not passed; returns and stores the subtree's new deadline.
    fn visit(&mut self, tester: &Tester<'_>, sq: Sq, around: &[u32; 4]) -> Deadline {
        let id = sq.id as usize;
        if !self.full && !self.motion.due(self.deadline[id]) {
            return self.deadline[id];
        }
        let mut deadline = self.evaluate(tester, sq, around);
        let children = enabled_children(self.state[id]);
        if children != 0 {
            let first = self.tree.first_child(sq.id);
            for k in (0..4).filter(|k| children & 1 << k != 0) {
                let child_around = self.tree.child_neighbours(first, k, around);
                let child = self.visit(tester, sq.child(first, k), &child_around);
                deadline = self.motion.earlier(deadline, child);
            }
        }
        self.deadline[id] = deadline;
        deadline
    }

    /// The enable pass: every enabled square whose deadline has passed (all of them on a
    /// full update) is evaluated, and every square enabled during the pass, parents before
    /// children. Afterwards the state holds every square and vertex whose test passes and
    /// is closed under the dependencies; squares not evaluated kept answers that cannot
    /// have changed.
    pub(super) fn enable_pass(&mut self, tester: &Tester<'_>) {
        for list in &mut self.lists {
            list.clear();
        }
        self.pending.clear();
        self.visit(tester, Sq::ROOT, &[OUTSIDE; 4]);
        // Squares enabled by propagation outside the subtrees visited, in the order they
        // were enabled (a parent is always enabled before its children).
        let mut next = 0;
        while next < self.pending.len() {
            let sq = self.pending[next];
            next += 1;
            let id = sq.id as usize;
            if self.state[id] & EVALUATED != 0 {
                continue;
            }
            let around = self.tree.neighbours(sq.id);
            let deadline = self.evaluate(tester, sq, &around);
            self.deadline[id] = deadline;
            // Its ancestors' subtree deadlines include it.
            let mut cur = sq.id;
            while cur != 0 {
                cur = self.tree.parent(cur);
                let parent = cur as usize;
                let merged = self.motion.earlier(self.deadline[parent], deadline);
                if merged == self.deadline[parent] {
                    break;
                }
                self.deadline[parent] = merged;
            }
        }
    }

    /// The disable pass (the article's rules), finest level first: an edge vertex goes
    /// when no enabled sub-square uses it (reference count 0) and neither square sharing
    /// it wants it; a square goes when it is not the root, has no enabled edge vertex or
    /// sub-square and its box test fails. Dependencies only point to coarser levels (a
    /// sub-square needs its parent and two of its parent's edge vertices; an edge vertex
    /// needs the two squares sharing it), so one pass in this order leaves exactly the
    /// least closed set holding every passing test: the state a fresh instance reaches.
    ///
    /// Only candidates are looked at: the squares whose rules' inputs changed this frame
    /// (a want bit, a wanted bit, a reference count, a vertex or sub-square disabled). Every
    /// other enabled square and vertex failed its rule last frame and still does.
    pub(super) fn disable_pass(&mut self) {
        for level in (0..=self.finest).rev() {
            let mut i = 0;
            while i < self.candidates[level].len() {
                let sq = self.candidates[level][i];
                i += 1;
                let id = sq.id as usize;
                for side in [EAST, SOUTH, NORTH, WEST] {
                    let owned = match side {
                        NORTH => sq.iz == 0,
                        WEST => sq.ix == 0,
                        _ => true,
                    };
                    let word = self.state[id];
                    if !owned || word & mid_bit(side) == 0 || ref_count(word, side) != 0 {
                        continue;
                    }
                    if word & side_want_bit(side) != 0 {
                        continue;
                    }
                    let across = if side == EAST || side == SOUTH {
                        let n = self.tree.neighbour(sq.id, side);
                        (n < ABSENT).then(|| sq.beside(n, side))
                    } else {
                        None
                    };
                    let wanted_across = across.is_some_and(|x| {
                        self.state[x.id as usize] & side_want_bit(back(side)) != 0
                    });
                    if !wanted_across {
                        self.state[id] &= !mid_bit(side);
                        if let Some(x) = across {
                            self.add_candidate(x);
                        }
                    }
                }
            }
            if level == 0 {
                break;
            }
            for i in 0..self.candidates[level].len() {
                let sq = self.candidates[level][i];
                let id = sq.id as usize;
                let word = self.state[id];
                if word & (ENABLED | WANTED) != ENABLED {
                    continue;
                }
                if enabled_children(word) != 0
                    || (0..4).any(|side| self.mid_enabled(sq, side, None))
                {
                    continue;
                }
                self.state[id] &= !ENABLED;
                self.enabled -= 1;
                let parent = sq.parent(self.tree.parent(sq.id));
                self.state[parent.id as usize] &= !child_bit(sq.quadrant());
                self.add_candidate(parent);
                for side in parent_sides(sq.quadrant()) {
                    if let Some((owner, owned)) = self.owner(parent, side, None) {
                        self.state[owner.id as usize] -= 1 << (REF_SHIFT + 3 * owned as u32);
                        self.add_candidate(owner);
                    }
                }
            }
        }
        for level in 0..=self.finest {
            for &sq in &self.lists[level] {
                self.state[sq.id as usize] &= !EVALUATED;
            }
            for &sq in &self.candidates[level] {
                self.state[sq.id as usize] &= !CANDIDATE;
            }
            self.candidates[level].clear();
        }
    }
}
