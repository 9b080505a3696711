//! Building the tree (the parent module's docs: rules 1 to 3, the pool, records and
//! heights) in parts: which squares have children, one bit per square; then the top laid
//! out and filled; then each page laid out and filled on its own ([`TreeBuilder::page`]);
//! then the top's subtree errors, which need each page's. So a tree whose pages do not fit
//! in memory together is written page by page (`paging`, docs/ADAPTIVE_PAGING.md step 5),
//! and a tree that does is assembled from the same parts ([`build`]).

use super::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Which squares have children, while building: per level a bit per square, or a set
/// where bits would be too many (the finer levels of a local detail have up to 4^k times
/// the terrain's squares, of which only those near the footprint can be marked; the finest
/// level's squares never have children).
struct Marks {
    levels: Vec<Membership>,
    shapes: Vec<LevelShape>,
}

enum Membership {
    /// Atomic so that squares of one level can be marked from several threads.
    Dense(Vec<AtomicU64>),
    Sparse(HashSet<(u32, u32)>),
}

/// Largest level kept as bits (32 MiB of them): 65537² samples have 2^28 squares on the
/// level above the finest. Past that (a local detail's finer levels, or a terrain of more
/// than 65537² samples) a level is a set, which costs a hash per marked square.
const DENSE_MARKS: usize = 1 << 28;

impl Marks {
    fn new(shapes: &[LevelShape], budget: Budget) -> Result<Marks, DetailError> {
        let finest = shapes.len() - 1;
        let mut levels = Vec::with_capacity(shapes.len());
        for (level, s) in shapes.iter().enumerate() {
            let n = s.nx as usize * s.nz as usize;
            levels.push(if level < finest && n <= DENSE_MARKS {
                let mut bits = budget.vec(n.div_ceil(64))?;
                bits.extend((0..n.div_ceil(64)).map(|_| AtomicU64::new(0)));
                Membership::Dense(bits)
            } else {
                Membership::Sparse(HashSet::new())
            });
        }
        Ok(Marks {
            levels,
            shapes: shapes.to_vec(),
        })
    }

    #[inline]
    fn get(&self, level: usize, ix: u32, iz: u32) -> bool {
        let s = self.shapes[level];
        s.present(ix, iz)
            && match &self.levels[level] {
                Membership::Dense(bits) => {
                    let i = iz as usize * s.nx as usize + ix as usize;
                    (bits[i / 64].load(Relaxed) >> (i % 64)) & 1 != 0
                }
                Membership::Sparse(set) => set.contains(&(ix, iz)),
            }
    }

    /// Marks a present square; true if it was not marked.
    fn set(&mut self, level: usize, ix: u32, iz: u32) -> bool {
        let s = self.shapes[level];
        debug_assert!(s.present(ix, iz));
        match &mut self.levels[level] {
            Membership::Dense(bits) => {
                let i = iz as usize * s.nx as usize + ix as usize;
                let (bit, word) = (1u64 << (i % 64), bits[i / 64].get_mut());
                let new = *word & bit == 0;
                *word |= bit;
                new
            }
            Membership::Sparse(set) => set.insert((ix, iz)),
        }
    }

    /// Marks a present square of a level kept as bits, from any thread.
    fn set_shared(&self, level: usize, ix: u32, iz: u32) {
        let s = self.shapes[level];
        debug_assert!(s.present(ix, iz));
        let Membership::Dense(bits) = &self.levels[level] else {
            unreachable!("only levels kept as bits are marked in parallel")
        };
        let i = iz as usize * s.nx as usize + ix as usize;
        bits[i / 64].fetch_or(1 << (i % 64), Relaxed);
    }

    /// Whether a level is kept as bits.
    fn dense(&self, level: usize) -> bool {
        matches!(self.levels[level], Membership::Dense(_))
    }

    /// Whether a present square is stored (the root, or its parent has children).
    fn exists(&self, level: usize, ix: u32, iz: u32) -> bool {
        level == 0 || self.get(level - 1, ix / 2, iz / 2)
    }
}

impl Marks {
    /// Marks the squares of `level` that a parallel pass found (where the level is a set,
    /// which only one thread may change).
    fn mark_all(&mut self, level: usize, found: Vec<(u32, u32)>) {
        for (x, z) in found {
            self.set(level, x, z);
        }
    }

    /// What `visit` finds at each marked square of `level`, visited in parallel, in row
    /// order.
    fn par_marked<T: Send>(
        &self,
        level: usize,
        visit: impl Fn(u32, u32, &mut Vec<T>) + Sync,
    ) -> Vec<T> {
        let nx = self.shapes[level].nx as usize;
        match &self.levels[level] {
            Membership::Dense(bits) => bits
                .par_chunks(CHUNK_WORDS)
                .enumerate()
                .flat_map_iter(|(c, chunk)| {
                    let mut found = Vec::new();
                    for (k, word) in chunk.iter().enumerate() {
                        let mut word = word.load(Relaxed);
                        while word != 0 {
                            let i = (c * CHUNK_WORDS + k) * 64 + word.trailing_zeros() as usize;
                            word &= word - 1;
                            visit((i % nx) as u32, (i / nx) as u32, &mut found);
                        }
                    }
                    found
                })
                .collect(),
            Membership::Sparse(set) => {
                let mut marked: Vec<(u32, u32)> = set.iter().copied().collect();
                marked.sort_unstable_by_key(|&(x, z)| (z, x));
                marked
                    .par_iter()
                    .flat_map_iter(|&(x, z)| {
                        let mut found = Vec::new();
                        visit(x, z, &mut found);
                        found
                    })
                    .collect()
            }
        }
    }
}

