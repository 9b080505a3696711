// Terrain, sky and debug lines of terralod.
//
// The terrain has no vertex buffer: a vertex is a grid index (`row * stride + col`) and the
// vertex shader reads its height from the height texture, so the static data is the height
// and normal textures, uploaded once, and a frame uploads only indices (or patch
// instances). Positions are relative to the eye (`local = world - eye`) so that f32 keeps
// centimetres 100 km from the origin; depth is reversed-Z with an infinite far plane.
//
// Two vertex paths per selection kind: *indexed* (the index buffer drives the vertex cache;
// the fast path) and *pulled* (a non-indexed draw that reads the index from a storage
// buffer, so every corner knows its barycentric coordinate and its triangle: the wireframe
// and the LOD colours need that and work on every backend without polygon-mode features).
//
// A listed selection (flag 64; algorithm A over a tree too large for a grid index or a
// height texture) carries its vertices: the indices point into a list of (column, row,
// drawn height) that the frame uploads with them.
//
// Algorithm P's patches are drawn from its pool's slots instead (flag 16): a patch vertex is
// vertex `slot * vertices per slot + local index` of the slot buffer, with the pool's
// position, normal and colour (flag 32: shaded with them).

struct Frame {
    clip_from_local: mat4x4<f32>,
    local_from_clip: mat4x4<f32>,
    // xyz: eye in world units; w: cell size.
    eye: vec4<f32>,
    // xyz: unit direction towards the sun; w: ambient strength.
    sun: vec4<f32>,
    sky_zenith: vec4<f32>,
    // rgb: horizon colour; w: fog density per world unit (0: no fog).
    sky_horizon: vec4<f32>,
    // x, y: lowest and highest world height; z: 1 / (max - min).
    height_range: vec4<f32>,
    // stride and rows of the grid vertex buffer, width and height of the data.
    grid: vec4<u32>,
    // x: flags (1 wireframe, 2 LOD colours, 4 colour texture, 8 frustum shades); y: cells
    // per patch side; z: number of morphed vertices; w: patch morph's coarsest level + 1
    // (0: no morph).
    mode: vec4<u32>,
    // Patch morph (the core's `PatchMorph`): xyz the eye the levels were chosen for,
    // w the distance per level.
    patch_morph: vec4<f32>,
    // x, y: the terrain's height range; z: where a level's morph starts past it;
    // w: 1 / morph range.
    patch_morph_range: vec4<f32>,
    // x: vertices of all pool slots (n); y: vertices per slot; z: the grid's subdivision
    // shift k (local detail: grid position / 2^k is the sample, the cell 1 / 2^k of it).
    slots: vec4<u32>,
    // xy: the data's extent in cells of the textures (their size − 1, less where the
    // textures are a decimated terrain's whose last step passes its border).
    extent: vec4<f32>,
}

struct PatchInstance {
    origin_col: u32,
    origin_row: u32,
    step: u32,
    // Relative to the LOD's frustum: 0 inside, 1 crossing its boundary, 2 outside.
    frustum: u32,
    // Its pool slot (with POOL_SLOTS).
    slot: u32,
    // The level shown in LOD colours.
    level: u32,
}

const WIREFRAME: u32 = 1u;
const LOD_COLOURS: u32 = 2u;
const COLOUR_TEXTURE: u32 = 4u;
const FRUSTUM_SHADES: u32 = 8u;
const POOL_SLOTS: u32 = 16u;
const POOL_SHADING: u32 = 32u;
const LISTED: u32 = 64u;

@group(0) @binding(0) var<uniform> frame: Frame;
@group(0) @binding(1) var heights: texture_2d<f32>;
@group(0) @binding(2) var normals: texture_2d<f32>;
@group(0) @binding(3) var colour_map: texture_2d<f32>;
@group(0) @binding(4) var linear_clamp: sampler;
// Explicit triangles: grid indices. Patches: the shared patch index buffers, back to back.
@group(0) @binding(5) var<storage, read> indices: array<u32>;
@group(0) @binding(6) var<storage, read> instances: array<PatchInstance>;
// Morphed vertices sorted by grid index: (vertex, bits of the drawn height). With LISTED:
// the listed vertices instead, three words each (column, row, bits of the drawn height),
// and the indices index them.
@group(0) @binding(7) var<storage, read> morphs: array<u32>;
// The pool's slots, as words: n × 3 f32 positions, n packed normals, n RGBA8 colours.
@group(0) @binding(8) var<storage, read> slot_data: array<u32>;

