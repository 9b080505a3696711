//! Algorithm Q's [`Pyramid`] of an imported terrain, without its finest level in memory
//! (issue 9; step 5 of docs/ADAPTIVE_PAGING.md): what algorithm A's build reads to build
//! its tree from an imported directory.
//!
//! A node no larger than a tile lies inside one level-0 tile (both are aligned powers of
//! two), and its bounds read only its own samples, padding included (the tiles are padded
//! by repetition as the pyramid pads): so a pyramid of that tile gives the whole pyramid's
//! bounds once its `f32` rounding slack is the whole terrain's
//! ([`Pyramid::build_for_piece`]). Such pyramids are built when asked and kept up to a
//! memory budget.
//!
//! The nodes larger than a tile (the *top*) are computed once, by two passes over the
//! level-0 tiles: the first gives the terrain's raw range, the samples at the tiles'
//! corners and the data's last row and column; the second each tile's root bounds, and
//! compares every sample with the fan of each of its top ancestors (their nine vertices lie
//! at tile corners). The padding beyond the tiles repeats the last row or column, so along
//! each of its columns (rows) only the ends and the fan's knots are compared, as the
//! pyramid's own kernel does: the cost follows the data, not the padded square (a strip
//! 2^22 samples long is padded to 2^44). Then, as the pyramid does, a node's error is made
//! the largest of its own and its children's, and its height range is its stored
//! children's.
//!
//! For 16-bit sources every value is exact, so every node's bounds are the whole pyramid's,
//! bit for bit. For `f32` sources they are upper bounds within the same rounding slack, and
//! equal to the whole pyramid's in every case the tests try; they may differ in the last
//! rounding, because the pyramid picks its error kernel's scan by how many nodes a level
//! has along x, which differs between a tile and the whole terrain.

use super::{StandIn, TileError, TiledTerrain};
use crate::heightfield::Heightfield;
use crate::pyramid::{NodeBounds, Pyramid, level_nodes, own_error_to_world};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Bounds before any sample is seen.
const EMPTY: NodeBounds = NodeBounds {
    min_y: f32::INFINITY,
    max_y: f32::NEG_INFINITY,
    error: 0.0,
};

/// Bytes of tile pyramids (samples and nodes) kept for [`TiledPyramid::node`]; past it the
/// least recently used quarter goes. A 256-cell tile counts about 460 KB (4 bytes a
/// sample, 197 KB of nodes), so the Grand Canyon's 128 fit and are each built once.
const KEPT_BYTES: usize = 256 << 20;

/// Identities of the pyramids built so far.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// One level of the quadtree: node size in cells and the stored nodes along x and z.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    size: u32,
    nx: u32,
    nz: u32,
}

impl Shape {
    /// Row-major index of node `(ix, iz)` (in `usize`: a level may hold more than 2^32).
    fn index(&self, ix: u32, iz: u32) -> usize {
        iz as usize * self.nx as usize + ix as usize
    }
}

/// A level-0 tile as a heightfield of `(N + 1)²` samples and its pyramid.
#[derive(Debug)]
struct TilePyramid {
    tile: (u32, u32),
    field: Heightfield,
    pyramid: Pyramid,
}

/// A kept tile pyramid and the use count at its last use.
type KeptTile = (Arc<TilePyramid>, AtomicU64);

/// The pyramid of an imported terrain, its nodes no larger than a tile built on demand.
#[derive(Debug)]
pub struct TiledPyramid {
    terrain: TiledTerrain,
    shapes: Vec<Shape>,
    /// Bounds of the nodes larger than a tile, per level from the root, row-major.
    top: Vec<Vec<NodeBounds>>,
    raw_range: (f32, f32),
    /// `max|raw|` of the terrain: the tile pyramids' `f32` rounding slack.
    max_abs: f64,
    tiles: KeptTiles,
    /// This pyramid among all built in the process (for the threads' last tiles).
    id: u64,
    stand_ins: StandIns,
}

