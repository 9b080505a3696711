//! Tests of the pyramid against an independent brute-force oracle.

use super::fan_error::{self, Scan, Strategy as ErrorStrategy};
use super::*;
use crate::test_support::lcg_values;
use proptest::prelude::*;

/// World height of a (possibly padded) sample, in f64.
fn world(field: &Heightfield, col: u32, row: u32) -> f64 {
    let m = field.mapping();
    f64::from(field.raw_clamped(col, row)) * f64::from(m.height_scale) + f64::from(m.height_offset)
}

/// The 8 fan triangles as vertex offsets in units of half a node: centre, corner, midpoint.
const FAN: [[(u32, u32); 3]; 8] = [
    [(1, 1), (0, 0), (1, 0)],
    [(1, 1), (1, 0), (2, 0)],
    [(1, 1), (2, 0), (2, 1)],
    [(1, 1), (2, 1), (2, 2)],
    [(1, 1), (2, 2), (1, 2)],
    [(1, 1), (1, 2), (0, 2)],
    [(1, 1), (0, 2), (0, 1)],
    [(1, 1), (0, 1), (0, 0)],
];

/// Brute force: the fan's value at every sample by barycentric interpolation in whichever
/// triangle contains it, compared with the sample; no shortcut, all in f64.
fn brute_own_error(field: &Heightfield, x0: u32, z0: u32, size: u32) -> f64 {
    let half = size / 2;
    let mut worst = 0.0f64;
    for row in z0..=z0 + size {
        for col in x0..=x0 + size {
            let (px, pz) = (f64::from(col), f64::from(row));
            let surface = FAN
                .iter()
                .find_map(|tri| {
                    let v: Vec<(f64, f64, f64)> = tri
                        .iter()
                        .map(|&(i, j)| {
                            let (c, r) = (x0 + i * half, z0 + j * half);
                            (f64::from(c), f64::from(r), world(field, c, r))
                        })
                        .collect();
                    let det = (v[1].0 - v[0].0) * (v[2].1 - v[0].1)
                        - (v[2].0 - v[0].0) * (v[1].1 - v[0].1);
                    let l1 = ((px - v[0].0) * (v[2].1 - v[0].1)
                        - (v[2].0 - v[0].0) * (pz - v[0].1))
                        / det;
                    let l2 = ((v[1].0 - v[0].0) * (pz - v[0].1)
                        - (px - v[0].0) * (v[1].1 - v[0].1))
                        / det;
                    let l0 = 1.0 - l1 - l2;
                    (l0 >= -1e-12 && l1 >= -1e-12 && l2 >= -1e-12)
                        .then(|| l0 * v[0].2 + l1 * v[1].2 + l2 * v[2].2)
                })
                .expect("every sample of the square lies in a fan triangle");
            worst = worst.max((world(field, col, row) - surface).abs());
        }
    }
    worst
}

/// Brute-force monotone error: own error, maxed with the stored children's, recursively.
fn brute_error(field: &Heightfield, pyramid: &Pyramid, level: usize, ix: u32, iz: u32) -> f64 {
    let size = pyramid.node_size(level);
    if size == 2 {
        return 0.0;
    }
    let own = brute_own_error(field, ix * size, iz * size, size);
    pyramid
        .children(level, ix, iz)
        .map(|(cx, cz)| brute_error(field, pyramid, level + 1, cx, cz))
        .fold(own, f64::max)
}

/// Allowed excess of the stored bound over the exact error (f32 rounding upwards, and the
/// float-source slack).
fn tolerance(field: &Heightfield, exact: f64) -> f64 {
    let (lo, hi) = field.raw_range();
    let scale = f64::from(field.mapping().height_scale.abs());
    exact * 1e-6 + scale * f64::from(lo.abs().max(hi.abs())) * 1e-9
}

/// Every way of computing the errors: they must all pass the same checks.
const STRATEGIES: [ErrorStrategy; 5] = [
    ErrorStrategy::FASTEST,
    ErrorStrategy {
        fastest_float: true,
        scan: Scan::Segments,
    },
    ErrorStrategy {
        fastest_float: true,
        scan: Scan::Across,
    },
    ErrorStrategy {
        fastest_float: false,
        scan: Scan::Segments,
    },
    ErrorStrategy {
        fastest_float: false,
        scan: Scan::Across,
    },
];

