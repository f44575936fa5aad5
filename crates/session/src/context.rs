//! The state one command carries while it runs, in one value made at start-up and passed down
//! (issue 39): what used to sit in process-wide statics, so that two runs in one process (two
//! contexts) do not see each other's.
//!
//! A [`Context`] owns
//! * the placement chosen (`--cpus`, `--cpus-policy`, the demo's `--placement`) and the CPU
//!   each stream of the last plan was pinned to, for every result's manifest (`placement`);
//! * the watch opened last (`--hist-log`, `--metrics-listen`: watch.rs), which the MPI gather
//!   of the histogram log reads after the run;
//! * the registry of the `--metrics-listen` endpoint, which the run's observer feeds with the
//!   host monitor's power readings;
//! * the `mem:` RAM disks opened so far: every cell of a comparison (and the preconditioning
//!   before them) drives the same one, as it would a real target;
//! * the [`Job`]: how this process takes part in `run` and `compare`, alone or as a rank of
//!   an MPI job (chosen once at start-up, job/select.rs).
//!
//! What stays process-wide, by nature: the Ctrl-C flag (signals.rs, set by a signal handler,
//! which has no context to reach) and stdout's state (stdout.rs: the process has one stdout).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use sanbench_engine::poison;
use sanbench_engine::Target;
use sanbench_metrics::registry::Registry;

use crate::error::CliError;
use crate::events::Events;
use crate::job::Job;
use crate::placement::{CpuList, CpusPolicy};
use crate::progress::{ProgressLine, ProgressMode};
use crate::watch::Watch;

/// One command's state (see the module's documentation).
pub struct Context {
    /// What was chosen for placement (the first choice holds).
    placement: OnceLock<serde_json::Value>,
    /// The CPU each stream of the last plan was pinned to, in stream order (empty: unpinned).
    stream_cpus: Mutex<Vec<usize>>,
    /// The watch opened last.
    watch: Mutex<Option<Arc<Watch>>>,
    /// The `--metrics-listen` endpoint's registry, once one serves (the first holds).
    metrics: OnceLock<Arc<Registry>>,
    /// The `mem:` targets opened so far, by URI.
    mem: Mutex<HashMap<String, Arc<dyn Target>>>,
    /// Where events go when a program installed an observer ([`Context::set_events`]).
    events: OnceLock<Arc<dyn Events>>,
    /// How this process runs (last: an MPI job is left after everything else is dropped).
    job: Box<dyn Job>,
}

impl Context {
    /// A context for a command that runs as `job` says, with nothing recorded or open yet.
    pub fn new(job: Box<dyn Job>) -> Context {
        Context {
            placement: OnceLock::new(),
            stream_cpus: Mutex::new(Vec::new()),
            watch: Mutex::new(None),
            metrics: OnceLock::new(),
            mem: Mutex::new(HashMap::new()),
            events: OnceLock::new(),
            job,
        }
    }

    /// A context for a process that runs alone (no MPI job): what a library caller or a
    /// test wants.
    pub fn local() -> Context {
        Context::new(Box::new(crate::job::Local))
    }

    /// Sends this context's events ([`crate::events`]: progress, intervals, fills) to
    /// `events` instead of the terminal's live line. The first observer installed holds.
    pub fn set_events(&self, events: Arc<dyn Events>) {
        let _ = self.events.set(events);
    }

    /// Where a command's events go: the observer installed, else the terminal's live line
    /// as `quiet`, `mode` and `stdout_taken` (stdout carries a document) allow.
    pub fn events(&self, quiet: bool, mode: ProgressMode, stdout_taken: bool) -> Arc<dyn Events> {
        match self.events.get() {
            Some(e) => e.clone(),
            None => Arc::new(ProgressLine::with_mode(quiet, mode, stdout_taken)),
        }
    }

    /// How this process takes part in `run` and `compare`.
    pub fn job(&self) -> &dyn Job {
        &*self.job
    }

    /// Remembers what was chosen for placement, for every result's manifest (the first
    /// choice holds).
    pub fn record_placement(&self, v: serde_json::Value) {
        let _ = self.placement.set(v);
    }

