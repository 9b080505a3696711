//! End-to-end tests of `terralod mesh`: the exported files, read back and judged by the
//! testkit's independent oracles (watertight, projected error within the bound, coverage),
//! the JSON summary and the refusal of bad requests.

use glam::Vec3;
mod common;

use std::path::Path;
use std::process::{Command, Output};
use terralod_core::{Camera, GridMesh, GridPos, Heightfield, WorldMapping};
use terralod_testkit::fixtures::smooth_random;
use terralod_testkit::{check_mesh, measure_error};

const CELL: f32 = 10.0;

fn terralod(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args(args)
        .output()
        .expect("the terralod binary runs")
}

/// Runs a mesh command that must succeed and returns its JSON summary (the last line).
fn mesh_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["mesh"];
    all.extend_from_slice(args);
    let output = terralod(&all);
    assert!(
        output.status.success(),
        "terralod {all:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    serde_json::from_str(text.lines().last().expect("a JSON line")).expect("valid JSON")
}

/// A 49 × 37 raw f32 terrain in `dir` and the field it holds (10 m cells).
fn terrain(dir: &Path) -> (String, Heightfield) {
    let field = smooth_random(49, 37, 5, 120.0).expect("valid field");
    let mut bytes = Vec::new();
    for row in 0..field.height() {
        for col in 0..field.width() {
            bytes.extend_from_slice(&field.raw(col, row).to_le_bytes());
        }
    }
    let path = dir.join("terrain.f32");
    std::fs::write(&path, bytes).expect("temporary directory is writable");
    let field = field
        .with_mapping(WorldMapping {
            cell_size: CELL,
            ..WorldMapping::default()
        })
        .expect("valid mapping");
    (path.display().to_string(), field)
}

/// Reads an OBJ written by `terralod mesh` back into a grid mesh (x and z must be on the
/// grid: the export is in world coordinates).
fn read_obj(path: &Path) -> GridMesh {
    let text = std::fs::read_to_string(path).expect("the OBJ exists");
    let mut mesh = GridMesh::default();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        match parts.next() {
            Some("v") => {
                let v: Vec<f32> = parts.map(|p| p.parse().expect("a number")).collect();
                let (col, row) = (v[0] / CELL, v[2] / CELL);
                assert_eq!((col.fract(), row.fract()), (0.0, 0.0), "{line}");
                mesh.push_vertex(GridPos::new(col as u32, row as u32), v[1]);
            }
            Some("f") => {
                let f: Vec<u32> = parts
                    .map(|p| p.parse::<u32>().expect("an index") - 1)
                    .collect();
                mesh.triangles.push([f[0], f[1], f[2]]);
            }
            _ => {}
        }
    }
    mesh
}

#[test]
fn view_dependent_export_is_watertight_and_within_the_bound() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, field) = terrain(dir.path());
    let obj = dir.path().join("mesh.obj");
    let obj_arg = obj.display().to_string();
    let (eye, target) = ("-50,300,420", "240,60,180");
    let json = mesh_json(&[
        &file,
        "--raw-size",
        "49x37",
        "--cell-size",
        "10",
        "--pixel-error",
        "2",
        "--eye",
        eye,
        "--target",
        target,
        "--size",
        "640x360",
        "--out",
        &obj_arg,
    ]);
    assert_eq!(json["algorithm"], "quadtree");
    assert_eq!(json["tolerance"]["kind"], "pixels");
    assert_eq!(json["tolerance"]["value"], 2.0);
    let mesh = read_obj(&obj);
    assert_eq!(json["triangles"], mesh.triangles.len());
    assert_eq!(json["vertices"], mesh.positions.len());
    assert!(json["select_ms"].as_f64().is_some_and(|ms| ms >= 0.0));
    check_mesh(&mesh, None).assert_ok();
    let camera = Camera::new(
        Vec3::new(-50.0, 300.0, 420.0),
        Vec3::new(240.0, 60.0, 180.0),
        60f32.to_radians(),
        (640, 360),
        1.0,
        1.0e4,
    )
    .expect("valid camera");
    let errors = measure_error(&field, &mesh, Some(&camera)).expect("valid camera");
    let projected = errors.projected.expect("camera given");
    assert!(projected.in_view > 0);
    assert_eq!(projected.clipped, 0);
    assert!(projected.max <= 2.0 + 1e-3, "{errors}");
}

#[test]
fn view_independent_export_covers_everything() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, field) = terrain(dir.path());
    let ply = dir.path().join("mesh.ply");
    let obj = dir.path().join("mesh.obj");
    for out in [&ply, &obj] {
        let out = out.display().to_string();
        let json = mesh_json(&[
            &file,
            "--raw-size",
            "49x37",
            "--cell-size",
            "10",
            "--max-error",
            "3",
            "--out",
            &out,
        ]);
        assert_eq!(json["tolerance"]["kind"], "world_error");
        assert_eq!(json["cull"], false);
        // The default for a max error: the bintree, without its screen-view table.
        assert_eq!(json["algorithm"], "bintree");
        assert_eq!(json["state_bytes"], 0);
    }
    let mesh = read_obj(&obj);
    let errors = measure_error(&field, &mesh, None).expect("no camera");
    assert_eq!(errors.uncovered, 0);
    assert!(errors.world.max <= 3.0 + 1e-4, "{errors}");
    check_mesh(&mesh, None).assert_ok();
    // The bintree draws the 65 × 65 square over the 49 × 37 samples: the export keeps
    // only the triangles that reach into the data.
    for t in &mesh.triangles {
        let p = t.map(|i| mesh.positions[i as usize]);
        assert!(
            p.iter().any(|p| p.col < 48) && p.iter().any(|p| p.row < 36),
            "{p:?}"
        );
    }
    // The PLY holds the same mesh: header counts and exact size of the binary body.
    let bytes = std::fs::read(&ply).expect("the PLY exists");
    let end = b"end_header\n";
    let body = bytes
        .windows(end.len())
        .position(|w| w == end)
        .expect("a PLY header")
        + end.len();
    let header = String::from_utf8_lossy(&bytes[..body]);
    assert!(header.starts_with("ply\nformat binary_little_endian 1.0\n"));
    assert!(header.contains(&format!("element vertex {}\n", mesh.positions.len())));
    assert!(header.contains(&format!("element face {}\n", mesh.triangles.len())));
    assert_eq!(
        bytes.len() - body,
        mesh.positions.len() * 12 + mesh.triangles.len() * 13
    );
}

