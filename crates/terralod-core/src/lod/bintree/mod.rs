//! A right-triangle bintree (RTIN, the mesh martini builds) with exact errors: the
//! finest-grained error-driven mesh of the registry, and its tightest view-independent mode.
//!
//! # The mesh
//!
//! The padded square grid of `2^n + 1` samples is cut along its diagonal into two right
//! isosceles triangles; a triangle splits at the midpoint `m` of its hypotenuse into two
//! halves with `m` as their right-angle corner, down to triangles of half a cell. The two
//! triangles that share a hypotenuse form a *diamond* centred on `m`; every grid vertex
//! except the four corners is the centre of exactly one diamond, so per-diamond data is one
//! record per vertex. A mesh in which each diamond's two triangles split together, and a
//! diamond splits only when the diamonds its triangles came from split (its *parents*), is
//! conforming: no T-junction, no crack.
//!
//! # Exact errors, monotone towards the root
//!
//! At build time every triangle's error is measured exactly: the largest vertical distance
//! between its plane (through its three vertices) and every data sample inside it or on
//! its edges (f64 from the raw samples, rounded up to f32). A diamond's error is the larger
//! of its two triangles' and of its four children's, processed from the finest level up,
//! so a diamond's error bounds everything drawn in it while unsplit, and a child never
//! needs a split its parents do not. Martini keeps only the error at each hypotenuse
//! midpoint (not an upper bound: its meshes exceed the requested error); the exact error
//! splits only where the surface needs it, so at equal measured error this mesh has fewer
//! vertices than martini's.
//!
//! # View-dependent selection
//!
//! A diamond is accepted when [`View::accepts`] passes its error over a box holding it and
//! all its descendants: `m ± 3s` (hypotenuse on a diagonal, `s` half its axis extent) or
//! `m ± 2s` (hypotenuse on an axis) in x and z (the descendants' union, by induction over
//! the two kinds), and the lowest and highest sample and vertex there in y, gathered from
//! the children like the error. Both parts only grow towards the root, and the bound grows
//! with the box and the error, so the test is monotone and the mesh conforms for any
//! camera. Culling tests the triangle's own extent with that y range (nested from parent to
//! child, so a child is tested against the frustum planes its parent crosses only); a
//! culled triangle is dropped, which leaves an edge of the drawn part but never a
//! T-junction, since the split decisions do not depend on culling.
//!
//! Samples beyond the data (the padding) are drawn with the repeated border heights but
//! carry no error: nothing is measured there.

mod within;

use super::{
    GridVertices, LodAlgorithm, LodOptions, MorphedHeight, Pass, Selection, SelectionStats,
    Tolerance, View, round_up,
};
use crate::camera::{Aabb, Frustum};
use crate::heightfield::{Heightfield, Samples};
use crate::raster::{Point, edge_function, for_each_row_span, interpolate};
use crate::rounding::round_down;
use glam::Vec3;
use rayon::prelude::*;
use std::ops::ControlFlow;
use std::time::Instant;
use within::WithinBuffers;

/// Per diamond (one per grid vertex): the error bound and the y range of the diamond and
/// all its descendants, world units.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Diamond {
    error: f32,
    low: f32,
    high: f32,
}

impl Diamond {
    const EMPTY: Diamond = Diamond {
        error: 0.0,
        low: f32::INFINITY,
        high: f32::NEG_INFINITY,
    };

    fn merge(&mut self, other: Diamond) {
        self.error = self.error.max(other.error);
        self.low = self.low.min(other.low);
        self.high = self.high.max(other.high);
    }
}

/// A triangle of the bintree: hypotenuse `a`–`b`, right angle at `c`.
#[derive(Clone, Copy, Debug)]
struct Triangle {
    a: Point,
    b: Point,
    c: Point,
}

impl Triangle {
    /// The hypotenuse's midpoint, when it is a grid vertex (the triangle can split).
    fn midpoint(&self) -> Option<Point> {
        let (x, z) = (self.a.0 + self.b.0, self.a.1 + self.b.1);
        (x % 2 == 0 && z % 2 == 0).then_some((x / 2, z / 2))
    }