/// Tile pyramids kept for [`TiledPyramid::node`] up to [`KEPT_BYTES`], the least recently
/// used going first; the second pass of [`TiledPyramid::build`] fills it, so a terrain
/// whose tiles fit builds each tile's pyramid once.
#[derive(Debug, Default)]
struct KeptTiles {
    map: RwLock<HashMap<(u32, u32), KeptTile>>,
    /// Uses so far (the clock of the least recently used).
    uses: AtomicU64,
    /// Tile pyramids built so far.
    built: AtomicU64,
}

impl KeptTiles {
    /// The kept pyramid of tile `key`, marked used.
    fn get(&self, key: (u32, u32)) -> Option<Arc<TilePyramid>> {
        let now = self.uses.fetch_add(1, Ordering::Relaxed);
        let kept = self.map.read().unwrap_or_else(|e| e.into_inner());
        let (tile, used) = kept.get(&key)?;
        used.store(now, Ordering::Relaxed);
        Some(tile.clone())
    }

    /// Builds the pyramid of level-0 tile `key` (its slack from `max_abs`) and keeps it.
    fn build(
        &self,
        terrain: &TiledTerrain,
        stand_ins: &StandIns,
        key: (u32, u32),
        max_abs: f64,
    ) -> Result<Arc<TilePyramid>, TileError> {
        // Built outside the lock: other threads go on with their tiles meanwhile.
        let field = stand_ins.tile(terrain, key.0, key.1)?;
        let pyramid = Pyramid::build_for_piece(&field, max_abs);
        self.built.fetch_add(1, Ordering::Relaxed);
        let bytes = field.samples().len() * 4 + pyramid.memory_bytes();
        let tile = Arc::new(TilePyramid {
            tile: key,
            field,
            pyramid,
        });
        let now = self.uses.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.map.write().unwrap_or_else(|e| e.into_inner());
        if (kept.len() + 1) * bytes > KEPT_BYTES {
            let mut ages: Vec<u64> = kept
                .values()
                .map(|(_, u)| u.load(Ordering::Relaxed))
                .collect();
            let quarter = ages.len() / 4;
            let (_, &mut oldest, _) = ages.select_nth_unstable(quarter);
            kept.retain(|_, (_, used)| used.load(Ordering::Relaxed) > oldest);
        }
        kept.insert(key, (tile.clone(), AtomicU64::new(now)));
        Ok(tile)
    }
}

