//! The built-in terrain without erosion, as a function of position only: for terrains too
//! large to generate whole (erosion is global, it needs the whole grid). Any sample is
//! computed alone from its grid position, so any window (an import's level-0 tiles, or a
//! coarser level's at its stride) is made by itself, and the terrain is never held.
//!
//! Same noise layers as [`super::generate`] for a seed (domain warp, ridged mask, dome,
//! octaves up to what the size resolves), with heights normalised by the sum's fixed bound
//! rather than the map's own range (which would need the whole map). Stored as `u16`
//! (`max_height / 65535` per step), as an imported DEM would be.
//!
//! The smooth layers are computed on a coarse grid and interpolated: the warp, the mask and
//! every octave at least [`COARSE_POINTS_PER_WAVE`] coarse points a wave are evaluated on
//! every [`ProceduralTerrain::stride`]-th sample (the generator too holds them on a small
//! grid), and each sample interpolates them (Catmull-Rom, separable: along the row, then
//! across rows), then adds the finer octaves itself. At 16385² that leaves 4 of 17 noise
//! layers a sample, which is what lets an import keep up with the disk. The interpolation
//! is the terrain's definition, not an approximation of another one: a sample computed
//! alone ([`ProceduralTerrain::raw`]) goes through the same operations as a window.

use super::noise::CellGradients;
use super::resample::catmull_rom;
use super::{
    DOME_HEIGHT, GenerateError, GenerateOptions, Layer, Layers, MAX_OCTAVES, OctaveRows,
    add_octave_row, dome, octave_basis, ridged_share, warp_offset,
};
use crate::heightfield::{Samples, WorldMapping};
use crate::tiles::{ImportSource, SampleType, TileError};
use std::ops::Range;

/// Most samples between two coarse-grid points (a power of two).
const MAX_STRIDE: u32 = 8;

/// Fewest coarse-grid points a wave of a layer that is interpolated: at 8, Catmull-Rom
/// keeps a sine within about 1 % of its amplitude, and the finer octaves keep the detail.
const COARSE_POINTS_PER_WAVE: f32 = 8.0;

/// The fields held on the coarse grid, by index: the domain warp's offsets along u and v,
/// the share of ridged mountains, and the sum of the coarse octaves.
const WARP_U: usize = 0;
const WARP_V: usize = 1;
const RIDGED: usize = 2;
const COARSE_SUM: usize = 3;
const FIELDS: usize = 4;

/// A position-only fractal terrain of `size × size` samples.
#[derive(Clone, Debug)]
pub struct ProceduralTerrain {
    layers: Layers,
    size: u32,
    /// Samples between two coarse-grid points.
    stride: u32,
    /// Octaves interpolated from the coarse grid, then those computed at every sample.
    coarse: Range<usize>,
    fine: Range<usize>,
    /// Catmull-Rom weights for a sample `k` samples past a coarse point, `k < stride`.
    weights: Vec<[f32; 4]>,
    /// Map units per sample: `1 / (size − 1)`.
    step: f32,
    /// Fixed bounds of the noise sum, mapped to 0 and 65535.
    low: f32,
    high: f32,
    mapping: WorldMapping,
}

/// Largest side of a procedural terrain: the tiled format's limit.
pub const MAX_PROCEDURAL_SIZE: u32 = crate::tiles::MAX_SIDE;

