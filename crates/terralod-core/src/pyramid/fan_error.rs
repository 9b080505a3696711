//! The own error of every node: the largest `|h − S|` over all samples of the node's square,
//! where `S` is the node's 3 × 3 fan (see the parent module for the guarantee).
//!
//! # How it stays exact
//!
//! All fan values are kept scaled by `half` (a power of two, so scaling is exact). Inside
//! one fan triangle `half · S` is an integer combination of the triangle's three vertices
//! (non-negative weights summing to `half`), because the fan's lines have slope 0, ±1 or ∞
//! through lattice points. So for integer sources every intermediate value is an integer of
//! magnitude at most `2 · A · half` (`A = max|raw|`): while that is at most 2^24 the `f32`
//! kernels are exact, above it the `f64` ones are (up to 2^53).
//!
//! # How it stays cheap: two scans
//!
//! - **Segments** (large nodes). Along one sample row the fan is piecewise linear in the
//!   column, with knots at the node's edges (`u = ±half`), its diagonals (`u = ±|v|`) and
//!   its vertical midline (`u = 0`), `(u, v)` being the offset from the node's centre. Each
//!   row of a node is at most four segments on which `half · S = start + step · t`: a
//!   branch-free, vectorised scan over contiguous samples. Padded samples beyond the last
//!   column or row repeat the border, so there `h` is constant along a row or column while
//!   `S` is piecewise linear with knots at integer positions: only the segment ends and
//!   knots can hold the maximum, and only those are evaluated (in `f64`).
//! - **Across nodes** (small nodes, whose row segments are a few samples long). For a fixed
//!   offset inside the node, the weights of the three vertices are the same in every node of
//!   a band, so after transposing each sample row (`h(ix · s + p)` contiguous in `ix`) one
//!   contiguous loop evaluates that offset in all nodes of the band at once. Padded samples
//!   are read through the clamp like any other.

use super::Level;
use crate::heightfield::{Heightfield, Samples};
use rayon::prelude::*;
use std::ops::{Add, Mul, Sub};

/// How the own errors are computed. Every choice gives the same result; tests force each
/// one to check them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Strategy {
    /// Use `f32` where it is exact (integer sources, small enough values); else `f64` only.
    pub fastest_float: bool,
    /// Which scan for each level.
    pub scan: Scan,
}

impl Strategy {
    pub const FASTEST: Strategy = Strategy {
        fastest_float: true,
        scan: Scan::Auto,
    };
}

/// The two scans of the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scan {
    /// Across nodes for small nodes, segments for large ones.
    Auto,
    #[cfg_attr(not(test), allow(dead_code))]
    Segments,
    #[cfg_attr(not(test), allow(dead_code))]
    Across,
}

/// Largest integer magnitude below which `f32` arithmetic on integers is exact.
const F32_EXACT_LIMIT: f64 = (1u32 << 24) as f64;

/// Rounding slack of the `f64` kernel on float sources, relative to `max|raw|`.
///
/// The kernel does about ten roundings of values bounded by `2 · A · half` (each at most
/// 2^-53 relative); dividing by `half` leaves less than 2^-48 · A. 2^-45 leaves a margin.
const FLOAT_SLACK: f64 = 1.0 / (1u64 << 45) as f64;

/// A stored sample type.
pub(super) trait RawSample: Copy + Send + Sync + Into<f32> + Into<f64> {
    /// Whether every value is an integer (so scaled fan values are integers too).
    const INTEGER: bool;
}

impl RawSample for u16 {
    const INTEGER: bool = true;
}

impl RawSample for i16 {
    const INTEGER: bool = true;
}

impl RawSample for f32 {
    const INTEGER: bool = false;
}

/// The float type the inner loop runs in.
trait KernelFloat:
    Copy + Send + Sync + PartialOrd + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self>
{
    const ZERO: Self;
    fn from_f64(value: f64) -> Self;
    fn to_f64(self) -> f64;
    fn abs(self) -> Self;
    fn from_index(index: usize) -> Self;
}

