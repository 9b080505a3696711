//! `terralod render`: select with an LOD algorithm and draw the terrain headless on the GPU
//! (software Vulkan works), written to a PNG.

use crate::camera_args::CameraArgs;
use crate::detail_args::build_algorithm;
use crate::lod_args::LodArgs;
use crate::lod_args::settle_reads;
use crate::look_args::LookArgs;
use crate::stream_args::{
    DrawnTerrain, SETTLE_LIMIT, StreamArgs, check_page_file, settle, to_stderr,
};
use crate::terrain_args::{TerrainArgs, regular_file_len};
use anyhow::{Context, bail};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use terralod_core::Heightfield;
use terralod_core::lod::{AlgorithmEntry, LodAlgorithm, LodOptions, REGISTRY, find};
use terralod_core::{Pyramid, io};
use terralod_render::{
    DebugLines, FrameSettings, GpuContext, GpuTimer, OffscreenTarget, TerrainRenderer,
    render_to_image, timed_frame,
};

#[derive(Debug, Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub terrain: TerrainArgs,
    #[command(flatten)]
    pub lod: LodArgs,
    #[command(flatten)]
    pub camera: CameraArgs,
    #[command(flatten)]
    pub look: LookArgs,
    /// The PNG to write.
    #[arg(long, default_value = "frame.png")]
    pub out: PathBuf,
    /// After the image, time this many more frames (select, upload, draw, wait) and report
    /// frame times: GPU time from timestamp queries where the adapter has them, and wall
    /// time.
    #[arg(long, default_value_t = 0)]
    pub frames: u32,
    /// The tile cache, for `--algo streamed` over an imported directory.
    #[command(flatten)]
    pub stream: StreamArgs,
}

/// The registered names that `keep` says yes to, comma separated (for messages).
fn names_where(keep: impl Fn(&AlgorithmEntry) -> bool) -> String {
    let names: Vec<_> = REGISTRY
        .iter()
        .filter(|e| keep(e))
        .map(|e| e.name)
        .collect();
    names.join(", ")
}

/// Whether the algorithm called `name` can select with its heights carried (the
/// registry's [`AlgorithmEntry::carries_heights`]), so a renderer whose textures are
/// decimated draws it.
pub fn carries_heights(name: &str) -> bool {
    find(name).is_some_and(|entry| entry.carries_heights)
}

/// Side of the terrain's textures that every wgpu device offers (its default limits):
/// past it a renderer may have to decimate them.
pub const TEXTURE_SIDE_EVERYWHERE: u32 = 8192;

/// Algorithm A's options for a terrain that a renderer may hold decimated: vertices listed
/// when the terrain is larger than [`TEXTURE_SIDE_EVERYWHERE`] (the same mesh; so an
/// algorithm built before the GPU is known need not be built again).
pub fn listed_when_large(options: LodOptions, field: &Heightfield) -> LodOptions {
    if field.width().max(field.height()) <= TEXTURE_SIDE_EVERYWHERE {
        return options;
    }
    let adaptive = options.adaptive.with_list_vertices(true);
    options.with_adaptive(adaptive)
}

/// The options of algorithm `name` over a renderer that may hold the terrain's textures
/// decimated (a terrain larger than the GPU's largest texture): algorithm A then lists
/// its vertices (said on stderr); an algorithm whose selection reads the grid's heights
/// cannot be drawn and is refused, in one line naming those that can.
pub fn carried_heights_options(
    renderer: &TerrainRenderer,
    name: &str,
    options: LodOptions,
    field: &Heightfield,
) -> anyhow::Result<LodOptions> {
    if renderer.draws_grid_selections() {
        return Ok(options);
    }
    let too_large = format!(
        "the terrain of {} x {} samples is larger than this GPU's largest texture",
        field.width(),
        field.height()
    );
    if !carries_heights(name) {
        bail!(
            "{too_large}: {name} draws from the terrain's grid; use --algo {} (adaptive \
             then lists its vertices, the others' pools carry the heights), or import the \
             terrain (terralod import) and stream it",
            names_where(|e| e.carries_heights)
        );
    }
    if name == "adaptive" {
        eprintln!(
            "{too_large}: adaptive lists its vertices (--list-vertices), and normals and \
             colours come from a coarser grid"
        );
    } else {
        eprintln!("{too_large}: normals and colours come from a coarser grid");
    }
    let adaptive = options.adaptive.with_list_vertices(true);
    Ok(options.with_adaptive(adaptive))
}

