//! Small deterministic heightfields and reference meshes for tests.
//!
//! Every field here is exact to describe in a test (planes, steps, one spike) or
//! reproducible from a seed (smooth random relief). The meshes are references, built
//! independently of every LOD algorithm: a regular grid at any stride, and a quadtree mesh
//! with or without stitched edges (a crack-free mixed-level mesh and its broken twin).

use crate::mesh_check::GridRect;
use terralod_core::{GridMesh, GridPos, Heightfield, HeightfieldError, WorldMapping};

fn from_fn(
    width: u32,
    height: u32,
    value: impl Fn(u32, u32) -> f32,
) -> Result<Heightfield, HeightfieldError> {
    terralod_core::heightfield::check_size(u64::from(width), u64::from(height), 1 << 32)?;
    let mut values = Vec::with_capacity(width as usize * height as usize);
    for row in 0..height {
        for col in 0..width {
            values.push(value(col, row));
        }
    }
    Heightfield::from_f32(width, height, values)
}

/// Every sample at `raw`.
pub fn plane(width: u32, height: u32, raw: f32) -> Result<Heightfield, HeightfieldError> {
    from_fn(width, height, |_, _| raw)
}

/// `raw = base + per_col * col + per_row * row`: any mesh of it has zero error (up to
/// rounding), so the coarsest mesh is the right one.
pub fn tilted_plane(
    width: u32,
    height: u32,
    base: f32,
    per_col: f32,
    per_row: f32,
) -> Result<Heightfield, HeightfieldError> {
    from_fn(width, height, |col, row| {
        base + per_col * col as f32 + per_row * row as f32
    })
}

/// A plane at `base` with one sample at `peak`: the smallest input that must force
/// refinement around one point. A position outside the field leaves a plain plane.
pub fn spike(
    width: u32,
    height: u32,
    base: f32,
    at: GridPos,
    peak: f32,
) -> Result<Heightfield, HeightfieldError> {
    from_fn(width, height, |col, row| {
        if GridPos::new(col, row) == at {
            peak
        } else {
            base
        }
    })
}

/// Terraces: `raw = floor(col / step_cols) * step_height`, cliffs one sample wide, like
/// 8-bit data.
pub fn steps(
    width: u32,
    height: u32,
    step_cols: u32,
    step_height: f32,
) -> Result<Heightfield, HeightfieldError> {
    let step_cols = step_cols.max(1);
    from_fn(width, height, |col, _| {
        (col / step_cols) as f32 * step_height
    })
}

