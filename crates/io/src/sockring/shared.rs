//! One ring for several connections (a multipath stream's paths): their sends and receives
//! go to the kernel, and their completions come back, in one `io_uring_enter`.
//!
//! A [`SharedRing`] is a handle (cloned into every path's queue configuration and into the
//! reconnections a multipath queue starts on its housekeeping thread). The ring itself is
//! opened on the first [`attach`](SharedRing::attach), so a stream whose paths poll pays
//! nothing. Each [`Attachment`] holds one registered-file slot of a sparse table
//! ([`SLOTS`]) and tags its operations' `user_data` with it (`slot << 32 | kind`).
//!
//! Completions belong to whoever takes them from the ring first, so every take moves all of
//! them into per-connection mailboxes and hands the caller its own: a connection's wait
//! counts only its own completions, never another's, and nothing is discarded but what a
//! detaching connection cancels. A detach cancels its own operations and waits them out
//! (the other connections' completions meanwhile go to their mailboxes), then sets its slot
//! back to -1; a slot whose operations could not be waited out is never used again.
//!
//! Locking: the mutex is held only to push entries, take completions and register files,
//! never across a wait: a wait reads the submission queue's length under the lock, then
//! calls `io_uring_enter` on the ring's fd without it (the kernel serialises submission, and
//! only one thread at a time pushes, under the lock), so a reconnection attaching from
//! another thread never waits for the stream's wait. The ring is set up with COOP_TASKRUN
//! (never SINGLE_ISSUER or DEFER_TASKRUN: several threads register files on it).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use io_uring::opcode;

use super::{Cqe, SockRing};

/// Registered-file slots of a shared ring: the most connections attached at once.
pub const SLOTS: usize = 64;
/// Submission entries: a connection keeps at most a send and a receive in the kernel (and
/// cancels for both while it detaches).
const ENTRIES: u32 = 256;
/// The kind of a detaching connection's cancels: their completions are dropped.
const CANCEL: u64 = 0xffff_ffff;

/// The environment variable that turns the sharing off (`0`): each connection of a multipath
/// stream then opens a ring of its own, as before rings were shared, so that both can be
/// measured on one binary (scripts/bench_sockio_cost.py's `uring-own` layer).
pub const SHARED_ENV: &str = "SANBENCH_SOCKRING_SHARED";

/// Whether several connections of a stream should share a ring ([`SHARED_ENV`] not `0`).
pub fn sharing_wanted() -> bool {
    std::env::var(SHARED_ENV).map_or(true, |v| v.trim() != "0")
}

/// How a connection's ring is named in a queue's facts (`*_socket_ring`) and in a multipath
/// target's engine info (`socket_ring`): `shared` (the stream's [`SharedRing`]) or `own`.
pub fn ring_kind(shared: bool) -> &'static str {
    if shared {
        "shared"
    } else {
        "own"
    }
}

/// A ring several connections share; cheap to clone, `Send + Sync`.
#[derive(Clone, Default)]
pub struct SharedRing {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    /// The ring's fd once opened (-1 before), read without the lock by waiters.
    fd: AtomicI32Default,
    enters: AtomicU64,
}

/// An `AtomicI32` that starts at -1.
struct AtomicI32Default(AtomicI32);

impl Default for AtomicI32Default {
    fn default() -> Self {
        AtomicI32Default(AtomicI32::new(-1))
    }
}

#[derive(Default)]
struct State {
    ring: Option<SockRing>,
    /// Why the ring could not be opened (asked once; every later attach gets the same answer).
    failed: Option<String>,
    slots: Vec<Slot>,
    taken: Vec<Cqe>,
    /// Completions moved to mailboxes so far (a wait on the ring ends when this grows).
    routed: u64,
}

#[derive(Default)]
enum Slot {
    #[default]
    Free,
    Used {
        mail: Vec<Cqe>,
        /// Operations pushed and not completed (in the submission queue or in the kernel).
        in_flight: u32,
    },
    /// Its operations could not be waited out: never used again.
    Lost,
}

impl std::fmt::Debug for SharedRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRing")
            .field("fd", &self.fd())
            .field("attached", &self.attached())
            .finish()
    }
}

