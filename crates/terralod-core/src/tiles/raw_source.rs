//! A headerless raw file (`.r16`/`.raw` u16, `.r32`/`.f32` f32, row-major, row 0 north) as an
//! import source read by windows: each tile reads only the rows it needs, so
//! a file larger than memory imports without being loaded.

use super::import::ImportSource;
use super::{SampleType, TileError};
use crate::heightfield::{Samples, WorldMapping};
use crate::io::ByteOrder;
use std::fs::File;
#[cfg(not(unix))]
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
#[cfg(not(unix))]
use std::sync::Mutex;

/// A raw heightfield file, opened and its length checked against its size.
#[derive(Debug)]
pub struct RawFileSource {
    path: PathBuf,
    file: File,
    /// Where reads are not positioned (not Unix), a seek and its read happen under it.
    #[cfg(not(unix))]
    seek_lock: Mutex<()>,
    width: u32,
    height: u32,
    sample_type: SampleType,
    byte_order: ByteOrder,
    mapping: WorldMapping,
}

impl RawFileSource {
    /// Opens `path` holding `width × height` samples of `sample_type` (`U16` or `F32`),
    /// refusing a file whose length is not exactly that.
    pub fn open(
        path: &Path,
        (width, height): (u32, u32),
        sample_type: SampleType,
        byte_order: ByteOrder,
        mapping: WorldMapping,
    ) -> Result<RawFileSource, TileError> {
        let io = |source| TileError::Io {
            path: path.to_path_buf(),
            source,
        };
        if sample_type == SampleType::I16 {
            return Err(TileError::Source {
                what: format!("{}: raw files hold u16 or f32 samples", path.display()),
            });
        }
        for (what, value) in [("width", width), ("height", height)] {
            if !(2..=super::MAX_SIDE).contains(&value) {
                return Err(TileError::OutOfRange {
                    path: path.to_path_buf(),
                    what,
                    value: u64::from(value),
                    min: 2,
                    max: u64::from(super::MAX_SIDE),
                });
            }
        }
        mapping.check_grid(width, height, None)?;
        let file = File::open(path).map_err(io)?;
        let length = file.metadata().map_err(io)?.len();
        let expected = u64::from(width) * u64::from(height) * sample_type.bytes() as u64;
        if length != expected {
            return Err(super::format::corrupt(
                path,
                super::Corruption::Length {
                    expected,
                    actual: length,
                },
            ));
        }
        Ok(RawFileSource {
            path: path.to_path_buf(),
            file,
            #[cfg(not(unix))]
            seek_lock: Mutex::new(()),
            width,
            height,
            sample_type,
            byte_order,
            mapping,
        })
    }
}

impl RawFileSource {
    /// Replaces the mapping, refusing one whose grid does not fit in `f32`.
    pub fn with_mapping(mut self, mapping: WorldMapping) -> Result<RawFileSource, TileError> {
        mapping.check_grid(self.width, self.height, None)?;
        self.mapping = mapping;
        Ok(self)
    }
}

impl ImportSource for RawFileSource {
    fn width(&self) -> u32 {
        self.width
    }

    fn height(&self) -> u32 {
        self.height
    }

    fn sample_type(&self) -> SampleType {
        self.sample_type
    }

    fn mapping(&self) -> WorldMapping {
        self.mapping
    }

    fn read_window(&self, cols: &[u32], rows: &[u32]) -> Result<Samples, TileError> {
        // One decoder per type and byte order, so the inner loops carry no branch.
        let little = self.byte_order == ByteOrder::Little;
        Ok(match self.sample_type {
            SampleType::F32 => {
                let values = if little {
                    self.read_rows(cols, rows, |b: [u8; 4]| f32::from_le_bytes(b))?
                } else {
                    self.read_rows(cols, rows, |b: [u8; 4]| f32::from_be_bytes(b))?
                };
                // Without an early exit, so the check vectorises.
                if values.iter().fold(false, |bad, v| bad | !v.is_finite()) {
                    return Err(TileError::Hole {
                        path: self.path.clone(),
                    });
                }
                Samples::F32(values)
            }
            _ if little => Samples::U16(self.read_rows(cols, rows, u16::from_le_bytes)?),
            _ => Samples::U16(self.read_rows(cols, rows, u16::from_be_bytes)?),
        })
    }
}

impl RawFileSource {
    /// The samples at `cols` × `rows`, row-major, each decoded from its bytes: one read of
    /// the span of `cols` per row, decoded straight into the output (the whole span at
    /// once when the columns are consecutive).
    fn read_rows<T, const N: usize>(
        &self,
        cols: &[u32],
        rows: &[u32],
        decode: impl Fn([u8; N]) -> T,
    ) -> Result<Vec<T>, TileError> {
        debug_assert_eq!(N, self.sample_type.bytes());
        let first = cols[0] as usize;
        let mut span = vec![0u8; (cols[cols.len() - 1] as usize - first + 1) * N];
        let contiguous = cols.len() * N == span.len();
        let mut values = Vec::with_capacity(cols.len() * rows.len());
        for &row in rows {
            let at = (u64::from(row) * u64::from(self.width) + first as u64) * N as u64;
            self.read_at(&mut span, at)?;
            if contiguous {
                let (chunks, _) = span.as_chunks::<N>();
                values.extend(chunks.iter().map(|&b| decode(b)));
            } else {
                values.extend(cols.iter().map(|&c| {
                    let i = (c as usize - first) * N;
                    decode(span[i..i + N].try_into().expect("N bytes"))
                }));
            }
        }
        Ok(values)
    }

    /// Fills `buffer` from byte `offset` of the file: a positioned read where the platform
    /// has one (tile jobs read in parallel), else a seek and a read under the lock.
    fn read_at(&self, buffer: &mut [u8], offset: u64) -> Result<(), TileError> {
        let io = |source| TileError::Io {
            path: self.path.clone(),
            source,
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            self.file.read_exact_at(buffer, offset).map_err(io)
        }
        #[cfg(not(unix))]
        {
            let _turn = self.seek_lock.lock().map_err(|_| TileError::Source {
                what: format!("{}: a reader panicked", self.path.display()),
            })?;
            let mut file = &self.file;
            file.seek(SeekFrom::Start(offset)).map_err(io)?;
            file.read_exact(buffer).map_err(io)
        }
    }
}
