//! Gradient noise from integer hashing and exact float operations only (+ − × ÷), so one
//! seed gives the same bits on every platform: no libm calls, no fused multiply-add.

/// √½, the diagonal gradients' components.
const H: f32 = std::f32::consts::FRAC_1_SQRT_2;

/// Sixteen unit gradients, 22.5° apart. Literals parse to the same bits everywhere; more
/// directions than Perlin's four diagonals keep ridges from lining up with the axes.
pub(super) const GRADIENTS: [(f32, f32); 16] = [
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
pub(super) const NOISE_SCALE: f32 = std::f32::consts::SQRT_2;

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

/// Which of the [`GRADIENTS`] lattice corner `(ix, iy)` of layer `seed` has.
#[inline(always)]
pub(super) fn gradient_index(seed: u64, ix: i32, iy: i32) -> usize {
    (corner_hash(seed, ix, iy) >> 60) as usize
}

/// Largest lattice coordinate (absolute) the noise is defined for: below it, `floor` is
/// exact in `f32` additions ([`floor_f32`]). The generator's coordinates stay far below:
/// the finest octave has at most 65,536 cycles per map, and warped map positions stay
/// within about 1.5 of the origin.
pub(super) const MAX_COORDINATE: f32 = 4_194_304.0;

/// `floor` in float additions only, so it runs in vector lanes: adding 1.5 × 2²³ leaves
/// no fraction bits for `|x| <` [`MAX_COORDINATE`] (2²²), so the sum rounds `x` to an
/// integer, which subtracting gives back exactly; one step down where it rounded up.
#[inline(always)]
fn floor_f32(x: f32) -> f32 {
    const SHIFT: f32 = 12_582_912.0;
    debug_assert!(
        x.abs() < MAX_COORDINATE || !x.is_finite(),
        "{x} beyond the lattice"
    );
    let rounded = (x + SHIFT) - SHIFT;
    if rounded > x { rounded - 1.0 } else { rounded }
}

/// Perlin's quintic fade 6t⁵ − 15t⁴ + 10t³: zero first and second derivatives at the
/// lattice, so the octaves have no visible grid creases.
#[inline]
fn fade(t: f32) -> f32 {
    t * t * t * (t * (t * 6.0 - 15.0) + 10.0)
}

/// The gradients at the four corners (in the order `(0,0)`, `(1,0)`, `(0,1)`, `(1,1)`) of
/// the last lattice cell one layer was sampled in. Successive samples of a row stay in
/// one cell of every octave coarser than a few samples per wave, so a generator that
/// samples row by row keeps one per layer and hashes a cell's corners once
/// ([`gradient_noise_row`]). The values do not depend on it: the same gradients go
/// through the same operations.
#[derive(Clone, Copy, Debug)]
pub(super) struct CellGradients {
    /// The cell's lower corner (integers), `None` before the first sample.
    cell: Option<(f32, f32)>,
    gradients: [(f32, f32); 4],
}

impl CellGradients {
    pub const EMPTY: CellGradients = CellGradients {
        cell: None,
        gradients: [(0.0, 0.0); 4],
    };

    /// Moves to the cell with lower corner `(cx, cy)` (integers) of layer `seed`, hashing
    /// its corners unless it is there.
    #[inline]
    fn enter(&mut self, seed: u64, cx: f32, cy: f32) {
        if self.cell != Some((cx, cy)) {
            let (ix, iy) = (cx as i32, cy as i32);
            let gradient = |ix, iy| GRADIENTS[gradient_index(seed, ix, iy)];
            *self = CellGradients {
                cell: Some((cx, cy)),
                gradients: [
                    gradient(ix, iy),
                    gradient(ix + 1, iy),
                    gradient(ix, iy + 1),
                    gradient(ix + 1, iy + 1),
                ],
            };
        }
    }
}

/// The lower corner of the lattice cell of `(x, y)` and the position inside it.
#[inline(always)]
fn locate(x: f32, y: f32) -> ((f32, f32), (f32, f32)) {
    let (cx, cy) = (floor_f32(x), floor_f32(y));
    ((cx, cy), (x - cx, y - cy))
}

/// The noise inside a cell with corner gradients `g` at `(fx, fy)` from its lower corner.
#[inline(always)]
fn blend(g: [(f32, f32); 4], fx: f32, fy: f32) -> f32 {
    let dot = |(gx, gy): (f32, f32), dx: f32, dy: f32| gx * dx + gy * dy;
    let n00 = dot(g[0], fx, fy);
    let n10 = dot(g[1], fx - 1.0, fy);
    let n01 = dot(g[2], fx, fy - 1.0);
    let n11 = dot(g[3], fx - 1.0, fy - 1.0);
    let (u, v) = (fade(fx), fade(fy));
    let bottom = n00 + u * (n10 - n00);
    let top = n01 + u * (n11 - n01);
    (bottom + v * (top - bottom)) * NOISE_SCALE
}

/// 2-D gradient noise of layer `seed` at `(x, y)` (one lattice cell per unit; `|x|, |y| <`
/// [`MAX_COORDINATE`]), about −1..1, zero on lattice points.
#[inline]
pub(super) fn gradient_noise(seed: u64, x: f32, y: f32) -> f32 {
    let ((cx, cy), (fx, fy)) = locate(x, y);
    let mut cell = CellGradients::EMPTY;
    cell.enter(seed, cx, cy);
    blend(cell.gradients, fx, fy)
}

/// Scratch of [`gradient_noise_row`]: per sample its cell's lower corner and its position
/// in the cell, one array per component, so the arithmetic runs in vector lanes.
#[derive(Debug, Default)]
pub(super) struct NoiseRow {
    cx: Vec<f32>,
    cy: Vec<f32>,
    fx: Vec<f32>,
    fy: Vec<f32>,
}

/// [`gradient_noise`] of layer `seed` at `(xs[i], ys[i])` into `out[i]`, the same value
/// bit for bit; `cell` keeps the layer's last cell from row to row. Samples are taken in
/// runs that share a cell: its gradients are hashed once and the run is computed in
/// vector lanes.
#[inline(always)]
pub(super) fn gradient_noise_row(
    seed: u64,
    xs: &[f32],
    ys: &[f32],
    cell: &mut CellGradients,
    row: &mut NoiseRow,
    out: &mut [f32],
) {
    let n = xs.len();
    assert!(
        ys.len() == n && out.len() == n,
        "one x, y and output per sample"
    );
    for v in [&mut row.cx, &mut row.cy, &mut row.fx, &mut row.fy] {
        v.resize(n, 0.0);
    }
    let (cxs, cys) = (&mut row.cx[..n], &mut row.cy[..n]);
    let (fxs, fys) = (&mut row.fx[..n], &mut row.fy[..n]);
    for i in 0..n {
        ((cxs[i], cys[i]), (fxs[i], fys[i])) = locate(xs[i], ys[i]);
    }
    let mut start = 0;
    while start < n {
        // Compared as bits (a corner is never −0; NaN, never produced, would share a run).
        let (cx, cy) = (cxs[start], cys[start]);
        let here = (cx.to_bits(), cy.to_bits());
        let end = (start + 1..n)
            .find(|&i| (cxs[i].to_bits(), cys[i].to_bits()) != here)
            .unwrap_or(n);
        cell.enter(seed, cx, cy);
        let g = cell.gradients;
        let run = start..end;
        for ((o, &fx), &fy) in out[run.clone()]
            .iter_mut()
            .zip(&fxs[run.clone()])
            .zip(&fys[run])
        {
            *o = blend(g, fx, fy);
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 kernel picks a gradient from the first eight and negates it for the
    /// second eight (`wide::vector`), which holds only if these do.
    #[test]
    fn the_gradients_second_half_negates_the_first() {
        for k in 0..8 {
            let ((x, y), (nx, ny)) = (GRADIENTS[k], GRADIENTS[k + 8]);
            assert_eq!((nx, ny), (-x, -y), "gradient {k}");
            // Zeros are +0 in the table (the kernel turns its flipped zeros into +0).
            for c in [x, y, nx, ny] {
                assert!(c != 0.0 || c.is_sign_positive(), "gradient {k}: a −0");
            }
        }
    }

    #[test]
    fn floor_matches_the_float_floor() {
        let below = MAX_COORDINATE - 1.0;
        let extremes = [
            below,
            below - 0.5,
            -below,
            -below + 0.5,
            0.5,
            -0.5,
            1.5,
            -1.5,
        ];
        let steps = [
            -2.5f32, -2.0, -0.25, -0.0, 0.0, 0.75, 1.0, 3.999, 1234.5, 2.5, 3.5,
        ];
        let just_below = [
            1.0f32.next_down(),
            -1.0f32.next_down(),
            4096.0f32.next_down(),
        ];
        for x in extremes.into_iter().chain(steps).chain(just_below) {
            assert_eq!(floor_f32(x), x.floor(), "floor of {x}");
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
