//! Exact integer predicates on grid positions, shared by the two oracles (never by the core).
//!
//! # Orientation seen from above
//!
//! The grid maps `col → x` and `row → z`, with y up in a right-handed frame. For a triangle
//! `a, b, c` the geometric normal is `n = (b − a) × (c − a)`. With `u = b − a` and
//! `v = c − a` both in the xz plane (their y is irrelevant to the sign we want), the
//! y component of the cross product is
//!
//! ```text
//! n.y = u.z * v.x − u.x * v.z = (b.row − a.row)(c.col − a.col) − (b.col − a.col)(c.row − a.row)
//! ```
//!
//! The convention "counter-clockwise seen from above, normal up" means `n.y > 0`, so
//! [`up_area2`] returns exactly `n.y` of the flat triangle: twice its area, positive for a
//! correctly wound triangle, negative for a flipped one, zero for a degenerate one.
//! Example: `(0,0), (0,1), (1,1)` as (col,row) gives `1·1 − 0·1 = 1 > 0`; in world space
//! `(0,0,0) → (0,0,1) → (1,0,1)` has normal `(0,0,1) × (1,0,1) = (0,1,0)`: up, as claimed.
//! (Seen from above with x to the right, +z points down the screen, like an image whose
//! row 0 is the top edge, so "counter-clockwise on screen" is clockwise in naive
//! (col, row)-as-(x, y) math: the usual 2D cross product `u.x v.y − u.y v.x` is negative.)
//!
//! # Range
//!
//! Coordinates are limited to [`MAX_GRID_COORD`] (2^30) so that every product of two
//! coordinate differences fits in 62 bits and every predicate here is exact in `i64`.
//! Positions beyond it are reported by the oracles, never computed with.

use terralod_core::GridPos;

/// Largest accepted grid coordinate, exclusive: keeps every predicate exact in `i64`.
pub const MAX_GRID_COORD: u32 = 1 << 30;

/// A grid position as signed integers, ready for exact arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Pt {
    pub col: i64,
    pub row: i64,
}

impl Pt {
    /// Converts a grid position, or `None` when a coordinate is at or beyond
    /// [`MAX_GRID_COORD`].
    pub fn from_grid(pos: GridPos) -> Option<Self> {
        (pos.col < MAX_GRID_COORD && pos.row < MAX_GRID_COORD).then_some(Self {
            col: i64::from(pos.col),
            row: i64::from(pos.row),
        })
    }

    pub fn to_grid(self) -> GridPos {
        GridPos::new(self.col as u32, self.row as u32)
    }
}

/// Twice the signed area of `a, b, c` seen from above: `> 0` counter-clockwise (normal up),
/// `< 0` flipped, `0` degenerate. Also the edge function of edge `a → b` at `c`: a point is
/// on the inner side of a correctly wound triangle's edge when it is `> 0`.
#[inline]
pub(crate) fn up_area2(a: Pt, b: Pt, c: Pt) -> i64 {
    (b.row - a.row) * (c.col - a.col) - (b.col - a.col) * (c.row - a.row)
}

/// Floor of `num / den` for `den != 0`.
#[inline]
pub(crate) fn floor_div(num: i64, den: i64) -> i64 {
    let q = num / den;
    if num % den != 0 && ((num < 0) != (den < 0)) {
        q - 1
    } else {
        q
    }
}

/// Ceiling of `num / den` for `den != 0`.
#[inline]
pub(crate) fn ceil_div(num: i64, den: i64) -> i64 {
    let q = num / den;
    if num % den != 0 && ((num < 0) == (den < 0)) {
        q + 1
    } else {
        q
    }
}

