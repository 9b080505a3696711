//! Quality presets and the automatic tolerance controller (feature Q6).
//!
//! A preset is a range for the pixel tolerance τ (the ranges: high 0.5–1, medium
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
//! it keeps acting until the time is back within ±`ENTER_BAND`.

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
const ENTER_BAND: f32 = 0.05;

/// Moves τ inside a preset's range to hold a target frame time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoTolerance {
    range: (f32, f32),
    target_ms: f32,
    tolerance: f32,
    acting: bool,
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
        let ratio = frame_ms / self.target_ms;
        let off = (ratio - 1.0).abs();
        self.acting = if self.acting {
            off > ENTER_BAND
        } else {
            off > LEAVE_BAND
        };
        if self.acting {
            let next = (self.tolerance * ratio.powf(GAIN)).clamp(self.range.0, self.range.1);
            if next == self.tolerance {
                // Pinned at a range end: nothing more to do until the cost comes back.
                self.acting = false;
            }
            self.tolerance = next;
        }
        self.tolerance
    }
}
