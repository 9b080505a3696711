//! Unit tests of algorithm A: the state invariants after updates, and the incremental
//! state equal to a fresh instance's for the same view.

use super::update::{ENABLED, mid_bit, owner_of, parent_sides};
use super::*;
use crate::camera::Camera;
use crate::heightfield::Samples;
use crate::test_support::lcg_values;
use glam::Vec3;

fn rough_field(width: u32, height: u32, seed: u64) -> Heightfield {
    let raw = lcg_values((width * height) as usize, seed, 400);
    Heightfield::new(width, height, Samples::U16(raw)).expect("valid field")
}

fn camera(eye: Vec3, target: Vec3) -> Camera {
    Camera::new(eye, target, 1.0, (640, 480), 0.5, 1e4).expect("valid camera")
}

/// Views along a walk over the terrain, plus a world-error view.
fn walk(field: &Heightfield, steps: usize) -> Vec<View> {
    let (w, d) = field.world_size();
    let mut views = Vec::new();
    for step in 0..steps {
        let t = step as f32 / steps as f32;
        let angle = t * std::f32::consts::TAU;
        let eye = Vec3::new(
            0.5 * w + 0.4 * w * angle.cos(),
            420.0 + 300.0 * (3.0 * angle).sin(),
            0.5 * d + 0.4 * d * angle.sin(),
        );
        let target = Vec3::new(w * t, 0.0, d * (1.0 - t));
        let tolerance = [0.5, 2.0, 8.0][step % 3];
        let view = View::screen(camera(eye, target), tolerance).expect("valid view");
        views.push(view.with_cull(step % 4 != 0));
    }
    views.push(View::world_error(30.0).expect("valid"));
    views
}

/// Every enabled square has an enabled parent and enabled parent edge vertices; every
/// enabled edge vertex has its squares enabled; reference counts match.
fn check_invariants(lod: &AdaptiveLod<'_>) {
    let tree = &lod.tree;
    let mut counts = vec![[0u32; 4]; lod.state.len()];
    for level in 0..=lod.finest {
        let shape = tree.levels[level];
        for iz in 0..shape.nz {
            for ix in 0..shape.nx {
                let word = lod.state[shape.id(ix, iz)];
                for side in 0..4 {
                    let (ox, oz, owned) = owner_of(ix, iz, side);
                    if ox == ix && oz == iz && word & mid_bit(owned) != 0 {
                        assert!(word & ENABLED != 0, "vertex of a disabled square");
                    }
                    if lod.mid_enabled(level, ix, iz, side) {
                        assert!(word & ENABLED != 0, "shared vertex, disabled square");
                    }
                }
                if word & ENABLED == 0 || level == 0 {
                    continue;
                }
                let parent = tree.levels[level - 1];
                assert!(lod.state[parent.id(ix / 2, iz / 2)] & ENABLED != 0);
                for side in parent_sides((ix & 1) | (iz & 1) << 1) {
                    assert!(lod.mid_enabled(level - 1, ix / 2, iz / 2, side));
                    let (ox, oz, owned) = owner_of(ix / 2, iz / 2, side);
                    counts[parent.id(ox, oz)][owned] += 1;
                }
            }
        }
    }
    for (id, count) in counts.iter().enumerate() {
        for (side, &n) in count.iter().enumerate() {
            let stored = (lod.state[id] >> (11 + 3 * side as u32)) & 0b111;
            assert_eq!(stored, n, "reference count of square {id} side {side}");
        }
    }
}

fn triangles(lod: &mut AdaptiveLod<'_>, view: &View) -> Vec<u32> {
    match lod.select(view) {
        Selection::Triangles { indices, .. } => indices.to_vec(),
        Selection::Patches { .. } => unreachable!("algorithm A draws triangles"),
    }
}

#[test]
fn incremental_updates_equal_fresh_selections() {
    for (width, height, seed) in [(65, 65, 1), (40, 23, 2), (3, 17, 3), (2, 2, 4)] {
        let field = rough_field(width, height, seed);
        let pyramid = Pyramid::build(&field);
        let mut walker = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
        let mut resetting = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
        for view in walk(&field, 30) {
            let incremental = triangles(&mut walker, &view);
            check_invariants(&walker);
            resetting.reset();
            assert_eq!(incremental, triangles(&mut resetting, &view), "after reset");
            let mut fresh = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
            assert_eq!(
                incremental,
                triangles(&mut fresh, &view),
                "{width} x {height}"
            );
            assert!(!incremental.is_empty() || view.cull());
        }
    }
}

#[test]
fn a_flat_terrain_is_two_by_two_fans_and_a_rough_one_refines() {
    let flat = Heightfield::new(33, 33, Samples::U16(vec![7; 33 * 33])).expect("valid");
    let pyramid = Pyramid::build(&flat);
    let mut lod = AdaptiveLod::new(&flat, &pyramid, LodOptions::default());
    let view = View::world_error(1e-3).expect("valid");
    assert_eq!(
        lod.select(&view).triangle_count(),
        4,
        "the root's fan, edges off"
    );
    let rough = rough_field(33, 33, 9);
    let pyramid = Pyramid::build(&rough);
    let mut lod = AdaptiveLod::new(&rough, &pyramid, LodOptions::default());
    assert_eq!(lod.select(&view).triangle_count(), 2 * 32 * 32);
    assert!(lod.enabled_squares() > 256);
}

/// A smooth flight (small steps, a slow turn, fixed τ) where most squares keep their
/// answers: the incremental state skips them and still equals a fresh selection, drawn
/// heights included, with the invariants intact.
#[test]
fn smooth_flights_skip_squares_and_equal_fresh_selections() {
    let field = rough_field(129, 97, 7);
    let pyramid = Pyramid::build(&field);
    for morph in [true, false] {
        let options = AdaptiveOptions::default().with_morph(morph);
        let mut walker =
            AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        let (mut carried_visits, mut fresh_visits) = (0, 0);
        for step in 0..60 {
            let t = step as f32;
            let eye = Vec3::new(5.0 + 1.5 * t, 350.0 - 2.0 * t, 10.0 + 0.7 * t);
            let heading = 0.6 + 0.01 * t;
            let target = eye + Vec3::new(heading.cos(), -0.4, heading.sin());
            let view = View::screen(camera(eye, target), 1.0).expect("valid view");
            let view = view.with_cull(step % 7 != 3);
            let (triangles, morphs) = match walker.select(&view) {
                Selection::Triangles {
                    indices, morphs, ..
                } => (indices.to_vec(), morphs.to_vec()),
                Selection::Patches { .. } => unreachable!("algorithm A draws triangles"),
            };
            carried_visits += walker.stats().nodes_visited;
            check_invariants(&walker);
            let mut fresh =
                AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
            match fresh.select(&view) {
                Selection::Triangles {
                    indices,
                    morphs: fresh_morphs,
                    ..
                } => {
                    assert_eq!(triangles, indices, "step {step}");
                    assert_eq!(morphs, fresh_morphs, "step {step}");
                }
                Selection::Patches { .. } => unreachable!("algorithm A draws triangles"),
            }
            fresh_visits += fresh.stats().nodes_visited;
            assert_eq!(walker.enabled_squares(), fresh.enabled_squares());
        }
        assert!(
            carried_visits * 2 < fresh_visits,
            "{carried_visits} squares evaluated along the flight, {fresh_visits} from scratch"
        );
    }
}
