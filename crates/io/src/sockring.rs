//! Sockets on io_uring: the initiators' sends and receives submitted and reaped together.
//!
//! A protocol queue over the poll loop pays a `sendmsg` and a blocking `recv` (and, when it
//! waits on several things, a `poll`) per round trip. Over a [`SockRing`] it only fills
//! submission entries (a SENDMSG of the batch, a RECV into its receive buffer) and makes one
//! `io_uring_enter` that submits them and sleeps until the reply is in: one system call per
//! round trip. The ring fd is pollable, so a caller that waits on several queues (multipath)
//! can still wait on it as on a socket.
//!
//! The layer knows nothing of any protocol: the wire modules stay sans-I/O, and the queue
//! that owns a ring decides what to send and where a receive lands. The ring only
//! guarantees the bookkeeping every user needs: which operations are in the kernel, a wait
//! bounded by a timeout (IORING_FEAT_EXT_ARG), and [`SockRing::drain`], which cancels what is
//! still in flight and waits it out, so no buffer is written after its owner is gone.
//!
//! A multipath stream's paths share one ring ([`SharedRing`], `shared.rs`): every path's
//! sends and receives go in, and their completions come back, with one `io_uring_enter`.
//!
//! [`SockRing::probe`] says at open whether this kernel has what is used (the ring, the
//! extended-argument wait, SENDMSG, RECV, ASYNC_CANCEL); a queue falls back to its poll loop
//! when it does not, and says so in its engine info.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

pub mod bufring;
pub mod conn;
pub mod shared;
pub mod zc;
pub use bufring::BufRing;
pub use conn::{Done, RingConn, RingFeatures};
pub use shared::{ring_kind, Attachment, SharedRing};

/// Which socket layer a network initiator uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SocketLayer {
    /// Blocking `recv` with `SO_RCVTIMEO`, `sendmsg`, `poll` to wait on several things.
    #[default]
    Poll,
    /// A [`SockRing`] per queue: one `io_uring_enter` per round trip.
    Uring,
}

/// The environment variable that sets the default socket layer (`uring` or `poll`), so that
/// whole test suites can be run over either layer without changing a URI.
pub const SOCKET_ENV: &str = "SANBENCH_SOCKET";

impl SocketLayer {
    /// `poll` or `uring` (the names in URIs, the environment and the result).
    pub fn parse(s: &str) -> Option<SocketLayer> {
        match s {
            "poll" => Some(SocketLayer::Poll),
            "uring" | "io_uring" => Some(SocketLayer::Uring),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SocketLayer::Poll => "poll",
            SocketLayer::Uring => "uring",
        }
    }

    /// The layer a target's queues use: io_uring when asked and this kernel has what it
    /// needs ([`SockRing::probe`]), else the poll loop and why.
    pub fn choose(self) -> (SocketLayer, Option<String>) {
        self.choose_with(SockRing::probe)
    }

    /// [`choose`](Self::choose) with the kernel's answer given (tests).
    pub fn choose_with(
        self,
        probe: impl FnOnce() -> Result<(), String>,
    ) -> (SocketLayer, Option<String>) {
        match self {
            SocketLayer::Poll => (SocketLayer::Poll, None),
            SocketLayer::Uring => match probe() {
                Ok(()) => (SocketLayer::Uring, None),
                Err(e) => (SocketLayer::Poll, Some(e)),
            },
        }
    }

    /// The default: [`SOCKET_ENV`] when set to a known name, else poll.
    pub fn from_env() -> SocketLayer {
        std::env::var(SOCKET_ENV)
            .ok()
            .and_then(|v| SocketLayer::parse(v.trim()))
            .unwrap_or_default()
    }
}

/// The environment variable that chooses how a ring is set up (`defer`, `coop` or `plain`;
/// default `coop`; each falls back to the next), so that each setup's cost can be measured on
/// one binary (scripts/bench_sockio_cost.py). DEFER_TASKRUN is not the default: on loopback
/// its CPU per I/O did not separate from COOP_TASKRUN's beyond the noise (docs/BENCHMARKS.md).
pub const SETUP_ENV: &str = "SANBENCH_SOCKRING_SETUP";

