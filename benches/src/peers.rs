//! Side-by-side comparison of terralod's view-independent mode with the peers `martini`
//! (RTIN, mapbox's algorithm) and `delatin` (greedy Delaunay refinement): every tool's mesh
//! becomes a [`GridMesh`] and is refereed by the same oracle ([`measure_error`]), so the
//! vertex counts are compared at *measured*, not requested, error.
//!
//! Heights given to the peers are world heights (`raw × height_scale + height_offset`, in
//! `f64`), so all three take their max error in the same unit as [`View::world_error`].
//! Martini only looks at the midpoint of each triangle's long edge, so its measured error
//! can exceed the one it is asked for; [`calibrate_martini`] searches the requested error
//! that keeps the measured one within a bound.

use std::time::{Duration, Instant};
use terralod_core::heightfield::{GridPos, Heightfield, HeightfieldError, Samples};
use terralod_core::lod::{LodAlgorithm, LodOptions, REGISTRY, View, ViewError, sample_height};
use terralod_core::mesh::GridMesh;
use terralod_core::pyramid::Pyramid;
use terralod_testkit::{ErrorReport, MeasureError, measure_error, up_area2};

/// Why a comparison step failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("window of {side} samples at ({col}, {row}) does not fit a {width} x {height} field")]
    Window {
        col: u32,
        row: u32,
        side: u32,
        width: u32,
        height: u32,
    },
    #[error("martini needs a square grid of 2^k + 1 samples (k >= 1), got {width} x {height}")]
    MartiniGrid { width: u32, height: u32 },
    #[error("delatin failed: {message}")]
    Delatin { message: String },
    #[error("algorithm {name} is not registered")]
    UnknownAlgorithm { name: String },
    #[error("invalid heightfield: {0}")]
    Heightfield(#[from] HeightfieldError),
    #[error("invalid view: {0}")]
    View(#[from] ViewError),
    #[error("error oracle: {0}")]
    Measure(#[from] MeasureError),
    #[error("simplification: {0}")]
    Simplify(#[from] terralod_core::simplify::SimplifyError),
    #[error("building the algorithm: {0}")]
    Build(#[from] terralod_core::lod::BuildError),
}

/// The square window `side × side` whose top-left sample is `(col, row)`, in the source's
/// own precision and with its mapping (so 16-bit data stays exact for the pyramid).
pub fn cut_square(
    field: &Heightfield,
    col: u32,
    row: u32,
    side: u32,
) -> Result<Heightfield, PeerError> {
    let fits = |start: u32, extent: u32| start.checked_add(side).is_some_and(|end| end <= extent);
    if !fits(col, field.width()) || !fits(row, field.height()) {
        return Err(PeerError::Window {
            col,
            row,
            side,
            width: field.width(),
            height: field.height(),
        });
    }
    let width = field.width() as usize;
    let rows = (row as usize..(row + side) as usize)
        .map(|r| r * width + col as usize..r * width + (col + side) as usize);
    let samples = match field.samples() {
        Samples::U16(v) => Samples::U16(rows.flat_map(|r| v[r].iter().copied()).collect()),
        Samples::I16(v) => Samples::I16(rows.flat_map(|r| v[r].iter().copied()).collect()),
        Samples::F32(v) => Samples::F32(rows.flat_map(|r| v[r].iter().copied()).collect()),
    };
    Ok(Heightfield::new(side, side, samples)?.with_mapping(field.mapping())?)
}

/// World heights of every sample, row-major, in `f64` (what the peers take).
pub fn world_heights(field: &Heightfield) -> Vec<f64> {
    let mapping = field.mapping();
    let (scale, offset) = (
        f64::from(mapping.height_scale),
        f64::from(mapping.height_offset),
    );
    let samples = field.samples();
    (0..field.len())
        .map(|i| f64::from(samples.get(i)) * scale + offset)
        .collect()
}

/// Builds a [`GridMesh`] from triangles over grid positions: vertices at their samples'
/// heights, triangles wound counter-clockwise seen from above (the peers use other
/// windings), degenerate ones kept as they are (the oracle skips and counts them).
fn grid_mesh(
    field: &Heightfield,
    positions: Vec<GridPos>,
    triangles: impl Iterator<Item = [u32; 3]>,
) -> GridMesh {
    let heights = positions.iter().map(|&p| sample_height(field, p)).collect();
    let oriented = triangles
        .map(|[a, b, c]| {
            let corner = |i: u32| positions.get(i as usize).copied();
            match (corner(a), corner(b), corner(c)) {
                (Some(pa), Some(pb), Some(pc)) if up_area2(pa, pb, pc).is_some_and(|s| s < 0) => {
                    [a, c, b]
                }
                _ => [a, b, c],
            }
        })
        .collect();
    GridMesh {
        positions,
        heights,
        triangles: oriented,
    }
}

/// Number of distinct vertices the triangles of `mesh` use (every tool counted alike).
pub fn used_vertices(mesh: &GridMesh) -> usize {
    let mut used = vec![false; mesh.positions.len()];
    for &i in mesh.triangles.iter().flatten() {
        if let Some(slot) = used.get_mut(i as usize) {
            *slot = true;
        }
    }
    used.iter().filter(|&&u| u).count()
}

/// Martini's per-grid state: the triangle coordinates (per grid size) and the per-terrain
/// errors, built once and reused for every max error.
pub struct MartiniTerrain {
    martini: martini::Martini,
    tile: martini::Tile,
    /// Cells per side.
    cells: u32,
}

impl std::fmt::Debug for MartiniTerrain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MartiniTerrain")
            .field("cells", &self.cells)
            .finish_non_exhaustive()
    }
}

impl MartiniTerrain {
    /// Preprocesses a `(2^k + 1)²` field (martini panics on any other size, so that is
    /// checked first).
    pub fn new(field: &Heightfield, heights: &[f64]) -> Result<MartiniTerrain, PeerError> {
        let (width, height) = (field.width(), field.height());
        let cells = width - 1;
        if width != height || width < 3 || !cells.is_power_of_two() {
            return Err(PeerError::MartiniGrid { width, height });
        }
        let martini = martini::Martini::new(width);
        let side = width as usize;
        let tile = martini.create_terrain(|x, y| heights[y * side + x]);
        Ok(MartiniTerrain {
            martini,
            tile,
            cells,
        })
    }

    /// Martini's mesh for `max_error` (world units), as martini returns it: vertex
    /// positions as `(col, row)` pairs and triangle indices.
    pub fn mesh_raw(&mut self, max_error: f64) -> (Vec<f32>, Vec<u32>) {
        let cells = f64::from(self.cells);
        // Martini hands out u = col / cells and v = 1 − row / cells; give back the grid
        // position itself (exact in f32 below 2^24).
        let (vertices, indices, _uvs) =
            self.tile
                .construct_mesh(&mut self.martini, max_error, &mut |(u, v)| {
                    ((u * cells).round(), ((1.0 - v) * cells).round(), 0.0)
                });
        (vertices, indices)
    }

    /// Martini's mesh for `max_error` as a [`GridMesh`] of `field` (the field it was built
    /// from).
    pub fn mesh(&mut self, field: &Heightfield, max_error: f64) -> GridMesh {
        let (vertices, indices) = self.mesh_raw(max_error);
        let positions = vertices
            .chunks_exact(3)
            .map(|v| GridPos::new(v[0] as u32, v[1] as u32))
            .collect();
        grid_mesh(
            field,
            positions,
            indices.chunks_exact(3).map(|t| [t[0], t[1], t[2]]),
        )
    }
}

/// Delatin's raw result: points `(col, row)` and triangles indexing them.
pub type DelatinRaw = (Vec<(usize, usize)>, Vec<(usize, usize, usize)>);

/// Delatin's triangulation of the whole field for `max_error` (world units).
pub fn delatin_raw(
    field: &Heightfield,
    heights: &[f64],
    max_error: f64,
) -> Result<DelatinRaw, PeerError> {
    delatin::triangulate(
        heights,
        (field.width() as usize, field.height() as usize),
        delatin::Error(max_error),
    )
    .map_err(|e| PeerError::Delatin {
        message: e.to_string(),
    })
}

/// Delatin's raw result as a [`GridMesh`] of `field`.
pub fn delatin_mesh(field: &Heightfield, raw: &DelatinRaw) -> GridMesh {
    let (points, triangles) = raw;
    let positions = points
        .iter()
        .map(|&(x, y)| GridPos::new(x as u32, y as u32))
        .collect();
    grid_mesh(
        field,
        positions,
        triangles
            .iter()
            .map(|&(a, b, c)| [a as u32, b as u32, c as u32]),
    )
}

/// A registered terralod algorithm's view-independent mesh for `max_error`.
pub fn terralod_mesh(
    algorithm: &mut dyn LodAlgorithm,
    field: &Heightfield,
    max_error: f32,
) -> Result<GridMesh, PeerError> {
    let view = View::world_error(max_error)?;
    Ok(algorithm.select(&view).to_mesh(field))
}

/// Builds the registered algorithm `name` for `field` and `pyramid`, for world-error
/// views.
pub fn build_algorithm<'a>(
    name: &str,
    field: &'a Heightfield,
    pyramid: &'a Pyramid,
) -> Result<Box<dyn LodAlgorithm + 'a>, PeerError> {
    let entry =
        REGISTRY
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| PeerError::UnknownAlgorithm {
                name: name.to_string(),
            })?;
    // The comparison selects world-error views only.
    let options = LodOptions::default().with_world_error_only(true);
    Ok(entry.build(field, pyramid, &options)?)
}

