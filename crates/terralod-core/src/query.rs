//! Queries a game or viewer needs (feature H8): height at any point, ray casts.
//!
//! # The surface both queries use
//!
//! Inside each grid cell the terrain is the **bilinear** interpolation of the cell's four
//! sample heights (world heights as [`Heightfield::world_y`] computes them). It is
//! continuous across cells, passes through every sample, and is defined only over the data
//! (`0 <= x <= (width-1) * cell_size`, same for z): the padding of the quadtree is not
//! terrain. A ray hit therefore lies on the same surface [`height_at`] reports. (The drawn
//! triangles differ from it by less than the pyramid's error of the drawn node, and at full
//! resolution by less than the cell's own bilinear twist.)

use crate::heightfield::{GridPos, Heightfield};
use crate::pyramid::Pyramid;
use glam::{DVec3, Vec3};

/// World height of the terrain at world `(x, z)`, bilinear between the four samples of the
/// cell that holds it; `None` outside the data (or for non-finite input).
pub fn height_at(field: &Heightfield, x: f32, z: f32) -> Option<f32> {
    let cell = f64::from(field.mapping().cell_size);
    let (col, row) = (f64::from(x) / cell, f64::from(z) / cell);
    let (w, h) = (f64::from(field.width() - 1), f64::from(field.height() - 1));
    if !(col >= 0.0 && col <= w && row >= 0.0 && row <= h) {
        return None;
    }
    // The last column and row belong to the cell before them.
    let c = (col.floor() as u32).min(field.width() - 2);
    let r = (row.floor() as u32).min(field.height() - 2);
    let corners = CellCorners::new(field, c, r);
    Some(corners.height(col - f64::from(c), row - f64::from(r)) as f32)
}

/// Where a ray first meets the terrain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RayHit {
    /// Ray parameter of the hit: `position = origin + t * dir`, in units of `|dir|`.
    pub t: f32,
    pub position: Vec3,
    /// The cell (by its first corner) whose surface was hit; on a shared cell edge, any of
    /// the cells that share it.
    pub cell: GridPos,
}

/// First intersection, with `0 <= t <= max_t`, of the ray `origin + t * dir` with the
/// terrain surface (see the module docs), from above or below; touching counts.
///
/// The traversal visits the quadtree front to back and skips every node whose min/max box
/// the ray misses, so a ray costs about its path length in leaves, not the terrain size.
/// `pyramid` must have been built from `field`. Returns `None` when the ray misses, when
/// `dir` is zero, or for non-finite input.
pub fn raycast(
    field: &Heightfield,
    pyramid: &Pyramid,
    origin: Vec3,
    dir: Vec3,
    max_t: f32,
) -> Option<RayHit> {
    debug_assert_eq!(
        pyramid.data_size(),
        (field.width(), field.height()),
        "the pyramid belongs to another heightfield"
    );
    let finite = origin.is_finite() && dir.is_finite() && !max_t.is_nan();
    if !finite
        || dir == Vec3::ZERO
        || max_t < 0.0
        || pyramid.data_size() != (field.width(), field.height())
    {
        return None;
    }
    let ray = Ray {
        origin: origin.as_dvec3(),
        dir: dir.as_dvec3(),
    };
    let cell = f64::from(field.mapping().cell_size);
    let (last_col, last_row) = (field.width() - 1, field.height() - 1);
    let finest = pyramid.levels() - 1;
    let mut best: Option<(f64, u32, u32)> = None;
    let mut limit = f64::from(max_t);
    // Depth-first, nearest child first: (level, ix, iz, entry t).
    let mut stack: Vec<(usize, u32, u32, f64)> = Vec::with_capacity(4 * pyramid.levels());
    stack.push((0, 0, 0, 0.0));
    while let Some((level, ix, iz, entry)) = stack.pop() {
        if entry > limit {
            continue;
        }
        let bounds = pyramid.node(level, ix, iz);
        let s = pyramid.node_size(level);
        // The node's data part: the surface does not extend into the padding.
        let (c0, r0) = (ix * s, iz * s);
        let (c1, r1) = ((c0 + s).min(last_col), (r0 + s).min(last_row));
        let lo = DVec3::new(
            f64::from(c0) * cell,
            f64::from(bounds.min_y),
            f64::from(r0) * cell,
        );
        let hi = DVec3::new(
            f64::from(c1) * cell,
            f64::from(bounds.max_y),
            f64::from(r1) * cell,
        );
        let Some((t0, _)) = ray.clip_to_box(lo, hi, 0.0, limit) else {
            continue;
        };
        if level == finest {
            for r in r0..r1 {
                for c in c0..c1 {
                    if let Some(t) = ray.hit_cell(field, c, r, cell, limit)
                        && best.is_none_or(|(b, _, _)| t < b)
                    {
                        best = Some((t, c, r));
                        limit = t;
                    }
                }
            }
            continue;
        }
        let mut children: Vec<(usize, u32, u32, f64)> = pyramid
            .children(level, ix, iz)
            .map(|(cx, cz)| (level + 1, cx, cz, t0))
            .collect();
        // Children in order of where the ray enters their column, nearest last (popped first).
        for child in &mut children {
            let cs = pyramid.node_size(child.0);
            let (a, b) = (child.1 * cs, child.2 * cs);
            let lo = DVec3::new(f64::from(a) * cell, f64::NEG_INFINITY, f64::from(b) * cell);
            let hi = DVec3::new(
                f64::from((a + cs).min(last_col)) * cell,
                f64::INFINITY,
                f64::from((b + cs).min(last_row)) * cell,
            );
            child.3 = ray
                .clip_to_box(lo, hi, 0.0, limit)
                .map_or(f64::INFINITY, |(t, _)| t);
        }
        children.sort_by(|a, b| b.3.total_cmp(&a.3));
        stack.extend(children.into_iter().filter(|c| c.3.is_finite()));
    }
    best.map(|(t, c, r)| RayHit {
        t: t as f32,
        position: (ray.origin + ray.dir * t).as_vec3(),
        cell: GridPos::new(c, r),
    })
}

