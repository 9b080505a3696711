//! The view-independent mode: the coarsest conforming bintree whose every drawn triangle
//! lies within `M` of every sample it covers, found top-down without the per-diamond table.
//!
//! # The rules
//!
//! 1. A triangle of the mesh splits when its plane misses a data sample it covers (inside
//!    or on an edge) by more than `M` vertically.
//! 2. A diamond splits only after the diamonds its two triangles came from (the forced
//!    splits of ROAM), so the mesh stays conforming.
//!
//! The split diamonds are the least set closed under both rules: a test only ever adds
//! splits, so the order of the tests does not change the result. A triangle left unsplit
//! was scanned whole and is drawn as it was scanned, so every sample is within `M` of the
//! drawn surface.
//!
//! # Why it is cheap
//!
//! A test stops at the first sample that misses, and it starts where a miss is likeliest:
//! the hypotenuse's midpoint (the sample martini's test looks at, a lower bound of the
//! exact error), then the points the children and grandchildren would test, then row by
//! row (small triangles, most of the tests, through a list of their samples). A leaf is
//! scanned whole once; a split triangle usually stops at one of the first points. The
//! tests run depth first, so a triangle's children are tested while its samples are still
//! in cache, and below the coarsest levels in parallel parts (the mesh and its triangle
//! order do not depend on the number of threads). The cost is close to one pass over the samples, where the table of the
//! view-dependent mode measures every triangle of every level whole (docs/BENCHMARKS.md:
//! 2.3 ms for Boulder's 513² at M = 50 on one thread, 1.2–1.9 ms on two, against 35 ms
//! for the table).
//!
//! Unlike that table, the test is not made monotone towards the root: a triangle within `M`
//! stays whole even where a finer triangle under it would miss, since that finer triangle
//! is never drawn. The mesh is therefore never finer than the table's at the same `M`.
//!
//! The drawn heights are those of the exported and rendered mesh (world heights rounded to
//! `f32`, [`super::super::sample_height`]); the samples are compared in `f64`, as the
//! error oracle compares them.

use super::{SMALL_HALF_EXTENT, SampleShape, Triangle, diamond_of, emit, roots};
use crate::heightfield::{Heightfield, Samples};
use crate::raster::Point;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the view-independent selection keeps across calls, so a repeated selection
/// allocates nothing (on one thread; on several, which part queues a split leaf's children
/// depends on timing, so a part's stack can still outgrow its largest depth so far).
#[derive(Debug, Default)]
pub(super) struct WithinBuffers {
    /// One bit per grid vertex: whether the diamond centred there is split.
    split: Vec<AtomicU64>,
    /// Two bits per grid vertex, one per triangle of the diamond centred there: whether a
    /// part (or the calling thread) has claimed the triangle for testing (taken it off a
    /// stack while its diamond was whole).
    visited: Vec<AtomicU64>,
    /// The depth-first stack of the coarse levels, tested and drawn on the calling thread.
    pending: Vec<Triangle>,
    /// The triangles at [`FRONTIER_DEPTH`]: their subtrees are tested, then drawn, in
    /// parallel.
    frontier: Vec<Triangle>,
    /// One per parallel part of the frontier.
    parts: Vec<Part>,
    /// Built by the first selection.
    shapes: Option<Shapes>,
}

/// A parallel part's own stack, triangles and figures.
#[derive(Debug, Default)]
struct Part {
    stack: Vec<Triangle>,
    indices: Vec<u32>,
    stats: WithinStats,
}

/// The depth (levels below the roots) whose triangles are handed to the parallel parts:
/// up to 2^9 of them, in [`PARTS`] parts for rayon to balance.
const FRONTIER_DEPTH: u32 = 8;
const PARTS: usize = 32;

/// What one view-independent selection produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct WithinStats {
    /// Triangles tested against the samples (the others were split by a neighbour first;
    /// the two triangles of a diamond tested at once on two threads both count).
    pub tested: u64,
    /// Distinct vertices of the mesh: the grid's four corners and one per split diamond.
    pub vertices: u64,
}

impl WithinStats {
    fn add(&mut self, other: WithinStats) {
        self.tested += other.tested;
        self.vertices += other.vertices;
    }
}

