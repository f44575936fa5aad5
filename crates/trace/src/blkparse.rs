//! blkparse's default text output (blkparse(1), "DEFAULT OUTPUT"): one event a line,
//!
//! ```text
//!   8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]
//! ```
//!
//! device (major,minor), CPU, sequence, time (s.ns since the trace's start), pid, action,
//! RWBS, then for I/O events `SECTOR + COUNT` (512-byte sectors) and the process.
//!
//! The queue events (`Q`) are replayed: the I/Os as the application issued them, before the
//! traced host's scheduler merged or split them. Other actions (G, I, D, C, M, m, ...) and
//! the summary blkparse prints at the end are skipped. RWBS decides the op: `D` (discard) a
//! trim, else `W` a write, else `R` a read; a queue event without data (a flush, `N`) is
//! skipped. Events of every device in the output are replayed (run blkparse on one device).

use std::io::BufRead;

use crate::lines::{fields, uint, Lines};
use crate::{length, Parse, TraceError, TraceOp, TraceRecord};

/// The fields of an event line that are read: device, CPU, sequence, time, PID, action,
/// RWBS, then SECTOR + COUNT.
const FIELDS: usize = 10;

/// Bytes per blkparse sector.
pub const SECTOR: u64 = 512;

/// Whether `line` is an event line: a `major,minor` device first, then at least six fields.
pub fn looks_like(line: &str) -> bool {
    let (f, count) = fields::<7>(line.split_ascii_whitespace());
    count >= 7 && is_device(f[0]) && parse_time(f[3]).is_some()
}

fn is_device(s: &str) -> bool {
    let digits = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
    s.split_once(',')
        .is_some_and(|(a, b)| digits(a) && digits(b))
}

