//! Ctrl-C and `SIGTERM` in the middle of a run: the output being written is taken back
//! (no temporary file, no partial import, no frames of a walk) and the exit status is 130.
//! Each test signals the command when its output has appeared on disk, as a user would.
#![cfg(unix)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the terralod binary runs")
}

/// Waits (a minute at most) until `appeared` holds, then sends `signal` to `child` and
/// returns how it ended. Panics if the command ends first: the test then did not test.
fn signal_when(mut child: Child, signal: &str, what: &str, appeared: impl Fn() -> bool) -> Output {
    let started = Instant::now();
    let number = match signal {
        "-INT" => 2,
        "-TERM" => 15,
        _ => panic!("no number for {signal}"),
    };
    // Not before the command catches the signal: sent earlier, it would kill the command
    // (a child slow to start on a loaded machine) instead of testing its handler.
    while !appeared() || !catches(&child, number) {
        if let Some(status) = child.try_wait().expect("waitable") {
            panic!("the command ended ({status}) before {what} appeared");
        }
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().expect("killable");
            panic!("no {what} after a minute");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let sent = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let output = child.wait_with_output().expect("its output");
    assert_eq!(
        output.status.code(),
        Some(130),
        "interrupted while writing {what}: {output:?}"
    );
    output
}

/// Whether `child` has a handler for signal `number` (Linux: the caught-signals mask in
/// `/proc/PID/status`).
fn catches(child: &Child, number: u32) -> bool {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (number - 1)) != 0)
}

/// The run said `says` on stderr and left nothing in `dir`.
fn assert_taken_back(output: &Output, says: &str, dir: &Path) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(says), "{stderr}");
    assert_eq!(names_in(dir), Vec::<String>::new());
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("readable")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn has_temporary(dir: &Path) -> bool {
    names_in(dir).iter().any(|name| name.ends_with(".tmp"))
}

/// A mesh interrupted while its file is written: the temporary file is removed (it was
/// left, hidden beside --out, before) and no mesh file appears.
#[test]
fn an_interrupted_write_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("mesh.obj");
    let child = spawn(&[
        "mesh",
        "--max-error",
        "0.001",
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    let output = signal_when(child, "-TERM", "the temporary file", || {
        has_temporary(dir.path())
    });
    assert_taken_back(&output, "interrupted", dir.path());
}

/// An import interrupted after its first tiles: the directory it made is removed.
#[test]
fn an_interrupted_import_takes_back_its_tiles() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("tiles");
    let child = spawn(&[
        "import",
        "--generate-size",
        "2049",
        "--tile-size",
        "64",
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    let level0 = out.join("0").join("0");
    let output = signal_when(child, "-INT", "a tile", || {
        std::fs::read_dir(&level0).is_ok_and(|mut tiles| tiles.next().is_some())
    });
    assert_taken_back(&output, "taken back", dir.path());
}

/// A PNG import interrupted while the PNG is decoded into its spool (a PNG past
/// `--max-samples`): the spool is removed and no output directory is left.
#[test]
fn an_interrupted_png_import_removes_its_spool() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let png = dir.path().join("big.png");
    let (width, height) = (2049u32, 2049u32);
    let mut encoder = png::Encoder::new(
        std::fs::File::create(&png).expect("writable"),
        width,
        height,
    );
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::Sixteen);
    encoder.set_compression(png::Compression::Fast);
    let samples: Vec<u8> = (0..width * height)
        .flat_map(|i| (i.wrapping_mul(2_654_435_761) >> 16).to_be_bytes()[2..].to_vec())
        .collect();
    let mut writer = encoder.write_header().expect("a header");
    writer.write_image_data(&samples).expect("written");
    writer.finish().expect("finished");
    let out = dir.path().join("tiles");
    let child = spawn(&[
        "import",
        png.to_str().expect("UTF-8"),
        "--max-samples",
        "1000",
        "--tile-size",
        "64",
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    let output = signal_when(child, "-INT", "the spool", || {
        names_in(dir.path())
            .iter()
            .any(|name| name.contains("spool"))
    });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_eq!(names_in(dir.path()), ["big.png"]);
}

/// A camera walk writing one mesh per frame, interrupted after its first frame: every
/// frame written is taken back (staged frames removed, nothing moved into place).
#[test]
fn an_interrupted_walk_takes_back_its_frames() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let poses: Vec<String> = (0..400)
        .map(|i| {
            let x = 2_000.0 + 20.0 * f64::from(i);
            format!(
                r#"{{"eye": [{x}, 900, 2000], "target": [{}, 300, 9000]}}"#,
                x + 500.0
            )
        })
        .collect();
    let path = dir.path().join("walk.json");
    std::fs::write(&path, format!("[{}]", poses.join(","))).expect("writable");
    let frames = dir.path().join("frames");
    std::fs::create_dir(&frames).expect("writable");
    let pattern = frames.join("frame-{frame}.obj");
    let child = spawn(&[
        "mesh",
        "--pixel-error",
        "1",
        "--path",
        path.to_str().expect("UTF-8"),
        "--out",
        pattern.to_str().expect("UTF-8"),
    ]);
    // Frames wait, staged beside their files, until the walk is complete.
    let output = signal_when(child, "-TERM", "a frame", || {
        names_in(&frames)
            .iter()
            .any(|name| name.ends_with(".obj.staged"))
    });
    assert_taken_back(&output, "interrupted", &frames);
}

/// Interrupted before anything is written (while generating), the run ends at once.
#[test]
fn an_interrupt_with_nothing_written_ends_the_run_at_once() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("big.png");
    let child = spawn(&[
        "generate",
        "--size",
        "8193",
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    let started = Instant::now();
    let output = signal_when(child, "-INT", "a quarter second of generating", || {
        started.elapsed() > Duration::from_millis(250)
    });
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "ended {:?} after the signal",
        started.elapsed()
    );
    assert_taken_back(&output, "interrupted", dir.path());
}
