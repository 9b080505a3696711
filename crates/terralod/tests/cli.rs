//! End-to-end tests of the `terralod` binary: exit codes, messages, files written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn terralod(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args(args)
        .output()
        .expect("the terralod binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs a command that must succeed and returns its stdout.
fn ok(args: &[&str]) -> String {
    let output = terralod(args);
    assert!(
        output.status.success(),
        "terralod {args:?} failed: {}",
        stderr(&output)
    );
    stdout(&output)
}

/// Runs a command that must fail with exit code 1 and one line on stderr naming `needle`.
fn fails_naming(args: &[&str], needle: &str) -> String {
    let output = terralod(args);
    assert_eq!(
        output.status.code(),
        Some(1),
        "terralod {args:?}: {}",
        stderr(&output)
    );
    let message = stderr(&output);
    let lines: Vec<&str> = message.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {message}");
    assert!(lines[0].starts_with("error: "), "{message}");
    assert!(
        message.contains(needle),
        "'{needle}' missing from: {message}"
    );
    message
}

fn shared_data(name: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(name);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("SKIPPED: {} is absent", path.display());
        None
    }
}

fn info_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["info", "--json"];
    all.extend_from_slice(args);
    let out = ok(&all);
    serde_json::from_str(out.lines().last().expect("a JSON line")).expect("valid JSON")
}

