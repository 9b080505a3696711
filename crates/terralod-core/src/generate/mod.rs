//! Procedural terrain (feature H3): the built-in terrain when no file is given.
//!
//! The landscape is built coarse to fine on a pyramid of square grids, from at most 40
//! samples per side up to the requested size, each level about twice as fine as the one
//! before. Every level is upsampled from the one below (Catmull-Rom), receives the noise
//! octaves its resolution can carry, then is eroded: rivers cut the valleys of one scale
//! before the next scale's detail arrives, so the drainage is dendritic at every scale.
//!
//! The noise is gradient noise, domain-warped, ridged where a low-frequency mask says
//! "mountains" and smooth (fBm) elsewhere, on a dome that lifts the middle of the map so
//! rivers drain to the edges. Hydraulic erosion routes water and sediment with multiple
//! flow directions, cuts by the stream-power law and deposits in lakes and where the flow
//! slackens; thermal erosion lets oversteep slopes slump. Levels finer than about 1025
//! samples per side only slump: their valleys come from the levels below and their
//! octaves are a few metres high, which keeps a 4097² terrain within a few seconds.
//!
//! Everything is defined relative to the map (1 wide inside the generator), so the size is
//! a resolution: 4097 samples show the same mountains as 1025, with finer detail. The cell
//! size and maximum height only map the result to metres.
//!
//! Determinism: the value path uses only + − × ÷, `sqrt`, `min`/`max`, comparisons and
//! conversions, all exactly rounded in IEEE 754 (Rust never fuses a multiply-add on its
//! own), and integer hashing for the random gradients. Parallel steps compute every output
//! from inputs that do not depend on scheduling; the erosion walks run on one thread in a
//! fixed order. So a seed gives the same bits on every platform and any thread count.

mod erosion;
mod noise;
mod procedural;
mod resample;
#[cfg(target_arch = "x86_64")]
mod wide;

use crate::heightfield::{Heightfield, HeightfieldError, MIN_SIDE, WorldMapping};
use erosion::{Eroder, min_max};
use noise::{CellGradients, NoiseRow, gradient_noise, gradient_noise_row, mix64, unit_f32};
pub use procedural::{MAX_PROCEDURAL_SIZE, ProceduralTerrain};
use rayon::prelude::*;
use resample::resample_square;
use std::ops::Range;

/// Largest accepted side. Generation holds about 20 bytes per sample at the finest level
/// (heights, warp and mask, resampling buffers), so 16385² needs some 5 GB: terrains that
/// large should come from files.
pub const MAX_SIZE: u32 = 16_385;

/// Largest accepted erosion strength; at 4 the valleys already wear the map flat.
pub const MAX_EROSION: f32 = 4.0;

/// Options of [`generate`]. `Default` is the built-in terrain.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    /// Samples per side (the terrain is square), 2 ..= [`MAX_SIZE`]. Default 1025: a
    /// 2¹⁰ + 1 grid (no padding for the hierarchical algorithms) of a million samples, big
    /// enough for a mountain range to fill a render, small enough to build in well under
    /// a second in release. Larger sizes show the same terrain at a finer resolution.
    pub size: u32,
    /// Seed of the random layout. Default 0.
    pub seed: u64,
    /// Distance between samples in metres, > 0. Default 30 (the SRTM 1″ spacing), so the
    /// default map is 30.7 km across, the size of a real mountain range.
    pub cell_size: f32,
    /// Height of the highest sample in metres (the lowest is 0), > 0. Default 2500: the
    /// relief of a mid-size range (valley floors to summits in the Alps span 2000–3500 m).
    pub max_height: f32,
    /// Erosion strength, 0 ..= [`MAX_EROSION`]. 0 leaves the raw noise; 1 (the default)
    /// carves drainage valleys through the whole map; more wears it down further.
    pub erosion: f32,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            size: 1025,
            seed: 0,
            cell_size: 30.0,
            max_height: 2500.0,
            erosion: 1.0,
        }
    }
}

impl GenerateOptions {
    pub fn with_size(mut self, size: u32) -> Self {
        self.size = size;
        self
    }

    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub fn with_cell_size(mut self, cell_size: f32) -> Self {
        self.cell_size = cell_size;
        self
    }

    pub fn with_max_height(mut self, max_height: f32) -> Self {
        self.max_height = max_height;
        self
    }

    pub fn with_erosion(mut self, erosion: f32) -> Self {
        self.erosion = erosion;
        self
    }

