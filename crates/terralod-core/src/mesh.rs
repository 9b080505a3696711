//! Triangle meshes over the sample grid (feature H7): what every LOD algorithm's selection
//! becomes for export and checking.

use crate::heightfield::{GridPos, WorldMapping};
use glam::Vec3;

/// A triangle mesh whose vertices sit on grid positions, with the world height each vertex
/// is drawn at (after morphing, so it may differ from the sample's height).
///
/// Triangles are counter-clockwise seen from above (+y), i.e. their normals point up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GridMesh {
    pub positions: Vec<GridPos>,
    /// World y of each vertex as drawn.
    pub heights: Vec<f32>,
    pub triangles: Vec<[u32; 3]>,
}

impl GridMesh {
    /// Removes every vertex and triangle, keeping the allocations.
    pub fn clear(&mut self) {
        self.positions.clear();
        self.heights.clear();
        self.triangles.clear();
    }

    /// Adds a vertex and returns its index.
    pub fn push_vertex(&mut self, pos: GridPos, height: f32) -> u32 {
        self.positions.push(pos);
        self.heights.push(height);
        (self.positions.len() - 1) as u32
    }

    /// The mesh cut to the data, whose last column and row are `last`: algorithms that
    /// draw a `2^k + 1` square draw repeated border samples beyond it, which the renderer
    /// discards (its fragment shader), so this is the ground as drawn. Triangles within
    /// the data are kept as they are, those wholly beyond are dropped, and those across
    /// its last column or row are cut there (convex polygons, fanned from their first
    /// corner; pieces without area left out).
    ///
    /// A cut lands on grid positions wherever the triangle's edges are axis-aligned or
    /// diagonal, as the hierarchical algorithms' fans and right triangles are. If any cut
    /// would fall between grid positions (a streamed seam's edges rise 1 in 2), every
    /// triangle across is kept whole instead: the mesh's positions are on the grid, and
    /// cutting its neighbours alone would leave T-junctions. A vertex made by a cut takes
    /// the drawn surface's height there: along the edge it lies on, computed from the
    /// edge's ends in one order, so the triangles on either side of the edge agree to the
    /// bit (no crack), or inside the triangle when it is the data's corner. Vertices no
    /// kept triangle uses are dropped, the others numbered as the triangles first use
    /// them; the whole triangles keep their order, the pieces follow.
    pub fn clipped_to(self, last: (u32, u32)) -> GridMesh {
        let inside = |p: GridPos| p.col <= last.0 && p.row <= last.1;
        let position = |i: u32| self.positions[i as usize];
        if self
            .triangles
            .iter()
            .all(|t| t.iter().all(|&i| inside(position(i))))
        {
            return self;
        }
        let mut out = Trimmed {
            mesh: GridMesh::default(),
            index: vec![u32::MAX; self.positions.len()],
            on_cut: Default::default(),
            last,
        };
        let cuts: Vec<_> = self
            .triangles
            .iter()
            .map(|&t| {
                let corners = t.map(|i| (position(i), self.heights[i as usize]));
                let cut = if corners.iter().all(|c| inside(c.0)) {
                    Cut::Inside
                } else {
                    cut_triangle(corners, last)
                };
                (t, corners, cut)
            })
            .collect();
        let all_cuts_on_grid = !cuts.iter().any(|(_, _, cut)| matches!(cut, Cut::OffGrid));
        let mut pieces = Vec::new();
        for (t, corners, cut) in cuts {
            match cut {
                Cut::Beyond => {}
                Cut::Polygon(polygon) if all_cuts_on_grid => pieces.push((t, corners, polygon)),
                Cut::Inside | Cut::OffGrid | Cut::Polygon(_) => {
                    let t = std::array::from_fn(|k| out.keep(t[k], corners[k]));
                    out.mesh.triangles.push(t);
                }
            }
        }
        // The pieces after the whole triangles' vertices are numbered, so a cut point at
        // an existing vertex takes it.
        for (t, corners, polygon) in pieces {
            let vertex = |out: &mut Trimmed, corner: (GridPos, f32)| match corners
                .iter()
                .position(|c| c.0 == corner.0)
            {
                Some(k) => out.keep(t[k], corners[k]),
                None => out.cut_vertex(corner),
            };
            let first = vertex(&mut out, polygon[0]);
            for pair in polygon[1..].windows(2) {
                if area2(polygon[0].0, pair[0].0, pair[1].0) != 0 {
                    let (b, c) = (vertex(&mut out, pair[0]), vertex(&mut out, pair[1]));
                    out.mesh.triangles.push([first, b, c]);
                }
            }
        }
        out.mesh
    }

