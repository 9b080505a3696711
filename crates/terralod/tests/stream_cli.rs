//! End-to-end tests of `--algo streamed` (and `streamed-quadtree`) over an imported
//! directory (issue 9): the commands stream its tiles through the tile cache instead of
//! loading it, the settled mesh is the mesh of the same terrain held in memory, a flight
//! passes the oracles, and a corrupt tile is reported once while its coarser level stands
//! in.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn terralod(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args(args)
        .output()
        .expect("the terralod binary runs")
}

/// Runs a command that must succeed; returns (stdout, stderr).
fn ok(args: &[&str]) -> (String, String) {
    let output = terralod(args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "terralod {args:?} failed: {stderr}"
    );
    (String::from_utf8_lossy(&output.stdout).into_owned(), stderr)
}

fn last_json(stdout: &str) -> serde_json::Value {
    let line = stdout.lines().last().expect("some output");
    serde_json::from_str(line).expect("the last line is JSON")
}

const WIDTH: u32 = 129;
const HEIGHT: u32 = 97;
/// The mapping the directory is imported with (and the file is read with).
const MAPPING: [&str; 6] = [
    "--cell-size",
    "4",
    "--height-scale",
    "1.5",
    "--height-offset",
    "-20",
];
/// What `MemoryTilesOptions::for_field` picks for a 129 x 97 field: 8-cell tiles and
/// blocks, so the in-memory `streamed` and the imported directory cut the same blocks.
const TILE_SIZE: &str = "8";

/// A raw `f32` terrain with ridges at several scales, and its import; returns the file and
/// the directory.
fn terrain(dir: &Path) -> (PathBuf, PathBuf) {
    let file = dir.join("terrain.f32");
    let mut bytes = Vec::new();
    for row in 0..HEIGHT {
        for col in 0..WIDTH {
            let (x, z) = (col as f32, row as f32);
            let value = 60.0 * (x * 0.05).sin() * (z * 0.07).cos()
                + 9.0 * (x * 0.31 + z * 0.17).sin()
                + 2.0 * ((col * 7 + row * 3) % 5) as f32;
            bytes.extend_from_slice(&value.to_le_bytes());
        }
    }
    std::fs::write(&file, bytes).expect("writable");
    let tiles = dir.join("tiles");
    let mut import = vec![
        "import",
        file.to_str().expect("UTF-8"),
        "--raw-size",
        "129x97",
        "--tile-size",
        TILE_SIZE,
        "--block-size",
        TILE_SIZE,
        "--out",
        tiles.to_str().expect("UTF-8"),
    ];
    import.extend_from_slice(&MAPPING);
    ok(&import);
    (file, tiles)
}

/// The algorithms that stream a directory.
const STREAMING: [&str; 2] = ["streamed", "streamed-quadtree"];

/// `mesh TERRAIN --algo ALGO --pixel-error 1 --out OUT` from the test camera.
fn streamed_mesh<'a>(algo: &'a str, terrain: &'a str, out: &'a str) -> Vec<&'a str> {
    let mut args = vec![
        "mesh",
        terrain,
        "--algo",
        algo,
        "--pixel-error",
        "1",
        "--out",
        out,
    ];
    args.extend_from_slice(&CAMERA);
    args
}

const CAMERA: [&str; 8] = [
    "--eye",
    "-40,160,-40",
    "--target",
    "250,0,200",
    "--fov-y",
    "60",
    "--size",
    "320x240",
];

/// The settled streamed mesh of the directory is exactly the in-memory streamed mesh of the
/// file: same tiles, same block bounds, same selection, vertex for vertex; also under other
/// mapping flags. For both streaming algorithms.
#[test]
fn the_settled_streamed_mesh_is_the_in_memory_mesh() {
    for algo in STREAMING {
        settled_mesh_is_the_in_memory_mesh(algo);
    }
}