pub fn run(args: &RenderArgs) -> anyhow::Result<()> {
    let entry = args.lod.only_entry()?;
    check_png(&args.out)?;
    // Frustum shades are per drawn patch: over an algorithm that draws triangles they
    // shaded everything "inside", silently.
    if args.look.frustum_shades() && !entry.draws_patches {
        bail!(
            "--color-by frustum shades the patches of {}; algorithm {} draws triangles",
            names_where(|e| e.draws_patches),
            entry.name
        );
    }
    let detail = args.lod.algorithm.detail.detail.as_deref();
    args.terrain
        .refuse_as_output(&args.out, [args.look.texture.as_deref(), detail])?;
    terralod_core::io::check_destination(&args.out)?;
    let texture = args.look.texture.as_deref().map(load_texture).transpose()?;
    let detail_field = args
        .lod
        .algorithm
        .detail
        .load(entry.name, args.terrain.max_samples)?;
    // `--algo streamed` over an imported directory streams it; the renderer and the default
    // camera then take a coarse level of it (the slots carry the drawn heights).
    let build = args.lod.algorithm.tree_build();
    let page_file = args.lod.algorithm.page_file.as_deref();
    check_page_file(&args.terrain, entry.name, build, page_file)?;
    let terrain = DrawnTerrain::open(&args.terrain, entry.name, build)?;
    args.stream
        .refuse_unless_streamed(terrain.streamed().is_some())?;
    let (field, terrain_name) = (terrain.field(), terrain.name());
    let streamed = terrain.streamed();
    let detail = detail_field
        .as_ref()
        .map(|d| args.lod.algorithm.detail.place(field, d))
        .transpose()?;
    let camera = args.camera.camera_or_default(field)?;
    let lod_camera = args.look.frozen.camera(&camera)?;
    let view = args
        .lod
        .view(|| Ok(lod_camera.unwrap_or(camera)), Some(1.0))?;

    let ctx = GpuContext::headless()?;
    let start = Instant::now();
    let mut renderer = TerrainRenderer::new(
        &ctx,
        field,
        texture.as_ref(),
        terralod_render::COLOUR_FORMAT,
    )?;
    let target = OffscreenTarget::new(&ctx, camera.viewport)?;
    let upload_ms = start.elapsed().as_secs_f64() * 1e3;

    let options = carried_heights_options(&renderer, entry.name, args.lod.options(), field)?;
    let pyramid = Pyramid::build(field);
    let mut algorithm: Box<dyn LodAlgorithm + '_> = match streamed {
        Some(terrain) => {
            let options = args.lod.options();
            let mut algorithm =
                terrain.algorithm(entry.name, &args.stream, options, page_file, &to_stderr)?;
            // A still image waits for the tiles its view asks for.
            settle(&mut algorithm, &view, SETTLE_LIMIT)?;
            Box::new(algorithm)
        }
        None => build_algorithm(entry, field, &pyramid, &options, detail.as_ref())?,
    };
    // The first frame grows the buffers (and waits for the pages the view asks for); the
    // next is the steady-state selection drawn.
    settle_reads(&mut *algorithm, &view, SETTLE_LIMIT)?;

    let mut lines = DebugLines::new();
    if args.look.boxes {
        let mut boxes = Vec::new();
        algorithm.drawn_boxes(&mut boxes);
        for aabb in &boxes {
            lines.add_box(aabb, [255, 230, 40, 255]);
        }
    }
    if let Some(frozen) = &lod_camera {
        let (w, d) = field.world_size();
        lines.add_frustum(frozen, 0.6 * w.max(d), [255, 60, 200, 255]);
    }
    let mut settings = FrameSettings::new(camera);
    settings.wireframe = args.look.wireframe;
    settings.color_by_lod = args.look.lod_colours();
    settings.color_by_frustum = args.look.frustum_shades();
    if args.look.no_fog {
        settings.fog_density = Some(0.0);
    }
    let selection = algorithm.select(&view);
    let start = Instant::now();
    let image = render_to_image(&ctx, &mut renderer, &target, &selection, &settings, &lines)?;
    let render_ms = start.elapsed().as_secs_f64() * 1e3;
    let stats = *algorithm.stats();
    if let Some(pool) = stats.patches.filter(|p| p.exhausted) {
        eprintln!(
            "{}: pool of {} patches exhausted: coarser patches kept (raise --pool-capacity)",
            args.lod.algo(),
            pool.capacity
        );
    }
    let timings = time_frames(
        &ctx,
        &mut renderer,
        &target,
        algorithm.as_mut(),
        &view,
        &settings,
        &lines,
        args.frames,
    )?;
    write_png(&args.out, &image).with_context(|| format!("writing {}", args.out.display()))?;

    let summary = serde_json::json!({
        "algorithm": entry.name,
        "terrain": terrain_name,
        "out": args.out.display().to_string(),
        "size": [camera.viewport.0, camera.viewport.1],
        "eye": camera.eye.to_array(),
        "target": camera.target.to_array(),
        "triangles": stats.triangles,
        "nodes_visited": stats.nodes_visited,
        "select_ms": stats.select_time.as_secs_f64() * 1e3,
        "upload_ms": upload_ms,
        "render_ms": render_ms,
        "tolerance": view.tolerance(),
        "adapter": ctx.summary().to_string(),
        "frames": timings,
    });
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: {} triangles drawn into {} ({} x {}) on {}\n{summary}",
        entry.name,
        stats.triangles,
        args.out.display(),
        camera.viewport.0,
        camera.viewport.1,
        ctx.summary()
    )
    .and_then(|()| out.flush())
    .context("cannot write to standard output")
}

