//! End-to-end tests of `terralod bench`: a short flight over a small terrain with the crack
//! checker and the error oracle on, its JSON and plots, a path file, and bad requests.

use std::process::{Command, Output};

fn terralod(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args(args)
        .output()
        .expect("the terralod binary runs")
}

fn small_terrain(dir: &std::path::Path) -> String {
    let path = dir.join("small.png");
    let output = terralod(&["generate", "--size", "129", "--out", path.to_str().unwrap()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    path.display().to_string()
}

#[test]
fn a_short_flight_is_crack_free_within_tau_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let terrain = small_terrain(dir.path());
    let json = dir.path().join("bench.json");
    let plots = dir.path().join("plots");
    let output = terralod(&[
        "bench",
        &terrain,
        "--cell-size",
        "240",
        "--height-scale",
        "0.04",
        "--frames",
        "24",
        "--measure-every",
        "4",
        "--check",
        "--size",
        "320x180",
        "--json",
        json.to_str().unwrap(),
        "--plots",
        plots.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("| quadtree |"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &report["algorithms"][0];
    assert_eq!(run["algorithm"], "quadtree");
    assert_eq!(run["frames"].as_array().unwrap().len(), 24);
    assert_eq!(run["defective_frames"], 0);
    assert_eq!(run["measured_frames"], 6);
    let measured = run["measured_max_px"].as_f64().unwrap();
    assert!(measured <= 1.0, "measured {measured} px > tau");
    assert!(run["triangles"]["median"].as_f64().unwrap() > 0.0);
    // Popping is measured on the measured frames that have a previous frame.
    let frames = run["frames"].as_array().unwrap();
    assert!(frames[0]["popping_px"].is_null());
    let popping: Vec<f64> = [4, 8, 12, 16, 20]
        .map(|i| frames[i]["popping_px"].as_f64().expect("measured"))
        .to_vec();
    let max = run["popping_px"].as_f64().unwrap();
    assert!(
        popping
            .iter()
            .all(|p| p.is_finite() && *p >= 0.0 && *p <= max)
    );
    assert_eq!(popping.iter().copied().fold(0.0, f64::max), max);
    for plot in ["triangles.svg", "select-time.svg"] {
        let svg = std::fs::read_to_string(plots.join(plot)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("quadtree"),
            "{plot}"
        );
    }
}

#[test]
fn a_path_file_is_flown_and_bad_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let terrain = small_terrain(dir.path());
    // A valid terrain whose camera distances overflow f32 (cells 1e30 apart).
    let vast = dir.path().join("vast.asc");
    std::fs::write(
        &vast,
        "ncols 4\nnrows 4\nxllcorner 0\nyllcorner 0\ncellsize 1e30\n\
         1 2 3 4\n1 2 3 4\n1 2 3 4\n1 2 3 4\n",
    )
    .unwrap();
    let vast = vast.display().to_string();
    let path = dir.path().join("path.json");
    std::fs::write(
        &path,
        r#"[{"eye": [200, 3000, 200], "target": [2000, 0, 2000]},
            {"eye": [300, 3000, 300], "target": [2000, 0, 2000]}]"#,
    )
    .unwrap();
    let output = terralod(&["bench", &terrain, "--path", path.to_str().unwrap()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let last = String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let summary: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(summary["frames"], 2);

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"[{"eye": [1, 2, 3], "target": [1, 2, 3]}]"#).unwrap();
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{not json").unwrap();
    // An unknown algorithm is a bad flag value (exit 2), naming the registered ones.
    let output = terralod(&["bench", &terrain, "--algo", "nope"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown algorithm 'nope' (available: quadtree,"),
        "{stderr}"
    );
    for (args, message) in [
        (
            vec!["bench", &terrain, "--path", bad.to_str().unwrap()],
            "not usable",
        ),
        (
            vec!["bench", &terrain, "--path", garbage.to_str().unwrap()],
            "not a camera path",
        ),
        (vec!["bench", &terrain, "--scaling"], "--scaling generates"),
    ] {
        let output = terralod(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    // Refused before anything is flown: outputs that name an input or a missing folder,
    // scaling sizes that cannot all run, a frame rate whose wait is no duration.
    let before = std::fs::read(&path).unwrap();
    let missing = dir.path().join("no").join("x.json");
    let path_arg = path.to_str().unwrap();
    for (args, code, message) in [
        (
            vec!["bench", &terrain, "--path", path_arg, "--json", path_arg],
            1,
            "which this command reads",
        ),
        (
            vec!["bench", &terrain, "--json", missing.to_str().unwrap()],
            1,
            "does not exist",
        ),
        (
            vec!["bench", "--scaling", "--scaling-sizes", "65,2"],
            2,
            "2 is too small",
        ),
        (
            vec![
                "bench",
                "--scaling",
                "--same-surface",
                "--scaling-sizes",
                "65,100",
            ],
            1,
            "100 is not the first size (65) refined",
        ),
        (
            vec!["bench", &terrain, "--speed", "10", "--fps", "1e-30"],
            2,
            "frame rate",
        ),
        (vec!["bench", &terrain, "--fps", "30"], 2, "--speed"),
        (
            vec!["bench", &vast, "--frames", "3"],
            1,
            "overflows f32: lower --cell-size",
        ),
        // Every frame keeps its figures: a path of 4 G frames would abort on allocation.
        (
            vec!["bench", &terrain, "--frames", "4294967295"],
            2,
            "1..=1000000",
        ),
        (
            vec!["bench", &terrain, "--scratch-every", "2", "--frames", "0"],
            2,
            "--frames",
        ),
        (
            vec!["bench", &terrain, "--pixel-error", "0"],
            2,
            "not greater than 0",
        ),
        (
            vec![
                "bench",
                &terrain,
                "--algo",
                "adaptive",
                "--page-frames",
                "16",
                "--scratch-every",
                "5",
            ],
            1,
            "not with --page-frames",
        ),
    ] {
        let started = std::time::Instant::now();
        let output = terralod(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(
            output.stdout.is_empty(),
            "{args:?} ran: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(
            started.elapsed().as_secs() < 30,
            "{args:?} was refused late"
        );
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// `--scaling` reports what its oracles found at every size, in the text and the JSON: the
/// measured projected error (within τ) and, with `--check`, the defective frames (none).
#[test]
fn scaling_reports_its_oracles() {
    let output = terralod(&[
        "bench",
        "--scaling",
        "--scaling-sizes",
        "33,65",
        "--algo",
        "quadtree",
        "--frames",
        "6",
        "--measure-every",
        "3",
        "--check",
        "--size",
        "320x180",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(" quadtree "))
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for line in lines {
        assert!(line.contains("measured px max"), "{line}");
        assert!(line.contains("defective frames 0"), "{line}");
    }
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let rows = summary["scaling"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert_eq!(row["defective_frames"], 0, "{row}");
        assert_eq!(row["measured_frames"], 2, "{row}");
        let measured = row["measured_max_px"].as_f64().unwrap();
        assert!(measured <= 1.0, "{row}");
    }
}

/// `--scratch-every` selects its frames again with fresh instances: every registered
/// algorithm whose output is a function of the view draws the same mesh fresh as carried
/// (algorithm A's incremental = fresh guarantee, on the bench path), and the times of both
/// are reported.
#[test]
fn fresh_selections_on_the_path_equal_the_carried_ones() {
    let dir = tempfile::tempdir().unwrap();
    let terrain = small_terrain(dir.path());
    let json = dir.path().join("bench.json");
    let output = terralod(&[
        "bench",
        &terrain,
        "--cell-size",
        "240",
        "--height-scale",
        "0.04",
        "--algo",
        "adaptive",
        "--algo",
        "quadtree",
        "--algo",
        "bintree",
        "--frames",
        "13",
        "--scratch-every",
        "4",
        "--measure-every",
        "0",
        "--size",
        "320x180",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for run in report["algorithms"].as_array().unwrap() {
        let name = run["algorithm"].as_str().unwrap();
        assert!(
            stdout.contains(&format!("{name}: from scratch on 3 frames")),
            "{stdout}"
        );
        let scratch = &run["scratch"];
        assert_eq!(scratch["frames"], 3, "{name}");
        assert_eq!(scratch["differing_frames"], 0, "{name}");
        assert!(scratch["scratch_ms"]["median"].as_f64().unwrap() > 0.0);
        let frames = run["frames"].as_array().unwrap();
        let with_scratch: Vec<usize> = (0..frames.len())
            .filter(|&i| !frames[i]["scratch"].is_null())
            .collect();
        assert_eq!(with_scratch, [4, 8, 12], "{name}");
    }
}

/// `--page-frames` with fewer frames than the flight asks for: every frame crack-free,
/// the frames that held ground back counted, and how near the camera that ground came
/// reported per frame and as a median (in the text, the JSON and its last line).
#[test]
fn a_paged_flight_reports_how_near_ground_was_held_back() {
    let dir = tempfile::tempdir().unwrap();
    let terrain = small_terrain(dir.path());
    let json = dir.path().join("bench.json");
    let output = terralod(&[
        "bench",
        &terrain,
        "--cell-size",
        "240",
        "--height-scale",
        "0.04",
        "--algo",
        "adaptive",
        "--page-cells",
        "8",
        "--page-frames",
        "12",
        "--frames",
        "24",
        "--measure-every",
        "0",
        "--check",
        "--size",
        "320x180",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &report["algorithms"][0];
    assert_eq!(run["defective_frames"], 0, "{stdout}");
    let held = run["held_back_frames"].as_u64().unwrap();
    assert!(held > 0, "12 frames held every page: {stdout}");
    let frames = run["frames"].as_array().unwrap();
    let nearest: Vec<f64> = frames
        .iter()
        .filter_map(|f| f["nearest_held_back_m"].as_f64())
        .collect();
    assert_eq!(
        nearest.len() as u64,
        held,
        "a distance per frame holding back"
    );
    assert!(nearest.iter().all(|&d| d >= 0.0 && d.is_finite()));
    let median = run["nearest_held_back_median_m"].as_f64().unwrap();
    assert!(nearest.contains(&median));
    assert!(stdout.contains("nearest held back median"), "{stdout}");
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        summary["algorithms"][0]["nearest_held_back_median_m"],
        median
    );
}

/// The plots and the JSON of a run appear together or not at all: when the JSON cannot be
/// written (a full device), the plots already drawn are not moved into place, and the
/// plots of an earlier run are left as they were, with nothing staged left behind.
#[cfg(target_os = "linux")]
#[test]
fn a_run_whose_json_fails_leaves_the_earlier_plots() {
    let dir = tempfile::tempdir().unwrap();
    let terrain = small_terrain(dir.path());
    let plots = dir.path().join("plots");
    std::fs::create_dir(&plots).unwrap();
    for name in ["triangles.svg", "select-time.svg"] {
        std::fs::write(plots.join(name), "earlier").unwrap();
    }
    let json = dir.path().join("bench.json");
    std::os::unix::fs::symlink("/dev/full", &json).unwrap();
    let output = terralod(&[
        "bench",
        &terrain,
        "--algo",
        "quadtree",
        "--frames",
        "3",
        "--measure-every",
        "0",
        "--json",
        json.to_str().unwrap(),
        "--plots",
        plots.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    // Refused at the write, after the flight and the plots.
    assert!(
        stderr.contains("bench.json: cannot write: No space left"),
        "{stderr}"
    );
    let mut names: Vec<String> = std::fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["select-time.svg", "triangles.svg"]);
    for name in names {
        assert_eq!(
            std::fs::read_to_string(plots.join(&name)).unwrap(),
            "earlier"
        );
    }
}
