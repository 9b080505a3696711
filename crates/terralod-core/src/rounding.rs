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

#[cfg(test)]
mod tests {
    use super::*;

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
