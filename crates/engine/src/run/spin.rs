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

#[cfg(test)]
mod tests {
    use super::*;

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
