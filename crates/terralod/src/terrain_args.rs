//! Flags shared by every command that takes a terrain: the file (or the built-in terrain),
//! how to decode it, and the world mapping of feature H1.

use crate::progress;
use anyhow::Context;
use clap::Args;
use std::path::{Path, PathBuf};
use terralod_core::heightfield::{Heightfield, WorldMapping};
use terralod_core::io::{self, ByteOrder, Format, LoadOptions, RgbEncoding, SourceInfo};
use terralod_core::tiles::TiledTerrain;

/// A terrain source and its world mapping.
#[derive(Debug, Args)]
pub struct TerrainArgs {
    /// Elevation file (PNG, GeoTIFF, .hgt, .asc, .r16/.r32/.f32) or a directory written by
    /// `terralod import` (its finest level). Without it: the built-in procedural terrain.
    pub file: Option<PathBuf>,
    /// Read the file as this format instead of guessing from its bytes and extension:
    /// png, geotiff, r16, f32, hgt or ascii-grid.
    #[arg(long, value_parser = str::parse::<Format>)]
    pub format: Option<Format>,
    /// How an RGB PNG packs heights: gray (R = G = B), terrain-rgb (Mapbox) or rgb24.
    #[arg(long, value_parser = str::parse::<RgbEncoding>)]
    pub encoding: Option<RgbEncoding>,
    /// Size of a raw .r16/.r32/.f32 file, as WxH (a square is inferred from the length).
    #[arg(long, value_name = "WxH", value_parser = parse_size)]
    pub raw_size: Option<(u32, u32)>,
    /// Byte order of a raw file: little (le) or big (be) [default: little].
    #[arg(long, value_parser = str::parse::<ByteOrder>)]
    pub byte_order: Option<ByteOrder>,
    /// Largest number of samples a file may claim before it is refused unread (`import`
    /// reads a larger GeoTIFF or PNG by windows instead of loading it).
    #[arg(
        long,
        default_value_t = LoadOptions::default().max_samples,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_samples: u64,
    /// World distance between samples (x = col * cell_size, z = row * cell_size). Default:
    /// the file's metric spacing when it states one, else 1.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_positive)]
    pub cell_size: Option<f32>,
    /// World height per raw unit (y = raw * height_scale + height_offset). Default: 1, or
    /// the one an imported directory was written with.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_nonzero)]
    pub height_scale: Option<f32>,
    /// World height of a raw value of 0. Default: 0, or an imported directory's.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_finite)]
    pub height_offset: Option<f32>,
}

/// A loaded terrain and where it came from.
#[derive(Debug)]
pub struct Terrain {
    pub heightfield: Heightfield,
    /// None for the built-in terrain and for an imported directory.
    pub source: Option<SourceInfo>,
    /// What the user would call it in a message.
    pub name: String,
    /// Tiles of an imported directory that could not be read, a coarser level
    /// interpolated in their place.
    pub stood_in: usize,
}

impl TerrainArgs {
    /// Refuses an output path that is the terrain file being read or one of the command's
    /// other `inputs` (`render dem.png --out dem.png` would replace the heights with the
    /// picture; `bench --json path.json` the camera path with the figures).
    pub fn refuse_as_output<'p>(
        &'p self,
        out: &Path,
        inputs: impl IntoIterator<Item = Option<&'p Path>>,
    ) -> anyhow::Result<()> {
        let Ok(out_file) = std::fs::canonicalize(out) else {
            return Ok(());
        };
        let own = self.file.as_deref();
        for input in inputs.into_iter().chain([own]).flatten() {
            if std::fs::canonicalize(input).is_ok_and(|read| read == out_file) {
                anyhow::bail!(
                    "{}: the output names {}, which this command reads; write elsewhere",
                    out.display(),
                    input.display()
                );
            }
        }
        Ok(())
    }

    /// Refuses the flags that only raw files or colour PNGs read when the file is of
    /// another format, or is an imported directory (`format` `None`): they would be
    /// ignored without a word.
    pub fn refuse_unused_by(&self, format: Option<Format>, path: &Path) -> anyhow::Result<()> {
        let raw = matches!(format, Some(Format::Raw16 | Format::RawF32));
        let unused = [
            ("--raw-size", self.raw_size.is_some() && !raw),
            ("--byte-order", self.byte_order.is_some() && !raw),
            (
                "--encoding",
                self.encoding.is_some() && format != Some(Format::Png),
            ),
            ("--format", self.format.is_some() && format.is_none()),
        ];
        if let Some((flag, _)) = unused.iter().find(|(_, unused)| *unused) {
            let what = format.map_or("an imported directory".to_owned(), |f| {
                format!("a {} file", f.name())
            });
            anyhow::bail!("{}: {flag} does not apply to {what}", path.display());
        }
        Ok(())
    }

    /// `stated` (a file's or a directory's mapping) with the flags given replacing its parts.
    pub fn mapping_over(&self, stated: WorldMapping) -> WorldMapping {
        WorldMapping {
            cell_size: self.cell_size.unwrap_or(stated.cell_size),
            height_scale: self.height_scale.unwrap_or(stated.height_scale),
            height_offset: self.height_offset.unwrap_or(stated.height_offset),
        }
    }

    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            encoding: self.encoding,
            raw_size: self.raw_size,
            byte_order: self.byte_order.unwrap_or(ByteOrder::Little),
            max_samples: self.max_samples,
            format: self.format,
        }
    }

    /// Loads the file (or generates the built-in terrain) and applies the mapping flags.
    /// An imported directory's unreadable tiles are stood in for by a coarser level, each
    /// reported once on stderr ([`TiledTerrain::to_heightfield_standing_in`]).
    pub fn load(&self) -> anyhow::Result<Terrain> {
        self.load_as(true)
    }

    /// [`TerrainArgs::load`], failing on an unreadable tile (for `import`, which must not
    /// write interpolated samples as if they were the terrain's).
    pub fn load_exact(&self) -> anyhow::Result<Terrain> {
        self.load_as(false)
    }

    fn load_as(&self, stand_in: bool) -> anyhow::Result<Terrain> {
        let mut stood_in = 0;
        let (field, source, name) = match &self.file {
            Some(path) if path.is_dir() => {
                self.refuse_unused_by(None, path)?;
                let bar = progress::spinner(format!("assembling {}", path.display()));
                let field = TiledTerrain::open(path).and_then(|tiled| {
                    if stand_in {
                        tiled.to_heightfield_standing_in(0, self.max_samples)
                    } else {
                        Ok((tiled.to_heightfield(0, self.max_samples)?, Vec::new()))
                    }
                });
                bar.finish_and_clear();
                let field = field.map(|(field, stand_ins)| {
                    for s in &stand_ins {
                        eprintln!(
                            "warning: {}: a coarser level stands in (level {} interpolated \
                             from level {})",
                            s.fault, s.level, s.from_level
                        );
                    }
                    stood_in = stand_ins.len();
                    field
                });
                let field = match field {
                    Err(error @ terralod_core::tiles::TileError::TooLargeForMemory { .. }) => {
                        anyhow::bail!(
                            "reading {}: {error}: a streaming algorithm ({}) streams the \
                             directory instead of loading it, and in mesh, render, view and \
                             bench algorithm adaptive with --page-frames N builds its \
                             tree from the tiles page by page (or raise --max-samples)",
                            path.display(),
                            terralod_core::lod::streaming_names()
                        )
                    }
                    field => field.with_context(|| format!("reading {}", path.display()))?,
                };
                (field, None, path.display().to_string())
            }
            Some(path) => {
                let bar = progress::spinner(format!("loading {}", path.display()));
                let loaded = io::load(path, &self.load_options());
                bar.finish_and_clear();
                let loaded = loaded?;
                self.refuse_unused_by(Some(loaded.source.format), path)?;
                (
                    loaded.heightfield,
                    Some(loaded.source),
                    path.display().to_string(),
                )
            }
            None => {
                let bar = progress::spinner("generating the built-in terrain");
                let field = terralod_core::generate::builtin();
                bar.finish_and_clear();
                (field, None, "built-in terrain".to_string())
            }
        };
        let mapping = self.mapping_over(field.mapping());
        let heightfield = field
            .with_mapping(mapping)
            .with_context(|| format!("{name}: --cell-size/--height-scale/--height-offset"))?;
        Ok(Terrain {
            heightfield,
            source,
            name,
            stood_in,
        })
    }
}