    fn children(&self, m: Point) -> [Triangle; 2] {
        [
            Triangle {
                a: self.a,
                b: self.c,
                c: m,
            },
            Triangle {
                a: self.c,
                b: self.b,
                c: m,
            },
        ]
    }

    /// The smallest and largest corner coordinates: the triangle's grid bounding box.
    fn bounds(&self) -> (Point, Point) {
        let [a, b, c] = [self.a, self.b, self.c];
        (
            (a.0.min(b.0).min(c.0), a.1.min(b.1).min(c.1)),
            (a.0.max(b.0).max(c.0), a.1.max(b.1).max(c.1)),
        )
    }

    /// Half the hypotenuse's axis extent: `s` of the module docs.
    fn half_extent(&self) -> i32 {
        (self.b.0 - self.a.0).abs().max((self.b.1 - self.a.1).abs()) / 2
    }

    /// The radius (in cells, L∞) of the region holding the diamond on this hypotenuse and
    /// all its descendants.
    fn descendant_radius(&self) -> i32 {
        let diagonal = self.a.0 != self.b.0 && self.a.1 != self.b.1;
        self.half_extent() * if diagonal { 3 } else { 2 }
    }
}

/// The largest padded grid side the bintree takes. Its records (12 bytes a sample, built
/// for screen views), its split flags and its `u32` vertex indices span the whole padded
/// square, so a thin terrain that pads to a huge square is refused by the commands
/// (quadtree and adaptive store only what touches the data). At this side the records
/// take about 13 GB.
pub const MAX_PADDED_SIDE: u32 = 32769;

/// The right-triangle bintree. Borrows the heightfield; owns one record per grid vertex.
#[derive(Debug)]
pub struct BintreeLod<'a> {
    field: &'a Heightfield,
    options: LodOptions,
    /// Samples a side of the padded square grid.
    side: u32,
    /// Empty until a screen view needs it; in [`DiamondLayout`] order.
    diamonds: Vec<Diamond>,
    layout: DiamondLayout,
    vertices: GridVertices,
    indices: Vec<u32>,
    within: WithinBuffers,
    stats: SelectionStats,
}

