//! Command-line definitions: the public interface users script against. Extend, don't rename.
//! `serve`/`discover` and `lab` keep theirs in serve.rs and lab.rs.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use sanbench_engine::run::pacer::Arrival;
use sanbench_engine::units::{Bytes, Dur, Pct};

mod compare;
mod lab;
mod live;
mod replay;
mod serve;
pub use compare::*;
pub use lab::*;
pub use live::*;
pub use replay::*;
pub use serve::*;

/// Help headings: `run --help` and `compare --help` group their options under these (issue 41).
pub const H_WORKLOAD: &str = "Workload";
pub const H_FIO: &str = "fio job files";
pub const H_TARGETS: &str = "Targets and engine";
pub const H_DATA: &str = "Data and verification";
pub const H_MONITORS: &str = "Monitors";
pub const H_WATCH: &str = "Watching";
pub const H_OUTPUT: &str = "Output";
pub const H_PLACEMENT: &str = "CPU placement";
pub const H_MPI: &str = "MPI";
pub const H_FAULTS: &str = "Faults (lab)";
pub const H_COMPARE: &str = "Comparison";
pub const H_STORE: &str = "Results store";
pub const H_CROSSCHECK: &str = "Crosscheck";
pub const H_SERVER: &str = "Server";
pub const H_TLS: &str = "TLS";
pub const H_AUTH: &str = "Authentication";

/// Seed used when none is given: runs with the same seed issue the same I/O sequence.
pub use sanbench_session::run_config::DEFAULT_SEED;

/// `--cpus-policy`: one of [`sanbench_session::placement::CpusPolicy::NAMES`] (listed in the help).
pub fn cpus_policy(
) -> impl clap::builder::TypedValueParser<Value = sanbench_session::placement::CpusPolicy> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(sanbench_session::placement::CpusPolicy::NAMES)
        .map(|s| s.parse().expect("a listed policy"))
}

