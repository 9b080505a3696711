//! The static values of one square of algorithm A (the article's "height tree" part): its
//! vertical extent and the error values its tests use, quantised outwards so that every
//! bound stays a bound; and the codes its vertex heights are stored in.

pub(super) use crate::rounding::round_up;

/// Sides of a square, as bit positions in the state words: the east and south edge
/// vertices belong to the square (the article's rule); north and west belong to the
/// neighbours, except on the grid's north and west border where nobody else has them.
pub(super) const EAST: usize = 0;
pub(super) const SOUTH: usize = 1;
pub(super) const NORTH: usize = 2;
pub(super) const WEST: usize = 3;

/// Slot of a square's centre among the heights it owns (east and south are [`EAST`] and
/// [`SOUTH`]).
pub(super) const CENTRE: usize = 2;

/// Static values of one square (12 bytes): the box as height codes (the low one rounded
/// down, the high one up) and errors as the upper half of their `f32` bits rounded up (a
/// relative step of 2^-7 at most). Bounds stay bounds; the tests see at most 0.8 % larger
/// errors and boxes a step taller.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct SquareRecord {
    min_y: u16,
    max_y: u16,
    fan_error: u16,
    subtree_error: u16,
    east_error: u16,
    south_error: u16,
}

const _: () = assert!(size_of::<SquareRecord>() == 12);

impl SquareRecord {
    /// The record of a pool slot that holds no square (a child beyond the data, or the
    /// root block's spare slots): an empty box.
    pub const OUTSIDE: SquareRecord = SquareRecord {
        min_y: u16::MAX,
        max_y: 0,
        fan_error: 0,
        subtree_error: 0,
        east_error: 0,
        south_error: 0,
    };

    pub fn new(
        box_codes: (u16, u16),
        fan_error: f32,
        east_error: f32,
        south_error: f32,
    ) -> SquareRecord {
        SquareRecord {
            min_y: box_codes.0,
            max_y: box_codes.1,
            fan_error: error_code(fan_error),
            subtree_error: 0,
            east_error: error_code(east_error),
            south_error: error_code(south_error),
        }
    }

    /// Whether the slot holds no square.
    #[inline(always)]
    pub fn is_outside(&self) -> bool {
        self.min_y > self.max_y
    }

    /// Bound of `|h − D|` over the square's samples, `D` the square's 3 × 3 fan as drawn
    /// (edge vertices that can never be drawn left out: see `tree`).
    #[inline(always)]
    pub fn fan_error(&self) -> f32 {
        error_value(self.fan_error)
    }

    /// The error of the box test: the largest error any test in the subtree can use (the
    /// parent's fan error included, so a quadrant the parent draws is covered).
    #[inline(always)]
    pub fn subtree_error(&self) -> f32 {
        error_value(self.subtree_error)
    }

    pub fn with_subtree_error(self, error: f32) -> SquareRecord {
        SquareRecord {
            subtree_error: error_code(error),
            ..self
        }
    }

    /// Interpolation error of the east and south edge vertices as drawn (the stored height
    /// against the mean of its edge's two stored corners); 0 for a vertex that can never be
    /// drawn.
    #[inline(always)]
    pub fn east_error(&self) -> f32 {
        error_value(self.east_error)
    }

    #[inline(always)]
    pub fn south_error(&self) -> f32 {
        error_value(self.south_error)
    }

    /// Height codes of the box.
    #[inline(always)]
    pub fn box_codes(&self) -> (u16, u16) {
        (self.min_y, self.max_y)
    }

    /// The record as stored in a page file: its six codes, little-endian.
    pub fn to_bytes(self) -> [u8; 12] {
        let codes = [
            self.min_y,
            self.max_y,
            self.fan_error,
            self.subtree_error,
            self.east_error,
            self.south_error,
        ];
        let mut bytes = [0; 12];
        for (out, code) in bytes.chunks_exact_mut(2).zip(codes) {
            out.copy_from_slice(&code.to_le_bytes());
        }
        bytes
    }

    /// The record [`SquareRecord::to_bytes`] wrote.
    pub fn from_bytes(bytes: &[u8; 12]) -> SquareRecord {
        let code = |i: usize| u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]);
        SquareRecord {
            min_y: code(0),
            max_y: code(1),
            fan_error: code(2),
            subtree_error: code(3),
            east_error: code(4),
            south_error: code(5),
        }
    }
}

