//! Test kit of terralod: fixtures, proptest strategies and the independent oracles (mesh
//! checker, brute-force error measurement) that referee every LOD algorithm.
//!
//! The oracles share no code path with what they check: they do their own arithmetic
//! (exact integers for topology, f64 for projection) from the raw samples.
