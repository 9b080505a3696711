//! The viewer's fly camera: pure logic (keys held, mouse motion, scroll, terrain following)
//! with no window, so it is unit-tested on its own.
//!
//! Yaw 0 looks north (−z, the top of the heightfield image) and grows turning right
//! (towards +x, east); pitch grows looking up. The camera never rolls.

use glam::Vec3;
use terralod_core::Camera;
use terralod_core::camera::CameraError;

/// Radians turned per pixel of mouse motion.
const LOOK_RADIANS_PER_PIXEL: f32 = 0.003;
/// Radians turned per second while an arrow key is held.
const TURN_RADIANS_PER_SECOND: f32 = 1.2;
/// Pitch stays this far from straight up or down, where yaw would be undefined.
const PITCH_LIMIT: f32 = 89.0 * std::f32::consts::PI / 180.0;
/// Speed factor of one scroll step.
const SCROLL_FACTOR: f32 = 1.25;
/// Speed factor while shift is held.
pub const FAST_FACTOR: f32 = 5.0;
/// Smallest height above the ground in terrain-following mode, in world units.
pub const MIN_CLEARANCE: f32 = 0.5;

/// Which movement keys are held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoveKeys {
    pub forward: bool,
    pub back: bool,
    pub left: bool,
    pub right: bool,
    pub up: bool,
    pub down: bool,
    pub turn_left: bool,
    pub turn_right: bool,
    pub turn_up: bool,
    pub turn_down: bool,
    pub fast: bool,
}

/// A first-person camera that flies freely or follows the ground.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlyCamera {
    pub position: Vec3,
    yaw: f32,
    pitch: f32,
    /// World units per second (before the shift factor).
    speed: f32,
    speed_range: (f32, f32),
    /// Height above the ground kept while following it.
    clearance: f32,
    follow_terrain: bool,
}

fn axis(positive: bool, negative: bool) -> f32 {
    f32::from(u8::from(positive)) - f32::from(u8::from(negative))
}

impl FlyCamera {
    /// A camera at `eye` looking towards `target`, flying at `speed` (kept within
    /// `speed_range` by the scroll wheel). `eye` and `target` must differ.
    pub fn looking_at(eye: Vec3, target: Vec3, speed: f32, speed_range: (f32, f32)) -> FlyCamera {
        let direction = (target - eye).normalize_or(Vec3::NEG_Z);
        FlyCamera {
            position: eye,
            yaw: direction.x.atan2(-direction.z),
            pitch: direction
                .y
                .clamp(-1.0, 1.0)
                .asin()
                .clamp(-PITCH_LIMIT, PITCH_LIMIT),
            speed: speed.clamp(speed_range.0, speed_range.1),
            speed_range,
            clearance: MIN_CLEARANCE,
            follow_terrain: false,
        }
    }

    /// Unit view direction.
    pub fn forward(&self) -> Vec3 {
        let (sin_yaw, cos_yaw) = self.yaw.sin_cos();
        let (sin_pitch, cos_pitch) = self.pitch.sin_cos();
        Vec3::new(cos_pitch * sin_yaw, sin_pitch, -cos_pitch * cos_yaw)
    }

    /// Unit horizontal direction of the view (what walking forward follows).
    pub fn heading(&self) -> Vec3 {
        let (sin_yaw, cos_yaw) = self.yaw.sin_cos();
        Vec3::new(sin_yaw, 0.0, -cos_yaw)
    }

    /// Unit right axis, horizontal (as [`Camera::right`]).
    pub fn right(&self) -> Vec3 {
        let (sin_yaw, cos_yaw) = self.yaw.sin_cos();
        Vec3::new(cos_yaw, 0.0, sin_yaw)
    }

    pub fn speed(&self) -> f32 {
        self.speed
    }

    pub fn clearance(&self) -> f32 {
        self.clearance
    }

    pub fn follows_terrain(&self) -> bool {
        self.follow_terrain
    }

    /// Turns by a mouse motion of `dx`, `dy` pixels (right and down positive).
    pub fn look(&mut self, dx: f32, dy: f32) {
        self.turn(dx * LOOK_RADIANS_PER_PIXEL, -dy * LOOK_RADIANS_PER_PIXEL);
    }

    fn turn(&mut self, yaw: f32, pitch: f32) {
        if !(yaw.is_finite() && pitch.is_finite()) {
            return;
        }
        self.yaw = (self.yaw + yaw).rem_euclid(std::f32::consts::TAU);
        self.pitch = (self.pitch + pitch).clamp(-PITCH_LIMIT, PITCH_LIMIT);
    }