/// Checks every stored node against the oracles, for every strategy; the one helper every
/// test goes through. Returns the pyramid of the default strategy.
fn check(field: &Heightfield) -> Pyramid {
    let pyramid = Pyramid::build(field);
    let (w, h) = (field.width(), field.height());
    assert_eq!(pyramid.padded_side(), field.padded_side());
    assert_eq!(pyramid.node_size(pyramid.levels() - 1), 2);
    let others: Vec<Pyramid> = STRATEGIES[1..]
        .iter()
        .map(|&strategy| Pyramid::build_with(field, strategy, fan_error::max_abs(field)))
        .collect();
    for level in 0..pyramid.levels() {
        let s = pyramid.node_size(level);
        assert_eq!(s, (field.padded_side() - 1) >> level);
        let (nx, nz) = pyramid.nodes(level);
        assert_eq!((nx, nz), ((w - 1).div_ceil(s), (h - 1).div_ceil(s)));
        for iz in 0..nz {
            for ix in 0..nx {
                let node = pyramid.node(level, ix, iz);
                // min/max: exact over the padded square.
                let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
                for row in iz * s..=iz * s + s {
                    for col in ix * s..=ix * s + s {
                        let y = f64::from(field.mapping().world_y(field.raw_clamped(col, row)));
                        lo = lo.min(y);
                        hi = hi.max(y);
                    }
                }
                assert_eq!((f64::from(node.min_y), f64::from(node.max_y)), (lo, hi));
                // error: an upper bound, and tight, whichever way it was computed.
                let exact = brute_error(field, &pyramid, level, ix, iz);
                for (k, p) in std::iter::once(&pyramid).chain(&others).enumerate() {
                    let stored = f64::from(p.node(level, ix, iz).error);
                    let strategy = STRATEGIES[k];
                    assert!(
                        stored >= exact,
                        "{strategy:?} level {level} node ({ix}, {iz}): bound {stored} below exact {exact}"
                    );
                    assert!(
                        stored <= exact + tolerance(field, exact),
                        "{strategy:?} level {level} node ({ix}, {iz}): bound {stored} not tight (exact {exact})"
                    );
                }
                // monotone towards the root.
                for (cx, cz) in pyramid.children(level, ix, iz) {
                    assert!(pyramid.node(level + 1, cx, cz).error <= node.error);
                }
            }
        }
        assert!(pyramid.get(level, nx, 0).is_none() && pyramid.get(level, 0, nz).is_none());
    }
    pyramid
}

fn u16_field(w: u32, h: u32, values: Vec<u16>) -> Heightfield {
    Heightfield::new(w, h, Samples::U16(values)).unwrap()
}

#[test]
fn odd_sizes_match_the_brute_force() {
    for (w, h) in [(2, 2), (3, 7), (17, 5), (33, 33), (2, 9), (9, 3)] {
        let field = u16_field(
            w,
            h,
            lcg_values((w * h) as usize, u64::from(w * 100 + h), 1000),
        );
        check(&field);
    }
}

#[test]
fn node_counts_cover_only_the_data() {
    // A 65 × 33 field has the square quadtree of a 65 × 65 one, but half its nodes.
    let wide = u16_field(65, 33, vec![0; 65 * 33]);
    let square = u16_field(65, 65, vec![0; 65 * 65]);
    let (p_wide, p_square) = (Pyramid::build(&wide), Pyramid::build(&square));
    assert_eq!(p_wide.levels(), 6);
    assert_eq!(p_wide.nodes(0), (1, 1));
    assert_eq!(p_wide.nodes(1), (2, 1));
    assert_eq!(p_wide.nodes(5), (32, 16));
    let (a, b) = (p_wide.memory_bytes(), p_square.memory_bytes());
    assert!(a * 2 <= b + 16, "{a} bytes is not about half of {b}");
    assert!(p_wide.children(0, 0, 0).eq([(0, 0), (1, 0)]));
    assert_eq!(p_wide.children(5, 0, 0).count(), 0);
}

