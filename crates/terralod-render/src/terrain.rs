//! The terrain renderer: static textures uploaded once, a frame's selection uploaded into
//! buffers that only grow, and the draw calls for the lit terrain, the sky and debug lines.

use crate::buffers::GrowingBuffer;
use crate::context::GpuContext;
use crate::lines::{DebugLines, LineVertex};
use crate::morph_list::MorphList;
use crate::slots::GpuSlots;
use crate::{RenderError, normals};
use bytemuck::Zeroable as _;
use glam::{Mat4, Vec3};
use std::ops::Range;
use terralod_core::heightfield::{Heightfield, level_side};
use terralod_core::lod::{PatchInstance, PatchMorph, Selection};
use terralod_core::{Camera, Containment};
use wgpu::util::DeviceExt;

/// Depth buffer format: 32-bit float, used reversed (1 at the near plane, 0 infinitely far)
/// so precision is even across distances: views from 1 m to 100 km keep their depth order.
pub const DEPTH_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Depth32Float;

/// What to draw on top of the terrain and how to shade it, per frame.
#[derive(Clone, Copy, Debug)]
pub struct FrameSettings {
    /// The camera the image is drawn from (may differ from the one the LOD selected for).
    pub camera: Camera,
    /// Draw every triangle's edges (in the shader: any backend).
    pub wireframe: bool,
    /// Tint triangles by their size in cells (log2): the LOD level.
    pub color_by_lod: bool,
    /// Shade patches by where they lie relative to the LOD's frustum (P6, article 003):
    /// light grey inside, orange across its boundary, dark grey outside (drawn only when
    /// not culled).
    pub color_by_frustum: bool,
    /// With a pool selection (algorithm P), shade with each slot's per-vertex normals and
    /// colours, the article's per-patch data (the default); `false`: with the shared
    /// full-resolution normal texture and colour ramp, as every other selection (the
    /// geometry still comes from the slots).
    pub shade_from_pool: bool,
    /// Fog density per world unit; `None` for the terrain's default, `Some(0.0)` for none.
    pub fog_density: Option<f32>,
    /// Unit direction towards the sun.
    pub sun_direction: Vec3,
}

impl FrameSettings {
    /// Plain lit terrain seen from `camera`, the sun in the north-west 35° up.
    pub fn new(camera: Camera) -> FrameSettings {
        let elevation = 35f32.to_radians();
        let horizontal = Vec3::new(-1.0, 0.0, -1.0).normalize() * elevation.cos();
        FrameSettings {
            camera,
            wireframe: false,
            color_by_lod: false,
            color_by_frustum: false,
            shade_from_pool: true,
            fog_density: None,
            sun_direction: horizontal + Vec3::Y * elevation.sin(),
        }
    }
}

/// Per-frame uniforms; layout mirrors `Frame` in `terrain.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
struct FrameUniforms {
    clip_from_local: [[f32; 4]; 4],
    local_from_clip: [[f32; 4]; 4],
    eye: [f32; 4],
    sun: [f32; 4],
    sky_zenith: [f32; 4],
    sky_horizon: [f32; 4],
    height_range: [f32; 4],
    grid: [u32; 4],
    mode: [u32; 4],
    patch_morph: [f32; 4],
    patch_morph_range: [f32; 4],
    /// x: vertices of all pool slots; y: vertices per slot; z: the grid's subdivision
    /// (`GridVertices::shift`, local detail).
    slots: [u32; 4],
    /// xy: the data's extent in texture cells.
    extent: [f32; 4],
}

const WIREFRAME: u32 = 1;
const LOD_COLOURS: u32 = 2;
const COLOUR_TEXTURE: u32 = 4;
const FRUSTUM_SHADES: u32 = 8;
/// Patch vertices come from the pool's slots.
const POOL_SLOTS: u32 = 16;
/// Normals and albedo come from the pool's slots.
const POOL_SHADING: u32 = 32;
/// Triangles index the listed vertices (uploaded where the morphs go).
const LISTED: u32 = 64;

/// A patch instance as the shader reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
struct GpuPatch {
    origin_col: u32,
    origin_row: u32,
    step: u32,
    /// Where the patch lies relative to the LOD's frustum: 0 inside, 1 crossing, 2 outside.
    frustum: u32,
    /// Its pool slot (unused without a pool).
    slot: u32,
    /// The level shown in LOD colours.
    level: u32,
}

/// Buffers a new renderer holds: uniforms, indices, instances, morphs, lines and the pool
/// slots' placeholder.
const BUFFERS_AT_START: u64 = 6;

