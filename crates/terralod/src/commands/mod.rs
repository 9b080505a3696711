//! One module per subcommand.

pub mod bench;
pub mod generate;
pub mod import;
pub mod info;
pub mod mesh;
pub mod render;
pub mod view;