struct TerrainOut {
    @builtin(position) clip: vec4<f32>,
    @location(0) local: vec3<f32>,
    @location(1) barycentric: vec3<f32>,
    // log2 of the cells a triangle (or patch cell) spans: 0 at full resolution.
    @location(2) @interpolate(flat) level: f32,
    // A patch's place relative to the LOD's frustum (0 inside, 1 crossing, 2 outside).
    @location(3) @interpolate(flat) frustum: u32,
    // With POOL_SHADING: the pool's normal and colour.
    @location(4) normal: vec3<f32>,
    @location(5) albedo: vec3<f32>,
}

fn sample_height(col: u32, row: u32) -> f32 {
    let c = min(col, frame.grid.z - 1u);
    let r = min(row, frame.grid.w - 1u);
    return textureLoad(heights, vec2<i32>(i32(c), i32(r)), 0).r;
}

// The drawn height of grid vertex `index`: its morphed height when the selection morphs
// it (binary search in the sorted morph list), else its sample's.
fn drawn_height(index: u32, col: u32, row: u32) -> f32 {
    var lo = 0u;
    var hi = frame.mode.z;
    while lo < hi {
        let mid = (lo + hi) / 2u;
        let vertex = morphs[2u * mid];
        if vertex == index {
            return bitcast<f32>(morphs[2u * mid + 1u]);
        }
        if vertex < index {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return sample_height(col, row);
}

fn terrain_vertex(col: u32, row: u32, height: f32, barycentric: vec3<f32>, level: f32) -> TerrainOut {
    let cell = frame.eye.w;
    return world_vertex(vec3<f32>(f32(col) * cell, height, f32(row) * cell), barycentric, level);
}

fn world_vertex(world: vec3<f32>, barycentric: vec3<f32>, level: f32) -> TerrainOut {
    let local = world - frame.eye.xyz;
    var out: TerrainOut;
    out.clip = frame.clip_from_local * vec4<f32>(local, 1.0);
    out.local = local;
    out.barycentric = barycentric;
    out.level = level;
    out.frustum = 0u;
    out.normal = vec3<f32>(0.0, 1.0, 0.0);
    out.albedo = vec3<f32>(0.0);
    return out;
}

// Vertex `v` of the pool's slot buffer.
fn slot_vertex(v: u32, barycentric: vec3<f32>, level: f32) -> TerrainOut {
    let world = vec3<f32>(
        bitcast<f32>(slot_data[3u * v]),
        bitcast<f32>(slot_data[3u * v + 1u]),
        bitcast<f32>(slot_data[3u * v + 2u]),
    );
    var out = world_vertex(world, barycentric, level);
    out.normal = unpack4x8snorm(slot_data[3u * frame.slots.x + v]).xyz;
    out.albedo = unpack4x8unorm(slot_data[4u * frame.slots.x + v]).rgb;
    return out;
}

// The grid position of vertex `index` of a triangle selection.
fn grid_position(index: u32) -> vec2<u32> {
    if (frame.mode.x & LISTED) != 0u {
        return vec2<u32>(morphs[3u * index], morphs[3u * index + 1u]);
    }
    let stride = frame.grid.x;
    return vec2<u32>(index % stride, index / stride);
}

fn grid_vertex(index: u32, barycentric: vec3<f32>, level: f32) -> TerrainOut {
    let pos = grid_position(index);
    // With local detail the grid is finer than the height texture: a position off the
    // samples is always morphed (its height is in the list).
    let shift = frame.slots.z;
    var height: f32;
    if (frame.mode.x & LISTED) != 0u {
        height = bitcast<f32>(morphs[3u * index + 2u]);
    } else {
        height = drawn_height(index, pos.x >> shift, pos.y >> shift);
    }
    let cell = frame.eye.w / f32(1u << shift);
    return world_vertex(vec3<f32>(f32(pos.x) * cell, height, f32(pos.y) * cell), barycentric, level);
}

fn corner_barycentric(vertex: u32) -> vec3<f32> {
    let corner = vertex % 3u;
    return vec3<f32>(f32(corner == 0u), f32(corner == 1u), f32(corner == 2u));
}

// Largest extent, in cells, of a triangle given by three vertex indices, as a level.
fn triangle_level(a: u32, b: u32, c: u32) -> f32 {
    let pa = vec2<i32>(grid_position(a));
    let pb = vec2<i32>(grid_position(b));
    let pc = vec2<i32>(grid_position(c));
    let cols = vec3<i32>(pa.x, pb.x, pc.x);
    let rows = vec3<i32>(pa.y, pb.y, pc.y);
    let span = max(
        max(max(cols.x, cols.y), cols.z) - min(min(cols.x, cols.y), cols.z),
        max(max(rows.x, rows.y), rows.z) - min(min(rows.x, rows.y), rows.z),
    );
    return log2(f32(max(span, 1)));
}

@vertex
fn vs_triangles_indexed(@builtin(vertex_index) index: u32) -> TerrainOut {
    return grid_vertex(index, vec3<f32>(1.0), 0.0);
}

@vertex
fn vs_triangles_pulled(@builtin(vertex_index) vertex: u32) -> TerrainOut {
    let first = vertex - vertex % 3u;
    let level = triangle_level(indices[first], indices[first + 1u], indices[first + 2u]);
    return grid_vertex(indices[vertex], corner_barycentric(vertex), level);
}

fn patch_vertex(local_index: u32, instance: u32, barycentric: vec3<f32>) -> TerrainOut {
    let tile = instances[instance];
    if (frame.mode.x & POOL_SLOTS) != 0u {
        let level = log2(f32(max(tile.step, 1u)));
        var out = slot_vertex(tile.slot * frame.slots.y + local_index, barycentric, level);
        out.frustum = tile.frustum;
        return out;
    }
    let side = frame.mode.y + 1u;
    let col = tile.origin_col + tile.step * (local_index % side);
    let row = tile.origin_row + tile.step * (local_index / side);
    let level = f32(tile.level);
    var height = sample_height(col, row);
    if frame.mode.w > 0u {
        height = morphed_patch_height(col, row, height);
    }
    var out = terrain_vertex(col, row, height, barycentric, level);
    out.frustum = tile.frustum;
    return out;
}

// The vertical morph of a patch selection's vertex: `PatchMorph::height` in the core, the
// same f32 operations in the same order (so the exported mesh is what is drawn; a GPU
// may still fuse a multiply-add, a last-bit difference).
fn morphed_patch_height(col: u32, row: u32, own: f32) -> f32 {
    let coarsest = frame.mode.w - 1u;
    let level = min(countTrailingZeros(col), countTrailingZeros(row));
    if level >= coarsest {
        return own;
    }
    let s = 1u << level;
    let odd_col = ((col >> level) & 1u) == 1u;
    let odd_row = ((row >> level) & 1u) == 1u;
    var a = vec2<u32>(col - s, row);
    var b = vec2<u32>(col + s, row);
    if !odd_col && odd_row {
        a = vec2<u32>(col, row - s);
        b = vec2<u32>(col, row + s);
    } else if odd_col && odd_row {
        // The cell's diagonal towards the patch centre.
        let mask = (1u << coarsest) - 1u;
        let half = 1u << (coarsest - 1u);
        let west = (col & mask) < half;
        let north = (row & mask) < half;
        if west == north {
            a = vec2<u32>(col - s, row - s);
            b = vec2<u32>(col + s, row + s);
        } else {
            a = vec2<u32>(col + s, row - s);
            b = vec2<u32>(col - s, row + s);
        }
    }
    let cell = frame.eye.w;
    let x = f32(col) * cell;
    let z = f32(row) * cell;
    let eye = frame.patch_morph.xyz;
    let dx = abs(eye.x - x);
    let dz = abs(eye.z - z);
    let dy = max(max(frame.patch_morph_range.x - eye.y, eye.y - frame.patch_morph_range.y), 0.0);
    let d = max(max(dx, dz), dy);
    let start = f32(level) * frame.patch_morph.w + frame.patch_morph_range.z;
    let t = clamp((d - start) * frame.patch_morph_range.w, 0.0, 1.0);
    let coarse = 0.5 * (sample_height(a.x, a.y) + sample_height(b.x, b.y));
    return own + t * (coarse - own);
}

@vertex
fn vs_patches_indexed(
    @builtin(vertex_index) local_index: u32,
    @builtin(instance_index) instance: u32,
) -> TerrainOut {
    return patch_vertex(local_index, instance, vec3<f32>(1.0));
}

@vertex
fn vs_patches_pulled(
    @builtin(vertex_index) vertex: u32,
    @builtin(instance_index) instance: u32,
) -> TerrainOut {
    return patch_vertex(indices[vertex], instance, corner_barycentric(vertex));
}

fn sky_colour(direction: vec3<f32>) -> vec3<f32> {
    let up = clamp(direction.y, 0.0, 1.0);
    let t = 1.0 - (1.0 - up) * (1.0 - up) * (1.0 - up);
    var colour = mix(frame.sky_horizon.rgb, frame.sky_zenith.rgb, t);
    // A soft glow around the sun.
    let glow = pow(max(dot(direction, frame.sun.xyz), 0.0), 64.0);
    colour += vec3<f32>(1.0, 0.9, 0.7) * glow * 0.35;
    return colour;
}

// Albedo from height and slope: vegetation low, soil and rock higher, rock on steep
// slopes, snow on high gentle ground.
fn ramp(height: f32, normal: vec3<f32>) -> vec3<f32> {
    let t = clamp((height - frame.height_range.x) * frame.height_range.z, 0.0, 1.0);
    let low = vec3<f32>(0.20, 0.30, 0.12);
    let mid = vec3<f32>(0.42, 0.36, 0.24);
    let high = vec3<f32>(0.50, 0.47, 0.43);
    let snow = vec3<f32>(0.92, 0.93, 0.96);
    var albedo = mix(low, mid, smoothstep(0.0, 0.45, t));
    albedo = mix(albedo, high, smoothstep(0.45, 0.8, t));
    let steep = smoothstep(0.55, 0.8, 1.0 - normal.y);
    albedo = mix(albedo, vec3<f32>(0.38, 0.35, 0.32), steep);
    let snowy = smoothstep(0.82, 0.92, t) * (1.0 - smoothstep(0.25, 0.45, 1.0 - normal.y));
    return mix(albedo, snow, snowy);
}

fn lod_colour(level: f32) -> vec3<f32> {
    let palette = array<vec3<f32>, 8>(
        vec3<f32>(0.90, 0.20, 0.20),
        vec3<f32>(0.95, 0.55, 0.15),
        vec3<f32>(0.95, 0.85, 0.20),
        vec3<f32>(0.35, 0.80, 0.25),
        vec3<f32>(0.20, 0.75, 0.75),
        vec3<f32>(0.25, 0.45, 0.90),
        vec3<f32>(0.55, 0.30, 0.85),
        vec3<f32>(0.85, 0.35, 0.70),
    );
    return palette[u32(round(level)) % 8u];
}

@fragment
fn fs_terrain(in: TerrainOut) -> @location(0) vec4<f32> {
    let cell = frame.eye.w;
    let world = in.local + frame.eye.xyz;
    let grid = world.xz / cell;
    let size = vec2<f32>(f32(frame.grid.z), f32(frame.grid.w));
    // Ground past the data's last column or row is padding some algorithms draw (their
    // 2^k + 1 squares repeat the border samples): not the terrain, so not shown, as
    // `terralod mesh` leaves it out.
    if any(grid > frame.extent.xy + 1e-3) {
        discard;
    }
    // Normals per sample at full resolution: shading does not change when the mesh does.
    var normal = normalize(textureSample(normals, linear_clamp, (grid + 0.5) / size).xyz);
    let pool_shading = (frame.mode.x & POOL_SHADING) != 0u;
    if pool_shading {
        // Article 003: the patch's own per-vertex normals and colours.
        normal = normalize(in.normal);
    }
    var albedo: vec3<f32>;
    if (frame.mode.x & COLOUR_TEXTURE) != 0u {
        albedo = textureSample(colour_map, linear_clamp, grid / max(frame.extent.xy, vec2<f32>(1.0))).rgb;
    } else if pool_shading {
        albedo = in.albedo;
    } else {
        albedo = ramp(world.y, normal);
    }
    if (frame.mode.x & LOD_COLOURS) != 0u {
        albedo = mix(albedo, lod_colour(in.level), 0.75);
    }
    if (frame.mode.x & FRUSTUM_SHADES) != 0u {
        // Article 003's debug view: light grey patches in the frustum, dark grey outside;
        // here those crossing its boundary are orange.
        let shades = array<vec3<f32>, 3>(
            vec3<f32>(0.80, 0.80, 0.80),
            vec3<f32>(0.90, 0.55, 0.20),
            vec3<f32>(0.30, 0.30, 0.30),
        );
        albedo = shades[min(in.frustum, 2u)];
    }
    let sun = frame.sun.xyz;
    let diffuse = max(dot(normal, sun), 0.0);
    let sky_light = mix(vec3<f32>(0.35, 0.30, 0.25), frame.sky_zenith.rgb, normal.y * 0.5 + 0.5);
    var colour = albedo * (vec3<f32>(1.0, 0.96, 0.88) * diffuse + sky_light * frame.sun.w);

    if (frame.mode.x & WIREFRAME) != 0u {
        // Distance to the nearest edge in pixels, from the barycentric derivatives.
        let edge = in.barycentric / max(fwidth(in.barycentric), vec3<f32>(1e-6));
        let line = 1.0 - smoothstep(0.5, 1.5, min(min(edge.x, edge.y), edge.z));
        colour = mix(colour, vec3<f32>(0.02, 0.02, 0.03), line * 0.85);
    }

    let distance = length(in.local);
    let fog = 1.0 - exp(-distance * frame.sky_horizon.w);
    colour = mix(colour, sky_colour(in.local / max(distance, 1e-6)), fog);
    return vec4<f32>(colour, 1.0);
}

struct SkyOut {
    @builtin(position) clip: vec4<f32>,
    @location(0) ndc: vec2<f32>,
}

// One triangle covering the screen, at depth 0 (the infinitely far plane of reversed-Z).
@vertex
fn vs_sky(@builtin(vertex_index) vertex: u32) -> SkyOut {
    let uv = vec2<f32>(f32((vertex << 1u) & 2u), f32(vertex & 2u));
    let ndc = uv * 2.0 - 1.0;
    var out: SkyOut;
    out.clip = vec4<f32>(ndc, 0.0, 1.0);
    out.ndc = ndc;
    return out;
}

@fragment
fn fs_sky(in: SkyOut) -> @location(0) vec4<f32> {
    let point = frame.local_from_clip * vec4<f32>(in.ndc, 1.0, 1.0);
    let direction = normalize(point.xyz / point.w);
    return vec4<f32>(sky_colour(direction), 1.0);
}

struct LineOut {
    @builtin(position) clip: vec4<f32>,
    @location(0) colour: vec4<f32>,
}

// Debug lines (node boxes, the frozen LOD camera's frustum) in world coordinates.
@vertex
fn vs_lines(@location(0) world: vec3<f32>, @location(1) colour: vec4<f32>) -> LineOut {
    var out: LineOut;
    out.clip = frame.clip_from_local * vec4<f32>(world - frame.eye.xyz, 1.0);
    out.colour = colour;
    return out;
}

@fragment
fn fs_lines(in: LineOut) -> @location(0) vec4<f32> {
    return in.colour;
}