/// Selects the mesh within `max_error` (world units) of every sample of `field` over the
/// padded grid of `side` samples, appending its triangles to `indices` (cleared first).
///
/// The levels above [`FRONTIER_DEPTH`] are tested on the calling thread; the subtrees
/// below, in parallel parts that share the split and visited flags (atomic: a
/// neighbour's forced split may reach into another part's subtree). A split triangle's
/// children are queued by whoever visits it, or, if it was visited and left whole before
/// its diamond split, by whoever splits the diamond ([`SplitGrid`]): a forced split never
/// takes over a subtree its part has yet to reach (only children of triangles some part
/// left whole), so each part walks its own subtrees depth first, and its stack stays
/// near their depth. The split set does not depend on
/// the order, so neither does the mesh: the triangles are drawn in the same order on any
/// number of threads.
pub(super) fn select_within(
    field: &Heightfield,
    side: u32,
    max_error: f32,
    buffers: &mut WithinBuffers,
    indices: &mut Vec<u32>,
) -> WithinStats {
    let n = side as i32 - 1;
    let words = (side as usize * side as usize).div_ceil(64);
    cleared(&mut buffers.split, words);
    cleared(&mut buffers.visited, 2 * words);
    let shapes = buffers.shapes.get_or_insert_with(Shapes::new);
    let scan = Scan::new(field, shapes, f64::from(max_error));
    let grid = SplitGrid {
        split: &buffers.split,
        visited: &buffers.visited,
        side,
    };
    // A triangle at the frontier depth has this half-extent, the only one of the levels
    // down to it that small (the roots are at depth 0; no deeper than the finest
    // splittable level).
    let depth = FRONTIER_DEPTH.min(2 * n.trailing_zeros() - 2) & !1;
    let frontier_extent = n >> (depth / 2 + 1);
    let at_frontier = |t: &Triangle| t.half_extent() <= frontier_extent;

    let mut stats = WithinStats {
        vertices: 4,
        ..WithinStats::default()
    };
    buffers.pending.clear();
    buffers.pending.extend(roots(n));
    buffers.frontier.clear();
    while let Some(t) = buffers.pending.pop() {
        if at_frontier(&t) {
            buffers.frontier.push(t);
        } else {
            stats.add(grid.visit(&t, &scan, &mut buffers.pending));
        }
    }
    buffers.parts.resize_with(PARTS, Part::default);
    let frontier = &buffers.frontier;
    share_out(frontier, &mut buffers.parts, |part| {
        part.stats = WithinStats::default();
        // Depth first: a triangle's children are tested right after it, while its samples
        // are still in cache.
        while let Some(t) = part.stack.pop() {
            let tested = grid.visit(&t, &scan, &mut part.stack);
            part.stats.add(tested);
        }
    });
    for part in &buffers.parts {
        stats.add(part.stats);
    }

    // Drawing: the coarse levels here, the frontier's subtrees in the parts, in order.
    indices.clear();
    buffers.pending.extend(roots(n));
    buffers.frontier.clear();
    while let Some(t) = buffers.pending.pop() {
        match t.midpoint() {
            _ if at_frontier(&t) => buffers.frontier.push(t),
            Some(m) if grid.is_split(m) => buffers.pending.extend(t.children(m)),
            _ => emit(indices, side, &t),
        }
    }
    // (Splits made in parallel may have added frontier triangles: a new share-out.)
    let frontier = &buffers.frontier;
    share_out(frontier, &mut buffers.parts, |part| {
        part.indices.clear();
        while let Some(t) = part.stack.pop() {
            match t.midpoint() {
                Some(m) if grid.is_split(m) => part.stack.extend(t.children(m)),
                _ => emit(&mut part.indices, side, &t),
            }
        }
    });
    for part in &buffers.parts {
        indices.extend_from_slice(&part.indices);
    }
    stats
}

/// `flags` as `words` zero words, keeping the allocation.
fn cleared(flags: &mut Vec<AtomicU64>, words: usize) {
    flags.truncate(words);
    flags.iter().for_each(|w| w.store(0, Ordering::Relaxed));
    flags.resize_with(words, AtomicU64::default);
}

/// Runs `work` on every part in parallel, each part's stack holding its consecutive share
/// of `frontier` (the first triangle on top).
fn share_out(frontier: &[Triangle], parts: &mut [Part], work: impl Fn(&mut Part) + Sync) {
    let share = frontier.len().div_ceil(parts.len()).max(1);
    parts.par_iter_mut().enumerate().for_each(|(k, part)| {
        part.stack.clear();
        part.stack.extend(
            frontier
                .chunks(share)
                .nth(k)
                .unwrap_or_default()
                .iter()
                .rev(),
        );
        work(part);
    });
}

