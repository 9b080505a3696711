//! Mesh checker oracle: exact integer topology and geometry checks of a [`GridMesh`].
//!
//! [`check_mesh`] guarantees, in exact `i64` arithmetic on grid positions (no floating
//! point anywhere), that a mesh it passes as watertight has:
//!
//! - only triangles whose indices are in range and whose positions are below
//!   [`MAX_GRID_COORD`](crate::MAX_GRID_COORD);
//! - no degenerate (zero-area) and no flipped (clockwise seen from above) triangle; the sign
//!   convention is derived in the docs of [`up_area2`](crate::up_area2);
//! - every edge used at most twice, and then once in each direction (manifold, consistently
//!   wound);
//! - no boundary edge that overlaps another boundary edge along a segment of positive length
//!   (this is how a T-junction or a crack between levels shows), and no vertex lying inside
//!   another triangle's edge (a T-vertex);
//! - no two triangles whose interiors intersect;
//! - no two vertices at one grid position drawn at different heights (a vertical crack);
//! - with a region: every boundary edge on the region's border, no triangle outside it and
//!   a covered area equal to the region's.
//!
//! Edges are matched by grid position, not by vertex index: two vertices at one position
//! with the same height draw the same point, so they close the surface; they are counted in
//! [`MeshReport::duplicate_vertices`] for algorithms that promise a shared vertex buffer,
//! but are not a defect. With the same position and different heights they are a defect
//! ([`MeshReport::split_vertices`]).
//!
//! Without a region only the local checks run: a view-dependent mesh has legitimate holes
//! where nodes were culled, so boundary edges that match nothing are reported
//! ([`MeshReport::open_edges`]) but are not defects; cracks and T-vertices still are.

use crate::grid_math::{Pt, gcd, up_area2};
use std::collections::HashSet;
use std::fmt::{self, Write as _};
use terralod_core::{GridMesh, GridPos, Heightfield};

/// How many examples of each kind of finding a report keeps.
pub const EXAMPLES_KEPT: usize = 6;

/// How many findings of one kind there are, with the first few as examples.
#[derive(Clone, Debug, PartialEq)]
pub struct Findings<T> {
    pub count: u64,
    pub examples: Vec<T>,
}

impl<T> Default for Findings<T> {
    fn default() -> Self {
        Self {
            count: 0,
            examples: Vec::new(),
        }
    }
}

impl<T> Findings<T> {
    /// Counts one more finding, keeping it as an example while there are few.
    pub fn push(&mut self, item: T) {
        self.count += 1;
        if self.examples.len() < EXAMPLES_KEPT {
            self.examples.push(item);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// An inclusive box of grid positions: columns `col0..=col1`, rows `row0..=row1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GridRect {
    pub col0: u32,
    pub row0: u32,
    pub col1: u32,
    pub row1: u32,
}

impl GridRect {
    pub const fn new(col0: u32, row0: u32, col1: u32, row1: u32) -> Self {
        Self {
            col0,
            row0,
            col1,
            row1,
        }
    }

    /// The box of every sample of `field`: what a full, unculled mesh must cover.
    pub fn of_field(field: &Heightfield) -> Self {
        Self::new(0, 0, field.width() - 1, field.height() - 1)
    }

    /// The square `0..=side-1` of a padded (2^n + 1) grid.
    pub const fn square(side: u32) -> Self {
        Self::new(0, 0, side.saturating_sub(1), side.saturating_sub(1))
    }

    pub fn contains(&self, pos: GridPos) -> bool {
        (self.col0..=self.col1).contains(&pos.col) && (self.row0..=self.row1).contains(&pos.row)
    }

    /// Twice the area of the box in grid cells (0 when it is empty or flat).
    pub fn area2(&self) -> i128 {
        let cols = i128::from(self.col1) - i128::from(self.col0);
        let rows = i128::from(self.row1) - i128::from(self.row0);
        if cols <= 0 || rows <= 0 {
            0
        } else {
            2 * cols * rows
        }
    }

    /// Whether segment `a–b` lies on one side of the box's border.
    fn border_holds(&self, a: GridPos, b: GridPos) -> bool {
        if !self.contains(a) || !self.contains(b) {
            return false;
        }
        (a.col == b.col && (a.col == self.col0 || a.col == self.col1))
            || (a.row == b.row && (a.row == self.row0 || a.row == self.row1))
    }
}

/// Why a triangle could not be checked at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidReason {
    /// A vertex index at or beyond the vertex count.
    IndexOutOfRange { index: u32, vertices: usize },
    /// A position at or beyond [`MAX_GRID_COORD`](crate::MAX_GRID_COORD).
    CoordinateTooLarge { pos: GridPos },
}

/// A triangle that could not be checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidTriangle {
    pub triangle: usize,
    pub indices: [u32; 3],
    pub reason: InvalidReason,
}

