//! The static half of algorithm A (the article's "height tree"): per square its vertical
//! extent and the error values its tests use, built once from the heightfield and pyramid.

use crate::camera::Aabb;
use crate::heightfield::{Heightfield, Samples};
use crate::pyramid::Pyramid;
use crate::rounding::round_down;
pub(super) use crate::rounding::round_up;
use glam::Vec3;
use rayon::prelude::*;

/// Sides of a square, as bit positions in the state words: the east and south edge
/// vertices belong to the square (the article's rule); north and west belong to the
/// neighbours, except on the grid's north and west border where nobody else has them.
pub(super) const EAST: usize = 0;
pub(super) const SOUTH: usize = 1;
pub(super) const NORTH: usize = 2;
pub(super) const WEST: usize = 3;

/// Static values of one square (12 bytes), quantised outwards: heights as 16-bit steps of
/// the terrain's range (the low one rounded down, the high one up), errors as the upper
/// half of their `f32` bits rounded up (a relative step of 2^-7 at most). Bounds stay
/// bounds; the tests see at most 0.8 % larger errors and boxes a step taller.
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
    /// Bound of `|h − S|` over the square's samples, `S` its plain 3 × 3 fan (the
    /// pyramid's error plus the rounding of drawn heights).
    pub fn fan_error(&self) -> f32 {
        error_value(self.fan_error)
    }

    /// The error of the box test: the largest error any test in the subtree can use (the
    /// parent's fan error included, so a quadrant the parent draws is covered).
    pub fn subtree_error(&self) -> f32 {
        error_value(self.subtree_error)
    }

    /// Interpolation error of the east and south edge vertices (the article's vertex
    /// error: the sample against the mean of its edge's two corners).
    pub fn east_error(&self) -> f32 {
        error_value(self.east_error)
    }

    pub fn south_error(&self) -> f32 {
        error_value(self.south_error)
    }
}

/// A non-negative error rounded up to the 16 high bits of its `f32` (a "bfloat16").
fn error_code(error: f32) -> u16 {
    debug_assert!(error >= 0.0 && !error.is_nan());
    let bits = error.to_bits();
    let high = bits >> 16;
    let code = if bits & 0xffff == 0 { high } else { high + 1 };
    code.min(u32::from(u16::MAX)) as u16
}

fn error_value(code: u16) -> f32 {
    f32::from_bits(u32::from(code) << 16)
}

/// The 16-bit height steps of a terrain's world range.
#[derive(Clone, Copy, Debug)]
struct HeightSteps {
    low: f32,
    step: f32,
}

impl HeightSteps {
    /// Steps covering `low ..= high` with a margin (the pyramid's bounds are rounded
    /// outwards from the same range): code 0 is below `low`, code 65535 above `high`.
    fn new(low: f32, high: f32) -> HeightSteps {
        let margin = (f64::from(low).abs() + f64::from(high).abs()) * 2f64.powi(-20) + 1e-6;
        let low = round_down(f64::from(low) - margin);
        let top = f64::from(high) + margin;
        let mut step = round_up((top - f64::from(low)) / 65_535.0);
        while f64::from(low + 65_535.0 * step) < top {
            step = step.next_up();
        }
        HeightSteps { low, step }
    }

    fn value(&self, code: u16) -> f32 {
        self.low + f32::from(code) * self.step
    }

    /// The largest code whose value is at most `y`.
    fn below(&self, y: f32) -> u16 {
        let mut code = ((y - self.low) / self.step).floor().clamp(0.0, 65_535.0) as u16;
        while code > 0 && self.value(code) > y {
            code -= 1;
        }
        debug_assert!(self.value(code) <= y, "{y} below the range");
        code
    }

    /// The smallest code whose value is at least `y`.
    fn above(&self, y: f32) -> u16 {
        let mut code = ((y - self.low) / self.step).ceil().clamp(0.0, 65_535.0) as u16;
        while code < u16::MAX && self.value(code) < y {
            code += 1;
        }
        debug_assert!(self.value(code) >= y, "{y} above the range");
        code
    }
}

/// One level of the dense square arrays: the squares that intersect the data, row-major.
#[derive(Clone, Copy, Debug)]
pub(super) struct LevelShape {
    /// Cells per square side.
    pub size: u32,
    pub nx: u32,
    pub nz: u32,
    /// Index of the level's first square in the flat arrays.
    pub offset: usize,
}

impl LevelShape {
    #[inline(always)]
    pub fn id(&self, ix: u32, iz: u32) -> usize {
        self.offset + iz as usize * self.nx as usize + ix as usize
    }

    #[inline(always)]
    pub fn present(&self, ix: u32, iz: u32) -> bool {
        ix < self.nx && iz < self.nz
    }
}

