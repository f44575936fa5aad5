//! The receive buffer of a connection: bytes read from the socket and not yet framed.
//!
//! One buffer serves the whole connection. Reads append at its end; PDUs are framed from its
//! front and consumed. It grows only to hold one PDU larger than itself (a Data-Out up to the
//! negotiated MaxRecvDataSegmentLength, a long text), and moves what is left to the front only
//! when the next read or PDU would not fit behind it, so a pipelining initiator costs no copy.

use crate::wire::bhs::BHS_LEN;

pub(super) struct RecvBuf {
    buf: Vec<u8>,
    /// First byte not yet consumed.
    start: usize,
    /// End of the bytes received.
    end: usize,
}

impl RecvBuf {
    pub(super) fn new(len: usize) -> RecvBuf {
        RecvBuf {
            buf: vec![0; len],
            start: 0,
            end: 0,
        }
    }

    /// Where the next read goes: what is left behind the received bytes (the unconsumed
    /// bytes moved to the front first when nothing is).
    pub(super) fn spare(&mut self) -> &mut [u8] {
        if self.end == self.buf.len() {
            self.compact();
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were read into [`RecvBuf::spare`].
    pub(super) fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// The bytes received and not yet consumed.
    pub(super) fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// The header of the PDU at the front, when its 48 bytes are there.
    pub(super) fn header(&self) -> Option<[u8; BHS_LEN]> {
        self.pending().get(..BHS_LEN)?.try_into().ok()
    }

    /// The first `n` pending bytes were framed and handled.
    pub(super) fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
    }

    /// Makes room for the `needed` more bytes the PDU at the front lacks: grows the buffer
    /// when the whole PDU would not fit in it, and moves the PDU to the front when it would
    /// not fit behind its start.
    pub(super) fn reserve(&mut self, needed: usize) {
        let have = self.end - self.start;
        if have + needed > self.buf.len() {
            self.buf.resize(have + needed, 0);
        }
        if self.start > 0 && self.end + needed > self.buf.len() {
            self.compact();
        }
    }

    /// Starts over at the front once everything received was consumed.
    pub(super) fn rewind_if_empty(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    fn compact(&mut self) {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(b: &mut RecvBuf, bytes: &[u8]) {
        let spare = b.spare();
        spare[..bytes.len()].copy_from_slice(bytes);
        b.filled(bytes.len());
    }

    #[test]
    fn pdus_across_reads_keep_their_bytes() {
        let mut b = RecvBuf::new(8);
        read(&mut b, &[1, 2, 3, 4, 5, 6]);
        b.consume(4);
        assert_eq!(b.pending(), &[5, 6]);
        // Room is left behind the pending bytes: no move yet.
        assert_eq!(b.spare().len(), 2);
        read(&mut b, &[7, 8]);
        // Full: the next read moves the pending bytes to the front first.
        assert_eq!(b.spare().len(), 4);
        assert_eq!(b.pending(), &[5, 6, 7, 8]);
        // A PDU of 10 bytes of which 6 are missing: the buffer grows to hold it whole.
        b.reserve(6);
        assert_eq!(b.spare().len(), 6);
        read(&mut b, &[9, 10, 11, 12, 13, 14]);
        assert_eq!(b.pending(), &[5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
        b.consume(10);
        b.rewind_if_empty();
        assert_eq!(b.spare().len(), 10);
    }

    #[test]
    fn a_pdu_that_fits_only_at_the_front_is_moved_there() {
        let mut b = RecvBuf::new(16);
        read(&mut b, &[0; 12]);
        b.consume(10);
        // 2 bytes there, 6 missing: 8 fit in 16, but not behind offset 10.
        b.reserve(6);
        assert_eq!(b.spare().len(), 14);
        assert_eq!(b.pending().len(), 2);
    }

    #[test]
    fn consuming_never_passes_what_was_received() {
        let mut b = RecvBuf::new(64);
        read(&mut b, &[0xaa; 50]);
        assert_eq!(b.header(), Some([0xaa; BHS_LEN]));
        b.consume(10);
        assert_eq!(b.header(), None);
        b.consume(100);
        assert!(b.pending().is_empty());
    }
}
