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
//! Cost: one byte per granule, 2^40 / granule bytes per TiB (256 MiB at 4 KiB, 2 GiB at 512 B);
//! the CLI picks the largest granule every I/O of the workload is aligned to.

use std::sync::atomic::Ordering;

use super::state::{Cells, Mapping};

pub const BUSY: u8 = 0x80;
pub const EITHER: u8 = 0x40;
pub const GEN: u8 = 0x3f;

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
        for (i, g) in self.range(offset, len).zip(gens) {
            self.cells.as_slice()[i].store(g & GEN, Ordering::Release);
        }
    }

    /// Ends a write's lock when its outcome is unknown (failed, timed out, cut off): the
    /// block holds either the new generation or the one before.
    pub fn commit_either(&self, offset: u64, len: u64, gens: &[u8]) {
        for (i, g) in self.range(offset, len).zip(gens) {
            self.cells.as_slice()[i].store((g & GEN) | EITHER, Ordering::Release);
        }
    }

    /// Sets every cell to `gen` (after the span was written in one pass).
    pub fn set_all(&self, gen: u8) {
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
    fn generations_wrap_and_skip_zero() {
        assert_eq!(next_gen(0), 1);
        assert_eq!(next_gen(62), 63);
        assert_eq!(next_gen(63), 1);
        assert_eq!(next_gen(5 | EITHER), 6);
        assert_eq!(prev_gen(1), 0);
        assert_eq!(prev_gen(7), 6);
    }
}
