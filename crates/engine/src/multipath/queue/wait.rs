//! Waiting on several paths at once: poll first, then reap only the paths that have something.
//!
//! A path's queue is reaped (`reap(0)`, one receive) only when its socket is ready or the
//! queue says it holds completions already ([`Readiness::held`]): a reap that finds nothing
//! costs a system call (EAGAIN) and gives nothing, which was 38 % of the receives with two
//! loopback paths. Queues without a socket ([`Queue::readiness`] `None`) are reaped every
//! pass, after a short sleep when there is nothing else to wait on.
//!
//! One busy path and nothing else to watch (the other paths idle and healthy, no I/O waiting
//! for a path, no caller deadline): the wait is that path's own blocking `reap`, as without
//! the wrapper (one receive that sleeps, where a poll then a receive were two system calls
//! per wake). Its queue was opened with `path_timeout` as I/O timeout, so a silent path
//! still fails after `path_timeout` (to within the engine's own timer: SO_RCVTIMEO's tick,
//! the iSCSI session's tick of 1 % of its timeout); it is used only while the path's last
//! completion is recent (1 % of `path_timeout`, [`LONE_SLACK`] at least), so that timer
//! starts about where this queue's would.
//!
//! Paths on the queue's shared io_uring (their readiness names its fd): when every busy path
//! is, the wait is one `io_uring_enter` on it ([`SharedRing::wait`]) that submits all their
//! queued sends and receives (an attached connection leaves them queued for this) and waits
//! for the first completion; each completion lands in its connection's mailbox, which its
//! queue's readiness reports as held, so exactly the paths with completions are reaped, and
//! their `reap(0)` makes no system call. With some paths polling instead, the ring's queued
//! entries are submitted first and the ring fd is polled with the sockets.
//!
//! [`SharedRing::wait`]: sanbench_io::SharedRing::wait
//! [`Readiness::held`]: crate::engine::Readiness::held
//! [`Queue::readiness`]: crate::engine::Queue::readiness

use std::time::{Duration, Instant};

use std::os::fd::AsRawFd;

use super::{MultipathQueue, WAIT_SLICE};
use crate::engine::{Completion, PATH_ERROR};
use crate::error::EngineError;
use crate::multipath::selector::State;

/// How long a wait lasts when a busy path has no socket to poll (engines without one, the
/// unit tests' fake paths) before every such path is reaped again.
const UNPOLLABLE_NAP: Duration = Duration::from_micros(20);

/// A lone busy path is waited on in its own blocking reap only when its last completion (or
/// its going busy) is at most 1 % of `path_timeout` old, and at least this: the engine's
/// timeout counts from the call, so it fires at most that much later than this queue's.
const LONE_SLACK: Duration = Duration::from_millis(5);

impl MultipathQueue {
    /// Takes completions from the paths until `want` have come (or `deadline` passes); with
    /// `want` 0, what is there now. The wrapper never fails a reap itself: a path's error
    /// fails the path.
    pub(super) fn gather(
        &mut self,
        want: usize,
        deadline: Option<Instant>,
        out: &mut Vec<Completion>,
    ) {
        let start = out.len();
        // Every call looks at timeouts, reconnections and access states, even one that
        // returns at once: a silent path must fail while another keeps completing.
        // A wait with a deadline (the open loop's pacing) reads the clock: its limit is
        // worked out from `now`.
        let cached = self.last_now.take().filter(|_| deadline.is_none());
        let mut now = cached.unwrap_or_else(Instant::now);
        self.housekeeping(now, out);
        // What needs no waiting: queues holding completions, queues without a socket.
        self.mark_held();
        if let Some(t) = self.reap_marked(out) {
            now = t;
        }
        // A deadline already past (an open loop behind its schedule) still gets one look at
        // the sockets: returning before any would leave every completion unreaped for as long
        // as the caller stays behind, which it then does for good.
        let mut looked = false;
        loop {
            let got = out.len() - start;
            let expired = deadline.is_some_and(|d| now >= d);
            if (want > 0 && got >= want) || (expired && looked) {
                return;
            }
            if deadline.is_none() && want > 0 {
                if let Some(p) = self.lone_busy_path(now) {
                    let min = (want - got).min(self.sel.outstanding(p) as usize);
                    now = self.reap_path(p, min, out);
                    self.housekeeping(now, out);
                    continue;
                }
            }
            let limit = match deadline {
                _ if want == 0 || expired => Duration::ZERO,
                Some(d) => (d - now).min(WAIT_SLICE),
                None => WAIT_SLICE,
            };
            self.wait(limit);
            looked = true;
            now = self.reap_marked(out).unwrap_or_else(Instant::now);
            if want == 0 || expired {
                return;
            }
            self.housekeeping(now, out);
        }
    }

