//! Whole directories as values, so tests can say two imports wrote the same files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every file under `dir` (recursively) with its bytes, by path relative to `dir`.
pub fn directory_files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).expect("a readable directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("a readable file");
                let relative = path.strip_prefix(dir).expect("under the directory");
                files.insert(relative.to_path_buf(), bytes);
            }
        }
    }
    files
}