#[test]
fn a_plane_has_no_error_inside_the_data() {
    // Integer and dyadic planes are exact in any arithmetic: the bound is exactly 0 on every
    // node inside the data. Nodes that reach into the padding see the plane folded flat at
    // the border, so they have a (brute-force checked) error.
    for (w, h) in [(33, 33), (37, 21)] {
        let ints: Vec<u16> = (0..w * h)
            .map(|i| (3 * (i % w) + 7 * (i / w) + 100) as u16)
            .collect();
        let pyramid = check(&u16_field(w, h, ints));
        let mut zero_nodes = 0;
        for level in 0..pyramid.levels() {
            let s = pyramid.node_size(level);
            let (nx, nz) = pyramid.nodes(level);
            for (ix, iz) in (0..nz).flat_map(|iz| (0..nx).map(move |ix| (ix, iz))) {
                let inside = ix * s + s < w && iz * s + s < h;
                let error = pyramid.node(level, ix, iz).error;
                if inside {
                    assert_eq!(error, 0.0, "{w} x {h}, level {level}, node ({ix}, {iz})");
                    zero_nodes += 1;
                }
            }
        }
        assert!(zero_nodes > 100);
    }
    // Float sources carry a rounding slack of 2^-45 of the largest magnitude.
    let (w, h) = (33u32, 33u32);
    let dyadic: Vec<f32> = (0..w * h)
        .map(|i| 0.25 * (i % w) as f32 - 1.5 * (i / w) as f32 + 1000.0)
        .collect();
    let pyramid = check(&Heightfield::from_f32(w, h, dyadic).unwrap());
    assert!(pyramid.node(0, 0, 0).error <= 1e-9);
}

#[test]
fn a_spike_raises_exactly_its_ancestors() {
    let (w, h) = (21u32, 13u32);
    for (sc, sr) in [(0, 0), (5, 7), (20, 12), (20, 3), (8, 12), (16, 8), (1, 1)] {
        let mut values = vec![500u16; (w * h) as usize];
        values[(sr * w + sc) as usize] = 900;
        let field = u16_field(w, h, values);
        let pyramid = check(&field);
        for level in 0..pyramid.levels() - 1 {
            let s = pyramid.node_size(level);
            let (nx, nz) = pyramid.nodes(level);
            for (ix, iz) in (0..nz).flat_map(|iz| (0..nx).map(move |ix| (ix, iz))) {
                let contains =
                    (ix * s..=ix * s + s).contains(&sc) && (iz * s..=iz * s + s).contains(&sr);
                let error = pyramid.node(level, ix, iz).error;
                assert_eq!(
                    error > 0.0,
                    contains,
                    "spike ({sc}, {sr}), level {level}, node ({ix}, {iz}): error {error}"
                );
            }
        }
    }
}

#[test]
fn a_negative_scale_flips_min_and_max() {
    let field = u16_field(5, 5, lcg_values(25, 7, 200))
        .with_mapping(WorldMapping {
            cell_size: 2.0,
            height_scale: -0.5,
            height_offset: 10.0,
        })
        .unwrap();
    let pyramid = check(&field);
    let root = pyramid.node(0, 0, 0);
    assert!(root.min_y < root.max_y);
    let aabb = pyramid.aabb(0, 0, 0, &field.mapping());
    assert_eq!(aabb.min, Vec3::new(0.0, root.min_y, 0.0));
    assert_eq!(aabb.max, Vec3::new(8.0, root.max_y, 8.0));
}

#[test]
fn every_strategy_gives_identical_errors_on_integer_data() {
    // Wide enough for the scan across nodes to be chosen on several levels by default.
    let field = u16_field(150, 45, lcg_values(150 * 45, 3, 4000));
    let pyramid = Pyramid::build(&field);
    let reference = fan_error::own_errors(
        &field,
        &pyramid.levels,
        ErrorStrategy::FASTEST,
        fan_error::max_abs(&field),
    );
    for strategy in STRATEGIES {
        assert_eq!(
            fan_error::own_errors(
                &field,
                &pyramid.levels,
                strategy,
                fan_error::max_abs(&field)
            ),
            reference,
            "{strategy:?}"
        );
    }
    let (ix, iz) = (17, 3);
    let level = pyramid.levels() - 2; // s = 4
    let exact = brute_own_error(&field, ix * 4, iz * 4, 4);
    let stored = f64::from(reference[level][(iz * pyramid.nodes(level).0 + ix) as usize]);
    assert_eq!(stored, exact);
}

