//! Wake-up coalescing: how many requests a connection waits for before it wakes.
//!
//! A pipelining client (fio's nbd engine, libnbd) sends one request per system call. A server
//! that wakes for each one pays a sleep, a wake-up, a `recv` and a `send` of one small TCP
//! segment per I/O, and on loopback the `send` also pays the client's TCP receive path. On
//! this project's 2-core VM that is about two thirds of the server's CPU per I/O. Like a NIC's
//! interrupt moderation (`rx-frames` / `rx-usecs`), the connection instead asks the kernel not
//! to wake it until `want` requests' worth of bytes (headers and the running mean of WRITE
//! payloads) have arrived (`SO_RCVLOWAT`), or a short deadline has passed (`ppoll`), and then
//! answers them all with one `send`.
//!
//! Waiting for a batch helps only while the client keeps working meanwhile: a client with 4
//! requests in flight that the server makes wait for 2 of them loses half its throughput here,
//! because client and server then take turns instead of overlapping. How large a batch a
//! client tolerates cannot be read off the requests, so the policy measures it, like the
//! kernel's dynamic interrupt moderation (`net_dim`): it measures the request rate over
//! epochs of a few milliseconds and moves `want` through 1, 2, 4, 8, 16 in the direction that
//! keeps the rate up:
//!
//! * it starts at 1 (a plain blocking read, no deadline) and leaves it only after an epoch in
//!   which a wake-up found two or more requests, which a client waiting for each reply (QD 1)
//!   never produces, so such a client is never delayed;
//! * each epoch it tries the next larger batch and keeps it when the rate stays within
//!   [`MARGIN`] of the better of plain reads and the smaller batch (the same work for fewer
//!   wake-ups); a rate that falls by more than that sends it back, and it then stays put for a
//!   number of epochs that doubles with each failed step up (up to [`MAX_PARK`]), so a shallow
//!   client spends little time at a batch size that slows it;
//! * one epoch in [`REBASE`] it measures plain reads again, since the client's pace changes;
//! * requests of [`LARGE`] bytes or more on average are read plainly: their cost is in the
//!   bytes, not the wake-ups;
//! * a wait that reaches the deadline with less than half the requests wanted drops `want` at
//!   once to what arrived, and one that reaches it with nothing (the client paused) goes back
//!   to plain reads.

use std::time::{Duration, Instant};

use crate::wire::transmission::REQUEST_LEN;

/// Largest batch, as a power of two: 16 requests.
const MAX_LEVEL: u32 = 4;
/// An epoch lasts at least this long and this many waits.
const EPOCH: Duration = Duration::from_millis(10);
const EPOCH_WAITS: u32 = 16;
/// Rates within this fraction of each other count as equal (this VM's noise is about that).
const MARGIN: f64 = 0.15;
/// Requests averaging this many bytes or more are not coalesced: their cost is in the bytes,
/// not the wake-ups, and a client moving them is slow enough to miss any deadline.
const LARGE: u64 = 64 * 1024;
/// One epoch in this many measures the rate with plain reads again.
const REBASE: u32 = 16;
/// Epochs to stay put after a step back, at first and at most.
const MIN_PARK: u32 = 8;
const MAX_PARK: u32 = 256;

/// How the last wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A plain blocking read (`want` was 1).
    Plain,
    /// `want` requests' worth of bytes arrived before the deadline.
    Filled,
    /// The deadline passed with some bytes.
    Short,
    /// The deadline passed with nothing.
    Idle,
}

#[derive(Debug)]
pub(crate) struct Coalesce {
    /// `want` is `1 << level`.
    level: u32,
    /// Epochs left before the next step up.
    park: u32,
    /// Park length after the next step back.
    backoff: u32,
    /// Request rate with plain reads (per second), measured in the last level-0 epoch.
    base: Option<f64>,
    /// Rate and level of the last epoch.
    prev: Option<(f64, u32)>,
    /// Epochs since `base` was measured, and the level to return to after measuring it.
    since_base: u32,
    resume: u32,
    epoch_start: Option<Instant>,
    epoch_found: u64,
    epoch_bytes: u64,
    /// Running mean of WRITE payload bytes per request (weight 1/8): a request's bytes on the
    /// wire, beyond its header, for the low-water mark.
    write_mean: u64,
    epoch_waits: u32,
    /// A wake-up this epoch found two or more requests.
    epoch_pipelined: bool,
    last: Outcome,
}

impl Default for Coalesce {
    fn default() -> Self {
        Coalesce {
            level: 0,
            park: 0,
            backoff: MIN_PARK,
            base: None,
            prev: None,
            since_base: 0,
            resume: 0,
            epoch_start: None,
            epoch_found: 0,
            epoch_bytes: 0,
            write_mean: 0,
            epoch_waits: 0,
            epoch_pipelined: false,
            last: Outcome::Plain,
        }
    }
}

