//! GPU-free core of terralod: heightfields, loaders, procedural terrain, pyramids, camera and
//! the LOD algorithms.
//!
//! # Conventions (stated once, used everywhere)
//!
//! - **y is up.** Sample `(col, row)` sits at `x = col * cell_size`, `z = row * cell_size`,
//!   `y = raw * height_scale + height_offset` ([`WorldMapping`]). Samples are stored row-major.
//! - Grid positions are integers ([`GridPos`]); world positions are [`glam::Vec3`]. They are
//!   kept apart in types.
//! - Transforms are named `target_from_source` (`clip_from_world`); clip depth is 0..1 as in
//!   wgpu. Angles are radians in the API; the CLI takes degrees.
//! - Screen-space tolerances are in pixels of the viewport height.
//! - Triangles are counter-clockwise seen from above (+y): their normal points up.
//!
//! This crate depends on no GPU, windowing or CLI crate (CI checks it).

pub mod camera;
pub mod generate;
pub mod heightfield;
pub mod io;
pub mod lod;
pub mod mesh;
pub mod pyramid;
pub mod query;
mod raster;
mod rounding;
pub mod simplify;
#[cfg(test)]
mod test_support;
pub mod tiles;
mod wide_lanes;

pub use camera::{Aabb, Camera, CameraError, Containment, ErrorProjector, Frustum};
pub use heightfield::{GridPos, Heightfield, HeightfieldError, Samples, WorldMapping};
pub use io::{LoadError, LoadOptions, Loaded, load};
pub use mesh::GridMesh;
pub use pyramid::{NodeBounds, Pyramid};
pub use query::{RayHit, height_at, raycast};