    /// Checks every option; [`generate`] does so before allocating anything.
    pub fn validate(&self) -> Result<(), GenerateError> {
        if self.size < MIN_SIDE {
            return Err(GenerateError::TooSmall { size: self.size });
        }
        if self.size > MAX_SIZE {
            return Err(GenerateError::TooLarge {
                size: self.size,
                limit: MAX_SIZE,
            });
        }
        if !(self.cell_size.is_finite() && self.cell_size > 0.0) {
            return Err(GenerateError::InvalidCellSize {
                cell_size: self.cell_size,
            });
        }
        if !(self.max_height.is_finite() && self.max_height > 0.0) {
            return Err(GenerateError::InvalidMaxHeight {
                max_height: self.max_height,
            });
        }
        if !(0.0..=MAX_EROSION).contains(&self.erosion) {
            return Err(GenerateError::InvalidErosion {
                erosion: self.erosion,
                limit: MAX_EROSION,
            });
        }
        Ok(())
    }
}

/// Why a terrain could not be generated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenerateError {
    #[error("size {size} is too small: at least {MIN_SIDE} samples per side are needed")]
    TooSmall { size: u32 },
    #[error("size {size} exceeds the limit of {limit} samples per side")]
    TooLarge { size: u32, limit: u32 },
    #[error("cell size {cell_size} must be finite and greater than 0")]
    InvalidCellSize { cell_size: f32 },
    #[error("maximum height {max_height} must be finite and greater than 0")]
    InvalidMaxHeight { max_height: f32 },
    #[error("erosion strength {erosion} must be between 0 and {limit}")]
    InvalidErosion { erosion: f32, limit: f32 },
    #[error(transparent)]
    Heightfield(#[from] HeightfieldError),
}

/// The built-in terrain: [`GenerateOptions::default`], generated afresh on every call.
pub fn builtin() -> Heightfield {
    generate(&GenerateOptions::default()).expect("the default options are valid")
}

/// Generates a terrain: `F32` heights in metres from 0 to `max_height`, mapped with
/// `cell_size`.
pub fn generate(options: &GenerateOptions) -> Result<Heightfield, GenerateError> {
    generate_with_progress(options, &|_| {})
}

/// [`generate`], calling `progress` with the fraction done (from 0 to 1, increasing, a few
/// dozen times) for a progress bar.
pub fn generate_with_progress(
    options: &GenerateOptions,
    progress: &(dyn Fn(f32) + Sync),
) -> Result<Heightfield, GenerateError> {
    options.validate()?;
    progress(0.0);
    let plan: Vec<Level> = level_sides(options.size as usize)
        .into_iter()
        .map(|side| Level::new(side, options.erosion))
        .collect();
    let total_work: f64 = plan.iter().map(Level::work).sum();
    let mut done_work = 0.0;
    let mut report = |work: f64| {
        done_work += work;
        progress((done_work / total_work).min(1.0) as f32);
    };

    let layers = Layers::new(options.seed);
    let aux = layers.aux_grid();
    let mut eroder = Eroder::default();
    let mut heights: Vec<f32> = Vec::new();
    let mut previous_side = 0;
    let mut next_octave = 0;
    for (index, level) in plan.iter().enumerate() {
        let side = level.side;
        let finest = index + 1 == plan.len();
        heights = if index == 0 {
            vec![0.0; side * side]
        } else {
            resample_square(&heights, previous_side, side)
        };
        let octaves = layers.octaves_for(side, next_octave, finest);
        next_octave = octaves.end;
        layers.add_octaves(&mut heights, side, &aux.resampled(side), octaves);
        report(level.noise_work());

        if options.erosion > 0.0 {
            let (lo, hi) = min_max(&heights);
            let talus = TALUS_SLOPE * (hi - lo) * MAP_WIDTH_OVER_RELIEF;
            for _ in 0..level.iterations {
                if level.routed {
                    eroder.route(&heights, side);
                    eroder.erode(&mut heights, level.k_dt, DEPOSITION);
                }
                eroder.slump(&mut heights, side, talus, SLUMP_RATE);
                report(level.iteration_work());
            }
        }
        if finest && options.erosion > 0.0 {
            for _ in 0..FINAL_SMOOTHING {
                eroder.slump(&mut heights, side, 0.0, SLUMP_RATE);
            }
        }
        previous_side = side;
    }

    to_metres(&mut heights, options.max_height);
    progress(1.0);
    let mapping = WorldMapping {
        cell_size: options.cell_size,
        height_scale: 1.0,
        height_offset: 0.0,
    };
    Ok(Heightfield::from_f32(options.size, options.size, heights)?.with_mapping(mapping)?)
}

