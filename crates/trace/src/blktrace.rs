//! blktrace's binary records (the kernel's `struct blk_io_trace`, include/uapi/linux/
//! blktrace_api.h): 48 bytes, then `pdu_len` bytes of payload,
//!
//! ```text
//! magic u32 (0x65617400 | version 7), sequence u32, time u64 (ns), sector u64, bytes u32,
//! action u32, pid u32, device u32, cpu u32, error u16, pdu_len u16
//! ```
//!
//! in the recording host's byte order (told by the magic). One file: a per-CPU file of
//! blktrace, or the merged, time-ordered dump `blkparse -i DEV -d FILE` writes (as fio's
//! replay of blktrace wants). As in the text output ([`crate::blkparse`]), the queue events
//! are the I/Os: action `__BLK_TA_QUEUE` with the queue category; a discard is a trim, else a
//! write, else (with bytes) a read; notify records and every other action are skipped.
//! Errors name the record (1-based) in [`TraceError::line`].

use std::io::{BufRead, ErrorKind};

use crate::{length, Parse, TraceError, TraceOp, TraceRecord};

pub const MAGIC: u32 = 0x6561_7400;
pub const VERSION: u32 = 0x07;
/// The fixed part of a record.
pub const RECORD: usize = 48;

const TA_QUEUE: u32 = 1;
const TC_WRITE: u32 = 1 << 1;
const TC_QUEUE: u32 = 1 << 4;
const TC_NOTIFY: u32 = 1 << 10;
const TC_DISCARD: u32 = 1 << 13;
const TC_SHIFT: u32 = 16;

/// Whether `head` starts with a blktrace record, in either byte order.
pub fn looks_like(head: &[u8]) -> bool {
    head.len() >= 4 && order(head[..4].try_into().unwrap_or_default()).is_some()
}

/// The byte order of a record from its magic: `Some(true)` little-endian.
fn order(m: [u8; 4]) -> Option<bool> {
    let ok = |v: u32| v & 0xffff_ff00 == MAGIC && v & 0xff == VERSION;
    if ok(u32::from_le_bytes(m)) {
        Some(true)
    } else if ok(u32::from_be_bytes(m)) {
        Some(false)
    } else {
        None
    }
}

/// The queue events of a blktrace binary file.
pub struct Blktrace<R> {
    r: R,
    /// Records read so far.
    n: u64,
}

impl<R: BufRead> Blktrace<R> {
    pub fn new(r: R) -> Blktrace<R> {
        Blktrace { r, n: 0 }
    }

    fn err(&self, what: impl Into<String>) -> TraceError {
        TraceError::record(self.n, what)
    }

    /// Fills `buf` whole; `Ok(false)` at a clean end before its first byte.
    fn fill(&mut self, buf: &mut [u8]) -> Result<bool, TraceError> {
        let mut got = 0;
        while got < buf.len() {
            match self.r.read(&mut buf[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => return Err(self.err(format!("cut short: {got} of {} bytes", buf.len()))),
                Ok(k) => got += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.err(format!("read error: {e}"))),
            }
        }
        Ok(true)
    }
}