impl<'a> BintreeLod<'a> {
    /// Builds the per-diamond errors and ranges (one exact pass over the samples per
    /// level) that screen views need; with [`LodOptions::world_error_only`] they wait for
    /// the first screen view, since world-error views never read them.
    pub fn new(field: &'a Heightfield, options: LodOptions) -> BintreeLod<'a> {
        let side = field.padded_side();
        let mut lod = BintreeLod {
            field,
            options,
            side,
            diamonds: Vec::new(),
            layout: DiamondLayout::new(side as i32 - 1),
            vertices: GridVertices {
                stride: side,
                rows: side,
                shift: 0,
            },
            indices: Vec::new(),
            within: WithinBuffers::default(),
            stats: SelectionStats::default(),
        };
        if !options.world_error_only {
            lod.build_diamonds();
        }
        lod
    }

    fn roots(&self) -> [Triangle; 2] {
        roots(self.side as i32 - 1)
    }

    fn slot(&self, m: Point) -> usize {
        self.layout.slot(m)
    }

    fn world_height(&self, p: Point) -> f64 {
        let mapping = self.field.mapping();
        f64::from(self.field.raw_clamped(p.0 as u32, p.1 as u32)) * f64::from(mapping.height_scale)
            + f64::from(mapping.height_offset)
    }

    /// Depths from the finest splittable level up to the roots', each finished before its
    /// parents read it. A depth's diamonds are independent: they are measured in parallel,
    /// a bounded batch at a time, so the build needs no memory beyond the records.
    fn build_diamonds(&mut self) {
        let n = self.side as i32 - 1;
        self.diamonds = vec![Diamond::EMPTY; self.layout.len()];
        let levels = 2 * n.trailing_zeros();
        let mut batch: Vec<Point> = Vec::with_capacity(BATCH);
        let mut measured: Vec<Diamond> = Vec::with_capacity(BATCH);
        for depth in (0..levels).rev() {
            let s = n >> (depth / 2 + 1);
            let diagonal = depth % 2 == 0;
            // Small triangles (most of them) read a per-shape list of samples and weights
            // instead of working out row spans; a depth has eight shapes at most.
            let shapes: Vec<SampleShape> = if s <= SMALL_HALF_EXTENT {
                half_diagonals(s, diagonal)
                    .into_iter()
                    .flat_map(|d| diamond_triangles((0, 0), d))
                    .map(|t| SampleShape::new(&t))
                    .collect()
            } else {
                Vec::new()
            };
            let mut flush = |lod: &mut Self, batch: &mut Vec<Point>| {
                batch
                    .par_iter()
                    .map(|&m| lod.measure_diamond(m, &shapes))
                    .collect_into_vec(&mut measured);
                for (&m, &d) in batch.iter().zip(&measured) {
                    let slot = lod.slot(m);
                    lod.diamonds[slot] = d;
                }
                batch.clear();
            };
            for j in 0..=n / s {
                for i in 0..=n / s {
                    let centre = if diagonal {
                        i % 2 == 1 && j % 2 == 1
                    } else {
                        (i + j) % 2 == 1
                    };
                    if centre {
                        batch.push((i * s, j * s));
                        if batch.len() == BATCH {
                            flush(self, &mut batch);
                        }
                    }
                }
            }
            flush(self, &mut batch);
        }
    }

    /// The record of the diamond centred on `m`: its one or two triangles (one on the
    /// grid's edge) measured, merged with its children's records.
    fn measure_diamond(&self, m: Point, shapes: &[SampleShape]) -> Diamond {
        let mut record = Diamond::EMPTY;
        for t in diamond_of(m, self.side as i32 - 1).iter().flatten() {
            record.merge(match shapes.iter().find(|shape| shape.fits(t)) {
                Some(shape) => self.measure_with(t, shape),
                None => self.measure(t),
            });
            for child in t.children(m) {
                if let Some(cm) = child.midpoint() {
                    record.merge(self.diamonds[self.slot(cm)]);
                }
            }
        }
        record
    }

    /// The exact error of a triangle's plane over the data samples it covers, and the y
    /// range of those samples and of its vertices.
    fn measure(&self, t: &Triangle) -> Diamond {
        let heights = [t.a, t.b, t.c].map(|p| self.world_height(p));
        if self.beyond_data(t) {
            return vertex_range(heights);
        }
        match self.field.samples() {
            Samples::U16(v) => measure_triangle(self.field, v, t, heights),
            Samples::I16(v) => measure_triangle(self.field, v, t, heights),
            Samples::F32(v) => measure_triangle(self.field, v, t, heights),
        }
    }

    /// [`BintreeLod::measure`] through a precomputed list of the samples a triangle of
    /// this shape covers.
    fn measure_with(&self, t: &Triangle, shape: &SampleShape) -> Diamond {
        let heights = [t.a, t.b, t.c].map(|p| self.world_height(p));
        let mut range = vertex_range(heights);
        if self.beyond_data(t) {
            return range;
        }
        let (width, height) = (self.field.width() as i32, self.field.height() as i32);
        let mapping = self.field.mapping();
        let (scale, offset) = (
            f64::from(mapping.height_scale),
            f64::from(mapping.height_offset),
        );
        let samples = self.field.samples();
        let mut error = 0.0f64;
        let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
        for &(dx, dz, weights) in &shape.samples {
            let (col, row) = (t.a.0 + dx, t.a.1 + dz);
            if col >= width || row >= height {
                continue;
            }
            let drawn = interpolate(weights, heights, shape.area);
            let truth = f64::from(samples.get((row * width + col) as usize)) * scale + offset;
            error = error.max((drawn - truth).abs());
            low = low.min(truth);
            high = high.max(truth);
        }
        finish_range(&mut range, error, low, high);
        range
    }

    /// Whether a triangle covers no data sample (it lies in the padding).
    fn beyond_data(&self, t: &Triangle) -> bool {
        let ((col, row), _) = t.bounds();
        col >= self.field.width() as i32 || row >= self.field.height() as i32
    }

    /// The world box of grid region `lo..=hi` (cells) between heights `low` and `high`.
    fn world_box(&self, lo: Point, hi: Point, low: f32, high: f32) -> Aabb {
        let cell = self.field.mapping().cell_size;
        Aabb::new(
            Vec3::new(lo.0 as f32 * cell, low, lo.1 as f32 * cell),
            Vec3::new(hi.0 as f32 * cell, high, hi.1 as f32 * cell),
        )
    }

    fn visit(&mut self, pass: &Pass<'_>, t: Triangle, planes: u8) {
        self.stats.nodes_visited += 1;
        let diamond = t.midpoint().map(|m| (m, self.diamonds[self.slot(m)]));
        let mut planes = planes;
        if let (true, Some(frustum)) = (pass.view.cull() && planes != 0, pass.frustum) {
            let (low, high) = match diamond {
                Some((_, d)) => (d.low, d.high),
                None => {
                    let h = [t.a, t.b, t.c].map(|p| self.world_height(p));
                    (
                        round_down(h[0].min(h[1]).min(h[2])),
                        round_up(h[0].max(h[1]).max(h[2])),
                    )
                }
            };
            let (lo, hi) = t.bounds();
            match frustum.classify_planes(&self.world_box(lo, hi, low, high), planes) {
                None => return,
                Some(crossing) => planes = crossing,
            }
        }
        if let Some((m, d)) = diamond {
            let r = t.descendant_radius();
            let region = self.world_box((m.0 - r, m.1 - r), (m.0 + r, m.1 + r), d.low, d.high);
            if !pass.view.accepts(d.error, &region, pass.view_angle_aware) {
                for child in t.children(m) {
                    self.visit(pass, child, planes);
                }
                return;
            }
        }
        self.stats.nodes_drawn += 1;
        emit(&mut self.indices, self.side, &t);
    }
}

/// Where each diamond's record lies: depth by depth from the roots, each depth's centres
/// row by row. A selection visits the coarse depths everywhere and the fine ones only
/// near the camera, so the records it reads stay in a few cache lines and pages on any
/// size of terrain (row-major over the whole grid, the coarse records lay a page apart:
/// a 16385² terrain selected 2.7 × slower than a 1025² one drawing the same nodes).
#[derive(Clone, Debug)]
struct DiamondLayout {
    /// Cells a side, a power of two.
    n: i32,
    /// The first slot of each depth, and the total after the last.
    offsets: Vec<usize>,
}

impl DiamondLayout {
    fn new(n: i32) -> DiamondLayout {
        let levels = 2 * n.trailing_zeros();
        let mut offsets = vec![0];
        for depth in 0..levels {
            let s = n >> (depth / 2 + 1);
            let count = if depth % 2 == 0 {
                // Centres at odd multiples of `s` in both coordinates.
                (n / (2 * s)) as usize * (n / (2 * s)) as usize
            } else {
                // Odd sums of multiples of `s`: half of an odd square, rounded down.
                let w = (n / s + 1) as usize;
                w * w / 2
            };
            offsets.push(offsets[depth as usize] + count);
        }
        DiamondLayout { n, offsets }
    }

