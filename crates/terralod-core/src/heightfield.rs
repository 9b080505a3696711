//! The heightfield (feature H1): a validated grid of samples plus the world mapping.
//!
//! Samples keep the precision and size of their source (16-bit sources stay at 2 bytes per
//! sample) and are decoded to `f32` only when read. A [`Heightfield`] is validated once when
//! it is built: at least 2 × 2 samples, the sample count matches, every sample finite.

use glam::Vec3;
use serde::Serialize;
use std::collections::VecDeque;

/// Smallest accepted side, in samples: one grid cell needs 2 × 2 samples.
pub const MIN_SIDE: u32 = 2;

/// A position on the sample grid (column → +x, row → +z).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
pub struct GridPos {
    pub col: u32,
    pub row: u32,
}

impl GridPos {
    pub const fn new(col: u32, row: u32) -> Self {
        Self { col, row }
    }
}

/// Maps grid samples to world space: `x = col * cell_size`, `z = row * cell_size`,
/// `y = raw * height_scale + height_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WorldMapping {
    /// Distance between neighbouring samples in world units (metres), > 0.
    pub cell_size: f32,
    /// World units per raw sample unit (may be negative to flip the terrain, never 0).
    pub height_scale: f32,
    /// World height of a raw sample of 0.
    pub height_offset: f32,
}

impl Default for WorldMapping {
    /// One world unit per sample and per raw unit: the mapping a raw file implies.
    fn default() -> Self {
        Self {
            cell_size: 1.0,
            height_scale: 1.0,
            height_offset: 0.0,
        }
    }
}

impl WorldMapping {
    /// Checks that the mapping is usable: finite values, positive cell size, non-zero scale.
    pub fn validate(&self) -> Result<(), HeightfieldError> {
        let ok = self.cell_size.is_finite()
            && self.cell_size > 0.0
            && self.height_scale.is_finite()
            && self.height_scale != 0.0
            && self.height_offset.is_finite();
        if ok {
            Ok(())
        } else {
            Err(HeightfieldError::InvalidMapping(*self))
        }
    }

    /// Checks that the mapping is valid and keeps every world coordinate of a
    /// `width × height` grid finite, its heights too when their raw range is known (a
    /// source read by windows does not know it before the import, whose block index
    /// refuses heights that overflow). The mapping is affine, so the extreme raw values
    /// and the far corner decide.
    pub fn check_grid(
        &self,
        width: u32,
        height: u32,
        raw_range: Option<(f32, f32)>,
    ) -> Result<(), HeightfieldError> {
        self.validate()?;
        let (lo, hi) = raw_range.unwrap_or((0.0, 0.0));
        let (a, b) = (self.world_y(lo), self.world_y(hi));
        let extent = (
            width.saturating_sub(1) as f32 * self.cell_size,
            height.saturating_sub(1) as f32 * self.cell_size,
        );
        if [a, b, extent.0, extent.1].iter().all(|v| v.is_finite()) {
            Ok(())
        } else {
            Err(HeightfieldError::WorldOverflow {
                min: a.min(b),
                max: a.max(b),
                width: extent.0,
                depth: extent.1,
            })
        }
    }

    /// World height of a raw sample value.
    #[inline]
    pub fn world_y(&self, raw: f32) -> f32 {
        raw * self.height_scale + self.height_offset
    }

    /// World position of a grid sample with the given raw value.
    #[inline]
    pub fn world_position(&self, pos: GridPos, raw: f32) -> Vec3 {
        Vec3::new(
            pos.col as f32 * self.cell_size,
            self.world_y(raw),
            pos.row as f32 * self.cell_size,
        )
    }
}

/// Sample storage, in the precision of the source.
#[derive(Clone, Debug, PartialEq)]
pub enum Samples {
    /// Unsigned 16-bit (PNG, uint16 GeoTIFF, `.r16`); 8-bit sources are widened to this.
    U16(Vec<u16>),
    /// Signed 16-bit (SRTM `.hgt`, int16 GeoTIFF).
    I16(Vec<i16>),
    /// 32-bit float (float GeoTIFF, `.f32`, ASCII grids, generated terrain). Sources with
    /// more range or precision (int32, float64) are converted to this, documented per loader.
    F32(Vec<f32>),
}