impl ProceduralTerrain {
    /// The terrain of `options` (its size may exceed [`super::MAX_SIZE`], up to
    /// [`MAX_PROCEDURAL_SIZE`]; erosion is ignored).
    pub fn new(options: &GenerateOptions) -> Result<ProceduralTerrain, GenerateError> {
        if options.size > MAX_PROCEDURAL_SIZE {
            return Err(GenerateError::TooLarge {
                size: options.size,
                limit: MAX_PROCEDURAL_SIZE,
            });
        }
        options
            .clone()
            .with_size(options.size.min(super::MAX_SIZE))
            .with_erosion(0.0)
            .validate()?;
        let layers = Layers::new(options.seed);
        let octaves = layers.octaves_for(options.size as usize, 0, true);
        // |noise| ≤ 1 and the ridged form lies in [−0.9, 1.1], so each octave's basis
        // lies in [−1, 1.1]; the dome in [0, DOME_HEIGHT]. (Interpolation may overshoot
        // these by a little; quantising clamps.)
        let amplitude: f32 = layers.octaves[octaves.clone()]
            .iter()
            .map(|layer| layer.amplitude)
            .sum();
        let cells = (options.size - 1) as f32;
        // Samples a wave of a layer of `frequency` cycles a map.
        let wave = |frequency: f32| cells / frequency;
        let fastest_aux = [layers.warp_u, layers.warp_v, [layers.mask; 2]]
            .iter()
            .flatten()
            .map(|layer| layer.frequency)
            .fold(0.0, f32::max);
        let mut stride = MAX_STRIDE;
        while stride > 1 && wave(fastest_aux) < COARSE_POINTS_PER_WAVE * stride as f32 {
            stride /= 2;
        }
        let split = octaves
            .clone()
            .find(|&k| wave(layers.octaves[k].frequency) < COARSE_POINTS_PER_WAVE * stride as f32)
            .unwrap_or(octaves.end);
        Ok(ProceduralTerrain {
            size: options.size,
            stride,
            coarse: octaves.start..split,
            fine: split..octaves.end,
            weights: (0..stride)
                .map(|k| catmull_rom(k as f32 / stride as f32))
                .collect(),
            step: 1.0 / cells,
            low: -amplitude,
            high: DOME_HEIGHT + 1.1 * amplitude,
            mapping: WorldMapping {
                cell_size: options.cell_size,
                height_scale: options.max_height / f32::from(u16::MAX),
                height_offset: 0.0,
            },
            layers,
        })
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    /// Samples between two points of the coarse grid (1 to 8; 8 from 257 samples up).
    pub fn stride(&self) -> u32 {
        self.stride
    }

    /// Noise layers computed at each sample, and those interpolated from the coarse grid
    /// (the warp's four and the mask included).
    #[cfg(test)]
    fn layers_per_sample(&self) -> (usize, usize) {
        (self.fine.len(), self.coarse.len() + 5)
    }

    /// Map position of coarse-grid line `i` (−1 and one past the last included).
    #[inline(always)]
    fn coarse_position(&self, i: i64) -> f32 {
        (i * i64::from(self.stride)) as f32 * self.step
    }

    /// The coarse fields at coarse-grid point `(i, j)`, computed alone.
    fn coarse_point(&self, i: i64, j: i64) -> [f32; FIELDS] {
        let (u, v) = (self.coarse_position(i), self.coarse_position(j));
        let layers = &self.layers;
        let warp =
            |pair: &[Layer; 2]| warp_offset(pair, pair[0].sample(u, v), pair[1].sample(u, v));
        let (warp_u, warp_v) = (warp(&layers.warp_u), warp(&layers.warp_v));
        let ridged = ridged_share(layers.mask.sample(u, v));
        let (pu, pv) = (u + warp_u, v + warp_v);
        let mut sum = 0.0;
        for layer in &layers.octaves[self.coarse.clone()] {
            sum += layer.amplitude * octave_basis(layer, layer.sample(pu, pv), ridged);
        }
        [warp_u, warp_v, ridged, sum]
    }

    /// The stored sample at grid position `(col, row)`, computed alone (windows are read
    /// row by row, the same values: [`ImportSource::read_window`]).
    pub fn raw(&self, col: u32, row: u32) -> u16 {
        let stride = i64::from(self.stride);
        let (i, j) = (i64::from(col) / stride, i64::from(row) / stride);
        let across = self.weights[(col % self.stride) as usize];
        let down = self.weights[(row % self.stride) as usize];
        // Along each of the four coarse rows around the sample, then across them.
        let rows: [[f32; FIELDS]; 4] = std::array::from_fn(|k| {
            let points: [[f32; FIELDS]; 4] =
                std::array::from_fn(|t| self.coarse_point(i - 1 + t as i64, j - 1 + k as i64));
            std::array::from_fn(|f| weighted(across, |t| points[t][f]))
        });
        let fields: [f32; FIELDS] = std::array::from_fn(|f| weighted(down, |k| rows[k][f]));
        let (u, v) = (col as f32 * self.step, row as f32 * self.step);
        let (pu, pv) = (u + fields[WARP_U], v + fields[WARP_V]);
        let ridged = fields[RIDGED].clamp(0.0, 1.0);
        let mut sum = DOME_HEIGHT * dome(u) * dome(v) + fields[COARSE_SUM];
        for layer in &self.layers.octaves[self.fine.clone()] {
            sum += layer.amplitude * octave_basis(layer, layer.sample(pu, pv), ridged);
        }
        self.quantise(sum)
    }

    /// The stored code of a noise sum: the nearest, halves up. (Not `f32::round`, a
    /// library call that keeps the loop out of vector lanes; the same for values ≥ 0.
    /// Nor `as i32`, whose saturation for NaN and out-of-range values LLVM does lane by
    /// lane: 9 % of a window's time.)
    #[inline(always)]
    #[allow(clippy::manual_clamp, reason = "`clamp` keeps a NaN; `max` makes it 0")]
    fn quantise(&self, sum: f32) -> u16 {
        // `max` before `min`: a NaN becomes 0, so the conversion below is sound.
        let unit = ((sum - self.low) / (self.high - self.low))
            .max(0.0)
            .min(1.0);
        let scaled = unit * f32::from(u16::MAX);
        // SAFETY: `scaled` is finite, in 0..=65535.
        #[allow(unsafe_code)]
        let whole: i32 = unsafe { scaled.to_int_unchecked() };
        (whole + i32::from(scaled - whole as f32 >= 0.5)) as u16
    }
}

/// `w₀·a₀ + w₁·a₁ + w₂·a₂ + w₃·a₃` in that order (a window and a sample alone must round
/// alike).
#[inline(always)]
fn weighted(w: [f32; 4], value: impl Fn(usize) -> f32) -> f32 {
    w[0] * value(0) + w[1] * value(1) + w[2] * value(2) + w[3] * value(3)
}

/// The coarse-grid lines one axis of a window needs: for each of its samples, the four
/// lines around it (from the one before its cell to two after) and its phase in the cell.
struct CoarseAxis {
    /// Coarse-grid line numbers, ascending, each once.
    lines: Vec<i64>,
    /// Per sample: where its first line is in `lines` (the other three follow it).
    first: Vec<usize>,
    /// Per sample: samples past the coarse line before it.
    phase: Vec<usize>,
    /// Leading samples, whole strides of them, that are consecutive from a coarse line:
    /// sample `k` has lines `k / stride ..` and phase `k % stride` (an import's tiles,
    /// whose columns are interpolated a stride at a time: [`along_row`]).
    aligned: usize,
    /// Samples between two coarse lines.
    stride: usize,
}

impl CoarseAxis {
    fn new(samples: &[u32], stride: u32) -> CoarseAxis {
        let cell = |s: u32| i64::from(s / stride);
        // In sample order (an import's windows are), each sample's lines start at or after
        // the previous one's, so those not past the last line listed are listed already.
        let mut ascending = std::borrow::Cow::Borrowed(samples);
        if !samples.is_sorted() {
            ascending.to_mut().sort_unstable();
        }
        let mut lines: Vec<i64> = Vec::with_capacity(samples.len() + 3);
        for line in ascending.iter().flat_map(|&s| cell(s) - 1..=cell(s) + 2) {
            if lines.last().is_none_or(|&last| line > last) {
                lines.push(line);
            }
        }
        let first: Vec<usize> = samples
            .iter()
            .map(|&s| {
                lines
                    .binary_search(&(cell(s) - 1))
                    .expect("every sample's lines are listed")
            })
            .collect();
        let phase: Vec<usize> = samples.iter().map(|&s| (s % stride) as usize).collect();
        let stride = stride as usize;
        let regular = first
            .iter()
            .zip(&phase)
            .enumerate()
            .take_while(|&(k, (&first, &phase))| first == k / stride && phase == k % stride)
            .count();
        CoarseAxis {
            lines,
            first,
            phase,
            aligned: regular - regular % stride,
            stride,
        }
    }
}

/// `out[k]`: the coarse `points` interpolated at sample `k` of `axis` with the Catmull-Rom
/// `weights` of each phase. Where the stride is [`MAX_STRIDE`], the aligned samples go a
/// stride at a time, with each corner's weights for the stride's phases in one array (in
/// vector lanes; by index, one at a time, they took 8 % of a window's time).
#[inline(always)]
fn along_row(axis: &CoarseAxis, weights: &[[f32; 4]], points: &[f32], out: &mut [f32]) {
    const STRIDE: usize = MAX_STRIDE as usize;
    debug_assert_eq!(weights.len(), axis.stride, "one weight row per phase");
    let mut done = 0;
    if axis.stride == STRIDE {
        let by_corner: [[f32; STRIDE]; 4] =
            std::array::from_fn(|t| std::array::from_fn(|k| weights[k][t]));
        for (segment, points) in out[..axis.aligned]
            .chunks_exact_mut(STRIDE)
            .zip(points.windows(4))
        {
            let p: &[f32; 4] = points.try_into().expect("four lines per sample");
            for (k, value) in segment.iter_mut().enumerate() {
                *value = weighted(std::array::from_fn(|t| by_corner[t][k]), |t| p[t]);
            }
        }
        done = axis.aligned;
    }
    for (k, value) in out.iter_mut().enumerate().skip(done) {
        let (first, phase) = (axis.first[k], axis.phase[k]);
        let p: &[f32; 4] = points[first..first + 4]
            .try_into()
            .expect("four lines per sample");
        *value = weighted(weights[phase], |t| p[t]);
    }
}

/// The last lattice cell of every noise layer, kept from row to row of a window.
struct LayerCells {
    warp_u: [CellGradients; 2],
    warp_v: [CellGradients; 2],
    mask: CellGradients,
    octaves: [CellGradients; MAX_OCTAVES],
}

impl LayerCells {
    const EMPTY: LayerCells = LayerCells {
        warp_u: [CellGradients::EMPTY; 2],
        warp_v: [CellGradients::EMPTY; 2],
        mask: CellGradients::EMPTY,
        octaves: [CellGradients::EMPTY; MAX_OCTAVES],
    };
}

/// A coarse row of a window: the coarse fields interpolated along coarse-grid row `line`
/// at each of the window's columns.
struct CoarseRow {
    line: i64,
    last_used: u64,
    fields: [Vec<f32>; FIELDS],
}

/// The coarse rows a window's rows interpolate between, a few at a time (the least
/// recently used go first), and the scratch that computes them.
struct CoarseRows {
    rows: Vec<CoarseRow>,
    uses: u64,
    /// Map u of each coarse column the window needs.
    us: Vec<f32>,
    vs: Vec<f32>,
    /// The fields at the coarse points of one row.
    points: [Vec<f32>; FIELDS],
    noise_a: Vec<f32>,
    noise_b: Vec<f32>,
    cells: LayerCells,
    octave_rows: OctaveRows,
}

const _: () = assert!(CoarseRows::KEPT >= 4, "a window row needs four coarse rows");

impl CoarseRows {
    /// Rows kept: at least the four a window row needs (then any order works); eight
    /// keep those of the next rows too when rows ascend.
    const KEPT: usize = 8;

