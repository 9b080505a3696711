//! The sparse square tree of algorithm A (A5): squares in a fixed-array pool, each holding
//! its own heights, built from a heightfield keeping only the squares whose subtree has an
//! error above a build tolerance.
//!
//! # The pool
//!
//! Squares live in one array, addressed by index (no `Box`, no per-square allocation): the
//! root is slot 0, and the four children of a square are a *block* of four consecutive
//! slots (quadrant `k`: bit 0 east half, bit 1 south half). Blocks are laid out level by
//! level in the order of their parents, so the children of the `j`-th square that has
//! children are block `j + 1`: a rank over one bit per square (has children) finds them,
//! and a block stores its parent's index (with pages, the same within each part, below). A child slot that does not intersect the data
//! (the padding of algorithm Q) holds [`SquareRecord::OUTSIDE`]. Squares carry no position:
//! every walk knows `(level, ix, iz)` from the way it came ([`Sq`]), and neighbours are
//! found through the parents (the article's `GetNeighbor`), or carried down the recursion.
//!
//! # Pages (A8)
//!
//! With a page size ([`AdaptiveOptions::page_cells`](super::AdaptiveOptions)), the squares
//! of that size that have children are *page roots*, and the pool is laid out in two
//! parts: the *top* (the levels down to the page roots', breadth first, each level from a
//! fresh 64-slot rank word), then one *page* per root: the root's subtree, breadth first,
//! from a fresh rank word. A rank word so holds slots of one top level or of one page, and
//! stores where the children of its first square with children start (`base`), the
//! others following four by four; a word of page roots points into the page table
//! instead, one entry per root. So a page is one run of slots that refers to nothing
//! outside it but its root: it can be taken out ([`SquareTree::page_out`], bases and
//! parents made relative to its start) and put in anywhere by rewriting its words' bases,
//! its blocks' parents and its table entry ([`SquareTree::page_in`]), which is how
//! `paging` holds pages in frames and `page_file` keeps them on disk, and a root whose entry is [`NOT_RESIDENT`] has no
//! children (docs/ADAPTIVE_PAGING.md). Aligning costs under 64 slots a page and a top
//! level.
//!
//! # What the tree keeps (the build)
//!
//! A square has children iff
//!
//! 1. its subtree error (the pyramid's monotone fan error) exceeds the build tolerance
//!    `T`, or it reaches beyond the data (it draws nothing itself); or
//! 2. a square at the next level has children and is its neighbour's child (*balance*: a
//!    square with children has all four same-level neighbours, so every edge vertex of
//!    a square with children can be drawn: its children need them as corners); or
//! 3. a leaf next to it would otherwise miss an edge vertex that matters (below).
//!
//! A square without children draws its interior as its fan. An edge vertex whose
//! neighbouring square does not exist (that square's parent is a leaf, so the vertex sits
//! inside a coarser leaf's edge) can never be drawn without a T-junction: it is never
//! enabled, and its interpolation error is added to the square's fan error instead. By
//! rule 3 that sum stays within `T` for every leaf (else the coarser leaf gets children).
//! With `T = 0` nothing is added: such a vertex lies on a fan edge of an exact leaf.
//!
//! # Heights and errors
//!
//! Each square stores the heights of its centre and its east and south edge vertices,
//! exactly as drawn: [`HeightCodes`] for 16-bit sources, `f32` otherwise
//! ([`VertexHeights`]); the grid's north and west border vertices are kept per level in
//! small sorted tables, and the root's corners once. Errors are measured against the source heights (never against a
//! coarser stored surface), so every bound the tests use is a bound on the true error:
//! the fan error is the pyramid's error plus the quantum plus the left-out vertices' errors.

use super::detail::DetailError;
use super::records::{
    CENTRE, EAST, HeightCodes, NORTH, SOUTH, SquareRecord, WEST, error_code, error_value, round_up,
};
use crate::camera::Aabb;
use crate::heightfield::{Heightfield, Samples, WorldMapping};
use crate::pyramid::Pyramid;
use crate::tiles::{TileError, TiledPyramid};
use glam::Vec3;
use rayon::prelude::*;

mod build;
mod saved;
pub(super) use build::{BuiltPage, TreeBuilder, build, build_from_field};

/// The root's slot.
pub(super) const ROOT: u32 = 0;
/// A neighbour beyond the grid or the data: a vertex there is drawn by one square alone.
pub(super) const OUTSIDE: u32 = u32::MAX;
/// A neighbour that is not stored (its parent is a leaf): the vertex between cannot be
/// drawn.
pub(super) const ABSENT: u32 = u32::MAX - 1;

/// The tree's large allocations (sized from the input: with a local detail, from the
/// detail's footprint on the subdivided grid) are reserved before they are filled, so a
/// tree that does not fit in memory is refused with [`DetailError::TooLarge`] instead of
/// aborting the process: at most `limit` bytes per allocation (tests lower it), and what
/// the allocator grants.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    pub limit: u64,
}

impl Budget {
    pub const UNLIMITED: Budget = Budget { limit: u64::MAX };

