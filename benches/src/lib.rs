//! Benchmark crate of terralod: see `benches/`.
