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

    /// The mesh without the triangles that lie wholly in the padding beyond the data,
    /// whose last column and row are `last` (algorithms that draw a `2^k + 1` square draw
    /// the repeated border samples beyond): a triangle whose every vertex is at column
    /// `last.0` or beyond, or at row `last.1` or beyond, touches the data at most along its
    /// edge. What is left still covers the data and, being part of a conforming mesh, has
    /// no new T-junction; it reaches past the data only by the triangles across its edge.
    /// Vertices no kept triangle uses are dropped, the others keep their order.
    pub fn without_padding(self, last: (u32, u32)) -> GridMesh {
        let outside = |t: &[u32; 3]| {
            let p = t.map(|i| self.positions[i as usize]);
            p.iter().all(|p| p.col >= last.0) || p.iter().all(|p| p.row >= last.1)
        };
        if !self.triangles.iter().any(outside) {
            return self;
        }
        let triangles: Vec<[u32; 3]> = self
            .triangles
            .iter()
            .filter(|t| !outside(t))
            .copied()
            .collect();
        let mut index = vec![u32::MAX; self.positions.len()];
        for &i in triangles.iter().flatten() {
            index[i as usize] = 0;
        }
        let mut mesh = GridMesh::default();
        for (i, slot) in index.iter_mut().enumerate() {
            if *slot == 0 {
                *slot = mesh.push_vertex(self.positions[i], self.heights[i]);
            }
        }
        mesh.triangles = triangles
            .into_iter()
            .map(|t| t.map(|i| index[i as usize]))
            .collect();
        mesh
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
