//! One connection's socket on a [`SockRing`] of its own or on a [`SharedRing`] with other
//! connections (a multipath stream's paths): at most one SENDMSG and one RECV in the kernel
//! at a time, the bookkeeping every initiator needs around them (what is in flight, a small
//! send waited for together with the reply, completions typed as [`Done`]), and the drain
//! before the buffers go. What is sent and where a receive lands stays the protocol's
//! business: NBD sends headers and arena regions and may receive straight into a READ's
//! region; iSCSI and NVMe/TCP send one encoded buffer and receive into their PDU buffer.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::time::Duration;

use super::shared::{Attachment, SharedRing};
use super::{Cqe, SockRing};

mod feat;
pub use feat::{RingFeatures, FEATURES_ENV, ZC_MIN};

const SEND: u64 = 1;
const RECV: u64 = 2;
/// Most iovecs per SENDMSG (the kernel's UIO_MAXIOV).
pub const IOV_MAX: usize = 1024;
/// A send this small has always completed while the enter submitting it ran (a loopback or
/// LAN socket's buffer takes it): a wait for the reply waits for its completion too, so it
/// is taken in the same enter. A larger one may wait for the peer to read.
const INLINE_SEND: usize = 64 * 1024;

/// A completion of the connection's send or receive: bytes moved, or a negative errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    Sent(i32),
    Received(i32),
}

/// The ring a connection's operations go to.
// Unboxed: the one-path ring is the hot case and each connection holds one `Backing`.
#[allow(clippy::large_enum_variant)]
enum Backing {
    Own(SockRing),
    /// On a shared ring, its entries are submitted by whichever connection on it waits next
    /// (or by the ring's owner's [`SharedRing::wait`]).
    Shared(Attachment),
}

impl Backing {
    /// Pushes `e` (built on this backing's [`file`](Self::file)) with `user_data` of `kind`.
    ///
    /// # Safety
    /// What `e` points at lives, untouched, until its completion is taken or a drain returned.
    unsafe fn push(&mut self, e: io_uring::squeue::Entry, kind: u64) -> io::Result<()> {
        match self {
            // SAFETY: forwarded from the caller.
            Backing::Own(r) => unsafe { r.push(&e.user_data(kind)) },
            Backing::Shared(a) => {
                let e = e.user_data(a.user_data(kind));
                // SAFETY: forwarded from the caller.
                unsafe { a.push(&e) }
            }
        }
    }

    /// The registered file of the connection's socket.
    fn file(&self) -> u32 {
        match self {
            Backing::Own(_) => 0,
            Backing::Shared(a) => a.file(),
        }
    }
}

/// A socket's send and receive on a ring of its own or a shared one.
pub struct RingConn {
    ring: Backing,
    iov: Vec<libc::iovec>,
    msg: Box<libc::msghdr>,
    /// Bytes of the send in the kernel.
    sending: Option<usize>,
    /// A send pushed since the last wait, small enough to complete inside it.
    send_inline: bool,
    receiving: bool,
    /// The bytes of a [`send_buf`](Self::send_buf) send, how much of them the kernel took,
    /// and its flags: the ring owns them until the send completes.
    owned: Vec<u8>,
    owned_at: usize,
    owned_flags: Option<i32>,
    cqes: Vec<Cqe>,
    /// Zero-copy sends and the multishot receive (feat.rs); after `ring`, so the ring goes
    /// first on drop and the buffer ring it may write into after it.
    feat: feat::Feat,
}

// SAFETY: the raw pointers in `iov` and `msg` point into buffers the connection's owner holds
// (and into `iov` itself); the owner moves between threads only as a whole, with them.
unsafe impl Send for RingConn {}

impl RingConn {
    /// A ring with `fd` as its only registered file (the owner keeps `fd` open as long),
    /// with the features [`FEATURES_ENV`] asks that this kernel has.
    pub fn open(fd: RawFd) -> Result<RingConn, String> {
        RingConn::open_with(fd, RingFeatures::from_env_chosen())
    }

