//! One pass over a trace for what a replay must know before its first I/O: the largest I/O
//! (each queue slot's buffer), the extent of its offsets (the offset map), the counts and the
//! recorded duration (the fidelity's ground truth). Memory is flat: the records are counted,
//! not kept.

use crate::{TraceError, TraceOp, TraceRecord};

/// What a trace holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records per op ([`TraceOp::index`]) and their bytes.
    pub ops: [u64; 3],
    pub bytes: [u64; 3],
    /// The first record's time and the latest time seen (ns, the trace's clock).
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    /// Records timed before the record before them (a replay issues them at once).
    pub backwards: u64,
    /// The lowest offset and the highest end (offset + length) of any record.
    pub min_offset: u64,
    pub max_end: u64,
    pub max_len: u32,
    /// Every offset and every length ORed together: their lowest set bit is the largest
    /// power of two all of them are multiples of ([`Summary::offset_align`]).
    pub offset_bits: u64,
    pub len_bits: u64,
    prev_ns: u64,
}

impl Summary {
    pub fn add(&mut self, r: &TraceRecord) {
        let i = r.op.index();
        self.ops[i] += 1;
        self.bytes[i] += r.len as u64;
        match self.first_ns {
            None => {
                self.first_ns = Some(r.time_ns);
                self.min_offset = r.offset;
            }
            Some(_) => {
                if r.time_ns < self.prev_ns {
                    self.backwards += 1;
                }
                self.min_offset = self.min_offset.min(r.offset);
            }
        }
        self.prev_ns = r.time_ns;
        self.last_ns = self.last_ns.max(r.time_ns);
        self.max_end = self.max_end.max(r.offset.saturating_add(r.len as u64));
        self.max_len = self.max_len.max(r.len);
        self.offset_bits |= r.offset;
        self.len_bits |= r.len as u64;
    }

    /// The largest power of two every offset is a multiple of (2^63 when all are 0).
    pub fn offset_align(&self) -> u64 {
        1 << self.offset_bits.trailing_zeros().min(63)
    }

    /// The largest power of two every length is a multiple of (2^63 when all are 0).
    pub fn len_align(&self) -> u64 {
        1 << self.len_bits.trailing_zeros().min(63)
    }

    /// Every record.
    pub fn records(&self) -> u64 {
        self.ops.iter().sum()
    }

    pub fn ops_of(&self, op: TraceOp) -> u64 {
        self.ops[op.index()]
    }

    pub fn bytes_of(&self, op: TraceOp) -> u64 {
        self.bytes[op.index()]
    }

    /// From the first record's time to the latest, ns.
    pub fn duration_ns(&self) -> u64 {
        self.first_ns.map_or(0, |f| self.last_ns.saturating_sub(f))
    }

    /// The recorded rate: the records after the first over the time they span (I/Os per
    /// second; `None` for fewer than two records or no time between them).
    pub fn rate(&self) -> Option<f64> {
        let d = self.duration_ns();
        (self.records() >= 2 && d > 0).then(|| (self.records() - 1) as f64 / (d as f64 / 1e9))
    }
}

/// Counts every record of a trace; the first bad line is the error.
pub fn scan<I>(records: I) -> Result<Summary, TraceError>
where
    I: IntoIterator<Item = Result<TraceRecord, TraceError>>,
{
    let mut s = Summary::default();
    for r in records {
        s.add(&r?);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Parse;

    #[test]
    fn a_scan_counts_extent_and_time() {
        let text = "fio version 3 iolog\n10 /f read 4096 4096\n20 /f write 0 8192\n\
                    15 /f read 65536 512\n1010 /f trim 1048576 65536\n";
        let s = scan(crate::fio::Iolog::new(text.as_bytes()).records()).unwrap();
        assert_eq!(s.ops, [2, 1, 1]);
        assert_eq!(s.bytes, [4608, 8192, 65536]);
        assert_eq!(s.first_ns, Some(10_000));
        assert_eq!(s.duration_ns(), 1_000_000);
        assert_eq!(s.backwards, 1);
        // Offsets 4096, 0, 65536, 1 MiB: 4 KiB; lengths down to 512.
        assert_eq!(s.offset_align(), 4096);
        assert_eq!(s.len_align(), 512);
        assert_eq!(
            (s.min_offset, s.max_end, s.max_len),
            (0, 1048576 + 65536, 65536)
        );
        // Three gaps in one millisecond.
        assert!((s.rate().unwrap() - 3000.0).abs() < 1e-6);
        let bad =
            scan(crate::fio::Iolog::new(&b"fio version 3 iolog\n1 /f read 0 x\n"[..]).records());
        assert_eq!(bad.unwrap_err().line, 2);
    }
}