/// A triangle by its index in the mesh and its corners, in the mesh's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TriangleAt {
    pub triangle: usize,
    pub corners: [GridPos; 3],
}

/// Two vertices at one grid position.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DuplicateVertex {
    pub pos: GridPos,
    pub first: u32,
    pub second: u32,
    pub first_height: f32,
    pub second_height: f32,
}

/// An undirected edge `a–b` (`a` before `b` in row-major order) and how often triangles use
/// it in each direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeUse {
    pub a: GridPos,
    pub b: GridPos,
    /// Uses as `a → b` in a triangle's winding.
    pub forward: u32,
    /// Uses as `b → a`.
    pub backward: u32,
}

/// A vertex of the mesh lying strictly inside an edge of another triangle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TVertex {
    pub vertex: GridPos,
    pub edge: [GridPos; 2],
}

/// Two triangles whose interiors intersect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overlap {
    pub first: TriangleAt,
    pub second: TriangleAt,
}

/// How a mesh covers the region it was asked to cover. Areas are doubled so that they stay
/// integers (a grid triangle of two unit legs has `area2 == 1`).
#[derive(Clone, Debug, PartialEq)]
pub struct Coverage {
    pub region: GridRect,
    pub region_area2: i128,
    /// Sum of the areas of the (non-degenerate) triangles lying inside the region.
    pub covered_area2: i128,
    /// `region_area2 - covered_area2`: exact uncovered area when no triangles overlap
    /// (checked in the same report); negative when overlaps cover some area twice.
    pub uncovered_area2: i128,
    /// Triangles with a corner outside the region (not counted in `covered_area2`).
    pub outside: Findings<TriangleAt>,
}

/// Everything [`check_mesh`] found. Defects make [`MeshReport::is_watertight`] false; the
/// fields documented as information do not.
#[derive(Clone, Debug, PartialEq)]
pub struct MeshReport {
    pub vertex_count: usize,
    pub triangle_count: usize,
    /// Defect: `(positions, heights)` when the two vertex arrays differ in length.
    pub height_count_mismatch: Option<(usize, usize)>,
    /// Defect: vertex indices whose height is NaN or infinite.
    pub non_finite_heights: Findings<u32>,
    /// Defect: triangles with an index out of range or a position too large to check.
    pub invalid_triangles: Findings<InvalidTriangle>,
    /// Information: pairs of vertices at one grid position (each extra vertex counts once).
    pub duplicate_vertices: Findings<DuplicateVertex>,
    /// Defect: duplicates drawn at different heights, a vertical crack.
    pub split_vertices: Findings<DuplicateVertex>,
    /// Information: vertices no checked triangle uses.
    pub unused_vertices: u64,
    /// Defect: triangles of zero area.
    pub degenerate: Findings<TriangleAt>,
    /// Defect: triangles wound clockwise seen from above (normal down).
    pub flipped: Findings<TriangleAt>,
    /// Defect: edges used more than twice, or twice in the same direction.
    pub non_manifold_edges: Findings<EdgeUse>,
    /// Information: every edge used exactly once.
    pub boundary_edges: u64,
    /// Information: boundary edges on the region's border (0 without a region).
    pub region_border_edges: u64,
    /// Defect: boundary edges overlapping another boundary edge (a crack or T-junction).
    pub crack_edges: Findings<EdgeUse>,
    /// Boundary edges that are neither cracks nor on the region's border: a defect (a hole)
    /// when a region is given, information (e.g. a culled area) without one.
    pub open_edges: Findings<EdgeUse>,
    /// Defect: vertices inside another triangle's edge.
    pub t_vertices: Findings<TVertex>,
    /// Defect: pairs of triangles whose interiors intersect.
    pub overlaps: Findings<Overlap>,
    /// Coverage of the region, when one was given.
    pub coverage: Option<Coverage>,
}

impl MeshReport {
    /// True when the mesh has no defect at all (see the field docs for what counts).
    pub fn is_watertight(&self) -> bool {
        self.defects().is_empty()
    }