    /// Makes room in `v` for `additional` more items.
    pub fn reserve<T>(&self, v: &mut Vec<T>, additional: usize) -> Result<(), DetailError> {
        let bytes = (v.len() as u64)
            .checked_add(additional as u64)
            .and_then(|n| n.checked_mul(size_of::<T>() as u64))
            .unwrap_or(u64::MAX);
        if bytes > self.limit {
            return Err(DetailError::TooLarge { bytes });
        }
        v.try_reserve(additional)
            .map_err(|_| DetailError::TooLarge { bytes })
    }

    /// An empty vector with room for `n` items.
    pub fn vec<T>(&self, n: usize) -> Result<Vec<T>, DetailError> {
        let mut v = Vec::new();
        self.reserve(&mut v, n)?;
        Ok(v)
    }
}

/// The position next to `(ix, iz)` on `side`, in the same level's grid (wrapping past
/// its north and west border, where no square is).
#[inline(always)]
pub(super) fn position_beside(ix: u32, iz: u32, side: usize) -> (u32, u32) {
    match side {
        EAST => (ix + 1, iz),
        SOUTH => (ix, iz + 1),
        NORTH => (ix, iz.wrapping_sub(1)),
        _ => (ix.wrapping_sub(1), iz),
    }
}

/// A square with its position: pool index, level and index in the level's grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sq {
    pub id: u32,
    pub level: u32,
    pub ix: u32,
    pub iz: u32,
}

impl Sq {
    pub const ROOT: Sq = Sq {
        id: ROOT,
        level: 0,
        ix: 0,
        iz: 0,
    };

    /// Which quadrant of its parent the square is.
    #[inline(always)]
    pub fn quadrant(&self) -> u32 {
        (self.ix & 1) | (self.iz & 1) << 1
    }

    /// Child `k` of this square, whose children start at slot `first`.
    #[inline(always)]
    pub fn child(&self, first: u32, k: u32) -> Sq {
        Sq {
            id: first + k,
            level: self.level + 1,
            ix: 2 * self.ix + (k & 1),
            iz: 2 * self.iz + (k >> 1),
        }
    }

    /// The square with pool index `id` at the position next to this one on `side`.
    #[inline(always)]
    pub fn beside(&self, id: u32, side: usize) -> Sq {
        let (ix, iz) = position_beside(self.ix, self.iz, side);
        Sq {
            id,
            level: self.level,
            ix,
            iz,
        }
    }

    /// The parent, with pool index `id`.
    #[inline(always)]
    pub fn parent(&self, id: u32) -> Sq {
        Sq {
            id,
            level: self.level - 1,
            ix: self.ix / 2,
            iz: self.iz / 2,
        }
    }
}

/// One level of the quadtree: square size and the squares that intersect the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LevelShape {
    /// Cells per square side.
    pub size: u32,
    pub nx: u32,
    pub nz: u32,
}

/// Whether the square at `(ix, iz)` of a level reaches beyond a drawn extent of
/// `extent` cells.
#[inline(always)]
pub(super) fn reaches_beyond(shape: LevelShape, extent: (u32, u32), ix: u32, iz: u32) -> bool {
    (ix + 1) * shape.size > extent.0 || (iz + 1) * shape.size > extent.1
}

impl LevelShape {
    #[inline(always)]
    pub fn present(&self, ix: u32, iz: u32) -> bool {
        ix < self.nx && iz < self.nz
    }
}

/// One bit per slot (the square has children) and where the children of the word's
/// squares are: the children of its `k`-th square with children start at `base + 4k`,
/// or, in a word of page roots (`base ≥ PAGE_ROOTS`), at the page table's entry
/// `base − PAGE_ROOTS + k`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RankWord {
    pub bits: u64,
    pub base: u32,
}

/// Slots per rank word: where the top's levels and the pages start.
pub(super) const WORD: usize = 64;

/// Marks the base of a word of page roots; pools are smaller than this many slots.
const PAGE_ROOTS: u32 = 1 << 31;

/// That the blocks of a run of slots (a page, or the top) form a tree, so that no walk of
/// it can loop, go deeper than the levels or leave it: the first block's parent lies
/// outside the run ([`OUTSIDE`]) and it lies `first_depth` levels below the run's root (a
/// page's first block holds its root's children: 1; the top's holds the root: 0); every
/// other block's parent comes before it, and no block lies deeper than `deepest`; every
/// rank word's children lie in the run and point back to their squares or, in a word of
/// page roots (the top's), are the next entries of a page table of `pages`, all used.
pub(super) fn check_blocks(
    rank: &[RankWord],
    parents: &[u32],
    first_depth: u32,
    deepest: u32,
    pages: usize,
) -> Result<(), &'static str> {
    let slots = parents.len() * 4;
    // Levels below the run's root of each block (0: unused), from its parent's.
    let mut depth = vec![0u32; parents.len()];
    for (b, &parent) in parents.iter().enumerate() {
        depth[b] = match parent {
            OUTSIDE if b == 0 => first_depth,
            OUTSIDE => 0,
            _ if b == 0 => return Err("the first block's parent is not outside the subtree"),
            p if (p as usize) < 4 * b => depth[p as usize / 4] + 1,
            _ => return Err("a block's parent does not come before it"),
        };
        if depth[b] > deepest {
            return Err("a block lies deeper than the tree's levels");
        }
    }
    let mut next_page = 0usize;
    for (w, word) in rank.iter().enumerate() {
        if word.bits == 0 {
            continue;
        }
        let children = word.bits.count_ones() as usize;
        if word.base >= PAGE_ROOTS {
            if (word.base - PAGE_ROOTS) as usize != next_page || next_page + children > pages {
                return Err("the page roots are not numbered in order");
            }
            next_page += children;
            continue;
        }
        let base = word.base as usize;
        if !base.is_multiple_of(4) || base + 4 * children > slots {
            return Err("a rank word's children lie outside the subtree");
        }
        let mut bits = word.bits;
        for &parent in &parents[base / 4..base / 4 + children] {
            let square = w * WORD + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if parent as usize != square {
                return Err("a rank word and the blocks' parents disagree");
            }
        }
    }
    if next_page != pages {
        return Err("the page table has pages no root leads to");
    }
    Ok(())
}

