//! `sanbench compare`'s configuration, built once from the command line: a `--fio` job read
//! into a suite, the suite scaled and its targets named ([`Prepared`]), the data plan, how
//! targets open, the host monitor (the lab's servers watched), the curve's levels. What runs
//! the comparison (mod.rs, cell.rs, design.rs, curve.rs) reads this, never the arguments.

use std::path::PathBuf;
use std::time::Duration;

use sanbench_engine::file::FileOptions;
use sanbench_engine::units::{Dur, Pct};

use super::prepared::Prepared;
use crate::monitoring::MonitorSetup;
use crate::placement::{CpuList, CpusPolicy};
use crate::precondition::DataPlan;
use crate::progress::LiveOptions;
use crate::watch::WatchOptions;

/// Everything one comparison needs, typed.
#[derive(Clone)]
pub struct CompareConfig {
    /// The suite (scaled by `--time`, `--ramp` and the data flags) and the named targets.
    pub prepared: Prepared,
    /// `--against ID`: the stored run this one replicates.
    pub against: Option<String>,
    pub repeat: RepeatArg,
    pub max_repeat: u32,
    pub budget: Option<Dur>,
    pub min_effect: Pct,
    /// The response-time curve's load levels (`--curve` or the suite's; empty: none).
    pub curve: Vec<f64>,
    pub curve_stop: Duration,
    pub out: PathBuf,
    pub db: Option<PathBuf>,
    pub no_store: bool,
    /// How targets open; `writes` is set per use (a cell's workload, the precondition).
    pub files: FileOptions,
    pub io_timeout: Duration,
    pub data: DataPlan,
    /// The host monitor (`None`: `--no-monitor`), the lab's servers among the watched.
    pub monitor: Option<MonitorSetup>,
    /// `--fault` (prepared against each workload's window when the comparison starts).
    pub faults: Vec<String>,
    pub lab: Option<PathBuf>,
    pub watch: WatchOptions,
    pub live: LiveOptions,
    pub seed: u64,
    pub cpus: Option<CpuList>,
    pub cpus_policy: CpusPolicy,
    pub require_headroom: bool,
    pub quiet: bool,
}

impl CompareConfig {
    /// A comparison of `targets` (name, URI) on `suite`'s workloads, with the command line's
    /// defaults (rounds until decided up to the default cap, a 10 % margin, the auto engine,
    /// preconditioning as the suite says, no monitor, no faults, no watch), quiet, not
    /// stored; the report and results files go to `out`. The suite is taken as it is (no
    /// `--time` scaling); every target is compared (none a reference).
    pub fn new(
        suite: sanbench_engine::suite::Suite,
        targets: Vec<(String, String)>,
        out: PathBuf,
    ) -> CompareConfig {
        let n = targets.len();
        CompareConfig::of(
            Prepared {
                suite,
                targets,
                references: vec![false; n],
                links: vec![None; n],
                lab_paths: vec![Vec::new(); n],
            },
            out,
        )
    }

    /// [`CompareConfig::new`] for a comparison already prepared ([`super::prepared::prepare`]:
    /// references marked, lab targets added), with the same defaults.
    pub fn of(prepared: Prepared, out: PathBuf) -> CompareConfig {
        CompareConfig {
            curve: prepared.suite.curve.clone(),
            prepared,
            against: None,
            repeat: RepeatArg::Auto,
            max_repeat: sanbench_stats::design::DEFAULT_MAX_REPEAT,
            budget: None,
            min_effect: Pct(10.0),
            curve_stop: Duration::from_millis(100),
            out,
            db: None,
            no_store: true,
            files: FileOptions::default(),
            io_timeout: Duration::from_secs(30),
            data: DataPlan::default(),
            monitor: None,
            faults: Vec::new(),
            lab: None,
            watch: WatchOptions::default(),
            live: LiveOptions::default(),
            seed: crate::run_config::DEFAULT_SEED,
            cpus: None,
            cpus_policy: CpusPolicy::default(),
            require_headroom: false,
            quiet: true,
        }
    }

    /// How a target opens for a use that writes (`writes`) or only reads.
    pub fn files(&self, writes: bool) -> FileOptions {
        FileOptions {
            writes,
            ..self.files.clone()
        }
    }
}

/// `--repeat auto|N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepeatArg {
    Auto,
    Fixed(u32),
}

impl std::str::FromStr for RepeatArg {
    type Err = String;
    fn from_str(s: &str) -> Result<RepeatArg, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(RepeatArg::Auto);
        }
        match s.parse::<u32>() {
            Ok(0) => Err("--repeat must be at least 1 (or auto)".into()),
            Ok(n) => Ok(RepeatArg::Fixed(n)),
            Err(_) => Err(format!("'{s}' is neither auto nor a number of rounds")),
        }
    }
}

impl RepeatArg {
    /// The plan's form, with `--max-repeat` for auto.
    pub fn plan(self, max: u32) -> sanbench_stats::design::plan::Repeat {
        match self {
            RepeatArg::Auto => sanbench_stats::design::plan::Repeat::Auto { max },
            RepeatArg::Fixed(n) => sanbench_stats::design::plan::Repeat::Fixed(n),
        }
    }
}
