//! Algorithm P's pool on the GPU (P1): patches drawn from the pool's slots are the patches
//! drawn from the height texture; the pool's normals and colours are what is shaded; a
//! camera walk uploads exactly the refilled slots and creates no buffer once warm; an
//! exhausted pool still renders.

mod common;

use common::{SIZE, diff, draw, gpu_or_skip, overview_camera, terrain};
use glam::Vec3;
use terralod_core::lod::{LodAlgorithm, PatchOptions, PatchesLod, Selection, View};
use terralod_core::{Camera, Heightfield, Pyramid};
use terralod_render::{
    COLOUR_FORMAT, DebugLines, FrameSettings, SLOT_VERTEX_BYTES, TerrainRenderer,
};

/// Origin, step, frustum, pool slot and level: six words per instance.
const INSTANCE_BYTES: u64 = 24;

/// The same selection without its pool: drawn from the height texture, the old way.
fn without_pool<'a>(selection: &Selection<'a>) -> Selection<'a> {
    match *selection {
        Selection::Patches {
            vertices,
            patch_side,
            index_buffers,
            instances,
            morph,
            ..
        } => Selection::Patches {
            vertices,
            patch_side,
            index_buffers,
            instances,
            morph,
            pool: None,
        },
        triangles => triangles,
    }
}

fn low_camera(field: &Heightfield, t: f32) -> Camera {
    let (w, d) = field.world_size();
    let eye = Vec3::new(w * (0.1 + 0.8 * t), 1800.0, d * 0.6);
    Camera::new(
        eye,
        eye + Vec3::new(0.3 * w, -1500.0, -0.4 * d),
        60f32.to_radians(),
        SIZE,
        1.0,
        200_000.0,
    )
    .expect("a valid camera")
}

fn options(capacity: u32) -> PatchOptions {
    PatchOptions::default()
        .with_patch_size(16)
        .with_pool_capacity(capacity)
}

/// Slots and height texture draw the same geometry: with the shared shading the images
/// agree (at most a last-bit depth difference where the texture path fuses a multiply-add,
/// so at most 0.01 % of pixels differ and the mean difference is under 0.05 of 255), in
/// every view; with the pool's shading they differ.
#[test]
fn slots_draw_what_the_height_texture_draws() {
    let Some(ctx) = gpu_or_skip("slots_draw_what_the_height_texture_draws") else {
        return;
    };
    let field = terrain();
    let pyramid = Pyramid::build(&field);
    let mut lod = PatchesLod::new(&field, &pyramid, options(1024));
    let lod_camera = low_camera(&field, 0.3);
    let selection = lod.select(&View::screen(lod_camera, 1.0).unwrap().with_cull(false));
    assert!(matches!(
        selection,
        Selection::Patches { pool: Some(_), .. }
    ));
    let old_way = without_pool(&selection);
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    for (wireframe, by_lod, by_frustum) in [
        (false, false, false),
        (true, false, false),
        (false, true, false),
        (false, false, true),
    ] {
        let mut settings = FrameSettings::new(overview_camera(&field));
        settings.wireframe = wireframe;
        settings.color_by_lod = by_lod;
        settings.color_by_frustum = by_frustum;
        settings.shade_from_pool = false;
        let slots = draw(&ctx, &mut renderer, &selection, &settings);
        let texture = draw(&ctx, &mut renderer, &old_way, &settings);
        let (d, _) = diff(&slots, &texture);
        assert!(
            d.differing_share < 1e-4 && d.mean_abs < 0.05,
            "views {wireframe} {by_lod} {by_frustum}: slots and texture differ: {d:?}"
        );
        let distinct: std::collections::HashSet<[u8; 4]> = slots.pixels().map(|p| p.0).collect();
        assert!(distinct.len() > 100, "a nearly blank frame");
        settings.shade_from_pool = true;
        let pool_shaded = draw(&ctx, &mut renderer, &selection, &settings);
        let (d, _) = diff(&pool_shaded, &texture);
        // The frustum shades replace the albedo: there only the pool's normals show.
        let least = if by_frustum { 0.1 } else { 0.5 };
        assert!(
            d.mean_abs > least,
            "views {wireframe} {by_lod} {by_frustum}: the pool's shading left no trace: {d:?}"
        );
    }
    // P6 through the slots: the LOD camera's frustum splits the patches into shades.
    let mut settings = FrameSettings::new(overview_camera(&field));
    let plain = draw(&ctx, &mut renderer, &selection, &settings);
    settings.color_by_frustum = true;
    let shaded = draw(&ctx, &mut renderer, &selection, &settings);
    assert!(diff(&plain, &shaded).0.differing_share > 0.1);
}

