//! The import's per-block statistics (height range, error against the next coarser level)
//! computed in the samples' own type, in independent lanes the compiler vectorises.
//!
//! They were 40 % of a raw import's CPU time as `f64` folds through `f64::min`/`max`
//! (one serial dependency per sample). The results are bit for bit those of the
//! definitions ([`super::import::error_in_window`] and an `f64` fold, tested): a residual
//! `|h − (a + b) / 2|` is computed as `|2h − (a + b)| / 2`, exactly in `i32` for 16-bit
//! samples and with the same single rounding (of `a + b`) in `f64` for `f32` ones, since
//! scaling by two commutes with rounding.

/// A sample type the import's statistics know.
pub(crate) trait StatSample: Copy + PartialOrd + Into<f64> {
    /// An exact `|2h − (a + b)|`.
    type Twice: Copy + PartialOrd;
    const TWICE_ZERO: Self::Twice;
    /// Starting points of a range fold (the first sample replaces them).
    const HIGHEST: Self;
    const LOWEST: Self;
    fn twice_residual(h: Self, a: Self, b: Self) -> Self::Twice;
    fn twice_to_f64(twice: Self::Twice) -> f64;
}

/// 16-bit samples: twice a residual fits an `i32` exactly.
macro_rules! sixteen_bit_stat_sample {
    ($($t:ty),*) => {$(
        impl StatSample for $t {
            type Twice = i32;
            const TWICE_ZERO: i32 = 0;
            const HIGHEST: $t = <$t>::MAX;
            const LOWEST: $t = <$t>::MIN;
            #[inline(always)]
            fn twice_residual(h: $t, a: $t, b: $t) -> i32 {
                (2 * i32::from(h) - i32::from(a) - i32::from(b)).abs()
            }
            fn twice_to_f64(twice: i32) -> f64 {
                f64::from(twice) / 2.0
            }
        }
    )*};
}

sixteen_bit_stat_sample!(u16, i16);

impl StatSample for f32 {
    type Twice = f64;
    const TWICE_ZERO: f64 = 0.0;
    const HIGHEST: f32 = f32::INFINITY;
    const LOWEST: f32 = f32::NEG_INFINITY;
    #[inline(always)]
    fn twice_residual(h: f32, a: f32, b: f32) -> f64 {
        (2.0 * f64::from(h) - (f64::from(a) + f64::from(b))).abs()
    }
    fn twice_to_f64(twice: f64) -> f64 {
        twice / 2.0
    }
}

/// Independent accumulators: a fold over one would be a chain of dependent compares.
const LANES: usize = 8;

/// Largest of `f(p)` over `p` in `0..n`, folded with `>` (a NaN never wins, as with
/// `f64::max`).
#[inline(always)]
fn max_over<A: Copy + PartialOrd>(n: usize, zero: A, f: impl Fn(usize) -> A) -> A {
    let mut lanes = [zero; LANES];
    let whole = n - n % LANES;
    for base in (0..whole).step_by(LANES) {
        for (k, lane) in lanes.iter_mut().enumerate() {
            let value = f(base + k);
            if value > *lane {
                *lane = value;
            }
        }
    }
    for p in whole..n {
        let value = f(p);
        if value > lanes[0] {
            lanes[0] = value;
        }
    }
    lanes
        .into_iter()
        .fold(zero, |acc, v| if v > acc { v } else { acc })
}

/// Raw lowest and highest sample of a row, folded into `(lo, hi)` (NaN samples are
/// skipped, as `f64::min`/`max` skip them).
#[inline(always)]
pub(crate) fn fold_range<T: StatSample>(row: &[T], (lo, hi): (T, T)) -> (T, T) {
    let mut lows = [T::HIGHEST; LANES];
    let mut highs = [T::LOWEST; LANES];
    let chunks = row.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for k in 0..LANES {
            if chunk[k] < lows[k] {
                lows[k] = chunk[k];
            }
            if chunk[k] > highs[k] {
                highs[k] = chunk[k];
            }
        }
    }
    let mut out = (lo, hi);
    for &v in lows.iter().chain(rest) {
        if v < out.0 {
            out.0 = v;
        }
    }
    for &v in highs.iter().chain(rest) {
        if v > out.1 {
            out.1 = v;
        }
    }
    out
}

