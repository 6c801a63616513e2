//! Counting every allocation in a test process, for the tests that prove the
//! request path allocates nothing. A test binary installs [`Counting`] as
//! its `#[global_allocator]` and keeps one test, so nothing else allocates
//! while it counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The system allocator, counting allocations and reallocations.
pub struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations anywhere in the process while `work` runs, and how many a
/// server may make meanwhile without allocating per request: a poller hands
/// its worker back to uppercut about once a second, and that message
/// allocates a few times, so the allowance grows with the time taken (a
/// loaded machine takes longer). A per-request allocation would show up
/// once per request, far above it.
pub fn during(work: impl FnOnce()) -> (usize, usize) {
    let start = Instant::now();
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    work();
    let counted = ALLOCATIONS.load(Ordering::Relaxed) - before;
    let allowed = 50 + 50 * start.elapsed().as_secs() as usize;
    (counted, allowed)
}
