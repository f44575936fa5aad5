//! The common case of a check in one lean pass: a read whose every unit is exactly what the
//! map expects (this run's stamp for its offset, the granule's current generation, the payload
//! its key selects) is confirmed by field tests and one comparison per unit, dispatched once
//! per read; at the first unit that is anything else the whole read is walked unit by unit
//! ([`Checker::check_durable`]), so faults are classified exactly as before (torn and stale
//! need the whole read). A fused engine (`Queue::submit_fused`, `mem:`) has the read checked
//! while it is copied into the arena, each byte loaded once.

use super::check::Checker;
use super::map::GEN;
use super::report::VerifyReport;

impl Checker {
    /// Copies `src` (a read of `src.len()` bytes at `io_off`, as the target holds them) into
    /// `dst`, checking it as [`check`](Self::check) does while it is copied (the full walk, on
    /// the copy, when the lean pass finds anything unexpected), with the same counts and bad
    /// blocks in `rep`. `ahead` (the memory read next, or empty) is prefetched meanwhile.
    pub fn copy_check(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        io_off: u64,
        cells: &[u8],
        rep: &mut VerifyReport,
        ahead: &[u8],
    ) {
        let n = src.len().min(dst.len());
        let dst = &mut dst[..n];
        if !self.copy_fast(&src[..n], dst, io_off, cells, rep, ahead) {
            self.check_durable(dst, io_off, cells, &[], rep)
        }
    }

    /// Counts `buf` as checked and returns true when every unit is exactly what its cell
    /// expects (this run's stamp for its offset, the granule's current generation, the payload
    /// its key selects): what the full walk would conclude without recording anything.
    /// `false`, with nothing counted, for anything else.
    pub(super) fn check_fast(
        &mut self,
        buf: &[u8],
        io_off: u64,
        cells: &[u8],
        rep: &mut VerifyReport,
    ) -> bool {
        let gen = gen_of(self.shift, io_off, cells);
        let ok = !buf.is_empty()
            && self
                .keys
                .all_expected(buf, io_off, self.unit, self.run_id, &self.pool, gen);
        self.count_fast(ok, buf.len(), rep)
    }

    /// [`check_fast`](Self::check_fast) of `src` while it is copied into `dst` (all of it,
    /// whatever the answer), every byte loaded once; `ahead` is prefetched meanwhile.
    fn copy_fast(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        io_off: u64,
        cells: &[u8],
        rep: &mut VerifyReport,
        ahead: &[u8],
    ) -> bool {
        let gen = gen_of(self.shift, io_off, cells);
        let ok = self.keys.copy_expected(
            src,
            dst,
            io_off,
            self.unit,
            self.run_id,
            &self.pool,
            gen,
            ahead,
        ) && !src.is_empty();
        self.count_fast(ok, src.len(), rep)
    }

    /// Counts a read the fast path passed (`ok`); nothing otherwise.
    fn count_fast(&self, ok: bool, len: usize, rep: &mut VerifyReport) -> bool {
        if ok {
            rep.reads += 1;
            rep.bytes += len as u64;
            rep.units += len.div_ceil(self.unit.max(1)) as u64;
        }
        ok
    }
}

