//! The debug boxes an algorithm reports (`LodAlgorithm::drawn_boxes`, drawn by the
//! renderer) cover what it drew: every drawn triangle lies inside one box, in plan and in
//! height.

use proptest::prelude::*;
use terralod_core::lod::{LodOptions, REGISTRY, View};
use terralod_core::{Aabb, Pyramid};
use terralod_testkit::strategies::arb_scene;

fn contains(aabb: &Aabb, p: glam::Vec3) -> bool {
    // Boxes are world-space f32; allow their rounding.
    let slack = 1e-3 * (1.0 + aabb.max.abs().max_element());
    (aabb.min - slack).cmple(p).all() && p.cmple(aabb.max + slack).all()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn drawn_boxes_cover_the_drawn_triangles(
        (field, camera, pixels) in arb_scene(65),
    ) {
        let pyramid = Pyramid::build(&field);
        let view = View::screen(camera, pixels).unwrap();
        let mapping = field.mapping();
        for entry in REGISTRY {
            let mut algorithm = entry.build(&field, &pyramid, &LodOptions::default())
.expect("the registry builds it");
            let mesh = algorithm.select(&view).to_mesh(&field);
            let mut boxes = Vec::new();
            algorithm.drawn_boxes(&mut boxes);
            if boxes.is_empty() {
                // The algorithm reports no boxes (allowed); nothing to check.
                continue;
            }
            prop_assert_eq!(boxes.len() as u64, algorithm.stats().nodes_drawn);
            for (t, triangle) in mesh.triangles.iter().enumerate() {
                let centroid = triangle
                    .iter()
                    .map(|&v| mesh.world_position(v, &mapping))
                    .sum::<glam::Vec3>()
                    / 3.0;
                prop_assert!(
                    boxes.iter().any(|b| contains(b, centroid)),
                    "{}: triangle {} (centroid {:?}) is in no drawn box",
                    entry.name, t, centroid
                );
            }
        }
    }
}
