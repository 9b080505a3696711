//! Unit tests of algorithm P's tree: coverage, balance, convergence, turning in place,
//! exhaustion.

use super::*;
use crate::camera::Camera;

fn rough_field(side: u32) -> Heightfield {
    let values = (0..side * side)
        .map(|i| {
            let (x, z) = ((i % side) as f32, (i / side) as f32);
            20.0 * (x * 0.21).sin() * (z * 0.13).cos() + ((i * 7919) % 13) as f32
        })
        .collect();
    Heightfield::from_f32(side, side, values).expect("valid field")
}

fn camera(eye: Vec3, target: Vec3) -> Camera {
    Camera::new(eye, target, 1.0, (800, 600), 0.5, 1e5).expect("valid camera")
}

fn options(capacity: u32) -> PatchOptions {
    PatchOptions::default()
        .with_patch_size(4)
        .with_pool_capacity(capacity)
}

/// The drawn leaves, as (level, ix, iz).
fn leaves(lod: &PatchesLod<'_>) -> Vec<(usize, u32, u32)> {
    let mut out = Vec::new();
    for (level, l) in lod.tree.levels.iter().enumerate() {
        for iz in 0..l.nodes_z {
            for ix in 0..l.nodes_x {
                if lod.tree.state(level, ix, iz) == Some(NodeState::Leaf) {
                    out.push((level, ix, iz));
                }
            }
        }
    }
    out
}

/// Leaves tile the extent exactly, hold distinct slots, and touching leaves differ by at
/// most one level.
fn check_tree(lod: &PatchesLod<'_>) {
    let (ew, eh) = lod.tree.extent;
    let mut owner = vec![usize::MAX; (ew * eh) as usize];
    let all = leaves(lod);
    let mut slots: Vec<u32> = all
        .iter()
        .map(|&(l, x, z)| lod.tree.slot(l, x, z))
        .collect();
    slots.sort_unstable();
    slots.dedup();
    assert_eq!(slots.len(), all.len(), "each leaf has its own slot");
    assert_eq!(lod.pool.in_use() as usize, all.len());
    for (k, &(level, ix, iz)) in all.iter().enumerate() {
        let size = lod.tree.levels[level].size;
        for z in iz * size..(iz + 1) * size {
            for x in ix * size..(ix + 1) * size {
                assert!(x < ew && z < eh, "leaf beyond the extent");
                let cell = &mut owner[(z * ew + x) as usize];
                assert_eq!(*cell, usize::MAX, "leaves overlap");
                *cell = k;
            }
        }
    }
    assert!(owner.iter().all(|&o| o != usize::MAX), "a hole");
    let level_at = |x: u32, z: u32| all[owner[(z * ew + x) as usize]].0 as i64;
    for z in 0..eh {
        for x in 0..ew {
            if x + 1 < ew {
                assert!(
                    (level_at(x, z) - level_at(x + 1, z)).abs() <= 1,
                    "unbalanced"
                );
            }
            if z + 1 < eh {
                assert!(
                    (level_at(x, z) - level_at(x, z + 1)).abs() <= 1,
                    "unbalanced"
                );
            }
        }
    }
}

/// The pool's capacity is user input: one too large for memory is a typed error of the
/// constructor (the CLI's build path reports it), not an aborted allocation.
#[test]
fn a_pool_too_large_is_a_constructor_error() {
    let field = rough_field(17);
    let pyramid = Pyramid::build(&field);
    for capacity in [1_000_000_000, u32::MAX] {
        assert!(matches!(
            PatchesLod::try_new(&field, &pyramid, options(capacity)),
            Err(PoolError::TooLarge { side: 4, .. })
        ));
    }
    let lod = PatchesLod::try_new(&field, &pyramid, options(8)).expect("a small pool");
    assert_eq!(lod.pool().capacity(), 8);
}

#[test]
fn the_start_tree_is_the_coarsest_balanced_one_over_the_extent() {
    // 100 × 70 samples: an extent of 100 × 72 cells (patches of 4), a 128-cell root.
    let values = (0..100 * 70).map(|i| (i % 17) as f32).collect();
    let field = Heightfield::from_f32(100, 70, values).expect("valid field");
    let pyramid = Pyramid::build(&field);
    let lod = PatchesLod::new(&field, &pyramid, options(1));
    assert_eq!(lod.tree.extent, (100, 72));
    assert_eq!(
        lod.grid_vertices(),
        GridVertices {
            stride: 101,
            rows: 73,
            shift: 0,
        }
    );
    check_tree(&lod);
    let needed = leaves(&lod).len() as u32;
    assert_eq!(
        lod.pool.capacity(),
        needed,
        "capacity raised to the start tree"
    );
}

