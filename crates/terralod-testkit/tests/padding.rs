//! `GridMesh::clipped_to`, what `terralod mesh` exports: over every registered algorithm,
//! for a world error and for a screen view without culling, on fields whose algorithms
//! draw a padded square beyond the data, the mesh cut to the data is watertight by the
//! mesh checker, covers exactly the data's rectangle (every sample, nothing beyond, no
//! overlap), draws the same surface over the data as the uncut mesh (the same errors at
//! every sample, by the oracle), and keeps every triangle that lay within the data.

use glam::Vec3;
use terralod_core::lod::{LodOptions, REGISTRY, View};
use terralod_core::{Camera, GridMesh, Pyramid, WorldMapping};
use terralod_testkit::fixtures::smooth_random;
use terralod_testkit::{check_mesh, measure_error, up_area2};

#[test]
fn meshes_cut_to_the_data_cover_it_exactly_and_draw_the_same_ground() {
    let mut cut_any = 0;
    for (width, height, seed) in [(45u32, 29u32, 1u64), (33, 17, 2), (20, 37, 3), (30, 30, 4)] {
        let field = smooth_random(width, height, seed, 80.0)
            .and_then(|f| {
                f.with_mapping(WorldMapping {
                    cell_size: 10.0,
                    ..WorldMapping::default()
                })
            })
            .expect("a valid field");
        let pyramid = Pyramid::build(&field);
        let camera = Camera::new(
            Vec3::new(-60.0, 250.0, -40.0),
            Vec3::new(200.0, 0.0, 150.0),
            60f32.to_radians(),
            (640, 360),
            1.0,
            1.0e5,
        )
        .expect("a valid camera");
        let views = [
            View::world_error(2.0).expect("valid"),
            View::world_error(0.01).expect("valid"),
            View::screen(camera, 1.0).expect("valid").with_cull(false),
        ];
        let last = (width - 1, height - 1);
        let within = |mesh: &GridMesh, t: &[u32; 3]| {
            t.iter().all(|&i| {
                let p = mesh.positions[i as usize];
                p.col <= last.0 && p.row <= last.1
            })
        };
        for entry in REGISTRY {
            for view in &views {
                let mut algorithm = entry
                    .build(&field, &pyramid, &LodOptions::default())
                    .expect("the registry builds it");
                let mesh = algorithm.select(view).to_mesh(&field);
                let cut = mesh.clone().clipped_to(last);
                let what = format!("{} on {width} x {height}, {view:?}", entry.name);
                check_mesh(&cut, None).assert_ok();
                assert!(cut.triangles.iter().all(|t| within(&cut, t)), "{what}");
                // Counter-clockwise, and their areas add up to the data's rectangle: with
                // every sample covered, no overlap and nothing beyond.
                let mut area2 = 0i64;
                for t in &cut.triangles {
                    let [a, b, c] = t.map(|i| cut.positions[i as usize]);
                    let area = up_area2(a, b, c).expect("small grid");
                    assert!(area > 0, "{what}: a piece without area or turned over");
                    area2 += area;
                }
                assert_eq!(area2, 2 * i64::from(last.0) * i64::from(last.1), "{what}");
                let (before, after) = (
                    measure_error(&field, &mesh, None).expect("no camera"),
                    measure_error(&field, &cut, None).expect("no camera"),
                );
                assert_eq!(after.uncovered, 0, "{what}: {after}");
                assert_eq!(after.skipped_triangles, 0, "{what}: {after}");
                for (b, a) in [
                    (before.world.max, after.world.max),
                    (before.world.p99, after.world.p99),
                ] {
                    assert!((a - b).abs() <= 1e-3, "{what}: {before} against {after}");
                }
                // Every triangle within the data is kept as it was, in order.
                let whole = |m: &GridMesh| -> Vec<[(u32, u32, u32); 3]> {
                    m.triangles
                        .iter()
                        .filter(|t| within(m, t))
                        .map(|t| {
                            t.map(|i| {
                                let p = m.positions[i as usize];
                                (p.col, p.row, m.heights[i as usize].to_bits())
                            })
                        })
                        .collect()
                };
                let kept = whole(&mesh);
                assert_eq!(whole(&cut)[..kept.len()], kept[..], "{what}");
                let reaches_past = mesh.triangles.iter().any(|t| !within(&mesh, t));
                cut_any += usize::from(reaches_past);
            }
        }
    }
    assert!(
        cut_any > 0,
        "no algorithm drew padding: the test checks nothing"
    );
}