/// What the last [`TerrainRenderer::prepare`] set up to draw.
#[derive(Clone, Debug, Default)]
enum DrawList {
    #[default]
    Nothing,
    Triangles {
        index_count: u32,
    },
    /// Patch instances, drawn as `patch_draws` lists.
    Patches,
}

/// What a frame uploaded and created: the proof that static data stays put.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UploadStats {
    /// Bytes written to GPU buffers by the last `prepare`.
    pub bytes_last_frame: u64,
    /// GPU buffers created since the renderer was built (growing a buffer creates one).
    pub buffers_created: u64,
    /// Pool slots uploaded by the last `prepare` (those the pool filled since their last
    /// upload), and their bytes (included in `bytes_last_frame`): slots ×
    /// vertices per slot × [`SLOT_VERTEX_BYTES`](crate::SLOT_VERTEX_BYTES).
    pub slots_last_frame: u32,
    pub slot_bytes_last_frame: u64,
}

/// The pipelines, one per vertex path.
#[derive(Debug)]
struct Pipelines {
    triangles_indexed: wgpu::RenderPipeline,
    triangles_pulled: wgpu::RenderPipeline,
    patches_indexed: wgpu::RenderPipeline,
    patches_pulled: wgpu::RenderPipeline,
    sky: wgpu::RenderPipeline,
    lines: wgpu::RenderPipeline,
}

/// Draws selections of one terrain. Built once per terrain and target format.
#[derive(Debug)]
pub struct TerrainRenderer {
    pipelines: Pipelines,
    layout: wgpu::BindGroupLayout,
    bind_group: wgpu::BindGroup,
    uniforms: wgpu::Buffer,
    heights: wgpu::TextureView,
    normals: wgpu::TextureView,
    colour: wgpu::TextureView,
    has_colour_texture: bool,
    sampler: wgpu::Sampler,
    /// Explicit triangles' indices, or the concatenated shared patch index buffers.
    indices: GrowingBuffer,
    instances: GrowingBuffer,
    morphs: GrowingBuffer,
    /// Algorithm P's pool slots, when a pool selection was drawn.
    slots: GpuSlots,
    /// The last `prepare` draws patches from the pool's slots.
    from_slots: bool,
    lines: GrowingBuffer,
    line_vertices: u32,
    /// The patch index buffers now in `indices` (to upload them only when they change).
    uploaded_patch_indices: Vec<u32>,
    patch_ranges: Vec<Range<u32>>,
    patches_resident: bool,
    scratch_patches: Vec<GpuPatch>,
    scratch_counts: Vec<u32>,
    /// With `DrawList::Patches`: per shared index buffer in use, its index range in the
    /// concatenated buffer and its instance range.
    patch_draws: Vec<(Range<u32>, Range<u32>)>,
    /// A triangle selection's morphs, sorted by vertex for the shader's bisection.
    morph_list: MorphList,
    scratch_listed: Vec<[u32; 3]>,
    /// The last `prepare` drew a listed selection.
    listed: bool,
    draw: DrawList,
    /// Wireframe or LOD colours: the pulled vertex path.
    pulled: bool,
    data_size: (u32, u32),
    /// The textures hold every `2^decimation`-th sample: the terrain is larger than the
    /// GPU's largest texture, and only selections that carry their heights are drawn.
    decimation: u32,
    /// Size of the terrain the textures stand for, and the largest texture side.
    terrain_size: (u32, u32),
    max_side: u32,
    cell_size: f32,
    world_range: (f32, f32),
    world_diagonal: f32,
    stats: UploadStats,
}

impl TerrainRenderer {
    /// Uploads `field` (heights and full-resolution normals) and an optional colour
    /// texture laid over the data's extent, and builds the pipelines for `target_format`.
    ///
    /// A terrain larger than the GPU's largest texture is uploaded decimated (every
    /// `2^k`-th sample, the least `k` that fits): its normals are then the coarser grid's,
    /// and only selections that carry their heights (listed vertices, a pool's slots) can
    /// be drawn ([`TerrainRenderer::draws_grid_selections`]).
    pub fn new(
        ctx: &GpuContext,
        field: &Heightfield,
        colour_texture: Option<&image::RgbaImage>,
        target_format: wgpu::TextureFormat,
    ) -> Result<TerrainRenderer, RenderError> {
        let max_side = ctx.max_texture_side();
        Self::with_texture_side(ctx, field, colour_texture, target_format, max_side)
    }