/// [`fold_range`] over rows of one length (a block's): the lowest and highest sample of
/// each column first, then of those. (A block's rows are short: folding each one alone,
/// the reduction of its lanes took longer than the row.) The same values as folding each
/// row; between `−0.0` and `+0.0`, which compare equal, either may be kept.
#[inline(always)]
pub(crate) fn fold_range_of_rows<'a, T: StatSample + 'a>(
    width: usize,
    rows: impl IntoIterator<Item = &'a [T]>,
    range: (T, T),
) -> (T, T) {
    let (mut lows, mut highs) = (vec![T::HIGHEST; width], vec![T::LOWEST; width]);
    for row in rows {
        assert_eq!(row.len(), width, "rows of one length");
        for ((lo, hi), &v) in lows.iter_mut().zip(highs.iter_mut()).zip(row) {
            *lo = if v < *lo { v } else { *lo };
            *hi = if v > *hi { v } else { *hi };
        }
    }
    (fold_range(&lows, range).0, fold_range(&highs, range).1)
}

/// [`super::import::error_in_window`], the same value, computed as described in the
/// module docs: the `side × side` window at `origin` (both even) of a grid `stride` wide.
///
/// The window's even and odd columns are first copied apart, so that every residual
/// reads consecutive samples (read at a stride of two, lane by lane, they kept the loops
/// out of vector lanes).
#[inline(always)]
pub(crate) fn window_error<T: StatSample>(
    samples: &[T],
    stride: usize,
    (x0, y0): (usize, usize),
    side: usize,
) -> f64 {
    if side < 2 {
        return 0.0;
    }
    // Odd positions `2p + 1` with both neighbours in the window, and even positions `2p`.
    let odd = (side - 1) / 2;
    let even = side.div_ceil(2);
    // (Every odd column, of which the last has no right neighbour when `side` is even.)
    let odd_columns = side / 2;
    let mut evens = vec![T::LOWEST; even * side];
    let mut odds = vec![T::LOWEST; odd_columns * side];
    for (j, (evens, odds)) in evens
        .chunks_exact_mut(even)
        .zip(odds.chunks_exact_mut(odd_columns))
        .enumerate()
    {
        let start = (y0 + j) * stride + x0;
        let row = &samples[start..start + side];
        for ((e, o), pair) in evens
            .iter_mut()
            .zip(odds.iter_mut())
            .zip(row.chunks_exact(2))
        {
            (*e, *o) = (pair[0], pair[1]);
        }
        if side % 2 == 1 {
            evens[even - 1] = row[side - 1];
        }
    }
    let evens_of = |j: usize| &evens[j * even..(j + 1) * even];
    let odds_of = |j: usize| &odds[j * odd_columns..(j + 1) * odd_columns];
    let mut twice = T::TWICE_ZERO;
    let mut keep = |value: T::Twice| {
        if value > twice {
            twice = value;
        }
    };
    for j in (0..side).step_by(2) {
        // Sample 2p + 1 between 2p and 2p + 2.
        let (h, a, b) = (
            &odds_of(j)[..odd],
            &evens_of(j)[..odd],
            &evens_of(j)[1..=odd],
        );
        keep(max_over(odd, T::TWICE_ZERO, |p| {
            T::twice_residual(h[p], a[p], b[p])
        }));
    }
    for j in (1..side - 1).step_by(2) {
        let (above, here, below) = (evens_of(j - 1), evens_of(j), evens_of(j + 1));
        keep(max_over(even, T::TWICE_ZERO, |p| {
            T::twice_residual(here[p], above[p], below[p])
        }));
        // Sample 2p + 1 on the diagonals between 2p and 2p + 2 of the rows around it.
        let h = &odds_of(j)[..odd];
        let (above_before, above_after) = (&above[..odd], &above[1..=odd]);
        let (below_before, below_after) = (&below[..odd], &below[1..=odd]);
        keep(max_over(odd, T::TWICE_ZERO, |p| {
            let falling = T::twice_residual(h[p], above_before[p], below_after[p]);
            let rising = T::twice_residual(h[p], above_after[p], below_before[p]);
            // A NaN never wins, whichever side it is on (as `f64::max`).
            let falling_is_nan = falling.partial_cmp(&falling).is_none();
            if rising > falling || falling_is_nan {
                rising
            } else {
                falling
            }
        }));
    }
    T::twice_to_f64(twice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tiles::import::error_in_window;
    use crate::wide_lanes::{Lanes, detected, run_at};

    /// A deterministic scramble of `i`.
    fn scramble(mut i: u64) -> u64 {
        crate::test_support::splitmix64(&mut i)
    }

    fn reference_range<T: Copy + Into<f64>>(row: &[T]) -> (f64, f64) {
        row.iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v.into()), hi.max(v.into()))
            })
    }

    /// The lane widths the statistics are checked in (each where the CPU has it, else the
    /// widest below it).
    const WIDTHS: [Lanes; 3] = [Lanes::Baseline, Lanes::Avx2, Lanes::Avx512];

    /// Every window size and origin parity the import uses, against the definitions, for
    /// all three sample types, with extreme values (the ends of the 16-bit ranges, `f32`
    /// samples of very different magnitudes whose sums round, and NaN, which both skip).
    fn agrees<T: StatSample + std::fmt::Debug>(make: impl Fn(u64) -> T) {
        for (stride, rows) in [(9usize, 9usize), (23, 19), (67, 67), (133, 71)] {
            let samples: Vec<T> = (0..(stride * rows) as u64).map(&make).collect();
            for side in (3..=rows.min(stride)).step_by(2) {
                for (x0, y0) in [(0, 0), (2, 0), (0, 2), (4, 6)] {
                    if x0 + side > stride || y0 + side > rows {
                        continue;
                    }
                    let slow = error_in_window(&samples, stride, (x0, y0), side);
                    // In this build's lanes, and in AVX2 and AVX-512 lanes where the CPU
                    // has them.
                    let fast = WIDTHS.map(|lanes| {
                        run_at(
                            lanes,
                            #[inline(always)]
                            || window_error(&samples, stride, (x0, y0), side),
                        )
                    });
                    for fast in fast {
                        assert_eq!(
                            fast.to_bits(),
                            slow.to_bits(),
                            "{stride}x{rows} side {side} at ({x0}, {y0}): {fast} against {slow}"
                        );
                    }
                }
            }
            for row in samples.chunks(stride) {
                for len in [1, 7, 8, 9, stride] {
                    let row = &row[..len];
                    let (lo, hi) = fold_range(row, (T::HIGHEST, T::LOWEST));
                    let (want_lo, want_hi) = reference_range(row);
                    assert_eq!((lo.into(), hi.into()), (want_lo, want_hi), "{row:?}");
                }
            }
            for width in [1, 9, 16, 17, stride].into_iter().filter(|&w| w <= stride) {
                let rows = samples.chunks(stride).map(|row| &row[..width]);
                let all: Vec<T> = rows.clone().flatten().copied().collect();
                let folds = WIDTHS.map(|lanes| {
                    run_at(
                        lanes,
                        #[inline(always)]
                        || fold_range_of_rows(width, rows.clone(), (T::HIGHEST, T::LOWEST)),
                    )
                });
                for (lo, hi) in folds {
                    assert_eq!(
                        (lo.into(), hi.into()),
                        reference_range(&all),
                        "{width} wide"
                    );
                }
            }
        }
    }

    #[test]
    fn laned_statistics_equal_the_definitions() {
        if detected() < Lanes::Avx512 {
            println!(
                "no AVX-512 here (only {:?}): not every path is checked",
                detected()
            );
        }
        agrees(|i| {
            let r = scramble(i);
            match r % 5 {
                0 => u16::MAX,
                1 => 0,
                _ => (r >> 8) as u16,
            }
        });
        agrees(|i| {
            let r = scramble(i);
            match r % 5 {
                0 => i16::MAX,
                1 => i16::MIN,
                _ => (r >> 8) as i16,
            }
        });
        agrees(|i| {
            let r = scramble(i);
            let mantissa = ((r >> 11) as f64 / (1u64 << 53) as f64) as f32;
            let sign = if r & 1 == 0 { 1.0 } else { -1.0 };
            match r % 11 {
                0 => sign * mantissa * 1e30,
                1 => sign * mantissa * 1e-30,
                2 => 0.0,
                3 => f32::NAN,
                _ => sign * mantissa * 3000.0,
            }
        });
    }
}