fn settled_mesh_is_the_in_memory_mesh(algo: &str) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, tiles) = terrain(dir.path());
    let (from_file, from_dir) = (dir.path().join("file.obj"), dir.path().join("dir.obj"));
    let (file, tiles) = (
        file.to_str().expect("UTF-8"),
        tiles.to_str().expect("UTF-8"),
    );
    let (from_file, from_dir) = (
        from_file.to_str().expect("UTF-8"),
        from_dir.to_str().expect("UTF-8"),
    );
    // The file and the directory meshed under the same flags: same OBJ, byte for byte.
    let same_mesh = |file_flags: &[&str], dir_flags: &[&str]| {
        let mut args = streamed_mesh(algo, file, from_file);
        args.extend_from_slice(&["--raw-size", "129x97"]);
        args.extend_from_slice(file_flags);
        let in_memory = last_json(&ok(&args).0);
        let mut args = streamed_mesh(algo, tiles, from_dir);
        args.extend_from_slice(&["--cache-mb", "1"]);
        args.extend_from_slice(dir_flags);
        let streamed = last_json(&ok(&args).0);
        let unit = if algo == "streamed" {
            "blocks"
        } else {
            "nodes"
        };
        let held_back = &streamed["streamed"][format!("{unit}_held_back")];
        assert_eq!(held_back, 0, "{streamed}");
        assert_eq!(streamed["tolerance_held"], true, "{streamed}");
        assert_eq!(in_memory["vertices"], streamed["vertices"]);
        assert_eq!(in_memory["triangles"], streamed["triangles"]);
        assert!(streamed["triangles"].as_u64().expect("a count") > 200);
        let (a, b) = (
            std::fs::read_to_string(from_file).expect("written"),
            std::fs::read_to_string(from_dir).expect("written"),
        );
        assert!(a == b, "{algo}: the OBJ files differ under {dir_flags:?}");
        b
    };
    same_mesh(&MAPPING, &[]);

    // Mapping flags apply to a directory as to a file: the directory streamed with new
    // ones draws the file's mesh under the same flags (the tiles hold raw samples).
    let remap = ["--cell-size", "3", "--height-scale", "-2"];
    let file_flags = [&remap[..], &["--height-offset", "-20"]].concat();
    let b = same_mesh(&file_flags, &remap);
    // Drawn on the new 3 m grid.
    let xs: Vec<f32> = b
        .lines()
        .filter_map(|l| l.strip_prefix("v "))
        .map(|v| v.split(' ').next().and_then(|x| x.parse().ok()).expect("x"))
        .collect();
    assert!(xs.iter().all(|x| x % 3.0 == 0.0));
    assert!(xs.iter().any(|x| x % 4.0 != 0.0));
}

/// A flight through a cache far smaller than the terrain: every checked frame is
/// watertight, the measured error is reported, tiles are evicted, and the cache never
/// holds more than its budget.
#[test]
fn a_streamed_flight_passes_the_oracles_within_its_budget() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, tiles) = terrain(dir.path());
    for algo in STREAMING {
        flight_passes_the_oracles_within_its_budget(&tiles, algo);
    }
}

fn flight_passes_the_oracles_within_its_budget(tiles: &Path, algo: &str) {
    let (stdout, _) = ok(&[
        "bench",
        tiles.to_str().expect("UTF-8"),
        "--algo",
        algo,
        "--frames",
        "12",
        "--measure-every",
        "4",
        "--check",
        "--pixel-error",
        "2",
        "--cache-mb",
        "1",
        "--loader-threads",
        "1",
    ]);
    let summary = last_json(&stdout);
    assert_eq!(summary["algorithm"], algo);
    assert_eq!(summary["frames"], 12);
    assert_eq!(summary["defective_frames"], 0, "{summary}");
    assert_eq!(summary["measured_frames"], 3, "{summary}");
    assert!(summary["measured_max_px"].as_f64().is_some(), "{summary}");
    let cache = &summary["cache"];
    assert_eq!(cache["failed_tiles"], 0);
    assert!(cache["loads"].as_u64().expect("a count") > 0);
    assert!(
        cache["peak_resident_mb"].as_f64().expect("MiB") <= 1.0,
        "{summary}"
    );
}

/// A tile whose bytes were damaged on disk: the commands finish, name the tile once on
/// stderr, and draw the coarser level there.
#[test]
fn a_corrupt_tile_is_reported_once_and_the_coarser_level_stands_in() {
    for algo in STREAMING {
        corrupt_tile_is_reported_once(algo);
    }
}

