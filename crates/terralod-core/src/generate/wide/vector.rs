//! The lane operations of the wide kernels ([`super::add_octave`], [`super::bounds`]), for
//! one register: AVX-512 (16 lanes) and AVX2 (8). Each is one instruction, or a fixed
//! sequence of exactly rounded ones, so the kernels give the scalar code's bits at either
//! width.
//!
//! Every method is `unsafe` and `#[inline(always)]`: the CPU has the implementation's
//! features, and the caller is compiled with them (`#[target_feature]`), so the
//! intrinsics inline into it.
#![allow(clippy::missing_safety_doc, unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

/// One register's lanes of `f32` and `i32`, and the set of lanes in use.
pub(super) trait Vector {
    const LANES: usize;
    type F: Copy;
    type I: Copy;
    /// Lanes in use (the first `k`, at a slice's end).
    type Mask: Copy;
    /// The sixteen gradients' components, held in registers for [`Vector::pick`].
    type Table: Copy;

    unsafe fn first(k: usize) -> Self::Mask;
    unsafe fn splat(x: f32) -> Self::F;
    unsafe fn splat_i(x: i32) -> Self::I;
    /// Loads the mask's lanes from `values` on, zero in the others.
    unsafe fn load(mask: Self::Mask, values: *const f32) -> Self::F;
    unsafe fn store(values: *mut f32, mask: Self::Mask, v: Self::F);
    /// `v` in the mask's lanes, `other` in the rest.
    unsafe fn select(mask: Self::Mask, v: Self::F, other: Self::F) -> Self::F;
    unsafe fn add(a: Self::F, b: Self::F) -> Self::F;
    unsafe fn sub(a: Self::F, b: Self::F) -> Self::F;
    unsafe fn mul(a: Self::F, b: Self::F) -> Self::F;
    /// The lanes' `minps` / `maxps` (the second operand where either is NaN).
    unsafe fn min(a: Self::F, b: Self::F) -> Self::F;
    unsafe fn max(a: Self::F, b: Self::F) -> Self::F;
    unsafe fn abs(a: Self::F) -> Self::F;
    /// `rounded − 1` where `rounded > x`, else `rounded` (the last step of `floor_f32`).
    unsafe fn step_down(rounded: Self::F, x: Self::F) -> Self::F;
    /// Truncated towards zero, as `cvttps2dq`.
    unsafe fn truncate(x: Self::F) -> Self::I;
    unsafe fn min_i(a: Self::I, b: Self::I) -> Self::I;
    unsafe fn max_i(a: Self::I, b: Self::I) -> Self::I;
    /// `a · b + c`, wrapping.
    unsafe fn mul_add_i(a: Self::I, b: Self::I, c: Self::I) -> Self::I;
    /// `(code >> shift) & 15`.
    unsafe fn nibble(code: Self::I, shift: u32) -> Self::I;
    /// `table[index]` in the mask's lanes, 0 in the others.
    unsafe fn gather(mask: Self::Mask, table: *const u32, index: Self::I) -> Self::I;
    unsafe fn table(values: &[f32; 16]) -> Self::Table;
    /// `table[index]` for indices below 16.
    unsafe fn pick(table: Self::Table, index: Self::I) -> Self::F;
    /// The first `LANES` values of `v` into `out`.
    unsafe fn to_array(v: Self::F, out: &mut [f32; 16]);
    unsafe fn to_array_i(v: Self::I, out: &mut [i32; 16]);

    // The noise's steps, as the scalar code writes them (no closures in the kernels: a
    // closure is compiled without its caller's features, and one left out of line calls
    // each intrinsic as a function).

    /// `floor_f32`: exact below 2²² by adding and subtracting 1.5 × 2²³.
    #[inline(always)]
    unsafe fn floor(x: Self::F) -> Self::F {
        let shift = Self::splat(12_582_912.0);
        Self::step_down(Self::sub(Self::add(x, shift), shift), x)
    }
    /// Perlin's fade, `t³ (t (6t − 15) + 10)`.
    #[inline(always)]
    unsafe fn fade(t: Self::F) -> Self::F {
        let inner = Self::sub(Self::mul(t, Self::splat(6.0)), Self::splat(15.0));
        let inner = Self::add(Self::mul(t, inner), Self::splat(10.0));
        Self::mul(Self::mul(Self::mul(t, t), t), inner)
    }
    /// `a + t (b − a)`.
    #[inline(always)]
    unsafe fn lerp(a: Self::F, b: Self::F, t: Self::F) -> Self::F {
        Self::add(a, Self::mul(t, Self::sub(b, a)))
    }
    /// The corner's gradient (its 4-bit index in `code`) dotted with `(dx, dy)`.
    #[inline(always)]
    unsafe fn corner(
        (gx, gy): (Self::Table, Self::Table),
        code: Self::I,
        corner: u32,
        dx: Self::F,
        dy: Self::F,
    ) -> Self::F {
        let index = Self::nibble(code, 4 * corner);
        Self::add(
            Self::mul(Self::pick(gx, index), dx),
            Self::mul(Self::pick(gy, index), dy),
        )
    }
}

