//! Hot loops compiled for AVX-512 where the CPU has it, chosen at run time. The release
//! build targets baseline x86-64: 4-float lanes, and no vector 64-bit products.

/// Whether this CPU has AVX-512 F, BW, DQ and VL (and AVX2). The standard library caches
/// the detection: after the first call, a load and a test.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn available() -> bool {
    use std::arch::is_x86_feature_detected as has;
    has!("avx2") && has!("avx512f") && has!("avx512dq") && has!("avx512vl") && has!("avx512bw")
}

/// `f()`, compiled for AVX-512 where the CPU has it ([`available`]; elsewhere, and on other
/// architectures, as it is). `f` is the only call in a function with those features, which
/// optimised builds inline it into (`perf` showed the import's statistics there, in
/// 512-bit lanes), with what `f` inlines: the hot functions `f` calls should be
/// `#[inline(always)]`. Unoptimised builds may not inline it and run baseline code.
#[inline(always)]
pub(crate) fn run<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if available() {
        #[target_feature(enable = "avx2,avx512f,avx512dq,avx512vl,avx512bw")]
        fn wide<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        // SAFETY: the CPU has the features (`available`).
        #[allow(unsafe_code)]
        return unsafe { wide(f) };
    }
    f()
}
