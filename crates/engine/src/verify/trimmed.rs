//! Checking a read that covers trimmed or zeroed granules (issue 42): a granule the map
//! marks [`TRIM_ZEROS`] must read zeros; one marked [`TRIM_MAYBE`] may read zeros or what its
//! cell says (the data before the trim: a target that does not promise zeros may keep it, or
//! free part of it). Anything else is a fault, named as for any other read: old data where
//! zeros were promised is stale, another block's stamp misplaced, other bytes wrong or
//! foreign. Granules without a discard state are checked as usual, in runs.

use super::check::Checker;
use super::map::{GenMap, TRIM_MAYBE, TRIM_ZEROS};
use super::report::{Class, VerifyReport};
use crate::stamp::{inspect, Header, Stamp};

impl Checker {
    /// Checks `buf`, read at `io_off`, against `cells` (as [`Checker::check`]) and the map's
    /// discard states, which cannot change while the read holds its granules.
    pub fn check_discarded(
        &mut self,
        buf: &[u8],
        io_off: u64,
        cells: &[u8],
        map: &GenMap,
        rep: &mut VerifyReport,
    ) {
        let reads = rep.reads;
        let g = map.granule() as usize;
        let first = (io_off / g as u64) as usize;
        // The read's bytes granule by granule: a run of plain granules is checked whole.
        let mut at = 0usize;
        let mut plain_from: Option<usize> = None;
        while at < buf.len() {
            let off = io_off + at as u64;
            let end = (((off / g as u64) + 1) * g as u64 - io_off) as usize;
            let end = end.min(buf.len());
            let gi = (off / g as u64) as usize - first;
            let cell = cells.get(gi).copied().unwrap_or(0);
            match map.trimmed_at(off) {
                0 => {
                    plain_from.get_or_insert(at);
                }
                state => {
                    if let Some(from) = plain_from.take() {
                        self.check_plain(buf, io_off, from, at, cells, rep);
                    }
                    self.check_granule(&buf[at..end], off, cell, state, buf.len(), io_off, rep);
                }
            }
            at = end;
        }
        if let Some(from) = plain_from {
            self.check_plain(buf, io_off, from, buf.len(), cells, rep);
        }
        rep.reads = reads + 1;
    }

    /// The plain granules `buf[from..to]` with their cells.
    fn check_plain(
        &mut self,
        buf: &[u8],
        io_off: u64,
        from: usize,
        to: usize,
        cells: &[u8],
        rep: &mut VerifyReport,
    ) {
        let shift = self.shift;
        let gi = (((io_off + from as u64) >> shift) - (io_off >> shift)) as usize;
        let sub = &buf[from..to];
        let before = rep.bytes;
        self.check(
            sub,
            io_off + from as u64,
            cells.get(gi..).unwrap_or(&[]),
            rep,
        );
        debug_assert_eq!(rep.bytes, before + sub.len() as u64);
    }

    /// One granule with a discard state, unit by unit.
    #[allow(clippy::too_many_arguments)]
    fn check_granule(
        &mut self,
        bytes: &[u8],
        off: u64,
        cell: u8,
        state: u8,
        io_len: usize,
        io_off: u64,
        rep: &mut VerifyReport,
    ) {
        let unit = self.unit.max(1);
        for (i, u) in bytes.chunks(unit).enumerate() {
            let uoff = off + (i * unit) as u64;
            if u.iter().all(|&b| b == 0) {
                rep.units += 1;
                rep.bytes += u.len() as u64;
                continue;
            }
            if state == TRIM_MAYBE {
                // Not zeros: it must be what the cell says, checked as any unit is.
                let reads = rep.reads;
                self.check(u, uoff, &[cell], rep);
                rep.reads = reads;
                continue;
            }
            debug_assert_eq!(state, TRIM_ZEROS);
            rep.units += 1;
            rep.bytes += u.len() as u64;
            let (class, found) = match inspect(u) {
                Header::Stamped(s) if s.run_id == self.run_id && s.offset == uoff => {
                    (Class::Stale, Some(s))
                }
                Header::Stamped(s) if s.run_id == self.run_id => (Class::Misplaced, Some(s)),
                Header::Stamped(s) => (Class::Foreign, Some(s)),
                Header::Foreign => (Class::Foreign, None),
                Header::Damaged | Header::Zeros => (Class::WrongData, Stamp::decode(u)),
            };
            let b = self.bad(class, uoff, 0, found.as_ref(), u, io_off, io_len);
            rep.record(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp::{fill_pool, DataSpec, Stamper, POOL, UNIT};
    use crate::verify::check::Strict;

    const RUN: u64 = 0x7717;

    fn written(off: u64, len: usize, gen: u8) -> Vec<u8> {
        let mut pool = vec![0u8; POOL + UNIT];
        fill_pool(&mut pool, RUN);
        let mut st = Stamper::new(&DataSpec::default(), RUN, 0).with_unit(512);
        let mut b = vec![0u8; len];
        st.fill_gen(&mut b, off, &pool, |_| gen as u32);
        b
    }

    /// A map of 3 granules of 4 KiB written at generation 2, the middle one discarded.
    fn map(state: u8) -> GenMap {
        let m = GenMap::new(3 * 4096, 4096);
        let mut v = Vec::new();
        m.commit(0, 3 * 4096, &[2, 2, 2]);
        assert!(m.try_lock(4096, 4096, &mut v));
        m.discard(4096, 4096, state);
        m
    }

    fn check(buf: &[u8], m: &GenMap) -> VerifyReport {
        let mut c = Checker::new(RUN, 512, 4096, Strict::No, true);
        let mut rep = VerifyReport::default();
        c.check_discarded(buf, 0, &[2, 2, 2], m, &mut rep);
        rep
    }

    #[test]
    fn a_trimmed_granule_reads_zeros_or_its_data_never_anything_else() {
        let m = map(TRIM_MAYBE);
        let mut b = written(0, 3 * 4096, 2);
        let r = check(&b, &m);
        assert_eq!(
            (r.bad_total(), r.reads, r.units, r.bytes),
            (0, 1, 24, 3 * 4096)
        );
        b[4096..8192].fill(0);
        assert_eq!(check(&b, &m).bad_total(), 0);
        // Half zeros, half old data: still either, unit by unit.
        b[6144..8192].copy_from_slice(&written(6144, 2048, 2));
        assert_eq!(check(&b, &m).bad_total(), 0);
        // Garbage after the trim is caught.
        b[4096..4608].fill(0xee);
        assert_eq!(check(&b, &m).bad.foreign, 1);
        // So is zeros outside the trimmed granule.
        let mut z = written(0, 3 * 4096, 2);
        z[..512].fill(0);
        assert_eq!(check(&z, &m).bad.never_written, 1);
    }

    #[test]
    fn where_zeros_were_promised_old_data_is_stale() {
        let m = map(TRIM_ZEROS);
        let mut b = written(0, 3 * 4096, 2);
        b[4096..8192].fill(0);
        assert_eq!(check(&b, &m).bad_total(), 0);
        b[4608..5120].copy_from_slice(&written(4608, 512, 2));
        let r = check(&b, &m);
        assert_eq!((r.bad.stale, r.bad_total()), (1, 1));
        assert_eq!(r.bad_blocks[0].offset, 4608);
        b[4608..5120].fill(0x5a);
        assert_eq!(check(&b, &m).bad.foreign, 1);
    }
}