/// The split flags of the padded grid's diamonds and the visited flags of their
/// triangles, shared by the parallel parts.
///
/// Who queues a split triangle's children: its visitor, if the diamond is split when it
/// looks; otherwise the diamond's splitter, if the triangle was visited by then. The
/// visitor sets its flag and then reads the split flag; the splitter sets the split flag
/// and then reads the visited flag (both sequentially consistent), so at least one of
/// them sees the other's write and the children are queued. Both may: a child is then on
/// two stacks. Of two copies of a triangle whose diamond is split, both queue its
/// children; of two copies still whole, only the one that sets the visited flag is tested.
struct SplitGrid<'a> {
    split: &'a [AtomicU64],
    visited: &'a [AtomicU64],
    side: u32,
}

impl SplitGrid<'_> {
    fn slot(&self, p: Point) -> usize {
        p.1 as usize * self.side as usize + p.0 as usize
    }

    fn is_split(&self, p: Point) -> bool {
        let slot = self.slot(p);
        self.split[slot / 64].load(Ordering::SeqCst) & 1 << (slot % 64) != 0
    }

    /// The bit of triangle `t` (of the diamond centred on `m`) in the visited flags: one
    /// per side of the diamond's diagonal, told by where `t`'s right angle lies.
    fn visited_bit(&self, t: &Triangle, m: Point) -> (usize, u64) {
        let offset = (t.c.0 - m.0, t.c.1 - m.1);
        let side = usize::from(offset.0 > 0 || (offset.0 == 0 && offset.1 > 0));
        let bit = 2 * self.slot(m) + side;
        (bit / 64, 1 << (bit % 64))
    }

    fn is_visited(&self, t: &Triangle, m: Point) -> bool {
        let (word, bit) = self.visited_bit(t, m);
        self.visited[word].load(Ordering::SeqCst) & bit != 0
    }

    /// Takes triangle `t` off a stack: queues its children if its diamond is split, else
    /// applies rule 1 to it (it splits its diamond when it misses). Nothing if another
    /// stack's copy of `t` was visited first, or `t` is of the finest level.
    ///
    /// A triangle whose diamond is split already needs no visited flag (no splitter will
    /// come), so most visits, in a fine mesh, cost one load and no locked write. (A copy
    /// of `t` on another stack then queues the children again, and the first of each to
    /// be tested or flagged goes on.)
    fn visit(&self, t: &Triangle, scan: &Scan<'_>, queue: &mut Vec<Triangle>) -> WithinStats {
        let Some(m) = t.midpoint() else {
            return WithinStats::default();
        };
        if self.is_split(m) {
            queue_children(t, m, queue);
            return WithinStats::default();
        }
        let (word, bit) = self.visited_bit(t, m);
        if self.visited[word].fetch_or(bit, Ordering::SeqCst) & bit != 0 {
            return WithinStats::default();
        }
        // Split since the first look: its splitter may have seen `t` unvisited.
        if self.is_split(m) {
            queue_children(t, m, queue);
            return WithinStats::default();
        }
        WithinStats {
            tested: 1,
            vertices: if scan.misses(t) {
                self.force_split(m, queue)
            } else {
                0
            },
        }
    }

    /// Splits the diamond centred on `m` after the diamonds its triangles came from
    /// (rule 2), queueing the children of its triangles visited so far (the others'
    /// visitors queue theirs); returns how many diamonds it split.
    fn force_split(&self, m: Point, queue: &mut Vec<Triangle>) -> u64 {
        if self.is_split(m) {
            return 0;
        }
        let n = self.side as i32 - 1;
        let triangles = diamond_of(m, n);
        let mut count = 0;
        for t in triangles.iter().flatten() {
            // A root's right-angle corner is a corner of the grid: no diamond above it.
            if !is_grid_corner(t.c, n) {
                count += self.force_split(t.c, queue);
            }
        }
        let slot = self.slot(m);
        let bit = 1 << (slot % 64);
        // Exactly one thread sets the flag.
        if self.split[slot / 64].fetch_or(bit, Ordering::SeqCst) & bit == 0 {
            count += 1;
            for t in triangles.iter().flatten() {
                if self.is_visited(t, m) {
                    queue_children(t, m, queue);
                }
            }
        }
        count
    }
}

/// Queues the children of `t` (split at `m`) that can split in turn.
fn queue_children(t: &Triangle, m: Point, queue: &mut Vec<Triangle>) {
    queue.extend(t.children(m).into_iter().filter(|c| c.midpoint().is_some()));
}

fn is_grid_corner(p: Point, n: i32) -> bool {
    (p.0 == 0 || p.0 == n) && (p.1 == 0 || p.1 == n)
}

/// Per small triangle shape, the offsets from its right-angle corner `c` of the samples it
/// covers, likeliest misses first ([`probes`]). The corners are left out: a vertex is drawn
/// at its own sample, which any mesh does (the row scan of larger triangles keeps them,
/// which matters only for an `M` below the `f32` rounding of a drawn height).
#[derive(Debug)]
struct Shapes {
    /// Indexed by [`Shapes::key`].
    offsets: Vec<Vec<Point>>,
}