impl KernelFloat for f32 {
    const ZERO: Self = 0.0;
    fn from_f64(value: f64) -> Self {
        value as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn abs(self) -> Self {
        f32::abs(self)
    }
    fn from_index(index: usize) -> Self {
        index as f32
    }
}

impl KernelFloat for f64 {
    const ZERO: Self = 0.0;
    fn from_f64(value: f64) -> Self {
        value
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn abs(self) -> Self {
        f64::abs(self)
    }
    fn from_index(index: usize) -> Self {
        index as f64
    }
}

/// Own (not yet monotone) world error of every node, per level; empty for the finest level.
/// `max_abs` is the largest `|raw|` the `f32` rounding slack is taken from: the field's
/// own ([`max_abs`]), or a whole terrain's when the field is a piece of it.
pub(super) fn own_errors(
    field: &Heightfield,
    levels: &[Level],
    strategy: Strategy,
    max_abs: f64,
) -> Vec<Vec<f32>> {
    match field.samples() {
        Samples::U16(v) => own_errors_typed(field, v, levels, strategy, max_abs),
        Samples::I16(v) => own_errors_typed(field, v, levels, strategy, max_abs),
        Samples::F32(v) => own_errors_typed(field, v, levels, strategy, max_abs),
    }
}

/// The largest `|raw|` of a field.
pub(super) fn max_abs(field: &Heightfield) -> f64 {
    let (lo, hi) = field.raw_range();
    f64::from(lo.abs().max(hi.abs()))
}

/// A node's own error as the pyramid stores it: `raw`, the largest `|h − S|` over its
/// samples in raw units, with the rounding slack of `f32` sources (from `max_abs`, the
/// largest `|raw|`) and scaled to world units, rounded upwards.
pub(crate) fn own_error_to_world(raw: f64, integer: bool, max_abs: f64, height_scale: f32) -> f32 {
    let slack = if integer { 0.0 } else { max_abs * FLOAT_SLACK };
    world_error_upper(raw + slack, f64::from(height_scale.abs()))
}

fn own_errors_typed<T>(
    field: &Heightfield,
    data: &[T],
    levels: &[Level],
    strategy: Strategy,
    max_abs: f64,
) -> Vec<Vec<f32>>
where
    T: RawSample,
{
    let grid = Grid {
        data,
        width: field.width() as usize,
        height: field.height() as usize,
    };
    let scale = field.mapping().height_scale;
    let finest = levels.len() - 1;
    let to_world = |raw: f64| own_error_to_world(raw, T::INTEGER, max_abs, scale);
    (0..levels.len())
        .into_par_iter()
        .map(|level| {
            let l = &levels[level];
            if level == finest {
                return Vec::new();
            }
            let mut out = vec![0.0f32; l.nodes_x as usize * l.nodes_z as usize];
            let half = f64::from(l.size / 2);
            if T::INTEGER && strategy.fastest_float && 2.0 * max_abs * half <= F32_EXACT_LIMIT {
                level_errors::<T, f32>(&grid, l, strategy.scan, to_world, &mut out);
            } else {
                level_errors::<T, f64>(&grid, l, strategy.scan, to_world, &mut out);
            }
            out
        })
        .collect()
}

/// `raw * scale` rounded upwards to `f32`, so the world error stays an upper bound.
fn world_error_upper(raw: f64, scale: f64) -> f32 {
    if raw == 0.0 {
        return 0.0;
    }
    let mut world = raw * scale;
    if significant_bits(raw) + significant_bits(scale) > 53 {
        world = world.next_up(); // the product may have been rounded down
    }
    let rounded = world as f32;
    if f64::from(rounded) < world {
        rounded.next_up()
    } else {
        rounded
    }
}

/// Bits from the leading to the last set bit of a normal `f64`'s significand (53 for
/// anything else, which makes the caller round conservatively).
fn significant_bits(value: f64) -> u32 {
    if !value.is_normal() {
        return 53;
    }
    let significand = (value.to_bits() & ((1u64 << 52) - 1)) | (1u64 << 52);
    53 - significand.trailing_zeros()
}

/// Row-major samples with the repeated-border padding rule.
struct Grid<'a, T> {
    data: &'a [T],
    width: usize,
    height: usize,
}

impl<T: RawSample> Grid<'_, T> {
    fn clamped(&self, col: usize, row: usize) -> f64 {
        let (c, r) = (col.min(self.width - 1), row.min(self.height - 1));
        self.data[r * self.width + c].into()
    }

    fn row(&self, row: usize) -> &[T] {
        &self.data[row * self.width..(row + 1) * self.width]
    }
}

/// A node's fan: its first corner, half its size and the raw values of its 3 × 3 vertices
/// (row-major: top row `z0`, middle row, bottom row `z0 + 2·half`).
#[derive(Clone, Copy, Debug)]
struct Fan {
    x0: usize,
    z0: usize,
    half: usize,
    vertices: [f64; 9],
}

impl Fan {
    fn new<T: RawSample>(grid: &Grid<'_, T>, x0: usize, z0: usize, half: usize) -> Fan {
        let mut vertices = [0.0; 9];
        for (k, v) in vertices.iter_mut().enumerate() {
            *v = grid.clamped(x0 + (k % 3) * half, z0 + (k / 3) * half);
        }
        Fan {
            x0,
            z0,
            half,
            vertices,
        }
    }