fn corrupt_tile_is_reported_once(algo: &str) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, tiles) = terrain(dir.path());
    // Level-0 tile (1, 1) lies under the camera's view; flip bytes in its payload.
    let damaged = tiles.join("0/1/1.tile");
    let mut bytes = std::fs::read(&damaged).expect("the tile exists");
    let end = bytes.len() - 1;
    for b in &mut bytes[end - 40..end] {
        *b ^= 0x5a;
    }
    std::fs::write(&damaged, bytes).expect("writable");

    let obj = dir.path().join("damaged.obj");
    let mut args = vec![
        "mesh",
        tiles.to_str().expect("UTF-8"),
        "--algo",
        algo,
        "--pixel-error",
        "0.5",
        "--out",
        obj.to_str().expect("UTF-8"),
    ];
    args.extend_from_slice(&CAMERA);
    let (stdout, stderr) = ok(&args);
    let summary = last_json(&stdout);
    let reports: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("coarser level stands in"))
        .collect();
    assert_eq!(reports.len(), 1, "{stderr}");
    assert!(reports[0].contains("1.tile"), "{stderr}");
    assert!(summary["triangles"].as_u64().expect("a count") > 100);
    assert!(obj.is_file());
    // The export says that it does not hold its tolerance there.
    assert_eq!(summary["tolerance_held"], false, "{summary}");
    assert!(
        stderr.contains("the tolerance is not held everywhere"),
        "{stderr}"
    );

    let (stdout, stderr) = ok(&[
        "bench",
        tiles.to_str().expect("UTF-8"),
        "--algo",
        algo,
        "--frames",
        "6",
        "--check",
        "--measure-every",
        "3",
        "--cache-mb",
        "4",
    ]);
    let summary = last_json(&stdout);
    assert_eq!(summary["defective_frames"], 0, "{summary}");
    // The oracle measures both frames, leaving out the tile it cannot read, and says so.
    assert_eq!(summary["measured_frames"], 2, "{summary}");
    assert_eq!(
        summary["frames_with_unreadable_windows_left_out"], 2,
        "{summary}"
    );
    assert!(summary["measured_max_px"].as_f64().is_some(), "{summary}");
    assert!(
        stderr.contains("measured without 1 unreadable windows of level 0"),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .filter(|l| l.contains("coarser level stands in"))
            .count()
            <= 1,
        "{stderr}"
    );
}

/// Flips a byte of level-0 tile (1, 1)'s payload (under the test camera's view).
fn damage_tile(tiles: &Path) {
    let damaged = tiles.join("0/1/1.tile");
    let mut bytes = std::fs::read(&damaged).expect("the tile exists");
    let end = bytes.len() - 1;
    bytes[end - 20] ^= 0x5a;
    std::fs::write(&damaged, bytes).expect("writable");
}

/// Algorithm adaptive's tree built page by page over a damaged tile (the coarser level
/// standing in) is drawn but not kept in its page file, which keeps what it held: a later
/// run would inherit the stand-in after the tile is mended.
#[test]
fn a_tree_built_over_a_damaged_tile_is_not_kept() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, tiles) = terrain(dir.path());
    let kept = dir.path().join("pages.tlap");
    let out = dir.path().join("m.ply");
    let run = |tolerance: &str| {
        let mut args = streamed_mesh(
            "adaptive",
            tiles.to_str().expect("UTF-8"),
            out.to_str().expect("UTF-8"),
        );
        args.extend_from_slice(&["--max-samples", "1000", "--page-frames", "12"]);
        args.extend_from_slice(&["--page-cells", "32", "--build-tolerance", tolerance]);
        args.extend_from_slice(&["--page-file", kept.to_str().expect("UTF-8")]);
        ok(&args).1
    };
    // A file kept for another build tolerance, before the damage.
    assert!(run("3").contains("tree kept"));
    let before = std::fs::read(&kept).expect("kept");
    damage_tile(&tiles);
    let stderr = run("0");
    assert!(stderr.contains("coarser level stands in"), "{stderr}");
    assert!(stderr.contains("not kept"), "{stderr}");
    assert!(out.is_file());
    assert!(std::fs::read(&kept).expect("left") == before);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("readable")
        .map(|e| e.expect("an entry").file_name())
        .collect();
    assert_eq!(left.len(), 4, "{left:?}");
}

