//! fio's iolog (fio's HOWTO, "Trace file format"): a first line `fio version 2 iolog` or
//! `fio version 3 iolog`, then one action per line.
//!
//! * Version 2: `FILE ACTION` (add, open, close) or `FILE ACTION OFFSET LENGTH` (read, write,
//!   trim, sync, datasync, wait). A `wait` holds the replay for OFFSET µs after the previous
//!   one: a record's time is the sum of the waits before it.
//! * Version 3: the same with a timestamp first, µs since the start of the run that wrote it
//!   (fio writes `utime_since_now` of its log's start); `wait` is not allowed in version 3 and
//!   is skipped, as fio skips it.
//!
//! Records of every file named go to the one replayed target (as fio's `replay_redirect`);
//! syncs are not replayed (the records are reads, writes and trims).

use std::io::BufRead;

use crate::lines::{fields, uint, Lines};
use crate::{length, Parse, TraceError, TraceOp, TraceRecord};

/// The iolog version a first line declares.
pub fn version_of(line: &str) -> Option<u8> {
    match line.trim() {
        "fio version 2 iolog" => Some(2),
        "fio version 3 iolog" => Some(3),
        _ => None,
    }
}

/// The records of an iolog.
pub struct Iolog<R> {
    lines: Lines<R>,
    /// 0 until the first line is read.
    version: u8,
    /// Version 2: the sum of the waits so far, ns.
    waited_ns: u64,
}

impl<R: BufRead> Iolog<R> {
    pub fn new(r: R) -> Iolog<R> {
        Iolog {
            lines: Lines::new(r),
            version: 0,
            waited_ns: 0,
        }
    }

    /// The version read from the first line (0 before it).
    pub fn version(&self) -> u8 {
        self.version
    }
}