    fn new(terrain: &ProceduralTerrain, columns: &CoarseAxis) -> CoarseRows {
        CoarseRows {
            rows: Vec::with_capacity(Self::KEPT),
            uses: 0,
            us: columns
                .lines
                .iter()
                .map(|&i| terrain.coarse_position(i))
                .collect(),
            vs: Vec::new(),
            points: Default::default(),
            noise_a: Vec::new(),
            noise_b: Vec::new(),
            cells: LayerCells::EMPTY,
            octave_rows: OctaveRows::default(),
        }
    }

    /// The coarse rows `lines` (four), computing those not kept.
    #[inline(always)]
    fn get(
        &mut self,
        terrain: &ProceduralTerrain,
        columns: &CoarseAxis,
        lines: &[i64],
    ) -> [&[Vec<f32>; FIELDS]; 4] {
        for &line in lines {
            self.uses += 1;
            let uses = self.uses;
            if let Some(row) = self.rows.iter_mut().find(|row| row.line == line) {
                row.last_used = uses;
                continue;
            }
            let mut fields = if self.rows.len() < Self::KEPT {
                Default::default()
            } else {
                let oldest = (0..self.rows.len())
                    .min_by_key(|&k| self.rows[k].last_used)
                    .expect("rows are kept");
                self.rows.swap_remove(oldest).fields
            };
            self.compute(terrain, columns, line, &mut fields);
            self.rows.push(CoarseRow {
                line,
                last_used: uses,
                fields,
            });
        }
        std::array::from_fn(|k| {
            &self
                .rows
                .iter()
                .find(|row| row.line == lines[k])
                .expect("just kept")
                .fields
        })
    }

