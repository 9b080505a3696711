//! Local detail (A5, the article's road): a finer heightfield inserted into algorithm A's
//! tree, which grows finer levels under the detail's footprint only.
//!
//! # The surface
//!
//! The detail has cell size `c / 2^k` (`c` the terrain's) and its first sample on the
//! *fine grid* (the terrain's grid subdivided `2^k` times): the tree is built over the fine
//! grid, `k` levels deeper, and its height at a fine position `p` is
//!
//! - inside the footprint `F` (the detail's samples, clipped to the terrain's data, closed):
//!   the detail's sample there (no blending: the detail replaces the terrain);
//! - else at a terrain sample (every `2^k`-th position): the terrain's sample, or the
//!   detail's value if that sample lies in `F` (the terrain's own value is replaced, so
//!   both sides of the footprint's border read the same height: one height per position);
//! - else: the terrain's full-resolution surface there, i.e. the finest fans (3 × 3
//!   samples, 2 cells a side) through those samples, the surface the tree draws at full
//!   resolution. So away from the footprint nothing changes: a square of the terrain's
//!   levels has the same fan and the same error over the fine grid as over the terrain's
//!   samples (the fans are nested: a square's fan triangles are unions of its
//!   descendants'), and its bounds come from the pyramid.
//!
//! The detail's raw values go through the terrain's height scale and offset.
//!
//! # Bounds near the footprint
//!
//! Squares that touch `R` (the finest terrain squares touching `F`, plus one on each side:
//! where the surface differs from the terrain's) get their bounds here: small squares from
//! every fine position they hold (exact); large ones from every detail sample they hold
//! (exact) and, outside `F` (where the surface interpolates terrain samples, so its
//! distance to the square's fan is largest at a terrain sample), every terrain sample
//! (exact), or for the largest squares the pyramid's error plus the largest change of a
//! replaced sample and of the fan's vertices (an upper bound). Then made monotone.

use super::records::HeightCodes;
use super::tree::{Budget, FieldSource, LevelShape, Source};
use crate::heightfield::{Heightfield, Samples};
use crate::pyramid::Pyramid;
use rayon::prelude::*;

/// Why a detail cannot be inserted.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DetailError {
    #[error(
        "detail cell size {cell_size} must be the terrain's cell size {terrain} divided by a \
         power of two (2 to 256)"
    )]
    CellSize { cell_size: f32, terrain: f32 },
    #[error(
        "detail origin ({x}, {z}) must be finite and lie on the detail's lattice (multiples of \
         {cell_size})"
    )]
    Origin { x: f32, z: f32, cell_size: f32 },
    #[error(
        "the detail ({width} x {height} samples at ({x}, {z})) does not overlap the terrain \
         (it covers none of its cells)"
    )]
    Outside {
        width: u32,
        height: u32,
        x: f32,
        z: f32,
    },
    #[error(
        "the terrain's grid subdivided {factor} times has {vertices} vertices, more than 32-bit \
         grid indices address: list the vertices instead (--list-vertices)"
    )]
    TooFine { factor: u32, vertices: u64 },
    #[error(
        "the terrain's grid subdivided {factor} times is {side} positions a side, more than \
         the tree's 2^31: use a coarser --detail-cell-size"
    )]
    TooWide { factor: u32, side: u64 },
    #[error("the detail was placed on another terrain")]
    Terrain,
    #[error(
        "the tree with this detail does not fit in memory (a table of {bytes} bytes could not \
         be allocated): use a smaller detail or a coarser --detail-cell-size"
    )]
    TooLarge { bytes: u64 },
}

/// Finest subdivision of a detail: 256 positions per terrain cell (a square of the
/// detail's first level then has 257² positions, all of which its bounds visit).
pub const MAX_SHIFT: u32 = 8;

/// A finer heightfield placed on a terrain: validated once, inserted by
/// [`super::AdaptiveLod::with_detail`].
#[derive(Clone, Copy, Debug)]
pub struct Detail<'a> {
    field: &'a Heightfield,
    /// `k`: the detail's cell is the terrain's divided by `2^k`.
    shift: u32,
    /// Fine grid position of the detail's sample (0, 0).
    origin: (i64, i64),
    /// The footprint on the fine grid, clipped to the terrain's data: first and last
    /// column and row (inclusive).
    footprint: [u32; 4],
    /// The terrain's size and cell size it was validated against.
    terrain: (u32, u32, f32),
}