    /// [`TerrainRenderer::new`] with textures of at most `max_side` a side (at most the
    /// device's: tests of terrains larger than a texture on small data).
    pub fn with_texture_side(
        ctx: &GpuContext,
        field: &Heightfield,
        colour_texture: Option<&image::RgbaImage>,
        target_format: wgpu::TextureFormat,
        max_side: u32,
    ) -> Result<TerrainRenderer, RenderError> {
        let device = &ctx.device;
        let max_side = max_side
            .min(device.limits().max_texture_dimension_2d)
            .max(2);
        let terrain_size = (field.width(), field.height());
        let decimation = (0..31)
            .find(|&k| level_side(terrain_size.0, k).max(level_side(terrain_size.1, k)) <= max_side)
            .unwrap_or(31);
        let decimated = (decimation > 0).then(|| field.decimated(decimation));
        let field = decimated.as_ref().unwrap_or(field);
        let (width, height) = (field.width(), field.height());
        let world_heights = normals::world_heights(field);
        let heights = upload_texture(
            ctx,
            "heights",
            (width, height),
            wgpu::TextureFormat::R32Float,
            bytemuck::cast_slice(&world_heights),
        );
        let normal_map = normals::normal_map(field, &world_heights);
        let normals = upload_texture(
            ctx,
            "normals",
            (width, height),
            wgpu::TextureFormat::Rgba8Snorm,
            bytemuck::cast_slice(&normal_map),
        );
        drop((world_heights, normal_map));
        let colour = match colour_texture {
            Some(image) => {
                if image.width() > max_side || image.height() > max_side {
                    return Err(RenderError::TooLarge {
                        what: "colour texture".into(),
                        width: image.width(),
                        height: image.height(),
                        max_side,
                    });
                }
                upload_texture(
                    ctx,
                    "colour",
                    image.dimensions(),
                    wgpu::TextureFormat::Rgba8UnormSrgb,
                    image.as_raw(),
                )
            }
            None => upload_texture(
                ctx,
                "colour (none)",
                (1, 1),
                wgpu::TextureFormat::Rgba8UnormSrgb,
                &[255; 4],
            ),
        };
        let sampler = device.create_sampler(&wgpu::SamplerDescriptor {
            label: Some("linear clamp"),
            mag_filter: wgpu::FilterMode::Linear,
            min_filter: wgpu::FilterMode::Linear,
            ..Default::default()
        });
        let uniforms = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("frame uniforms"),
            size: std::mem::size_of::<FrameUniforms>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        let indices = GrowingBuffer::new(device, "indices", storage | wgpu::BufferUsages::INDEX);
        let instances = GrowingBuffer::new(device, "patch instances", storage);
        let morphs = GrowingBuffer::new(device, "morphs", storage);
        let slots = GpuSlots::new(device);
        let lines = GrowingBuffer::new(
            device,
            "debug lines",
            wgpu::BufferUsages::VERTEX | wgpu::BufferUsages::COPY_DST,
        );
        let layout = bind_group_layout(device);
        let pipelines = Pipelines::new(device, &layout, target_format);
        ctx.wait_idle()?;
        let (w, d) = field.world_size();
        let (lo, hi) = field.world_range();
        let bind_group = create_bind_group(
            device,
            &layout,
            [
                &uniforms,
                indices.buffer(),
                instances.buffer(),
                morphs.buffer(),
                slots.buffer(),
            ],
            [&heights, &normals, &colour],
            &sampler,
        );
        let created = BUFFERS_AT_START;
        Ok(TerrainRenderer {
            pipelines,
            layout,
            bind_group,
            uniforms,
            heights,
            normals,
            colour,
            has_colour_texture: colour_texture.is_some(),
            sampler,
            indices,
            instances,
            morphs,
            slots,
            from_slots: false,
            lines,
            line_vertices: 0,
            uploaded_patch_indices: Vec::new(),
            patch_ranges: Vec::new(),
            patches_resident: false,
            scratch_patches: Vec::new(),
            scratch_counts: Vec::new(),
            patch_draws: Vec::new(),
            morph_list: MorphList::default(),
            scratch_listed: Vec::new(),
            listed: false,
            draw: DrawList::Nothing,
            pulled: false,
            data_size: (width, height),
            decimation,
            terrain_size,
            max_side,
            cell_size: field.mapping().cell_size,
            world_range: (lo, hi),
            world_diagonal: Vec3::new(w, hi - lo, d).length(),
            stats: UploadStats {
                buffers_created: created,
                ..UploadStats::default()
            },
        })
    }