/// Refuses an output name that is not a PNG before any work is done.
pub fn check_png(path: &Path) -> anyhow::Result<()> {
    let is_png = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    if !is_png {
        bail!("{}: the output must be a .png file", path.display());
    }
    Ok(())
}

pub fn load_texture(path: &Path) -> anyhow::Result<image::RgbaImage> {
    // A FIFO would block the open and a device never end: a regular file only.
    regular_file_len(path, "texture")?;
    let reader = || {
        image::ImageReader::open(path)
            .and_then(|r| r.with_guessed_format())
            .with_context(|| format!("{}: cannot open the texture", path.display()))
    };
    // Checked before decoding: a small file (a 1-bit PNG) can expand to gigabytes of RGBA.
    // (With the side limits set, the decoder would refuse in its own words.)
    let (width, height) = reader()?
        .into_dimensions()
        .with_context(|| format!("{}: cannot read the texture's size", path.display()))?;
    if width.max(height) > MAX_TEXTURE_SIDE {
        bail!(
            "{}: a texture of {width} x {height} is larger than {MAX_TEXTURE_SIDE} a side, \
             the most a GPU texture takes here",
            path.display()
        );
    }
    let mut reader = reader()?;
    reader.limits(texture_limits());
    let image = reader
        .decode()
        .with_context(|| format!("{}: cannot decode the texture", path.display()))?;
    Ok(image.into_rgba8())
}

/// The largest texture side loaded (the common GPU limit; the renderer checks the
/// device's own limit too).
const MAX_TEXTURE_SIDE: u32 = 16_384;

/// Bytes per pixel of the widest image the decoders produce (RGBA of `f32`).
const MAX_DECODED_PIXEL_BYTES: u64 = 16;

/// The decoder's limits, from [`MAX_TEXTURE_SIDE`]: the `image` crate's defaults (512 MiB
/// in all) refuse an RGBA texture from about 11600 a side, below what this tool promises.
fn texture_limits() -> image::Limits {
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_TEXTURE_SIDE);
    limits.max_image_height = Some(MAX_TEXTURE_SIDE);
    limits.max_alloc = Some(u64::from(MAX_TEXTURE_SIDE).pow(2) * MAX_DECODED_PIXEL_BYTES);
    limits
}