/// Measured vertical error of `mesh` over every sample of `field` (the testkit oracle).
pub fn measure(field: &Heightfield, mesh: &GridMesh) -> Result<ErrorReport, PeerError> {
    Ok(measure_error(field, mesh, None)?)
}

/// One tool's result at one requested error, as measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Measured {
    pub requested_error: f64,
    pub vertices: usize,
    pub triangles: usize,
    pub measured_max_error: f64,
    pub measured_p99_error: f64,
    /// Data samples no triangle covers (0 for a full-coverage mesh).
    pub uncovered: u64,
}

impl Measured {
    pub fn of(field: &Heightfield, mesh: &GridMesh, requested: f64) -> Result<Self, PeerError> {
        let report = measure(field, mesh)?;
        Ok(Measured {
            requested_error: requested,
            vertices: used_vertices(mesh),
            triangles: mesh.triangles.len(),
            measured_max_error: report.world.max,
            measured_p99_error: report.world.p99,
            uncovered: report.uncovered,
        })
    }
}

/// The largest requested error (found by bisection over `[0, bound]`, `steps` halvings)
/// whose martini mesh measures at most `bound`, with that mesh's measurements. Martini's
/// mesh only refines as the requested error drops, and requested 0 is the full grid
/// (measured 0), so a result always exists.
pub fn calibrate_martini(
    terrain: &mut MartiniTerrain,
    field: &Heightfield,
    bound: f64,
    steps: u32,
) -> Result<Measured, PeerError> {
    let at = |terrain: &mut MartiniTerrain, requested: f64| {
        Measured::of(field, &terrain.mesh(field, requested), requested)
    };
    let first = at(terrain, bound)?;
    if first.measured_max_error <= bound {
        return Ok(first);
    }
    let mut best = at(terrain, 0.0)?;
    let (mut low, mut high) = (0.0, bound);
    for _ in 0..steps {
        let mid = 0.5 * (low + high);
        let result = at(terrain, mid)?;
        if result.measured_max_error <= bound {
            low = mid;
            best = result;
        } else {
            high = mid;
        }
    }
    Ok(best)
}