/// A ray in f64, so long rays over large terrains keep their precision.
#[derive(Clone, Copy, Debug)]
struct Ray {
    origin: DVec3,
    dir: DVec3,
}

impl Ray {
    /// The part of `[t_min, t_max]` where the ray is inside the closed box, if any (the slab
    /// method; an axis the ray runs parallel to only checks that the origin is within it).
    fn clip_to_box(&self, lo: DVec3, hi: DVec3, t_min: f64, t_max: f64) -> Option<(f64, f64)> {
        let (mut enter, mut exit) = (t_min, t_max);
        for axis in 0..3 {
            let (o, d) = (self.origin[axis], self.dir[axis]);
            if d == 0.0 {
                if o < lo[axis] || o > hi[axis] {
                    return None;
                }
                continue;
            }
            let (a, b) = ((lo[axis] - o) / d, (hi[axis] - o) / d);
            enter = enter.max(a.min(b));
            exit = exit.min(a.max(b));
        }
        (enter <= exit).then_some((enter, exit))
    }

    /// First `t <= t_max` where the ray meets the bilinear surface of cell `(c, r)`.
    fn hit_cell(&self, field: &Heightfield, c: u32, r: u32, cell: f64, t_max: f64) -> Option<f64> {
        let lo = DVec3::new(f64::from(c) * cell, f64::NEG_INFINITY, f64::from(r) * cell);
        let hi = DVec3::new(
            f64::from(c + 1) * cell,
            f64::INFINITY,
            f64::from(r + 1) * cell,
        );
        let (enter, exit) = self.clip_to_box(lo, hi, 0.0, t_max)?;
        let corners = CellCorners::new(field, c, r);
        // In cell coordinates from the entry point: u = u0 + s du, v = v0 + s dv, y = y0 + s dy.
        let start = self.origin + self.dir * enter;
        let (u0, v0) = (start.x / cell - f64::from(c), start.z / cell - f64::from(r));
        let (du, dv, dy) = (self.dir.x / cell, self.dir.z / cell, self.dir.y);
        let CellCorners { h00, h10, h01, h11 } = corners;
        let (b, cz, e) = (h10 - h00, h01 - h00, h00 - h10 - h01 + h11);
        // y(s) − surface(s) = q s² + l s + k.
        let k = start.y - corners.height(u0, v0);
        let l = dy - (b * du + cz * dv + e * (u0 * dv + v0 * du));
        let q = -e * du * dv;
        let length = exit - enter;
        let s = first_root(q, l, k, length)?;
        Some(enter + s)
    }
}

/// Smallest root in `[0, length]` of `q s² + l s + k`, with the numerically stable
/// quadratic formula (it degrades gracefully to the linear root when `q` is tiny).
fn first_root(q: f64, l: f64, k: f64, length: f64) -> Option<f64> {
    if k == 0.0 {
        return Some(0.0);
    }
    let slack = 1e-9 * length.max(1e-300);
    let in_range = |s: f64| (s >= -slack && s <= length + slack).then(|| s.clamp(0.0, length));
    if q == 0.0 {
        return if l == 0.0 { None } else { in_range(-k / l) };
    }
    let discriminant = l * l - 4.0 * q * k;
    if discriminant < 0.0 {
        return None;
    }
    let root = discriminant.sqrt();
    let half = -0.5 * (l + if l >= 0.0 { root } else { -root });
    if half == 0.0 {
        return None; // only when everything underflowed: l = 0 and q k = 0 contradict k, q != 0
    }
    [half / q, k / half]
        .into_iter()
        .filter_map(|s| if s.is_finite() { in_range(s) } else { None })
        .min_by(f64::total_cmp)
}

/// World heights of the four corners of a cell, in f64 (from the f32 world heights every
/// other part of terralod uses).
#[derive(Clone, Copy, Debug)]
struct CellCorners {
    h00: f64,
    h10: f64,
    h01: f64,
    h11: f64,
}

impl CellCorners {
    fn new(field: &Heightfield, c: u32, r: u32) -> CellCorners {
        let y = |c, r| f64::from(field.world_y(c, r));
        CellCorners {
            h00: y(c, r),
            h10: y(c + 1, r),
            h01: y(c, r + 1),
            h11: y(c + 1, r + 1),
        }
    }

    /// Bilinear height at cell coordinates `(u, v)` in `[0, 1]²`.
    fn height(&self, u: f64, v: f64) -> f64 {
        let top = self.h00 + (self.h10 - self.h00) * u;
        let bottom = self.h01 + (self.h11 - self.h01) * u;
        top + (bottom - top) * v
    }
}

#[cfg(test)]
mod tests;
