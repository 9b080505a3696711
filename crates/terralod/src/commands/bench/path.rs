//! The camera path the scenario benchmark flies: a deterministic default over any terrain
//! (low flight, climb, orbit, turning in place), or poses read from a JSON file.

pub use crate::camera_path::{Pose, read_path};
use glam::Vec3;
use terralod_core::Heightfield;
use terralod_core::query::height_at;

/// Which part of the default path a frame belongs to.
pub fn phase(frame: usize, frames: usize) -> &'static str {
    let t = frame as f32 / frames.max(1) as f32;
    if t < LOW_FLIGHT {
        "low flight"
    } else if t < CLIMB {
        "climb"
    } else if t < ORBIT {
        "orbit"
    } else {
        "turn in place"
    }
}

/// Where each phase ends, as a fraction of the path.
const LOW_FLIGHT: f32 = 0.35;
const CLIMB: f32 = 0.55;
const ORBIT: f32 = 0.85;

/// `frames` poses over `field`: a low flight west to east across the middle, following
/// the ground at a clearance of 0.5 % of the terrain's span, then a climb to above the
/// highest point, an orbit around the centre, and a full turn in place. Each phase starts
/// where the one before ends, eye and view direction both: the view turns at most a few
/// degrees a frame (tested), so what the bench measures between frames is the
/// algorithm's, not a cut of the path.
pub fn default_path(field: &Heightfield, frames: usize) -> Vec<Pose> {
    let (w, d) = field.world_size();
    let (lo, hi) = field.world_range();
    let span = w.max(d);
    let clearance = 0.005 * span + 0.02 * (hi - lo);
    let ground = |x: f32, z: f32| height_at(field, x, z).unwrap_or(lo);
    let centre = Vec3::new(0.5 * w, lo, 0.5 * d);
    let orbit_radius = 0.45 * span;
    let orbit_height = hi + 0.15 * span;
    // The low flight at `s` in 0..=1.
    let low_flight = |s: f32| {
        let x = w * (0.1 + 0.75 * s);
        let z = d * (0.5 + 0.1 * (s * std::f32::consts::TAU).sin());
        // Fly above the highest ground a little ahead, so hills do not hit the eye.
        let ahead = (0..=4)
            .map(|k| ground((x + 0.01 * span * k as f32).min(w), z))
            .fold(lo, f32::max);
        let eye = Vec3::new(x, ahead + clearance, z);
        (eye, Vec3::new(x + 0.1 * span, ahead, z))
    };
    // The climb starts where the low flight ends and turns its gaze, in heading and
    // pitch, to where the orbit starts looking: the path has no jump of the eye or of
    // the view direction (a 180° snap there popped 52 px).
    let (climb_start, low_target) = low_flight(1.0);
    let climb_end = centre + Vec3::new(orbit_radius, orbit_height - lo, 0.0);
    let angles = |v: Vec3| (v.z.atan2(v.x), v.y.atan2(v.x.hypot(v.z)));
    let (heading0, pitch0) = angles(low_target - climb_start);
    let (heading1, pitch1) = angles(centre - climb_end);
    let look = |heading: f32, pitch: f32| {
        Vec3::new(
            pitch.cos() * heading.cos(),
            pitch.sin(),
            pitch.cos() * heading.sin(),
        )
    };
    let mut poses = Vec::with_capacity(frames);
    for frame in 0..frames {
        let t = frame as f32 / frames.max(1) as f32;
        let pose = if t < LOW_FLIGHT {
            let (eye, target) = low_flight(t / LOW_FLIGHT);
            Pose::new(eye, target)
        } else if t < CLIMB {
            let s = (t - LOW_FLIGHT) / (CLIMB - LOW_FLIGHT);
            let eye = climb_start.lerp(climb_end, s);
            // Eased, so the turn starts and ends without a jolt.
            let e = s * s * (3.0 - 2.0 * s);
            let heading = heading0 + e * (heading1 - heading0);
            let pitch = pitch0 + e * (pitch1 - pitch0);
            Pose::new(eye, eye + look(heading, pitch) * span * 0.2)
        } else if t < ORBIT {
            let s = (t - CLIMB) / (ORBIT - CLIMB);
            let angle = s * std::f32::consts::TAU;
            let eye = centre
                + Vec3::new(
                    orbit_radius * angle.cos(),
                    orbit_height - lo,
                    orbit_radius * angle.sin(),
                );
            Pose::new(eye, centre)
        } else {
            let s = (t - ORBIT) / (1.0 - ORBIT);
            // From where the orbit ends, at its pitch, a full turn of the heading.
            let heading = heading1 + s * std::f32::consts::TAU;
            Pose::new(climb_end, climb_end + look(heading, pitch1) * span * 0.2)
        };
        poses.push(pose);
    }
    poses
}