/// Each unit offset's expected generation from the read's cells (0, unknown, outside them).
fn gen_of(shift: u32, io_off: u64, cells: &[u8]) -> impl Fn(u64) -> u32 + '_ {
    let first = io_off >> shift;
    move |off: u64| {
        let cell = cells
            .get(((off >> shift) - first) as usize)
            .copied()
            .unwrap_or(0);
        (cell & GEN) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::super::check::Strict;
    use super::super::map::EITHER;
    use super::*;
    use crate::stamp::{fill_pool, DataSpec, KeyCache, Stamper, POOL, UNIT};

    const RUN: u64 = 0x5eed_f00d;

    fn pool(run: u64) -> Vec<u8> {
        let mut p = vec![0u8; POOL + UNIT];
        fill_pool(&mut p, run);
        p
    }

    fn written(run: u64, off: u64, len: usize, gen: u8, unit: usize, data: DataSpec) -> Vec<u8> {
        let mut st = Stamper::new(&data, run, 3).with_unit(unit);
        let mut b = vec![0u8; len];
        st.fill_gen(&mut b, off, &pool(run), |_| gen as u32);
        b
    }

    fn w512(off: u64, len: usize, gen: u8) -> Vec<u8> {
        written(RUN, off, len, gen, 512, DataSpec::default())
    }

    /// The fused check's report and copy against the full walk's, for one read.
    fn both(buf: &[u8], off: u64, cells: &[u8]) -> VerifyReport {
        let mut slow = VerifyReport::default();
        Checker::new(RUN, 512, 4096, Strict::No, true).check_durable(
            buf,
            off,
            cells,
            &[],
            &mut slow,
        );
        let mut fast = VerifyReport::default();
        let mut dst = vec![0xeeu8; buf.len()];
        let mut c = Checker::new(RUN, 512, 4096, Strict::No, true);
        c.copy_check(
            buf,
            &mut dst,
            off,
            cells,
            &mut fast,
            &buf[..buf.len().min(4096)],
        );
        assert_eq!(dst, buf, "the copy is complete whatever the check finds");
        assert_eq!(fast, slow, "fused and full checks disagree");
        fast
    }

    #[test]
    fn every_fault_is_classified_as_the_full_check_does() {
        let clean = both(&w512(8192, 8192, 3), 8192, &[3, 3]);
        assert_eq!((clean.reads, clean.units, clean.bad_total()), (1, 16, 0));
        let mut b = w512(0, 4096, 1);
        b[700] ^= 1;
        assert_eq!(both(&b, 0, &[1]).bad.wrong_data, 1);
        // A flipped stamp field (the CRC catches it) in the last unit.
        let mut b = w512(0, 4096, 1);
        b[3584 + 33] ^= 0x10;
        assert_eq!(both(&b, 0, &[1]).bad.wrong_data, 1);
        assert_eq!(both(&w512(4096, 4096, 1), 0, &[1]).bad.misplaced, 8);
        assert_eq!(both(&w512(0, 4096, 1), 0, &[2]).bad.stale, 8);
        let mut b = w512(0, 4096, 2);
        b[2048..].copy_from_slice(&w512(0, 4096, 1)[2048..]);
        let r = both(&b, 0, &[2]);
        assert_eq!((r.bad.torn, r.bad.stale), (4, 0));
        let mut b = w512(0, 8192, 2);
        b[..4096].copy_from_slice(&w512(0, 4096, 1));
        assert_eq!(both(&b, 0, &[2, 2]).bad.stale, 8);
        assert_eq!(both(&[0u8; 4096], 0, &[1]).bad.never_written, 8);
        assert_eq!(both(&[0x5au8; 4096], 0, &[1]).bad.foreign, 8);
        let other = written(99, 0, 4096, 1, 512, DataSpec::default());
        assert_eq!(both(&other, 0, &[1]).bad.foreign, 8);
        assert_eq!(both(&w512(0, 4096, 1), 0, &[2 | EITHER]).bad_total(), 0);
        assert_eq!(both(&w512(0, 4096, 1), 0, &[3 | EITHER]).bad.stale, 8);
        // Unknown prior content: counted apart, never judged inline.
        let r = both(&[0x5au8; 8192], 0, &[0, 1]);
        assert_eq!((r.units_unknown, r.bad.foreign), (8, 8));
        // Compressible units, and a byte in their zero tail.
        let z = DataSpec {
            compress_pct: 37.0,
            ..DataSpec::default()
        };
        let mut b = written(RUN, 0, 4096, 1, 512, z);
        assert_eq!(both(&b, 0, &[1]).bad_total(), 0);
        b[511] = 1;
        assert_eq!(both(&b, 0, &[1]).bad.wrong_data, 1);
    }

    #[test]
    fn any_changed_byte_of_a_unit_is_caught() {
        for (unit, data) in [
            (512, DataSpec::default()),
            (4096, DataSpec::default()),
            (
                512,
                DataSpec {
                    compress_pct: 50.0,
                    ..DataSpec::default()
                },
            ),
        ] {
            let b = written(RUN, 1 << 20, unit, 7, unit, data);
            let p = pool(RUN);
            let mut keys = KeyCache::default();
            let all = |k: &mut KeyCache, b: &[u8], off: u64, run: u64, g: u32| {
                k.all_expected(b, off, unit, run, &p, |_| g)
            };
            assert!(all(&mut keys, &b, 1 << 20, RUN, 7));
            let mut dst = vec![0u8; b.len()];
            assert!(keys.copy_expected(&b, &mut dst, 1 << 20, unit, RUN, &p, |_| 7, &[]));
            assert_eq!(dst, b);
            assert!(!all(&mut keys, &b, 1 << 20, RUN, 6));
            assert!(!all(&mut keys, &b, 1 << 20, RUN, 0));
            assert!(!all(&mut keys, &b, 0, RUN, 7));
            assert!(!all(&mut keys, &b, 1 << 20, RUN + 1, 7));
            for i in 0..unit {
                let mut bad = b.clone();
                bad[i] ^= 0x80;
                assert!(
                    !all(&mut keys, &bad, 1 << 20, RUN, 7),
                    "byte {i} of a {unit} B unit changed unnoticed"
                );
                let mut dst = vec![0u8; bad.len()];
                assert!(
                    !keys.copy_expected(&bad, &mut dst, 1 << 20, unit, RUN, &p, |_| 7, &[]),
                    "byte {i} of a {unit} B unit changed unnoticed while copied"
                );
                assert_eq!(dst, bad, "the copy is complete whatever the check finds");
            }
            // Several units of one write, each checked.
            let many = written(RUN, 1 << 20, 4 * unit, 7, unit, data);
            assert!(all(&mut keys, &many, 1 << 20, RUN, 7));
            let mut bad = many.clone();
            bad[3 * unit + unit / 2] ^= 1;
            assert!(!all(&mut keys, &bad, 1 << 20, RUN, 7));
        }
    }
}