/// What lies below a square of the top ([`SquareTree::walk_top`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Below {
    Nothing,
    /// Children in the top.
    Children,
    /// A page.
    Page,
}

/// The first slot of a page that is not in the pool.
pub(super) const NOT_RESIDENT: u32 = u32::MAX;

/// Pools hold fewer slots than this.
pub(super) const MAX_SLOTS: usize = PAGE_ROOTS as usize;

/// The page table's entry for page root `id` in its word.
#[inline(always)]
fn page_index(word: RankWord, id: u32) -> usize {
    (word.base - PAGE_ROOTS + (word.bits & ((1u64 << (id & 63)) - 1)).count_ones()) as usize
}

/// Where a page lies in the pool: its first slot (on a rank word) and its length (a
/// multiple of 64 slots).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Page {
    pub first: u32,
    pub slots: u32,
}

/// A page out of the pool ([`SquareTree::page_out`]), as if it began at slot 0: the
/// bases of its rank words and the parents of its blocks count from its first slot; its
/// first block's parent (the root, in the top) and the padding blocks' are [`OUTSIDE`],
/// and words without children have base 0. What a page file holds (`page_file`).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PageData {
    pub records: Vec<SquareRecord>,
    pub heights: VertexHeights,
    pub rank: Vec<RankWord>,
    pub parents: Vec<u32>,
}

impl PageData {
    pub fn view(&self) -> PageView<'_> {
        PageView {
            records: &self.records,
            heights: match &self.heights {
                VertexHeights::Codes(v) => HeightsView::Codes(v),
                VertexHeights::Floats(v) => HeightsView::Floats(v),
            },
            rank: &self.rank,
            parents: &self.parents,
            from: 0,
        }
    }
}

/// A page's slots where they lie: in a pool ([`SquareTree::page`], counting from its
/// first slot) or detached ([`PageData::view`], counting from 0). What
/// [`SquareTree::page_in`] copies from, so a page kept in memory is copied once.
#[derive(Clone, Copy, Debug)]
pub(super) struct PageView<'a> {
    records: &'a [SquareRecord],
    heights: HeightsView<'a>,
    rank: &'a [RankWord],
    parents: &'a [u32],
    /// The slot the rank words' bases and the blocks' parents count from.
    from: u32,
}

#[derive(Clone, Copy, Debug)]
enum HeightsView<'a> {
    Codes(&'a [[u16; 3]]),
    Floats(&'a [[f32; 3]]),
}

/// An edge vertex on the grid's north or west border (owned by the square it bounds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct BorderVertex {
    /// Drawn world height.
    pub height: f32,
    /// Interpolation error code, as [`SquareRecord::east_error`].
    error: u16,
}

impl BorderVertex {
    pub fn error(&self) -> f32 {
        error_value(self.error)
    }
}

/// The heights a square owns (east and south edge vertices, centre: indexed by [`EAST`],
/// [`SOUTH`], [`CENTRE`]), per pool slot: exact [`HeightCodes`] where they exist (16-bit
/// sources), else `f32` world heights. Either way the drawn height is bit for bit the
/// source's (`crate::lod::sample_height`).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum VertexHeights {
    Codes(Vec<[u16; 3]>),
    Floats(Vec<[f32; 3]>),
}

/// The sparse tree: a pool of squares and what is needed to walk it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct SquareTree {
    pub records: Vec<SquareRecord>,
    vertex_heights: VertexHeights,
    /// Per block of four slots, the parent's slot (the root block: [`OUTSIDE`]).
    parents: Vec<u32>,
    rank: Vec<RankWord>,
    /// Per page root, in slot order, where its page lies (see "Pages").
    pages: Vec<Page>,
    pub levels: Vec<LevelShape>,
    /// Codes of the vertex heights (when [`VertexHeights::Codes`]).
    pub heights: HeightCodes,
    /// Codes of the box bounds: 65,536 steps over the world range, rounded outwards.
    boxes: HeightCodes,
    /// Per level, the north border's vertices by `ix` and the west border's by `iz`.
    north: Vec<Vec<(u32, BorderVertex)>>,
    west: Vec<Vec<(u32, BorderVertex)>>,
    /// Drawn heights of the root's corners (north-west, north-east, south-west, south-east).
    pub root_corners: [f32; 4],
    pub cell_size: f32,
    /// Drawn extent in columns and rows (as algorithm Q: the leaves' rectangle).
    pub extent: (u32, u32),
    /// Slots that hold a square.
    squares: usize,
    /// The largest fan error of a square without children (0 for a lossless tree): no
    /// selection can be closer to the source than this there.
    leaf_error: f32,
}