    /// World position of vertex `index` under `mapping` (x and z from the grid, y as drawn).
    pub fn world_position(&self, index: u32, mapping: &WorldMapping) -> Vec3 {
        let p = self.positions[index as usize];
        Vec3::new(
            p.col as f32 * mapping.cell_size,
            self.heights[index as usize],
            p.row as f32 * mapping.cell_size,
        )
    }
}

/// [`GridMesh::clipped_to`]'s output, with the vertices it has numbered.
struct Trimmed {
    mesh: GridMesh,
    /// The new index of each input vertex kept (`u32::MAX`: not yet).
    index: Vec<u32>,
    /// The vertices on the last column or row, by position, so the pieces of a cut share
    /// them.
    on_cut: std::collections::HashMap<GridPos, u32>,
    last: (u32, u32),
}

impl Trimmed {
    /// The new index of input vertex `i`, at `(position, height)`.
    fn keep(&mut self, i: u32, (p, h): (GridPos, f32)) -> u32 {
        let slot = &mut self.index[i as usize];
        if *slot == u32::MAX {
            *slot = if p.col == self.last.0 || p.row == self.last.1 {
                // One vertex a position on the cut lines, whichever piece came first.
                let mesh = &mut self.mesh;
                *self
                    .on_cut
                    .entry(p)
                    .or_insert_with(|| mesh.push_vertex(p, h))
            } else {
                self.mesh.push_vertex(p, h)
            };
        }
        *slot
    }

    /// The vertex a cut made at `(position, height)`: the one already there if any.
    fn cut_vertex(&mut self, (p, h): (GridPos, f32)) -> u32 {
        let mesh = &mut self.mesh;
        *self
            .on_cut
            .entry(p)
            .or_insert_with(|| mesh.push_vertex(p, h))
    }
}

/// What cutting a triangle at the data's last column and row leaves.
enum Cut {
    /// All of it: it lies within the data.
    Inside,
    /// Nothing of it lies in the data (at most an edge or a corner).
    Beyond,
    /// A cut would fall between grid positions.
    OffGrid,
    /// The convex polygon of the part within the data, counter-clockwise as the triangle,
    /// with drawn heights.
    Polygon(Vec<(GridPos, f32)>),
}

/// Twice the signed area of triangle `a b c` on the grid (positive counter-clockwise
/// seen from above).
fn area2(a: GridPos, b: GridPos, c: GridPos) -> i64 {
    let (ax, az) = (i64::from(a.col), i64::from(a.row));
    let (bx, bz) = (i64::from(b.col), i64::from(b.row));
    let (cx, cz) = (i64::from(c.col), i64::from(c.row));
    (bx - ax) * (cz - az) - (bz - az) * (cx - ax)
}