/// Greatest common divisor of two non-negative numbers (`gcd(0, 0) = 0`).
pub(crate) fn gcd(mut a: i64, mut b: i64) -> i64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Inclusive range of integer columns `c` on row `row` with `up_area2(p, q, (c, row)) >= 0`,
/// as `(lo, hi)` with `None` meaning unbounded on that side. Returns `None` when no column
/// qualifies.
///
/// `up_area2(p, q, x) = (q.row − p.row)(x.col − p.col) − (q.col − p.col)(x.row − p.row)`,
/// linear in `x.col` with slope `a = q.row − p.row`: solve `a·(x.col − p.col) >= k` with
/// `k = (q.col − p.col)(row − p.row)`.
#[inline]
pub(crate) fn edge_span(p: Pt, q: Pt, row: i64) -> Option<(Option<i64>, Option<i64>)> {
    let a = q.row - p.row;
    let k = (q.col - p.col) * (row - p.row);
    match a.cmp(&0) {
        std::cmp::Ordering::Greater => Some((Some(p.col + ceil_div(k, a)), None)),
        std::cmp::Ordering::Less => Some((None, Some(p.col + floor_div(k, a)))),
        std::cmp::Ordering::Equal => (k <= 0).then_some((None, None)),
    }
}

/// Inclusive column range `[lo, hi]` of the grid points of row `row` inside or on the
/// correctly wound triangle `t` (`up_area2(t) > 0`), or `None` when the row misses it.
#[inline]
pub(crate) fn triangle_row_span(t: &[Pt; 3], row: i64) -> Option<(i64, i64)> {
    let mut lo = t[0].col.min(t[1].col).min(t[2].col);
    let mut hi = t[0].col.max(t[1].col).max(t[2].col);
    for (p, q) in [(t[0], t[1]), (t[1], t[2]), (t[2], t[0])] {
        let (l, h) = edge_span(p, q, row)?;
        if let Some(l) = l {
            lo = lo.max(l);
        }
        if let Some(h) = h {
            hi = hi.min(h);
        }
    }
    (lo <= hi).then_some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(col: i64, row: i64) -> Pt {
        Pt { col, row }
    }

    #[test]
    fn orientation_matches_the_documented_example() {
        assert_eq!(up_area2(pt(0, 0), pt(0, 1), pt(1, 1)), 1);
        assert_eq!(up_area2(pt(0, 0), pt(1, 1), pt(0, 1)), -1);
        assert_eq!(up_area2(pt(0, 0), pt(1, 1), pt(2, 2)), 0);
    }

    #[test]
    fn divisions_round_the_right_way() {
        for num in -20i64..=20 {
            for den in [-7i64, -3, -1, 1, 2, 5] {
                let exact = num as f64 / den as f64;
                assert_eq!(floor_div(num, den), exact.floor() as i64, "{num}/{den}");
                assert_eq!(ceil_div(num, den), exact.ceil() as i64, "{num}/{den}");
            }
        }
        assert_eq!(gcd(12, 18), 6);
        assert_eq!(gcd(0, 5), 5);
        assert_eq!(gcd(7, 0), 7);
    }

    #[test]
    fn row_spans_equal_a_point_by_point_test() {
        // Several shapes, including slivers and edges along rows and columns.
        let triangles = [
            [pt(0, 0), pt(0, 4), pt(4, 4)],
            [pt(0, 0), pt(3, 7), pt(9, 2)],
            [pt(5, 0), pt(0, 1), pt(9, 3)],
            [pt(0, 0), pt(1, 9), pt(2, 17)],
            [pt(-3, -2), pt(4, 6), pt(6, -5)],
        ];
        for t in triangles {
            let t = if up_area2(t[0], t[1], t[2]) > 0 {
                t
            } else {
                [t[0], t[2], t[1]]
            };
            assert!(up_area2(t[0], t[1], t[2]) > 0);
            for row in -8..=20 {
                let brute: Vec<i64> = (-10..=20)
                    .filter(|&col| {
                        let x = pt(col, row);
                        up_area2(t[0], t[1], x) >= 0
                            && up_area2(t[1], t[2], x) >= 0
                            && up_area2(t[2], t[0], x) >= 0
                    })
                    .collect();
                let span = triangle_row_span(&t, row);
                match span {
                    None => assert!(brute.is_empty(), "{t:?} row {row}: {brute:?}"),
                    Some((lo, hi)) => assert_eq!(brute, (lo..=hi).collect::<Vec<_>>()),
                }
            }
        }
    }
}