impl TiledPyramid {
    /// Builds the top of the pyramid of `terrain` (two passes over its level-0 tiles, in
    /// parallel). A tile that cannot be read is stood in for by the coarser level
    /// ([`TiledPyramid::stand_ins`]); fails when no level can stand in.
    pub fn build(terrain: &TiledTerrain) -> Result<TiledPyramid, TileError> {
        let header = terrain.header();
        let (width, height) = (header.width, header.height);
        let shapes: Vec<Shape> = level_nodes(width, height)
            .map(|(size, nx, nz)| Shape { size, nx, nz })
            .collect();
        let n = header.tile_cells;
        let top_levels = shapes.iter().take_while(|s| s.size > n).count();
        let grid = header.levels[0];
        let (tiles_x, tiles_z) = (grid.tiles_x, grid.tiles_y);
        let stand_ins = StandIns::default();

        // Pass 1: the raw range and the samples at the tiles' corners.
        let keys: Vec<(u32, u32)> = (0..tiles_z)
            .flat_map(|tz| (0..tiles_x).map(move |tx| (tx, tz)))
            .collect();
        // Per tile: its range, its corners, and its part of the last row and column.
        type First = ((f32, f32), [f32; 4], Vec<f32>, Vec<f32>);
        let first: Vec<First> = keys
            .par_iter()
            .map(|&(tx, tz)| {
                let field = stand_ins.tile(terrain, tx, tz)?;
                let corners = [(0, 0), (n, 0), (0, n), (n, n)].map(|(i, j)| field.raw(i, j));
                let (last_x, last_z) = (width - 1 - tx * n, height - 1 - tz * n);
                let row = if tz + 1 == tiles_z {
                    (0..=n.min(last_x)).map(|i| field.raw(i, last_z)).collect()
                } else {
                    Vec::new()
                };
                let column = if tx + 1 == tiles_x {
                    (0..=n.min(last_z)).map(|j| field.raw(last_x, j)).collect()
                } else {
                    Vec::new()
                };
                Ok((field.raw_range(), corners, row, column))
            })
            .collect::<Result<_, TileError>>()?;
        let raw_range = first
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |r, f| {
                (r.0.min(f.0.0), r.1.max(f.0.1))
            });
        let max_abs = f64::from(raw_range.0.abs().max(raw_range.1.abs()));
        let stride = tiles_x as usize + 1;
        let mut corners = vec![0.0f32; stride * (tiles_z as usize + 1)];
        // The last row and column of the data, which the padding repeats.
        let mut last_row = vec![0.0f32; width as usize];
        let mut last_column = vec![0.0f32; height as usize];
        for (&(tx, tz), (_, c, row, column)) in keys.iter().zip(&first) {
            for (k, (dx, dz)) in [(0, 0), (1, 0), (0, 1), (1, 1)].into_iter().enumerate() {
                corners[(tz + dz) as usize * stride + (tx + dx) as usize] = c[k];
            }
            let (x0, z0) = ((tx * n) as usize, (tz * n) as usize);
            last_row[x0..x0 + row.len()].copy_from_slice(row);
            last_column[z0..z0 + column.len()].copy_from_slice(column);
        }
        // Corner (i, j) of the tile grid; beyond the data, the border's (the padding).
        let corner = |i: u32, j: u32| {
            f64::from(corners[j.min(tiles_z) as usize * stride + i.min(tiles_x) as usize])
        };

