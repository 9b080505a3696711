//! One noise octave over a block of samples in AVX-512 lanes, for the procedural terrain's
//! fine octaves ([`add_octave`]). Row by row, an octave of a few samples a wave changes
//! lattice cell every sample or two and hashes a cell's four corners each time
//! ([`super::noise::gradient_noise_row`]); here every corner of the block's cells is
//! hashed once into a [`CellTable`], and each lane looks its cell up (one gather, then
//! the gradients by permutation from the sixteen).
//!
//! The same exactly rounded operations, in the same order, as [`super::Layer::sample`]
//! and [`super::octave_basis`] (no fused multiply-add), so the same bits:
//! `a_window_read_row_by_row_equals_its_samples_computed_alone` compares the two.
#![allow(unsafe_code)]

use super::Layer;
use super::noise::{GRADIENTS, MAX_COORDINATE, NOISE_SCALE, gradient_index};
use std::arch::x86_64::*;

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
    /// The CPU has AVX-512F, BW, DQ and VL (the hashes' 64-bit products go in lanes: in
    /// baseline code, one at a time, the table took 13 % of a window's time, 8 in the
    /// hashes and 5 in combining the codes by index).
    #[target_feature(enable = "avx2,avx512f,avx512dq,avx512vl,avx512bw")]
    pub(super) unsafe fn new(
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
        // (Plain loops over slices: they compile in this function's lanes.)
        let (mut below, mut above) = (vec![0u32; width + 1], vec![0u32; width + 1]);
        let corner_row = |j: usize, row: &mut [u32]| {
            for (i, corner) in row.iter_mut().enumerate() {
                *corner = gradient_index(layer.seed, ix0 + i as i32, iy0 + j as i32) as u32;
            }
        };
        let mut codes = vec![0u32; width * height];
        corner_row(0, &mut below);
        for (j, cells) in codes.chunks_exact_mut(width).enumerate() {
            corner_row(j + 1, &mut above);
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
/// The CPU has AVX-512F.
#[target_feature(enable = "avx2,avx512f,avx512dq,avx512vl,avx512bw")]
pub(super) unsafe fn bounds(values: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = (
        _mm512_set1_ps(f32::INFINITY),
        _mm512_set1_ps(f32::NEG_INFINITY),
    );
    for chunk in values.chunks(16) {
        let mask = lanes(chunk.len());
        // SAFETY: the mask reads `chunk.len()` floats of the chunk only.
        let v = unsafe { _mm512_maskz_loadu_ps(mask, chunk.as_ptr()) };
        lo = _mm512_mask_min_ps(lo, mask, lo, v);
        hi = _mm512_mask_max_ps(hi, mask, hi, v);
    }
    (_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi))
}

/// The first `k ≤ 16` lanes.
#[inline(always)]
fn lanes(k: usize) -> __mmask16 {
    if k >= 16 { 0xFFFF } else { (1u16 << k) - 1 }
}

/// `sum[i] += amplitude · octave_basis(layer, noise of layer at (pu[i], pv[i]), ridged[i])`
/// with the cells of `table`, which covers every position.
///
/// # Safety
/// The CPU has AVX-512F, BW, DQ and VL.
#[target_feature(enable = "avx2,avx512f,avx512dq,avx512vl,avx512bw")]
pub(super) unsafe fn add_octave(
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
    let splat = _mm512_set1_ps;
    let (gx, gy): ([f32; 16], [f32; 16]) = (
        std::array::from_fn(|k| GRADIENTS[k].0),
        std::array::from_fn(|k| GRADIENTS[k].1),
    );
    // SAFETY: sixteen floats each.
    let (gx, gy) = unsafe { (_mm512_loadu_ps(gx.as_ptr()), _mm512_loadu_ps(gy.as_ptr())) };
    let (cos, sin, frequency) = (splat(layer.cos), splat(layer.sin), splat(layer.frequency));
    let (offset_x, offset_y) = (splat(layer.offset.0), splat(layer.offset.1));
    let (x0, y0) = (splat(table.x0), splat(table.y0));
    let (width, last_x, last_y) = (
        _mm512_set1_epi32(table.width),
        _mm512_set1_epi32(table.width - 1),
        _mm512_set1_epi32(table.height - 1),
    );
    let (zero, one, nibble) = (_mm512_setzero_si512(), splat(1.0), _mm512_set1_epi32(15));
    let floor = |x: __m512| {
        // `floor_f32`: exact below 2²² by adding and subtracting 1.5 × 2²³.
        let shift = splat(12_582_912.0);
        let rounded = _mm512_sub_ps(_mm512_add_ps(x, shift), shift);
        let up = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(rounded, x);
        _mm512_mask_sub_ps(rounded, up, rounded, one)
    };
    let fade = |t: __m512| {
        let inner = _mm512_add_ps(
            _mm512_mul_ps(t, _mm512_sub_ps(_mm512_mul_ps(t, splat(6.0)), splat(15.0))),
            splat(10.0),
        );
        _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(t, t), t), inner)
    };
    let gradient = |code: __m512i, corner: u32| {
        let index = _mm512_and_si512(
            _mm512_srlv_epi32(code, _mm512_set1_epi32(4 * corner as i32)),
            nibble,
        );
        (
            _mm512_permutexvar_ps(index, gx),
            _mm512_permutexvar_ps(index, gy),
        )
    };
    let dot = |(gx, gy): (__m512, __m512), dx: __m512, dy: __m512| {
        _mm512_add_ps(_mm512_mul_ps(gx, dx), _mm512_mul_ps(gy, dy))
    };
    let lerp =
        |a: __m512, b: __m512, t: __m512| _mm512_add_ps(a, _mm512_mul_ps(t, _mm512_sub_ps(b, a)));
    let ridged_layer = layer.is_ridged();
    let amplitude = splat(layer.amplitude);
    for start in (0..n).step_by(16) {
        let mask = lanes(n - start);
        // SAFETY: the mask reads and writes the `n − start` samples left, at most 16.
        let (u, v, r, s) = unsafe {
            (
                _mm512_maskz_loadu_ps(mask, pu.as_ptr().add(start)),
                _mm512_maskz_loadu_ps(mask, pv.as_ptr().add(start)),
                _mm512_maskz_loadu_ps(mask, ridged.as_ptr().add(start)),
                _mm512_maskz_loadu_ps(mask, sum.as_ptr().add(start)),
            )
        };
        // `Layer::lattice_position`.
        let x = _mm512_add_ps(
            _mm512_mul_ps(
                _mm512_sub_ps(_mm512_mul_ps(u, cos), _mm512_mul_ps(v, sin)),
                frequency,
            ),
            offset_x,
        );
        let y = _mm512_add_ps(
            _mm512_mul_ps(
                _mm512_add_ps(_mm512_mul_ps(u, sin), _mm512_mul_ps(v, cos)),
                frequency,
            ),
            offset_y,
        );
        let (cx, cy) = (floor(x), floor(y));
        let (fx, fy) = (_mm512_sub_ps(x, cx), _mm512_sub_ps(y, cy));
        // Clamped into the table, which the positions never leave (its margin): a bound
        // for memory safety, not a value the samples see.
        let column = _mm512_min_epi32(
            _mm512_max_epi32(_mm512_cvttps_epi32(_mm512_sub_ps(cx, x0)), zero),
            last_x,
        );
        let row = _mm512_min_epi32(
            _mm512_max_epi32(_mm512_cvttps_epi32(_mm512_sub_ps(cy, y0)), zero),
            last_y,
        );
        debug_assert_eq!(
            _mm512_mask_cmpeq_epi32_mask(
                mask,
                _mm512_add_epi32(_mm512_mullo_epi32(row, width), column),
                _mm512_add_epi32(
                    _mm512_mullo_epi32(_mm512_cvttps_epi32(_mm512_sub_ps(cy, y0)), width),
                    _mm512_cvttps_epi32(_mm512_sub_ps(cx, x0))
                )
            ),
            mask,
            "a position outside the cell table"
        );
        let cell = _mm512_add_epi32(_mm512_mullo_epi32(row, width), column);
        // SAFETY: `cell` indexes `codes` (width × height entries) in every lane.
        let code = unsafe {
            _mm512_mask_i32gather_epi32::<4>(zero, mask, cell, table.codes.as_ptr().cast())
        };
        // `blend`.
        let (fx1, fy1) = (_mm512_sub_ps(fx, one), _mm512_sub_ps(fy, one));
        let n00 = dot(gradient(code, 0), fx, fy);
        let n10 = dot(gradient(code, 1), fx1, fy);
        let n01 = dot(gradient(code, 2), fx, fy1);
        let n11 = dot(gradient(code, 3), fx1, fy1);
        let (wu, wv) = (fade(fx), fade(fy));
        let (bottom, top) = (lerp(n00, n10, wu), lerp(n01, n11, wu));
        let noise = _mm512_mul_ps(lerp(bottom, top, wv), splat(NOISE_SCALE));
        // `octave_basis`.
        let basis = if ridged_layer {
            let crest = _mm512_sub_ps(one, _mm512_abs_ps(noise));
            let ridge = _mm512_mul_ps(
                splat(2.0),
                _mm512_sub_ps(_mm512_mul_ps(crest, crest), splat(0.45)),
            );
            lerp(noise, ridge, r)
        } else {
            noise
        };
        let s = _mm512_add_ps(s, _mm512_mul_ps(amplitude, basis));
        // SAFETY: as the loads.
        unsafe { _mm512_mask_storeu_ps(sum.as_mut_ptr().add(start), mask, s) };
    }
}