    /// Coarse row `line`: the fields at its coarse points (row by row, what
    /// [`ProceduralTerrain::coarse_point`] does point by point), then along it to the
    /// window's columns.
    #[inline(always)]
    fn compute(
        &mut self,
        terrain: &ProceduralTerrain,
        columns: &CoarseAxis,
        line: i64,
        out: &mut [Vec<f32>; FIELDS],
    ) {
        let layers = &terrain.layers;
        let m = self.us.len();
        self.vs.clear();
        self.vs.resize(m, terrain.coarse_position(line));
        self.noise_a.resize(m, 0.0);
        self.noise_b.resize(m, 0.0);
        for field in &mut self.points {
            field.resize(m, 0.0);
        }
        let at = (self.us.as_slice(), self.vs.as_slice());
        let OctaveRows {
            pu,
            pv,
            sum,
            buffers,
            ..
        } = &mut self.octave_rows;
        let [warp_u, warp_v, ridged, coarse_sum] = &mut self.points;
        for (pair, cells, offsets, position, along) in [
            (
                &layers.warp_u,
                &mut self.cells.warp_u,
                &mut *warp_u,
                pu,
                &self.us,
            ),
            (
                &layers.warp_v,
                &mut self.cells.warp_v,
                &mut *warp_v,
                pv,
                &self.vs,
            ),
        ] {
            pair[0].sample_row(at, &mut cells[0], buffers, &mut self.noise_a);
            pair[1].sample_row(at, &mut cells[1], buffers, &mut self.noise_b);
            // Plain loops, so they compile inside the wide window too (an `extend` of a
            // `map` stayed an out-of-line baseline function there).
            position.resize(m, 0.0);
            for ((((o, p), &at), &a), &b) in offsets
                .iter_mut()
                .zip(position.iter_mut())
                .zip(along.iter())
                .zip(&self.noise_a)
                .zip(&self.noise_b)
            {
                *o = warp_offset(pair, a, b);
                *p = at + *o;
            }
        }
        layers
            .mask
            .sample_row(at, &mut self.cells.mask, buffers, &mut self.noise_a);
        for (r, &n) in ridged.iter_mut().zip(&self.noise_a) {
            *r = ridged_share(n);
        }
        sum.clear();
        sum.resize(m, 0.0);
        let octaves = &layers.octaves[terrain.coarse.clone()];
        self.octave_rows
            .add(octaves, &mut self.cells.octaves, ridged);
        coarse_sum.clone_from(&self.octave_rows.sum);
        for (field, points) in out.iter_mut().zip(&self.points) {
            field.resize(columns.first.len(), 0.0);
            along_row(columns, &terrain.weights, points, field);
        }
    }
}

impl ImportSource for ProceduralTerrain {
    fn width(&self) -> u32 {
        self.size
    }

    fn height(&self) -> u32 {
        self.size
    }

    fn sample_type(&self) -> SampleType {
        SampleType::U16
    }

    fn mapping(&self) -> WorldMapping {
        self.mapping
    }

