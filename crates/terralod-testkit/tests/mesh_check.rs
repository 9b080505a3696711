//! Proves the mesh checker on hand-built meshes with known defects.

use terralod_core::{GridMesh, GridPos};
use terralod_testkit::fixtures::{
    full_grid_mesh, grid_mesh, quadtree_mesh, smooth_random, t_junction_mesh,
};
use terralod_testkit::{GridRect, MeshReport, check_mesh};

/// A mesh from (col, row) positions, all at height 0, and triangles.
fn mesh(positions: &[(u32, u32)], triangles: &[[u32; 3]]) -> GridMesh {
    GridMesh {
        positions: positions.iter().map(|&(c, r)| GridPos::new(c, r)).collect(),
        heights: vec![0.0; positions.len()],
        triangles: triangles.to_vec(),
    }
}

/// The one helper: checks and returns the report, printing it so that failures explain
/// themselves.
fn check(mesh: &GridMesh, region: Option<GridRect>) -> MeshReport {
    let report = check_mesh(mesh, region);
    eprintln!("{report}");
    report
}

fn field_9x7() -> terralod_core::Heightfield {
    smooth_random(9, 7, 7, 100.0).unwrap()
}

#[test]
fn full_resolution_grid_is_watertight_and_covers_its_region() {
    let field = field_9x7();
    let grid = full_grid_mesh(&field);
    let region = GridRect::of_field(&field);
    let report = check(&grid, Some(region));
    report.assert_ok();
    assert_eq!(report.triangle_count, 8 * 6 * 2);
    assert_eq!(report.boundary_edges, 2 * (8 + 6));
    assert_eq!(report.region_border_edges, 2 * (8 + 6));
    assert_eq!(report.duplicate_vertices.count, 0);
    assert_eq!(report.unused_vertices, 0);
    let coverage = report.coverage.unwrap();
    assert_eq!(coverage.region_area2, 2 * 8 * 6);
    assert_eq!(coverage.covered_area2, coverage.region_area2);
    assert_eq!(coverage.uncovered_area2, 0);
}

#[test]
fn a_missing_triangle_is_a_legitimate_hole_without_region_and_a_defect_with_one() {
    let field = field_9x7();
    let mut grid = full_grid_mesh(&field);
    // Cell (3, 2) is interior; its first triangle is at index 2 * (2 * 8 + 3).
    let removed = grid.triangles.remove(2 * (2 * 8 + 3));
    let corners = removed.map(|i| grid.positions[i as usize]);
    assert!(
        corners
            .iter()
            .all(|p| (1..8).contains(&p.col) && (1..6).contains(&p.row))
    );

    let local = check(&grid, None);
    assert!(local.is_watertight(), "a hole is not a crack");
    // Without a region the outer border is open too: 28 border edges plus the hole's 3.
    assert_eq!(local.open_edges.count, 28 + 3);
    assert_eq!(local.crack_edges.count, 0);

    let report = check(&grid, Some(GridRect::of_field(&field)));
    assert!(!report.is_watertight());
    assert_eq!(report.open_edges.count, 3);
    assert_eq!(report.coverage.as_ref().unwrap().uncovered_area2, 1);
    assert!(report.defects().iter().any(|d| d.contains("holes")));
}

#[test]
fn a_missing_triangle_on_the_border_leaves_two_open_edges() {
    let field = field_9x7();
    let mut grid = full_grid_mesh(&field);
    // Cell (0, 0): its first triangle has the edge (0,0)-(0,1) on the left border.
    grid.triangles.remove(0);
    let report = check(&grid, Some(GridRect::of_field(&field)));
    assert_eq!(report.open_edges.count, 2);
    assert_eq!(report.region_border_edges, 2 * (8 + 6) - 1);
    assert_eq!(report.coverage.unwrap().uncovered_area2, 1);
}