/// The coarsest level has at most this many samples per side: enough for the first
/// octaves, cheap enough for many erosion steps.
const BASE_SIDE_MAX: usize = 40;

/// Levels up to this side route water and sediment; finer ones only slump. The flood and
/// the walk visit cells in height order, one cache miss after another on big grids: one
/// routed step on 4097² took 16 s (7.7 s flood, 8.4 s walk) against about 0.25 s on
/// 1025², both on this project's shared, busy 2-core machine. A cheaper parallel
/// stream-power step with the coarser drainage was tried above this size and left dashed
/// scars along valley floors.
const ROUTED_SIDE_MAX: usize = 1100;

/// K·t of stream-power erosion per level at strength 1, in map units, for levels up to
/// [`K_T_REFERENCE_CELLS`] cells per side; finer levels get `√(reference / cells)` of it.
/// Chosen by eye against real hillshades: more cuts gorges between flat plateaus, less
/// leaves the raw noise; the decrease keeps the finest valleys from cutting as deep as
/// the big ones (with `m = ½, n = 1` incision would otherwise be scale-free).
const K_T_PER_LEVEL: f32 = 0.5;
const K_T_REFERENCE_CELLS: f32 = 128.0;

/// Share of the sediment load per unit of drainage area that settles (the G of the ξ-q
/// model); 0.5 gives valley floors a visible fill without burying them.
const DEPOSITION: f32 = 0.5;

/// Talus slope, as the tangent in the world of the default terrain (about 27°), and the
/// share of the excess that slumps per step (≤ 1/16 is stable).
const TALUS_SLOPE: f32 = 0.5;
const SLUMP_RATE: f32 = 0.0625;

/// Map width over relief of the default terrain (30 m × 1024 / 2500 m): converts a slope
/// in its world to the generator's units, where the map is 1 wide.
const MAP_WIDTH_OVER_RELIEF: f32 = 30.0 * 1024.0 / 2500.0;

/// Diffusion steps on the finest level: soil creep rounding what the noise and the D8
/// neighbourhood leave sharp at the scale of one cell.
const FINAL_SMOOTHING: usize = 2;

/// Sides of the pyramid levels, coarse to fine, ending with `size`.
fn level_sides(size: usize) -> Vec<usize> {
    let mut sides = vec![size];
    while let Some(&side) = sides.last()
        && side > BASE_SIDE_MAX
    {
        sides.push((side - 1).div_ceil(2) + 1);
    }
    sides.reverse();
    sides
}

/// What one level does.
#[derive(Clone, Copy, Debug)]
struct Level {
    side: usize,
    /// Whether the level has hydraulic erosion (else only thermal).
    routed: bool,
    iterations: usize,
    /// K·t per iteration.
    k_dt: f32,
}

impl Level {
    fn new(side: usize, erosion: f32) -> Self {
        let routed = side <= ROUTED_SIDE_MAX;
        // Coarse levels are cheap: many short steps there, where the drainage network
        // takes shape; one on the big levels (a second step on 1025² was measured to
        // change the hillshade by little and to cost 0.1 s).
        let iterations = match side {
            _ if erosion == 0.0 => 0,
            0..=40 => 12,
            41..=80 => 8,
            81..=300 => 6,
            301..=600 => 3,
            _ => 1,
        };
        let cells = (side - 1) as f32;
        let per_level = if cells > K_T_REFERENCE_CELLS {
            K_T_PER_LEVEL * (K_T_REFERENCE_CELLS / cells).sqrt()
        } else {
            K_T_PER_LEVEL
        };
        let k_dt = if iterations == 0 {
            0.0
        } else {
            erosion * per_level / iterations as f32
        };
        Self {
            side,
            routed,
            iterations,
            k_dt,
        }
    }

    fn cells(&self) -> f64 {
        (self.side * self.side) as f64
    }

    /// Relative costs per cell for the progress bar, estimated from profiles of release
    /// builds: noise and resampling ≈ 1, a routed step ≈ 8, a thermal step alone ≈ 0.2.
    fn noise_work(&self) -> f64 {
        self.cells()
    }

    fn iteration_work(&self) -> f64 {
        if self.routed {
            8.0 * self.cells()
        } else {
            0.2 * self.cells()
        }
    }