impl Samples {
    pub fn len(&self) -> usize {
        match self {
            Samples::U16(v) => v.len(),
            Samples::I16(v) => v.len(),
            Samples::F32(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes per stored sample.
    pub fn bytes_per_sample(&self) -> usize {
        match self {
            Samples::U16(_) | Samples::I16(_) => 2,
            Samples::F32(_) => 4,
        }
    }

    /// Name of the storage type, as reported by `terralod info`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Samples::U16(_) => "u16",
            Samples::I16(_) => "i16",
            Samples::F32(_) => "f32",
        }
    }

    /// Decoded value of sample `index`.
    #[inline]
    pub fn get(&self, index: usize) -> f32 {
        match self {
            Samples::U16(v) => f32::from(v[index]),
            Samples::I16(v) => f32::from(v[index]),
            Samples::F32(v) => v[index],
        }
    }
}

/// Why a heightfield could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HeightfieldError {
    #[error(
        "size {width} x {height} is too small: at least {MIN_SIDE} x {MIN_SIDE} samples are needed"
    )]
    TooSmall { width: u32, height: u32 },
    #[error(
        "{width} x {height} samples exceed the limit of {limit} samples (raise it with --max-samples)"
    )]
    TooLarge { width: u64, height: u64, limit: u64 },
    #[error("expected {expected} samples for the size, got {actual}")]
    LengthMismatch { expected: u64, actual: u64 },
    #[error("sample at column {col}, row {row} is not finite ({value})")]
    NonFinite { col: u32, row: u32, value: f32 },
    #[error("every sample is nodata: nothing to fill the holes from")]
    AllNodata,
    #[error(
        "invalid world mapping {0:?}: cell size must be > 0, height scale non-zero, all finite"
    )]
    InvalidMapping(WorldMapping),
    #[error(
        "the world mapping overflows f32: heights {min} .. {max}, extent {width} x {depth}; \
         lower the cell size, height scale or height offset"
    )]
    WorldOverflow {
        min: f32,
        max: f32,
        width: f32,
        depth: f32,
    },
}

/// Checks a claimed size against a sample limit *before* anything is allocated.
pub fn check_size(width: u64, height: u64, limit: u64) -> Result<(), HeightfieldError> {
    if width < u64::from(MIN_SIDE) || height < u64::from(MIN_SIDE) {
        return Err(HeightfieldError::TooSmall {
            width: width.min(u64::from(u32::MAX)) as u32,
            height: height.min(u64::from(u32::MAX)) as u32,
        });
    }
    let too_large = width.checked_mul(height).is_none_or(|n| n > limit)
        || width > u64::from(u32::MAX)
        || height > u64::from(u32::MAX);
    if too_large {
        return Err(HeightfieldError::TooLarge {
            width,
            height,
            limit,
        });
    }
    Ok(())
}

/// Samples a side of level `level` of a grid `samples` a side, as `terralod import`'s
/// pyramid and [`Heightfield::decimated`] keep them (docs/TILES.md): `⌈(samples − 1) /
/// 2^level⌉ + 1`.
pub fn level_side(samples: u32, level: u32) -> u32 {
    (u64::from(samples - 1).div_ceil(1 << level) + 1) as u32
}

/// The level-0 position of level `level`'s sample `index` along a side of `samples`
/// samples: `index · 2^level`, clamped to the last sample (the border repeated).
pub fn level_source(index: u64, level: u32, samples: u32) -> u32 {
    (index << level).min(u64::from(samples - 1)) as u32
}

/// A validated grid of height samples with its world mapping.
#[derive(Clone, Debug, PartialEq)]
pub struct Heightfield {
    width: u32,
    height: u32,
    samples: Samples,
    mapping: WorldMapping,
    nodata_filled: u64,
}