/// Cells along one side of the tree's drawn extent (algorithm Q's: the finest squares
/// that meet the data).
fn extent_cells(samples: u32) -> u32 {
    2 * (samples - 1).div_ceil(2).max(1)
}

impl<'a> Detail<'a> {
    /// Positions of the terrain's grid subdivided for the detail (the grid-indexed
    /// selection's vertex buffer): at most `u32::MAX` unless the vertices are listed.
    pub fn grid_vertices(&self) -> u64 {
        let (width, height, _) = self.terrain;
        (u64::from(extent_cells(width)) << self.shift | 1)
            * (u64::from(extent_cells(height)) << self.shift | 1)
    }

    /// [`DetailError::TooFine`] unless the grid-indexed selection can address every
    /// position, or the vertices are listed; [`DetailError::TooWide`] when even listed
    /// positions would not fit the tree's `u32` sides.
    pub(super) fn check_indices(&self, list_vertices: bool) -> Result<(), DetailError> {
        // The tree's root, a power of two of fine cells, must have `u32` positions.
        let (width, height, _) = self.terrain;
        let cells = u64::from(extent_cells(width).max(extent_cells(height))) << self.shift;
        if cells.next_power_of_two() > 1 << 31 {
            return Err(DetailError::TooWide {
                factor: 1 << self.shift,
                side: cells + 1,
            });
        }
        let vertices = self.grid_vertices();
        if list_vertices || vertices <= u64::from(u32::MAX) {
            return Ok(());
        }
        Err(DetailError::TooFine {
            factor: 1 << self.shift,
            vertices,
        })
    }

    /// Places `detail` on `terrain` with its first sample at world `(x, z)` = `origin` and
    /// `cell_size` between samples, which must be the terrain's cell size divided by a
    /// power of two; `origin` must lie on the detail's lattice. Its raw values use the
    /// terrain's height mapping. Clipped to the terrain's data, which it must overlap.
    pub fn new(
        terrain: &Heightfield,
        detail: &'a Heightfield,
        origin: (f32, f32),
        cell_size: f32,
    ) -> Result<Detail<'a>, DetailError> {
        let base = terrain.mapping().cell_size;
        let cell_error = DetailError::CellSize {
            cell_size,
            terrain: base,
        };
        if !(cell_size.is_finite() && cell_size > 0.0) {
            return Err(cell_error);
        }
        let ratio = f64::from(base) / f64::from(cell_size);
        let shift = ratio.log2().round();
        if !(1.0..=f64::from(MAX_SHIFT)).contains(&shift)
            || (ratio / shift.exp2() - 1.0).abs() > 1e-6
        {
            return Err(cell_error);
        }
        let shift = shift as u32;
        let fine = f64::from(base) / f64::from(1u32 << shift);
        let on_lattice = |v: f32| {
            let steps = f64::from(v) / fine;
            (v.is_finite() && (steps - steps.round()).abs() <= 1e-3 && steps.abs() < 1e15)
                .then(|| steps.round() as i64)
        };
        let (Some(ox), Some(oz)) = (on_lattice(origin.0), on_lattice(origin.1)) else {
            return Err(DetailError::Origin {
                x: origin.0,
                z: origin.1,
                cell_size,
            });
        };
        let last_x = i64::from(terrain.width() - 1) << shift;
        let last_z = i64::from(terrain.height() - 1) << shift;
        let x0 = ox.max(0);
        let z0 = oz.max(0);
        let x1 = (ox + i64::from(detail.width()) - 1).min(last_x);
        let z1 = (oz + i64::from(detail.height()) - 1).min(last_z);
        // A footprint of one line or one point has no cell to refine: nothing would be
        // inserted, so the placement is refused as one beside the terrain.
        if x0 >= x1 || z0 >= z1 {
            return Err(DetailError::Outside {
                width: detail.width(),
                height: detail.height(),
                x: origin.0,
                z: origin.1,
            });
        }
        Ok(Detail {
            field: detail,
            shift,
            origin: (ox, oz),
            footprint: [x0 as u32, z0 as u32, x1 as u32, z1 as u32],
            terrain: (terrain.width(), terrain.height(), base),
        })
    }

    /// `k`: fine grid positions per terrain cell are `2^k`.
    pub fn shift(&self) -> u32 {
        self.shift
    }

    /// The detail's cell size (the fine grid's).
    pub fn cell_size(&self) -> f32 {
        self.terrain.2 / (1u32 << self.shift) as f32
    }

    /// The footprint on the fine grid (clipped to the terrain's data): first and last
    /// column, first and last row, inclusive.
    pub fn footprint(&self) -> [u32; 4] {
        self.footprint
    }

    /// The detail's heightfield.
    pub fn field(&self) -> &'a Heightfield {
        self.field
    }

    /// Fine grid position of the detail's first sample (may lie off the terrain).
    pub fn origin(&self) -> (i64, i64) {
        self.origin
    }

    /// Whether it was placed on `terrain` (same size and cell size).
    pub(super) fn fits(&self, terrain: &Heightfield) -> bool {
        self.terrain
            == (
                terrain.width(),
                terrain.height(),
                terrain.mapping().cell_size,
            )
    }

    #[inline]
    fn covers(&self, col: u32, row: u32) -> bool {
        let [x0, z0, x1, z1] = self.footprint;
        (x0..=x1).contains(&col) && (z0..=z1).contains(&row)
    }

    /// The detail's raw value at a fine position it covers.
    #[inline]
    fn value(&self, col: u32, row: u32) -> f64 {
        let c = (i64::from(col) - self.origin.0) as u32;
        let r = (i64::from(row) - self.origin.1) as u32;
        f64::from(self.field.raw(c, r))
    }
}