/// A non-negative error rounded up to the 16 high bits of its `f32` (a "bfloat16").
pub(super) fn error_code(error: f32) -> u16 {
    debug_assert!(error >= 0.0 && !error.is_nan());
    let bits = error.to_bits();
    let high = bits >> 16;
    let code = if bits & 0xffff == 0 { high } else { high + 1 };
    code.min(u32::from(u16::MAX)) as u16
}

pub(super) fn error_value(code: u16) -> f32 {
    f32::from_bits(u32::from(code) << 16)
}

/// The 16-bit height codes of a terrain: code `c` stands for world height
/// `((origin + c · unit) · scale + offset)`, evaluated in `f64` and rounded once to `f32`.
///
/// - *Exact* when every height is a multiple of `unit` raw units within 65,535 of each other
///   (16-bit sources: `unit` 1; with local detail over an integer source, the finest
///   interpolated positions need `2^-k`): then `origin + c · unit` is the raw value itself
///   and the height is bit for bit what [`crate::lod::sample_height`] gives. Vertex heights
///   are stored in these codes.
/// - Otherwise *quantised* (float sources, wide ranges): 65,536 steps over the world range,
///   each within [`HeightCodes::quantum`] of the true height. Only box bounds (rounded
///   outwards) use them; vertex heights are then stored as `f32`.
///
/// Codes grow with the world height (a negative height scale counts raw values down).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct HeightCodes {
    origin: f64,
    unit: f64,
    scale: f64,
    offset: f64,
    /// The world mapping, for quantising a raw value.
    map: (f64, f64),
    quantum: f64,
}

impl HeightCodes {
    /// Codes for raw values in `lo ..= hi` under the mapping `(scale, offset)`, exact when
    /// every value is a multiple of `unit` (a power of two, `integer` sources) and the
    /// range fits.
    pub fn new(lo: f64, hi: f64, scale: f64, offset: f64, integer_unit: Option<f64>) -> Self {
        if let Some(unit) = integer_unit
            && (hi - lo) / unit <= 65_535.0
        {
            // One spare code below the lowest value when it fits, so that a box bound
            // rounded down below the lowest height still has a code.
            let spare = if (hi - lo) / unit <= 65_533.0 {
                unit
            } else {
                0.0
            };
            let (origin, unit) = if scale >= 0.0 {
                (lo - spare, unit)
            } else {
                (hi + spare, -unit)
            };
            return HeightCodes {
                origin,
                unit,
                scale,
                offset,
                map: (scale, offset),
                quantum: 0.0,
            };
        }
        let (a, b) = (lo * scale + offset, hi * scale + offset);
        let margin = 2.0 * a.abs().max(b.abs()) * 2f64.powi(-23) + 1e-30;
        let (low, high) = (a.min(b) - margin, a.max(b) + margin);
        let unit = (high - low) / 65_535.0;
        HeightCodes {
            origin: low,
            unit,
            scale: 1.0,
            offset: 0.0,
            map: (scale, offset),
            quantum: 0.5 * unit * (1.0 + 2f64.powi(-20)),
        }
    }

    /// The codes as a kept page file stores them: seven little-endian `f64`s.
    pub fn to_bytes(self) -> [u8; 56] {
        let mut out = [0; 56];
        let values = [
            self.origin,
            self.unit,
            self.scale,
            self.offset,
            self.map.0,
            self.map.1,
            self.quantum,
        ];
        for (bytes, value) in out.chunks_exact_mut(8).zip(values) {
            bytes.copy_from_slice(&value.to_le_bytes());
        }
        out
    }

    /// The codes [`HeightCodes::to_bytes`] wrote, if every value is finite, the step and
    /// the scales non-zero and the quantum not negative.
    pub fn from_bytes(bytes: &[u8; 56]) -> Option<HeightCodes> {
        let v: Vec<f64> = bytes
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        let valid = v.iter().all(|x| x.is_finite())
            && v[1] != 0.0
            && v[2] != 0.0
            && v[4] != 0.0
            && v[6] >= 0.0;
        valid.then(|| HeightCodes {
            origin: v[0],
            unit: v[1],
            scale: v[2],
            offset: v[3],
            map: (v[4], v[5]),
            quantum: v[6],
        })
    }

