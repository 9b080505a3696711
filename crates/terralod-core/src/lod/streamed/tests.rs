//! Unit tests of the streamed algorithm: the seam containment its bound rests on, balance,
//! slots kept across frames.

use super::*;
use crate::camera::Camera;
use crate::heightfield::Heightfield;
use crate::tiles::{MemoryTiles, MemoryTilesOptions};

/// Every triangle of every coarse seam of level `ℓ` lies inside one half of a cell of
/// level `ℓ + 1` (the containment the error bound `error_to_finest + 2 · own_error` needs).
#[test]
fn coarse_seam_triangles_lie_in_one_coarser_half_cell() {
    for log2 in 1..=7 {
        let patch = StitchedPatch::clamped(log2);
        let stride = i64::from(patch.side()) + 1;
        for level in 0..log2 {
            let s2 = 2i64 << level;
            for side in Side::ALL {
                let buffer = patch
                    .seam(level, side, SeamNeighbour::Coarser)
                    .expect("a seam below the coarsest level");
                for t in patch.buffers()[buffer as usize].chunks_exact(3) {
                    let p =
                        [t[0], t[1], t[2]].map(|v| (i64::from(v) % stride, i64::from(v) / stride));
                    // The coarse cell holding the triangle's centroid (times 3, exact).
                    let (cx3, cy3) = (p[0].0 + p[1].0 + p[2].0, p[0].1 + p[1].1 + p[2].1);
                    let (x0, y0) = ((cx3 / 3) / s2 * s2, (cy3 / 3) / s2 * s2);
                    let (x1, y1) = (x0 + s2, y0 + s2);
                    let halves = [
                        [(x0, y0), (x1, y0), (x1, y1)],
                        [(x0, y0), (x1, y1), (x0, y1)],
                        [(x0, y0), (x1, y0), (x0, y1)],
                        [(x1, y0), (x1, y1), (x0, y1)],
                    ];
                    let inside = |h: &[(i64, i64); 3], q: (i64, i64)| {
                        let e = |a: (i64, i64), b: (i64, i64)| {
                            (b.0 - a.0) * (q.1 - a.1) - (b.1 - a.1) * (q.0 - a.0)
                        };
                        let s = [e(h[0], h[1]), e(h[1], h[2]), e(h[2], h[0])];
                        s.iter().all(|&v| v >= 0) || s.iter().all(|&v| v <= 0)
                    };
                    assert!(
                        halves.iter().any(|h| p.iter().all(|&q| inside(h, q))),
                        "side 2^{log2} level {level} {side}: triangle {p:?} crosses coarse cells"
                    );
                }
            }
        }
    }
}

fn bumpy(side: u32) -> Heightfield {
    let values = (0..side * side)
        .map(|i| {
            let (x, y) = ((i % side) as f32, (i / side) as f32);
            20.0 * (x * 0.37).sin() * (y * 0.23).cos()
                + ((i.wrapping_mul(2_654_435_761)) >> 28) as f32
        })
        .collect();
    Heightfield::from_f32(side, side, values).expect("valid field")
}

fn cameras(field: &Heightfield) -> Vec<Camera> {
    let (w, d) = field.world_size();
    let centre = Vec3::new(0.5 * w, 10.0, 0.5 * d);
    (0..12)
        .map(|k| {
            let a = k as f32 * 0.55;
            let r = if k % 3 == 0 { 0.1 } else { 0.7 };
            let eye = centre
                + Vec3::new(
                    r * w * a.cos(),
                    5.0 + 20.0 * (k % 4) as f32,
                    r * d * a.sin(),
                );
            Camera::new(
                eye,
                centre + Vec3::new(a.sin() * 5.0, 0.0, 0.0),
                1.0,
                (640, 480),
                0.5,
                1e4,
            )
            .expect("valid camera")
        })
        .collect()
}

/// Drawn blocks that share an edge differ by at most one level.
fn assert_balanced(blocks: &[(u32, u32, u32)], b: u32) {
    let rect = |&(l, x, y): &(u32, u32, u32)| {
        let s = b << l;
        (x * s, y * s, x * s + s, y * s + s)
    };
    for p in blocks {
        for q in blocks {
            let (a, c) = (rect(p), rect(q));
            let touch_x = (a.2 == c.0 || c.2 == a.0) && a.1 < c.3 && c.1 < a.3;
            let touch_y = (a.3 == c.1 || c.3 == a.1) && a.0 < c.2 && c.0 < a.2;
            if touch_x || touch_y {
                assert!(p.0.abs_diff(q.0) <= 1, "{p:?} next to {q:?}");
            }
        }
    }
}

#[test]
fn drawn_neighbours_are_within_one_level() {
    for (side, n, b) in [(65, 4, 2), (50, 8, 4), (33, 2, 2)] {
        let field = bumpy(side);
        let tiles = MemoryTiles::new(
            &field,
            MemoryTilesOptions {
                tile_cells: n,
                block_cells: b,
            },
        )
        .expect("valid");
        let mut lod = StreamedLod::new(tiles, LodOptions::default());
        for camera in cameras(&field) {
            for tolerance in [0.3, 2.0] {
                let view = View::screen(camera, tolerance).expect("valid view");
                for cull in [true, false] {
                    let _ = lod.select(&view.with_cull(cull));
                    let blocks: Vec<_> = lod.drawn_blocks().collect();
                    assert!(!blocks.is_empty());
                    assert_balanced(&blocks, b);
                }
            }
        }
    }
}

#[test]
fn blocks_keep_their_slots_while_drawn() {
    let field = bumpy(65);
    let tiles = MemoryTiles::new(
        &field,
        MemoryTilesOptions {
            tile_cells: 8,
            block_cells: 4,
        },
    )
    .expect("valid");
    let mut lod = StreamedLod::new(tiles, LodOptions::default());
    let camera = cameras(&field)[1];
    let view = View::screen(camera, 1.0).expect("valid");
    let _ = lod.select(&view);
    let first = lod.stream_stats().slots_filled;
    assert_eq!(first, lod.stream_stats().blocks_drawn);
    let slots: Vec<u32> = lod.instances.iter().map(|p| p.slot).collect();
    let _ = lod.select(&view);
    assert_eq!(lod.stream_stats().slots_filled, 0, "nothing refilled");
    let again: Vec<u32> = lod.instances.iter().map(|p| p.slot).collect();
    assert_eq!(slots, again);
    // The pool holds each drawn block's heights, as the grid has them.
    let pool = lod.pool();
    for p in &lod.instances {
        for (i, j) in [(0, 0), (4, 0), (2, 3), (4, 4)] {
            let pos = GridPos::new(p.origin.col + p.step * i, p.origin.row + p.step * j);
            let v = pool.position(p.slot, i, j);
            assert_eq!(v.y, crate::lod::sample_height(&field, pos));
            assert_eq!((v.x, v.z), (pos.col as f32, pos.row as f32));
        }
    }
    // A far view draws fewer blocks: the others' slots are freed.
    let far = View::world_error(1e6).expect("valid");
    let _ = lod.select(&far);
    assert_eq!(lod.pool().in_use() as u64, lod.stream_stats().blocks_drawn);
}
