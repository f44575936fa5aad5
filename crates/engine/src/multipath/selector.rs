//! Which path the next I/O takes: dm-multipath's three path selectors (Linux
//! `drivers/md/dm-{round-robin,queue-length,service-time}.c`), path states with a retry backoff,
//! ANA-like priority groups, failback, and the `no_path_retry` deadline.
//!
//! Pure and sans-I/O: time is passed in, nothing here touches a queue, so every decision is
//! unit-tested by simulation (`selector_tests.rs`). The multipath queue (`queue.rs`) tells it
//! what happened (an I/O started or completed, a path failed or came back) and asks it where to
//! send the next I/O and which failed path is due for a retry.
//!
//! * round-robin: the usable paths in turn, whatever they carry.
//! * queue-length: the path with the fewest I/Os in flight.
//! * service-time: the path whose estimated service time for this I/O is least, dm's
//!   `(in-flight bytes + this I/O) / throughput`. dm takes each path's relative throughput from
//!   its table; sanbench has no table, so it estimates it: each completion gives
//!   `(bytes in flight ahead of it at submission + its length) / its latency`, the rate at which
//!   the path drained what was queued in front of it (exact for a saturated FIFO path), kept as
//!   an exponential moving average. A path without an estimate yet counts as the mean of the
//!   others (all equal: least in-flight bytes). Unlike dm's table, an estimate is measured,
//!   so it is noisy and it is only refreshed by I/O: estimates within [`RATE_TIE`] count as
//!   equal (dm's rule for equal throughputs: the less loaded path, turns among equals), the
//!   estimate of a path left unpicked for [`STALE_AFTER_NS`] is forgotten (set to the others'
//!   mean, so the path is picked again and measured anew), and a flush, which moves no data,
//!   gives no sample.
//!
//! Priority groups (NVMe ANA states; SCSI ALUA has the same three): optimized paths carry I/O
//! while any is usable, non-optimized ones only when none is, inaccessible ones never. Failback
//! is about groups, as in dm: `immediate` returns to the best group as soon as one of its paths
//! is reinstated, `manual` stays in the group in use while it has a usable path. A reinstated
//! path of the group in use carries I/O at once either way.

use std::time::{Duration, Instant};

/// dm-multipath's path selectors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    RoundRobin,
    QueueLength,
    #[default]
    ServiceTime,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::RoundRobin => "round-robin",
            Policy::QueueLength => "queue-length",
            Policy::ServiceTime => "service-time",
        }
    }
}

/// When I/O goes back to a better priority group whose path returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Failback {
    #[default]
    Immediate,
    Manual,
}

/// A path's access state (NVMe ANA, SCSI ALUA), best first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    #[default]
    Optimized,
    NonOptimized,
    Inaccessible,
}

impl From<crate::engine::AccessState> for Group {
    /// Persistent loss and change carry no I/O, as inaccessible (Linux's host uses only
    /// optimized and non-optimized paths).
    fn from(a: crate::engine::AccessState) -> Group {
        use crate::engine::AccessState as A;
        match a {
            A::Optimized => Group::Optimized,
            A::NonOptimized => Group::NonOptimized,
            A::Inaccessible | A::PersistentLoss | A::Change => Group::Inaccessible,
        }
    }
}

/// Where a path stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Active,
    /// Taken out; a reconnection is tried at `retry_at`.
    Failed {
        retry_at: Instant,
    },
    /// A reconnection is under way.
    Reinstating,
}

/// The selector's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub policy: Policy,
    pub failback: Failback,
    /// How long I/O waits, queued, while no path is usable before it fails (dm's
    /// `queue_if_no_path` with a limit).
    pub no_path_retry: Duration,
    /// The first wait before a failed path is retried; each failed retry doubles it, up to
    /// `max_backoff`.
    pub backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policy: Policy::ServiceTime,
            failback: Failback::Immediate,
            no_path_retry: Duration::from_secs(30),
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
        }
    }
}

/// Weight of a new throughput sample in the moving average.
const ALPHA: f64 = 0.1;

