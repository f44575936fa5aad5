//! The live line and the incremental result of `run` and `compare` (issue 25: watching a run,
//! long runs).

use std::time::Duration;

use clap::{Args, ValueEnum};
use sanbench_engine::units::Dur;

/// Where the progress line goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ProgressMode {
    /// Rewritten in place once a second on a terminal (stderr, or stdout when only it is
    /// one); nothing otherwise.
    #[default]
    Auto,
    /// One line a second appended to stderr, terminal or not (for logs of long runs).
    Lines,
    /// None.
    Never,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = super::H_WATCH)]
pub struct LiveArgs {
    /// The live line: each second the interval's IOPS, MB/s and p99, the time left and the
    /// ETA. auto: in place on a terminal, nothing otherwise; lines: one line a second to
    /// stderr, terminal or not; never. --quiet silences it whatever this says.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto, value_name = "auto|lines|never")]
    pub progress: ProgressMode,
    /// While the window runs, rewrite the result this often (atomically, marked "complete":
    /// false) with the intervals so far, so that a killed run leaves a readable partial
    /// result: run's --json FILE, compare's results.json (the running cell as in_progress).
    /// 0 turns it off.
    #[arg(long, default_value = "1m", value_name = "DURATION")]
    pub save_every: Dur,
}

impl From<ProgressMode> for sanbench_session::progress::ProgressMode {
    fn from(m: ProgressMode) -> Self {
        match m {
            ProgressMode::Auto => Self::Auto,
            ProgressMode::Lines => Self::Lines,
            ProgressMode::Never => Self::Never,
        }
    }
}

impl From<&LiveArgs> for sanbench_session::progress::LiveOptions {
    fn from(a: &LiveArgs) -> Self {
        sanbench_session::progress::LiveOptions {
            progress: a.progress.into(),
            save_every: a.save_every.0,
        }
    }
}

impl Default for LiveArgs {
    fn default() -> LiveArgs {
        LiveArgs {
            progress: ProgressMode::Auto,
            save_every: Dur(Duration::from_secs(60)),
        }
    }
}
