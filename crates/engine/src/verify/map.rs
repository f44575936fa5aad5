//! The generation map: one byte per granule of the span, shared by every stream of a run.
//!
//! A cell holds the granule's generation (1..=63, 0 for "not written while this map was
//! kept"), an EITHER bit (a write whose outcome is unknown: the block holds this generation or
//! the one before) and a BUSY bit (an I/O of the run is in flight over it). BUSY is what keeps
//! two in-flight I/Os of a run from overlapping: a stream sets it on every granule of an I/O
//! before submitting (a collision is redrawn) and clears it on completion, when a write's new
//! generation is stored. So while an I/O is in flight, its granules' expected content cannot
//! change under it, and what a read must find is always known.
//!
//! Trims and write-zeroes keep a second byte per granule, made on the first one (a workload
//! without them pays nothing): [`TRIM_ZEROS`] when the granule must read zeros (write-zeroes,
//! or a trim on a target that promises zeros after it: iSCSI LBPRZ, NVMe DLFEAT),
//! [`TRIM_MAYBE`] when it may read zeros or what its cell says (a trim elsewhere, or a
//! discard whose outcome is unknown). A write's commit clears it.
//!
//! Cost: one byte per granule, 2^40 / granule bytes per TiB (256 MiB at 4 KiB, 2 GiB at 512 B);
//! the CLI picks the largest granule every I/O of the workload is aligned to.

use std::sync::atomic::Ordering;

use super::state::{Cells, Mapping};

pub const BUSY: u8 = 0x80;
pub const EITHER: u8 = 0x40;
pub const GEN: u8 = 0x3f;

/// A granule's discard state: reads zeros, or zeros or what its cell says.
pub const TRIM_ZEROS: u8 = 2;
pub const TRIM_MAYBE: u8 = 1;

/// The generation after `g` (1..=63, wrapping to 1; 0 is "unknown").
#[inline]
pub fn next_gen(g: u8) -> u8 {
    if g & GEN >= GEN {
        1
    } else {
        (g & GEN) + 1
    }
}

/// The generation before `g` (0 when `g` is the first one written).
#[inline]
pub fn prev_gen(g: u8) -> u8 {
    match g & GEN {
        0 | 1 => 0,
        x => x - 1,
    }
}

pub struct GenMap {
    shift: u32,
    cells: Cells,
    /// Per granule, the generation known durable (`--verify-state` only).
    durable: Option<Cells>,
    /// Per granule, its discard state (made by the first trim or write-zeroes).
    trimmed: std::sync::OnceLock<Cells>,
    _mapping: Option<Mapping>,
}

impl GenMap {
    /// A map of `span` bytes in granules of `granule` bytes (a power of two).
    pub fn new(span: u64, granule: u64) -> GenMap {
        let shift = granule.max(1).trailing_zeros();
        let n = span.div_ceil(1 << shift) as usize;
        GenMap {
            shift,
            cells: Cells::heap(n),
            durable: None,
            trimmed: std::sync::OnceLock::new(),
            _mapping: None,
        }
    }

    /// A map over a state file's arrays. Cells left BUSY by a process that died with I/O in
    /// flight become "the next generation or this one" (a write may or may not have landed).
    pub fn mapped(granule: u64, mapping: Mapping, cur: Cells, dur: Cells) -> GenMap {
        let m = GenMap {
            shift: granule.max(1).trailing_zeros(),
            cells: cur,
            durable: Some(dur),
            trimmed: std::sync::OnceLock::new(),
            _mapping: Some(mapping),
        };
        for c in m.cells.as_slice() {
            let v = c.load(Ordering::Relaxed);
            if v & BUSY != 0 {
                c.store(next_gen(v) | EITHER, Ordering::Relaxed);
            }
        }
        m
    }

    /// Whether the map keeps durable generations (a state file).
    pub fn tracks_durable(&self) -> bool {
        self.durable.is_some()
    }

    /// Records `gens` (one per granule of the range) as durable.
    pub fn set_durable(&self, offset: u64, len: u64, gens: &[u8]) {
        if let Some(d) = &self.durable {
            let d = d.as_slice();
            for (i, g) in self.range(offset, len).zip(gens) {
                d[i].store(g & GEN, Ordering::Release);
            }
        }
    }