/// The part of triangle `corners` (positions and drawn heights) at columns up to
/// `last.0` and rows up to `last.1` (Sutherland–Hodgman, one line at a time, in exact
/// rationals).
fn cut_triangle(corners: [(GridPos, f32); 3], last: (u32, u32)) -> Cut {
    let limits = [i128::from(last.0), i128::from(last.1)];
    // Points as `[x, z, denominator]`, the denominator positive.
    let mut polygon: Vec<[i128; 3]> = corners
        .iter()
        .map(|c| [i128::from(c.0.col), i128::from(c.0.row), 1])
        .collect();
    for (axis, limit) in limits.into_iter().enumerate() {
        // How far beyond the line a point lies, times its denominator.
        let beyond = |p: &[i128; 3]| p[axis] - limit * p[2];
        let mut out = Vec::with_capacity(polygon.len() + 1);
        for (k, p) in polygon.iter().enumerate() {
            let q = &polygon[(k + 1) % polygon.len()];
            let (bp, bq) = (beyond(p), beyond(q));
            if bp <= 0 {
                out.push(*p);
            }
            if (bp < 0 && bq > 0) || (bp > 0 && bq < 0) {
                // Where p q crosses the line: p + (q − p) · t, t = wp / (wp − wq) with
                // wp = bp · dq and wq = bq · dp (the distances over a common denominator).
                // Checked: coordinates near `u32::MAX` overflow even `i128` on the second
                // line (a cut between grid positions anyway).
                let crossing = || {
                    let (dp, dq) = (p[2], q[2]);
                    let (wp, wq) = (bp.checked_mul(dq)?, bq.checked_mul(dp)?);
                    let span = wp.checked_sub(wq)?;
                    let d = dp.checked_mul(dq)?.checked_mul(span)?;
                    let along = |i: usize| {
                        let from = p[i].checked_mul(dq)?.checked_mul(span)?;
                        let delta = q[i].checked_mul(dp)?.checked_sub(p[i].checked_mul(dq)?)?;
                        from.checked_add(delta.checked_mul(wp)?)
                    };
                    Some(reduced([along(0)?, along(1)?, d]))
                };
                let Some(point) = crossing() else {
                    return Cut::OffGrid;
                };
                out.push(point);
            }
        }
        polygon = out;
    }
    let mut on_grid = Vec::with_capacity(polygon.len());
    for [x, z, d] in polygon {
        if x % d != 0 || z % d != 0 {
            return Cut::OffGrid;
        }
        on_grid.push(GridPos::new((x / d) as u32, (z / d) as u32));
    }
    let a = |i: usize| on_grid[i];
    let has_area = (2..on_grid.len()).any(|i| area2(a(0), a(i - 1), a(i)) != 0);
    if !has_area {
        return Cut::Beyond;
    }
    Cut::Polygon(
        on_grid
            .iter()
            .map(|&p| (p, surface_height(corners, p)))
            .collect(),
    )
}