/// Words of marks per parallel task.
const CHUNK_WORDS: usize = 256;

/// The present children of `(ix, iz)` on the next level.
fn children(next: LevelShape, ix: u32, iz: u32) -> impl Iterator<Item = (u32, u32)> {
    (0..4)
        .map(move |k| (2 * ix + (k & 1), 2 * iz + (k >> 1)))
        .filter(move |&(x, z)| next.present(x, z))
}

/// The position beside `(ix, iz)` on `side`, if it is inside the level's grid.
fn beside(shape: LevelShape, ix: u32, iz: u32, side: usize) -> Option<(u32, u32)> {
    let (x, z) = match side {
        EAST => (ix.checked_add(1)?, iz),
        SOUTH => (ix, iz.checked_add(1)?),
        NORTH => (ix, iz.checked_sub(1)?),
        _ => (ix.checked_sub(1)?, iz),
    };
    shape.present(x, z).then_some((x, z))
}

/// The edge vertex on `side` of a square at `(x0, z0)` of `size` cells, and its edge's
/// two ends.
fn edge(x0: u32, z0: u32, size: u32, side: usize) -> [(u32, u32); 3] {
    let half = size / 2;
    match side {
        EAST => [
            (x0 + size, z0 + half),
            (x0 + size, z0),
            (x0 + size, z0 + size),
        ],
        SOUTH => [
            (x0 + half, z0 + size),
            (x0, z0 + size),
            (x0 + size, z0 + size),
        ],
        NORTH => [(x0 + half, z0), (x0, z0), (x0 + size, z0)],
        _ => [(x0, z0 + half), (x0, z0), (x0, z0 + size)],
    }
}