    /// Sets every durable cell to `gen`.
    pub fn set_all_durable(&self, gen: u8) {
        if let Some(d) = &self.durable {
            for c in d.as_slice() {
                c.store(gen & GEN, Ordering::Release);
            }
        }
    }

    /// Writes the durable array back to the state file.
    pub fn sync_durable(&self) {
        if let Some(d) = &self.durable {
            d.sync();
        }
    }

    /// The durable generation of the granule holding `offset` (0: none known).
    pub fn durable_at(&self, offset: u64) -> u8 {
        self.durable.as_ref().map_or(0, |d| {
            d.as_slice()
                .get(self.index(offset))
                .map_or(0, |c| c.load(Ordering::Acquire))
        })
    }

    pub fn granule(&self) -> u64 {
        1 << self.shift
    }

    pub fn len(&self) -> usize {
        self.cells.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The granules `[offset, offset + len)` covers.
    #[inline]
    pub fn range(&self, offset: u64, len: u64) -> std::ops::Range<usize> {
        let a = (offset >> self.shift) as usize;
        let b = ((offset + len.max(1) - 1) >> self.shift) as usize + 1;
        let n = self.len();
        a.min(n)..b.min(n)
    }

    /// Index of the granule holding byte `offset`.
    #[inline]
    pub fn index(&self, offset: u64) -> usize {
        (offset >> self.shift) as usize
    }

    /// Marks the range busy and copies its cells (without BUSY) into `out`; `false`, with
    /// nothing marked, when another in-flight I/O holds any of it.
    pub fn try_lock(&self, offset: u64, len: u64, out: &mut Vec<u8>) -> bool {
        let r = self.range(offset, len);
        out.clear();
        for i in r.clone() {
            let old = self.cells.as_slice()[i].fetch_or(BUSY, Ordering::Acquire);
            if old & BUSY != 0 {
                for j in r.start..i {
                    self.cells.as_slice()[j].fetch_and(!BUSY, Ordering::Release);
                }
                out.clear();
                return false;
            }
            out.push(old);
        }
        true
    }

    /// Ends a lock without changing the cells (a read, or a write that was never sent).
    pub fn unlock(&self, offset: u64, len: u64) {
        for i in self.range(offset, len) {
            self.cells.as_slice()[i].fetch_and(!BUSY, Ordering::Release);
        }
    }

    /// Ends a write's lock by storing its generations (one per granule, no flag bits).
    pub fn commit(&self, offset: u64, len: u64, gens: &[u8]) {
        if let Some(t) = self.trimmed.get() {
            for i in self.range(offset, len) {
                t.as_slice()[i].store(0, Ordering::Relaxed);
            }
        }
        for (i, g) in self.range(offset, len).zip(gens) {
            self.cells.as_slice()[i].store(g & GEN, Ordering::Release);
        }
    }

    /// Ends a write's lock when its outcome is unknown (failed, timed out, cut off): the
    /// block holds either the new generation or the one before (or zeros, after a discard).
    pub fn commit_either(&self, offset: u64, len: u64, gens: &[u8]) {
        if let Some(t) = self.trimmed.get() {
            for i in self.range(offset, len) {
                let c = &t.as_slice()[i];
                if c.load(Ordering::Relaxed) != 0 {
                    c.store(TRIM_MAYBE, Ordering::Relaxed);
                }
            }
        }
        for (i, g) in self.range(offset, len).zip(gens) {
            self.cells.as_slice()[i].store((g & GEN) | EITHER, Ordering::Release);
        }
    }

    /// Ends a trim's or write-zeroes' lock: the range now reads zeros (`TRIM_ZEROS`) or
    /// zeros or what it held (`TRIM_MAYBE`). The cells keep the generation held before.
    pub fn discard(&self, offset: u64, len: u64, state: u8) {
        let t = self.trimmed.get_or_init(|| Cells::heap(self.len()));
        for i in self.range(offset, len) {
            t.as_slice()[i].store(state, Ordering::Relaxed);
        }
        self.unlock(offset, len);
    }

    /// Whether any discard was ever recorded (reads must then look at discard states).
    pub fn has_discards(&self) -> bool {
        self.trimmed.get().is_some()
    }

    /// The discard state of the granule holding `offset` (0: none).
    #[inline]
    pub fn trimmed_at(&self, offset: u64) -> u8 {
        self.trimmed.get().map_or(0, |t| {
            t.as_slice()
                .get(self.index(offset))
                .map_or(0, |c| c.load(Ordering::Relaxed))
        })
    }

    /// Whether any granule of the range has a discard state.
    #[inline]
    pub fn any_trimmed(&self, offset: u64, len: u64) -> bool {
        self.trimmed.get().is_some_and(|t| {
            self.range(offset, len)
                .any(|i| t.as_slice()[i].load(Ordering::Relaxed) != 0)
        })
    }

    /// Sets every cell to `gen` (after the span was written in one pass).
    pub fn set_all(&self, gen: u8) {
        if let Some(t) = self.trimmed.get() {
            for c in t.as_slice() {
                c.store(0, Ordering::Relaxed);
            }
        }
        for c in self.cells.as_slice() {
            c.store(gen & GEN, Ordering::Release);
        }
    }

    /// The cell of the granule holding byte `offset`.
    pub fn get(&self, offset: u64) -> u8 {
        self.cells
            .as_slice()
            .get(self.index(offset))
            .map_or(0, |c| c.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_exclude_overlaps_and_roll_back() {
        let m = GenMap::new(1 << 20, 4096);
        let mut v = Vec::new();
        assert!(m.try_lock(0, 8192, &mut v));
        assert_eq!(v, vec![0, 0]);
        // Overlaps the second granule: refused, and the third is not left busy.
        assert!(!m.try_lock(4096, 8192, &mut v));
        assert!(m.try_lock(8192, 4096, &mut v));
        m.commit(0, 8192, &[1, 2]);
        assert!(m.try_lock(0, 4096, &mut v));
        assert_eq!(v, vec![1]);
        m.unlock(0, 4096);
        m.commit_either(8192, 4096, &[1]);
        assert_eq!(m.get(8192), 1 | EITHER);
        assert_eq!(m.range(4095, 2), 0..2);
    }

    #[test]
    fn discards_are_kept_apart_until_a_write() {
        let m = GenMap::new(1 << 20, 4096);
        let mut v = Vec::new();
        assert!(!m.any_trimmed(0, 1 << 20));
        m.commit(0, 8192, &[3, 3]);
        assert!(m.try_lock(0, 8192, &mut v));
        m.discard(0, 8192, TRIM_MAYBE);
        assert_eq!((m.get(0), m.trimmed_at(4096)), (3, TRIM_MAYBE));
        // Unlocked by the discard.
        assert!(m.try_lock(4096, 4096, &mut v));
        m.discard(4096, 4096, TRIM_ZEROS);
        assert_eq!(
            (m.trimmed_at(0), m.trimmed_at(4096)),
            (TRIM_MAYBE, TRIM_ZEROS)
        );
        assert!(m.any_trimmed(4096, 1) && !m.any_trimmed(8192, 4096));
        // A write clears it; a write of unknown outcome leaves zeros possible.
        assert!(m.try_lock(0, 4096, &mut v));
        m.commit(0, 4096, &[4]);
        assert!(m.try_lock(4096, 4096, &mut v));
        m.commit_either(4096, 4096, &[4]);
        assert_eq!((m.trimmed_at(0), m.trimmed_at(4096)), (0, TRIM_MAYBE));
        m.set_all(1);
        assert!(!m.any_trimmed(0, 1 << 20));
    }

    #[test]
    fn generations_wrap_and_skip_zero() {
        assert_eq!(next_gen(0), 1);
        assert_eq!(next_gen(62), 63);
        assert_eq!(next_gen(63), 1);
        assert_eq!(next_gen(5 | EITHER), 6);
        assert_eq!(prev_gen(1), 0);
        assert_eq!(prev_gen(7), 6);
    }
}