    fn read_window(&self, cols: &[u32], rows: &[u32]) -> Result<Samples, TileError> {
        let lanes = crate::wide_lanes::lanes();
        Ok(Samples::U16(self.window_in(
            lanes,
            cols,
            rows,
            BAND_SAMPLES,
        )))
    }
}

impl ProceduralTerrain {
    /// [`ProceduralTerrain::window`] compiled for `lanes` (or the widest this CPU has, if
    /// it has less): the release build targets baseline x86-64, whose lanes are 4 floats
    /// and which has no vector 64-bit product for the lattice hashes. With AVX-512 or AVX2
    /// the fine octaves run in [`super::wide`] (BENCHMARKS, "the procedural source's
    /// smooth layers on a coarse grid"). The same exactly rounded operations in each lane,
    /// so the same bits (Rust never fuses a multiply and an add, though both have FMA);
    /// `a_window_read_row_by_row_equals_its_samples_computed_alone` compares every path
    /// this CPU has with the scalar `raw`, in release in CI as well (where the loops are
    /// vectorised).
    fn window_in(
        &self,
        lanes: crate::wide_lanes::Lanes,
        cols: &[u32],
        rows: &[u32],
        band_samples: usize,
    ) -> Vec<u16> {
        use crate::wide_lanes::{Lanes, detected, run_at};
        let lanes = lanes.min(detected());
        // SAFETY (each): `LANES` needs the features of `lanes`, which this CPU has.
        #[allow(unsafe_code)]
        match lanes {
            Lanes::Avx512 => run_at(
                lanes,
                #[inline(always)]
                || unsafe { self.window::<16>(cols, rows, band_samples) },
            ),
            Lanes::Avx2 => run_at(
                lanes,
                #[inline(always)]
                || unsafe { self.window::<8>(cols, rows, band_samples) },
            ),
            Lanes::Baseline => unsafe { self.window::<0>(cols, rows, band_samples) },
        }
    }

    /// The samples of columns `cols` and rows `rows`, a band of rows (`band_samples` or
    /// one row) at a time: the
    /// coarse fields interpolated across the four coarse rows around each row, then the
    /// fine octaves one by one over the band. With `LANES` (16 or 8, from
    /// [`Self::window_in`] only) an octave goes in AVX-512 or AVX2 lanes wherever the band
    /// is dense enough for a table of its cells ([`super::wide`]); otherwise (and with
    /// `LANES` 0) it goes row by row, each row hashing a lattice cell once and computing in
    /// vector lanes.
    ///
    /// # Safety
    /// The CPU has the features of `LANES`: 16, AVX-512 F, BW, DQ and VL; 8, AVX2.
    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn window<const LANES: usize>(
        &self,
        cols: &[u32],
        rows: &[u32],
        band_samples: usize,
    ) -> Vec<u16> {
        let n = cols.len();
        if n == 0 || rows.is_empty() {
            return Vec::new();
        }
        let column_axis = CoarseAxis::new(cols, self.stride);
        let row_axis = CoarseAxis::new(rows, self.stride);
        let mut coarse = CoarseRows::new(self, &column_axis);
        let us: Vec<f32> = cols.iter().map(|&col| col as f32 * self.step).collect();
        let mut fields: [Vec<f32>; FIELDS] = std::array::from_fn(|_| vec![0.0; n]);
        // The band's buffers are kept per thread: allocated afresh for every tile of an
        // import, their pages faulted in again each time (a fifth of the time).
        let mut band = BAND.take();
        let mut cells = [CellGradients::EMPTY; MAX_OCTAVES];
        let mut octave_rows = OctaveRows::default();
        let mut values = Vec::with_capacity(n * rows.len());
        let rows_a_band = (band_samples / n).max(1);
        for (band_index, band_rows) in rows.chunks(rows_a_band).enumerate() {
            band.clear();
            for (in_band, &row) in band_rows.iter().enumerate() {
                let row_index = band_index * rows_a_band + in_band;
                let first = row_axis.first[row_index];
                let down = self.weights[row_axis.phase[row_index]];
                let around = coarse.get(self, &column_axis, &row_axis.lines[first..first + 4]);
                for (f, field) in fields.iter_mut().enumerate() {
                    let [a, b, c, d] = [0, 1, 2, 3].map(|t| around[t][f].as_slice());
                    for ((((out, &a), &b), &c), &d) in field.iter_mut().zip(a).zip(b).zip(c).zip(d)
                    {
                        *out = weighted(down, |t| [a, b, c, d][t]);
                    }
                }
                band.push_row(row as f32 * self.step, &us, &fields);
            }
            // SAFETY: passed on from this function's.
            unsafe { self.add_fine::<LANES>(&mut band, n, &mut cells, &mut octave_rows) };
            // A plain loop, so it compiles inside the wide window (an `extend` of a `map`
            // stays an out-of-line baseline function: 8 % of an import's time).
            let start = values.len();
            values.resize(start + band.sum.len(), 0);
            for (value, &sum) in values[start..].iter_mut().zip(&band.sum) {
                *value = self.quantise(sum);
            }
        }
        if band.sum.capacity() <= BAND_SAMPLES {
            // (A band longer than that, of one very wide row, is not kept.)
            BAND.set(band);
        }
        values
    }

