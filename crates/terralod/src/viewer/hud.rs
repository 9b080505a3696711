//! The egui HUD: frame time graph, selection statistics, and the live switches (algorithm,
//! preset, τ fixed or automatic, debug views, frozen LOD camera, terrain following).

use super::controls::{Action, DebugViews, KEY_HELP, LodControls, TOLERANCE_SLIDER};
use super::frame_times::FrameTimes;
use egui::{Color32, Pos2, Stroke};
use glam::Vec3;
use terralod_core::lod::{Quality, REGISTRY, SelectionStats};

/// What the HUD reports this frame.
#[derive(Debug)]
pub struct HudInfo<'s> {
    pub adapter: &'s str,
    pub terrain: &'s str,
    pub frame_times: &'s FrameTimes,
    pub stats: SelectionStats,
    /// `Some` for a view-independent selection (`--max-error`): τ does not apply.
    pub world_error: Option<f32>,
    pub eye: Vec3,
    pub speed: f32,
    pub frozen: bool,
    /// Height above the ground kept while following the terrain.
    pub following: Option<f32>,
}

/// Draws the HUD; changes to the LOD controls and debug views are applied in place, the
/// rest is returned as actions for the viewer.
pub fn show(
    ctx: &egui::Context,
    info: &HudInfo<'_>,
    controls: &mut LodControls,
    views: &mut DebugViews,
) -> Vec<Action> {
    let mut actions = Vec::new();
    egui::Window::new("terralod")
        .default_pos([8.0, 8.0])
        .default_width(230.0)
        .resizable(false)
        .show(ctx, |ui| {
            ui.small(info.adapter);
            ui.small(info.terrain);
            frame_graph(ui, info.frame_times, controls.target_ms());
            statistics(ui, info);
            ui.separator();
            lod_controls(ui, info, controls);
            ui.separator();
            ui.checkbox(&mut views.wireframe, "wireframe (X)");
            ui.checkbox(&mut views.lod_colours, "colour by LOD (L)");
            ui.checkbox(&mut views.boxes, "node boxes (B)");
            ui.checkbox(&mut views.fog, "fog (O)");
            let mut frozen = info.frozen;
            if ui.checkbox(&mut frozen, "freeze LOD camera (F)").changed() {
                actions.push(Action::ToggleFreeze);
            }
            let mut following = info.following.is_some();
            if ui.checkbox(&mut following, "follow terrain (G)").changed() {
                actions.push(Action::ToggleFollowTerrain);
            }
            ui.horizontal(|ui| {
                if ui.button("screenshot (P)").clicked() {
                    actions.push(Action::Screenshot);
                }
                if ui.button("overview (R)").clicked() {
                    actions.push(Action::ResetView);
                }
            });
            ui.collapsing("keys", |ui| {
                egui::Grid::new("keys").show(ui, |ui| {
                    for (keys, what) in KEY_HELP {
                        ui.monospace(*keys);
                        ui.small(*what);
                        ui.end_row();
                    }
                });
            });
        });
    actions
}

fn statistics(ui: &mut egui::Ui, info: &HudInfo<'_>) {
    let stats = &info.stats;
    egui::Grid::new("statistics").num_columns(2).show(ui, |ui| {
        let mut row = |name: &str, value: String| {
            ui.label(name);
            ui.monospace(value);
            ui.end_row();
        };
        row("triangles", thousands(stats.triangles));
        row("nodes visited", thousands(stats.nodes_visited));
        row("nodes drawn", thousands(stats.nodes_drawn));
        row(
            "select",
            format!("{:.2} ms", stats.select_time.as_secs_f64() * 1e3),
        );
        row(
            "eye",
            format!("{:.0}, {:.0}, {:.0}", info.eye.x, info.eye.y, info.eye.z),
        );
        row("speed", format!("{:.1} /s", info.speed));
        if let Some(clearance) = info.following {
            row("above ground", format!("{clearance:.1}"));
        }
    });
}