/// Sets a ring up as `asked`, or the cheapest way this kernel takes:
/// * `defer`: SINGLE_ISSUER | DEFER_TASKRUN | TASKRUN_FLAG (Linux 6.1+). A receive's completion
///   work runs only inside this thread's waiting `io_uring_enter`, batched, and a completion
///   wakes the waiter only once as many are in as it asked for, instead of interrupting the
///   thread (or waking it early) once per completion.
/// * `coop`: COOP_TASKRUN (5.19+): the work waits for the thread's next entry to the kernel.
/// * `plain`: task work signalled to the thread as it comes.
fn setup(asked: &str, entries: u32) -> Result<(IoUring, &'static str), String> {
    let defer = || {
        // Disabled until the first enter: SINGLE_ISSUER then ties the ring to the thread that
        // drives the queue, not to the one that opened it (multipath reopens a path on its
        // housekeeping thread).
        IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .setup_r_disabled()
            .build(entries)
    };
    let coop = || IoUring::builder().setup_coop_taskrun().build(entries);
    let built = match asked {
        "plain" => None,
        "defer" => defer()
            .ok()
            .map(|r| (r, "defer_taskrun"))
            .or_else(|| coop().ok().map(|r| (r, "coop_taskrun"))),
        _ => coop().ok().map(|r| (r, "coop_taskrun")),
    };
    match built {
        Some(r) => Ok(r),
        None => IoUring::new(entries)
            .map(|r| (r, "plain"))
            .map_err(|e| format!("io_uring_setup: {e}")),
    }
}

/// One completion: the `user_data` the operation was pushed with and its result (bytes, or a
/// negative errno), and its IORING_CQE_F_* flags (zc.rs and bufring.rs read them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe {
    pub user_data: u64,
    pub result: i32,
    pub flags: u32,
}

/// A ring over a few registered sockets.
pub struct SockRing {
    ring: IoUring,
    /// Operations pushed and not yet completed (in the submission queue or in the kernel).
    in_flight: u32,
    /// Entries pushed since the last `io_uring_enter`.
    queued: u32,
    mode: &'static str,
    /// Set up with DEFER_TASKRUN: completion work waits for an enter with GETEVENTS.
    deferred: bool,
    /// Still disabled (R_DISABLED): the first enter enables it, from the thread that will own it.
    disabled: bool,
    enters: u64,
}

impl SockRing {
    /// Why this kernel cannot run the layer, or `Ok` when it can.
    pub fn probe() -> Result<(), String> {
        let ring = IoUring::new(2).map_err(|e| format!("io_uring_setup: {e}"))?;
        check(&ring)
    }

    /// A ring with `fds` registered as fixed files 0, 1, ... (the queue keeps them open for
    /// the ring's life).
    ///
    /// With DEFER_TASKRUN (asked with [`SETUP_ENV`]`=defer`) the ring is opened disabled and
    /// only the thread that first enters it may enter it afterwards (a queue is driven and
    /// dropped on its stream's thread, though multipath may open it on another). A ring
    /// entered from another thread fails with EEXIST, and [`drain`](Self::drain) then says
    /// that the buffers must be kept.
    pub fn open(fds: &[RawFd], entries: u32) -> Result<SockRing, String> {
        // COOP_TASKRUN: a receive's completion work runs when this thread next enters the
        // kernel instead of interrupting it; older kernels refuse the flag.
        let asked = std::env::var(SETUP_ENV).unwrap_or_default();
        SockRing::open_as(fds, entries, asked.trim())
    }

    /// [`open`](Self::open) with the setup named (`defer`, `coop`, `plain`) instead of
    /// [`SETUP_ENV`]'s.
    pub fn open_as(fds: &[RawFd], entries: u32, asked: &str) -> Result<SockRing, String> {
        let (ring, mode) = setup(asked, entries)?;
        check(&ring)?;
        ring.submitter()
            .register_files(fds)
            .map_err(|e| format!("io_uring register_files: {e}"))?;
        Ok(SockRing {
            ring,
            in_flight: 0,
            queued: 0,
            mode,
            deferred: mode == "defer_taskrun",
            disabled: mode == "defer_taskrun",
            enters: 0,
        })
    }