#[test]
fn a_t_junction_is_a_crack_even_though_the_region_is_covered() {
    let report = check(&t_junction_mesh(), Some(GridRect::new(0, 0, 3, 2)));
    assert!(!report.is_watertight());
    assert_eq!(report.crack_edges.count, 3);
    let mut cracks: Vec<_> = report
        .crack_edges
        .examples
        .iter()
        .map(|e| ((e.a.col, e.a.row), (e.b.col, e.b.row)))
        .collect();
    cracks.sort();
    assert_eq!(
        cracks,
        vec![((2, 0), (2, 1)), ((2, 0), (2, 2)), ((2, 1), (2, 2))]
    );
    assert_eq!(report.t_vertices.count, 1);
    assert_eq!(report.t_vertices.examples[0].vertex, GridPos::new(2, 1));
    assert_eq!(report.overlaps.count, 0);
    assert_eq!(report.coverage.as_ref().unwrap().uncovered_area2, 0);
    // Without a region it is still a crack.
    assert_eq!(check(&t_junction_mesh(), None).crack_edges.count, 3);
}

#[test]
fn the_same_junction_stitched_is_watertight() {
    let mut stitched = t_junction_mesh();
    // Replace the coarse triangle (0,0)-(2,2)-(2,0) by two that use (2,1).
    stitched.triangles[1] = [0, 2, 4];
    stitched.triangles.push([0, 4, 3]);
    check(&stitched, Some(GridRect::new(0, 0, 3, 2))).assert_ok();
}

#[test]
fn a_flipped_triangle_is_reported_with_its_inconsistent_edges() {
    let field = field_9x7();
    let mut grid = full_grid_mesh(&field);
    let index = 2 * (2 * 8 + 3);
    grid.triangles[index].swap(1, 2);
    let report = check(&grid, Some(GridRect::of_field(&field)));
    assert_eq!(report.flipped.count, 1);
    assert_eq!(report.flipped.examples[0].triangle, index);
    assert_eq!(
        report.non_manifold_edges.count, 3,
        "each edge now runs twice one way"
    );
    assert_eq!(report.degenerate.count, 0);
    assert_eq!(
        report.overlaps.count, 0,
        "it covers the same place as before"
    );
    assert_eq!(report.coverage.unwrap().uncovered_area2, 0);
}

#[test]
fn every_triangle_reversed_is_every_triangle_flipped() {
    let field = field_9x7();
    let mut grid = full_grid_mesh(&field);
    for t in &mut grid.triangles {
        t.swap(0, 1);
    }
    let report = check(&grid, None);
    assert_eq!(report.flipped.count, grid.triangles.len() as u64);
    assert_eq!(
        report.non_manifold_edges.count, 0,
        "consistently wound the wrong way"
    );
}

#[test]
fn degenerate_triangles_are_reported() {
    let field = field_9x7();
    let mut grid = full_grid_mesh(&field);
    let collinear = [GridPos::new(0, 0), GridPos::new(1, 1), GridPos::new(2, 2)];
    let first = grid.positions.len() as u32;
    for p in collinear {
        grid.push_vertex(p, 0.0);
    }
    grid.triangles.push([first, first + 1, first + 2]);
    grid.triangles.push([0, 0, 1]); // a repeated index
    let report = check(&grid, Some(GridRect::of_field(&field)));
    assert_eq!(report.degenerate.count, 2);
    assert_eq!(
        report.duplicate_vertices.count, 3,
        "the collinear corners repeat grid vertices"
    );
    assert_eq!(
        report.split_vertices.count, 3,
        "at height 0, unlike the field's"
    );
    assert_eq!(report.coverage.unwrap().uncovered_area2, 0);
}