/// Writes `image` as a PNG, atomically (nothing half-written on failure).
pub fn write_png(path: &Path, image: &image::RgbaImage) -> anyhow::Result<()> {
    use image::ImageEncoder as _;
    io::write_file_atomically(path, |out| {
        image::codecs::png::PngEncoder::new(out)
            .write_image(
                image.as_raw(),
                image.width(),
                image.height(),
                image::ExtendedColorType::Rgba8,
            )
            .map_err(std::io::Error::other)
    })?;
    Ok(())
}

/// Median, 95th percentile and maximum of `values` in milliseconds.
fn summarise(values: &mut [f64]) -> serde_json::Value {
    if values.is_empty() {
        return serde_json::Value::Null;
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    serde_json::json!({ "median": at(0.5), "p95": at(0.95), "max": at(1.0) })
}

/// Times `frames` frames, each selecting anew, uploading and drawing; null for none.
#[allow(clippy::too_many_arguments)]
fn time_frames(
    ctx: &GpuContext,
    renderer: &mut TerrainRenderer,
    target: &OffscreenTarget,
    algorithm: &mut dyn terralod_core::lod::LodAlgorithm,
    view: &terralod_core::lod::View,
    settings: &FrameSettings,
    lines: &DebugLines,
    frames: u32,
) -> anyhow::Result<serde_json::Value> {
    if frames == 0 {
        return Ok(serde_json::Value::Null);
    }
    let timer = GpuTimer::new(ctx);
    let (mut gpu, mut wall, mut select) = (Vec::new(), Vec::new(), Vec::new());
    let bar = crate::progress::bar(u64::from(frames), "timing frames");
    for _ in 0..frames {
        let selection = algorithm.select(view);
        let timing = timed_frame(
            ctx,
            renderer,
            target,
            timer.as_ref(),
            &selection,
            settings,
            lines,
        )?;
        select.push(algorithm.stats().select_time.as_secs_f64() * 1e3);
        wall.push(timing.wall_ms);
        gpu.extend(timing.gpu_ms);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(serde_json::json!({
        "count": frames,
        "gpu_ms": summarise(&mut gpu),
        "wall_ms": summarise(&mut wall),
        "select_ms": summarise(&mut select),
        "bytes_uploaded_per_frame": renderer.upload_stats().bytes_last_frame,
        "buffers_created": renderer.upload_stats().buffers_created,
    }))
}

#[cfg(test)]
mod tests {
    use super::{MAX_TEXTURE_SIDE, load_texture, texture_limits};

    #[test]
    fn the_decoder_takes_every_texture_the_stated_side_allows() {
        let limits = texture_limits();
        assert_eq!(MAX_TEXTURE_SIDE, 16_384, "the documented limit");
        assert_eq!(limits.max_image_width, Some(MAX_TEXTURE_SIDE));
        assert_eq!(limits.max_image_height, Some(MAX_TEXTURE_SIDE));
        // A 16-bit RGBA PNG of the largest side decodes (8 bytes a pixel).
        let largest = u64::from(MAX_TEXTURE_SIDE).pow(2) * 8;
        assert!(limits.max_alloc.is_some_and(|bytes| bytes >= largest));
    }

    /// A 12000 x 12000 RGBA PNG (576 MB decoded, within the 16384 a side the tool states)
    /// failed with the `image` crate's default 512 MiB limit ("Memory limit exceeded").
    #[test]
    fn a_texture_past_the_image_crates_default_limit_decodes() {
        use image::ImageEncoder as _;
        let side = 12_000u32;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("big.png");
        // Zeroed memory, never written: compressed to a small file quickly.
        let pixels = vec![0u8; side as usize * side as usize * 4];
        let file = std::io::BufWriter::new(std::fs::File::create(&path).expect("writable"));
        image::codecs::png::PngEncoder::new_with_quality(
            file,
            image::codecs::png::CompressionType::Fast,
            image::codecs::png::FilterType::NoFilter,
        )
        .write_image(&pixels, side, side, image::ExtendedColorType::Rgba8)
        .expect("encodes");
        drop(pixels);
        let texture = load_texture(&path).expect("decodes within the stated limit");
        assert_eq!(texture.dimensions(), (side, side));
    }
}