/// The static tree: shapes per level and one record per square.
#[derive(Clone, Debug)]
pub(super) struct HeightTree {
    pub levels: Vec<LevelShape>,
    pub records: Vec<SquareRecord>,
    pub cell_size: f32,
    heights: HeightSteps,
    /// Drawn extent in columns and rows (as algorithm Q: the leaves' rectangle).
    pub extent: (u32, u32),
    /// Upper bound of the f32 rounding of a drawn height.
    rounding: f64,
    /// Rounding slack of float sources (raw units), 0 for integer ones.
    slack: f64,
    scale: f64,
}

impl HeightTree {
    pub fn build(field: &Heightfield, pyramid: &Pyramid) -> HeightTree {
        let mut offset = 0;
        let levels: Vec<LevelShape> = (0..pyramid.levels())
            .map(|level| {
                let (nx, nz) = pyramid.nodes(level);
                let shape = LevelShape {
                    size: pyramid.node_size(level),
                    nx,
                    nz,
                    offset,
                };
                offset += nx as usize * nz as usize;
                shape
            })
            .collect();
        let finest = levels.len() - 1;
        let (lo, hi) = field.raw_range();
        let slack = match field.samples() {
            Samples::F32(_) => f64::from(lo.abs().max(hi.abs())) * 2f64.powi(-45),
            Samples::U16(_) | Samples::I16(_) => 0.0,
        };
        let (world_lo, world_hi) = field.world_range();
        let mut tree = HeightTree {
            extent: (2 * levels[finest].nx, 2 * levels[finest].nz),
            levels,
            records: Vec::new(),
            cell_size: field.mapping().cell_size,
            heights: HeightSteps::new(world_lo, world_hi),
            rounding: f64::from(world_lo.abs().max(world_hi.abs())) * 2f64.powi(-23),
            slack,
            scale: f64::from(field.mapping().height_scale.abs()),
        };
        // Own values, level by level, rows in parallel.
        let mut records = vec![SquareRecord::default(); offset];
        for level in 0..=finest {
            let shape = tree.levels[level];
            let range = shape.offset..shape.offset + shape.nx as usize * shape.nz as usize;
            let this = &tree;
            records[range]
                .par_chunks_mut(shape.nx as usize)
                .enumerate()
                .for_each(|(iz, row)| {
                    for (ix, record) in row.iter_mut().enumerate() {
                        *record = this.own_record(field, pyramid, level, ix as u32, iz as u32);
                    }
                });
        }
        tree.records = records;
        // Subtree errors, from the finest level up: each square's own tests, its
        // children's box tests, and its parent's fan (a quadrant the parent draws).
        for level in (0..=finest).rev() {
            let shape = tree.levels[level];
            for iz in 0..shape.nz {
                for ix in 0..shape.nx {
                    let record = tree.records[shape.id(ix, iz)];
                    let mut worst = (0..4)
                        .map(|side| tree.side_error(field, level, ix, iz, side))
                        .fold(0.0f32, f32::max);
                    if level < finest {
                        let child = tree.levels[level + 1];
                        for (dx, dz) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                            let (cx, cz) = (2 * ix + dx, 2 * iz + dz);
                            if child.present(cx, cz) {
                                worst = worst.max(tree.records[child.id(cx, cz)].subtree_error());
                            }
                        }
                    }
                    if level > 0 {
                        let parent = tree.levels[level - 1].id(ix / 2, iz / 2);
                        worst = worst.max(tree.records[parent].fan_error());
                    }
                    tree.records[shape.id(ix, iz)] = SquareRecord {
                        subtree_error: error_code(worst),
                        ..record
                    };
                }
            }
        }
        tree
    }

    /// The square's own values (its subtree error is filled in later).
    fn own_record(
        &self,
        field: &Heightfield,
        pyramid: &Pyramid,
        level: usize,
        ix: u32,
        iz: u32,
    ) -> SquareRecord {
        let bounds = pyramid.node(level, ix, iz);
        let size = self.levels[level].size;
        let (x0, z0) = (ix * size, iz * size);
        let half = size / 2;
        let east = self.vertex_error(field, (x0 + size, z0), (x0 + size, z0 + size), half);
        let south = self.vertex_error(field, (x0, z0 + size), (x0 + size, z0 + size), half);
        SquareRecord {
            min_y: self.heights.below(bounds.min_y),
            max_y: self.heights.above(bounds.max_y),
            fan_error: error_code(self.with_rounding(f64::from(bounds.error))),
            subtree_error: 0,
            east_error: error_code(east),
            south_error: error_code(south),
        }
    }

    /// A world error made safe for drawing: plus the rounding of drawn heights and a
    /// relative margin for the f32 arithmetic of the tests; 0 stays 0 (exact).
    fn with_rounding(&self, exact: f64) -> f32 {
        if exact == 0.0 {
            0.0
        } else {
            round_up(exact * (1.0 + 2f64.powi(-16)) + self.rounding)
        }
    }

    /// Interpolation error of the midpoint of the edge from `a` to `b` (`half` cells from
    /// each), in world units.
    fn vertex_error(&self, field: &Heightfield, a: (u32, u32), b: (u32, u32), half: u32) -> f32 {
        let h = |p: (u32, u32)| f64::from(field.raw_clamped(p.0, p.1));
        let m = if a.0 == b.0 {
            (a.0, a.1 + half)
        } else {
            (a.0 + half, a.1)
        };
        let raw = (h(m) - 0.5 * (h(a) + h(b))).abs();
        if raw == 0.0 {
            0.0
        } else {
            round_up(((raw + self.slack) * self.scale) * (1.0 + 2f64.powi(-16)))
        }
    }

    /// Interpolation error of the edge vertex on `side` of square `(ix, iz)`.
    pub fn side_vertex_error(
        &self,
        field: &Heightfield,
        level: usize,
        ix: u32,
        iz: u32,
        side: usize,
    ) -> f32 {
        let shape = self.levels[level];
        match side {
            EAST => self.records[shape.id(ix, iz)].east_error(),
            SOUTH => self.records[shape.id(ix, iz)].south_error(),
            NORTH if iz > 0 => self.records[shape.id(ix, iz - 1)].south_error(),
            WEST if ix > 0 => self.records[shape.id(ix - 1, iz)].east_error(),
            _ => {
                let size = shape.size;
                let (x0, z0) = (ix * size, iz * size);
                let end = if side == NORTH {
                    (x0 + size, z0)
                } else {
                    (x0, z0 + size)
                };
                self.vertex_error(field, (x0, z0), end, size / 2)
            }
        }
    }

    /// The error this square's side of the test of its edge vertex on `side` uses: its fan
    /// error plus the vertex's interpolation error (what drawing the square without that
    /// vertex can add, see the module docs).
    pub fn side_error(
        &self,
        field: &Heightfield,
        level: usize,
        ix: u32,
        iz: u32,
        side: usize,
    ) -> f32 {
        let fan = self.records[self.levels[level].id(ix, iz)].fan_error();
        let vertex = self.side_vertex_error(field, level, ix, iz, side);
        if vertex == 0.0 {
            fan
        } else {
            // The f32 sum may round down by half an ulp.
            (fan + vertex) * (1.0 + f32::EPSILON)
        }
    }

    /// World box of a square.
    pub fn aabb(&self, level: usize, ix: u32, iz: u32) -> Aabb {
        let shape = self.levels[level];
        let record = &self.records[shape.id(ix, iz)];
        let (x0, z0) = ((ix * shape.size) as f32, (iz * shape.size) as f32);
        let s = shape.size as f32;
        Aabb {
            min: Vec3::new(
                x0 * self.cell_size,
                self.heights.value(record.min_y),
                z0 * self.cell_size,
            ),
            max: Vec3::new(
                (x0 + s) * self.cell_size,
                self.heights.value(record.max_y),
                (z0 + s) * self.cell_size,
            ),
        }
    }

    /// Whether a square reaches beyond the drawn extent (it is never drawn itself: all its
    /// stored children are).
    pub fn straddles(&self, level: usize, ix: u32, iz: u32) -> bool {
        let size = self.levels[level].size;
        (ix + 1) * size > self.extent.0 || (iz + 1) * size > self.extent.1
    }

    /// Bytes of the static records.
    pub fn bytes(&self) -> usize {
        self.records.len() * size_of::<SquareRecord>()
    }
}

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

    #[test]
    fn quantised_heights_round_outwards() {
        for (low, high) in [
            (130.0f32, 1870.0f32),
            (-20.5, -20.5),
            (-1e4, 3.0),
            (0.0, 0.001),
        ] {
            let steps = HeightSteps::new(low, high);
            for k in 0..=1000 {
                let y = low + (high - low) * k as f32 / 1000.0;
                for y in [y, y.next_up(), y.next_down()] {
                    let (a, b) = (steps.value(steps.below(y)), steps.value(steps.above(y)));
                    assert!(a <= y && y <= b, "{y} in {a} ..= {b}");
                    assert!(
                        b - a <= 2.0 * steps.step + y.abs() * 1e-6,
                        "{y}: {a} ..= {b}"
                    );
                }
            }
        }
    }
}