#[derive(Parser, Debug)]
#[command(
    name = "sanbench",
    version,
    about = "Storage interconnect benchmark: drive I/O, measure the host, compare and report",
    long_about = None,
    after_help = "More: sanbench help TOPIC (targets, spec, exit-codes); man pages: sanbench man DIR."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Drive I/O to one or more targets with an Iometer-style access specification.
    Run(RunArgs),
    /// Replay a block trace (fio iolog, blkparse, blktrace, MSR Cambridge CSV) on targets, timed
    /// or as fast as possible, with the replay's fidelity measured.
    Replay(ReplayArgs),
    /// List or show the built-in suites (workload matrices of the studies).
    Suite {
        #[command(subcommand)]
        command: SuiteCommand,
    },
    /// Run a suite's workloads on every target, interleaved, and write the comparison report.
    Compare(CompareArgs),
    /// Read targets back and check every block a sanbench run wrote (exit code 3 when data did
    /// not verify).
    Verify(VerifyArgs),
    /// Run a workload with sanbench and as the equivalent fio job on one target, interleaved,
    /// and compare IOPS, mean and p99 latency and Little's law (exit 1 outside --tolerance).
    Crosscheck(CrosscheckArgs),
    /// Runs recorded in the results store.
    History(HistoryArgs),
    /// Re-render the report of one or more stored runs (several: side by side).
    Report(ReportArgs),
    /// What got better or worse between two stored runs, and whether it is outside the noise.
    Diff(DiffArgs),
    /// What this host can measure: CPU, network, power sources; and the transport of block
    /// devices as a run's manifest records it.
    Monitors(MonitorsArgs),
    /// Serve a RAM-disk (or file) target: nbd, iscsi or nvme.
    Serve {
        #[command(subcommand)]
        command: ServeCommand,
    },
    /// Start sanbench's own targets (NBD, iSCSI, NVMe/TCP) on loopback, compare them with the
    /// quick suite (or --suite, e.g. nvme-vs-iscsi), write the report (the README's main job).
    Demo(DemoArgs),
    /// List what an NVMe/TCP discovery controller offers: nvme+tcp://HOST[:PORT] (port 8009
    /// unless given), one line per discovery log record with the URI `run` opens.
    Discover(DiscoverArgs),
    /// Read or set the ANA state of each port of a running `sanbench serve nvme --control
    /// PATH` (PORT=STATE ...; without any, print them): one line per port.
    Ana(AnaArgs),
    /// A software test bed: shaped links in network namespaces with targets behind them.
    Lab {
        #[command(subcommand)]
        command: LabCommand,
    },
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell (e.g.
    /// `sanbench completions bash > /etc/bash_completion.d/sanbench`).
    Completions {
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Write a man page per command (sanbench.1, sanbench-run.1, ...) into DIR; read one with
    /// `man -l DIR/sanbench-run.1`.
    Man(ManArgs),
}

/// `sanbench man [DIR]`.
#[derive(Args, Debug, Clone)]
pub struct ManArgs {
    /// Directory to write the pages into (created if missing).
    #[arg(default_value = "man", value_name = "DIR")]
    pub dir: PathBuf,
}

/// How targets are opened and driven; shared by `run` and `compare`.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = H_TARGETS)]
pub struct EngineArgs {
    /// Engine for files and block devices: auto (io_uring if available), io_uring, sync.
    #[arg(long, default_value = "auto", value_name = "ENGINE")]
    pub engine: String,
    /// Use the page cache (default for files; block devices default to O_DIRECT).
    #[arg(long, conflicts_with = "direct")]
    pub buffered: bool,
    /// Bypass the page cache with O_DIRECT (default for block devices).
    #[arg(long)]
    pub direct: bool,
    /// Write even to a block device that holds a filesystem or partition table (one that is
    /// mounted or claimed is still refused: it is opened with O_EXCL).
    #[arg(long)]
    pub force: bool,
    /// Keep each target's span in the page cache between runs (by default files and buffered
    /// block devices are synced and dropped from it before every run, as fio's invalidate=1).
    #[arg(long)]
    pub no_invalidate: bool,
    /// Fail the run when no I/O completes for this long (dead or silent target).
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub io_timeout: Dur,
}

/// `sanbench verify`: the whole-span check after (or apart from) a run.
#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Every unit must hold a valid sanbench stamp for its own offset whose payload
matches it; with --run-id, of that run. Classes: wrong data (stamp CRC or payload),
misplaced (another block's stamp), never written (zeros), foreign (another run, or data
not written by sanbench).
Exit codes: 0 every block verified, 1 the check could not run, 2 bad usage, 3 data did not verify."
)]
pub struct VerifyArgs {
    /// Targets to read back (any URI `run` takes).
    #[arg(required = true, value_name = "TARGET")]
    pub targets: Vec<String>,
    /// Accept only this run's data (the `run_id` of its result, 16 hex digits).
    #[arg(long, value_name = "HEX", conflicts_with = "verify_state")]
    pub run_id: Option<String>,
    /// Check against the generation map a run kept with --verify-state FILE: each block
    /// must hold its last generation, or the one a flush made durable (after a crash).
    #[arg(long, value_name = "FILE")]
    pub verify_state: Option<std::path::PathBuf>,
    /// Check the first SIZE bytes (default: the whole target).
    #[arg(long, value_name = "SIZE")]
    pub span: Option<Bytes>,
    /// Read size.
    #[arg(long, default_value = "1M", value_name = "SIZE")]
    pub bs: Bytes,
    /// Reads in flight.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub qd: u32,
    /// Write the findings as JSON (sanbench.verify/1) to FILE (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Print only bad blocks and errors.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// What the targets hold before measuring, and what writes put there.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = H_DATA)]
pub struct DataArgs {
    /// Before measuring, write each target's span with unique data: auto (only where nothing
    /// is lost: mem:, files sanbench creates, sanbench's own NBD and iSCSI servers; skipped
    /// when the target reports the span written), none, fill (one pass, any target, under the
    /// write-safety check) or N passes.
    #[arg(long, default_value = "auto", value_name = "auto|none|fill|N")]
    pub precondition: String,
    /// Percent of written 4 KiB units that duplicate one block (default 0: all unique).
    #[arg(long, default_value = "0", value_name = "PCT")]
    pub dedupe: Pct,
    /// Percent of each written 4 KiB unit that compresses away (default 0: incompressible).
    #[arg(long, default_value = "0", value_name = "PCT")]
    pub compress: Pct,
    /// Check every read against what the run wrote: writes are stamped per 512 B (or logical
    /// block) with a generation kept in memory, in-flight I/Os never overlap, and a bad block
    /// is classified (wrong data, misplaced, stale, torn, never written, foreign). Exit code 3
    /// when data did not verify.
    #[arg(long)]
    pub verify: bool,
    /// Each stream flushes (NBD FLUSH, SCSI SYNCHRONIZE CACHE, fdatasync) after every N
    /// writes; flush latency is reported apart. In compare: every workload that writes.
    #[arg(long, value_name = "N")]
    pub flush_every: Option<u32>,
    /// Percent of writes sent with forced unit access (NBD FUA flag, the SCSI FUA bit,
    /// RWF_DSYNC for files): durable when they complete; their latency is reported apart.
    #[arg(long, value_name = "PCT")]
    pub fua: Option<Pct>,
    /// Keep the verification's generation map in FILE (implies --verify; one target): it
    /// survives a crash or a target restart, records what each flush made durable, and a
    /// later run with the same FILE continues the session. `sanbench verify TARGET
    /// --verify-state FILE` then accepts, per block, its last generation or its durable one.
    #[arg(long, value_name = "FILE")]
    pub verify_state: Option<std::path::PathBuf>,
}

impl Default for DataArgs {
    fn default() -> DataArgs {
        DataArgs {
            precondition: "auto".into(),
            dedupe: Pct(0.0),
            compress: Pct(0.0),
            verify: false,
            flush_every: None,
            fua: None,
            verify_state: None,
        }
    }
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "TARGETS:
  null:[SIZE]         completes at once, moves no data (measures sanbench itself)
  mem:SIZE            in-process RAM disk
  PATH | file:PATH    a file (created at --size if missing) or a block device
  nbd://HOST[:PORT][/EXPORT]
  iscsi://[USER%SECRET@]HOST[:PORT]/IQN/LUN
  nvme+tcp://HOST[:PORT]/SUBSYSNQN[/NSID]
  nvme-ng:/dev/ngXnY  sg:/dev/sgN   NVMe and SCSI passthrough
Every URI, multipath and query options: sanbench help targets. Access specifications:
sanbench help spec.

Sizes: 512, 4k, 4KiB, 1M, 1G (binary). Durations: 500ms, 5s, 2m.
Exit codes: 0 ok, 1 the run failed, 2 bad usage or input, 3 data did not verify.")]
pub struct RunArgs {
    /// Targets to drive; every worker drives all of them (with --fio: the job's filename, or
    /// uri for ioengine=nbd, unless given here).
    #[arg(required_unless_present = "fio", value_name = "TARGET")]
    pub targets: Vec<String>,