impl Heightfield {
    /// Builds a heightfield from row-major samples. Fails on a size below 2 × 2, a length
    /// that does not match, or a non-finite sample (use [`Heightfield::with_nodata`] when
    /// the source marks holes).
    pub fn new(width: u32, height: u32, samples: Samples) -> Result<Self, HeightfieldError> {
        check_size(u64::from(width), u64::from(height), u64::MAX)?;
        let expected = u64::from(width) * u64::from(height);
        if samples.len() as u64 != expected {
            return Err(HeightfieldError::LengthMismatch {
                expected,
                actual: samples.len() as u64,
            });
        }
        if let Samples::F32(values) = &samples
            && let Some(i) = values.iter().position(|v| !v.is_finite())
        {
            return Err(HeightfieldError::NonFinite {
                col: (i % width as usize) as u32,
                row: (i / width as usize) as u32,
                value: values[i],
            });
        }
        Ok(Self {
            width,
            height,
            samples,
            mapping: WorldMapping::default(),
            nodata_filled: 0,
        })
    }

    /// Builds a heightfield from `f32` samples.
    pub fn from_f32(width: u32, height: u32, values: Vec<f32>) -> Result<Self, HeightfieldError> {
        Self::new(width, height, Samples::F32(values))
    }

    /// Builds a heightfield whose holes are marked by `is_nodata[i]` (NaN samples in float
    /// data count as nodata too) and fills them by the policy of [`fill_nodata`].
    pub fn with_nodata(
        width: u32,
        height: u32,
        mut samples: Samples,
        is_nodata: &[bool],
    ) -> Result<Self, HeightfieldError> {
        check_size(u64::from(width), u64::from(height), u64::MAX)?;
        let expected = u64::from(width) * u64::from(height);
        if samples.len() as u64 != expected || is_nodata.len() as u64 != expected {
            return Err(HeightfieldError::LengthMismatch {
                expected,
                actual: samples.len().min(is_nodata.len()) as u64,
            });
        }
        let mut holes: Vec<bool> = is_nodata.to_vec();
        if let Samples::F32(values) = &samples {
            for (hole, v) in holes.iter_mut().zip(values) {
                *hole |= v.is_nan();
            }
        }
        let filled = match &mut samples {
            Samples::U16(v) => fill_nodata(width, height, v, &holes)?,
            Samples::I16(v) => fill_nodata(width, height, v, &holes)?,
            Samples::F32(v) => fill_nodata(width, height, v, &holes)?,
        };
        let mut field = Self::new(width, height, samples)?;
        field.nodata_filled = filled;
        Ok(field)
    }

    /// Replaces the world mapping. Fails when the mapping is invalid or would take a world
    /// coordinate of this grid to infinity (a huge height scale on large raw values).
    pub fn with_mapping(mut self, mapping: WorldMapping) -> Result<Self, HeightfieldError> {
        self.check_mapping(&mapping)?;
        self.mapping = mapping;
        Ok(self)
    }

    /// Every `2^level`-th sample in both directions, as level `level` of `terralod import`'s
    /// pyramid keeps them (docs/TILES.md): sample `(i, j)` is `(min(i · 2^level, W − 1),
    /// min(j · 2^level, H − 1))`, `⌈(W − 1) / 2^level⌉ + 1` by `⌈(H − 1) / 2^level⌉ + 1`,
    /// cells `2^level` times as wide, heights as they are. A coarse stand-in for what needs
    /// the terrain's shape only (the renderer's normals of a terrain larger than a texture).
    pub fn decimated(&self, level: u32) -> Heightfield {
        let level = level.min(31);
        let step = 1u64 << level;
        let (width, height) = (
            level_side(self.width, level),
            level_side(self.height, level),
        );
        let at = |i: u32, samples: u32| level_source(u64::from(i), level, samples) as usize;
        let positions = move |w: usize| {
            (0..height).flat_map(move |j| {
                let row = at(j, self.height) * w;
                (0..width).map(move |i| row + at(i, self.width))
            })
        };
        let w = self.width as usize;
        let samples = match &self.samples {
            Samples::U16(v) => Samples::U16(positions(w).map(|k| v[k]).collect()),
            Samples::I16(v) => Samples::I16(positions(w).map(|k| v[k]).collect()),
            Samples::F32(v) => Samples::F32(positions(w).map(|k| v[k]).collect()),
        };
        Heightfield {
            width,
            height,
            samples,
            mapping: WorldMapping {
                cell_size: self.mapping.cell_size * step as f32,
                ..self.mapping
            },
            nodata_filled: 0,
        }
    }