    /// Whether stored heights are the true ones (up to the `f32` rounding of drawing).
    #[inline(always)]
    pub fn exact(&self) -> bool {
        self.quantum == 0.0
    }

    /// Largest distance of a code's height from the true one, before the `f32` rounding
    /// (0 when exact).
    #[cfg(test)]
    pub fn quantum(&self) -> f64 {
        self.quantum
    }

    /// The world height code `code` is drawn at.
    #[inline(always)]
    pub fn world(&self, code: u16) -> f32 {
        ((self.origin + f64::from(code) * self.unit) * self.scale + self.offset) as f32
    }

    /// The code of a raw value (the value itself when exact, else the nearest step).
    pub fn code(&self, raw: f64) -> u16 {
        let steps = if self.exact() {
            (raw - self.origin) / self.unit
        } else {
            (raw * self.map.0 + self.map.1 - self.origin) / self.unit
        };
        debug_assert!(!self.exact() || steps.fract() == 0.0, "{raw} is not a code");
        steps.round().clamp(0.0, 65_535.0) as u16
    }

    /// The largest code drawn at most at `y` (0 if none).
    pub fn below(&self, y: f64) -> u16 {
        // From the code the mapping puts `y` at, a step or two to where `world` (rounded
        // to `f32`) crosses it; the binary search where that guess is no use.
        let start = self.guess(y).map(f64::floor);
        let walked = start.and_then(|c| {
            let mut c = c.clamp(0.0, 65_535.0) as u32;
            for _ in 0..GUESS_STEPS {
                if c < 65_535 && f64::from(self.world((c + 1) as u16)) <= y {
                    c += 1;
                } else if c > 0 && f64::from(self.world(c as u16)) > y {
                    c -= 1;
                } else {
                    return Some(c as u16);
                }
            }
            None
        });
        walked.unwrap_or_else(|| self.below_by_search(y))
    }

    /// The smallest code drawn at least at `y` (65,535 if none).
    pub fn above(&self, y: f64) -> u16 {
        let start = self.guess(y).map(f64::ceil);
        let walked = start.and_then(|c| {
            let mut c = c.clamp(0.0, 65_535.0) as u32;
            for _ in 0..GUESS_STEPS {
                if c > 0 && f64::from(self.world((c - 1) as u16)) >= y {
                    c -= 1;
                } else if c < 65_535 && f64::from(self.world(c as u16)) < y {
                    c += 1;
                } else {
                    return Some(c as u16);
                }
            }
            None
        });
        walked.unwrap_or_else(|| self.above_by_search(y))
    }

    /// The (fractional) code the mapping puts world height `y` at, if finite.
    #[inline(always)]
    fn guess(&self, y: f64) -> Option<f64> {
        let c = ((y - self.offset) / self.scale - self.origin) / self.unit;
        c.is_finite().then_some(c)
    }

