//! A read checked as it is copied (`Queue::submit_fused`, `mem:`): the copy goes into the
//! arena, and while it is in the L1 cache every unit that is exactly what the map expects
//! (this run's stamp for its offset, the granule's current generation, the payload its key
//! selects) is confirmed by a lean test; at the first unit that is anything else the whole
//! read goes through [`Checker::check`], so faults are classified exactly as on the ordinary
//! path (torn and stale need the whole read).

use super::check::Checker;
use super::map::GEN;
use super::report::VerifyReport;

impl Checker {
    /// Copies `src` (a read of `src.len()` bytes at `io_off`, as the target holds them) into
    /// `dst` and checks it against `cells` as [`check`](Self::check) does, with the same
    /// counts and bad blocks in `rep`.
    pub fn copy_check(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        io_off: u64,
        cells: &[u8],
        rep: &mut VerifyReport,
    ) {
        let n = src.len().min(dst.len());
        let dst = &mut dst[..n];
        dst.copy_from_slice(&src[..n]);
        let first = io_off >> self.shift;
        let (mut at, mut units) = (0usize, 0u64);
        while at < n {
            let off = io_off + at as u64;
            let cell = cells
                .get(((off >> self.shift) - first) as usize)
                .copied()
                .unwrap_or(0);
            let end = (at + self.unit).min(n);
            let want = (cell & GEN) as u32;
            let good = want != 0
                && self
                    .keys
                    .is_expected(&dst[at..end], off, self.run_id, want, &self.pool);
            if !good {
                self.check(dst, io_off, cells, rep);
                return;
            }
            at = end;
            units += 1;
        }
        rep.reads += 1;
        rep.bytes += n as u64;
        rep.units += units;
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

    /// The fused check's report and copy against the full check's, for one read.
    fn both(buf: &[u8], off: u64, cells: &[u8]) -> VerifyReport {
        let mut slow = VerifyReport::default();
        Checker::new(RUN, 512, 4096, Strict::No, true).check(buf, off, cells, &mut slow);
        let mut fast = VerifyReport::default();
        let mut dst = vec![0xeeu8; buf.len()];
        let mut c = Checker::new(RUN, 512, 4096, Strict::No, true);
        c.copy_check(buf, &mut dst, off, cells, &mut fast);
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
            assert!(keys.is_expected(&b, 1 << 20, RUN, 7, &p));
            assert!(!keys.is_expected(&b, 1 << 20, RUN, 6, &p));
            assert!(!keys.is_expected(&b, 0, RUN, 7, &p));
            assert!(!keys.is_expected(&b, 1 << 20, RUN + 1, 7, &p));
            for i in 0..unit {
                let mut bad = b.clone();
                bad[i] ^= 0x80;
                assert!(
                    !keys.is_expected(&bad, 1 << 20, RUN, 7, &p),
                    "byte {i} of a {unit} B unit changed unnoticed"
                );
            }
        }
    }
}