/// Value of a square's fan (3 × 3 vertex values, row-major) at offset `(u, v)` from its
/// centre, `half` grid steps from the centre to a side (the pyramid's fan).
#[inline]
fn fan_value(vertices: &[f64; 9], u: i64, v: i64, half: f64) -> f64 {
    let (au, av) = (u.unsigned_abs() as f64, v.unsigned_abs() as f64);
    let side_col = if u < 0 { 0 } else { 2 };
    let side_row = if v < 0 { 0 } else { 6 };
    let centre = vertices[4];
    let corner = vertices[side_row + side_col];
    let scaled = if au >= av {
        let mid = vertices[3 + side_col];
        centre * half + au * (mid - centre) + av * (corner - mid)
    } else {
        let mid = vertices[side_row + 1];
        centre * half + av * (mid - centre) + au * (corner - mid)
    };
    scaled / half
}

/// Bounds of one square: raw min, max and own fan error (raw units).
#[derive(Clone, Copy, Debug, Default)]
struct RawBounds {
    lo: f64,
    hi: f64,
    error: f64,
}

impl RawBounds {
    const EMPTY: RawBounds = RawBounds {
        lo: f64::INFINITY,
        hi: f64::NEG_INFINITY,
        error: 0.0,
    };

    #[inline]
    fn add(&mut self, value: f64, fan: f64) {
        self.lo = self.lo.min(value);
        self.hi = self.hi.max(value);
        self.error = self.error.max((value - fan).abs());
    }
}

/// Squares of one level that touch `R`: an index rectangle and their bounds (world min,
/// max, monotone error).
#[derive(Clone, Debug, Default)]
struct NearLevel {
    ix0: u32,
    iz0: u32,
    nx: u32,
    nz: u32,
    bounds: Vec<(f64, f64, f32)>,
}

impl NearLevel {
    fn get(&self, ix: u32, iz: u32) -> Option<(f64, f64, f32)> {
        let (dx, dz) = (ix.wrapping_sub(self.ix0), iz.wrapping_sub(self.iz0));
        (dx < self.nx && dz < self.nz).then(|| self.bounds[(dz * self.nx + dx) as usize])
    }
}

/// Fine positions a square holds at most to be bounded by visiting all of them.
const EXACT_POINTS: u64 = 1 << 18;
/// Terrain samples a square holds at most to visit them all (else the pyramid's bound).
const EXACT_SAMPLES: u64 = 1 << 22;