    /// Checks that `mapping` is valid and keeps every world coordinate of this grid finite.
    /// The mapping is affine, so the extreme raw values and the far corner decide.
    pub fn check_mapping(&self, mapping: &WorldMapping) -> Result<(), HeightfieldError> {
        mapping.check_grid(self.width, self.height, Some(self.raw_range()))
    }

    pub fn width(&self) -> u32 {
        self.width
    }

    pub fn height(&self) -> u32 {
        self.height
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.width as usize * self.height as usize
    }

    /// Always false: a heightfield has at least 2 × 2 samples.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn samples(&self) -> &Samples {
        &self.samples
    }

    pub fn mapping(&self) -> WorldMapping {
        self.mapping
    }

    /// Number of nodata samples that were filled when the heightfield was built.
    pub fn nodata_filled(&self) -> u64 {
        self.nodata_filled
    }

    /// Bytes held by the samples.
    pub fn memory_bytes(&self) -> usize {
        self.samples.len() * self.samples.bytes_per_sample()
    }

    /// Raw (decoded, unmapped) value of a sample. Panics when out of range, like slicing.
    #[inline]
    pub fn raw(&self, col: u32, row: u32) -> f32 {
        debug_assert!(col < self.width && row < self.height);
        self.samples
            .get(row as usize * self.width as usize + col as usize)
    }

    /// Raw value with the border repeated outwards: the padding rule of article 000
    /// (the last row and column are repeated), so any position is defined.
    #[inline]
    pub fn raw_clamped(&self, col: u32, row: u32) -> f32 {
        self.raw(col.min(self.width - 1), row.min(self.height - 1))
    }

    /// World height of a sample.
    #[inline]
    pub fn world_y(&self, col: u32, row: u32) -> f32 {
        self.mapping.world_y(self.raw(col, row))
    }

    /// World position of a sample.
    #[inline]
    pub fn world_position(&self, pos: GridPos) -> Vec3 {
        self.mapping.world_position(pos, self.raw(pos.col, pos.row))
    }

    /// Smallest and largest raw value.
    pub fn raw_range(&self) -> (f32, f32) {
        fn range<T: Copy + Into<f32>>(v: &[T]) -> (f32, f32) {
            v.iter()
                .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &s| {
                    let s = s.into();
                    (lo.min(s), hi.max(s))
                })
        }
        match &self.samples {
            Samples::U16(v) => range(v),
            Samples::I16(v) => range(v),
            Samples::F32(v) => range(v),
        }
    }

    /// Smallest and largest world height (the mapping may flip the order of raw values).
    pub fn world_range(&self) -> (f32, f32) {
        let (lo, hi) = self.raw_range();
        let (a, b) = (self.mapping.world_y(lo), self.mapping.world_y(hi));
        (a.min(b), a.max(b))
    }

    /// Side of the smallest square grid of `2^n + 1` samples (n ≥ 1) that holds this one:
    /// the domain of the hierarchical algorithms. Positions beyond the data read the
    /// repeated border ([`Heightfield::raw_clamped`]); nothing is copied.
    pub fn padded_side(&self) -> u32 {
        padded_side(self.width, self.height)
    }

    /// World extent of the data in x and z.
    pub fn world_size(&self) -> (f32, f32) {
        (
            (self.width - 1) as f32 * self.mapping.cell_size,
            (self.height - 1) as f32 * self.mapping.cell_size,
        )
    }
}

