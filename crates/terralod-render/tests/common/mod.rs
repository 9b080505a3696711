//! What the GPU tests share: a context or a visible skip, the test terrain and cameras,
//! and image comparison.

#![allow(dead_code)]

use glam::Vec3;
use std::path::{Path, PathBuf};
use terralod_core::generate::{GenerateOptions, generate};
use terralod_core::lod::Selection;
use terralod_core::{Camera, Heightfield};
use terralod_render::{
    DebugLines, FrameSettings, GpuContext, OffscreenTarget, TerrainRenderer, render_to_image,
};

/// A headless context, or `None` after printing a visible SKIPPED line. With
/// `TERRALOD_REQUIRE_GPU=1` a missing adapter fails the test instead.
pub fn gpu_or_skip(test: &str) -> Option<GpuContext> {
    match GpuContext::headless() {
        Ok(ctx) => Some(ctx),
        Err(error) => {
            if std::env::var("TERRALOD_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("{test}: TERRALOD_REQUIRE_GPU=1 but {error}");
            }
            eprintln!("SKIPPED: {test}: {error}");
            None
        }
    }
}

/// The golden scenes' terrain: the built-in generator at 257² over the same 30.7 km.
pub fn terrain() -> Heightfield {
    generate(&GenerateOptions {
        size: 257,
        cell_size: 120.0,
        ..GenerateOptions::default()
    })
    .expect("the generator accepts these options")
}

pub const SIZE: (u32, u32) = (384, 216);

/// A three-quarter view from the south, as `terralod render` frames by default.
pub fn overview_camera(field: &Heightfield) -> Camera {
    let (w, d) = field.world_size();
    Camera::new(
        Vec3::new(0.32 * w, 2500.0 + 0.28 * w, d + 0.22 * d),
        Vec3::new(0.52 * w, 750.0, 0.42 * d),
        60f32.to_radians(),
        SIZE,
        1.0,
        200_000.0,
    )
    .expect("a valid camera")
}

/// How two images differ: the share of pixels off by more than `PIXEL_THRESHOLD` in some
/// channel, and the mean absolute difference per channel (0..255).
#[derive(Clone, Copy, Debug)]
pub struct ImageDiff {
    pub differing_share: f64,
    pub mean_abs: f64,
}

pub const PIXEL_THRESHOLD: u8 = 24;

pub fn diff(a: &image::RgbaImage, b: &image::RgbaImage) -> (ImageDiff, image::RgbaImage) {
    assert_eq!(a.dimensions(), b.dimensions(), "image sizes differ");
    let mut differing = 0u64;
    let mut total = 0u64;
    let mut picture = image::RgbaImage::new(a.width(), a.height());
    for ((pa, pb), out) in a.pixels().zip(b.pixels()).zip(picture.pixels_mut()) {
        let d: [u8; 3] = std::array::from_fn(|c| pa[c].abs_diff(pb[c]));
        total += d.iter().map(|&v| u64::from(v)).sum::<u64>();
        let worst = *d.iter().max().unwrap_or(&0);
        if worst > PIXEL_THRESHOLD {
            differing += 1;
        }
        // Differences amplified 4x over a dimmed copy of the expected image.
        *out = image::Rgba([
            (pb[0] / 4).saturating_add(d[0].saturating_mul(4)),
            (pb[1] / 4).saturating_add(d[1].saturating_mul(4)),
            (pb[2] / 4).saturating_add(d[2].saturating_mul(4)),
            255,
        ]);
    }
    let pixels = f64::from(a.width() * a.height());
    (
        ImageDiff {
            differing_share: differing as f64 / pixels,
            mean_abs: total as f64 / (3.0 * pixels),
        },
        picture,
    )
}

/// Where failing tests leave their actual and diff images.
pub fn failure_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/golden-failures")
}

/// Draws `selection` into a new `SIZE` target and reads it back.
pub fn draw(
    ctx: &GpuContext,
    renderer: &mut TerrainRenderer,
    selection: &Selection<'_>,
    settings: &FrameSettings,
) -> image::RgbaImage {
    let target = OffscreenTarget::new(ctx, SIZE).unwrap();
    render_to_image(
        ctx,
        renderer,
        &target,
        selection,
        settings,
        &DebugLines::new(),
    )
    .unwrap()
}
