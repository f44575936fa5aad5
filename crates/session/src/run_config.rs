//! `sanbench run`'s configuration, built once from the command line (as ripgrep builds its
//! config): a `--fio` job read and mapped, the workload built from flags or a spec file, every
//! value parsed and checked. The library's [`crate::run_cmd::execute`] and crosscheck take it;
//! nothing downstream reads the parsed arguments or changes them. A program without a command
//! line starts from [`RunConfig::new`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sanbench_engine::file::FileOptions;
use sanbench_engine::Workload;
use sanbench_fio::FioTarget;

use crate::error::{usage, CliError};
use crate::faults::Faults;
use crate::monitoring::MonitorSetup;
use crate::placement::{CpuList, CpusPolicy};
use crate::precondition::DataPlan;
use crate::progress::LiveOptions;
use crate::watch::WatchOptions;

/// The RNG seed when none is given (`--seed`).
pub const DEFAULT_SEED: u64 = 0x5a4b_3c2d;

/// Everything one `run` needs, typed.
pub struct RunConfig {
    /// The targets as given (`{rank}` and `{host}` unexpanded; a `--fio` job's when the
    /// command line names none).
    pub targets: Vec<String>,
    /// The workload as it runs: flags, a spec file or a fio job, with the load and timing
    /// flags over it.
    pub workload: Workload,
    /// How targets open (engine, O_DIRECT, the write-safety check, the size of a new file).
    pub files: FileOptions,
    /// `--io-timeout`.
    pub io_timeout: Duration,
    /// Preconditioning, the data written and verification.
    pub data: DataPlan,
    /// `--fault`: the schedule, checked against the lab (`None`: no faults).
    pub faults: Option<Arc<Faults>>,
    /// `--log-interval`, `--hist-log`, `--metrics-listen`.
    pub watch: WatchOptions,
    /// `--progress`, `--save-every`.
    pub live: LiveOptions,
    /// The host monitor (`None`: `--no-monitor`).
    pub monitor: Option<MonitorSetup>,
    pub seed: u64,
    /// `--cpus` and `--cpus-policy` (or the fio job's `cpus_allowed`).
    pub cpus: Option<CpuList>,
    pub cpus_policy: CpusPolicy,
    /// `--json FILE` (`-`: stdout).
    pub json: Option<PathBuf>,
    pub quiet: bool,
    /// `--monitor-only-ranks LIST` (an MPI job's ranks that only measure their host).
    pub monitor_only_ranks: Option<String>,
    /// `--emit-fio FILE`: where to write the fio job that does what this run does.
    pub emit_fio: Option<PathBuf>,
    /// What the fio job of this run says about engine, O_DIRECT and data (`--emit-fio`,
    /// crosscheck).
    pub fio_setup: sanbench_fio::Setup,
}

impl RunConfig {
    /// A run of `workload` on `targets` with the command line's defaults: the auto engine,
    /// the 30 s I/O timeout, preconditioning `auto`, no verification, no monitor, no faults,
    /// no watch, quiet.
    pub fn new(targets: Vec<String>, workload: Workload) -> RunConfig {
        let data = DataPlan::default();
        let writes = workload.has_writes() || data.writes();
        let fio_setup = sanbench_fio::Setup {
            engine: Some("io_uring".into()),
            direct: None,
            keep_cache: false,
            verify: false,
            compress: 0.0,
            dedupe: 0.0,
            cpus: None,
            cpus_split: false,
        };
        RunConfig {
            files: FileOptions {
                size: workload.span,
                writes,
                ..FileOptions::default()
            },
            targets,
            workload,
            io_timeout: Duration::from_secs(30),
            data,
            faults: None,
            watch: WatchOptions::default(),
            live: LiveOptions::default(),
            monitor: None,
            seed: DEFAULT_SEED,
            cpus: None,
            cpus_policy: CpusPolicy::default(),
            json: None,
            quiet: true,
            monitor_only_ranks: None,
            emit_fio: None,
            fio_setup,
        }
    }

    /// The fio job doing what this run does (`--emit-fio`, crosscheck).
    pub fn fio_job(&self) -> Result<String, CliError> {
        let targets = self
            .targets
            .iter()
            .map(|t| FioTarget::of(t))
            .collect::<Result<Vec<_>, _>>()
            .map_err(usage)?;
        let w = &self.workload;
        let name = w.name.clone().unwrap_or_else(|| "sanbench".into());
        let section =
            sanbench_fio::export_section(&name, w, &targets, &self.fio_setup).map_err(usage)?;
        Ok(format!("{}{section}", fio_header(&w.describe())))
    }

    /// Writes [`RunConfig::fio_job`] to `path`.
    pub fn write_fio_job(&self, path: &std::path::Path) -> Result<(), CliError> {
        let text = self.fio_job()?;
        std::fs::write(path, text)
            .map_err(|e| CliError::Failed(anyhow::anyhow!("writing {}: {e}", path.display())))
    }

    /// Whether the result document goes to stdout (`--json -`): the summary then goes to
    /// stderr and the progress line stays off stdout.
    pub fn json_to_stdout(&self) -> bool {
        self.json.as_deref().is_some_and(|p| p.as_os_str() == "-")
    }
}

/// The comment that opens a job file sanbench writes.
pub fn fio_header(what: &str) -> String {
    format!(
        "# fio job written by sanbench {}: {what}\n# Lines starting with '# ' say what fio \
         cannot express as sanbench does.\n",
        env!("CARGO_PKG_VERSION")
    )
}
