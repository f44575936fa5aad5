//! The multipath target's queues: one inner queue per path per worker, each I/O routed by
//! the [`Selector`] and kept until it completes so that it can be sent again on another path
//! when its own fails.
//!
//! * Tags: an I/O keeps the scheduler's tag on whichever inner queue carries it. A tag is in
//!   flight on one path at a time and each inner queue is opened with the full depth, so
//!   completions map back without a table.
//! * Failure: an inner `submit` or `reap` that fails (a transport error), or a path with I/O
//!   outstanding and no completion for `path_timeout`, takes the path out: its queue is
//!   dropped (nothing of it touches the arena again: inner queues move data only inside their
//!   own calls), its socket reset rather than closed (SO_LINGER 0: nothing it still held is
//!   delivered should the path return) and its outstanding I/Os are routed again. Errors a target reports in a
//!   completion (a medium error) are the I/O's, not the path's, and pass through, but for
//!   [`PATH_ERROR`] (a path-related status: NVMe ANA inaccessible, ...), which takes the path
//!   out like a transport error: that I/O and the others it had are routed again.
//! * Access states (NVMe ANA): each path's target says its state ([`Target::access_state`],
//!   kept current by the engine from the ANA log page and its change notices); it is looked
//!   at between reaps and moves the path between the selector's groups, with an event. A
//!   reconnection reads it again before the path carries I/O.
//! * Reconnection runs on a thread of its own (a login to a dead portal can take its whole
//!   timeout) with the selector's backoff; its queue comes back over a channel.
//! * No path: I/Os wait, and fail with EIO once `no_path_retry` has passed without a path.
//! * Waiting (`wait.rs`): `poll` on the sockets the inner queues name
//!   ([`Queue::readiness`]) for at most [`WAIT_SLICE`], then `reap(0)` on the paths that are
//!   ready or hold completions, so one quiet path never delays another's completions, no
//!   reap finds nothing, and timeouts and reconnections (`housekeeping.rs`) are looked at
//!   often.
//! * One io_uring per queue ([`SharedRing`]): every path's queue (and every reconnection's)
//!   is opened with it in its configuration, and an initiator on the io_uring layer attaches
//!   its socket to it. When every busy path is on it, the wait is one `io_uring_enter` that
//!   submits all their sends and receives and waits for the first completion, instead of a
//!   `ppoll` over the paths' fds and an enter per path. A stream whose paths poll never opens
//!   the ring.

mod housekeeping;
mod wait;

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::paths::Shared;
use super::report::{MultipathReport, PathEvent, PathReport, STATS_KEY};
use super::selector::{Failback, Group, Selector};
use crate::engine::{AccessState, Completion, Io, Queue, QueueConfig, Target};
use crate::error::EngineError;
use crate::poison::lock;
use crate::run::timeline::{BIN_NS, MAX_BINS};
use sanbench_io::SharedRing;

/// The longest one wait for completions lasts before timeouts and reconnections are looked at
/// (and a send that found a socket full is retried).
pub const WAIT_SLICE: Duration = Duration::from_millis(1);

/// One worker's queue: a queue on every path (a path that cannot open one starts failed).
pub(super) fn open(sh: Arc<Shared>, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
    let now = Instant::now();
    let path_timeout = sh
        .options
        .path_timeout
        .unwrap_or(super::uri::DEFAULT_PATH_TIMEOUT.min(cfg.io_timeout));
    // Each path's queue times out on its own after `path_timeout`: a path that answers
    // nothing for that long is failed by its engine as by this queue's own check, which
    // lets a lone busy path be waited on in its engine's blocking reap (`wait.rs`).
    // One ring for every path of this queue (opened when the first path attaches to it).
    let ring = SharedRing::new();
    let cfg = &QueueConfig {
        io_timeout: path_timeout,
        socket_ring: sanbench_io::sockring::shared::sharing_wanted().then(|| ring.clone()),
        ..cfg.clone()
    };
    let mut sel = Selector::new(sh.paths.len(), sh.options.selector());
    let mut paths = Vec::new();
    let mut events = Vec::new();
    let mut first_err = None;
    for (i, t) in sh.paths.iter().enumerate() {
        let t = lock(t).clone();
        let access = t.access_state();
        if let Some(a) = access {
            sel.set_group(i, Group::from(a), now);
        }
        let queue: Option<Box<dyn Queue>> = match t.open_queue(cfg) {
            Ok(q) => Some(q),
            // A path down at the start is failed and retried like one that fails later.
            Err(e) => {
                sel.failed(i, now);
                events.push(event(i, cfg.worker, "failed", Some(e.to_string())));
                first_err.get_or_insert(e);
                None
            }
        };
        let down = queue.is_none();
        paths.push(PathQ {
            queue,
            target: t,
            access,
            reconnect: None,
            last_progress: now,
            latency_sum_ns: 0,
            latency_max_ns: 0,
            report: PathReport {
                uri: sh.uris[i].clone(),
                failures: u64::from(down),
                access_state: access.map(|a| a.name().into()),
                ..PathReport::default()
            },
        });
    }
    if let Some(e) = first_err.filter(|_| paths.iter().all(|p| p.queue.is_none())) {
        return Err(e);
    }
    let n = paths.len();
    Ok(Box::new(MultipathQueue {
        shared: sh.clone(),
        cfg: cfg.clone(),
        path_timeout,
        sel,
        paths,
        slots: vec![Slot::FREE; cfg.depth as usize],
        waiting: VecDeque::new(),
        in_flight: 0,
        events,
        reissued: 0,
        failed_no_path: 0,
        failover_pending: vec![false; n],
        batches: vec![Vec::new(); n],
        scratch: Vec::new(),
        work: Vec::new(),
        ready: vec![false; n],
        pollfds: Vec::with_capacity(n),
        which: Vec::with_capacity(n),
        done_on: vec![0; cfg.depth as usize],
        last_now: None,
        ring,
    }))
}

