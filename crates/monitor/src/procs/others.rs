//! The load beside the measurement: CPU of the processes in no group (not sanbench, not a
//! `--watch` match, not a matched kernel thread) over the window, by name.
//!
//! A benchmark on a shared machine measures whatever else runs there too (a build beside a
//! comparison once made every finding of a demo "limited by the initiator host's CPU"); the
//! host's busy time says that the machine was busy, this says who with. It is a lower bound:
//! a process that starts and ends between two passes of the tracker (a second apart by
//! default) is not seen, one that ends counts up to its last reading, and kworkers serving
//! other workqueues are left out (they may be doing this run's work).

use super::{Class, ProcessTracker};

use sanbench_doc::host::{largest, tally};
pub use sanbench_doc::host::{OtherProcesses, Others, NOTABLE_PCT};

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
        // In a result's cpu block; absent in older results.
        let cpu: sanbench_doc::host::CpuReport = serde_json::from_value(
            serde_json::json!({ "busy_pct": 3.0, "others": serde_json::to_value(&a).unwrap() }),
        )
        .unwrap();
        assert_eq!(cpu.others, Some(a));
        let older: sanbench_doc::host::CpuReport =
            serde_json::from_value(serde_json::json!({ "busy_pct": 3.0 })).unwrap();
        assert_eq!(older.others, None);
    }
}