    /// Uploads what `selection` draws and the frame's uniforms and debug lines. Static
    /// data is not touched; buffers are reused and only grow.
    ///
    /// Over decimated textures ([`TerrainRenderer::draws_grid_selections`] false) a
    /// selection that reads its heights from the grid (grid-indexed triangles, patches
    /// without a pool or whose pool does not fit one storage binding) is refused
    /// ([`RenderError::NeedsCarriedHeights`]): nothing is uploaded, and a `draw` draws no
    /// terrain and no lines (the sky with the last frame's uniforms).
    pub fn prepare(
        &mut self,
        ctx: &GpuContext,
        selection: &Selection<'_>,
        settings: &FrameSettings,
        lines: &DebugLines,
    ) -> Result<(), RenderError> {
        let carries_heights = match selection {
            Selection::Listed { .. } => true,
            Selection::Patches {
                pool: Some(pool),
                morph: None,
                ..
            } => GpuSlots::fits(&ctx.device, pool),
            Selection::Patches { .. } | Selection::Triangles { .. } => false,
        };
        if !(carries_heights || self.draws_grid_selections()) {
            self.draw = DrawList::Nothing;
            self.line_vertices = 0;
            return Err(RenderError::NeedsCarriedHeights {
                width: self.terrain_size.0,
                height: self.terrain_size.1,
                max_side: self.max_side,
            });
        }
        let queue = &ctx.queue;
        let device = &ctx.device;
        let mut bytes = 0u64;
        let mut rebind = false;
        let mut patch_morph = None;
        let mut slot_upload = crate::slots::SlotUpload::default();
        self.from_slots = false;
        self.listed = false;
        let (grid, patch_side, morph_count) = match *selection {
            Selection::Triangles {
                vertices,
                indices,
                morphs,
            } => {
                self.patches_resident = false;
                rebind |= self
                    .indices
                    .write(device, queue, bytemuck::cast_slice(indices));
                bytes += std::mem::size_of_val(indices) as u64;
                let sorted = self.morph_list.sort(morphs);
                if !sorted.is_empty() {
                    rebind |= self
                        .morphs
                        .write(device, queue, bytemuck::cast_slice(sorted));
                    bytes += std::mem::size_of_val(sorted) as u64;
                }
                let morph_count = sorted.len();
                self.draw = DrawList::Triangles {
                    index_count: indices.len() as u32,
                };
                (
                    (vertices.stride, vertices.rows, vertices.shift),
                    0,
                    morph_count,
                )
            }
            Selection::Listed {
                vertices,
                indices,
                shift,
            } => {
                self.patches_resident = false;
                self.listed = true;
                rebind |= self
                    .indices
                    .write(device, queue, bytemuck::cast_slice(indices));
                bytes += std::mem::size_of_val(indices) as u64;
                self.scratch_listed.clear();
                self.scratch_listed.extend(
                    vertices
                        .iter()
                        .map(|v| [v.pos.col, v.pos.row, v.height.to_bits()]),
                );
                if !self.scratch_listed.is_empty() {
                    rebind |= self.morphs.write(
                        device,
                        queue,
                        bytemuck::cast_slice(&self.scratch_listed),
                    );
                    bytes += std::mem::size_of_val(self.scratch_listed.as_slice()) as u64;
                }
                self.draw = DrawList::Triangles {
                    index_count: indices.len() as u32,
                };
                // Positions on the grid subdivided `2^shift` times, of the textures'
                // (decimated) cells.
                ((0, 0, shift + self.decimation), 0, 0)
            }
            Selection::Patches {
                vertices,
                patch_side,
                index_buffers,
                instances,
                morph,
                pool,
            } => {
                patch_morph = morph;
                if let Some(pool) = pool
                    && let Some(upload) = self.slots.sync(device, queue, pool)
                {
                    slot_upload = upload;
                    bytes += upload.bytes;
                    rebind |= upload.rebind;
                    self.from_slots = true;
                }
                let (uploaded, rebound) = self.upload_patch_indices(ctx, index_buffers);
                bytes += uploaded;
                rebind |= rebound;
                self.sort_instances(index_buffers.len(), instances);
                if !self.scratch_patches.is_empty() {
                    rebind |= self.instances.write(
                        device,
                        queue,
                        bytemuck::cast_slice(&self.scratch_patches),
                    );
                    bytes += std::mem::size_of_val(self.scratch_patches.as_slice()) as u64;
                }
                self.draw = DrawList::Patches;
                (
                    (vertices.stride, vertices.rows, vertices.shift),
                    patch_side,
                    0,
                )
            }
        };
        self.line_vertices = lines.vertices().len() as u32;
        if !lines.vertices().is_empty() {
            // The line buffer is bound directly, never in the bind group.
            self.lines
                .write(device, queue, bytemuck::cast_slice(lines.vertices()));
            bytes += std::mem::size_of_val(lines.vertices()) as u64;
        }
        if rebind {
            self.bind_group = create_bind_group(
                device,
                &self.layout,
                [
                    &self.uniforms,
                    self.indices.buffer(),
                    self.instances.buffer(),
                    self.morphs.buffer(),
                    self.slots.buffer(),
                ],
                [&self.heights, &self.normals, &self.colour],
                &self.sampler,
            );
        }
        self.pulled = settings.wireframe || settings.color_by_lod;
        let uniforms = self.uniforms(
            settings,
            grid,
            patch_side,
            morph_count as u32,
            patch_morph.as_ref(),
        );
        queue.write_buffer(&self.uniforms, 0, bytemuck::bytes_of(&uniforms));
        bytes += std::mem::size_of::<FrameUniforms>() as u64;
        self.stats = UploadStats {
            bytes_last_frame: bytes,
            buffers_created: BUFFERS_AT_START
                + self.indices.created()
                + self.instances.created()
                + self.morphs.created()
                + self.lines.created()
                + self.slots.created(),
            slots_last_frame: slot_upload.slots,
            slot_bytes_last_frame: slot_upload.bytes,
        };
        Ok(())
    }

