//! `f64` bounds rounded outwards to `f32`, so that a bound stored in `f32` (a height range,
//! an error) is still a bound.

/// The smallest `f32` not below `x`.
pub(crate) fn round_up(x: f64) -> f32 {
    let f = x as f32;
    if f64::from(f) < x { f.next_up() } else { f }
}

/// The largest `f32` not above `x`.
pub(crate) fn round_down(x: f64) -> f32 {
    let f = x as f32;
    if f64::from(f) > x { f.next_down() } else { f }
}

/// `x.round() as i32` (half away from zero) for `|x| < 2^23`, in a few instructions:
/// baseline x86-64 has no rounding instruction, so `f32::round` is a library call (about
/// a third of the instructions of a patch fill, which rounds 54 times).
#[inline]
pub(crate) fn round_to_i32(x: f32) -> i32 {
    // Towards zero, then the rest, which is exact below 2^23.
    let whole = x as i32;
    let rest = x - whole as f32;
    whole + i32::from(rest >= 0.5) - i32::from(rest <= -0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_to_i32_is_round_half_away_from_zero() {
        let below_half = 0.5f32.next_down();
        let mut values = vec![0.0f32, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, -127.5];
        values.extend([
            below_half,
            -below_half,
            254.5f32.next_down(),
            254.5f32.next_up(),
        ]);
        // Every 1/1024 over the ranges the pool rounds, and their neighbours.
        for i in -300 * 1024..=300 * 1024 {
            let v = i as f32 / 1024.0;
            values.extend([v, v.next_up(), v.next_down()]);
        }
        for v in values {
            assert_eq!(round_to_i32(v), v.round() as i32, "{v}");
        }
        assert_eq!(round_to_i32(f32::NAN), 0);
    }

    #[test]
    fn rounding_is_outwards_and_exact_values_stay() {
        for x in [0.1f64, -0.1, 1e-30, -1e30, 123_456.789, 2f64.powi(-140)] {
            let (up, down) = (round_up(x), round_down(x));
            assert!(f64::from(up) >= x && f64::from(up.next_down()) < x, "{x}");
            assert!(f64::from(down) <= x && f64::from(down.next_up()) > x, "{x}");
        }
        for x in [0.0f64, 1.5, -2.25, 1024.0] {
            assert_eq!((round_up(x), round_down(x)), (x as f32, x as f32));
        }
    }
}