/// The terrain with a detail inserted, as the tree's source.
pub(super) struct DetailSource<'a> {
    base: FieldSource<'a>,
    detail: Detail<'a>,
    shapes: Vec<LevelShape>,
    /// Levels of the terrain's own pyramid (the rest are the detail's `k` finer ones).
    base_levels: usize,
    near: Vec<NearLevel>,
    /// `R` on the fine grid: first and last column and row (inclusive).
    region: [u32; 4],
    scale: f64,
    offset: f64,
    /// Raw range of the terrain and the detail together, whether both are integer, and
    /// the rounding slack of float samples (raw units).
    range: (f64, f64),
    integer: bool,
    slack: f64,
    /// [`EXACT_POINTS`] and [`EXACT_SAMPLES`] (smaller in tests, to reach every path).
    exact: (u64, u64),
}

impl<'a> DetailSource<'a> {
    /// The source, its tables of bounds near the footprint within `budget` (reserved before
    /// any is computed: a detail too large is refused at once).
    pub fn new(
        field: &'a Heightfield,
        pyramid: &'a Pyramid,
        detail: Detail<'a>,
        budget: Budget,
    ) -> Result<Self, DetailError> {
        Self::with_thresholds(
            field,
            pyramid,
            detail,
            (EXACT_POINTS, EXACT_SAMPLES),
            budget,
        )
    }

    /// [`DetailSource::new`] with the limits of the exact bounds `exact` (fine positions,
    /// terrain samples) in place of [`EXACT_POINTS`] and [`EXACT_SAMPLES`].
    fn with_thresholds(
        field: &'a Heightfield,
        pyramid: &'a Pyramid,
        detail: Detail<'a>,
        exact: (u64, u64),
        budget: Budget,
    ) -> Result<Self, DetailError> {
        let k = detail.shift;
        let base_levels = pyramid.levels();
        let mut shapes: Vec<LevelShape> = (0..base_levels)
            .map(|level| {
                let (nx, nz) = pyramid.nodes(level);
                LevelShape {
                    size: pyramid.node_size(level) << k,
                    nx,
                    nz,
                }
            })
            .collect();
        let (ex, ez) = (
            extent_cells(field.width()) << k,
            extent_cells(field.height()) << k,
        );
        for j in 1..=k {
            let size = 2 << (k - j);
            shapes.push(LevelShape {
                size,
                nx: ex / size,
                nz: ez / size,
            });
        }
        let leaf = 2u32 << k;
        let [x0, z0, x1, z1] = detail.footprint;
        let region = [
            (x0 / leaf).saturating_sub(1) * leaf,
            (z0 / leaf).saturating_sub(1) * leaf,
            ((x1 / leaf + 2) * leaf).min(ex),
            ((z1 / leaf + 2) * leaf).min(ez),
        ];
        let mapping = field.mapping();
        let base = FieldSource::new(field, pyramid);
        let ((a, b), (c, d)) = (base.raw_range(), detail.field.raw_range());
        let range = (f64::from(a.min(c)), f64::from(b.max(d)));
        let is_integer = |f: &Heightfield| !matches!(f.samples(), Samples::F32(_));
        let integer = is_integer(field) && is_integer(detail.field);
        let mut source = DetailSource {
            base,
            detail,
            shapes,
            base_levels,
            near: Vec::new(),
            region,
            scale: f64::from(mapping.height_scale),
            offset: f64::from(mapping.height_offset),
            range,
            integer,
            slack: if integer {
                0.0
            } else {
                range.0.abs().max(range.1.abs()) * 2f64.powi(-45)
            },
            exact,
        };
        source.near = source.near_levels(budget)?;
        Ok(source)
    }

    /// The terrain's raw sample at terrain position `(col, row)` (clamped to the data),
    /// replaced by the detail's where the footprint covers it.
    #[inline]
    fn terrain_sample(&self, col: u32, row: u32) -> f64 {
        let field = self.base.field;
        let (c, r) = (col.min(field.width() - 1), row.min(field.height() - 1));
        let k = self.detail.shift;
        if self.detail.covers(c << k, r << k) {
            self.detail.value(c << k, r << k)
        } else {
            f64::from(field.raw(c, r))
        }
    }

