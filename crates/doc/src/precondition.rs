//! The precondition block of a result: whether the span held written data before the window.

use sanbench_io::Allocation;
use serde::{Deserialize, Serialize};

/// What a result says about its span.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SpanState {
    /// sanbench wrote the whole span (in this run, or earlier in this comparison).
    Preconditioned,
    /// The target reports every byte of the span as written.
    ReportedWritten,
    /// The target reports never-written space in the span.
    Holes,
    /// Nobody can tell: the span may hold holes.
    #[default]
    Unknown,
}

/// The precondition block of a result (`precondition` of each target's result).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Report {
    /// The mode asked for: "auto", "none", "fill" or a number of passes.
    pub mode: String,
    pub state: SpanState,
    /// Whether the span was written by sanbench before this result's window.
    pub preconditioned: bool,
    /// The fill's figures (zero when none ran; a comparison reports its one fill in every
    /// cell of the target).
    pub passes: u32,
    pub block_size: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub purged: bool,
    /// What the target reported about holes, where it can tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Allocation>,
    /// One sentence for people.
    pub note: String,
}

impl Report {
    /// A read workload over space that may be unwritten deserves a warning.
    pub fn warning(&self, reads: bool) -> Option<String> {
        (reads && matches!(self.state, SpanState::Holes)).then(|| self.note.clone())
    }
}
