//! What the viewer's keys and HUD change: the LOD algorithm, the preset, the tolerance
//! (fixed or automatic) and the debug views. Pure state, tested without a window.

use terralod_core::lod::{AutoTolerance, Quality, REGISTRY};
use winit::keyboard::KeyCode;

/// The tolerance a viewer starts with when given neither `--pixel-error` nor `--quality`
/// (the `render` command's default).
pub const DEFAULT_PIXELS: f32 = 1.0;
/// Range of the HUD's tolerance slider, in pixels.
pub const TOLERANCE_SLIDER: (f32, f32) = (0.25, 16.0);

/// A one-shot command from a key or a HUD button.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    ToggleWireframe,
    ToggleLodColours,
    ToggleBoxes,
    ToggleFog,
    /// Freeze the camera the LOD selects for (or unfreeze it).
    ToggleFreeze,
    ToggleFollowTerrain,
    ToggleHud,
    ToggleAuto,
    Preset(Quality),
    NextAlgorithm,
    Screenshot,
    ResetView,
    Quit,
}

/// The action of a key press, if the key has one (movement keys are held, not pressed:
/// see `MoveKeys`).
pub fn action_for_key(key: KeyCode) -> Option<Action> {
    Some(match key {
        KeyCode::KeyX => Action::ToggleWireframe,
        KeyCode::KeyL => Action::ToggleLodColours,
        KeyCode::KeyB => Action::ToggleBoxes,
        KeyCode::KeyO => Action::ToggleFog,
        KeyCode::KeyF => Action::ToggleFreeze,
        KeyCode::KeyG => Action::ToggleFollowTerrain,
        KeyCode::KeyH | KeyCode::F1 => Action::ToggleHud,
        KeyCode::KeyT => Action::ToggleAuto,
        KeyCode::Digit1 => Action::Preset(Quality::High),
        KeyCode::Digit2 => Action::Preset(Quality::Medium),
        KeyCode::Digit3 => Action::Preset(Quality::Low),
        KeyCode::Tab => Action::NextAlgorithm,
        KeyCode::KeyP | KeyCode::F12 => Action::Screenshot,
        KeyCode::KeyR => Action::ResetView,
        KeyCode::Escape => Action::Quit,
        _ => return None,
    })
}

/// The keys, as the HUD and the README list them.
pub const KEY_HELP: &[(&str, &str)] = &[
    ("W A S D", "fly forward, left, back, right"),
    ("Q / E", "down / up (clearance when following the ground)"),
    ("Shift", "5x faster"),
    ("drag / arrows", "look around"),
    ("wheel", "slower / faster"),
    ("G", "follow the terrain"),
    ("F", "freeze the LOD camera, fly outside it"),
    ("B", "node boxes"),
    ("X", "wireframe"),
    ("L", "colour by LOD"),
    ("O", "fog"),
    ("1 2 3", "preset high, medium, low"),
    ("T", "automatic tolerance"),
    ("Tab", "next algorithm"),
    ("P", "screenshot"),
    ("R", "back to the overview"),
    ("H", "hide the HUD"),
    ("Esc", "quit"),
];

/// The LOD settings: algorithm, preset and tolerance, fixed or automatic.
#[derive(Clone, Debug)]
pub struct LodControls {
    /// Index of the algorithm in [`REGISTRY`].
    algorithm: usize,
    /// `None` for a tolerance set by hand ("custom").
    preset: Option<Quality>,
    /// The tolerance used while not automatic.
    fixed: f32,
    auto: Option<AutoTolerance>,
    target_ms: f32,
}

impl LodControls {
    /// Starts with `algorithm` (a [`REGISTRY`] index), the preset's middle τ (or `pixels`,
    /// or [`DEFAULT_PIXELS`]), automatic when `auto`.
    pub fn new(
        algorithm: usize,
        preset: Option<Quality>,
        pixels: Option<f32>,
        auto: bool,
        target_ms: f32,
    ) -> LodControls {
        let mut controls = LodControls {
            algorithm: algorithm.min(REGISTRY.len().saturating_sub(1)),
            preset: None,
            fixed: pixels.unwrap_or(DEFAULT_PIXELS),
            auto: None,
            target_ms,
        };
        if let Some(quality) = preset {
            controls.set_preset(quality);
        }
        controls.set_auto(auto);
        controls
    }

    pub fn algorithm(&self) -> usize {
        self.algorithm
    }

