//! Erosion on one square level of the generator, in the map's units (the map is 1 wide;
//! heights are whatever the noise made them, mapped to metres only at the very end).
//!
//! Hydraulic erosion is a flow-routing scheme: a flood from the map edges finds the lake
//! each depression would hold and an order in which water only ever flows to cells already
//! visited; one walk in that order from the ridges down then carries water and sediment,
//! cuts by the stream-power law and deposits where the flow slackens ([`Eroder::erode`]).
//! Thermal erosion lets slopes above a talus limit slump ([`Eroder::slump`]).
//!
//! The flood and the walk run on one thread in a fixed order; every other step computes
//! each cell from the previous heights, in parallel. So the result never depends on the
//! thread count.

use rayon::prelude::*;

/// A cell the flood has not reached (cell indices stay below 16385², far from this).
const UNSEEN: u32 = u32::MAX;
/// End of a bucket's list.
const NONE: u32 = u32::MAX;

/// Height buckets of the flood queue. A bucket queue makes the flood linear in the cell
/// count where a binary heap costs a logarithm more (Barnes et al. 2014, "Priority-flood",
/// Computers & Geosciences 62). Within a bucket cells are taken last in, first out, which
/// keeps the flood among recently touched (cached) cells; a lake can then be overfilled
/// by at most one bucket, 1/65536 of the relief.
const BUCKETS: usize = 1 << 16;

/// Deepest cut of one step, as a fraction of a cell's drop to its lowest neighbour: the
/// explicit step can then never dig a cell below its outlet, whatever the time step.
const MAX_CUT: f32 = 0.5;

const SQRT_2: f32 = std::f32::consts::SQRT_2;
const INV_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;

/// The 8 neighbours: column step, row step, 1 / distance in cells.
const NEIGHBOURS: [(isize, isize, f32); 8] = [
    (-1, -1, INV_SQRT_2),
    (0, -1, 1.0),
    (1, -1, INV_SQRT_2),
    (-1, 0, 1.0),
    (1, 0, 1.0),
    (-1, 1, INV_SQRT_2),
    (0, 1, 1.0),
    (1, 1, INV_SQRT_2),
];

/// What the walk reads and writes per cell, packed so that a cell and its neighbours in
/// a row share cache lines: the walk goes from cell to cell in height order, all over
/// the map, so memory latency is its cost.
#[derive(Clone, Copy, Debug)]
struct Cell {
    /// The terrain.
    height: f32,
    /// Height of the water surface: the terrain, or the lake level over a depression.
    level: f32,
    /// Where the flood came from (a cell on the map edge: itself, an outlet). Water on a
    /// lake, which has no lower neighbour, flows this way.
    parent: u32,
    /// Drainage area in map units (the map is 1 × 1).
    area: f32,
    /// Sediment arriving from upstream, a volume in map units.
    sediment: f32,
}

/// Erosion buffers, reused from one step and level to the next.
#[derive(Debug, Default)]
pub(super) struct Eroder {
    side: usize,
    cells: Vec<Cell>,
    /// Cells by increasing water level: water only flows to earlier cells.
    order: Vec<u32>,
    /// Next cell in the same flood bucket.
    link: Vec<u32>,
    bucket_head: Vec<u32>,
    scratch: Vec<f32>,
}