/// Service-time: estimates within this factor of each other are the same throughput (dm's
/// equal `relative_throughput`: the less loaded path, turns among equals). Two equal paths'
/// estimates differ by their latencies' noise; compared exactly, the one a little ahead took
/// every I/O at low load and the other, sent nothing, was never measured again.
const RATE_TIE: f64 = 1.25;

/// Service-time: the estimate of a usable path not picked for this long (ns) is stale and
/// becomes the other paths' mean. One slow moment must not keep a path idle for good: an
/// idle path is measured by nothing. Not a forced probe: the first I/O on a path idle that
/// long is slow for being idle (a sleeping receiver, cold caches), and taken alone as the
/// new estimate it would confirm the old one. By time, not by count: a slower path measured
/// anew takes a few I/Os each time (until its estimate falls out of [`RATE_TIE`]), which
/// once a second is nothing at any rate, where once per 256 picks was 1-2 % of them, enough
/// to move a p99. dm-multipath's path checker looks every 5 s.
const STALE_AFTER_NS: u64 = 1_000_000_000;

#[derive(Clone, Debug)]
struct Path {
    state: State,
    group: Group,
    backoff: Duration,
    outstanding: u32,
    in_flight_bytes: u64,
    /// Estimated throughput, bytes per nanosecond.
    rate: Option<f64>,
    /// When this path was last picked (the clock of [`Selector::tick`]).
    last_pick_ns: u64,
}

/// The path selector of one queue.
#[derive(Clone, Debug)]
pub struct Selector {
    cfg: Config,
    paths: Vec<Path>,
    /// Round-robin's next path, and the tie-break start of the other two (so equal paths share).
    next: usize,
    /// The group I/O goes to (failback manual keeps it while it has a usable path).
    current: Option<Group>,
    /// Since when no path has been usable.
    no_path_since: Option<Instant>,
    /// The time as last told ([`tick`](Self::tick)), ns from the caller's epoch.
    now_ns: u64,
}

impl Selector {
    /// `n` active, optimized paths.
    pub fn new(n: usize, cfg: Config) -> Selector {
        let path = Path {
            state: State::Active,
            group: Group::Optimized,
            backoff: cfg.backoff,
            outstanding: 0,
            in_flight_bytes: 0,
            rate: None,
            last_pick_ns: 0,
        };
        Selector {
            cfg,
            paths: vec![path; n],
            next: 0,
            current: (n > 0).then_some(Group::Optimized),
            no_path_since: None,
            now_ns: 0,
        }
    }