    pub fn algorithm_name(&self) -> &'static str {
        REGISTRY.get(self.algorithm).map_or("none", |e| e.name)
    }

    /// Switches to the algorithm at `index`; false (nothing changes) when there is none.
    pub fn set_algorithm(&mut self, index: usize) -> bool {
        if index < REGISTRY.len() && index != self.algorithm {
            self.algorithm = index;
            true
        } else {
            false
        }
    }

    /// Switches to the next registered algorithm; false when there is only one.
    pub fn next_algorithm(&mut self) -> bool {
        self.set_algorithm((self.algorithm + 1) % REGISTRY.len().max(1))
    }

    /// The first algorithm from `index` on (cyclically) that `allowed` accepts, and the
    /// names of those passed over (a GPU that draws only some of them).
    pub fn first_allowed_from(
        index: usize,
        allowed: impl Fn(&str) -> bool,
    ) -> (usize, Vec<&'static str>) {
        let n = REGISTRY.len().max(1);
        let skipped: Vec<&'static str> = (0..n)
            .map(|k| (index + k) % n)
            .take_while(|&i| !allowed(REGISTRY[i].name))
            .map(|i| REGISTRY[i].name)
            .collect();
        ((index + skipped.len()) % n, skipped)
    }

    pub fn preset(&self) -> Option<Quality> {
        self.preset
    }

    /// Chooses a preset: τ goes to the middle of its range (geometric mean), and an
    /// automatic tolerance restarts within it.
    pub fn set_preset(&mut self, quality: Quality) {
        self.preset = Some(quality);
        let (finest, coarsest) = quality.range();
        self.fixed = (finest * coarsest).sqrt();
        if self.auto.is_some() {
            self.auto = Some(AutoTolerance::new(quality, self.target_ms));
        }
    }

    pub fn is_auto(&self) -> bool {
        self.auto.is_some()
    }

    /// Switches the automatic tolerance on (within the preset's range; without a preset,
    /// the preset whose range holds the current τ) or off (keeping the last τ).
    pub fn set_auto(&mut self, on: bool) {
        match (on, self.auto) {
            (true, None) => {
                let quality = self.preset.unwrap_or_else(|| preset_holding(self.fixed));
                self.preset = Some(quality);
                self.auto = Some(AutoTolerance::new(quality, self.target_ms));
            }
            (false, Some(auto)) => {
                self.fixed = auto.tolerance();
                self.auto = None;
            }
            _ => {}
        }
    }

    pub fn target_ms(&self) -> f32 {
        self.target_ms
    }

    /// Changes the frame time the automatic tolerance holds (ignored unless finite and
    /// positive); a running controller restarts from the middle of the preset.
    pub fn set_target_ms(&mut self, ms: f32) {
        if ms.is_finite() && ms > 0.0 && ms != self.target_ms {
            self.target_ms = ms;
            // The controller has no setter for its target: it restarts in the range.
            if let (Some(_), Some(quality)) = (self.auto, self.preset) {
                self.auto = Some(AutoTolerance::new(quality, ms));
            }
        }
    }

    /// The tolerance for the next frame, in pixels.
    pub fn tolerance(&self) -> f32 {
        match &self.auto {
            Some(auto) => auto.tolerance(),
            None => self.fixed,
        }
    }

    /// Sets τ by hand: the automatic tolerance goes off and the preset becomes "custom".
    /// Values that are not finite and positive are ignored.
    pub fn set_tolerance(&mut self, pixels: f32) {
        if pixels.is_finite() && pixels > 0.0 {
            self.fixed = pixels;
            self.auto = None;
            self.preset = None;
        }
    }

    /// Feeds the automatic tolerance the time of the frame just drawn.
    pub fn frame_done(&mut self, frame_ms: f32) {
        if let Some(auto) = &mut self.auto {
            auto.update(frame_ms);
        }
    }
}

/// The preset whose range holds `pixels` (the nearest one outside all ranges).
fn preset_holding(pixels: f32) -> Quality {
    Quality::ALL
        .into_iter()
        .find(|q| pixels <= q.range().1)
        .unwrap_or(Quality::Low)
}

/// The debug views and HUD switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DebugViews {
    pub wireframe: bool,
    pub lod_colours: bool,
    /// Patches shaded by the LOD frustum (`--color-by frustum`; no key).
    pub frustum_shades: bool,
    pub boxes: bool,
    pub fog: bool,
    pub hud: bool,
}