/// Rules 1 to 3: which squares have children.
fn mark(
    source: &impl Source,
    shapes: &[LevelShape],
    extent: (u32, u32),
    tolerance: f32,
    budget: Budget,
) -> Result<Marks, DetailError> {
    let finest = shapes.len() - 1;
    let straddles = |level: usize, ix: u32, iz: u32| reaches_beyond(shapes[level], extent, ix, iz);
    // Rule 1, coarse to fine over the squares that exist: subtree errors and reaching
    // beyond the data are monotone towards the root, so a square it marks has a marked
    // parent.
    let mut marks = Marks::new(shapes, budget)?;
    let rule_one = |level: usize, ix: u32, iz: u32| {
        level < finest && (straddles(level, ix, iz) || source.bounds(level, ix, iz).2 > tolerance)
    };
    if rule_one(0, 0, 0) {
        marks.set(0, 0, 0);
    }
    // Below a local level (an imported terrain's tiles), each square of that level's
    // subtree is visited in turn, in parallel, rather than each level in turn: so each
    // tile is used while its pyramid is at hand.
    let local = source
        .local_level()
        .filter(|&l| l + 1 < finest && (l + 1..finest).all(|level| marks.dense(level)));
    for level in 0..local.unwrap_or(finest.saturating_sub(1)) {
        let next = level + 1;
        let dense = marks.dense(next);
        let found = marks.par_marked(level, |ix, iz, out| {
            for (cx, cz) in children(shapes[next], ix, iz) {
                if rule_one(next, cx, cz) {
                    if dense {
                        marks.set_shared(next, cx, cz);
                    } else {
                        out.push((cx, cz));
                    }
                }
            }
        });
        marks.mark_all(next, found);
    }
    if let Some(local) = local {
        marks.par_marked(local, |x, z, _: &mut Vec<()>| {
            let mut marked = vec![(local, x, z)];
            while let Some((level, ix, iz)) = marked.pop() {
                let next = level + 1;
                for (cx, cz) in children(shapes[next], ix, iz) {
                    if rule_one(next, cx, cz) {
                        marks.set_shared(next, cx, cz);
                        marked.push((next, cx, cz));
                    }
                }
            }
        });
    }
    // Rule 2 (balance), finest level first: a square with children makes its neighbours
    // stored (their parents get children), and its own parent has children.
    for level in (1..finest).rev() {
        let shape = shapes[level];
        let dense = marks.dense(level - 1);
        let found = marks.par_marked(level, |ix, iz, out| {
            let sides = [EAST, SOUTH, NORTH, WEST].map(|side| beside(shape, ix, iz, side));
            for (x, z) in std::iter::once(Some((ix, iz))).chain(sides).flatten() {
                if dense {
                    marks.set_shared(level - 1, x / 2, z / 2);
                } else {
                    out.push((x / 2, z / 2));
                }
            }
        });
        marks.mark_all(level - 1, found);
    }
    // Rule 3: a leaf whose fan error plus a left-out vertex's error exceeds `T` gives the
    // coarser leaf across that vertex children. Each square is checked when it comes to
    // exist (more squares only make more vertices drawable, so a passed check stays
    // passed; and a failed check marks the square whose children make the vertex
    // drawable, so the marks do not depend on the order of the checks); new marks go
    // through a worklist that applies rule 2 to them.
    let exact_vertex_error = |level: usize, ix: u32, iz: u32, side: usize| {
        let size = shapes[level].size;
        let [m, a, b] = edge(ix * size, iz * size, size, side);
        let h = |p: (u32, u32)| source.raw(p.0, p.1);
        source.world_error((h(m) - 0.5 * (h(a) + h(b))).abs())
    };
    // The squares that a leaf at `(ix, iz)` of `level` makes have children, pushed to
    // `out`: the parents of the neighbours across its failing vertices (the leaf's own
    // error is read only when a neighbour does not exist).
    let check = |marks: &Marks, level: usize, ix: u32, iz: u32, out: &mut Vec<(u32, u32)>| {
        if marks.get(level, ix, iz) {
            return;
        }
        let shape = shapes[level];
        let mut own = None;
        for side in [EAST, SOUTH, NORTH, WEST] {
            let Some((x, z)) = beside(shape, ix, iz, side) else {
                continue;
            };
            if marks.exists(level, x, z) {
                continue;
            }
            let own = *own.get_or_insert_with(|| source.bounds(level, ix, iz).2);
            let vertex = exact_vertex_error(level, ix, iz, side);
            if f64::from(own) + f64::from(vertex) > f64::from(tolerance) {
                out.push((x / 2, z / 2));
            }
        }
    };
    let mut work = Vec::new();
    // Every square that exists, checked in parallel against the marks as they are when
    // its level starts (a check failing against fewer marks still marks only what the
    // rules force: the square across a failing vertex exists in the result, or the leaf
    // itself gets children and balance makes it exist), the marks applied after.
    let checked_by_level = local.unwrap_or(finest) + 1;
    for (level, &shape) in shapes.iter().enumerate().take(checked_by_level).skip(1) {
        let wanted = marks.par_marked(level - 1, |px, pz, out| {
            for (cx, cz) in children(shape, px, pz) {
                check(&marks, level, cx, cz, out);
            }
        });
        for (x, z) in wanted {
            if marks.set(level - 1, x, z) {
                work.push((level - 1, x, z));
            }
        }
    }
    if let Some(local) = local {
        // The levels below, a local square's subtree at a time.
        let wanted = marks.par_marked(local, |x, z, out| {
            let mut marked = vec![(local, x, z)];
            let mut found = Vec::new();
            while let Some((level, ix, iz)) = marked.pop() {
                for (cx, cz) in children(shapes[level + 1], ix, iz) {
                    check(&marks, level + 1, cx, cz, &mut found);
                    out.extend(found.drain(..).map(|(x, z)| (level, x, z)));
                    if marks.get(level + 1, cx, cz) {
                        marked.push((level + 1, cx, cz));
                    }
                }
            }
        });
        for (level, x, z) in wanted {
            if marks.set(level, x, z) {
                work.push((level, x, z));
            }
        }
    }
    while let Some((level, ix, iz)) = work.pop() {
        if level > 0 {
            let shape = shapes[level];
            let sides = [EAST, SOUTH, NORTH, WEST].map(|side| beside(shape, ix, iz, side));
            for (x, z) in std::iter::once(Some((ix, iz))).chain(sides).flatten() {
                if marks.set(level - 1, x / 2, z / 2) {
                    work.push((level - 1, x / 2, z / 2));
                }
            }
        }
        // Its children now exist.
        let mut wanted = Vec::new();
        for (cx, cz) in children(shapes[level + 1], ix, iz) {
            check(&marks, level + 1, cx, cz, &mut wanted);
        }
        for (x, z) in wanted {
            if marks.set(level, x, z) {
                work.push((level, x, z));
            }
        }
    }
    Ok(marks)
}

/// Position of a pool slot while building (`level == u32::MAX`: outside).
#[derive(Clone, Copy, Debug)]
struct Slot {
    level: u32,
    ix: u32,
    iz: u32,
}

const OUT_SLOT: Slot = Slot {
    level: u32::MAX,
    ix: 0,
    iz: 0,
};

/// One part of the pool laid out: the top, or a page counted from its first slot (its
/// first block's parent, the root in the top, is [`OUTSIDE`], as in [`PageData`]).
struct Part {
    slots: Vec<Slot>,
    /// Per block of four slots, the parent's slot.
    parents: Vec<u32>,
    rank: Vec<RankWord>,
}

/// Lays out a part breadth first, each square with children appending its block.
struct Appender<'m> {
    marks: &'m Marks,
    budget: Budget,
    slots: Vec<Slot>,
    parents: Vec<u32>,
    /// Per rank word, the first slot of its first square's children (none: `u32::MAX`).
    bases: Vec<u32>,
}

