//! Measures algorithm P's GPU slot uploads along the bench's default path over the Grand
//! Canyon set (docs/BENCHMARKS.md): per frame, the slots the renderer sends (those the pool
//! refilled) and the time to hand them to the GPU and have them copied. Ignored by default
//! (it needs the shared data and a GPU adapter); run with
//! `cargo test -p terralod --bin terralod pool_uploads -- --ignored --nocapture`.

use super::Spread;
use super::path::default_path;
use glam::Vec3;
use std::path::Path;
use std::time::Instant;
use terralod_core::io::{LoadOptions, load};
use terralod_core::lod::{LodAlgorithm, PatchOptions, PatchesLod, View};
use terralod_core::{Camera, Pyramid, WorldMapping};
use terralod_render::{
    COLOUR_FORMAT, DebugLines, FrameSettings, GpuContext, SLOT_VERTEX_BYTES, TerrainRenderer,
};

#[test]
#[ignore = "a measurement: needs ../shared/data and a GPU adapter"]
fn pool_uploads_along_the_default_path() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/gcanyon_4097x2049_8bit.png");
    if !data.exists() {
        eprintln!("SKIPPED: {} is absent", data.display());
        return;
    }
    let ctx = match GpuContext::headless() {
        Ok(ctx) => ctx,
        Err(error) => {
            eprintln!("SKIPPED: {error}");
            return;
        }
    };
    let field = load(&data, &LoadOptions::default())
        .expect("the canyon loads")
        .heightfield
        .with_mapping(WorldMapping {
            cell_size: 60.0,
            height_scale: 10.0,
            height_offset: 0.0,
        })
        .expect("a valid mapping");
    let pyramid = Pyramid::build(&field);
    let mut lod = PatchesLod::new(&field, &pyramid, PatchOptions::default());
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    let lines = DebugLines::new();
    let (w, d) = field.world_size();
    let far = 2.0 * Vec3::new(w, 3000.0, d).length();
    let (mut slot_mb, mut upload_ms, mut slots) = (Vec::new(), Vec::new(), Vec::new());
    let mut fills = 0u64;
    let poses = default_path(&field, 600);
    let mut created = None;
    for (frame, pose) in poses.iter().enumerate() {
        let camera = Camera::new(
            Vec3::from(pose.eye),
            Vec3::from(pose.target),
            60f32.to_radians(),
            (1920, 1080),
            1.0,
            far,
        )
        .expect("a valid camera");
        let selection = lod.select(&View::screen(camera, 1.0).unwrap());
        let started = Instant::now();
        renderer
            .prepare(&ctx, &selection, &FrameSettings::new(camera), &lines)
            .expect("the renderer draws a pool's selection");
        ctx.queue.submit(None);
        ctx.wait_idle().expect("the GPU copies the slots");
        let elapsed = started.elapsed().as_secs_f64() * 1e3;
        let stats = renderer.upload_stats();
        let slot_bytes = u64::from(lod.pool().vertices_per_slot()) * SLOT_VERTEX_BYTES;
        assert_eq!(
            stats.slot_bytes_last_frame,
            u64::from(stats.slots_last_frame) * slot_bytes
        );
        assert!(stats.slots_last_frame <= lod.patch_stats().fills);
        fills += u64::from(lod.patch_stats().fills);
        if frame == 0 {
            // The first frame fills the start tree and sends the index buffers.
            eprintln!(
                "first frame: {} slots, {:.2} MB, {elapsed:.2} ms",
                stats.slots_last_frame,
                stats.slot_bytes_last_frame as f64 / 1e6
            );
            continue;
        }
        assert_eq!(
            *created.get_or_insert(stats.buffers_created),
            stats.buffers_created
        );
        slots.push(f64::from(stats.slots_last_frame));
        slot_mb.push(stats.slot_bytes_last_frame as f64 / 1e6);
        upload_ms.push(elapsed);
    }
    let uploading: Vec<f64> = upload_ms
        .iter()
        .zip(&slots)
        .filter(|(_, s)| **s > 0.0)
        .map(|(t, _)| *t)
        .collect();
    println!(
        "{}",
        serde_json::json!({
            "adapter": ctx.adapter.get_info().name,
            "frames_after_first": slots.len(),
            "frames_uploading": uploading.len(),
            "fills": fills,
            "slots_uploaded_after_first": slots.iter().sum::<f64>(),
            "slot_mb_after_first": slot_mb.iter().sum::<f64>(),
            "slots_per_frame": Spread::of(&slots),
            "slot_mb_per_frame": Spread::of(&slot_mb),
            "prepare_and_copy_ms": Spread::of(&upload_ms),
            "prepare_and_copy_ms_uploading_frames": Spread::of(&uploading),
        })
    );
}
