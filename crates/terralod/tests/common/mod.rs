//! Helpers shared by the CLI tests.

use std::process::{Command, Output};

/// Runs `terralod args`, killed after a minute: a command that blocks on its input must
/// fail the test, not hang it.
pub fn terralod_within_a_minute(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the terralod binary runs");
    let started = std::time::Instant::now();
    while child.try_wait().expect("waitable").is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().expect("killable");
            panic!("terralod {args:?} still running after a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().expect("its output")
}
