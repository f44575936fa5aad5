//! Checking what a read returned against what the generation map says was written.
//!
//! A read is walked unit by unit. Each unit's expectation comes from its granule's map cell
//! (taken when the read was locked, so no write of the run could change it in flight):
//!
//! * a generation `g` (this run wrote it): a valid stamp of this run, for this offset, of
//!   generation `g` (or the one before when the cell says EITHER), whose payload is exactly
//!   the pool window its key selects;
//! * unknown (written before the map was kept): inline, anything but a sanbench stamp that
//!   contradicts itself; in a verification pass that expects data everywhere ([`Strict`]),
//!   a valid sanbench stamp (of the given run, when one is given).
//!
//! A granule (the map's cell, which every write covers whole) holding units of its expected
//! generation and units of an older one is torn: its older units are counted as torn, not
//! stale.

use std::collections::HashMap;

use super::map::{prev_gen, EITHER, GEN};
use super::report::{BadBlock, Class, StampView, VerifyReport};
use crate::stamp::{
    fill_pool, inspect, payload_matches, Header, KeyCache, Stamp, POOL, STAMP_LEN, UNIT,
};

/// What unknown cells must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strict {
    /// Anything (inline checks of a run: the span's earlier content is not ours to judge).
    No,
    /// A valid sanbench unit; of this run id when `Some`.
    Stamped(Option<u64>),
}

/// Checks reads of one stream; keeps the pools of other runs it met (a few).
pub struct Checker {
    pub(super) run_id: u64,
    pub(super) unit: usize,
    pub(super) shift: u32,
    pub(super) pool: Vec<u8>,
    others: HashMap<u64, Vec<u8>>,
    strict: Strict,
    inline: bool,
    older: Vec<(u64, Stamp)>,
    /// Granules (from the read's first) where a current unit was found.
    current: Vec<u64>,
    /// The durable generation of the unit being checked (0: none).
    durable: u8,
    pub(super) keys: KeyCache,
}

/// Cell value and where its unit starts, for one unit being checked.
struct Unit<'a> {
    off: u64,
    bytes: &'a [u8],
    cell: u8,
}

impl Checker {
    pub fn new(run_id: u64, unit: u32, granule: u64, strict: Strict, inline: bool) -> Checker {
        let mut pool = vec![0u8; POOL + UNIT];
        fill_pool(&mut pool, run_id);
        Checker {
            run_id,
            unit: unit as usize,
            shift: granule.max(1).trailing_zeros(),
            pool,
            others: HashMap::new(),
            strict,
            inline,
            older: Vec::new(),
            current: Vec::new(),
            durable: 0,
            keys: KeyCache::default(),
        }
    }

    /// The pool of the run that wrote `s`.
    fn pool_of(&mut self, run_id: u64) -> &[u8] {
        if run_id == self.run_id {
            return &self.pool;
        }
        if self.others.len() >= 8 && !self.others.contains_key(&run_id) {
            self.others.clear();
        }
        self.others.entry(run_id).or_insert_with(|| {
            let mut p = vec![0u8; POOL + UNIT];
            fill_pool(&mut p, run_id);
            p
        })
    }

    /// Checks `buf`, read at `io_off`, against `cells` (the map cells of the granules it
    /// covers, first granule first), recording bad blocks in `rep`.
    /// The common case (every unit exactly the current generation) takes one lean pass
    /// (verify/fast.rs); anything else is walked and classified unit by unit.
    pub fn check(&mut self, buf: &[u8], io_off: u64, cells: &[u8], rep: &mut VerifyReport) {
        if !self.check_fast(buf, io_off, cells, rep) {
            self.check_durable(buf, io_off, cells, &[], rep)
        }
    }

    /// As [`check`](Self::check), also accepting each granule's durable generation from
    /// `durable` (same indexing as `cells`; empty: none), after a crash.
    pub fn check_durable(
        &mut self,
        buf: &[u8],
        io_off: u64,
        cells: &[u8],
        durable: &[u8],
        rep: &mut VerifyReport,
    ) {
        rep.reads += 1;
        rep.bytes += buf.len() as u64;
        self.older.clear();
        self.current.clear();
        let first = io_off >> self.shift;
        let mut at = 0usize;
        while at < buf.len() {
            let off = io_off + at as u64;
            let gi = ((off >> self.shift) - first) as usize;
            let cell = cells.get(gi).copied().unwrap_or(0);
            self.durable = durable.get(gi).copied().unwrap_or(0);
            let rest = &buf[at..];
            let u = Unit {
                off,
                bytes: &rest[..rest.len().min(self.unit)],
                cell,
            };
            rep.units += 1;
            let step = if cell & GEN == 0 {
                rep.units_unknown += 1;
                self.unknown(&u, rest, buf, io_off, rep)
            } else {
                if self.known(&u, buf, io_off, rep) {
                    self.current.push((off >> self.shift) - first);
                }
                u.bytes.len()
            };
            at += step.max(1);
        }
        // Older units in a granule that also holds current ones: a write (which always covers
        // whole granules) landed in part. Older whole granules are stale.
        for i in 0..self.older.len() {
            let (off, s) = self.older[i];
            let class = if self.current.contains(&((off >> self.shift) - first)) {
                Class::Torn
            } else {
                Class::Stale
            };
            let cell = cells
                .get(((off >> self.shift) - first) as usize)
                .copied()
                .unwrap_or(0);
            let at = (off - io_off) as usize;
            let bad = self.bad(class, off, cell, Some(&s), &buf[at..], io_off, buf.len());
            rep.record(bad);
        }
    }

