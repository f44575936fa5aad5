//! The arguments of `compare` and `demo`, and `--repeat auto|N` with them.

use std::path::PathBuf;

use clap::Args;
use sanbench_engine::units::{Bytes, Dur, LoadLevels, Pct};

use super::*;

#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Targets are [ref:][NAME=]TARGET: NAME labels the target in tables, charts and \
                  findings; ref: marks a reference (a ceiling such as a RAM disk): shown in tables \
                  and charts, never compared in the findings, not graded on the report card."
)]
pub struct CompareArgs {
    /// Targets to compare, each as [ref:][NAME=]TARGET.
    #[arg(required_unless_present_any = ["lab", "fio"], value_name = "[ref:][NAME=]TARGET")]
    pub targets: Vec<String>,
    /// Suite to run: a built-in name (see 'sanbench suite list') or a TOML file.
    #[arg(help_heading = H_WORKLOAD, long, default_value = "quick")]
    pub suite: String,
    /// fio job file instead of a suite: one workload per job section, [global] applied;
    /// targets from the command line, or the filename every section names.
    #[arg(help_heading = H_FIO, long, value_name = "JOBFILE", conflicts_with = "suite")]
    pub fio: Option<PathBuf>,
    /// fio options to run without (their names, comma-separated).
    #[arg(help_heading = H_FIO,
        long,
        value_name = "OPTION,...",
        value_delimiter = ',',
        requires = "fio"
    )]
    pub fio_ignore: Vec<String>,
    /// Mark the target named NAME as a reference (repeatable), like ref:NAME=TARGET.
    #[arg(help_heading = H_COMPARE, long, value_name = "NAME")]
    pub reference: Vec<String>,
    /// Also compare the targets of a lab ('sanbench lab up' prints its file); each target's
    /// link (rate, MTU, offloads, switched) goes into the comparison, and the lab's servers
    /// are watched by pid (as --watch PID) so that their CPU counts as the targets'.
    #[arg(help_heading = H_FAULTS, long, value_name = "FILE")]
    pub lab: Option<PathBuf>,
    /// Fire a lab fault during every cell's measured window: AT:LINK:ACTION (AT after the
    /// ramp, e.g. 10s:b:down,20s:b:up; see 'sanbench lab fault --help'). Repeatable and
    /// comma-separated; links from --lab (or the default lab file); every AT must fall inside
    /// every workload's window. Each cell's result records the faults it saw; a link left
    /// faulted is set back before the next cell.
    #[arg(help_heading = H_FAULTS, long = "fault", value_name = "AT:LINK:ACTION", value_delimiter = ',')]
    pub faults: Vec<String>,
    /// Rounds of the whole matrix: `auto` runs rounds until every throughput question is
    /// decided (better or equivalent), --max-repeat rounds have run, or --budget is spent; N
    /// runs exactly N.
    #[arg(help_heading = H_COMPARE, long, default_value = "auto", value_name = "auto|N")]
    pub repeat: RepeatArg,
    /// The most rounds `--repeat auto` runs.
    #[arg(help_heading = H_COMPARE, long, default_value_t = sanbench_stats::design::DEFAULT_MAX_REPEAT, value_name = "N")]
    pub max_repeat: u32,
    /// Time the whole comparison may take (checked before each round: a round that would not
    /// fit is not started).
    #[arg(help_heading = H_COMPARE, long, value_name = "DURATION")]
    pub budget: Option<Dur>,
    /// The smallest difference worth a finding, and the equivalence margin.
    #[arg(help_heading = H_COMPARE, long, default_value = "10%", value_name = "PCT")]
    pub min_effect: Pct,
    /// Response-time curve: after the closed-loop cells, run every workload on every target
    /// open loop at these percentages of its own closed-loop maximum (SPC-1 uses
    /// 10,50,80,90,95,100); a suite's `curve` key does the same.
    #[arg(help_heading = H_COMPARE, long, value_name = "PCT,PCT,...")]
    pub curve: Option<LoadLevels>,
    /// A target's curve stops climbing once its mean response time passes this.
    #[arg(help_heading = H_COMPARE, long, default_value = "100ms", value_name = "DURATION")]
    pub curve_stop: Dur,
    /// Directory for report.html, report.md, results.json, results.csv.
    #[arg(help_heading = H_OUTPUT, long, default_value = "sanbench-report", value_name = "DIR")]
    pub out: PathBuf,
    /// Results database (SQLite; default under the user's data directory).
    #[arg(help_heading = H_STORE, long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Do not record the run in the results database.
    #[arg(help_heading = H_STORE, long)]
    pub no_store: bool,
    /// After the comparison, say for each finding of the stored run RUN whether this run
    /// reproduced it, found it inconclusive or reversed it (see 'sanbench history').
    #[arg(help_heading = H_STORE, long, value_name = "RUN")]
    pub against: Option<String>,
    /// Replace every workload's measured time (a quick look at a long suite).
    #[arg(help_heading = H_WORKLOAD, long, value_name = "DURATION")]
    pub time: Option<Dur>,
    /// Replace every workload's ramp-up.
    #[arg(help_heading = H_WORKLOAD, long, value_name = "DURATION")]
    pub ramp: Option<Dur>,
    /// Size to create missing file targets at.
    #[arg(help_heading = H_WORKLOAD, long, value_name = "SIZE")]
    pub size: Option<Bytes>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub monitor: MonitorArgs,
    #[command(flatten)]
    pub watch: WatchArgs,
    #[command(flatten)]
    pub live: LiveArgs,
    #[arg(help_heading = H_WORKLOAD, long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Pin sanbench's threads to these CPUs (0, 0,2, 0-3); recorded in the manifest.
    #[arg(help_heading = H_PLACEMENT, long, value_name = "LIST")]
    pub cpus: Option<sanbench_session::placement::CpuList>,
    /// How the streams share those CPUs (fio's cpus_allowed_policy): shared or split (each
    /// stream on one CPU of its own, in turn; without --cpus, of every CPU sanbench may use).
    #[arg(help_heading = H_PLACEMENT, long, default_value = "shared", value_name = "POLICY",
        value_parser = cpus_policy())]
    pub cpus_policy: sanbench_session::placement::CpusPolicy,
    /// Warn at the top of the report (and on the terminal) about every cell limited by
    /// something other than the interconnect or the target under test (the initiator's CPU,
    /// the host's, the generator's queue).
    #[arg(help_heading = H_OUTPUT, long)]
    pub require_headroom: bool,
    /// Only the findings and the report's location.
    #[arg(help_heading = H_OUTPUT, long, short)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Directory for the report.
    #[arg(help_heading = H_OUTPUT, long, default_value = "sanbench-demo", value_name = "DIR")]
    pub out: PathBuf,
    /// Suite to run.
    #[arg(help_heading = H_WORKLOAD, long, default_value = "quick")]
    pub suite: String,
    /// Size of each built-in target.
    #[arg(help_heading = H_SERVER, long, default_value = "1G", value_name = "SIZE")]
    pub size: Bytes,
    /// Allocate and touch the built-in targets' RAM at start (3 x --size).
    #[arg(help_heading = H_SERVER, long)]
    pub prealloc: bool,
    /// Rounds: `auto` until every throughput question is decided or the budget is spent;
    /// N for exactly N.
    #[arg(help_heading = H_COMPARE, long, default_value = "auto", value_name = "auto|N")]
    pub repeat: RepeatArg,
    /// The most rounds `--repeat auto` runs.
    #[arg(help_heading = H_COMPARE, long, default_value_t = sanbench_stats::design::DEFAULT_MAX_REPEAT, value_name = "N")]
    pub max_repeat: u32,
    /// Time the comparison may take (a few minutes by default; rounds that would not fit are
    /// not started).
    #[arg(help_heading = H_COMPARE, long, default_value = "4m", value_name = "DURATION")]
    pub budget: Dur,
    /// The smallest difference worth a finding, and the equivalence margin.
    #[arg(help_heading = H_COMPARE, long, default_value = "10%", value_name = "PCT")]
    pub min_effect: Pct,
    /// Every workload's measured time (short cells, more rounds: the rounds, not the cells'
    /// length, are what narrow the intervals).
    #[arg(help_heading = H_WORKLOAD, long, default_value = "0.5s", value_name = "DURATION")]
    pub time: Dur,
    /// Every workload's ramp-up.
    #[arg(help_heading = H_WORKLOAD, long, default_value = "0.25s", value_name = "DURATION")]
    pub ramp: Dur,
    /// Results database (SQLite; default under the user's data directory).
    #[arg(help_heading = H_STORE, long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Do not record the run in the results database.
    #[arg(help_heading = H_STORE, long)]
    pub no_store: bool,
    /// Where the client (sanbench's stream threads) and the built-in servers run: auto keeps
    /// them on different CPUs where the host has two or more (the client the first half),
    /// off lets them share every CPU, CLIENT:SERVERS names both lists (e.g. 0:1).
    #[arg(help_heading = H_PLACEMENT, long, default_value = "auto", value_name = "auto|off|CLIENT:SERVERS")]
    pub placement: sanbench_session::placement::Placement,
    /// Warn at the top of the report about every cell limited by something other than the
    /// interconnect or the target (compare's --require-headroom).
    #[arg(help_heading = H_OUTPUT, long)]
    pub require_headroom: bool,
    #[arg(help_heading = H_OUTPUT, long, short)]
    pub quiet: bool,
}

pub use sanbench_session::compare::config::RepeatArg;
