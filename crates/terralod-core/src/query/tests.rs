//! Tests of the queries against brute force.

use super::*;
use crate::heightfield::{Samples, WorldMapping};
use crate::test_support::lcg_values;
use proptest::prelude::*;

fn field(w: u32, h: u32, values: Vec<u16>, cell_size: f32) -> Heightfield {
    Heightfield::new(w, h, Samples::U16(values))
        .unwrap()
        .with_mapping(WorldMapping {
            cell_size,
            height_scale: 0.05,
            height_offset: 10.0,
        })
        .unwrap()
}

/// Brute force, sharing no code with the module: every cell, the ray's span over the cell
/// sampled densely, the first sign change of (ray height − surface) refined by bisection.
fn brute_raycast(field: &Heightfield, origin: Vec3, dir: Vec3, max_t: f32) -> Option<f64> {
    let (o, d) = (origin.as_dvec3(), dir.as_dvec3());
    let cell = f64::from(field.mapping().cell_size);
    let y = |c: u32, r: u32| f64::from(field.world_y(c, r));
    let mut best: Option<f64> = None;
    for r in 0..field.height() - 1 {
        for c in 0..field.width() - 1 {
            // Where the ray's (x, z) is over this cell.
            let (mut t0, mut t1) = (0.0f64, f64::from(max_t));
            for (o, d, lo) in [
                (o.x, d.x, f64::from(c) * cell),
                (o.z, d.z, f64::from(r) * cell),
            ] {
                let hi = lo + cell;
                if d == 0.0 {
                    if o < lo || o > hi {
                        t1 = -1.0;
                    }
                } else {
                    let (a, b) = ((lo - o) / d, (hi - o) / d);
                    t0 = t0.max(a.min(b));
                    t1 = t1.min(a.max(b));
                }
            }
            if t0 > t1 {
                continue;
            }
            let gap = |t: f64| {
                let p = o + d * t;
                let u = (p.x / cell - f64::from(c)).clamp(0.0, 1.0);
                let v = (p.z / cell - f64::from(r)).clamp(0.0, 1.0);
                let surface = y(c, r) * (1.0 - u) * (1.0 - v)
                    + y(c + 1, r) * u * (1.0 - v)
                    + y(c, r + 1) * (1.0 - u) * v
                    + y(c + 1, r + 1) * u * v;
                p.y - surface
            };
            const STEPS: usize = 64;
            let ts: Vec<f64> = (0..=STEPS)
                .map(|i| t0 + (t1 - t0) * i as f64 / STEPS as f64)
                .collect();
            let hit = ts.windows(2).find_map(|pair| {
                let (mut a, mut b) = (pair[0], pair[1]);
                let (ga, gb) = (gap(a), gap(b));
                if ga == 0.0 {
                    return Some(a);
                }
                if ga.signum() == gb.signum() && gb != 0.0 {
                    return None;
                }
                for _ in 0..80 {
                    let m = 0.5 * (a + b);
                    if gap(m).signum() == ga.signum() {
                        a = m;
                    } else {
                        b = m;
                    }
                }
                Some(b)
            });
            if let Some(t) = hit {
                best = Some(best.map_or(t, |b: f64| b.min(t)));
            }
        }
    }
    best
}

/// Checks the fast ray cast against the brute force; the helper every ray test goes through.
fn check_ray(field: &Heightfield, pyramid: &Pyramid, origin: Vec3, dir: Vec3, max_t: f32) {
    let fast = raycast(field, pyramid, origin, dir, max_t);
    let brute = brute_raycast(field, origin, dir, max_t);
    let scale = 1.0 + f64::from(dir.length());
    if let Some(hit) = fast {
        let t = f64::from(hit.t);
        assert!(t >= 0.0 && hit.t <= max_t, "t {t} outside [0, {max_t}]");
        // A real intersection: on the surface, over the reported cell.
        let surface =
            height_at(field, hit.position.x, hit.position.z).expect("a hit lies over the data");
        assert!(
            (hit.position.y - surface).abs() < 2e-3 * scale as f32,
            "hit {hit:?} is {} off the surface",
            hit.position.y - surface
        );
        let cell = field.mapping().cell_size;
        let (cx, cz) = (hit.position.x / cell, hit.position.z / cell);
        assert!(
            (cx - hit.cell.col as f32) > -1e-3 && (cx - hit.cell.col as f32) < 1.0 + 1e-3,
            "{hit:?} not over its cell"
        );
        assert!((cz - hit.cell.row as f32) > -1e-3 && (cz - hit.cell.row as f32) < 1.0 + 1e-3);
        // The first one: no crossing before it.
        if let Some(b) = brute {
            assert!(
                b >= t - 1e-5 * (1.0 + t),
                "missed an earlier crossing at {b} (hit at {t})"
            );
        }
    }
    if let Some(b) = brute {
        let t = fast.map(|h| f64::from(h.t));
        assert!(
            t.is_some_and(|t| t <= b + 1e-5 * (1.0 + b)),
            "brute force crosses at {b}, the ray cast says {t:?}"
        );
    }
}