    /// `--cpus LIST --cpus-policy P` of run, compare and crosscheck: pins the process to the
    /// list ([`crate::placement::apply`]) and records the choice.
    pub fn apply_placement(
        &self,
        cpus: Option<&CpuList>,
        policy: CpusPolicy,
    ) -> Result<(), CliError> {
        if let Some(v) = crate::placement::apply(cpus, policy)? {
            self.record_placement(v);
        }
        Ok(())
    }

    /// Remembers, for a run's manifest (`placement.stream_cpus`), the CPU each of its streams
    /// was pinned to (`RunPlan::cpu_of_each_stream`; empty when unpinned).
    pub fn record_stream_cpus(&self, each: Vec<usize>) {
        *poison::lock(&self.stream_cpus) = each;
    }

    /// The placement recorded, if any, with `stream_cpus` when the streams were pinned.
    pub fn placement(&self) -> Option<serde_json::Value> {
        let mut v = self.placement.get().cloned()?;
        let s = poison::lock(&self.stream_cpus).clone();
        if let (false, Some(m)) = (s.is_empty(), v.as_object_mut()) {
            m.insert("stream_cpus".into(), serde_json::json!(s));
        }
        Some(v)
    }

    /// Opens what the watch flags ask for ([`Watch::open`]) and keeps it as this context's
    /// current watch, its endpoint's registry as the context's.
    pub fn open_watch(
        &self,
        a: &crate::watch::WatchOptions,
        rank: Option<u32>,
    ) -> Result<Option<Arc<Watch>>, CliError> {
        let w = Watch::open(a, rank)?;
        if let Some(w) = &w {
            if let Some(r) = w.metrics() {
                let _ = self.metrics.set(r.clone());
            }
            *poison::lock(&self.watch) = Some(w.clone());
        }
        Ok(w)
    }

    /// The watch [`Context::open_watch`] opened last.
    pub fn watch(&self) -> Option<Arc<Watch>> {
        poison::lock(&self.watch).clone()
    }

    /// The registry of the `--metrics-listen` endpoint, once one serves.
    pub fn metrics(&self) -> Option<&Arc<Registry>> {
        self.metrics.get()
    }

    /// The `mem:` target named `uri`: the one opened before in this context, or a new one
    /// from `open`, kept for the next.
    pub fn mem_target(
        &self,
        uri: &str,
        open: impl FnOnce() -> Result<Arc<dyn Target>, CliError>,
    ) -> Result<Arc<dyn Target>, CliError> {
        let mut m = poison::lock(&self.mem);
        if let Some(t) = m.get(uri) {
            return Ok(t.clone());
        }
        let target = open()?;
        m.insert(uri.to_string(), target.clone());
        Ok(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_mem(cx: &Context, uri: &str) -> Arc<dyn Target> {
        let opts = sanbench_engine::file::FileOptions {
            writes: true,
            ..Default::default()
        };
        crate::targets::open_targets(cx, &[uri.to_string()], &opts)
            .unwrap()
            .pop()
            .unwrap()
    }

    #[test]
    fn contexts_share_no_mem_targets() {
        let (a, b) = (Context::local(), Context::local());
        let a1 = open_mem(&a, "mem:1m");
        let a2 = open_mem(&a, "mem:1m");
        let b1 = open_mem(&b, "mem:1m");
        // One context drives the same RAM disk each time; another has its own.
        assert!(Arc::ptr_eq(&a1, &a2));
        assert!(!Arc::ptr_eq(&a1, &b1));
    }

    #[test]
    fn contexts_share_no_placement() {
        let (a, b) = (Context::local(), Context::local());
        a.record_placement(serde_json::json!({ "cpus": "0", "by": "--cpus" }));
        a.record_stream_cpus(vec![0, 0]);
        assert_eq!(
            a.placement(),
            Some(serde_json::json!({ "cpus": "0", "by": "--cpus", "stream_cpus": [0, 0] }))
        );
        assert_eq!(b.placement(), None);
        b.record_placement(serde_json::json!({ "cpus": "1", "by": "--cpus" }));
        assert_eq!(
            b.placement(),
            Some(serde_json::json!({ "cpus": "1", "by": "--cpus" }))
        );
        // The first choice holds in each.
        a.record_placement(serde_json::json!({ "cpus": "2" }));
        assert_eq!(a.placement().unwrap()["cpus"], "0");
    }
}
