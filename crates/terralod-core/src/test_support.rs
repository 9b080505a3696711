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

/// SplitMix64: advances `state` and returns the next well-mixed 64-bit value, for tests that
/// want every bit scrambled (an LCG's low bits are not).
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