/// The side error: a square's fan error plus the interpolation error of the edge vertex
/// (what drawing the square without that vertex can add, see the module docs of
/// `adaptive`).
#[inline(always)]
pub(super) fn side_error(fan: f32, vertex: f32) -> f32 {
    if vertex == 0.0 {
        fan
    } else {
        // The f32 sum may round down by half an ulp.
        (fan + vertex) * (1.0 + f32::EPSILON)
    }
}

impl SquareTree {
    /// Drawn world height of a vertex that square `id` owns ([`EAST`], [`SOUTH`] or
    /// [`CENTRE`]).
    #[inline(always)]
    pub fn vertex_height(&self, id: u32, slot: usize) -> f32 {
        match &self.vertex_heights {
            VertexHeights::Codes(v) => self.heights.world(v[id as usize][slot]),
            VertexHeights::Floats(v) => v[id as usize][slot],
        }
    }

    /// Whether the square in slot `id` has children in the pool (a page root whose page
    /// is not resident has none).
    #[inline(always)]
    pub fn has_children(&self, id: u32) -> bool {
        let word = self.rank[(id >> 6) as usize];
        (word.bits >> (id & 63)) & 1 != 0
            && (word.base < PAGE_ROOTS || self.pages[page_index(word, id)].first != NOT_RESIDENT)
    }

    /// The page of a page root whose page is not resident.
    #[inline]
    pub fn missing_page(&self, id: u32) -> Option<usize> {
        let word = self.rank[(id >> 6) as usize];
        let root = (word.bits >> (id & 63)) & 1 != 0 && word.base >= PAGE_ROOTS;
        let page = root.then(|| page_index(word, id));
        page.filter(|&j| self.pages[j].first == NOT_RESIDENT)
    }

    /// The first slot of the children of `id` (which must have children).
    #[inline(always)]
    pub fn first_child(&self, id: u32) -> u32 {
        let word = self.rank[(id >> 6) as usize];
        if word.base < PAGE_ROOTS {
            word.base + 4 * (word.bits & ((1u64 << (id & 63)) - 1)).count_ones()
        } else {
            self.pages[page_index(word, id)].first
        }
    }

    /// The parent slot of a square other than the root.
    #[inline(always)]
    pub fn parent(&self, id: u32) -> u32 {
        self.parents[(id >> 2) as usize]
    }

    /// A slot, or [`OUTSIDE`] when it holds no square.
    #[inline(always)]
    fn slot(&self, id: u32) -> u32 {
        if self.records[id as usize].is_outside() {
            OUTSIDE
        } else {
            id
        }
    }

    /// The same-level neighbour of `id` on `side`: a slot, [`OUTSIDE`] or [`ABSENT`]. Walks
    /// up to the common ancestor and down its mirror image (cost: the levels climbed).
    pub fn neighbour(&self, id: u32, side: usize) -> u32 {
        let (flip, crosses) = match side {
            EAST => (1, 1),
            WEST => (1, 0),
            SOUTH => (2, 2),
            _ => (2, 0),
        };
        let mut path = [0u8; 32];
        let mut depth = 0;
        let mut cur = id;
        loop {
            if cur == ROOT {
                return OUTSIDE;
            }
            let k = cur & 3;
            if k & flip != crosses {
                break;
            }
            path[depth] = k as u8;
            depth += 1;
            cur = self.parent(cur);
        }
        let mut n = self.slot(cur ^ flip);
        while depth > 0 && n < ABSENT {
            depth -= 1;
            if !self.has_children(n) {
                return ABSENT;
            }
            n = self.slot(self.first_child(n) + (u32::from(path[depth]) ^ flip));
        }
        n
    }

    /// The neighbours (east, south, north, west) of child `k` of a square whose children
    /// start at `first` and whose own neighbours are `around`.
    #[inline(always)]
    pub fn child_neighbours(&self, first: u32, k: u32, around: &[u32; 4]) -> [u32; 4] {
        let sibling = |j: u32| self.slot(first + j);
        let across = |side: usize, j: u32| {
            let n = around[side];
            if n >= ABSENT {
                n
            } else if !self.has_children(n) {
                ABSENT
            } else {
                self.slot(self.first_child(n) + j)
            }
        };
        [
            if k & 1 == 0 {
                sibling(k + 1)
            } else {
                across(EAST, k - 1)
            },
            if k & 2 == 0 {
                sibling(k + 2)
            } else {
                across(SOUTH, k - 2)
            },
            if k & 2 != 0 {
                sibling(k - 2)
            } else {
                across(NORTH, k + 2)
            },
            if k & 1 != 0 {
                sibling(k - 1)
            } else {
                across(WEST, k + 1)
            },
        ]
    }

    /// The four neighbours of a square, found through the parents.
    pub fn neighbours(&self, id: u32) -> [u32; 4] {
        [EAST, SOUTH, NORTH, WEST].map(|side| self.neighbour(id, side))
    }