impl Appender<'_> {
    fn has_children(&self, s: Slot) -> bool {
        s.level != u32::MAX && self.marks.get(s.level as usize, s.ix, s.iz)
    }

    /// Appends the children of `square`, whose slot in this part is `parent` (`None`:
    /// the root of a page, in the top).
    fn block(&mut self, square: Slot, parent: Option<usize>) -> Result<(), DetailError> {
        self.budget.reserve(&mut self.slots, 4)?;
        self.budget.reserve(&mut self.parents, 1)?;
        if self.slots.len() + 4 >= PAGE_ROOTS as usize {
            return Err(DetailError::TooLarge {
                bytes: (self.slots.len() as u64 + 4) * size_of::<SquareRecord>() as u64,
            });
        }
        if let Some(parent) = parent {
            let word = parent / WORD;
            if self.bases.len() <= word {
                self.bases.resize(word + 1, u32::MAX);
            }
            if self.bases[word] == u32::MAX {
                self.bases[word] = self.slots.len() as u32;
            }
        }
        self.parents.push(parent.map_or(OUTSIDE, |p| p as u32));
        let child = self.marks.shapes[square.level as usize + 1];
        for k in 0..4 {
            let (cx, cz) = (2 * square.ix + (k & 1), 2 * square.iz + (k >> 1));
            self.slots.push(if child.present(cx, cz) {
                Slot {
                    level: square.level + 1,
                    ix: cx,
                    iz: cz,
                }
            } else {
                OUT_SLOT
            });
        }
        Ok(())
    }

    /// Appends the blocks of the squares from slot `next` on that have children, and of
    /// theirs, breadth first.
    fn breadth_first(&mut self, mut next: usize) -> Result<(), DetailError> {
        while next < self.slots.len() {
            let s = self.slots[next];
            if self.has_children(s) {
                self.block(s, Some(next))?;
            }
            next += 1;
        }
        Ok(())
    }

    /// Fills with empty blocks up to the next rank word.
    fn align(&mut self) {
        while !self.slots.len().is_multiple_of(WORD) {
            self.slots.extend([OUT_SLOT; 4]);
            self.parents.push(OUTSIDE);
        }
    }

    /// The part, its rank words made: words starting in `roots` are words of page roots,
    /// pointing into the page table.
    fn finish(self, roots: std::ops::Range<usize>) -> Result<Part, DetailError> {
        let words = self.slots.len().div_ceil(WORD);
        let mut rank = self.budget.vec(words)?;
        let mut roots_before = 0;
        for w in 0..words {
            let mut bits = 0u64;
            for (b, &s) in self.slots[w * WORD..((w + 1) * WORD).min(self.slots.len())]
                .iter()
                .enumerate()
            {
                if self.has_children(s) {
                    bits |= 1 << b;
                }
            }
            let base = if roots.contains(&(w * WORD)) {
                let base = PAGE_ROOTS + roots_before;
                roots_before += bits.count_ones();
                base
            } else {
                self.bases
                    .get(w)
                    .copied()
                    .filter(|&b| b != u32::MAX)
                    .unwrap_or(0)
            };
            rank.push(RankWord { bits, base });
        }
        Ok(Part {
            slots: self.slots,
            parents: self.parents,
            rank,
        })
    }
}

/// What a part's squares hold: records (subtree errors not yet set), vertex heights, and
/// the stored errors of their north and west edge vertices (what
/// [`SquareTree::stored_vertex_error`] will read through their neighbours or the border
/// tables), for the subtree errors.
struct Filled {
    records: Vec<SquareRecord>,
    heights: VertexHeights,
    north_west: Vec<[f32; 2]>,
}

/// A page built on its own ([`TreeBuilder::page`]).
pub(in crate::lod::adaptive) struct BuiltPage {
    pub data: PageData,
    pub summary: PageSummary,
}

/// What the top needs of a page once it is built.
#[derive(Clone, Debug, Default)]
pub(in crate::lod::adaptive) struct PageSummary {
    /// The largest subtree error of the root's children.
    largest: f32,
    slots: u32,
    squares: usize,
    leaf_error: f32,
    /// Border vertices of its squares on the grid's north and west border: (level, key,
    /// vertex).
    north: Vec<(usize, u32, BorderVertex)>,
    west: Vec<(usize, u32, BorderVertex)>,
}

impl PageSummary {
    /// The page's length in the pool.
    pub fn slots(&self) -> u32 {
        self.slots
    }
}

/// The tree in the making: the marks, the top laid out and filled, and what each page
/// needs to be built on its own.
pub(in crate::lod::adaptive) struct TreeBuilder<'s, S: Source> {
    source: &'s S,
    shapes: Vec<LevelShape>,
    extent: (u32, u32),
    marks: Marks,
    codes: HeightCodes,
    boxes: HeightCodes,
    /// `f32` rounding of drawn heights.
    rounding: f64,
    budget: Budget,
    top: Part,
    top_filled: Filled,
    /// Per page, its root's slot in the top.
    roots: Vec<usize>,
}

