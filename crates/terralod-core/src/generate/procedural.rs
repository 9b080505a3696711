//! The built-in terrain without erosion, as a function of position only: for terrains too
//! large to generate whole (erosion is global, it needs the whole grid). Any sample is
//! computed alone from its grid position, so an import makes any tile by itself, at any
//! level's stride, and never holds the terrain.
//!
//! Same noise layers as [`super::generate`] for a seed (domain warp, ridged mask, dome,
//! octaves up to what the size resolves), but the warp and mask are evaluated exactly at
//! each sample instead of resampled from a small grid, and heights are normalised by the
//! sum's fixed bound rather than the map's own range (which would need the whole map).
//! Stored as `u16` (`max_height / 65535` per step), as an imported DEM would be.

use super::{DOME_HEIGHT, GenerateError, GenerateOptions, Layers, WARP_AMOUNT, dome, octave_basis};
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

    /// The stored sample at grid position `(col, row)`.
    pub fn raw(&self, col: u32, row: u32) -> u16 {
        let (u, v) = (col as f32 * self.step, row as f32 * self.step);
        let layers = &self.layers;
        let warp = |pair: &[super::Layer; 2]| {
            WARP_AMOUNT * (pair[0].sample(u, v) + pair[1].amplitude * pair[1].sample(u, v))
        };
        let (pu, pv) = (u + warp(&layers.warp_u), v + warp(&layers.warp_v));
        let ridged = (0.5 + 1.5 * layers.mask.sample(u, v)).clamp(0.0, 1.0);
        let mut sum = DOME_HEIGHT * dome(u) * dome(v);
        for layer in &layers.octaves[self.octaves.clone()] {
            sum += layer.amplitude * octave_basis(layer, pu, pv, ridged);
        }
        let unit = ((sum - self.low) / (self.high - self.low)).clamp(0.0, 1.0);
        (unit * f32::from(u16::MAX)).round() as u16
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
        let mut values = Vec::with_capacity(cols.len() * rows.len());
        for &row in rows {
            values.extend(cols.iter().map(|&col| self.raw(col, row)));
        }
        Ok(Samples::U16(values))
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
