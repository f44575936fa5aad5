//! Suites: named lists of workloads, as the studies in shared/seeds ran them. Built-in suites
//! are TOML files compiled into the binary (`crates/engine/suites/`); user suites use the same
//! schema:
//!
//! ```toml
//! name = "my-suite"
//! description = "what it compares"
//! ramp = "5s"        # defaults for every workload below
//! time = "30s"
//! qd = 12
//!
//! [[workload]]
//! id = "database-4k"          # stable id (used by `diff` and the store)
//! title = "Database, 4 KiB 67/33 random"
//! group = "database"          # findings average within and across groups
//! segment = [{ bs = "4k", read = 67, random = 100 }]
//!
//! [[sweep]]                   # one workload per value (cartesian product of the lists)
//! id = "scaling"
//! title = "Random read, 4 KiB"
//! group = "scaling"
//! qd = [1, 2, 4, 8, 16, 32]   # queue-depth sweep
//! bs = ["4k", "8k"]           # transfer-size sweep (fills segments that give no size)
//! targets = [1, 2]            # 1 vs N instances of each target at once (LUNs per port,
//!                             # connections to one target)
//! paths = [1, 2, 6]           # each target over N paths (its portals in turn; targets
//!                             # without portals skip these workloads)
//! segment = [{ read = 100, random = 100 }]
//!
//! [[workload]]                # a trace replayed on every target (suite_trace.rs)
//! id = "oltp-trace"
//! trace = "oltp.iolog"        # relative to the suite file
//! speed = 2.0
//! offset_map = "scale"
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::spec::Workload;
pub use crate::suite_trace::SuiteTrace;
use crate::suite_trace::{refused_keys, TraceKeys};
use crate::units::{Bytes, Dur, LoadLevels};
use sanbench_doc::spec_toml::{Defaults, SegmentFile, WorkloadFile};

const BUILTIN: &[(&str, &str)] = &[
    ("quick", include_str!("../suites/quick.toml")),
    ("thirdio-2008", include_str!("../suites/thirdio-2008.toml")),
    ("ibm-xiv-2014", include_str!("../suites/ibm-xiv-2014.toml")),
    (
        "demartek-lsi-2011",
        include_str!("../suites/demartek-lsi-2011.toml"),
    ),
    ("nwc-2003", include_str!("../suites/nwc-2003.toml")),
    (
        "qlogic-fcoe-2010",
        include_str!("../suites/qlogic-fcoe-2010.toml"),
    ),
    (
        "snia-pts-iops",
        include_str!("../suites/snia-pts-iops.toml"),
    ),
    ("lab", include_str!("../suites/lab.toml")),
    (
        "nvme-vs-iscsi",
        include_str!("../suites/nvme-vs-iscsi.toml"),
    ),
    ("failover", include_str!("../suites/failover.toml")),
];

/// When a suite fault (`AT:LINK:ACTION`) fires in a window of length `window`: AT is a
/// duration ("10s") or a percentage of the window ("33%"), inside it. LINK and ACTION are
/// only checked to be there (the lab knows its links and actions).
pub fn fault_at(f: &str, window: Duration) -> Result<Duration, String> {
    let mut parts = f.splitn(3, ':');
    let (Some(at), Some(link), Some(action)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("fault '{f}' is not AT:LINK:ACTION"));
    };
    if link.is_empty() || action.is_empty() {
        return Err(format!("fault '{f}' is not AT:LINK:ACTION"));
    }
    let d = match at.strip_suffix('%') {
        Some(p) => {
            let p: f64 = p
                .parse()
                .ok()
                .filter(|p: &f64| p.is_finite() && *p > 0.0 && *p < 100.0)
                .ok_or_else(|| {
                    format!("fault '{f}': {at} is not a percentage above 0 and below 100")
                })?;
            window.mul_f64(p / 100.0)
        }
        None => crate::units::parse_duration(at).map_err(|e| format!("fault '{f}': {e}"))?,
    };
    if d >= window {
        return Err(format!(
            "fault '{f}' fires at {:.3} s, not inside the {:.3} s window",
            d.as_secs_f64(),
            window.as_secs_f64()
        ));
    }
    Ok(d)
}

/// Most paths a suite workload may ask for.
pub const MAX_PATHS: u32 = 64;