/// `point` with its denominator positive and the common factor taken out.
fn reduced([x, z, d]: [i128; 3]) -> [i128; 3] {
    let gcd = |mut a: i128, mut b: i128| {
        (a, b) = (a.abs(), b.abs());
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let g = gcd(gcd(x, z), d).max(1) * d.signum();
    [x / g, z / g, d / g]
}

/// The height triangle `corners` draws at `p` (on it): a corner's own; on an edge, from
/// the edge's ends taken in one order (by position), so both triangles of an edge give the
/// same bits; inside, barycentric.
fn surface_height(corners: [(GridPos, f32); 3], p: GridPos) -> f32 {
    if let Some(&(_, h)) = corners.iter().find(|c| c.0 == p) {
        return h;
    }
    for k in 0..3 {
        let (mut a, mut b) = (corners[k], corners[(k + 1) % 3]);
        if area2(a.0, b.0, p) != 0 {
            continue;
        }
        if (a.0.col, a.0.row) > (b.0.col, b.0.row) {
            std::mem::swap(&mut a, &mut b);
        }
        // On the line through the edge and inside the triangle: on the edge.
        let (dx, dz) = (
            i64::from(b.0.col) - i64::from(a.0.col),
            i64::from(b.0.row) - i64::from(a.0.row),
        );
        let t = if dx.abs() >= dz.abs() {
            (i64::from(p.col) - i64::from(a.0.col)) as f64 / dx as f64
        } else {
            (i64::from(p.row) - i64::from(a.0.row)) as f64 / dz as f64
        };
        let (ha, hb) = (f64::from(a.1), f64::from(b.1));
        return (ha + t * (hb - ha)) as f32;
    }
    let [a, b, c] = corners;
    let weights = [area2(p, b.0, c.0), area2(a.0, p, c.0), area2(a.0, b.0, p)];
    let heights = corners.map(|c| f64::from(c.1));
    crate::raster::interpolate(weights, heights, area2(a.0, b.0, c.0)) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mesh(corners: &[(u32, u32, f32)], triangles: &[[u32; 3]]) -> GridMesh {
        let mut mesh = GridMesh::default();
        for &(col, row, h) in corners {
            mesh.push_vertex(GridPos::new(col, row), h);
        }
        mesh.triangles = triangles.to_vec();
        mesh
    }

    /// Twice the area of the triangles, all of which turn the same way (asserted).
    fn area2_sum(mesh: &GridMesh) -> i64 {
        let p = |i: u32| mesh.positions[i as usize];
        let areas: Vec<i64> = mesh
            .triangles
            .iter()
            .map(|t| area2(p(t[0]), p(t[1]), p(t[2])))
            .collect();
        assert!(areas.iter().all(|&a| a < 0) || areas.iter().all(|&a| a > 0));
        areas.iter().map(|a| a.abs()).sum()
    }

    #[test]
    fn a_triangle_over_the_data_corner_is_cut_to_it() {
        // A right triangle with legs of 8 from (0, 0), heights a plane h = col + 2 row; the
        // data ends at (5, 2), so its corner lies inside the triangle.
        let plane = |c: u32, r: u32| (c + 2 * r) as f32;
        let input = mesh(
            &[
                (0, 0, plane(0, 0)),
                (0, 8, plane(0, 8)),
                (8, 0, plane(8, 0)),
            ],
            &[[0, 1, 2]],
        );
        let cut = input.clipped_to((5, 2));
        assert_eq!(area2_sum(&cut), 2 * 5 * 2, "the data's rectangle");
        for (p, &h) in cut.positions.iter().zip(&cut.heights) {
            assert!(p.col <= 5 && p.row <= 2, "{p:?}");
            assert_eq!(h, plane(p.col, p.row), "on the plane at {p:?}");
        }
        assert!(cut.positions.contains(&GridPos::new(5, 2)), "the corner");
    }

    #[test]
    fn a_cut_between_grid_positions_keeps_the_triangles_across_whole() {
        // An edge of slope 1/3 crosses column 2 at row 2/3.
        let input = mesh(&[(0, 0, 1.0), (0, 3, 2.0), (3, 1, 3.0)], &[[0, 1, 2]]);
        assert_eq!(input.clone().clipped_to((2, 3)), input);
        // Wholly beyond the last row but for an edge: dropped, whatever its slopes.
        let beyond = mesh(&[(0, 5, 1.0), (3, 6, 2.0), (3, 5, 3.0)], &[[0, 1, 2]]);
        assert!(beyond.clipped_to((3, 5)).triangles.is_empty());
        // Its neighbour across (0, 2)–(2, 2) could be cut on the grid, at (1, 2): a
        // T-junction in the whole triangle's edge. Both stay whole.
        let pair = mesh(
            &[(0, 2, 1.0), (2, 2, 2.0), (2, 3, 3.0), (2, 0, 4.0)],
            &[[0, 1, 2], [0, 3, 1]],
        );
        assert_eq!(pair.clone().clipped_to((1, 10)), pair);
        // Coordinates whose second cut overflows `i128`: kept whole, no panic.
        let huge = mesh(
            &[(0, 0, 1.0), (u32::MAX, 2, 2.0), (1, 4, 3.0)],
            &[[0, 1, 2]],
        );
        assert_eq!(huge.clone().clipped_to((i32::MAX as u32, 2)), huge);
    }
}
