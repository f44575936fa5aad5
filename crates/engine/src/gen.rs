//! The I/O generator: turns a [`Workload`] into a stream of (op, offset, length).
//!
//! It runs once per I/O on the hot path, so it does integer work only: one 64-bit random number
//! (wyrand) per decision, thresholds precomputed as 32-bit fractions, Lemire's multiply-shift for
//! bounded random offsets. No clock reads, no allocation.

use crate::engine::Op;
use crate::spec::{Segment, Workload};

pub use sanbench_io::Rng;

/// Converts a percentage to a threshold on a 32-bit uniform draw: P(draw < t) = pct / 100.
fn threshold(pct: f64) -> u64 {
    ((pct / 100.0) * (1u64 << 32) as f64).round() as u64
}

#[derive(Clone, Debug)]
struct SegState {
    read_thresh: u64,
    /// Draws in `[read_thresh, trim_end)` trim and in `[trim_end, zero_end)` write zeroes; the
    /// rest write. Both equal `read_thresh` in a segment without them.
    trim_end: u64,
    zero_end: u64,
    random_thresh: u64,
    read_bs: u64,
    write_bs: u64,
    /// Random offsets are multiples of this.
    align_read: u64,
    align_write: u64,
    /// Next sequential offset.
    cursor: u64,
}

/// One planned I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    pub op: Op,
    pub offset: u64,
    pub len: u32,
    /// A write with forced unit access (`fua_pct` of writes).
    pub fua: bool,
}

/// Per-(worker, target) generator. Sequential streams of different workers start at different
/// points of the span (worker k of n at k/n of it), so that workers do not read the same blocks
/// and hand each other cache hits.
#[derive(Clone, Debug)]
pub struct Generator {
    rng: Rng,
    segs: Vec<SegState>,
    /// Cumulative weights on a 32-bit scale, for segment choice.
    cum: Vec<u64>,
    span: u64,
    /// Writes are FUA when a 32-bit draw falls below this.
    fua_thresh: u64,
}

impl Generator {
    /// `span` is the usable size of the target; `block` its logical block size (alignment floor).
    pub fn new(w: &Workload, span: u64, block: u64, worker: u32, seed: u64) -> Generator {
        let total: u64 = w
            .segments
            .iter()
            .map(|s| s.weight as u64)
            .sum::<u64>()
            .max(1);
        let mut acc = 0u64;
        let cum = w
            .segments
            .iter()
            .map(|s| {
                acc += s.weight as u64;
                (acc << 32) / total
            })
            .collect();
        let block = block.max(1);
        let start = if w.workers > 1 {
            // On a 64 KiB boundary where the span allows (so that the integrity check's map
            // granules are never cut by a sequential stream), else on a block.
            let a = if span / w.workers as u64 >= 64 << 10 {
                block.max(64 << 10)
            } else {
                block
            };
            (span / w.workers as u64 * worker as u64) / a * a
        } else {
            0
        };
        let segs = w
            .segments
            .iter()
            .map(|s: &Segment| SegState {
                read_thresh: threshold(s.read_pct),
                trim_end: threshold(s.read_pct + s.trim_pct),
                zero_end: threshold(s.read_pct + s.trim_pct + s.write_zeroes_pct),
                random_thresh: threshold(s.random_pct),
                read_bs: s.read_bs,
                write_bs: s.write_bs,
                align_read: s.align.unwrap_or(s.read_bs).max(block),
                align_write: s.align.unwrap_or(s.write_bs).max(block),
                cursor: start,
            })
            .collect();
        Generator {
            rng: Rng::new(seed ^ ((worker as u64) << 32)),
            segs,
            cum,
            span,
            fua_thresh: threshold(w.fua_pct),
        }
    }

