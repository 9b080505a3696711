//! Quality presets and the automatic tolerance controller (feature Q6).
//!
//! A preset is a range for the pixel tolerance τ (the issue's ranges: high 0.5–1, medium
//! 1–3, low 3–8 px). [`AutoTolerance`] moves τ inside the range to hold a target frame time.
//!
//! # The controller
//!
//! Frame cost falls with τ roughly as `τ^-p` (triangles on screen scale with the inverse
//! square of the tolerance for a smooth terrain, `p ≈ 2`, less on rough data). A frame that
//! took `r` times the target moves τ by `r^GAIN`: the next frame then costs about
//! `r^(1 − p · GAIN)` times the target, so with `GAIN = 0.4` the error shrinks without
//! changing sign for any `p < 2.5` (no overshoot, hence no oscillation) and by a factor 5
//! per frame at `p = 2`. Hysteresis keeps noise from moving τ: the controller acts only
//! when the frame time leaves a band of ±`LEAVE_BAND` around the target, and once it acted
//! it keeps acting until the time is back within ±`ENTER_BAND` or the wanted step turns
//! round (it crossed the target: noise, not cost, is speaking then). While it holds it
//! judges the mean frame time since τ last changed, so noise alone does not move τ; a
//! single frame more than ±`SUDDEN_BAND` off the target (the scene changed) acts at once.

use std::fmt;
use std::str::FromStr;

/// A quality preset: a range for the pixel tolerance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quality {
    High,
    Medium,
    Low,
}

impl Quality {
    pub const ALL: [Quality; 3] = [Quality::High, Quality::Medium, Quality::Low];

    /// The tolerance range in pixels, `(finest, coarsest)`.
    pub fn range(self) -> (f32, f32) {
        match self {
            Quality::High => (0.5, 1.0),
            Quality::Medium => (1.0, 3.0),
            Quality::Low => (3.0, 8.0),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Quality::High => "high",
            Quality::Medium => "medium",
            Quality::Low => "low",
        }
    }
}

impl fmt::Display for Quality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown preset name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown quality preset {name:?} (expected high, medium or low)")]
pub struct UnknownQuality {
    pub name: String,
}

impl FromStr for Quality {
    type Err = UnknownQuality;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quality::ALL
            .into_iter()
            .find(|q| q.name() == s)
            .ok_or_else(|| UnknownQuality { name: s.to_owned() })
    }
}

/// Exponent applied to the frame-time ratio (see the module docs).
const GAIN: f32 = 0.4;
/// Relative distance from the target that makes the controller act.
const LEAVE_BAND: f32 = 0.2;
/// Relative distance from the target at which it stops acting.
const ENTER_BAND: f32 = 0.1;
/// Frames averaged while holding (a slow drift is followed within about this many).
const MEAN_FRAMES: u32 = 120;
/// Relative distance from the target at which a single frame makes the controller act.
const SUDDEN_BAND: f32 = 0.5;

/// Moves τ inside a preset's range to hold a target frame time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoTolerance {
    range: (f32, f32),
    target_ms: f32,
    tolerance: f32,
    acting: bool,
    /// Direction of the last step while acting: +1 coarser, −1 finer, 0 none yet.
    direction: f32,
    /// Mean frame time since τ last changed (noise filter while holding).
    mean_ms: f32,
    frames_since_change: u32,
}

impl AutoTolerance {
    /// Starts in the middle of the preset's range (geometric mean). A target that is not
    /// finite and positive keeps τ where it is.
    pub fn new(quality: Quality, target_ms: f32) -> AutoTolerance {
        let range = quality.range();
        AutoTolerance {
            range,
            target_ms,
            tolerance: (range.0 * range.1).sqrt(),
            acting: false,
            direction: 0.0,
            mean_ms: 0.0,
            frames_since_change: 0,
        }
    }

    /// The tolerance to use for the next frame, in pixels.
    pub fn tolerance(&self) -> f32 {
        self.tolerance
    }

    pub fn range(&self) -> (f32, f32) {
        self.range
    }