    /// `half · S(col, row)`, from the triangle that holds the sample (any of them on a
    /// shared edge, where they agree).
    fn scaled_value(&self, col: usize, row: usize) -> f64 {
        let u = col as i64 - (self.x0 + self.half) as i64;
        let v = row as i64 - (self.z0 + self.half) as i64;
        let (au, av) = (u.unsigned_abs() as f64, v.unsigned_abs() as f64);
        let side_col = if u < 0 { 0 } else { 2 };
        let side_row = if v < 0 { 0 } else { 6 };
        let centre = self.vertices[4];
        let corner = self.vertices[side_row + side_col];
        let base = centre * self.half as f64;
        if au >= av {
            // Left or right sector: triangle (centre, edge midpoint, corner).
            let mid = self.vertices[3 + side_col];
            base + au * (mid - centre) + av * (corner - mid)
        } else {
            // Top or bottom sector.
            let mid = self.vertices[side_row + 1];
            base + av * (mid - centre) + au * (corner - mid)
        }
    }

    /// The fan along sample row `row` (which must lie in the node).
    fn row_profile(&self, row: usize) -> RowProfile {
        let zm = self.z0 + self.half;
        let a = row.abs_diff(zm);
        let af = a as f64;
        let h = self.half as f64;
        let side = if row < zm { 0 } else { 6 };
        let v = &self.vertices;
        let (corner_l, mid_v, corner_r) = (v[side], v[side + 1], v[side + 2]);
        let (mid_l, centre, mid_r) = (v[3], v[4], v[5]);
        let xm = self.x0 + self.half;
        RowProfile {
            cols: [self.x0, xm - a, xm, xm + a, xm + self.half],
            values: [
                mid_l * h + af * (corner_l - mid_l),
                centre * h + af * (corner_l - centre),
                centre * h + af * (mid_v - centre),
                centre * h + af * (corner_r - centre),
                mid_r * h + af * (corner_r - mid_r),
            ],
            steps: [
                centre - mid_l,
                mid_v - corner_l,
                corner_r - mid_v,
                mid_r - centre,
            ],
        }
    }
}

/// `half · S` along one row of a node: linear between consecutive knots.
#[derive(Clone, Copy, Debug)]
struct RowProfile {
    cols: [usize; 5],
    values: [f64; 5],
    /// Change of `half · S` per column on each of the four segments.
    steps: [f64; 4],
}

impl RowProfile {
    fn scaled_value(&self, col: usize) -> f64 {
        let k = (1..4).rev().find(|&k| self.cols[k] <= col).unwrap_or(0);
        self.values[k] + self.steps[k] * (col - self.cols[k]) as f64
    }
}

/// Largest `|half · h − (start + step · t)|` over `heights[t]`: the hot loop. Eight
/// independent lanes so the compiler vectorises it; `if d > acc` becomes a max instruction.
#[inline]
fn max_deviation<T, F>(heights: &[T], half: F, start: F, step: F, ramp: &[F]) -> F
where
    T: Copy + Into<F>,
    F: KernelFloat,
{
    const LANES: usize = 8;
    let ramp = &ramp[..heights.len()];
    let mut lanes = [F::ZERO; LANES];
    let h_chunks = heights.chunks_exact(LANES);
    let t_chunks = ramp.chunks_exact(LANES);
    let (h_rest, t_rest) = (h_chunks.remainder(), t_chunks.remainder());
    for (h, t) in h_chunks.zip(t_chunks) {
        for k in 0..LANES {
            let d = (h[k].into() * half - (start + step * t[k])).abs();
            if d > lanes[k] {
                lanes[k] = d;
            }
        }
    }
    let mut best = F::ZERO;
    for (&h, &t) in h_rest.iter().zip(t_rest) {
        let d = (h.into() * half - (start + step * t)).abs();
        if d > best {
            best = d;
        }
    }
    for lane in lanes {
        if lane > best {
            best = lane;
        }
    }
    best
}

/// Largest node size scanned across nodes; larger nodes have row segments long enough for
/// the segment scan. Measured on the Grand Canyon set (one thread): across nodes takes
/// 14 ms at size 32 against 20 ms for segments, but 13 ms at size 64 against 10 ms.
const ACROSS_MAX_SIZE: u32 = 32;

/// Fewest nodes per band for the scan across nodes to pay off.
const ACROSS_MIN_NODES: u32 = 8;