    /// Access specification file (TOML; see docs/SPEC.md). Flags below override its values.
    #[arg(help_heading = H_WORKLOAD, long, value_name = "FILE", conflicts_with = "fio")]
    pub spec: Option<PathBuf>,
    /// fio job file: one job section (--section) becomes the workload, its targets, engine and
    /// data flags (docs/FIO.md). Every option sanbench does not map is named, one line each
    /// (exit 2), unless --fio-ignore names it. Flags below override the job's values.
    #[arg(help_heading = H_FIO, long, value_name = "JOBFILE")]
    pub fio: Option<PathBuf>,
    /// The job section of --fio to run (needed when the file has several).
    #[arg(help_heading = H_FIO, long, value_name = "NAME")]
    pub section: Option<String>,
    /// fio options to run without (their names, comma-separated).
    #[arg(help_heading = H_FIO, long, value_name = "OPTION,...", value_delimiter = ',')]
    pub fio_ignore: Vec<String>,
    /// Also write the fio job that does what this run does (files, block devices, nbd:// through
    /// fio's nbd engine, iscsi:// through libiscsi, nvme-ng: through io_uring_cmd, sg: through
    /// sg), with a comment on what fio cannot express.
    #[arg(help_heading = H_FIO, long, value_name = "FILE")]
    pub emit_fio: Option<PathBuf>,