/// Median wall time of `runs` calls of `f` (at least one), and the last call's result.
pub fn median_time<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let start = Instant::now();
    let mut value = f();
    let mut times = vec![start.elapsed()];
    for _ in 1..runs {
        let start = Instant::now();
        value = f();
        times.push(start.elapsed());
    }
    times.sort_unstable();
    (times[times.len() / 2], value)
}

/// Vertex count of a curve of `(measured error, vertices)` points at `error`, interpolated
/// linearly in log-log; `None` outside the measured range or where an error is 0.
pub fn interpolate_vertices(curve: &[(f64, usize)], error: f64) -> Option<f64> {
    let mut points: Vec<(f64, f64)> = curve
        .iter()
        .filter(|(e, v)| *e > 0.0 && *v > 0)
        .map(|&(e, v)| (e.ln(), (v as f64).ln()))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    if error <= 0.0 {
        return None;
    }
    let x = error.ln();
    points.windows(2).find_map(|w| {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if x < x0 || x > x1 {
            return None;
        }
        let t = if x1 > x0 { (x - x0) / (x1 - x0) } else { 0.0 };
        Some((y0 + t * (y1 - y0)).exp())
    })
}

/// Triangles of a terralod view-independent mesh by the side (in cells) of the quadtree
/// node that drew them: a fan triangle spans half its node's side in at least one
/// direction, so the node side is twice the larger extent of the triangle's box.
pub fn triangles_by_node_side(mesh: &GridMesh) -> Vec<(u32, usize)> {
    let mut counts = std::collections::BTreeMap::new();
    for t in &mesh.triangles {
        let corners = t.map(|i| mesh.positions.get(i as usize).copied());
        let [Some(a), Some(b), Some(c)] = corners else {
            continue;
        };
        let extent = |f: fn(&GridPos) -> u32| {
            let v = [f(&a), f(&b), f(&c)];
            v.iter().max().copied().unwrap_or(0) - v.iter().min().copied().unwrap_or(0)
        };
        let side = 2 * extent(|p| p.col).max(extent(|p| p.row));
        *counts.entry(side).or_insert(0) += 1;
    }
    counts.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(side: u32) -> Heightfield {
        let values = (0..side * side).map(|i| (i % side) as f32).collect();
        Heightfield::from_f32(side, side, values).expect("valid field")
    }

    #[test]
    fn windows_copy_their_samples_and_must_fit() {
        let field = ramp(9);
        let window = cut_square(&field, 2, 1, 5).expect("fits");
        assert_eq!(window.raw(0, 0), 2.0);
        assert_eq!(window.raw(4, 4), 6.0);
        assert!(matches!(
            cut_square(&field, 5, 0, 5),
            Err(PeerError::Window { .. })
        ));
        assert!(matches!(
            cut_square(&field, u32::MAX, 0, 5),
            Err(PeerError::Window { .. })
        ));
    }

    #[test]
    fn martini_rejects_grids_it_would_panic_on_and_meshes_a_plane_exactly() {
        let odd = ramp(10);
        assert!(matches!(
            MartiniTerrain::new(&odd, &world_heights(&odd)),
            Err(PeerError::MartiniGrid { .. })
        ));
        let field = ramp(17);
        let mut terrain = MartiniTerrain::new(&field, &world_heights(&field)).expect("17");
        let mesh = terrain.mesh(&field, 0.0);
        let measured = Measured::of(&field, &mesh, 0.0).expect("oracle");
        assert_eq!(measured.uncovered, 0);
        assert_eq!(measured.measured_max_error, 0.0);
        assert_eq!(measured.vertices, 4, "a plane needs only its corners");
    }

    #[test]
    fn interpolation_is_log_log_and_stays_inside_the_curve() {
        let curve = [(1.0, 1000), (100.0, 10)];
        let mid = interpolate_vertices(&curve, 10.0).expect("inside");
        assert!((mid - 100.0).abs() < 1e-9);
        assert_eq!(interpolate_vertices(&curve, 0.5), None);
        assert_eq!(interpolate_vertices(&curve, 0.0), None);
    }
}