fn event(path: usize, worker: usize, what: &str, reason: Option<String>) -> PathEvent {
    let now = SystemTime::now();
    PathEvent {
        at: crate::result::rfc3339(now),
        at_unix_ms: now
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64,
        path,
        worker,
        event: what.into(),
        reason,
        access_state: None,
    }
}

/// No path (in [`Slot::path`] and [`Slot::from`]).
const NO_PATH: u16 = u16::MAX;

/// An I/O the scheduler handed over and has not had back. Kept per tag and written field by
/// field in place (per I/O: a whole `Option<Slot>` built and moved cost more than the
/// selector).
#[derive(Clone, Copy)]
struct Slot {
    /// Handed over and not yet given back.
    taken: bool,
    /// The path carrying it; [`NO_PATH`] while it waits for one.
    path: u16,
    /// The path it was in flight on when that path failed (it was sent again), or
    /// [`NO_PATH`].
    from: u16,
    /// Bytes in flight on its path when it was sent (the service-time estimate's input).
    ahead: u64,
    /// When it was sent, in nanoseconds from the target's epoch.
    sent_ns: u64,
    io: Io,
}

impl Slot {
    const FREE: Slot = Slot {
        taken: false,
        path: NO_PATH,
        from: NO_PATH,
        ahead: 0,
        sent_ns: 0,
        io: Io {
            tag: 0,
            op: crate::engine::Op::Read,
            offset: 0,
            len: 0,
            buf: 0,
            fua: false,
        },
    };
}

struct PathQ {
    /// `None` while the path is failed.
    queue: Option<Box<dyn Queue>>,
    /// The path's target (the one a reconnection last opened), asked for its access state.
    target: Arc<dyn Target>,
    /// Its access state as last seen.
    access: Option<AccessState>,
    /// A reconnection under way.
    reconnect: Option<Receiver<Result<Box<dyn Queue>, EngineError>>>,
    /// The last completion, or when the path last went from idle to busy.
    last_progress: Instant,
    latency_sum_ns: u64,
    latency_max_ns: u64,
    report: PathReport,
}

struct MultipathQueue {
    shared: Arc<Shared>,
    /// The paths' queue configuration: the caller's, with `path_timeout` as I/O timeout.
    cfg: QueueConfig,
    path_timeout: Duration,
    sel: Selector,
    paths: Vec<PathQ>,
    /// By tag.
    slots: Vec<Slot>,
    /// Tags waiting for a usable path.
    waiting: VecDeque<u32>,
    /// Slots taken (sent or waiting).
    in_flight: usize,
    events: Vec<PathEvent>,
    reissued: u64,
    failed_no_path: u64,
    /// Per path: failed, and none of its reissued I/Os has completed elsewhere yet.
    failover_pending: Vec<bool>,
    batches: Vec<Vec<Io>>,
    scratch: Vec<Completion>,
    /// Tags being routed (kept to spare an allocation per batch).
    work: Vec<u32>,
    /// Paths to reap in the next pass: those that hold completions or whose socket a wait
    /// found ready.
    ready: Vec<bool>,
    /// A wait's poll entries and the path of each (kept to spare an allocation per wait).
    pollfds: Vec<libc::pollfd>,
    which: Vec<usize>,
    /// By tag: the path its last completion came from (`Queue::completed_on`).
    done_on: Vec<u16>,
    /// The clock as last read at the end of a submit or a reap: the next wait starts its
    /// housekeeping from it instead of reading the clock again (a clock read per round trip
    /// showed in the layer's cost; what the caller did in between is microseconds, and
    /// timeouts and retries are counted in milliseconds).
    last_now: Option<Instant>,
    /// The ring the paths' sockets share when they are on io_uring.
    ring: SharedRing,
}