/// `--simplify` exports fewer vertices than the selection, still covering every sample
/// within the max error and watertight, for every error-bounded algorithm's mesh.
#[test]
fn simplified_export_keeps_the_bound_with_fewer_vertices() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, field) = terrain(dir.path());
    let obj = dir.path().join("simplified.obj");
    let obj_arg = obj.display().to_string();
    for algo in ["quadtree", "bintree"] {
        let json = mesh_json(&[
            &file,
            "--raw-size",
            "49x37",
            "--cell-size",
            "10",
            "--algo",
            algo,
            "--max-error",
            "3",
            "--simplify",
            "--out",
            &obj_arg,
        ]);
        let before = json["simplify"]["vertices_before"].as_u64().expect("stats");
        let mesh = read_obj(&obj);
        assert_eq!(json["vertices"], mesh.positions.len());
        assert!((mesh.positions.len() as u64) < before, "{algo}: {json}");
        let errors = measure_error(&field, &mesh, None).expect("no camera");
        assert_eq!(errors.uncovered, 0, "{algo}");
        assert!(errors.world.max <= 3.0 + 1e-4, "{algo}: {errors}");
        check_mesh(&mesh, None).assert_ok();
    }
    let output = terralod(&["mesh", &file, "--raw-size", "49x37", "--simplify"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--max-error"));
}

/// Runs a command that must be refused: exit code 1, one line on stderr containing
/// `needle`, and nothing written at `out`.
fn refused_in_one_line(args: &[&str], needle: &str, out: &str) {
    let output = terralod(args);
    let message = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{args:?}: {message}");
    let lines: Vec<&str> = message.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: {message}");
    assert!(
        message.contains(needle),
        "'{needle}' missing from: {message}"
    );
    assert!(!Path::new(out).exists(), "{args:?} wrote {out}");
}

#[test]
fn bad_requests_get_one_clear_line_and_write_nothing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _) = terrain(dir.path());
    let out = dir.path().join("never.obj").display().to_string();
    let base = ["mesh", &file, "--raw-size", "49x37"];
    let cases: [(&[&str], &str); 8] = [
        (
            &["--max-error", "1", "--cache-mb", "8"],
            "--cache-mb applies to a streaming algorithm (streamed, streamed-quadtree)",
        ),
        (
            &[
                "--pixel-error",
                "1",
                "--eye",
                "1e20,1e20,1e20",
                "--target",
                "0,0,0",
            ],
            "to the farthest corner of the terrain",
        ),
        (
            &[
                "--max-error",
                "1",
                "--algo",
                "patches",
                "--pool-capacity",
                "1",
            ],
            "pool of 1 patches is exhausted",
        ),
        (&["--pixel-error", "1"], "--eye and --target"),
        (
            &[
                "--max-error",
                "1",
                "--algo",
                "adaptive",
                "--build-tolerance",
                "5",
            ],
            "--max-error 1 is below --build-tolerance 5",
        ),
        (&[], "--pixel-error PX"),
        (
            &["--pixel-error", "1", "--eye", "1,2,3", "--target", "1,2,3"],
            "no view direction",
        ),
        (
            &[
                "--pixel-error",
                "1",
                "--eye",
                "1,2,3",
                "--target",
                "4,5,6",
                "--near",
                "-1",
            ],
            "near plane",
        ),
    ];
    for (extra, needle) in cases {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--out", &out]);
        refused_in_one_line(&args, needle, &out);
    }
    // Bounds no view can use are usage errors, as every other bad flag value (they exited
    // with 1, after the terrain was loaded).
    let usage: [(&[&str], &str); 5] = [
        (
            &["--max-error", "1", "--pixel-error", "1"],
            "cannot be used with",
        ),
        (
            &["--max-error", "1", "--algo", "nope"],
            "unknown algorithm 'nope' (available: quadtree,",
        ),
        (&["--max-error", "-1"], "not greater than 0"),
        (&["--pixel-error", "0"], "not greater than 0"),
        (&["--pixel-error", "nan"], "not a finite number"),
    ];
    for (extra, needle) in usage {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--out", &out]);
        let output = terralod(&args);
        let message = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {message}");
        assert!(
            message.contains(needle),
            "'{needle}' missing from: {message}"
        );
        assert!(!Path::new(&out).exists(), "{args:?} wrote {out}");
    }
    let output = terralod(&[
        "mesh",
        &file,
        "--raw-size",
        "49x37",
        "--max-error",
        "1",
        "--out",
        "x.stl",
    ]);
    assert_eq!(output.status.code(), Some(1));
}