    /// Scales the speed by one factor per scroll step (up faster, down slower).
    pub fn scroll(&mut self, steps: f32) {
        if steps.is_finite() {
            self.speed = (self.speed * SCROLL_FACTOR.powf(steps))
                .clamp(self.speed_range.0, self.speed_range.1);
        }
    }

    /// Switches terrain following on or off. Switched on, the camera keeps its current
    /// height above the ground (`ground` is the terrain height at a world `x, z`, `None`
    /// outside the data), at least [`MIN_CLEARANCE`].
    pub fn set_follow_terrain(&mut self, on: bool, ground: impl Fn(f32, f32) -> Option<f32>) {
        self.follow_terrain = on;
        if on {
            if let Some(height) = ground(self.position.x, self.position.z) {
                self.clearance = (self.position.y - height).max(MIN_CLEARANCE);
            }
            self.keep_above(&ground);
        }
    }

    /// Moves for `dt` seconds with `keys` held. Flying, W/S follow the view direction and
    /// Q/E move straight down and up; following the terrain, W/S follow the heading, Q/E
    /// change the clearance and the eye stays at ground + clearance.
    pub fn update(&mut self, keys: &MoveKeys, dt: f32, ground: impl Fn(f32, f32) -> Option<f32>) {
        if !(dt.is_finite() && dt > 0.0) {
            return;
        }
        self.turn(
            axis(keys.turn_right, keys.turn_left) * TURN_RADIANS_PER_SECOND * dt,
            axis(keys.turn_up, keys.turn_down) * TURN_RADIANS_PER_SECOND * dt,
        );
        let speed = self.speed * if keys.fast { FAST_FACTOR } else { 1.0 };
        let ahead = axis(keys.forward, keys.back);
        let aside = axis(keys.right, keys.left);
        let rise = axis(keys.up, keys.down);
        let mut motion = if self.follow_terrain {
            self.heading() * ahead + self.right() * aside
        } else {
            self.forward() * ahead + self.right() * aside + Vec3::Y * rise
        };
        if motion != Vec3::ZERO {
            motion = motion.normalize() * speed * dt;
            self.position += motion;
        }
        if self.follow_terrain {
            self.clearance = (self.clearance + rise * speed * dt).max(MIN_CLEARANCE);
            self.keep_above(&ground);
        }
    }

    /// Puts the eye at ground + clearance where there is ground.
    fn keep_above(&mut self, ground: &impl Fn(f32, f32) -> Option<f32>) {
        if let Some(height) = ground(self.position.x, self.position.z) {
            self.position.y = height + self.clearance;
        }
    }