impl Coalesce {
    /// Decides how many requests to wait for next, given the requests taken in since the last
    /// wait ended (`found`, moving `bytes` of READ and WRITE data, `written` of them WRITE
    /// payload) and the time now. 1 means a plain read.
    pub(crate) fn plan(&mut self, found: u32, bytes: u64, written: u64, now: Instant) -> u32 {
        if found > 0 {
            let per = written / u64::from(found);
            self.write_mean = (self.write_mean * 7 + per) / 8;
        }
        match self.last {
            Outcome::Short if found < self.want() / 2 => {
                // The client is far from filling this batch in time: no larger than what came.
                // (A batch nearly filled is left to the epoch's rate to judge: a fast client
                // that is a little slower than the deadline still gains.)
                self.level = found.max(1).ilog2().min(self.level);
                self.step_back();
                self.new_epoch(now);
                return self.want();
            }
            Outcome::Idle => {
                self.level = 0;
                self.base = None;
                self.prev = None;
                self.park = 0;
                self.resume = 0;
                self.new_epoch(now);
                return 1;
            }
            _ => {}
        }
        let start = *self.epoch_start.get_or_insert(now);
        self.epoch_found += u64::from(found);
        self.epoch_bytes += bytes;
        self.epoch_waits += 1;
        self.epoch_pipelined |= found >= 2;
        let elapsed = now.saturating_duration_since(start);
        if self.epoch_waits >= EPOCH_WAITS && elapsed >= EPOCH {
            let rate = self.epoch_found as f64 / elapsed.as_secs_f64();
            self.epoch_end(rate);
            self.new_epoch(now);
        }
        self.want()
    }

    /// Records how the wait planned by the last [`plan`](Self::plan) ended.
    pub(crate) fn done(&mut self, outcome: Outcome) {
        self.last = outcome;
    }

    fn want(&self) -> u32 {
        1 << self.level
    }

    /// Bytes that `want` requests bring on average: the `SO_RCVLOWAT` to wait for.
    pub(crate) fn low_water(&self, want: u32) -> usize {
        want as usize * (REQUEST_LEN + self.write_mean as usize)
    }

    fn new_epoch(&mut self, now: Instant) {
        self.epoch_start = Some(now);
        self.epoch_found = 0;
        self.epoch_bytes = 0;
        self.epoch_waits = 0;
        self.epoch_pipelined = false;
    }