/// `--algo adaptive --build-tolerance T`: the tree the CLI builds is the library's for that
/// `T` (its state, one word and a deadline per pool slot, is what the summary's
/// `state_bytes` reports), strictly smaller than the lossless one on this terrain (checked
/// through the library, so the comparison cannot pass by accident: were the flag ignored,
/// both runs would report the lossless size); the export keeps every sample within the
/// documented `max(M, T)` (`M = --max-error`, which may not be below `T`) with the terrain
/// covered; and `M < T` and a negative `T` are refused.
#[test]
fn a_build_tolerance_keeps_the_bound() {
    use terralod_core::Pyramid;
    use terralod_core::lod::{AdaptiveLod, AdaptiveOptions, LodAlgorithm, LodOptions};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, field) = terrain(dir.path());
    let pyramid = Pyramid::build(&field);
    let library_state = |tolerance: f32| {
        let options = AdaptiveOptions::default().with_build_tolerance(tolerance);
        AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options).state_bytes()
    };
    let lossless = library_state(0.0);
    assert!(
        library_state(3.0) < lossless,
        "the terrain must have squares a tolerance of 3 drops"
    );
    let obj = dir.path().join("mesh.obj");
    let obj_arg = obj.display().to_string();
    let mut triangles = Vec::new();
    for (tolerance, max_error) in [(0.0f32, 3.0f32), (3.0, 3.0), (3.0, 5.0)] {
        let (t, m) = (tolerance.to_string(), max_error.to_string());
        let json = mesh_json(&[
            &file,
            "--raw-size",
            "49x37",
            "--cell-size",
            "10",
            "--algo",
            "adaptive",
            "--max-error",
            &m,
            "--build-tolerance",
            &t,
            "--out",
            &obj_arg,
        ]);
        assert_eq!(
            json["state_bytes"].as_u64(),
            Some(library_state(tolerance) as u64),
            "T {t}: {json}"
        );
        let mesh = read_obj(&obj);
        check_mesh(&mesh, None).assert_ok();
        let errors = measure_error(&field, &mesh, None).expect("no camera");
        assert_eq!(errors.uncovered, 0);
        // The drawn heights are `f32`: half an ulp of the largest height.
        let (lo, hi) = field.world_range();
        let rounding = f64::from(lo.abs().max(hi.abs())) * 2f64.powi(-24);
        let bound = f64::from(max_error.max(tolerance)) + rounding;
        assert!(errors.world.max <= bound, "T {t} M {m}: {errors}");
        triangles.push(json["triangles"].as_u64().expect("a count"));
    }
    assert!(triangles[1] <= triangles[0], "{triangles:?}");
    // A bound under the tolerance is refused by the command (one line, exit 1), a
    // negative tolerance by the flag's parser (exit 2).
    for (refused, code) in [
        (&["--max-error", "2", "--build-tolerance", "3"][..], 1),
        (&["--max-error", "3", "--build-tolerance=-1"], 2),
    ] {
        let mut args = vec!["mesh", &file, "--raw-size", "49x37", "--algo", "adaptive"];
        args.extend_from_slice(refused);
        let output = terralod(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{refused:?}: {stderr}");
        assert!(stderr.contains("build-tolerance"), "{refused:?}: {stderr}");
        if code == 1 {
            assert_eq!(
                stderr.trim_end().lines().count(),
                1,
                "{refused:?}: {stderr}"
            );
        }
    }
}

/// `"tolerance_held"` says whether τ bounds the exported mesh: true for the error-driven
/// algorithms, false for chunked and patches by distance and for adaptive built with a
/// tolerance that leaves leaves coarser than exact (their measured error may pass τ); a
/// world error bounds every algorithm.
#[test]
fn the_summary_says_whether_tau_bounds_the_mesh() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _) = terrain(dir.path());
    let obj = dir.path().join("mesh.obj").display().to_string();
    let held = |extra: &[&str]| {
        let mut args = vec![
            file.as_str(),
            "--raw-size",
            "49x37",
            "--cell-size",
            "10",
            "--eye",
            "-50,300,420",
            "--target",
            "240,60,180",
            "--out",
            &obj,
        ];
        args.extend_from_slice(extra);
        let json = mesh_json(&args);
        json["tolerance_held"]
            .as_bool()
            .unwrap_or_else(|| panic!("{extra:?}: {json}"))
    };
    let tau = ["--pixel-error", "1"];
    for (algo, extra, expected) in [
        ("quadtree", &[][..], true),
        ("bintree", &[], true),
        ("adaptive", &[], true),
        ("adaptive", &["--build-tolerance", "3"], false),
        ("chunked", &["--error-aware"], true),
        ("chunked", &[], false),
        ("patches", &[], false),
    ] {
        let mut args = vec!["--algo", algo];
        args.extend_from_slice(extra);
        args.extend_from_slice(&tau);
        assert_eq!(held(&args), expected, "{algo} {extra:?}");
    }
    for algo in ["chunked", "patches"] {
        let json = mesh_json(&[
            &file,
            "--raw-size",
            "49x37",
            "--algo",
            algo,
            "--max-error",
            "5",
            "--out",
            &obj,
        ]);
        assert_eq!(json["tolerance_held"], true, "{algo}: {json}");
    }
}

/// `--algo chunked` exports exactly the selection the library makes (what the GPU draws,
/// morphed heights included), and its flags refuse bad values.
#[test]
fn chunked_export_is_the_selection() {
    use terralod_core::lod::{ChunkedLod, ChunkedOptions, LodAlgorithm, LodOptions, View};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, field) = terrain(dir.path());
    let obj = dir.path().join("chunked.obj");
    let obj_arg = obj.display().to_string();
    let json = mesh_json(&[
        &file,
        "--raw-size",
        "49x37",
        "--cell-size",
        "10",
        "--pixel-error",
        "2",
        "--eye",
        "-50,300,420",
        "--target",
        "240,60,180",
        "--size",
        "640x360",
        "--algo",
        "chunked",
        "--block-size",
        "16",
        "--lod-distance",
        "1.5",
        "--morph",
        "--out",
        &obj_arg,
    ]);
    assert_eq!(json["algorithm"], "chunked");
    let exported = read_obj(&obj);
    check_mesh(&exported, None).assert_ok();
    let camera = Camera::new(
        Vec3::new(-50.0, 300.0, 420.0),
        Vec3::new(240.0, 60.0, 180.0),
        60f32.to_radians(),
        (640, 360),
        1.0,
        1.0e4,
    )
    .expect("valid camera");
    let pyramid = terralod_core::Pyramid::build(&field);
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
    // What the library draws, cut to the data (the padding past it is not drawn).
    let drawn = lod
        .select(&View::screen(camera, 2.0).expect("valid view"))
        .to_mesh(&field);
    let last = (field.width() - 1, field.height() - 1);
    let expected = drawn.clone().clipped_to(last);
    let past = |mesh: &GridMesh| {
        mesh.triangles.iter().flatten().any(|&i| {
            let p = mesh.positions[i as usize];
            p.col > last.0 || p.row > last.1
        })
    };
    assert!(
        past(&drawn) && !past(&expected),
        "the chunked blocks reach past the data: the export cuts that off"
    );
    let triangles = |mesh: &GridMesh| {
        let mut t: Vec<Vec<(GridPos, u32)>> = mesh
            .triangles
            .iter()
            .map(|t| {
                let mut c: Vec<(GridPos, u32)> = t
                    .iter()
                    .map(|&v| {
                        (
                            mesh.positions[v as usize],
                            mesh.heights[v as usize].to_bits(),
                        )
                    })
                    .collect();
                c.sort_unstable_by_key(|(p, _)| (p.row, p.col));
                c
            })
            .collect();
        t.sort_unstable_by_key(|c| c.iter().map(|(p, _)| (p.row, p.col)).collect::<Vec<_>>());
        t
    };
    assert_eq!(triangles(&exported), triangles(&expected));
    for bad in [["--block-size", "48"], ["--lod-distance", "0.5"]] {
        let output = terralod(&[
            "mesh",
            &file,
            "--raw-size",
            "49x37",
            "--max-error",
            "1",
            "--algo",
            "chunked",
            bad[0],
            bad[1],
            "--out",
            &obj_arg,
        ]);
        let message = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!output.status.success(), "{bad:?} accepted");
        assert!(
            message.contains("power of two") || message.contains("at least 1"),
            "{bad:?}: {message}"
        );
    }
}