/// One workload of an expanded suite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteWorkload {
    pub id: String,
    pub title: String,
    pub group: String,
    pub workload: Workload,
    /// Run this many instances of each target at once (None: one).
    pub targets_at_once: Option<u32>,
    /// Reach each target over this many paths (its portals in turn, so 6 paths over 2
    /// portals are 3 sessions each; 1 is one path through the same multipath layer). Only
    /// targets with portals (iSCSI, NVMe/TCP, NBD) run such a workload; others skip it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<u32>,
    /// Faults fired during each cell's window (`AT:LINK:ACTION`, as `--fault`; AT may be a
    /// percentage of the window, LINK `pathN` for the lab link of the target's Nth path):
    /// checked for form here, against the lab by the command that runs them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<String>,
    /// A trace replayed instead of an access specification (`trace = "FILE"`); `workload`
    /// is then the replay's (its op shares, slots and rate), for accounting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<SuiteTrace>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Suite {
    pub name: String,
    pub description: String,
    pub source: Option<String>,
    /// How `--precondition` writes the span when it writes it: "fill" (one pass of 1 MiB
    /// sequential writes, the default) or "pts" (SNIA PTS: purge, then 2x the span in 128 KiB
    /// sequential writes; under `auto` a PTS suite writes sanbench's own targets this way).
    pub precondition: String,
    /// Response-time curve levels (percent of each target's closed-loop maximum) that
    /// `compare` runs after the closed-loop cells; empty: none.
    pub curve: Vec<f64>,
    pub workloads: Vec<SuiteWorkload>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    name: String,
    #[serde(default)]
    description: String,
    source: Option<String>,
    precondition: Option<String>,
    ramp: Option<Dur>,
    time: Option<Dur>,
    qd: Option<u32>,
    workers: Option<u32>,
    size: Option<Bytes>,
    align: Option<Bytes>,
    /// A flush after every N writes, in every workload that writes.
    flush_every: Option<u32>,
    /// Response-time curve levels.
    #[serde(default)]
    curve: Vec<f64>,
    #[serde(default)]
    workload: Vec<WorkloadDef>,
    #[serde(default)]
    sweep: Vec<SweepDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadDef {
    id: String,
    title: Option<String>,
    group: Option<String>,
    qd: Option<u32>,
    workers: Option<u32>,
    ramp: Option<Dur>,
    time: Option<Dur>,
    size: Option<Bytes>,
    align: Option<Bytes>,
    targets: Option<u32>,
    paths: Option<u32>,
    #[serde(default)]
    fault: Vec<String>,
    segment: Option<Vec<SegmentFile>>,
    /// A trace to replay instead of segments (suite_trace.rs), and how.
    trace: Option<String>,
    format: Option<String>,
    speed: Option<f64>,
    offset_map: Option<String>,
    afap: Option<bool>,
}

impl WorkloadDef {
    /// The trace workload this definition gives, if it names a trace; the keys that belong
    /// to one side only are refused on the other.
    fn trace_workload(
        &self,
        dir: Option<&std::path::Path>,
    ) -> Result<Option<(Workload, SuiteTrace)>, String> {
        let Some(trace) = &self.trace else {
            let only = refused_keys(&[
                ("format", self.format.is_some()),
                ("speed", self.speed.is_some()),
                ("offset_map", self.offset_map.is_some()),
                ("afap", self.afap.is_some()),
            ]);
            if !only.is_empty() {
                return Err(format!(
                    "workload {}: {} belong to a trace workload (trace = \"FILE\")",
                    self.id,
                    only.join(", ")
                ));
            }
            return Ok(None);
        };
        let refused = refused_keys(&[
            ("segment", self.segment.is_some()),
            ("workers", self.workers.is_some()),
            ("ramp", self.ramp.is_some()),
            ("size", self.size.is_some()),
            ("align", self.align.is_some()),
            ("targets", self.targets.is_some()),
            ("paths", self.paths.is_some()),
            ("fault", !self.fault.is_empty()),
        ]);
        if !refused.is_empty() {
            return Err(format!(
                "workload {}: a trace workload takes no {} (the trace gives its I/Os; keys: \
                 trace, format, speed, offset_map, afap, qd, time)",
                self.id,
                refused.join(", ")
            ));
        }
        let keys = TraceKeys {
            trace,
            format: self.format.as_deref(),
            speed: self.speed,
            offset_map: self.offset_map.as_deref(),
            afap: self.afap,
            qd: self.qd,
            time: self.time.map(|t| t.0),
        };
        crate::suite_trace::load(&self.id, &keys, dir).map(Some)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepDef {
    id: String,
    title: Option<String>,
    group: Option<String>,
    qd: Option<Vec<u32>>,
    bs: Option<Vec<Bytes>>,
    targets: Option<Vec<u32>>,
    paths: Option<Vec<u32>>,
    #[serde(default)]
    fault: Vec<String>,
    workers: Option<Vec<u32>>,
    ramp: Option<Dur>,
    time: Option<Dur>,
    size: Option<Bytes>,
    align: Option<Bytes>,
    segment: Vec<SegmentFile>,
}

/// Names of the built-in suites, in listing order.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

/// Loads a built-in suite by name, or a user suite from a TOML file path.
pub fn load(name_or_path: &str) -> Result<Suite, String> {
    if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
        return parse(text).map_err(|e| format!("built-in suite {name_or_path}: {e}"));
    }
    let path = std::path::Path::new(name_or_path);
    if path.extension().is_some_and(|e| e == "toml") || path.exists() {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read suite {name_or_path}: {e}"))?;
        // A trace workload's file is named relative to the suite's.
        let dir = path.parent().unwrap_or(std::path::Path::new(""));
        return parse_in(&text, Some(dir)).map_err(|e| format!("{name_or_path}: {e}"));
    }
    Err(format!(
        "no suite named '{name_or_path}' (built-in: {}; or give a .toml file)",
        builtin_names().join(", ")
    ))
}

struct Base<'a> {
    f: &'a SuiteFile,
}

