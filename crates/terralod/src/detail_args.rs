//! Algorithm adaptive's local detail flags (A5, shared by `mesh`, `render`, `view` and
//! `bench`): a finer heightfield inserted into its tree, and building the algorithm with it.

use crate::terrain_args::parse_positive;
use anyhow::{Context, bail};
use clap::Args;
use std::path::PathBuf;
use terralod_core::Heightfield;
use terralod_core::io::{self, LoadOptions};
use terralod_core::lod::{
    AdaptiveLod, AlgorithmEntry, Detail, LodAlgorithm, LodOptions, check_indices,
};
use terralod_core::pyramid::Pyramid;

#[derive(Debug, Args)]
pub struct DetailArgs {
    /// Algorithm adaptive: a finer heightfield (any format the loaders read) inserted into
    /// its tree, replacing the terrain where it covers it; its raw values go through the
    /// terrain's --height-scale and --height-offset.
    #[arg(long, value_name = "FILE", requires_all = ["detail_origin", "detail_cell_size"])]
    pub detail: Option<PathBuf>,
    /// World position X,Z of the detail's first sample (on its lattice: multiples of
    /// --detail-cell-size).
    #[arg(long, value_name = "X,Z", value_parser = parse_xz, allow_hyphen_values = true,
          requires = "detail")]
    pub detail_origin: Option<(f32, f32)>,
    /// The detail's cell size: the terrain's cell size divided by a power of two.
    #[arg(long, value_name = "M", value_parser = parse_positive, requires = "detail")]
    pub detail_cell_size: Option<f32>,
}

/// Parses `X,Z`.
fn parse_xz(text: &str) -> Result<(f32, f32), String> {
    let parts: Vec<&str> = text.split(',').collect();
    let [x, z] = parts.as_slice() else {
        return Err(format!("expected X,Z, like 1200,-40.5, got '{text}'"));
    };
    let parse = |s: &str| {
        s.trim()
            .parse::<f32>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("'{s}' in '{text}' is not a finite number"))
    };
    Ok((parse(x)?, parse(z)?))
}

impl DetailArgs {
    /// The detail file's heightfield, if `--detail` was given (`algo` must then be
    /// `adaptive`, the algorithm whose tree takes it).
    pub fn load(&self, algo: &str, max_samples: u64) -> anyhow::Result<Option<Heightfield>> {
        let Some(path) = &self.detail else {
            return Ok(None);
        };
        if algo != "adaptive" {
            bail!("--detail is inserted into algorithm adaptive's tree: give --algo adaptive");
        }
        let options = LoadOptions {
            max_samples,
            ..LoadOptions::default()
        };
        Ok(Some(io::load(path, &options)?.heightfield))
    }

    /// Places a loaded detail on `terrain`.
    pub fn place<'d>(
        &self,
        terrain: &Heightfield,
        detail: &'d Heightfield,
    ) -> anyhow::Result<Detail<'d>> {
        let path = self.detail.as_deref().unwrap_or(std::path::Path::new(""));
        let (Some(origin), Some(cell_size)) = (self.detail_origin, self.detail_cell_size) else {
            bail!("--detail needs --detail-origin X,Z and --detail-cell-size M");
        };
        Detail::new(terrain, detail, origin, cell_size)
            .with_context(|| format!("--detail {}", path.display()))
    }
}

/// Builds registry entry `entry` over `field`, with the detail inserted when there is one
/// (only algorithm adaptive takes one); the registry refuses what cannot be built.
pub fn build_algorithm<'a>(
    entry: &AlgorithmEntry,
    field: &'a Heightfield,
    pyramid: &'a Pyramid,
    options: &LodOptions,
    detail: Option<&Detail<'_>>,
) -> anyhow::Result<Box<dyn LodAlgorithm + 'a>> {
    match detail {
        Some(detail) if entry.name == "adaptive" => {
            check_indices(field.width(), field.height())?;
            let lod = AdaptiveLod::with_detail(field, pyramid, *options, options.adaptive, detail)?;
            Ok(Box::new(lod.with_pages_in(&std::env::temp_dir())?))
        }
        _ => Ok(entry.build(field, pyramid, options)?),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_xz;

    #[test]
    fn positions_parse_and_refuse_garbage() {
        assert_eq!(parse_xz("1200,-40.5"), Ok((1200.0, -40.5)));
        for bad in ["1,2,3", "1", "a,b", "nan,0", ""] {
            assert!(parse_xz(bad).is_err(), "{bad}");
        }
    }
}
