//! What limited each cell (`result.bottleneck`, crates/analysis/src/bottleneck.rs), as the
//! report uses it: the "Limited by" column of the tables, the note on a finding whose cells on
//! either side were limited by something other than the interconnect or the target under
//! test, and `compare --require-headroom`'s warning.
//!
//! A finding compares two targets; if the initiator's CPU was what both hit, the ratio says
//! how much CPU each costs per I/O on this host, not how their links compare. The note says so
//! beside the sentence ("(both limited by the initiator host's CPU: this compares CPU cost
//! per I/O, not the links)"), so that a reader does not take it for a statement about the
//! interconnect. A side counts as limited elsewhere when most of its cells were.

use std::collections::BTreeMap;

use sanbench_doc::bottleneck::Verdict;
use sanbench_doc::run::TargetResult;
use sanbench_doc::{Cell, Comparison};

use crate::analysis::{flavour, Flavour};
use crate::Finding;

/// The verdict most of some cells had, and how many had it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub verdict: Verdict,
    pub agree: usize,
    /// Cells with a verdict.
    pub of: usize,
}

impl Limit {
    /// "init-cpu" when every cell agrees, "init-cpu 2/3" otherwise.
    pub fn cell_text(&self) -> String {
        if self.agree == self.of {
            self.verdict.short().to_string()
        } else {
            format!("{} {}/{}", self.verdict.short(), self.agree, self.of)
        }
    }

    /// For a narrow terminal column: "init-cpu", "init-cpu*" when not every cell agrees.
    pub fn short_text(&self) -> String {
        format!(
            "{}{}",
            self.verdict.short(),
            if self.agree == self.of { "" } else { "*" }
        )
    }
}

/// The modal verdict of some results (ties: the verdict listed first in [`Verdict`]).
pub fn limit_of<'a>(results: impl IntoIterator<Item = &'a TargetResult>) -> Option<Limit> {
    let mut counts: BTreeMap<Verdict, usize> = BTreeMap::new();
    for r in results {
        if let Some(b) = &r.bottleneck {
            *counts.entry(b.verdict).or_default() += 1;
        }
    }
    let of = counts.values().sum();
    let (verdict, agree) =
        counts
            .into_iter()
            .fold(None, |best: Option<(Verdict, usize)>, (v, n)| match best {
                Some((_, m)) if m >= n => best,
                _ => Some((v, n)),
            })?;
    Some(Limit { verdict, agree, of })
}

/// A workload's cells on a target (closed loop), as the tables show them.
pub fn cell_limit(cmp: &Comparison, workload: &str, target: &str) -> Option<Limit> {
    limit_of(cmp.cells_of(workload, target).map(|c| &c.result))
}

/// The workloads a finding stands on: every workload of its flavour (a finding's average
/// covers all of its category's tests), taken from the workload it names or from its label.
fn finding_workloads<'a>(cmp: &'a Comparison, f: &Finding) -> Vec<&'a str> {
    let fl = cmp
        .workloads
        .iter()
        .find(|w| w.id == f.max_workload)
        .map(flavour)
        .or_else(|| {
            let l = f.label.to_ascii_lowercase();
            if l.starts_with("bandwidth") {
                Some(Flavour::Bandwidth)
            } else if l.starts_with("iops") || l.starts_with("database") {
                Some(Flavour::Io)
            } else {
                None
            }
        });
    cmp.workloads
        .iter()
        .filter(|w| fl.is_none_or(|fl| flavour(w) == fl))
        .map(|w| w.id.as_str())
        .collect()
}

/// How one side of a finding was limited, when most of its cells were limited elsewhere
/// than by the interconnect or the target.
fn side_limit(cmp: &Comparison, target: &str, workloads: &[&str]) -> Option<Limit> {
    let cells: Vec<&Cell> = workloads
        .iter()
        .flat_map(|w| cmp.cells_of(w, target))
        .collect();
    let elsewhere: Vec<&TargetResult> = cells
        .iter()
        .map(|c| &c.result)
        .filter(|r| {
            r.bottleneck
                .as_ref()
                .is_some_and(|b| !b.verdict.about_the_target())
        })
        .collect();
    let judged = cells
        .iter()
        .filter(|c| c.result.bottleneck.is_some())
        .count();
    if elsewhere.len() * 2 <= judged {
        return None;
    }
    let mut l = limit_of(elsewhere)?;
    l.of = judged;
    Some(l)
}

/// What a comparison of two sides limited this way measures instead.
fn instead(v: Verdict) -> &'static str {
    match v {
        Verdict::InitiatorCpu | Verdict::HostCpu => "this compares CPU cost per I/O, not the links",
        _ => "this compares how well the generator kept its queue full, not the links",
    }
}

/// Whether a target is reached over this host's loopback (every portal of its URI is
/// 127.0.0.0/8, ::1 or localhost) and not through a lab link: its "interconnect" is this
/// host's own TCP stack, and its server shares the host's CPUs with the initiator.
pub fn on_loopback(cmp: &Comparison, target: &str) -> bool {
    cmp.targets
        .iter()
        .find(|t| t.name == target)
        .is_some_and(|t| t.link.is_none() && loopback_uri(&t.uri))
}