impl<'s, S: Source> TreeBuilder<'s, S> {
    /// Marks the squares with children for build tolerance `tolerance` (world units) and
    /// lays out and fills the top (the levels down to the squares of `page_cells` cells;
    /// without such a level, the whole tree), each allocation within `budget`.
    pub fn new(
        source: &'s S,
        tolerance: f32,
        page_cells: u32,
        budget: Budget,
    ) -> Result<Self, DetailError> {
        let shapes = source.shapes();
        let finest = shapes.len() - 1;
        let extent = (
            shapes[finest].nx * shapes[finest].size,
            shapes[finest].nz * shapes[finest].size,
        );
        let marks = mark(source, &shapes, extent, tolerance, budget)?;
        let page_level = shapes.iter().position(|s| s.size == page_cells);
        let (top, roots) = lay_out_top(&marks, page_level, budget)?;
        let mut builder = TreeBuilder {
            source,
            codes: source.codes(),
            boxes: source.box_codes(),
            rounding: source.largest_height() * 2f64.powi(-23),
            shapes,
            extent,
            marks,
            budget,
            top,
            top_filled: Filled {
                records: Vec::new(),
                heights: VertexHeights::Codes(Vec::new()),
                north_west: Vec::new(),
            },
            roots,
        };
        builder.top_filled = builder.fill(&builder.top.slots, &Whole(source))?;
        Ok(builder)
    }

    /// Number of pages.
    pub fn pages(&self) -> usize {
        self.roots.len()
    }

    /// Page `j`'s root.
    pub fn root(&self, j: usize) -> Sq {
        let s = self.top.slots[self.roots[j]];
        Sq {
            id: self.roots[j] as u32,
            level: s.level,
            ix: s.ix,
            iz: s.iz,
        }
    }

    /// The levels' shapes.
    pub fn levels(&self) -> &[LevelShape] {
        &self.shapes
    }

    /// Whether vertex heights are `f32` (else 16-bit codes).
    pub fn float_heights(&self) -> bool {
        matches!(self.top_filled.heights, VertexHeights::Floats(_))
    }

    /// Whether a square reaches beyond the data (see [`SquareTree::straddles`]).
    pub fn straddles(&self, sq: Sq) -> bool {
        reaches_beyond(self.shapes[sq.level as usize], self.extent, sq.ix, sq.iz)
    }

    /// Lays out, fills and finishes page `j`.
    pub fn page(&self, j: usize) -> Result<BuiltPage, DetailError> {
        let root = self.top.slots[self.roots[j]];
        let mut appender = Appender {
            marks: &self.marks,
            budget: self.budget,
            slots: Vec::new(),
            parents: Vec::new(),
            bases: Vec::new(),
        };
        appender.block(root, None)?;
        appender.breadth_first(0)?;
        appender.align();
        let part = appender.finish(0..0)?;
        // A page's samples are read once into a window, unless the page is large enough
        // for the window to cost more memory than the reads save time.
        let root_cells = self.shapes[root.level as usize].size as usize;
        let (filled, border) = if (root_cells + 1).pow(2) <= WINDOW_SAMPLES {
            let window = self.window(j)?;
            (
                self.fill(&part.slots, &window)?,
                self.border_vertices(&part.slots, &window),
            )
        } else {
            let whole = Whole(self.source);
            (
                self.fill(&part.slots, &whole)?,
                self.border_vertices(&part.slots, &whole),
            )
        };
        let mut filled = filled;
        let root_fan = self.top_filled.records[self.roots[j]].fan_error();
        let leaf_error = subtree_errors(&part, &mut filled, root_fan, &[]);
        let largest = filled.records[..4]
            .iter()
            .filter(|r| !r.is_outside())
            .map(|r| r.subtree_error())
            .fold(0.0f32, f32::max);
        let (north, west) = border;
        let summary = PageSummary {
            largest,
            slots: part.slots.len() as u32,
            squares: part.slots.iter().filter(|s| s.level != u32::MAX).count(),
            leaf_error,
            north,
            west,
        };
        let data = PageData {
            records: filled.records,
            heights: filled.heights,
            rank: part.rank,
            parents: part.parents,
        };
        Ok(BuiltPage { data, summary })
    }

