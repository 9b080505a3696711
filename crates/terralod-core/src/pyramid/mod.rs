//! Min/max and error pyramids over the quadtree of the padded grid (feature H4).
//!
//! # Layout
//!
//! The quadtree covers the padded square grid of side `2^n + 1` (n ≥ 1,
//! [`Heightfield::padded_side`]). Level 0 is the root (`2^n` cells a side); a node at level
//! `L` has `s = 2^(n-L)` cells a side and covers columns `[x0, x0 + s]` and rows
//! `[z0, z0 + s]` with `x0 = ix * s`, `z0 = iz * s`. The finest level has `s = 2`: a node of
//! 3 × 3 vertices. Positions beyond the data read the repeated border
//! ([`Heightfield::raw_clamped`]).
//!
//! Only the nodes that intersect the data are stored: a level holds a row-major array of
//! `ceil((width-1)/s) × ceil((height-1)/s)` nodes. A node outside that array would only
//! repeat the border, so an algorithm never needs to draw it (for 4097 × 2049 the lower half
//! of the root's square is such padding, and costs nothing here).
//!
//! # What each node guarantees (world units, after the heightfield's mapping)
//!
//! - `min_y`, `max_y`: the exact smallest and largest world height of every sample in the
//!   node's square, padded samples included (they copy border samples of the same node, so
//!   the range is the same as over the node's data part). A negative `height_scale` is taken
//!   into account. The node's drawn surface, and the full-resolution surface under it, lie
//!   inside this range because every triangle interpolates samples of the node.
//! - `error`: an upper bound of `|h(sample) − S(sample)|` over **every** sample of the
//!   node's **whole** square, padded samples included (an algorithm draws the whole square
//!   unless it clips), where `S` is the node's simplified surface: the 3 × 3 fan of article
//!   000 (corners, edge midpoints and centre; 8 triangles, each made of the centre, a corner
//!   and an edge midpoint; linear inside each triangle). Samples are compared with `S`
//!   directly, not just the dropped vertices, because errors add up across levels. Then the
//!   bound is made monotone: `error(node) = max(own, error(children))`. Leaves (s = 2) have
//!   error 0: their fan interpolates every one of their samples.
//!
//! A node drawn with its edges stitched to finer neighbours (article 000, Q4) is not its
//! plain fan: each stitched triangle lies inside one fan triangle, where `S` is linear, so
//! its surface differs from `S` by at most `error` and from the samples by at most
//! `2 × error`. Algorithms that stitch and need a strict bound should use twice the error.
//!
//! # Exactness
//!
//! For 16-bit integer sources the own error is the **exact** maximum: the kernel works in
//! units of `1 / half` (`half = s / 2`, a power of two), where every quantity is an integer,
//! in `f32` while the integers stay below 2^24 and in `f64` otherwise. For `f32` sources it
//! works in `f64` and adds a rounding slack of `max|raw| × 2^-45` (raw units), so the result
//! stays an upper bound. The final conversion to a world `f32` rounds upwards.
//!
//! # Cost
//!
//! O(samples × levels) time, in parallel with rayon: about 70 M samples/s on the
//! 4097 × 2049 Grand Canyon set on a shared 2-core machine (`benches/benches/pyramid.rs`).
//! Storage is three `f32` per node (two on the finest level, whose error is 0), about
//! `4/3 × width × height / 4` nodes.

mod fan_error;

pub(crate) use fan_error::own_error_to_world;

#[cfg(test)]
mod tests;

use crate::camera::Aabb;
use crate::heightfield::{GridPos, Heightfield, Samples, WorldMapping};
use glam::Vec3;
use rayon::prelude::*;

/// Bounds of one quadtree node, in world units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeBounds {
    /// Smallest world height of the node's samples.
    pub min_y: f32,
    /// Largest world height of the node's samples.
    pub max_y: f32,
    /// Upper bound of the vertical distance between the full-resolution samples and the
    /// node's 3 × 3 fan, over the node and all its descendants (see the module docs).
    pub error: f32,
}

/// One level of the pyramid: a row-major array of the nodes that intersect the data.
#[derive(Clone, Debug)]
struct Level {
    /// Cells per node side.
    size: u32,
    nodes_x: u32,
    nodes_z: u32,
    min_y: Vec<f32>,
    max_y: Vec<f32>,
    /// Empty on the finest level, whose error is 0 by construction.
    error: Vec<f32>,
}