    /// The surface at a fine position off the footprint and off the terrain's samples: the
    /// finest terrain fan that holds it.
    fn between_samples(&self, col: u32, row: u32) -> f64 {
        let k = self.detail.shift;
        let leaf = 2u32 << k;
        let (x0, z0) = (col / leaf * leaf, row / leaf * leaf);
        let (bx, bz) = (x0 >> k, z0 >> k);
        let mut vertices = [0.0; 9];
        for (i, v) in vertices.iter_mut().enumerate() {
            *v = self.terrain_sample(bx + (i % 3) as u32, bz + (i / 3) as u32);
        }
        let half = 1i64 << k;
        fan_value(
            &vertices,
            i64::from(col) - i64::from(x0) - half,
            i64::from(row) - i64::from(z0) - half,
            half as f64,
        )
    }

    /// The raw surface at a fine position (see the module docs).
    fn surface(&self, col: u32, row: u32) -> f64 {
        let mask = (1u32 << self.detail.shift) - 1;
        if self.detail.covers(col, row) {
            self.detail.value(col, row)
        } else if col & mask == 0 && row & mask == 0 {
            self.terrain_sample(col >> self.detail.shift, row >> self.detail.shift)
        } else {
            self.between_samples(col, row)
        }
    }

    fn world(&self, raw_lo: f64, raw_hi: f64) -> (f64, f64) {
        let (a, b) = (
            raw_lo * self.scale + self.offset,
            raw_hi * self.scale + self.offset,
        );
        (a.min(b), a.max(b))
    }

    /// The square's fan vertices (raw).
    fn fan(&self, level: usize, ix: u32, iz: u32) -> ([f64; 9], u32, u32, u32) {
        let size = self.shapes[level].size;
        let (x0, z0, half) = (ix * size, iz * size, size / 2);
        let mut vertices = [0.0; 9];
        for (i, v) in vertices.iter_mut().enumerate() {
            *v = self.surface(x0 + (i % 3) as u32 * half, z0 + (i / 3) as u32 * half);
        }
        (vertices, x0, z0, half)
    }

    /// Own bounds of a square that touches `R` (see the module docs).
    fn own_bounds(&self, level: usize, ix: u32, iz: u32) -> (f64, f64, f32) {
        let (vertices, x0, z0, half) = self.fan(level, ix, iz);
        let size = 2 * half;
        let (xc, zc) = (i64::from(x0 + half), i64::from(z0 + half));
        let h = f64::from(half);
        let deviation = |bounds: &mut RawBounds, col: u32, row: u32, value: f64| {
            let fan = fan_value(&vertices, i64::from(col) - xc, i64::from(row) - zc, h);
            bounds.add(value, fan);
        };
        let points = (u64::from(size) + 1).pow(2);
        // A square of the detail's levels lies inside one finest terrain square, where
        // only visiting every position is exact.
        if points <= self.exact.0 || level >= self.base_levels {
            let mut b = RawBounds::EMPTY;
            for row in z0..=z0 + size {
                for col in x0..=x0 + size {
                    deviation(&mut b, col, row, self.surface(col, row));
                }
            }
            let (lo, hi) = self.world(b.lo, b.hi);
            return (lo, hi, self.base.world_error(b.error));
        }
        // The detail's samples in the square.
        let [fx0, fz0, fx1, fz1] = self.detail.footprint;
        let mut inside = RawBounds::EMPTY;
        for row in fz0.max(z0)..=fz1.min(z0 + size) {
            for col in fx0.max(x0)..=fx1.min(x0 + size) {
                deviation(&mut inside, col, row, self.detail.value(col, row));
            }
        }
        // The terrain's samples in it (a large square is a union of terrain squares).
        let k = self.detail.shift;
        let (bx0, bz0, bsize) = (x0 >> k, z0 >> k, size >> k);
        let pyramid = self.base.pyramid.node(level, ix, iz);
        let samples = (u64::from(bsize) + 1).pow(2);
        let outside = if samples <= self.exact.1 {
            let mut b = RawBounds::EMPTY;
            for row in bz0..=bz0 + bsize {
                for col in bx0..=bx0 + bsize {
                    deviation(&mut b, col << k, row << k, self.terrain_sample(col, row));
                }
            }
            self.base.world_error(b.error)
        } else {
            // Pyramid error + the largest replaced-sample change + the largest change of a
            // fan vertex (the fan moves by at most that).
            let field = self.base.field;
            let mut replaced = 0.0f64;
            for row in fz0.max(z0)..=fz1.min(z0 + size) {
                for col in fx0.max(x0)..=fx1.min(x0 + size) {
                    if (col | row) & ((1 << k) - 1) == 0 {
                        let (c, r) = (col >> k, row >> k);
                        replaced = replaced
                            .max((self.detail.value(col, row) - f64::from(field.raw(c, r))).abs());
                    }
                }
            }
            let mut moved = 0.0f64;
            for (i, v) in vertices.iter().enumerate() {
                let (c, r) = (
                    bx0 + (i as u32 % 3) * (bsize / 2),
                    bz0 + (i as u32 / 3) * (bsize / 2),
                );
                moved = moved.max((v - f64::from(field.raw_clamped(c, r))).abs());
            }
            let extra = self.base.world_error(replaced + moved);
            round_sum(pyramid.error, extra)
        };
        let (dlo, dhi) = if inside.lo <= inside.hi {
            self.world(inside.lo, inside.hi)
        } else {
            (f64::INFINITY, f64::NEG_INFINITY)
        };
        (
            f64::from(pyramid.min_y).min(dlo),
            f64::from(pyramid.max_y).max(dhi),
            self.base.world_error(inside.error).max(outside),
        )
    }

