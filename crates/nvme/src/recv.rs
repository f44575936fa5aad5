//! A receive buffer for the socket sides (target connections, host connections): one read
//! takes whatever the socket has, PDUs are parsed where they lie, and bytes move only when the
//! tail of the buffer is too short for what is still needed (no zero-fill per read, no shift
//! per PDU).

use std::io::{self, Read};

pub(crate) struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl RecvBuf {
    pub fn new(cap: usize) -> RecvBuf {
        RecvBuf {
            buf: vec![0; cap.max(4096)],
            start: 0,
            end: 0,
        }
    }

    /// The received bytes not yet consumed.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// One read from `r`, after making room for at least `needed` more bytes. `Ok(0)` is the
    /// end of the stream.
    pub fn fill(&mut self, r: &mut impl Read, needed: usize) -> io::Result<usize> {
        let needed = needed.max(1);
        if self.buf.len() - self.end < needed {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buf.len() - self.end < needed {
                self.buf.resize(self.end + needed.max(64 * 1024), 0);
            }
        }
        let n = r.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_unconsumed_bytes_across_compaction_and_growth() {
        let src: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
        let mut r = &src[..];
        let mut b = RecvBuf::new(4096);
        let mut got = Vec::new();
        loop {
            let n = b.fill(&mut r, 5000).unwrap();
            let take = b.data().len().min(3000);
            got.extend_from_slice(&b.data()[..take]);
            b.consume(take);
            if n == 0 && b.data().is_empty() {
                break;
            }
        }
        assert_eq!(got, src);
    }
}