/// `nbd://127.0.0.1:10809/x`, `iscsi://[::1]:3260/...`, `nvme+tcp://localhost/...`,
/// multipath `iscsi://127.0.0.1:3260,127.0.0.1:3261/...`: true when there is at least one
/// host and every host is a loopback address.
pub fn loopback_uri(uri: &str) -> bool {
    let Some((_, rest)) = uri.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // Credentials (iscsi://user%pass@host) come before the last '@'.
    let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if hosts.is_empty() {
        return false;
    }
    hosts.split(',').all(|portal| {
        let host = if let Some(v6) = portal.strip_prefix('[') {
            v6.split(']').next().unwrap_or("")
        } else {
            portal.split(':').next().unwrap_or("")
        };
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// The note for a finding between `a` and `b`, if either side was limited elsewhere, or
/// else if both were served over this host's loopback (the demo's built-in servers): the
/// bottleneck verdict reads `latency` there ("the round trip itself"), but that round trip
/// is this host's CPU too, so the finding compares implementations, not interconnects.
pub fn finding_note(cmp: &Comparison, f: &Finding) -> Option<String> {
    limit_note(cmp, f).or_else(|| {
        (on_loopback(cmp, &f.better) && on_loopback(cmp, &f.worse)).then(|| {
            "(both served over loopback on this host: this compares the implementations' \
             CPU and wake-up costs, not interconnects)"
                .to_string()
        })
    })
}

/// The note for a finding between `a` and `b`, if either side was limited elsewhere.
fn limit_note(cmp: &Comparison, f: &Finding) -> Option<String> {
    // Curve findings compare open-loop points at the same offered load: their limit is the
    // asked rate by construction.
    if f.label.contains("% load") {
        return None;
    }
    let ws = finding_workloads(cmp, f);
    let a = side_limit(cmp, &f.better, &ws);
    let b = side_limit(cmp, &f.worse, &ws);
    let count = |l: &Limit| {
        if l.agree == l.of {
            String::new()
        } else {
            format!(" in {} of {} cells", l.agree, l.of)
        }
    };
    Some(match (a, b) {
        (Some(x), Some(y)) if x.verdict.phrase() == y.verdict.phrase() => format!(
            "(both limited by {}: {})",
            x.verdict.phrase(),
            instead(x.verdict)
        ),
        (Some(x), Some(y)) => format!(
            "({} limited by {}{}, {} by {}{}: not a comparison of the links)",
            f.better,
            x.verdict.phrase(),
            count(&x),
            f.worse,
            y.verdict.phrase(),
            count(&y)
        ),
        (Some(x), None) | (None, Some(x)) => {
            let who = if a.is_some() { &f.better } else { &f.worse };
            format!(
                "({who} limited by {}{}: the difference may be that, not the link)",
                x.verdict.phrase(),
                count(&x)
            )
        }
        (None, None) => return None,
    })
}

/// Appends the note to every finding that needs it.
pub fn annotate(cmp: &Comparison, findings: &mut [Finding]) {
    for f in findings.iter_mut() {
        if let Some(n) = finding_note(cmp, f) {
            f.text = format!("{} {n}", f.text);
        }
    }
}

/// `--require-headroom`: one warning naming every workload and target whose cells were
/// limited elsewhere than by the interconnect or the target (none: no warning).
pub fn warning(cmp: &Comparison) -> Option<String> {
    if !cmp.require_headroom {
        return None;
    }
    let mut parts = Vec::new();
    for w in &cmp.workloads {
        for t in cmp.targets.iter().filter(|t| !t.reference) {
            let cells: Vec<&Cell> = cmp.cells_of(&w.id, &t.name).collect();
            let elsewhere: Vec<&TargetResult> = cells
                .iter()
                .map(|c| &c.result)
                .filter(|r| {
                    r.bottleneck
                        .as_ref()
                        .is_some_and(|b| !b.verdict.about_the_target())
                })
                .collect();
            if let Some(l) = limit_of(elsewhere) {
                parts.push(format!(
                    "{} on {} ({} in {} of {})",
                    w.id,
                    t.name,
                    l.verdict,
                    l.agree,
                    cells.len()
                ));
            }
        }
    }
    (!parts.is_empty()).then(|| {
        format!(
            "--require-headroom: {} cell group{} limited by something other than the \
             interconnect or the target under test, so their figures describe this host \
             (its CPU, the generator) more than what was compared: {}. Give the initiator \
             more CPU (--cpus, fewer workers per core, a faster host) or read those \
             comparisons as CPU cost per I/O.",
            parts.len(),
            if parts.len() == 1 { "" } else { "s" },
            parts.join("; ")
        )
    })
}

#[cfg(test)]
#[path = "headroom_tests.rs"]
mod tests;
