//! Cache prefetch hints for the per-event state of many flows.
//!
//! With thousands of flows, the state an event touches (its endpoint's
//! transport, its link) was last touched hundreds of milliseconds of
//! simulated time earlier and has left the caches. Found one miss at a
//! time as the code walks it, each miss waits for the one before; named
//! up front, the lines load together (docs/memory.md, "Cost per flow").
//! A prefetch is a hint: it never faults, reads nothing the program can
//! observe and changes no result.

/// Most bytes one hint loads (a transport naming more is capped).
const MAX_BYTES: usize = 4096;

/// Asks the processor to start loading the cache lines of `len` bytes at
/// `ptr` (at most [`MAX_BYTES`]). A no-op on targets other than x86-64.
#[inline]
pub(crate) fn lines(ptr: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let len = len.min(MAX_BYTES);
        let mut off = 0;
        while off < len {
            // SAFETY: PREFETCHT0 is a hint: it does not fault on any
            // address, valid or not, and has no effect the program can
            // observe; `wrapping_add` computes the address without
            // asserting that it is in bounds.
            #[allow(unsafe_code)]
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(ptr.wrapping_add(off).cast::<i8>())
            };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ptr, len);
}