impl<R: BufRead> Parse for Iolog<R> {
    fn parse_next(&mut self) -> Option<Result<TraceRecord, TraceError>> {
        loop {
            let (n, text) = match self.lines.next_line()? {
                Ok(l) => l,
                Err(e) => return Some(Err(e)),
            };
            if self.version == 0 {
                match version_of(text) {
                    Some(v) => {
                        self.version = v;
                        continue;
                    }
                    None => {
                        return Some(Err(TraceError::new(
                            n,
                            "not a fio iolog: the first line must be `fio version 2 iolog` or `fio version 3 iolog`",
                        )))
                    }
                }
            }
            // A valid line has at most 5 fields; one more tells a longer line apart.
            let (all, count) = fields::<6>(text.split_ascii_whitespace());
            if count == 0 {
                continue;
            }
            let f = &all[..count.min(6)];
            let (time_ns, rest) = if self.version == 3 {
                let ts = match uint(n, "timestamp", f[0]) {
                    Ok(t) => t,
                    Err(e) => return Some(Err(e)),
                };
                let Some(ns) = ts.checked_mul(1000) else {
                    return Some(Err(TraceError::new(n, "timestamp out of range")));
                };
                (ns, &f[1..])
            } else {
                (self.waited_ns, f)
            };
            match rest {
                [_, "add" | "open" | "close"] => continue,
                [_, action] => {
                    return Some(Err(TraceError::new(
                        n,
                        format!("unknown file action {action:?} (add, open or close)"),
                    )))
                }
                [_, action, off, len] => {
                    let op = match *action {
                        "read" => TraceOp::Read,
                        "write" => TraceOp::Write,
                        "trim" => TraceOp::Trim,
                        "sync" | "datasync" => continue,
                        "wait" if self.version == 3 => continue,
                        "wait" => {
                            let us = match uint(n, "wait", off) {
                                Ok(u) => u,
                                Err(e) => return Some(Err(e)),
                            };
                            match us
                                .checked_mul(1000)
                                .and_then(|w| w.checked_add(self.waited_ns))
                            {
                                Some(t) => self.waited_ns = t,
                                None => {
                                    return Some(Err(TraceError::new(n, "waits out of range")))
                                }
                            }
                            continue;
                        }
                        other => {
                            return Some(Err(TraceError::new(
                                n,
                                format!(
                                    "unknown I/O action {other:?} (read, write, trim, sync, datasync, wait)"
                                ),
                            )))
                        }
                    };
                    let rec = uint(n, "offset", off).and_then(|offset| {
                        let len = length(n, uint(n, "length", len)?)?;
                        offset
                            .checked_add(len as u64)
                            .ok_or_else(|| TraceError::new(n, "offset + length out of range"))?;
                        Ok(TraceRecord {
                            time_ns,
                            op,
                            offset,
                            len,
                        })
                    });
                    return Some(rec);
                }
                _ => {
                    return Some(Err(TraceError::new(
                        n,
                        format!(
                            "{} fields: a version {} iolog line has {}",
                            count,
                            self.version,
                            if self.version == 3 {
                                "3 (TIME FILE ACTION) or 5 (TIME FILE ACTION OFFSET LENGTH)"
                            } else {
                                "2 (FILE ACTION) or 4 (FILE ACTION OFFSET LENGTH)"
                            }
                        ),
                    )))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<Result<TraceRecord, TraceError>> {
        Iolog::new(text.as_bytes()).records().collect()
    }

    fn rec(time_ns: u64, op: TraceOp, offset: u64, len: u32) -> Result<TraceRecord, TraceError> {
        Ok(TraceRecord {
            time_ns,
            op,
            offset,
            len,
        })
    }

    #[test]
    fn version_3_has_a_timestamp_in_microseconds() {
        let got = all("fio version 3 iolog\n23 /tmp/f add\n149 /tmp/f open\n155 /tmp/f read 61440 4096\n\
                       574 /tmp/f write 491520 8192\n600 /tmp/f trim 0 65536\n610 /tmp/f sync 0 0\n1420 /tmp/f close\n");
        assert_eq!(
            got,
            vec![
                rec(155_000, TraceOp::Read, 61440, 4096),
                rec(574_000, TraceOp::Write, 491520, 8192),
                rec(600_000, TraceOp::Trim, 0, 65536),
            ]
        );
    }

    #[test]
    fn version_2_times_are_the_sum_of_the_waits() {
        let got = all(
            "fio version 2 iolog\n/dev/sda add\n/dev/sda open\n/dev/sda write 0 4096\n\
                       /dev/sda wait 250 0\n/dev/sda read 4096 512\n/dev/sda wait 1000 0\n\
                       /dev/sda read 8192 512\n/dev/sda close\n",
        );
        assert_eq!(
            got,
            vec![
                rec(0, TraceOp::Write, 0, 4096),
                rec(250_000, TraceOp::Read, 4096, 512),
                rec(1_250_000, TraceOp::Read, 8192, 512),
            ]
        );
    }

    #[test]
    fn bad_lines_are_errors_with_their_number_and_end_the_stream() {
        let cases = [
            ("hello\n", 1),
            ("fio version 2 iolog\n/f read x 4096\n", 2),
            ("fio version 2 iolog\n/f add\n/f read 0\n", 3),
            ("fio version 2 iolog\n/f frobnicate 0 1\n", 2),
            ("fio version 2 iolog\n/f explode\n", 2),
            ("fio version 3 iolog\nx /f read 0 1\n", 2),
            ("fio version 3 iolog\n1 /f read 0 0\n", 2),
            (
                "fio version 3 iolog\n1 /f read 18446744073709551615 4096\n",
                2,
            ),
            (
                "fio version 3 iolog\n18446744073709551615 /f read 0 512\n",
                2,
            ),
            ("fio version 2 iolog\n/f read 0 99999999999\n", 2),
        ];
        for (text, line) in cases {
            let got = all(text);
            let errs: Vec<_> = got.iter().filter_map(|r| r.as_ref().err()).collect();
            assert_eq!(errs.len(), 1, "{text:?}: {got:?}");
            assert_eq!(errs[0].line, line, "{text:?}: {}", errs[0]);
            assert!(got.last().unwrap().is_err(), "nothing after the error");
        }
    }

    #[test]
    fn an_empty_trace_has_no_records() {
        assert!(all("").is_empty());
        assert!(all("fio version 3 iolog\n").is_empty());
    }
}
