//! The built-in terrain without erosion, as a function of position only: for terrains too
//! large to generate whole (erosion is global, it needs the whole grid). Any sample is
//! computed alone from its grid position, so any window (an import's level-0 tiles, or a
//! coarser level's at its stride) is made by itself, and the terrain is never held.
//!
//! Same noise layers as [`super::generate`] for a seed (domain warp, ridged mask, dome,
//! octaves up to what the size resolves), but the warp and mask are evaluated exactly at
//! each sample instead of resampled from a small grid, and heights are normalised by the
//! sum's fixed bound rather than the map's own range (which would need the whole map).
//! Stored as `u16` (`max_height / 65535` per step), as an imported DEM would be.

use super::noise::CellGradients;
use super::{
    DOME_HEIGHT, GenerateError, GenerateOptions, Layers, MAX_OCTAVES, OctaveRows, dome,
    octave_basis, ridged_share, warp_offset,
};
use crate::heightfield::{Samples, WorldMapping};
use crate::tiles::{ImportSource, SampleType, TileError};
use std::ops::Range;

/// A position-only fractal terrain of `size × size` samples.
#[derive(Clone, Debug)]
pub struct ProceduralTerrain {
    layers: Layers,
    size: u32,
    octaves: Range<usize>,
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
        // lies in [−1, 1.1]; the dome in [0, DOME_HEIGHT].
        let amplitude: f32 = layers.octaves[octaves.clone()]
            .iter()
            .map(|layer| layer.amplitude)
            .sum();
        Ok(ProceduralTerrain {
            size: options.size,
            octaves,
            step: 1.0 / (options.size - 1) as f32,
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

    /// The stored sample at grid position `(col, row)`, computed alone (windows are read
    /// row by row, the same values: [`ImportSource::read_window`]).
    pub fn raw(&self, col: u32, row: u32) -> u16 {
        let (u, v) = (col as f32 * self.step, row as f32 * self.step);
        let layers = &self.layers;
        let warp = |pair: &[super::Layer; 2]| {
            warp_offset(pair, pair[0].sample(u, v), pair[1].sample(u, v))
        };
        let (pu, pv) = (u + warp(&layers.warp_u), v + warp(&layers.warp_v));
        let ridged = ridged_share(layers.mask.sample(u, v));
        let mut sum = DOME_HEIGHT * dome(u) * dome(v);
        for layer in &layers.octaves[self.octaves.clone()] {
            sum += layer.amplitude * octave_basis(layer, layer.sample(pu, pv), ridged);
        }
        self.quantise(sum)
    }

    /// The stored code of a noise sum.
    #[inline]
    fn quantise(&self, sum: f32) -> u16 {
        let unit = ((sum - self.low) / (self.high - self.low)).clamp(0.0, 1.0);
        (unit * f32::from(u16::MAX)).round() as u16
    }
}

/// The last lattice cell of every noise layer, kept from row to row of a window.
struct LayerCells {
    warp_u: [CellGradients; 2],
    warp_v: [CellGradients; 2],
    mask: CellGradients,
    octaves: [CellGradients; MAX_OCTAVES],
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
        #[cfg(target_arch = "x86_64")]
        if wide_lanes() {
            // SAFETY: `window_wide` needs the CPU features `wide_lanes` found (and those
            // they imply, which the detection reports only with them).
            #[allow(unsafe_code)]
            return Ok(Samples::U16(unsafe { self.window_wide(cols, rows) }));
        }
        Ok(Samples::U16(self.window(cols, rows)))
    }
}

/// Whether this CPU runs [`ProceduralTerrain::window_wide`] (AVX-512 with 64-bit
/// integer products; checked once per window, a cached answer after the first).
#[cfg(target_arch = "x86_64")]
fn wide_lanes() -> bool {
    use std::arch::is_x86_feature_detected as has;
    has!("avx2") && has!("avx512f") && has!("avx512dq") && has!("avx512vl") && has!("avx512bw")
}

impl ProceduralTerrain {
    /// [`ProceduralTerrain::window`] compiled for AVX-512, chosen at run time (the
    /// release build targets baseline x86-64, whose lanes are 4 floats and which has no
    /// vector 64-bit product for the lattice hashes): 1.5 × faster on the 2-core EPYC
    /// (BENCHMARKS, "the procedural source in wider lanes"). The same exactly rounded
    /// operations in each lane, so the same bits (Rust never fuses a multiply and an
    /// add, though AVX-512 has FMA); `a_window_read_row_by_row_equals_its_samples_computed_alone`
    /// compares this path with the scalar `raw` wherever the CPU has it, in release in
    /// CI as well (where the loops are vectorised).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,avx512f,avx512dq,avx512vl,avx512bw")]
    fn window_wide(&self, cols: &[u32], rows: &[u32]) -> Vec<u16> {
        self.window(cols, rows)
    }

