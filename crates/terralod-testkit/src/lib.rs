//! Test kit of terralod: fixtures, proptest strategies and the independent oracles (mesh
//! checker, brute-force error measurement) that referee every LOD algorithm.
//!
//! The oracles share no code path with what they check: they do their own arithmetic
//! (exact integers for topology, f64 for projection) from the raw samples, the plain fields
//! of [`WorldMapping`](terralod_core::WorldMapping), [`GridMesh`] and
//! [`Camera`](terralod_core::Camera), and never call the core's camera or projection code.
//!
//! - [`check_mesh`]: is a mesh watertight (no cracks, T-junctions, flips, overlaps, holes)?
//! - [`measure_error`]: what vertical and projected error does it draw at every sample?
//! - [`fixtures`]: deterministic fields and reference meshes; [`strategies`]: proptest
//!   inputs.
//!
//! # Orientation
//!
//! Triangles must be counter-clockwise seen from above (normal up). In (col, row)
//! coordinates that is a positive [`up_area2`]; its docs derive the sign.

pub mod error_measure;
mod files;
pub mod fixtures;
mod grid_math;
pub mod mesh_check;
pub mod strategies;

pub use error_measure::{
    ErrorReport, MeasureError, PoppingReport, ProjectedError, SampleError, Unreadable, Window,
    WindowedErrorReport, WindowedMeasureError, WindowedProjected, WorldError,
    check_projected_with_build_tolerance, for_each_projected_sample, measure_error,
    measure_error_by_windows, measure_error_by_windows_skipping, measure_popping,
};
pub use files::directory_files;
pub use grid_math::MAX_GRID_COORD;
pub use mesh_check::{
    Coverage, DuplicateVertex, EdgeUse, Findings, GridRect, InvalidReason, InvalidTriangle,
    MeshReport, Overlap, TVertex, TriangleAt, check_mesh,
};

use terralod_core::{GridMesh, GridPos};

/// Twice the signed area of the triangle `a, b, c` seen from above: positive when it is
/// counter-clockwise seen from +y (normal up), negative when flipped, zero when degenerate.
///
/// With `x = col`, `z = row` and y up (right-handed), the normal of the triangle is
/// `(b − a) × (c − a)` and its y component is
/// `(b.row − a.row)(c.col − a.col) − (b.col − a.col)(c.row − a.row)`: this value. Note that
/// it is the negative of the usual 2D cross product taken with (col, row) as (x, y),
/// because seen from above +z points down the screen (row 0 is the top edge).
/// Exact for coordinates below [`MAX_GRID_COORD`]; `None` beyond.
pub fn up_area2(a: GridPos, b: GridPos, c: GridPos) -> Option<i64> {
    let [a, b, c] = [a, b, c].map(grid_math::Pt::from_grid);
    Some(grid_math::up_area2(a?, b?, c?))
}

/// Checks the mesh (see [`check_mesh`]) and panics with the list of defects unless it is
/// watertight: the one-line assertion for algorithm tests.
#[track_caller]
pub fn assert_watertight(mesh: &GridMesh, region: Option<GridRect>) {
    check_mesh(mesh, region).assert_ok();
}
