//! What the endpoint shows, and its text (Prometheus exposition format 0.0.4): per series key
//! (target, and the comparison's cell: workload and round), per op the I/Os, bytes and errors
//! (counters), a latency histogram with fixed exponential buckets, the I/Os in flight (gauge);
//! the host's CPU busy share (gauge).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// The ops the counters are kept for.
pub const OPS: [&str; 3] = ["read", "write", "flush"];

/// Bucket bounds in seconds: 1 µs × 2^k, k = 0..=24 (1 µs .. 16.8 s), then +Inf.
pub fn bounds() -> impl Iterator<Item = f64> {
    (0..=24).map(|k| 1e-6 * f64::from(1u32 << k))
}
const N_BOUNDS: usize = 25;

/// Which series: target and (in a comparison) the cell.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub target: String,
    pub workload: Option<String>,
    pub round: Option<u32>,
}

/// One op's figures of one series.
#[derive(Clone, Debug, Default)]
pub struct OpFigures {
    pub ios: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Observations at or below each bound (not cumulative: summed when rendered).
    buckets: [u64; N_BOUNDS],
    /// Above the last bound.
    over: u64,
    sum_s: f64,
}

impl OpFigures {
    /// Adds `n` latencies of `ns` nanoseconds each.
    pub fn observe(&mut self, ns: u64, n: u64) {
        let s = ns as f64 / 1e9;
        match bounds().position(|b| s <= b) {
            Some(i) => self.buckets[i] += n,
            None => self.over += n,
        }
        self.sum_s += s * n as f64;
    }
}

#[derive(Default)]
struct Series {
    ops: [OpFigures; 3],
    inflight: u64,
}

#[derive(Default)]
struct State {
    series: BTreeMap<Key, Series>,
    cpu_busy_pct: Option<f64>,
}

/// The figures the endpoint serves, updated by the run as its intervals finish.
#[derive(Default)]
pub struct Registry {
    state: Mutex<State>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The figures stay meaningful whatever thread panicked while holding them.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Registry {
    /// Adds to `key`'s op `op` (an index into [`OPS`]) with `f`.
    pub fn update(&self, key: &Key, f: impl FnOnce(&mut [OpFigures; 3], &mut u64)) {
        let mut g = lock(&self.state);
        let s = g.series.entry(key.clone()).or_default();
        f(&mut s.ops, &mut s.inflight);
    }

    pub fn set_cpu_busy_pct(&self, pct: Option<f64>) {
        lock(&self.state).cpu_busy_pct = pct;
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let g = lock(&self.state);
        let mut out = String::new();
        let labels = |k: &Key, op: Option<&str>| {
            let mut l = format!("target=\"{}\"", escape(&k.target));
            if let Some(op) = op {
                let _ = write!(l, ",op=\"{op}\"");
            }
            if let Some(w) = &k.workload {
                let _ = write!(l, ",workload=\"{}\"", escape(w));
            }
            if let Some(r) = k.round {
                let _ = write!(l, ",round=\"{r}\"");
            }
            l
        };
        type Pick = fn(&OpFigures) -> u64;
        let counters: [(&str, &str, Pick); 3] = [
            (
                "sanbench_ios_total",
                "I/Os completed in the measured window.",
                |o| o.ios,
            ),
            (
                "sanbench_bytes_total",
                "Bytes moved in the measured window.",
                |o| o.bytes,
            ),
            (
                "sanbench_errors_total",
                "I/Os that completed with an error.",
                |o| o.errors,
            ),
        ];
        for (name, help, pick) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (k, s) in &g.series {
                for (i, op) in OPS.iter().enumerate() {
                    let _ = writeln!(out, "{name}{{{}}} {}", labels(k, Some(op)), pick(&s.ops[i]));
                }
            }
        }
        let name = "sanbench_inflight";
        let _ = writeln!(
            out,
            "# HELP {name} I/Os in flight (reads and writes).\n# TYPE {name} gauge"
        );
        for (k, s) in &g.series {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(k, None), s.inflight);
        }
        let name = "sanbench_latency_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Latency of I/Os completed in the measured window.\n# TYPE {name} histogram"
        );
        for (k, s) in &g.series {
            for (i, op) in OPS.iter().enumerate() {
                let o = &s.ops[i];
                let l = labels(k, Some(op));
                let mut cum = 0;
                for (b, n) in bounds().zip(o.buckets) {
                    cum += n;
                    let _ = writeln!(out, "{name}_bucket{{{l},le=\"{b}\"}} {cum}");
                }
                cum += o.over;
                let _ = writeln!(out, "{name}_bucket{{{l},le=\"+Inf\"}} {cum}");
                let _ = writeln!(out, "{name}_sum{{{l}}} {}", o.sum_s);
                let _ = writeln!(out, "{name}_count{{{l}}} {cum}");
            }
        }
        if let Some(p) = g.cpu_busy_pct {
            let name = "sanbench_host_cpu_busy_ratio";
            let _ = writeln!(
                out,
                "# HELP {name} Share of all the host's cores busy since the last scrape (0..1).\n# TYPE {name} gauge\n{name} {}",
                p / 100.0
            );
        }
        out
    }
}

/// A label value as the format wants it: backslash, double quote and newline escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_count_is_the_last() {
        let r = Registry::default();
        let k = Key {
            target: "mem:\"x\"".into(),
            workload: Some("4k".into()),
            round: Some(2),
        };
        r.update(&k, |ops, inflight| {
            ops[0].ios += 3;
            ops[0].observe(1_500, 2); // 1.5 µs: the 2 µs bucket
            ops[0].observe(100_000_000_000, 1); // 100 s: only +Inf
            *inflight = 4;
        });
        let t = r.render();
        let l = "target=\"mem:\\\"x\\\"\",op=\"read\",workload=\"4k\",round=\"2\"";
        assert!(t.contains(&format!("sanbench_ios_total{{{l}}} 3\n")), "{t}");
        assert!(
            t.contains(&format!(
                "sanbench_latency_seconds_bucket{{{l},le=\"0.000001\"}} 0\n"
            )),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "sanbench_latency_seconds_bucket{{{l},le=\"0.000002\"}} 2\n"
            )),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "sanbench_latency_seconds_bucket{{{l},le=\"16.777216\"}} 2\n"
            )),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "sanbench_latency_seconds_bucket{{{l},le=\"+Inf\"}} 3\n"
            )),
            "{t}"
        );
        assert!(
            t.contains(&format!("sanbench_latency_seconds_count{{{l}}} 3\n")),
            "{t}"
        );
        assert!(
            t.contains(
                "sanbench_inflight{target=\"mem:\\\"x\\\"\",workload=\"4k\",round=\"2\"} 4\n"
            ),
            "{t}"
        );
    }
}