    /// One readable line per kind of defect found, empty for a watertight mesh.
    pub fn defects(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some((positions, heights)) = self.height_count_mismatch {
            lines.push(format!(
                "{positions} positions but {heights} heights: vertex arrays differ in length"
            ));
        }
        describe(
            &mut lines,
            "non-finite vertex heights",
            &self.non_finite_heights,
            |i| format!("vertex {i}"),
        );
        describe(
            &mut lines,
            "invalid triangles",
            &self.invalid_triangles,
            |t| match t.reason {
                InvalidReason::IndexOutOfRange { index, vertices } => format!(
                    "#{} {:?}: index {index} >= {vertices} vertices",
                    t.triangle, t.indices
                ),
                InvalidReason::CoordinateTooLarge { pos } => format!(
                    "#{} {:?}: position {} too large",
                    t.triangle,
                    t.indices,
                    pos_text(pos)
                ),
            },
        );
        describe(
            &mut lines,
            "vertices at one position with different heights (vertical cracks)",
            &self.split_vertices,
            |d| {
                format!(
                    "{}: vertex {} at {} vs vertex {} at {}",
                    pos_text(d.pos),
                    d.first,
                    d.first_height,
                    d.second,
                    d.second_height
                )
            },
        );
        describe(
            &mut lines,
            "degenerate triangles",
            &self.degenerate,
            triangle_text,
        );
        describe(
            &mut lines,
            "flipped triangles (clockwise seen from above)",
            &self.flipped,
            triangle_text,
        );
        describe(
            &mut lines,
            "non-manifold edges (used > 2 times or twice in one direction)",
            &self.non_manifold_edges,
            edge_text,
        );
        describe(
            &mut lines,
            "crack edges (boundary edges overlapping another boundary edge: T-junction)",
            &self.crack_edges,
            edge_text,
        );
        describe(
            &mut lines,
            "T-vertices (vertex inside another triangle's edge)",
            &self.t_vertices,
            |t| {
                format!(
                    "{} inside {}-{}",
                    pos_text(t.vertex),
                    pos_text(t.edge[0]),
                    pos_text(t.edge[1])
                )
            },
        );
        describe(
            &mut lines,
            "overlapping triangle pairs",
            &self.overlaps,
            |o| {
                format!(
                    "{} and {}",
                    triangle_text(&o.first),
                    triangle_text(&o.second)
                )
            },
        );
        if let Some(coverage) = &self.coverage {
            describe(
                &mut lines,
                "open boundary edges inside the region (holes)",
                &self.open_edges,
                edge_text,
            );
            describe(
                &mut lines,
                "triangles outside the region",
                &coverage.outside,
                triangle_text,
            );
            if coverage.uncovered_area2 != 0 {
                lines.push(format!(
                    "region {:?} has doubled area {} but triangles inside it cover {} \
                     (uncovered doubled area {})",
                    coverage.region,
                    coverage.region_area2,
                    coverage.covered_area2,
                    coverage.uncovered_area2
                ));
            }
        }
        lines
    }

    /// Panics with every defect listed when the mesh is not watertight.
    #[track_caller]
    pub fn assert_ok(&self) {
        let defects = self.defects();
        if !defects.is_empty() {
            panic!(
                "mesh of {} vertices and {} triangles is not watertight:\n  - {}",
                self.vertex_count,
                self.triangle_count,
                defects.join("\n  - ")
            );
        }
    }
}

impl fmt::Display for MeshReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} vertices ({} duplicated, {} unused), {} triangles, {} boundary edges \
             ({} on the region border, {} open)",
            self.vertex_count,
            self.duplicate_vertices.count,
            self.unused_vertices,
            self.triangle_count,
            self.boundary_edges,
            self.region_border_edges,
            self.open_edges.count
        )?;
        let defects = self.defects();
        if defects.is_empty() {
            write!(f, "watertight")
        } else {
            write!(f, "defects:\n  - {}", defects.join("\n  - "))
        }
    }
}

fn pos_text(p: GridPos) -> String {
    format!("({},{})", p.col, p.row)
}

fn triangle_text(t: &TriangleAt) -> String {
    format!(
        "#{} [{} {} {}]",
        t.triangle,
        pos_text(t.corners[0]),
        pos_text(t.corners[1]),
        pos_text(t.corners[2])
    )
}

fn edge_text(e: &EdgeUse) -> String {
    format!(
        "{}-{} (used {}x forward, {}x backward)",
        pos_text(e.a),
        pos_text(e.b),
        e.forward,
        e.backward
    )
}

fn describe<T>(
    lines: &mut Vec<String>,
    what: &str,
    findings: &Findings<T>,
    show: impl Fn(&T) -> String,
) {
    if findings.is_empty() {
        return;
    }
    let mut line = format!("{} {what}, e.g.", findings.count);
    for (i, item) in findings.examples.iter().enumerate() {
        let sep = if i == 0 { " " } else { "; " };
        let _ = write!(line, "{sep}{}", show(item));
    }
    lines.push(line);
}