    /// The tree's top, every page out of the pool ([`NOT_RESIDENT`]), from what each
    /// page's build gave: the top's subtree errors need the pages'.
    pub fn finish(mut self, pages: &[PageSummary]) -> SquareTree {
        let largest: Vec<f32> = pages.iter().map(|p| p.largest).collect();
        let top_leaf_error = subtree_errors(&self.top, &mut self.top_filled, 0.0, &largest);
        let (top_north, top_west) = self.border_vertices(&self.top.slots, &Whole(self.source));
        let levels = self.shapes.len();
        let table = |top: Vec<(usize, u32, BorderVertex)>, of_page: fn(&PageSummary) -> &[_]| {
            let mut table = vec![Vec::new(); levels];
            for (level, key, vertex) in top
                .into_iter()
                .chain(pages.iter().flat_map(|p| of_page(p).iter().copied()))
            {
                table[level].push((key, vertex));
            }
            for level in &mut table {
                level.sort_by_key(|&(k, _)| k);
            }
            table
        };
        let north = table(top_north, |p| &p.north);
        let west = table(top_west, |p| &p.west);
        let side = self.shapes[0].size;
        let source = self.source;
        let root_corners = [(0, 0), (side, 0), (0, side), (side, side)]
            .map(|(c, r)| source.drawn(source.raw(c, r)));
        let squares = self
            .top
            .slots
            .iter()
            .filter(|s| s.level != u32::MAX)
            .count()
            + pages.iter().map(|p| p.squares).sum::<usize>();
        let leaf_error = pages
            .iter()
            .map(|p| p.leaf_error)
            .fold(top_leaf_error, f32::max);
        SquareTree {
            records: self.top_filled.records,
            vertex_heights: self.top_filled.heights,
            parents: self.top.parents,
            rank: self.top.rank,
            pages: pages
                .iter()
                .map(|p| Page {
                    first: NOT_RESIDENT,
                    slots: p.slots,
                })
                .collect(),
            levels: self.shapes,
            heights: self.codes,
            boxes: self.boxes,
            north,
            west,
            root_corners,
            cell_size: source.cell_size(),
            extent: self.extent,
            squares,
            leaf_error,
        }
    }

    /// The interpolation error of the edge vertex on `side` of a square as drawn
    /// (the stored height against the mean of the stored ends), and whether it can be
    /// drawn (the square across exists; beyond the grid or the data it is drawn alone).
    fn drawn_vertex_error(
        &self,
        raw: &impl Sampler,
        level: usize,
        ix: u32,
        iz: u32,
        side: usize,
    ) -> (f32, bool) {
        let size = self.shapes[level].size;
        let [m, a, b] = edge(ix * size, iz * size, size, side);
        let world = |p: (u32, u32)| f64::from(self.source.drawn(raw.raw(p.0, p.1)));
        let error = (world(m) - 0.5 * (world(a) + world(b))).abs();
        let drawable = beside(self.shapes[level], ix, iz, side)
            .is_none_or(|(x, z)| self.marks.exists(level, x, z));
        let error = if error == 0.0 {
            0.0
        } else {
            error_value(error_code(round_up(error * (1.0 + 2f64.powi(-16)))))
        };
        (error, drawable)
    }

    /// The records (without subtree errors), vertex heights and north and west stored
    /// vertex errors of a part's slots, their samples read from `raw`.
    fn fill(&self, slots: &[Slot], raw: &impl Sampler) -> Result<Filled, DetailError> {
        let source = self.source;
        let (budget, rounding, boxes) = (self.budget, self.rounding, self.boxes);
        let mut records: Vec<SquareRecord> = budget.vec(slots.len())?;
        let mut north_west: Vec<[f32; 2]> = budget.vec(slots.len())?;
        slots
            .par_iter()
            .map(|s| {
                if s.level == u32::MAX {
                    return (SquareRecord::OUTSIDE, [0.0; 2]);
                }
                let (level, ix, iz) = (s.level as usize, s.ix, s.iz);
                let (lo, hi, error) = source.bounds(level, ix, iz);
                let margin = 2.0 * rounding;
                let box_codes = (boxes.below(lo - margin), boxes.above(hi + margin));
                let sides = [EAST, SOUTH, NORTH, WEST]
                    .map(|side| self.drawn_vertex_error(raw, level, ix, iz, side));
                let left_out = sides
                    .iter()
                    .filter(|(_, drawable)| !drawable)
                    .map(|&(e, _)| f64::from(e))
                    .fold(0.0, f64::max);
                let exact = f64::from(error) + left_out;
                let fan = if exact == 0.0 {
                    0.0
                } else {
                    round_up(exact * (1.0 + 2f64.powi(-16)) + rounding)
                };
                let kept = |(e, drawable): (f32, bool)| if drawable { e } else { 0.0 };
                let record =
                    SquareRecord::new(box_codes, fan, kept(sides[EAST]), kept(sides[SOUTH]));
                // As `stored_vertex_error` will read them: a border vertex from its table,
                // else the square across's record when that square exists, else nothing.
                let stored = |side: usize, on_border: bool| {
                    let (error, drawable) = sides[side];
                    if on_border {
                        error_value(error_code(error))
                    } else {
                        kept((error, drawable))
                    }
                };
                (record, [stored(NORTH, iz == 0), stored(WEST, ix == 0)])
            })
            .unzip_into_vecs(&mut records, &mut north_west);
        // The heights each square owns, at positions fixed by its place (so every vertex
        // has one height, whichever square draws it); none outside.
        let owned = |s: &Slot| -> Option<[(u32, u32); 3]> {
            if s.level == u32::MAX {
                return None;
            }
            let size = self.shapes[s.level as usize].size;
            let (x0, z0) = (s.ix * size, s.iz * size);
            let mut p = [(0, 0); 3];
            p[EAST] = edge(x0, z0, size, EAST)[0];
            p[SOUTH] = edge(x0, z0, size, SOUTH)[0];
            p[CENTRE] = (x0 + size / 2, z0 + size / 2);
            Some(p)
        };
        let heights =
            if self.codes.exact() {
                let mut v = budget.vec(slots.len())?;
                let codes = self.codes;
                v.par_extend(slots.par_iter().map(|s| {
                    owned(s).map_or([0; 3], |p| p.map(|p| codes.code(raw.raw(p.0, p.1))))
                }));
                VertexHeights::Codes(v)
            } else {
                let mut v = budget.vec(slots.len())?;
                v.par_extend(slots.par_iter().map(|s| {
                    owned(s).map_or([0.0; 3], |p| p.map(|p| source.drawn(raw.raw(p.0, p.1))))
                }));
                VertexHeights::Floats(v)
            };
        Ok(Filled {
            records,
            heights,
            north_west,
        })
    }