    /// Transfer size for reads and writes.
    #[arg(help_heading = H_WORKLOAD, long, value_name = "SIZE")]
    pub bs: Option<Bytes>,
    /// Transfer size for reads (with --write-bs: different read and write sizes).
    #[arg(help_heading = H_WORKLOAD, long, value_name = "SIZE")]
    pub read_bs: Option<Bytes>,
    /// Transfer size for writes.
    #[arg(help_heading = H_WORKLOAD, long, value_name = "SIZE")]
    pub write_bs: Option<Bytes>,
    /// Percent of I/Os that read (0-100; default: what --trim and --write-zeroes leave).
    #[arg(help_heading = H_WORKLOAD, long, value_name = "PCT")]
    pub read: Option<Pct>,
    /// Percent of all I/Os that trim (discard) their range, write size; writes are the rest
    /// (100 - read - trim - write-zeroes).
    #[arg(long, value_name = "PCT")]
    pub trim: Option<Pct>,
    /// Percent of all I/Os that zero their range without sending data, write size.
    #[arg(long, value_name = "PCT")]
    pub write_zeroes: Option<Pct>,
    /// Percent of I/Os at random offsets (0-100); the rest are sequential.
    #[arg(help_heading = H_WORKLOAD, long, value_name = "PCT")]
    pub random: Option<Pct>,
    /// Offset alignment for random I/O (default: the transfer size).
    #[arg(help_heading = H_WORKLOAD, long, value_name = "SIZE")]
    pub align: Option<Bytes>,
    /// Outstanding I/Os per target per worker.
    #[arg(help_heading = H_WORKLOAD, long, value_name = "N")]
    pub qd: Option<u32>,
    /// Worker count; each drives every target.
    #[arg(help_heading = H_WORKLOAD, long, value_name = "N")]
    pub workers: Option<u32>,
    /// Ramp-up before measuring (not counted).
    #[arg(help_heading = H_WORKLOAD, long, value_name = "DURATION")]
    pub ramp: Option<Dur>,
    /// Measured time.
    #[arg(help_heading = H_WORKLOAD, long, value_name = "DURATION")]
    pub time: Option<Dur>,
    /// Span of each target to use; also the size a missing file is created at.
    #[arg(help_heading = H_WORKLOAD, long, value_name = "SIZE")]
    pub size: Option<Bytes>,
    /// Open loop: issue this many I/Os per second per target (split over the workers) at
    /// their intended times, whatever the target does; --qd caps what is outstanding.
    /// Latency is then response time from the intended time (no coordinated omission), with
    /// service time and issue lag beside it.
    #[arg(help_heading = H_WORKLOAD, long, value_name = "IOPS")]
    pub rate: Option<f64>,
    /// Open-loop arrivals: fixed (every 1/rate) or poisson (seeded exponential gaps).
    #[arg(help_heading = H_WORKLOAD, long, value_name = "fixed|poisson", requires = "rate")]
    pub arrival: Option<Arrival>,

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
    /// Seed for offsets and data (runs with the same seed issue the same I/O sequence).
    #[arg(help_heading = H_WORKLOAD, long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,

    /// Pin sanbench's threads to these CPUs (as fio's cpus_allowed: 0, 0,2, 0-3); recorded in
    /// the manifest. Keeps the initiator off the cores a local target or daemon uses.
    #[arg(help_heading = H_PLACEMENT, long, value_name = "LIST")]
    pub cpus: Option<sanbench_session::placement::CpuList>,
    /// How the streams share those CPUs (fio's cpus_allowed_policy): shared (the scheduler
    /// places them) or split (each stream on one CPU of its own, in turn; without --cpus,
    /// of every CPU sanbench may use).
    #[arg(help_heading = H_PLACEMENT, long, default_value = "shared", value_name = "POLICY",
        value_parser = cpus_policy())]
    pub cpus_policy: sanbench_session::placement::CpusPolicy,

    /// Write the result document (schema sanbench.run/2) to FILE ("-" for stdout).
    #[arg(help_heading = H_OUTPUT, long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No summary table or progress line.
    #[arg(help_heading = H_OUTPUT, long, short)]
    pub quiet: bool,
    /// Under mpirun or srun (a build with the mpi feature): these ranks run no I/O and only
    /// measure their host (CPU, --watch daemons, power, network), e.g. "0" or "0,4-7".
    #[arg(help_heading = H_MPI, long, value_name = "LIST")]
    pub monitor_only_ranks: Option<String>,
    /// Fire a lab fault during the measured window: AT:LINK:ACTION (AT after the ramp, e.g.
    /// 10s:b:down,20s:b:up; ACTION down, up, loss=PCT, delay=D, clear; see 'sanbench lab
    /// fault --help'). Repeatable and comma-separated; checked against --lab before any I/O.
    /// Each fired fault is recorded in the result's `faults`; a link the schedule leaves
    /// faulted is set back after the run.
    #[arg(help_heading = H_FAULTS, long = "fault", value_name = "AT:LINK:ACTION", value_delimiter = ',')]
    pub faults: Vec<String>,
    /// The lab whose links --fault names (default /run/sanbench/lab.json, as 'lab up').
    #[arg(help_heading = H_FAULTS, long, value_name = "FILE", requires = "faults")]
    pub lab: Option<PathBuf>,
}

