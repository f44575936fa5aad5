//! What a run's endpoint shows: per series key (target, and the comparison's cell: workload
//! and round) and op, the I/Os, bytes and errors (counters), a latency histogram with fixed
//! exponential buckets, the I/Os in flight (gauge), and per path of a multipath target its
//! I/Os and bytes; the host's CPU (busy share since the last scrape, seconds per mode) and
//! power (the monitor's last reading, where a source exists).

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::expo::{labels, Exposition, Kind, Writer};

/// The ops the counters are kept for.
pub const OPS: [&str; 3] = ["read", "write", "flush"];

/// Bucket bounds in seconds: 1 µs × 2^k, k = 0..=24 (1 µs .. 16.8 s), then +Inf.
pub fn bounds() -> impl Iterator<Item = f64> {
    (0..=24).map(|k| 1e-6 * f64::from(1u32 << k))
}
pub const N_BOUNDS: usize = 25;

/// The same bounds in nanoseconds (1000 × 2^k), for splitting a histogram in one pass.
pub const BOUNDS_NS: [u64; N_BOUNDS] = {
    let mut b = [0u64; N_BOUNDS];
    let mut k = 0;
    while k < N_BOUNDS {
        b[k] = 1000 << k;
        k += 1;
    }
    b
};

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

    /// Adds a histogram already split by [`BOUNDS_NS`] (not cumulative), the count above the
    /// last bound and the exact sum of its values in ns.
    pub fn observe_split(&mut self, split: &[u64; N_BOUNDS], over: u64, sum_ns: u128) {
        for (b, n) in self.buckets.iter_mut().zip(split) {
            *b += n;
        }
        self.over += over;
        self.sum_s += sum_ns as f64 / 1e9;
    }
}

/// One path's counts of one series (reads and writes together).
#[derive(Clone, Copy, Debug, Default)]
pub struct PathFigures {
    pub ios: u64,
    pub bytes: u64,
}

/// What one series holds.
#[derive(Default)]
pub struct Series {
    pub ops: [OpFigures; 3],
    pub inflight: u64,
    pub paths: Vec<PathFigures>,
}

