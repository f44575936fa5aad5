//! A comparison as given, before anything runs: its suite (scaled by `--time`, `--ramp` and
//! the data flags) and its targets (named, references marked, the lab's added), checked.

use sanbench_doc::compare::LinkInfo;
use std::path::Path;
use std::time::Duration;

use sanbench_engine::suite::Suite;

use crate::error::{usage, CliError};

/// Splits `NAME=TARGET`. The name may not contain ':' or '/', so URIs holding '=' stay whole.
/// Without a name the target is named by its URI, secrets masked (`uri::redact`).
pub fn split_named(s: &str) -> (String, String) {
    if let Some((name, uri)) = s.split_once('=') {
        if !name.is_empty() && !name.contains([':', '/']) && !uri.is_empty() {
            return (name.to_string(), uri.to_string());
        }
    }
    (sanbench_engine::uri::redact(s), s.to_string())
}

/// A suite workload as the comparison document lists it.
pub fn workload_entry(w: &sanbench_engine::suite::SuiteWorkload) -> sanbench_store::WorkloadEntry {
    sanbench_store::WorkloadEntry {
        id: w.id.clone(),
        title: w.title.clone(),
        group: w.group.clone(),
        spec: w.workload.clone(),
        targets_at_once: w.targets_at_once,
        paths: w.paths,
    }
}

#[derive(Clone)]
pub struct Prepared {
    pub suite: Suite,
    pub targets: Vec<(String, String)>,
    /// Per target (same order): a reference ceiling, never compared in the findings.
    pub references: Vec<bool>,
    /// Per target (same order): the lab link it sits behind, for targets from `--lab`.
    pub links: Vec<Option<LinkInfo>>,
    /// Per target (same order): the lab links of its paths, in path order (a lab target
    /// behind `--paths`), or its one link; empty for targets not from the lab.
    pub lab_paths: Vec<Vec<String>>,
}

/// Scales `suite` as `--time`, `--ramp`, `--flush-every` and `--fua` ask (each `None`: as the
/// suite says).
pub fn scale(
    suite: &mut Suite,
    time: Option<Duration>,
    ramp: Option<Duration>,
    flush_every: Option<u32>,
    fua_pct: Option<f64>,
) -> Result<(), CliError> {
    if time.is_some_and(|t| t.is_zero()) {
        return Err(usage("--time must be longer than zero"));
    }
    suite.scale(time, ramp);
    // A trace workload writes what its trace writes: no flushes or FUA of its own.
    for w in suite.workloads.iter_mut().filter(|w| w.trace.is_none()) {
        if w.workload.has_writes() {
            if let Some(n) = flush_every {
                w.workload.flush_every = n;
            }
            if let Some(p) = fua_pct {
                w.workload.fua_pct = p;
            }
            w.workload.validate().map_err(usage)?;
        }
    }
    Ok(())
}

/// The comparison of `suite` on `targets` as given (`[ref:][NAME=]TARGET`), the targets of
/// the lab at `lab` added, those `reference` names marked as references; checked: names
/// unique, something left to compare.
pub fn prepare(
    suite: Suite,
    targets: &[String],
    reference: &[String],
    lab: Option<&Path>,
) -> Result<Prepared, CliError> {
    let mut references = Vec::new();
    let mut targets: Vec<(String, String)> = targets
        .iter()
        .map(|t| {
            let (is_ref, t) = match t.strip_prefix("ref:") {
                Some(rest) => (true, rest),
                None => (false, t.as_str()),
            };
            references.push(is_ref);
            split_named(t)
        })
        .collect();
    let mut links = vec![None; targets.len()];
    let mut lab_paths = vec![Vec::new(); targets.len()];
    if let Some(path) = lab {
        for t in sanbench_lab::load_lab_targets(path).map_err(|e| usage(e.to_string()))? {
            lab_paths.push(if t.paths.is_empty() {
                vec![t.link.name.clone()]
            } else {
                t.paths.iter().map(|p| p.link.name.clone()).collect()
            });
            targets.push((t.name, t.uri));
            links.push(Some(t.link));
            references.push(false);
        }
    }
    let mut names = std::collections::HashSet::new();
    for (n, _) in &targets {
        if !names.insert(n.clone()) {
            return Err(usage(format!(
                "two targets are named '{n}'; name them NAME=TARGET"
            )));
        }
    }
    for name in reference {
        match targets.iter().position(|(n, _)| n == name) {
            Some(i) => references[i] = true,
            None => {
                return Err(usage(format!(
                    "--reference {name}: no target is named '{name}' (name targets NAME=TARGET)"
                )))
            }
        }
    }
    if !references.is_empty() && references.iter().all(|r| *r) {
        return Err(usage(
            "every target is a reference: nothing is left to compare",
        ));
    }
    Ok(Prepared {
        suite,
        targets,
        references,
        links,
        lab_paths,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(split_named("fast=mem:1G"), ("fast".into(), "mem:1G".into()));
        assert_eq!(split_named("mem:1G"), ("mem:1G".into(), "mem:1G".into()));
        let u = "nbd+unix:///x?socket=/tmp/s";
        assert_eq!(split_named(u), (u.into(), u.into()));
        assert_eq!(
            split_named("/dev/sdb"),
            ("/dev/sdb".into(), "/dev/sdb".into())
        );
    }
}