    /// How the ring was set up (`defer_taskrun`, `coop_taskrun` or `plain`).
    pub fn mode(&self) -> &'static str {
        self.mode
    }

    /// The ring's fd: readable when completions wait to be taken.
    pub fn fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the fd belongs to `self.ring` and stays open as long as the borrow of self.
        unsafe { BorrowedFd::borrow_raw(self.ring.as_raw_fd()) }
    }

    /// Operations pushed and not completed.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Whether entries wait for the next `enter` to reach the kernel.
    pub fn has_queued(&self) -> bool {
        self.queued > 0
    }

    /// `io_uring_enter` calls made.
    pub fn enters(&self) -> u64 {
        self.enters
    }

    /// Pushes a SENDMSG on fixed file `file`.
    ///
    /// # Safety
    /// `msg`, its iovec array and every buffer it names must stay valid and unmodified until
    /// the completion carrying `user_data` has been taken (or [`drain`](Self::drain) returned).
    pub unsafe fn send_msg(
        &mut self,
        file: u32,
        msg: *const libc::msghdr,
        flags: i32,
        user_data: u64,
    ) -> io::Result<()> {
        let e = send_msg_sqe(file, msg, flags, false).user_data(user_data);
        // SAFETY: the caller keeps `msg` and its buffers alive and untouched until completion.
        unsafe { self.push(&e) }
    }

    /// Pushes a RECV of up to `len` bytes into `buf` on fixed file `file`.
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid, and neither read nor written by anyone else, until the
    /// completion carrying `user_data` has been taken (or [`drain`](Self::drain) returned).
    pub unsafe fn recv(
        &mut self,
        file: u32,
        buf: *mut u8,
        len: u32,
        user_data: u64,
    ) -> io::Result<()> {
        let e = recv_sqe(file, buf, len).user_data(user_data);
        // SAFETY: the caller owns the region exclusively until completion.
        unsafe { self.push(&e) }
    }

    /// # Safety
    /// Whatever `e` points at lives until its completion is taken.
    unsafe fn push(&mut self, e: &io_uring::squeue::Entry) -> io::Result<()> {
        if self.ring.submission().is_full() {
            self.enter(0, None)?;
        }
        // SAFETY: forwarded from the callers; the queue has room (made just above).
        unsafe { self.ring.submission().push(e) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        self.in_flight += 1;
        self.queued += 1;
        Ok(())
    }

    /// Submits what is queued and waits until at least `want` completions are in the
    /// completion queue, or `timeout` passes (`None`: as long as it takes; zero: no wait).
    /// Without anything queued and `want` 0 it makes no system call. Returns whether `want`
    /// completions are there (false: the timeout passed, or a signal came first).
    pub fn enter(&mut self, want: u32, timeout: Option<Duration>) -> io::Result<bool> {
        if want == 0 && self.queued == 0 && !self.work_waiting() {
            return Ok(true);
        }
        self.enable()?;
        let want = want.min(self.in_flight) as usize;
        self.enters += 1;
        let r = match timeout {
            Some(t) if want > 0 => {
                let ts = types::Timespec::new()
                    .sec(t.as_secs())
                    .nsec(t.subsec_nanos());
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
            _ => self.ring.submitter().submit_and_wait(want),
        };
        match r {
            Ok(n) => self.queued = self.queued.saturating_sub(n as u32),
            Err(e) => match e.raw_os_error() {
                // The entries went in; the wait ended at the deadline.
                Some(libc::ETIME) => self.queued = 0,
                // A signal, or a full completion queue (taking completions makes room).
                Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN) => {}
                _ => return Err(e),
            },
        }
        // A wait that submitted entries returns their count even when it timed out, so the
        // completion queue is what tells.
        Ok(self.ring.completion().len() >= want)
    }

    /// Enables a ring opened disabled; this thread becomes its only submitter.
    fn enable(&mut self) -> io::Result<()> {
        if self.disabled {
            self.ring.submitter().register_enable_rings()?;
            self.disabled = false;
        }
        Ok(())
    }

    /// Whether completion work waits for an `io_uring_enter` to run it (DEFER_TASKRUN: a
    /// reply came in while this thread did something else; the ring fd then polls readable).
    fn work_waiting(&mut self) -> bool {
        self.deferred && self.ring.submission().taskrun()
    }

    /// Moves every completion waiting in the ring into `out`. On a DEFER_TASKRUN ring whose
    /// completion work is pending it first enters once, without waiting, to run it.
    pub fn take(&mut self, out: &mut Vec<Cqe>) {
        if self.work_waiting() {
            self.enters += 1;
            // An error leaves the work for the next wait, which reports it.
            if let Ok(n) = self.ring.submitter().submit_and_wait(0) {
                self.queued = self.queued.saturating_sub(n as u32);
            }
        }
        for c in self.ring.completion() {
            // F_MORE: the operation completes again (a zero-copy send's notification, a
            // multishot receive), so it is still in flight.
            if !io_uring::cqueue::more(c.flags()) {
                self.in_flight = self.in_flight.saturating_sub(1);
            }
            out.push(Cqe {
                user_data: c.user_data(),
                result: c.result(),
                flags: c.flags(),
            });
        }
    }

    /// Cancels every operation still in flight and waits (up to `limit`) until the kernel has
    /// completed them all, discarding their results: after it returns the ring no longer
    /// touches any buffer. Call it before the buffers or the registered sockets go away.
    /// Returns false when operations may still be in the kernel (the limit passed, or the
    /// ring was entered from a thread other than its own): the caller must then keep their
    /// buffers for the rest of the process.
    #[must_use]
    pub fn drain(&mut self, user_datas: &[u64], limit: Duration) -> bool {
        let end = Instant::now() + limit;
        let mut sink = Vec::new();
        self.take(&mut sink);
        if self.in_flight == 0 {
            return true;
        }
        for &u in user_datas {
            let e = opcode::AsyncCancel::new(u).build().user_data(u64::MAX);
            // SAFETY: a cancel names no buffer.
            if unsafe { self.push(&e) }.is_err() {
                break;
            }
        }
        while self.in_flight > 0 {
            let now = Instant::now();
            if now >= end || self.enter(1, Some(end - now)).is_err() {
                break;
            }
            self.take(&mut sink);
        }
        self.in_flight == 0
    }
}

