//! One noise octave over a block of samples in vector lanes (AVX-512 or AVX2, chosen at
//! run time: [`crate::wide_lanes`]), for the procedural terrain's fine octaves
//! ([`add_octave`]). Row by row, an octave of a few samples a wave changes
//! lattice cell every sample or two and hashes a cell's four corners each time
//! ([`super::noise::gradient_noise_row`]); here every corner of the block's cells is
//! hashed once into a [`CellTable`], and each lane looks its cell up (one gather, then
//! the gradients by permutation from the sixteen).
//!
//! The same exactly rounded operations, in the same order, as [`super::Layer::sample`]
//! and [`super::octave_basis`] (no fused multiply-add), so the same bits at either width:
//! `a_window_read_row_by_row_equals_its_samples_computed_alone` compares them.
//!
//! The kernels are written once, over [`vector::Vector`]; `LANES` (16 or 8) picks the
//! instance, compiled for its features by a `#[target_feature]` function.
#![allow(unsafe_code)]

mod vector;

use super::Layer;
use super::noise::{GRADIENTS, MAX_COORDINATE, NOISE_SCALE, gradient_index};
use vector::{Avx2, Avx512, Vector};

/// The corner gradients of every lattice cell of one layer over a box of cells: four
/// indices into [`GRADIENTS`], 4 bits each, lowest first (corners `(0,0)`, `(1,0)`,
/// `(0,1)`, `(1,1)`, as `CellGradients` orders them).
#[derive(Debug)]
pub(super) struct CellTable {
    /// The box's lower lattice corner.
    x0: f32,
    y0: f32,
    width: i32,
    height: i32,
    codes: Vec<u32>,
}

impl CellTable {
    /// The table of `layer` for map positions in `us × vs` (closed ranges), or `None`
    /// where it would hold more than `limit` cells (a sparse window: rows are cheaper) or
    /// leave the noise's domain (or the ranges are empty: ±∞).
    ///
    /// # Safety
    /// The CPU has the features of `LANES` (16: AVX-512 F, BW, DQ and VL; 8: AVX2).
    pub(super) unsafe fn new<const LANES: usize>(
        layer: &Layer,
        us: (f32, f32),
        vs: (f32, f32),
        limit: usize,
    ) -> Option<CellTable> {
        // The hashes' 64-bit products go in lanes (in baseline code, one at a time, the
        // table took 13 % of a window's time, 8 in the hashes and 5 in combining the codes
        // by index).
        #[target_feature(enable = "avx2,avx512f,avx512dq,avx512vl,avx512bw")]
        fn avx512(
            layer: &Layer,
            us: (f32, f32),
            vs: (f32, f32),
            limit: usize,
        ) -> Option<CellTable> {
            CellTable::build(layer, us, vs, limit)
        }
        #[target_feature(enable = "avx2")]
        fn avx2(layer: &Layer, us: (f32, f32), vs: (f32, f32), limit: usize) -> Option<CellTable> {
            CellTable::build(layer, us, vs, limit)
        }
        // SAFETY: the caller's.
        unsafe {
            match LANES {
                16 => avx512(layer, us, vs, limit),
                8 => avx2(layer, us, vs, limit),
                _ => unreachable!("lanes of AVX-512 or AVX2"),
            }
        }
    }