/// Writes a `side × side` raw f32 file of `value(col, row)` and returns its path.
fn raw_square(dir: &Path, name: &str, side: u32, value: impl Fn(u32, u32) -> f32) -> String {
    let mut bytes = Vec::new();
    for row in 0..side {
        for col in 0..side {
            bytes.extend_from_slice(&value(col, row).to_le_bytes());
        }
    }
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("temporary directory is writable");
    path.display().to_string()
}

/// `--detail FILE --detail-origin X,Z --detail-cell-size M` with `--algo adaptive`: the OBJ
/// holds the finer vertices in world coordinates (on the detail's lattice), at the
/// detail's heights where it covers the terrain, watertight on the fine grid.
#[test]
fn a_detail_is_exported_at_its_resolution() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _) = terrain(dir.path());
    // 33 × 33 samples 2.5 m apart (a quarter of the terrain's cell), bumpy, from (100, 50).
    let detail = raw_square(dir.path(), "road.f32", 33, |c, r| {
        40.0 + ((c * 7 + r * 3) % 5) as f32
    });
    let obj = dir.path().join("mesh.obj");
    let obj_arg = obj.display().to_string();
    let json = mesh_json(&[
        &file,
        "--raw-size",
        "49x37",
        "--cell-size",
        "10",
        "--algo",
        "adaptive",
        "--adaptive-no-morph",
        "--max-error",
        "0.01",
        "--detail",
        &detail,
        "--detail-origin",
        "100,50",
        "--detail-cell-size",
        "2.5",
        "--out",
        &obj_arg,
    ]);
    assert_eq!(json["detail"]["subdivision"], 4);
    assert_eq!(json["detail"]["cell_size"], 2.5);
    let text = std::fs::read_to_string(&obj).expect("the OBJ exists");
    let mut mesh = GridMesh::default();
    let (mut fine, mut on_detail) = (0, 0);
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        match parts.next() {
            Some("v") => {
                let v: Vec<f32> = parts.map(|p| p.parse().expect("a number")).collect();
                let (col, row) = (v[0] / 2.5, v[2] / 2.5);
                assert_eq!((col.fract(), row.fract()), (0.0, 0.0), "{line}");
                let (col, row) = (col as u32, row as u32);
                if col % 4 != 0 || row % 4 != 0 {
                    fine += 1;
                }
                if (40..=72).contains(&col) && (20..=52).contains(&row) {
                    let (c, r) = (col - 40, row - 20);
                    assert_eq!(v[1], 40.0 + ((c * 7 + r * 3) % 5) as f32, "{line}");
                    on_detail += 1;
                }
                mesh.push_vertex(GridPos::new(col, row), v[1]);
            }
            Some("f") => {
                let f: Vec<u32> = parts
                    .map(|p| p.parse::<u32>().expect("an index") - 1)
                    .collect();
                mesh.triangles.push([f[0], f[1], f[2]]);
            }
            _ => {}
        }
    }
    check_mesh(&mesh, None).assert_ok();
    assert!(
        fine > 100 && on_detail > 100,
        "{fine} fine, {on_detail} on the detail"
    );
}

/// A detail 256 times finer than the built-in terrain's 30 m cells subdivides its grid
/// into 262,145² positions, past 32-bit grid indices: refused in one line naming
/// `--list-vertices`, and exported with it (vertices on the detail's lattice).
#[test]
fn a_detail_past_32_bit_grid_indices_needs_listed_vertices() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let detail = raw_square(dir.path(), "pit.f32", 9, |c, r| 100.0 + (c + r) as f32);
    let obj = dir.path().join("mesh.obj").display().to_string();
    let cell = (30.0f64 / 256.0).to_string();
    let args = [
        "mesh",
        "--algo",
        "adaptive",
        "--max-error",
        "20",
        "--detail",
        &detail,
        "--detail-origin",
        "4000.078125,4000.078125",
        "--detail-cell-size",
        &cell,
        "--out",
        &obj,
    ];
    let output = terralod(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("more than 32-bit grid indices") && stderr.contains("--list-vertices"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!Path::new(&obj).exists());
    let json = mesh_json(&[&args[1..], &["--list-vertices"]].concat());
    assert_eq!(json["detail"]["subdivision"], 256);
    // The detail's samples are exported: a vertex at its far corner, (8, 8) fine cells
    // from its origin, at its height there.
    let text = std::fs::read_to_string(&obj).expect("the OBJ exists");
    let corner = 4000.078125 + 8.0 * 30.0 / 256.0;
    let found = text.lines().any(|line| {
        let v: Vec<f64> = line
            .strip_prefix("v ")
            .map(|rest| {
                rest.split_whitespace()
                    .map(|p| p.parse().expect("a number"))
                    .collect()
            })
            .unwrap_or_default();
        v.len() == 3
            && (v[0] - corner).abs() < 1e-3
            && (v[2] - corner).abs() < 1e-3
            && v[1] == 116.0
    });
    assert!(found, "no vertex at the detail's far corner");
}

