//! Emulated device latency (`sanbench serve ... --delay D[,JITTER]`): a known floor under every
//! I/O, so tests and users have ground truth for what a client should measure.
//!
//! # Semantics
//!
//! Each I/O (read, write, flush, trim, write zeroes...) is carried out when its request has
//! arrived, and only its reply is held: it leaves no sooner than `D` after the request was
//! received (its last byte read from the socket), plus, with `JITTER`, a uniform random extra
//! in `[0, JITTER]` drawn per I/O. Replies are held per connection in a [`DueQueue`]
//! and the connection's loop waits for the next request or the earliest due reply, whichever
//! comes first: held replies do not hold up the requests behind them, so a client with 32
//! requests in flight against a 1 ms delay still completes about 32 per millisecond (unlike
//! a server that slept in its one thread per connection). Delayed replies may overtake one
//! another when jitter is given (a device completes out of order too).
//!
//! The extra is drawn from SplitMix64 seeded with the connection's number on its server (the
//! first connection accepted is 0): the same sequence of connections and requests gets the
//! same delays, run after run.
//!
//! # Why here
//!
//! The NBD server and the iSCSI and NVMe/TCP targets all hold replies the same way; the queue
//! is sans-I/O (the time is passed in), so its policy is tested with an injected clock, and
//! each server keeps its socket waiting in its own loop. A server without a delay keeps no
//! queue (`Option::None`): its data path is unchanged.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use thiserror::Error;

/// The longest delay (and the longest delay plus jitter) a server accepts: anything longer is
/// more likely a typo (`5` meaning seconds) than a device to emulate, and would trip clients'
/// I/O timeouts.
pub const MAX_DELAY: Duration = Duration::from_secs(60);

/// Why a delay was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DelayError {
    #[error("jitter {jitter:?} needs a delay above 0 (give D,JITTER)")]
    JitterWithoutDelay { jitter: Duration },
    #[error("a delay of {total:?} (with its jitter) is above the limit of {MAX_DELAY:?}")]
    TooLong { total: Duration },
}

/// A reply delay: `base` plus a uniform extra in `[0, jitter]` per I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delay {
    base: Duration,
    jitter: Duration,
}

impl Delay {
    /// A delay of `base` plus up to `jitter`, or `None` when both are 0 (no delay at all).
    pub fn new(base: Duration, jitter: Duration) -> Result<Option<Delay>, DelayError> {
        if base.is_zero() {
            if !jitter.is_zero() {
                return Err(DelayError::JitterWithoutDelay { jitter });
            }
            return Ok(None);
        }
        let total = base.saturating_add(jitter);
        if total > MAX_DELAY {
            return Err(DelayError::TooLong { total });
        }
        Ok(Some(Delay { base, jitter }))
    }

    pub fn base(&self) -> Duration {
        self.base
    }

    pub fn jitter(&self) -> Duration {
        self.jitter
    }
}

impl std::fmt::Display for Delay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.base)?;
        if !self.jitter.is_zero() {
            write!(f, " + up to {:?}", self.jitter)?;
        }
        Ok(())
    }
}

/// A reply waiting for its time. Ordered by due time, then by arrival, so equal times leave
/// in the order they came.
struct Held<T> {
    due: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Held<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.due, self.seq) == (o.due, o.seq)
    }
}

impl<T> Eq for Held<T> {}

impl<T> PartialOrd for Held<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl<T> Ord for Held<T> {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.due, self.seq).cmp(&(o.due, o.seq))
    }
}

/// One connection's held replies (see the module docs). The caller passes the time in.
pub struct DueQueue<T> {
    delay: Delay,
    rng: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<Held<T>>>,
}

impl<T> DueQueue<T> {
    /// The queue of connection number `conn` (its seed; see the module docs).
    pub fn new(delay: Delay, conn: u64) -> DueQueue<T> {
        DueQueue {
            delay,
            rng: conn,
            seq: 0,
            heap: BinaryHeap::new(),
        }
    }

    /// Holds the reply to a request received at `arrived`; returns when it is due.
    pub fn hold(&mut self, arrived: Instant, item: T) -> Instant {
        let due = arrived + self.delay.base + self.extra();
        self.heap.push(Reverse(Held {
            due,
            seq: self.seq,
            item,
        }));
        self.seq += 1;
        due
    }

    /// The earliest reply due at `now` or before, if any.
    pub fn pop_due(&mut self, now: Instant) -> Option<T> {
        if self.heap.peek()?.0.due > now {
            return None;
        }
        self.heap.pop().map(|Reverse(h)| h.item)
    }