    fn len(&self) -> usize {
        *self.offsets.last().expect("one offset at least")
    }

    /// The slot of the diamond centred on `m` (any grid vertex but a corner): its depth
    /// ([`diamond_level`]), then its place in the depth's rows.
    #[inline]
    fn slot(&self, m: Point) -> usize {
        debug_assert!(m.0 <= self.n && m.1 <= self.n);
        let (shift, diagonal) = diamond_level(m);
        let (i, j) = ((m.0 >> shift) as usize, (m.1 >> shift) as usize);
        let levels_below = (self.n.trailing_zeros() - shift - 1) as usize;
        if diagonal {
            let width = (self.n >> (shift + 1)) as usize;
            self.offsets[2 * levels_below] + (j >> 1) * width + (i >> 1)
        } else {
            let width = (self.n >> shift) as usize + 1;
            self.offsets[2 * levels_below + 1] + (j * width + i) / 2
        }
    }
}

/// The two root triangles of a grid of `n` cells a side.
fn roots(n: i32) -> [Triangle; 2] {
    [
        Triangle {
            a: (0, 0),
            b: (n, n),
            c: (n, 0),
        },
        Triangle {
            a: (n, n),
            b: (0, 0),
            c: (0, n),
        },
    ]
}

/// Appends triangle `t` of a grid of `side` samples a side to `indices`, counter-clockwise
/// seen from above (+y): negative in (col, row) with rows down.
fn emit(indices: &mut Vec<u32>, side: u32, t: &Triangle) {
    let index = |p: Point| p.1 as u32 * side + p.0 as u32;
    let (a, b, c) = (index(t.a), index(t.b), index(t.c));
    if edge_function(t.a, t.b, t.c) < 0 {
        indices.extend_from_slice(&[a, b, c]);
    } else {
        indices.extend_from_slice(&[a, c, b]);
    }
}

/// [`BintreeLod::measure`] over the samples in their stored type: per row, the span of
/// columns inside the triangle from its three edge functions (exact integers), each
/// sample's barycentric weights stepped along the row in integers, the plane's height
/// there in f64.
fn measure_triangle<T: Copy + Into<f64>>(
    field: &Heightfield,
    values: &[T],
    t: &Triangle,
    heights: [f64; 3],
) -> Diamond {
    let mut range = vertex_range(heights);
    let mapping = field.mapping();
    let (scale, offset) = (
        f64::from(mapping.height_scale),
        f64::from(mapping.height_offset),
    );
    let width = field.width() as i32;
    let mut error = 0.0f64;
    let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
    let corners = [t.a, t.b, t.c];
    let area = edge_function(t.a, t.b, t.c).abs();
    for_each_row_span(corners, width, field.height() as i32, |span| {
        let base = span.row as usize * width as usize;
        let mut w = span.weights;
        for col in span.first..=span.last {
            debug_assert!(w.iter().all(|&v| v >= 0));
            let drawn = interpolate(w, heights, area);
            let truth = values[base + col as usize].into() * scale + offset;
            error = error.max((drawn - truth).abs());
            low = low.min(truth);
            high = high.max(truth);
            span.advance(&mut w);
        }
        ControlFlow::Continue(())
    });
    finish_range(&mut range, error, low, high);
    range
}

/// Triangles with a hypotenuse half-extent up to this use a [`SampleShape`].
const SMALL_HALF_EXTENT: i32 = 4;

/// The samples a triangle of one shape covers, relative to its corner `a`, with their
/// barycentric weights.
struct SampleShape {
    b: Point,
    c: Point,
    /// The doubled area, positive; weights are edge functions of the same sign.
    area: i64,
    samples: Vec<(i32, i32, [i64; 3])>,
}

impl SampleShape {
    fn new(t: &Triangle) -> SampleShape {
        let (b, c) = (
            (t.b.0 - t.a.0, t.b.1 - t.a.1),
            (t.c.0 - t.a.0, t.c.1 - t.a.1),
        );
        let a = (0, 0);
        let area = edge_function(a, b, c);
        let sign = area.signum();
        let mut samples = Vec::new();
        let r = t.half_extent() * 2;
        for dz in -r..=r {
            for dx in -r..=r {
                let x = (dx, dz);
                let w = [
                    edge_function(b, c, x),
                    edge_function(c, a, x),
                    edge_function(a, b, x),
                ]
                .map(|e| e * sign);
                if w.iter().all(|&w| w >= 0) {
                    samples.push((dx, dz, w));
                }
            }
        }
        SampleShape {
            b,
            c,
            area: area * sign,
            samples,
        }
    }