    /// The border vertex on `side` (north or west) of a square on that border.
    pub fn border_vertex(&self, sq: Sq, side: usize) -> BorderVertex {
        let (table, key) = if side == NORTH {
            (&self.north[sq.level as usize], sq.ix)
        } else {
            (&self.west[sq.level as usize], sq.iz)
        };
        match table.binary_search_by_key(&key, |&(k, _)| k) {
            Ok(i) => table[i].1,
            // Every stored border square has its vertex; unreachable for valid positions.
            Err(_) => BorderVertex {
                height: 0.0,
                error: 0,
            },
        }
    }

    /// World box of a square.
    #[inline(always)]
    pub fn aabb(&self, sq: Sq) -> Aabb {
        let codes = self.records[sq.id as usize].box_codes();
        self.aabb_at(sq.level, sq.ix, sq.iz, codes)
    }

    /// World box of the square at `(ix, iz)` of `level` with vertical box codes `codes`.
    #[inline(always)]
    pub fn aabb_at(&self, level: u32, ix: u32, iz: u32, codes: (u16, u16)) -> Aabb {
        let size = self.levels[level as usize].size;
        let (x0, z0) = ((ix * size) as f32, (iz * size) as f32);
        let s = size as f32;
        Aabb {
            min: Vec3::new(
                x0 * self.cell_size,
                self.boxes.world(codes.0),
                z0 * self.cell_size,
            ),
            max: Vec3::new(
                (x0 + s) * self.cell_size,
                self.boxes.world(codes.1),
                (z0 + s) * self.cell_size,
            ),
        }
    }

    /// Whether a square reaches beyond the drawn extent (it is never drawn itself: all its
    /// stored children are).
    #[inline(always)]
    pub fn straddles(&self, sq: Sq) -> bool {
        reaches_beyond(self.levels[sq.level as usize], self.extent, sq.ix, sq.iz)
    }

    /// The largest fan error of a leaf (see the field).
    pub fn leaf_error(&self) -> f32 {
        self.leaf_error
    }

    /// Number of squares stored (slots holding one).
    pub fn squares(&self) -> usize {
        self.squares
    }

    /// Per page root, in slot order, where its page lies.
    pub fn pages(&self) -> &[Page] {
        &self.pages
    }

    /// The page table, to forge kept files in tests.
    #[cfg(test)]
    pub(super) fn pages_mut(&mut self) -> &mut [Page] {
        &mut self.pages
    }

    /// Appends `slots` empty slots (a multiple of 64) to the pool, for pages to move to.
    pub fn grow(&mut self, slots: usize) {
        debug_assert!(slots.is_multiple_of(WORD) && self.slots().is_multiple_of(WORD));
        let n = self.slots() + slots;
        self.records.resize(n, SquareRecord::OUTSIDE);
        match &mut self.vertex_heights {
            VertexHeights::Codes(v) => v.resize(n, [0; 3]),
            VertexHeights::Floats(v) => v.resize(n, [0.0; 3]),
        }
        self.parents.resize(n / 4, OUTSIDE);
        self.rank.resize(n / WORD, RankWord::default());
    }

    /// Overwrites a run (records, heights, rank words, blocks' parents) with values
    /// that would draw and lead astray, for tests that show nothing reads it.
    #[cfg(test)]
    pub fn scribble(&mut self, from: u32, len: u32) {
        let (from, len) = (from as usize, len as usize);
        let junk = self.records[ROOT as usize];
        self.records[from..from + len].fill(junk);
        match &mut self.vertex_heights {
            VertexHeights::Codes(v) => v[from..from + len].fill([u16::MAX; 3]),
            VertexHeights::Floats(v) => v[from..from + len].fill([1e6; 3]),
        }
        for word in &mut self.rank[from / WORD..(from + len) / WORD] {
            *word = RankWord {
                bits: u64::MAX,
                base: 4,
            };
        }
        self.parents[from / 4..(from + len) / 4].fill(0);
    }

    /// Whether vertex heights are `f32` (else 16-bit codes).
    pub fn float_heights(&self) -> bool {
        matches!(self.vertex_heights, VertexHeights::Floats(_))
    }

