//! The summary of one interval of `--log-interval` that a result keeps (`intervals[]`).

/// The summary of one interval that the result keeps.
#[derive(
    Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct IntervalSummary {
    /// Start and length in seconds (start since the window's start).
    pub t: f64,
    pub len: f64,
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flush_ios: u64,
    /// Completions that failed (the run ends at the first, so at most one per run).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub errors: u64,
    /// Reads and writes together, in µs.
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Merged from two summaries after the cap was reached (run/summaries.rs): counts and
    /// `max_us` are exact, `p50_us` and `p99_us` the larger of the two parts' (upper bounds).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merged: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