/// Checks a mesh over the grid in exact integer arithmetic.
///
/// Guarantee: when [`MeshReport::is_watertight`] holds, every triangle is valid,
/// counter-clockwise seen from above and of non-zero area; every edge is shared by at most
/// two triangles in opposite directions; no vertex lies inside another edge and no two
/// boundary edges overlap (no T-junction, no crack between levels); no two triangles
/// overlap; vertices at one position are drawn at one height; and, with `region`, the
/// triangles tile exactly that box (every boundary edge on its border, no area missing,
/// nothing outside). Without `region` only the local checks run, so culled holes pass.
/// Details in the module docs.
///
/// Cost: `O(n log n)` in the triangle count `n` for the edge checks, plus the lattice points
/// on the edges for T-vertices, plus the overlap test, which buckets triangles on a uniform
/// grid sized so that the bucket entries stay `O(n)`. About a second for 10^6 triangles in
/// release.
pub fn check_mesh(mesh: &GridMesh, region: Option<GridRect>) -> MeshReport {
    let mut report = MeshReport {
        vertex_count: mesh.positions.len(),
        triangle_count: mesh.triangles.len(),
        height_count_mismatch: (mesh.positions.len() != mesh.heights.len())
            .then_some((mesh.positions.len(), mesh.heights.len())),
        non_finite_heights: Findings::default(),
        invalid_triangles: Findings::default(),
        duplicate_vertices: Findings::default(),
        split_vertices: Findings::default(),
        unused_vertices: 0,
        degenerate: Findings::default(),
        flipped: Findings::default(),
        non_manifold_edges: Findings::default(),
        boundary_edges: 0,
        region_border_edges: 0,
        crack_edges: Findings::default(),
        open_edges: Findings::default(),
        t_vertices: Findings::default(),
        overlaps: Findings::default(),
        coverage: None,
    };
    for (i, h) in mesh.heights.iter().enumerate() {
        if !h.is_finite() {
            report.non_finite_heights.push(i as u32);
        }
    }
    check_duplicates(mesh, &mut report);

    let live = collect_live_triangles(mesh, &mut report);
    let mut used = vec![false; mesh.positions.len()];
    for t in &live {
        for &i in &mesh.triangles[t.index] {
            used[i as usize] = true;
        }
    }
    report.unused_vertices = used.iter().filter(|&&u| !u).count() as u64;

    let edges = check_edges(&live, region, &mut report);
    check_t_vertices(&live, &edges, &mut report);
    let ccw: Vec<[Pt; 3]> = live.iter().map(|t| t.ccw()).collect();
    for_each_overlap(&ccw, |i, j| {
        report.overlaps.push(Overlap {
            first: live[i].at(),
            second: live[j].at(),
        });
    });
    if let Some(region) = region {
        report.coverage = Some(coverage(&live, region));
    }
    report
}

/// A checkable, non-degenerate triangle: its index, corners in mesh order and signed area.
struct LiveTriangle {
    index: usize,
    corners: [Pt; 3],
    area2: i64,
}

impl LiveTriangle {
    /// Corners in counter-clockwise order (flipped triangles reversed), for the geometric
    /// tests that do not care about winding.
    fn ccw(&self) -> [Pt; 3] {
        let [a, b, c] = self.corners;
        if self.area2 > 0 { [a, b, c] } else { [a, c, b] }
    }

    fn at(&self) -> TriangleAt {
        TriangleAt {
            triangle: self.index,
            corners: self.corners.map(Pt::to_grid),
        }
    }
}

fn pos_key(p: Pt) -> u64 {
    ((p.row as u64) << 32) | p.col as u64
}

fn key_pt(key: u64) -> Pt {
    Pt {
        col: (key & 0xffff_ffff) as i64,
        row: (key >> 32) as i64,
    }
}

fn check_duplicates(mesh: &GridMesh, report: &mut MeshReport) {
    let mut order: Vec<u32> = (0..mesh.positions.len() as u32).collect();
    order.sort_unstable_by_key(|&i| (mesh.positions[i as usize], i));
    let height = |i: u32| mesh.heights.get(i as usize).copied().unwrap_or(f32::NAN);
    for run in order.chunk_by(|&a, &b| mesh.positions[a as usize] == mesh.positions[b as usize]) {
        let first = run[0];
        for &second in &run[1..] {
            let dup = DuplicateVertex {
                pos: mesh.positions[first as usize],
                first,
                second,
                first_height: height(first),
                second_height: height(second),
            };
            report.duplicate_vertices.push(dup);
            // Equal values draw the same point (+0 and -0 included); identical NaNs are
            // left to `non_finite_heights`, a NaN next to a number is a split.
            if dup.first_height.to_bits() != dup.second_height.to_bits()
                && dup.first_height != dup.second_height
            {
                report.split_vertices.push(dup);
            }
        }
    }
}

