//! Triangle meshes over the sample grid (feature H7): what every LOD algorithm's selection
//! becomes for export and checking.

use crate::heightfield::{GridPos, WorldMapping};
use glam::Vec3;

/// A triangle mesh whose vertices sit on grid positions, with the world height each vertex
/// is drawn at (after morphing, so it may differ from the sample's height).
///
/// Triangles are counter-clockwise seen from above (+y), i.e. their normals point up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GridMesh {
    pub positions: Vec<GridPos>,
    /// World y of each vertex as drawn.
    pub heights: Vec<f32>,
    pub triangles: Vec<[u32; 3]>,
}

impl GridMesh {
    /// Removes every vertex and triangle, keeping the allocations.
    pub fn clear(&mut self) {
        self.positions.clear();
        self.heights.clear();
        self.triangles.clear();
    }

    /// Adds a vertex and returns its index.
    pub fn push_vertex(&mut self, pos: GridPos, height: f32) -> u32 {
        self.positions.push(pos);
        self.heights.push(height);
        (self.positions.len() - 1) as u32
    }

    /// World position of vertex `index` under `mapping` (x and z from the grid, y as drawn).
    pub fn world_position(&self, index: u32, mapping: &WorldMapping) -> Vec3 {
        let p = self.positions[index as usize];
        Vec3::new(
            p.col as f32 * mapping.cell_size,
            self.heights[index as usize],
            p.row as f32 * mapping.cell_size,
        )
    }
}