    /// The vertices on the grid's north and west border that a part's squares own.
    #[allow(clippy::type_complexity)]
    fn border_vertices(
        &self,
        slots: &[Slot],
        raw: &impl Sampler,
    ) -> (
        Vec<(usize, u32, BorderVertex)>,
        Vec<(usize, u32, BorderVertex)>,
    ) {
        let (mut north, mut west) = (Vec::new(), Vec::new());
        for s in slots.iter().filter(|s| s.level != u32::MAX) {
            let (level, size) = (s.level as usize, self.shapes[s.level as usize].size);
            for (border, on, key, table) in [
                (NORTH, s.iz == 0, s.ix, &mut north),
                (WEST, s.ix == 0, s.iz, &mut west),
            ] {
                if on {
                    let (error, _) = self.drawn_vertex_error(raw, level, s.ix, s.iz, border);
                    let m = edge(s.ix * size, s.iz * size, size, border)[0];
                    table.push((
                        level,
                        key,
                        BorderVertex {
                            height: self.source.drawn(raw.raw(m.0, m.1)),
                            error: error_code(error),
                        },
                    ));
                }
            }
        }
        (north, west)
    }

    /// The raw samples under page `j`'s root (its border included: every vertex of its
    /// squares lies there), read from the source once each instead of once per square
    /// that uses them.
    fn window(&self, j: usize) -> Result<Window, DetailError> {
        let root = self.root(j);
        let size = self.shapes[root.level as usize].size;
        let (x0, z0, side) = (root.ix * size, root.iz * size, size + 1);
        let mut raw = self.budget.vec(side as usize * side as usize)?;
        let source = self.source;
        raw.par_extend(
            (0..side)
                .into_par_iter()
                .flat_map_iter(|r| (0..side).map(move |c| source.raw(x0 + c, z0 + r))),
        );
        Ok(Window { x0, z0, side, raw })
    }
}

/// Where `fill` reads raw samples.
trait Sampler: Sync {
    fn raw(&self, col: u32, row: u32) -> f64;
}

/// The source itself (the top's squares span the terrain).
struct Whole<'s, S>(&'s S);

impl<S: Source> Sampler for Whole<'_, S> {
    #[inline]
    fn raw(&self, col: u32, row: u32) -> f64 {
        self.0.raw(col, row)
    }
}

/// Samples a page reads into a window at most (32 MiB of `f64`; a 256-cell page, the
/// default, reads 66,049): with a batch of pages built at once, memory grows with the
/// threads times this.
const WINDOW_SAMPLES: usize = 1 << 22;

/// A square of samples read once ([`TreeBuilder::window`]).
struct Window {
    x0: u32,
    z0: u32,
    side: u32,
    raw: Vec<f64>,
}

impl Sampler for Window {
    #[inline]
    fn raw(&self, col: u32, row: u32) -> f64 {
        debug_assert!(col.wrapping_sub(self.x0) < self.side);
        debug_assert!(row.wrapping_sub(self.z0) < self.side);
        let (c, r) = ((col - self.x0) as usize, (row - self.z0) as usize);
        self.raw[r * self.side as usize + c]
    }
}

/// Lays out the top: breadth first, each square with children appending its block; with
/// a page level, each of the top's levels from a fresh rank word, the page roots' blocks
/// left to their pages, and the top filled up to a rank word. Returns the part and the
/// page roots' slots, in the page table's order.
fn lay_out_top(
    marks: &Marks,
    page_level: Option<usize>,
    budget: Budget,
) -> Result<(Part, Vec<usize>), DetailError> {
    let mut top = Appender {
        marks,
        budget,
        slots: budget.vec(4)?,
        parents: budget.vec(1)?,
        bases: Vec::new(),
    };
    let root = Slot {
        level: 0,
        ix: 0,
        iz: 0,
    };
    top.slots.extend([root, OUT_SLOT, OUT_SLOT, OUT_SLOT]);
    top.parents.push(OUTSIDE);
    let mut roots = Vec::new();
    let mut roots_start = if page_level == Some(0) { 0 } else { usize::MAX };
    // The level of the squares in the last block appended (the root's block: 0).
    let mut appended = 0;
    let mut next = 0;
    while next < top.slots.len() {
        let s = top.slots[next];
        if top.has_children(s) {
            if page_level == Some(s.level as usize) {
                roots.push(next);
            } else {
                if page_level.is_some() && s.level + 1 != appended {
                    top.align();
                    appended = s.level + 1;
                    if page_level == Some(appended as usize) {
                        roots_start = top.slots.len();
                    }
                }
                top.block(s, Some(next))?;
            }
        }
        next += 1;
    }
    let end = top.slots.len();
    if !roots.is_empty() {
        top.align();
    }
    Ok((top.finish(roots_start..end)?, roots))
}