#[test]
fn help_and_version() {
    assert!(ok(&["--help"]).contains("generate"));
    assert!(ok(&["--version"]).contains(env!("CARGO_PKG_VERSION")));
    assert!(ok(&["info", "--help"]).contains("--height-scale"));
    let output = terralod(&["info", "--no-such-flag"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn generate_then_info_round_trips_and_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("t.png");
    let f32_path = dir.path().join("t.f32");
    let png_s = png.to_str().unwrap();
    let f32_s = f32_path.to_str().unwrap();
    let text = ok(&[
        "generate",
        "--size",
        "65",
        "--seed",
        "7",
        "--cell-size",
        "10",
        "--out",
        png_s,
    ]);
    assert!(text.contains("65 x 65"), "{text}");
    ok(&[
        "generate",
        "--size",
        "65",
        "--seed",
        "7",
        "--cell-size",
        "10",
        "--out",
        f32_s,
    ]);
    let first = std::fs::read(&png).unwrap();
    ok(&[
        "generate",
        "--size",
        "65",
        "--seed",
        "7",
        "--cell-size",
        "10",
        "--out",
        png_s,
    ]);
    assert_eq!(first, std::fs::read(&png).unwrap(), "same seed, same bytes");

    let from_png = info_json(&[png_s]);
    assert_eq!(from_png["width"], 65);
    assert_eq!(from_png["height"], 65);
    assert_eq!(from_png["stored_sample_type"], "u16");
    let from_f32 = info_json(&[f32_s, "--cell-size", "10", "--height-scale", "2"]);
    assert_eq!(from_f32["width"], 65);
    assert_eq!(from_f32["cell_size"], 10.0);
    assert_eq!(from_f32["height_scale"], 2.0);
    let (lo, hi) = (
        from_f32["world_min"].as_f64().unwrap(),
        from_f32["world_max"].as_f64().unwrap(),
    );
    assert!(hi > lo, "a generated terrain has relief: {lo} .. {hi}");
}

#[test]
fn builtin_terrain_needs_no_file() {
    let report = info_json(&[]);
    assert_eq!(report["format"], "procedural");
    assert!(report["width"].as_u64().unwrap() >= 257);
}

#[test]
fn bad_input_gets_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.png");
    fails_naming(&["info", missing.to_str().unwrap()], "missing.png");
    fails_naming(
        &["info", dir.path().to_str().unwrap()],
        &dir.path().display().to_string(),
    );
    let garbage = dir.path().join("garbage.png");
    std::fs::write(&garbage, b"\x89PNG\r\n\x1a\n not really a png").unwrap();
    fails_naming(&["info", garbage.to_str().unwrap()], "garbage.png");
    let empty = dir.path().join("empty.tif");
    std::fs::write(&empty, b"").unwrap();
    fails_naming(&["info", empty.to_str().unwrap()], "empty.tif");
    let unknown = dir.path().join("notes.txt");
    std::fs::write(&unknown, b"hello").unwrap();
    fails_naming(&["info", unknown.to_str().unwrap()], "notes.txt");
    // A raw file whose length is no square and no size given.
    let raw = dir.path().join("odd.r16");
    std::fs::write(&raw, [0u8; 6]).unwrap();
    fails_naming(&["info", raw.to_str().unwrap()], "odd.r16");
    // A raw file claiming more samples than the limit.
    std::fs::write(&raw, [0u8; 8]).unwrap();
    fails_naming(
        &[
            "info",
            raw.to_str().unwrap(),
            "--raw-size",
            "1000000x1000000",
        ],
        "odd.r16",
    );
    // A mapping that overflows f32 for this file's values.
    std::fs::write(&raw, [0u8, 0, 0, 0, 0, 0, 0xff, 0xff]).unwrap();
    fails_naming(
        &["info", raw.to_str().unwrap(), "--height-scale", "1e34"],
        "odd.r16",
    );
    // Flags the file's format never reads are refused, not ignored.
    let png = dir.path().join("small.png");
    let pixels: Vec<u8> = (0..16 * 16).map(|i| (i % 200) as u8).collect();
    image::save_buffer(&png, &pixels, 16, 16, image::ColorType::L8).unwrap();
    let png = png.to_str().unwrap();
    ok(&["info", png]);
    for (flag, value) in [("--raw-size", "16x16"), ("--byte-order", "big")] {
        let message = fails_naming(&["info", png, flag, value], "small.png");
        assert!(
            message.contains(&format!("{flag} does not apply to a png file")),
            "{message}"
        );
    }
    let message = fails_naming(
        &["info", raw.to_str().unwrap(), "--encoding", "terrain-rgb"],
        "odd.r16",
    );
    assert!(message.contains("--encoding does not apply"), "{message}");
}

/// Exits with code 2 (a usage error, as clap reports it) and names the flag.
fn usage_error(args: &[&str], flag: &str) {
    let output = terralod(args);
    assert_eq!(
        output.status.code(),
        Some(2),
        "terralod {args:?}: {}",
        stderr(&output)
    );
    assert!(stderr(&output).contains(flag), "{}", stderr(&output));
}

/// Flag values no mapping or generator can use (`--cell-size nan`, `--height-scale 0`,
/// `--max-samples 0`, `generate --size 1`) were accepted by the parser and failed later
/// as bad input (exit 1, with a `WorldMapping { .. }` dump); they are usage errors now.
#[test]
fn unusable_flag_values_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("flat.r16");
    std::fs::write(&raw, [0u8; 8]).unwrap();
    let raw = raw.to_str().unwrap();
    for (flag, value) in [
        ("--cell-size", "0"),
        ("--cell-size", "-1"),
        ("--cell-size", "nan"),
        ("--cell-size", "inf"),
        ("--height-scale", "0"),
        ("--height-scale", "inf"),
        ("--height-scale", "1e39"),
        ("--height-offset", "nan"),
        ("--max-samples", "0"),
    ] {
        usage_error(&["info", raw, flag, value], flag);
    }
    let png = dir.path().join("t.png");
    let png = png.to_str().unwrap();
    for (flag, value) in [
        ("--size", "0"),
        ("--size", "1"),
        ("--size", "70000"),
        ("--cell-size", "0"),
        ("--cell-size", "nan"),
    ] {
        usage_error(&["generate", flag, value, "--out", png], flag);
    }
    assert!(!Path::new(png).exists());
    // Negative numbers are values, not flags.
    let report = info_json(&[raw, "--height-scale", "-2", "--height-offset", "-5"]);
    assert_eq!(report["world_min"], -5.0);
}