impl Base<'_> {
    #[allow(clippy::too_many_arguments)]
    fn workload(
        &self,
        name: &str,
        qd: Option<u32>,
        workers: Option<u32>,
        ramp: Option<Dur>,
        time: Option<Dur>,
        size: Option<Bytes>,
        align: Option<Bytes>,
        segments: Vec<SegmentFile>,
    ) -> Result<Workload, String> {
        let wf = WorkloadFile {
            name: Some(name.to_string()),
            qd: qd.or(self.f.qd),
            workers: workers.or(self.f.workers),
            ramp: ramp.or(self.f.ramp),
            time: time.or(self.f.time),
            size: size.or(self.f.size),
            align: align.or(self.f.align),
            flush_every: None,
            fua: None,
            rate: None,
            arrival: None,
            segments,
        };
        let mut w = wf
            .into_workload(&Defaults::default())
            .map_err(|e| format!("workload {name}: {e}"))?;
        if w.has_writes() {
            w.flush_every = self.f.flush_every.unwrap_or(0);
        }
        w.validate().map_err(|e| format!("workload {name}: {e}"))?;
        Ok(w)
    }
}

/// Parses and expands a suite (a trace workload's file relative to the current directory).
pub fn parse(text: &str) -> Result<Suite, String> {
    parse_in(text, None)
}