/// AVX-512 F (with BW, DQ and VL where the kernels run): 16 lanes, masks in `k` registers.
#[derive(Clone, Copy, Debug)]
pub(super) struct Avx512;

/// AVX2: 8 lanes, masks as all-ones lanes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Avx2;

impl Vector for Avx512 {
    const LANES: usize = 16;
    type F = __m512;
    type I = __m512i;
    type Mask = __mmask16;
    type Table = __m512;

    #[inline(always)]
    unsafe fn first(k: usize) -> __mmask16 {
        if k >= 16 { 0xFFFF } else { (1u16 << k) - 1 }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        _mm512_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn splat_i(x: i32) -> __m512i {
        _mm512_set1_epi32(x)
    }
    #[inline(always)]
    unsafe fn load(mask: __mmask16, values: *const f32) -> __m512 {
        _mm512_maskz_loadu_ps(mask, values)
    }
    #[inline(always)]
    unsafe fn store(values: *mut f32, mask: __mmask16, v: __m512) {
        _mm512_mask_storeu_ps(values, mask, v)
    }
    #[inline(always)]
    unsafe fn select(mask: __mmask16, v: __m512, other: __m512) -> __m512 {
        _mm512_mask_blend_ps(mask, other, v)
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: __m512, b: __m512) -> __m512 {
        _mm512_sub_ps(a, b)
    }
    #[inline(always)]
    unsafe fn mul(a: __m512, b: __m512) -> __m512 {
        _mm512_mul_ps(a, b)
    }
    #[inline(always)]
    unsafe fn min(a: __m512, b: __m512) -> __m512 {
        _mm512_min_ps(a, b)
    }
    #[inline(always)]
    unsafe fn max(a: __m512, b: __m512) -> __m512 {
        _mm512_max_ps(a, b)
    }
    #[inline(always)]
    unsafe fn abs(a: __m512) -> __m512 {
        _mm512_abs_ps(a)
    }
    #[inline(always)]
    unsafe fn step_down(rounded: __m512, x: __m512) -> __m512 {
        let up = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(rounded, x);
        _mm512_mask_sub_ps(rounded, up, rounded, _mm512_set1_ps(1.0))
    }
    #[inline(always)]
    unsafe fn truncate(x: __m512) -> __m512i {
        _mm512_cvttps_epi32(x)
    }
    #[inline(always)]
    unsafe fn min_i(a: __m512i, b: __m512i) -> __m512i {
        _mm512_min_epi32(a, b)
    }
    #[inline(always)]
    unsafe fn max_i(a: __m512i, b: __m512i) -> __m512i {
        _mm512_max_epi32(a, b)
    }
    #[inline(always)]
    unsafe fn mul_add_i(a: __m512i, b: __m512i, c: __m512i) -> __m512i {
        _mm512_add_epi32(_mm512_mullo_epi32(a, b), c)
    }
    #[inline(always)]
    unsafe fn nibble(code: __m512i, shift: u32) -> __m512i {
        _mm512_and_si512(
            _mm512_srlv_epi32(code, _mm512_set1_epi32(shift as i32)),
            _mm512_set1_epi32(15),
        )
    }
    #[inline(always)]
    unsafe fn gather(mask: __mmask16, table: *const u32, index: __m512i) -> __m512i {
        _mm512_mask_i32gather_epi32::<4>(_mm512_setzero_si512(), mask, index, table.cast())
    }
    #[inline(always)]
    unsafe fn table(values: &[f32; 16]) -> __m512 {
        _mm512_loadu_ps(values.as_ptr())
    }
    #[inline(always)]
    unsafe fn pick(table: __m512, index: __m512i) -> __m512 {
        _mm512_permutexvar_ps(index, table)
    }
    #[inline(always)]
    unsafe fn to_array(v: __m512, out: &mut [f32; 16]) {
        _mm512_storeu_ps(out.as_mut_ptr(), v)
    }
    #[inline(always)]
    unsafe fn to_array_i(v: __m512i, out: &mut [i32; 16]) {
        _mm512_storeu_si512(out.as_mut_ptr().cast(), v)
    }
}

impl Vector for Avx2 {
    const LANES: usize = 8;
    type F = __m256;
    type I = __m256i;
    type Mask = __m256i;
    /// The gradients 0–7 (8–15 are their negatives).
    type Table = __m256;