/// Loaded whole (not streamed), a directory with an unreadable tile is drawn with the
/// coarser level interpolated there: one warning naming the tile, `tolerance_held` false;
/// `import`, which would write the interpolation as if it were data, refuses it.
#[test]
fn a_loaded_directory_draws_a_coarser_level_where_a_tile_is_unreadable() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, tiles) = terrain(dir.path());
    damage_tile(&tiles);
    let tiles = tiles.to_str().expect("UTF-8");
    let obj = dir.path().join("m.obj");
    let obj = obj.to_str().expect("UTF-8");
    for bound in [
        &["--algo", "quadtree", "--pixel-error", "1"][..],
        &["--algo", "adaptive", "--pixel-error", "1"],
        &["--max-error", "5"],
    ] {
        let mut args = vec!["mesh", tiles, "--out", obj];
        args.extend_from_slice(bound);
        if bound[0] == "--algo" {
            args.extend_from_slice(&CAMERA);
        }
        let (stdout, stderr) = ok(&args);
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("warning:"))
            .collect();
        assert_eq!(warnings.len(), 1, "{bound:?}: {stderr}");
        assert!(
            warnings[0].contains("1/1.tile") && warnings[0].contains("coarser level stands in"),
            "{stderr}"
        );
        let summary = last_json(&stdout);
        assert_eq!(summary["tolerance_held"], false, "{bound:?}: {summary}");
        assert!(summary["triangles"].as_u64().expect("a count") > 100);
    }
    let again = dir.path().join("again");
    let refused = terralod(&["import", tiles, "--out", again.to_str().expect("UTF-8")]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("1/1.tile"), "{stderr}");
}