/// Validates indices and coordinates, sorts out degenerate and flipped triangles, and
/// returns every triangle with a non-zero area.
fn collect_live_triangles(mesh: &GridMesh, report: &mut MeshReport) -> Vec<LiveTriangle> {
    let mut live = Vec::with_capacity(mesh.triangles.len());
    'triangles: for (index, &indices) in mesh.triangles.iter().enumerate() {
        let mut corners = [Pt { col: 0, row: 0 }; 3];
        for (corner, &i) in corners.iter_mut().zip(&indices) {
            let Some(&pos) = mesh.positions.get(i as usize) else {
                report.invalid_triangles.push(InvalidTriangle {
                    triangle: index,
                    indices,
                    reason: InvalidReason::IndexOutOfRange {
                        index: i,
                        vertices: mesh.positions.len(),
                    },
                });
                continue 'triangles;
            };
            let Some(p) = Pt::from_grid(pos) else {
                report.invalid_triangles.push(InvalidTriangle {
                    triangle: index,
                    indices,
                    reason: InvalidReason::CoordinateTooLarge { pos },
                });
                continue 'triangles;
            };
            *corner = p;
        }
        let area2 = up_area2(corners[0], corners[1], corners[2]);
        let triangle = LiveTriangle {
            index,
            corners,
            area2,
        };
        match area2.signum() {
            0 => report.degenerate.push(triangle.at()),
            -1 => {
                report.flipped.push(triangle.at());
                live.push(triangle);
            }
            _ => live.push(triangle),
        }
    }
    live
}

/// An undirected edge as two packed positions (`lo < hi`) and its use counts.
struct Edge {
    lo: u64,
    hi: u64,
    forward: u32,
    backward: u32,
}

impl Edge {
    fn to_use(&self) -> EdgeUse {
        EdgeUse {
            a: key_pt(self.lo).to_grid(),
            b: key_pt(self.hi).to_grid(),
            forward: self.forward,
            backward: self.backward,
        }
    }
}

/// Counts edge uses, reports non-manifold edges, classifies boundary edges and returns the
/// distinct undirected edges.
fn check_edges(
    live: &[LiveTriangle],
    region: Option<GridRect>,
    report: &mut MeshReport,
) -> Vec<Edge> {
    // One u128 per directed use: low end, high end, and the direction in the lowest bit
    // (positions take 62 bits), so that one integer sort groups the uses of each edge.
    let mut directed: Vec<u128> = Vec::with_capacity(live.len() * 3);
    for t in live {
        let [a, b, c] = t.corners.map(pos_key);
        for (from, to) in [(a, b), (b, c), (c, a)] {
            let (lo, hi) = (from.min(to), from.max(to));
            directed.push((u128::from(lo) << 64) | (u128::from(hi) << 1) | u128::from(from < to));
        }
    }
    directed.sort_unstable();
    let mut edges = Vec::with_capacity(directed.len() / 2 + 1);
    for run in directed.chunk_by(|x, y| x >> 1 == y >> 1) {
        let forward = run.iter().filter(|&&e| e & 1 == 1).count() as u32;
        edges.push(Edge {
            lo: (run[0] >> 64) as u64,
            hi: (run[0] as u64) >> 1,
            forward,
            backward: run.len() as u32 - forward,
        });
    }

    let mut boundary: Vec<&Edge> = Vec::new();
    for e in &edges {
        match (e.forward, e.backward) {
            (1, 0) | (0, 1) => boundary.push(e),
            (1, 1) => {}
            _ => report.non_manifold_edges.push(e.to_use()),
        }
    }
    report.boundary_edges = boundary.len() as u64;

    let cracked = overlapping_collinear(&boundary);
    for (e, cracked) in boundary.iter().zip(cracked) {
        let edge = e.to_use();
        if cracked {
            report.crack_edges.push(edge);
        } else if region.is_some_and(|r| r.border_holds(edge.a, edge.b)) {
            report.region_border_edges += 1;
        } else {
            report.open_edges.push(edge);
        }
    }
    edges
}

