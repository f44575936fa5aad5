//! Multishot receive into a provided buffer ring (IORING_REGISTER_PBUF_RING, Linux 5.19;
//! multishot RECV, 6.0): one RECV stays armed and the kernel picks a buffer from the ring
//! for each batch of bytes that arrives, so a connection posts no receive per round trip.
//!
//! The ring is an array of `{addr, len, bid}` entries that user space fills and publishes by
//! moving the tail; the kernel consumes from the head. A completion names the buffer it used
//! (IORING_CQE_F_BUFFER, the buffer id in the high 16 bits of its flags); the buffer is the
//! user's until [`BufRing::recycle`] puts it back. When every buffer is taken the armed
//! receive ends with ENOBUFS (no F_MORE): the owner recycles and arms it again.

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::{cqueue, opcode, types, IoUring};

use super::{Cqe, SockRing};

/// A provided-buffer ring: `entries` buffers of `size` bytes each under group id `bgid`.
pub struct BufRing {
    /// The ring's entries: page-aligned anonymous memory the kernel reads (mmap).
    ring: *mut types::BufRingEntry,
    ring_bytes: usize,
    bufs: Vec<u8>,
    size: usize,
    entries: u16,
    /// The tail as published to the kernel, plus entries added since (published together).
    tail: u16,
    bgid: u16,
}

// SAFETY: the mapping and the buffers belong to the BufRing alone; it moves between threads
// with the ring it is registered with.
unsafe impl Send for BufRing {}

impl BufRing {
    /// `entries` (a power of two, at most 32768) buffers of `size` bytes, all given to the
    /// kernel. Register it with [`SockRing::register_buf_ring`].
    pub fn new(entries: u16, size: usize, bgid: u16) -> io::Result<BufRing> {
        if !entries.is_power_of_two() || entries > 32768 || size == 0 || size > u32::MAX as usize {
            return Err(io::Error::other(
                "buffer ring: entries must be a power of two",
            ));
        }
        let ring_bytes = entries as usize * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: an anonymous private mapping; checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut br = BufRing {
            ring: p.cast(),
            ring_bytes,
            bufs: vec![0u8; entries as usize * size],
            size,
            entries,
            tail: 0,
            bgid,
        };
        for bid in 0..entries {
            br.add(bid);
        }
        br.publish();
        Ok(br)
    }

    pub fn bgid(&self) -> u16 {
        self.bgid
    }

    pub fn buf_size(&self) -> usize {
        self.size
    }

    pub fn entries(&self) -> u16 {
        self.entries
    }

    /// The first `len` bytes of buffer `bid`, as a completion that named it filled them.
    pub fn buf(&self, bid: u16, len: usize) -> &[u8] {
        let at = (bid as usize % self.entries as usize) * self.size;
        &self.bufs[at..at + len.min(self.size)]
    }

    /// Gives buffer `bid` back to the kernel (the caller is done reading it).
    pub fn recycle(&mut self, bid: u16) {
        self.add(bid % self.entries);
        self.publish();
    }

    fn add(&mut self, bid: u16) {
        let slot = (self.tail & (self.entries - 1)) as usize;
        let addr = self.bufs[bid as usize * self.size..].as_mut_ptr() as u64;
        // SAFETY: `slot` < entries, inside the mapping; the kernel reads only entries between
        // its head and the published tail, and this one is past the tail until `publish`.
        let e = unsafe { &mut *self.ring.add(slot) };
        e.set_addr(addr);
        e.set_len(self.size as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the entries added visible to the kernel (a release store of the tail, which
    /// overlays the first entry's reserved field).
    fn publish(&mut self) {
        // SAFETY: the tail field lies in the mapping's first entry, 2-byte aligned; the
        // kernel only reads it, so an atomic store is the one write it may see.
        unsafe {
            let tail = types::BufRingEntry::tail(self.ring).cast_mut();
            (*tail.cast::<AtomicU16>()).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; the owner unregistered it or dropped its ring
        // first (or leaked this BufRing when a drain could not finish).
        unsafe { libc::munmap(self.ring.cast(), self.ring_bytes) };
    }
}

impl Cqe {
    /// The provided buffer a receive filled (IORING_CQE_F_BUFFER).
    pub fn buffer(&self) -> Option<u16> {
        cqueue::buffer_select(self.flags)
    }
}

impl SockRing {
    /// Why this kernel cannot receive multishot into a buffer ring, or `Ok`. Multishot RECV
    /// has no opcode of its own: a kernel with SEND_ZC (6.0, as multishot RECV) that takes a
    /// buffer-ring registration has both.
    pub fn probe_multishot() -> Result<(), String> {
        let mut ring = SockRing::probe_ring()?;
        super::zc::probe_ops(&ring.ring, &[(opcode::SendZc::CODE, "SEND_ZC")])
            .map_err(|e| format!("{e} (Linux 6.0, as multishot RECV)"))?;
        let br = BufRing::new(2, 64, 0).map_err(|e| format!("buffer ring: {e}"))?;
        ring.register_buf_ring(&br)
            .map_err(|e| format!("IORING_REGISTER_PBUF_RING: {e}"))?;
        drop(ring);
        Ok(())
    }

    fn probe_ring() -> Result<SockRing, String> {
        let ring = IoUring::new(2).map_err(|e| format!("io_uring_setup: {e}"))?;
        Ok(SockRing {
            ring,
            in_flight: 0,
            queued: 0,
            mode: "plain",
            deferred: false,
            disabled: false,
            enters: 0,
        })
    }

    /// Registers `br`'s ring under its group id.
    ///
    /// The BufRing must outlive the registration: drop this ring (or drain it and
    /// [`unregister_buf_ring`](Self::unregister_buf_ring)) before the BufRing.
    pub fn register_buf_ring(&mut self, br: &BufRing) -> io::Result<()> {
        // SAFETY: the mapping holds `entries` entries and stays mapped as long as the BufRing,
        // which the caller keeps past the registration (see above).
        unsafe {
            self.ring.submitter().register_buf_ring_with_flags(
                br.ring as u64,
                br.entries,
                br.bgid,
                0,
            )
        }
    }

    pub fn unregister_buf_ring(&mut self, bgid: u16) -> io::Result<()> {
        self.ring.submitter().unregister_buf_ring(bgid)
    }

    /// Arms a multishot RECV on fixed file `file` into buffer group `bgid`: completions
    /// carrying `user_data` come, each naming its buffer, until one without F_MORE (an
    /// error, end of stream, ENOBUFS when the ring ran dry, or a cancel).
    ///
    /// # Safety
    /// The buffer ring registered as `bgid` must stay valid until that last completion is
    /// taken or [`drain`](Self::drain) returned true.
    pub unsafe fn recv_multi(&mut self, file: u32, bgid: u16, user_data: u64) -> io::Result<()> {
        let e = opcode::RecvMulti::new(types::Fixed(file), bgid)
            .build()
            .user_data(user_data);
        // SAFETY: forwarded from the caller: the buffers are the registered ring's.
        unsafe { self.push(&e) }
    }
}