/// SplitMix64: a tiny, well-mixed generator, so fixtures need no random crate.
pub(crate) fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A value in `[0, 1)` for a lattice point, from the seed.
fn lattice_value(seed: u64, octave: u32, i: i64, j: i64) -> f64 {
    let h = splitmix64(
        seed ^ splitmix64(u64::from(octave))
            ^ splitmix64((i as u64).wrapping_mul(0x1000_0000_01b3))
            ^ (j as u64).wrapping_mul(0x9e37_79b9),
    );
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Smooth random relief in `[0, amplitude]`, reproducible from `seed`: value noise (random
/// values on a lattice, smoothstep-interpolated) in three octaves of periods 16, 8 and 4
/// samples with halving weights. Pure arithmetic, so the same on every platform.
pub fn smooth_random(
    width: u32,
    height: u32,
    seed: u64,
    amplitude: f32,
) -> Result<Heightfield, HeightfieldError> {
    let smooth = |t: f64| t * t * (3.0 - 2.0 * t);
    from_fn(width, height, |col, row| {
        let (mut sum, mut weight, mut total) = (0.0, 1.0, 0.0);
        for (octave, period) in [16u32, 8, 4].into_iter().enumerate() {
            let (i, j) = (i64::from(col / period), i64::from(row / period));
            let fx = smooth(f64::from(col % period) / f64::from(period));
            let fy = smooth(f64::from(row % period) / f64::from(period));
            let v = |di, dj| lattice_value(seed, octave as u32, i + di, j + dj);
            let top = v(0, 0) + (v(1, 0) - v(0, 0)) * fx;
            let bottom = v(0, 1) + (v(1, 1) - v(0, 1)) * fx;
            sum += weight * (top + (bottom - top) * fy);
            total += weight;
            weight *= 0.5;
        }
        (sum / total * f64::from(amplitude)) as f32
    })
}

/// A plane at `base` with `count` random single-sample spikes of up to `amplitude` (either
/// sign), reproducible from `seed`.
pub fn random_spikes(
    width: u32,
    height: u32,
    seed: u64,
    count: u32,
    base: f32,
    amplitude: f32,
) -> Result<Heightfield, HeightfieldError> {
    let mut field_values = vec![base; width as usize * height as usize];
    let mut state = seed;
    for _ in 0..count {
        state = splitmix64(state);
        let index = (state % field_values.len().max(1) as u64) as usize;
        state = splitmix64(state);
        let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
        if let Some(v) = field_values.get_mut(index) {
            *v = base + ((unit * 2.0 - 1.0) * f64::from(amplitude)) as f32;
        }
    }
    Heightfield::from_f32(width, height, field_values)
}

/// World height a mesh vertex at `pos` should be drawn at: the sample's height computed in
/// `f64` and rounded once to `f32`; beyond the data, the repeated border.
pub fn sample_height(field: &Heightfield, pos: GridPos) -> f32 {
    let m = field.mapping();
    let raw = field.raw_clamped(pos.col, pos.row);
    (f64::from(raw) * f64::from(m.height_scale) + f64::from(m.height_offset)) as f32
}

/// The grid lines `from, from + step, …` up to and including `to`.
fn grid_lines(from: u32, to: u32, step: u32) -> Vec<u32> {
    let mut lines: Vec<u32> = (from..to).step_by(step.max(1) as usize).collect();
    lines.push(to);
    lines
}

/// A regular mesh of `region` with a vertex every `step` samples (plus the last row and
/// column when the size is not a multiple), two triangles per cell, counter-clockwise seen
/// from above, heights from [`sample_height`]. `step == 1` over [`GridRect::of_field`] is the
/// full-resolution mesh, which has zero error.
pub fn grid_mesh(field: &Heightfield, region: GridRect, step: u32) -> GridMesh {
    let cols = grid_lines(region.col0, region.col1, step);
    let rows = grid_lines(region.row0, region.row1, step);
    let mut mesh = GridMesh::default();
    for &row in &rows {
        for &col in &cols {
            let pos = GridPos::new(col, row);
            mesh.push_vertex(pos, sample_height(field, pos));
        }
    }
    let n = cols.len() as u32;
    for r in 0..rows.len() as u32 - 1 {
        for c in 0..n - 1 {
            let (top_left, top_right) = (r * n + c, r * n + c + 1);
            let (bottom_left, bottom_right) = (top_left + n, top_right + n);
            mesh.triangles.push([top_left, bottom_left, bottom_right]);
            mesh.triangles.push([top_left, bottom_right, top_right]);
        }
    }
    mesh
}

/// The full-resolution mesh of the whole field.
pub fn full_grid_mesh(field: &Heightfield) -> GridMesh {
    grid_mesh(field, GridRect::of_field(field), 1)
}

/// A mixed-level quadtree mesh over the padded square `0..padded_side` of `field`.
///
/// Nodes are split while `split(node_rect)` says so (down to one cell). Each leaf is drawn
/// as a fan around its centre through its corners and, on each edge:
/// - `stitched == true`: every leaf corner lying on that edge (the neighbour's finer
///   vertices), so the mesh is crack-free at any level difference;
/// - `stitched == false`: only the edge midpoint, the 8-triangle fan of article 000 without
///   stitching, which opens T-junctions wherever leaves of sizes ≥ 2 differ.
///
/// A leaf of one cell is two triangles. Vertices are shared (one per position).
pub fn quadtree_mesh(
    field: &Heightfield,
    stitched: bool,
    mut split: impl FnMut(GridRect) -> bool,
) -> GridMesh {
    let side = field.padded_side();
    let mut leaves: Vec<(u32, u32, u32)> = Vec::new();
    let mut stack = vec![(0u32, 0u32, side - 1)];
    while let Some((col, row, size)) = stack.pop() {
        if size > 1 && split(GridRect::new(col, row, col + size, row + size)) {
            let half = size / 2;
            stack.extend([
                (col, row, half),
                (col + half, row, half),
                (col, row + half, half),
                (col + half, row + half, half),
            ]);
        } else {
            leaves.push((col, row, size));
        }
    }
    leaves.sort_unstable_by_key(|&(col, row, _)| (row, col));

    let cells = side as usize * side as usize;
    let mut corner = vec![false; cells];
    for &(col, row, size) in &leaves {
        for (c, r) in [
            (col, row),
            (col + size, row),
            (col, row + size),
            (col + size, row + size),
        ] {
            corner[r as usize * side as usize + c as usize] = true;
        }
    }
    let mut mesh = GridMesh::default();
    let mut vertex_of = vec![u32::MAX; cells];
    let mut vertex = |mesh: &mut GridMesh, pos: GridPos| {
        let slot = &mut vertex_of[pos.row as usize * side as usize + pos.col as usize];
        if *slot == u32::MAX {
            *slot = mesh.push_vertex(pos, sample_height(field, pos));
        }
        *slot
    };
    let mut ring: Vec<GridPos> = Vec::new();
    for &(col, row, size) in &leaves {
        let (c1, r1) = (col + size, row + size);
        if size == 1 {
            let [a, b, c, d] = [(col, row), (col, r1), (c1, r1), (c1, row)]
                .map(|(c, r)| vertex(&mut mesh, GridPos::new(c, r)));
            mesh.triangles.extend([[a, b, c], [a, c, d]]);
            continue;
        }
        // Walk the boundary counter-clockwise seen from above: down the left edge, right
        // along the bottom, up the right edge, left along the top.
        ring.clear();
        let keep = |c: u32, r: u32, k: u32| {
            if stitched {
                corner[r as usize * side as usize + c as usize]
            } else {
                k == 0 || k == size / 2
            }
        };
        for k in 0..size {
            if keep(col, row + k, k) {
                ring.push(GridPos::new(col, row + k));
            }
        }
        for k in 0..size {
            if keep(col + k, r1, k) {
                ring.push(GridPos::new(col + k, r1));
            }
        }
        for k in 0..size {
            if keep(c1, r1 - k, k) {
                ring.push(GridPos::new(c1, r1 - k));
            }
        }
        for k in 0..size {
            if keep(c1 - k, row, k) {
                ring.push(GridPos::new(c1 - k, row));
            }
        }
        let centre = vertex(&mut mesh, GridPos::new(col + size / 2, row + size / 2));
        for i in 0..ring.len() {
            let a = vertex(&mut mesh, ring[i]);
            let b = vertex(&mut mesh, ring[(i + 1) % ring.len()]);
            mesh.triangles.push([centre, a, b]);
        }
    }
    mesh
}

/// A mesh with a known T-junction, the defect the checker exists to catch: a coarse 2 × 2
/// quad (two triangles over (0..2, 0..2)) beside two fine 1 × 1 quads over (2..3, 0..2),
/// so the coarse edge (2,0)-(2,2) faces the fine vertex (2,1) (vertex 4). Heights are 0.
pub fn t_junction_mesh() -> GridMesh {
    let positions = [
        (0, 0),
        (0, 2),
        (2, 2),
        (2, 0),
        (2, 1),
        (3, 0),
        (3, 1),
        (3, 2),
    ];
    GridMesh {
        positions: positions.iter().map(|&(c, r)| GridPos::new(c, r)).collect(),
        heights: vec![0.0; positions.len()],
        triangles: vec![
            [0, 1, 2],
            [0, 2, 3],
            // fine quad (2,0)-(3,1)
            [3, 4, 6],
            [3, 6, 5],
            // fine quad (2,1)-(3,2)
            [4, 2, 7],
            [4, 7, 6],
        ],
    }
}

/// The same samples with world heights equal to the raw values (sign kept, no offset), so
/// f32 mesh heights are exact and any error an oracle finds is the algorithm's.
pub fn exact_heights(field: Heightfield) -> Heightfield {
    let mapping = field.mapping();
    field
        .with_mapping(WorldMapping {
            cell_size: mapping.cell_size,
            height_scale: mapping.height_scale.signum(),
            height_offset: 0.0,
        })
        .expect("a valid mapping stays valid")
}