    /// The samples of columns `cols` and rows `rows`, row by row.
    #[inline(always)]
    fn window(&self, cols: &[u32], rows: &[u32]) -> Vec<u16> {
        // Layer by layer along each row (what `raw` does sample by sample), each layer
        // hashing a lattice cell once and computing in vector lanes.
        let layers = &self.layers;
        let n = cols.len();
        let us: Vec<f32> = cols.iter().map(|&col| col as f32 * self.step).collect();
        let mut vs = vec![0.0; n];
        let (mut first, mut second) = (vec![0.0; n], vec![0.0; n]);
        let mut ridged = vec![0.0; n];
        let mut cells = LayerCells {
            warp_u: [CellGradients::EMPTY; 2],
            warp_v: [CellGradients::EMPTY; 2],
            mask: CellGradients::EMPTY,
            octaves: [CellGradients::EMPTY; MAX_OCTAVES],
        };
        let mut octave_rows = OctaveRows::default();
        let mut values = Vec::with_capacity(n * rows.len());
        for &row in rows {
            let v = row as f32 * self.step;
            vs.fill(v);
            let at = (us.as_slice(), vs.as_slice());
            let OctaveRows {
                pu, pv, buffers, ..
            } = &mut octave_rows;
            for (pair, cells, out, along) in [
                (&layers.warp_u, &mut cells.warp_u, pu, &us),
                (&layers.warp_v, &mut cells.warp_v, pv, &vs),
            ] {
                pair[0].sample_row(at, &mut cells[0], buffers, &mut first);
                pair[1].sample_row(at, &mut cells[1], buffers, &mut second);
                // A plain loop, so it compiles inside the wide window too (an `extend` of
                // a `map` stayed an out-of-line baseline function there).
                out.resize(n, 0.0);
                for (((o, &at), &a), &b) in
                    out.iter_mut().zip(along.iter()).zip(&first).zip(&second)
                {
                    *o = at + warp_offset(pair, a, b);
                }
            }
            layers
                .mask
                .sample_row(at, &mut cells.mask, buffers, &mut first);
            for (r, &m) in ridged.iter_mut().zip(&first) {
                *r = ridged_share(m);
            }
            octave_rows.sum.clear();
            octave_rows
                .sum
                .extend(us.iter().map(|&u| DOME_HEIGHT * dome(u) * dome(v)));
            let octaves = &layers.octaves[self.octaves.clone()];
            octave_rows.add(octaves, &mut cells.octaves, &ridged);
            values.extend(octave_rows.sum.iter().map(|&s| self.quantise(s)));
        }
        values
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
        for (start, stride) in [(0u32, 1u32), (31_000, 1), (65_536 - 40 * 3, 3), (12, 1024)] {
            let cols: Vec<u32> = (0..41).map(|i| start + i * stride).collect();
            let rows: Vec<u32> = (0..23)
                .map(|i| (start / 2 + i * stride).min(65_536))
                .collect();
            let Samples::U16(window) = terrain.read_window(&cols, &rows).expect("reads") else {
                panic!("16-bit samples");
            };
            let alone: Vec<u16> = rows
                .iter()
                .flat_map(|&row| cols.iter().map(move |&col| (col, row)))
                .map(|(col, row)| terrain.raw(col, row))
                .collect();
            // `read_window` runs the AVX-512 window where the CPU has it: the baseline
            // one is checked too. (Their vector loops exist in optimised builds only:
            // `.ci/run` runs this test in release as well.)
            assert_eq!(window, alone, "from {start}, stride {stride}");
            let baseline = terrain.window(&cols, &rows);
            assert_eq!(baseline, alone, "baseline, from {start}, stride {stride}");
        }
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