/// For each edge, whether it overlaps another one of the list along a segment of positive
/// length. Edges are grouped by their supporting line (reduced direction and offset, exact),
/// then swept along the line.
fn overlapping_collinear(edges: &[&Edge]) -> Vec<bool> {
    // (direction col, direction row, offset, start, end, edge)
    let mut on_lines: Vec<(i64, i64, i64, i64, i64, usize)> = edges
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let (p, q) = (key_pt(e.lo), key_pt(e.hi));
            let (dc, dr) = (q.col - p.col, q.row - p.row);
            let g = gcd(dc.abs(), dr.abs()).max(1);
            let (mut uc, mut ur) = (dc / g, dr / g);
            if uc < 0 || (uc == 0 && ur < 0) {
                (uc, ur) = (-uc, -ur);
            }
            let offset = uc * p.row - ur * p.col;
            let (tp, tq) = (uc * p.col + ur * p.row, uc * q.col + ur * q.row);
            (uc, ur, offset, tp.min(tq), tp.max(tq), i)
        })
        .collect();
    on_lines.sort_unstable();
    let mut overlapping = vec![false; edges.len()];
    for line in on_lines.chunk_by(|x, y| (x.0, x.1, x.2) == (y.0, y.1, y.2)) {
        // Sweep by start; an edge starting before the furthest end seen overlaps the edge
        // owning that end (and, by induction, every overlapping pair gets both marked).
        let (mut reach, mut owner) = (i64::MIN, usize::MAX);
        for &(_, _, _, start, end, i) in line {
            if start < reach {
                overlapping[i] = true;
                overlapping[owner] = true;
            }
            if end > reach {
                (reach, owner) = (end, i);
            }
        }
    }
    overlapping
}

/// A set of grid positions: a bitmap over the bounding box when it is small enough, a hash
/// set otherwise.
enum PositionSet {
    Bitmap { min: Pt, width: i64, bits: Vec<u64> },
    Hashed(HashSet<u64>),
}

impl PositionSet {
    const MAX_BITMAP_BITS: i64 = 1 << 28;

    fn new(points: impl Iterator<Item = Pt> + Clone) -> Self {
        let (mut min, mut max) = (
            Pt {
                col: i64::MAX,
                row: i64::MAX,
            },
            Pt {
                col: i64::MIN,
                row: i64::MIN,
            },
        );
        for p in points.clone() {
            min = Pt {
                col: min.col.min(p.col),
                row: min.row.min(p.row),
            };
            max = Pt {
                col: max.col.max(p.col),
                row: max.row.max(p.row),
            };
        }
        let (width, height) = (max.col - min.col + 1, max.row - min.row + 1);
        if width > 0 && height > 0 && width.saturating_mul(height) <= Self::MAX_BITMAP_BITS {
            let mut bits = vec![0u64; (width * height) as usize / 64 + 1];
            for p in points {
                let i = ((p.row - min.row) * width + (p.col - min.col)) as usize;
                bits[i / 64] |= 1 << (i % 64);
            }
            PositionSet::Bitmap { min, width, bits }
        } else {
            PositionSet::Hashed(points.map(pos_key).collect())
        }
    }

    /// Whether `p` is in the set; `p` must lie in the bounding box of the set's points (as
    /// the lattice points inside an edge between two of them do).
    fn contains(&self, p: Pt) -> bool {
        match self {
            PositionSet::Bitmap { min, width, bits } => {
                let i = ((p.row - min.row) * width + (p.col - min.col)) as usize;
                bits[i / 64] & (1 << (i % 64)) != 0
            }
            PositionSet::Hashed(set) => set.contains(&pos_key(p)),
        }
    }
}

/// Reports every vertex lying strictly inside an edge: walks the lattice points inside each
/// distinct edge (`gcd(|dc|, |dr|) - 1` of them) and looks them up among the vertices.
fn check_t_vertices(live: &[LiveTriangle], edges: &[Edge], report: &mut MeshReport) {
    if live.is_empty() {
        return;
    }
    let vertices = PositionSet::new(live.iter().flat_map(|t| t.corners));
    for e in edges {
        let (p, q) = (key_pt(e.lo), key_pt(e.hi));
        let (dc, dr) = (q.col - p.col, q.row - p.row);
        let g = gcd(dc.abs(), dr.abs());
        let (uc, ur) = (dc / g, dr / g);
        for k in 1..g {
            let x = Pt {
                col: p.col + k * uc,
                row: p.row + k * ur,
            };
            if vertices.contains(x) {
                report.t_vertices.push(TVertex {
                    vertex: x.to_grid(),
                    edge: [p.to_grid(), q.to_grid()],
                });
            }
        }
    }
}