    #[inline(always)]
    pub fn plan(&mut self) -> Planned {
        let r = self.rng.next_u64();
        let pick = r & 0xffff_ffff;
        let idx = if self.segs.len() == 1 {
            0
        } else {
            self.cum.iter().position(|&c| pick < c).unwrap_or(0)
        };
        let dir = r >> 32;
        let s = &mut self.segs[idx];
        let is_read = dir < s.read_thresh;
        let (len, align) = if is_read {
            (s.read_bs, s.align_read)
        } else {
            (s.write_bs, s.align_write)
        };
        let random = (self.rng.next_u64() >> 32) < s.random_thresh;
        let offset = if random {
            let slots = (self.span - len) / align + 1;
            self.rng.below(slots) * align
        } else {
            if s.cursor + len > self.span {
                s.cursor = 0;
            }
            let o = s.cursor;
            s.cursor += len;
            o
        };
        // A non-read is a trim or a write-zeroes only below `zero_end`, which a segment
        // without them sets to `read_thresh`: one compare more, on the writes only.
        let op = if is_read {
            Op::Read
        } else if dir < s.zero_end {
            if dir < s.trim_end {
                Op::Trim
            } else {
                Op::WriteZeroes
            }
        } else {
            Op::Write
        };
        // One more draw only when FUA writes are asked for (the common path stays as it was).
        let fua =
            op == Op::Write && self.fua_thresh > 0 && (self.rng.next_u64() >> 32) < self.fua_thresh;
        Planned {
            op,
            offset,
            len: len as u32,
            fua,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Workload;
    use proptest::prelude::*;
    use std::time::Duration;

    fn wl(segments: Vec<Segment>, workers: u32) -> Workload {
        Workload {
            name: None,
            segments,
            qd: 1,
            workers,
            ramp: Duration::ZERO,
            time: Duration::from_secs(1),
            span: None,
            flush_every: 0,
            fua_pct: 0.0,
            rate: None,
            arrival: crate::run::pacer::Arrival::Fixed,
        }
    }

    fn seg(bs: u64, read: f64, random: f64) -> Segment {
        Segment {
            weight: 1,
            read_bs: bs,
            write_bs: bs,
            read_pct: read,
            random_pct: random,
            align: None,
            trim_pct: 0.0,
            write_zeroes_pct: 0.0,
        }
    }

    #[test]
    fn trim_and_write_zeroes_shares_hold() {
        let mut s = seg(8192, 70.0, 100.0);
        (s.trim_pct, s.write_zeroes_pct) = (10.0, 5.0);
        let mut g = Generator::new(&wl(vec![s], 1), 1 << 30, 512, 0, 9);
        let n = 100_000;
        let mut c = std::collections::HashMap::new();
        for _ in 0..n {
            let p = g.plan();
            // Trims and write-zeroes take the write size.
            assert_eq!(p.len, 8192);
            *c.entry(p.op).or_insert(0u32) += 1;
        }
        for (op, want) in [
            (Op::Read, 70.0),
            (Op::Write, 15.0),
            (Op::Trim, 10.0),
            (Op::WriteZeroes, 5.0),
        ] {
            let got = 100.0 * c[&op] as f64 / n as f64;
            assert!((got - want).abs() < 1.0, "{op:?}: {got} vs {want}");
        }
    }

    #[test]
    fn proportions_hold_within_one_percent() {
        for (read, random) in [(67.0, 100.0), (50.0, 50.0), (0.0, 30.0), (100.0, 100.0)] {
            let w = wl(vec![seg(4096, read, random)], 1);
            let mut g = Generator::new(&w, 1 << 30, 512, 0, 42);
            let n = 100_000;
            let mut reads = 0;
            let mut randoms = 0;
            // Sequential I/Os continue where the previous sequential one ended, across any
            // random ones in between.
            let mut seq_end = 0;
            for _ in 0..n {
                let p = g.plan();
                if p.op == Op::Read {
                    reads += 1;
                }
                if p.offset == seq_end {
                    seq_end = p.offset + p.len as u64;
                } else {
                    randoms += 1;
                }
            }
            let rp = 100.0 * reads as f64 / n as f64;
            assert!((rp - read).abs() < 1.0, "read {rp} vs {read}");
            // A random draw lands exactly on the sequential continuation with negligible odds.
            let xp = 100.0 * randoms as f64 / n as f64;
            assert!((xp - random).abs() < 1.0, "random {xp} vs {random}");
        }
    }

    #[test]
    fn segment_weights_hold() {
        let mut a = seg(512, 100.0, 0.0);
        a.weight = 33;
        let mut b = seg(2048, 67.0, 100.0);
        b.weight = 34;
        let mut c = seg(65536, 100.0, 0.0);
        c.weight = 33;
        let w = wl(vec![a, b, c], 1);
        let mut g = Generator::new(&w, 1 << 30, 512, 0, 1);
        let mut counts = [0u32; 3];
        for _ in 0..100_000 {
            match g.plan().len {
                512 => counts[0] += 1,
                2048 => counts[1] += 1,
                65536 => counts[2] += 1,
                l => panic!("unexpected length {l}"),
            }
        }
        for (got, want) in counts.iter().zip([33.0, 34.0, 33.0]) {
            let p = *got as f64 / 1000.0;
            assert!((p - want).abs() < 1.0, "{p} vs {want}");
        }
    }

    #[test]
    fn sequential_is_sequential_and_wraps() {
        let w = wl(vec![seg(4096, 100.0, 0.0)], 1);
        let mut g = Generator::new(&w, 40960, 512, 0, 3);
        let offs: Vec<u64> = (0..25).map(|_| g.plan().offset).collect();
        for (i, o) in offs.iter().enumerate() {
            assert_eq!(*o, (i as u64 % 10) * 4096);
        }
    }

    #[test]
    fn workers_start_apart() {
        let w = wl(vec![seg(4096, 100.0, 0.0)], 4);
        let starts: Vec<u64> = (0..4)
            .map(|k| Generator::new(&w, 1 << 20, 4096, k, 3).plan().offset)
            .collect();
        assert_eq!(starts, vec![0, 1 << 18, 2 << 18, 3 << 18]);
    }

    proptest! {
        #[test]
        fn offsets_inside_span_and_aligned(
            bs_k in 1u64..64, span_m in 1u64..64, read in 0.0f64..=100.0,
            random in 0.0f64..=100.0, align_k in prop::option::of(1u64..16), seed: u64,
        ) {
            let bs = bs_k * 512;
            let span = span_m << 20;
            let mut s = seg(bs, read, random);
            s.write_bs = bs * 2;
            s.align = align_k.map(|a| a * 512);
            let w = wl(vec![s.clone()], 1);
            let mut g = Generator::new(&w, span, 512, 0, seed);
            for _ in 0..2000 {
                let p = g.plan();
                prop_assert!(p.offset + p.len as u64 <= span);
                prop_assert_eq!(p.offset % 512, 0);
                let expect_len = if p.op == Op::Read { bs } else { bs * 2 };
                prop_assert_eq!(p.len as u64, expect_len);
            }
        }
    }
}