/// The SQE of a SENDMSG on fixed file `file`, or with `zc` of a SENDMSG_ZC whose
/// notification says whether the kernel copied after all: one build for the ring's own sends
/// ([`SockRing::send_msg`], [`SockRing::send_msg_zc`]) and a connection's.
#[inline]
fn send_msg_sqe(file: u32, msg: *const libc::msghdr, flags: i32, zc: bool) -> squeue::Entry {
    let fd = types::Fixed(file);
    if zc {
        opcode::SendMsgZc::new(fd, msg)
            .flags(flags as u32)
            .ioprio(zc::SEND_ZC_REPORT_USAGE)
            .build()
    } else {
        opcode::SendMsg::new(fd, msg).flags(flags as u32).build()
    }
}

/// The SQE of a RECV of up to `len` bytes into `buf` on fixed file `file`.
#[inline]
fn recv_sqe(file: u32, buf: *mut u8, len: u32) -> squeue::Entry {
    opcode::Recv::new(types::Fixed(file), buf, len).build()
}

/// What the layer needs of the kernel.
fn check(ring: &IoUring) -> Result<(), String> {
    if !ring.params().is_feature_ext_arg() {
        return Err("no IORING_FEAT_EXT_ARG (Linux 5.11+) for a bounded wait".into());
    }
    zc::probe_ops(
        ring,
        &[
            (opcode::SendMsg::CODE, "SENDMSG"),
            (opcode::Recv::CODE, "RECV"),
            (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
        ],
    )
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod feature_tests;