/// Own raw error of every node of one level, written row-major into `out` as world units.
fn level_errors<T, F>(
    grid: &Grid<'_, T>,
    level: &Level,
    scan: Scan,
    to_world: impl Fn(f64) -> f32 + Sync,
    out: &mut [f32],
) where
    T: RawSample + Into<F>,
    F: KernelFloat,
{
    let size = level.size as usize;
    let across = match scan {
        Scan::Auto => level.size <= ACROSS_MAX_SIZE && level.nodes_x >= ACROSS_MIN_NODES,
        Scan::Segments => false,
        Scan::Across => true,
    };
    let ramp: Vec<F> = if across {
        Vec::new()
    } else {
        (0..=size).map(F::from_index).collect()
    };
    out.par_chunks_mut(level.nodes_x as usize)
        .enumerate()
        .for_each(|(iz, band_out)| {
            let raw = if across {
                band_errors_across::<T, F>(grid, level, iz)
            } else {
                band_errors_segments::<T, F>(grid, level, iz, &ramp)
            };
            for (o, e) in band_out.iter_mut().zip(raw) {
                *o = to_world(e);
            }
        });
}

/// Sample values of one row at columns `first + k * stride` (clamped), for `out.len()` values.
fn gather_row<T, F>(row: &[T], first: usize, stride: usize, out: &mut [F])
where
    T: Copy + Into<F>,
    F: KernelFloat,
{
    let last = row[row.len() - 1].into();
    let mut values = row.get(first..).unwrap_or(&[]).iter().step_by(stride);
    for x in out.iter_mut() {
        *x = values.next().map_or(last, |&v| v.into());
    }
}

/// Transposes one sample row into `out[p * nodes + ix] = h(ix * size + p)` for `p` in
/// `0..=size` (clamped at the last column), so each offset `p` is contiguous over the nodes.
fn transpose_row<T, F>(row: &[T], size: usize, nodes: usize, out: &mut [F])
where
    T: Copy + Into<F>,
    F: KernelFloat,
{
    let last = row.len() - 1;
    let whole = (row.len() / size).min(nodes);
    for (ix, chunk) in row.chunks_exact(size).take(whole).enumerate() {
        for (p, &v) in chunk.iter().enumerate() {
            out[p * nodes + ix] = v.into();
        }
    }
    for ix in whole..nodes {
        for p in 0..size {
            out[p * nodes + ix] = row[(ix * size + p).min(last)].into();
        }
    }
    for ix in 0..nodes {
        out[size * nodes + ix] = row[((ix + 1) * size).min(last)].into();
    }
}

