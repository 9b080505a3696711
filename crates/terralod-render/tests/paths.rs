//! The renderer's vertex paths agree: patches and explicit triangles covering the same
//! grid draw the same image, indexed and pulled alike; morphs move what is drawn; a
//! listed selection draws its grid-indexed twin's image; a warmed-up frame creates no
//! buffer and uploads only the selection.

mod common;

use common::{SIZE, diff, draw, gpu_or_skip, overview_camera, terrain};
use glam::Vec3;
use terralod_core::lod::{
    AdaptiveLod, AdaptiveOptions, ChunkedLod, ChunkedOptions, GridVertices, ListedVertex,
    LodAlgorithm, LodOptions, MorphedHeight, PatchInstance, Selection, View, sample_height,
};
use terralod_core::{Camera, Containment, GridPos, Heightfield, Pyramid};
use terralod_render::{COLOUR_FORMAT, DebugLines, FrameSettings, RenderError, TerrainRenderer};

const PATCH_SIDE: u32 = 16;

/// The two triangles of cell `(i, j)` of a grid with `stride` columns of vertices, split
/// along `/` or `\`, counter-clockwise seen from above.
fn cell_triangles(i: u32, j: u32, stride: u32, slash: bool, out: &mut Vec<u32>) {
    let v = |c: u32, r: u32| r * stride + c;
    let (a, b, c, d) = (v(i, j), v(i + 1, j), v(i, j + 1), v(i + 1, j + 1));
    // Looking down -y with x right and z towards the viewer, (a, c, b) is counter-clockwise.
    if slash {
        out.extend([a, c, b, b, c, d]);
    } else {
        out.extend([a, c, d, a, d, b]);
    }
}

/// Patch `p` of the grid uses the `/` split when its coordinates sum to an even number.
fn slash(px: u32, pz: u32) -> bool {
    (px + pz).is_multiple_of(2)
}

struct Grids {
    vertices: GridVertices,
    triangles: Vec<u32>,
    patch_buffers: Vec<Vec<u32>>,
    instances: Vec<PatchInstance>,
}

impl Grids {
    /// The grid as explicit triangles, with `morphs`.
    fn triangles<'a>(&'a self, morphs: &'a [MorphedHeight]) -> Selection<'a> {
        Selection::Triangles {
            vertices: self.vertices,
            indices: &self.triangles,
            morphs,
        }
    }

    /// The same grid as patches.
    fn patches(&self) -> Selection<'_> {
        Selection::Patches {
            vertices: self.vertices,
            patch_side: PATCH_SIDE,
            index_buffers: &self.patch_buffers,
            instances: &self.instances,
            morph: None,
            pool: None,
        }
    }
}

fn grids(field: &Heightfield) -> Grids {
    let patches = (field.width() - 1) / PATCH_SIDE;
    let stride = field.width();
    let mut triangles = Vec::new();
    let mut instances = Vec::new();
    for pz in 0..patches {
        for px in 0..patches {
            for j in 0..PATCH_SIDE {
                for i in 0..PATCH_SIDE {
                    let (c, r) = (px * PATCH_SIDE + i, pz * PATCH_SIDE + j);
                    cell_triangles(c, r, stride, slash(px, pz), &mut triangles);
                }
            }
            instances.push(PatchInstance {
                origin: GridPos::new(px * PATCH_SIDE, pz * PATCH_SIDE),
                step: 1,
                index_buffer: u32::from(!slash(px, pz)),
                level: 0,
                frustum: Containment::Inside,
                slot: PatchInstance::NO_SLOT,
            });
        }
    }
    let patch_buffers = [true, false]
        .map(|s| {
            let mut b = Vec::new();
            for j in 0..PATCH_SIDE {
                for i in 0..PATCH_SIDE {
                    cell_triangles(i, j, PATCH_SIDE + 1, s, &mut b);
                }
            }
            b
        })
        .to_vec();
    Grids {
        vertices: GridVertices {
            stride,
            rows: field.height(),
            shift: 0,
        },
        triangles,
        patch_buffers,
        instances,
    }
}

