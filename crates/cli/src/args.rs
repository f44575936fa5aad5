//! Command-line definitions: the public interface users script against. Extend, don't rename.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "sanbench",
    version,
    about = "Storage interconnect benchmark: drive I/O, measure the host, compare and report",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Drive I/O to one or more targets with an Iometer-style access specification.
    Run(RunArgs),
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "TARGETS:
  null:[SIZE]         completes at once, moves no data (measures sanbench itself)
  mem:SIZE            in-process RAM disk
  PATH | file:PATH    a file (created at --size if missing) or a block device
  nbd://HOST[:PORT][/EXPORT]
  iscsi://[USER%SECRET@]HOST[:PORT]/IQN/LUN

Sizes: 512, 4k, 4KiB, 1M, 1G (binary). Durations: 500ms, 5s, 2m.
Exit codes: 0 ok, 1 the run failed, 2 bad usage or input.")]
pub struct RunArgs {
    /// Targets to drive; every worker drives all of them.
    #[arg(required = true, value_name = "TARGET")]
    pub targets: Vec<String>,

    /// Access specification file (TOML; see docs/SPEC.md). Flags below override its values.
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,

    /// Transfer size for reads and writes.
    #[arg(long, value_name = "SIZE")]
    pub bs: Option<String>,
    /// Transfer size for reads (with --write-bs: different read and write sizes).
    #[arg(long, value_name = "SIZE")]
    pub read_bs: Option<String>,
    /// Transfer size for writes.
    #[arg(long, value_name = "SIZE")]
    pub write_bs: Option<String>,
    /// Percent of I/Os that read (0-100).
    #[arg(long, value_name = "PCT")]
    pub read: Option<f64>,
    /// Percent of I/Os at random offsets (0-100); the rest are sequential.
    #[arg(long, value_name = "PCT")]
    pub random: Option<f64>,
    /// Offset alignment for random I/O (default: the transfer size).
    #[arg(long, value_name = "SIZE")]
    pub align: Option<String>,
    /// Outstanding I/Os per target per worker.
    #[arg(long, value_name = "N")]
    pub qd: Option<u32>,
    /// Worker count; each drives every target.
    #[arg(long, value_name = "N")]
    pub workers: Option<u32>,
    /// Ramp-up before measuring (not counted).
    #[arg(long, value_name = "DURATION")]
    pub ramp: Option<String>,
    /// Measured time.
    #[arg(long, value_name = "DURATION")]
    pub time: Option<String>,
    /// Span of each target to use; also the size a missing file is created at.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,

    /// Engine for files and block devices: auto (io_uring if available), io_uring, sync.
    #[arg(long, default_value = "auto", value_name = "ENGINE")]
    pub engine: String,
    /// Use the page cache (default for files; block devices default to O_DIRECT).
    #[arg(long, conflicts_with = "direct")]
    pub buffered: bool,
    /// Bypass the page cache with O_DIRECT (default for block devices).
    #[arg(long)]
    pub direct: bool,
    /// Write even to a block device that is mounted or holds a filesystem or partition table.
    #[arg(long)]
    pub force: bool,
    /// Fail the run when no I/O completes for this long (dead or silent target).
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub io_timeout: String,
    /// Seed for offsets and data (runs with the same seed issue the same I/O sequence).
    #[arg(long, default_value_t = 0x5a4b_3c2d)]
    pub seed: u64,

    /// Write the result document (schema sanbench.run/1) to FILE ("-" for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No summary table or progress line.
    #[arg(long, short)]
    pub quiet: bool,
}