#[test]
fn the_tree_follows_the_camera_and_stays_balanced() {
    let field = rough_field(129);
    let pyramid = Pyramid::build(&field);
    let mut lod = PatchesLod::new(&field, &pyramid, options(4096));
    let start = leaves(&lod).len();
    let path = [
        (Vec3::new(10.0, 40.0, 10.0), Vec3::new(60.0, 0.0, 60.0)),
        (Vec3::new(64.0, 25.0, 64.0), Vec3::new(0.0, 0.0, 0.0)),
        (Vec3::new(120.0, 5.0, 3.0), Vec3::new(0.0, 0.0, 128.0)),
        (Vec3::new(500.0, 300.0, 500.0), Vec3::new(64.0, 0.0, 64.0)),
    ];
    let mut counts = Vec::new();
    for (eye, target) in path {
        let view = View::screen(camera(eye, target), 1.0).expect("valid view");
        lod.select(&view);
        check_tree(&lod);
        counts.push(leaves(&lod).len());
        let stats = lod.patch_stats();
        assert_eq!(stats.refused_splits, 0);
        assert_eq!(stats.fills, 4 * stats.splits + stats.merges);
    }
    assert!(
        counts[0] > start && counts[1] > start,
        "close cameras refine"
    );
    assert_eq!(
        counts[3], start,
        "a far camera merges back to the start tree"
    );
}

#[test]
fn the_tree_depends_on_the_camera_only() {
    let field = rough_field(129);
    let pyramid = Pyramid::build(&field);
    let eyes = [
        Vec3::new(64.0, 30.0, 64.0),
        Vec3::new(3.0, 12.0, 120.0),
        Vec3::new(100.0, 60.0, 20.0),
    ];
    let mut travelled = PatchesLod::new(&field, &pyramid, options(4096));
    for (k, eye) in eyes.iter().enumerate() {
        let view = View::screen(camera(*eye, Vec3::ZERO), 1.0).expect("valid");
        travelled.select(&view);
        let mut fresh = PatchesLod::new(&field, &pyramid, options(4096));
        fresh.select(&view);
        assert_eq!(leaves(&travelled), leaves(&fresh), "camera {k}");
    }
}

#[test]
fn turning_around_in_place_neither_splits_nor_merges() {
    let field = rough_field(129);
    let pyramid = Pyramid::build(&field);
    let mut lod = PatchesLod::new(&field, &pyramid, options(4096));
    let eye = Vec3::new(50.0, 30.0, 70.0);
    lod.select(&View::screen(camera(eye, Vec3::new(60.0, 0.0, 70.0)), 1.0).expect("valid"));
    assert!(lod.patch_stats().splits > 0);
    let tree = leaves(&lod);
    let mut drawn = Vec::new();
    for step in 1..=16 {
        let angle = step as f32 * std::f32::consts::TAU / 16.0;
        let target = eye + Vec3::new(angle.cos(), -0.4, angle.sin());
        lod.select(&View::screen(camera(eye, target), 1.0).expect("valid"));
        let stats = lod.patch_stats();
        assert_eq!((stats.splits, stats.merges, stats.fills), (0, 0, 0));
        drawn.push(lod.stats().nodes_drawn);
    }
    assert_eq!(leaves(&lod), tree);
    assert!(
        drawn.iter().any(|&d| d < tree.len() as u64),
        "culling happens when drawing"
    );
}

#[test]
fn an_exhausted_pool_keeps_coarser_patches_and_stays_balanced() {
    let field = rough_field(129);
    let pyramid = Pyramid::build(&field);
    let minimum = leaves(&PatchesLod::new(&field, &pyramid, options(1))).len() as u32;
    for capacity in [
        minimum,
        minimum + 2,
        minimum + 3,
        minimum + 10,
        minimum + 40,
    ] {
        let mut lod = PatchesLod::new(&field, &pyramid, options(capacity));
        let bytes = lod.state_bytes();
        for k in 0..8 {
            let eye = Vec3::new(16.0 * k as f32, 2.0 + k as f32, 128.0 - 16.0 * k as f32);
            let view = View::screen(camera(eye, Vec3::splat(64.0)), 1.0).expect("valid");
            let triangles = lod.select(&view).triangle_count();
            assert!(triangles > 0);
            check_tree(&lod);
            assert!(lod.pool.in_use() <= capacity);
        }
        assert!(lod.patch_stats().exhausted, "capacity {capacity}");
        assert_eq!(lod.state_bytes(), bytes, "nothing grew");
    }
}

