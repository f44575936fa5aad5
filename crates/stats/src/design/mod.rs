//! The design of a comparison, in one sans-I/O place: the run order (a Williams design,
//! [`williams`]), the verdicts on each question with its interval ([`analysis`]), when to stop
//! and what each look may spend ([`plan`]), and the seeded simulation that measures their error
//! rates ([`sim`]). `compare` and `demo` only drive a [`plan::Plan`]; the report judges the
//! finished comparison with the same [`analysis`].

pub mod analysis;
mod lsq;
pub mod plan;
mod rng;
pub mod sim;
pub mod williams;

pub use rng::Rng;

/// `--max-repeat`'s default for `--repeat auto`.
pub const DEFAULT_MAX_REPEAT: u32 = 30;

/// The power for a true 1.3x that the simulation test holds the default design to (the share
/// of the effect's questions decided in the right direction with the truth inside the
/// interval, demo-shaped comparisons, noise 0.05-0.15 per cell). The goal is 0.90; see
/// docs/MEASURE.md for the figure measured.
pub const POWER_1_3X_FLOOR: f64 = 0.90;