    /// Whether selections that read heights from the terrain's grid (grid-indexed
    /// triangles, patches not drawn from a pool) can be drawn: false when the terrain is
    /// larger than the GPU's largest texture and its textures are decimated.
    pub fn draws_grid_selections(&self) -> bool {
        self.decimation == 0
    }

    /// Uploads the shared patch index buffers when they differ from what is resident
    /// (once, for algorithms whose buffers are static). Returns bytes written and whether
    /// the buffer was replaced.
    fn upload_patch_indices(
        &mut self,
        ctx: &GpuContext,
        index_buffers: &[Vec<u32>],
    ) -> (u64, bool) {
        let same = self.patches_resident
            && self.patch_ranges.len() == index_buffers.len()
            && self
                .patch_ranges
                .iter()
                .zip(index_buffers)
                .all(|(range, b)| {
                    &self.uploaded_patch_indices[range.start as usize..range.end as usize]
                        == b.as_slice()
                });
        if same {
            return (0, false);
        }
        self.uploaded_patch_indices.clear();
        self.patch_ranges.clear();
        for buffer in index_buffers {
            let start = self.uploaded_patch_indices.len() as u32;
            // Whole triangles only, so a pulled vertex's corner is its index modulo 3.
            let whole = buffer.len() - buffer.len() % 3;
            self.uploaded_patch_indices
                .extend_from_slice(&buffer[..whole]);
            self.patch_ranges
                .push(start..self.uploaded_patch_indices.len() as u32);
        }
        self.patches_resident = true;
        let rebound = self.indices.write(
            &ctx.device,
            &ctx.queue,
            bytemuck::cast_slice(&self.uploaded_patch_indices),
        );
        ((self.uploaded_patch_indices.len() * 4) as u64, rebound)
    }