        // Pass 2, over the tiles: each tile's pyramid (kept for the nodes asked later) and
        // its root's bounds, and the top nodes' own errors over the tiles' samples (a
        // border tile's padding included).
        let kept = KeptTiles::default();
        let mut top: Vec<Vec<NodeBounds>> = shapes[..top_levels]
            .iter()
            .map(|s| vec![EMPTY; s.nx as usize * s.nz as usize])
            .collect();
        if top_levels > 0 {
            let integer = !matches!(header.sample_type, super::SampleType::F32);
            let scale = terrain.level_mapping(0).height_scale;
            let to_world = |worst: f64, size: u32| {
                own_error_to_world(worst / f64::from(size / 2), integer, max_abs, scale)
            };
            type Square = (NodeBounds, Vec<(usize, usize, f32)>);
            let second: Vec<Square> = keys
                .par_iter()
                .map(|&(sx, sz)| {
                    let tile = kept.build(terrain, &stand_ins, (sx, sz), max_abs)?;
                    let root = tile.pyramid.node(0, 0, 0);
                    let raw = |i: u32, j: u32| f64::from(tile.field.raw(i, j));
                    let mut own = Vec::with_capacity(top_levels);
                    for (level, shape) in shapes[..top_levels].iter().enumerate() {
                        let per = shape.size / n;
                        let (ix, iz) = (sx / per, sz / per);
                        let fan = Fan::new(per, n, ix, iz, &corner);
                        let worst = fan.worst((sx % per) * n, (sz % per) * n, &raw);
                        own.push((level, shape.index(ix, iz), to_world(worst, shape.size)));
                    }
                    Ok((root, own))
                })
                .collect::<Result<_, TileError>>()?;
            let mut roots = vec![EMPTY; keys.len()];
            for (&(sx, sz), (root, own)) in keys.iter().zip(second) {
                roots[sz as usize * tiles_x as usize + sx as usize] = root;
                for (level, i, error) in own {
                    top[level][i].error = top[level][i].error.max(error);
                }
            }
            // The padding beyond the tiles, where the node reaches past the data: the
            // last row (or column) repeated, so along each column (or row) only the
            // interval's ends and the fan's knots can hold the largest difference.
            for (level, shape) in shapes[..top_levels].iter().enumerate() {
                let per = shape.size / n;
                for iz in 0..shape.nz {
                    for ix in 0..shape.nx {
                        let fan = Fan::new(per, n, ix, iz, &corner);
                        let origin = (ix * shape.size, iz * shape.size);
                        let worst = fan.worst_in_padding(origin, &last_row, &last_column);
                        let node = &mut top[level][shape.index(ix, iz)];
                        node.error = node.error.max(to_world(worst, shape.size));
                    }
                }
            }
            // Height ranges from the stored children, errors made monotone, finest first.
            for level in (0..top_levels).rev() {
                let (shape, below) = (shapes[level], shapes[level + 1]);
                for iz in 0..shape.nz {
                    for ix in 0..shape.nx {
                        let mut node = top[level][shape.index(ix, iz)];
                        for (dx, dz) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                            let (cx, cz) = (2 * ix + dx, 2 * iz + dz);
                            if cx >= below.nx || cz >= below.nz {
                                continue;
                            }
                            let i = below.index(cx, cz);
                            let child = if level + 1 < top_levels {
                                top[level + 1][i]
                            } else {
                                roots[i]
                            };
                            node.min_y = node.min_y.min(child.min_y);
                            node.max_y = node.max_y.max(child.max_y);
                            node.error = node.error.max(child.error);
                        }
                        top[level][shape.index(ix, iz)] = node;
                    }
                }
            }
        }
        Ok(TiledPyramid {
            terrain: terrain.clone(),
            shapes,
            top,
            raw_range,
            max_abs,
            tiles: kept,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            stand_ins,
        })
    }

    /// Number of levels: level 0 is the root, the last the 3 × 3 nodes (as [`Pyramid`]).
    pub fn levels(&self) -> usize {
        self.shapes.len()
    }

    /// The first level whose nodes each lie within one level-0 tile: from there down, a
    /// node's bounds come from its tile's pyramid, so visiting the nodes tile by tile
    /// builds each tile's pyramid once.
    pub fn tile_level(&self) -> usize {
        self.top.len()
    }

    /// Cells per side of a node at `level`.
    pub fn node_size(&self, level: usize) -> u32 {
        self.shapes[level].size
    }

    /// Number of stored nodes along x and z at `level`.
    pub fn nodes(&self, level: usize) -> (u32, u32) {
        (self.shapes[level].nx, self.shapes[level].nz)
    }

    /// The smallest and largest raw sample of the terrain.
    pub fn raw_range(&self) -> (f32, f32) {
        self.raw_range
    }

    /// The level-0 tiles that could not be read so far, each once with what stood in for
    /// it (as [`TiledTerrain::to_heightfield_standing_in`] reports them); every bound
    /// holds against the stood-in samples.
    pub fn stand_ins(&self) -> Vec<StandIn> {
        let kept = self.stand_ins.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = kept.clone();
        // Found by parallel passes: in a fixed order.
        all.sort_by(|a, b| (a.level, &a.fault).cmp(&(b.level, &b.fault)));
        all
    }

    /// The terrain.
    pub fn terrain(&self) -> &TiledTerrain {
        &self.terrain
    }

    /// Bounds of a stored node (as [`Pyramid::node`]); for a node no larger than a tile,
    /// its tile is read (or stood in for) unless its pyramid is kept.
    pub fn node(&self, level: usize, ix: u32, iz: u32) -> Result<NodeBounds, TileError> {
        if let Some(top) = self.top.get(level) {
            return Ok(top[self.shapes[level].index(ix, iz)]);
        }
        let n = self.terrain.header().tile_cells;
        let size = self.shapes[level].size;
        let (x, z) = (ix * size, iz * size);
        let local = (n / size).trailing_zeros() as usize;
        self.with_tile((x / n, z / n), |tile| {
            tile.pyramid.node(local, (x % n) / size, (z % n) / size)
        })
    }

    /// Raw value of a level-0 sample, the border repeated beyond the data.
    pub fn raw_clamped(&self, col: u32, row: u32) -> Result<f32, TileError> {
        let header = self.terrain.header();
        let (col, row) = (col.min(header.width - 1), row.min(header.height - 1));
        let n = header.tile_cells;
        // A sample on a tile's last row or column is also the next tile's first: take the
        // tile it lies in (or the last one).
        let grid = header.levels[0];
        let (tx, tz) = (
            (col / n).min(grid.tiles_x - 1),
            (row / n).min(grid.tiles_y - 1),
        );
        self.with_tile((tx, tz), |tile| tile.field.raw(col - tx * n, row - tz * n))
    }

    /// `f` of the pyramid of a level-0 tile: the one this thread used last, a kept one, or
    /// a new one. The build asks for neighbouring samples and nodes millions of times, so
    /// a thread asking again for its last tile touches no lock and no shared counter.
    fn with_tile<R>(
        &self,
        key: (u32, u32),
        f: impl FnOnce(&TilePyramid) -> R,
    ) -> Result<R, TileError> {
        thread_local! {
            // Weak: a thread does not keep a tile alive past its pyramid or its eviction.
            static LAST: std::cell::RefCell<Option<(u64, std::sync::Weak<TilePyramid>)>> =
                const { std::cell::RefCell::new(None) };
        }
        let last = LAST.with_borrow(|last| match last {
            Some((id, tile)) if *id == self.id => tile.upgrade().filter(|t| t.tile == key),
            _ => None,
        });
        if let Some(tile) = last {
            return Ok(f(&tile));
        }
        let tile = self.tile(key)?;
        LAST.with_borrow_mut(|last| *last = Some((self.id, Arc::downgrade(&tile))));
        Ok(f(&tile))
    }

    /// The kept pyramid of a level-0 tile, or a new one.
    fn tile(&self, key: (u32, u32)) -> Result<Arc<TilePyramid>, TileError> {
        match self.tiles.get(key) {
            Some(tile) => Ok(tile),
            None => self
                .tiles
                .build(&self.terrain, &self.stand_ins, key, self.max_abs),
        }
    }

    /// Tile pyramids built so far (each tile once while they fit in the memory kept).
    pub fn pyramids_built(&self) -> u64 {
        self.tiles.built.load(Ordering::Relaxed)
    }
}