    fn fits(&self, t: &Triangle) -> bool {
        (t.b.0 - t.a.0, t.b.1 - t.a.1) == self.b && (t.c.0 - t.a.0, t.c.1 - t.a.1) == self.c
    }
}

/// The y range of a triangle's vertices.
fn vertex_range(heights: [f64; 3]) -> Diamond {
    let mut range = Diamond::EMPTY;
    for h in heights {
        range.low = range.low.min(round_down(h));
        range.high = range.high.max(round_up(h));
    }
    range
}

/// Adds the covered samples' range and the error to `range`. The error is the one the
/// oracle measures to the last bit where sums of weighted heights are exact (integer
/// heights): an exact plane keeps 0 and a 5 m terrace step stays 5 m. Elsewhere the two
/// may differ by the f64 rounding of a sum, far below the f32 rounding of drawn vertex
/// heights that every bound here already lives with.
fn finish_range(range: &mut Diamond, error: f64, low: f64, high: f64) {
    if low <= high {
        range.low = range.low.min(round_down(low));
        range.high = range.high.max(round_up(high));
    }
    range.error = round_up(error);
}

/// Diamonds measured in parallel per batch.
const BATCH: usize = 1 << 14;

/// The half-diagonal `d` (hypotenuse from `m - d` to `m + d`) of the diamond centred on
/// `m`, at a depth with half-extent `s`. On an axis it follows the axis on which `m` is an
/// odd multiple of `s`; on a diagonal the direction alternates like a checkerboard of
/// `2s` blocks, `(s, s)` where `(i + j) / 2` is odd for `m = (i s, j s)` (the root's
/// diagonal runs from `(0, 0)` to `(n, n)`).
fn half_diagonal(m: Point, s: i32, diagonal: bool) -> Point {
    debug_assert!(s > 0 && s & (s - 1) == 0 && m.0 >= 0 && m.1 >= 0);
    // `s` is a power of two and `m` non-negative: shifts, not divisions (a hot path).
    let shift = s.trailing_zeros();
    let (i, j) = (m.0 >> shift, m.1 >> shift);
    match (diagonal, i & 1 == 1) {
        (true, _) if ((i + j) >> 1) & 1 == 1 => (s, s),
        (true, _) => (s, -s),
        (false, true) => (s, 0),
        (false, false) => (0, s),
    }
}

/// The depth of the diamond centred on `m` (any grid vertex but a corner), from `m` alone:
/// `log2` of its half-extent `s`, and whether its hypotenuse is on a diagonal. Centres on a
/// diagonal level are odd multiples of `s` in both coordinates, those on an axis level in
/// exactly one.
#[inline]
fn diamond_level(m: Point) -> (u32, bool) {
    debug_assert!(m.0 >= 0 && m.1 >= 0 && m.0 | m.1 != 0);
    let shift = (m.0 | m.1).trailing_zeros();
    (shift, (m.0 >> shift) & (m.1 >> shift) & 1 == 1)
}

/// The triangles (one or two, inside a grid of `n` cells) of the diamond centred on `m`.
fn diamond_of(m: Point, n: i32) -> [Option<Triangle>; 2] {
    let (shift, diagonal) = diamond_level(m);
    let inside = |t: &Triangle| (0..=n).contains(&t.c.0) && (0..=n).contains(&t.c.1);
    diamond_triangles(m, half_diagonal(m, 1 << shift, diagonal)).map(|t| inside(&t).then_some(t))
}

/// The half-diagonals a depth's diamonds can have.
fn half_diagonals(s: i32, diagonal: bool) -> [Point; 2] {
    if diagonal {
        [(s, s), (s, -s)]
    } else {
        [(s, 0), (0, s)]
    }
}

/// The two triangles of the diamond centred on `m` with half-diagonal `d` (one of them may
/// lie beyond the grid).
fn diamond_triangles(m: Point, d: Point) -> [Triangle; 2] {
    let (a, b) = ((m.0 - d.0, m.1 - d.1), (m.0 + d.0, m.1 + d.1));
    let perp = (d.1, -d.0);
    [(m.0 + perp.0, m.1 + perp.1), (m.0 - perp.0, m.1 - perp.1)].map(|c| Triangle { a, b, c })
}

impl LodAlgorithm for BintreeLod<'_> {
    fn name(&self) -> &'static str {
        "bintree"
    }

    fn select(&mut self, view: &View) -> Selection<'_> {
        let started = Instant::now();
        self.indices.clear();
        self.stats = SelectionStats::default();
        if let Tolerance::WorldError(max_error) = view.tolerance() {
            let within = within::select_within(
                self.field,
                self.side,
                max_error,
                &mut self.within,
                &mut self.indices,
            );
            self.stats.nodes_visited = within.tested;
            self.stats.nodes_drawn = (self.indices.len() / 3) as u64;
            self.stats.vertices = Some(within.vertices);
        } else {
            if self.diamonds.is_empty() {
                self.build_diamonds();
            }
            let pass = Pass {
                view,
                frustum: view.frustum(),
                view_angle_aware: self.options.view_angle_aware,
            };
            for root in self.roots() {
                self.visit(&pass, root, Frustum::ALL_PLANES);
            }
        }
        self.stats.triangles = (self.indices.len() / 3) as u64;
        self.stats.select_time = started.elapsed();
        Selection::Triangles {
            vertices: self.vertices,
            indices: &self.indices,
            morphs: &[] as &[MorphedHeight],
        }
    }

    fn stats(&self) -> &SelectionStats {
        &self.stats
    }

    fn state_bytes(&self) -> usize {
        self.diamonds.len() * size_of::<Diamond>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends the triangles at `depth` below `t`.
    fn collect_at_depth(t: Triangle, depth: u32, out: &mut Vec<Triangle>) {
        if depth == 0 {
            out.push(t);
            return;
        }
        if let Some(m) = t.midpoint() {
            for child in t.children(m) {
                collect_at_depth(child, depth - 1, out);
            }
        }
    }

    fn bumpy(side: u32) -> Heightfield {
        let values = (0..side * side)
            .map(|i| {
                let (c, r) = ((i % side) as f32, (i / side) as f32);
                (c * 0.7).sin() * 5.0 + (r * 0.3).cos() * 3.0 + ((c * r) as u32 % 5) as f32
            })
            .collect();
        Heightfield::from_f32(side, side, values).expect("valid")
    }

    #[test]
    fn every_vertex_but_the_corners_is_one_diamond_centre() {
        for side in [3, 17, 65] {
            let field = bumpy(side);
            let lod = BintreeLod::new(&field, LodOptions::default());
            let mut slots = std::collections::HashSet::new();
            let levels = 2 * (lod.side - 1).trailing_zeros();
            for depth in 0..levels {
                let mut triangles = Vec::new();
                for root in lod.roots() {
                    collect_at_depth(root, depth, &mut triangles);
                }
                let layout = &lod.layout;
                let range = layout.offsets[depth as usize]..layout.offsets[depth as usize + 1];
                for t in triangles {
                    if let Some(m) = t.midpoint() {
                        // Each centre in its depth's slots, once (a diamond's two
                        // triangles share it).
                        assert!(range.contains(&lod.slot(m)), "{m:?} at depth {depth}");
                        slots.insert(lod.slot(m));
                    }
                }
            }
            // A slot for every vertex but the corners, and no other.
            assert_eq!(slots.len(), (side * side - 4) as usize);
            assert_eq!(lod.layout.len(), slots.len());
            assert!(slots.iter().all(|&s| s < slots.len()));
            // Every diamond got a range (its own triangles at least).
            assert!(lod.diamonds.iter().all(|d| d.low <= d.high));
        }
    }

    #[test]
    fn the_row_spans_measure_exactly_what_a_brute_force_scan_does() {
        for (w, h) in [(17, 17), (13, 9)] {
            let field = bumpy(17);
            let values: Vec<f32> = (0..w * h)
                .map(|i| field.raw(i % w, i / w) * if i % 3 == 0 { -1.0 } else { 1.0 })
                .collect();
            let field = Heightfield::from_f32(w, h, values).expect("valid");
            let lod = BintreeLod::new(&field, LodOptions::default());
            let levels = 2 * (lod.side - 1).trailing_zeros();
            for depth in 0..=levels {
                let mut triangles = Vec::new();
                for root in lod.roots() {
                    collect_at_depth(root, depth, &mut triangles);
                }
                for t in triangles {
                    let hs = [t.a, t.b, t.c].map(|p| lod.world_height(p));
                    let e = |p: Point, q: Point, x: Point| {
                        f64::from((q.0 - p.0) * (x.1 - p.1) - (q.1 - p.1) * (x.0 - p.0))
                    };
                    let area = e(t.a, t.b, t.c);
                    let mut brute = 0.0f64;
                    for row in 0..h as i32 {
                        for col in 0..w as i32 {
                            let x = (col, row);
                            let ws = [e(t.b, t.c, x), e(t.c, t.a, x), e(t.a, t.b, x)];
                            if ws.iter().all(|v| v * area >= 0.0) {
                                let drawn = (ws[0] * hs[0] + ws[1] * hs[1] + ws[2] * hs[2]) / area;
                                let truth = f64::from(field.raw(col as u32, row as u32));
                                brute = brute.max((drawn - truth).abs());
                            }
                        }
                    }
                    let measured = lod.measure(&t).error;
                    assert!(
                        measured >= brute as f32
                            && f64::from(measured) <= brute * (1.0 + 1e-6) + 1e-9,
                        "{t:?}: {measured} vs {brute}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_centre_rule_finds_the_diamonds_the_recursion_makes() {
        let field = bumpy(33);
        let lod = BintreeLod::new(&field, LodOptions::default());
        let n = 32;
        for depth in 0..2 * 5 {
            let mut triangles = Vec::new();
            for root in lod.roots() {
                collect_at_depth(root, depth, &mut triangles);
            }
            let s = n >> (depth / 2 + 1);
            for t in triangles {
                let m = t.midpoint().expect("every depth below 10 splits");
                let d = half_diagonal(m, s, depth % 2 == 0);
                let hypotenuse = [(m.0 - d.0, m.1 - d.1), (m.0 + d.0, m.1 + d.1)];
                assert!(
                    hypotenuse == [t.a, t.b] || hypotenuse == [t.b, t.a],
                    "depth {depth}: {t:?} has centre {m:?}, rule says {d:?}"
                );
                assert!(diamond_triangles(m, d).iter().any(|o| o.c == t.c));
            }
        }
    }

    #[test]
    fn errors_and_ranges_grow_towards_the_root() {
        let field = bumpy(33);
        let lod = BintreeLod::new(&field, LodOptions::default());
        let levels = 2 * (lod.side - 1).trailing_zeros();
        for depth in 0..levels {
            let mut triangles = Vec::new();
            for root in lod.roots() {
                collect_at_depth(root, depth, &mut triangles);
            }
            for t in triangles {
                let Some(m) = t.midpoint() else { continue };
                let parent = lod.diamonds[lod.slot(m)];
                for child in t.children(m) {
                    let Some(cm) = child.midpoint() else { continue };
                    let c = lod.diamonds[lod.slot(cm)];
                    assert!(
                        c.error <= parent.error && c.low >= parent.low && c.high <= parent.high
                    );
                    // The child's descendant region lies in the parent's.
                    let (r, cr) = (t.descendant_radius(), child.descendant_radius());
                    assert!((cm.0 - m.0).abs() + cr <= r && (cm.1 - m.1).abs() + cr <= r);
                }
            }
        }
    }

    #[test]
    fn a_plane_is_two_triangles_and_zero_error_is_the_full_grid() {
        let side = 9;
        let plane: Vec<f32> = (0..side * side).map(|i| (i % side) as f32 * 2.0).collect();
        let field = Heightfield::from_f32(side, side, plane).expect("valid");
        let mut lod = BintreeLod::new(&field, LodOptions::default());
        let view = View::world_error(1e-3).expect("valid");
        assert_eq!(lod.select(&view).triangle_count(), 2);
        let field = bumpy(side);
        let mut lod = BintreeLod::new(&field, LodOptions::default());
        assert_eq!(lod.select(&view).triangle_count(), 2 * 8 * 8);
    }
}