#[test]
fn patches_and_triangles_draw_the_same_image() {
    let Some(ctx) = gpu_or_skip("patches_and_triangles_draw_the_same_image") else {
        return;
    };
    let field = terrain();
    let grids = grids(&field);
    let (triangles, patches) = (grids.triangles(&[]), grids.patches());
    assert_eq!(triangles.triangle_count(), patches.triangle_count());
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    for wireframe in [false, true] {
        let mut settings = FrameSettings::new(overview_camera(&field));
        settings.wireframe = wireframe;
        let a = draw(&ctx, &mut renderer, &triangles, &settings);
        let b = draw(&ctx, &mut renderer, &patches, &settings);
        let (d, _) = diff(&a, &b);
        assert!(
            d.differing_share < 1e-4 && d.mean_abs < 0.05,
            "wireframe {wireframe}: patches and triangles differ: {d:?}"
        );
        // And the image is of something: terrain and sky.
        let distinct: std::collections::HashSet<[u8; 4]> = a.pixels().map(|p| p.0).collect();
        assert!(distinct.len() > 100, "a nearly blank frame");
    }
}

/// A grid subdivided twice (`GridVertices::shift` 1, as algorithm A's local detail draws):
/// each triangle split in four at its edges' midpoints, drawn at the midpoints' coarse
/// heights through the morph list, draws the image of the coarse grid; lattice vertices
/// read the height texture at half their position.
#[test]
fn a_subdivided_grid_draws_the_coarse_grid_s_image() {
    let Some(ctx) = gpu_or_skip("a_subdivided_grid_draws_the_coarse_grid_s_image") else {
        return;
    };
    let field = terrain();
    let grids = grids(&field);
    let coarse = grids.vertices;
    let fine = GridVertices {
        stride: 2 * (coarse.stride - 1) + 1,
        rows: 2 * (coarse.rows - 1) + 1,
        shift: 1,
    };
    let at = |index: u32| {
        let p = coarse.position(index);
        GridPos::new(2 * p.col, 2 * p.row)
    };
    let mid = |a: GridPos, b: GridPos| GridPos::new((a.col + b.col) / 2, (a.row + b.row) / 2);
    let height = |p: GridPos| sample_height(&field, GridPos::new(p.col / 2, p.row / 2));
    let (mut indices, mut morphs) = (Vec::new(), Vec::new());
    for t in grids.triangles.chunks_exact(3) {
        let [a, b, c] = [at(t[0]), at(t[1]), at(t[2])];
        let (ab, bc, ca) = (mid(a, b), mid(b, c), mid(c, a));
        for [p, q, r] in [[a, ab, ca], [ab, b, bc], [ca, bc, c], [ab, bc, ca]] {
            indices.extend([p, q, r].map(|v| fine.index(v)));
        }
        for (m, (p, q)) in [(ab, (a, b)), (bc, (b, c)), (ca, (c, a))] {
            morphs.push(MorphedHeight {
                vertex: fine.index(m),
                height: 0.5 * (height(p) + height(q)),
            });
        }
    }
    let subdivided = Selection::Triangles {
        vertices: fine,
        indices: &indices,
        morphs: &morphs,
    };
    assert_eq!(
        subdivided.triangle_count(),
        4 * grids.triangles(&[]).triangle_count()
    );
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    let settings = FrameSettings::new(overview_camera(&field));
    let a = draw(&ctx, &mut renderer, &grids.triangles(&[]), &settings);
    let b = draw(&ctx, &mut renderer, &subdivided, &settings);
    let (d, _) = diff(&a, &b);
    assert!(
        d.differing_share < 1e-3 && d.mean_abs < 0.1,
        "the subdivided grid draws another image: {d:?}"
    );
}

