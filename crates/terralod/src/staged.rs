//! Outputs of one command that appear together or not at all: each is written (atomically)
//! to a hidden file beside its path, and all are moved into place once the command has
//! written every one, so a run that fails or is interrupted part-way leaves the files that
//! were there as they were. A device or pipe is written in place, as every output is.

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use terralod_core::io::{WriteError, write_file_atomically};

/// The outputs staged so far; those not committed are removed when it is dropped.
#[derive(Debug, Default)]
pub struct StagedFiles {
    /// Per output: where it waits, and its path (the same for a device or pipe).
    files: RefCell<Vec<(PathBuf, PathBuf)>>,
}

impl StagedFiles {
    /// Writes `path`'s content, staged beside it until [`StagedFiles::commit`].
    pub fn write(
        &self,
        path: &Path,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<(), WriteError> {
        let regular = std::fs::metadata(path).map_or(true, |m| m.is_file());
        let staged = if regular {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            path.with_file_name(format!(".{name}.staged"))
        } else {
            path.to_path_buf()
        };
        write_file_atomically(&staged, write).map_err(|error| WriteError {
            path: path.to_path_buf(),
            ..error
        })?;
        self.files.borrow_mut().push((staged, path.to_path_buf()));
        Ok(())
    }

    /// Moves every staged output onto its path.
    pub fn commit(&self) -> std::io::Result<()> {
        let files = std::mem::take(&mut *self.files.borrow_mut());
        for (k, (staged, path)) in files.iter().enumerate() {
            if staged != path
                && let Err(error) = std::fs::rename(staged, path)
            {
                *self.files.borrow_mut() = files[k..].to_vec();
                return Err(std::io::Error::new(
                    error.kind(),
                    format!("{}: {error}", path.display()),
                ));
            }
        }
        Ok(())
    }

    /// Removes every output still staged (best effort: the run's own error is reported).
    pub fn discard(&self) {
        for (staged, path) in self.files.borrow_mut().drain(..) {
            if staged != path {
                let _ = std::fs::remove_file(staged);
            }
        }
    }
}

impl Drop for StagedFiles {
    fn drop(&mut self) {
        self.discard();
    }
}