/// A multipath queue's fact: whether its paths' sockets ran on its one ring (`shared`), each
/// on a ring of its own (`own`), or some of each (`mixed`); absent when none was on io_uring.
pub const SOCKET_RING: &str = "multipath.socket_ring";
/// `io_uring_enter` calls on the queue's shared ring, by the wrapper's waits and the paths'.
pub const SOCKET_RING_ENTERS: &str = "multipath.socket_ring_enters";

impl MultipathQueue {
    /// What [`SOCKET_RING`] says of the paths' queues now (failed ones left out).
    fn ring_kind(&self) -> Option<&'static str> {
        let ring = self.ring.fd()?;
        let (mut shared, mut other) = (0, 0);
        for q in self.paths.iter().filter_map(|p| p.queue.as_ref()) {
            match q.readiness() {
                Some(r) if r.fd.as_raw_fd() == ring => shared += 1,
                _ => other += 1,
            }
        }
        Some(match (shared, other) {
            (_, 0) => "shared",
            (0, _) => "own",
            _ => "mixed",
        })
    }

    /// Sends each tag on the path the selector picks (or queues it when there is none); a
    /// path whose submit fails is taken out and its I/Os go round again.
    fn route(&mut self, work: &mut Vec<u32>, now: Instant) {
        while !work.is_empty() {
            let now_ns = self.ns(now);
            self.sel.tick(now_ns);
            for tag in work.drain(..) {
                let Some(slot) = self.slots.get_mut(tag as usize).filter(|s| s.taken) else {
                    continue;
                };
                match self.sel.pick(slot.io.len) {
                    Some(p) => {
                        if self.sel.outstanding(p) == 0 {
                            self.paths[p].last_progress = now;
                        }
                        slot.path = p as u16;
                        slot.ahead = self.sel.in_flight_bytes(p);
                        slot.sent_ns = now_ns;
                        self.sel.started(p, slot.io.len);
                        self.batches[p].push(slot.io);
                    }
                    None => {
                        slot.path = NO_PATH;
                        self.waiting.push_back(tag);
                    }
                }
            }
            for p in 0..self.paths.len() {
                if self.batches[p].is_empty() {
                    continue;
                }
                let batch = std::mem::take(&mut self.batches[p]);
                let r = match self.paths[p].queue.as_mut() {
                    Some(q) => q.submit(&batch),
                    None => Err(EngineError::Invalid("path without a queue".into())),
                };
                self.batches[p] = batch;
                self.batches[p].clear();
                if let Err(e) = r {
                    work.extend(self.fail(p, e, now));
                }
            }
        }
    }

    /// Takes path `p` out; returns the tags it had in flight, to route again.
    fn fail(&mut self, p: usize, why: EngineError, now: Instant) -> Vec<u32> {
        // Dropped, not closed: a logout would wait on the peer that just failed. And
        // aborted: an orderly close would leave what the socket still holds (the failed
        // path's I/Os, about to be reissued elsewhere) for the kernel to deliver if the path
        // comes back, so a stale write could land over a newer one. SO_LINGER 0 makes the
        // close a reset that discards it. (A queue on io_uring names its ring's fd here, no
        // socket: it resets its own socket when dropped without `close`, after its
        // operations on the ring are cancelled and waited out.)
        if let Some(q) = self.paths[p].queue.take() {
            if let Some(r) = q.readiness() {
                let _ = rustix::net::sockopt::set_socket_linger(r.fd, Some(Duration::ZERO));
            }
        }
        self.sel.failed(p, now);
        let tags: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&t| {
                let s = &self.slots[t as usize];
                s.taken && usize::from(s.path) == p
            })
            .collect();
        for &t in &tags {
            self.slots[t as usize].from = p as u16;
        }
        self.failover_pending[p] = !tags.is_empty();
        let pr = &mut self.paths[p].report;
        pr.failures += 1;
        pr.reissued += tags.len() as u64;
        self.reissued += tags.len() as u64;
        self.events
            .push(event(p, self.cfg.worker, "failed", Some(why.to_string())));
        tags
    }

    /// `now` in nanoseconds from the target's epoch (where the paths' 10 ms bins start): the
    /// queue's times per I/O, worked out once per call.
    fn ns(&self, now: Instant) -> u64 {
        let d = now.saturating_duration_since(self.shared.epoch);
        d.as_secs() * 1_000_000_000 + u64::from(d.subsec_nanos())
    }

    /// Completion `c` of path `p`, reaped at `now_ns` (from [`ns`](Self::ns)).
    fn complete(
        &mut self,
        p: usize,
        c: Completion,
        now: Instant,
        now_ns: u64,
        out: &mut Vec<Completion>,
    ) {
        let Some(slot) = self.slots.get_mut(c.tag as usize).filter(|s| s.taken) else {
            return;
        };
        slot.taken = false;
        let slot = *slot;
        self.in_flight -= 1;
        self.done_on[c.tag as usize] = p as u16;
        let ns = now_ns.saturating_sub(slot.sent_ns);
        self.sel.completed_ns(p, slot.io.len, slot.ahead, ns);
        let bin = (now_ns / BIN_NS) as usize;
        let path = &mut self.paths[p];
        path.latency_sum_ns += ns;
        path.latency_max_ns = path.latency_max_ns.max(ns);
        path.last_progress = now;
        path.report.ios += 1;
        path.report.bytes += slot.io.len as u64;
        if bin < MAX_BINS {
            let bins = &mut path.report.bins_10ms;
            if bins.len() <= bin {
                bins.resize(bin + 1, 0);
            }
            bins[bin] = bins[bin].saturating_add(1);
        }
        let from = usize::from(slot.from);
        if slot.from != NO_PATH && self.failover_pending[from] {
            self.failover_pending[from] = false;
            self.events.push(event(
                from,
                self.cfg.worker,
                "failed_over",
                Some(format!("its first reissued I/O completed on path {p}")),
            ));
        }
        out.push(c);
    }

    fn report(&self) -> MultipathReport {
        MultipathReport {
            policy: self.sel.config().policy.name().into(),
            failback: match self.sel.config().failback {
                Failback::Immediate => "immediate",
                Failback::Manual => "manual",
            }
            .into(),
            paths: (0..self.paths.len())
                .map(|p| {
                    let path = &self.paths[p];
                    let ios = path.report.ios;
                    PathReport {
                        estimated_bytes_per_s: self.sel.rate(p),
                        latency_mean_us: (ios > 0)
                            .then(|| path.latency_sum_ns as f64 / ios as f64 / 1e3),
                        latency_max_us: (ios > 0).then(|| path.latency_max_ns as f64 / 1e3),
                        ..path.report.clone()
                    }
                })
                .collect(),
            reissued: self.reissued,
            failed_no_path: self.failed_no_path,
            events: self.events.clone(),
            epoch_unix_ns: self.shared.epoch_unix_ns,
        }
    }
}