#[test]
fn height_at_interpolates_bilinearly_inside_the_data() {
    let f = field(3, 2, vec![0, 100, 200, 300, 400, 800], 2.0);
    assert_eq!(height_at(&f, 0.0, 0.0), Some(10.0));
    assert_eq!(height_at(&f, 4.0, 2.0), Some(f.world_y(2, 1))); // the last corner
    assert_eq!(height_at(&f, 1.0, 0.0), Some(12.5)); // edge midpoint
    assert_eq!(height_at(&f, 1.0, 1.0), Some(20.0)); // mean of 0, 100, 300, 400 → 200 raw
    assert_eq!(height_at(&f, 3.0, 1.0), Some(10.0 + 0.05 * 375.0));
    for (x, z) in [(-0.01, 0.0), (4.01, 1.0), (1.0, 2.01), (f32::NAN, 1.0)] {
        assert_eq!(height_at(&f, x, z), None);
    }
}

#[test]
fn rays_hit_where_expected() {
    let f = field(5, 4, lcg_values(20, 1, 400), 1.0);
    let p = Pyramid::build(&f);
    // Straight down onto a sample, and onto the middle of a cell.
    let hit = raycast(&f, &p, Vec3::new(2.0, 100.0, 1.0), Vec3::NEG_Y, 1e3).unwrap();
    assert_eq!(hit.position.y, f.world_y(2, 1));
    assert!((hit.t - (100.0 - f.world_y(2, 1))).abs() < 1e-4);
    let hit = raycast(&f, &p, Vec3::new(2.5, -50.0, 1.5), Vec3::Y * 2.0, 1e3).unwrap();
    assert_eq!(hit.cell, GridPos::new(2, 1));
    assert!((hit.position.y - height_at(&f, 2.5, 1.5).unwrap()).abs() < 1e-4);
    assert!((hit.t * 2.0 - (hit.position.y + 50.0)).abs() < 1e-3);
    // max_t cuts the ray short; a zero or non-finite direction finds nothing.
    assert!(raycast(&f, &p, Vec3::new(2.5, 100.0, 1.5), Vec3::NEG_Y, 50.0).is_none());
    assert!(raycast(&f, &p, Vec3::new(2.5, 100.0, 1.5), Vec3::ZERO, 1e3).is_none());
    assert!(raycast(&f, &p, Vec3::new(2.5, 100.0, 1.5), Vec3::NAN, 1e3).is_none());
    assert!(raycast(&f, &p, Vec3::new(2.5, 100.0, 1.5), Vec3::NEG_Y, f32::NAN).is_none());
    // Outside the data there is no terrain.
    assert!(raycast(&f, &p, Vec3::new(-0.5, 100.0, 1.5), Vec3::NEG_Y, 1e3).is_none());
    // Going up from above, or away, misses.
    assert!(raycast(&f, &p, Vec3::new(2.5, 100.0, 1.5), Vec3::Y, 1e3).is_none());
}

#[test]
fn a_ray_touching_a_flat_field_hits_where_it_enters() {
    let f = field(9, 9, vec![200; 81], 1.0);
    let p = Pyramid::build(&f);
    let hit = raycast(&f, &p, Vec3::new(-2.0, 20.0, 3.5), Vec3::X, 1e3).unwrap();
    assert!((hit.t - 2.0).abs() < 1e-5 && hit.cell == GridPos::new(0, 3));
    assert!(raycast(&f, &p, Vec3::new(-2.0, 20.001, 3.5), Vec3::X, 1e3).is_none());
}

