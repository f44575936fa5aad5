//! A connection's output: PDU headers (and bytes that must be copied: admin data, anything
//! under a data digest, a file store's reads) gather in one buffer, while read data from a RAM
//! store is only referenced where it lies. One `sendmsg` of an iovec list sends both in order:
//! the kernel copies a read's data from the store straight into the socket, once, instead of
//! a copy into the buffer followed by the kernel's copy out of it.
//!
//! The referenced bytes are those the store holds when the kernel copies them. A write that
//! lands between handling a read and sending its reply shows in the reply, which is the
//! answer a read concurrent with that write may give anyway (the host has not seen the read
//! complete). A data digest needs the bytes fixed when it is computed, so digests copy.
//!
//! Both of sanbench's block servers that frame replies with headers send through it: the
//! NVMe/TCP target (C2HData) and the iSCSI target (Data-In).

use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;

use crate::BlockStore;

/// iovecs per `sendmsg` (below every IOV_MAX Linux has had).
const IOV_BATCH: usize = 512;

/// Copied bytes held before a send, whatever is still to handle.
const BUF_LIMIT: usize = 1 << 20;
/// Referenced bytes held before a send: they cost no memory, so the replies to a batch of
/// large reads (QD 4 of 1 MiB) leave in one `sendmsg` instead of one each.
const EXT_LIMIT: usize = 8 << 20;

/// Reads up to this long are prefetched when referenced (see [`prefetch`]).
const PREFETCH_MAX: usize = 64 * 1024;

/// Asks the CPU to start loading a piece's cache lines. A random 4 KiB read's bytes are in
/// DRAM; copied by a `memcpy` they arrived with the loads of many lines in flight, copied by
/// the kernel's `rep movs` in `sendmsg` they arrived line after line, which cost more than the
/// copy it saved. Prefetched while the rest of the batch is handled, they are in cache by the
/// send. Large reads are left to the hardware prefetcher (their lines follow each other, and
/// a batch of them would not fit in cache).
fn prefetch(iov: &libc::iovec) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = iov.iov_base.cast::<i8>().cast_const();
        for line in (0..iov.iov_len).step_by(64) {
            // SAFETY: SSE is part of x86_64's baseline. A prefetch is a hint: it never faults
            // or changes memory, whatever the address, and no byte is read into Rust;
            // wrapping_add keeps the address computation defined (it stays in the piece:
            // line < iov_len).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = iov;
}

/// Store bytes sent from where they lie, after `at` bytes of the buffer.
struct Ext {
    at: usize,
    iov: libc::iovec,
}

pub struct Out {
    buf: Vec<u8>,
    ext: Vec<Ext>,
    ext_bytes: usize,
    /// Reads may reference the store (no data digest).
    pub zero_copy: bool,
    /// Scratch for the store's pieces and for one `sendmsg`'s list.
    pieces: Vec<libc::iovec>,
    iov: Vec<libc::iovec>,
}

/// A point to go back to with [`Out::truncate`].
#[derive(Clone, Copy)]
pub struct Mark {
    buf: usize,
    ext: usize,
    ext_bytes: usize,
}

impl Out {
    pub fn new(cap: usize) -> Out {
        Out {
            buf: Vec::with_capacity(cap),
            ext: Vec::new(),
            ext_bytes: 0,
            zero_copy: true,
            pieces: Vec::new(),
            iov: Vec::with_capacity(IOV_BATCH),
        }
    }

    /// Bytes waiting to be sent.
    pub fn len(&self) -> usize {
        self.buf.len() + self.ext_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes waiting that are referenced in a store, not copied (see [`Out::copy_referenced`]).
    pub fn referenced(&self) -> usize {
        self.ext_bytes
    }

    /// Enough is waiting that it should go out before more commands are handled.
    pub fn full(&self) -> bool {
        self.buf.len() > BUF_LIMIT || self.ext_bytes > EXT_LIMIT
    }

    /// The buffer, to append headers and copied bytes to.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    pub fn mark(&self) -> Mark {
        Mark {
            buf: self.buf.len(),
            ext: self.ext.len(),
            ext_bytes: self.ext_bytes,
        }
    }

    pub fn truncate(&mut self, m: Mark) {
        self.buf.truncate(m.buf);
        self.ext.truncate(m.ext);
        self.ext_bytes = m.ext_bytes;
    }

    /// Appends `len` bytes of `store` at `off`: referenced where they lie when allowed and
    /// the store is RAM, else copied into the buffer.
    pub fn store(&mut self, store: &BlockStore, off: u64, len: usize) -> io::Result<()> {
        if self.zero_copy {
            self.pieces.clear();
            if store.iovecs(off, len, &mut self.pieces)? {
                let at = self.buf.len();
                if len <= PREFETCH_MAX {
                    for iov in &self.pieces {
                        prefetch(iov);
                    }
                }
                for &iov in &self.pieces {
                    self.ext_bytes += iov.iov_len;
                    self.ext.push(Ext { at, iov });
                }
                return Ok(());
            }
        }
        store.read_append(off, len, &mut self.buf)
    }