    /// Adds the fine octaves to a band of `n`-sample rows (`n > 0`).
    ///
    /// # Safety
    /// As [`Self::window`].
    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn add_fine<const LANES: usize>(
        &self,
        band: &mut Band,
        n: usize,
        cells: &mut [CellGradients; MAX_OCTAVES],
        scratch: &mut OctaveRows,
    ) {
        let fine = &self.layers.octaves[self.fine.clone()];
        #[cfg(target_arch = "x86_64")]
        let bounds = (LANES > 0).then(|| {
            // SAFETY: the caller vouches for the features of `LANES`.
            unsafe {
                (
                    super::wide::bounds::<LANES>(&band.pu),
                    super::wide::bounds::<LANES>(&band.pv),
                )
            }
        });
        for (layer, cell) in fine.iter().zip(cells.iter_mut()) {
            #[cfg(target_arch = "x86_64")]
            if let Some(table) = bounds.and_then(|(u_range, v_range)| {
                let limit = TABLE_CELLS_A_SAMPLE * band.sum.len() + TABLE_CELLS_ANYWAY;
                // SAFETY: as above.
                unsafe { super::wide::CellTable::new::<LANES>(layer, u_range, v_range, limit) }
            }) {
                // SAFETY: as above.
                unsafe {
                    super::wide::add_octave::<LANES>(
                        layer,
                        &table,
                        (&band.pu, &band.pv),
                        &band.ridged,
                        &mut band.sum,
                    );
                }
                continue;
            }
            let OctaveRows { noise, buffers, .. } = scratch;
            for (((pu, pv), ridged), sum) in band
                .pu
                .chunks(n)
                .zip(band.pv.chunks(n))
                .zip(band.ridged.chunks(n))
                .zip(band.sum.chunks_mut(n))
            {
                add_octave_row(layer, (pu, pv), cell, buffers, noise, ridged, sum);
            }
        }
    }
}

/// Samples a window computes a band at a time (of whole rows, one at least): 4 floats
/// each, 4 MB.
const BAND_SAMPLES: usize = 1 << 18;

/// Largest cell table for a fine octave, in cells per sample of the band and a few
/// more. A dense band's box holds at most about a quarter of a cell a sample (the finest
/// octave has 3 samples a wave or more, a ninth of a cell a sample, and the box of a
/// rotated band is at most twice its area) plus its margin; a sparse window's box can
/// hold millions, and goes row by row. (The tables are the wide lanes' alone: x86-64.)
#[cfg(target_arch = "x86_64")]
const TABLE_CELLS_A_SAMPLE: usize = 4;
#[cfg(target_arch = "x86_64")]
const TABLE_CELLS_ANYWAY: usize = 4096;

thread_local! {
    /// The last window's band on this thread, for the next one.
    static BAND: std::cell::Cell<Band> = std::cell::Cell::new(Band::default());
}

/// A band of a window's rows, row-major: each sample's warped position, mountain mask
/// and sum so far.
#[derive(Debug, Default)]
struct Band {
    pu: Vec<f32>,
    pv: Vec<f32>,
    ridged: Vec<f32>,
    sum: Vec<f32>,
}

impl Band {
    fn clear(&mut self) {
        for values in [&mut self.pu, &mut self.pv, &mut self.ridged, &mut self.sum] {
            values.clear();
        }
    }