/// Whether the interiors of two counter-clockwise triangles intersect. Exact separating-axis
/// test: the interiors of two convex polygons are disjoint exactly when one polygon lies in
/// the closed outer half-plane of an edge of the other (the edges of their Minkowski
/// difference are parallel to their edges).
pub(crate) fn interiors_overlap(a: &[Pt; 3], b: &[Pt; 3]) -> bool {
    let separates = |t: &[Pt; 3], other: &[Pt; 3]| {
        (0..3).any(|k| {
            let (p, q) = (t[k], t[(k + 1) % 3]);
            other.iter().all(|&v| up_area2(p, q, v) <= 0)
        })
    };
    !separates(a, b) && !separates(b, a)
}

/// Calls `found(i, j)` (with `i < j`) once for every pair of counter-clockwise triangles
/// whose interiors intersect.
///
/// Triangles are bucketed on a uniform grid of cells of side `s` (a power of two), each
/// into every cell its open bounding box touches. `s` is the smallest that keeps the number
/// of entries and cells within `4 n`, so that a valid mesh (whose triangles do not overlap)
/// puts few triangles in each cell. A pair is tested only in the first cell both boxes
/// touch, so it is reported once.
pub(crate) fn for_each_overlap(triangles: &[[Pt; 3]], mut found: impl FnMut(usize, usize)) {
    let n = triangles.len();
    if n < 2 {
        return;
    }
    let boxes: Vec<[i64; 4]> = triangles
        .iter()
        .map(|t| {
            let cols = t.map(|p| p.col);
            let rows = t.map(|p| p.row);
            [
                cols.into_iter().min().unwrap_or(0),
                rows.into_iter().min().unwrap_or(0),
                cols.into_iter().max().unwrap_or(0),
                rows.into_iter().max().unwrap_or(0),
            ]
        })
        .collect();
    let origin_col = boxes.iter().map(|b| b[0]).min().unwrap_or(0);
    let origin_row = boxes.iter().map(|b| b[1]).min().unwrap_or(0);
    let extent_col = boxes.iter().map(|b| b[2]).max().unwrap_or(0) - origin_col;
    let extent_row = boxes.iter().map(|b| b[3]).max().unwrap_or(0) - origin_row;
    // Cells touched by the open box (min, max): floor(min / s) ..= ceil(max / s) - 1.
    let cell_range = |b: &[i64; 4], shift: u32| {
        let s = 1i64 << shift;
        [
            (b[0] - origin_col) >> shift,
            (b[1] - origin_row) >> shift,
            (b[2] - origin_col + s - 1) >> shift,
            (b[3] - origin_row + s - 1) >> shift,
        ]
    };
    let budget = 4 * n as u64 + 64;
    let mut shift = 0u32;
    loop {
        let s = 1i64 << shift;
        let cells = ((extent_col + s - 1) >> shift).max(1) as u64
            * ((extent_row + s - 1) >> shift).max(1) as u64;
        let mut entries = 0u64;
        if cells <= budget {
            for b in &boxes {
                let r = cell_range(b, shift);
                entries += ((r[2] - r[0]) * (r[3] - r[1])) as u64;
                if entries > budget {
                    break;
                }
            }
        }
        if (cells <= budget && entries <= budget) || s > extent_col.max(extent_row) {
            break;
        }
        shift += 1;
    }
    let s = 1i64 << shift;
    let cells_col = ((extent_col + s - 1) >> shift).max(1);
    let cells_row = ((extent_row + s - 1) >> shift).max(1);
    let ranges: Vec<[i64; 4]> = boxes.iter().map(|b| cell_range(b, shift)).collect();

    // Counting sort of (cell, triangle) entries by cell.
    let cell_count = (cells_col * cells_row) as usize;
    let mut starts = vec![0u32; cell_count + 1];
    for r in &ranges {
        for row in r[1]..r[3] {
            for col in r[0]..r[2] {
                starts[(row * cells_col + col) as usize + 1] += 1;
            }
        }
    }
    for i in 0..cell_count {
        starts[i + 1] += starts[i];
    }
    let mut fill = starts.clone();
    let mut entries = vec![0u32; starts[cell_count] as usize];
    for (t, r) in ranges.iter().enumerate() {
        for row in r[1]..r[3] {
            for col in r[0]..r[2] {
                let cell = (row * cells_col + col) as usize;
                entries[fill[cell] as usize] = t as u32;
                fill[cell] += 1;
            }
        }
    }

    let mut pairs = Vec::new();
    for cell in 0..cell_count {
        let (cell_col, cell_row) = (cell as i64 % cells_col, cell as i64 / cells_col);
        let members = &entries[starts[cell] as usize..starts[cell + 1] as usize];
        for (k, &i) in members.iter().enumerate() {
            let (bi, ri) = (&boxes[i as usize], &ranges[i as usize]);
            for &j in &members[k + 1..] {
                let (bj, rj) = (&boxes[j as usize], &ranges[j as usize]);
                let first_shared = (ri[0].max(rj[0]), ri[1].max(rj[1]));
                if first_shared != (cell_col, cell_row) {
                    continue;
                }
                let boxes_overlap =
                    bi[0] < bj[2] && bj[0] < bi[2] && bi[1] < bj[3] && bj[1] < bi[3];
                if boxes_overlap
                    && interiors_overlap(&triangles[i as usize], &triangles[j as usize])
                {
                    pairs.push((i.min(j) as usize, i.max(j) as usize));
                }
            }
        }
    }
    // Report in a stable order, independent of the bucketing.
    pairs.sort_unstable();
    for (i, j) in pairs {
        found(i, j);
    }
}

