//! Proptest strategies that reach the corners of the input space: odd and even and 2^n + 1
//! sizes, flat, rough and spiky fields in every storage type, and cameras above, below and
//! inside the terrain, at its corners or far away, looking straight down or up, with extreme
//! fields of view and aspect ratios.

use crate::fixtures;
use glam::Vec3;
use proptest::prelude::*;
use proptest::sample::select;
use terralod_core::{Camera, Heightfield, Samples, WorldMapping};

/// The shape of a generated field, before storage conversion.
#[derive(Clone, Debug)]
enum Relief {
    Plane(f32),
    Tilted {
        base: f32,
        per_col: f32,
        per_row: f32,
    },
    Smooth {
        seed: u64,
        amplitude: f32,
    },
    Spiky {
        seed: u64,
        count: u32,
        amplitude: f32,
    },
    Steps {
        step_cols: u32,
        step_height: f32,
    },
}

#[derive(Clone, Copy, Debug)]
enum Storage {
    F32,
    U16,
    I16,
}

fn arb_side(max_side: u32) -> impl Strategy<Value = u32> {
    let max_side = max_side.max(2);
    // 2^n + 1 and 2^n sizes are where padding and level arithmetic change behaviour.
    let special: Vec<u32> = (1..31)
        .flat_map(|n| [(1u32 << n) + 1, 1u32 << n])
        .filter(|&s| (2..=max_side).contains(&s))
        .collect();
    prop_oneof![
        2 => 2..=max_side,
        1 => select(special),
    ]
}

fn arb_relief() -> impl Strategy<Value = Relief> {
    prop_oneof![
        (-1000.0f32..1000.0).prop_map(Relief::Plane),
        (0.0f32..1000.0, -20.0f32..20.0, -20.0f32..20.0).prop_map(|(base, per_col, per_row)| {
            Relief::Tilted {
                base,
                per_col,
                per_row,
            }
        }),
        (any::<u64>(), 1.0f32..3000.0)
            .prop_map(|(seed, amplitude)| Relief::Smooth { seed, amplitude }),
        (any::<u64>(), 1u32..6, 1.0f32..1000.0).prop_map(|(seed, count, amplitude)| {
            Relief::Spiky {
                seed,
                count,
                amplitude,
            }
        }),
        (1u32..8, -100.0f32..100.0).prop_map(|(step_cols, step_height)| Relief::Steps {
            step_cols,
            step_height
        }),
    ]
}

fn arb_mapping() -> impl Strategy<Value = WorldMapping> {
    (
        select(vec![1.0f32, 0.5, 10.0, 30.0, 90.0]),
        select(vec![1.0f32, 0.1, 0.01, 10.0, -1.0]),
        select(vec![0.0f32, -100.0, 1500.0]),
    )
        .prop_map(|(cell_size, height_scale, height_offset)| WorldMapping {
            cell_size,
            height_scale,
            height_offset,
        })
}

fn build_field(
    width: u32,
    height: u32,
    relief: &Relief,
    storage: Storage,
    mapping: WorldMapping,
) -> Option<Heightfield> {
    let field = match *relief {
        Relief::Plane(raw) => fixtures::plane(width, height, raw),
        Relief::Tilted {
            base,
            per_col,
            per_row,
        } => fixtures::tilted_plane(width, height, base, per_col, per_row),
        Relief::Smooth { seed, amplitude } => {
            fixtures::smooth_random(width, height, seed, amplitude)
        }
        Relief::Spiky {
            seed,
            count,
            amplitude,
        } => fixtures::random_spikes(width, height, seed, count, amplitude, amplitude),
        Relief::Steps {
            step_cols,
            step_height,
        } => fixtures::steps(width, height, step_cols, step_height),
    }
    .ok()?;
    let samples = match (storage, field.samples()) {
        (Storage::F32, _) => None,
        (Storage::U16, Samples::F32(values)) => Some(Samples::U16(
            values
                .iter()
                .map(|v| v.round().clamp(0.0, f32::from(u16::MAX)) as u16)
                .collect(),
        )),
        (Storage::I16, Samples::F32(values)) => Some(Samples::I16(
            values
                .iter()
                .map(|v| v.round().clamp(f32::from(i16::MIN), f32::from(i16::MAX)) as i16)
                .collect(),
        )),
        _ => None,
    };
    let field = match samples {
        Some(samples) => Heightfield::new(width, height, samples).ok()?,
        None => field,
    };
    field.with_mapping(mapping).ok()
}

