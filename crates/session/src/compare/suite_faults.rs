//! A suite's faults (`fault = ["33%:path2:down", ...]` on a workload): resolved per target
//! into the `--fault` schedule the lab fires (AT from a percentage of the workload's window,
//! `pathN` to the lab link carrying that target's Nth path) and checked against the lab
//! before any cell runs.

use std::collections::HashMap;
use std::sync::Arc;

use sanbench_engine::suite::{fault_at, SuiteWorkload};

use super::config::CompareConfig;
use super::prepared::Prepared;
use crate::error::{usage, CliError};
use crate::faults::Faults;

/// Why a workload's faults do not resolve for a target.
#[derive(Debug)]
pub enum Resolve {
    /// The target has no path the faults name: it skips the workload.
    NoPath(String),
    Bad(CliError),
}

/// Per (workload id, target index): the schedule its cells fire, or why the target skips
/// the workload (it has no such path: a single-link lab target, a target not from the lab).
#[derive(Default)]
pub struct SuiteFaults {
    pub fire: HashMap<(String, usize), Arc<Faults>>,
    pub skip: HashMap<(String, usize), String>,
}

/// One workload's faults for one target, as `--fault` values.
pub fn resolve(w: &SuiteWorkload, paths: &[String], target: &str) -> Result<Vec<String>, Resolve> {
    w.faults
        .iter()
        .map(|f| {
            let at = fault_at(f, w.workload.time)
                .map_err(|e| Resolve::Bad(usage(format!("{}: {e}", w.id))))?;
            let mut parts = f.splitn(3, ':');
            let (_, link, action) = (parts.next(), parts.next().unwrap_or(""), parts.next());
            let link = match link
                .strip_prefix("path")
                .and_then(|n| n.parse::<usize>().ok())
            {
                Some(n) => paths.get(n.wrapping_sub(1)).cloned().ok_or_else(|| {
                    Resolve::NoPath(format!(
                        "{}: fault {f}: target {target} has {} (path{n} names the lab link of \
                         a lab target's path {n}; start the lab with --paths)",
                        w.id,
                        match paths.len() {
                            0 => "no lab paths".to_string(),
                            k => format!("{k} lab path{}", if k == 1 { "" } else { "s" }),
                        }
                    ))
                })?,
                None => link.to_string(),
            };
            Ok(format!(
                "{}us:{link}:{}",
                at.as_micros(),
                action.unwrap_or_default()
            ))
        })
        .collect()
}

/// Every workload's faults for every target, checked against the lab (before any I/O).
pub fn prepare(a: &CompareConfig, p: &Prepared, mpi: bool) -> Result<SuiteFaults, CliError> {
    let mut out = SuiteFaults::default();
    let with: Vec<&SuiteWorkload> = p
        .suite
        .workloads
        .iter()
        .filter(|w| !w.faults.is_empty())
        .collect();
    if with.is_empty() {
        return Ok(out);
    }
    if !a.faults.is_empty() {
        return Err(usage(format!(
            "the suite's workload {} fires its own faults: run it without --fault",
            with[0].id
        )));
    }
    if mpi {
        return Err(usage(
            "a suite with faults does not run as an MPI job yet: compare without mpirun or srun",
        ));
    }
    for w in with {
        for (ti, (name, _)) in p.targets.iter().enumerate() {
            let key = (w.id.clone(), ti);
            let items = match resolve(w, &p.lab_paths[ti], name) {
                Ok(items) => items,
                Err(Resolve::NoPath(why)) => {
                    out.skip.insert(key, why);
                    continue;
                }
                Err(Resolve::Bad(e)) => return Err(e),
            };
            let window = [(w.id.clone(), w.workload.time)];
            if let Some(f) = Faults::prepare(&items, a.lab.as_deref(), &window)? {
                out.fire.insert(key, f);
            }
        }
    }
    if out.fire.is_empty() {
        let why = out.skip.values().next().cloned().unwrap_or_default();
        return Err(usage(format!(
            "no target can run the suite's faults: {why}"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(faults: &[&str]) -> SuiteWorkload {
        let s = sanbench_engine::suite::load("failover").unwrap();
        let mut w = s.workloads[0].clone();
        w.workload.time = std::time::Duration::from_secs(30);
        w.faults = faults.iter().map(|f| f.to_string()).collect();
        w
    }

    #[test]
    fn percentages_and_path_names_become_the_lab_schedule() {
        let w = workload(&["33%:path2:down", "67%:path2:up", "12s:a:loss=5"]);
        let paths = ["a".to_string(), "b".to_string()];
        assert_eq!(
            resolve(&w, &paths, "t").unwrap(),
            ["9900000us:b:down", "20100000us:b:up", "12000000us:a:loss=5"]
        );
        let lab = sanbench_lab::fault::parse_schedule(&resolve(&w, &paths, "t").unwrap());
        assert_eq!(lab.unwrap().len(), 3);
    }

    #[test]
    fn a_target_without_that_path_is_named_and_skips() {
        let w = workload(&["33%:path2:down"]);
        let msg = |r: Result<Vec<String>, Resolve>| match r.unwrap_err() {
            Resolve::NoPath(m) => m,
            Resolve::Bad(e) => e.message(),
        };
        let e = msg(resolve(&w, &["a".to_string()], "iscsi@a"));
        assert!(e.contains("target iscsi@a has 1 lab path"), "{e}");
        let e = msg(resolve(&w, &[], "ram"));
        assert!(e.contains("target ram has no lab paths"), "{e}");
        let e = msg(resolve(&workload(&["33%:path0:down"]), &["a".into()], "t"));
        assert!(e.contains("path0"), "{e}");
    }
}