/// `frames` poses of a low flight at a constant speed: `step` world units per frame along an
/// ellipse inscribed in the terrain (radii 40 % of its width and depth, so any number of
/// frames fits on any terrain), `altitude` above the highest ground a little ahead (`None`:
/// the default path's clearance, which grows with the terrain's span) and looking ahead
/// along the flight. `terralod bench --speed V --fps F` flies it with `step = V / F`: a
/// real-time flight, where the default path is a tour.
pub fn constant_speed_flight(
    field: &Heightfield,
    frames: usize,
    step: f32,
    altitude: Option<f32>,
) -> Vec<Pose> {
    let (w, d) = field.world_size();
    let (lo, hi) = field.world_range();
    let span = w.max(d);
    let clearance = altitude.unwrap_or(0.005 * span + 0.02 * (hi - lo));
    let ground = |x: f32, z: f32| height_at(field, x, z).unwrap_or(lo);
    let (rx, rz) = (0.4 * w, 0.4 * d);
    let at = |angle: f32| Vec3::new(0.5 * w + rx * angle.cos(), 0.0, 0.5 * d + rz * angle.sin());
    // Angle per unit of arc length at `angle` (the ellipse's speed varies along it).
    let turn_rate = |angle: f32| 1.0 / (rx * angle.sin()).hypot(rz * angle.cos()).max(1e-6);
    let look_ahead = (20.0 * step).clamp(0.01 * span, 0.1 * span);
    let mut angle = std::f32::consts::PI;
    let mut poses = Vec::with_capacity(frames);
    for _ in 0..frames {
        let here = at(angle);
        let heading = Vec3::new(-rx * angle.sin(), 0.0, rz * angle.cos()).normalize_or(Vec3::X);
        // Clear the highest ground a little ahead, as the default path does.
        let highest = (0..=4)
            .map(|k| here + heading * (0.25 * look_ahead * k as f32))
            .map(|p| ground(p.x.clamp(0.0, w), p.z.clamp(0.0, d)))
            .fold(lo, f32::max);
        let eye = Vec3::new(here.x, highest + clearance, here.z);
        let target = Vec3::new(eye.x, highest, eye.z) + heading * look_ahead;
        poses.push(Pose::new(eye, target));
        angle += step * turn_rate(angle);
    }
    poses
}

#[cfg(test)]
mod tests {
    use super::*;
    use terralod_core::generate::{GenerateOptions, generate};

    #[test]
    fn the_default_path_stays_above_the_ground_and_is_deterministic() {
        let field = generate(&GenerateOptions {
            size: 129,
            ..GenerateOptions::default()
        })
        .unwrap();
        let path = default_path(&field, 600);
        assert_eq!(path.len(), 600);
        assert_eq!(path, default_path(&field, 600));
        for (i, pose) in path.iter().enumerate() {
            let eye = Vec3::from(pose.eye);
            if let Some(ground) = height_at(&field, eye.x, eye.z) {
                assert!(
                    eye.y > ground,
                    "frame {i} ({}) is underground",
                    phase(i, 600)
                );
            }
            assert_ne!(pose.eye, pose.target);
        }
        let phases: std::collections::BTreeSet<_> = (0..600).map(|i| phase(i, 600)).collect();
        assert_eq!(phases.len(), 4);
        // No snap of the view between frames, at the phases' joins either (the climb
        // used to start looking back the way the low flight came); the eye moves at most
        // the orbit's step (a full circle of 0.45 of the span in 180 frames).
        let (w, d) = field.world_size();
        let orbit_step = std::f32::consts::TAU * 0.45 * w.max(d) / 180.0;
        let forward = |p: &Pose| (Vec3::from(p.target) - Vec3::from(p.eye)).normalize();
        for (i, pair) in path.windows(2).enumerate() {
            let turn = forward(&pair[0])
                .angle_between(forward(&pair[1]))
                .to_degrees();
            assert!(turn < 5.0, "frame {i} ({}) turns {turn:.1}°", phase(i, 600));
            let step = Vec3::from(pair[0].eye).distance(Vec3::from(pair[1].eye));
            assert!(
                step <= 1.01 * orbit_step,
                "frame {i} ({}) moves {step} (the orbit: {orbit_step})",
                phase(i, 600)
            );
        }
    }

    #[test]
    fn the_constant_speed_flight_keeps_its_speed_and_clears_the_ground() {
        let field = generate(&GenerateOptions {
            size: 129,
            ..GenerateOptions::default()
        })
        .unwrap();
        let step = 25.0;
        let path = constant_speed_flight(&field, 400, step, None);
        assert_eq!(path.len(), 400);
        assert_eq!(path, constant_speed_flight(&field, 400, step, None));
        let (w, d) = field.world_size();
        for pair in path.windows(2) {
            let (a, b) = (Vec3::from(pair[0].eye), Vec3::from(pair[1].eye));
            let plan = Vec3::new(b.x - a.x, 0.0, b.z - a.z).length();
            assert!(
                (plan - step).abs() < 0.02 * step,
                "moved {plan}, not {step}"
            );
        }
        for (i, pose) in path.iter().enumerate() {
            let eye = Vec3::from(pose.eye);
            assert!((0.0..=w).contains(&eye.x) && (0.0..=d).contains(&eye.z));
            let ground = height_at(&field, eye.x, eye.z).expect("inside the terrain");
            assert!(eye.y > ground, "frame {i} is underground");
            assert_ne!(pose.eye, pose.target);
        }
        // A given altitude: that far above the highest ground ahead, so at least that far
        // above the ground below, and the same track.
        let low = constant_speed_flight(&field, 400, step, Some(7.0));
        for (pose, default) in low.iter().zip(&path) {
            let eye = Vec3::from(pose.eye);
            let ground = height_at(&field, eye.x, eye.z).expect("inside the terrain");
            assert!(eye.y >= ground + 7.0 - 1e-3, "{} over {ground}", eye.y);
            assert_eq!((pose.eye[0], pose.eye[2]), (default.eye[0], default.eye[2]));
        }
    }
}