/// The level-0 tiles as the pyramid reads them: through [`TiledTerrain::tile_standing_in`],
/// each tile that stood in kept once.
#[derive(Debug, Default)]
struct StandIns(Mutex<Vec<StandIn>>);

impl StandIns {
    /// Level-0 tile `(tx, tz)` as a heightfield of `(N + 1)²` samples.
    fn tile(&self, terrain: &TiledTerrain, tx: u32, tz: u32) -> Result<Heightfield, TileError> {
        let (field, stood_in) = terrain.tile_standing_in(0, tx, tz)?;
        if !stood_in.is_empty() {
            let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
            for s in stood_in {
                // A tile's fault names its file: one entry per tile.
                if !kept.iter().any(|k| k.fault == s.fault) {
                    kept.push(s);
                }
            }
        }
        Ok(field)
    }
}

/// The 3 × 3 fan of a top node, its vertices' raw heights read from the tile corners.
struct Fan {
    /// Cells per node side, in tiles, and cells per tile.
    per: u32,
    cells: u32,
    /// Raw heights: `v[j][i]` at `(i, j) · half` from the node's corner.
    v: [[f64; 3]; 3],
}

impl Fan {
    fn new(per: u32, cells: u32, ix: u32, iz: u32, corner: &impl Fn(u32, u32) -> f64) -> Fan {
        let half = per / 2;
        let (x0, z0) = (ix * per, iz * per);
        let v = [0, 1, 2].map(|j| [0, 1, 2].map(|i| corner(x0 + i * half, z0 + j * half)));
        Fan { per, cells, v }
    }

