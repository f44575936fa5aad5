//! Lines of a text trace, read with a bound on their length: a binary file without newlines
//! (or a hostile one) costs at most [`MAX_LINE`] bytes of memory, never the whole file.

use std::io::BufRead;

use crate::TraceError;

/// The longest line a trace may have (a fio iolog's file name is at most 256 bytes; no text
/// trace line comes near this).
pub const MAX_LINE: usize = 64 << 10;

/// A bounded line reader that counts lines (1-based, as editors show them).
pub struct Lines<R> {
    r: R,
    buf: Vec<u8>,
    /// The number of the line last returned.
    pub line: u64,
    done: bool,
}

impl<R: BufRead> Lines<R> {
    pub fn new(r: R) -> Lines<R> {
        Lines {
            r,
            buf: Vec::with_capacity(256),
            line: 0,
            done: false,
        }
    }

    /// The next line without its end (`\n` or `\r\n`) and its number; `None` at the end of
    /// the input.
    pub fn next_line(&mut self) -> Option<Result<(u64, &str), TraceError>> {
        if self.done {
            return None;
        }
        self.buf.clear();
        self.line += 1;
        loop {
            let chunk = match self.r.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.done = true;
                    return Some(Err(TraceError::new(self.line, format!("read error: {e}"))));
                }
            };
            if chunk.is_empty() {
                self.done = true;
                if self.buf.is_empty() {
                    return None;
                }
                break;
            }
            let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            if self.buf.len() + take > MAX_LINE {
                self.done = true;
                return Some(Err(TraceError::new(
                    self.line,
                    format!("line longer than {MAX_LINE} bytes: not a text trace"),
                )));
            }
            self.buf.extend_from_slice(&chunk[..take]);
            self.r.consume(take);
            if end {
                break;
            }
        }
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        match std::str::from_utf8(&self.buf) {
            Ok(s) => Some(Ok((self.line, s))),
            Err(_) => {
                self.done = true;
                Some(Err(TraceError::new(self.line, "not UTF-8 text")))
            }
        }
    }
}

/// The first `N` fields of a line, without allocating (the replay parses each record on its
/// stream's path), and how many it has in all.
pub fn fields<'a, const N: usize>(it: impl Iterator<Item = &'a str>) -> ([&'a str; N], usize) {
    let mut f = [""; N];
    let mut n = 0;
    for x in it {
        if n < N {
            f[n] = x;
        }
        n += 1;
    }
    (f, n)
}

/// Parses a decimal unsigned integer field, naming it in the error.
pub fn uint(line: u64, what: &str, s: &str) -> Result<u64, TraceError> {
    s.parse::<u64>()
        .map_err(|_| TraceError::new(line, format!("{what} {s:?} is not an unsigned integer")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_and_stripped() {
        let mut l = Lines::new(&b"a\r\nb\n\nc"[..]);
        let mut got = Vec::new();
        while let Some(x) = l.next_line() {
            let (n, t) = x.unwrap();
            got.push((n, t.to_string()));
        }
        assert_eq!(
            got,
            vec![
                (1, "a".into()),
                (2, "b".into()),
                (3, "".into()),
                (4, "c".into())
            ]
        );
    }

    #[test]
    fn a_line_without_end_is_refused_past_the_bound() {
        let big = vec![b'x'; MAX_LINE + 10];
        let mut l = Lines::new(std::io::BufReader::with_capacity(1000, &big[..]));
        let e = l.next_line().unwrap().unwrap_err();
        assert_eq!(e.line, 1);
        assert!(l.next_line().is_none());
    }

    #[test]
    fn fields_keeps_the_first_n_and_counts_all() {
        let (f, n) = fields::<3>("a  b\tc d e".split_ascii_whitespace());
        assert_eq!((f, n), (["a", "b", "c"], 5));
        let (f, n) = fields::<3>("a".split_ascii_whitespace());
        assert_eq!((f, n), (["a", "", ""], 1));
    }

    #[test]
    fn binary_is_an_error_not_a_panic() {
        let mut l = Lines::new(&[0xff, 0xfe, b'\n'][..]);
        assert!(l.next_line().unwrap().is_err());
    }
}
