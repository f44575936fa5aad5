//! The SNIA IOTTA block CSV layout of the MSR Cambridge traces (Narayanan et al., "Write
//! off-loading", FAST '08; SNIA IOTTA repository, trace set 388): one I/O a line,
//!
//! ```text
//! Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
//! 128166372003061629,hm,0,Read,3386322944,4096,15029
//! ```
//!
//! `Timestamp` is a Windows FILETIME (100 ns ticks since 1601-01-01), `Type` `Read` or
//! `Write`, `Offset` and `Size` bytes, `ResponseTime` the traced I/O's (100 ns ticks; not
//! replayed). A header row, if any, is skipped. The files of the set hold one volume each;
//! records of every host and disk in a file are replayed.

use std::io::BufRead;

use crate::lines::{fields, uint, Lines};
use crate::{length, Parse, TraceError, TraceOp, TraceRecord};

/// ns per FILETIME tick.
pub const TICK_NS: u64 = 100;

/// Whether `line` is a data row of the layout.
pub fn looks_like(line: &str) -> bool {
    let (f, count) = fields::<7>(line.split(',').map(str::trim));
    count == 7
        && f[0].parse::<u64>().is_ok()
        && op_of(f[3]).is_some()
        && f[4].parse::<u64>().is_ok()
        && f[5].parse::<u64>().is_ok()
}

fn op_of(s: &str) -> Option<TraceOp> {
    if s.eq_ignore_ascii_case("read") {
        Some(TraceOp::Read)
    } else if s.eq_ignore_ascii_case("write") {
        Some(TraceOp::Write)
    } else {
        None
    }
}

/// The records of an MSR Cambridge CSV file.
pub struct Msr<R> {
    lines: Lines<R>,
}

impl<R: BufRead> Msr<R> {
    pub fn new(r: R) -> Msr<R> {
        Msr {
            lines: Lines::new(r),
        }
    }
}

impl<R: BufRead> Parse for Msr<R> {
    fn parse_next(&mut self) -> Option<Result<TraceRecord, TraceError>> {
        loop {
            let (n, text) = match self.lines.next_line()? {
                Ok(l) => l,
                Err(e) => return Some(Err(e)),
            };
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            if n == 1 && text.to_ascii_lowercase().starts_with("timestamp,") {
                continue;
            }
            // Without allocating: the replay parses each record on its stream's path.
            let (f, count) = fields::<7>(text.split(',').map(str::trim));
            if count != 7 {
                return Some(Err(TraceError::new(
                    n,
                    format!(
                        "{count} fields: a row has 7 (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime)"
                    ),
                )));
            }
            let rec = (|| {
                let ticks = uint(n, "timestamp", f[0])?;
                let op = op_of(f[3]).ok_or_else(|| {
                    TraceError::new(n, format!("type {:?} is neither Read nor Write", f[3]))
                })?;
                let offset = uint(n, "offset", f[4])?;
                let len = length(n, uint(n, "size", f[5])?)?;
                offset
                    .checked_add(len as u64)
                    .ok_or_else(|| TraceError::new(n, "offset + size out of range"))?;
                let time_ns = ticks
                    .checked_mul(TICK_NS)
                    .ok_or_else(|| TraceError::new(n, "timestamp out of range"))?;
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

    #[test]
    fn rows_are_records_in_filetime_ticks() {
        let text = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
                    128166372003061629,hm,0,Read,3386322944,4096,15029\n\
                    128166372003071629,hm,0,Write,0,512,100\n\
                    \n128166372013061629,hm,0,write,1048576,65536,7\n";
        let got: Vec<_> = Msr::new(text.as_bytes())
            .records()
            .map(Result::unwrap)
            .collect();
        let t0 = 128166372003061629u64 * 100;
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[0],
            TraceRecord {
                time_ns: t0,
                op: TraceOp::Read,
                offset: 3386322944,
                len: 4096
            }
        );
        assert_eq!(got[1].time_ns - t0, 1_000_000);
        assert_eq!(got[1].op, TraceOp::Write);
        assert_eq!(got[2].time_ns - t0, 1_000_000_000);
        assert_eq!((got[2].offset, got[2].len), (1048576, 65536));
    }

    #[test]
    fn bad_rows_are_errors_with_their_number() {
        for (text, line) in [
            ("1,h,0,Read,0,4096\n", 1),
            ("1,h,0,Read,0,4096,1\n1,h,0,Trim,0,4096,1\n", 2),
            ("1,h,0,Read,x,4096,1\n", 1),
            ("1,h,0,Read,0,-1,1\n", 1),
            ("1,h,0,Read,0,0,1\n", 1),
            ("999999999999999999999,h,0,Read,0,512,1\n", 1),
            ("184467440737095517,h,0,Read,0,512,1\n", 1),
        ] {
            let got: Vec<_> = Msr::new(text.as_bytes()).records().collect();
            let err = got.iter().find_map(|r| r.as_ref().err());
            assert_eq!(err.map(|e| e.line), Some(line), "{text:?}: {got:?}");
            assert!(got.last().unwrap().is_err());
        }
    }
}
