//! Flags shared by every command that takes a terrain: the file (or the built-in terrain),
//! how to decode it, and the world mapping of feature H1.

use crate::progress;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use terralod_core::heightfield::{Heightfield, WorldMapping};
use terralod_core::io::{self, ByteOrder, Format, LoadOptions, RgbEncoding, SourceInfo};

/// A terrain source and its world mapping.
#[derive(Debug, Args)]
pub struct TerrainArgs {
    /// Elevation file (PNG, GeoTIFF, .hgt, .asc, .r16/.r32/.f32). Without it: the built-in
    /// procedural terrain.
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
    /// Byte order of a raw file: little (le) or big (be).
    #[arg(long, value_parser = str::parse::<ByteOrder>, default_value = "little")]
    pub byte_order: ByteOrder,
    /// Largest number of samples a file may claim before it is refused unread.
    #[arg(long, default_value_t = LoadOptions::default().max_samples)]
    pub max_samples: u64,
    /// World distance between samples (x = col * cell_size, z = row * cell_size). Default:
    /// the file's metric spacing when it states one, else 1.
    #[arg(long)]
    pub cell_size: Option<f32>,
    /// World height per raw unit (y = raw * height_scale + height_offset).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub height_scale: f32,
    /// World height of a raw value of 0.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub height_offset: f32,
}

/// A loaded terrain and where it came from.
#[derive(Debug)]
pub struct Terrain {
    pub heightfield: Heightfield,
    /// None for the built-in terrain.
    pub source: Option<SourceInfo>,
    /// What the user would call it in a message.
    pub name: String,
}

impl TerrainArgs {
    fn load_options(&self) -> LoadOptions {
        LoadOptions {
            encoding: self.encoding,
            raw_size: self.raw_size,
            byte_order: self.byte_order,
            max_samples: self.max_samples,
            format: self.format,
        }
    }

    /// Loads the file (or generates the built-in terrain) and applies the mapping flags.
    pub fn load(&self) -> anyhow::Result<Terrain> {
        let (field, source, name) = match &self.file {
            Some(path) => {
                let bar = progress::spinner(format!("loading {}", path.display()));
                let loaded = io::load(path, &self.load_options());
                bar.finish_and_clear();
                let loaded = loaded?;
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
        let mapping = WorldMapping {
            cell_size: self.cell_size.unwrap_or(field.mapping().cell_size),
            height_scale: self.height_scale,
            height_offset: self.height_offset,
        };
        let heightfield = field
            .with_mapping(mapping)
            .with_context(|| format!("{name}: --cell-size/--height-scale/--height-offset"))?;
        Ok(Terrain {
            heightfield,
            source,
            name,
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

#[cfg(test)]
mod tests {
    use super::parse_size;

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