impl Eroder {
    /// Floods `heights` (a `side × side` grid) from the map edges: finds the lake level of
    /// every depression (routing water across it instead of trapping it) and an order of
    /// the cells by water level.
    pub(super) fn route(&mut self, heights: &[f32], side: usize) {
        let n = side * side;
        debug_assert_eq!(heights.len(), n);
        self.side = side;
        self.cells.clear();
        self.cells
            .par_extend(heights.par_iter().map(|&height| Cell {
                height,
                level: height,
                parent: UNSEEN,
                area: 0.0,
                sediment: 0.0,
            }));
        self.order.clear();
        self.order.reserve(n);
        self.link.clear();
        self.link.resize(n, NONE);
        self.bucket_head.clear();
        self.bucket_head.resize(BUCKETS, NONE);

        let (lo, hi) = min_max(heights);
        let mut flood = Flood {
            cells: &mut self.cells,
            link: &mut self.link,
            heads: &mut self.bucket_head,
            buckets: Buckets::new(lo, hi),
            current: 0,
        };
        // The map edges are the outlets, their own parents.
        let last = side - 1;
        for col in 0..side {
            flood.push(col, col);
            flood.push(last * side + col, last * side + col);
        }
        for row in 1..last {
            flood.push(row * side, row * side);
            flood.push(row * side + last, row * side + last);
        }
        let s = side as isize;
        while let Some(i) = flood.pop() {
            self.order.push(i as u32);
            let level = flood.cells[i].level;
            let edge = flood.cells[i].parent as usize == i;
            let (col, row) = if edge {
                ((i % side) as isize, (i / side) as isize)
            } else {
                (1, 1)
            };
            for &(dc, dr, _) in &NEIGHBOURS {
                if edge {
                    let (c, r) = (col + dc, row + dr);
                    if c < 0 || r < 0 || c >= s || r >= s {
                        continue;
                    }
                }
                let j = (i as isize + dr * s + dc) as usize;
                if flood.cells[j].parent == UNSEEN {
                    // Below the level that reached it, a cell is under a lake.
                    flood.cells[j].level = flood.cells[j].level.max(level);
                    flood.push(j, i);
                }
            }
        }
        debug_assert_eq!(self.order.len(), n);

        // Buckets come out in order, cells within one in any order: sorting each bucket's
        // run by level (stably, so a lake keeps flood order and parents stay first) puts
        // every lower neighbour, and every parent, before the cells that drain to it.
        let buckets = Buckets::new(lo, hi);
        let bucket_of = |level: f32| buckets.of(level);
        let cells = &self.cells;
        let mut start = 0;
        while start < n {
            let bucket = bucket_of(cells[self.order[start] as usize].level);
            let mut end = start + 1;
            while end < n && bucket_of(cells[self.order[end] as usize].level) == bucket {
                end += 1;
            }
            self.order[start..end]
                .sort_by(|&a, &b| cells[a as usize].level.total_cmp(&cells[b as usize].level));
            start = end;
        }
    }