impl DebugViews {
    /// Applies a toggle; false for actions that are not about the debug views.
    pub fn apply(&mut self, action: Action) -> bool {
        let switch = match action {
            Action::ToggleWireframe => &mut self.wireframe,
            Action::ToggleLodColours => &mut self.lod_colours,
            Action::ToggleBoxes => &mut self.boxes,
            Action::ToggleFog => &mut self.fog,
            Action::ToggleHud => &mut self.hud,
            _ => return false,
        };
        *switch = !*switch;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_key_has_an_action_and_movement_keys_have_none() {
        for key in [KeyCode::KeyX, KeyCode::KeyF, KeyCode::KeyP, KeyCode::Digit3] {
            assert!(action_for_key(key).is_some(), "{key:?}");
        }
        for key in [
            KeyCode::KeyW,
            KeyCode::KeyA,
            KeyCode::KeyQ,
            KeyCode::ShiftLeft,
        ] {
            assert_eq!(action_for_key(key), None, "{key:?}");
        }
        assert_eq!(
            action_for_key(KeyCode::Digit1),
            Some(Action::Preset(Quality::High))
        );
    }

    #[test]
    fn presets_set_the_middle_of_their_range_and_a_hand_set_tolerance_is_custom() {
        let mut controls = LodControls::new(0, None, None, false, 16.7);
        assert_eq!(controls.tolerance(), DEFAULT_PIXELS);
        assert_eq!(controls.preset(), None);
        controls.set_preset(Quality::Low);
        assert!((controls.tolerance() - 24f32.sqrt()).abs() < 1e-6);
        controls.set_tolerance(2.5);
        assert_eq!((controls.tolerance(), controls.preset()), (2.5, None));
        controls.set_tolerance(f32::NAN);
        controls.set_tolerance(0.0);
        assert_eq!(controls.tolerance(), 2.5);
        let given = LodControls::new(0, None, Some(0.7), false, 16.7);
        assert_eq!(given.tolerance(), 0.7);
    }

    #[test]
    fn automatic_tolerance_coarsens_slow_frames_within_the_preset() {
        let mut controls = LodControls::new(0, Some(Quality::Medium), None, true, 10.0);
        assert!(controls.is_auto());
        let start = controls.tolerance();
        for _ in 0..50 {
            controls.frame_done(40.0);
        }
        assert!(controls.tolerance() > start);
        assert!(controls.tolerance() <= Quality::Medium.range().1);
        // Off keeps the last τ; a hand-set τ switches it off too.
        controls.set_auto(false);
        assert!(!controls.is_auto());
        assert_eq!(controls.tolerance(), Quality::Medium.range().1);
        controls.frame_done(1000.0);
        assert_eq!(controls.tolerance(), Quality::Medium.range().1);
        controls.set_auto(true);
        controls.set_tolerance(1.5);
        assert!(!controls.is_auto());
    }

    #[test]
    fn automatic_without_a_preset_picks_the_one_holding_tau() {
        let mut controls = LodControls::new(0, None, Some(5.0), false, 16.7);
        controls.set_auto(true);
        assert_eq!(controls.preset(), Some(Quality::Low));
        let mut fine = LodControls::new(0, None, Some(0.1), true, 16.7);
        assert_eq!(fine.preset(), Some(Quality::High));
        fine.set_preset(Quality::Medium);
        assert!(fine.is_auto());
        let (lo, hi) = Quality::Medium.range();
        assert!((lo..=hi).contains(&fine.tolerance()));
    }

    #[test]
    fn algorithms_cycle_through_the_registry() {
        let mut controls = LodControls::new(0, None, None, false, 16.7);
        assert_eq!(controls.algorithm_name(), REGISTRY[0].name);
        assert!(!controls.set_algorithm(REGISTRY.len()));
        let changed = controls.next_algorithm();
        assert_eq!(changed, REGISTRY.len() > 1);
        assert_eq!(controls.algorithm(), 1 % REGISTRY.len());
    }

    /// Over a GPU that draws only some algorithms, Tab passes over the others and comes
    /// round again: from every algorithm, the next allowed one (not a refused neighbour
    /// the controls would return to).
    #[test]
    fn tab_passes_over_algorithms_that_cannot_be_drawn() {
        let allowed = |name: &str| ["adaptive", "patches", "streamed"].contains(&name);
        let mut seen = Vec::new();
        let mut at = 0;
        for _ in 0..2 * REGISTRY.len() {
            let (next, skipped) =
                LodControls::first_allowed_from((at + 1) % REGISTRY.len(), allowed);
            assert!(allowed(REGISTRY[next].name));
            assert!(skipped.iter().all(|name| !allowed(name)));
            seen.push(REGISTRY[next].name);
            at = next;
        }
        for name in ["adaptive", "patches", "streamed"] {
            assert!(seen.contains(&name), "{name} never reached: {seen:?}");
        }
        let (same, none) = LodControls::first_allowed_from(at, allowed);
        assert_eq!((same, none.len()), (at, 0));
    }

    #[test]
    fn toggles_flip_only_their_own_switch() {
        let mut views = DebugViews {
            wireframe: false,
            lod_colours: false,
            frustum_shades: false,
            boxes: false,
            fog: true,
            hud: true,
        };
        assert!(views.apply(Action::ToggleWireframe));
        assert!(views.apply(Action::ToggleFog));
        assert!(!views.apply(Action::Screenshot));
        assert_eq!(
            views,
            DebugViews {
                wireframe: true,
                lod_colours: false,
                frustum_shades: false,
                boxes: false,
                fog: false,
                hud: true,
            }
        );
    }
}
