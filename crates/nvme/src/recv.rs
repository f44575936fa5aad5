//! A receive buffer for the socket sides (target connections, host connections): one read
//! takes whatever the socket has, PDUs are parsed where they lie, and bytes move only before a
//! read (no zero-fill per read, no shift per PDU).
//!
//! Before a read, a short unconsumed rest (the start of a PDU that has not fully arrived, at
//! most [`COMPACT_MAX`]) moves to the front, so every read lands at the start of the buffer:
//! at 4 KiB I/O one batch of replies fits in the first few dozen KiB, which stay in cache, where
//! reading on at the end of the last read would walk the whole buffer and have the kernel copy
//! into lines long evicted. Longer rests move only when the tail is too short.
//!
//! The buffer is written once when it is made: its pages are faulted in before any
//! measurement, wherever the allocator put it (heap or its own mapping, which glibc chooses by
//! a threshold that earlier large frees raise).

use std::io::{self, Read};

/// The longest unconsumed rest moved to the front before every read.
pub(crate) const COMPACT_MAX: usize = 16 * 1024;

pub(crate) struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// A receive on a ring writes at `end` (`spare` handed it out): nothing moves the bytes
    /// or `end` until it lands.
    posted: bool,
}

impl RecvBuf {
    pub fn new(cap: usize) -> RecvBuf {
        let n = cap.max(4096);
        let mut buf = vec![0u8; n];
        // Fault every page in now (vec! may hand out calloc's untouched pages); a volatile
        // store is one the compiler cannot drop as writing zeros over zeros.
        for i in (0..n).step_by(4096) {
            // SAFETY: i < n = buf.len(): in bounds of the allocation, valid for a write.
            unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(i), 0) };
        }
        RecvBuf {
            buf,
            start: 0,
            end: 0,
            posted: false,
        }
    }

    /// The received bytes not yet consumed.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end && !self.posted {
            self.start = 0;
            self.end = 0;
        }
    }

    /// One read from `r`, after making room for at least `needed` more bytes. `Ok(0)` is the
    /// end of the stream.
    pub fn fill(&mut self, r: &mut impl Read, needed: usize) -> io::Result<usize> {
        self.room(needed);
        let n = r.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }

    fn room(&mut self, needed: usize) {
        let needed = needed.max(1);
        let rest = self.end - self.start;
        if self.start > 0 && (rest <= COMPACT_MAX || self.buf.len() - self.end < needed) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < needed {
            self.buf.resize(self.end + needed.max(64 * 1024), 0);
        }
    }

    /// Room for at least `needed` more bytes, handed to a receive the kernel carries out
    /// later: until [`landed`](Self::landed) the buffer neither moves nor compacts.
    pub fn spare(&mut self, needed: usize) -> (*mut u8, usize) {
        debug_assert!(!self.posted);
        self.room(needed);
        self.posted = true;
        let tail = &mut self.buf[self.end..];
        (tail.as_mut_ptr(), tail.len())
    }

    /// The receive handed [`spare`](Self::spare) room brought `n` bytes (0 when it failed).
    pub fn landed(&mut self, n: usize) {
        self.posted = false;
        self.end = (self.end + n).min(self.buf.len());
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// The storage, taken out (left empty) by an owner that must keep it for the process's
    /// life because a receive may still write into it.
    pub fn take_storage(&mut self) -> Vec<u8> {
        self.start = 0;
        self.end = 0;
        std::mem::take(&mut self.buf)
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

    #[test]
    fn a_short_rest_moves_to_the_front_before_a_read() {
        let src: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut r = &src[..];
        let mut b = RecvBuf::new(64 * 1024);
        b.fill(&mut (&mut r).take(5000), 1).unwrap();
        b.consume(4000);
        b.fill(&mut r, 1).unwrap();
        // The 1000-byte rest moved to offset 0 and the read followed it there.
        assert_eq!(b.start, 0);
        assert_eq!(b.data(), &src[4000..]);
        // A buffer full from its start grows for what is still needed.
        let mut b = RecvBuf::new(4096);
        let mut r = &src[..];
        b.fill(&mut r, 1).unwrap();
        assert_eq!(b.data().len(), 4096);
        assert_eq!(b.fill(&mut r, 1000).unwrap(), 10_000 - 4096);
        assert_eq!(b.data(), &src[..]);
    }
}