/// Bad `--detail` requests: one line, nothing written; clap's own refusals exit 2.
#[test]
fn bad_detail_flags_get_one_clear_line() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _) = terrain(dir.path());
    let detail = raw_square(dir.path(), "d.f32", 9, |_, _| 1.0);
    let out = dir.path().join("never.obj").display().to_string();
    let base = [
        "mesh",
        &file,
        "--raw-size",
        "49x37",
        "--cell-size",
        "10",
        "--max-error",
        "1",
        "--detail",
        &detail,
    ];
    let cases: [(&[&str], &str, i32); 7] = [
        (
            &[
                "--algo",
                "adaptive",
                "--detail-origin",
                "0,0",
                "--detail-cell-size",
                "3",
            ],
            "must be the terrain's cell size 10 divided by a power of two",
            1,
        ),
        (
            &[
                "--algo",
                "quadtree",
                "--detail-origin",
                "0,0",
                "--detail-cell-size",
                "5",
            ],
            "give --algo adaptive",
            1,
        ),
        (
            &[
                "--algo",
                "adaptive",
                "--detail-origin",
                "1,0",
                "--detail-cell-size",
                "5",
            ],
            "on the detail's lattice",
            1,
        ),
        (
            &[
                "--algo",
                "adaptive",
                "--detail-origin",
                "-500,0",
                "--detail-cell-size",
                "5",
            ],
            "does not overlap the terrain",
            1,
        ),
        (
            &["--algo", "adaptive", "--detail-cell-size", "5"],
            "--detail-origin",
            2,
        ),
        (
            &[
                "--algo",
                "adaptive",
                "--detail-origin",
                "1,2,3",
                "--detail-cell-size",
                "5",
            ],
            "expected X,Z",
            2,
        ),
        (
            &[
                "--algo",
                "adaptive",
                "--detail-origin",
                "0,0",
                "--detail-cell-size",
                "0",
            ],
            "not greater than 0",
            2,
        ),
    ];
    for (extra, needle, code) in cases {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--out", &out]);
        let output = terralod(&args);
        let message = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(code), "{args:?}: {message}");
        if code == 1 {
            let lines: Vec<&str> = message.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "{args:?}: {message}");
        }
        assert!(
            message.contains(needle),
            "'{needle}' missing from: {message}"
        );
        assert!(!Path::new(&out).exists());
    }
    let missing = terralod(&[
        "mesh",
        &file,
        "--raw-size",
        "49x37",
        "--max-error",
        "1",
        "--algo",
        "adaptive",
        "--detail",
        "/no/such/file.png",
        "--detail-origin",
        "0,0",
        "--detail-cell-size",
        "0.5",
    ]);
    assert_eq!(missing.status.code(), Some(1));
    let message = String::from_utf8_lossy(&missing.stderr);
    assert!(message.contains("/no/such/file.png"), "{message}");
}