    /// When the earliest held reply is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(h)| h.due)
    }

    /// How long a connection may wait for requests at `now` before a reply falls due: the
    /// time to the earliest one, at most `cap` (the loop's usual wait), zero when one is due.
    pub fn wait(&self, now: Instant, cap: Duration) -> Duration {
        self.next_due()
            .map_or(cap, |d| d.saturating_duration_since(now).min(cap))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The jitter's extra for the next reply: uniform over whole nanoseconds in
    /// `[0, jitter]` (the modulo's bias is below 2^-24 for any jitter up to [`MAX_DELAY`]).
    fn extra(&mut self) -> Duration {
        let j = self.delay.jitter.as_nanos() as u64;
        if j == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.next_u64() % (j + 1))
    }

    /// SplitMix64 (Steele, Lea, Flood 2014): one add and a mix per draw, and any seed works.
    fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn delay(base: Duration, jitter: Duration) -> Delay {
        Delay::new(base, jitter).unwrap().unwrap()
    }

    #[test]
    fn bad_delays_are_refused_and_zero_is_none() {
        assert_eq!(Delay::new(Duration::ZERO, Duration::ZERO), Ok(None));
        assert_eq!(
            Delay::new(Duration::ZERO, ms(1)),
            Err(DelayError::JitterWithoutDelay { jitter: ms(1) })
        );
        assert!(matches!(
            Delay::new(ms(60_001), Duration::ZERO),
            Err(DelayError::TooLong { .. })
        ));
        assert!(matches!(
            Delay::new(ms(30_000), ms(30_001)),
            Err(DelayError::TooLong { .. })
        ));
        assert!(Delay::new(MAX_DELAY, Duration::ZERO).unwrap().is_some());
    }

    /// Replies leave at arrival + D, not one D after the previous reply: 32 requests that
    /// arrive together all leave together, one D later.
    #[test]
    fn replies_wait_their_delay_in_parallel_not_in_turn() {
        let t0 = Instant::now();
        let mut q = DueQueue::new(delay(ms(1), Duration::ZERO), 0);
        for i in 0..32u32 {
            assert_eq!(q.hold(t0, i), t0 + ms(1));
        }
        assert_eq!(q.pop_due(t0), None);
        assert_eq!(q.pop_due(t0 + Duration::from_micros(999)), None);
        assert_eq!(q.wait(t0, ms(100)), ms(1));
        let got: Vec<u32> = std::iter::from_fn(|| q.pop_due(t0 + ms(1))).collect();
        assert_eq!(
            got,
            (0..32).collect::<Vec<_>>(),
            "all due, in arrival order"
        );
        assert!(q.is_empty());
        assert_eq!(q.wait(t0, ms(100)), ms(100), "nothing held: the usual wait");
    }

    /// A simulated pipelining client at queue depth `qd` against the queue: each reply it
    /// gets is answered with a new request at once; the connection's loop sleeps exactly
    /// `wait` and takes in requests on waking. Returns I/Os completed per ms and their mean
    /// latency in ms.
    fn pipelined(d: Delay, qd: u32, ms_run: u64) -> (f64, f64) {
        let t0 = Instant::now();
        let end = t0 + ms(ms_run);
        let mut q = DueQueue::new(d, 7);
        for _ in 0..qd {
            q.hold(t0, t0);
        }
        let (mut now, mut done, mut lat) = (t0, 0u64, Duration::ZERO);
        while now < end {
            now += q.wait(now, ms(100));
            while let Some(sent) = q.pop_due(now) {
                done += 1;
                lat += now - sent;
                q.hold(now, now);
            }
        }
        (
            done as f64 / ms_run as f64,
            lat.as_secs_f64() * 1e3 / done as f64,
        )
    }

    #[test]
    fn a_deep_queue_completes_depth_per_delay() {
        let (rate, mean) = pipelined(delay(ms(1), Duration::ZERO), 32, 1_000);
        assert!((31.0..=32.0).contains(&rate), "{rate} I/Os per ms");
        assert!((mean - 1.0).abs() < 1e-9, "mean latency {mean} ms");
        let (rate1, _) = pipelined(delay(ms(1), Duration::ZERO), 1, 1_000);
        assert!((0.99..=1.0).contains(&rate1), "{rate1} I/Os per ms at QD 1");
    }

    #[test]
    fn jitter_is_uniform_within_its_bounds_and_seeded() {
        let t0 = Instant::now();
        let d = delay(ms(2), ms(1));
        let mut q = DueQueue::new(d, 3);
        let n = 100_000;
        let mut sum = 0.0;
        let mut buckets = [0u32; 10];
        let mut first = Vec::new();
        for i in 0..n {
            let extra = q.hold(t0, ()) - t0 - ms(2);
            assert!(extra <= ms(1), "{extra:?}");
            let x = extra.as_secs_f64() * 1e3;
            sum += x;
            buckets[((x * 10.0) as usize).min(9)] += 1;
            if i < 16 {
                first.push(extra);
            }
        }
        let mean = sum / f64::from(n);
        assert!((mean - 0.5).abs() < 0.01, "mean extra {mean} ms");
        for b in buckets {
            assert!((9_000..11_000).contains(&b), "{buckets:?}");
        }
        // The same connection number draws the same extras; another draws others.
        let mut again = DueQueue::new(d, 3);
        let mut other = DueQueue::new(d, 4);
        let a: Vec<_> = (0..16).map(|_| again.hold(t0, ()) - t0 - ms(2)).collect();
        let b: Vec<_> = (0..16).map(|_| other.hold(t0, ()) - t0 - ms(2)).collect();
        assert_eq!(a, first);
        assert_ne!(b, first);
    }

    #[test]
    fn with_jitter_each_reply_leaves_at_its_own_time() {
        let t0 = Instant::now();
        let mut q = DueQueue::new(delay(ms(1), ms(1)), 0);
        let dues: Vec<Instant> = (0..64u32).map(|i| q.hold(t0, i)).collect();
        let mut now = t0;
        let mut seen = 0;
        while !q.is_empty() {
            now += q.wait(now, ms(100));
            while let Some(i) = q.pop_due(now) {
                assert_eq!(dues[i as usize], now, "reply {i} left at its due time");
                seen += 1;
            }
        }
        assert_eq!(seen, 64);
        assert!(now <= t0 + ms(2));
    }

    #[test]
    fn the_wait_never_passes_the_earliest_due() {
        let t0 = Instant::now();
        let mut q = DueQueue::new(delay(ms(5), Duration::ZERO), 0);
        q.hold(t0 + ms(3), ());
        assert_eq!(q.wait(t0, ms(100)), ms(8));
        assert_eq!(q.wait(t0, ms(2)), ms(2), "capped at the loop's usual wait");
        assert_eq!(q.wait(t0 + ms(9), ms(100)), Duration::ZERO, "overdue");
        assert_eq!(q.len(), 1);
    }
}