    /// Page `j` (which must be in the pool) where it lies.
    pub fn page(&self, j: usize) -> PageView<'_> {
        let Page { first, slots } = self.pages[j];
        let run = first as usize..(first + slots) as usize;
        PageView {
            records: &self.records[run.clone()],
            heights: match &self.vertex_heights {
                VertexHeights::Codes(v) => HeightsView::Codes(&v[run.clone()]),
                VertexHeights::Floats(v) => HeightsView::Floats(&v[run.clone()]),
            },
            rank: &self.rank[run.start / WORD..run.end / WORD],
            parents: &self.parents[run.start / 4..run.end / 4],
            from: first,
        }
    }

    /// Page `j` (which must be in the pool) detached: see [`PageData`].
    pub fn page_out(&self, j: usize) -> PageData {
        let page = self.page(j);
        let from = page.from;
        PageData {
            records: page.records.to_vec(),
            heights: match page.heights {
                HeightsView::Codes(v) => VertexHeights::Codes(v.to_vec()),
                HeightsView::Floats(v) => VertexHeights::Floats(v.to_vec()),
            },
            rank: page
                .rank
                .iter()
                .map(|word| RankWord {
                    bits: word.bits,
                    base: if word.bits == 0 { 0 } else { word.base - from },
                })
                .collect(),
            parents: page
                .parents
                .iter()
                .enumerate()
                .map(|(b, &parent)| {
                    if b == 0 || parent == OUTSIDE {
                        OUTSIDE
                    } else {
                        parent - from
                    }
                })
                .collect(),
        }
    }

    /// Puts page `j` of root slot `root` (where it lies in a tree with the same top, or
    /// detached) in the run of slots starting at `to` (on a rank word, inside the pool):
    /// its words' bases and its blocks' parents shifted there, its first block's parent
    /// the root, and its table entry pointing there. Whatever lay in that run is
    /// overwritten, and the page's old run, if any, is left as it was, unreachable.
    pub fn page_in(&mut self, j: usize, root: u32, page: PageView<'_>, to: u32) {
        let (len, at) = (page.records.len(), to as usize);
        debug_assert!(len == self.pages[j].slots as usize);
        debug_assert!(at.is_multiple_of(WORD) && at + len <= self.slots());
        self.records[at..at + len].copy_from_slice(page.records);
        match (&mut self.vertex_heights, page.heights) {
            (VertexHeights::Codes(v), HeightsView::Codes(p)) => {
                v[at..at + len].copy_from_slice(p);
            }
            (VertexHeights::Floats(v), HeightsView::Floats(p)) => {
                v[at..at + len].copy_from_slice(p);
            }
            _ => unreachable!("a page of another tree"),
        }
        let shift = |value: u32| value - page.from + to;
        for (slot, word) in self.rank[at / WORD..].iter_mut().zip(page.rank) {
            *slot = RankWord {
                bits: word.bits,
                base: if word.bits == 0 { 0 } else { shift(word.base) },
            };
        }
        for (b, (slot, &parent)) in self.parents[at / 4..]
            .iter_mut()
            .zip(page.parents)
            .enumerate()
        {
            *slot = match parent {
                _ if b == 0 => root,
                OUTSIDE => OUTSIDE,
                parent => shift(parent),
            };
        }
        self.pages[j].first = to;
    }

    /// Takes page `j` out of the pool (its root then has no children); returns the run
    /// it lay in.
    pub fn drop_page(&mut self, j: usize) -> Page {
        let page = self.pages[j];
        self.pages[j].first = NOT_RESIDENT;
        page
    }

    /// The top alone (every page dropped, the pool cut after the top) with `frames` runs
    /// of `frame_slots` empty slots after it (a multiple of 64), the first of them where
    /// the first page began. The tree must have pages, as laid out.
    pub fn top_with_frames(&self, frames: usize, frame_slots: usize) -> SquareTree {
        let top = self.pages[0].first as usize;
        let mut tree = SquareTree {
            records: self.records[..top].to_vec(),
            vertex_heights: match &self.vertex_heights {
                VertexHeights::Codes(v) => VertexHeights::Codes(v[..top].to_vec()),
                VertexHeights::Floats(v) => VertexHeights::Floats(v[..top].to_vec()),
            },
            parents: self.parents[..top / 4].to_vec(),
            rank: self.rank[..top.div_ceil(WORD)].to_vec(),
            pages: self
                .pages
                .iter()
                .map(|p| Page {
                    first: NOT_RESIDENT,
                    slots: p.slots,
                })
                .collect(),
            levels: self.levels.clone(),
            heights: self.heights,
            boxes: self.boxes,
            north: self.north.clone(),
            west: self.west.clone(),
            root_corners: self.root_corners,
            cell_size: self.cell_size,
            extent: self.extent,
            squares: self.squares,
            leaf_error: self.leaf_error,
        };
        tree.grow(frames * frame_slots);
        tree
    }

    /// The page roots, in the page table's order.
    pub fn page_roots(&self) -> Vec<Sq> {
        let Ok(roots) = self.walk_top(|_, _| Ok::<(), std::convert::Infallible>(()));
        roots
    }

    /// Walks the top from the root down to the page roots, calling `visit` with every
    /// square reached and what is below it; returns the page roots in the page table's
    /// order, or what `visit` refused.
    pub fn walk_top<E>(
        &self,
        mut visit: impl FnMut(Sq, Below) -> Result<(), E>,
    ) -> Result<Vec<Sq>, E> {
        let mut roots = Vec::with_capacity(self.pages.len());
        let mut walk = vec![Sq::ROOT];
        while let Some(sq) = walk.pop() {
            let word = self.rank[(sq.id >> 6) as usize];
            if (word.bits >> (sq.id & 63)) & 1 == 0 {
                visit(sq, Below::Nothing)?;
            } else if word.base >= PAGE_ROOTS {
                visit(sq, Below::Page)?;
                roots.push((page_index(word, sq.id), sq));
            } else {
                visit(sq, Below::Children)?;
                let first = self.first_child(sq.id);
                for k in 0..4 {
                    if !self.records[(first + k) as usize].is_outside() {
                        walk.push(sq.child(first, k));
                    }
                }
            }
        }
        roots.sort_by_key(|&(j, _)| j);
        Ok(roots.into_iter().map(|(_, sq)| sq).collect())
    }

    /// Number of pool slots (squares plus the slots of children beyond the data).
    pub fn slots(&self) -> usize {
        self.records.len()
    }

    /// Bytes of the static tree: records, vertex heights, block parents, rank words,
    /// border tables.
    pub fn bytes(&self) -> usize {
        let heights = match &self.vertex_heights {
            VertexHeights::Codes(v) => v.len() * size_of::<[u16; 3]>(),
            VertexHeights::Floats(v) => v.len() * size_of::<[f32; 3]>(),
        };
        let border: usize = self
            .north
            .iter()
            .chain(&self.west)
            .map(|t| t.len() * size_of::<(u32, BorderVertex)>())
            .sum();
        self.records.len() * size_of::<SquareRecord>()
            + heights
            + self.parents.len() * size_of::<u32>()
            + self.rank.len() * size_of::<RankWord>()
            + self.pages.len() * size_of::<Page>()
            + border
    }
}

