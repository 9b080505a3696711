//! Resampling between the pyramid levels of the generator: separable Catmull-Rom, with
//! grids aligned on their corners (sample 0 and the last sample of every level sit on the
//! map edges), computed row by row in parallel with a result independent of thread count.

use rayon::prelude::*;

/// Four source indices and their Catmull-Rom weights for one output position.
#[derive(Clone, Copy, Debug)]
struct Taps {
    index: [usize; 4],
    weight: [f32; 4],
}

/// Taps mapping `to` corner-aligned samples onto `from` samples (both ≥ 2). Beyond the
/// edges the grid is extended linearly (`p₋₁ = 2p₀ − p₁`), folded into the weights, so a
/// linear ramp stays linear right up to the edge.
fn taps(from: usize, to: usize) -> Vec<Taps> {
    let last = from - 1;
    (0..to)
        .map(|j| {
            // Position in source samples, exact in f64 then rounded once.
            let pos = (j * last) as f64 / (to - 1) as f64;
            let base = (pos as usize).min(last - 1);
            let mut weight = catmull_rom((pos - base as f64) as f32);
            let mut index = [base.saturating_sub(1), base, base + 1, (base + 2).min(last)];
            if base == 0 {
                weight[1] += 2.0 * weight[0];
                weight[2] -= weight[0];
                weight[0] = 0.0;
                index[0] = 0;
            }
            if base + 2 > last {
                weight[2] += 2.0 * weight[3];
                weight[1] -= weight[3];
                weight[3] = 0.0;
                index[3] = last;
            }
            Taps { index, weight }
        })
        .collect()
}

/// Catmull-Rom weights at `t` in [0, 1]: interpolating, C¹, and they sum to one.
pub(super) fn catmull_rom(t: f32) -> [f32; 4] {
    let t2 = t * t;
    let t3 = t2 * t;
    [
        0.5 * (-t3 + 2.0 * t2 - t),
        0.5 * (3.0 * t3 - 5.0 * t2 + 2.0),
        0.5 * (-3.0 * t3 + 4.0 * t2 + t),
        0.5 * (t3 - t2),
    ]
}

#[inline]
fn apply(taps: &Taps, read: impl Fn(usize) -> f32) -> f32 {
    taps.weight[0] * read(taps.index[0])
        + taps.weight[1] * read(taps.index[1])
        + taps.weight[2] * read(taps.index[2])
        + taps.weight[3] * read(taps.index[3])
}

/// Resamples a square `from × from` row-major grid to `to × to`, keeping the corners.
pub(super) fn resample_square(values: &[f32], from: usize, to: usize) -> Vec<f32> {
    debug_assert_eq!(values.len(), from * from);
    debug_assert!(from >= 2 && to >= 2);
    let columns = taps(from, to);
    let rows = taps(from, to);
    // Horizontal pass: every source row at the new width.
    let mut wide = vec![0.0f32; from * to];
    wide.par_chunks_mut(to)
        .zip(values.par_chunks(from))
        .for_each(|(out, src)| {
            for (o, tap) in out.iter_mut().zip(&columns) {
                *o = apply(tap, |k| src[k]);
            }
        });
    // Vertical pass: each output row blends four widened rows.
    let mut out = vec![0.0f32; to * to];
    out.par_chunks_mut(to)
        .zip(rows.par_iter())
        .for_each(|(out_row, tap)| {
            for (c, o) in out_row.iter_mut().enumerate() {
                *o = apply(tap, |k| wide[k * to + c]);
            }
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_corners_and_reproduces_linear_ramps() {
        // A plane is reproduced exactly by Catmull-Rom (up to rounding), corners included.
        let from = 5;
        let plane: Vec<f32> = (0..from * from)
            .map(|i| (i % from) as f32 * 2.0 + (i / from) as f32 * 3.0)
            .collect();
        let to = 9;
        let up = resample_square(&plane, from, to);
        for r in 0..to {
            for c in 0..to {
                let expected = c as f32 * 0.5 * 2.0 + r as f32 * 0.5 * 3.0;
                assert!((up[r * to + c] - expected).abs() < 1e-4, "({c},{r})");
            }
        }
        assert_eq!(up[0], plane[0]);
        assert_eq!(up[to * to - 1], plane[from * from - 1]);
    }

    #[test]
    fn interpolates_source_samples_on_aligned_positions() {
        let from = 4;
        let values: Vec<f32> = (0..16).map(|i| ((i * 7) % 5) as f32).collect();
        let to = 7; // (to - 1) = 2 (from - 1): every other output is a source sample
        let up = resample_square(&values, from, to);
        for r in 0..from {
            for c in 0..from {
                assert_eq!(up[2 * r * to + 2 * c], values[r * from + c]);
            }
        }
    }
}