impl Shapes {
    fn new() -> Shapes {
        let mut offsets = vec![Vec::new(); Shapes::key(SMALL_HALF_EXTENT, (1, 1)) + 1];
        for s in 1..=SMALL_HALF_EXTENT {
            for direction in [
                (1, 0),
                (-1, 0),
                (0, 1),
                (0, -1),
                (1, 1),
                (1, -1),
                (-1, 1),
                (-1, -1),
            ] {
                // Hypotenuse midpoint `m` seen from `c`: s along an axis (legs on diagonals)
                // or (s, s) on a diagonal (legs on the axes); the hypotenuse is across.
                let m = (s * direction.0, s * direction.1);
                let across = (-m.1, m.0);
                let t = Triangle {
                    a: (m.0 + across.0, m.1 + across.1),
                    b: (m.0 - across.0, m.1 - across.1),
                    c: (0, 0),
                };
                offsets[Shapes::key(s, direction)] = shape_offsets(&t);
            }
        }
        Shapes { offsets }
    }

    /// The list index of half-extent `s` (1 ..= SMALL) and direction `c → m`.
    fn key(s: i32, direction: Point) -> usize {
        ((s - 1) * 9 + (direction.0 + 1) * 3 + direction.1 + 1) as usize
    }

    /// The sample offsets of `t`, when it is small.
    fn of(&self, t: &Triangle) -> Option<&[Point]> {
        let s = t.half_extent();
        (s <= SMALL_HALF_EXTENT).then(|| {
            // `a + b − 2c` points from `c` towards the hypotenuse's midpoint.
            let towards = (t.a.0 + t.b.0 - 2 * t.c.0, t.a.1 + t.b.1 - 2 * t.c.1);
            let direction = (towards.0.signum(), towards.1.signum());
            self.offsets[Shapes::key(s, direction)].as_slice()
        })
    }
}

/// The samples of `t` (with `c` at the origin) but its corners, as [`SampleShape`] lists
/// them: the hypotenuse's midpoint first (martini's test), then the midpoints of the legs
/// and of `c–m` (the next levels' tests), then the rest row by row.
fn shape_offsets(t: &Triangle) -> Vec<Point> {
    let inside: Vec<Point> = SampleShape::new(t)
        .samples
        .iter()
        .map(|&(dx, dz, _)| (t.a.0 + dx, t.a.1 + dz))
        .collect();
    let mut offsets: Vec<Point> = probes(t).into_iter().flatten().collect();
    debug_assert!(offsets.iter().all(|p| inside.contains(p)));
    for p in inside {
        if ![t.a, t.b, t.c].contains(&p) && !offsets.contains(&p) {
            offsets.push(p);
        }
    }
    offsets
}

/// The samples a miss is likeliest at: the hypotenuse's midpoint `m` (martini's test),
/// then the midpoints of the legs and of `c–m`, which the children and grandchildren would
/// test (where they are samples: every one of them from a half-extent of 2 on).
fn probes(t: &Triangle) -> [Option<Point>; 4] {
    let m = half(t.a, t.b);
    [
        m,
        half(t.a, t.c),
        half(t.b, t.c),
        m.and_then(|m| half(m, t.c)),
    ]
}

/// The midpoint of `p` and `q`, when it is a sample.
fn half(p: Point, q: Point) -> Option<Point> {
    let (x, z) = (p.0 + q.0, p.1 + q.1);
    (x % 2 == 0 && z % 2 == 0).then_some((x / 2, z / 2))
}

/// The exact test of rule 1 over a heightfield.
struct Scan<'a> {
    field: &'a Heightfield,
    shapes: &'a Shapes,
    max_error: f64,
    scale: f64,
    offset: f64,
}