#[test]
fn morphed_vertices_are_drawn_at_their_morphed_height() {
    let Some(ctx) = gpu_or_skip("morphed_vertices_are_drawn_at_their_morphed_height") else {
        return;
    };
    let field = terrain();
    let grids = grids(&field);
    let centre = grids.vertices.index(GridPos::new(128, 128));
    let morphs = [MorphedHeight {
        vertex: centre,
        height: 9000.0,
    }];
    let (flat, raised) = (grids.triangles(&[]), grids.triangles(&morphs));
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    let settings = FrameSettings::new(overview_camera(&field));
    let a = draw(&ctx, &mut renderer, &flat, &settings);
    let b = draw(&ctx, &mut renderer, &raised, &settings);
    let (d, _) = diff(&a, &b);
    assert!(
        d.differing_share > 1e-4,
        "a 9 km spike left no trace: {d:?}"
    );
}

/// The shader's patch morph is `Selection::to_mesh`'s: a morphed chunked selection and the
/// explicit triangles of its exported mesh (morphs = the exported heights) draw the same
/// image.
#[test]
fn the_patch_morph_draws_the_exported_heights() {
    let Some(ctx) = gpu_or_skip("the_patch_morph_draws_the_exported_heights") else {
        return;
    };
    let field = terrain();
    let pyramid = Pyramid::build(&field);
    let options = LodOptions {
        chunked: ChunkedOptions {
            block_size: 16,
            lod_distance: 1.5,
            morph: true,
            ..ChunkedOptions::DEFAULT
        },
        ..LodOptions::default()
    };
    let mut lod = ChunkedLod::new(&field, &pyramid, options);
    let camera = overview_camera(&field);
    let view = View::screen(camera, 1.0).unwrap().with_cull(false);
    let patches = lod.select(&view);
    let Selection::Patches { vertices, .. } = patches else {
        panic!("chunked selects patches");
    };
    let mesh = patches.to_mesh(&field);
    let indices: Vec<u32> = mesh
        .triangles
        .iter()
        .flatten()
        .map(|&v| vertices.index(mesh.positions[v as usize]))
        .collect();
    let morphs: Vec<MorphedHeight> = mesh
        .positions
        .iter()
        .zip(&mesh.heights)
        .filter(|(pos, height)| **height != sample_height(&field, **pos))
        .map(|(pos, height)| MorphedHeight {
            vertex: vertices.index(*pos),
            height: *height,
        })
        .collect();
    assert!(morphs.len() > 100, "only {} vertices morphed", morphs.len());
    let triangles = Selection::Triangles {
        vertices,
        indices: &indices,
        morphs: &morphs,
    };
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    for wireframe in [false, true] {
        let mut settings = FrameSettings::new(camera);
        settings.wireframe = wireframe;
        let a = draw(&ctx, &mut renderer, &triangles, &settings);
        let b = draw(&ctx, &mut renderer, &patches, &settings);
        let (d, _) = diff(&a, &b);
        assert!(
            d.differing_share < 1e-4 && d.mean_abs < 0.05,
            "wireframe {wireframe}: morphed patches and their export differ: {d:?}"
        );
        // Without the morph the image changes: the test sees the morph.
        let unmorphed = Selection::Triangles {
            vertices,
            indices: &indices,
            morphs: &[],
        };
        let c = draw(&ctx, &mut renderer, &unmorphed, &settings);
        let (d, _) = diff(&a, &c);
        assert!(d.differing_share > 1e-4, "the morph left no trace: {d:?}");
    }
}

/// Algorithm A over `field`, listing its vertices or not.
fn adaptive<'a>(field: &'a Heightfield, pyramid: &'a Pyramid, list: bool) -> AdaptiveLod<'a> {
    let options = AdaptiveOptions::default().with_list_vertices(list);
    AdaptiveLod::with_options(field, pyramid, LodOptions::default(), options)
}

