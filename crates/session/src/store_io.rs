//! The store side of `compare` and `crosscheck`: a run opened before the first cell, every cell
//! committed as it finishes (so a run killed halfway keeps what it measured), stored runs
//! loaded by id, and the findings and their replication printed.

use std::path::{Path, PathBuf};

use anyhow::Context;
use sanbench_report::EarlierRun;
use sanbench_store::{Cell, Comparison, RunId, Store};

use crate::error::{usage, CliError};

/// The store's path: `--db`, or the default.
pub fn path_of(db: Option<&Path>) -> Result<PathBuf, CliError> {
    match db {
        Some(p) => Ok(p.to_path_buf()),
        None => Store::default_path().map_err(|e| usage(e.to_string())),
    }
}

/// Opens the store to record in, created (with its directories) when missing.
pub fn open(db: Option<&Path>) -> Result<(Store, PathBuf), CliError> {
    let path = path_of(db)?;
    let store = Store::open(&path).with_context(|| format!("results store {}", path.display()))?;
    Ok((store, path))
}

/// Opens the store to read from: one that is not there is bad input (a mistyped `--db`), and
/// is not created.
pub fn open_existing(db: Option<&Path>) -> Result<(Store, PathBuf), CliError> {
    let path = path_of(db)?;
    if !path.exists() {
        return Err(usage(format!(
            "no results store at {} (nothing has been recorded there)",
            path.display()
        )));
    }
    open(Some(&path))
}

/// Records a comparison as it runs.
pub struct Recorder {
    store: Store,
    pub run: RunId,
    pub path: PathBuf,
}

impl Recorder {
    pub fn begin(db: Option<&Path>, cmp: &Comparison) -> Result<Recorder, CliError> {
        let (mut store, path) = open(db)?;
        let run = store.begin_run(cmp).context("recording the run")?;
        Ok(Recorder { store, run, path })
    }

    pub fn cell(&mut self, c: &Cell) -> Result<(), CliError> {
        self.store
            .add_cell(self.run, c)
            .context("recording a result")?;
        Ok(())
    }

    /// Closes the run with the comparison as it ended (its design's rounds and stop reason
    /// replace those recorded at the start).
    pub fn finish(&mut self, cmp: &Comparison) -> Result<(), CliError> {
        self.store
            .finish_run_with(self.run, cmp)
            .context("closing the run")?;
        Ok(())
    }

    /// Earlier complete runs of the same suite with the same target names, newest first, for
    /// the report's "Earlier runs". A run that cannot be read is left out: the comparison just
    /// measured matters more than its history.
    pub fn earlier_runs(&self, cmp: &Comparison) -> Vec<EarlierRun> {
        let mut names: Vec<&str> = cmp.targets.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        let Ok(runs) = self.store.list() else {
            return Vec::new();
        };
        runs.into_iter()
            .rev()
            .filter(|r| r.id < self.run && !r.incomplete && r.suite == cmp.suite)
            .filter(|r| {
                let mut theirs: Vec<&str> = r.targets.iter().map(String::as_str).collect();
                theirs.sort_unstable();
                theirs == names
            })
            .take(EARLIER_RUNS)
            .filter_map(|r| {
                Some(EarlierRun {
                    run: r.id.to_string(),
                    cmp: self.store.load(r.id).ok()?,
                })
            })
            .collect()
    }
}

/// How many earlier runs the report shows beside this one.
pub const EARLIER_RUNS: usize = 5;

/// A stored run by the id the user typed; an unknown id is bad input.
pub fn load(db: Option<&Path>, run: &str) -> Result<Comparison, CliError> {
    let (store, _) = open_existing(db)?;
    store.load(run_id(run)?).map_err(|e| usage(e.to_string()))
}

/// A run id as the user typed it; one that is not is bad input.
pub fn run_id(s: &str) -> Result<RunId, CliError> {
    s.parse()
        .map_err(|_| usage(format!("'{s}' is not a run id (see 'sanbench history')")))
}