    #[inline(always)]
    unsafe fn first(k: usize) -> __m256i {
        let k = k.min(8) as i32;
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(k),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        _mm256_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn splat_i(x: i32) -> __m256i {
        _mm256_set1_epi32(x)
    }
    #[inline(always)]
    unsafe fn load(mask: __m256i, values: *const f32) -> __m256 {
        _mm256_maskload_ps(values, mask)
    }
    #[inline(always)]
    unsafe fn store(values: *mut f32, mask: __m256i, v: __m256) {
        _mm256_maskstore_ps(values, mask, v)
    }
    #[inline(always)]
    unsafe fn select(mask: __m256i, v: __m256, other: __m256) -> __m256 {
        _mm256_blendv_ps(other, v, _mm256_castsi256_ps(mask))
    }
    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        _mm256_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: __m256, b: __m256) -> __m256 {
        _mm256_sub_ps(a, b)
    }
    #[inline(always)]
    unsafe fn mul(a: __m256, b: __m256) -> __m256 {
        _mm256_mul_ps(a, b)
    }
    #[inline(always)]
    unsafe fn min(a: __m256, b: __m256) -> __m256 {
        _mm256_min_ps(a, b)
    }
    #[inline(always)]
    unsafe fn max(a: __m256, b: __m256) -> __m256 {
        _mm256_max_ps(a, b)
    }
    #[inline(always)]
    unsafe fn abs(a: __m256) -> __m256 {
        // Clears the sign bit, as `_mm512_abs_ps` does.
        _mm256_andnot_ps(_mm256_set1_ps(-0.0), a)
    }
    #[inline(always)]
    unsafe fn step_down(rounded: __m256, x: __m256) -> __m256 {
        let up = _mm256_cmp_ps::<_CMP_GT_OQ>(rounded, x);
        _mm256_blendv_ps(rounded, _mm256_sub_ps(rounded, _mm256_set1_ps(1.0)), up)
    }
    #[inline(always)]
    unsafe fn truncate(x: __m256) -> __m256i {
        _mm256_cvttps_epi32(x)
    }
    #[inline(always)]
    unsafe fn min_i(a: __m256i, b: __m256i) -> __m256i {
        _mm256_min_epi32(a, b)
    }
    #[inline(always)]
    unsafe fn max_i(a: __m256i, b: __m256i) -> __m256i {
        _mm256_max_epi32(a, b)
    }
    #[inline(always)]
    unsafe fn mul_add_i(a: __m256i, b: __m256i, c: __m256i) -> __m256i {
        _mm256_add_epi32(_mm256_mullo_epi32(a, b), c)
    }
    #[inline(always)]
    unsafe fn nibble(code: __m256i, shift: u32) -> __m256i {
        _mm256_and_si256(
            _mm256_srlv_epi32(code, _mm256_set1_epi32(shift as i32)),
            _mm256_set1_epi32(15),
        )
    }
    #[inline(always)]
    unsafe fn gather(mask: __m256i, table: *const u32, index: __m256i) -> __m256i {
        _mm256_mask_i32gather_epi32::<4>(_mm256_setzero_si256(), table.cast(), index, mask)
    }
    #[inline(always)]
    unsafe fn table(values: &[f32; 16]) -> __m256 {
        _mm256_loadu_ps(values.as_ptr())
    }
    #[inline(always)]
    unsafe fn pick(low: __m256, index: __m256i) -> __m256 {
        // Entry `k + 8` is entry `k` negated (`GRADIENTS`, checked by
        // `the_gradients_second_half_negates_the_first`): the first half's entry by the
        // index's low 3 bits, its sign flipped by bit 3 (moved to the sign bit). Adding
        // +0 turns the flipped zeros back into the table's +0 and changes nothing else.
        // (Two permutes and a blend took 20 % longer a window.)
        let from_low = _mm256_permutevar8x32_ps(low, index);
        let sign = _mm256_and_si256(_mm256_slli_epi32::<28>(index), _mm256_set1_epi32(i32::MIN));
        let flipped = _mm256_xor_ps(from_low, _mm256_castsi256_ps(sign));
        _mm256_add_ps(flipped, _mm256_setzero_ps())
    }
    #[inline(always)]
    unsafe fn to_array(v: __m256, out: &mut [f32; 16]) {
        _mm256_storeu_ps(out.as_mut_ptr(), v)
    }
    #[inline(always)]
    unsafe fn to_array_i(v: __m256i, out: &mut [i32; 16]) {
        _mm256_storeu_si256(out.as_mut_ptr().cast(), v)
    }
}