#[test]
fn long_rays_over_a_large_field_agree_with_the_brute_force() {
    // Rolling hills over 129 × 97 samples: grazing rays pass over many cells.
    let (w, h) = (129u32, 97u32);
    let v: Vec<u16> = (0..w * h)
        .map(|i| {
            let (x, z) = (f64::from(i % w), f64::from(i / w));
            (300.0 + 120.0 * (x * 0.13).sin() * (z * 0.07).cos() + 40.0 * (x * z * 0.002).sin())
                as u16
        })
        .collect();
    let f = field(w, h, v, 2.0);
    let p = Pyramid::build(&f);
    for k in 0..40 {
        let a = f32::from(k as u8) * 0.157;
        let origin = Vec3::new(-10.0, 27.0 + (k % 7) as f32, 90.0 + 40.0 * a.sin());
        let dir = Vec3::new(a.cos().abs() + 0.2, -0.004 * (k % 5) as f32, a.sin());
        check_ray(&f, &p, origin, dir, 1e4);
    }
}

#[derive(Clone, Copy, Debug)]
enum RayKind {
    FromAbove,
    FromBelow,
    Grazing,
    Vertical,
    Away,
    Anywhere,
}

fn arbitrary_ray() -> impl Strategy<Value = (RayKind, [f32; 3], [f32; 3], bool)> {
    (
        prop::sample::select(vec![
            RayKind::FromAbove,
            RayKind::FromBelow,
            RayKind::Grazing,
            RayKind::Vertical,
            RayKind::Away,
            RayKind::Anywhere,
        ]),
        prop::array::uniform3(0.0f32..=1.0),
        prop::array::uniform3(-1.0f32..=1.0),
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn rays_match_the_brute_force(
        (w, h) in (2u32..=20, 2u32..=20),
        seed in any::<u64>(),
        cell in 0.5f32..3.0,
        (kind, at, towards, flag) in arbitrary_ray(),
    ) {
        let f = field(w, h, lcg_values((w * h) as usize, seed, 600), cell);
        let p = Pyramid::build(&f);
        let (lo, hi) = f.world_range();
        let (sx, sz) = f.world_size();
        let span = |u: f32, size: f32| -0.2 * size + 1.4 * size * u;
        let (x, z) = (span(at[0], sx), span(at[2], sz));
        let (origin, dir) = match kind {
            RayKind::FromAbove => (
                Vec3::new(x, hi + 1.0 + 20.0 * at[1], z),
                Vec3::new(towards[0], -0.05 - towards[1].abs(), towards[2]),
            ),
            RayKind::FromBelow => (
                Vec3::new(x, lo - 1.0 - 20.0 * at[1], z),
                Vec3::new(towards[0], 0.05 + towards[1].abs(), towards[2]),
            ),
            RayKind::Grazing => (
                Vec3::new(-1.0, lo + (hi - lo) * at[1], z),
                Vec3::new(1.0, 0.02 * towards[1], towards[2]),
            ),
            RayKind::Vertical => {
                // On grid lines half of the time.
                let snap = |v: f32| if flag { (v / cell).round() * cell } else { v };
                let y = if towards[1] < 0.0 { hi + 5.0 } else { lo - 5.0 };
                (Vec3::new(snap(x), y, snap(z)), Vec3::new(0.0, towards[1].signum(), 0.0))
            }
            RayKind::Away => (
                Vec3::new(x, hi + 0.5, z),
                Vec3::new(towards[0], 0.01 + towards[1].abs(), towards[2]),
            ),
            RayKind::Anywhere => (
                Vec3::new(x, lo - 5.0 + (hi - lo + 10.0) * at[1], z),
                Vec3::from(towards),
            ),
        };
        prop_assume!(dir != Vec3::ZERO);
        let max_t = if flag { 1e4 } else { 5.0 + 30.0 * at[1] };
        check_ray(&f, &p, origin, dir, max_t);
    }
}
