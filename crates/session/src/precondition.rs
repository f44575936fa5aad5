//! `--precondition`, `--dedupe`, `--compress`: what the targets hold before a measured window
//! and what writes put there (the engine's precondition and stamp modules do the work).

use std::time::Duration;

use sanbench_engine::precondition::{self, FillPlan, Filled, Mode, Report};
use sanbench_engine::stamp::DataSpec;
use sanbench_engine::verify::{self, Verifier};
use sanbench_engine::Target;

use crate::error::{usage, CliError};
use crate::events::{Event, Events};

/// The data flags, parsed once.
#[derive(Clone, Debug, Default)]
pub struct DataPlan {
    pub mode: Mode,
    pub spec: DataSpec,
    /// `--verify`.
    pub verify: bool,
    /// `--verify-state FILE`.
    pub state: Option<std::path::PathBuf>,
}

impl DataPlan {
    /// Whether targets must be opened for writing (and through the write-safety check) even
    /// when the workload only reads.
    pub fn writes(&self) -> bool {
        self.mode.writes_anything()
    }
}

/// How the span is written when it is: the suite's way ("pts": purge and 2x the span in
/// 128 KiB writes), else N passes of 1 MiB writes.
pub fn fill_plan(mode: Mode, suite_precondition: &str) -> FillPlan {
    match (suite_precondition, mode) {
        ("pts", _) => FillPlan::pts(),
        (_, Mode::Passes(n)) => FillPlan::fill(n),
        _ => FillPlan::fill(1),
    }
}

/// Preconditions one target (or reports why not), drawing progress and saying what was done.
#[allow(clippy::too_many_arguments)]
pub fn run(
    target: &dyn Target,
    name: &str,
    span: u64,
    plan: &DataPlan,
    fill_plan: FillPlan,
    reads: bool,
    io_timeout: Duration,
    progress: &dyn Events,
    quiet: bool,
    verify: Option<&sanbench_engine::verify::Verifier>,
) -> Result<(Report, Option<Filled>), CliError> {
    let stop = crate::signals::stop_flag();
    let r = precondition::prepare(
        target,
        span,
        plan.mode,
        fill_plan,
        &plan.spec,
        io_timeout,
        &stop,
        verify,
        &mut |done, total| {
            progress.event(&Event::Fill {
                target: name,
                done,
                total,
            })
        },
    );
    progress.event(&Event::Ended);
    let (rep, filled) =
        r.map_err(|e| CliError::Failed(anyhow::anyhow!("{name}: preconditioning failed: {e}")))?;
    if !quiet {
        if filled.is_some() {
            eprintln!("{name}: {}", rep.note);
        } else if let Some(w) = rep.warning(reads) {
            eprintln!("warning: {name}: {w}");
        }
    }
    Ok((rep, filled))
}

/// One verifier per target (`None` each without `--verify`), all with one run id, each map
/// with the granule every workload's I/O is aligned to.
pub fn verifiers<'a>(
    plan: &DataPlan,
    targets: &[std::sync::Arc<dyn Target>],
    spans: &[u64],
    workloads: impl IntoIterator<Item = &'a sanbench_engine::Workload> + Clone,
    traces: &[&sanbench_engine::replay::Replay],
) -> Result<Verifiers, CliError> {
    if !plan.verify {
        return Ok(Verifiers {
            run_id: None,
            per_target: vec![None; targets.len()],
        });
    }
    let mut run_id = sanbench_engine::stamp::new_run_id()
        .map_err(|e| CliError::Failed(anyhow::anyhow!("getrandom for the run's id: {e}")))?;
    if plan.state.is_some() && targets.len() != 1 {
        return Err(usage(
            "--verify-state keeps the map of one target: give one target (or one file each run)",
        ));
    }
    let mut out: Vec<Option<std::sync::Arc<Verifier>>> = Vec::with_capacity(targets.len());
    for (ti, (t, &span)) in targets.iter().zip(spans).enumerate() {
        // Two targets that are one store (one `mem:` RAM disk opened once, the same URI or
        // file twice) share one verifier: each sees the other's writes, which a verifier of
        // its own would call bad blocks. Its span covers both.
        if let Some(first) = (0..ti).find(|&j| same_store(&targets[j], t)) {
            if spans[first] >= span {
                out.push(out[first].clone());
                continue;
            }
        }
        let span = (0..ti)
            .filter(|&j| same_store(&targets[j], t))
            .map(|j| spans[j])
            .fold(span, u64::max);
        let info = t.info();
        let unit = verify::unit_for(info.block_size);
        for w in workloads.clone() {
            if let Some(why) = verify::unverifiable(w, unit, plan.spec.dedupe_pct) {
                return Err(usage(format!("{}: {why}", info.uri)));
            }
        }
        let mut granule = verify::granule_for(unit, workloads.clone());
        // A trace's I/Os are its own: the granule is what every one of them is aligned to.
        for r in traces {
            let align = r.align(info.block_size as u64);
            if align < unit as u64 {
                return Err(usage(format!(
                    "{}: --verify needs every I/O on whole {unit}-byte units; the trace {} has \
                     I/Os aligned to {align} bytes only",
                    info.uri, r.trace
                )));
            }
            granule = granule.min(align);
        }
        let v = match &plan.state {
            None => Verifier::new(run_id, unit, granule, span),
            Some(path) => {
                let (v, resumed) = Verifier::with_state(path, run_id, unit, granule, span)?;
                if resumed {
                    eprintln!(
                        "{}: continuing the verification session {:016x} kept in {}",
                        info.uri,
                        v.run_id,
                        path.display()
                    );
                }
                run_id = v.run_id;
                v
            }
        };
        let v = Some(std::sync::Arc::new(v));
        // An earlier target of this store with a shorter span takes this verifier too.
        for j in 0..ti {
            if same_store(&targets[j], t) {
                out[j] = v.clone();
            }
        }
        out.push(v);
    }
    Ok(Verifiers {
        run_id: Some(run_id),
        per_target: out,
    })
}

/// Whether two opened targets are one store: the same opened target (a `mem:` RAM disk is
/// opened once per URI), the same URI, or the same file or device path.
fn same_store(a: &std::sync::Arc<dyn Target>, b: &std::sync::Arc<dyn Target>) -> bool {
    if std::sync::Arc::ptr_eq(a, b) || a.info().uri == b.info().uri {
        return true;
    }
    let path = |t: &std::sync::Arc<dyn Target>| {
        let p = t.info().params.get("path")?.as_str()?.to_string();
        Some(std::fs::canonicalize(&p).unwrap_or_else(|_| p.into()))
    };
    matches!((path(a), path(b)), (Some(x), Some(y)) if x == y)
}

/// The verifiers of one `run` or `compare`: the run id they stamp and one per target.
pub struct Verifiers {
    pub run_id: Option<u64>,
    pub per_target: Vec<Option<std::sync::Arc<Verifier>>>,
}