/// Parses and expands a suite whose file is in `dir` (`None`: trace files are relative to
/// the current directory).
pub fn parse_in(text: &str, dir: Option<&std::path::Path>) -> Result<Suite, String> {
    let f: SuiteFile =
        toml::from_str(text).map_err(|e| sanbench_doc::spec_toml::toml_error(text, &e))?;
    let base = Base { f: &f };
    let mut workloads = Vec::new();
    for d in &f.workload {
        if let Some((w, trace)) = d.trace_workload(dir)? {
            workloads.push(SuiteWorkload {
                id: d.id.clone(),
                title: d.title.clone().unwrap_or_else(|| d.id.clone()),
                group: d.group.clone().unwrap_or_else(|| "default".into()),
                workload: w,
                targets_at_once: None,
                paths: None,
                faults: Vec::new(),
                trace: Some(trace),
            });
            continue;
        }
        let Some(segment) = d.segment.clone() else {
            return Err(format!(
                "workload {}: give its access specification (segment = [...]) or a trace to \
                 replay (trace = \"FILE\")",
                d.id
            ));
        };
        let w = base.workload(
            &d.id, d.qd, d.workers, d.ramp, d.time, d.size, d.align, segment,
        )?;
        workloads.push(SuiteWorkload {
            id: d.id.clone(),
            title: d.title.clone().unwrap_or_else(|| d.id.clone()),
            group: d.group.clone().unwrap_or_else(|| "default".into()),
            workload: w,
            targets_at_once: d.targets,
            paths: d.paths,
            faults: d.fault.clone(),
            trace: None,
        });
    }
    for s in &f.sweep {
        let some = |v: &Option<Vec<u32>>| -> Vec<Option<u32>> {
            match v {
                Some(list) => list.iter().map(|x| Some(*x)).collect(),
                None => vec![None],
            }
        };
        let bss: Vec<Option<Bytes>> = match &s.bs {
            Some(list) => list.iter().map(|b| Some(*b)).collect(),
            None => vec![None],
        };
        for bs in &bss {
            for qd in some(&s.qd) {
                for workers in some(&s.workers) {
                    for (targets, paths) in some(&s.targets)
                        .into_iter()
                        .flat_map(|t| some(&s.paths).into_iter().map(move |p| (t, p)))
                    {
                        let mut id = s.id.clone();
                        let mut title = s.title.clone().unwrap_or_else(|| s.id.clone());
                        let mut segs = s.segment.clone();
                        if let Some(b) = bs {
                            let pretty = b.to_string();
                            id.push_str(&format!("-{}", pretty.to_lowercase()));
                            title.push_str(&format!(", {pretty}"));
                            for seg in &mut segs {
                                if seg.bs.is_none()
                                    && seg.read_bs.is_none()
                                    && seg.write_bs.is_none()
                                {
                                    seg.bs = Some(*b);
                                }
                            }
                        }
                        if let Some(q) = qd {
                            id.push_str(&format!("-qd{q}"));
                            title.push_str(&format!(", QD {q}"));
                        }
                        if let Some(n) = workers {
                            id.push_str(&format!("-w{n}"));
                            title.push_str(&format!(
                                ", {n} worker{}",
                                if n == 1 { "" } else { "s" }
                            ));
                        }
                        if let Some(n) = targets {
                            id.push_str(&format!("-x{n}"));
                            title.push_str(&format!(
                                ", {n} target{} at once",
                                if n == 1 { "" } else { "s" }
                            ));
                        }
                        if let Some(n) = paths {
                            id.push_str(&format!("-p{n}"));
                            title.push_str(&format!(", {n} path{}", if n == 1 { "" } else { "s" }));
                        }
                        let w =
                            base.workload(&id, qd, workers, s.ramp, s.time, s.size, s.align, segs)?;
                        workloads.push(SuiteWorkload {
                            id,
                            title,
                            group: s.group.clone().unwrap_or_else(|| "default".into()),
                            workload: w,
                            targets_at_once: targets,
                            paths,
                            faults: s.fault.clone(),
                            trace: None,
                        });
                    }
                }
            }
        }
    }
    if workloads.is_empty() {
        return Err("the suite has no workloads".into());
    }
    let mut seen = std::collections::HashSet::new();
    for w in &workloads {
        if !seen.insert(w.id.clone()) {
            return Err(format!("workload id '{}' appears twice", w.id));
        }
        if w.targets_at_once == Some(0) {
            return Err(format!("workload {}: targets must be at least 1", w.id));
        }
        for f in &w.faults {
            fault_at(f, w.workload.time).map_err(|e| format!("workload {}: {e}", w.id))?;
        }
        if w.paths.is_some_and(|p| !(1..=MAX_PATHS).contains(&p)) {
            return Err(format!("workload {}: paths must be 1 to {MAX_PATHS}", w.id));
        }
    }
    let precondition = f.precondition.clone().unwrap_or_else(|| "fill".into());
    if !matches!(precondition.as_str(), "fill" | "pts") {
        return Err(format!(
            "precondition = \"{precondition}\" is not a suite precondition (fill or pts)"
        ));
    }
    Ok(Suite {
        name: f.name.clone(),
        description: f.description.clone(),
        source: f.source.clone(),
        precondition,
        curve: LoadLevels::new(f.curve.clone())
            .map_err(|e| format!("curve: {e}"))?
            .0,
        workloads,
    })
}

impl Suite {
    /// Replaces every workload's measured time and/or ramp (`--time`, `--ramp` for a quick
    /// look). A trace workload's time is its limit (the replay stops there, `complete:
    /// false`); it has no ramp (its first I/Os are the trace's).
    pub fn scale(&mut self, time: Option<Duration>, ramp: Option<Duration>) {
        for w in &mut self.workloads {
            if let Some(t) = time {
                w.workload.time = t;
            }
            if let Some(r) = ramp.filter(|_| w.trace.is_none()) {
                w.workload.ramp = r;
            }
        }
    }

    /// Planned duration of one pass over `targets` targets (ramp + time per cell).
    pub fn duration(&self, targets: usize) -> Duration {
        self.workloads
            .iter()
            .map(|w| (w.workload.ramp + w.workload.time) * targets as u32)
            .sum()
    }
}

#[cfg(test)]
#[path = "suite_tests.rs"]
mod tests;