/// The property tests' configuration: 24 cases (debug-fast), or `PROPTEST_CASES` when set.
pub fn proptest_config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// Heightfields of `2..=max_side` samples a side (odd, even and 2^n + 1 sizes): planes,
/// tilted planes, smooth random relief, spiky planes and terraces, stored as f32, u16 or
/// i16, with assorted world mappings (cell sizes 0.5..90, negative height scales, offsets).
pub fn arb_heightfield(max_side: u32) -> impl Strategy<Value = Heightfield> {
    (
        arb_side(max_side),
        arb_side(max_side),
        arb_relief(),
        prop_oneof![Just(Storage::F32), Just(Storage::U16), Just(Storage::I16)],
        arb_mapping(),
    )
        .prop_filter_map(
            "the heightfield fixtures accept every generated size",
            |(width, height, relief, storage, mapping)| {
                build_field(width, height, &relief, storage, mapping)
            },
        )
}

/// Where the eye goes, in fractions of the terrain box.
#[derive(Clone, Copy, Debug)]
enum Placement {
    /// Above the highest sample by `lift` times the terrain extent.
    Above { u: f32, v: f32, lift: f32 },
    /// Below the lowest sample.
    Below { u: f32, v: f32, lift: f32 },
    /// Between the lowest and highest sample: possibly under the surface.
    Inside { u: f32, v: f32, t: f32 },
    /// On a border line or corner of the data, near the surface.
    Border { u: f32, v: f32, t: f32 },
    /// Far away: `distance` times the extent from the centre, direction by angles.
    Far {
        distance: f32,
        azimuth: f32,
        elevation: f32,
    },
}

/// Where the camera looks.
#[derive(Clone, Copy, Debug)]
enum Aim {
    /// A point of the terrain box.
    Terrain {
        u: f32,
        v: f32,
        t: f32,
    },
    StraightDown,
    StraightUp,
    Level {
        azimuth: f32,
    },
    Centre,
}

fn arb_placement() -> impl Strategy<Value = Placement> {
    let frac = -0.25f32..1.25;
    let edge = select(vec![0.0f32, 1.0]);
    prop_oneof![
        (frac.clone(), frac.clone(), 0.001f32..3.0).prop_map(|(u, v, lift)| Placement::Above {
            u,
            v,
            lift
        }),
        (frac.clone(), frac.clone(), 0.001f32..3.0).prop_map(|(u, v, lift)| Placement::Below {
            u,
            v,
            lift
        }),
        (0.0f32..=1.0, 0.0f32..=1.0, 0.0f32..=1.0).prop_map(|(u, v, t)| Placement::Inside {
            u,
            v,
            t
        }),
        (edge.clone(), 0.0f32..=1.0, -0.1f32..1.1).prop_map(|(u, v, t)| Placement::Border {
            u,
            v,
            t
        }),
        (0.0f32..=1.0, edge.clone(), -0.1f32..1.1).prop_map(|(u, v, t)| Placement::Border {
            u,
            v,
            t
        }),
        (edge.clone(), edge, -0.1f32..1.1).prop_map(|(u, v, t)| Placement::Border { u, v, t }),
        (10.0f32..1000.0, 0.0f32..std::f32::consts::TAU, -1.5f32..1.5).prop_map(
            |(distance, azimuth, elevation)| Placement::Far {
                distance,
                azimuth,
                elevation
            }
        ),
    ]
}

fn arb_aim() -> impl Strategy<Value = Aim> {
    prop_oneof![
        3 => (0.0f32..=1.0, 0.0f32..=1.0, 0.0f32..=1.0)
            .prop_map(|(u, v, t)| Aim::Terrain { u, v, t }),
        1 => Just(Aim::StraightDown),
        1 => Just(Aim::StraightUp),
        1 => (0.0f32..std::f32::consts::TAU).prop_map(|azimuth| Aim::Level { azimuth }),
        1 => Just(Aim::Centre),
    ]
}