/// Procedural detail below the stored levels (`--detail-levels`): the settled mesh draws
/// vertices between the stored samples, a flight over it passes the crack checker on every
/// frame and holds its detail tiles, and more levels than the tiles allow are refused.
#[test]
fn procedural_detail_draws_finer_than_the_stored_samples() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, tiles) = terrain(dir.path());
    let out = dir.path().join("detail.obj");
    let mesh = |levels: &str| {
        let (tiles, out) = (tiles.to_str().expect("UTF-8"), out.to_str().expect("UTF-8"));
        let mut args = streamed_mesh("streamed", tiles, out);
        args.extend_from_slice(&["--detail-levels", levels]);
        last_json(&ok(&args).0)
    };
    let stored = mesh("0");
    let detailed = mesh("2");
    assert_eq!(detailed["streamed"]["detail_levels"], 2);
    assert!(
        detailed["streamed"]["detail_tiles"]
            .as_u64()
            .expect("a count")
            > 0
    );
    assert!(detailed["triangles"].as_u64() > stored["triangles"].as_u64());
    // Stored samples are 4 m apart; the detail's finest are 1 m apart.
    let obj = std::fs::read_to_string(&out).expect("written");
    let between = obj
        .lines()
        .filter_map(|l| l.strip_prefix("v "))
        .filter(|v| {
            let x: f32 = v.split(' ').next().and_then(|x| x.parse().ok()).expect("x");
            x % 4.0 != 0.0
        })
        .count();
    assert!(between > 100, "{between} vertices between stored samples");

    let (stdout, _) = ok(&[
        "bench",
        tiles.to_str().expect("UTF-8"),
        "--algo",
        "streamed",
        "--detail-levels",
        "2",
        "--frames",
        "40",
        "--measure-every",
        "20",
        "--check",
    ]);
    let first = stdout.lines().next().expect("a header line");
    assert!(
        first.contains("2 detail levels below (513 x 385 samples, 1 m cells)"),
        "{first}"
    );
    let summary = last_json(&stdout);
    assert_eq!(summary["defective_frames"], 0, "{summary}");
    assert_eq!(summary["measured_frames"], 2, "{summary}");
    let generated = summary["detail"]["generated_tiles"].as_u64();
    assert!(generated.expect("a count") > 0, "{summary}");

    let output = terralod(&[
        "mesh",
        tiles.to_str().expect("UTF-8"),
        "--algo",
        "streamed",
        "--detail-levels",
        "4",
        "--max-error",
        "1",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("detail levels need tiles"), "{stderr}");

    // Where nothing streams, the flag is refused rather than ignored.
    // So is a roughness without detail levels to shape.
    for (algo, flag, value, needle) in [
        (
            "quadtree",
            "--detail-levels",
            "1",
            "--detail-levels applies to",
        ),
        (
            "streamed",
            "--detail-roughness",
            "0.5",
            "--detail-roughness shapes",
        ),
    ] {
        let tiles = tiles.to_str().expect("UTF-8");
        let args = [
            "mesh",
            tiles,
            "--algo",
            algo,
            flag,
            value,
            "--max-error",
            "1",
        ];
        let output = terralod(&args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// `mesh DIR --algo streamed --path`: a walk streams its tiles as it goes; every frame is
/// written, and the last one, settled, is the mesh a single view of that pose exports.
#[test]
fn a_streamed_walk_writes_every_frame_and_settles_on_the_last() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, tiles) = terrain(dir.path());
    let tiles = tiles.to_str().expect("UTF-8");
    let walk = dir.path().join("walk.json");
    let poses: Vec<_> = (0..5)
        .map(|i| {
            let s = i as f32 * 40.0;
            serde_json::json!({"eye": [-40.0 + s, 160.0, -40.0 + 0.5 * s], "target": [250.0, 0.0, 200.0]})
        })
        .collect();
    std::fs::write(&walk, serde_json::to_string(&poses).unwrap()).unwrap();
    let pattern = dir.path().join("f{frame}.obj");
    let single = dir.path().join("single.obj");
    let (walk, pattern, single) = (
        walk.to_str().expect("UTF-8"),
        pattern.to_str().expect("UTF-8"),
        single.to_str().expect("UTF-8"),
    );
    let streamed = [
        "mesh",
        tiles,
        "--algo",
        "streamed",
        "--pixel-error",
        "1",
        "--fov-y",
        "60",
        "--size",
        "320x240",
        "--cache-mb",
        "1",
    ];
    let args = [&streamed[..], &["--path", walk, "--out", pattern]].concat();
    let (stdout, stderr) = ok(&args);
    let summary = last_json(&stdout);
    assert_eq!(summary["path"]["files_written"], 5, "{summary}");
    // The first frame comes before any tile below the coarsest is read: it draws coarser
    // than τ asks, and the summary says so.
    let held_back = summary["path"]["frames_held_back"]
        .as_u64()
        .expect("a count");
    assert!((1..=4).contains(&held_back), "{summary}");
    assert_eq!(summary["tolerance_held"], false, "{summary}");
    assert!(
        stderr.contains(&format!(
            "{held_back} frames of the walk drew ground coarser"
        )),
        "{stderr}"
    );
    for frame in 0..5 {
        let text = std::fs::read_to_string(dir.path().join(format!("f{frame}.obj")))
            .expect("every frame written");
        assert!(text.lines().any(|l| l.starts_with("f ")), "frame {frame}");
    }
    let last_pose = [
        "--eye",
        "120,160,40",
        "--target",
        "250,0,200",
        "--out",
        single,
    ];
    let args = [&streamed[..], &last_pose].concat();
    let alone = last_json(&ok(&args).0);
    assert_eq!(alone["triangles"], summary["triangles"]);
    assert!(
        std::fs::read(dir.path().join("f4.obj")).unwrap() == std::fs::read(single).unwrap(),
        "the walk's settled last frame differs from the single view"
    );
}

/// A cache too small for what one view needs is named at once (the settling export would
/// otherwise evict and reload the same tiles until its time limit), and a cache that holds
/// the view settles.
#[test]
fn a_cache_too_small_for_the_view_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let side = 513u32;
    let file = dir.path().join("rough.f32");
    let mut bytes = Vec::new();
    for row in 0..side {
        for col in 0..side {
            let value =
                40.0 * ((col as f32) * 0.03).sin() + 25.0 * ((col * 7 + row * 3) % 5) as f32;
            bytes.extend_from_slice(&value.to_le_bytes());
        }
    }
    std::fs::write(&file, bytes).expect("writable");
    let tiles = dir.path().join("tiles");
    let (file, tiles) = (
        file.to_str().expect("UTF-8"),
        tiles.to_str().expect("UTF-8"),
    );
    ok(&[
        "import",
        file,
        "--raw-size",
        "513x513",
        "--tile-size",
        "64",
        "--out",
        tiles,
    ]);
    let export = |cache_mb: &str| {
        terralod(&[
            "mesh",
            tiles,
            "--algo",
            "streamed",
            "--max-error",
            "1",
            "--cache-mb",
            cache_mb,
            "--loader-threads",
            "1",
        ])
    };
    let started = std::time::Instant::now();
    let output = export("1");
    let message = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(
        message.contains("--cache-mb is too small for this view"),
        "{message}"
    );
    assert!(
        started.elapsed().as_secs() < 60,
        "refused only after {:?}",
        started.elapsed()
    );
    let output = export("4");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The streamed bench's error oracle reads level 0 tile by tile (it never holds the
/// terrain, so it measures terrains of any size): on a slow paced flight, a measured frame
/// drawn with no block held back is within τ, and the cold start's frame, drawn from the
/// coarsest block, is far beyond it (infinite here, written as null: its drawn points reach
/// behind the near plane), so the oracle does see the level-0 samples.
#[test]
fn the_streamed_oracle_reads_level_0_by_tiles_and_holds_tau() {
    for algo in STREAMING {
        oracle_holds_tau(algo);
    }
}

fn oracle_holds_tau(algo: &str) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, tiles) = terrain(dir.path());
    let json = dir.path().join("flight.json");
    ok(&[
        "bench",
        tiles.to_str().expect("UTF-8"),
        "--algo",
        algo,
        "--speed",
        "2",
        "--fps",
        "20",
        "--frames",
        "60",
        "--measure-every",
        "59",
        "--pixel-error",
        "1",
        "--size",
        "320x240",
        "--json",
        json.to_str().expect("UTF-8"),
    ]);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("written")).expect("JSON");
    let frames = report["per_frame"].as_array().expect("per-frame figures");
    // Three seconds at 20 fps: the background loads (milliseconds each) have landed by the
    // last frame, also on a machine whose cores are busy with other tests.
    let (first, last) = (&frames[0], &frames[59]);
    let held_back = if algo == "streamed" {
        "blocks_held_back"
    } else {
        "nodes_held_back"
    };
    assert!(first[held_back].as_u64().expect("a count") > 0, "{first}");
    assert!(
        first["measured_px"].as_f64().is_none_or(|px| px > 1.0),
        "{first}"
    );
    assert_eq!(report["measured_frames"], 2, "{report}");
    assert_eq!(last[held_back], 0, "{algo}: {last}");
    let measured = last["measured_px"].as_f64().expect("measured");
    assert!(measured > 0.0 && measured <= 1.0, "{algo}: {last}");
}