impl<'a> Scan<'a> {
    fn new(field: &'a Heightfield, shapes: &'a Shapes, max_error: f64) -> Scan<'a> {
        let mapping = field.mapping();
        Scan {
            field,
            shapes,
            max_error,
            scale: f64::from(mapping.height_scale),
            offset: f64::from(mapping.height_offset),
        }
    }

    /// Whether the plane of `t` misses a data sample it covers by more than `M`.
    fn misses(&self, t: &Triangle) -> bool {
        match self.field.samples() {
            Samples::U16(v) => self.misses_in(v, t),
            Samples::I16(v) => self.misses_in(v, t),
            Samples::F32(v) => self.misses_in(v, t),
        }
    }

    fn misses_in<T: Copy + Into<f64>>(&self, values: &[T], t: &Triangle) -> bool {
        let (width, height) = (self.field.width() as i32, self.field.height() as i32);
        let (lo, hi) = t.bounds();
        if lo.0 >= width || lo.1 >= height {
            return false; // all padding: no sample to miss
        }
        let index = |col: i32, row: i32| row as usize * width as usize + col as usize;
        let world = |value: T| value.into() * self.scale + self.offset;
        // A vertex is drawn at its world height rounded to f32; the padding repeats the
        // border.
        let drawn = |p: Point| {
            f64::from(world(values[index(p.0.min(width - 1), p.1.min(height - 1))]) as f32)
        };
        let (ha, hb, hc) = (drawn(t.a), drawn(t.b), drawn(t.c));
        // The plane as `hc + gx (col - c.col) + gz (row - c.row)`.
        let (da, db) = (
            (t.a.0 - t.c.0, t.a.1 - t.c.1),
            (t.b.0 - t.c.0, t.b.1 - t.c.1),
        );
        let inverse = 1.0 / f64::from(da.0 * db.1 - da.1 * db.0);
        let (ea, eb) = (ha - hc, hb - hc);
        let gx = (ea * f64::from(db.1) - eb * f64::from(da.1)) * inverse;
        let gz = (eb * f64::from(da.0) - ea * f64::from(db.0)) * inverse;
        let misses_at = |dx: i32, dz: i32| {
            let (col, row) = (t.c.0 + dx, t.c.1 + dz);
            (hc + gx * f64::from(dx) + gz * f64::from(dz) - world(values[index(col, row)])).abs()
                > self.max_error
        };
        let inside = hi.0 < width && hi.1 < height;
        if let (true, Some(offsets)) = (inside, self.shapes.of(t)) {
            return offsets.iter().any(|&(dx, dz)| misses_at(dx, dz));
        }
        let data = |p: &Point| p.0 < width && p.1 < height;
        let mut likely = probes(t).into_iter().flatten().filter(data);
        if likely.any(|p| misses_at(p.0 - t.c.0, p.1 - t.c.1)) {
            return true;
        }
        let edges = UnitEdges::new(t);
        for row in lo.1..=hi.1.min(height - 1) {
            let Some((first, last)) = edges.span(row, lo.0, hi.0.min(width - 1)) else {
                continue;
            };
            // One flag per row, an OR the compiler can vectorise (an integer counter: a
            // floating-point one would not be).
            let base = hc + gz * f64::from(row - t.c.1) + gx * f64::from(first - t.c.0);
            let mut missed = false;
            let samples = &values[index(first, row)..=index(last, row)];
            for (x, &sample) in (0..last - first + 1).zip(samples) {
                missed |= (base + gx * f64::from(x) - world(sample)).abs() > self.max_error;
            }
            if missed {
                return true;
            }
        }
        false
    }
}

/// A bintree triangle's three edges as inside tests along a row. Every edge runs along an
/// axis or a diagonal, so divided by its length its edge function changes by -1, 0 or 1
/// per column: a row's span needs no division.
struct UnitEdges {
    /// Per edge `(p, ux, uz)`: its start and unit direction, signed so that inside is
    /// `ux (row - p.row) - uz (col - p.col) >= 0`.
    edges: [(Point, i32, i32); 3],
}

impl UnitEdges {
    fn new(t: &Triangle) -> UnitEdges {
        let sign = crate::raster::edge_function(t.a, t.b, t.c).signum() as i32;
        let unit = |p: Point, q: Point| {
            let (dx, dz) = (q.0 - p.0, q.1 - p.1);
            debug_assert!(dx == 0 || dz == 0 || dx.abs() == dz.abs());
            (p, sign * dx.signum(), sign * dz.signum())
        };
        UnitEdges {
            edges: [unit(t.b, t.c), unit(t.c, t.a), unit(t.a, t.b)],
        }
    }