#[test]
fn duplicate_and_overlapping_triangles_are_reported() {
    let field = field_9x7();
    let mut grid = full_grid_mesh(&field);
    let copy = grid.triangles[20];
    grid.triangles.push(copy);
    let report = check(&grid, Some(GridRect::of_field(&field)));
    assert_eq!(report.overlaps.count, 1);
    let pair = report.overlaps.examples[0];
    assert_eq!(
        (pair.first.triangle, pair.second.triangle),
        (20, grid.triangles.len() - 1)
    );
    assert_eq!(report.non_manifold_edges.count, 3);
    assert_eq!(report.coverage.unwrap().uncovered_area2, -1);

    // A big triangle (0,0),(0,2),(2,2): the half of the 2 × 2 cells at the origin where
    // row >= col. It overlaps the lower triangle of cell (0,0), both triangles of cell
    // (col 0, row 1) and the lower triangle of cell (1,1); the upper triangles of the
    // diagonal cells only touch its hypotenuse and cell (col 1, row 0) lies beyond it.
    let mut grid = full_grid_mesh(&field);
    let big = [0u32, 2 * 9, 2 * 9 + 2];
    grid.triangles.push(big);
    let report = check(&grid, None);
    assert_eq!(report.overlaps.count, 4);
    let big_index = grid.triangles.len() - 1;
    let mut partners: Vec<usize> = report
        .overlaps
        .examples
        .iter()
        .map(|o| {
            assert_eq!(o.second.triangle, big_index);
            o.first.triangle
        })
        .collect();
    partners.sort();
    // Cells (0,0), (0,1) and (1,1) are triangles 0-1, 16-17 and 18-19.
    assert_eq!(partners, vec![0, 16, 17, 18]);
}

#[test]
fn an_edge_shared_by_three_triangles_is_non_manifold() {
    // Two triangles on the left of (0,0)-(1,1)... a fan: (0,0),(1,1) with third corners
    // (0,1) [left], (1,0) [right] and (0,2) [left again, overlapping the first].
    let positions = [(0, 0), (1, 1), (0, 1), (1, 0), (0, 2)];
    let triangles = [[0, 2, 1], [0, 1, 3], [0, 4, 1]];
    let report = check(&mesh(&positions, &triangles), None);
    assert_eq!(report.non_manifold_edges.count, 1);
    let edge = report.non_manifold_edges.examples[0];
    assert_eq!((edge.a, edge.b), (GridPos::new(0, 0), GridPos::new(1, 1)));
    assert_eq!(edge.forward + edge.backward, 3);
    assert_eq!(report.flipped.count, 0);
    assert_eq!(report.overlaps.count, 1);
}

#[test]
fn same_direction_twice_is_non_manifold_even_without_overlap() {
    // (0,0),(0,1),(1,1) is counter-clockwise; (0,0),(1,0),(1,1) is flipped, and both run
    // (1,1) -> (0,0).
    let positions = [(0, 0), (0, 1), (1, 1), (1, 0)];
    let report = check(&mesh(&positions, &[[0, 1, 2], [0, 3, 2]]), None);
    assert_eq!(report.non_manifold_edges.count, 1);
    assert_eq!(report.flipped.count, 1);
    assert_eq!(report.overlaps.count, 0);
}

#[test]
fn duplicate_vertices_are_fine_at_equal_heights_and_cracks_at_different_ones() {
    // Two triangles of one quad, each with its own copy of the diagonal's ends.
    let mut quad = mesh(
        &[(0, 0), (0, 1), (1, 1), (0, 0), (1, 1), (1, 0)],
        &[[0, 1, 2], [3, 4, 5]],
    );
    let report = check(&quad, Some(GridRect::new(0, 0, 1, 1)));
    report.assert_ok();
    assert_eq!(report.duplicate_vertices.count, 2);
    quad.heights[4] = 0.5;
    let report = check(&quad, Some(GridRect::new(0, 0, 1, 1)));
    assert_eq!(report.split_vertices.count, 1);
    assert_eq!(report.split_vertices.examples[0].pos, GridPos::new(1, 1));
    assert!(!report.is_watertight());
}