    /// [`HeightCodes::below`] by binary search: `world` is non-decreasing in the code.
    fn below_by_search(&self, y: f64) -> u16 {
        let (mut lo, mut hi) = (0u32, 65_536u32);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if f64::from(self.world(mid as u16)) <= y {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo as u16
    }

    /// [`HeightCodes::above`] by binary search.
    fn above_by_search(&self, y: f64) -> u16 {
        let (mut lo, mut hi) = (-1i32, 65_535i32);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if f64::from(self.world(mid as u16)) >= y {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi as u16
    }
}

/// Steps [`HeightCodes::below`] and [`HeightCodes::above`] walk from the mapping's guess
/// before they search instead (the guess is off by the `f32` rounding, a step or two).
const GUESS_STEPS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantised_errors_round_up_by_at_most_one_part_in_128() {
        assert_eq!(error_value(error_code(0.0)), 0.0);
        let mut x = 1e-6f32;
        while x < 1e6 {
            for e in [x, x * 1.003, x * 1.5, x.next_up()] {
                let q = error_value(error_code(e));
                assert!(q >= e && q <= e * (1.0 + 1.0 / 128.0), "{e} -> {q}");
            }
            x *= 1.7;
        }
    }

    /// The walk from the mapping's guess finds the codes the binary search finds, for
    /// exact and quantised codes, either sign of scale, heights inside, between and
    /// beyond the codes, and values the guess cannot place (NaN, infinities).
    #[test]
    fn guessed_codes_are_the_searched_ones() {
        let cases = [
            HeightCodes::new(0.0, 4000.0, 0.1, 0.0, Some(1.0)),
            HeightCodes::new(-300.0, 9000.0, -0.25, 100.0, Some(1.0)),
            HeightCodes::new(0.0, 65_535.0, 1.0, -7.5, Some(1.0)),
            HeightCodes::new(-12.5, 3171.25, 1.0, 0.0, None),
            HeightCodes::new(-1e7, 1e7, -3.0, 5.0, None),
            HeightCodes::new(2.0, 2.0, 0.0, 5.0, None),
        ];
        let values = crate::test_support::lcg_values(4000, 17, 60_000);
        for codes in cases {
            let (lo, hi) = (f64::from(codes.world(0)), f64::from(codes.world(65_535)));
            let span = (hi - lo).abs().max(1.0);
            let mut ys: Vec<f64> = values
                .iter()
                .map(|&v| lo - 0.1 * span + 1.2 * span * f64::from(v) / 60_000.0)
                .collect();
            // Heights exactly on codes and a hair beside them.
            for c in [0u16, 1, 2, 1000, 65_534, 65_535] {
                let w = f64::from(codes.world(c));
                ys.extend([w, w.next_up(), w.next_down()]);
            }
            ys.extend([
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                lo - 1e30,
                hi + 1e30,
            ]);
            for y in ys {
                assert_eq!(
                    codes.below(y),
                    codes.below_by_search(y),
                    "{codes:?} below {y}"
                );
                assert_eq!(
                    codes.above(y),
                    codes.above_by_search(y),
                    "{codes:?} above {y}"
                );
            }
        }
    }

    #[test]
    fn exact_codes_draw_the_sample_heights() {
        for (scale, offset) in [(10.0f32, 0.0f32), (-0.25, 100.0), (1.0, -3.5)] {
            let codes =
                HeightCodes::new(-7.0, 300.0, f64::from(scale), f64::from(offset), Some(1.0));
            assert!(codes.exact());
            let mut last = f32::NEG_INFINITY;
            for raw in -7..=300 {
                let code = codes.code(f64::from(raw));
                let expected = (f64::from(raw) * f64::from(scale) + f64::from(offset)) as f32;
                assert_eq!(codes.world(code), expected);
                if scale > 0.0 {
                    assert!(codes.world(code) > last);
                    last = codes.world(code);
                }
            }
        }
        // Half steps (local detail over an integer source) are exact too.
        let codes = HeightCodes::new(0.0, 255.0, 10.0, 0.0, Some(0.25));
        assert!(codes.exact());
        assert_eq!(codes.world(codes.code(17.75)), 177.5);
        // Too wide a range is quantised.
        assert!(!HeightCodes::new(0.0, 65_536.0, 1.0, 0.0, Some(1.0)).exact());
    }

    #[test]
    fn quantised_codes_stay_within_the_quantum_and_bounds_round_outwards() {
        for (lo, hi, scale, offset) in [
            (130.0f64, 1870.0, 1.0, 0.0),
            (-20.5, -20.5, 1.0, 3.0),
            (-1e4, 3.0, -2.0, 7.0),
            (0.0, 0.001, 1.0, 0.0),
        ] {
            let codes = HeightCodes::new(lo, hi, scale, offset, None);
            for k in 0..=1000 {
                let raw = lo + (hi - lo) * f64::from(k) / 1000.0;
                let y = raw * scale + offset;
                let drawn = f64::from(codes.world(codes.code(raw)));
                let rounding = y.abs() * 2f64.powi(-23);
                assert!((drawn - y).abs() <= codes.quantum() + rounding, "{raw}");
                let (a, b) = (codes.world(codes.below(y)), codes.world(codes.above(y)));
                assert!(f64::from(a) <= y && y <= f64::from(b), "{y} in {a} ..= {b}");
            }
        }
    }
}
