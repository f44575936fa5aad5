//! How long before an open-loop arrival the stream stops sleeping and spins.
//!
//! A sleeping thread wakes late: by the timer's resolution, the scheduler's latency, and on a
//! busy host by whatever runs on its core. Spinning the last stretch before an arrival hides
//! that lateness from the schedule (the issue lag), but a spinning generator burns the core a
//! target on the same host could use, and inflates the generator's own CPU per I/O. A fixed
//! window has to be sized for the worst host; at 20,000 I/Os per second a 150 µs window spins
//! all the time. So the window follows the lateness this stream actually sees: a decaying
//! maximum of the observed oversleep, plus a margin, between [`MIN_NS`] and [`MAX_NS`]. On an
//! idle host that is a few tens of µs; a burst of late wake-ups widens it at once, and it
//! narrows again over a few hundred quiet waits. Time is passed in, so the policy is tested
//! without a clock (the shape of `nbd/src/server/coalesce.rs`).

/// The narrowest window: below this a spin saves nothing a timer could not.
pub(super) const MIN_NS: u64 = 10_000;
/// The widest window (the old fixed value): enough for the p99 oversleep of a loaded VM.
pub(super) const MAX_NS: u64 = 150_000;
/// Added to the estimated lateness: a wake-up is rarely later than the worst recently seen
/// by more than this.
const MARGIN_NS: u64 = 5_000;
/// The estimate loses 1/DECAY of itself per observed wait that was on time.
const DECAY: u64 = 256;

/// The spin window of one stream.
#[derive(Clone, Debug)]
pub(super) struct Spin {
    /// Decaying maximum of observed lateness (ns).
    late: u64,
}

impl Default for Spin {
    fn default() -> Self {
        // Start wide: the first arrivals are on time, and the estimate narrows from there.
        Spin { late: MAX_NS }
    }
}

impl Spin {
    /// Nanoseconds before an arrival at which to stop sleeping.
    pub(super) fn window_ns(&self) -> u64 {
        (self.late + MARGIN_NS).clamp(MIN_NS, MAX_NS)
    }

    /// One timed wait that was meant to end at `wake_ns` ended at `now_ns` (no completion
    /// ended it early). Waits that started past their end are not observations.
    pub(super) fn observe(&mut self, wake_ns: u64, now_ns: u64) {
        let late = now_ns.saturating_sub(wake_ns);
        self.late = late.max(self.late - self.late / DECAY);
    }
}

/// The longest an idle pass of the spin counts: one look for completions (a ring's peek, a
/// socket's receive that finds nothing, a poll of several paths) takes a few µs; a pass
/// longer than this was preempted or descheduled, and counts this much.
pub(super) const IDLE_PASS_CAP_NS: u64 = 20_000;

/// One open-loop pass, as [`Pacing`] judges it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pass {
    /// When the pass started (the loop's first clock reading).
    pub(super) top: u64,
    /// When it sent what it issued.
    pub(super) now: u64,
    /// The next arrival (or the window's end).
    pub(super) next: u64,
    /// It waited (slept in the engine's wait or the thread's sleep) rather than spun.
    pub(super) waits: bool,
    /// It issued an I/O.
    pub(super) issued: bool,
}

/// The time a stream spins for its next arrival inside the window: the generator keeping its
/// schedule, not work the I/O needed (CPU efficiency leaves it out). A pass is idle when it
/// issued nothing, did not wait, and the next arrival is still ahead (an arrival held back by
/// the queue-depth cap polls for a completion: the stream is behind its schedule, not keeping
/// it); one that reaped something never reaches [`Pacing::end`]. An idle pass counts from its
/// start to the next pass's, at most [`IDLE_PASS_CAP_NS`]; none before `ramp_ns`. No clock is
/// read for it beyond the loop's own.
#[derive(Clone, Debug, Default)]
pub(super) struct Pacing {
    /// The start of the last pass, when it was idle.
    idle_since: Option<u64>,
    pub(super) ns: u64,
}