/// An algorithm that loads the directory whole is refused past `--max-samples`, with the
/// streaming algorithms named; `streamed-quadtree` streams the same directory under the
/// same limit.
#[test]
fn loading_a_directory_past_the_limit_points_to_the_streaming_algorithms() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, tiles) = terrain(dir.path());
    let out = dir.path().join("m.obj");
    let (tiles, out) = (tiles.to_str().expect("UTF-8"), out.to_str().expect("UTF-8"));
    let mesh = |algo: &'static str| {
        let mut args = streamed_mesh(algo, tiles, out);
        args.extend_from_slice(&["--max-samples", "1000"]);
        terralod(&args)
    };
    let refused = mesh("quadtree");
    let message = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert_eq!(refused.status.code(), Some(1), "{message}");
    assert!(message.contains("over the limit of 1000"), "{message}");
    assert!(
        message.contains("a streaming algorithm (streamed, streamed-quadtree) streams"),
        "{message}"
    );
    let streamed = mesh("streamed-quadtree");
    assert!(
        streamed.status.success(),
        "{}",
        String::from_utf8_lossy(&streamed.stderr)
    );
}

/// Given no `--algo`, a directory whose finest level is over `--max-samples`, or a run
/// with a flag of the tile cache, streams with `streamed-quadtree` and says so, giving
/// the mesh `--algo streamed-quadtree` gives; a directory that fits, a named algorithm
/// and a view-independent bound keep their usual algorithm.
#[test]
fn a_directory_too_large_to_load_streams_when_no_algorithm_is_named() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_, tiles) = terrain(dir.path());
    let tiles = tiles.to_str().expect("UTF-8");
    let path = |name: &str| dir.path().join(name).to_str().expect("UTF-8").to_owned();
    let mesh = |out: &str, extra: &[&str]| {
        let mut args = vec!["mesh", tiles, "--pixel-error", "1", "--out", out];
        args.extend_from_slice(&CAMERA);
        args.extend_from_slice(extra);
        terralod(&args)
    };
    let note = "streaming it with --algo streamed-quadtree";

    let (named, defaulted) = (path("named.obj"), path("defaulted.obj"));
    let output = mesh(&named, &["--algo", "streamed-quadtree"]);
    assert!(output.status.success());
    let output = mesh(&defaulted, &["--max-samples", "1000"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "its finest level has {} samples, over --max-samples 1000: {note}",
            WIDTH * HEIGHT
        )),
        "{stderr}"
    );
    let stats = last_json(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(stats["algorithm"], "streamed-quadtree", "{stats}");
    assert_eq!(
        std::fs::read(&named).expect("written"),
        std::fs::read(&defaulted).expect("written")
    );

    let output = mesh(&path("cached.obj"), &["--cache-mb", "16"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("--cache-mb is given: {note}")),
        "{stderr}"
    );

    // A directory that fits loads whole, with the usual default.
    let output = mesh(&path("loaded.obj"), &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("note:"), "{stderr}");
    assert_eq!(
        last_json(&String::from_utf8_lossy(&output.stdout))["algorithm"],
        "quadtree"
    );
    // A named algorithm is never replaced: refused past the limit, as before.
    let output = mesh(
        &path("named.obj"),
        &["--algo", "quadtree", "--max-samples", "1000"],
    );
    assert_eq!(output.status.code(), Some(1));
    // Nor is the view-independent default (no streaming algorithm takes --max-error).
    let output = terralod(&[
        "mesh",
        tiles,
        "--max-error",
        "5",
        "--max-samples",
        "1000",
        "--out",
        &path("independent.obj"),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("over the limit of 1000"), "{stderr}");

    // `bench` flies the same default.
    let (stdout, stderr) = ok(&[
        "bench",
        tiles,
        "--frames",
        "3",
        "--measure-every",
        "0",
        "--cache-mb",
        "16",
    ]);
    assert!(stderr.contains(note), "{stderr}");
    assert_eq!(last_json(&stdout)["algorithm"], "streamed-quadtree");
}

/// `--algo adaptive` over a directory builds its tree from the tiles: its export is the
/// file's, byte for byte (listed vertices both ways). With a local detail (which only a
/// tree built from a loaded terrain takes) the directory's finest level is loaded, as it
/// is past `--max-samples`, where the load refuses it unless the tree is built page by
/// page (`--page-frames`).
#[test]
fn adaptive_over_a_directory_exports_what_it_does_over_the_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, tiles) = terrain(dir.path());
    let (file, tiles) = (
        file.to_str().expect("UTF-8"),
        tiles.to_str().expect("UTF-8"),
    );
    let from_file = dir.path().join("file.ply");
    let from_tiles = dir.path().join("tiles.ply");
    let mut args = streamed_mesh("adaptive", file, from_file.to_str().expect("UTF-8"));
    args.extend_from_slice(&["--raw-size", "129x97", "--list-vertices"]);
    args.extend_from_slice(&MAPPING);
    ok(&args);
    let args = streamed_mesh("adaptive", tiles, from_tiles.to_str().expect("UTF-8"));
    let summary = last_json(&ok(&args).0);
    assert_eq!(summary["tolerance_held"], true, "{summary}");
    // Built from the tiles, not from the loaded level (whose export would be the same).
    assert!(summary["streamed"].is_object(), "{summary}");
    let (a, b) = (
        std::fs::read(&from_file).expect("written"),
        std::fs::read(&from_tiles).expect("written"),
    );
    assert!(a.len() > 1000);
    assert!(a == b, "the exports differ");
    let detail = dir.path().join("detail.png");
    let pixels: Vec<u8> = (0..17 * 17).map(|i| (i % 13) as u8).collect();
    image::save_buffer(&detail, &pixels, 17, 17, image::ColorType::L8).expect("writable");
    let detailed_out = dir.path().join("detailed.ply");
    let mut args = streamed_mesh("adaptive", tiles, detailed_out.to_str().expect("UTF-8"));
    let detail = detail.to_str().expect("UTF-8");
    args.extend_from_slice(&["--detail", detail, "--detail-origin", "0,0"]);
    args.extend_from_slice(&["--detail-cell-size", "1"]);
    let summary = last_json(&ok(&args).0);
    assert!(summary["detail"].is_object(), "{summary}");
    assert!(summary.get("streamed").is_none(), "{summary}");
    let refused_out = dir.path().join("refused.ply");
    let mut args = streamed_mesh("adaptive", tiles, refused_out.to_str().expect("UTF-8"));
    args.extend_from_slice(&["--max-samples", "1000"]);
    let output = terralod(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--max-samples"), "{stderr}");
    assert!(stderr.contains("--page-frames"), "{stderr}");
    assert!(!refused_out.exists());
    // With frames for pages the tree is built page by page to disk, never whole, so the
    // limit does not apply: the same export.
    let paged_out = dir.path().join("paged.ply");
    let mut args = streamed_mesh("adaptive", tiles, paged_out.to_str().expect("UTF-8"));
    args.extend_from_slice(&["--max-samples", "1000", "--page-frames", "12"]);
    args.extend_from_slice(&["--page-cells", "32"]);
    let summary = last_json(&ok(&args).0);
    assert!(summary["streamed"].is_object(), "{summary}");
    assert!(
        std::fs::read(&paged_out).expect("written") == a,
        "the paged export differs"
    );
    // Kept in a page file, the tree is read back by the next run instead of built: the
    // same export each time; a kept file of another build is built again and replaced; a
    // file that is not a kept page file is refused and left alone, as is one inside the
    // imported directory; without frames there is nothing to keep.
    let kept = dir.path().join("pages.tlap");
    let kept_text = kept.to_str().expect("UTF-8");
    let paged_text = paged_out.to_str().expect("UTF-8");
    let kept_run = |tolerance: &str, page_file: &str| -> Output {
        let mut args = streamed_mesh("adaptive", tiles, paged_text);
        args.extend_from_slice(&["--max-samples", "1000", "--page-frames", "12"]);
        args.extend_from_slice(&["--page-cells", "32", "--build-tolerance", tolerance]);
        args.extend_from_slice(&["--page-file", page_file]);
        terralod(&args)
    };
    for (run, (tolerance, note)) in [
        ("0", "tree kept"),
        ("0", "tree read back"),
        ("2", "other options"),
        ("0", "other options"),
        ("0", "tree read back"),
    ]
    .into_iter()
    .enumerate()
    {
        let output = kept_run(tolerance, kept_text);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "run {run}: {stderr}");
        assert!(stderr.contains(note), "run {run}: {stderr}");
        if tolerance == "0" {
            assert!(
                std::fs::read(&paged_out).expect("written") == a,
                "run {run}: the export differs"
            );
        }
    }
    std::fs::write(&kept, "not pages").expect("writable");
    let inside = format!("{tiles}/pages.tlap");
    for (page_file, why) in [(kept_text, "not a kept page file"), (&inside, "inside")] {
        let output = kept_run("0", page_file);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(why), "{stderr}");
    }
    assert_eq!(std::fs::read(&kept).expect("left"), b"not pages");
    let mut args = streamed_mesh("adaptive", tiles, paged_text);
    args.extend_from_slice(&["--page-file", kept_text]);
    let output = terralod(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--page-frames"), "{stderr}");
    // A paged flight reports its build and the pages it read back from the page file
    // (paced, half a second, so the loader thread has the time a real flight gives it).
    let mut args = vec!["bench", tiles, "--algo", "adaptive", "--frames", "30"];
    args.extend_from_slice(&["--speed", "100", "--measure-every", "0"]);
    args.extend_from_slice(&["--max-samples", "1000"]);
    args.extend_from_slice(&["--page-frames", "12", "--page-cells", "32"]);
    let summary = last_json(&ok(&args).0);
    assert!(
        summary["build_ms"].as_f64().is_some_and(|ms| ms > 0.0),
        "{summary}"
    );
    assert!(
        summary["state_mb"].as_f64().is_some_and(|mb| mb > 0.0),
        "{summary}"
    );
    let reads = &summary["background_reads"];
    assert!(reads["loaded"].as_u64().is_some_and(|n| n > 0), "{summary}");
    assert!(
        reads["bytes_read"].as_u64().is_some_and(|n| n > 0),
        "{summary}"
    );
    assert_eq!(reads["failed"], 0, "{summary}");
    // Pages larger than the terrain: the tree would have none and be built whole, so the
    // limit applies again.
    let unpaged_out = dir.path().join("unpaged.ply");
    let mut args = streamed_mesh("adaptive", tiles, unpaged_out.to_str().expect("UTF-8"));
    args.extend_from_slice(&["--max-samples", "1000", "--page-frames", "12"]);
    args.extend_from_slice(&["--page-cells", "256"]);
    let output = terralod(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--max-samples"), "{stderr}");
    assert!(!unpaged_out.exists());
}
