//! Statistics for sanbench, kept pure: no clocks, no I/O, no threads (and, in `time`, the one
//! timestamp format every document uses; in [`poison`], the one lock-poison helper, here
//! because the engine and the monitor both depend on this crate and on nothing else in common).
//!
//! Everything here takes numbers and returns numbers so that it can be tested exactly. The
//! definitions follow `docs/MEASURE.md`: latency percentiles come from a log-linear histogram
//! with three significant digits (< 0.1 % relative error), the Little's-law check compares
//! `IOPS × mean latency` with the number of I/Os kept outstanding, steady state follows the SNIA
//! PTS criteria, and repeated runs are summarised as mean ± a Student-t 95 % confidence interval.

pub mod design;
pub mod hist_log;
mod histogram;
mod histogram_text;
mod histogram_wire;
pub mod poison;
mod repeat;
mod signif;
mod steady;
pub mod time;

pub use histogram::{LatencyHistogram, LatencySummary};
pub use histogram_wire::HistogramWireError;
pub use repeat::{mean_ci95, ratio_outside_noise, MeanCi};
pub use signif::{holm, student_t_two_sided_p, welch_p};
pub use steady::{steady_state, SteadyState};

/// The Little's-law check of `docs/MEASURE.md`: `|IOPS × mean_latency − L| / L`.
///
/// `outstanding` (L) is the mean number of I/Os in flight, measured on its own (time-weighted,
/// by sampling) and not derived from the latencies; `IOPS × mean latency` (λW) must then agree
/// with it. A gap above 0.10 means time spent outside the target's queue (the generator, or an
/// engine that completes I/Os in batches). Returns `None` when it cannot be computed.
pub fn littles_law_deviation(outstanding: f64, iops: f64, mean_latency_s: f64) -> Option<f64> {
    let usable = outstanding.is_finite()
        && outstanding > 0.0
        && iops.is_finite()
        && iops > 0.0
        && mean_latency_s.is_finite();
    if !usable {
        return None;
    }
    Some(((iops * mean_latency_s) - outstanding).abs() / outstanding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn littles_law_exact() {
        // 32 outstanding, 100k IOPS, 320 µs mean latency: exactly balanced.
        assert!(littles_law_deviation(32.0, 100_000.0, 320e-6).unwrap() < 1e-12);
        // Latency 10 % higher than the law predicts.
        let d = littles_law_deviation(32.0, 100_000.0, 352e-6).unwrap();
        assert!((d - 0.10).abs() < 1e-9);
        assert!(littles_law_deviation(0.0, 1.0, 1.0).is_none());
        assert!(littles_law_deviation(4.0, 0.0, 1.0).is_none());
    }
}