    /// One erosion step along the drainage of the last [`Eroder::route`], in one walk
    /// from the ridges down. Each cell, once everything upstream has reached it:
    /// - under a lake, takes in the sediment that fits below the lake level;
    /// - elsewhere is cut by the stream-power law `k_dt·√A·S` (S its steepest downhill
    ///   slope, at most [`MAX_CUT`] of its drop) and receives `deposition·Qs/A` of the
    ///   sediment load `Qs` passing through, so sediment settles where the flow slackens
    ///   (the ξ-q model of Davy & Lague 2009, "Fluvial erosion/transport equation of
    ///   landscape evolution models revisited", JGR 114);
    /// - passes its water and sediment on to all lower neighbours in proportion to their
    ///   slope (multiple flow directions: Quinn et al. 1991, Hydrological Processes 5).
    ///   Single-direction routing would cut every valley along one of eight directions.
    ///
    /// The walk updates heights in place. It reaches a cell's downhill neighbours, whose
    /// heights set the slope, after the cell (unless a lake stands above them), so slopes
    /// are those from before the step.
    pub(super) fn erode(&mut self, heights: &mut [f32], k_dt: f32, deposition: f32) {
        let side = self.side;
        debug_assert_eq!(heights.len(), side * side);
        let spacing = 1.0 / (side - 1) as f32;
        let inv_spacing = 1.0 / spacing;
        let own = spacing * spacing;
        let inv_own = 1.0 / own;
        self.cells.par_iter_mut().for_each(|c| {
            c.area = own;
            c.sediment = 0.0;
        });
        let cells = &mut self.cells;
        let s = side as isize;
        for &cell in self.order.iter().rev() {
            let i = cell as usize;
            let Cell {
                height: h,
                level,
                parent,
                area,
                sediment,
            } = cells[i];
            if parent as usize == i {
                continue; // the map edge: water and sediment leave the map
            }
            // Neighbours downhill are still to come; uphill ones only bound the deposit.
            let mut weights = [0.0f32; 8];
            let mut total = 0.0f32;
            let (mut slope, mut drop, mut room) = (0.0f32, 0.0f32, f32::INFINITY);
            for (k, &(dc, dr, inv_distance)) in NEIGHBOURS.iter().enumerate() {
                let neighbour = &cells[(i as isize + dr * s + dc) as usize];
                let flow = (level - neighbour.level) * inv_distance;
                if flow > 0.0 {
                    weights[k] = flow;
                    total += flow;
                }
                let d = h - neighbour.height;
                slope = slope.max(d * inv_distance);
                drop = drop.max(d);
                if d < 0.0 {
                    room = room.min(-d);
                }
            }
            let mut load = sediment;
            if level > h {
                let settle = load.min((level - h) * own);
                cells[i].height = h + settle * inv_own;
                load -= settle;
            } else {
                let cut = (k_dt * area.sqrt() * slope * inv_spacing).min(MAX_CUT * drop);
                // A deposit never raises a cell past half the way to its lowest uphill
                // neighbour, so it cannot dam the flow.
                let fill = (deposition * load / area).min(0.5 * room);
                cells[i].height = h - cut + fill;
                load += (cut - fill) * own;
            }
            if total > 0.0 {
                let (water, mud) = (area / total, load / total);
                for (k, &(dc, dr, _)) in NEIGHBOURS.iter().enumerate() {
                    if weights[k] > 0.0 {
                        let neighbour = &mut cells[(i as isize + dr * s + dc) as usize];
                        neighbour.area += weights[k] * water;
                        neighbour.sediment += weights[k] * mud;
                    }
                }
            } else {
                let p = &mut cells[parent as usize];
                p.area += area;
                p.sediment += load;
            }
        }
        heights
            .par_iter_mut()
            .zip(self.cells.par_iter())
            .for_each(|(h, c)| *h = c.height);
    }

    /// Water level of every cell after [`Eroder::route`] (tests).
    #[cfg(test)]
    pub(super) fn levels(&self) -> Vec<f32> {
        self.cells.iter().map(|c| c.level).collect()
    }

    /// Cells in walk order after [`Eroder::route`] (tests).
    #[cfg(test)]
    pub(super) fn order(&self) -> &[u32] {
        &self.order
    }

    /// Drainage area of every cell after [`Eroder::erode`] (tests).
    #[cfg(test)]
    pub(super) fn areas(&self) -> Vec<f32> {
        self.cells.iter().map(|c| c.area).collect()
    }

    /// One thermal step: across each of the 8 neighbour pairs, `rate` of the height
    /// difference beyond `talus` (height per map unit of distance) moves downhill; with
    /// `talus` 0 this is plain diffusion. Mass-conserving, stable for `rate` ≤ 1/16.
    pub(super) fn slump(&mut self, heights: &mut Vec<f32>, side: usize, talus: f32, rate: f32) {
        let spacing = 1.0 / (side - 1) as f32;
        let limits = Limits {
            straight: talus * spacing,
            diagonal: talus * spacing * SQRT_2,
        };
        self.scratch.clear();
        self.scratch.resize(side * side, 0.0);
        let source: &[f32] = heights;
        self.scratch
            .par_chunks_mut(side)
            .enumerate()
            .for_each(|(row, out)| {
                if row == 0 || row + 1 == side {
                    for (col, o) in out.iter_mut().enumerate() {
                        *o = slump_edge(source, side, col, row, &limits, rate);
                    }
                    return;
                }
                let above = &source[(row - 1) * side..row * side];
                let here = &source[row * side..(row + 1) * side];
                let below = &source[(row + 1) * side..(row + 2) * side];
                out[0] = slump_edge(source, side, 0, row, &limits, rate);
                out[side - 1] = slump_edge(source, side, side - 1, row, &limits, rate);
                for col in 1..side - 1 {
                    let h = here[col];
                    let straight = excess(here[col - 1] - h, limits.straight)
                        + excess(here[col + 1] - h, limits.straight)
                        + excess(above[col] - h, limits.straight)
                        + excess(below[col] - h, limits.straight);
                    let diagonal = excess(above[col - 1] - h, limits.diagonal)
                        + excess(above[col + 1] - h, limits.diagonal)
                        + excess(below[col - 1] - h, limits.diagonal)
                        + excess(below[col + 1] - h, limits.diagonal);
                    out[col] = h + rate * (straight + diagonal);
                }
            });
        std::mem::swap(heights, &mut self.scratch);
    }
}