impl Queue for MultipathQueue {
    fn submit(&mut self, ios: &[Io]) -> Result<(), EngineError> {
        let now = Instant::now();
        self.poll_access(now);
        let mut work = std::mem::take(&mut self.work);
        work.clear();
        for io in ios {
            let slot = self.slots.get_mut(io.tag as usize).ok_or_else(|| {
                EngineError::Invalid(format!("tag {} above the queue depth", io.tag))
            })?;
            if slot.taken {
                return Err(EngineError::Invalid(format!(
                    "tag {} already in flight",
                    io.tag
                )));
            }
            slot.taken = true;
            slot.path = NO_PATH;
            slot.from = NO_PATH;
            slot.io = *io;
            self.in_flight += 1;
            work.push(io.tag);
        }
        self.route(&mut work, now);
        self.work = work;
        self.last_now = Some(now);
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<(), EngineError> {
        let want = min.min(self.in_flight);
        self.gather(want, None, out);
        Ok(())
    }

    fn reap_until(
        &mut self,
        deadline: Instant,
        out: &mut Vec<Completion>,
    ) -> Result<(), EngineError> {
        self.gather(1, Some(deadline), out);
        Ok(())
    }

    fn completed_on(&self, tag: u32) -> Option<usize> {
        self.done_on.get(tag as usize).map(|&p| usize::from(p))
    }

    fn paths_of(&self, done: &[Completion], out: &mut Vec<u16>) {
        out.extend(
            done.iter()
                .map(|c| self.done_on.get(c.tag as usize).copied().unwrap_or(0)),
        );
    }

    fn stats(&self) -> std::collections::BTreeMap<String, serde_json::Value> {
        let mut m = std::collections::BTreeMap::new();
        m.insert(
            STATS_KEY.into(),
            serde_json::to_value(self.report()).unwrap_or_default(),
        );
        if let Some(kind) = self.ring_kind() {
            m.insert(SOCKET_RING.into(), kind.into());
            m.insert(SOCKET_RING_ENTERS.into(), self.ring.enters().into());
        }
        m
    }

    fn close(&mut self) -> Result<(), EngineError> {
        // A path that cannot log out cleanly is one the run no longer needs: the I/O is done.
        for p in &mut self.paths {
            if let Some(q) = p.queue.as_mut() {
                let _ = q.close();
            }
        }
        Ok(())
    }
}