    /// The camera to draw (and select) with.
    pub fn camera(
        &self,
        fov_y: f32,
        viewport: (u32, u32),
        near: f32,
        far: f32,
    ) -> Result<Camera, CameraError> {
        Camera::new(
            self.position,
            self.position + self.forward(),
            fov_y,
            viewport,
            near,
            far,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn camera() -> FlyCamera {
        FlyCamera::looking_at(
            Vec3::new(0.0, 10.0, 0.0),
            Vec3::new(0.0, 10.0, -5.0),
            2.0,
            (0.1, 100.0),
        )
    }

    fn flat(height: f32) -> impl Fn(f32, f32) -> Option<f32> {
        move |_, _| Some(height)
    }

    fn close(a: Vec3, b: Vec3) -> bool {
        a.distance(b) < 1e-4
    }

    #[test]
    fn direction_round_trips_through_yaw_and_pitch() {
        for target in [
            Vec3::new(3.0, 1.0, -4.0),
            Vec3::new(-2.0, -5.0, 1.0),
            Vec3::new(1.0, 0.0, 0.0),
        ] {
            let fly = FlyCamera::looking_at(Vec3::ZERO, target, 1.0, (0.1, 10.0));
            assert!(close(fly.forward(), target.normalize()), "{target}");
            let built = fly.camera(1.0, (64, 48), 0.1, 100.0).expect("valid camera");
            assert!(close(built.right(), fly.right()), "{target}");
        }
    }

    #[test]
    fn keys_move_along_the_view_and_world_up() {
        let mut fly = camera();
        let start = fly.position;
        let forward = MoveKeys {
            forward: true,
            ..MoveKeys::default()
        };
        fly.update(&forward, 0.5, |_, _| None);
        assert!(close(fly.position, start + Vec3::new(0.0, 0.0, -1.0)));
        let up_right = MoveKeys {
            up: true,
            right: true,
            ..MoveKeys::default()
        };
        let before = fly.position;
        fly.update(&up_right, 1.0, |_, _| None);
        let step = 2.0 / 2f32.sqrt();
        assert!(close(fly.position, before + Vec3::new(step, step, 0.0)));
        let fast = MoveKeys {
            back: true,
            fast: true,
            ..MoveKeys::default()
        };
        let before = fly.position;
        fly.update(&fast, 0.1, |_, _| None);
        assert!(close(
            fly.position,
            before + Vec3::new(0.0, 0.0, 2.0 * FAST_FACTOR * 0.1)
        ));
        // Opposite keys cancel; no time, no motion.
        let before = fly.position;
        let both = MoveKeys {
            left: true,
            right: true,
            ..MoveKeys::default()
        };
        fly.update(&both, 1.0, |_, _| None);
        fly.update(&forward, 0.0, |_, _| None);
        fly.update(&forward, f32::NAN, |_, _| None);
        assert_eq!(fly.position, before);
    }

    #[test]
    fn mouse_turns_right_and_pitch_stops_short_of_vertical() {
        let mut fly = camera();
        fly.look(std::f32::consts::FRAC_PI_2 / LOOK_RADIANS_PER_PIXEL, 0.0);
        assert!(
            close(fly.forward(), Vec3::X),
            "moving the mouse right turns east"
        );
        fly.look(0.0, 1e6);
        assert!(
            (fly.forward().y + PITCH_LIMIT.sin()).abs() < 1e-6,
            "pitch clamps looking down"
        );
        assert!(fly.camera(1.0, (64, 48), 0.1, 100.0).is_ok());
        fly.look(f32::NAN, 3.0);
        assert!(
            (fly.forward().y + PITCH_LIMIT.sin()).abs() < 1e-6,
            "a non-finite motion is ignored"
        );
    }

    #[test]
    fn arrow_keys_turn_at_a_fixed_rate() {
        let mut fly = camera();
        let keys = MoveKeys {
            turn_right: true,
            turn_up: true,
            ..MoveKeys::default()
        };
        fly.update(&keys, 0.5, |_, _| None);
        assert!((fly.forward().y - 0.6f32.sin()).abs() < 1e-5);
        assert!((fly.heading().x - 0.6f32.sin()).abs() < 1e-5);
    }

    #[test]
    fn scroll_scales_speed_within_its_range() {
        let mut fly = camera();
        fly.scroll(1.0);
        assert!((fly.speed() - 2.5).abs() < 1e-5);
        fly.scroll(-2.0);
        assert!((fly.speed() - 1.6).abs() < 1e-5);
        fly.scroll(1000.0);
        assert_eq!(fly.speed(), 100.0);
        fly.scroll(-1e9);
        assert_eq!(fly.speed(), 0.1);
        fly.scroll(f32::INFINITY - f32::INFINITY);
        assert_eq!(fly.speed(), 0.1);
    }

    #[test]
    fn following_terrain_keeps_the_clearance_over_changing_ground() {
        let mut fly = camera();
        fly.set_follow_terrain(true, flat(4.0));
        assert!(fly.follows_terrain());
        assert_eq!(
            fly.clearance(),
            6.0,
            "keeps the height it had above the ground"
        );
        // A slope rising northwards (−z): the eye rises with it, and looking down does not
        // make walking forward dig into the ground.
        let slope = |_: f32, z: f32| Some(-z);
        fly.look(0.0, 200.0);
        let forward = MoveKeys {
            forward: true,
            ..MoveKeys::default()
        };
        for _ in 0..10 {
            fly.update(&forward, 0.5, slope);
            let ground = -fly.position.z;
            assert!((fly.position.y - (ground + 6.0)).abs() < 1e-4);
        }
        assert!(close(fly.position, Vec3::new(0.0, 16.0, -10.0)));
        // Q lowers the clearance, never below the minimum.
        let down = MoveKeys {
            down: true,
            ..MoveKeys::default()
        };
        fly.update(&down, 100.0, slope);
        assert_eq!(fly.clearance(), MIN_CLEARANCE);
        assert!(fly.position.y >= -fly.position.z + MIN_CLEARANCE - 1e-4);
        // Outside the data the height is left alone.
        let before = fly.position.y;
        fly.update(&forward, 1.0, |_, _| None);
        assert_eq!(fly.position.y, before);
    }

    #[test]
    fn following_from_below_the_ground_lifts_the_eye() {
        let mut fly = camera();
        fly.set_follow_terrain(true, flat(50.0));
        assert_eq!(fly.clearance(), MIN_CLEARANCE);
        assert_eq!(fly.position.y, 50.0 + MIN_CLEARANCE);
        fly.set_follow_terrain(false, flat(50.0));
        let up = MoveKeys {
            up: true,
            ..MoveKeys::default()
        };
        fly.update(&up, 1.0, flat(50.0));
        assert_eq!(fly.position.y, 52.5, "flying, E rises freely");
    }
}