    /// A unit this run wrote (cell generation > 0). True when it holds the current generation.
    fn known(&mut self, u: &Unit<'_>, buf: &[u8], io_off: u64, rep: &mut VerifyReport) -> bool {
        let want = u.cell & GEN;
        let either = u.cell & EITHER != 0;
        let class = match inspect(u.bytes) {
            Header::Zeros => Class::NeverWritten,
            Header::Foreign => Class::Foreign,
            Header::Damaged => Class::WrongData,
            Header::Stamped(s) if s.run_id != self.run_id => {
                if either && prev_gen(want) == 0 {
                    // A failed first write over content of unknown origin.
                    return true;
                }
                Class::Foreign
            }
            Header::Stamped(s) if s.offset != u.off => Class::Misplaced,
            Header::Stamped(s) => {
                let g = s.generation as u8;
                let fits = self.keys.payload_matches(u.bytes, &s, &self.pool);
                if !fits {
                    Class::WrongData
                } else if s.generation <= GEN as u32 && g == want {
                    return true;
                } else if s.generation <= GEN as u32
                    && ((either && g == prev_gen(want)) || (self.durable != 0 && g == self.durable))
                {
                    return false;
                } else {
                    // An older generation: stale, or torn if the read also holds current
                    // units (decided once the whole read is walked).
                    self.older.push((u.off, s));
                    return false;
                }
            }
        };
        let found = Stamp::decode(u.bytes);
        let b = self.bad(
            class,
            u.off,
            u.cell,
            found.as_ref(),
            u.bytes,
            io_off,
            buf.len(),
        );
        rep.record(b);
        false
    }