    fn work(&self) -> f64 {
        self.noise_work() + self.iterations as f64 * self.iteration_work()
    }
}

/// Cycles of the first octave across the map: two or three massifs per map.
const BASE_FREQUENCY: f32 = 2.0;
/// Amplitude ratio between successive octaves (Hurst exponent 1: self-similar relief).
const GAIN: f32 = 0.5;
/// Most octaves ever used (16385 samples need 13).
const MAX_OCTAVES: usize = 16;
/// An octave is added on the first level with at least this many samples per wavelength,
/// and on the finest level down to [`FINEST_SAMPLES_PER_WAVE`].
const SAMPLES_PER_WAVE: f32 = 4.0;
const FINEST_SAMPLES_PER_WAVE: f32 = 3.0;
/// Octaves finer than this many times the first are smooth even in the mountains: ridged
/// detail at small scales only adds a brushed texture that real hillsides do not have.
const RIDGED_UP_TO: f32 = 16.0;
/// Domain warp: displacement in map units, and frequency relative to the first octave.
const WARP_AMOUNT: f32 = 0.06;
const WARP_FREQUENCY: f32 = 1.0;
/// Frequency of the mask choosing ridged mountains or smooth hills, relative to the first
/// octave.
const MASK_FREQUENCY: f32 = 0.75;
/// Samples per side of the grid holding the warp and the mask. Their shortest wavelength
/// spans 32 of its cells, so resampling it to any level is exact to a few 1e-4.
const AUX_SIDE: usize = 129;
/// Height of the dome lifting the middle of the map above its edges, relative to the first
/// octave's amplitude (1). Without it most of the map would be closed basins.
const DOME_HEIGHT: f32 = 1.5;

/// Amplitude of octave `k`: `GAIN^k` by repeated multiplication.
fn amplitude_of(k: usize) -> f32 {
    (0..k).fold(1.0, |a, _| a * GAIN)
}

/// 0 at the map edges, 1 in the middle: `1 − (2t − 1)²`. A parabola rather than a
/// flat-topped bump, so the middle of the map drains too instead of standing as a plateau.
fn dome(t: f32) -> f32 {
    let x = 2.0 * t - 1.0;
    1.0 - x * x
}

/// One noise layer: its seed, frequency (cycles per map), amplitude, rotation and offset.
/// Rotating each octave by a different angle hides the lattice's axes.
#[derive(Clone, Copy, Debug)]
struct Layer {
    seed: u64,
    frequency: f32,
    amplitude: f32,
    cos: f32,
    sin: f32,
    offset: (f32, f32),
}

impl Layer {
    fn new(seed: u64, stream: u64, frequency: f32, amplitude: f32, turns: u32) -> Self {
        let seed = mix64(seed ^ mix64(stream));
        // Rotation by k × 36.87°: powers of 0.8 + 0.6i, exact rational steps.
        let (mut cos, mut sin) = (1.0f32, 0.0f32);
        for _ in 0..turns {
            (cos, sin) = (cos * 0.8 - sin * 0.6, cos * 0.6 + sin * 0.8);
        }
        // An offset within one lattice cell, so the map corner is no lattice point.
        let offset = (unit_f32(mix64(seed ^ 1)), unit_f32(mix64(seed ^ 2)));
        Self {
            seed,
            frequency,
            amplitude,
            cos,
            sin,
            offset,
        }
    }

    /// Map position `(u, v)` in this layer's lattice.
    #[inline]
    fn lattice_position(&self, u: f32, v: f32) -> (f32, f32) {
        let x = (u * self.cos - v * self.sin) * self.frequency + self.offset.0;
        let y = (u * self.sin + v * self.cos) * self.frequency + self.offset.1;
        (x, y)
    }

    /// Whether the mountain mask blends this octave with its ridged form
    /// ([`octave_basis`]).
    #[inline(always)]
    fn is_ridged(&self) -> bool {
        self.frequency <= RIDGED_UP_TO * BASE_FREQUENCY
    }

    /// Noise at map position `(u, v)`, without the amplitude.
    #[inline]
    fn sample(&self, u: f32, v: f32) -> f32 {
        let (x, y) = self.lattice_position(u, v);
        gradient_noise(self.seed, x, y)
    }