impl Level {
    fn index(&self, ix: u32, iz: u32) -> Option<usize> {
        (ix < self.nodes_x && iz < self.nodes_z)
            .then(|| iz as usize * self.nodes_x as usize + ix as usize)
    }
}

/// Per-node min/max height and error bound for every quadtree node that intersects the data.
#[derive(Clone, Debug)]
pub struct Pyramid {
    mapping: WorldMapping,
    width: u32,
    height: u32,
    padded_side: u32,
    levels: Vec<Level>,
}

/// Nodes per side of a level whose nodes have `size` cells, for `samples` samples.
fn nodes_along(samples: u32, size: u32) -> u32 {
    (samples - 1).div_ceil(size).max(1)
}

/// The levels of the pyramid of a `width` × `height` grid, root first: node size in cells
/// and the stored nodes along x and z (see "Layout").
pub(crate) fn level_nodes(width: u32, height: u32) -> impl Iterator<Item = (u32, u32, u32)> {
    let padded_side = crate::heightfield::padded_side(width, height);
    (0..(padded_side - 1).trailing_zeros()).map(move |level| {
        let size = (padded_side - 1) >> level;
        (size, nodes_along(width, size), nodes_along(height, size))
    })
}

impl Pyramid {
    /// Builds the pyramid of a heightfield, in parallel.
    pub fn build(field: &Heightfield) -> Pyramid {
        Self::build_with(
            field,
            fan_error::Strategy::FASTEST,
            fan_error::max_abs(field),
        )
    }

    /// The pyramid of a piece of a larger terrain whose largest `|raw|` is `max_abs`: the
    /// `f32` rounding slack is the whole terrain's, so a node inside the piece gets the
    /// bounds the whole terrain's pyramid gives it (bit for bit for 16-bit sources; for
    /// `f32` the kernel's scan, picked per level by its node count, may round the last bit
    /// otherwise): what a pyramid built tile by tile relies on.
    pub(crate) fn build_for_piece(field: &Heightfield, max_abs: f64) -> Pyramid {
        Self::build_with(field, fan_error::Strategy::FASTEST, max_abs)
    }

    fn build_with(field: &Heightfield, strategy: fan_error::Strategy, max_abs: f64) -> Pyramid {
        let padded_side = field.padded_side();
        let mut levels: Vec<Level> = level_nodes(field.width(), field.height())
            .map(|(size, nodes_x, nodes_z)| Level {
                size,
                nodes_x,
                nodes_z,
                min_y: Vec::new(),
                max_y: Vec::new(),
                error: Vec::new(),
            })
            .collect();
        let ((min_y, max_y), errors) = rayon::join(
            || match field.samples() {
                Samples::U16(v) => min_max_levels(field, v, &levels),
                Samples::I16(v) => min_max_levels(field, v, &levels),
                Samples::F32(v) => min_max_levels(field, v, &levels),
            },
            || fan_error::own_errors(field, &levels, strategy, max_abs),
        );
        for (level, ((lo, hi), own)) in levels
            .iter_mut()
            .zip(min_y.into_iter().zip(max_y).zip(errors))
        {
            level.min_y = lo;
            level.max_y = hi;
            level.error = own;
        }
        propagate_errors(&mut levels);
        Pyramid {
            mapping: field.mapping(),
            width: field.width(),
            height: field.height(),
            padded_side,
            levels,
        }
    }

    /// Number of levels: level 0 is the root, `levels() - 1` the finest (3 × 3 vertices).
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// Cells per side of a node at `level` (`2^(n - level)`). Panics if `level` is out of range.
    pub fn node_size(&self, level: usize) -> u32 {
        self.levels[level].size
    }

    /// Number of stored nodes along x and z at `level`. Panics if `level` is out of range.
    pub fn nodes(&self, level: usize) -> (u32, u32) {
        let l = &self.levels[level];
        (l.nodes_x, l.nodes_z)
    }

    /// Side of the padded square grid the quadtree covers (`2^n + 1` samples).
    pub fn padded_side(&self) -> u32 {
        self.padded_side
    }

    /// The mapping of the heightfield the pyramid was built from.
    pub fn mapping(&self) -> WorldMapping {
        self.mapping
    }

    /// Width and height of the heightfield, in samples.
    pub fn data_size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    /// Bounds of a stored node, or `None` when it does not intersect the data.
    pub fn get(&self, level: usize, ix: u32, iz: u32) -> Option<NodeBounds> {
        let l = self.levels.get(level)?;
        let i = l.index(ix, iz)?;
        Some(NodeBounds {
            min_y: l.min_y[i],
            max_y: l.max_y[i],
            error: l.error.get(i).copied().unwrap_or(0.0),
        })
    }