#[test]
fn bad_indices_coordinates_and_heights_are_reported_not_panics() {
    let mut bad = mesh(&[(0, 0), (0, 1), (1, 1), (u32::MAX, 0)], &[[0, 1, 2]]);
    bad.triangles.push([0, 1, 9]);
    bad.triangles.push([0, 3, 1]);
    bad.heights[1] = f32::NAN;
    bad.heights.pop();
    let report = check(&bad, Some(GridRect::new(0, 0, 1, 1)));
    assert_eq!(report.invalid_triangles.count, 2);
    assert_eq!(report.non_finite_heights.count, 1);
    assert_eq!(report.height_count_mismatch, Some((4, 3)));
    assert_eq!(report.coverage.unwrap().uncovered_area2, 1);
    assert_eq!(report.unused_vertices, 1);
    // Empty meshes and empty regions too.
    let empty = check(&GridMesh::default(), Some(GridRect::new(0, 0, 0, 0)));
    empty.assert_ok();
    let empty = check(&GridMesh::default(), Some(GridRect::new(0, 0, 4, 4)));
    assert_eq!(empty.coverage.unwrap().uncovered_area2, 32);
}

#[test]
fn triangles_outside_the_region_are_reported() {
    let field = field_9x7();
    let grid = full_grid_mesh(&field);
    let report = check(&grid, Some(GridRect::new(0, 0, 7, 6)));
    let coverage = report.coverage.as_ref().unwrap();
    assert_eq!(coverage.outside.count, 2 * 6);
    assert_eq!(coverage.uncovered_area2, 0);
    assert!(!report.is_watertight());
}

#[test]
fn stitched_quadtree_meshes_are_watertight_at_any_level_difference() {
    let field = smooth_random(33, 33, 3, 50.0).unwrap();
    // Refine towards the point (15,15) only: along column 16 one-cell leaves meet a
    // 16-cell leaf, a difference of 4 levels.
    let towards = GridPos::new(15, 15);
    let mesh = quadtree_mesh(&field, true, |r| r.contains(towards));
    let report = check(&mesh, Some(GridRect::square(33)));
    report.assert_ok();
    assert_eq!(report.duplicate_vertices.count, 0);
    let coarse = mesh.triangles.len();
    assert!(coarse < 200, "{coarse} triangles: mixed levels");

    let broken = quadtree_mesh(&field, false, |r| {
        r.contains(towards) && r.col1 - r.col0 > 2
    });
    let report = check(&broken, Some(GridRect::square(33)));
    assert!(report.crack_edges.count > 0);
    assert!(report.t_vertices.count > 0);
    assert_eq!(
        report.coverage.unwrap().uncovered_area2,
        0,
        "cracks cover no less"
    );
}

#[test]
fn culled_meshes_pass_without_region_and_show_holes_with_one() {
    let field = smooth_random(17, 17, 5, 50.0).unwrap();
    let full = quadtree_mesh(&field, true, |r| r.col1 - r.col0 > 2 && r.col0 < 8);
    // Cull everything right of column 8 (as a frustum would).
    let mut culled = full.clone();
    culled
        .triangles
        .retain(|t| t.iter().all(|&i| full.positions[i as usize].col <= 8));
    assert!(culled.triangles.len() < full.triangles.len());
    check(&culled, None).assert_ok();
    let with_region = check(&culled, Some(GridRect::square(17)));
    assert!(with_region.open_edges.count > 0);
    assert!(with_region.coverage.unwrap().uncovered_area2 > 0);
}

#[test]
fn a_coarse_grid_with_a_ragged_last_strip_is_watertight() {
    let field = field_9x7();
    let coarse = grid_mesh(&field, GridRect::of_field(&field), 3);
    check(&coarse, Some(GridRect::of_field(&field))).assert_ok();
}

#[test]
fn assert_ok_lists_the_defects() {
    let result = std::panic::catch_unwind(|| check_mesh(&t_junction_mesh(), None).assert_ok());
    let message = match result {
        Err(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default(),
        Ok(()) => panic!("a T-junction must not pass"),
    };
    assert!(message.contains("not watertight"), "{message}");
    assert!(message.contains("3 crack edges"), "{message}");
    assert!(message.contains("(2,1) inside (2,0)-(2,2)"), "{message}");
}
