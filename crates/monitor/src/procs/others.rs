//! The load beside the measurement: CPU of the processes in no group (not sanbench, not a
//! `--watch` match, not a matched kernel thread) over the window, by name.
//!
//! A benchmark on a shared machine measures whatever else runs there too (a build beside a
//! comparison once made every finding of a demo "limited by the initiator host's CPU"); the
//! host's busy time says that the machine was busy, this says who with. It is a lower bound:
//! a process that starts and ends between two passes of the tracker (a second apart by
//! default) is not seen, one that ends counts up to its last reading, and kworkers serving
//! other workqueues are left out (they may be doing this run's work).

use serde::{Deserialize, Serialize};

use super::{Class, ProcessTracker};

/// The processes of one name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OtherProcesses {
    /// comm (`/proc/PID/stat`'s name).
    pub name: String,
    /// How many processes of that name ran in the window.
    pub processes: usize,
    pub cpu_s: f64,
}

/// CPU of every process in no group over the window (`cpu.others` of a result).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Others {
    pub cpu_s: f64,
    /// `cpu_s` over the window's length, in percent of one core.
    pub pct_of_core: f64,
    /// The names that used the most, largest first (at most [`Others::TOP`]).
    pub top: Vec<OtherProcesses>,
}

/// Other processes from this share of one core on, averaged over a window, are worth a
/// warning: on a quiet host the daemons add up to a few per cent at most.
pub const NOTABLE_PCT: f64 = 10.0;

impl Others {
    /// The most names kept.
    pub const TOP: usize = 5;

    /// From a result's `cpu` block (JSON), where it has one.
    pub fn from_cpu(cpu: &serde_json::Value) -> Option<Others> {
        serde_json::from_value(cpu.get("others")?.clone()).ok()
    }

    /// At least [`NOTABLE_PCT`] of a core.
    pub fn notable(&self) -> bool {
        self.pct_of_core >= NOTABLE_PCT
    }

    /// The names with their CPU: "cargo 4.0 s, rustc 4.0 s (2 processes)".
    pub fn names(&self) -> String {
        // Names under 0.05 s (a daemon's tick) say nothing; the first is always named.
        let parts: Vec<String> = self
            .top
            .iter()
            .enumerate()
            .filter(|(i, o)| *i == 0 || o.cpu_s >= 0.05)
            .map(|(_, o)| {
                let n = if o.processes > 1 {
                    format!(" ({} processes)", o.processes)
                } else {
                    String::new()
                };
                format!("{} {:.1} s{n}", o.name, o.cpu_s)
            })
            .collect();
        parts.join(", ")
    }

    /// Several windows together (the cells of a comparison): CPU and each name's CPU summed,
    /// the largest share of a core kept, and for each name the most processes one window saw
    /// (the same process runs through many windows).
    pub fn merge<'a>(all: impl IntoIterator<Item = &'a Others>) -> Others {
        let mut m = Others::default();
        let mut by_name = Vec::new();
        for o in all {
            m.cpu_s += o.cpu_s;
            m.pct_of_core = m.pct_of_core.max(o.pct_of_core);
            for p in &o.top {
                tally(&mut by_name, &p.name, p.processes, p.cpu_s, usize::max);
            }
        }
        m.top = largest(by_name);
        m
    }
}

/// Adds `processes` processes of `name` that used `cpu_s` to `by_name`, their counts joined
/// by `count` (a sum within a window, the most of any window across windows).
fn tally(
    by_name: &mut Vec<OtherProcesses>,
    name: &str,
    processes: usize,
    cpu_s: f64,
    count: fn(usize, usize) -> usize,
) {
    match by_name.iter_mut().find(|o| o.name == name) {
        Some(o) => {
            o.processes = count(o.processes, processes);
            o.cpu_s += cpu_s;
        }
        None => by_name.push(OtherProcesses {
            name: name.to_string(),
            processes,
            cpu_s,
        }),
    }
}

/// The names that used any CPU, largest first, at most [`Others::TOP`].
fn largest(mut by_name: Vec<OtherProcesses>) -> Vec<OtherProcesses> {
    by_name.retain(|o| o.cpu_s > 0.0);
    by_name.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s).then(a.name.cmp(&b.name)));
    by_name.truncate(Others::TOP);
    by_name
}

impl ProcessTracker {
    /// [`Others`] over the window, `window_s` seconds long.
    pub fn others(&self, window_s: f64) -> Others {
        let tck = self.clk_tck as f64;
        let mut by_name = Vec::new();
        for e in self.entries.values() {
            if e.class != Class::Ignored || !e.acct.in_window {
                continue;
            }
            let (u, s) = e.acct.delta();
            tally(
                &mut by_name,
                &e.name,
                1,
                (u + s) as f64 / tck,
                usize::saturating_add,
            );
        }
        let cpu_s: f64 = by_name.iter().map(|o| o.cpu_s).sum();
        let by_name = largest(by_name);
        Others {
            cpu_s,
            pct_of_core: if window_s > 0.0 {
                cpu_s / window_s * 100.0
            } else {
                0.0
            },
            top: by_name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(pct: f64, top: &[(&str, usize, f64)]) -> Others {
        Others {
            cpu_s: top.iter().map(|t| t.2).sum(),
            pct_of_core: pct,
            top: top
                .iter()
                .map(|&(name, processes, cpu_s)| OtherProcesses {
                    name: name.into(),
                    processes,
                    cpu_s,
                })
                .collect(),
        }
    }

    #[test]
    fn names_merge_and_the_threshold() {
        let a = o(
            40.0,
            &[("cargo", 1, 2.0), ("rustc", 4, 1.25), ("cron", 1, 0.01)],
        );
        // A daemon's tick is not named; the first name always is.
        assert_eq!(a.names(), "cargo 2.0 s, rustc 1.2 s (4 processes)");
        assert_eq!(o(12.0, &[("cron", 1, 0.01)]).names(), "cron 0.0 s");
        assert!(a.notable() && o(10.0, &[]).notable() && !o(9.9, &[]).notable());
        // The same cargo through two windows: its CPU summed, its processes not.
        let b = o(15.0, &[("rustc", 2, 3.0), ("cargo", 1, 0.5)]);
        let m = Others::merge([&a, &b]);
        assert_eq!(m.names(), "rustc 4.2 s (4 processes), cargo 2.5 s");
        assert_eq!((m.pct_of_core, m.cpu_s), (40.0, a.cpu_s + b.cpu_s));
        // From a result's cpu block; absent in older results.
        let cpu =
            serde_json::json!({ "busy_pct": 3.0, "others": serde_json::to_value(&a).unwrap() });
        assert_eq!(Others::from_cpu(&cpu), Some(a));
        assert_eq!(
            Others::from_cpu(&serde_json::json!({ "busy_pct": 3.0 })),
            None
        );
    }
}