/// A field of pseudo-random samples of one of the three storage types.
fn random_field(w: u32, h: u32, kind: u8, seed: u64, negative: bool) -> Heightfield {
    let n = (w * h) as usize;
    let raw = lcg_values(n, seed, u16::MAX);
    let samples = match kind {
        0 => Samples::U16(raw),
        1 => Samples::I16(raw.into_iter().map(|v| v as i16).collect()),
        _ => Samples::F32(
            raw.into_iter()
                .map(|v| f32::from(v) * 0.013 - 300.0)
                .collect(),
        ),
    };
    let mapping = WorldMapping {
        cell_size: 1.5,
        height_scale: if negative { -0.1 } else { 0.37 },
        height_offset: 12.0,
    };
    Heightfield::new(w, h, samples)
        .unwrap()
        .with_mapping(mapping)
        .unwrap()
}

fn arbitrary_field() -> impl Strategy<Value = Heightfield> {
    (2u32..=24, 2u32..=24, 0u8..3, any::<u64>(), prop::bool::ANY)
        .prop_map(|(w, h, kind, seed, negative)| random_field(w, h, kind, seed, negative))
}

/// Found by proptest: the fan's kink on a diagonal lies in the padded columns and holds the
/// node's largest error there, so the padded-column scan must evaluate knots, not just ends.
#[test]
fn regression_padded_column_knot() {
    check(&random_field(20, 9, 0, 44, false));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_fields_match_the_brute_force(field in arbitrary_field()) {
        check(&field);
    }
}

/// Loads a 16-bit greyscale PNG with the png crate (the loaders live elsewhere).
fn load_png_u16(path: &str) -> Option<Heightfield> {
    let file = std::fs::File::open(path).ok()?;
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .ok()?;
    let mut buf = vec![0; reader.output_buffer_size()?];
    let info = reader.next_frame(&mut buf).ok()?;
    assert_eq!(info.bit_depth, png::BitDepth::Sixteen);
    let values = buf[..info.buffer_size()]
        .chunks_exact(2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .collect();
    Some(u16_field(info.width, info.height, values))
}

#[test]
fn real_16_bit_data_matches_the_brute_force() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/srtm3_boulder_co_758.png"
    );
    let Some(field) = load_png_u16(path) else {
        eprintln!("SKIPPED: {path} is absent");
        return;
    };
    // A 300 × 260 crop keeps the debug-build test fast; its 513-sample quadtree is still
    // large enough for values up to 43200 to need the f64 kernel at the root.
    let (w, h) = (300u32, 260u32);
    let crop: Vec<u16> = (0..w * h)
        .map(|i| field.raw(200 + i % w, 250 + i / w) as u16)
        .collect();
    let field = u16_field(w, h, crop)
        .with_mapping(WorldMapping {
            cell_size: 80.0,
            height_scale: 0.1,
            height_offset: 0.0,
        })
        .unwrap();
    assert!(2.0 * f64::from(field.raw_range().1) * 256.0 > f64::from(1u32 << 24));
    let pyramid = Pyramid::build(&field);
    // Values up to 43200 make the top levels use the f64 kernel, the others f32.
    let own = fan_error::own_errors(
        &field,
        &pyramid.levels,
        ErrorStrategy::FASTEST,
        fan_error::max_abs(&field),
    );
    let mut checked = 0;
    for (level, own_level) in own.iter().enumerate().take(pyramid.levels() - 1) {
        let (nx, nz) = pyramid.nodes(level);
        let s = pyramid.node_size(level);
        for (k, ix, iz) in [(0, 0, 0), (1, nx - 1, nz - 1), (2, nx / 2, nz / 3)] {
            if k > 0 && (nx, nz) == (1, 1) {
                continue;
            }
            let exact = brute_own_error(&field, ix * s, iz * s, s);
            let stored = f64::from(own_level[(iz * nx + ix) as usize]);
            assert!(stored >= exact && stored <= exact + tolerance(&field, exact));
            checked += 1;
        }
    }
    assert!(checked > 20);
    let root = pyramid.node(0, 0, 0);
    let (lo, hi) = field.world_range();
    assert!((root.min_y, root.max_y) == (lo, hi) && lo > 1500.0 && hi < 4400.0);
}
