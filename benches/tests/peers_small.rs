//! terralod's view-independent meshes against the testkit oracle and against martini on a
//! 129 × 129 cut of the Boulder SRTM3 set (debug-fast; skips visibly without the data).

use terralod_benches::load_boulder;
use terralod_benches::peers::{
    MartiniTerrain, Measured, build_algorithm, calibrate_martini, cut_square, delatin_mesh,
    delatin_raw, terralod_mesh, world_heights,
};
use terralod_core::lod::{LodOptions, REGISTRY};
use terralod_core::pyramid::Pyramid;
use terralod_core::simplify::simplify;
use terralod_testkit::check_mesh;

const MAX_ERRORS: [f64; 6] = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0];

/// Vertices of `quadtree` over those of martini at the same measured error bound, as
/// measured at commit time (see docs/BENCHMARKS.md, "Peers"). Above 1 terralod loses;
/// the check fails if it gets more than 5 % worse, and says so when it gets better, so
/// the record can be lowered.
const RECORDED_QUADTREE_OVER_MARTINI: [f64; 6] = [1.09, 1.21, 1.44, 2.05, 2.95, 3.13];

#[test]
fn view_independent_meshes_stay_within_the_requested_error_and_compare_with_martini() {
    let Some(boulder) = load_boulder() else {
        return;
    };
    let field = cut_square(&boulder, 0, 0, 129).expect("129 x 129 fits the 758 x 758 set");
    let pyramid = Pyramid::build(&field);
    let heights = world_heights(&field);
    let mut martini = MartiniTerrain::new(&field, &heights).expect("129 = 2^7 + 1");
    for entry in REGISTRY {
        let mut algorithm = entry
            .build(&field, &pyramid, &LodOptions::default())
            .expect("the registry builds it");
        if !algorithm.error_bounded() {
            eprintln!(
                "{}: not error-bounded, not compared with martini",
                entry.name
            );
            continue;
        }
        for (i, m) in MAX_ERRORS.into_iter().enumerate() {
            let mesh = terralod_mesh(algorithm.as_mut(), &field, m as f32).expect("valid view");
            let ours = Measured::of(&field, &mesh, m).expect("no camera, no failure");
            assert_eq!(
                ours.uncovered, 0,
                "{} at M {m}: not full coverage",
                entry.name
            );
            assert!(
                ours.measured_max_error <= m,
                "{} at M {m}: measured {} exceeds the requested error",
                entry.name,
                ours.measured_max_error
            );
            let theirs = calibrate_martini(&mut martini, &field, m, 7).expect("oracle runs");
            assert!(theirs.measured_max_error <= m);
            let ratio = ours.vertices as f64 / theirs.vertices as f64;
            eprintln!(
                "{} M {m}: {} vertices (measured {:.2} m); martini {} (requested {:.3}, \
                 measured {:.2} m): ratio {ratio:.3}",
                entry.name,
                ours.vertices,
                ours.measured_max_error,
                theirs.vertices,
                theirs.requested_error,
                theirs.measured_max_error
            );
            if entry.name == "bintree" {
                // Exact errors: never more vertices than martini at equal measured error.
                assert!(
                    ratio <= 1.0,
                    "bintree at M {m}: {ratio:.3} x martini's vertices"
                );
            }
            if entry.name == "quadtree" {
                let recorded = RECORDED_QUADTREE_OVER_MARTINI[i];
                assert!(
                    ratio <= recorded * 1.05,
                    "quadtree at M {m}: {ratio:.3} x martini's vertices, recorded {recorded}"
                );
                if ratio < recorded * 0.95 {
                    eprintln!("quadtree at M {m} improved on the record {recorded}: lower it");
                }
            }
        }
    }
}

/// The export pass (`terralod mesh --simplify`) on bintree's mesh: within the requested
/// error, full coverage, watertight, and within issue 5's 1.3 x of delatin's vertex count
/// (delatin measured by the same oracle, its own error within M too).
#[test]
fn the_simplified_mesh_keeps_the_bound_and_comes_within_1_3_of_delatin() {
    let Some(boulder) = load_boulder() else {
        return;
    };
    let field = cut_square(&boulder, 0, 0, 129).expect("129 x 129 fits the 758 x 758 set");
    let pyramid = Pyramid::build(&field);
    let heights = world_heights(&field);
    let mut bintree = build_algorithm("bintree", &field, &pyramid).expect("registered");
    for m in MAX_ERRORS {
        let mesh = terralod_mesh(bintree.as_mut(), &field, m as f32).expect("valid view");
        let (simplified, stats) = simplify(&field, &mesh, m).expect("a valid mesh");
        let ours = Measured::of(&field, &simplified, m).expect("oracle runs");
        assert_eq!(ours.uncovered, 0, "M {m}: not full coverage");
        assert!(ours.measured_max_error <= m, "M {m}: {ours:?}");
        check_mesh(&simplified, None).assert_ok();
        let raw = delatin_raw(&field, &heights, m).expect("delatin runs");
        let delatin = Measured::of(&field, &delatin_mesh(&field, &raw), m).expect("oracle");
        assert!(delatin.measured_max_error <= m);
        let ratio = ours.vertices as f64 / delatin.vertices as f64;
        eprintln!(
            "M {m}: bintree {} -> simplified {} vertices (measured {:.2} m), delatin {}: \
             ratio {ratio:.3}",
            stats.vertices_before, ours.vertices, ours.measured_max_error, delatin.vertices
        );
        assert!(ours.vertices < stats.vertices_before || stats.vertices_before <= 4);
        assert!(ratio <= 1.3, "M {m}: {ratio:.3} x delatin's vertices");
    }
}