fn srgb_to_linear(byte: u8) -> f64 {
    let c = f64::from(byte) / 255.0;
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

/// On flat ground both shadings light the same normal (straight up), so per channel the
/// pool-shaded image is the texture-shaded one times the ratio of the albedos: the pool's
/// lowland colour (77, 115, 51)/255 over the shader ramp's (0.20, 0.30, 0.12).
#[test]
fn the_pool_colours_are_the_drawn_albedo() {
    let Some(ctx) = gpu_or_skip("the_pool_colours_are_the_drawn_albedo") else {
        return;
    };
    let field = Heightfield::from_f32(129, 129, vec![10.0; 129 * 129]).unwrap();
    let pyramid = Pyramid::build(&field);
    let mut lod = PatchesLod::new(&field, &pyramid, options(256));
    let camera = Camera::new(
        Vec3::new(64.0, 60.0, 150.0),
        Vec3::new(64.0, 10.0, 64.0),
        60f32.to_radians(),
        SIZE,
        0.5,
        1000.0,
    )
    .unwrap();
    let selection = lod.select(&View::screen(camera, 1.0).unwrap());
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    let mut settings = FrameSettings::new(camera);
    settings.fog_density = Some(0.0);
    settings.shade_from_pool = false;
    let texture = draw(&ctx, &mut renderer, &selection, &settings);
    settings.shade_from_pool = true;
    let pool = draw(&ctx, &mut renderer, &selection, &settings);
    let expected = [
        77.0 / 255.0 / 0.20,
        115.0 / 255.0 / 0.30,
        51.0 / 255.0 / 0.12,
    ];
    // The bottom row of pixels looks at the ground just ahead.
    let (x, y) = (SIZE.0 / 2, SIZE.1 - 2);
    let (a, b) = (pool.get_pixel(x, y), texture.get_pixel(x, y));
    for channel in 0..3 {
        let ratio = srgb_to_linear(a[channel]) / srgb_to_linear(b[channel]).max(1e-6);
        assert!(
            (ratio / expected[channel] - 1.0).abs() < 0.06,
            "channel {channel}: {a:?} over {b:?} is {ratio}, expected {}",
            expected[channel]
        );
    }
}

/// Over a walk that splits and merges: each frame uploads exactly the slots the pool
/// refilled since the last frame (slot bytes = slots × vertices per slot × 20), the whole
/// upload is those, the instances and the uniforms, and after a warm-up pass no buffer
/// is created.
#[test]
fn a_camera_walk_uploads_only_refilled_slots_and_creates_no_buffer() {
    let Some(ctx) = gpu_or_skip("a_camera_walk_uploads_only_refilled_slots") else {
        return;
    };
    let field = terrain();
    let pyramid = Pyramid::build(&field);
    let mut lod = PatchesLod::new(&field, &pyramid, options(1024));
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    let lines = DebugLines::new();
    let frames = 8;
    let camera = |k: u32| {
        if k == frames - 1 {
            // Far away: everything merges back.
            overview_camera(&field)
        } else {
            low_camera(&field, k as f32 / frames as f32)
        }
    };
    let uniforms = 304u64;
    let mut created_after_warm_up = None;
    let (mut splits, mut merges, mut uploaded) = (0, 0, 0);
    for pass in 0..2 {
        for k in 0..frames {
            let before: Vec<u64> = {
                let pool = lod.pool();
                (0..pool.capacity()).map(|s| pool.generation(s)).collect()
            };
            let view = View::screen(camera(k), 1.0).unwrap();
            let selection = lod.select(&view);
            let Selection::Patches {
                instances,
                pool: Some(pool),
                ..
            } = selection
            else {
                panic!("algorithm P selects patches with its pool");
            };
            let refilled = (0..pool.capacity())
                .filter(|&s| pool.generation(s) != before[s as usize])
                .count() as u64;
            let slot_bytes = u64::from(pool.vertices_per_slot()) * SLOT_VERTEX_BYTES;
            let instance_count = instances.len() as u64;
            renderer
                .prepare(
                    &ctx,
                    &selection,
                    &FrameSettings::new(overview_camera(&field)),
                    &lines,
                )
                .unwrap();
            let stats = renderer.upload_stats();
            let patch = *lod.patch_stats();
            assert!(refilled <= u64::from(patch.fills));
            if pass == 0 && k == 0 {
                continue; // the index buffers go up once
            }
            assert_eq!(u64::from(stats.slots_last_frame), refilled, "frame {k}");
            assert_eq!(stats.slot_bytes_last_frame, refilled * slot_bytes);
            assert_eq!(
                stats.bytes_last_frame,
                refilled * slot_bytes + instance_count * INSTANCE_BYTES + uniforms,
                "frame {k}: slots, instances and uniforms only"
            );
            if pass == 1 {
                splits += patch.splits;
                merges += patch.merges;
                uploaded += refilled;
                let created = *created_after_warm_up.get_or_insert(stats.buffers_created);
                assert_eq!(stats.buffers_created, created, "frame {k} created a buffer");
            }
        }
    }
    assert!(
        splits > 0 && merges > 0 && uploaded > 0,
        "the walk splits ({splits}), merges ({merges}) and uploads ({uploaded})"
    );
    ctx.wait_idle().unwrap();
}

/// A pool too small for the camera keeps coarser patches and the renderer draws them from
/// their slots, the same as from the texture; a new pool in the same renderer replaces the
/// old one's slots.
#[test]
fn an_exhausted_pool_still_renders() {
    let Some(ctx) = gpu_or_skip("an_exhausted_pool_still_renders") else {
        return;
    };
    let field = terrain();
    let pyramid = Pyramid::build(&field);
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    let mut settings = FrameSettings::new(overview_camera(&field));
    settings.shade_from_pool = false;
    for capacity in [1024, 1] {
        let mut lod = PatchesLod::new(&field, &pyramid, options(capacity));
        for k in 0..3 {
            let view = View::screen(low_camera(&field, k as f32 / 3.0), 1.0).unwrap();
            let selection = lod.select(&view.with_cull(false));
            let slots = draw(&ctx, &mut renderer, &selection, &settings);
            let texture = draw(&ctx, &mut renderer, &without_pool(&selection), &settings);
            let (d, _) = diff(&slots, &texture);
            assert!(
                d.differing_share < 1e-4 && d.mean_abs < 0.05,
                "capacity {capacity}, frame {k}: {d:?}"
            );
        }
        let stats = lod.patch_stats();
        assert_eq!(stats.exhausted, capacity == 1, "{stats:?}");
    }
    ctx.wait_idle().unwrap();
}