fn lod_controls(ui: &mut egui::Ui, info: &HudInfo<'_>, controls: &mut LodControls) {
    let mut algorithm = controls.algorithm();
    egui::ComboBox::from_label("algorithm (Tab)")
        .selected_text(controls.algorithm_name())
        .show_ui(ui, |ui| {
            for (index, entry) in REGISTRY.iter().enumerate() {
                ui.selectable_value(&mut algorithm, index, entry.name)
                    .on_hover_text(entry.summary);
            }
        });
    controls.set_algorithm(algorithm);
    if let Some(metres) = info.world_error {
        ui.label(format!("world error {metres} (view-independent)"));
        return;
    }
    let mut preset = controls.preset();
    egui::ComboBox::from_label("preset (1 2 3)")
        .selected_text(preset.map_or("custom", Quality::name))
        .show_ui(ui, |ui| {
            for quality in Quality::ALL {
                ui.selectable_value(&mut preset, Some(quality), quality.name());
            }
        });
    if let Some(quality) = preset.filter(|&q| Some(q) != controls.preset()) {
        controls.set_preset(quality);
    }
    let mut tolerance = controls.tolerance();
    let slider = egui::Slider::new(&mut tolerance, TOLERANCE_SLIDER.0..=TOLERANCE_SLIDER.1)
        .logarithmic(true)
        .text("τ px");
    if ui.add_enabled(!controls.is_auto(), slider).changed() {
        controls.set_tolerance(tolerance);
    }
    ui.horizontal(|ui| {
        let mut auto = controls.is_auto();
        if ui.checkbox(&mut auto, "automatic τ (T)").changed() {
            controls.set_auto(auto);
        }
        let mut target = controls.target_ms();
        let drag = egui::DragValue::new(&mut target)
            .range(1.0..=200.0)
            .speed(0.1)
            .suffix(" ms");
        if ui.add(drag).changed() {
            controls.set_target_ms(target);
        }
    });
}

/// The frame times as a line over the last frames, with the target as a level.
fn frame_graph(ui: &mut egui::Ui, times: &FrameTimes, target_ms: f32) {
    let latest = times.latest().unwrap_or(0.0);
    let mean = times.recent_mean(30).unwrap_or(0.0);
    ui.monospace(format!(
        "{latest:6.2} ms  mean {mean:6.2} ms  {:5.0} fps",
        if mean > 0.0 { 1e3 / mean } else { 0.0 }
    ));
    let size = egui::vec2(ui.available_width().max(120.0), 48.0);
    let (rect, _) = ui.allocate_exact_size(size, egui::Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, Color32::from_black_alpha(140));
    let top = times.max().unwrap_or(0.0).max(2.0 * target_ms).max(1e-3);
    let y = |ms: f32| rect.bottom() - (ms / top).min(1.0) * rect.height();
    let level = y(target_ms);
    painter.line_segment(
        [
            Pos2::new(rect.left(), level),
            Pos2::new(rect.right(), level),
        ],
        Stroke::new(1.0, Color32::from_rgb(90, 90, 140)),
    );
    let step = rect.width() / times.capacity().max(2) as f32;
    let points: Vec<Pos2> = times
        .iter()
        .enumerate()
        .map(|(i, ms)| Pos2::new(rect.left() + i as f32 * step, y(ms)))
        .collect();
    if points.len() > 1 {
        painter.add(egui::Shape::line(
            points,
            Stroke::new(1.0, Color32::from_rgb(120, 230, 120)),
        ));
    }
}

/// `1234567` as `1 234 567`, easier to read at a glance.
fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1 000");
        assert_eq!(thousands(1_234_567), "1 234 567");
    }

    #[test]
    fn the_hud_runs_headless_and_applies_its_widgets() {
        // One egui pass without a window: the HUD lays out and returns no actions when
        // nothing was clicked.
        let ctx = egui::Context::default();
        let mut times = FrameTimes::new(16);
        for ms in [5.0, 7.0, 6.0] {
            times.push(ms);
        }
        let info = HudInfo {
            adapter: "test adapter",
            terrain: "test terrain",
            frame_times: &times,
            stats: SelectionStats::default(),
            world_error: None,
            eye: Vec3::ZERO,
            speed: 1.0,
            frozen: false,
            following: None,
        };
        let mut controls = LodControls::new(0, Some(Quality::High), None, false, 16.7);
        let mut views = DebugViews {
            wireframe: false,
            lod_colours: false,
            frustum_shades: false,
            boxes: false,
            fog: true,
            hud: true,
        };
        let before = (controls.tolerance(), views);
        let mut actions = Vec::new();
        let output = ctx.run_ui(egui::RawInput::default(), |ui| {
            actions = show(ui.ctx(), &info, &mut controls, &mut views);
        });
        assert!(actions.is_empty());
        assert_eq!((controls.tolerance(), views), before);
        assert!(!output.shapes.is_empty(), "the HUD drew something");
        output.drop_without_applying_deltas();
    }
}
