//! `GridMesh::without_padding`, what `terralod mesh` exports: over every registered
//! algorithm, for a world error and for a screen view without culling, on fields whose
//! algorithms draw a padded square beyond the data, the trimmed mesh is still watertight by
//! the mesh checker, still covers every data sample, keeps every triangle that reaches into
//! the data, and has none left wholly beyond it.

use glam::Vec3;
use terralod_core::lod::{LodOptions, REGISTRY, View};
use terralod_core::{Camera, Pyramid, WorldMapping};
use terralod_testkit::fixtures::smooth_random;
use terralod_testkit::{check_mesh, measure_error};

#[test]
fn meshes_without_padding_stay_whole_and_cover_the_data() {
    let mut trimmed_any = 0;
    for (width, height, seed) in [(45u32, 29u32, 1u64), (33, 17, 2), (20, 37, 3)] {
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
            View::screen(camera, 1.0).expect("valid").with_cull(false),
        ];
        let last = (width - 1, height - 1);
        for entry in REGISTRY {
            for view in &views {
                let mut algorithm = entry
                    .build(&field, &pyramid, &LodOptions::default())
                    .expect("the registry builds it");
                let mesh = algorithm.select(view).to_mesh(&field);
                let trimmed = mesh.clone().without_padding(last);
                let name = entry.name;
                check_mesh(&trimmed, None).assert_ok();
                let errors = measure_error(&field, &trimmed, None).expect("no camera");
                assert_eq!(errors.uncovered, 0, "{name}: {errors}");
                let reaches_in = |t: &[u32; 3], m: &terralod_core::GridMesh| {
                    let p = t.map(|i| m.positions[i as usize]);
                    p.iter().any(|p| p.col < last.0) && p.iter().any(|p| p.row < last.1)
                };
                assert!(
                    trimmed.triangles.iter().all(|t| reaches_in(t, &trimmed)),
                    "{name}"
                );
                // The triangles that reach into the data, in order, at the positions and
                // heights they had; every vertex kept is used.
                let kept: Vec<&[u32; 3]> = mesh
                    .triangles
                    .iter()
                    .filter(|t| reaches_in(t, &mesh))
                    .collect();
                assert_eq!(trimmed.triangles.len(), kept.len(), "{name}");
                for (t, k) in trimmed.triangles.iter().zip(kept) {
                    for (&i, &j) in t.iter().zip(k) {
                        let (i, j) = (i as usize, j as usize);
                        assert_eq!(
                            (trimmed.positions[i], trimmed.heights[i].to_bits()),
                            (mesh.positions[j], mesh.heights[j].to_bits()),
                            "{name}"
                        );
                    }
                }
                let mut used = vec![false; trimmed.positions.len()];
                for &i in trimmed.triangles.iter().flatten() {
                    used[i as usize] = true;
                }
                assert!(used.iter().all(|&u| u), "{name}");
                if trimmed.triangles.len() < mesh.triangles.len() {
                    trimmed_any += 1;
                }
            }
        }
    }
    assert!(
        trimmed_any > 0,
        "no algorithm drew padding: the test checks nothing"
    );
}
