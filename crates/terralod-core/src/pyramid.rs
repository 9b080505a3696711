//! Min/max and error pyramids over the quadtree of the padded grid (feature H4).

/// Per-node min/max height and error bound for every quadtree node.
#[derive(Clone, Debug)]
pub struct Pyramid {}