/// `mesh --path`: a scripted camera walk with the algorithm's state carried across frames.
/// Every frame's export (`{frame}` in `--out`) passes the crack checker and the error
/// oracle for its own camera, and adaptive's last frame, reached incrementally, is the
/// mesh a single selection for that camera exports, byte for byte. Misuse is refused.
#[test]
fn a_camera_walk_exports_every_frame_within_the_bound() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, field) = terrain(dir.path());
    let poses: Vec<(Vec3, Vec3)> = (0..8)
        .map(|i| {
            let step = i as f32;
            (
                Vec3::new(
                    -60.0 + 30.0 * step,
                    220.0 - 10.0 * step,
                    400.0 - 15.0 * step,
                ),
                Vec3::new(240.0 + 5.0 * step, 40.0, 150.0 + 8.0 * step),
            )
        })
        .collect();
    let walk = dir.path().join("walk.json");
    let json: Vec<_> = poses
        .iter()
        .map(
            |(eye, target)| serde_json::json!({"eye": eye.to_array(), "target": target.to_array()}),
        )
        .collect();
    std::fs::write(&walk, serde_json::to_string(&json).unwrap()).unwrap();
    let walk_arg = walk.display().to_string();
    let pattern = dir.path().join("frame-{frame}.obj").display().to_string();
    let common = [
        file.as_str(),
        "--raw-size",
        "49x37",
        "--cell-size",
        "10",
        "--algo",
        "adaptive",
        "--pixel-error",
        "1",
        "--size",
        "640x360",
        "--far",
        "10000",
    ];
    let mut args = common.to_vec();
    args.extend_from_slice(&["--path", &walk_arg, "--out", &pattern]);
    let summary = mesh_json(&args);
    assert_eq!(summary["path"]["frames"], 8);
    assert_eq!(summary["path"]["files_written"], 8);
    // Everything is in memory: no frame waits for data, so every frame holds the bound.
    assert_eq!(summary["path"]["frames_held_back"], 0, "{summary}");
    assert_eq!(summary["tolerance_held"], true, "{summary}");
    let mut triangle_counts = std::collections::BTreeSet::new();
    for (frame, (eye, target)) in poses.iter().enumerate() {
        let mesh = read_obj(&dir.path().join(format!("frame-{frame}.obj")));
        triangle_counts.insert(mesh.triangles.len());
        check_mesh(&mesh, None).assert_ok();
        let camera = Camera::new(*eye, *target, 60f32.to_radians(), (640, 360), 1.0, 1.0e4)
            .expect("valid camera");
        let errors = measure_error(&field, &mesh, Some(&camera)).expect("valid camera");
        let projected = errors.projected.expect("camera given");
        assert!(projected.in_view > 0, "frame {frame}");
        assert!(projected.max <= 1.0 + 1e-3, "frame {frame}: {errors}");
    }
    assert!(
        triangle_counts.len() > 2,
        "the walk changes the mesh: {triangle_counts:?}"
    );
    // The last frame alone, from scratch.
    let (eye, target) = poses[7];
    let single = dir.path().join("single.obj").display().to_string();
    let (eye, target) = (
        format!("{},{},{}", eye.x, eye.y, eye.z),
        format!("{},{},{}", target.x, target.y, target.z),
    );
    let mut args = common.to_vec();
    args.extend_from_slice(&["--eye", &eye, "--target", &target, "--out", &single]);
    let alone = mesh_json(&args);
    assert_eq!(alone["triangles"], summary["triangles"]);
    assert_eq!(
        std::fs::read(dir.path().join("frame-7.obj")).unwrap(),
        std::fs::read(&single).unwrap(),
        "the walk's last frame differs from a selection from scratch"
    );
    // Only the last frame without `{frame}`.
    let last = dir.path().join("last.obj").display().to_string();
    let mut args = common.to_vec();
    args.extend_from_slice(&["--path", &walk_arg, "--out", &last]);
    assert_eq!(mesh_json(&args)["path"]["files_written"], 0);
    assert_eq!(
        std::fs::read(&last).unwrap(),
        std::fs::read(&single).unwrap()
    );
    // Misuse: `{frame}` without a walk, a walk with a camera or a max error, a broken file.
    let never = dir.path().join("never-{frame}.obj").display().to_string();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "[{\"eye\": [1, 2, 3]}]").unwrap();
    let bad_arg = bad.display().to_string();
    let cases: [(&[&str], i32, &str); 4] = [
        (
            &["--eye", "1,2,3", "--target", "4,5,6", "--out", &never],
            1,
            "--path walk",
        ),
        (
            &["--path", &walk_arg, "--eye", "1,2,3"],
            2,
            "cannot be used with",
        ),
        (
            &["--path", &walk_arg, "--max-error", "1"],
            2,
            "cannot be used with",
        ),
        (&["--path", &bad_arg], 1, "not a camera path"),
    ];
    for (extra, code, needle) in cases {
        let mut args = vec!["mesh"];
        args.extend_from_slice(&common);
        args.extend_from_slice(extra);
        let output = terralod(&args);
        let message = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(code), "{extra:?}: {message}");
        assert!(
            message.contains(needle),
            "'{needle}' missing from: {message}"
        );
    }
    for never in ["never-{frame}.obj", "never-0.obj"] {
        assert!(!dir.path().join(never).exists(), "{never} written");
    }
    // A patch pool too small for a frame of the walk is named with the frame, before that
    // frame is written.
    let output = terralod(&[
        "mesh",
        &file,
        "--raw-size",
        "49x37",
        "--cell-size",
        "10",
        "--algo",
        "patches",
        "--pool-capacity",
        "1",
        "--pixel-error",
        "1",
        "--size",
        "640x360",
        "--path",
        &walk_arg,
        "--out",
        &never,
    ]);
    let message = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(message.contains("exhausted at frame 0 of"), "{message}");
    assert!(!dir.path().join("never-0.obj").exists());
    // A missing folder for frame 3 is refused before any frame is written.
    for folder in ["d0", "d1", "d2"] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
    }
    let nested = dir
        .path()
        .join("d{frame}")
        .join("m.obj")
        .display()
        .to_string();
    let mut args = vec!["mesh"];
    args.extend_from_slice(&common);
    args.extend_from_slice(&["--path", &walk_arg, "--out", &nested]);
    let output = terralod(&args);
    let message = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(message.contains("d3 does not exist"), "{message}");
    let written = || {
        ["d0", "d1", "d2"]
            .into_iter()
            .filter(|folder| dir.path().join(folder).join("m.obj").exists())
            .collect::<Vec<_>>()
    };
    assert!(written().is_empty(), "{:?} written", written());
    // A walk failing part-way (frame 3's file is a full device: writes fail with ENOSPC)
    // takes back the frames it wrote.
    #[cfg(target_os = "linux")]
    {
        for frame in 3..poses.len() {
            std::fs::create_dir(dir.path().join(format!("d{frame}"))).unwrap();
        }
        std::os::unix::fs::symlink("/dev/full", dir.path().join("d3").join("m.obj")).unwrap();
        let output = terralod(&args);
        let message = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(1), "{message}");
        assert!(message.contains("frame 3: writing "), "{message}");
        // The file's path once (the writer's own "path: reason" is not repeated).
        assert_eq!(message.matches("m.obj").count(), 1, "{message}");
        assert!(written().is_empty(), "{:?} left", written());
    }
}

/// A thin terrain pads to a huge square: the bintree, which covers the whole padded
/// square, is refused with a line naming the algorithms that take it (it used to abort
/// on a failed allocation of the padded square's records), and quadtree meshes it.
#[test]
fn a_thin_terrain_too_wide_for_the_bintree_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (width, height) = (40_000u32, 2u32);
    let bytes: Vec<u8> = (0..width * height)
        .flat_map(|i| ((i % 13) as f32).to_le_bytes())
        .collect();
    let file = dir.path().join("thin.f32");
    std::fs::write(&file, bytes).expect("writable");
    let file = file.to_str().expect("UTF-8");
    let out = dir.path().join("thin.obj");
    let out = out.to_str().expect("UTF-8");
    let output = terralod(&[
        "mesh",
        file,
        "--raw-size",
        "40000x2",
        "--max-error",
        "0.5",
        "--out",
        out,
    ]);
    let message = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(message.contains("65537 x 65537 square grid"), "{message}");
    assert!(message.contains("--algo quadtree or adaptive"), "{message}");
    assert!(!Path::new(out).exists());
    let json = mesh_json(&[
        file,
        "--raw-size",
        "40000x2",
        "--max-error",
        "0.5",
        "--algo",
        "quadtree",
    ]);
    assert_eq!(json["algorithm"], "quadtree");
}

/// [`terrain`]'s flags and a camera over it, for algorithm adaptive.
const ADAPTIVE_VIEW: [&str; 16] = [
    "--raw-size",
    "49x37",
    "--cell-size",
    "10",
    "--algo",
    "adaptive",
    "--pixel-error",
    "1",
    "--eye",
    "60,160,60",
    "--target",
    "300,0,200",
    "--near",
    "1",
    "--far",
    "10000",
];