    /// Orders the instances by index buffer (a counting sort) into `scratch_patches` and
    /// lists one draw per buffer in use in `patch_draws`; every vector is reused.
    fn sort_instances(&mut self, buffer_count: usize, instances: &[PatchInstance]) {
        let counts = &mut self.scratch_counts;
        counts.clear();
        counts.resize(buffer_count + 1, 0);
        for p in instances {
            if (p.index_buffer as usize) < buffer_count {
                counts[p.index_buffer as usize + 1] += 1;
            }
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        self.patch_draws.clear();
        self.patch_draws.extend(
            (0..buffer_count)
                .filter(|&b| counts[b + 1] > counts[b] && !self.patch_ranges[b].is_empty())
                .map(|b| (self.patch_ranges[b].clone(), counts[b]..counts[b + 1])),
        );
        self.scratch_patches.clear();
        self.scratch_patches
            .resize(counts[buffer_count] as usize, GpuPatch::zeroed());
        // `counts[b]` becomes the next free slot of buffer `b`.
        for p in instances {
            let b = p.index_buffer as usize;
            if b < buffer_count {
                self.scratch_patches[counts[b] as usize] = GpuPatch {
                    origin_col: p.origin.col,
                    origin_row: p.origin.row,
                    step: p.step.max(1),
                    frustum: match p.frustum {
                        Containment::Inside => 0,
                        Containment::Intersecting => 1,
                        Containment::Outside => 2,
                    },
                    slot: p.slot,
                    level: p.level,
                };
                counts[b] += 1;
            }
        }
    }

    fn uniforms(
        &self,
        settings: &FrameSettings,
        grid: (u32, u32, u32),
        patch_side: u32,
        morph_count: u32,
        patch_morph: Option<&PatchMorph>,
    ) -> FrameUniforms {
        let camera = &settings.camera;
        let clip_from_local = clip_from_local(camera);
        let (lo, hi) = self.world_range;
        let fog = settings
            .fog_density
            .unwrap_or(0.3 / self.world_diagonal.max(1.0));
        let mut flags = 0;
        if settings.wireframe {
            flags |= WIREFRAME;
        }
        if settings.color_by_lod {
            flags |= LOD_COLOURS;
        }
        if settings.color_by_frustum {
            flags |= FRUSTUM_SHADES;
        }
        if self.has_colour_texture {
            flags |= COLOUR_TEXTURE;
        }
        if self.listed {
            flags |= LISTED;
        }
        if self.from_slots {
            flags |= POOL_SLOTS;
            if settings.shade_from_pool {
                flags |= POOL_SHADING;
            }
        }
        FrameUniforms {
            clip_from_local: clip_from_local.to_cols_array_2d(),
            local_from_clip: clip_from_local.inverse().to_cols_array_2d(),
            eye: camera.eye.extend(self.cell_size).to_array(),
            sun: settings
                .sun_direction
                .normalize_or(Vec3::Y)
                .extend(0.35)
                .to_array(),
            sky_zenith: [0.22, 0.42, 0.78, 1.0],
            sky_horizon: [0.72, 0.80, 0.90, fog.max(0.0)],
            height_range: [lo, hi, 1.0 / (hi - lo).max(1e-6), 0.0],
            grid: [grid.0, grid.1, self.data_size.0, self.data_size.1],
            mode: [
                flags,
                patch_side,
                morph_count,
                patch_morph.map_or(0, |m| m.coarsest + 1),
            ],
            patch_morph: patch_morph
                .map_or([0.0; 4], |m| m.eye.extend(m.level_distance).to_array()),
            patch_morph_range: patch_morph.map_or([0.0; 4], |m| {
                [
                    m.height_range.0,
                    m.height_range.1,
                    m.morph_start,
                    m.inv_range,
                ]
            }),
            slots: [
                self.slots.total_vertices(),
                self.slots.vertices_per_slot(),
                grid.2,
                0,
            ],
            // The data's extent in texture cells (less than their size − 1 where the last
            // decimation step passes the border).
            extent: [
                (self.terrain_size.0 - 1) as f32 / (1u64 << self.decimation) as f32,
                (self.terrain_size.1 - 1) as f32 / (1u64 << self.decimation) as f32,
                0.0,
                0.0,
            ],
        }
    }

    /// Records the frame's draws into `pass` (which must target this renderer's colour
    /// format and [`DEPTH_FORMAT`], depth cleared to 0): terrain, the sky where nothing was
    /// drawn, then debug lines over both.
    pub fn draw(&self, pass: &mut wgpu::RenderPass<'_>) {
        let pulled = self.pulled;
        pass.set_bind_group(0, &self.bind_group, &[]);
        match &self.draw {
            DrawList::Nothing => {}
            DrawList::Triangles { index_count } => {
                if pulled {
                    pass.set_pipeline(&self.pipelines.triangles_pulled);
                    pass.draw(0..*index_count, 0..1);
                } else if *index_count > 0 {
                    pass.set_pipeline(&self.pipelines.triangles_indexed);
                    pass.set_index_buffer(
                        self.indices.buffer().slice(..),
                        wgpu::IndexFormat::Uint32,
                    );
                    pass.draw_indexed(0..*index_count, 0, 0..1);
                }
            }
            DrawList::Patches => {
                let draws = &self.patch_draws;
                if pulled {
                    pass.set_pipeline(&self.pipelines.patches_pulled);
                    for (indices, instances) in draws {
                        pass.draw(indices.clone(), instances.clone());
                    }
                } else {
                    pass.set_pipeline(&self.pipelines.patches_indexed);
                    pass.set_index_buffer(
                        self.indices.buffer().slice(..),
                        wgpu::IndexFormat::Uint32,
                    );
                    for (indices, instances) in draws {
                        pass.draw_indexed(indices.clone(), 0, instances.clone());
                    }
                }
            }
        }
        pass.set_pipeline(&self.pipelines.sky);
        pass.draw(0..3, 0..1);
        if self.line_vertices > 0 {
            pass.set_pipeline(&self.pipelines.lines);
            pass.set_vertex_buffer(0, self.lines.buffer().slice(..));
            pass.draw(0..self.line_vertices, 0..1);
        }
    }

    /// Begins a pass over `colour` and `depth` with the clears this renderer expects.
    pub fn begin_pass<'e>(
        encoder: &'e mut wgpu::CommandEncoder,
        colour: &wgpu::TextureView,
        depth: &wgpu::TextureView,
    ) -> wgpu::RenderPass<'e> {
        Self::begin_timed_pass(encoder, colour, depth, None)
    }

    /// [`TerrainRenderer::begin_pass`] with GPU timestamps written at its start and end.
    pub fn begin_timed_pass<'e>(
        encoder: &'e mut wgpu::CommandEncoder,
        colour: &wgpu::TextureView,
        depth: &wgpu::TextureView,
        timestamp_writes: Option<wgpu::RenderPassTimestampWrites<'_>>,
    ) -> wgpu::RenderPass<'e> {
        encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("terrain"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: colour,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                    store: wgpu::StoreOp::Store,
                },
            })],
            depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                view: depth,
                depth_ops: Some(wgpu::Operations {
                    load: wgpu::LoadOp::Clear(0.0),
                    store: wgpu::StoreOp::Discard,
                }),
                stencil_ops: None,
            }),
            timestamp_writes,
            occlusion_query_set: None,
            multiview_mask: None,
        })
    }

    pub fn upload_stats(&self) -> UploadStats {
        self.stats
    }

    /// The selection kind the last `prepare` set up, for statistics.
    pub fn drawn_triangles(&self) -> u64 {
        match &self.draw {
            DrawList::Nothing => 0,
            DrawList::Triangles { index_count } => u64::from(*index_count / 3),
            DrawList::Patches => self
                .patch_draws
                .iter()
                .map(|(i, n)| u64::from(i.len() as u32 / 3) * u64::from(n.len() as u32))
                .sum(),
        }
    }
}