/// `SECONDS.NANOSECONDS` (at most 9 fractional digits) as ns.
fn parse_time(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    if secs.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let mut ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..9 {
        ns *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// `SECTOR + COUNT` of an I/O event (the fields after RWBS) as bytes.
fn extent(n: u64, f: &[&str]) -> Result<(u64, u32), TraceError> {
    let &[sector, "+", count, ..] = f else {
        return Err(TraceError::new(n, "a queue event without SECTOR + COUNT"));
    };
    let sector = uint(n, "sector", sector)?;
    let count = uint(n, "sector count", count)?;
    let offset = sector
        .checked_mul(SECTOR)
        .ok_or_else(|| TraceError::new(n, "sector out of range"))?;
    let bytes = count
        .checked_mul(SECTOR)
        .ok_or_else(|| TraceError::new(n, "sector count out of range"))?;
    let len = length(n, bytes)?;
    offset
        .checked_add(len as u64)
        .ok_or_else(|| TraceError::new(n, "sector + count out of range"))?;
    Ok((offset, len))
}

/// The queue events of a blkparse text output.
pub struct Blkparse<R> {
    lines: Lines<R>,
}

impl<R: BufRead> Blkparse<R> {
    pub fn new(r: R) -> Blkparse<R> {
        Blkparse {
            lines: Lines::new(r),
        }
    }
}

impl<R: BufRead> Parse for Blkparse<R> {
    fn parse_next(&mut self) -> Option<Result<TraceRecord, TraceError>> {
        loop {
            let (n, text) = match self.lines.next_line()? {
                Ok(l) => l,
                Err(e) => return Some(Err(e)),
            };
            // The fields an event uses (up to SECTOR + COUNT), without allocating: the
            // replay parses each record on its stream's path.
            let (all, count) = fields::<FIELDS>(text.split_ascii_whitespace());
            let f = &all[..count.min(FIELDS)];
            // Not an event: blank, or the per-CPU and total summary at the end.
            if f.is_empty() || !is_device(f[0]) {
                continue;
            }
            if count < 7 {
                return Some(Err(TraceError::new(
                    n,
                    format!("an event line of {count} fields (at least 7)"),
                )));
            }
            let Some(time_ns) = parse_time(f[3]) else {
                return Some(Err(TraceError::new(
                    n,
                    format!("time {:?} is not SECONDS.NANOSECONDS", f[3]),
                )));
            };
            if f[5] != "Q" {
                continue;
            }
            let rwbs = f[6];
            let op = if rwbs.contains('D') {
                TraceOp::Trim
            } else if rwbs.contains('W') {
                TraceOp::Write
            } else if rwbs.contains('R') {
                TraceOp::Read
            } else {
                continue;
            };
            let rec = extent(n, &f[7..]).map(|(offset, len)| TraceRecord {
                time_ns,
                op,
                offset,
                len,
            });
            return Some(rec);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "\
  8,0    3        1     0.000000000   697  A   W 223490 + 8 <- (8,1) 223427
  8,0    3        2     0.000001000   697  Q   W 223490 + 8 [kjournald]
  8,0    3        3     0.000004000   697  G   W 223490 + 8 [kjournald]
  8,0    3        4     0.000210000   697  D   W 223490 + 8 [kjournald]
  8,0    1        5     0.001500250   800  Q  RA 1024 + 16 [cat]
  8,0    1        6     0.002000000   800  Q  FN [kworker/1:1]
  8,0    0        7     2.5   12  Q  DS 2048 + 2048 [fstrim]
  8,0    0        0     2.600000000     0  m   N cfq497A  / insert_request
  8,0    0        8     3.000000000    12  C   W 223490 + 8 [0]

CPU0 (8,0):
 Reads Queued:           1,        8KiB\t Writes Queued:           1,        4KiB
Total (8,0):
Throughput (R/W): 0KiB/s / 0KiB/s
Events (8,0): 9 entries
";

    #[test]
    fn queue_events_are_the_records() {
        let got: Vec<_> = Blkparse::new(TRACE.as_bytes()).records().collect();
        let want = [
            (1_000, TraceOp::Write, 223490 * 512, 4096),
            (1_500_250, TraceOp::Read, 1024 * 512, 8192),
            (2_500_000_000, TraceOp::Trim, 2048 * 512, 2048 * 512),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, (t, op, off, len)) in got.into_iter().zip(want) {
            assert_eq!(
                g.unwrap(),
                TraceRecord {
                    time_ns: t,
                    op,
                    offset: off,
                    len
                }
            );
        }
    }

    #[test]
    fn bad_event_lines_are_errors_with_their_number() {
        for (text, line) in [
            ("8,0 0 1 0.1 1 Q W 10 + x [a]\n", 1),
            ("8,0 0 1 0.1 1 Q W 10 8 [a]\n", 1),
            ("\n8,0 0 1 zero 1 Q W 10 + 8 [a]\n", 2),
            ("8,0 0 1 0.1 1\n", 1),
            ("8,0 0 1 0.1 1 Q W\n", 1),
            ("8,0 0 1 0.1 1 Q W 10 + 0 [a]\n", 1),
            ("8,0 0 1 0.1 1 Q W 36028797018963968 + 8 [a]\n", 1),
            ("8,0 0 1 0.1234567891 1 Q W 10 + 8 [a]\n", 1),
        ] {
            let got: Vec<_> = Blkparse::new(text.as_bytes()).records().collect();
            assert_eq!(got.len(), 1, "{text:?}: {got:?}");
            assert_eq!(got[0].as_ref().unwrap_err().line, line, "{text:?}");
        }
    }

    #[test]
    fn times_parse_to_nanoseconds() {
        assert_eq!(parse_time("1.5"), Some(1_500_000_000));
        assert_eq!(parse_time("0.000000001"), Some(1));
        assert_eq!(parse_time("3"), Some(3_000_000_000));
        assert_eq!(parse_time(".5"), None);
        assert_eq!(parse_time("1.-5"), None);
        assert_eq!(parse_time("99999999999999999999.0"), None);
    }
}