    /// [`CellTable::new`]'s body, in plain loops over slices: they compile in the caller's
    /// lanes.
    #[inline(always)]
    fn build(
        layer: &Layer,
        (u0, u1): (f32, f32),
        (v0, v1): (f32, f32),
        limit: usize,
    ) -> Option<CellTable> {
        // The lattice map is affine, so the box's corners bound it; two cells of margin
        // cover the samples' own rounding many times over.
        let corners =
            [(u0, v0), (u1, v0), (u0, v1), (u1, v1)].map(|(u, v)| layer.lattice_position(u, v));
        let (mut x_lo, mut x_hi) = (f32::INFINITY, f32::NEG_INFINITY);
        let (mut y_lo, mut y_hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for (x, y) in corners {
            (x_lo, x_hi) = (x_lo.min(x), x_hi.max(x));
            (y_lo, y_hi) = (y_lo.min(y), y_hi.max(y));
        }
        // (Also false for NaN and ±∞.) Within the domain, `floor` and the margin are exact.
        let inside = |z: f32| z.abs() < MAX_COORDINATE - 4.0;
        if !(inside(x_lo) && inside(x_hi) && inside(y_lo) && inside(y_hi)) {
            return None;
        }
        let (x0, y0) = (x_lo.floor() - 2.0, y_lo.floor() - 2.0);
        let (width, height) = (x_hi.floor() + 3.0 - x0, y_hi.floor() + 3.0 - y0);
        // At least 5 × 5 cells here; `i32` indices in the lanes.
        if width * height > limit.min(i32::MAX as usize) as f32 {
            return None;
        }
        let (width, height) = (width as usize, height as usize);
        let (ix0, iy0) = (x0 as i32, y0 as i32);
        // Two rows of corner indices, the lower and the upper edge of a row of cells.
        let (mut below, mut above) = (vec![0u32; width + 1], vec![0u32; width + 1]);
        // (A function, not a closure: a closure is compiled without the caller's features.)
        #[inline(always)]
        fn corner_row(seed: u64, ix0: i32, iy: i32, row: &mut [u32]) {
            for (i, corner) in row.iter_mut().enumerate() {
                *corner = gradient_index(seed, ix0 + i as i32, iy) as u32;
            }
        }
        let mut codes = vec![0u32; width * height];
        corner_row(layer.seed, ix0, iy0, &mut below);
        for (j, cells) in codes.chunks_exact_mut(width).enumerate() {
            corner_row(layer.seed, ix0, iy0 + j as i32 + 1, &mut above);
            // Each cell's corners: (0,0), (1,0) on the lower edge, (0,1), (1,1) on the upper.
            for ((((code, &a), &b), &c), &d) in cells
                .iter_mut()
                .zip(&below[..width])
                .zip(&below[1..])
                .zip(&above[..width])
                .zip(&above[1..])
            {
                *code = a | b << 4 | c << 8 | d << 12;
            }
            std::mem::swap(&mut below, &mut above);
        }
        Some(CellTable {
            x0,
            y0,
            width: width as i32,
            height: height as i32,
            codes,
        })
    }
}

/// The smallest and largest of `values`, in lanes (`+∞, −∞` for none).
///
/// # Safety
/// As [`CellTable::new`].
pub(super) unsafe fn bounds<const LANES: usize>(values: &[f32]) -> (f32, f32) {
    #[target_feature(enable = "avx2,avx512f,avx512dq,avx512vl,avx512bw")]
    fn avx512(values: &[f32]) -> (f32, f32) {
        // SAFETY: this function's features.
        unsafe { bounds_in::<Avx512>(values) }
    }
    #[target_feature(enable = "avx2")]
    fn avx2(values: &[f32]) -> (f32, f32) {
        // SAFETY: this function's features.
        unsafe { bounds_in::<Avx2>(values) }
    }
    // SAFETY: the caller's.
    unsafe {
        match LANES {
            16 => avx512(values),
            8 => avx2(values),
            _ => unreachable!("lanes of AVX-512 or AVX2"),
        }
    }
}

/// [`bounds`] in `V`'s lanes.
///
/// # Safety
/// The CPU has `V`'s features, and the caller is compiled with them.
#[inline(always)]
#[allow(unsafe_op_in_unsafe_fn)]
unsafe fn bounds_in<V: Vector>(values: &[f32]) -> (f32, f32) {
    let (none_low, none_high) = (V::splat(f32::INFINITY), V::splat(f32::NEG_INFINITY));
    let (mut lo, mut hi) = (none_low, none_high);
    for chunk in values.chunks(V::LANES) {
        let mask = V::first(chunk.len());
        // SAFETY: the mask reads `chunk.len()` floats of the chunk only.
        let v = V::load(mask, chunk.as_ptr());
        lo = V::min(lo, V::select(mask, v, none_low));
        hi = V::max(hi, V::select(mask, v, none_high));
    }
    let (mut lows, mut highs) = ([0.0; 16], [0.0; 16]);
    V::to_array(lo, &mut lows);
    V::to_array(hi, &mut highs);
    let low = lows[..V::LANES]
        .iter()
        .fold(f32::INFINITY, |a, &b| a.min(b));
    let high = highs[..V::LANES]
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    (low, high)
}

/// `sum[i] += amplitude · octave_basis(layer, noise of layer at (pu[i], pv[i]), ridged[i])`
/// with the cells of `table`, which covers every position.
///
/// # Safety
/// As [`CellTable::new`].
pub(super) unsafe fn add_octave<const LANES: usize>(
    layer: &Layer,
    table: &CellTable,
    positions: (&[f32], &[f32]),
    ridged: &[f32],
    sum: &mut [f32],
) {
    type Positions<'a> = (&'a [f32], &'a [f32]);
    #[target_feature(enable = "avx2,avx512f,avx512dq,avx512vl,avx512bw")]
    fn avx512(layer: &Layer, table: &CellTable, p: Positions<'_>, ridged: &[f32], sum: &mut [f32]) {
        // SAFETY: this function's features.
        unsafe { add_octave_in::<Avx512>(layer, table, p, ridged, sum) }
    }
    #[target_feature(enable = "avx2")]
    fn avx2(layer: &Layer, table: &CellTable, p: Positions<'_>, ridged: &[f32], sum: &mut [f32]) {
        // SAFETY: this function's features.
        unsafe { add_octave_in::<Avx2>(layer, table, p, ridged, sum) }
    }
    // SAFETY: the caller's.
    unsafe {
        match LANES {
            16 => avx512(layer, table, positions, ridged, sum),
            8 => avx2(layer, table, positions, ridged, sum),
            _ => unreachable!("lanes of AVX-512 or AVX2"),
        }
    }
}

/// [`add_octave`] in `V`'s lanes.
///
/// # Safety
/// As [`bounds_in`].
#[inline(always)]
#[allow(unsafe_op_in_unsafe_fn)]
unsafe fn add_octave_in<V: Vector>(
    layer: &Layer,
    table: &CellTable,
    (pu, pv): (&[f32], &[f32]),
    ridged: &[f32],
    sum: &mut [f32],
) {
    let n = sum.len();
    assert!(
        pu.len() == n && pv.len() == n && ridged.len() == n,
        "one position, mask and sum per sample"
    );
    let (add, sub, mul, splat) = (V::add, V::sub, V::mul, V::splat);
    let gradients = (
        V::table(&std::array::from_fn(|k| GRADIENTS[k].0)),
        V::table(&std::array::from_fn(|k| GRADIENTS[k].1)),
    );
    let (cos, sin, frequency) = (splat(layer.cos), splat(layer.sin), splat(layer.frequency));
    let (offset_x, offset_y) = (splat(layer.offset.0), splat(layer.offset.1));
    let (x0, y0) = (splat(table.x0), splat(table.y0));
    let (width, last_x, last_y) = (
        V::splat_i(table.width),
        V::splat_i(table.width - 1),
        V::splat_i(table.height - 1),
    );
    let (zero, one) = (V::splat_i(0), splat(1.0));
    let ridged_layer = layer.is_ridged();
    let amplitude = splat(layer.amplitude);
    for start in (0..n).step_by(V::LANES) {
        let mask = V::first(n - start);
        // SAFETY: the mask reads and writes the `n − start` samples left, at most a
        // register's.
        let (u, v, r, s) = (
            V::load(mask, pu.as_ptr().add(start)),
            V::load(mask, pv.as_ptr().add(start)),
            V::load(mask, ridged.as_ptr().add(start)),
            V::load(mask, sum.as_ptr().add(start)),
        );
        // `Layer::lattice_position`.
        let x = add(mul(sub(mul(u, cos), mul(v, sin)), frequency), offset_x);
        let y = add(mul(add(mul(u, sin), mul(v, cos)), frequency), offset_y);
        let (cx, cy) = (V::floor(x), V::floor(y));
        let (fx, fy) = (sub(x, cx), sub(y, cy));
        // Clamped into the table, which the positions never leave (its margin): a bound
        // for memory safety, not a value the samples see.
        let (column, row) = (V::truncate(sub(cx, x0)), V::truncate(sub(cy, y0)));
        let cell = V::mul_add_i(
            V::min_i(V::max_i(row, zero), last_y),
            width,
            V::min_i(V::max_i(column, zero), last_x),
        );
        if cfg!(debug_assertions) {
            let (mut clamped, mut unclamped) = ([0; 16], [0; 16]);
            V::to_array_i(cell, &mut clamped);
            V::to_array_i(V::mul_add_i(row, width, column), &mut unclamped);
            let used = (n - start).min(V::LANES);
            assert_eq!(
                clamped[..used],
                unclamped[..used],
                "a position outside the cell table"
            );
        }
        // SAFETY: `cell` indexes `codes` (width × height entries) in every lane.
        let code = V::gather(mask, table.codes.as_ptr(), cell);
        // `blend`.
        let (fx1, fy1) = (sub(fx, one), sub(fy, one));
        let n00 = V::corner(gradients, code, 0, fx, fy);
        let n10 = V::corner(gradients, code, 1, fx1, fy);
        let n01 = V::corner(gradients, code, 2, fx, fy1);
        let n11 = V::corner(gradients, code, 3, fx1, fy1);
        let (wu, wv) = (V::fade(fx), V::fade(fy));
        let (bottom, top) = (V::lerp(n00, n10, wu), V::lerp(n01, n11, wu));
        let noise = mul(V::lerp(bottom, top, wv), splat(NOISE_SCALE));
        // `octave_basis`.
        let basis = if ridged_layer {
            let crest = sub(one, V::abs(noise));
            let ridge = mul(splat(2.0), sub(mul(crest, crest), splat(0.45)));
            V::lerp(noise, ridge, r)
        } else {
            noise
        };
        // SAFETY: as the loads.
        V::store(
            sum.as_mut_ptr().add(start),
            mask,
            add(s, mul(amplitude, basis)),
        );
    }
}
