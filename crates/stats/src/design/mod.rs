//! The design of a comparison, in one sans-I/O place: the run order (a Williams design,
//! [`williams`]), the verdicts on each question with its interval ([`analysis`]), when to stop
//! and what each look may spend ([`plan`]), and the seeded simulation that measures their error
//! rates ([`sim`]). `compare` and `demo` only drive a [`plan::Plan`]; the report judges the
//! finished comparison with the same [`analysis`].

pub mod analysis;
mod interval;
mod lsq;
mod moderate;
mod pair_fit;
mod pair_noise;
pub mod plan;
mod rng;
mod scenario;
pub mod sim;
mod table;
pub mod williams;

pub use rng::Rng;

/// `--max-repeat`'s default for `--repeat auto`.
pub const DEFAULT_MAX_REPEAT: u32 = 30;

/// The power for a true 1.3x that the simulation test holds the default design to (the share
/// of the effect's questions decided in the right direction with the truth inside the
/// interval, demo-shaped comparisons, noise 0.05-0.15 per cell). Issue 22's goal is 0.90, met
/// (0.966) by intervals that did not hold under carry-over or correlated rounds; with the
/// carry-over term and the widening for autocorrelation (issue 40) the figure was 0.856, and
/// 0.821 once the widening's degrees of freedom were made honest (they had been multiplied by
/// the widening's factor squared) and its lag-1 estimate pooled over the pair's workloads, and
/// 0.883 with each pair's variances moderated across its workloads (Smyth 2004), and 0.912
/// with each question's three verdicts tested at its whole error under the partitioning
/// principle (`interval::critical`), which issue 40's goal of 0.90 asks: see
/// docs/BENCHMARKS.md.
pub const POWER_1_3X_FLOOR: f64 = 0.90;