/// Clip from eye-relative world coordinates, reversed-Z with an infinite far plane.
pub fn clip_from_local(camera: &Camera) -> Mat4 {
    let view = glam::camera::rh::view::look_to_mat4(Vec3::ZERO, camera.forward(), camera.up());
    let projection = glam::camera::rh::proj::directx::perspective_infinite_reverse(
        camera.fov_y,
        camera.aspect(),
        camera.near,
    );
    projection * view
}

fn upload_texture(
    ctx: &GpuContext,
    label: &str,
    (width, height): (u32, u32),
    format: wgpu::TextureFormat,
    data: &[u8],
) -> wgpu::TextureView {
    let texture = ctx.device.create_texture_with_data(
        &ctx.queue,
        &wgpu::TextureDescriptor {
            label: Some(label),
            size: wgpu::Extent3d {
                width,
                height,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format,
            usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        },
        wgpu::util::TextureDataOrder::LayerMajor,
        data,
    );
    texture.create_view(&wgpu::TextureViewDescriptor::default())
}

fn bind_group_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    let vertex_fragment = wgpu::ShaderStages::VERTEX | wgpu::ShaderStages::FRAGMENT;
    let texture = |binding, filterable, visibility| wgpu::BindGroupLayoutEntry {
        binding,
        visibility,
        ty: wgpu::BindingType::Texture {
            sample_type: wgpu::TextureSampleType::Float { filterable },
            view_dimension: wgpu::TextureViewDimension::D2,
            multisampled: false,
        },
        count: None,
    };
    let storage = |binding| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::VERTEX,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only: true },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("terrain"),
        entries: &[
            wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: vertex_fragment,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            },
            texture(1, false, wgpu::ShaderStages::VERTEX),
            texture(2, true, wgpu::ShaderStages::FRAGMENT),
            texture(3, true, wgpu::ShaderStages::FRAGMENT),
            wgpu::BindGroupLayoutEntry {
                binding: 4,
                visibility: wgpu::ShaderStages::FRAGMENT,
                ty: wgpu::BindingType::Sampler(wgpu::SamplerBindingType::Filtering),
                count: None,
            },
            storage(5),
            storage(6),
            storage(7),
            storage(8),
        ],
    })
}

fn create_bind_group(
    device: &wgpu::Device,
    layout: &wgpu::BindGroupLayout,
    [uniforms, indices, instances, morphs, slots]: [&wgpu::Buffer; 5],
    [heights, normals, colour]: [&wgpu::TextureView; 3],
    sampler: &wgpu::Sampler,
) -> wgpu::BindGroup {
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("terrain"),
        layout,
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: uniforms.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: wgpu::BindingResource::TextureView(heights),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: wgpu::BindingResource::TextureView(normals),
            },
            wgpu::BindGroupEntry {
                binding: 3,
                resource: wgpu::BindingResource::TextureView(colour),
            },
            wgpu::BindGroupEntry {
                binding: 4,
                resource: wgpu::BindingResource::Sampler(sampler),
            },
            wgpu::BindGroupEntry {
                binding: 5,
                resource: indices.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 6,
                resource: instances.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 7,
                resource: morphs.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 8,
                resource: slots.as_entire_binding(),
            },
        ],
    })
}