/// `sanbench crosscheck`: the workload flags of `run` (or --spec, --fio), one target.
#[derive(Args, Debug, Clone)]
#[command(
    after_help = "The fio job is the one --emit-fio writes (kept there when given). \
Host monitoring is off: only I/O figures are compared. --json FILE writes the \
figures as sanbench.crosscheck/1. fio's mean latency is lat_ns (from preparing \
the I/O), its p99 from lat_ns's histogram (json+ bins; reads and writes joined), its mean in \
flight iodepth x numjobs. Exit codes: 0 within the tolerance, 1 \
outside it or a run failed, 2 bad usage."
)]
pub struct CrosscheckArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Repetitions of each tool, interleaved (the first tool alternates): N runs exactly N;
    /// `auto` looks after every pair and stops once the intervals decide all three ratios
    /// (within or outside the tolerance), or at --max-repeat (docs/MEASURE.md).
    #[arg(help_heading = H_CROSSCHECK, long, default_value = "3", value_name = "auto|N")]
    pub repeat: RepeatArg,
    /// The most repetitions `--repeat auto` runs.
    #[arg(help_heading = H_CROSSCHECK, long, default_value_t = sanbench_stats::design::DEFAULT_MAX_REPEAT, value_name = "N")]
    pub max_repeat: u32,
    /// Time the crosscheck may take: a pair of repetitions that would not fit (at the pace of
    /// those before) is not started; the first pair always runs.
    #[arg(help_heading = H_CROSSCHECK, long, value_name = "DURATION")]
    pub budget: Option<Dur>,
    /// Largest relative difference (percent) of the medians, and of IOPS x mean latency from
    /// the mean in flight, that still agrees.
    #[arg(help_heading = H_CROSSCHECK, long, default_value_t = 15.0, value_name = "PCT")]
    pub tolerance: f64,
    /// The fio to run.
    #[arg(help_heading = H_CROSSCHECK, long, default_value = "fio", value_name = "PATH")]
    pub fio_bin: PathBuf,
    /// Results database (SQLite; default under the user's data directory): the crosscheck is
    /// kept as a comparison of "sanbench" and "fio" ('sanbench report RUN').
    #[arg(help_heading = H_STORE, long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Do not record the crosscheck in the results database.
    #[arg(help_heading = H_STORE, long)]
    pub no_store: bool,
}

#[derive(Subcommand, Debug)]
pub enum SuiteCommand {
    /// The built-in suites.
    List,
    /// A suite's workloads (a built-in name or a TOML file).
    Show {
        name: String,
        /// Print the suite as a fio job file instead (one stonewalled section per workload, on
        /// the file or device in $TARGET).
        #[arg(long)]
        fio: bool,
    },
}

/// `sanbench monitors`.
#[derive(Args, Debug, Clone)]
pub struct MonitorsArgs {
    /// Block devices to describe (e.g. /dev/sdb, /dev/nvme0n1): the transport and its
    /// parameters from sysfs (FC ports, iSCSI/iSER session, NVMe controller), one line each.
    #[arg(value_name = "DEVICE")]
    pub devices: Vec<std::path::PathBuf>,
    #[command(flatten)]
    pub monitor: MonitorArgs,
}

/// Host monitoring: CPU, network, power; shared by `run` and `compare`.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = H_MONITORS)]
pub struct MonitorArgs {
    /// Also account the CPU of these processes (a target daemon such as tgtd or nbdkit), by
    /// name or PID; repeatable.
    #[arg(long, value_name = "NAME|PID")]
    pub watch: Vec<String>,
    /// Idle baseline sampled before the run (compare: once per target); 0 to skip.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub baseline: Dur,
    /// Power source: auto (a meter if any, else the model), off, rapl, ipmi, wattsup, cmd, model.
    #[arg(long, default_value = "auto", value_name = "SOURCE")]
    pub power: String,
    /// A command that prints the current watts (a PDU, a smart plug, anything).
    #[arg(long, value_name = "COMMAND")]
    pub power_cmd: Option<String>,
    /// A Watts Up? Pro wall meter on this serial device.
    #[arg(long, value_name = "DEVICE")]
    pub wattsup: Option<PathBuf>,
    /// Power model: watts at idle (used only where nothing measures; always labeled modeled).
    #[arg(long, value_name = "W")]
    pub idle_watts: Option<f64>,
    /// Power model: watts at full CPU load.
    #[arg(long, value_name = "W")]
    pub max_watts: Option<f64>,
    /// How often the host is sampled for the per-second series.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub monitor_interval: Dur,
    /// No host monitoring at all (no CPU, power or manifest figures).
    #[arg(long)]
    pub no_monitor: bool,
}