/// Vertical fields of view from 1° to 170°, the extremes included.
pub fn arb_fov_y() -> impl Strategy<Value = f32> {
    let (lo, hi) = (1.0f32.to_radians(), 170.0f32.to_radians());
    prop_oneof![Just(lo), Just(hi), lo..=hi]
}

/// Viewports from 1 × 1 pixel to 4096 wide or high, with extreme aspect ratios.
pub fn arb_viewport() -> impl Strategy<Value = (u32, u32)> {
    prop_oneof![
        select(vec![
            (1u32, 1u32),
            (640, 480),
            (1920, 1080),
            (1080, 1920),
            (4096, 16),
            (16, 4096),
        ]),
        (1u32..=4096, 1u32..=4096),
    ]
}

/// Pixel tolerances from 0.05 to 32, with the common values 0.5, 1, 2 and 8 favoured.
pub fn arb_pixel_tolerance() -> impl Strategy<Value = f32> {
    prop_oneof![select(vec![0.5f32, 1.0, 2.0, 8.0]), 0.05f32..32.0]
}

/// Cameras for `field`: the eye above, below or inside the terrain, on its borders and
/// corners or far away; looking at the terrain, straight down, straight up, level or at the
/// centre; fields of view 1°..170°; viewports with extreme aspect ratios; near planes from
/// 10^-4 to 10^-1 of the terrain extent and far/near ratios 10 to 10^6. Every camera is
/// valid (finite, eye distinct from target, 0 < near < far).
pub fn arb_camera(field: &Heightfield) -> impl Strategy<Value = Camera> + use<> {
    let (size_x, size_z) = field.world_size();
    let (low, high) = field.world_range();
    let extent = size_x
        .max(size_z)
        .max(high - low)
        .max(field.mapping().cell_size);
    (
        arb_placement(),
        arb_aim(),
        arb_fov_y(),
        arb_viewport(),
        select(vec![1e-4f32, 1e-3, 1e-2, 1e-1]),
        select(vec![10.0f32, 1e3, 1e6]),
    )
        .prop_map(
            move |(placement, aim, fov_y, viewport, near, depth_ratio)| {
                let at = |u: f32, v: f32, t: f32| {
                    Vec3::new(u * size_x, low + t * (high - low), v * size_z)
                };
                let centre = at(0.5, 0.5, 0.5);
                let eye = match placement {
                    Placement::Above { u, v, lift } => at(u, v, 1.0) + Vec3::Y * lift * extent,
                    Placement::Below { u, v, lift } => at(u, v, 0.0) - Vec3::Y * lift * extent,
                    Placement::Inside { u, v, t } | Placement::Border { u, v, t } => at(u, v, t),
                    Placement::Far {
                        distance,
                        azimuth,
                        elevation,
                    } => {
                        let direction = Vec3::new(
                            elevation.cos() * azimuth.cos(),
                            elevation.sin(),
                            elevation.cos() * azimuth.sin(),
                        );
                        centre + direction * distance * extent
                    }
                };
                let reach = extent.max(1.0);
                let target = match aim {
                    Aim::Terrain { u, v, t } => at(u, v, t),
                    Aim::StraightDown => eye - Vec3::Y * reach,
                    Aim::StraightUp => eye + Vec3::Y * reach,
                    Aim::Level { azimuth } => {
                        eye + Vec3::new(azimuth.cos(), 0.0, azimuth.sin()) * reach
                    }
                    Aim::Centre => centre,
                };
                let near = near * extent;
                Camera {
                    eye,
                    target,
                    fov_y,
                    viewport,
                    near,
                    far: near * depth_ratio,
                }
            },
        )
        .prop_filter("the eye must differ from the target", |c| {
            c.eye.is_finite() && c.target.is_finite() && (c.target - c.eye).length() > 0.0
        })
}

/// A heightfield of up to `max_side` samples a side, a camera for it and a pixel tolerance:
/// the input of a property test over an LOD algorithm.
pub fn arb_scene(max_side: u32) -> impl Strategy<Value = (Heightfield, Camera, f32)> {
    arb_heightfield(max_side).prop_flat_map(|field| {
        let camera = arb_camera(&field);
        (Just(field), camera, arb_pixel_tolerance())
    })
}