    /// [`Layer::sample`] at `(us[i], vs[i])` into `out[i]`, `cell` keeping this layer's
    /// last lattice cell (the same values, in vector lanes). Inlined into its callers so
    /// that [`ProceduralTerrain`]'s wider-vector window compiles its lanes too.
    #[inline(always)]
    fn sample_row(
        &self,
        (us, vs): (&[f32], &[f32]),
        cell: &mut CellGradients,
        buffers: &mut RowBuffers,
        out: &mut [f32],
    ) {
        let RowBuffers { xs, ys, noise } = buffers;
        let n = us.len();
        xs.resize(n, 0.0);
        ys.resize(n, 0.0);
        for (((x, y), &u), &v) in xs.iter_mut().zip(ys.iter_mut()).zip(us).zip(vs) {
            (*x, *y) = self.lattice_position(u, v);
        }
        gradient_noise_row(self.seed, xs, ys, cell, noise, out);
    }
}

/// Scratch of [`Layer::sample_row`].
#[derive(Debug, Default)]
struct RowBuffers {
    xs: Vec<f32>,
    ys: Vec<f32>,
    noise: NoiseRow,
}

/// The low-frequency fields every octave needs: domain warp and mountain mask.
#[derive(Clone, Debug)]
struct Aux {
    side: usize,
    warp_u: Vec<f32>,
    warp_v: Vec<f32>,
    ridged: Vec<f32>,
}

impl Aux {
    /// The fields at a level's resolution.
    fn resampled(&self, side: usize) -> Aux {
        Aux {
            side,
            warp_u: resample_square(&self.warp_u, self.side, side),
            warp_v: resample_square(&self.warp_v, self.side, side),
            ridged: resample_square(&self.ridged, self.side, side),
        }
    }
}

/// All noise layers of one seed.
#[derive(Clone, Debug)]
struct Layers {
    octaves: Vec<Layer>,
    warp_u: [Layer; 2],
    warp_v: [Layer; 2],
    mask: Layer,
}

impl Layers {
    fn new(seed: u64) -> Self {
        let octaves = (0..MAX_OCTAVES)
            .map(|k| {
                let frequency = BASE_FREQUENCY * (1u32 << k) as f32;
                Layer::new(seed, k as u64, frequency, amplitude_of(k), k as u32)
            })
            .collect();
        let warp = |stream: u64| {
            let frequency = BASE_FREQUENCY * WARP_FREQUENCY;
            [
                Layer::new(seed, stream, frequency, 1.0, 1),
                Layer::new(seed, stream + 1, frequency * 2.0, 0.5, 2),
            ]
        };
        Self {
            octaves,
            warp_u: warp(100),
            warp_v: warp(200),
            mask: Layer::new(seed, 300, BASE_FREQUENCY * MASK_FREQUENCY, 1.0, 3),
        }
    }

    /// Warp and mask on the [`AUX_SIDE`] grid.
    fn aux_grid(&self) -> Aux {
        let side = AUX_SIDE;
        let inv = 1.0 / (side - 1) as f32;
        let field = |f: &(dyn Fn(f32, f32) -> f32 + Sync)| -> Vec<f32> {
            (0..side * side)
                .into_par_iter()
                .map(|i| f((i % side) as f32 * inv, (i / side) as f32 * inv))
                .collect()
        };
        let warp = |pair: &[Layer; 2], u: f32, v: f32| {
            warp_offset(pair, pair[0].sample(u, v), pair[1].sample(u, v))
        };
        Aux {
            side,
            warp_u: field(&|u, v| warp(&self.warp_u, u, v)),
            warp_v: field(&|u, v| warp(&self.warp_v, u, v)),
            ridged: field(&|u, v| ridged_share(self.mask.sample(u, v))),
        }
    }

    /// Octaves from `first` that a level of `side` samples resolves.
    fn octaves_for(&self, side: usize, first: usize, finest: bool) -> Range<usize> {
        let min_samples = if finest {
            FINEST_SAMPLES_PER_WAVE
        } else {
            SAMPLES_PER_WAVE
        };
        let cells = (side - 1) as f32;
        let end = (first..self.octaves.len())
            .find(|&k| cells / self.octaves[k].frequency < min_samples)
            .unwrap_or(self.octaves.len());
        // The first octave always: a grid too small to resolve it still gets a shape.
        first..end.max(first).max(1)
    }