/// A monotone map from water level to flood bucket: rounding preserves order, so a cell
/// never lands in a bucket below the one being emptied.
#[derive(Clone, Copy, Debug)]
struct Buckets {
    lo: f32,
    scale: f32,
}

impl Buckets {
    fn new(lo: f32, hi: f32) -> Self {
        let scale = if hi > lo {
            (BUCKETS - 1) as f32 / (hi - lo)
        } else {
            0.0
        };
        Self { lo, scale }
    }

    #[inline]
    fn of(&self, level: f32) -> usize {
        (((level - self.lo) * self.scale) as usize).min(BUCKETS - 1)
    }
}

/// The flood's bucket queue: one singly linked list per bucket, taken last in, first out.
struct Flood<'a> {
    cells: &'a mut [Cell],
    link: &'a mut [u32],
    heads: &'a mut [u32],
    buckets: Buckets,
    current: usize,
}

impl Flood<'_> {
    #[inline]
    fn push(&mut self, cell: usize, parent: usize) {
        let bucket = self.buckets.of(self.cells[cell].level);
        debug_assert!(bucket >= self.current);
        self.cells[cell].parent = parent as u32;
        self.link[cell] = self.heads[bucket];
        self.heads[bucket] = cell as u32;
    }

    #[inline]
    fn pop(&mut self) -> Option<usize> {
        while self.current < BUCKETS {
            let cell = self.heads[self.current];
            if cell != NONE {
                self.heads[self.current] = self.link[cell as usize];
                return Some(cell as usize);
            }
            self.current += 1;
        }
        None
    }
}

/// Height differences that stay put, straight and diagonal.
#[derive(Clone, Copy, Debug)]
struct Limits {
    straight: f32,
    diagonal: f32,
}

/// The part of a height difference beyond `±limit` (0 within it), signed.
#[inline]
fn excess(diff: f32, limit: f32) -> f32 {
    (diff - limit).max(0.0) + (diff + limit).min(0.0)
}

/// [`Eroder::slump`] for a cell on the map edge, where some neighbours are missing.
fn slump_edge(
    source: &[f32],
    side: usize,
    col: usize,
    row: usize,
    limits: &Limits,
    rate: f32,
) -> f32 {
    let h = source[row * side + col];
    let mut flow = 0.0f32;
    for &(dc, dr, _) in &NEIGHBOURS {
        let (c, r) = (col as isize + dc, row as isize + dr);
        if c < 0 || r < 0 || c >= side as isize || r >= side as isize {
            continue;
        }
        let limit = if dc == 0 || dr == 0 {
            limits.straight
        } else {
            limits.diagonal
        };
        flow += excess(source[r as usize * side + c as usize] - h, limit);
    }
    h + rate * flow
}

/// Smallest and largest value (exact and order-independent, so parallel is safe).
pub(super) fn min_max(values: &[f32]) -> (f32, f32) {
    values
        .par_iter()
        .fold(
            || (f32::INFINITY, f32::NEG_INFINITY),
            |(lo, hi), &v| (lo.min(v), hi.max(v)),
        )
        .reduce(
            || (f32::INFINITY, f32::NEG_INFINITY),
            |a, b| (a.0.min(b.0), a.1.max(b.1)),
        )
}