/// Side `2^n + 1` (n ≥ 1) of the smallest square power-of-two grid holding `width × height`.
pub fn padded_side(width: u32, height: u32) -> u32 {
    let cells = width.max(height).saturating_sub(1).max(2);
    cells.next_power_of_two() + 1
}

/// A sample type that nodata filling can average.
pub trait FillSample: Copy {
    fn to_f64(self) -> f64;
    fn from_f64(value: f64) -> Self;
}

impl FillSample for u16 {
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(value: f64) -> Self {
        value.round().clamp(0.0, f64::from(u16::MAX)) as u16
    }
}

impl FillSample for i16 {
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(value: f64) -> Self {
        value
            .round()
            .clamp(f64::from(i16::MIN), f64::from(i16::MAX)) as i16
    }
}

impl FillSample for f32 {
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(value: f64) -> Self {
        value as f32
    }
}

/// Fills nodata samples in place and returns how many were filled.
///
/// Policy: holes are filled from their edges inwards, one ring at a time (a breadth-first
/// search from the valid samples over 4-neighbours). Each hole sample takes the mean of its
/// neighbours that were valid or filled in an earlier ring. This keeps filled areas
/// continuous with their surroundings (no cliffs down to a sentinel value), is deterministic
/// and runs in linear time. A grid with no valid sample is an error.
pub fn fill_nodata<T: FillSample>(
    width: u32,
    height: u32,
    values: &mut [T],
    is_nodata: &[bool],
) -> Result<u64, HeightfieldError> {
    let (w, h) = (width as usize, height as usize);
    let holes = is_nodata.iter().filter(|&&x| x).count();
    if holes == 0 {
        return Ok(0);
    }
    if holes == values.len() {
        return Err(HeightfieldError::AllNodata);
    }
    // ring[i]: 0 = valid, u32::MAX = unfilled, k = filled in ring k.
    let mut ring: Vec<u32> = is_nodata
        .iter()
        .map(|&x| if x { u32::MAX } else { 0 })
        .collect();
    let neighbours = |i: usize| {
        let (c, r) = (i % w, i / w);
        [
            (c > 0).then(|| i - 1),
            (c + 1 < w).then(|| i + 1),
            (r > 0).then(|| i - w),
            (r + 1 < h).then(|| i + w),
        ]
        .into_iter()
        .flatten()
    };
    let mut queue: VecDeque<usize> = VecDeque::new();
    for i in 0..values.len() {
        if ring[i] == u32::MAX && neighbours(i).any(|n| ring[n] == 0) {
            ring[i] = 1;
            queue.push_back(i);
        }
    }
    while let Some(i) = queue.pop_front() {
        let k = ring[i];
        let (mut sum, mut count) = (0.0f64, 0u32);
        for n in neighbours(i) {
            if ring[n] < k {
                sum += values[n].to_f64();
                count += 1;
            } else if ring[n] == u32::MAX {
                ring[n] = k + 1;
                queue.push_back(n);
            }
        }
        debug_assert!(count > 0, "a ring-k sample always has a ring k-1 neighbour");
        values[i] = T::from_f64(sum / f64::from(count.max(1)));
    }
    Ok(holes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_mapping_follows_the_convention() {
        let field = Heightfield::from_f32(3, 2, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
            .unwrap()
            .with_mapping(WorldMapping {
                cell_size: 10.0,
                height_scale: 0.5,
                height_offset: 100.0,
            })
            .unwrap();
        assert_eq!(
            field.world_position(GridPos::new(2, 1)),
            Vec3::new(20.0, 102.5, 10.0)
        );
        assert_eq!(field.world_range(), (100.0, 102.5));
        assert_eq!(field.world_size(), (20.0, 10.0));
    }

    /// Decimation keeps the import's level samples: every other one, the last row and
    /// column repeated where the step passes them, cells twice as wide.
    #[test]
    fn decimation_keeps_every_other_sample_and_the_border() {
        let values: Vec<u16> = (0..20).collect();
        let field = Heightfield::new(5, 4, Samples::U16(values))
            .unwrap()
            .with_mapping(WorldMapping {
                cell_size: 3.0,
                height_scale: 2.0,
                height_offset: 1.0,
            })
            .unwrap();
        let half = field.decimated(1);
        assert_eq!((half.width(), half.height()), (3, 3));
        let raw: Vec<f32> = (0..9).map(|i| half.raw(i % 3, i / 3)).collect();
        assert_eq!(raw, [0.0, 2.0, 4.0, 10.0, 12.0, 14.0, 15.0, 17.0, 19.0]);
        assert_eq!(half.mapping().cell_size, 6.0);
        assert_eq!(half.mapping().height_scale, 2.0);
        assert_eq!(field.decimated(0), field);
        let point = field.decimated(3);
        assert_eq!((point.width(), point.height()), (2, 2));
        assert_eq!(point.raw(1, 1), 19.0);
    }

    #[test]
    fn rejects_bad_sizes_and_values() {
        assert!(matches!(
            Heightfield::from_f32(1, 5, vec![0.0; 5]),
            Err(HeightfieldError::TooSmall { .. })
        ));
        assert!(matches!(
            Heightfield::from_f32(2, 2, vec![0.0; 3]),
            Err(HeightfieldError::LengthMismatch {
                expected: 4,
                actual: 3
            })
        ));
        assert_eq!(
            Heightfield::from_f32(2, 2, vec![0.0, 0.0, f32::INFINITY, 0.0]),
            Err(HeightfieldError::NonFinite {
                col: 0,
                row: 1,
                value: f32::INFINITY
            })
        );
        assert!(check_size(1_000_000, 1_000_000, 1 << 30).is_err());
        assert!(check_size(u64::MAX, 3, u64::MAX).is_err());
        let bad = WorldMapping {
            cell_size: 0.0,
            ..WorldMapping::default()
        };
        assert!(
            Heightfield::from_f32(2, 2, vec![0.0; 4])
                .unwrap()
                .with_mapping(bad)
                .is_err()
        );
    }

    #[test]
    fn padded_side_is_the_next_power_of_two_plus_one() {
        assert_eq!(padded_side(2, 2), 3);
        assert_eq!(padded_side(3, 3), 3);
        assert_eq!(padded_side(4, 2), 5);
        assert_eq!(padded_side(1025, 1025), 1025);
        assert_eq!(padded_side(1026, 10), 2049);
        assert_eq!(padded_side(4097, 2049), 4097);
        let field = Heightfield::from_f32(2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        assert_eq!(field.raw_clamped(7, 9), 6.0);
        assert_eq!(field.raw_clamped(0, 9), 5.0);
    }

    #[test]
    fn nodata_is_filled_from_the_edges_inwards() {
        // A 5 × 1 hole strip between 0 and 40: rings fill from both ends.
        let mut values = vec![0.0f32, -9.0, -9.0, -9.0, 40.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let holes: Vec<bool> = values.iter().map(|&v| v == -9.0).collect();
        let filled = fill_nodata(5, 2, &mut values, &holes).unwrap();
        assert_eq!(filled, 3);
        assert!(values.iter().all(|&v| (0.0..=40.0).contains(&v)));
        let field = Heightfield::with_nodata(
            2,
            2,
            Samples::U16(vec![10, 0, 20, 30]),
            &[false, true, false, false],
        )
        .unwrap();
        assert_eq!(field.nodata_filled(), 1);
        assert_eq!(field.raw(1, 0), 20.0); // mean of 10 and 30
        assert_eq!(
            Heightfield::with_nodata(2, 2, Samples::F32(vec![f32::NAN; 4]), &[false; 4]),
            Err(HeightfieldError::AllNodata)
        );
    }
}