/// `--adaptive-guard DEG` reaches the library: the exported triangle count is the
/// library's selection with that guard band (which draws differently here, checked through
/// the library so the test cannot pass with the flag ignored), and a band over 90° is
/// refused by the flag's parser.
#[test]
fn the_adaptive_guard_band_is_the_librarys() {
    use terralod_core::lod::{AdaptiveLod, AdaptiveOptions, LodAlgorithm, LodOptions, View};
    use terralod_core::{Camera, Pyramid};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, field) = terrain(dir.path());
    let pyramid = Pyramid::build(&field);
    let (eye, target) = (
        glam::Vec3::new(60.0, 160.0, 60.0),
        glam::Vec3::new(300.0, 0.0, 200.0),
    );
    let camera = Camera::new(eye, target, 60f32.to_radians(), (1920, 1080), 1.0, 10_000.0)
        .expect("valid camera");
    let library = |degrees: f32| {
        let options = AdaptiveOptions::default().with_guard_angle(degrees.to_radians());
        let mut lod = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        let view = View::screen(camera, 1.0).expect("valid view");
        lod.select(&view).triangle_count() as u64
    };
    assert_ne!(
        library(0.0),
        library(30.0),
        "the band must change this selection"
    );
    let obj = dir.path().join("mesh.obj");
    let obj_arg = obj.display().to_string();
    for degrees in [0.0f32, 30.0] {
        let guard = degrees.to_string();
        let mut args = vec![file.as_str()];
        args.extend_from_slice(&ADAPTIVE_VIEW);
        args.extend_from_slice(&["--adaptive-guard", &guard, "--out", &obj_arg]);
        let json = mesh_json(&args);
        assert_eq!(
            json["triangles"].as_u64(),
            Some(library(degrees)),
            "guard {guard}: {json}"
        );
    }
    let output = terralod(&[
        "mesh",
        &file,
        "--raw-size",
        "49x37",
        "--adaptive-guard",
        "91",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("more than 90 degrees"), "{stderr}");
}

/// `--page-frames N --page-cells C` (A8): the export waits for the pages its view asks
/// for, read back from a page file in $TMPDIR, so it is the mesh without paging; the page
/// file is gone when the command ends; frames too few for the view are refused in one
/// line, nothing written.
#[test]
fn paged_exports_wait_for_their_pages() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _) = terrain(dir.path());
    let spool = dir.path().join("spool");
    std::fs::create_dir(&spool).expect("a spool folder");
    let out = |name: &str| dir.path().join(name).display().to_string();
    let (plain, paged, refused) = (out("plain.obj"), out("paged.obj"), out("refused.obj"));
    let (listed, listed_paged) = (out("listed.obj"), out("listed-paged.obj"));
    let run = |extra: &[&str], obj: &str| {
        let mut args = vec!["mesh", &file];
        args.extend_from_slice(&ADAPTIVE_VIEW);
        args.extend_from_slice(&["--out", obj]);
        args.extend_from_slice(extra);
        Command::new(env!("CARGO_BIN_EXE_terralod"))
            .args(&args)
            .env("TMPDIR", &spool)
            .output()
            .expect("the terralod binary runs")
    };
    let pages = ["--page-cells", "8", "--page-frames"];
    for (extra, obj) in [
        (&[][..], &plain),
        (&[&pages[..], &["40"]].concat()[..], &paged),
        // Vertices listed with their heights (A8 step 4): the same mesh.
        (&["--list-vertices"][..], &listed),
        (
            &[&pages[..], &["40", "--list-vertices"]].concat()[..],
            &listed_paged,
        ),
    ] {
        let output = run(extra, obj);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let read = |path: &str| std::fs::read(path).expect("the OBJ exists");
    assert!(read(&plain) == read(&paged), "the paged export differs");
    assert!(read(&plain) == read(&listed), "the listed export differs");
    assert!(
        read(&plain) == read(&listed_paged),
        "the listed paged export differs"
    );
    let output = run(&[&pages[..], &["10"]].concat(), &refused);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--page-frames is too small for this view"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!Path::new(&refused).exists());
    let left: Vec<_> = std::fs::read_dir(&spool).expect("readable").collect();
    assert!(left.is_empty(), "left in $TMPDIR: {left:?}");
}

/// A walk's frames are moved into place only once the walk is complete: one that fails at
/// its last frame (too few page frames for that view) leaves the files that were there as
/// they were, and no staged frame behind; a complete walk replaces them.
#[test]
fn a_failed_walk_leaves_the_files_that_were_there() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _) = terrain(dir.path());
    let walk = dir.path().join("walk.json");
    let poses: Vec<_> = (0..3)
        .map(|i| {
            let s = 20.0 * i as f32;
            serde_json::json!({"eye": [20.0 + s, 160.0, 20.0 + s], "target": [300.0, 0.0, 200.0]})
        })
        .collect();
    std::fs::write(&walk, serde_json::to_string(&poses).unwrap()).unwrap();
    let frames = dir.path().join("frames");
    std::fs::create_dir(&frames).unwrap();
    for frame in 0..3 {
        std::fs::write(frames.join(format!("f{frame}.obj")), format!("old {frame}")).unwrap();
    }
    let pattern = frames.join("f{frame}.obj").display().to_string();
    let walk = walk.display().to_string();
    let run = |page_frames: &str| {
        let mut args = vec!["mesh", &file];
        // The walk's cameras replace the view's eye and target.
        args.extend_from_slice(&ADAPTIVE_VIEW[..8]);
        args.extend_from_slice(&ADAPTIVE_VIEW[12..]);
        args.extend_from_slice(&["--page-cells", "8", "--page-frames", page_frames]);
        args.extend_from_slice(&["--path", &walk, "--out", &pattern]);
        terralod(&args)
    };
    let names = || {
        let mut names: Vec<String> = std::fs::read_dir(&frames)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let refused = run("10");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--page-frames is too small"), "{stderr}");
    assert_eq!(names(), ["f0.obj", "f1.obj", "f2.obj"]);
    for frame in 0..3 {
        let text = std::fs::read_to_string(frames.join(format!("f{frame}.obj"))).unwrap();
        assert_eq!(text, format!("old {frame}"));
    }
    let done = run("40");
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(names(), ["f0.obj", "f1.obj", "f2.obj"]);
    for frame in 0..3 {
        let mesh = read_obj(&frames.join(format!("f{frame}.obj")));
        assert!(!mesh.triangles.is_empty(), "frame {frame}");
    }
}