    /// A unit of unknown prior content; returns how many bytes it spans.
    fn unknown(
        &mut self,
        u: &Unit<'_>,
        rest: &[u8],
        buf: &[u8],
        io_off: u64,
        rep: &mut VerifyReport,
    ) -> usize {
        let h = inspect(u.bytes);
        let class = match (h, self.strict) {
            (Header::Zeros | Header::Foreign, Strict::No) => return u.bytes.len(),
            (Header::Zeros, _) => Some(Class::NeverWritten),
            (Header::Foreign, _) => Some(Class::Foreign),
            (Header::Damaged, _) => Some(Class::WrongData),
            (Header::Stamped(s), strict) => {
                let len = s.unit_len as usize;
                if let Strict::Stamped(Some(id)) = strict {
                    if s.run_id != id {
                        let b = self.bad(
                            Class::Foreign,
                            u.off,
                            0,
                            Some(&s),
                            u.bytes,
                            io_off,
                            buf.len(),
                        );
                        rep.record(b);
                        return if len >= STAMP_LEN && len <= rest.len() {
                            len
                        } else {
                            u.bytes.len()
                        };
                    }
                }
                if s.offset != u.off {
                    Some(Class::Misplaced)
                } else if strict == Strict::No && s.run_id != self.run_id {
                    // Inline, another run's unit is only checked for its own consistency
                    // (stamp CRC and offset): its payload would need that run's pool.
                    if len >= STAMP_LEN && len <= rest.len() {
                        return len;
                    }
                    None
                } else if len >= STAMP_LEN && len <= rest.len() {
                    // The writer's unit may be longer than ours (a run without --verify
                    // stamps 4 KiB): check it whole and step over it.
                    let ok = payload_matches(&rest[..len], &s, self.pool_of(s.run_id));
                    if ok {
                        return len;
                    }
                    Some(Class::WrongData)
                } else {
                    // Cut by the end of the read: only its stamp can be checked.
                    None
                }
            }
        };
        if let Some(c) = class {
            let found = Stamp::decode(u.bytes);
            let b = self.bad(c, u.off, 0, found.as_ref(), u.bytes, io_off, buf.len());
            rep.record(b);
        }
        u.bytes.len()
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn bad(
        &self,
        class: Class,
        off: u64,
        cell: u8,
        found: Option<&Stamp>,
        bytes: &[u8],
        io_off: u64,
        io_len: usize,
    ) -> BadBlock {
        let expected = (cell & GEN != 0).then(|| StampView {
            offset: off,
            run_id: format!("{:016x}", self.run_id),
            generation: (cell & GEN) as u32,
            worker: None,
            seq: None,
        });
        BadBlock {
            offset: off,
            class,
            expected,
            found: found.map(super::report::stamp_view),
            excerpt: bytes.iter().take(32).map(|b| format!("{b:02x}")).collect(),
            io_offset: io_off,
            io_len: io_len as u32,
            inline: self.inline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp::{DataSpec, Stamper};

    const RUN: u64 = 0xabcd;

    fn written(off: u64, len: usize, gen: u8) -> Vec<u8> {
        let mut pool = vec![0u8; POOL + UNIT];
        fill_pool(&mut pool, RUN);
        let mut st = Stamper::new(&DataSpec::default(), RUN, 0).with_unit(512);
        let mut b = vec![0u8; len];
        st.fill_gen(&mut b, off, &pool, |_| gen as u32);
        b
    }

    fn check(buf: &[u8], off: u64, cells: &[u8], strict: Strict) -> VerifyReport {
        let mut c = Checker::new(RUN, 512, 4096, strict, true);
        let mut rep = VerifyReport::default();
        c.check(buf, off, cells, &mut rep);
        rep
    }

    #[test]
    fn clean_reads_verify() {
        let b = written(8192, 8192, 3);
        let r = check(&b, 8192, &[3, 3], Strict::No);
        assert_eq!(r.bad_total(), 0, "{:?}", r.bad_blocks);
        assert_eq!((r.units, r.bytes), (16, 8192));
    }

    #[test]
    fn each_fault_is_named() {
        // Flipped payload byte.
        let mut b = written(0, 4096, 1);
        b[700] ^= 1;
        let r = check(&b, 0, &[1], Strict::No);
        assert_eq!(r.bad.wrong_data, 1);
        assert_eq!(r.bad_blocks[0].offset, 512);
        // Data of another block.
        let b = written(4096, 4096, 1);
        let r = check(&b, 0, &[1], Strict::No);
        assert_eq!(r.bad.misplaced, 8);
        assert_eq!(r.bad_blocks[0].found.as_ref().unwrap().offset, 4096);
        // An older generation: stale.
        let b = written(0, 4096, 1);
        let r = check(&b, 0, &[2], Strict::No);
        assert_eq!(r.bad.stale, 8);
        // Half new, half old: torn.
        let mut b = written(0, 4096, 2);
        b[2048..].copy_from_slice(&written(0, 4096, 1)[2048..]);
        let r = check(&b, 0, &[2], Strict::No);
        assert_eq!((r.bad.torn, r.bad.stale), (4, 0));
        // A stale granule beside a current one in the same read is stale, not torn.
        let mut b = written(0, 8192, 2);
        b[..4096].copy_from_slice(&written(0, 4096, 1));
        let r = check(&b, 0, &[2, 2], Strict::No);
        assert_eq!((r.bad.torn, r.bad.stale), (0, 8));
        // Zeros where data was written.
        let r = check(&[0u8; 4096], 0, &[1], Strict::No);
        assert_eq!(r.bad.never_written, 8);
        // Another program's data (fio's): foreign.
        let r = check(&[0x5au8; 4096], 0, &[1], Strict::No);
        assert_eq!(r.bad.foreign, 8);
        // Either generation after an unknown outcome.
        let b = written(0, 4096, 1);
        assert_eq!(check(&b, 0, &[2 | EITHER], Strict::No).bad_total(), 0);
        assert_eq!(check(&b, 0, &[3 | EITHER], Strict::No).bad.stale, 8);
    }

    #[test]
    fn unknown_content_is_only_checked_for_consistency_unless_strict() {
        assert_eq!(check(&[0x5au8; 4096], 0, &[0], Strict::No).bad_total(), 0);
        assert_eq!(check(&[0u8; 4096], 0, &[0], Strict::No).bad_total(), 0);
        let r = check(&[0x5au8; 4096], 0, &[0], Strict::Stamped(None));
        assert_eq!(r.bad.foreign, 8);
        let r = check(&[0u8; 4096], 0, &[0], Strict::Stamped(None));
        assert_eq!(r.bad.never_written, 8);
        // Another run's consistent 4 KiB units pass; damaged ones do not.
        let mut pool = vec![0u8; POOL + UNIT];
        fill_pool(&mut pool, 99);
        let mut st = Stamper::new(&DataSpec::default(), 99, 1);
        let mut b = vec![0u8; 8192];
        st.fill(&mut b, 0, &pool);
        assert_eq!(check(&b, 0, &[0, 0], Strict::No).bad_total(), 0);
        assert_eq!(check(&b, 0, &[0, 0], Strict::Stamped(None)).bad_total(), 0);
        let r = check(&b, 0, &[0, 0], Strict::Stamped(Some(RUN)));
        assert_eq!(r.bad.foreign, 2);
        b[5000] ^= 4;
        // Inline, another run's payload is not this run's to check; a pass that expects
        // sanbench data everywhere checks it.
        assert_eq!(check(&b, 0, &[0, 0], Strict::No).bad_total(), 0);
        assert_eq!(
            check(&b, 0, &[0, 0], Strict::Stamped(None)).bad.wrong_data,
            1
        );
    }
}