impl State {
    /// Moves every completion in the ring into the mailboxes.
    fn collect(&mut self) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        let mut taken = std::mem::take(&mut self.taken);
        ring.take(&mut taken);
        for c in taken.drain(..) {
            let kind = c.user_data & 0xffff_ffff;
            if let Some(Slot::Used { mail, in_flight }) =
                self.slots.get_mut((c.user_data >> 32) as usize)
            {
                // F_MORE: the operation completes again, so it is still in flight (no
                // connection on a shared ring runs one today: the opt-in features that do
                // keep to a ring of their own).
                if !io_uring::cqueue::more(c.flags) {
                    *in_flight = in_flight.saturating_sub(1);
                }
                if kind != CANCEL {
                    self.routed += 1;
                    mail.push(Cqe {
                        user_data: kind,
                        result: c.result,
                        flags: c.flags,
                    });
                }
            }
        }
        self.taken = taken;
    }

    fn slot(&mut self, slot: u32) -> Option<(&mut Vec<Cqe>, &mut u32)> {
        match self.slots.get_mut(slot as usize) {
            Some(Slot::Used { mail, in_flight }) => Some((mail, in_flight)),
            _ => None,
        }
    }

    /// Entries in the submission queue not yet seen by the kernel.
    fn queued(&mut self) -> u32 {
        self.ring
            .as_mut()
            .map_or(0, |r| r.ring.submission().len() as u32)
    }

    fn note_submitted(&mut self) {
        if let Some(r) = self.ring.as_mut() {
            r.queued = r.ring.submission().len() as u32;
        }
    }
}

impl SharedRing {
    /// A handle; the ring opens on the first [`attach`](Self::attach).
    pub fn new() -> SharedRing {
        SharedRing::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held left the bookkeeping consistent (each step is one
        // push or one take): carry on.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ring's fd once opened: a queue whose readiness names it is attached here.
    pub fn fd(&self) -> Option<RawFd> {
        let fd = self.inner.fd.0.load(Ordering::Acquire);
        (fd >= 0).then_some(fd)
    }

    /// `io_uring_enter` calls made on the ring, by every connection and by [`wait`](Self::wait).
    pub fn enters(&self) -> u64 {
        self.inner.enters.load(Ordering::Relaxed)
    }

    /// Connections attached now.
    pub fn attached(&self) -> usize {
        self.lock()
            .slots
            .iter()
            .filter(|s| matches!(s, Slot::Used { .. }))
            .count()
    }

    /// Registers socket `fd` (kept open by the caller as long as the attachment lives) in a
    /// free slot, opening the ring first if this is the first attach. Fails when the kernel
    /// lacks what the layer needs or every slot is taken: the caller then uses a ring of its
    /// own.
    pub fn attach(&self, fd: RawFd) -> Result<Attachment, String> {
        let mut st = self.lock();
        if let Some(e) = &st.failed {
            return Err(e.clone());
        }
        if st.ring.is_none() {
            let r = SockRing::open_as(&[-1; SLOTS], ENTRIES, "coop");
            let ring = match r {
                Ok(r) => r,
                Err(e) => {
                    st.failed = Some(e.clone());
                    return Err(e);
                }
            };
            self.inner
                .fd
                .0
                .store(ring.ring.as_raw_fd(), Ordering::Release);
            st.ring = Some(ring);
            st.slots = (0..SLOTS).map(|_| Slot::Free).collect();
        }
        let slot = st
            .slots
            .iter()
            .position(|s| matches!(s, Slot::Free))
            .ok_or_else(|| format!("the stream's shared ring has no free slot of {SLOTS}"))?;
        let ring = st.ring.as_ref().expect("opened above");
        ring.ring
            .submitter()
            .register_files_update(slot as u32, &[fd])
            .map_err(|e| format!("io_uring register_files_update: {e}"))?;
        let mode = ring.mode();
        st.slots[slot] = Slot::Used {
            mail: Vec::with_capacity(4),
            in_flight: 0,
        };
        Ok(Attachment {
            ring: self.clone(),
            slot: slot as u32,
            mode,
            enters: 0,
            kinds: Vec::with_capacity(4),
        })
    }

    /// Submits every attached connection's queued entries and waits up to `limit` (zero: only
    /// submits and looks) until a completion comes for any connection (moved to its
    /// mailbox). Returns whether one came. One system call when there is anything to submit
    /// or wait for. Completions already in mailboxes do not end the wait: their owners know
    /// of them (`Attachment::has_mail`), and an idle connection's would otherwise make every
    /// wait return at once.
    pub fn wait(&self, limit: Duration) -> io::Result<bool> {
        let start = self.lock().routed;
        self.wait_until(limit, None, |st| st.routed > start)
    }

    /// Waits (without the lock) until `done` holds of the collected state, at most `limit`;
    /// with a zero limit only submits what is queued and looks. `mine` is the connection
    /// whose enters are counted.
    fn wait_until(
        &self,
        limit: Duration,
        mut mine: Option<&mut u64>,
        done: impl Fn(&State) -> bool,
    ) -> io::Result<bool> {
        let end = Instant::now() + limit;
        loop {
            let (queued, busy) = {
                let mut st = self.lock();
                st.collect();
                if done(&st) {
                    return Ok(true);
                }
                let busy = st.ring.as_ref().is_some_and(|r| r.in_flight > 0);
                (st.queued(), busy)
            };
            let left = end.saturating_duration_since(Instant::now());
            let wait = busy && !left.is_zero();
            if queued == 0 && !wait {
                return Ok(false);
            }
            let Some(fd) = self.fd() else {
                return Ok(false);
            };
            self.inner.enters.fetch_add(1, Ordering::Relaxed);
            if let Some(m) = mine.as_deref_mut() {
                *m += 1;
            }
            let timed_out = enter(fd, queued, u32::from(wait), left)?;
            let mut st = self.lock();
            st.note_submitted();
            st.collect();
            if done(&st) {
                return Ok(true);
            }
            if !wait || timed_out || Instant::now() >= end {
                return Ok(false);
            }
        }
    }
}

/// `io_uring_enter` on `fd`: submits `to_submit` entries and, with `min` 1, waits up to
/// `limit` for a completion. Returns whether the wait ended at the limit.
fn enter(fd: RawFd, to_submit: u32, min: u32, limit: Duration) -> io::Result<bool> {
    /// `struct __kernel_timespec`.
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    /// `struct io_uring_getevents_arg`.
    #[repr(C)]
    struct GetEventsArg {
        sigmask: u64,
        sigmask_sz: u32,
        pad: u32,
        ts: u64,
    }
    const GETEVENTS: u32 = 1;
    const EXT_ARG: u32 = 8;
    let ts = Timespec {
        sec: limit.as_secs() as i64,
        nsec: i64::from(limit.subsec_nanos()),
    };
    let arg = GetEventsArg {
        sigmask: 0,
        sigmask_sz: 0,
        pad: 0,
        ts: &ts as *const Timespec as u64,
    };
    let flags = if min > 0 { GETEVENTS | EXT_ARG } else { 0 };
    let (argp, argsz) = if min > 0 {
        (
            &arg as *const GetEventsArg as *const libc::c_void,
            std::mem::size_of::<GetEventsArg>(),
        )
    } else {
        (std::ptr::null(), 0)
    };
    // SAFETY: `fd` is a live io_uring (the caller holds the handle that owns it); the
    // extended argument and its timespec live across the call; the submission queue's
    // entries up to its tail were written, and their buffers are kept, by their pushers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            fd,
            to_submit,
            min,
            flags,
            argp,
            argsz,
        )
    };
    if r >= 0 {
        return Ok(false);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ETIME) => Ok(true),
        // A signal, or a full completion queue (taking completions makes room).
        Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN) => Ok(false),
        _ => Err(e),
    }
}

