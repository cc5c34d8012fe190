//! The memory allocator of the `lfs` binary and the benchmarks: mimalloc, told to keep the
//! memory it frees.
//!
//! With glibc's malloc (and with mimalloc's defaults) every large block freed — a batch of
//! activations, a 20 MB gradient — goes back to the kernel and is page-faulted and zeroed
//! again at the next update (a batch-32 pre-training update went from 0.57 to 0.43 s with
//! mimalloc alone; BENCHMARKS.md, issue #5). A library cannot pick the global allocator, so
//! binaries opt in:
//!
//! ```no_run
//! #[global_allocator]
//! static GLOBAL: lfs::alloc::Allocator = lfs::alloc::Allocator {};
//!
//! fn main() {
//!     lfs::alloc::keep_freed_memory();
//! }
//! ```

/// mimalloc as a Rust global allocator.
pub type Allocator = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_e` (include/mimalloc.h of
/// libmimalloc-sys 0.1.49: the 16th entry, after `mi_option_deprecated_eager_commit_delay`).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Never return freed memory to the OS (mimalloc's `purge_delay` = −1): the process keeps its
/// peak footprint, and a training loop reuses the same pages every update. Has no effect
/// unless mimalloc is the global allocator.
pub fn keep_freed_memory() {
    // SAFETY: mi_option_set only stores an integer option; any value is valid for it.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}
