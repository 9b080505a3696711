//! Hot loops compiled for AVX-512 where the CPU has it, chosen at run time. The release
//! build targets baseline x86-64: 4-float lanes, and no vector 64-bit products.

/// Whether this CPU has AVX-512 F, BW, DQ and VL (and AVX2). The standard library caches
/// the detection: after the first call, a load and a test.
#[inline]
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        has!("avx2") && has!("avx512f") && has!("avx512dq") && has!("avx512vl") && has!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `f()`, compiled for AVX-512 where [`available`]: LLVM inlines `f` (its only call) into
/// a function with those features, and with it whatever `f` inlines, so the hot functions
/// `f` calls should be `#[inline(always)]`.
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
