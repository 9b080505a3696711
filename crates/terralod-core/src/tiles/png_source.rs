//! A PNG as an import source larger than memory. A PNG's rows sit in one deflate stream and
//! decode in order only, so tiles cannot read it by windows: the file is decoded once, row
//! by row, into a raw spool file (the loader's samples, `u16` gray or `f32` from a colour
//! packing, little-endian), and the tile jobs read that by windows ([`RawFileSource`]).
//! Memory: a few rows. Disk: 2 or 4 bytes a sample, beside the import's output, until the
//! source is dropped. The samples and the mapping are those the whole-file loader gives, so
//! both imports write the same tiles; only holes (alpha 0), which the loader fills from the
//! samples around them, are refused, naming the first.

use super::raw_source::RawFileSource;
use super::{ImportSource, SampleType, TileError};
use crate::heightfield::{Samples, WorldMapping};
use crate::io::interrupt::Output;
use crate::io::png::{PngRows, PngSamples, claimed_size};
use crate::io::{ByteOrder, LoadError, LoadOptions, Problem, regular_file};
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

/// Rows decoded between two progress reports.
const ROWS_PER_REPORT: u32 = 64;

/// A PNG decoded into a spool file and read from there by windows.
#[derive(Debug)]
pub struct PngFileSource {
    /// The spool, with the mapping.
    raw: RawFileSource,
    /// Removed when the source is dropped.
    _spool: tempfile::TempPath,
    /// Held while the spool is on disk: an interruption leaves its removal to the import,
    /// which stops at its next check and drops the source.
    _output: Output,
}

impl PngFileSource {
    /// The size a PNG claims, from its header alone (nothing else is checked), to choose
    /// between loading it whole and spooling it.
    pub fn claimed_size(path: &Path) -> Result<(u64, u64), LoadError> {
        let fail = |problem| LoadError {
            path: path.to_path_buf(),
            problem,
        };
        regular_file(path).map_err(fail)?;
        let file = File::open(path).map_err(|error| fail(Problem::Io(error)))?;
        claimed_size(BufReader::with_capacity(1 << 16, file)).map_err(fail)
    }

    /// Decodes `path` (with `options.encoding`; its size limited by the tiled format's
    /// [`MAX_SIDE`](super::MAX_SIDE), not by `options.max_samples`) into a spool file
    /// in `spool_dir`. `progress(rows done, rows)` is called as it goes. A damaged file,
    /// a hole, an interlaced file (whose rows decode only all together) or an
    /// interruption is an error, and the spool is removed.
    pub fn spool(
        path: &Path,
        options: &LoadOptions,
        spool_dir: &Path,
        progress: &dyn Fn(u64, u64),
    ) -> Result<PngFileSource, TileError> {
        let load_error = |problem| {
            TileError::Load(LoadError {
                path: path.to_path_buf(),
                problem,
            })
        };
        let output = Output::begin()?;
        // The tiled format's limit on a side, checked on the header alone (the raw source
        // would check it only after the spool is written; the loader's own limit is on
        // the sample count).
        let (width, height) = PngFileSource::claimed_size(path)?;
        for (what, value) in [("width", width), ("height", height)] {
            if value > u64::from(super::MAX_SIDE) {
                return Err(TileError::OutOfRange {
                    path: path.to_path_buf(),
                    what,
                    value,
                    min: 2,
                    max: u64::from(super::MAX_SIDE),
                });
            }
        }
        let file = File::open(path).map_err(|error| load_error(Problem::Io(error)))?;
        let side = u64::from(super::MAX_SIDE);
        let options = options.clone().with_max_samples(side * side);
        let mut rows =
            PngRows::open(BufReader::with_capacity(1 << 16, file), &options).map_err(load_error)?;
        let (width, height) = rows.size();
        if rows.interlaced() {
            return Err(TileError::Source {
                what: format!(
                    "{}: an interlaced PNG decodes only whole, which its size does not allow \
                     (raise --max-samples, or save it without interlacing)",
                    path.display()
                ),
            });
        }
        // Its error names the folder.
        let spool = tempfile::Builder::new()
            .prefix(".terralod-png-spool-")
            .suffix(".raw")
            .tempfile_in(spool_dir)
            .map_err(|error| TileError::Source {
                what: format!("cannot make a spool file: {error}"),
            })?;
        let spool_path = spool.path().to_path_buf();
        let spool_error = |source| TileError::Io {
            path: spool_path.clone(),
            source,
        };
        let gray = rows.gray();
        let mut writer = BufWriter::with_capacity(1 << 20, spool.as_file());
        let mut samples = if gray {
            PngSamples::Gray(Vec::with_capacity(width as usize))
        } else {
            PngSamples::Colour(Vec::with_capacity(width as usize))
        };
        let mut bytes = Vec::with_capacity(width as usize * 4);
        let mut first_hole = None;
        for row in 0..height {
            // Every row (up to 16 MB of spool).
            output.check()?;
            if row % ROWS_PER_REPORT == 0 {
                progress(u64::from(row), u64::from(height));
            }
            samples.clear();
            rows.read_row(row, &mut samples, &mut |col, row| {
                first_hole.get_or_insert((col, row));
            })
            .map_err(load_error)?;
            if let Some((col, row)) = first_hole {
                return Err(TileError::Source {
                    what: format!(
                        "{}: the sample at column {col}, row {row} is transparent (a hole); \
                         holes are filled only when the file is loaded whole (raise \
                         --max-samples)",
                        path.display()
                    ),
                });
            }
            bytes.clear();
            samples.extend_le_bytes(&mut bytes);
            writer.write_all(&bytes).map_err(spool_error)?;
        }
        // On to IEND: a file cut after its last row is an error.
        rows.finish().map_err(load_error)?;
        writer
            .into_inner()
            .map_err(|error| spool_error(error.into_error()))?;
        progress(u64::from(height), u64::from(height));
        let spool = spool.into_temp_path();
        let sample_type = if gray {
            SampleType::U16
        } else {
            SampleType::F32
        };
        // The loader's mapping: a PNG carries none.
        let raw = RawFileSource::open(
            &spool,
            (width, height),
            sample_type,
            ByteOrder::Little,
            WorldMapping::default(),
        )?;
        Ok(PngFileSource {
            raw,
            _spool: spool,
            _output: output,
        })
    }

    /// Replaces the mapping (a PNG carries none: the loader's is cell size 1, heights as
    /// stored), refusing one whose grid does not fit in `f32`.
    pub fn with_mapping(mut self, mapping: WorldMapping) -> Result<PngFileSource, TileError> {
        self.raw = self.raw.with_mapping(mapping)?;
        Ok(self)
    }
}

impl ImportSource for PngFileSource {
    fn width(&self) -> u32 {
        self.raw.width()
    }

    fn height(&self) -> u32 {
        self.raw.height()
    }

    fn sample_type(&self) -> SampleType {
        self.raw.sample_type()
    }

    fn mapping(&self) -> WorldMapping {
        self.raw.mapping()
    }

    fn read_window(&self, cols: &[u32], rows: &[u32]) -> Result<Samples, TileError> {
        self.raw.read_window(cols, rows)
    }
}