    /// Bounds of a stored node. Panics when the node is not stored, like slice indexing;
    /// use [`Pyramid::get`] for positions that may be out of range.
    pub fn node(&self, level: usize, ix: u32, iz: u32) -> NodeBounds {
        match self.get(level, ix, iz) {
            Some(bounds) => bounds,
            None => panic!("node ({ix}, {iz}) at level {level} is not stored in the pyramid"),
        }
    }

    /// Grid position of a node's first corner (smallest column and row).
    pub fn node_origin(&self, level: usize, ix: u32, iz: u32) -> GridPos {
        let s = self.node_size(level);
        GridPos::new(ix * s, iz * s)
    }

    /// The stored children of a node (up to four, fewer at the data border; none for a
    /// node of the finest level), as `(ix, iz)` at `level + 1`.
    pub fn children(&self, level: usize, ix: u32, iz: u32) -> impl Iterator<Item = (u32, u32)> {
        let next = self.levels.get(level + 1);
        [(0, 0), (1, 0), (0, 1), (1, 1)]
            .into_iter()
            .map(move |(dx, dz)| (2 * ix + dx, 2 * iz + dz))
            .filter(move |&(cx, cz)| next.is_some_and(|l| l.index(cx, cz).is_some()))
    }

    /// World-space box of a node: its whole square in x and z (padded part included, as
    /// drawn) and `[min_y, max_y]` in y. `mapping` must be the heightfield's (only its cell
    /// size is read). Panics when the node is not stored.
    pub fn aabb(&self, level: usize, ix: u32, iz: u32, mapping: &WorldMapping) -> Aabb {
        let bounds = self.node(level, ix, iz);
        let origin = self.node_origin(level, ix, iz);
        let s = self.node_size(level);
        let cell = mapping.cell_size;
        Aabb {
            min: Vec3::new(
                origin.col as f32 * cell,
                bounds.min_y,
                origin.row as f32 * cell,
            ),
            max: Vec3::new(
                (origin.col + s) as f32 * cell,
                bounds.max_y,
                (origin.row + s) as f32 * cell,
            ),
        }
    }

    /// Bytes held by the per-node arrays.
    pub fn memory_bytes(&self) -> usize {
        self.levels
            .iter()
            .map(|l| (l.min_y.len() + l.max_y.len() + l.error.len()) * size_of::<f32>())
            .sum()
    }
}

/// World min/max of every node of every level: leaves from the samples, parents from their
/// stored children (a child that is not stored only repeats border samples of a sibling).
fn min_max_levels<T>(
    field: &Heightfield,
    data: &[T],
    levels: &[Level],
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>)
where
    T: Copy + Into<f32> + Send + Sync,
{
    let mapping = field.mapping();
    let (w, h) = (field.width() as usize, field.height() as usize);
    let finest = levels.len() - 1;
    let nx = levels[finest].nodes_x as usize;
    let nz = levels[finest].nodes_z as usize;
    // Raw min/max of each 3 × 3 leaf, one band of leaves (three sample rows) per task.
    let mut leaf_lo = vec![0.0f32; nx * nz];
    let mut leaf_hi = vec![0.0f32; nx * nz];
    leaf_lo
        .par_chunks_mut(nx)
        .zip(leaf_hi.par_chunks_mut(nx))
        .enumerate()
        .for_each(|(iz, (lo_out, hi_out))| {
            let row = |k: usize| {
                let r = (2 * iz + k).min(h - 1);
                &data[r * w..(r + 1) * w]
            };
            // Per column over the band's three rows, then per leaf over three columns.
            let mut col_lo = vec![0.0f32; w];
            let mut col_hi = vec![0.0f32; w];
            let columns = row(0).iter().zip(row(1)).zip(row(2));
            for ((lo, hi), ((&a, &b), &c)) in col_lo.iter_mut().zip(col_hi.iter_mut()).zip(columns)
            {
                let (a, b, c): (f32, f32, f32) = (a.into(), b.into(), c.into());
                *lo = min_f32(min_f32(a, b), c);
                *hi = max_f32(max_f32(a, b), c);
            }
            reduce_leaf_columns(&col_lo, lo_out, min_f32);
            reduce_leaf_columns(&col_hi, hi_out, max_f32);
        });
    let mut lo_levels = vec![leaf_lo];
    let mut hi_levels = vec![leaf_hi];
    for level in (0..finest).rev() {
        let (parent, child) = (&levels[level], &levels[level + 1]);
        let lo = combine_children(parent, child, &lo_levels[lo_levels.len() - 1], min_f32);
        let hi = combine_children(parent, child, &hi_levels[hi_levels.len() - 1], max_f32);
        lo_levels.push(lo);
        hi_levels.push(hi);
    }
    lo_levels.reverse();
    hi_levels.reverse();
    // Raw to world: the mapping is monotone (antitone for a negative scale), also in f32.
    let flip = mapping.height_scale < 0.0;
    for (lo, hi) in lo_levels.iter_mut().zip(hi_levels.iter_mut()) {
        lo.par_iter_mut().for_each(|y| *y = mapping.world_y(*y));
        hi.par_iter_mut().for_each(|y| *y = mapping.world_y(*y));
        if flip {
            std::mem::swap(lo, hi);
        }
    }
    (lo_levels, hi_levels)
}

