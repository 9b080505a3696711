//! Golden images: four fixed scenes rendered headless (lavapipe in CI) and compared with
//! committed PNGs within a written tolerance. On failure the actual image and an
//! amplified difference land in `target/golden-failures/`. `TERRALOD_BLESS=1` rewrites
//! the goldens (look at them before committing).

mod common;

use common::{SIZE, diff, failure_dir, gpu_or_skip, overview_camera, terrain};
use glam::Vec3;
use std::path::Path;
use terralod_core::lod::LodAlgorithm as _;
use terralod_core::lod::{LodOptions, View, quadtree::QuadtreeLod};
use terralod_core::{Camera, Pyramid};
use terralod_render::{
    COLOUR_FORMAT, DebugLines, FrameSettings, OffscreenTarget, TerrainRenderer, render_to_image,
};

/// At most this share of pixels may differ by more than [`common::PIXEL_THRESHOLD`] in a
/// channel: software rasterisers of other versions round edges and derivatives slightly
/// differently, which moves single pixels along silhouettes and wire lines.
const MAX_DIFFERING_SHARE: f64 = 0.01;
/// And the mean absolute difference per channel stays below this (0..255).
const MAX_MEAN_ABS: f64 = 1.5;

#[derive(Clone, Copy, Debug)]
enum Scene {
    Lit,
    Wireframe,
    LodColours,
    FrozenCamera,
}

impl Scene {
    fn name(self) -> &'static str {
        match self {
            Scene::Lit => "lit",
            Scene::Wireframe => "wireframe",
            Scene::LodColours => "lod_colours",
            Scene::FrozenCamera => "frozen_camera",
        }
    }
}

fn render_scene(scene: Scene) -> Option<image::RgbaImage> {
    let ctx = gpu_or_skip(&format!("golden image {}", scene.name()))?;
    let field = terrain();
    let pyramid = Pyramid::build(&field);
    let mut algorithm = QuadtreeLod::new(&field, &pyramid, LodOptions::default());
    let overview = overview_camera(&field);
    let (w, d) = field.world_size();
    // The frozen LOD camera stands low in the south-west looking north-east; the image is
    // drawn from high above, so its frustum, its culling and its LOD are seen from outside.
    let frozen = Camera::new(
        Vec3::new(0.3 * w, 2600.0, 0.9 * d),
        Vec3::new(0.55 * w, 1200.0, 0.4 * d),
        40f32.to_radians(),
        SIZE,
        1.0,
        200_000.0,
    )
    .unwrap();
    let above = Camera::new(
        Vec3::new(0.5 * w, 30_000.0, 0.5 * d + 100.0),
        Vec3::new(0.5 * w, 0.0, 0.5 * d),
        60f32.to_radians(),
        SIZE,
        1.0,
        200_000.0,
    )
    .unwrap();
    let (lod_camera, render_camera, pixels) = match scene {
        Scene::Lit => (overview, overview, 1.0),
        Scene::Wireframe => (overview, overview, 4.0),
        Scene::LodColours => (overview, overview, 2.0),
        Scene::FrozenCamera => (frozen, above, 2.0),
    };
    let view = View::screen(lod_camera, pixels).unwrap();
    algorithm.select(&view);
    let mut lines = DebugLines::new();
    let mut settings = FrameSettings::new(render_camera);
    match scene {
        Scene::Lit => {}
        Scene::Wireframe => settings.wireframe = true,
        Scene::LodColours => settings.color_by_lod = true,
        Scene::FrozenCamera => {
            settings.color_by_lod = true;
            settings.fog_density = Some(0.0);
            lines.add_frustum(&frozen, 0.6 * w, [255, 60, 200, 255]);
        }
    }
    let selection = algorithm.select(&view);
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    let target = OffscreenTarget::new(&ctx, SIZE).unwrap();
    Some(render_to_image(&ctx, &mut renderer, &target, &selection, &settings, &lines).unwrap())
}

fn check_golden(scene: Scene) {
    let Some(actual) = render_scene(scene) else {
        return;
    };
    let golden_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{}.png", scene.name()));
    if std::env::var("TERRALOD_BLESS").as_deref() == Ok("1") {
        actual.save(&golden_path).unwrap();
        eprintln!("blessed {}", golden_path.display());
        return;
    }
    let expected = image::open(&golden_path)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (TERRALOD_BLESS=1 writes it)",
                golden_path.display()
            )
        })
        .to_rgba8();
    let (difference, picture) = diff(&actual, &expected);
    eprintln!(
        "{}: {:.3} % of pixels differ, mean |diff| {:.3}",
        scene.name(),
        difference.differing_share * 100.0,
        difference.mean_abs
    );
    if difference.differing_share > MAX_DIFFERING_SHARE || difference.mean_abs > MAX_MEAN_ABS {
        let dir = failure_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let actual_path = dir.join(format!("{}-actual.png", scene.name()));
        let diff_path = dir.join(format!("{}-diff.png", scene.name()));
        actual.save(&actual_path).unwrap();
        picture.save(&diff_path).unwrap();
        panic!(
            "{} differs from its golden: {:.3} % of pixels (limit {:.1} %), mean {:.3} \
             (limit {}); see {} and {}",
            scene.name(),
            difference.differing_share * 100.0,
            MAX_DIFFERING_SHARE * 100.0,
            difference.mean_abs,
            MAX_MEAN_ABS,
            actual_path.display(),
            diff_path.display()
        );
    }
}

#[test]
fn golden_lit_terrain() {
    check_golden(Scene::Lit);
}

#[test]
fn golden_wireframe() {
    check_golden(Scene::Wireframe);
}

#[test]
fn golden_lod_colours() {
    check_golden(Scene::LodColours);
}

#[test]
fn golden_frozen_camera() {
    check_golden(Scene::FrozenCamera);
}