impl<R: BufRead> Parse for Blktrace<R> {
    fn parse_next(&mut self) -> Option<Result<TraceRecord, TraceError>> {
        loop {
            self.n += 1;
            let mut b = [0u8; RECORD];
            match self.fill(&mut b) {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
            let Some(le) = order(b[..4].try_into().expect("4 bytes")) else {
                return Some(Err(self.err(format!(
                    "bad magic {:02x?}: not a blktrace record (version 7)",
                    &b[..4]
                ))));
            };
            let u32_at = |i: usize| {
                let a: [u8; 4] = b[i..i + 4].try_into().expect("4 bytes");
                if le {
                    u32::from_le_bytes(a)
                } else {
                    u32::from_be_bytes(a)
                }
            };
            let u64_at = |i: usize| {
                let a: [u8; 8] = b[i..i + 8].try_into().expect("8 bytes");
                if le {
                    u64::from_le_bytes(a)
                } else {
                    u64::from_be_bytes(a)
                }
            };
            let pdu = {
                let a: [u8; 2] = b[46..48].try_into().expect("2 bytes");
                if le {
                    u16::from_le_bytes(a)
                } else {
                    u16::from_be_bytes(a)
                }
            };
            // The payload (a process name, a remap, a message) is not replayed.
            let mut skip = vec![0u8; pdu as usize];
            match self.fill(&mut skip) {
                Ok(true) => {}
                Ok(false) if pdu == 0 => {}
                Ok(false) => return Some(Err(self.err("cut short in its payload"))),
                Err(e) => return Some(Err(e)),
            }
            let (time_ns, sector, bytes, action) = (u64_at(8), u64_at(16), u32_at(24), u32_at(28));
            let cats = action >> TC_SHIFT;
            if action & 0xff != TA_QUEUE || cats & TC_QUEUE == 0 || cats & TC_NOTIFY != 0 {
                continue;
            }
            let op = if cats & TC_DISCARD != 0 {
                TraceOp::Trim
            } else if cats & TC_WRITE != 0 {
                TraceOp::Write
            } else if bytes > 0 {
                TraceOp::Read
            } else {
                continue;
            };
            let rec = (|| {
                let offset = sector
                    .checked_mul(512)
                    .ok_or_else(|| self.err("sector out of range"))?;
                let len = length(self.n, bytes as u64).map_err(|e| self.err(e.what))?;
                offset
                    .checked_add(len as u64)
                    .ok_or_else(|| self.err("sector + bytes out of range"))?;
                Ok(TraceRecord {
                    time_ns,
                    op,
                    offset,
                    len,
                })
            })();
            return Some(rec);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One record as the kernel writes it, little- or big-endian.
    pub(crate) fn rec(
        le: bool,
        time: u64,
        sector: u64,
        bytes: u32,
        action: u32,
        pdu: &[u8],
    ) -> Vec<u8> {
        let mut v = Vec::new();
        let p32 =
            |v: &mut Vec<u8>, x: u32| v.extend(if le { x.to_le_bytes() } else { x.to_be_bytes() });
        let p64 =
            |v: &mut Vec<u8>, x: u64| v.extend(if le { x.to_le_bytes() } else { x.to_be_bytes() });
        p32(&mut v, MAGIC | VERSION);
        p32(&mut v, 1);
        p64(&mut v, time);
        p64(&mut v, sector);
        p32(&mut v, bytes);
        p32(&mut v, action);
        for _ in 0..3 {
            p32(&mut v, 0);
        }
        v.extend([0, 0]);
        v.extend(if le {
            (pdu.len() as u16).to_le_bytes()
        } else {
            (pdu.len() as u16).to_be_bytes()
        });
        v.extend_from_slice(pdu);
        v
    }

    fn act(what: u32, cats: u32) -> u32 {
        what | (cats << TC_SHIFT)
    }

    #[test]
    fn queue_events_are_the_records_in_either_byte_order() {
        for le in [true, false] {
            let mut t = Vec::new();
            // A process-name notify with a payload, a queued write, its issue, a queued read,
            // a queued discard, a flush without data.
            t.extend(rec(le, 0, 0, 0, act(0, TC_NOTIFY), b"kworker\0"));
            t.extend(rec(
                le,
                1_000,
                2048,
                4096,
                act(TA_QUEUE, TC_QUEUE | TC_WRITE),
                &[],
            ));
            t.extend(rec(le, 2_000, 2048, 4096, act(7, 1 << 6 | TC_WRITE), &[]));
            t.extend(rec(le, 3_000, 8, 512, act(TA_QUEUE, TC_QUEUE | 1), &[]));
            t.extend(rec(
                le,
                4_000,
                100,
                1 << 20,
                act(TA_QUEUE, TC_QUEUE | TC_WRITE | TC_DISCARD),
                &[],
            ));
            t.extend(rec(le, 5_000, 0, 0, act(TA_QUEUE, TC_QUEUE | 1 << 2), &[]));
            assert!(looks_like(&t));
            let got: Vec<_> = Blktrace::new(&t[..])
                .records()
                .map(Result::unwrap)
                .collect();
            let want = [
                (1_000, TraceOp::Write, 2048 * 512, 4096),
                (3_000, TraceOp::Read, 8 * 512, 512),
                (4_000, TraceOp::Trim, 100 * 512, 1 << 20),
            ];
            assert_eq!(got.len(), 3, "{got:?}");
            for (g, (t, op, off, len)) in got.iter().zip(want) {
                assert_eq!((g.time_ns, g.op, g.offset, g.len), (t, op, off, len));
            }
        }
    }

    #[test]
    fn bad_records_are_errors_naming_the_record() {
        let good = rec(true, 1, 0, 512, act(TA_QUEUE, TC_QUEUE), &[]);
        let mut t = good.clone();
        t.extend(&good[..30]);
        let got: Vec<_> = Blktrace::new(&t[..]).records().collect();
        assert_eq!(got.len(), 2);
        let e = got[1].as_ref().unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("record 2:"), "{e}");
        let mut t = good.clone();
        t.extend([0u8; 48]);
        let e = Blktrace::new(&t[..]).records().nth(1).unwrap().unwrap_err();
        assert!(e.what.contains("magic"), "{e}");
        let big = rec(true, 1, 0, u32::MAX, act(TA_QUEUE, TC_QUEUE), &[]);
        assert!(Blktrace::new(&big[..]).records().next().unwrap().is_err());
        assert!(!looks_like(b"fio version 3 iolog\n"));
    }
}