    /// After a step back: no step up for a while, longer each time.
    fn step_back(&mut self) {
        self.prev = None;
        self.park = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_PARK);
        self.resume = 0;
    }

    fn epoch_end(&mut self, rate: f64) {
        let prev = self.prev.replace((rate, self.level));
        if self.epoch_bytes >= LARGE * self.epoch_found.max(1) {
            // Large requests: nothing to gain.
            self.level = 0;
            self.base = None;
            self.resume = 0;
            return;
        }
        if self.level == 0 {
            if !self.epoch_pipelined {
                // Nothing to gather: the client waits for each reply.
                self.base = None;
                return;
            }
            self.base = Some(rate);
            self.since_base = 0;
            if self.resume > 0 {
                self.level = std::mem::take(&mut self.resume);
            } else if self.park > 0 {
                self.park -= 1;
            } else {
                self.level = 1;
            }
            return;
        }
        let Some(base) = self.base else {
            self.level = 0;
            return;
        };
        // The reference is plain reads, or the smaller batch just before if that did better.
        let reference = match prev {
            Some((r, l)) if l < self.level => base.max(r),
            _ => base,
        };
        if rate < reference * (1.0 - MARGIN) {
            // Batches this large slow the client down: one size smaller, and stay there.
            self.level -= 1;
            self.step_back();
        } else if self.park > 0 {
            self.park -= 1;
        } else if self.level < MAX_LEVEL {
            self.level += 1;
        } else {
            self.backoff = (self.backoff / 2).max(MIN_PARK);
        }
        // Re-measure plain reads now and then: the client's pace changes.
        self.since_base += 1;
        if self.since_base >= REBASE && self.level > 0 {
            self.resume = self.level;
            self.level = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives the policy with a client whose request rate at each level is `rates[level]`
    /// (requests per ms, `None` past its queue depth: a wait for that many hits the deadline
    /// with `depth` requests) for `ms` milliseconds. Returns the time spent at each level.
    fn drive(c: &mut Coalesce, rates: &[Option<f64>; 5], depth: u32, ms: u64) -> [f64; 5] {
        let mut now = Instant::now();
        let end = now + Duration::from_millis(ms);
        let mut at = [0.0; 5];
        let mut found = depth.min(2);
        while now < end {
            let want = c.plan(found, 4096 * u64::from(found), 0, now);
            let level = want.ilog2() as usize;
            let (outcome, dt) = match rates[level] {
                Some(r) => {
                    found = if want == 1 { depth.min(2) } else { want };
                    let o = if want == 1 {
                        Outcome::Plain
                    } else {
                        Outcome::Filled
                    };
                    (o, found as f64 / r)
                }
                None => {
                    found = depth;
                    (Outcome::Short, 0.1)
                }
            };
            c.done(outcome);
            at[level] += dt;
            now += Duration::from_secs_f64(dt / 1000.0);
        }
        let total: f64 = at.iter().sum();
        at.map(|t| t / total)
    }

    #[test]
    fn a_client_waiting_for_each_reply_is_never_delayed() {
        let mut c = Coalesce::default();
        let mut now = Instant::now();
        for _ in 0..100_000 {
            assert_eq!(c.plan(1, 4096, 0, now), 1);
            c.done(Outcome::Plain);
            now += Duration::from_micros(40);
        }
    }

    #[test]
    fn a_deep_queue_that_gains_from_batches_settles_at_the_largest() {
        let mut c = Coalesce::default();
        let rates = [
            Some(95.0),
            Some(97.0),
            Some(100.0),
            Some(104.0),
            Some(105.0),
        ];
        let at = drive(&mut c, &rates, 32, 5_000);
        assert!(at[4] > 0.9, "time at 16: {at:?}");
    }

    #[test]
    fn a_shallow_queue_slowed_by_batches_stays_at_plain_reads() {
        let mut c = Coalesce::default();
        // fio at QD 4 here: 83k IOPS with plain reads, 49k when made to wait for 2.
        let rates = [Some(83.0), Some(49.0), Some(45.0), None, None];
        let at = drive(&mut c, &rates, 4, 60_000);
        assert!(at[0] > 0.95, "time at plain reads: {at:?}");
    }

    #[test]
    fn the_low_water_mark_counts_write_payloads() {
        let mut c = Coalesce::default();
        let now = Instant::now();
        assert_eq!(c.low_water(4), 4 * REQUEST_LEN);
        for _ in 0..100 {
            c.plan(8, 8 * 4096, 8 * 4096, now);
            c.done(Outcome::Filled);
        }
        // Converges on header + 4 KiB per request (the running mean rounds down).
        let per = c.low_water(1);
        assert!(
            (REQUEST_LEN + 4000..=REQUEST_LEN + 4096).contains(&per),
            "{per}"
        );
        for _ in 0..100 {
            c.plan(8, 8 * 4096, 0, now);
            c.done(Outcome::Filled);
        }
        assert!(c.low_water(1) < REQUEST_LEN + 64, "{}", c.low_water(1));
    }

    #[test]
    fn large_requests_are_never_coalesced() {
        let mut c = Coalesce::default();
        let mut now = Instant::now();
        for _ in 0..10_000 {
            assert_eq!(c.plan(4, 4 << 20, 0, now), 1);
            c.done(Outcome::Plain);
            now += Duration::from_micros(400);
        }
    }

    #[test]
    fn a_slow_start_does_not_hide_that_batches_slow_the_client() {
        let mut c = Coalesce::default();
        // The first epochs ran while the client was still starting up.
        drive(
            &mut c,
            &[Some(50.0), Some(55.0), Some(45.0), None, None],
            4,
            30,
        );
        let at = drive(
            &mut c,
            &[Some(88.0), Some(50.0), Some(45.0), None, None],
            4,
            60_000,
        );
        assert!(at[0] > 0.95, "time at plain reads: {at:?}");
    }

    #[test]
    fn a_queue_that_tolerates_some_batching_settles_there() {
        let mut c = Coalesce::default();
        // QD 16: batches of 4 help, 8 and 16 make the client wait.
        let rates = [Some(95.0), Some(98.0), Some(103.0), Some(80.0), Some(70.0)];
        let at = drive(&mut c, &rates, 16, 60_000);
        assert!(at[2] > 0.85, "time at 4: {at:?}");
    }

    /// Drives a deep client until the policy waits for 16 requests.
    fn at_the_top() -> (Coalesce, Instant) {
        let mut c = Coalesce::default();
        let mut now = Instant::now();
        let mut found = 2;
        while c.plan(found, 4096 * u64::from(found), 0, now) < 16 {
            found = c.want().max(2);
            c.done(if c.want() == 1 {
                Outcome::Plain
            } else {
                Outcome::Filled
            });
            now += Duration::from_micros(10 * u64::from(found));
        }
        (c, now)
    }

    #[test]
    fn a_deadline_with_a_short_batch_drops_at_once() {
        let (mut c, now) = at_the_top();
        c.done(Outcome::Short);
        assert_eq!(c.plan(5, 5 * 4096, 0, now), 4);
    }

    #[test]
    fn a_deadline_with_a_nearly_full_batch_is_left_to_the_rate() {
        let (mut c, now) = at_the_top();
        c.done(Outcome::Short);
        assert_eq!(c.plan(12, 12 * 4096, 0, now), 16);
    }

    #[test]
    fn a_pause_goes_back_to_plain_reads() {
        let (mut c, now) = at_the_top();
        c.done(Outcome::Idle);
        assert_eq!(c.plan(0, 0, 0, now), 1);
    }
}
