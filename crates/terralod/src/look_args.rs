//! How a terrain is drawn, shared by `render` and `view`: debug views, the frozen LOD
//! camera, a colour texture and fog.

use crate::camera_args::FrozenCameraArgs;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct LookArgs {
    /// Draw every triangle's edges over the shading.
    #[arg(long)]
    pub wireframe: bool,
    /// Colour the terrain by a debug quantity.
    #[arg(long, value_enum)]
    pub color_by: Option<ColorBy>,
    /// Draw the boxes of the drawn nodes (or blocks, or patches).
    #[arg(long)]
    pub boxes: bool,
    #[command(flatten)]
    pub frozen: FrozenCameraArgs,
    /// A colour image laid over the terrain's extent (PNG, JPEG or TIFF).
    #[arg(long, value_name = "FILE")]
    pub texture: Option<PathBuf>,
    /// No distance fog.
    #[arg(long)]
    pub no_fog: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorBy {
    /// log2 of each triangle's size in cells.
    Lod,
    /// Patches by the LOD frustum: inside, crossing its boundary, outside (patch
    /// algorithms; article 003's debug view).
    Frustum,
}

impl LookArgs {
    pub fn lod_colours(&self) -> bool {
        self.color_by == Some(ColorBy::Lod)
    }

    pub fn frustum_shades(&self) -> bool {
        self.color_by == Some(ColorBy::Frustum)
    }
}