    /// The columns of `row` inside the triangle (edges included), within `first..=last`.
    #[inline]
    fn span(&self, row: i32, mut first: i32, mut last: i32) -> Option<(i32, i32)> {
        for &(p, ux, uz) in &self.edges {
            // ux (row - p.row) - uz (col - p.col) >= 0, linear in col with slope -uz.
            let at_zero = ux * (row - p.1) + uz * p.0;
            match uz {
                0 if at_zero < 0 => return None,
                0 => {}
                1 => last = last.min(at_zero),
                _ => first = first.max(-at_zero),
            }
        }
        (first <= last).then_some((first, last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lod::bintree::BintreeLod;
    use crate::lod::{LodAlgorithm, LodOptions, Selection, View};
    use std::collections::{BTreeMap, BTreeSet};

    /// Integer heights (exact ties) with ridges, a spike and a flat patch.
    fn integer_field(width: u32, height: u32) -> Heightfield {
        let values = (0..width * height)
            .map(|i| {
                let (c, r) = (i % width, i / width);
                let ridge = (c * 7 + r * 3) % 11;
                let flat = if c < width / 3 && r < height / 3 {
                    0
                } else {
                    1
                };
                (100 + flat * (ridge * 5 + (c * r) % 7) + u32::from((c, r) == (5, 9)) * 60) as u16
            })
            .collect();
        Heightfield::new(width, height, Samples::U16(values)).expect("valid")
    }

    /// Float heights under a mapping that does not round to exact values.
    fn float_field(width: u32, height: u32) -> Heightfield {
        let values = (0..width * height)
            .map(|i| {
                let (c, r) = ((i % width) as f32, (i / width) as f32);
                (c * 0.61).sin() * 40.0 + (r * 0.37).cos() * 25.0 + (c * r * 0.11).sin() * 9.0
            })
            .collect();
        let mapping = crate::heightfield::WorldMapping {
            cell_size: 3.0,
            height_scale: 0.1,
            height_offset: 1234.5,
        };
        Heightfield::from_f32(width, height, values)
            .and_then(|f| f.with_mapping(mapping))
            .expect("valid")
    }

    fn select(field: &Heightfield, max_error: f32) -> (Vec<u32>, WithinStats) {
        let (mut buffers, mut indices) = (WithinBuffers::default(), Vec::new());
        let stats = select_within(
            field,
            field.padded_side(),
            max_error,
            &mut buffers,
            &mut indices,
        );
        (indices, stats)
    }

    /// The drawn surface's largest miss over the samples of `t`, by brute force over every
    /// sample of the field (f64 areas; corners at their f32-rounded world heights).
    fn brute_error(field: &Heightfield, t: &Triangle) -> f64 {
        let mapping = field.mapping();
        let world = |col: i32, row: i32| {
            f64::from(field.raw(col as u32, row as u32)) * f64::from(mapping.height_scale)
                + f64::from(mapping.height_offset)
        };
        let (w, h) = (field.width() as i32, field.height() as i32);
        let corner = |p: Point| world(p.0.min(w - 1), p.1.min(h - 1)) as f32 as f64;
        let area = |p: Point, q: Point, x: Point| {
            f64::from(q.0 - p.0) * f64::from(x.1 - p.1)
                - f64::from(q.1 - p.1) * f64::from(x.0 - p.0)
        };
        let total = area(t.a, t.b, t.c);
        let mut worst = 0.0f64;
        for row in 0..h {
            for col in 0..w {
                let x = (col, row);
                let weights = [area(t.b, t.c, x), area(t.c, t.a, x), area(t.a, t.b, x)];
                if weights.iter().all(|v| v * total >= 0.0) {
                    let drawn = (weights[0] * corner(t.a)
                        + weights[1] * corner(t.b)
                        + weights[2] * corner(t.c))
                        / total;
                    worst = worst.max((drawn - world(col, row)).abs());
                }
            }
        }
        worst
    }

    /// Every triangle of the full bintree of a grid of `n` cells, with its depth.
    fn hierarchy(n: i32) -> Vec<Triangle> {
        let mut all = Vec::new();
        let mut stack = roots(n).to_vec();
        while let Some(t) = stack.pop() {
            all.push(t);
            if let Some(m) = t.midpoint() {
                stack.extend(t.children(m));
            }
        }
        all
    }

    /// The least set of split diamonds closed under the module's two rules, by iteration
    /// to a fixpoint: the parents of a diamond are read off the full hierarchy (the
    /// right-angle corners of the non-root triangles whose hypotenuse it centres).
    fn least_split_set(field: &Heightfield, max_error: f64) -> BTreeSet<Point> {
        let n = field.padded_side() as i32 - 1;
        let mut parents: BTreeMap<Point, Vec<Point>> = BTreeMap::new();
        let root_corners = roots(n).map(|t| t.c);
        for t in hierarchy(n) {
            if let Some(m) = t.midpoint() {
                // A root's right-angle corner is a grid corner: it has no parent.
                let entry = parents.entry(m).or_default();
                if !root_corners.contains(&t.c) {
                    entry.push(t.c);
                }
            }
        }
        fn close(m: Point, parents: &BTreeMap<Point, Vec<Point>>, split: &mut BTreeSet<Point>) {
            if split.insert(m) {
                for &p in &parents[&m] {
                    close(p, parents, split);
                }
            }
        }
        let mut split = BTreeSet::new();
        loop {
            let mut leaves = Vec::new();
            let mut stack = roots(n).to_vec();
            while let Some(t) = stack.pop() {
                match t.midpoint() {
                    Some(m) if split.contains(&m) => stack.extend(t.children(m)),
                    _ => leaves.push(t),
                }
            }
            let missing: Vec<Point> = leaves
                .iter()
                .filter_map(|t| t.midpoint().filter(|_| brute_error(field, t) > max_error))
                .collect();
            if missing.is_empty() {
                return split;
            }
            for m in missing {
                close(m, &parents, &mut split);
            }
        }
    }

    #[test]
    fn the_mesh_is_the_least_split_set_closed_under_both_rules() {
        let cases = [
            (
                integer_field(33, 33),
                vec![0.5, 5.0, 10.0, 20.0, 35.0, 60.0],
            ),
            (integer_field(21, 13), vec![1.0, 15.0, 25.0]),
            (float_field(29, 19), vec![0.05, 0.5, 2.0, 5.0]),
        ];
        for (field, errors) in cases {
            let n = field.padded_side() as i32 - 1;
            for max_error in errors {
                let expected = least_split_set(&field, f64::from(max_error));
                let (indices, stats) = select(&field, max_error);
                let side = field.padded_side();
                let used: BTreeSet<Point> = indices
                    .iter()
                    .map(|&i| ((i % side) as i32, (i / side) as i32))
                    .collect();
                let mut vertices: BTreeSet<Point> = expected.clone();
                vertices.extend([(0, 0), (n, 0), (0, n), (n, n)]);
                assert_eq!(
                    used,
                    vertices,
                    "{}x{} at M {max_error}",
                    field.width(),
                    field.height()
                );
                assert_eq!(stats.vertices, vertices.len() as u64);
            }
        }
    }

    /// On several threads the parts race to split shared diamonds; the result is still
    /// the least split set (fields large enough that the parts hold several levels).
    #[test]
    fn the_least_split_set_on_several_threads() {
        for (field, max_error) in [
            (integer_field(65, 65), 3.0),
            (integer_field(65, 40), 12.0),
            (float_field(70, 45), 0.3),
        ] {
            let expected = least_split_set(&field, f64::from(max_error));
            for threads in [1, 2, 3] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .expect("a thread pool");
                let (_, stats) = pool.install(|| select(&field, max_error));
                assert_eq!(
                    stats.vertices,
                    expected.len() as u64 + 4,
                    "{threads} threads"
                );
            }
        }
    }

    /// A forced split queues only children of triangles already visited, so a part walks
    /// its own subtrees depth first: its stack stays near their depth. (When the splitter
    /// queued every new triangle, one part's stack came to hold most of the mesh: 131,072
    /// triangles here.)
    #[test]
    fn a_parts_stack_stays_near_the_depth_of_its_subtrees() {
        let side = 257;
        let values = (0..side * side)
            .map(|i| {
                let (c, r) = ((i % side) as f32, (i / side) as f32);
                (c * 0.061).sin() * 40.0 + (r * 0.037).cos() * 25.0 + (c * r * 0.0011).sin() * 9.0
            })
            .collect();
        let field = Heightfield::from_f32(side, side, values).expect("valid");
        // One thread: the parts run one after the other, in a fixed order (32 at most
        // measured). Two: a part also queues children of triangles another part left
        // whole, as timing falls, so the bound is looser.
        for (threads, bound) in [(1, 64), (2, 1024)] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a thread pool");
            let (mut buffers, mut indices) = (WithinBuffers::default(), Vec::new());
            pool.install(|| select_within(&field, side, 0.01, &mut buffers, &mut indices));
            assert!(indices.len() / 3 > 100_000, "{}", indices.len() / 3);
            let deepest = buffers.parts.iter().map(|p| p.stack.capacity()).max();
            assert!(deepest <= Some(bound), "{deepest:?} on {threads} threads");
        }
    }

    #[test]
    fn the_same_triangles_in_the_same_order_on_any_number_of_threads() {
        for (field, max_error) in [(integer_field(129, 97), 12.0), (float_field(200, 57), 0.7)] {
            let on = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .expect("a thread pool");
                pool.install(|| select(&field, max_error))
            };
            let (one, stats) = on(1);
            assert!(stats.vertices > 100, "the parts have work: {stats:?}");
            for threads in [2, 3, 8] {
                let (many, many_stats) = on(threads);
                assert_eq!(many, one, "{threads} threads");
                assert_eq!(many_stats.vertices, stats.vertices);
            }
        }
    }