/// `--height-scale 1e38` on a 16-bit file (or a large cell size) used to succeed, and
/// `info --json` printed `null` for infinite world heights.
#[test]
fn world_heights_that_overflow_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("tall.r16");
    let mut samples = vec![0u8; 16];
    samples.extend(10_000u16.to_le_bytes()); // 3 x 3 samples, the last one 10000
    std::fs::write(&raw, samples).unwrap();
    let raw = raw.to_str().unwrap();
    let message = fails_naming(&["info", raw, "--height-scale", "1e38"], "tall.r16");
    assert!(message.contains("overflows"), "{message}");
    fails_naming(&["info", raw, "--cell-size", "3e38"], "tall.r16");
    let report = info_json(&[raw, "--height-scale", "1e34"]);
    assert_eq!(report["world_max"].as_f64().map(|v| v as f32), Some(1e38));
}

#[test]
fn generate_refuses_bad_requests_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let txt = dir.path().join("t.txt");
    fails_naming(
        &["generate", "--size", "33", "--out", txt.to_str().unwrap()],
        "t.txt",
    );
    assert!(!txt.exists());
    let png = dir.path().join("t.png");
    let output = terralod(&["generate", "--size", "1", "--out", png.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(!png.exists());
    let nowhere = dir.path().join("no/such/dir/t.png");
    fails_naming(
        &[
            "generate",
            "--size",
            "17",
            "--out",
            nowhere.to_str().unwrap(),
        ],
        "t.png",
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(leftovers.is_empty(), "nothing half-written: {leftovers:?}");
}

#[test]
fn real_data_reports_what_its_readme_says() {
    if let Some(hills) = shared_data("dem_hills_333x218_f32.tif") {
        let report = info_json(&[hills.to_str().unwrap()]);
        assert_eq!(report["width"], 333);
        assert_eq!(report["height"], 218);
        assert_eq!(report["nodata_filled"], 949);
    }
    if let Some(boulder) = shared_data("srtm3_boulder_co_758.asc") {
        let report = info_json(&[boulder.to_str().unwrap()]);
        assert_eq!(report["width"], 758);
        assert_eq!(report["world_min"], 1547.0);
        assert_eq!(report["world_max"], 4320.0);
    }
    if let Some(png) = shared_data("srtm3_boulder_co_758.png") {
        let report = info_json(&[
            png.to_str().unwrap(),
            "--height-scale",
            "0.1",
            "--cell-size",
            "80",
        ]);
        assert_eq!(report["stored_sample_type"], "u16");
        assert!((report["world_max"].as_f64().unwrap() - 4320.0).abs() < 0.01);
        assert_eq!(report["cell_size"], 80.0);
    }
}

/// `println!` panics when stdout cannot be written: `info` into a full disk or a closed
/// pipe exited with code 101 and a backtrace. A full disk is now one error line (exit 1)
/// and a reader that stops early (`terralod info | head -1`) ends the run quietly.
#[test]
fn unwritable_stdout_is_an_error_not_a_panic() {
    let run_into = |stdout: std::process::Stdio, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_terralod"))
            .args(args)
            .stdout(stdout)
            .output()
            .expect("the terralod binary runs")
    };
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("flat.r16");
    std::fs::write(&raw, [0u8; 8]).unwrap();
    let raw = raw.to_str().unwrap();
    for args in [
        vec!["info", raw],
        vec!["info", "--json", raw],
        vec!["mesh", raw, "--max-error", "1"],
    ] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let output = run_into(writer.into(), &args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(stderr(&output), "", "{args:?}");

        match std::fs::OpenOptions::new().write(true).open("/dev/full") {
            Ok(full) => {
                let output = run_into(full.into(), &args);
                assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
                let message = stderr(&output);
                assert_eq!(message.lines().count(), 1, "{message}");
                assert!(message.starts_with("error: cannot write"), "{message}");
            }
            Err(_) => eprintln!("SKIPPED: /dev/full is absent"),
        }
    }
}