    /// Bounds of every square that touches `R`, monotone towards the root.
    fn near_levels(&self, budget: Budget) -> Result<Vec<NearLevel>, DetailError> {
        let [rx0, rz0, rx1, rz1] = self.region;
        // Every level's table reserved first, then filled.
        let mut near = self
            .shapes
            .iter()
            .map(|shape| {
                let first = |r: u32| if r == 0 { 0 } else { (r - 1) / shape.size };
                let (ix0, iz0) = (first(rx0), first(rz0));
                let ix1 = (rx1 / shape.size).min(shape.nx - 1);
                let iz1 = (rz1 / shape.size).min(shape.nz - 1);
                let (nx, nz) = (ix1.saturating_sub(ix0) + 1, iz1.saturating_sub(iz0) + 1);
                let count = usize::try_from(u64::from(nx) * u64::from(nz)).unwrap_or(usize::MAX);
                Ok(NearLevel {
                    ix0,
                    iz0,
                    nx,
                    nz,
                    bounds: budget.vec(count)?,
                })
            })
            .collect::<Result<Vec<NearLevel>, DetailError>>()?;
        for (level, table) in near.iter_mut().enumerate() {
            let (ix0, iz0, nx, nz) = (table.ix0, table.iz0, table.nx, table.nz);
            table.bounds.par_extend(
                (0..nx * nz)
                    .into_par_iter()
                    .map(|i| self.own_bounds(level, ix0 + i % nx, iz0 + i / nx)),
            );
        }
        // Monotone: a square's error bounds its descendants' too.
        for level in (0..near.len() - 1).rev() {
            let (coarse, fine) = near.split_at_mut(level + 1);
            let this = &mut coarse[level];
            for dz in 0..this.nz {
                for dx in 0..this.nx {
                    let (ix, iz) = (this.ix0 + dx, this.iz0 + dz);
                    let mut worst = this.bounds[(dz * this.nx + dx) as usize].2;
                    for k in 0..4 {
                        let (cx, cz) = (2 * ix + (k & 1), 2 * iz + (k >> 1));
                        if !self.shapes[level + 1].present(cx, cz) {
                            continue;
                        }
                        let child = match fine[0].get(cx, cz) {
                            Some(b) => b.2,
                            None => self.far_bounds(level + 1, cx, cz).2,
                        };
                        worst = worst.max(child);
                    }
                    this.bounds[(dz * this.nx + dx) as usize].2 = worst;
                }
            }
        }
        Ok(near)
    }

    /// Bounds of a square that does not touch `R`: the pyramid's on the terrain's levels; on
    /// the detail's, the fan is the surface (error 0) and its range is its vertices'.
    fn far_bounds(&self, level: usize, ix: u32, iz: u32) -> (f64, f64, f32) {
        if level < self.base_levels {
            let b = self.base.pyramid.node(level, ix, iz);
            return (f64::from(b.min_y), f64::from(b.max_y), b.error);
        }
        let (vertices, ..) = self.fan(level, ix, iz);
        let lo = vertices.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vertices.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = self.world(lo, hi);
        (lo, hi, 0.0)
    }

    /// Smallest and largest raw value of the terrain and the detail.
    fn raw_range(&self) -> (f64, f64) {
        self.range
    }
}