    /// Appends the row at map `v`, with columns at map `us`, from its interpolated coarse
    /// `fields`.
    #[inline(always)]
    fn push_row(&mut self, v: f32, us: &[f32], fields: &[Vec<f32>; FIELDS]) {
        let start = self.sum.len();
        let end = start + us.len();
        for values in [&mut self.pu, &mut self.pv, &mut self.ridged, &mut self.sum] {
            values.resize(end, 0.0);
        }
        for ((((((p, q), r), s), &u), (&wu, &wv)), (&ridged, &coarse_sum)) in self.pu[start..]
            .iter_mut()
            .zip(&mut self.pv[start..])
            .zip(&mut self.ridged[start..])
            .zip(&mut self.sum[start..])
            .zip(us)
            .zip(fields[WARP_U].iter().zip(&fields[WARP_V]))
            .zip(fields[RIDGED].iter().zip(&fields[COARSE_SUM]))
        {
            *p = u + wu;
            *q = v + wv;
            *r = ridged.clamp(0.0, 1.0);
            *s = DOME_HEIGHT * dome(u) * dome(v) + coarse_sum;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tiles::{BlockIndex, ImportOptions, TiledTerrain, import_source};

    #[test]
    fn an_import_of_the_procedural_terrain_holds_its_samples_at_every_level() {
        let terrain =
            ProceduralTerrain::new(&GenerateOptions::default().with_size(100).with_seed(9))
                .expect("valid options");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let options = ImportOptions::with_tile_cells(16);
        let summary = import_source(&terrain, dir.path(), &options, &|_, _| {}).expect("imports");
        let tiled = TiledTerrain::open(dir.path()).expect("opens");
        assert_eq!(summary.header.sample_type, SampleType::U16);
        for (level, grid) in tiled.header().levels.iter().enumerate() {
            let field = tiled.to_heightfield(level as u32, u64::MAX).expect("fits");
            for row in 0..grid.height {
                for col in 0..grid.width {
                    let at = |i: u32| (u64::from(i) << level).min(99) as u32;
                    assert_eq!(
                        field.raw(col, row),
                        f32::from(terrain.raw(at(col), at(row))),
                        "level {level} ({col}, {row})"
                    );
                }
            }
        }
        let finest = tiled.to_heightfield(0, u64::MAX).expect("fits");
        assert_eq!(
            tiled.block_index(),
            &BlockIndex::from_heightfield(&finest, &tiled.header().levels, 16)
        );
        let (lo, hi) = finest.raw_range();
        assert!(hi - lo > 5000.0, "a landscape, not a plane: {lo} .. {hi}");
    }

    #[test]
    fn a_window_read_row_by_row_equals_its_samples_computed_alone() {
        // The octaves' lattice cells are kept from sample to sample along a row; at 65537
        // samples the finest octave changes cell every few samples, the coarsest never.
        let options = GenerateOptions::default().with_size(65_537).with_seed(11);
        let terrain = ProceduralTerrain::new(&options).expect("valid options");
        // Consecutive columns from a coarse line (0, 31000) go a stride at a time.
        for (start, stride) in [
            (0u32, 1u32),
            (31_000, 1),
            (31_003, 1),
            (65_536 - 40 * 3, 3),
            (12, 1024),
        ] {
            let cols: Vec<u32> = (0..41).map(|i| start + i * stride).collect();
            let rows: Vec<u32> = (0..23)
                .map(|i| (start / 2 + i * stride).min(65_536))
                .collect();
            assert_window_is_its_samples(
                &terrain,
                &cols,
                &rows,
                &format!("from {start}, stride {stride}"),
            );
        }
    }

    /// Every way a window is computed gives `raw`'s samples: `read_window`, and the
    /// window in every lane width this CPU has (baseline, AVX2, AVX-512), whole and in
    /// bands of two rows (coarse rows kept and dropped between them; a cell table per
    /// band). Their vector loops exist in optimised builds only: `.ci/run` runs these
    /// tests in release too.
    fn assert_window_is_its_samples(
        terrain: &ProceduralTerrain,
        cols: &[u32],
        rows: &[u32],
        what: &str,
    ) {
        use crate::wide_lanes::{Lanes, detected};
        let alone: Vec<u16> = rows
            .iter()
            .flat_map(|&row| cols.iter().map(move |&col| (col, row)))
            .map(|(col, row)| terrain.raw(col, row))
            .collect();
        let Samples::U16(window) = terrain.read_window(cols, rows).expect("reads") else {
            panic!("16-bit samples");
        };
        assert_eq!(window, alone, "{what}");
        let band = 2 * cols.len();
        for lanes in [Lanes::Baseline, Lanes::Avx2, Lanes::Avx512] {
            if lanes > detected() {
                println!("no {lanes:?} here: its window is not checked");
                continue;
            }
            for band_samples in [BAND_SAMPLES, band] {
                let window = terrain.window_in(lanes, cols, rows, band_samples);
                assert_eq!(window, alone, "{lanes:?}, bands of {band_samples}, {what}");
            }
        }
    }

    #[test]
    fn windows_in_any_order_with_repeats_or_empty_are_their_samples() {
        // Strides 1 (40 samples) and 2 (100), then the usual 8.
        for size in [40, 100, 3000] {
            let options = GenerateOptions::default().with_size(size).with_seed(5);
            let terrain = ProceduralTerrain::new(&options).expect("valid options");
            let last = size - 1;
            let cols = [last, 3, 3, 0, last / 2, 1, last - 1, 17];
            let rows = [5, last, 0, 5, 2, last / 3];
            assert_window_is_its_samples(&terrain, &cols, &rows, &format!("size {size}"));
            let dense: Vec<u32> = (0..40).collect();
            assert_window_is_its_samples(&terrain, &dense, &[last, 0, 9], &format!("size {size}"));
            let broken: Vec<u32> = (0..20).chain(22..43).collect();
            assert_window_is_its_samples(&terrain, &broken, &[4, 1], &format!("size {size}"));
            for (cols, rows) in [(&[][..], &[1u32][..]), (&[1], &[]), (&[], &[])] {
                assert_window_is_its_samples(&terrain, cols, rows, "empty");
            }
        }
    }

    #[test]
    fn a_coarse_axis_lists_each_line_once_and_aligns_consecutive_samples() {
        let aligned = |samples: Vec<u32>| CoarseAxis::new(&samples, 8).aligned;
        assert_eq!(aligned((0..41).collect()), 40);
        assert_eq!(aligned((16..57).collect()), 40);
        assert_eq!(aligned((0..7).collect()), 0);
        assert_eq!(aligned((3..44).collect()), 0);
        assert_eq!(aligned((0..20).chain(22..43).collect()), 16);
        assert_eq!(aligned((0..80).step_by(2).collect()), 0);
        assert_eq!(aligned(Vec::new()), 0);
        // Sorted or not, with repeats, each line once.
        for samples in [
            vec![0, 0, 9, 40, 41, 41, 100],
            vec![100, 41, 0, 9, 41, 0, 40],
        ] {
            let axis = CoarseAxis::new(&samples, 8);
            assert_eq!(axis.lines, [-1, 0, 1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 14]);
            for (&sample, &first) in samples.iter().zip(&axis.first) {
                assert_eq!(axis.lines[first], i64::from(sample / 8) - 1);
            }
        }
    }

    /// The terrain before its smooth layers moved to the coarse grid: every layer at
    /// every sample (what `raw` computed until then).
    fn every_layer_at_the_sample(terrain: &ProceduralTerrain, col: u32, row: u32) -> u16 {
        let (u, v) = (col as f32 * terrain.step, row as f32 * terrain.step);
        let layers = &terrain.layers;
        let warp = |pair: &[super::super::Layer; 2]| {
            warp_offset(pair, pair[0].sample(u, v), pair[1].sample(u, v))
        };
        let (pu, pv) = (u + warp(&layers.warp_u), v + warp(&layers.warp_v));
        let ridged = ridged_share(layers.mask.sample(u, v));
        let mut sum = DOME_HEIGHT * dome(u) * dome(v);
        for layer in &layers.octaves[terrain.coarse.start..terrain.fine.end] {
            sum += layer.amplitude * octave_basis(layer, layer.sample(pu, pv), ridged);
        }
        terrain.quantise(sum)
    }

    #[test]
    fn the_coarse_grid_holds_the_smooth_layers_and_changes_the_terrain_by_little() {
        // Size, stride, octaves interpolated and computed at each sample, and the
        // largest difference allowed from every layer at every sample, in 16-bit codes
        // (measured: 696, 837, 10 and 1). Small grids have the fewest coarse points a
        // wave; the procedural source serves sizes above 8193.
        for (size, stride, coarse, fine, bound) in [
            (100, 2, 2, 3, 1000),
            (257, 8, 2, 4, 1000),
            (16_385, 8, 8, 4, 16),
            (65_537, 8, 10, 4, 4),
        ] {
            let options = GenerateOptions::default().with_size(size).with_seed(3);
            let terrain = ProceduralTerrain::new(&options).expect("valid options");
            assert_eq!(
                (terrain.stride(), terrain.layers_per_sample()),
                (stride, (fine, coarse + 5)),
                "size {size}"
            );
            // On a coarse-grid point the interpolation gives the point's own fields.
            let (i, j) = ((size - 1) / stride / 3, (size - 1) / stride / 2);
            let [warp_u, warp_v, ridged, coarse_sum] =
                terrain.coarse_point(i64::from(i), i64::from(j));
            assert!(warp_u.abs() > 0.0 && warp_v.abs() > 0.0 && coarse_sum.abs() > 0.0);
            assert!((0.0..=1.0).contains(&ridged));
            let (col, row) = (i * stride, j * stride);
            let (u, v) = (col as f32 * terrain.step, row as f32 * terrain.step);
            let mut sum = DOME_HEIGHT * dome(u) * dome(v) + coarse_sum;
            for layer in &terrain.layers.octaves[terrain.fine.clone()] {
                let n = layer.sample(u + warp_u, v + warp_v);
                sum += layer.amplitude * octave_basis(layer, n, ridged);
            }
            assert_eq!(terrain.raw(col, row), terrain.quantise(sum), "size {size}");
            // Against every layer at every sample: close, in 16-bit codes.
            let (col0, row0) = ((size - 1) / 3, (size - 1) / 2);
            let (mut largest, mut squares, mut count) = (0u32, 0f64, 0u32);
            for k in 0..400u32 {
                let (col, row) = ((col0 + k % 20 * 7) % size, (row0 + k / 20 * 5) % size);
                let a = terrain.raw(col, row);
                let b = every_layer_at_the_sample(&terrain, col, row);
                let d = u32::from(a.abs_diff(b));
                largest = largest.max(d);
                squares += f64::from(d * d);
                count += 1;
            }
            let rms = (squares / f64::from(count)).sqrt();
            println!("size {size}: largest difference {largest} codes, rms {rms:.1}");
            assert!(
                largest <= bound && rms <= f64::from(bound) / 4.0,
                "size {size}: largest {largest}, rms {rms}"
            );
        }
    }

    #[test]
    fn quantising_rounds_halves_up_as_round_does() {
        let terrain = ProceduralTerrain::new(&GenerateOptions::default().with_size(100))
            .expect("valid options");
        let span = terrain.high - terrain.low;
        for k in 0..=2000u32 {
            for nudge in [-1.0f32, 0.0, 1.0] {
                let unit = (k as f32 / 2000.0 + nudge * 1e-7).clamp(0.0, 1.0);
                let sum = terrain.low + unit * span;
                let scaled = ((sum - terrain.low) / span).clamp(0.0, 1.0) * f32::from(u16::MAX);
                assert_eq!(terrain.quantise(sum), scaled.round() as u16, "{sum}");
            }
        }
        assert_eq!(terrain.quantise(terrain.low - 1.0), 0);
        assert_eq!(terrain.quantise(terrain.high + 1.0), u16::MAX);
        assert_eq!(terrain.quantise(f32::NEG_INFINITY), 0);
        assert_eq!(terrain.quantise(f32::INFINITY), u16::MAX);
        assert_eq!(terrain.quantise(f32::NAN), 0);
    }

    #[test]
    fn any_sample_of_a_huge_terrain_is_computed_alone_and_deterministically() {
        let options = GenerateOptions::default().with_size(65_537).with_seed(4);
        let a = ProceduralTerrain::new(&options).expect("valid options");
        let b = ProceduralTerrain::new(&options).expect("valid options");
        for (col, row) in [(0, 0), (65_536, 65_536), (40_001, 7), (12_345, 54_321)] {
            assert_eq!(a.raw(col, row), b.raw(col, row));
        }
        let other = ProceduralTerrain::new(&options.clone().with_seed(5)).expect("valid");
        assert!((0..64).any(|i| a.raw(i * 1000, 30_000) != other.raw(i * 1000, 30_000)));
        let too_large = options.with_size(MAX_PROCEDURAL_SIZE + 1);
        assert!(matches!(
            ProceduralTerrain::new(&too_large),
            Err(GenerateError::TooLarge { .. })
        ));
    }
}