    #[test]
    fn an_error_of_exactly_m_is_kept_and_a_larger_one_split() {
        let mut values = vec![0u16; 25];
        values[2 * 5 + 2] = 7; // the roots' shared hypotenuse midpoint
        let field = Heightfield::new(5, 5, Samples::U16(values)).expect("valid");
        assert_eq!(select(&field, 7.0).0.len(), 2 * 3);
        assert!(select(&field, 6.99).0.len() > 2 * 3);
    }

    #[test]
    fn never_finer_than_the_per_diamond_table() {
        for field in [integer_field(33, 33), float_field(29, 19)] {
            let mut lod = BintreeLod::new(&field, LodOptions::default());
            let (lo, hi) = field.world_range();
            for fraction in [0.01, 0.05, 0.2] {
                let max_error = (hi - lo) * fraction;
                let view = View::world_error(max_error).expect("valid");
                // The table's mesh: the view-dependent traversal with a world-error view.
                lod.indices.clear();
                let pass = crate::lod::Pass {
                    view: &view,
                    frustum: None,
                    view_angle_aware: false,
                };
                for root in lod.roots() {
                    lod.visit(&pass, root, crate::camera::Frustum::ALL_PLANES);
                }
                let table: BTreeSet<u32> = lod.indices.iter().copied().collect();
                let Selection::Triangles { indices, .. } = lod.select(&view) else {
                    panic!("the bintree draws triangles");
                };
                let within: BTreeSet<u32> = indices.iter().copied().collect();
                assert!(within.is_subset(&table), "M {max_error}");
                assert!(within.len() <= table.len());
            }
        }
    }