/// Where the tree's heights and bounds come from.
pub(super) trait Source: Sync {
    /// The levels: level 0 the root, the last one squares of 2 cells.
    fn shapes(&self) -> Vec<LevelShape>;
    /// World height bounds of the square's samples and an upper bound of `|h − F|` over
    /// them and over its descendants' samples against their fans (world units, `F` the
    /// fan through the true heights).
    fn bounds(&self, level: usize, ix: u32, iz: u32) -> (f64, f64, f32);
    /// Raw height at a grid position (padding: the border repeated).
    fn raw(&self, col: u32, row: u32) -> f64;
    /// The codes vertex heights are stored in when they are exact (else as `f32`).
    fn codes(&self) -> HeightCodes;
    /// The codes of box bounds (quantised, rounded outwards).
    fn box_codes(&self) -> HeightCodes;
    /// The drawn world height of a raw height (`raw · scale + offset` in `f64`, rounded
    /// once: [`crate::lod::sample_height`]).
    fn drawn(&self, raw: f64) -> f32;
    /// `|raw difference|` as a world error, rounded up (with the source's rounding slack).
    fn world_error(&self, raw: f64) -> f32;
    /// Largest world height magnitude (for the `f32` rounding of drawn heights).
    fn largest_height(&self) -> f64;
    fn cell_size(&self) -> f32;
    /// A level from which down each square's bounds and samples are local to one piece
    /// of the source (an imported terrain's tile), which the build then visits piece by
    /// piece rather than level by level; `None` where any order costs the same.
    fn local_level(&self) -> Option<usize> {
        None
    }
}

/// What turns a terrain's raw samples into the tree's numbers: their range, the mapping
/// and whether they are integers. Shared by the sources over a heightfield and over an
/// imported directory's tiles, so the two build the same tree.
#[derive(Clone, Copy, Debug)]
struct RawScale {
    range: (f32, f32),
    mapping: WorldMapping,
    integer: bool,
}

impl RawScale {
    fn codes(&self, step: Option<f64>) -> HeightCodes {
        let (lo, hi) = self.range;
        HeightCodes::new(
            f64::from(lo),
            f64::from(hi),
            f64::from(self.mapping.height_scale),
            f64::from(self.mapping.height_offset),
            step,
        )
    }

    fn drawn(&self, raw: f64) -> f32 {
        let mapping = self.mapping;
        (raw * f64::from(mapping.height_scale) + f64::from(mapping.height_offset)) as f32
    }

    fn world_error(&self, raw: f64) -> f32 {
        if raw == 0.0 {
            return 0.0;
        }
        let (lo, hi) = self.range;
        let slack = if self.integer {
            0.0
        } else {
            f64::from(lo.abs().max(hi.abs())) * 2f64.powi(-45)
        };
        let scale = f64::from(self.mapping.height_scale.abs());
        round_up((raw + slack) * scale * (1.0 + 2f64.powi(-16)))
    }

    fn largest_height(&self) -> f64 {
        let (lo, hi) = self.range;
        let (a, b) = (self.mapping.world_y(lo), self.mapping.world_y(hi));
        f64::from(a.abs().max(b.abs()))
    }
}

/// The levels of a pyramid, as the tree's level shapes.
fn level_shapes(levels: usize, shape: impl Fn(usize) -> (u32, (u32, u32))) -> Vec<LevelShape> {
    (0..levels)
        .map(|level| {
            let (size, (nx, nz)) = shape(level);
            LevelShape { size, nx, nz }
        })
        .collect()
}

/// A heightfield and its pyramid.
pub(super) struct FieldSource<'a> {
    pub field: &'a Heightfield,
    pub pyramid: &'a Pyramid,
    /// The field's raw range (scanned once: `raw_range` visits every sample) and mapping.
    scale: RawScale,
}

impl<'a> FieldSource<'a> {
    pub fn new(field: &'a Heightfield, pyramid: &'a Pyramid) -> Self {
        FieldSource {
            field,
            pyramid,
            scale: RawScale {
                range: field.raw_range(),
                mapping: field.mapping(),
                integer: !matches!(field.samples(), Samples::F32(_)),
            },
        }
    }

