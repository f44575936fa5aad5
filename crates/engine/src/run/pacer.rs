//! The open-loop schedule: when each I/O of a stream is meant to be issued.
//!
//! Times are nanoseconds on the run's clock, passed in (as the NBD server's coalescing policy
//! takes them), so the schedule is tested without sleeping. The schedule is fixed at the
//! start and never re-based: a generator that falls behind issues the overdue I/Os at once,
//! and each keeps its intended time, from which its response time is measured (wrk2's answer
//! to coordinated omission). Arrivals are `Fixed` (every 1/rate) or `Poisson` (exponential
//! gaps of mean 1/rate, from a seeded generator, so a run is repeatable).

use crate::gen::Rng;

pub use sanbench_doc::spec::Arrival;

/// One stream's schedule.
#[derive(Clone, Debug)]
pub struct Pacer {
    arrival: Arrival,
    /// Mean gap in ns, as a float so rates that do not divide a second stay exact on average.
    gap: f64,
    /// The next intended time (ns since the run's start), kept as a float sum for `Fixed`.
    next: f64,
    rng: Rng,
}

impl Pacer {
    /// `rate` I/Os per second for this stream, the first at `start_ns` (+ one draw for
    /// Poisson). Streams of one target start at staggered offsets so fixed arrivals of
    /// several workers interleave instead of coinciding.
    pub fn new(arrival: Arrival, rate: f64, start_ns: u64, seed: u64) -> Pacer {
        let gap = 1e9 / rate.max(1e-9);
        let mut p = Pacer {
            arrival,
            gap,
            next: start_ns as f64,
            rng: Rng::new(seed ^ 0x0a77_17a1),
        };
        if arrival == Arrival::Poisson {
            p.next += p.draw();
        }
        p
    }

    /// An exponential gap of mean `gap`.
    fn draw(&mut self) -> f64 {
        self.rng.exp(self.gap)
    }

    /// The intended time of the next I/O.
    #[inline]
    pub fn next_ns(&self) -> u64 {
        self.next as u64
    }

    /// Takes the next intended time and moves the schedule one I/O on.
    #[inline]
    pub fn take(&mut self) -> u64 {
        let t = self.next as u64;
        self.next += match self.arrival {
            Arrival::Fixed => self.gap,
            Arrival::Poisson => self.draw(),
        };
        t
    }

    /// Mean gap between I/Os in ns.
    pub fn gap_ns(&self) -> f64 {
        self.gap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_arrivals_are_exact_and_never_rebase() {
        let mut p = Pacer::new(Arrival::Fixed, 3000.0, 1_000, 1);
        let ts: Vec<u64> = (0..4).map(|_| p.take()).collect();
        assert_eq!(ts, vec![1_000, 334_333, 667_666, 1_001_000]);
        // A million arrivals at 3000/s end at 333.33 s, to the nanosecond budget of a float.
        for _ in 4..1_000_000 {
            p.take();
        }
        let end = p.next_ns() as f64 - 1_000.0;
        assert!((end - 1e6 / 3000.0 * 1e9).abs() < 1e3, "{end}");
    }

    #[test]
    fn poisson_arrivals_have_the_asked_rate_and_exponential_gaps() {
        let mut p = Pacer::new(Arrival::Poisson, 10_000.0, 0, 7);
        let n = 200_000;
        let mut last = p.take();
        let mut gaps = Vec::with_capacity(n);
        for _ in 0..n {
            let t = p.take();
            gaps.push((t - last) as f64);
            last = t;
        }
        let mean = gaps.iter().sum::<f64>() / n as f64;
        assert!(
            (mean - 100_000.0).abs() / 100_000.0 < 0.01,
            "mean gap {mean}"
        );
        // Exponential: P(gap > mean) = 1/e, and the coefficient of variation is 1.
        let above = gaps.iter().filter(|&&g| g > 100_000.0).count() as f64 / n as f64;
        assert!((above - (-1f64).exp()).abs() < 0.01, "{above}");
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((var.sqrt() / mean - 1.0).abs() < 0.02);
        // Seeded: the same seed gives the same schedule.
        let mut a = Pacer::new(Arrival::Poisson, 500.0, 0, 3);
        let mut b = Pacer::new(Arrival::Poisson, 500.0, 0, 3);
        assert!((0..100).all(|_| a.take() == b.take()));
    }

    #[test]
    fn arrival_names_parse() {
        assert_eq!("fixed".parse::<Arrival>(), Ok(Arrival::Fixed));
        assert_eq!("poisson".parse::<Arrival>(), Ok(Arrival::Poisson));
        assert!("burst".parse::<Arrival>().is_err());
    }
}