/// Sets the subtree errors of a part's squares, children before parents (they come later
/// in a part): each square's own side errors (as `evaluate` computes them, from the
/// stored values), its children's box tests (a page root's: `largest`, per page) and its
/// parent's fan (a quadrant the parent draws; a page's first block's parent is the root,
/// whose fan is `root_fan`). Returns the largest fan error of a leaf.
fn subtree_errors(part: &Part, filled: &mut Filled, root_fan: f32, largest: &[f32]) -> f32 {
    let mut leaf_error = 0.0f32;
    for id in (0..part.slots.len()).rev() {
        let s = part.slots[id];
        if s.level == u32::MAX {
            continue;
        }
        let record = filled.records[id];
        let [north, west] = filled.north_west[id];
        let mut worst = [record.east_error(), record.south_error(), north, west]
            .map(|vertex| side_error(record.fan_error(), vertex))
            .into_iter()
            .fold(0.0f32, f32::max);
        let word = part.rank[id / WORD];
        let has_children = (word.bits >> (id % WORD)) & 1 != 0;
        if has_children {
            if word.base >= PAGE_ROOTS {
                worst = worst.max(largest[page_index(word, id as u32)]);
            } else {
                let first = word.base + 4 * (word.bits & ((1u64 << (id % WORD)) - 1)).count_ones();
                for child in &filled.records[first as usize..first as usize + 4] {
                    if !child.is_outside() {
                        worst = worst.max(child.subtree_error());
                    }
                }
            }
        }
        if s.level > 0 {
            let parent = part.parents[id / 4];
            worst = worst.max(if parent == OUTSIDE {
                root_fan
            } else {
                filled.records[parent as usize].fan_error()
            });
        }
        filled.records[id] = record.with_subtree_error(worst);
        if !has_children {
            leaf_error = leaf_error.max(record.fan_error());
        }
    }
    leaf_error
}

/// Builds the tree of `source` for build tolerance `tolerance` (world units), its pool,
/// records and heights within `budget`: the top and every page, the pages put in the pool
/// after the top in the page table's order.
pub(in crate::lod::adaptive) fn build(
    source: &impl Source,
    tolerance: f32,
    page_cells: u32,
    budget: Budget,
) -> Result<SquareTree, DetailError> {
    let builder = TreeBuilder::new(source, tolerance, page_cells, budget)?;
    let roots: Vec<u32> = (0..builder.pages()).map(|j| builder.root(j).id).collect();
    let (pages, summaries): (Vec<PageData>, Vec<PageSummary>) = (0..builder.pages())
        .into_par_iter()
        .map(|j| builder.page(j).map(|page| (page.data, page.summary)))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .unzip();
    let mut tree = builder.finish(&summaries);
    let top = tree.slots();
    let paged: usize = summaries.iter().map(|p| p.slots as usize).sum();
    if top + paged >= MAX_SLOTS {
        return Err(DetailError::TooLarge {
            bytes: (top + paged) as u64 * size_of::<SquareRecord>() as u64,
        });
    }
    if paged > 0 {
        budget.reserve(&mut tree.records, paged)?;
        tree.grow(paged);
    }
    let mut at = top;
    for (j, page) in pages.iter().enumerate() {
        tree.page_in(j, roots[j], page.view(), at as u32);
        at += page.records.len();
    }
    Ok(tree)
}

/// The tree of a heightfield.
pub(in crate::lod::adaptive) fn build_from_field(
    field: &Heightfield,
    pyramid: &Pyramid,
    tolerance: f32,
    page_cells: u32,
) -> SquareTree {
    // Sized like the heightfield, already in memory: failing that is an allocation
    // failure as any other.
    build(
        &FieldSource::new(field, pyramid),
        tolerance,
        page_cells,
        Budget::UNLIMITED,
    )
    .unwrap_or_else(|e| {
        let bytes = match e {
            DetailError::TooLarge { bytes } => bytes,
            _ => 0,
        };
        let size = usize::try_from(bytes).unwrap_or(isize::MAX as usize);
        std::alloc::handle_alloc_error(
            std::alloc::Layout::from_size_align(size.min(isize::MAX as usize), 1)
                .unwrap_or(std::alloc::Layout::new::<u8>()),
        )
    })
}
