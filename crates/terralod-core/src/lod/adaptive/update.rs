//! Update() of algorithm A: the enable pass over the enabled squares (tests, propagation to
//! parents and neighbours) and the disable pass, finest level first, that drops exactly
//! what no test and no dependency holds any more.

use super::records::{EAST, HeightTree, NORTH, SOUTH, WEST};
use super::{AdaptiveLod, Deadline, EXPIRED, Tester, earlier};
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

/// The two parent edge vertices that are corners of child `k` (bit 0: east half, bit 1:
/// south half).
#[inline(always)]
pub(super) fn parent_sides(k: u32) -> [usize; 2] {
    [
        if k & 1 == 0 { WEST } else { EAST },
        if k & 2 == 0 { NORTH } else { SOUTH },
    ]
}

/// Where the flag of the edge vertex on `side` of square `(ix, iz)` lives: the owner's
/// position and the owned side.
#[inline(always)]
pub(super) fn owner_of(ix: u32, iz: u32, side: usize) -> (u32, u32, usize) {
    match side {
        NORTH if iz > 0 => (ix, iz - 1, SOUTH),
        WEST if ix > 0 => (ix - 1, iz, EAST),
        _ => (ix, iz, side),
    }
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
fn ref_count(word: u32, side: usize) -> u32 {
    (word >> (REF_SHIFT + 3 * side as u32)) & REF_MASK
}

/// The other square sharing the owned edge vertex `side` of `(ix, iz)`, and its side.
#[inline(always)]
fn across(
    tree: &HeightTree,
    level: usize,
    ix: u32,
    iz: u32,
    side: usize,
) -> Option<(u32, u32, usize)> {
    let shape = tree.levels[level];
    let (x, z, back) = match side {
        EAST => (ix + 1, iz, WEST),
        SOUTH => (ix, iz + 1, NORTH),
        _ => return None,
    };
    shape.present(x, z).then_some((x, z, back))
}

impl AdaptiveLod<'_> {
    /// Whether the edge vertex on `side` of `(ix, iz)` is enabled.
    #[inline(always)]
    pub(super) fn mid_enabled(&self, level: usize, ix: u32, iz: u32, side: usize) -> bool {
        let (ox, oz, owned) = owner_of(ix, iz, side);
        let id = self.tree.levels[level].id(ox, oz);
        self.state[id] & mid_bit(owned) != 0
    }

    /// Enables a square: its parent first, then the two parent edge vertices that are its
    /// corners (counted), which enable the neighbours sharing them.
    pub(super) fn enable_square(&mut self, level: usize, ix: u32, iz: u32) {
        let id = self.tree.levels[level].id(ix, iz);
        if self.state[id] & ENABLED != 0 {
            return;
        }
        if level > 0 {
            self.enable_square(level - 1, ix / 2, iz / 2);
        }
        self.state[id] |= ENABLED;
        self.deadline[id] = EXPIRED;
        self.enabled += 1;
        self.pending.push((level as u8, ix, iz));
        if level > 0 {
            let k = (ix & 1) | (iz & 1) << 1;
            for side in parent_sides(k) {
                let (ox, oz, owned) = owner_of(ix / 2, iz / 2, side);
                let owner = self.tree.levels[level - 1].id(ox, oz);
                self.state[owner] += 1 << (REF_SHIFT + 3 * owned as u32);
                self.enable_mid(level - 1, ox, oz, owned);
            }
        }
    }

    /// Enables an owned edge vertex and both squares that share it.
    fn enable_mid(&mut self, level: usize, ox: u32, oz: u32, owned: usize) {
        let id = self.tree.levels[level].id(ox, oz);
        if self.state[id] & mid_bit(owned) != 0 {
            return;
        }
        self.state[id] |= mid_bit(owned);
        self.enable_square(level, ox, oz);
        if let Some((x, z, _)) = across(&self.tree, level, ox, oz, owned) {
            self.enable_square(level, x, z);
        }
    }

    /// Makes `(level, ix, iz)` a candidate of this frame's disable pass.
    fn add_candidate(&mut self, level: usize, ix: u32, iz: u32) {
        let id = self.tree.levels[level].id(ix, iz);
        if self.state[id] & CANDIDATE == 0 {
            self.state[id] |= CANDIDATE;
            self.candidates[level].push((ix, iz));
        }
    }

    /// Evaluates an enabled square: its side of its edge vertices' tests and its children's
    /// box tests, enabling what passes. Returns its deadline (see `Motion`): until then
    /// no answer can change. What changed becomes a candidate of the disable pass.
    fn evaluate(&mut self, tester: &Tester<'_>, level: usize, ix: u32, iz: u32) -> Deadline {
        self.stats.nodes_visited += 1;
        let shape = self.tree.levels[level];
        let id = shape.id(ix, iz);
        let wanted = level == 0 || self.state[id] & WANTED != 0;
        let aabb = self.tree.aabb(level, ix, iz);
        // One frustum test for the square's own tests; its children need their own only
        // when it crosses the frustum.
        let (containment, mut slack) = if wanted {
            tester.classify_slack(&aabb)
        } else {
            (Containment::Outside, f32::INFINITY)
        };
        let mut side_bits = 0;
        if containment != Containment::Outside {
            for side in 0..4 {
                let error = self.tree.side_error(self.field, level, ix, iz, side);
                let (fails, side_slack) = tester.fails_slack(error, &aabb);
                slack = slack.min(side_slack);
                if fails {
                    side_bits |= side_want_bit(side);
                }
            }
        }
        let old = self.state[id];
        let changed = (old ^ side_bits) >> SIDE_WANT_SHIFT & 0b1111;
        self.state[id] = (old & !(0b1111 << SIDE_WANT_SHIFT)) | side_bits | EVALUATED;
        self.lists[level].push((ix, iz));
        for side in 0..4 {
            if changed & (1 << side) != 0 {
                let (ox, oz, _) = owner_of(ix, iz, side);
                self.add_candidate(level, ox, oz);
            }
        }
        if level < self.finest {
            let straddles = self.tree.straddles(level, ix, iz);
            let child = self.tree.levels[level + 1];
            for k in 0..4 {
                let (cx, cz) = (2 * ix + (k & 1), 2 * iz + (k >> 1));
                if !child.present(cx, cz) {
                    continue;
                }
                let cid = child.id(cx, cz);
                let want = straddles
                    || (containment != Containment::Outside && {
                        let error = self.tree.records[cid].subtree_error();
                        let child_box = self.tree.aabb(level + 1, cx, cz);
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
                        self.enable_square(level + 1, cx, cz);
                    }
                } else if was {
                    self.state[cid] &= !WANTED;
                    self.deadline[cid] = EXPIRED;
                    self.add_candidate(level + 1, cx, cz);
                }
            }
        }
        for side in 0..4 {
            if side_bits & side_want_bit(side) != 0 {
                let (ox, oz, owned) = owner_of(ix, iz, side);
                self.enable_mid(level, ox, oz, owned);
            }
        }
        self.motion.deadline(slack, tester.reach(&aabb))
    }

    /// Evaluates `(level, ix, iz)` and then its enabled descendants, skipping every subtree
    /// whose deadline has not passed; returns and stores the subtree's new deadline.
    fn visit(&mut self, tester: &Tester<'_>, level: usize, ix: u32, iz: u32) -> Deadline {
        let id = self.tree.levels[level].id(ix, iz);
        if !self.full && !self.motion.due(self.deadline[id]) {
            return self.deadline[id];
        }
        let mut deadline = self.evaluate(tester, level, ix, iz);
        if level < self.finest {
            let child = self.tree.levels[level + 1];
            for k in 0..4 {
                let (cx, cz) = (2 * ix + (k & 1), 2 * iz + (k >> 1));
                if child.present(cx, cz) && self.state[child.id(cx, cz)] & ENABLED != 0 {
                    deadline = earlier(deadline, self.visit(tester, level + 1, cx, cz));
                }
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
        self.visit(tester, 0, 0, 0);
        // Squares enabled by propagation outside the subtrees visited, in the order they
        // were enabled (a parent is always enabled before its children).
        let mut next = 0;
        while next < self.pending.len() {
            let (level, ix, iz) = self.pending[next];
            next += 1;
            let level = level as usize;
            let id = self.tree.levels[level].id(ix, iz);
            if self.state[id] & EVALUATED != 0 {
                continue;
            }
            let deadline = self.evaluate(tester, level, ix, iz);
            self.deadline[id] = deadline;
            // Its ancestors' subtree deadlines include it.
            let (mut level, mut ix, mut iz) = (level, ix, iz);
            while level > 0 {
                (level, ix, iz) = (level - 1, ix / 2, iz / 2);
                let parent = self.tree.levels[level].id(ix, iz);
                let merged = earlier(self.deadline[parent], deadline);
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
            let shape = self.tree.levels[level];
            let mut i = 0;
            while i < self.candidates[level].len() {
                let (ix, iz) = self.candidates[level][i];
                i += 1;
                let id = shape.id(ix, iz);
                for side in [EAST, SOUTH, NORTH, WEST] {
                    let owned = match side {
                        NORTH => iz == 0,
                        WEST => ix == 0,
                        _ => true,
                    };
                    let word = self.state[id];
                    if !owned || word & mid_bit(side) == 0 || ref_count(word, side) != 0 {
                        continue;
                    }
                    if word & side_want_bit(side) != 0 {
                        continue;
                    }
                    let across = across(&self.tree, level, ix, iz, side);
                    let wanted_across = across.is_some_and(|(x, z, back)| {
                        self.state[shape.id(x, z)] & side_want_bit(back) != 0
                    });
                    if !wanted_across {
                        self.state[id] &= !mid_bit(side);
                        if let Some((x, z, _)) = across {
                            self.add_candidate(level, x, z);
                        }
                    }
                }
            }
            if level == 0 {
                break;
            }
            for i in 0..self.candidates[level].len() {
                let (ix, iz) = self.candidates[level][i];
                let id = shape.id(ix, iz);
                let word = self.state[id];
                if word & (ENABLED | WANTED) != ENABLED {
                    continue;
                }
                if (0..4).any(|side| self.mid_enabled(level, ix, iz, side)) {
                    continue;
                }
                if level < self.finest {
                    let child = self.tree.levels[level + 1];
                    let any_child = (0..4).any(|k| {
                        let (cx, cz) = (2 * ix + (k & 1), 2 * iz + (k >> 1));
                        child.present(cx, cz) && self.state[child.id(cx, cz)] & ENABLED != 0
                    });
                    if any_child {
                        continue;
                    }
                }
                self.state[id] &= !ENABLED;
                self.enabled -= 1;
                self.add_candidate(level - 1, ix / 2, iz / 2);
                let k = (ix & 1) | (iz & 1) << 1;
                for side in parent_sides(k) {
                    let (ox, oz, owned) = owner_of(ix / 2, iz / 2, side);
                    let owner = self.tree.levels[level - 1].id(ox, oz);
                    self.state[owner] -= 1 << (REF_SHIFT + 3 * owned as u32);
                    self.add_candidate(level - 1, ox, oz);
                }
            }
        }
        for level in 0..=self.finest {
            let shape = self.tree.levels[level];
            for &(ix, iz) in &self.lists[level] {
                self.state[shape.id(ix, iz)] &= !EVALUATED;
            }
            for &(ix, iz) in &self.candidates[level] {
                self.state[shape.id(ix, iz)] &= !CANDIDATE;
            }
            self.candidates[level].clear();
        }
    }
}
