//! Patches laid side by side with the shared stitched index buffers
//! (`lod::stitched_patch`) form one watertight mesh whenever neighbours differ by at most one
//! level: the mesh checker finds no crack, T-junction or overlap, and the arrangement is
//! covered exactly.

use proptest::prelude::*;
use terralod_core::lod::stitched_patch::{SeamNeighbour, Side, StitchedPatch};
use terralod_core::lod::{GridVertices, PatchInstance, Selection};
use terralod_core::{Containment, GridPos};
use terralod_testkit::fixtures;
use terralod_testkit::mesh_check::{GridRect, check_mesh};

/// Lowers levels until every 4-neighbour pair differs by at most one (refining only).
fn relax(levels: &mut [u32], blocks: usize) {
    loop {
        let mut changed = false;
        for row in 0..blocks {
            for col in 0..blocks {
                let mut lowest = u32::MAX;
                for (dc, dr) in [(1i64, 0i64), (-1, 0), (0, 1), (0, -1)] {
                    let (c, r) = (col as i64 + dc, row as i64 + dr);
                    if (0..blocks as i64).contains(&c) && (0..blocks as i64).contains(&r) {
                        lowest = lowest.min(levels[r as usize * blocks + c as usize]);
                    }
                }
                let own = &mut levels[row * blocks + col];
                if *own > lowest.saturating_add(1) {
                    *own = lowest + 1;
                    changed = true;
                }
            }
        }
        if !changed {
            return;
        }
    }
}

fn instances(patch: &StitchedPatch, levels: &[u32], blocks: usize) -> Vec<PatchInstance> {
    let n = patch.side();
    let level_at = |col: i64, row: i64| {
        ((0..blocks as i64).contains(&col) && (0..blocks as i64).contains(&row))
            .then(|| levels[row as usize * blocks + col as usize])
    };
    let mut out = Vec::new();
    for row in 0..blocks {
        for col in 0..blocks {
            let level = levels[row * blocks + col];
            let origin = GridPos::new(col as u32 * n, row as u32 * n);
            let instance = |index_buffer| PatchInstance {
                origin,
                step: 1,
                index_buffer,
                level,
                frustum: Containment::Inside,
                slot: PatchInstance::NO_SLOT,
            };
            out.push(instance(patch.interior(level)));
            for side in Side::ALL {
                let (dc, dr) = match side {
                    Side::North => (0, -1),
                    Side::South => (0, 1),
                    Side::West => (-1, 0),
                    Side::East => (1, 0),
                };
                let neighbour = level_at(col as i64 + dc, row as i64 + dr);
                if let Some(seam) =
                    patch.seam(level, side, SeamNeighbour::for_levels(level, neighbour))
                {
                    out.push(instance(seam));
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn mixed_levels_stitch_watertight(
        log2_side in 1u32..=4,
        blocks in 2usize..=3,
        raw_levels in prop::collection::vec(0u32..=4, 9),
    ) {
        let patch = StitchedPatch::new(log2_side).unwrap();
        let mut levels: Vec<u32> = raw_levels[..blocks * blocks]
            .iter()
            .map(|&l| l.min(patch.coarsest_level()))
            .collect();
        relax(&mut levels, blocks);
        let side = patch.side() * blocks as u32 + 1;
        let field = fixtures::smooth_random(side, side, 7, 20.0).unwrap();
        let instances = instances(&patch, &levels, blocks);
        let selection = Selection::Patches {
            vertices: GridVertices {
                stride: side,
                rows: side,
                shift: 0,
            },
            patch_side: patch.side(),
            index_buffers: patch.buffers(),
            instances: &instances,
            morph: None,
            pool: None,
        };
        let report = check_mesh(&selection.to_mesh(&field), Some(GridRect::square(side)));
        prop_assert!(report.is_watertight(), "levels {:?}: {:?}", levels, report.defects());
    }
}
