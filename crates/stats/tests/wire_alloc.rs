//! Decoding a histogram another process sent never allocates by a size taken from its bytes:
//! with a payload length of 4 GB or bounds of 2^62 at 5 digits in the header, the largest
//! single allocation stays small (the deserializer would otherwise size its buffers by them
//! and, zeroed lazily by the OS or not, ask for gigabytes).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use sanbench_stats::LatencyHistogram;

struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator; only records the size asked for.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LARGEST.fetch_max(new, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Largest = Largest;

#[test]
fn hostile_sizes_allocate_nothing_large() {
    let mut h = LatencyHistogram::new();
    h.record(12_345);
    let good = h.to_bytes();
    // sanbench's histogram (1 ns .. 1 h, 3 digits) is well under this.
    let limit = 16 << 20;
    LARGEST.store(0, Ordering::Relaxed);
    assert!(LatencyHistogram::from_bytes(&good).is_ok());
    let normal = LARGEST.load(Ordering::Relaxed);
    assert!(
        normal < limit,
        "a normal decode allocated {normal} bytes at once"
    );

    let v2 = 32; // after sum, min and max
    let mut long = good.clone();
    long[v2 + 4..v2 + 8].copy_from_slice(&u32::MAX.to_be_bytes());
    let mut wide = good.clone();
    wide[v2 + 12..v2 + 16].copy_from_slice(&5u32.to_be_bytes());
    wide[v2 + 24..v2 + 32].copy_from_slice(&(1u64 << 62).to_be_bytes());
    for (what, bytes) in [
        ("payload length 4 GB", long),
        ("bounds 2^62 at 5 digits", wide),
    ] {
        LARGEST.store(0, Ordering::Relaxed);
        assert!(LatencyHistogram::from_bytes(&bytes).is_err(), "{what}");
        let got = LARGEST.load(Ordering::Relaxed);
        assert!(got < limit, "{what}: allocated {got} bytes at once");
    }
}