/// Own raw errors of the nodes of band `iz`, scanned across the nodes (see the module docs).
fn band_errors_across<T, F>(grid: &Grid<'_, T>, level: &Level, iz: usize) -> Vec<f64>
where
    T: RawSample + Into<F>,
    F: KernelFloat,
{
    let size = level.size as usize;
    let half = size / 2;
    let nx = level.nodes_x as usize;
    let z0 = iz * size;
    let zm = z0 + half;
    let vertex_row = |row: usize| {
        let samples = grid.row(row.min(grid.height - 1));
        let mut corners = vec![F::ZERO; nx + 1];
        let mut mids = vec![F::ZERO; nx];
        gather_row(samples, 0, size, &mut corners);
        gather_row(samples, half, size, &mut mids);
        (corners, mids)
    };
    let top = vertex_row(z0);
    let middle = vertex_row(zm);
    let bottom = vertex_row(z0 + size);
    let half_f = F::from_f64(half as f64);
    let mut best = vec![F::ZERO; nx];
    let mut transposed = vec![F::ZERO; (size + 1) * nx];
    for row in z0..=z0 + size {
        let samples = grid.row(row.min(grid.height - 1));
        let a = row.abs_diff(zm);
        let (side_corners, side_mids) = if row < zm { &top } else { &bottom };
        let (mid_corners, centres) = &middle;
        let (left_k, right_k) = (&side_corners[..nx], &side_corners[1..]);
        let (left_m, right_m) = (&mid_corners[..nx], &mid_corners[1..]);
        let vertex_row = a == 0 || a == half;
        transpose_row(samples, size, nx, &mut transposed);
        for p in 0..=size {
            if vertex_row && p % half == 0 {
                continue;
            }
            let f = |x: usize| F::from_f64(x as f64);
            let terms: [(F, &[F]); 3] = if p <= half - a {
                [(f(half - a - p), left_m), (f(a), left_k), (f(p), centres)]
            } else if p <= half {
                [
                    (f(half - a), centres),
                    (f(half - p), left_k),
                    (f(p + a - half), side_mids),
                ]
            } else if p <= half + a {
                [
                    (f(half - a), centres),
                    (f(half + a - p), side_mids),
                    (f(p - half), right_k),
                ]
            } else {
                [
                    (f(size - p), centres),
                    (f(a), right_k),
                    (f(p - half - a), right_m),
                ]
            };
            let heights = &transposed[p * nx..(p + 1) * nx];
            let [(w0, x0), (w1, x1), (w2, x2)] = terms;
            let inputs = heights.iter().zip(&x0[..nx]).zip(&x1[..nx]).zip(&x2[..nx]);
            for (b, (((&h, &v0), &v1), &v2)) in best.iter_mut().zip(inputs) {
                let d = (h * half_f - (w0 * v0 + w1 * v1 + w2 * v2)).abs();
                // An unconditional store, so the compiler can use a vector max.
                *b = if d > *b { d } else { *b };
            }
        }
    }
    best.into_iter().map(|d| d.to_f64() / half as f64).collect()
}

/// Own raw errors of the nodes of band `iz`, scanned segment by segment (see the module
/// docs).
fn band_errors_segments<T, F>(grid: &Grid<'_, T>, level: &Level, iz: usize, ramp: &[F]) -> Vec<f64>
where
    T: RawSample + Into<F>,
    F: KernelFloat,
{
    let size = level.size as usize;
    let half = size / 2;
    let (w, h) = (grid.width, grid.height);
    let z0 = iz * size;
    let fans: Vec<Fan> = (0..level.nodes_x as usize)
        .map(|ix| Fan::new(grid, ix * size, z0, half))
        .collect();
    let half_f = F::from_f64(half as f64);
    // Data rows of the band: the fast scan over the data columns of each node.
    let scan_row = |mut acc: Vec<F>, row: usize| {
        let samples = grid.row(row);
        for (best, fan) in acc.iter_mut().zip(&fans) {
            let profile = fan.row_profile(row);
            for k in 0..4 {
                let (ca, cb) = (profile.cols[k], profile.cols[k + 1].min(w - 1));
                if profile.cols[k] == profile.cols[k + 1] || ca > cb {
                    continue; // a zero-length segment's point is its neighbour's end
                }
                let d = max_deviation(
                    &samples[ca..=cb],
                    half_f,
                    F::from_f64(profile.values[k]),
                    F::from_f64(profile.steps[k]),
                    ramp,
                );
                if d > *best {
                    *best = d;
                }
            }
        }
        acc
    };
    let last_data_row = (z0 + size).min(h - 1);
    let rows = z0..last_data_row + 1;
    let zeros = || vec![F::ZERO; fans.len()];
    let merge = |mut a: Vec<F>, b: Vec<F>| {
        for (x, y) in a.iter_mut().zip(b) {
            if y > *x {
                *x = y;
            }
        }
        a
    };
    // Large nodes: split the rows of a band over threads too (the root is one band).
    let scanned: Vec<F> = if size >= 64 {
        rows.into_par_iter()
            .with_min_len(16)
            .fold(zeros, scan_row)
            .reduce(zeros, merge)
    } else {
        rows.fold(zeros(), scan_row)
    };
    let mut errors: Vec<f64> = scanned.into_iter().map(F::to_f64).collect();

    for (error, fan) in errors.iter_mut().zip(&fans) {
        let x1 = fan.x0 + size;
        let z1 = z0 + size;
        let (xm, zm) = (fan.x0 + half, z0 + half);
        let mut worst = *error;
        // Padded columns of the data rows: h is the last column's value.
        if x1 >= w {
            for row in z0..=last_data_row {
                let profile = fan.row_profile(row);
                let scaled_h = grid.clamped(w - 1, row) * half as f64;
                let a = row.abs_diff(zm);
                for col in [w, x1, xm, xm - a, xm + a] {
                    if (w..=x1).contains(&col) {
                        worst = worst.max((scaled_h - profile.scaled_value(col)).abs());
                    }
                }
            }
        }
        // Padded rows (all columns, padded ones included): h is the last row's value.
        if z1 >= h {
            for col in fan.x0..=x1 {
                let scaled_h = grid.clamped(col, h - 1) * half as f64;
                let a = col.abs_diff(xm);
                for row in [h, z1, zm, zm.saturating_sub(a), zm + a] {
                    if (h..=z1).contains(&row) {
                        worst = worst.max((scaled_h - fan.scaled_value(col, row)).abs());
                    }
                }
            }
        }
        *error = worst / half as f64;
    }
    errors
}
