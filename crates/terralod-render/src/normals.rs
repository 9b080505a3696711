//! Per-sample world heights and normals: the static textures the renderer samples, so
//! shading comes from the full-resolution data whatever mesh is drawn.

use rayon::prelude::*;
use terralod_core::heightfield::{GridPos, Heightfield};
use terralod_core::lod::sample_height;

/// World height of every sample, row-major, rounded exactly as the LOD meshes round them
/// ([`sample_height`]), so the drawn surface is the exported one.
pub fn world_heights(field: &Heightfield) -> Vec<f32> {
    let width = field.width() as usize;
    let mut heights = vec![0.0f32; field.len()];
    heights
        .par_chunks_mut(width.max(1))
        .enumerate()
        .for_each(|(row, out)| {
            for (col, h) in out.iter_mut().enumerate() {
                *h = sample_height(field, GridPos::new(col as u32, row as u32));
            }
        });
    heights
}

/// Unit normals from central differences over `heights` (one-sided at the borders),
/// packed as signed bytes `[x, y, z, 0]` for an `Rgba8Snorm` texture.
pub fn normal_map(field: &Heightfield, heights: &[f32]) -> Vec<[i8; 4]> {
    let (width, height) = (field.width() as usize, field.height() as usize);
    let cell = field.mapping().cell_size;
    let mut normals = vec![[0i8; 4]; heights.len()];
    normals
        .par_chunks_mut(width.max(1))
        .enumerate()
        .for_each(|(row, out)| {
            let up = row.saturating_sub(1);
            let down = (row + 1).min(height - 1);
            for (col, n) in out.iter_mut().enumerate() {
                let left = col.saturating_sub(1);
                let right = (col + 1).min(width - 1);
                let dx = (heights[row * width + right] - heights[row * width + left])
                    / (cell * (right - left).max(1) as f32);
                let dz = (heights[down * width + col] - heights[up * width + col])
                    / (cell * (down - up).max(1) as f32);
                *n = pack(glam::Vec3::new(-dx, 1.0, -dz).normalize_or(glam::Vec3::Y));
            }
        });
    normals
}

fn pack(n: glam::Vec3) -> [i8; 4] {
    let byte = |v: f32| (v.clamp(-1.0, 1.0) * 127.0).round() as i8;
    [byte(n.x), byte(n.y), byte(n.z), 0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use terralod_core::heightfield::WorldMapping;

    #[test]
    fn a_tilted_plane_has_its_normal_everywhere() {
        // Height rises 1 per column with 2-unit cells: slope 0.5 along x.
        let values = (0..5 * 4).map(|i| (i % 5) as f32).collect();
        let field = Heightfield::from_f32(5, 4, values)
            .unwrap()
            .with_mapping(WorldMapping {
                cell_size: 2.0,
                height_scale: 1.0,
                height_offset: 0.0,
            })
            .unwrap();
        let heights = world_heights(&field);
        let expected = pack(glam::Vec3::new(-0.5, 1.0, 0.0).normalize());
        for n in normal_map(&field, &heights) {
            assert_eq!(n, expected);
        }
    }
}
