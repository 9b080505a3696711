//! Helpers shared by the core's unit tests (compiled for tests only).

/// Deterministic pseudo-random 16-bit samples in `0..=max` (a 64-bit LCG), so fixed tests
/// need no seed plumbing and no extra dependency.
pub(crate) fn lcg_values(n: usize, seed: u64, max: u16) -> Vec<u16> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) % (u64::from(max) + 1)) as u16
        })
        .collect()
}
