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
        let cap = match std::env::var(LANES_VARIABLE) {
            Err(_) => Lanes::Avx512,
            Ok(value) => match value.trim().to_ascii_lowercase().as_str() {
                "" | "avx512" => Lanes::Avx512,
                "avx2" => Lanes::Avx2,
                "baseline" => Lanes::Baseline,
                _ => {
                    eprintln!(
                        "warning: {LANES_VARIABLE}={value:?} is none of avx512, avx2 or \
                         baseline; ignored"
                    );
                    Lanes::Avx512
                }
            },
        };
        detected().min(cap)
    })
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