/// A8 step 4: algorithm A's listed selection (vertices with their drawn heights) draws
/// the image of its grid-indexed selection (heights from the texture and the morphs), lit,
/// as wireframe and in LOD colours; and the heights drawn are the listed ones (a vertex
/// listed 9 km up shows).
#[test]
fn a_listed_selection_draws_what_its_grid_selection_does() {
    let Some(ctx) = gpu_or_skip("a_listed_selection_draws_what_its_grid_selection_does") else {
        return;
    };
    let field = terrain();
    let pyramid = Pyramid::build(&field);
    let camera = overview_camera(&field);
    let view = View::screen(camera, 1.0).unwrap();
    let (mut grid, mut listed) = (
        adaptive(&field, &pyramid, false),
        adaptive(&field, &pyramid, true),
    );
    let grid_selection = grid.select(&view);
    let Selection::Triangles { morphs, .. } = grid_selection else {
        panic!("grid indices by default");
    };
    assert!(morphs.len() > 100, "only {} vertices morphed", morphs.len());
    let listed_selection = listed.select(&view);
    let Selection::Listed {
        vertices,
        indices,
        shift,
    } = listed_selection
    else {
        panic!("listed");
    };
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    for (wireframe, lod_colours) in [(false, false), (true, false), (false, true)] {
        let mut settings = FrameSettings::new(camera);
        settings.wireframe = wireframe;
        settings.color_by_lod = lod_colours;
        let a = draw(&ctx, &mut renderer, &grid_selection, &settings);
        let b = draw(&ctx, &mut renderer, &listed_selection, &settings);
        let (d, _) = diff(&a, &b);
        assert!(
            d.differing_share < 1e-4 && d.mean_abs < 0.05,
            "wireframe {wireframe}, LOD colours {lod_colours}: listed and grid differ: {d:?}"
        );
    }
    // The listed heights are what is drawn: one vertex raised 9 km (every listing of it).
    let centre = vertices[indices[indices.len() / 2] as usize].pos;
    let raised: Vec<ListedVertex> = vertices
        .iter()
        .map(|v| ListedVertex {
            height: if v.pos == centre { 9000.0 } else { v.height },
            ..*v
        })
        .collect();
    let spiked = Selection::Listed {
        vertices: &raised,
        indices,
        shift,
    };
    let settings = FrameSettings::new(camera);
    let a = draw(&ctx, &mut renderer, &listed_selection, &settings);
    let b = draw(&ctx, &mut renderer, &spiked, &settings);
    let (d, _) = diff(&a, &b);
    assert!(
        d.differing_share > 1e-4,
        "a 9 km spike left no trace: {d:?}"
    );
}

/// A terrain larger than the GPU's largest texture (here a limit of 128 for 257 × 257
/// samples: textures of every 4th sample) draws a listed selection where the full-size
/// textures draw it (the geometry is the selection's; only the normals and colours come
/// from the coarser grid), and refuses a grid-indexed one in a typed error.
#[test]
fn a_terrain_larger_than_a_texture_draws_listed_selections() {
    let Some(ctx) = gpu_or_skip("a_terrain_larger_than_a_texture_draws_listed_selections") else {
        return;
    };
    let field = terrain();
    let pyramid = Pyramid::build(&field);
    let camera = overview_camera(&field);
    let view = View::screen(camera, 1.0).unwrap();
    let mut listed = adaptive(&field, &pyramid, true);
    let selection = listed.select(&view);
    let mut full = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    let mut small =
        TerrainRenderer::with_texture_side(&ctx, &field, None, COLOUR_FORMAT, 128).unwrap();
    assert!(full.draws_grid_selections() && !small.draws_grid_selections());
    let settings = FrameSettings::new(camera);
    let a = draw(&ctx, &mut full, &selection, &settings);
    let b = draw(&ctx, &mut small, &selection, &settings);
    let (d, _) = diff(&a, &b);
    // Shading from normals of every 4th sample: 1.5 levels of 255 on average, 0.17 % of
    // the pixels off by more than 24 levels (wgpu 30 on llvmpipe).
    assert!(
        d.differing_share < 0.01 && d.mean_abs < 3.0,
        "the decimated textures draw another terrain: {d:?}"
    );
    // Drawn at the wrong place (positions read as 4 times finer), it shows.
    let Selection::Listed {
        vertices,
        indices,
        shift,
    } = selection
    else {
        panic!("listed");
    };
    let misplaced = Selection::Listed {
        vertices,
        indices,
        shift: shift + 2,
    };
    let c = draw(&ctx, &mut small, &misplaced, &settings);
    let (d, _) = diff(&a, &c);
    assert!(
        d.differing_share > 0.1,
        "misplaced vertices left no trace: {d:?}"
    );
    let mut grid = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
    let error = small
        .prepare(&ctx, &grid.select(&view), &settings, &DebugLines::new())
        .unwrap_err();
    assert!(
        matches!(
            error,
            RenderError::NeedsCarriedHeights {
                width: 257,
                height: 257,
                max_side: 128
            }
        ),
        "{error}"
    );
}