/// `a + b` rounded up.
fn round_sum(a: f32, b: f32) -> f32 {
    super::records::round_up(f64::from(a) + f64::from(b))
}

impl Source for DetailSource<'_> {
    fn shapes(&self) -> Vec<LevelShape> {
        self.shapes.clone()
    }

    fn bounds(&self, level: usize, ix: u32, iz: u32) -> (f64, f64, f32) {
        self.near[level]
            .get(ix, iz)
            .unwrap_or_else(|| self.far_bounds(level, ix, iz))
    }

    fn raw(&self, col: u32, row: u32) -> f64 {
        self.surface(col, row)
    }

    fn codes(&self) -> HeightCodes {
        let (lo, hi) = self.raw_range();
        // Between terrain samples the surface takes multiples of 2^-k raw units.
        let unit = 1.0 / f64::from(1u32 << self.detail.shift);
        HeightCodes::new(
            lo,
            hi,
            self.scale,
            self.offset,
            self.integer.then_some(unit),
        )
    }

    fn box_codes(&self) -> HeightCodes {
        let (lo, hi) = self.raw_range();
        HeightCodes::new(lo, hi, self.scale, self.offset, None)
    }

    fn drawn(&self, raw: f64) -> f32 {
        (raw * self.scale + self.offset) as f32
    }

    fn world_error(&self, raw: f64) -> f32 {
        if raw == 0.0 {
            0.0
        } else {
            self.base.world_error(raw + self.slack)
        }
    }

    fn largest_height(&self) -> f64 {
        let (lo, hi) = self.raw_range();
        let (a, b) = self.world(lo, hi);
        a.abs().max(b.abs())
    }

    fn cell_size(&self) -> f32 {
        self.detail.cell_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::lcg_values;

    /// Twice the signed area of `(a, b, c)`.
    fn area2(a: (f64, f64), b: (f64, f64), c: (f64, f64)) -> f64 {
        (b.0 - a.0) * (c.1 - a.1) - (b.1 - a.1) * (c.0 - a.0)
    }

    /// The fan of a square (corner `(x0, z0)`, `size` fine cells) at fine position `p`,
    /// from scratch: barycentric in the one of its 8 triangles (centre, corner, edge
    /// midpoint) that holds `p`.
    fn brute_fan(source: &DetailSource<'_>, x0: u32, z0: u32, size: u32, p: (u32, u32)) -> f64 {
        let half = f64::from(size / 2);
        let centre = (f64::from(x0) + half, f64::from(z0) + half);
        let at = |q: (f64, f64)| source.surface(q.0 as u32, q.1 as u32);
        let p = (f64::from(p.0), f64::from(p.1));
        for (dx, dz) in [(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)] {
            let corner = (centre.0 + dx * half, centre.1 + dz * half);
            for mid in [(corner.0, centre.1), (centre.0, corner.1)] {
                let total = area2(centre, corner, mid);
                let w = [
                    area2(p, corner, mid) / total,
                    area2(centre, p, mid) / total,
                    area2(centre, corner, p) / total,
                ];
                if w.iter().all(|&v| v >= -1e-12) {
                    return w[0] * at(centre) + w[1] * at(corner) + w[2] * at(mid);
                }
            }
        }
        unreachable!("a fan triangle holds every point of its square")
    }

    /// Per level and square (row-major over the level's grid): world min, max and the
    /// largest `|surface − fan|` over the square and its descendants, by visiting every
    /// fine position of every square.
    fn brute_bounds(source: &DetailSource<'_>) -> Vec<Vec<(f64, f64, f64)>> {
        let shapes = source.shapes();
        let mut out: Vec<Vec<(f64, f64, f64)>> = shapes
            .iter()
            .map(|s| {
                (0..s.nx * s.nz)
                    .map(|i| {
                        let (ix, iz) = (i % s.nx, i / s.nx);
                        let (x0, z0) = (ix * s.size, iz * s.size);
                        let (mut lo, mut hi, mut error) =
                            (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
                        for row in z0..=z0 + s.size {
                            for col in x0..=x0 + s.size {
                                let value = source.surface(col, row);
                                let (w, _) = source.world(value, value);
                                lo = lo.min(w);
                                hi = hi.max(w);
                                let fan = brute_fan(source, x0, z0, s.size, (col, row));
                                error = error.max((value - fan).abs() * source.scale.abs());
                            }
                        }
                        (lo, hi, error)
                    })
                    .collect()
            })
            .collect();
        for level in (0..shapes.len() - 1).rev() {
            let (coarse, fine) = out.split_at_mut(level + 1);
            let (s, next) = (shapes[level], shapes[level + 1]);
            for (i, square) in coarse[level].iter_mut().enumerate() {
                let (ix, iz) = (i as u32 % s.nx, i as u32 / s.nx);
                for k in 0..4 {
                    let (cx, cz) = (2 * ix + (k & 1), 2 * iz + (k >> 1));
                    if next.present(cx, cz) {
                        let child = fine[0][(cz * next.nx + cx) as usize].2;
                        square.2 = square.2.max(child);
                    }
                }
            }
        }
        out
    }

    /// Large squares' bounds (A5): with the limits of the exact paths lowered, every square
    /// of the terrain's levels near the footprint takes the large-square path (every detail
    /// sample and every terrain sample: still exact) or the pyramid fallback (an upper
    /// bound); all of them hold against a brute-force visit of every fine position, on a
    /// detail that replaces terrain samples with very different heights.
    #[test]
    fn large_square_bounds_hold_on_every_path() {
        let (w, h) = (33, 25);
        let noise = lcg_values((w * h) as usize, 11, 300);
        let terrain_raw = (0..w * h)
            .map(|i| 2000 + noise[i as usize] + 7 * (i % w) as u16)
            .collect();
        let terrain = Heightfield::new(w, h, Samples::U16(terrain_raw)).expect("valid terrain");
        let bumps = lcg_values(11 * 9, 12, 900);
        let detail_field =
            Heightfield::new(11, 9, Samples::U16(bumps.iter().map(|v| 100 + v).collect()))
                .expect("valid detail");
        let pyramid = Pyramid::build(&terrain);
        let k = 2;
        let cell = 0.25;
        // Fine origin (38, 45): off the terrain's samples, crossing several terrain squares.
        let detail = Detail::new(&terrain, &detail_field, (9.5, 11.25), cell).expect("placed");
        assert_eq!((detail.shift(), detail.origin()), (k, (38, 45)));
        let source = |exact: (u64, u64)| {
            DetailSource::with_thresholds(&terrain, &pyramid, detail, exact, Budget::UNLIMITED)
                .expect("a small detail")
        };
        let exhaustive = source((u64::MAX, 0));
        let brute = brute_bounds(&exhaustive);
        let samples = source((0, u64::MAX));
        let fallback = source((0, 0));
        let default = source((EXACT_POINTS, EXACT_SAMPLES));
        let shapes = exhaustive.shapes();
        let (mut large, mut looser) = (0, 0);
        for (level, s) in shapes.iter().enumerate() {
            for iz in 0..s.nz {
                for ix in 0..s.nx {
                    let (lo, hi, error) = brute[level][(iz * s.nx + ix) as usize];
                    let exact = exhaustive.bounds(level, ix, iz);
                    for (name, source) in [
                        ("exhaustive", &exhaustive),
                        ("detail and terrain samples", &samples),
                        ("pyramid fallback", &fallback),
                        ("default", &default),
                    ] {
                        let b = source.bounds(level, ix, iz);
                        let at = format!("{name}: level {level} ({ix}, {iz}): {b:?}");
                        assert!(b.0 <= lo && b.1 >= hi, "{at}, range {lo}..{hi}");
                        assert!(f64::from(b.2) >= error, "{at}, error {error}");
                    }
                    let near = exhaustive.near[level].get(ix, iz).is_some();
                    if near && level < exhaustive.base_levels {
                        large += 1;
                        // Visiting the samples is exact too, the pyramid's bound is not less.
                        assert_eq!(
                            samples.bounds(level, ix, iz).2,
                            exact.2,
                            "{level} {ix} {iz}"
                        );
                        looser += usize::from(fallback.bounds(level, ix, iz).2 > exact.2);
                    }
                }
            }
        }
        // Every level of the terrain's pyramid has squares near the footprint, and the
        // fallback was taken (it is looser somewhere).
        assert!(large >= exhaustive.base_levels, "{large} large squares");
        assert!(looser > 0, "the pyramid fallback never differed");
    }
}
