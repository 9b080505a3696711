//! A camera path: one eye and target per frame, read from JSON. `terralod bench --path`
//! flies it; `terralod mesh --path` walks it with the algorithm's state carried from frame
//! to frame, as a running application would, and exports what it draws.

use crate::terrain_args::regular_file_len;
use anyhow::{Context, bail};
use glam::Vec3;
use std::io::Read;
use std::path::Path;

/// One frame's eye and target, world coordinates.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pose {
    pub eye: [f32; 3],
    pub target: [f32; 3],
}

impl Pose {
    pub fn new(eye: Vec3, target: Vec3) -> Pose {
        Pose {
            eye: eye.to_array(),
            target: target.to_array(),
        }
    }
}

/// Largest camera path read: 64 MiB of JSON is over a million poses, far more than any
/// flight; a larger file is refused before it is read into memory.
const MAX_PATH_BYTES: u64 = 64 << 20;

/// Poses from a JSON file: an array of `{"eye": [x, y, z], "target": [x, y, z]}`.
pub fn read_path(path: &Path) -> anyhow::Result<Vec<Pose>> {
    let length = regular_file_len(path, "camera path")?;
    if length > MAX_PATH_BYTES {
        bail!(
            "{}: the camera path is {length} bytes, more than the {MAX_PATH_BYTES} bytes allowed",
            path.display()
        );
    }
    // Bounded again while reading, in case the file grew since.
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_PATH_BYTES).read_to_string(&mut text))
        .with_context(|| format!("{}: cannot read the camera path", path.display()))?;
    let poses: Vec<Pose> = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a camera path (expected [{{\"eye\": [x, y, z], \"target\": [x, y, z]}}, ...])",
            path.display()
        )
    })?;
    if poses.is_empty() {
        bail!("{}: the camera path has no poses", path.display());
    }
    if let Some(i) = poses
        .iter()
        .position(|p| p.eye.iter().chain(&p.target).any(|v| !v.is_finite()) || p.eye == p.target)
    {
        bail!(
            "{}: pose {i} is not usable (a non-finite value, or the eye on its target)",
            path.display()
        );
    }
    Ok(poses)
}