/// A decimated terrain whose last step passes its border (249 cells, textures of every
/// other sample: 124.5 texture cells) ends where the data ends: looking down on its east
/// edge, the decimated textures show the sky past it as the full ones do, not the padding
/// out to the textures' last sample.
#[test]
fn a_decimated_terrain_ends_at_its_data() {
    let Some(ctx) = gpu_or_skip("a_decimated_terrain_ends_at_its_data") else {
        return;
    };
    let source = terrain();
    let side = 250;
    let raw = (0..side * side)
        .map(|i| source.raw(i % side, i / side))
        .collect();
    let field = Heightfield::from_f32(side, side, raw)
        .unwrap()
        .with_mapping(source.mapping())
        .unwrap();
    let pyramid = Pyramid::build(&field);
    let (w, d) = field.world_size();
    let (lo, hi) = field.world_range();
    let camera = Camera::new(
        Vec3::new(w - 300.0, hi + 2500.0, 0.5 * d),
        Vec3::new(w - 300.0, lo, 0.5 * d + 1.0),
        60f32.to_radians(),
        SIZE,
        1.0,
        200_000.0,
    )
    .unwrap();
    let view = View::screen(camera, 1.0).unwrap();
    let mut listed = adaptive(&field, &pyramid, true);
    let selection = listed.select(&view);
    let mut full = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    let mut small =
        TerrainRenderer::with_texture_side(&ctx, &field, None, COLOUR_FORMAT, 128).unwrap();
    assert!(!small.draws_grid_selections());
    let mut settings = FrameSettings::new(camera);
    settings.fog_density = Some(0.0);
    let a = draw(&ctx, &mut full, &selection, &settings);
    let b = draw(&ctx, &mut small, &selection, &settings);
    let (d, _) = diff(&a, &b);
    assert!(d.differing_share < 0.002, "the edges differ: {d:?}");
}

#[test]
fn a_warmed_up_frame_creates_no_buffer_and_uploads_only_the_selection() {
    let Some(ctx) = gpu_or_skip("a_warmed_up_frame_creates_no_buffer") else {
        return;
    };
    let field = terrain();
    let grids = grids(&field);
    let (triangles, patches) = (grids.triangles(&[]), grids.patches());
    let mut renderer = TerrainRenderer::new(&ctx, &field, None, COLOUR_FORMAT).unwrap();
    let settings = FrameSettings::new(overview_camera(&field));
    let lines = DebugLines::new();
    let uniforms = 304;
    // Origin, step, frustum, pool slot and level: six words per instance.
    let instance_bytes = 24;

    renderer
        .prepare(&ctx, &triangles, &settings, &lines)
        .unwrap();
    let warm = renderer.upload_stats();
    renderer
        .prepare(&ctx, &triangles, &settings, &lines)
        .unwrap();
    let next = renderer.upload_stats();
    assert_eq!(next.buffers_created, warm.buffers_created);
    assert_eq!(
        next.bytes_last_frame,
        (grids.triangles.len() * 4) as u64 + uniforms
    );

    // Patches: the shared index buffers go up once; later frames send instances only.
    renderer.prepare(&ctx, &patches, &settings, &lines).unwrap();
    let first = renderer.upload_stats();
    renderer.prepare(&ctx, &patches, &settings, &lines).unwrap();
    let second = renderer.upload_stats();
    assert_eq!(second.buffers_created, first.buffers_created);
    assert_eq!(
        second.bytes_last_frame,
        (grids.instances.len() * instance_bytes) as u64 + uniforms
    );
    assert!(first.bytes_last_frame > second.bytes_last_frame);
    ctx.wait_idle().unwrap();
}
