//! Smoke test of `terralod view`: opens the window (under Xvfb when there is no display),
//! draws frames, and checks the screenshot of the last one shows terrain and sky.
//!
//! Skipped with a visible `SKIPPED:` line when there is neither a display nor `xvfb-run`,
//! or no GPU adapter (software Vulkan counts); `TERRALOD_REQUIRE_GPU=1` turns a skip into
//! a failure.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A viewer run longer than this is hung, not slow (lavapipe draws a 320 x 240 frame of
/// a 257 x 257 terrain in milliseconds).
const TIMEOUT: Duration = Duration::from_secs(120);

fn gpu_required() -> bool {
    std::env::var("TERRALOD_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Skips the test, or fails it when a GPU is required.
fn skip(why: &str) {
    assert!(!gpu_required(), "TERRALOD_REQUIRE_GPU=1 but {why}");
    eprintln!("SKIPPED: {why}");
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn has_display() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

/// Runs the viewer with `args`, directly on a display or under `xvfb-run -a`; `None`
/// (skipped) when neither is available.
fn run_viewer(args: &[&str]) -> Option<Output> {
    run_viewer_with(args, &[])
}

/// [`run_viewer`] with environment variables `vars` set.
fn run_viewer_with(args: &[&str], vars: &[(&str, &str)]) -> Option<Output> {
    let binary = env!("CARGO_BIN_EXE_terralod");
    let mut command = if has_display() {
        Command::new(binary)
    } else if on_path("xvfb-run") {
        let mut command = Command::new("xvfb-run");
        command.arg("-a").arg(binary);
        command
    } else {
        skip("no display and no xvfb-run (Debian: apt install xvfb xauth)");
        return None;
    };
    let mut child = command
        .args(args)
        .envs(vars.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the viewer starts");
    let start = Instant::now();
    while child
        .try_wait()
        .expect("the viewer can be waited for")
        .is_none()
    {
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let output = child
                .wait_with_output()
                .expect("the killed viewer is reaped");
            panic!(
                "the viewer ran over {TIMEOUT:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(child.wait_with_output().expect("the viewer's output"))
}

/// The JSON summary of a successful run; `None` (skipped) when there is no GPU adapter.
fn summary(output: &Output) -> Option<serde_json::Value> {
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && stderr.contains("no GPU adapter") {
        skip(&format!("no GPU adapter: {}", stderr.trim()));
        return None;
    }
    assert!(output.status.success(), "the viewer failed: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    Some(
        stdout
            .lines()
            .find_map(|line| serde_json::from_str(line).ok())
            .unwrap_or_else(|| panic!("a JSON summary in: {stdout}")),
    )
}

fn terrain(dir: &Path) -> String {
    let path = dir.join("terrain.f32");
    let path_text = path.to_str().expect("a UTF-8 temporary path").to_owned();
    let output = Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args(["generate", "--size", "257", "--cell-size", "30", "--out"])
        .arg(&path)
        .output()
        .expect("terralod generate runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    path_text
}

/// Pixels that look like the sky gradient (clearly blue) and like anything else.
fn sky_and_other(image: &image::RgbaImage, columns: std::ops::Range<u32>) -> (usize, usize) {
    let mut sky = 0;
    let mut other = 0;
    for (x, _, pixel) in image.enumerate_pixels() {
        if !columns.contains(&x) {
            continue;
        }
        let [r, g, b, _] = pixel.0.map(i32::from);
        if b > r + 10 && b >= g && b > 120 {
            sky += 1;
        } else {
            other += 1;
        }
    }
    (sky, other)
}

#[test]
fn viewer_draws_frames_and_saves_a_screenshot_of_terrain_and_sky() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let terrain = terrain(dir.path());
    let shot = dir.path().join("shot.png");
    let shot_text = shot.to_str().expect("a UTF-8 temporary path");
    let start = Instant::now();
    let Some(output) = run_viewer(&[
        "view",
        &terrain,
        "--raw-size",
        "257x257",
        "--cell-size",
        "30",
        "--frames",
        "20",
        "--screenshot",
        shot_text,
        "--size",
        "480x320",
    ]) else {
        return;
    };
    let Some(summary) = summary(&output) else {
        return;
    };
    eprintln!(
        "viewer: 20 frames in {:.1} s (start-up included)",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(summary["frames"], 20, "{summary}");
    assert!(
        summary["triangles"].as_u64().is_some_and(|t| t > 100),
        "{summary}"
    );

    let image = image::open(&shot)
        .expect("the screenshot is a PNG")
        .to_rgba8();
    assert_eq!(image.dimensions(), (480, 320));
    let mut colours: Vec<[u8; 4]> = image.pixels().map(|p| p.0).collect();
    colours.sort_unstable();
    colours.dedup();
    assert!(colours.len() > 200, "only {} colours", colours.len());
    // The HUD sits on the left; the right part shows the default overview: sky above
    // the terrain.
    let (sky, other) = sky_and_other(&image, 300..480);
    let strip = 180 * 320;
    eprintln!(
        "right strip: {sky} sky pixels, {other} others, {} colours",
        colours.len()
    );
    assert!(sky > strip / 20, "sky in {sky} of {strip} pixels");
    assert!(other > strip / 5, "terrain in {other} of {strip} pixels");
}

/// `view --algo adaptive --detail`: the viewer draws the detail too (a 200 m plateau,
/// cells four times finer, seen from above: its top is drawn where the terrain was).
#[test]
fn the_viewer_draws_a_detail() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let terrain = terrain(dir.path());
    let detail = dir.path().join("plateau.f32");
    let mut bytes = Vec::new();
    for _ in 0..129 * 129 {
        bytes.extend_from_slice(&5000.0f32.to_le_bytes());
    }
    std::fs::write(&detail, bytes).expect("temporary directory is writable");
    let mut shots = Vec::new();
    for with_detail in [false, true] {
        let shot = dir.path().join(format!("shot{with_detail}.png"));
        let shot_text = shot.to_str().expect("a UTF-8 temporary path").to_owned();
        let mut args = vec![
            "view",
            &terrain,
            "--raw-size",
            "257x257",
            "--cell-size",
            "30",
            "--algo",
            "adaptive",
            "--eye",
            "3840,9000,3900",
            "--target",
            "3840,0,3840",
            "--no-hud",
            "--frames",
            "2",
            "--screenshot",
            &shot_text,
            "--size",
            "320x240",
        ];
        let detail_text = detail.to_str().expect("a UTF-8 temporary path");
        if with_detail {
            args.extend_from_slice(&[
                "--detail",
                detail_text,
                "--detail-origin",
                "1920,1920",
                "--detail-cell-size",
                "7.5",
            ]);
        }
        let Some(output) = run_viewer(&args) else {
            return;
        };
        if summary(&output).is_none() {
            return;
        }
        shots.push(image::open(&shot).expect("a PNG").to_rgba8());
    }
    let changed = shots[0]
        .pixels()
        .zip(shots[1].pixels())
        .filter(|(a, b)| a.0.iter().zip(b.0).any(|(x, y)| x.abs_diff(y) > 8))
        .count();
    assert!(
        changed > 320 * 240 / 50,
        "only {changed} pixels show the plateau"
    );
}

#[test]
fn a_missing_display_is_one_clear_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args(["view", "--frames", "1"])
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .expect("the terralod binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains("XDG_RUNTIME_DIR"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains("display"),
        "{stderr}"
    );
}

/// `view DIR --algo streamed` streams an imported directory through the tile cache while
/// the window draws (no frame waits for it) and shows terrain.
#[test]
fn the_viewer_streams_an_imported_directory() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let tiles = imported(dir.path());
    let tiles_text = tiles.as_str();
    let shot = dir.path().join("shot.png");
    let shot_text = shot.to_str().expect("a UTF-8 temporary path");
    let Some(output) = run_viewer(&[
        "view",
        tiles_text,
        "--algo",
        "streamed",
        // Below the terrain's 66,049 samples: loading would be refused, streaming is not.
        "--max-samples",
        "1000",
        "--cache-mb",
        "2",
        "--frames",
        "30",
        "--no-hud",
        "--screenshot",
        shot_text,
        "--size",
        "320x240",
    ]) else {
        return;
    };
    check_drawn(&output, "streamed", &shot);
}

/// `view DIR --algo adaptive --page-frames N` builds the tree from the tiles page by page
/// past `--max-samples` (the pages in a page file, read while the window draws) and
/// shows terrain; without frames the load is refused, naming `--page-frames`.
#[test]
fn the_viewer_pages_adaptive_over_an_imported_directory() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let tiles = imported(dir.path());
    let shot = dir.path().join("shot.png");
    let shot_text = shot.to_str().expect("a UTF-8 temporary path");
    let kept = dir.path().join("kept.tlap");
    let kept_text = kept.to_str().expect("a UTF-8 temporary path");
    let args = |paged: bool| {
        let mut args = vec!["view", &tiles, "--algo", "adaptive"];
        if paged {
            args.extend(["--page-frames", "12", "--page-cells", "32"]);
            args.extend(["--page-file", kept_text]);
        }
        // Below the terrain's 66,049 samples: loading would be refused.
        args.extend(["--max-samples", "1000", "--frames", "30", "--no-hud"]);
        args.extend(["--screenshot", shot_text, "--size", "320x240"]);
        args
    };
    let Some(output) = run_viewer(&args(true)) else {
        return;
    };
    if !check_drawn(&output, "adaptive", &shot) {
        return;
    }
    // What became of the page file is said on a line of its own. (stderr is not a
    // terminal here, so the spinner draws nothing: this checks the line, not that the
    // spinner is cleared around it, which was seen by hand under `script`.)
    let said = |output: &Output, what: &str| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let line = format!("{kept_text}: algorithm adaptive's tree {what}");
        assert!(stderr.lines().any(|l| l == line), "{stderr}");
    };
    said(&output, "kept");

    let Some(output) = run_viewer(&args(false)) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--max-samples") && stderr.contains("--page-frames"),
        "{stderr}"
    );

    // The kept tree is read back and drawn the same way.
    let Some(output) = run_viewer(&args(true)) else {
        return;
    };
    if check_drawn(&output, "adaptive", &shot) {
        said(&output, "read back");
    }
}

/// Checks that a 30-frame, 320 × 240 run of `algorithm` drew terrain and sky into
/// `shot`; false when skipped for want of a GPU adapter.
fn check_drawn(output: &Output, algorithm: &str, shot: &Path) -> bool {
    let Some(summary) = summary(output) else {
        return false;
    };
    assert_eq!(summary["algorithm"], algorithm, "{summary}");
    assert_eq!(summary["frames"], 30, "{summary}");
    assert!(
        summary["triangles"].as_u64().is_some_and(|t| t > 100),
        "{summary}"
    );
    let image = image::open(shot)
        .expect("the screenshot is a PNG")
        .to_rgba8();
    let (sky, other) = sky_and_other(&image, 0..320);
    let all = 320 * 240;
    assert!(sky > all / 20, "sky in {sky} of {all} pixels");
    assert!(other > all / 5, "terrain in {other} of {all} pixels");
    true
}

/// The 257² terrain imported into `dir/tiles` in 32-cell tiles; the directory's path.
fn imported(dir: &Path) -> String {
    let terrain = terrain(dir);
    let tiles = dir.join("tiles");
    let tiles_text = tiles.to_str().expect("a UTF-8 temporary path").to_owned();
    let output = Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args([
            "import",
            &terrain,
            "--raw-size",
            "257x257",
            "--cell-size",
            "30",
        ])
        .args([
            "--tile-size",
            "32",
            "--block-size",
            "8",
            "--out",
            &tiles_text,
        ])
        .output()
        .expect("terralod import runs");
    assert!(output.status.success(), "{output:?}");
    tiles_text
}

/// A terrain larger than the GPU's largest texture (257² under a limit of 128): the
/// viewer draws adaptive with its vertices listed, and refuses quadtree in one line.
#[test]
fn the_viewer_draws_a_terrain_larger_than_a_texture() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let terrain = terrain(dir.path());
    let limit = [("TERRALOD_MAX_TEXTURE_SIDE", "128")];
    let args = |algo| {
        [
            "view",
            &terrain,
            "--raw-size",
            "257x257",
            "--cell-size",
            "30",
            "--algo",
            algo,
            "--frames",
            "3",
            "--size",
            "320x240",
        ]
        .map(String::from)
    };
    let adaptive = args("adaptive");
    let adaptive: Vec<&str> = adaptive.iter().map(String::as_str).collect();
    let Some(output) = run_viewer_with(&adaptive, &limit) else {
        return;
    };
    let Some(summary) = summary(&output) else {
        return;
    };
    assert!(
        summary["triangles"].as_u64().is_some_and(|t| t > 100),
        "{summary}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("adaptive lists its vertices"), "{stderr}");
    let quadtree = args("quadtree");
    let quadtree: Vec<&str> = quadtree.iter().map(String::as_str).collect();
    let Some(output) = run_viewer_with(&quadtree, &limit) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("larger than this GPU's largest texture"),
        "{stderr}"
    );
}