    /// Takes the measured time of the last frame and returns the tolerance for the next.
    pub fn update(&mut self, frame_ms: f32) -> f32 {
        let valid = frame_ms.is_finite()
            && frame_ms > 0.0
            && self.target_ms.is_finite()
            && self.target_ms > 0.0;
        if !valid {
            return self.tolerance;
        }
        // While holding, judge the mean since the last change (at most the last
        // `MEAN_FRAMES`), so noise alone does not move τ; while acting, the latest frame.
        self.frames_since_change = (self.frames_since_change + 1).min(MEAN_FRAMES);
        self.mean_ms += (frame_ms - self.mean_ms) / self.frames_since_change as f32;
        // A frame far off the target (a real change of scene) counts at once.
        let sudden = (frame_ms / self.target_ms - 1.0).abs() > SUDDEN_BAND;
        let judged = if self.acting || sudden {
            frame_ms
        } else {
            self.mean_ms
        };
        let ratio = judged / self.target_ms;
        let off = (ratio - 1.0).abs();
        let wanted = (ratio - 1.0).signum();
        self.acting = if self.acting {
            off > ENTER_BAND && wanted == self.direction
        } else {
            off > LEAVE_BAND
        };
        if !self.acting {
            self.direction = 0.0;
        } else {
            self.direction = wanted;
            let next = (self.tolerance * ratio.powf(GAIN)).clamp(self.range.0, self.range.1);
            if next == self.tolerance {
                // Pinned at a range end: nothing more to do until the cost comes back.
                self.acting = false;
            } else {
                self.frames_since_change = 0;
                self.mean_ms = 0.0;
            }
            self.tolerance = next;
        }
        self.tolerance
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64 noise in `[-1, 1)`, deterministic.
    fn noise(state: &mut u64) -> f32 {
        let z = crate::test_support::splitmix64(state);
        (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// The simulated renderer: frame time proportional to the triangles, which fall with
    /// the tolerance as `τ^-exponent`, plus relative noise.
    fn simulate(
        quality: Quality,
        target_ms: f32,
        ms_at_one_pixel: f32,
        exponent: f32,
        noise_level: f32,
        seed: u64,
    ) -> Vec<f32> {
        let mut controller = AutoTolerance::new(quality, target_ms);
        let mut state = seed;
        let mut history = Vec::new();
        for _ in 0..200 {
            let tau = controller.tolerance();
            history.push(tau);
            let cost = ms_at_one_pixel * tau.powf(-exponent);
            let measured = cost * (1.0 + noise_level * noise(&mut state));
            controller.update(measured);
        }
        history
    }

    /// Frame at which τ stops changing for good, and the number of direction reversals.
    fn settle_and_reversals(history: &[f32]) -> (usize, usize) {
        let settled = history
            .windows(2)
            .rposition(|w| w[0] != w[1])
            .map_or(0, |i| i + 1);
        let steps: Vec<f32> = history
            .windows(2)
            .map(|w| w[1] - w[0])
            .filter(|d| *d != 0.0)
            .collect();
        let reversals = steps.windows(2).filter(|s| s[0] * s[1] < 0.0).count();
        (settled, reversals)
    }

    #[test]
    fn presets_have_the_issue_ranges_and_parse() {
        assert_eq!(Quality::High.range(), (0.5, 1.0));
        assert_eq!(Quality::Medium.range(), (1.0, 3.0));
        assert_eq!(Quality::Low.range(), (3.0, 8.0));
        for q in Quality::ALL {
            assert_eq!(q.name().parse::<Quality>(), Ok(q));
        }
        assert!("ultra".parse::<Quality>().is_err());
    }

    #[test]
    fn settles_within_30_frames_without_oscillating() {
        for quality in Quality::ALL {
            let (lo, hi) = quality.range();
            for exponent in [1.0f32, 1.5, 2.0] {
                for seed in 0..20u64 {
                    // A target reachable inside the range: the cost at a τ 30 % into it.
                    let tau_goal = lo * (hi / lo).powf(0.3 + 0.4 * (seed as f32 / 20.0));
                    let target = 16.0;
                    let at_one = target * tau_goal.powf(exponent);
                    let history = simulate(quality, target, at_one, exponent, 0.05, seed);
                    let (settled, reversals) = settle_and_reversals(&history);
                    assert!(
                        settled <= 30,
                        "{quality} p {exponent} seed {seed}: still moving at frame {settled}: {history:?}"
                    );
                    assert!(reversals <= 1, "{quality}: oscillates: {history:?}");
                    let last = history[history.len() - 1];
                    let cost = at_one * last.powf(-exponent);
                    assert!(
                        (cost / target - 1.0).abs() <= LEAVE_BAND + 0.06,
                        "{quality}: settled at {cost} ms for a {target} ms target"
                    );
                }
            }
        }
    }

    #[test]
    fn an_unreachable_target_pins_the_range_end() {
        // Far too slow even at the coarsest τ, then far too fast even at the finest.
        let slow = simulate(Quality::Medium, 16.0, 1000.0, 2.0, 0.05, 7);
        assert_eq!(slow[slow.len() - 1], 3.0);
        assert!(settle_and_reversals(&slow).0 <= 30);
        let fast = simulate(Quality::Medium, 16.0, 0.01, 2.0, 0.05, 7);
        assert_eq!(fast[fast.len() - 1], 1.0);
        assert!(settle_and_reversals(&fast).0 <= 30);
    }

    #[test]
    fn bad_frame_times_keep_the_tolerance() {
        let mut c = AutoTolerance::new(Quality::Low, 16.0);
        let start = c.tolerance();
        for bad in [f32::NAN, f32::INFINITY, -1.0, 0.0] {
            assert_eq!(c.update(bad), start);
        }
    }

    #[test]
    fn follows_a_sudden_change_of_scene() {
        let mut c = AutoTolerance::new(Quality::Low, 16.0);
        let cost = |tau: f32, scale: f32| scale * 16.0 * (4.0 / tau).powi(2);
        for _ in 0..60 {
            let tau = c.tolerance();
            c.update(cost(tau, 1.0));
        }
        let before = c.tolerance();
        assert!((before - 4.0).abs() / 4.0 < 0.15, "{before}");
        // The view gets three times as expensive: τ must grow within a few frames.
        for _ in 0..10 {
            let tau = c.tolerance();
            c.update(cost(tau, 3.0));
        }
        let after = c.tolerance();
        assert!(after > before * 1.4, "{before} -> {after}");
    }
}
