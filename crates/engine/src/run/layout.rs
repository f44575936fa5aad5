//! A stream's arena: a private slot per tag, then the random pool writes draw from
//! ([`Layout`]), and the stamping of a write's data into its tag's slot ([`stamp_slot`]).

use crate::arena::{Arena, ALIGN};
use crate::spec::Workload;
use crate::stamp::{Stamper, POOL, UNIT};

/// Bytes of spare slots a stream that makes its writes ahead keeps at most (at least one slot,
/// at most one per tag): data made further ahead than the next completions take would only
/// leave the cache before it is sent.
pub(crate) const AHEAD_BYTES: usize = 2 << 20;

/// Arena layout of one stream: a private slot per tag, then the random pool writes draw from.
pub(crate) struct Layout {
    pub(crate) slot: usize,
    /// Slots after the tags' for writes made ahead (run/ahead.rs); 0 when none are.
    pub(crate) spares: usize,
    pub(crate) pool_base: usize,
    pub(crate) pool_len: usize,
    pub(crate) total: usize,
}

impl Layout {
    pub(crate) fn new(max_read: u64, max_write: u64, depth: u32) -> Layout {
        let slot = (max_read.max(max_write) as usize).next_multiple_of(ALIGN);
        let pool_base = slot * depth as usize;
        let pool_len = if max_write > 0 { POOL + UNIT } else { 0 };
        Layout {
            slot,
            spares: 0,
            pool_base,
            pool_len,
            total: pool_base + pool_len,
        }
    }

    /// With `spares` more slots between the tags' and the pool.
    pub(super) fn with_spares(self, spares: usize) -> Layout {
        let pool_base = self.slot * (self.pool_base / self.slot.max(1) + spares);
        Layout {
            spares,
            pool_base,
            total: pool_base + self.pool_len,
            ..self
        }
    }

    /// The slots a stream that makes its writes ahead (run/ahead.rs) keeps spare: one per tag,
    /// within [`AHEAD_BYTES`] (at least one).
    pub(super) fn ahead_spares(&self, depth: u32) -> usize {
        (AHEAD_BYTES / self.slot.max(1)).clamp(1, (depth as usize).max(1))
    }

    pub(super) fn of(w: &Workload, depth: u32) -> Layout {
        let max = |read: bool| {
            w.segments
                .iter()
                .filter(|s| {
                    if read {
                        s.read_pct > 0.0
                    } else {
                        s.read_pct < 100.0
                    }
                })
                .map(|s| if read { s.read_bs } else { s.write_bs })
                .max()
                .unwrap_or(0)
        };
        Layout::new(max(true), max(false), depth)
    }
}

/// Fills the write slot of `tag` for a write of `len` bytes at `offset`.
///
/// # Safety
/// No I/O of `tag` may be in flight (the slot is the tag's alone) and the pool is only read.
pub(crate) unsafe fn stamp_slot(
    arena: &Arena,
    lay: &Layout,
    stamper: &mut Stamper,
    tag: usize,
    offset: u64,
    len: u32,
    gen: impl Fn(u64) -> u32,
) -> usize {
    // SAFETY: the caller's guarantee.
    unsafe { stamp_at(arena, lay, stamper, tag * lay.slot, offset, len, gen) }
}

/// Fills the slot at byte `buf` of the arena for a write of `len` bytes at `offset`.
///
/// # Safety
/// No I/O may be using the slot and the pool is only read.
#[inline]
pub(crate) unsafe fn stamp_at(
    arena: &Arena,
    lay: &Layout,
    stamper: &mut Stamper,
    buf: usize,
    offset: u64,
    len: u32,
    gen: impl Fn(u64) -> u32,
) -> usize {
    // SAFETY: the caller guarantees the slot is idle; the pool region is never written after
    // the arena was filled, so shared reads of it are sound.
    let (dst, pool) = unsafe {
        (
            arena.slice_mut(buf, len as usize),
            arena.slice(lay.pool_base, lay.pool_len),
        )
    };
    stamper.fill_gen(dst, offset, pool, gen);
    buf
}