impl Default for MonitorArgs {
    fn default() -> Self {
        MonitorArgs {
            watch: Vec::new(),
            baseline: Dur(Duration::from_secs(1)),
            power: "auto".into(),
            power_cmd: None,
            wattsup: None,
            idle_watts: None,
            max_watts: None,
            monitor_interval: Dur(Duration::from_secs(1)),
            no_monitor: false,
        }
    }
}

/// Watching a run as it goes: intervals, the histogram log; shared by `run` and `compare`.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = H_WATCH)]
pub struct WatchArgs {
    /// Cut the measured window into intervals this long (at least 10ms): per target and
    /// interval, I/Os, bytes and errors per op and p50/p99/max latency go into the result
    /// (`intervals`), the full histograms into --hist-log.
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = log_interval)]
    pub log_interval: Dur,
    /// Write every interval's latency histogram to FILE in HdrHistogram's interval log
    /// format (V2 compressed; read by HdrHistogram's HistogramLogProcessor and the
    /// `hdrhistogram` Python package); values in ns, one tag per target when there are
    /// several. compare: every cell, its tags naming workload, round and target.
    #[arg(long, value_name = "FILE")]
    pub hist_log: Option<PathBuf>,
    /// Serve live metrics at http://ADDR:PORT/metrics in the Prometheus text format (or
    /// OpenMetrics when the scraper asks for it): I/Os, bytes, errors and a latency
    /// histogram per target and op (updated every --log-interval), I/Os and bytes per path of
    /// a multipath target, I/Os in flight, the host's CPU and power; compare's cell as
    /// labels. PORT alone listens on 127.0.0.1; any other address only when given.
    #[arg(long, value_name = "[ADDR:]PORT", value_parser = metrics_listen)]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

impl From<&WatchArgs> for sanbench_session::watch::WatchOptions {
    fn from(a: &WatchArgs) -> Self {
        sanbench_session::watch::WatchOptions {
            log_interval: a.log_interval.0,
            hist_log: a.hist_log.clone(),
            metrics_listen: a.metrics_listen,
        }
    }
}

impl Default for WatchArgs {
    fn default() -> WatchArgs {
        WatchArgs {
            log_interval: Dur(Duration::from_secs(1)),
            hist_log: None,
            metrics_listen: None,
        }
    }
}

/// `PORT` (loopback) or `ADDR:PORT` (`[V6]:PORT`).
pub(crate) fn metrics_listen(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok((std::net::Ipv4Addr::LOCALHOST, port).into());
    }
    s.parse()
        .map_err(|_| format!("'{s}' is neither PORT nor ADDR:PORT (an IP address and a port)"))
}

fn log_interval(s: &str) -> Result<Dur, String> {
    let d: Dur = s.parse()?;
    let min = sanbench_engine::run::MIN_LOG_INTERVAL;
    if d.0 < min {
        return Err(format!("'{s}' is shorter than {}", Dur(min)));
    }
    Ok(d)
}

#[derive(Args, Debug, Clone)]
pub struct HistoryArgs {
    /// Results database (default under the user's data directory).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Run ids (see 'sanbench history'), or result files: a run's --json FILE or a
    /// comparison's results.json (also one written part-way, which the report says).
    #[arg(required = true, value_name = "RUN|FILE")]
    pub runs: Vec<String>,
    #[arg(long, default_value = "sanbench-report", value_name = "DIR")]
    pub out: PathBuf,
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct DiffArgs {
    #[arg(value_name = "RUN_A")]
    pub run_a: String,
    #[arg(value_name = "RUN_B")]
    pub run_b: String,
    /// Smallest relative change that counts when the noise is unknown (single runs).
    #[arg(long, default_value_t = 0.10, value_name = "FRACTION")]
    pub min_rel: f64,
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}