#[test]
fn world_error_mode_refines_rough_places_only() {
    // A plane with one bump: only the patches around the bump refine.
    let side = 129;
    let values = (0..side * side)
        .map(|i| {
            let (x, z) = (i % side, i / side);
            if (30..34).contains(&x) && (90..94).contains(&z) {
                50.0
            } else {
                0.0
            }
        })
        .collect();
    let field = Heightfield::from_f32(side, side, values).expect("valid field");
    let pyramid = Pyramid::build(&field);
    let mut lod = PatchesLod::new(&field, &pyramid, options(4096));
    lod.select(&View::world_error(1.0).expect("valid"));
    check_tree(&lod);
    for (level, ix, iz) in leaves(&lod) {
        let size = lod.tree.levels[level].size;
        let near_bump =
            ix * size <= 34 && (ix + 1) * size >= 30 && iz * size <= 94 && (iz + 1) * size >= 90;
        if near_bump {
            assert_eq!(
                level,
                lod.tree.finest(),
                "the bump is drawn at full resolution"
            );
        }
    }
    assert!(leaves(&lod).len() < 100, "the plane stays coarse");
}

#[test]
fn every_drawn_instance_names_the_slot_holding_its_patch() {
    let field = rough_field(129);
    let pyramid = Pyramid::build(&field);
    let mut lod = PatchesLod::new(&field, &pyramid, options(4096));
    let cell = field.mapping().cell_size;
    for eye in [Vec3::new(10.0, 40.0, 10.0), Vec3::new(120.0, 5.0, 3.0)] {
        let view = View::screen(camera(eye, Vec3::splat(64.0)), 1.0)
            .expect("valid view")
            .with_cull(false);
        let selection = lod.select(&view);
        let Selection::Patches {
            instances,
            pool: Some(pool),
            patch_side,
            ..
        } = selection
        else {
            panic!("algorithm P selects patches with its pool");
        };
        assert!(!instances.is_empty());
        for instance in instances {
            assert!(pool.generation(instance.slot) > 0, "a filled slot");
            let positions = pool.slot_positions(instance.slot..instance.slot + 1);
            for j in 0..=patch_side {
                for i in 0..=patch_side {
                    let pos = GridPos::new(
                        instance.origin.col + instance.step * i,
                        instance.origin.row + instance.step * j,
                    );
                    let expected = [
                        pos.col as f32 * cell,
                        crate::lod::sample_height(&field, pos),
                        pos.row as f32 * cell,
                    ];
                    assert_eq!(positions[(j * (patch_side + 1) + i) as usize], expected);
                }
            }
        }
    }
}

/// Growing a pool keeps every filled slot's patch and free slot, adds free slots (each slot
/// taken once), and changes the id so a GPU copy is remade.
#[test]
fn a_grown_pool_keeps_its_patches_and_adds_free_slots() {
    let field = rough_field(33);
    let mut pool = PatchPool::new(8, 3, &field);
    let (a, b) = (pool.take().unwrap(), pool.take().unwrap());
    pool.fill(a, &field, GridPos::new(0, 0), 1);
    pool.fill(b, &field, GridPos::new(8, 16), 2);
    let before: Vec<_> = [a, b]
        .iter()
        .map(|&s| (pool.slot_positions(s..s + 1).to_vec(), pool.generation(s)))
        .collect();
    let id = pool.id();
    pool.grow(2); // never shrinks
    assert_eq!((pool.capacity(), pool.id()), (3, id));
    pool.grow(10);
    assert_eq!(pool.capacity(), 10);
    assert_ne!(pool.id(), id);
    assert_eq!((pool.in_use(), pool.free_slots()), (2, 8));
    for (&s, (positions, generation)) in [a, b].iter().zip(&before) {
        assert_eq!(pool.slot_positions(s..s + 1), positions.as_slice());
        assert_eq!(pool.generation(s), *generation);
    }
    let mut taken: Vec<u32> = std::iter::from_fn(|| pool.take()).collect();
    taken.sort_unstable();
    let expected: Vec<u32> = (0..10).filter(|s| *s != a && *s != b).collect();
    assert_eq!(taken, expected);
}