    #[test]
    fn shapes_list_every_sample_but_the_corners_likeliest_first() {
        let shapes = Shapes::new();
        for s in 1..=SMALL_HALF_EXTENT {
            for t in hierarchy(64)
                .into_iter()
                .filter(|t| t.half_extent() == s)
                .take(64)
            {
                let offsets = shapes.of(&t).expect("small");
                let listed: BTreeSet<Point> = offsets
                    .iter()
                    .map(|&(dx, dz)| (t.c.0 + dx, t.c.1 + dz))
                    .collect();
                assert_eq!(listed.len(), offsets.len(), "no sample twice");
                let mut expected = BTreeSet::new();
                let (lo, hi) = t.bounds();
                for row in lo.1..=hi.1 {
                    for col in lo.0..=hi.0 {
                        let x = (col, row);
                        let e = [(t.b, t.c), (t.c, t.a), (t.a, t.b)]
                            .map(|(p, q)| crate::raster::edge_function(p, q, x));
                        let inside = e.iter().all(|&v| v >= 0) || e.iter().all(|&v| v <= 0);
                        if inside && ![t.a, t.b, t.c].contains(&x) {
                            expected.insert(x);
                        }
                    }
                }
                assert_eq!(listed, expected, "{t:?}");
                let m = t.midpoint().expect("splittable");
                assert_eq!((t.c.0 + offsets[0].0, t.c.1 + offsets[0].1), m);
            }
        }
    }

    #[test]
    fn world_error_only_defers_the_table_to_the_first_screen_view() {
        let field = float_field(29, 19);
        let options = LodOptions::default();
        let mut lazy = BintreeLod::new(&field, options.with_world_error_only(true));
        let mut eager = BintreeLod::new(&field, options);
        let world = View::world_error(1.0).expect("valid");
        let a = lazy.select(&world).triangle_count();
        assert_eq!(lazy.state_bytes(), 0, "no table for a world-error view");
        assert_eq!(a, eager.select(&world).triangle_count());
        let (w, d) = field.world_size();
        let camera = crate::Camera::new(
            glam::Vec3::new(-10.0, 60.0, -10.0),
            glam::Vec3::new(0.5 * w, 0.0, 0.5 * d),
            1.0,
            (640, 480),
            0.5,
            1e4,
        )
        .expect("valid");
        let screen = View::screen(camera, 0.5).expect("valid");
        let lazy_indices = match lazy.select(&screen) {
            Selection::Triangles { indices, .. } => indices.to_vec(),
            Selection::Patches { .. } | Selection::Listed { .. } => panic!("triangles"),
        };
        let eager_indices = match eager.select(&screen) {
            Selection::Triangles { indices, .. } => indices.to_vec(),
            Selection::Patches { .. } | Selection::Listed { .. } => panic!("triangles"),
        };
        assert_eq!(lazy_indices, eager_indices);
        assert_eq!(lazy.state_bytes(), eager.state_bytes());
    }
}
