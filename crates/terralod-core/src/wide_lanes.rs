//! Hot loops compiled for AVX-512 or AVX2 where the CPU has them, chosen at run time. The
//! release build targets baseline x86-64: 4-float lanes, and no vector 64-bit products.
//!
//! `TERRALOD_LANES=avx2` or `=baseline` caps the choice (a CPU without AVX-512 measured
//! on one with it; a kernel compared with the other), read once per process. The
//! widest the CPU has is used otherwise.

use std::sync::OnceLock;

/// The widest vector instructions a hot loop uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Lanes {
    /// What the build targets (4-float SSE lanes on x86-64).
    Baseline,
    /// AVX2: 8-float lanes, gathers.
    Avx2,
    /// AVX-512 F, BW, DQ and VL (and AVX2): 16-float lanes, masks, vector 64-bit products.
    Avx512,
}

/// The variable capping [`lanes`].
pub(crate) const LANES_VARIABLE: &str = "TERRALOD_LANES";

/// What this CPU has (the standard library caches the detection).
pub(crate) fn detected() -> Lanes {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let avx2 = has!("avx2");
        if avx2 && has!("avx512f") && has!("avx512dq") && has!("avx512vl") && has!("avx512bw") {
            return Lanes::Avx512;
        }
        if avx2 {
            return Lanes::Avx2;
        }
    }
    Lanes::Baseline
}

/// What the hot loops use: [`detected`], capped by [`LANES_VARIABLE`].
pub(crate) fn lanes() -> Lanes {
    static CHOSEN: OnceLock<Lanes> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let value = std::env::var(LANES_VARIABLE).ok();
        let cap = cap_named(value.as_deref()).unwrap_or_else(|| {
            eprintln!(
                "warning: {LANES_VARIABLE}={:?} is none of avx512, avx2 or baseline; ignored",
                value.unwrap_or_default()
            );
            Lanes::Avx512
        });
        detected().min(cap)
    })
}

/// The cap a value of [`LANES_VARIABLE`] names (none set or empty: no cap), or `None` for a
/// value naming no width.
fn cap_named(value: Option<&str>) -> Option<Lanes> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("" | "avx512") => Some(Lanes::Avx512),
        Some("avx2") => Some(Lanes::Avx2),
        Some("baseline") => Some(Lanes::Baseline),
        Some(_) => None,
    }
}

/// `f()` compiled for [`lanes`] ([`run_at`]).
#[inline(always)]
pub(crate) fn run<R>(f: impl FnOnce() -> R) -> R {
    run_at(lanes(), f)
}

/// `f()` compiled for `wanted`, or for the widest this CPU has if it has less: `f` is the
/// only call in a function with those features. **`f` must be an `#[inline(always)]`
/// closure** (`run(#[inline(always)] || …)`), and the hot functions it calls
/// `#[inline(always)]` too: a closure is compiled without its caller's features, and
/// LLVM left a large one out of line, in baseline code (the import's statistics ran in
/// SSE lanes that way, unnoticed, from stop 45 to stop 46; `perf annotate` shows which
/// lanes a function uses). Unoptimised builds may not inline it and run baseline code.
#[inline(always)]
pub(crate) fn run_at<R>(wanted: Lanes, f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    match wanted.min(detected()) {
        Lanes::Avx512 => {
            #[target_feature(enable = "avx2,avx512f,avx512dq,avx512vl,avx512bw")]
            fn avx512<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            // SAFETY: the CPU has the features (`detected`).
            #[allow(unsafe_code)]
            return unsafe { avx512(f) };
        }
        Lanes::Avx2 => {
            #[target_feature(enable = "avx2")]
            fn avx2<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            // SAFETY: as above.
            #[allow(unsafe_code)]
            return unsafe { avx2(f) };
        }
        Lanes::Baseline => {}
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = wanted;
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_names_a_cap_in_any_case_and_unset_or_empty_caps_nothing() {
        for (value, cap) in [
            (None, Some(Lanes::Avx512)),
            (Some(""), Some(Lanes::Avx512)),
            (Some("  "), Some(Lanes::Avx512)),
            (Some("avx512"), Some(Lanes::Avx512)),
            (Some("AVX2"), Some(Lanes::Avx2)),
            (Some(" avx2\n"), Some(Lanes::Avx2)),
            (Some("Baseline"), Some(Lanes::Baseline)),
            (Some("sse"), None),
            (Some("avx"), None),
            (Some("avx2,avx512"), None),
        ] {
            assert_eq!(cap_named(value), cap, "{value:?}");
        }
    }

    #[test]
    fn the_lanes_chosen_are_at_most_what_the_cpu_has() {
        assert!(lanes() <= detected());
        // `run_at` caps too: asking for more than the CPU has runs what it has.
        assert_eq!(run_at(Lanes::Avx512, || 7), 7);
    }
}