/// Reduces per-column values to per-leaf values: leaf `ix` covers columns `2ix..=2ix+2`
/// (the last clamped to the data).
fn reduce_leaf_columns(columns: &[f32], out: &mut [f32], pick: impl Fn(f32, f32) -> f32) {
    let last = columns.len() - 1;
    // Leaves whose three columns are all in the data, then the clamped rest.
    let whole = out.len().min(last / 2);
    let (body, tail) = out.split_at_mut(whole);
    let thirds = columns[2..].iter().step_by(2);
    for ((value, pair), &third) in body.iter_mut().zip(columns.chunks_exact(2)).zip(thirds) {
        *value = pick(pick(pair[0], pair[1]), third);
    }
    for (k, value) in tail.iter_mut().enumerate() {
        let c = 2 * (whole + k);
        *value = pick(
            pick(columns[c.min(last)], columns[(c + 1).min(last)]),
            columns[(c + 2).min(last)],
        );
    }
}

/// One level's values from its children's: `pick` over the stored children of each node.
fn combine_children(
    parent: &Level,
    child: &Level,
    values: &[f32],
    pick: impl Fn(f32, f32) -> f32 + Sync + Copy,
) -> Vec<f32> {
    let (cnx, cnz) = (child.nodes_x as usize, child.nodes_z as usize);
    let mut out = vec![0.0f32; parent.nodes_x as usize * parent.nodes_z as usize];
    out.par_chunks_mut(parent.nodes_x as usize)
        .enumerate()
        .for_each(|(iz, row_out)| {
            let upper = &values[2 * iz * cnx..(2 * iz + 1) * cnx];
            // A missing lower child row only repeats the upper one's border.
            let lower = if 2 * iz + 1 < cnz {
                &values[(2 * iz + 1) * cnx..(2 * iz + 2) * cnx]
            } else {
                upper
            };
            let pairs = upper.chunks_exact(2).zip(lower.chunks_exact(2));
            for (value, (a, b)) in row_out.iter_mut().zip(pairs) {
                *value = pick(pick(a[0], a[1]), pick(b[0], b[1]));
            }
            if cnx % 2 == 1 {
                // A missing right child only repeats its sibling's border.
                row_out[cnx / 2] = pick(upper[cnx - 1], lower[cnx - 1]);
            }
        });
    out
}

/// Minimum of two samples (never NaN: heightfields are validated finite).
#[inline]
fn min_f32(a: f32, b: f32) -> f32 {
    if b < a { b } else { a }
}

/// Maximum of two samples (never NaN).
#[inline]
fn max_f32(a: f32, b: f32) -> f32 {
    if b > a { b } else { a }
}

/// Makes the error monotone towards the root: `error(node) = max(own, error(children))`.
fn propagate_errors(levels: &mut [Level]) {
    let finest = levels.len() - 1;
    for level in (0..finest.saturating_sub(1)).rev() {
        let (upper, lower) = levels.split_at_mut(level + 1);
        let (parent, child) = (&mut upper[level], &lower[0]);
        let nx = parent.nodes_x;
        parent
            .error
            .par_iter_mut()
            .enumerate()
            .for_each(|(i, error)| {
                let (ix, iz) = (i as u32 % nx, i as u32 / nx);
                for (dx, dz) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                    if let Some(c) = child.index(2 * ix + dx, 2 * iz + dz) {
                        *error = error.max(child.error[c]);
                    }
                }
            });
    }
}