    /// `fd` on `shared` when given and it takes it, else (no slot, a kernel without what the
    /// layer needs, or opt-in features asked: they run on a ring of the connection's own) on
    /// a ring of its own: see [`shared`](Self::shared).
    pub fn open_on(fd: RawFd, shared: Option<&SharedRing>) -> Result<RingConn, String> {
        let shared = shared.filter(|_| !RingFeatures::from_env().any());
        match shared.map(|s| s.attach(fd)) {
            Some(Ok(a)) => Ok(RingConn::with(Backing::Shared(a))),
            _ => RingConn::open(fd),
        }
    }

    fn open_plain(fd: RawFd) -> Result<RingConn, String> {
        Ok(RingConn::with(Backing::Own(SockRing::open(&[fd], 8)?)))
    }

    fn with(ring: Backing) -> RingConn {
        RingConn {
            ring,
            iov: Vec::with_capacity(16),
            // SAFETY: an all-zero msghdr is a valid empty one.
            msg: Box::new(unsafe { std::mem::zeroed() }),
            sending: None,
            send_inline: false,
            receiving: false,
            owned: Vec::new(),
            owned_at: 0,
            owned_flags: None,
            cqes: Vec::with_capacity(4),
            feat: Default::default(),
        }
    }

    /// How the ring was set up ([`SockRing::mode`]).
    pub fn mode(&self) -> &'static str {
        match &self.ring {
            Backing::Own(r) => r.mode(),
            Backing::Shared(a) => a.mode(),
        }
    }

    /// Whether the connection is on a [`SharedRing`] (else on a ring of its own).
    pub fn shared(&self) -> bool {
        matches!(self.ring, Backing::Shared(_))
    }

    /// `io_uring_enter` calls made (on a shared ring: by this connection's waits).
    pub fn enters(&self) -> u64 {
        match &self.ring {
            Backing::Own(r) => r.enters(),
            Backing::Shared(a) => a.enters(),
        }
    }

    /// The ring's fd: readable when completions wait to be taken (on a shared ring, anyone's).
    pub fn fd(&self) -> BorrowedFd<'_> {
        match &self.ring {
            Backing::Own(r) => r.fd(),
            // SAFETY: the attachment holds the shared ring, whose fd stays open as long.
            Backing::Shared(a) => unsafe { BorrowedFd::borrow_raw(a.fd()) },
        }
    }

    /// Whether a caller polling the ring fd would miss something: on a ring of its own,
    /// entries not yet submitted; on a shared ring, completions already moved to this
    /// connection's mailbox (its queued entries go in with the next wait on the ring, which
    /// its waiter makes).
    pub fn needs_enter(&self) -> bool {
        self.has_ready()
            || match &self.ring {
                Backing::Own(r) => r.has_queued(),
                Backing::Shared(a) => a.has_mail(),
            }
    }

    /// Whether a send is in the kernel.
    pub fn sending(&self) -> bool {
        self.sending.is_some()
    }

    /// Whether a receive is in the kernel.
    pub fn receiving(&self) -> bool {
        self.receiving
    }

    /// Iovecs of the send in the kernel.
    pub fn iov_count(&self) -> usize {
        self.iov.len()
    }

    /// Pushes one SENDMSG of `bufs` (at most [`IOV_MAX`]), submitted by the next enter;
    /// returns its length. Refused while another send is in the kernel.
    ///
    /// # Safety
    /// Every buffer named must stay valid and unmodified until the `Done::Sent` is taken (or
    /// [`drain`](Self::drain) returned true).
    pub unsafe fn send(
        &mut self,
        bufs: impl IntoIterator<Item = (*const u8, usize)>,
        flags: i32,
    ) -> io::Result<usize> {
        if self.sending.is_some() {
            return Err(io::Error::other("a send is already in the kernel"));
        }
        self.iov.clear();
        let mut total = 0;
        for (ptr, len) in bufs.into_iter().take(IOV_MAX) {
            self.iov.push(libc::iovec {
                iov_base: ptr as *mut libc::c_void,
                iov_len: len,
            });
            total += len;
        }
        self.msg.msg_iov = self.iov.as_mut_ptr();
        self.msg.msg_iovlen = self.iov.len() as _;
        // SAFETY: `msg` and `iov` live in self, untouched until the send completes (a new
        // send is refused until then); the caller keeps the buffers.
        unsafe { self.push_msg(flags, total) }?;
        self.sending = Some(total);
        self.send_inline = total <= INLINE_SEND;
        Ok(total)
    }

    /// Pushes one SEND of all of `out`, which the ring keeps until the kernel has taken every
    /// byte (a short send goes on from where it stopped, inside [`take`](Self::take)); `out`
    /// gets the buffer of the last such send back, empty, so its capacity is reused. Returns
    /// false, `out` untouched, while a send is in the kernel.
    pub fn send_buf(&mut self, out: &mut Vec<u8>, flags: i32) -> io::Result<bool> {
        if self.sending.is_some() {
            return Ok(false);
        }
        std::mem::swap(out, &mut self.owned);
        out.clear();
        self.owned_at = 0;
        self.owned_flags = Some(flags);
        self.push_owned(flags)?;
        Ok(true)
    }

    fn push_owned(&mut self, flags: i32) -> io::Result<()> {
        let rest = &self.owned[self.owned_at..];
        let buf = (rest.as_ptr(), rest.len());
        // SAFETY: `owned` is the ring's own and untouched until this send completes (a new
        // one is refused until then); if a drain cannot cancel it, `drain` keeps it.
        unsafe { self.send([buf], flags) }.map(|_| ())
    }

    /// Pushes a RECV of up to `len` bytes into `buf`; refused while one is in the kernel.
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid, and neither read nor written by anyone else, until the
    /// `Done::Received` is taken (or [`drain`](Self::drain) returned true).
    pub unsafe fn recv(&mut self, buf: *mut u8, len: usize) -> io::Result<()> {
        if self.receiving {
            return Err(io::Error::other("a receive is already in the kernel"));
        }
        // SAFETY: forwarded from the caller.
        if unsafe { self.recv_multi(buf, len) }? {
            return Ok(());
        }
        let len = len.min(u32::MAX as usize) as u32;
        let e = super::recv_sqe(self.ring.file(), buf, len);
        // SAFETY: forwarded from the caller.
        unsafe { self.ring.push(e, RECV) }?;
        self.receiving = true;
        Ok(())
    }

    /// Submits what is queued and waits up to `timeout` for `want` of this connection's
    /// completions (zero: only submits; on a shared ring it leaves that to the ring's next
    /// wait, so every connection's entries go in with one enter). Returns whether they are
    /// there.
    pub fn enter(&mut self, want: u32, timeout: Duration) -> io::Result<bool> {
        if want == 0 {
            self.send_inline = false;
            return match &mut self.ring {
                Backing::Own(r) => r.enter(0, Some(Duration::ZERO)),
                Backing::Shared(_) => Ok(true),
            };
        }
        self.wait(want, timeout)
    }

    fn wait(&mut self, want: u32, timeout: Duration) -> io::Result<bool> {
        match &mut self.ring {
            Backing::Own(r) => r.enter(want, Some(timeout)),
            Backing::Shared(a) => a.wait(want, timeout),
        }
    }

    /// Submits what is queued and waits up to `timeout` for the receive to complete, and
    /// for a small send pushed since the last wait too (it completes inside the same enter:
    /// one system call for the round trip).
    pub fn wait_recv(&mut self, timeout: Duration) -> io::Result<bool> {
        if self.has_ready() {
            // Served from bytes already in: queued entries wait for the next enter, which
            // waits too (a submit-only enter here would cost a system call per round trip).
            return Ok(true);
        }
        let want = u32::from(self.receiving) + u32::from(std::mem::take(&mut self.send_inline));
        self.wait(want.max(1), timeout)
    }

    /// Moves the completions in the ring into `out`, the send's and receive's state with them.
    pub fn take(&mut self, out: &mut Vec<Done>) {
        self.feat_take(out);
        let mut cqes = std::mem::take(&mut self.cqes);
        match &mut self.ring {
            Backing::Own(r) => r.take(&mut cqes),
            Backing::Shared(a) => a.take(&mut cqes),
        }
        for c in cqes.drain(..) {
            match c.user_data {
                SEND => {
                    if let Some(res) = self.send_done(&c) {
                        self.sending = None;
                        out.push(self.sent(res));
                    }
                }
                feat::RECV_MULTI => self.multi_done(&c),
                RECV => {
                    self.receiving = false;
                    out.push(Done::Received(c.result));
                }
                _ => {}
            }
        }
        self.cqes = cqes;
        self.feat_after_take(out);
    }

    /// A send completed with `res`: an owned send that the kernel took only part of (a
    /// signal) goes on with the rest.
    fn sent(&mut self, res: i32) -> Done {
        let Some(flags) = self.owned_flags else {
            return Done::Sent(res);
        };
        if res > 0 && self.owned_at + (res as usize) < self.owned.len() {
            self.owned_at += res as usize;
            if let Err(e) = self.push_owned(flags) {
                self.owned_flags = None;
                return Done::Sent(-e.raw_os_error().unwrap_or(libc::EIO));
            }
            return Done::Sent(res);
        }
        self.owned_flags = None;
        Done::Sent(res)
    }

    /// Cancels the send and the receive in the kernel and waits them out (the buffers go
    /// next). False when the kernel may still touch them: the owner keeps its buffers for
    /// the rest of the process (and the ring keeps its own, a [`send_buf`](Self::send_buf)'s).
    #[must_use]
    pub fn drain(&mut self) -> bool {
        let limit = Duration::from_secs(5);
        let drained = match &mut self.ring {
            Backing::Own(r) => r.drain(&[SEND, RECV, feat::RECV_MULTI], limit),
            // Only this connection's operations: the others' completions stay theirs.
            Backing::Shared(a) => a.drain(limit),
        };
        self.feat_drained(!drained);
        self.sending = None;
        self.receiving = false;
        self.owned_flags = None;
        if !drained {
            std::mem::forget(std::mem::take(&mut self.owned));
        }
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_small_send_and_the_reply_complete_in_one_wait() {
        if SockRing::probe().is_err() {
            eprintln!("skipped: no io_uring here");
            return;
        }
        let (a, b) = UnixStream::pair().unwrap();
        let mut c = RingConn::open(a.as_raw_fd()).unwrap();
        let echo = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let mut b = b;
            let mut buf = [0u8; 6];
            b.read_exact(&mut buf).unwrap();
            b.write_all(&buf).unwrap();
        });
        let (h, t) = (*b"hel", *b"lo!");
        let mut rbuf = [0u8; 16];
        // SAFETY: h, t and rbuf outlive the waits below, which take both completions.
        unsafe {
            c.send([(h.as_ptr(), 3), (t.as_ptr(), 3)], 0).unwrap();
            assert!(c.send([(h.as_ptr(), 3)], 0).is_err(), "one send at a time");
            c.recv(rbuf.as_mut_ptr(), rbuf.len()).unwrap();
        }
        assert!(c.sending() && c.receiving() && c.needs_enter());
        let mut got = Vec::new();
        let mut received = 0;
        while received < 6 {
            assert!(c.wait_recv(Duration::from_secs(5)).unwrap() || !c.receiving());
            c.take(&mut got);
            for d in got.drain(..) {
                match d {
                    Done::Sent(n) => assert_eq!(n, 6),
                    Done::Received(n) => {
                        assert!(n > 0);
                        received += n as usize;
                    }
                }
            }
            if received < 6 {
                // SAFETY: as above; the rest lands after what came.
                unsafe {
                    c.recv(rbuf[received..].as_mut_ptr(), 16 - received)
                        .unwrap()
                };
            }
        }
        assert!(!c.sending() && !c.receiving());
        assert_eq!(&rbuf[..6], b"hello!");
        echo.join().unwrap();
    }

    #[test]
    fn drain_cancels_a_pending_receive() {
        if SockRing::probe().is_err() {
            return;
        }
        let (a, _b) = UnixStream::pair().unwrap();
        let mut c = RingConn::open(a.as_raw_fd()).unwrap();
        let mut rbuf = [0u8; 16];
        // SAFETY: drain below completes the receive before rbuf goes away.
        unsafe { c.recv(rbuf.as_mut_ptr(), 16).unwrap() };
        assert!(!c.wait_recv(Duration::from_millis(20)).unwrap());
        assert!(c.receiving());
        assert!(c.drain());
        assert!(!c.receiving());
    }
}