/// The WGSL source of every pipeline (public so tests validate it with naga).
pub const SHADER_SOURCE: &str = include_str!("shaders/terrain.wgsl");

impl Pipelines {
    fn new(
        device: &wgpu::Device,
        layout: &wgpu::BindGroupLayout,
        target_format: wgpu::TextureFormat,
    ) -> Pipelines {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("terrain.wgsl"),
            source: wgpu::ShaderSource::Wgsl(SHADER_SOURCE.into()),
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("terrain"),
            bind_group_layouts: &[Some(layout)],
            immediate_size: 0,
        });
        let target = [Some(wgpu::ColorTargetState {
            format: target_format,
            blend: None,
            write_mask: wgpu::ColorWrites::ALL,
        })];
        let depth = |write: bool, compare| {
            Some(wgpu::DepthStencilState {
                format: DEPTH_FORMAT,
                depth_write_enabled: Some(write),
                depth_compare: Some(compare),
                stencil: wgpu::StencilState::default(),
                bias: wgpu::DepthBiasState::default(),
            })
        };
        let make = |label: &str,
                    vertex_entry: &str,
                    fragment_entry: &str,
                    buffers: &[Option<wgpu::VertexBufferLayout<'_>>],
                    topology,
                    cull_mode,
                    depth_stencil| {
            device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
                label: Some(label),
                layout: Some(&pipeline_layout),
                vertex: wgpu::VertexState {
                    module: &module,
                    entry_point: Some(vertex_entry),
                    compilation_options: Default::default(),
                    buffers,
                },
                primitive: wgpu::PrimitiveState {
                    topology,
                    // No culling: a camera below the surface (or a seam of either winding)
                    // still sees what is there.
                    front_face: wgpu::FrontFace::Ccw,
                    cull_mode,
                    ..Default::default()
                },
                depth_stencil,
                multisample: wgpu::MultisampleState::default(),
                fragment: Some(wgpu::FragmentState {
                    module: &module,
                    entry_point: Some(fragment_entry),
                    compilation_options: Default::default(),
                    targets: &target,
                }),
                multiview_mask: None,
                cache: None,
            })
        };
        let triangles = wgpu::PrimitiveTopology::TriangleList;
        let terrain = |label, entry| {
            make(
                label,
                entry,
                "fs_terrain",
                &[],
                triangles,
                None,
                depth(true, wgpu::CompareFunction::Greater),
            )
        };
        let line_layout = wgpu::VertexBufferLayout {
            array_stride: std::mem::size_of::<LineVertex>() as u64,
            step_mode: wgpu::VertexStepMode::Vertex,
            attributes: &wgpu::vertex_attr_array![0 => Float32x3, 1 => Unorm8x4],
        };
        Pipelines {
            triangles_indexed: terrain("triangles (indexed)", "vs_triangles_indexed"),
            triangles_pulled: terrain("triangles (pulled)", "vs_triangles_pulled"),
            patches_indexed: terrain("patches (indexed)", "vs_patches_indexed"),
            patches_pulled: terrain("patches (pulled)", "vs_patches_pulled"),
            sky: make(
                "sky",
                "vs_sky",
                "fs_sky",
                &[],
                triangles,
                None,
                depth(false, wgpu::CompareFunction::GreaterEqual),
            ),
            lines: make(
                "debug lines",
                "vs_lines",
                "fs_lines",
                &[Some(line_layout)],
                wgpu::PrimitiveTopology::LineList,
                None,
                // Debug lines show through the terrain: a box or frustum edge below the
                // surface is still what one wants to see.
                depth(false, wgpu::CompareFunction::Always),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Depth of a point `distance` ahead of the eye.
    fn depth(camera: &Camera, distance: f32) -> f32 {
        let clip = clip_from_local(camera) * (camera.forward() * distance).extend(1.0);
        clip.z / clip.w
    }

    #[test]
    fn reversed_z_keeps_depth_order_from_one_metre_to_a_hundred_kilometres() {
        let camera = Camera::new(
            Vec3::new(0.0, 100.0, 0.0),
            Vec3::new(1000.0, 0.0, 300.0),
            60f32.to_radians(),
            (1920, 1080),
            1.0,
            1e6,
        )
        .unwrap();
        assert!(
            (depth(&camera, 1.0) - 1.0).abs() < 1e-5,
            "the near plane is at depth 1"
        );
        // Points 1 mm apart at 1 m and 10 cm apart at 100 km stay in order.
        assert!(depth(&camera, 1.0) > depth(&camera, 1.001));
        assert!(depth(&camera, 100_000.0) > depth(&camera, 100_000.1));
        assert!(
            depth(&camera, 100_000.0) > 0.0,
            "nothing is beyond the far plane"
        );
    }
}
