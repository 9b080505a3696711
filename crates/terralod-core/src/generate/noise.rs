//! Gradient noise from integer hashing and exact float operations only (+ − × ÷), so one
//! seed gives the same bits on every platform: no libm calls, no fused multiply-add.

/// √½, the diagonal gradients' components.
const H: f32 = std::f32::consts::FRAC_1_SQRT_2;

/// Sixteen unit gradients, 22.5° apart. Literals parse to the same bits everywhere; more
/// directions than Perlin's four diagonals keep ridges from lining up with the axes.
const GRADIENTS: [(f32, f32); 16] = [
    (1.0, 0.0),
    (0.923_879_5, 0.382_683_43),
    (H, H),
    (0.382_683_43, 0.923_879_5),
    (0.0, 1.0),
    (-0.382_683_43, 0.923_879_5),
    (-H, H),
    (-0.923_879_5, 0.382_683_43),
    (-1.0, 0.0),
    (-0.923_879_5, -0.382_683_43),
    (-H, -H),
    (-0.382_683_43, -0.923_879_5),
    (0.0, -1.0),
    (0.382_683_43, -0.923_879_5),
    (H, -H),
    (0.923_879_5, -0.382_683_43),
];

/// Brings 2-D gradient noise with unit gradients (extremes ±√½) to about ±1.
const NOISE_SCALE: f32 = std::f32::consts::SQRT_2;

/// Mixes 64 bits (the finaliser of SplitMix64): every input bit affects every output bit.
#[inline]
pub(super) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform value in [0, 1) from the top 24 bits of a hash (exact in `f32`).
#[inline]
pub(super) fn unit_f32(bits: u64) -> f32 {
    (bits >> 40) as f32 * (1.0 / 16_777_216.0)
}

/// Hash of a lattice corner for one noise layer.
#[inline]
fn corner_hash(seed: u64, ix: i32, iy: i32) -> u64 {
    let x = u64::from(ix as u32).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let y = u64::from(iy as u32).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    mix64(seed ^ x ^ y.rotate_left(32))
}

/// `floor` through an integer conversion (exact for |x| < 2³¹, far beyond our coordinates).
#[inline]
fn floor_i32(x: f32) -> i32 {
    let i = x as i32;
    if (i as f32) > x { i - 1 } else { i }
}

/// Perlin's quintic fade 6t⁵ − 15t⁴ + 10t³: zero first and second derivatives at the
/// lattice, so the octaves have no visible grid creases.
#[inline]
fn fade(t: f32) -> f32 {
    t * t * t * (t * (t * 6.0 - 15.0) + 10.0)
}

#[inline]
fn dot_gradient(hash: u64, dx: f32, dy: f32) -> f32 {
    let (gx, gy) = GRADIENTS[(hash >> 60) as usize];
    gx * dx + gy * dy
}

/// 2-D gradient noise of layer `seed` at `(x, y)` (one lattice cell per unit), about −1..1,
/// zero on lattice points.
#[inline]
pub(super) fn gradient_noise(seed: u64, x: f32, y: f32) -> f32 {
    let (ix, iy) = (floor_i32(x), floor_i32(y));
    let (fx, fy) = (x - ix as f32, y - iy as f32);
    let n00 = dot_gradient(corner_hash(seed, ix, iy), fx, fy);
    let n10 = dot_gradient(corner_hash(seed, ix + 1, iy), fx - 1.0, fy);
    let n01 = dot_gradient(corner_hash(seed, ix, iy + 1), fx, fy - 1.0);
    let n11 = dot_gradient(corner_hash(seed, ix + 1, iy + 1), fx - 1.0, fy - 1.0);
    let (u, v) = (fade(fx), fade(fy));
    let bottom = n00 + u * (n10 - n00);
    let top = n01 + u * (n11 - n01);
    (bottom + v * (top - bottom)) * NOISE_SCALE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_matches_the_float_floor() {
        for x in [-2.5f32, -2.0, -0.25, -0.0, 0.0, 0.75, 1.0, 3.999, 1234.5] {
            assert_eq!(floor_i32(x) as f32, x.floor(), "floor of {x}");
        }
    }

    #[test]
    fn noise_is_zero_on_the_lattice_bounded_and_continuous() {
        let seed = 7;
        assert_eq!(gradient_noise(seed, 3.0, -2.0), 0.0);
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for j in 0..200 {
            for i in 0..200 {
                let (x, y) = (i as f32 * 0.037 - 3.0, j as f32 * 0.041 - 4.0);
                let n = gradient_noise(seed, x, y);
                lo = lo.min(n);
                hi = hi.max(n);
                // Continuity across lattice lines: a tiny step changes the value a little.
                let step = gradient_noise(seed, x + 1e-3, y) - n;
                assert!(step.abs() < 0.01, "jump {step} at ({x}, {y})");
            }
        }
        assert!(
            (-1.01..-0.4).contains(&lo) && (0.4..1.01).contains(&hi),
            "{lo}..{hi}"
        );
    }

    #[test]
    fn layers_with_different_seeds_differ() {
        let a = gradient_noise(1, 0.3, 0.6);
        let b = gradient_noise(2, 0.3, 0.6);
        assert_ne!(a, b);
    }
}