    /// Marks the busy paths whose queue holds completions or has no socket to poll.
    fn mark_held(&mut self) {
        for (p, path) in self.paths.iter().enumerate() {
            self.ready[p] = match &path.queue {
                Some(q) if self.sel.outstanding(p) > 0 => q.readiness().is_none_or(|r| r.held),
                _ => false,
            };
        }
    }

    /// Waits until a busy path's socket is ready, or for `limit` (0: only looks), and marks in
    /// `ready` the paths to reap: those whose socket is ready or whose queue holds
    /// completions, and every busy one when the wait ended by time (a send that found a
    /// socket full is retried, and an engine's readiness is never trusted to be perfect).
    fn wait(&mut self, limit: Duration) {
        self.ready.iter_mut().for_each(|r| *r = false);
        self.pollfds.clear();
        self.which.clear();
        let (mut held, mut unpollable) = (false, false);
        let ring = self.ring.fd();
        let mut on_ring = 0;
        for (p, path) in self.paths.iter().enumerate() {
            let Some(q) = &path.queue else { continue };
            if self.sel.outstanding(p) == 0 {
                continue;
            }
            match q.readiness() {
                Some(r) if r.held => {
                    self.ready[p] = true;
                    held = true;
                }
                Some(r) => {
                    on_ring += usize::from(Some(r.fd.as_raw_fd()) == ring);
                    let mut events = libc::POLLIN;
                    if r.write {
                        events |= libc::POLLOUT;
                    }
                    self.pollfds.push(libc::pollfd {
                        fd: r.fd.as_raw_fd(),
                        events,
                        revents: 0,
                    });
                    self.which.push(p);
                }
                None => {
                    self.ready[p] = true;
                    unpollable = true;
                }
            }
        }
        if held {
            // Something to take at once; the sockets are looked at on the next pass.
            return;
        }
        let limit = if unpollable {
            limit.min(UNPOLLABLE_NAP)
        } else {
            limit
        };
        if on_ring > 0 {
            // Every busy path on the ring: the one enter is the wait.
            let only = on_ring == self.pollfds.len() && !unpollable;
            let waited = self.ring.wait(if only { limit } else { Duration::ZERO });
            if self.mark_mail() || (only && (waited.is_err() || !limit.is_zero())) {
                if !self.ready.iter().any(|&r| r) {
                    // The time, or an error the paths' own reaps will meet: every busy path.
                    self.which.iter().for_each(|&p| self.ready[p] = true);
                }
                return;
            }
            if only {
                return;
            }
        }
        if self.pollfds.is_empty() {
            // Nothing to poll: a queue without a socket, or no path busy (I/Os waiting for
            // a path, a reconnection under way): sleep until the next look.
            if !limit.is_zero() {
                std::thread::sleep(limit);
            }
            return;
        }
        let ts = libc::timespec {
            tv_sec: limit.as_secs() as _,
            tv_nsec: limit.subsec_nanos() as _,
        };
        // SAFETY: `pollfds` is a live vector of `len` initialised pollfd entries whose fds
        // belong to queues in `self.paths`, which nothing closes during the call; `ts` lives
        // across it and the signal mask pointer may be null (ppoll(2)). A reused vector of
        // raw entries spares the allocation per wait that borrowed `PollFd`s needed.
        let n = unsafe {
            libc::ppoll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if n > 0 {
            for (f, &p) in self.pollfds.iter().zip(&self.which) {
                self.ready[p] = f.revents != 0;
            }
        } else if n < 0 || !limit.is_zero() {
            // The time, or EINTR: every busy path (a look that found nothing ready marks
            // none).
            self.which.iter().for_each(|&p| self.ready[p] = true);
        }
    }

    /// Marks the busy paths polled on the shared ring whose queue now holds completions (moved
    /// to their mailboxes by a wait on the ring); returns whether any is.
    fn mark_mail(&mut self) -> bool {
        let Some(ring) = self.ring.fd() else {
            return false;
        };
        let mut any = false;
        for &p in &self.which {
            let Some(r) = self.paths[p].queue.as_ref().and_then(|q| q.readiness()) else {
                continue;
            };
            if r.fd.as_raw_fd() == ring && r.held {
                self.ready[p] = true;
                any = true;
            }
        }
        any
    }

    /// The one path with I/O out, when nothing else needs watching: every other path idle
    /// and active (no retry due, no reconnection under way), no I/O waiting for a path, and
    /// this path's queue a socket's (one that can block) whose last progress is recent.
    fn lone_busy_path(&self, now: Instant) -> Option<usize> {
        if !self.waiting.is_empty() || self.sel.next_retry().is_some() {
            return None;
        }
        let mut lone = None;
        for (p, path) in self.paths.iter().enumerate() {
            if path.reconnect.is_some() || self.sel.state(p) != State::Active {
                return None;
            }
            if self.sel.outstanding(p) > 0 {
                if lone.is_some() {
                    return None;
                }
                lone = Some(p);
            }
        }
        let p = lone?;
        let path = &self.paths[p];
        let slack = (self.path_timeout / 100).max(LONE_SLACK);
        let recent = now.saturating_duration_since(path.last_progress) <= slack;
        let blocks = path.queue.as_ref().is_some_and(|q| q.readiness().is_some());
        (recent && blocks).then_some(p)
    }

    /// Reaps every path marked in `ready` (one `reap(0)` each) and clears its mark; returns
    /// when the last reap ended, if any ran.
    fn reap_marked(&mut self, out: &mut Vec<Completion>) -> Option<Instant> {
        let mut last = None;
        for p in 0..self.paths.len() {
            if std::mem::take(&mut self.ready[p]) && self.sel.outstanding(p) > 0 {
                last = Some(self.reap_path(p, 0, out));
            }
        }
        last
    }

    /// Reaps path `p` (its `reap(min)`); a path whose reap fails, or that answers with a
    /// path-related status, is taken out and its I/Os go round again.
    /// Returns when the reap ended.
    fn reap_path(&mut self, p: usize, min: usize, out: &mut Vec<Completion>) -> Instant {
        let Some(q) = self.paths[p].queue.as_mut() else {
            return Instant::now();
        };
        let mut got = std::mem::take(&mut self.scratch);
        got.clear();
        let r = q.reap(min, &mut got);
        let now = Instant::now();
        let now_ns = self.ns(now);
        let mut path_errors = 0;
        for c in got.drain(..) {
            if c.result == PATH_ERROR {
                // Left in its slot, on this path: the failure below sends it again.
                path_errors += 1;
                continue;
            }
            self.complete(p, c, now, now_ns, out);
        }
        self.scratch = got;
        let failed = match r {
            Err(e) => Some(e),
            Ok(()) if path_errors > 0 => Some(EngineError::PathStatus {
                peer: self.paths[p].report.uri.clone(),
                ios: path_errors,
            }),
            Ok(()) => None,
        };
        self.paths[p].report.path_errors += path_errors;
        self.last_now = Some(now);
        if let Some(e) = failed {
            let mut tags = self.fail(p, e, now);
            self.route(&mut tags, now);
        }
        now
    }
}