/// The host's figures (set by the CLI as it reads them).
#[derive(Clone, Debug, Default)]
pub struct Host {
    /// Share of all cores busy since the last scrape, 0..1.
    pub cpu_busy_ratio: Option<f64>,
    /// CPU seconds of all cores per mode since boot (/proc/stat: user, nice, system, idle,
    /// iowait, irq, softirq, steal).
    pub cpu_seconds: Vec<(&'static str, f64)>,
    /// The power source's last reading: watts, the source's name, modeled or measured.
    pub power: Option<(f64, String, bool)>,
}

#[derive(Default)]
struct State {
    series: BTreeMap<Key, Series>,
    host: Host,
}

/// The figures a run's endpoint serves, updated by the run as its intervals finish.
#[derive(Default)]
pub struct Registry {
    state: Mutex<State>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The figures stay meaningful whatever thread panicked while holding them.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Registry {
    /// Updates `key`'s series with `f`.
    pub fn update(&self, key: &Key, f: impl FnOnce(&mut Series)) {
        let mut g = lock(&self.state);
        f(g.series.entry(key.clone()).or_default());
    }

    /// Updates the host's figures with `f`.
    pub fn host(&self, f: impl FnOnce(&mut Host)) {
        f(&mut lock(&self.state).host);
    }

    /// The text of `format` (tests; the endpoint renders through [`Exposition`]).
    pub fn render(&self, format: crate::expo::Format) -> String {
        let mut w = Writer::new(format);
        Exposition::render(self, &mut w);
        w.finish()
    }
}

fn key_labels<'a>(k: &'a Key, round: &'a str, extra: &[(&'a str, &'a str)]) -> String {
    let mut l: Vec<(&str, &str)> = vec![("target", &k.target)];
    l.extend_from_slice(extra);
    if let Some(w) = &k.workload {
        l.push(("workload", w));
    }
    if k.round.is_some() {
        l.push(("round", round));
    }
    labels(&l)
}

impl Exposition for Registry {
    fn render(&self, w: &mut Writer) {
        let g = lock(&self.state);
        let rounds: Vec<String> = g
            .series
            .keys()
            .map(|k| k.round.map_or(String::new(), |r| r.to_string()))
            .collect();
        type Pick = fn(&OpFigures) -> u64;
        let counters: [(&str, &str, Option<&str>, Pick); 3] = [
            (
                "sanbench_ios",
                "I/Os completed in the measured window.",
                None,
                |o| o.ios,
            ),
            (
                "sanbench_bytes",
                "Bytes moved in the measured window.",
                Some("bytes"),
                |o| o.bytes,
            ),
            (
                "sanbench_errors",
                "I/Os that completed with an error.",
                None,
                |o| o.errors,
            ),
        ];
        for (name, help, unit, pick) in counters {
            w.family(name, Kind::Counter, help, unit);
            for ((k, s), r) in g.series.iter().zip(&rounds) {
                for (i, op) in OPS.iter().enumerate() {
                    let l = key_labels(k, r, &[("op", op)]);
                    w.sample(&format!("{name}_total"), &l, pick(&s.ops[i]));
                }
            }
        }
        w.family(
            "sanbench_inflight",
            Kind::Gauge,
            "I/Os in flight (reads and writes).",
            None,
        );
        for ((k, s), r) in g.series.iter().zip(&rounds) {
            w.sample("sanbench_inflight", &key_labels(k, r, &[]), s.inflight);
        }
        let name = "sanbench_latency_seconds";
        w.family(
            name,
            Kind::Histogram,
            "Latency of I/Os completed in the measured window.",
            Some("seconds"),
        );
        for ((k, s), r) in g.series.iter().zip(&rounds) {
            for (i, op) in OPS.iter().enumerate() {
                let o = &s.ops[i];
                let l = key_labels(k, r, &[("op", op)]);
                w.histogram(name, &l, bounds(), &o.buckets, o.over, o.sum_s);
            }
        }
        if g.series.values().any(|s| !s.paths.is_empty()) {
            let path_families: [(&str, &str, Option<&str>); 2] = [
                (
                    "sanbench_path_ios",
                    "Reads and writes a path of a multipath target completed.",
                    None,
                ),
                (
                    "sanbench_path_bytes",
                    "Bytes a path of a multipath target moved.",
                    Some("bytes"),
                ),
            ];
            for (fi, (name, help, unit)) in path_families.into_iter().enumerate() {
                w.family(name, Kind::Counter, help, unit);
                for ((k, s), r) in g.series.iter().zip(&rounds) {
                    for (p, f) in s.paths.iter().enumerate() {
                        let p = p.to_string();
                        let l = key_labels(k, r, &[("path", &p)]);
                        w.sample(&format!("{name}_total"), &l, [f.ios, f.bytes][fi]);
                    }
                }
            }
        }
        render_host(&g.host, w);
    }
}

fn render_host(h: &Host, w: &mut Writer) {
    if let Some(p) = h.cpu_busy_ratio {
        let name = "sanbench_host_cpu_busy_ratio";
        w.family(
            name,
            Kind::Gauge,
            "Share of all the host's cores busy since the last scrape (0..1).",
            Some("ratio"),
        );
        w.sample(name, "", p);
    }
    if !h.cpu_seconds.is_empty() {
        let name = "sanbench_host_cpu_seconds";
        w.family(
            name,
            Kind::Counter,
            "CPU time of all the host's cores per mode since boot (/proc/stat).",
            Some("seconds"),
        );
        for (mode, s) in &h.cpu_seconds {
            w.sample(&format!("{name}_total"), &labels(&[("mode", mode)]), s);
        }
    }
    if let Some((watts, source, modeled)) = &h.power {
        let name = "sanbench_host_power_watts";
        w.family(
            name,
            Kind::Gauge,
            "The host's power as its source last read it (modeled=\"true\": from CPU use, not a meter).",
            Some("watts"),
        );
        let m = if *modeled { "true" } else { "false" };
        w.sample(name, &labels(&[("source", source), ("modeled", m)]), watts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expo::Format;

    /// A split histogram adds up as its values observed one by one would (the sum exact).
    #[test]
    fn a_split_histogram_adds_as_its_values_would() {
        let values = [
            (1_500u64, 2u64),
            (1_000, 1),
            (7_000_000, 3),
            (100_000_000_000, 1),
        ];
        let mut one = OpFigures::default();
        let mut split = [0u64; N_BOUNDS];
        let mut over = 0;
        for &(ns, n) in &values {
            one.observe(ns, n);
            match BOUNDS_NS.iter().position(|&b| ns <= b) {
                Some(i) => split[i] += n,
                None => over += n,
            }
        }
        let sum: u128 = values.iter().map(|&(ns, n)| u128::from(ns * n)).sum();
        let mut both = OpFigures::default();
        both.observe_split(&split, over, sum);
        assert_eq!((both.buckets, both.over), (one.buckets, one.over));
        assert!(
            (both.sum_s - one.sum_s).abs() < 1e-9,
            "{} {}",
            both.sum_s,
            one.sum_s
        );
        assert_eq!(BOUNDS_NS[0], 1_000);
        assert_eq!(BOUNDS_NS[24], 1_000 << 24);
    }

    #[test]
    fn buckets_are_cumulative_and_count_is_the_last() {
        let r = Registry::default();
        let k = Key {
            target: "mem:\"x\"".into(),
            workload: Some("4k".into()),
            round: Some(2),
        };
        r.update(&k, |s| {
            s.ops[0].ios += 3;
            s.ops[0].observe(1_500, 2); // 1.5 µs: the 2 µs bucket
            s.ops[0].observe(100_000_000_000, 1); // 100 s: only +Inf
            s.inflight = 4;
        });
        let t = r.render(Format::Prometheus);
        let l = "target=\"mem:\\\"x\\\"\",op=\"read\",workload=\"4k\",round=\"2\"";
        for want in [
            format!("sanbench_ios_total{{{l}}} 3\n"),
            format!("sanbench_latency_seconds_bucket{{{l},le=\"0.000001\"}} 0\n"),
            format!("sanbench_latency_seconds_bucket{{{l},le=\"0.000002\"}} 2\n"),
            format!("sanbench_latency_seconds_bucket{{{l},le=\"16.777216\"}} 2\n"),
            format!("sanbench_latency_seconds_bucket{{{l},le=\"+Inf\"}} 3\n"),
            format!("sanbench_latency_seconds_count{{{l}}} 3\n"),
            "sanbench_inflight{target=\"mem:\\\"x\\\"\",workload=\"4k\",round=\"2\"} 4\n".into(),
            "# TYPE sanbench_ios_total counter\n".into(),
        ] {
            assert!(t.contains(&want), "{want} in {t}");
        }
        assert!(!t.contains("# EOF") && !t.contains("# UNIT"), "{t}");
    }

    #[test]
    fn openmetrics_names_counter_families_without_total_and_states_units() {
        let r = Registry::default();
        let k = Key {
            target: "t".into(),
            workload: None,
            round: None,
        };
        r.update(&k, |s| {
            s.ops[1].ios = 5;
            s.paths = vec![
                PathFigures {
                    ios: 2,
                    bytes: 8192,
                },
                PathFigures {
                    ios: 3,
                    bytes: 12288,
                },
            ];
        });
        r.host(|h| {
            h.cpu_busy_ratio = Some(0.25);
            h.cpu_seconds = vec![("user", 12.5), ("idle", 100.0)];
            h.power = Some((41.5, "rapl".into(), false));
        });
        let t = r.render(Format::OpenMetrics);
        for want in [
            "# TYPE sanbench_ios counter\n",
            "sanbench_ios_total{target=\"t\",op=\"write\"} 5\n",
            "# UNIT sanbench_latency_seconds seconds\n",
            "# TYPE sanbench_bytes counter\n# UNIT sanbench_bytes bytes\n",
            "sanbench_path_ios_total{target=\"t\",path=\"1\"} 3\n",
            "sanbench_path_bytes_total{target=\"t\",path=\"0\"} 8192\n",
            "sanbench_host_cpu_busy_ratio 0.25\n",
            "sanbench_host_cpu_seconds_total{mode=\"user\"} 12.5\n",
            "sanbench_host_power_watts{source=\"rapl\",modeled=\"false\"} 41.5\n",
        ] {
            assert!(t.contains(want), "{want} in {t}");
        }
        assert!(t.ends_with("\n# EOF\n"), "{t}");
    }
}
