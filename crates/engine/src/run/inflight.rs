//! When the coordinator samples the streams' in-flight counts, and the mean in flight (Little's
//! law's L) those samples give.
//!
//! Samples fall at Poisson instants, independent of the I/O (PASTA: Poisson arrivals see time
//! averages), so L is measured apart from the latency stamps (docs/MEASURE.md). Each sample
//! wakes the coordinator, and where the streams keep every core busy that wake-up preempts a
//! stream or its kernel workers: on a 2-core VM, 8 KiB random writes at QD 4 x 2 on a tmpfs
//! file, one stream per CPU, the p99 was 60-64 µs sampling every 2 ms and 35-39 µs every 10 ms or
//! more seldom, at the same median (2026-11-27). So the rate follows the precision the counts ask
//! for: while the first [`LEARN`] samples come, and whenever a stream's count swings, every
//! [`MIN_GAP_NS`] on average; where the counts hold still (a closed loop whose slots stay busy),
//! as seldom as [`MAX_GAP_NS`]. The mean gap is chosen after each sample for a relative
//! standard error of [`TARGET_REL_SE`] over the window: n = CV² / TARGET_REL_SE² samples, the
//! largest coefficient of variation of any stream so far.
//!
//! A rate that changes weighs the periods unequally, so each sample counts with the mean gap
//! that drew it (1 / rate): Σ gap_k x_k / Σ gap_k estimates the time average whatever the rate
//! did (Horvitz-Thompson), where the plain mean of the samples would lean towards the periods
//! sampled fastest. The seeded simulations below measure both.

use crate::gen::Rng;

/// The shortest mean gap: what every sample used before the rate adapted.
pub(super) const MIN_GAP_NS: u64 = 2_000_000;
/// The longest mean gap: the coordinator also wakes at least this often for the intervals.
pub(super) const MAX_GAP_NS: u64 = 20_000_000;
/// The relative standard error of each stream's mean in flight the rate aims at.
pub(super) const TARGET_REL_SE: f64 = 0.01;
/// Samples taken at the shortest gap before the counts' variation decides.
pub(super) const LEARN: u64 = 30;

/// Welford's running mean and variance.
#[derive(Clone, Copy, Default)]
struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// The squared coefficient of variation; 0 for a count that never moved.
    fn cv2(&self) -> f64 {
        if self.n < 2 || self.m2 == 0.0 {
            return 0.0;
        }
        let var = self.m2 / (self.n - 1) as f64;
        if self.mean <= 0.0 {
            f64::INFINITY
        } else {
            var / (self.mean * self.mean)
        }
    }
}

/// The sampling schedule and the weighted sums of the window's samples, one per stream.
pub(super) struct InflightSampler {
    rng: Rng,
    window_ns: u64,
    gap_ns: u64,
    next: u64,
    moments: Vec<Moments>,
    weight: f64,
    sums: Vec<f64>,
    /// Samples inside the window.
    pub(super) count: u64,
}

impl InflightSampler {
    /// A schedule for `streams` counts whose first sample is due a gap after `start_ns`;
    /// `window_ns` is the length the precision is aimed over.
    pub(super) fn new(seed: u64, streams: usize, start_ns: u64, window_ns: u64) -> Self {
        let mut s = InflightSampler {
            rng: Rng::new(seed),
            window_ns: window_ns.max(1),
            gap_ns: MIN_GAP_NS,
            next: 0,
            moments: vec![Moments::default(); streams],
            weight: 0.0,
            sums: vec![0.0; streams],
            count: 0,
        };
        s.next = start_ns + s.draw();
        s
    }

    /// When the next sample is due (ns on the run's clock).
    pub(super) fn next_at(&self) -> u64 {
        self.next
    }

    /// The mean gap in force.
    #[cfg(test)]
    pub(super) fn gap_ns(&self) -> u64 {
        self.gap_ns
    }

    /// Takes the counts read at `now` (one per stream): they teach the schedule always, and
    /// count towards the mean when `in_window`. Draws the next instant.
    pub(super) fn record(&mut self, now: u64, counts: impl Iterator<Item = u64>, in_window: bool) {
        let w = self.gap_ns as f64;
        for ((m, sum), x) in self.moments.iter_mut().zip(&mut self.sums).zip(counts) {
            m.add(x as f64);
            if in_window {
                *sum += w * x as f64;
            }
        }
        if in_window {
            self.weight += w;
            self.count += 1;
        }
        self.gap_ns = self.choose();
        self.next = now + self.draw();
    }

    /// Mean in flight of stream `i` over the window, when anything was sampled.
    pub(super) fn mean(&self, i: usize) -> Option<f64> {
        (self.count > 0).then(|| self.sums[i] / self.weight)
    }

    fn choose(&self) -> u64 {
        let n = self.moments.first().map_or(0, |m| m.n);
        if n < LEARN {
            return MIN_GAP_NS;
        }
        let cv2 = self.moments.iter().map(Moments::cv2).fold(0.0, f64::max);
        let needed = cv2 / (TARGET_REL_SE * TARGET_REL_SE);
        if needed <= 0.0 {
            return MAX_GAP_NS;
        }
        let gap = self.window_ns as f64 / needed;
        (gap as u64).clamp(MIN_GAP_NS, MAX_GAP_NS)
    }

    /// An exponential gap of the mean in force.
    fn draw(&mut self) -> u64 {
        self.rng.exp(self.gap_ns as f64) as u64
    }
}

#[cfg(test)]
#[path = "inflight_tests.rs"]
mod tests;