    /// `|half · h − half · S|` at offset `(u, v)` from the centre (cells), `h` the raw
    /// height there, `half` in cells.
    #[inline(always)]
    fn scaled_error(&self, half: i64, u: i64, v: i64, h: f64) -> f64 {
        let (a, b) = (u.abs(), v.abs());
        // The fan triangle holding (u, v): the centre, the midpoint of the side the larger
        // offset points to, and the corner between.
        let (su, sv) = ((1 + u.signum()) as usize, (1 + v.signum()) as usize);
        let (mid, k, (a, b)) = if a >= b {
            (self.v[1][su], self.v[sv][su], (a, b))
        } else {
            (self.v[sv][1], self.v[sv][su], (b, a))
        };
        let scaled = (half - a) as f64 * self.v[1][1] + (a - b) as f64 * mid + b as f64 * k;
        (h * half as f64 - scaled).abs()
    }

    /// The largest `|half · h − half · S|` over the node's samples beyond the data (the
    /// node's square from `origin`, in cells), whose heights repeat `last_row` (below the
    /// data) or `last_column` (beside it): along each column below (row beside) `h` is
    /// constant and `S` linear between the knots `v = 0, ±u` (`u = 0, ±v`), so only those
    /// and the interval's ends are evaluated.
    fn worst_in_padding(&self, origin: (u32, u32), last_row: &[f32], last_column: &[f32]) -> f64 {
        let (width, height) = (last_row.len() as i64, last_column.len() as i64);
        let half = i64::from(self.per / 2) * i64::from(self.cells);
        let (x0, z0) = (i64::from(origin.0), i64::from(origin.1));
        let (xc, zc) = (x0 + half, z0 + half);
        let (x1, z1) = (x0 + 2 * half, z0 + 2 * half);
        let mut worst = 0.0f64;
        // Ends and knots of an interval [lo, hi] around the centre `c` for offset `d`.
        let stops = |lo: i64, hi: i64, c: i64, d: i64| {
            [lo, hi, c, c - d.abs(), c + d.abs()]
                .into_iter()
                .filter(move |&p| lo <= p && p <= hi)
        };
        if z1 >= height {
            let lo = z0.max(height - 1);
            for x in x0..=x1 {
                let h = f64::from(last_row[x.min(width - 1) as usize]);
                for z in stops(lo, z1, zc, x - xc) {
                    worst = worst.max(self.scaled_error(half, x - xc, z - zc, h));
                }
            }
        }
        if x1 >= width {
            let lo = x0.max(width - 1);
            for z in z0..=z1.min(height - 1) {
                let h = f64::from(last_column[z as usize]);
                for x in stops(lo, x1, xc, z - zc) {
                    worst = worst.max(self.scaled_error(half, x - xc, z - zc, h));
                }
            }
        }
        worst
    }