impl Pacing {
    /// A pass starts at `top`: the last one, when idle, ended here.
    pub(super) fn start(&mut self, top: u64) {
        if let Some(p) = self.idle_since.take() {
            self.ns += top.saturating_sub(p).min(IDLE_PASS_CAP_NS);
        }
    }

    /// A pass that reaped nothing ends.
    pub(super) fn end(&mut self, p: Pass, ramp_ns: u64) {
        if !p.waits && !p.issued && p.next > p.now && p.top >= ramp_ns {
            self.idle_since = Some(p.top);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_counts_the_spins_idle_passes_only() {
        let idle = |top: u64| Pass {
            top,
            now: top + 100,
            next: top + 50_000,
            waits: false,
            issued: false,
        };
        let mut m = Pacing::default();
        // Three idle passes of 2 µs, then the one that issues the arrival.
        for k in 0..3 {
            m.start(900_000 + k * 2_000);
            m.end(idle(900_000 + k * 2_000), 0);
        }
        m.start(906_000);
        assert_eq!(m.ns, 6_000);
        m.end(
            Pass {
                issued: true,
                ..idle(906_000)
            },
            0,
        );
        // A pass that sleeps until shortly before the next arrival: not pacing, however long.
        m.start(907_000);
        m.end(
            Pass {
                waits: true,
                ..idle(907_000)
            },
            0,
        );
        m.start(1_950_000);
        assert_eq!(m.ns, 6_000);
        // Held back by the depth cap (the arrival is due): polling, not pacing.
        m.end(
            Pass {
                next: 1_950_100,
                ..idle(1_950_000)
            },
            0,
        );
        m.start(1_951_000);
        assert_eq!(m.ns, 6_000);
        // A pass preempted for 5 ms counts the cap.
        m.end(idle(1_951_000), 0);
        m.start(6_951_000);
        assert_eq!(m.ns, 6_000 + IDLE_PASS_CAP_NS);
        // Nothing during the ramp.
        let mut m = Pacing::default();
        m.end(idle(10_000), 50_000);
        m.start(12_000);
        assert_eq!(m.ns, 0);
    }

    #[test]
    fn narrows_on_a_quiet_host_and_widens_at_once_when_wake_ups_come_late() {
        let mut s = Spin::default();
        assert_eq!(s.window_ns(), MAX_NS);
        // Wake-ups 3 µs late: the window settles near 3 + 5 µs, floored at MIN_NS.
        let mut t = 0;
        for _ in 0..5_000 {
            t += 200_000;
            s.observe(t, t + 3_000);
        }
        assert_eq!(s.window_ns(), MIN_NS);
        // 40 µs late once: the next window covers it.
        s.observe(t, t + 40_000);
        assert_eq!(s.window_ns(), 45_000);
        // A 3 ms stall is capped.
        s.observe(t, t + 3_000_000);
        assert_eq!(s.window_ns(), MAX_NS);
    }

    #[test]
    fn decays_over_hundreds_of_waits_not_one() {
        let mut s = Spin::default();
        for i in 0..10_000 {
            s.observe(i, i);
        }
        assert_eq!(s.window_ns(), MIN_NS);
        s.observe(0, 100_000);
        assert_eq!(s.window_ns(), MAX_NS.min(105_000));
        for i in 0..DECAY {
            s.observe(i, i);
        }
        // After DECAY on-time waits the estimate keeps about 1/e of itself.
        let w = s.window_ns();
        assert!((35_000..45_000).contains(&w), "{w}");
    }

    #[test]
    fn early_returns_do_not_count_as_lateness() {
        let mut s = Spin::default();
        s.observe(1_000_000, 500);
        assert!(s.window_ns() <= MAX_NS);
        for _ in 0..10_000 {
            s.observe(1_000_000, 999_000);
        }
        assert_eq!(s.window_ns(), MIN_NS);
    }
}