    /// Smallest and largest raw value.
    pub fn raw_range(&self) -> (f32, f32) {
        self.scale.range
    }
}

impl Source for FieldSource<'_> {
    fn shapes(&self) -> Vec<LevelShape> {
        let pyramid = self.pyramid;
        level_shapes(pyramid.levels(), |l| {
            (pyramid.node_size(l), pyramid.nodes(l))
        })
    }

    fn bounds(&self, level: usize, ix: u32, iz: u32) -> (f64, f64, f32) {
        let b = self.pyramid.node(level, ix, iz);
        (f64::from(b.min_y), f64::from(b.max_y), b.error)
    }

    fn raw(&self, col: u32, row: u32) -> f64 {
        f64::from(self.field.raw_clamped(col, row))
    }

    fn codes(&self) -> HeightCodes {
        self.scale.codes(self.scale.integer.then_some(1.0))
    }

    fn box_codes(&self) -> HeightCodes {
        self.scale.codes(None)
    }

    fn drawn(&self, raw: f64) -> f32 {
        self.scale.drawn(raw)
    }

    fn world_error(&self, raw: f64) -> f32 {
        self.scale.world_error(raw)
    }

    fn largest_height(&self) -> f64 {
        self.scale.largest_height()
    }

    fn cell_size(&self) -> f32 {
        self.scale.mapping.cell_size
    }
}

/// An imported terrain's tiles, through its [`TiledPyramid`] (issue 9, step 5 of
/// docs/ADAPTIVE_PAGING.md): the answers of a [`FieldSource`] over the same terrain
/// without the finest level in memory. A tile no level can stand in for is kept as the
/// build's failure ([`TilesSource::failure`]) and answered with zeros meanwhile: the tree
/// built then is thrown away.
pub(super) struct TilesSource<'a> {
    pub tiles: &'a TiledPyramid,
    scale: RawScale,
    failure: std::sync::Mutex<Option<TileError>>,
}

impl<'a> TilesSource<'a> {
    pub fn new(tiles: &'a TiledPyramid) -> Self {
        let header = tiles.terrain().header();
        TilesSource {
            tiles,
            scale: RawScale {
                range: tiles.raw_range(),
                mapping: tiles.terrain().level_mapping(0),
                integer: !matches!(header.sample_type, crate::tiles::SampleType::F32),
            },
            failure: std::sync::Mutex::new(None),
        }
    }

    /// The first tile that could not be read, if any.
    pub fn failure(self) -> Option<TileError> {
        self.failure.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    /// `result`'s value, or (its error kept as the failure) `fallback`.
    fn or_fail<T>(&self, result: Result<T, TileError>, fallback: T) -> T {
        result.unwrap_or_else(|e| {
            let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
            failure.get_or_insert(e);
            fallback
        })
    }
}

impl Source for TilesSource<'_> {
    fn shapes(&self) -> Vec<LevelShape> {
        let tiles = self.tiles;
        level_shapes(tiles.levels(), |l| (tiles.node_size(l), tiles.nodes(l)))
    }

    fn bounds(&self, level: usize, ix: u32, iz: u32) -> (f64, f64, f32) {
        let zero = crate::pyramid::NodeBounds {
            min_y: 0.0,
            max_y: 0.0,
            error: 0.0,
        };
        let b = self.or_fail(self.tiles.node(level, ix, iz), zero);
        (f64::from(b.min_y), f64::from(b.max_y), b.error)
    }

    fn raw(&self, col: u32, row: u32) -> f64 {
        f64::from(self.or_fail(self.tiles.raw_clamped(col, row), 0.0))
    }

    fn local_level(&self) -> Option<usize> {
        Some(self.tiles.tile_level())
    }

    fn codes(&self) -> HeightCodes {
        self.scale.codes(self.scale.integer.then_some(1.0))
    }

    fn box_codes(&self) -> HeightCodes {
        self.scale.codes(None)
    }

    fn drawn(&self, raw: f64) -> f32 {
        self.scale.drawn(raw)
    }

    fn world_error(&self, raw: f64) -> f32 {
        self.scale.world_error(raw)
    }

    fn largest_height(&self) -> f64 {
        self.scale.largest_height()
    }

    fn cell_size(&self) -> f32 {
        self.scale.mapping.cell_size
    }
}

impl SquareTree {
    /// Interpolation error of the edge vertex on `side` of `sq` as drawn (0 if it cannot be
    /// drawn); `neighbour` is the square on that side when the caller knows it.
    #[inline(always)]
    pub fn stored_vertex_error(&self, sq: Sq, side: usize, neighbour: Option<u32>) -> f32 {
        match side {
            EAST => self.records[sq.id as usize].east_error(),
            SOUTH => self.records[sq.id as usize].south_error(),
            NORTH if sq.iz == 0 => self.border_vertex(sq, NORTH).error(),
            WEST if sq.ix == 0 => self.border_vertex(sq, WEST).error(),
            _ => {
                let n = neighbour.unwrap_or_else(|| self.neighbour(sq.id, side));
                if n >= ABSENT {
                    0.0
                } else if side == NORTH {
                    self.records[n as usize].south_error()
                } else {
                    self.records[n as usize].east_error()
                }
            }
        }
    }
}