    /// Moves everything queued after `m` into `into` as owned bytes (referenced store bytes
    /// copied now) and goes back to `m`. A reply held back for a while (`serve --delay`, see
    /// [`crate::delay`]) must carry the bytes its read found, not those of later writes.
    pub fn take_since(&mut self, m: Mark, into: &mut Vec<u8>) {
        into.reserve(self.len() - (m.buf + m.ext_bytes));
        let mut pos = m.buf;
        for x in &self.ext[m.ext..] {
            into.extend_from_slice(&self.buf[pos..x.at]);
            pos = x.at;
            let (at, n) = (into.len(), x.iov.iov_len);
            into.reserve(n);
            // SAFETY: `reserve` made room for n bytes after `at`. The piece is n readable
            // bytes of the store, valid while it lives (`Out::store`), and cannot overlap
            // `into`, which is the caller's; a write racing this copy gives torn-but-defined
            // bytes, as the store's own reads do. The n bytes after `at` are then initialised.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    x.iov.iov_base.cast::<u8>().cast_const(),
                    into.as_mut_ptr().add(at),
                    n,
                );
                into.set_len(at + n);
            }
        }
        into.extend_from_slice(&self.buf[pos..]);
        self.truncate(m);
    }

    /// Copies the referenced bytes waiting into the buffer in place of their references, in
    /// order: what is sent no longer follows later writes to the store. A server calls it
    /// before a write that must not show in replies already queued; it costs the copy that
    /// referencing saved, and no send. Marks taken before it are void.
    pub fn copy_referenced(&mut self) {
        if self.ext.is_empty() {
            return;
        }
        let mut buf =
            Vec::with_capacity((self.buf.len() + self.ext_bytes).max(self.buf.capacity()));
        let mut pos = 0;
        for x in &self.ext {
            buf.extend_from_slice(&self.buf[pos..x.at]);
            pos = x.at;
            let (at, n) = (buf.len(), x.iov.iov_len);
            // SAFETY: capacity covers the buffer and every piece, so at + n fits. The piece is
            // n readable bytes of the store, valid while it lives (`Out::store`), and cannot
            // overlap `buf`, which is ours; a write racing this copy gives torn-but-defined
            // bytes, as the store's own reads do. The n bytes after `at` are then initialised.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    x.iov.iov_base.cast::<u8>().cast_const(),
                    buf.as_mut_ptr().add(at),
                    n,
                );
                buf.set_len(at + n);
            }
        }
        buf.extend_from_slice(&self.buf[pos..]);
        self.buf = buf;
        self.ext.clear();
        self.ext_bytes = 0;
    }

    /// Sends everything, blocking (the socket's send timeout bounds a stall: a host that
    /// takes nothing for that long gets an error).
    pub fn send(&mut self, s: &TcpStream) -> io::Result<()> {
        if self.ext.is_empty() {
            use std::io::Write;
            let r = (&*s).write_all(&self.buf);
            self.buf.clear();
            return r;
        }
        let r = self.send_vectored(s);
        self.buf.clear();
        self.ext.clear();
        self.ext_bytes = 0;
        r
    }

    fn send_vectored(&mut self, s: &TcpStream) -> io::Result<()> {
        // Walk the stream as (buffer offset, next ext) and send it in lists of IOV_BATCH.
        let (mut pos, mut next) = (0usize, 0usize);
        // Bytes of the current ext already sent (a partial send can stop inside one).
        let mut ext_done = 0usize;
        loop {
            self.iov.clear();
            let (mut p, mut e, mut skip) = (pos, next, ext_done);
            while self.iov.len() < IOV_BATCH {
                let upto = self.ext.get(e).map_or(self.buf.len(), |x| x.at);
                if p < upto {
                    self.iov.push(libc::iovec {
                        iov_base: self.buf[p..].as_ptr().cast_mut().cast(),
                        iov_len: upto - p,
                    });
                    p = upto;
                    continue;
                }
                let Some(x) = self.ext.get(e) else { break };
                // SAFETY: skip < iov_len (a finished ext is never current), so the pointer
                // stays inside the piece the store handed out.
                let base = unsafe { x.iov.iov_base.cast::<u8>().add(skip) };
                self.iov.push(libc::iovec {
                    iov_base: base.cast(),
                    iov_len: x.iov.iov_len - skip,
                });
                skip = 0;
                e += 1;
            }
            if self.iov.is_empty() {
                return Ok(());
            }
            // SAFETY: a zeroed msghdr is valid (no name, no control data); its iovec list
            // points into `self.iov`, which lives until the call returns.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = self.iov.as_mut_ptr();
            msg.msg_iovlen = self.iov.len() as _;
            // SAFETY: every iovec names readable memory: the buffer (not changed until the
            // send ends) or store pieces, valid while the store lives (`Out::store`); the
            // kernel only reads them. The fd is open for the borrow of `s`.
            let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            // Advance (pos, next, ext_done) by n bytes.
            let mut left = n as usize;
            while left > 0 {
                let upto = self.ext.get(next).map_or(self.buf.len(), |x| x.at);
                if pos < upto {
                    let k = left.min(upto - pos);
                    pos += k;
                    left -= k;
                    continue;
                }
                let Some(x) = self.ext.get(next) else { break };
                let k = left.min(x.iov.iov_len - ext_done);
                ext_done += k;
                left -= k;
                if ext_done == x.iov.iov_len {
                    ext_done = 0;
                    next += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// What `o` sends (all of it) to a reader at the other end of a loopback connection.
    fn sent(o: &mut Out) -> Vec<u8> {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            got
        });
        o.send(&a).unwrap();
        drop(a);
        reader.join().unwrap()
    }

    #[test]
    fn headers_and_store_pieces_arrive_in_order() {
        let store = BlockStore::ram(1 << 20, false).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        store.write(1000, &data, false).unwrap();
        let mut want = Vec::new();
        let mut o = Out::new(64);
        // Many small pieces (more than one sendmsg's list) between headers, then a mark
        // taken back, then a copied read.
        for i in 0..700u64 {
            o.buf().extend_from_slice(&[i as u8; 3]);
            want.extend_from_slice(&[i as u8; 3]);
            o.store(&store, 1000 + i * 300, 300).unwrap();
            want.extend_from_slice(&data[i as usize * 300..i as usize * 300 + 300]);
        }
        let m = o.mark();
        o.buf().extend_from_slice(b"dropped");
        o.store(&store, 0, 4096).unwrap();
        o.truncate(m);
        o.zero_copy = false;
        o.store(&store, 1000, 70_000).unwrap();
        want.extend_from_slice(&data[..70_000]);
        assert_eq!(o.len(), want.len());
        assert_eq!(sent(&mut o), want);
        assert!(o.is_empty());
    }

    #[test]
    fn taken_bytes_are_what_would_have_been_sent() {
        let store = BlockStore::ram(1 << 20, false).unwrap();
        let old: Vec<u8> = (0..200_000u32).map(|i| (i % 239) as u8).collect();
        store.write(0, &old, false).unwrap();
        let mut o = Out::new(16);
        o.buf().extend_from_slice(b"kept");
        o.store(&store, 0, 100).unwrap();
        let m = o.mark();
        let mut want = Vec::new();
        for (off, len) in [(7u64, 4096usize), (70_000, 100_000)] {
            o.buf().extend_from_slice(b"head");
            want.extend_from_slice(b"head");
            o.store(&store, off, len).unwrap();
            want.extend_from_slice(&old[off as usize..off as usize + len]);
        }
        o.buf().extend_from_slice(b"tail");
        want.extend_from_slice(b"tail");
        let mut held = b"before".to_vec();
        o.take_since(m, &mut held);
        store.write(0, &vec![0xee; 200_000], false).unwrap();
        assert!(held[6..] == want[..] && held.starts_with(b"before"));
        // What stays is what was queued before the mark (its reference reads the store now).
        let mut kept = b"kept".to_vec();
        kept.extend_from_slice(&[0xee; 100]);
        assert_eq!((o.len(), sent(&mut o)), (104, kept));
    }

    #[test]
    fn copied_references_keep_the_bytes_they_had() {
        let store = BlockStore::ram(1 << 20, false).unwrap();
        let old: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();
        store.write(0, &old, false).unwrap();
        let mut o = Out::new(16);
        let mut want = Vec::new();
        for (off, len) in [(0u64, 4096usize), (70_000, 100_000), (5, 3)] {
            o.buf().extend_from_slice(b"head");
            want.extend_from_slice(b"head");
            o.store(&store, off, len).unwrap();
            want.extend_from_slice(&old[off as usize..off as usize + len]);
        }
        o.buf().extend_from_slice(b"tail");
        want.extend_from_slice(b"tail");
        assert!(o.referenced() > 0);
        o.copy_referenced();
        assert_eq!((o.referenced(), o.len()), (0, want.len()));
        store.write(0, &vec![0xee; 200_000], false).unwrap();
        assert!(sent(&mut o) == want);
    }
}