    /// Adds octaves `range` (and the dome with the first octave) to a `side × side` level,
    /// row by row in parallel.
    fn add_octaves(&self, heights: &mut [f32], side: usize, aux: &Aux, range: Range<usize>) {
        if range.is_empty() {
            return;
        }
        let with_dome = range.start == 0;
        let octaves = &self.octaves[range];
        let inv = 1.0 / (side - 1) as f32;
        heights.par_chunks_mut(side).enumerate().for_each_init(
            OctaveRows::default,
            |rows, (row, out)| {
                let v = row as f32 * inv;
                let at = row * side..(row + 1) * side;
                let warp_u = &aux.warp_u[at.clone()];
                rows.pu.clear();
                rows.pu
                    .extend((0..side).zip(warp_u).map(|(col, w)| col as f32 * inv + w));
                rows.pv.clear();
                rows.pv.extend(aux.warp_v[at.clone()].iter().map(|w| v + w));
                rows.sum.clear();
                rows.sum.extend((0..side).map(|col| {
                    if with_dome {
                        DOME_HEIGHT * dome(col as f32 * inv) * dome(v)
                    } else {
                        0.0
                    }
                }));
                let mut cells = [CellGradients::EMPTY; MAX_OCTAVES];
                rows.add(octaves, &mut cells, &aux.ridged[at]);
                for (h, s) in out.iter_mut().zip(&rows.sum) {
                    *h += s;
                }
            },
        );
    }
}

/// The domain warp's offset from the noise `first` and `second` of its two layers.
#[inline]
fn warp_offset(pair: &[Layer; 2], first: f32, second: f32) -> f32 {
    WARP_AMOUNT * (first + pair[1].amplitude * second)
}

/// The share of ridged mountains (0..1) from the mask layer's noise `n`.
#[inline]
fn ridged_share(n: f32) -> f32 {
    (0.5 + 1.5 * n).clamp(0.0, 1.0)
}

/// Scratch of [`Layers::add_octaves`] and [`ProceduralTerrain`]'s windows, per row: the
/// warped positions, the sum of the octaves so far, one octave's noise.
#[derive(Debug, Default)]
struct OctaveRows {
    pu: Vec<f32>,
    pv: Vec<f32>,
    sum: Vec<f32>,
    noise: Vec<f32>,
    buffers: RowBuffers,
}

impl OctaveRows {
    /// Adds `octaves` at the warped positions `pu`, `pv` to `sum`, with the mountain mask
    /// `ridged`; octave `k` keeps its last lattice cell in `cells[k]`.
    #[inline(always)]
    fn add(&mut self, octaves: &[Layer], cells: &mut [CellGradients], ridged: &[f32]) {
        let OctaveRows {
            pu,
            pv,
            sum,
            noise,
            buffers,
        } = self;
        for (layer, cell) in octaves.iter().zip(cells) {
            add_octave_row(layer, (pu, pv), cell, buffers, noise, ridged, sum);
        }
    }
}

/// Adds octave `layer` at the warped positions `at` to `sum`, with the mountain mask
/// `ridged`, keeping its last lattice cell in `cell`; `noise` is scratch.
#[inline(always)]
fn add_octave_row(
    layer: &Layer,
    at: (&[f32], &[f32]),
    cell: &mut CellGradients,
    buffers: &mut RowBuffers,
    noise: &mut Vec<f32>,
    ridged: &[f32],
    sum: &mut [f32],
) {
    noise.resize(at.0.len(), 0.0);
    layer.sample_row(at, cell, buffers, noise);
    for ((s, &n), &r) in sum.iter_mut().zip(noise.iter()).zip(ridged) {
        *s += layer.amplitude * octave_basis(layer, n, r);
    }
}

/// One octave's value from its noise `n`: blends the plain noise with its ridged form
/// `2·((1 − |n|)² − 0.45)` (sharp crests where n crosses 0, centred near 0) by the
/// mountain mask.
#[inline]
fn octave_basis(layer: &Layer, n: f32, ridged: f32) -> f32 {
    if !layer.is_ridged() {
        return n;
    }
    let crest = 1.0 - n.abs();
    let ridge = 2.0 * (crest * crest - 0.45);
    n + ridged * (ridge - n)
}

/// Maps heights linearly onto `0 ..= max_height`.
fn to_metres(heights: &mut [f32], max_height: f32) {
    let (lo, hi) = min_max(heights);
    let scale = if hi > lo { max_height / (hi - lo) } else { 0.0 };
    heights.par_iter_mut().for_each(|h| *h = (*h - lo) * scale);
}

#[cfg(test)]
mod tests;
