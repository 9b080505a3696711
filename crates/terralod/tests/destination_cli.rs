//! Outputs are checked before the work: a mistyped folder fails at once with one line that
//! names it, for every command that writes a file, and nothing is written.

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn a_missing_or_wrong_folder_is_refused_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no such folder");
    let file = dir.path().join("a file");
    std::fs::write(&file, b"not a folder").unwrap();
    std::fs::create_dir(dir.path().join("a folder.png")).unwrap();
    let out = |folder: &std::path::Path, name: &str| folder.join(name).display().to_string();
    for (args, message) in [
        // A 16385² terrain takes minutes in a debug build: refused at once here.
        (
            vec![
                "generate".to_string(),
                "--size".into(),
                "16385".into(),
                "--out".into(),
                out(&missing, "g.png"),
            ],
            "does not exist",
        ),
        (
            vec![
                "generate".to_string(),
                "--size".into(),
                "16385".into(),
                "--out".into(),
                out(&file, "g.f32"),
            ],
            "is not a folder",
        ),
        (
            vec![
                "generate".to_string(),
                "--size".into(),
                "16385".into(),
                "--out".into(),
                out(dir.path(), "a folder.png"),
            ],
            "it is a folder",
        ),
        (
            vec![
                "render".to_string(),
                "--size".into(),
                "64x64".into(),
                "--out".into(),
                out(&missing, "r.png"),
            ],
            "does not exist",
        ),
        (
            vec![
                "mesh".to_string(),
                "--max-error".into(),
                "1".into(),
                "--out".into(),
                out(&missing, "m.obj"),
            ],
            "does not exist",
        ),
    ] {
        let started = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_terralod"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{args:?} was refused after the work"
        );
    }
    assert!(!missing.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 2, "only what the test made: {left:?}");
}