fn coverage(live: &[LiveTriangle], region: GridRect) -> Coverage {
    let mut covered_area2 = 0i128;
    let mut outside = Findings::default();
    for t in live {
        let at = t.at();
        if at.corners.iter().all(|&p| region.contains(p)) {
            covered_area2 += i128::from(t.area2.abs());
        } else {
            outside.push(at);
        }
    }
    let region_area2 = region.area2();
    Coverage {
        region,
        region_area2,
        covered_area2,
        uncovered_area2: region_area2 - covered_area2,
        outside,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator, enough to scatter triangles.
    fn next(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *state >> 33
    }

    #[test]
    fn bucketed_overlaps_equal_all_pairs() {
        for seed in 0..40u64 {
            let mut state = seed;
            let span = 3 + seed % 20;
            let mut triangles = Vec::new();
            while triangles.len() < 30 {
                let mut corner = || Pt {
                    col: (next(&mut state) % span) as i64,
                    row: (next(&mut state) % (span / 2 + 2)) as i64,
                };
                let (a, b, c) = (corner(), corner(), corner());
                match up_area2(a, b, c).signum() {
                    1 => triangles.push([a, b, c]),
                    -1 => triangles.push([a, c, b]),
                    _ => {}
                }
            }
            let mut bucketed = Vec::new();
            for_each_overlap(&triangles, |i, j| bucketed.push((i, j)));
            let mut brute = Vec::new();
            for i in 0..triangles.len() {
                for j in i + 1..triangles.len() {
                    if interiors_overlap(&triangles[i], &triangles[j]) {
                        brute.push((i, j));
                    }
                }
            }
            assert_eq!(bucketed, brute, "seed {seed}");
        }
    }

    #[test]
    fn separating_axis_cases() {
        let p = |col, row| Pt { col, row };
        let unit = [p(0, 0), p(0, 1), p(1, 1)];
        let other_half = [p(0, 0), p(1, 1), p(1, 0)];
        let shifted = [p(1, 0), p(1, 1), p(2, 1)];
        let big = [p(0, 0), p(0, 2), p(2, 2)];
        let touching_corner = [p(1, 1), p(1, 2), p(2, 2)];
        assert!(!interiors_overlap(&unit, &other_half), "shared edge");
        assert!(!interiors_overlap(&unit, &shifted), "shared vertex only");
        assert!(interiors_overlap(&unit, &big), "contained");
        assert!(interiors_overlap(&unit, &unit), "identical");
        assert!(!interiors_overlap(&touching_corner, &unit));
        assert!(
            interiors_overlap(&big, &touching_corner),
            "shares an edge part"
        );
    }

    #[test]
    fn collinear_overlap_needs_positive_length() {
        let edge = |a: (i64, i64), b: (i64, i64)| {
            let (ka, kb) = (
                pos_key(Pt { col: a.0, row: a.1 }),
                pos_key(Pt { col: b.0, row: b.1 }),
            );
            Edge {
                lo: ka.min(kb),
                hi: ka.max(kb),
                forward: 1,
                backward: 0,
            }
        };
        let edges = [
            edge((0, 0), (2, 0)),
            edge((2, 0), (4, 0)), // touches the first at a point only
            edge((0, 1), (4, 3)), // diagonal, gcd 2
            edge((2, 2), (6, 4)), // same line as the previous, overlapping (2,2)-(4,3)
            edge((7, 0), (9, 0)),
            edge((8, 0), (8, 5)), // crosses the previous, not collinear
        ];
        let refs: Vec<&Edge> = edges.iter().collect();
        assert_eq!(
            overlapping_collinear(&refs),
            vec![false, false, true, true, false, false]
        );
    }
}