/// Parses `WxH` (for example `1920x1080`).
pub fn parse_size(text: &str) -> Result<(u32, u32), String> {
    let (w, h) = text
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("expected WxH, like 1920x1080, got '{text}'"))?;
    let parse = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("'{s}' in '{text}' is not a positive whole number"))
    };
    Ok((parse(w)?, parse(h)?))
}

/// Parses a finite number (`nan` and `inf` are refused as flags, exit code 2).
pub fn parse_finite(text: &str) -> Result<f32, String> {
    text.trim()
        .parse::<f32>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("'{text}' is not a finite number"))
}

/// Parses a finite number greater than 0 (a cell size).
pub fn parse_positive(text: &str) -> Result<f32, String> {
    let value = parse_finite(text)?;
    if value <= 0.0 {
        return Err(format!("'{text}' is not greater than 0"));
    }
    Ok(value)
}

/// Parses a finite, non-zero number (a height scale: 0 would flatten every height).
pub fn parse_nonzero(text: &str) -> Result<f32, String> {
    let value = parse_finite(text)?;
    if value == 0.0 {
        return Err(format!("'{text}' must not be 0"));
    }
    Ok(value)
}

/// The length of `path`, a regular file read as the `what` of a flag: the loaders' check
/// ([`io::regular_file`]), so a FIFO or a device (`/dev/zero`) is refused instead of
/// blocking or reading forever.
pub fn regular_file_len(path: &Path, what: &str) -> anyhow::Result<u64> {
    let cannot = || format!("{}: cannot read the {what}", path.display());
    match io::regular_file(path) {
        Ok(metadata) => Ok(metadata.len()),
        Err(io::Problem::IsDirectory) => anyhow::bail!("{}: is a directory", cannot()),
        Err(problem) => Err(anyhow::Error::new(problem).context(cannot())),
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_finite, parse_nonzero, parse_positive, parse_size};

    #[test]
    fn numbers_parse_and_refuse_what_no_mapping_can_use() {
        assert_eq!(parse_finite("-2.5"), Ok(-2.5));
        assert_eq!(parse_positive("30"), Ok(30.0));
        assert_eq!(parse_nonzero("-0.05"), Ok(-0.05));
        for bad in ["nan", "inf", "-inf", "1e39", "x", ""] {
            assert!(parse_finite(bad).is_err(), "{bad}");
        }
        for bad in ["0", "-1", "-0", "nan"] {
            assert!(parse_positive(bad).is_err(), "{bad}");
        }
        assert!(parse_nonzero("0").is_err());
        assert!(parse_nonzero("-0.0").is_err());
    }

    #[test]
    fn sizes_parse_and_refuse_garbage() {
        assert_eq!(parse_size("1920x1080"), Ok((1920, 1080)));
        assert_eq!(parse_size("3X7"), Ok((3, 7)));
        assert!(parse_size("0x5").is_err());
        assert!(parse_size("12").is_err());
        assert!(parse_size("-3x4").is_err());
        assert!(parse_size("axb").is_err());
    }
}