    /// The largest `|half · h − half · S|` over the samples `(ox + i, oz + j)`,
    /// `i, j ∈ 0..=n`, of the node's square (cells from its corner), `raw(i, j)` their
    /// heights. Exact for integer heights (every term is an integer below 2^53).
    fn worst(&self, ox: u32, oz: u32, raw: &impl Fn(u32, u32) -> f64) -> f64 {
        let n = self.cells;
        let half = i64::from(self.per / 2) * i64::from(n);
        let mut worst = 0.0f64;
        for j in 0..=n {
            let v = i64::from(oz + j) - half;
            for i in 0..=n {
                let u = i64::from(ox + i) - half;
                worst = worst.max(self.scaled_error(half, u, v, raw(i, j)));
            }
        }
        worst
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heightfield::{Samples, WorldMapping};
    use crate::tiles::{ImportOptions, import};

    /// Rough relief: a slope with random spikes on a quarter of the samples (a hash of
    /// the position), in every sample type.
    fn field(width: u32, height: u32, kind: u32) -> Heightfield {
        let value = |i: u32| {
            let mut h = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(kind);
            h ^= h >> 29;
            h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            h ^= h >> 32;
            let (x, z) = (i % width, i / width);
            let slope = (x * 3 + z * 2) as f32;
            slope + if h % 4 == 0 { (h % 997) as f32 } else { 0.0 }
        };
        let n = width * height;
        let samples = match kind {
            0 => Samples::U16((0..n).map(|i| value(i) as u16).collect()),
            1 => Samples::I16((0..n).map(|i| value(i) as i16 - 900).collect()),
            _ => Samples::F32((0..n).map(|i| value(i) * 0.37 - 55.5).collect()),
        };
        let mapping = WorldMapping {
            cell_size: 3.0,
            height_scale: if kind == 1 { -0.5 } else { 0.25 },
            height_offset: 10.0,
        };
        Heightfield::new(width, height, samples)
            .and_then(|f| f.with_mapping(mapping))
            .expect("a valid field")
    }

    /// Checks every node of `field`'s pyramid built from an import with `tile_cells`-cell
    /// tiles against the whole pyramid's.
    fn check_against_the_whole(field: &Heightfield, tile_cells: u32) -> usize {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let options = ImportOptions::with_tile_cells(tile_cells);
        import(field, dir.path(), &options, &|_, _| {}).expect("import");
        let terrain = TiledTerrain::open(dir.path()).expect("open");
        let tiled = TiledPyramid::build(&terrain).expect("the tiled pyramid");
        let whole = Pyramid::build(field);
        let (width, height) = (field.width(), field.height());
        let case = format!("{width} x {height}, tiles of {tile_cells}");
        assert_eq!(tiled.levels(), whole.levels(), "{case}");
        assert_eq!(tiled.raw_range(), field.raw_range(), "{case}");
        let mut top_nodes = 0;
        for level in 0..whole.levels() {
            assert_eq!(tiled.nodes(level), whole.nodes(level), "{case}");
            let (nx, nz) = whole.nodes(level);
            for iz in 0..nz {
                for ix in 0..nx {
                    let got = tiled.node(level, ix, iz).expect("a node");
                    let want = whole.node(level, ix, iz);
                    assert_eq!(got, want, "{case}: node ({ix}, {iz}) of level {level}");
                    top_nodes += usize::from(whole.node_size(level) > tile_cells);
                }
            }
        }
        for (col, row) in [(0, 0), (width - 1, height - 1), (width + 5, 2), (3, height)] {
            let want = field.raw_clamped(col, row);
            assert_eq!(
                tiled.raw_clamped(col, row).expect("a sample"),
                want,
                "{case}"
            );
        }
        top_nodes
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Any size, tile size and sample type: the pyramid built tile by tile is the
        /// whole pyramid.
        #[test]
        fn any_terrain_gives_the_whole_pyramid(
            width in 2u32..90,
            height in 2u32..90,
            tile_log in 1u32..6,
            kind in 0u32..3,
        ) {
            check_against_the_whole(&field(width, height, kind), 1 << tile_log);
        }
    }

    /// Every node of every level equals the whole pyramid's: the top from the two passes
    /// (padding beyond the data included), the others from their tile's pyramid.
    #[test]
    fn a_pyramid_built_tile_by_tile_is_the_whole_pyramid() {
        let sizes = [
            (33, 33, 4),
            (37, 21, 4),
            (65, 9, 8),
            (100, 70, 8),
            (17, 17, 16),
            (5, 40, 2),
            // Strips: the root's square is mostly padding (once the cost of the whole
            // padded square, 4 x per doubling of the long side).
            (1025, 3, 2),
            (3, 700, 4),
        ];
        for (width, height, tile_cells) in sizes {
            for kind in 0..3 {
                let field = field(width, height, kind);
                let top_nodes = check_against_the_whole(&field, tile_cells);
                let case = format!("{width} x {height}, tiles of {tile_cells}, kind {kind}");
                assert!(
                    top_nodes > 0 || width.max(height) <= tile_cells + 1,
                    "{case}"
                );
            }
        }
    }
}