/// One connection's place on a [`SharedRing`]: its registered file and its mailbox. Dropping
/// it detaches (after [`drain`](Self::drain), or draining itself when operations are still
/// in flight).
pub struct Attachment {
    ring: SharedRing,
    slot: u32,
    mode: &'static str,
    enters: u64,
    /// The kinds of operation pushed so far: what a drain cancels.
    kinds: Vec<u64>,
}

impl Attachment {
    /// The registered file to name in this connection's entries.
    pub fn file(&self) -> u32 {
        self.slot
    }

    /// `user_data` for an operation of `kind` (below 2^32 - 1): completions come back to this
    /// connection's mailbox with `kind` as their `user_data`.
    pub fn user_data(&self, kind: u64) -> u64 {
        u64::from(self.slot) << 32 | (kind & 0xffff_ffff)
    }

    /// How the ring was set up.
    pub fn mode(&self) -> &'static str {
        self.mode
    }

    /// `io_uring_enter` calls this connection's waits made.
    pub fn enters(&self) -> u64 {
        self.enters
    }

    /// The shared ring.
    pub fn ring(&self) -> &SharedRing {
        &self.ring
    }

    /// The ring's fd (open as long as this attachment).
    pub fn fd(&self) -> RawFd {
        self.ring.fd().unwrap_or(-1)
    }

    /// Pushes `e`, whose `user_data` must be [`user_data`](Self::user_data)'s; submitted by
    /// the next wait of any connection on the ring.
    ///
    /// # Safety
    /// Whatever `e` points at lives, untouched by anyone but the kernel, until its completion
    /// has been taken (or [`drain`](Self::drain) returned true).
    pub unsafe fn push(&mut self, e: &io_uring::squeue::Entry) -> io::Result<()> {
        let mut st = self.ring.lock();
        let st = &mut *st;
        let ring = st
            .ring
            .as_mut()
            .ok_or_else(|| io::Error::other("no ring"))?;
        // SAFETY: forwarded from the caller.
        unsafe { ring.push(e) }?;
        if let Some((_, in_flight)) = st.slot(self.slot) {
            *in_flight += 1;
        }
        let kind = e.get_user_data() & 0xffff_ffff;
        if !self.kinds.contains(&kind) {
            self.kinds.push(kind);
        }
        Ok(())
    }

    /// Whether this connection's mailbox holds completions (a poll of the ring fd would not
    /// show them: another connection's take already moved them out of the ring).
    pub fn has_mail(&self) -> bool {
        let mut st = self.ring.lock();
        st.slot(self.slot).is_some_and(|(m, _)| !m.is_empty())
    }

    /// Moves every completion in the ring to its mailbox, and this connection's to `out`
    /// (their `user_data` the kind alone).
    pub fn take(&mut self, out: &mut Vec<Cqe>) {
        let mut st = self.ring.lock();
        st.collect();
        if let Some((mail, _)) = st.slot(self.slot) {
            out.append(mail);
        }
    }

    /// Submits every connection's queued entries and waits up to `timeout` until `want` of
    /// this connection's completions (at most as many as it has outstanding) are in its
    /// mailbox. Returns whether they are.
    pub fn wait(&mut self, want: u32, timeout: Duration) -> io::Result<bool> {
        let slot = self.slot;
        let ring = self.ring.clone();
        ring.wait_until(timeout, Some(&mut self.enters), |st| {
            match st.slots.get(slot as usize) {
                Some(Slot::Used { mail, in_flight }) => {
                    let got = mail.len() as u32;
                    got >= want.min(got + in_flight)
                }
                _ => true,
            }
        })
    }

    /// Submits what is queued on the ring (every connection's), without waiting.
    pub fn submit(&mut self) -> io::Result<()> {
        let ring = self.ring.clone();
        ring.wait_until(Duration::ZERO, Some(&mut self.enters), |_| false)
            .map(|_| ())
    }

    /// Cancels this connection's operations (every kind it pushed) and waits (up to `limit`) until none
    /// of its operations is in flight, discarding its completions: afterwards the ring no
    /// longer touches its buffers. The other connections' completions meanwhile go to their
    /// mailboxes. False when operations may still be in the kernel: the caller keeps their
    /// buffers for the rest of the process (and the slot is never used again).
    #[must_use]
    pub fn drain(&mut self, limit: Duration) -> bool {
        let slot = self.slot;
        {
            let mut st = self.ring.lock();
            st.collect();
            let outstanding = st.slot(slot).map_or(0, |(mail, n)| {
                mail.clear();
                *n
            });
            if outstanding == 0 {
                return true;
            }
            let st = &mut *st;
            for &k in &self.kinds {
                let e = opcode::AsyncCancel::new(u64::from(slot) << 32 | k)
                    .build()
                    .user_data(u64::from(slot) << 32 | CANCEL);
                let Some(ring) = st.ring.as_mut() else { break };
                // SAFETY: a cancel names no buffer.
                if unsafe { ring.push(&e) }.is_err() {
                    break;
                }
                if let Some((_, n)) = st.slot(slot) {
                    *n += 1;
                }
            }
        }
        let ring = self.ring.clone();
        let done = ring
            .wait_until(limit, Some(&mut self.enters), |st| {
                match st.slots.get(slot as usize) {
                    Some(Slot::Used { in_flight, .. }) => *in_flight == 0,
                    _ => true,
                }
            })
            .unwrap_or(false);
        if let Some((mail, _)) = self.ring.lock().slot(slot) {
            mail.clear();
        }
        done
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        let busy = self
            .ring
            .lock()
            .slot(self.slot)
            .is_some_and(|(_, n)| *n > 0);
        let drained = !busy || self.drain(Duration::from_secs(5));
        let mut st = self.ring.lock();
        let st = &mut *st;
        let Some(s) = st.slots.get_mut(self.slot as usize) else {
            return;
        };
        if !drained {
            *s = Slot::Lost;
            return;
        }
        let freed = st.ring.as_ref().is_some_and(|r| {
            r.ring
                .submitter()
                .register_files_update(self.slot, &[-1])
                .is_ok()
        });
        *s = if freed { Slot::Free } else { Slot::Lost };
    }
}

#[cfg(test)]
mod tests;