    /// The time, in ns from the caller's epoch (the queue's, once per batch it routes): what
    /// service-time's stale estimates are judged by. Never told, nothing goes stale.
    pub fn tick(&mut self, now_ns: u64) {
        self.now_ns = now_ns;
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn len(&self) -> usize {
        self.paths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    pub fn state(&self, p: usize) -> State {
        self.paths[p].state
    }

    pub fn outstanding(&self, p: usize) -> u32 {
        self.paths[p].outstanding
    }

    /// Bytes in flight on path `p` (what an I/O sent now queues behind).
    pub fn in_flight_bytes(&self, p: usize) -> u64 {
        self.paths[p].in_flight_bytes
    }

    /// The throughput estimate of path `p` in bytes per second, once it has one.
    pub fn rate(&self, p: usize) -> Option<f64> {
        self.paths[p].rate.map(|r| r * 1e9)
    }

    /// Sets path `p`'s access state (an ANA change). An inaccessible path keeps what it has in
    /// flight but gets nothing new.
    pub fn set_group(&mut self, p: usize, g: Group, now: Instant) {
        self.paths[p].group = g;
        self.after_change(now);
    }

    fn usable(&self, p: usize) -> bool {
        let p = &self.paths[p];
        p.state == State::Active && p.group != Group::Inaccessible
    }

    /// Whether any path can take I/O now.
    pub fn any_usable(&self) -> bool {
        (0..self.paths.len()).any(|p| self.usable(p))
    }

    fn best_group(&self) -> Option<Group> {
        (0..self.paths.len())
            .filter(|&p| self.usable(p))
            .map(|p| self.paths[p].group)
            .min()
    }

    /// Keeps the group in use and the no-path clock current after any state change.
    fn after_change(&mut self, now: Instant) {
        let best = self.best_group();
        let keep = self.cfg.failback == Failback::Manual
            && self.current.is_some_and(|g| {
                (0..self.paths.len()).any(|p| self.usable(p) && self.paths[p].group == g)
            });
        if !keep {
            self.current = best;
        }
        match best {
            Some(_) => self.no_path_since = None,
            None => {
                self.no_path_since.get_or_insert(now);
            }
        }
    }

    /// The path for an I/O of `len` bytes, or `None` when no path is usable (the I/O waits).
    ///
    /// Called per I/O: one pass over the paths in rotation order from `next` (so ties are
    /// shared, not always path 0's), the first of equals kept, no division (service times
    /// are compared by cross-multiplying, the rates being positive). Service-time counts
    /// estimates within [`RATE_TIE`] as equal and forgets the estimate of a path left unpicked
    /// for [`STALE_AFTER_NS`] (by the time last told, [`tick`](Self::tick)).
    pub fn pick(&mut self, len: u32) -> Option<usize> {
        let group = self.current?;
        let n = self.paths.len();
        let policy = self.cfg.policy;
        // Service time: the mean of the known rates stands in for a path without one; it is
        // worked out only when such a path is a candidate.
        let mut mean: Option<f64> = None;
        let mut best: Option<(usize, u64, f64)> = None;
        let mut p = self.next;
        for _ in 0..n {
            let path = &self.paths[p];
            if path.state == State::Active && path.group == group && group != Group::Inaccessible {
                match policy {
                    Policy::RoundRobin => {
                        best = Some((p, 0, 0.0));
                        break;
                    }
                    Policy::QueueLength => {
                        let q = u64::from(path.outstanding);
                        if best.is_none_or(|(_, b, _)| q < b) {
                            best = Some((p, q, 0.0));
                        }
                    }
                    Policy::ServiceTime => {
                        if self.now_ns.saturating_sub(path.last_pick_ns) >= STALE_AFTER_NS {
                            self.forget(p);
                            mean = None;
                        }
                        let path = &self.paths[p];
                        let bytes = path.in_flight_bytes + u64::from(len);
                        let rate = match path.rate {
                            Some(r) => r,
                            None => *mean.get_or_insert_with(|| self.mean_rate()),
                        };
                        // bytes / rate < best_bytes / best_rate, without dividing; rates
                        // within RATE_TIE of each other as one.
                        let better = best.is_none_or(|(_, bb, br)| {
                            if rate <= br * RATE_TIE && br <= rate * RATE_TIE {
                                bytes < bb
                            } else {
                                (bytes as f64) * br < (bb as f64) * rate
                            }
                        });
                        if better {
                            best = Some((p, bytes, rate));
                        }
                    }
                }
            }
            p += 1;
            if p == n {
                p = 0;
            }
        }
        let (chosen, _, _) = best?;
        self.next = if chosen + 1 == n { 0 } else { chosen + 1 };
        if policy == Policy::ServiceTime {
            self.paths[chosen].last_pick_ns = self.now_ns;
        }
        Some(chosen)
    }

    /// Path `p`'s estimate is stale: it becomes the mean of the other paths' (kept when none
    /// has one), and the path counts as picked now.
    #[cold]
    fn forget(&mut self, p: usize) {
        if let Some(m) = self.mean_of(Some(p)) {
            self.paths[p].rate = Some(m);
        }
        self.paths[p].last_pick_ns = self.now_ns;
    }

    /// The mean of the paths' throughput estimates (1 when none has one: then all are equal
    /// and service time is least in-flight bytes).
    fn mean_rate(&self) -> f64 {
        self.mean_of(None).unwrap_or(1.0)
    }

    /// The mean of the known estimates, leaving out path `skip`; `None` when none is known.
    fn mean_of(&self, skip: Option<usize>) -> Option<f64> {
        let (sum, k) = (0..self.paths.len())
            .filter(|&q| Some(q) != skip)
            .filter_map(|q| self.paths[q].rate)
            .fold((0.0, 0u32), |(s, k), r| (s + r, k + 1));
        (k > 0).then(|| sum / f64::from(k))
    }

    /// An I/O of `len` bytes went to path `p`.
    pub fn started(&mut self, p: usize, len: u32) {
        let path = &mut self.paths[p];
        path.outstanding += 1;
        path.in_flight_bytes += len as u64;
    }

    /// An I/O of `len` bytes completed on path `p` after `latency`; `ahead` is what
    /// [`in_flight_bytes`](Self::in_flight_bytes) said just before it was started.
    pub fn completed(&mut self, p: usize, len: u32, ahead: u64, latency: Duration) {
        let ns = latency.as_secs() * 1_000_000_000 + u64::from(latency.subsec_nanos());
        self.completed_ns(p, len, ahead, ns);
    }

    /// [`completed`](Self::completed) with the latency in nanoseconds (the queue's form: its
    /// times are nanoseconds from one epoch).
    pub fn completed_ns(&mut self, p: usize, len: u32, ahead: u64, latency_ns: u64) {
        let path = &mut self.paths[p];
        path.outstanding = path.outstanding.saturating_sub(1);
        path.in_flight_bytes = path.in_flight_bytes.saturating_sub(len as u64);
        // A flush moves no data: its time is the device's, not the path's throughput (taken
        // as one, each flush pulled its path's estimate toward zero, and service-time then
        // sent it nothing but flushes).
        if latency_ns > 0 && len > 0 {
            let sample = (ahead + len as u64) as f64 / latency_ns as f64;
            path.rate = Some(match path.rate {
                Some(r) => r + ALPHA * (sample - r),
                None => sample,
            });
        }
    }

    /// Path `p` failed (transport error, timeout): it gets nothing more, and what it had in
    /// flight is the caller's to reissue. Its reconnection is due after its backoff.
    pub fn failed(&mut self, p: usize, now: Instant) {
        let path = &mut self.paths[p];
        path.state = State::Failed {
            retry_at: now + path.backoff,
        };
        path.outstanding = 0;
        path.in_flight_bytes = 0;
        self.after_change(now);
    }

    /// A failed path whose retry is due, now marked reinstating (the caller tries to
    /// reconnect it and reports [`reinstated`](Self::reinstated) or
    /// [`retry_failed`](Self::retry_failed)).
    pub fn due(&mut self, now: Instant) -> Option<usize> {
        let p = self
            .paths
            .iter()
            .position(|p| matches!(p.state, State::Failed { retry_at } if retry_at <= now))?;
        self.paths[p].state = State::Reinstating;
        Some(p)
    }

    /// The earliest instant a failed path is due for a retry.
    pub fn next_retry(&self) -> Option<Instant> {
        self.paths
            .iter()
            .filter_map(|p| match p.state {
                State::Failed { retry_at } => Some(retry_at),
                _ => None,
            })
            .min()
    }

    /// Path `p`'s reconnection failed: the next try waits twice as long (up to the maximum).
    pub fn retry_failed(&mut self, p: usize, now: Instant) {
        let path = &mut self.paths[p];
        path.backoff = (path.backoff * 2).min(self.cfg.max_backoff);
        path.state = State::Failed {
            retry_at: now + path.backoff,
        };
    }

    /// Path `p` is back: active again, its backoff reset; its old throughput estimate is kept
    /// (the same link, most likely).
    pub fn reinstated(&mut self, p: usize, now: Instant) {
        let path = &mut self.paths[p];
        path.state = State::Active;
        path.backoff = self.cfg.backoff;
        self.after_change(now);
    }

    /// Whether queued I/O must now fail: no path has been usable for `no_path_retry`.
    pub fn no_path_expired(&self, now: Instant) -> bool {
        self.no_path_since
            .is_some_and(|t| now.duration_since(t) >= self.cfg.no_path_retry)
    }

    /// When the `no_path_retry` deadline falls, while no path is usable.
    pub fn no_path_deadline(&self) -> Option<Instant> {
        self.no_path_since.map(|t| t + self.cfg.no_path_retry)
    }
}