/// An algorithm's own flags given to a command that runs another algorithm are refused
/// (one line, exit 1, nothing written) rather than ignored without a word, in `mesh`,
/// `render` and `bench`; with an algorithm that reads them they are taken.
#[test]
fn another_algorithms_flags_are_refused_not_ignored() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _) = terrain(dir.path());
    let obj = dir.path().join("never.obj").display().to_string();
    let png = dir.path().join("never.png").display().to_string();
    let view = [
        "--pixel-error",
        "1",
        "--eye",
        "-50,300,420",
        "--target",
        "240,60,180",
        "--size",
        "320x180",
    ];
    let cases: [(&[&str], &str); 9] = [
        (
            &["--adaptive-guard", "3"],
            "--adaptive-guard is an option of algorithm adaptive: give --algo adaptive",
        ),
        (
            &["--algo", "bintree", "--adaptive-no-morph"],
            "--adaptive-no-morph is an option of algorithm adaptive",
        ),
        (
            &["--algo", "adaptive", "--pool-capacity", "8"],
            "--pool-capacity is an option of algorithm patches",
        ),
        (
            &["--algo", "streamed", "--error-aware"],
            "--error-aware is an option of algorithm chunked",
        ),
        (
            &["--algo", "patches", "--view-angle-aware"],
            "--view-angle-aware bounds the projected error, which patches does not use",
        ),
        (
            &["--algo", "chunked", "--view-angle-aware"],
            "which chunked does not use (chunked does with --error-aware)",
        ),
        (
            &["--algo", "chunked", "--error-aware", "--lod-distance", "3"],
            "--lod-distance sets chunked's levels by distance",
        ),
        (
            &["--algo", "quadtree", "--page-frames", "4"],
            "--page-frames is an option of algorithm adaptive",
        ),
        (
            &["--page-cells", "64"],
            "--page-cells is an option of algorithm adaptive",
        ),
    ];
    for (command, out) in [("mesh", &obj), ("render", &png)] {
        for (extra, needle) in cases {
            let mut args = vec![command, &file, "--raw-size", "49x37"];
            args.extend_from_slice(&view);
            args.extend_from_slice(extra);
            args.extend_from_slice(&["--out", out]);
            refused_in_one_line(&args, needle, out);
        }
    }
    // A view-independent selection projects nothing.
    let output = terralod(&[
        "mesh",
        &file,
        "--raw-size",
        "49x37",
        "--max-error",
        "1",
        "--view-angle-aware",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not apply with --max-error"));
    // Taken by the algorithm that reads them.
    let mut args = vec!["mesh", &file, "--raw-size", "49x37"];
    args.extend_from_slice(&view);
    args.extend_from_slice(&["--algo", "chunked", "--error-aware", "--view-angle-aware"]);
    assert_eq!(mesh_json(&args[1..])["algorithm"], "chunked");
    // bench: refused where no algorithm it flies reads the flag, taken where one does.
    let bench = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            &file,
            "--raw-size",
            "49x37",
            "--frames",
            "2",
            "--measure-every",
            "0",
            "--size",
            "320x180",
        ];
        args.extend_from_slice(extra);
        terralod(&args)
    };
    let refused = bench(&[
        "--algo",
        "quadtree",
        "--algo",
        "bintree",
        "--split-factor",
        "3",
    ]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("--split-factor is an option of algorithm patches")
    );
    assert!(refused.stdout.is_empty());
    for taken in [
        &[
            "--algo",
            "quadtree",
            "--algo",
            "patches",
            "--split-factor",
            "3",
        ][..],
        &["--split-factor", "3", "--adaptive-guard", "2"],
    ] {
        let output = bench(taken);
        assert!(
            output.status.success(),
            "{taken:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// `--pool-capacity 1000000000` asked the allocator for 13 TB and aborted the process
/// (exit 134); a pool too large is refused with one line now.
#[test]
fn a_patch_pool_too_large_for_memory_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _) = terrain(dir.path());
    let out = dir.path().join("never.obj").display().to_string();
    refused_in_one_line(
        &[
            "mesh",
            &file,
            "--raw-size",
            "49x37",
            "--algo",
            "patches",
            "--pool-capacity",
            "1000000000",
            "--max-error",
            "1",
            "--out",
            &out,
        ],
        "lower --pool-capacity or --patch-size",
        &out,
    );
}

/// `--path /dev/zero` read forever (gigabytes of memory) and a FIFO blocked: a camera path
/// must be a regular file, of at most 64 MiB.
#[test]
fn a_camera_path_that_is_no_regular_file_or_too_large_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _) = terrain(dir.path());
    let out = dir.path().join("never.obj").display().to_string();
    let fifo = dir.path().join("path.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .and_then(|f| f.set_len((64 << 20) + 1))
        .expect("a sparse file");
    let mut cases = vec![
        ("/dev/zero".to_string(), "not a regular file"),
        (huge.display().to_string(), "bytes allowed"),
    ];
    if made.is_ok_and(|s| s.success()) {
        cases.push((fifo.display().to_string(), "not a regular file"));
    } else {
        eprintln!("SKIPPED: the FIFO case (no mkfifo)");
    }
    for (path, needle) in cases {
        let args = [
            "mesh",
            &file,
            "--raw-size",
            "49x37",
            "--pixel-error",
            "1",
            "--path",
            &path,
            "--out",
            &out,
        ];
        let output = common::terralod_within_a_minute(&args);
        let message = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {message}");
        assert_eq!(message.trim().lines().count(), 1, "{message}");
        assert!(
            message.contains(needle) && message.contains(&path),
            "{message}"
        );
        assert!(!Path::new(&out).exists());
    }
}

/// `--fov-y` is in degrees; its refusal said "0.0000017453292 rad is outside [0.0001, π)".
#[test]
fn a_bad_field_of_view_is_refused_in_degrees() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _) = terrain(dir.path());
    let output = terralod(&[
        "mesh",
        &file,
        "--raw-size",
        "49x37",
        "--pixel-error",
        "1",
        "--eye",
        "0,300,0",
        "--target",
        "200,0,200",
        "--fov-y=0.0001",
    ]);
    let message = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(
        message.contains("--fov-y") && message.contains("0.0001 degrees is outside [0.00573, 180)"),
        "{message}"
    );
    assert!(!message.contains("rad"), "{message}");
}
