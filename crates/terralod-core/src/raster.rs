//! Exact scan conversion of triangles with corners on the sample grid: which samples a
//! triangle covers, in integers, with each sample's barycentric weights. The exact-error
//! bintree and the mesh simplifier measure a triangle's error over exactly these samples.

use std::cmp::Ordering;
use std::ops::ControlFlow;

/// A grid position as signed integers `(col, row)`, so differences need no care.
/// (Children of a bintree triangle are found by halving sums.)
pub(crate) type Point = (i32, i32);

/// The edge function of `p → q` at `x` (twice the signed area of `p, q, x`): 0 on the
/// line, one sign on each side; inside a triangle all three edges' have the sign of its
/// doubled area.
#[inline]
pub(crate) fn edge_function(p: Point, q: Point, x: Point) -> i64 {
    i64::from(q.0 - p.0) * i64::from(x.1 - p.1) - i64::from(q.1 - p.1) * i64::from(x.0 - p.0)
}

/// The plane's height at a point with (non-negative, integer) barycentric weights `w` over
/// the doubled area: one correctly rounded division, so an exact plane gives exactly 0.
#[inline]
pub(crate) fn interpolate(w: [i64; 3], heights: [f64; 3], area: i64) -> f64 {
    (w[0] as f64 * heights[0] + w[1] as f64 * heights[1] + w[2] as f64 * heights[2]) / area as f64
}

/// The samples of one row inside a triangle.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowSpan {
    pub row: i32,
    /// First and last column inside (inclusive).
    pub first: i32,
    pub last: i32,
    /// The barycentric weights of `(first, row)`: the edge functions of the edges opposite
    /// each corner, all made non-negative inside. Their sum is the doubled area.
    pub weights: [i64; 3],
    /// How much each weight decreases from one column to the next.
    pub steps: [i64; 3],
}

impl RowSpan {
    /// Steps `weights` from one column to the next.
    #[inline]
    pub fn advance(&self, weights: &mut [i64; 3]) {
        for (w, step) in weights.iter_mut().zip(self.steps) {
            *w -= step;
        }
    }
}

/// Calls `visit` with every row span of samples inside the closed triangle `corners`
/// (edges included), clipped to columns `0..width` and rows `0..height`, until `visit`
/// breaks. Returns the doubled area (positive); a degenerate triangle (area 0) visits
/// nothing.
///
/// Per row, each edge function is `at_first - step * (col - first)`: the span is where all
/// three are non-negative, found by integer division, with no per-sample test.
pub(crate) fn for_each_row_span(
    corners: [Point; 3],
    width: i32,
    height: i32,
    mut visit: impl FnMut(RowSpan) -> ControlFlow<()>,
) -> i64 {
    let [a, b, c] = corners;
    let area = edge_function(a, b, c);
    if area == 0 {
        return 0;
    }
    let sign = area.signum();
    let edges = [(b, c), (c, a), (a, b)];
    let col_lo = a.0.min(b.0).min(c.0).max(0);
    let col_hi = a.0.max(b.0).max(c.0).min(width - 1);
    let row_lo = a.1.min(b.1).min(c.1).max(0);
    let row_hi = a.1.max(b.1).max(c.1).min(height - 1);
    for row in row_lo..=row_hi {
        let (mut lo, mut hi) = (col_lo, col_hi);
        let mut weights = [0i64; 3];
        let mut steps = [0i64; 3];
        for (k, &(p, q)) in edges.iter().enumerate() {
            let at_lo = edge_function(p, q, (col_lo, row)) * sign;
            let step = i64::from(q.1 - p.1) * sign;
            (weights[k], steps[k]) = (at_lo, step);
            match step.cmp(&0) {
                Ordering::Greater => hi = hi.min(col_lo + at_lo.div_euclid(step) as i32),
                Ordering::Less => {
                    let need = -at_lo; // at_lo + |step| * k >= 0  ⟺  k >= need / |step|
                    let k_min = need.div_euclid(-step) + i64::from(need.rem_euclid(-step) != 0);
                    lo = lo.max(col_lo + k_min.max(0) as i32);
                }
                Ordering::Equal if at_lo < 0 => hi = lo - 1,
                Ordering::Equal => {}
            }
        }
        if lo > hi {
            continue;
        }
        let skip = i64::from(lo - col_lo);
        for k in 0..3 {
            weights[k] -= steps[k] * skip;
        }
        let span = RowSpan {
            row,
            first: lo,
            last: hi,
            weights,
            steps,
        };
        if visit(span).is_break() {
            break;
        }
    }
    area * sign
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sample a brute-force inside test accepts, and no other, is visited once, with
    /// the weights the edge functions give there.
    #[test]
    fn row_spans_visit_exactly_the_samples_inside() {
        let triangles = [
            [(0, 0), (8, 0), (0, 8)],
            [(0, 0), (0, 8), (8, 0)],
            [(3, 1), (17, 6), (-4, 11)],
            [(5, 5), (5, 5), (9, 9)],
            [(2, 0), (2, 9), (7, 4)],
            [(-3, -3), (20, 2), (1, 19)],
        ];
        let (width, height) = (16, 12);
        for corners in triangles {
            let [a, b, c] = corners;
            let area = edge_function(a, b, c);
            let mut visited = Vec::new();
            let doubled = for_each_row_span(corners, width, height, |span| {
                let mut w = span.weights;
                for col in span.first..=span.last {
                    visited.push(((col, span.row), w));
                    span.advance(&mut w);
                }
                ControlFlow::Continue(())
            });
            assert_eq!(doubled, area.abs());
            let mut expected = Vec::new();
            if area != 0 {
                for row in 0..height {
                    for col in 0..width {
                        let x = (col, row);
                        let w = [
                            edge_function(b, c, x),
                            edge_function(c, a, x),
                            edge_function(a, b, x),
                        ]
                        .map(|e| e * area.signum());
                        if w.iter().all(|&w| w >= 0) {
                            expected.push((x, w));
                        }
                    }
                }
            }
            assert_eq!(visited, expected, "{corners:?}");
        }
    }
}
