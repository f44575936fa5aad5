//! fio's JSON output as crosscheck's figures, and as a result the store and the report take
//! beside sanbench's own (`TargetResult`, with what fio reports filled in).

use serde_json::Value;

use sanbench_doc::run::{DirResult, LatencyUs, LittlesLaw, TargetResult};

/// fio's percentile list for the joint p99 (at most 20 entries in fio).
pub const PERCENTILES: &str =
    "10:25:50:70:80:90:94:96:97:98:98.5:99:99.3:99.5:99.7:99.9:99.95:99.99";

/// One tool's figures in one repetition.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    pub iops: f64,
    pub mean_us: f64,
    pub p99_us: f64,
    /// Mean I/Os in flight (measured by sanbench; configured for fio), if known.
    pub in_flight: Option<f64>,
    /// fio's: how the p99 was had: `"histogram"` (its latency histogram's buckets, which
    /// `--output-format=json+` reports, joined over directions and jobs: fio's own rule) or
    /// `"percentile tables"` (its per-direction percentiles at the points of `--percentile_list`,
    /// an upper bound for a mixed job).
    pub p99_method: Option<&'static str>,
    /// fio's: which of its latencies the p99 is of, `lat_ns` (its total latency, sanbench's
    /// span) or `clat_ns` (an fio that reports no total-latency percentiles).
    pub p99_from: Option<&'static str>,
}

impl Figures {
    /// |IOPS x mean latency - in flight| / in flight.
    pub fn little(&self) -> Option<f64> {
        self.in_flight
            .filter(|l| *l > 0.0)
            .map(|l| (self.iops * self.mean_us / 1e6 - l).abs() / l)
    }
}

/// Reads fio's JSON output. `depth`: iodepth x numjobs for a closed loop, else `None`.
pub fn fio_figures(json: &Value, depth: Option<f64>) -> Result<Figures, String> {
    let jobs = json["jobs"]
        .as_array()
        .filter(|j| !j.is_empty())
        .ok_or("fio's JSON has no jobs")?;
    let mut f = Figures::default();
    let mut ios = 0.0;
    let mut lat_sum = 0.0;
    // (I/O count, percentile table) per direction and job, for the joint p99, and the
    // histograms' buckets when fio reported them (json+).
    let mut tables: Vec<(f64, Vec<(f64, f64)>)> = Vec::new();
    let mut hist: Option<Vec<(f64, f64)>> = Some(Vec::new());
    for j in jobs {
        if j["error"].as_i64().is_some_and(|e| e != 0) {
            return Err(format!("fio's job failed with error {}", j["error"]));
        }
        for d in ["read", "write"] {
            let x = &j[d];
            let n = x["total_ios"].as_f64().unwrap_or(0.0);
            if n == 0.0 {
                continue;
            }
            f.iops += x["iops"].as_f64().unwrap_or(0.0);
            ios += n;
            lat_sum += x["lat_ns"]["mean"].as_f64().unwrap_or(0.0) * n;
            let (t, from) = table(x).ok_or("fio's JSON has no latency percentiles")?;
            // Any direction without total-latency percentiles makes the whole p99 clat's.
            if f.p99_from != Some("clat_ns") {
                f.p99_from = Some(from);
            }
            tables.push((n, t));
            add_bins(&mut hist, x, from);
        }
    }
    if ios == 0.0 {
        return Err("fio completed no I/O".into());
    }
    f.mean_us = lat_sum / ios / 1e3;
    (f.p99_us, f.p99_method) = match hist.filter(|h| !h.is_empty()) {
        Some(h) => (bins_percentile(&sorted(h), 99.0) / 1e3, Some("histogram")),
        _ => (
            joint_percentile(&tables, 99.0) / 1e3,
            Some("percentile tables"),
        ),
    };
    f.in_flight = depth;
    Ok(f)
}

/// One direction's latency percentiles as (percent, ns), ascending: `lat_ns`'s (fio's total
/// latency, which `--lat_percentiles=1` makes it report) when there, else `clat_ns`'s.
///
/// sanbench's latency runs from just before the submitting system call; fio's `clat` for
/// io_uring starts only once that call has returned (the engine sets `issue_time` after
/// `io_uring_enter`, `FIO_ASYNCIO_SETS_ISSUE_TIME`), so it leaves out the submission, which on
/// a tmpfs file (every request handed to an io-wq worker) is 10-16 % of the p99. `lat` starts
/// when fio prepares the I/O, a fraction of a microsecond earlier: the same span as
/// sanbench's, and the one the mean is already taken from.
fn table(x: &Value) -> Option<(Vec<(f64, f64)>, &'static str)> {
    let lat = &x["lat_ns"]["percentile"];
    let (src, from) = if lat.is_object() {
        (lat, "lat_ns")
    } else {
        (&x["clat_ns"]["percentile"], "clat_ns")
    };
    let mut t: Vec<(f64, f64)> = src
        .as_object()?
        .iter()
        .filter_map(|(k, v)| Some((k.parse::<f64>().ok()?, v.as_f64()?)))
        .collect();
    t.sort_by(|a, b| a.0.total_cmp(&b.0));
    Some((t, from))
}

/// The buckets of fio's latency histogram (`--output-format=json+`: `bins`, each bucket's
/// middle value in ns and its I/O count) of the latency `from` names, if fio reported them.
fn bins(x: &Value, from: &str) -> Option<Vec<(f64, f64)>> {
    x[from]["bins"]
        .as_object()?
        .iter()
        .map(|(k, v)| Some((k.parse::<f64>().ok()?, v.as_f64()?)))
        .collect()
}

/// Joins a direction's histogram buckets into `hist`; a direction without them (plain json)
/// leaves no joint histogram (`None`).
fn add_bins(hist: &mut Option<Vec<(f64, f64)>>, x: &Value, from: &str) {
    *hist = hist.take().and_then(|mut h| {
        h.extend(bins(x, from)?);
        Some(h)
    });
}

/// Buckets in value order (a value may repeat, as when directions and jobs are joined).
fn sorted(mut buckets: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
}

/// The `p`-th percentile of the I/Os in `buckets` (value, count, in value order: [`sorted`]):
/// the first bucket at which the running count reaches `p` % of all, fio's own rule for its
/// percentiles (`stat.c`'s `calc_clat_percentiles`), so a single direction's figure is the one
/// fio prints.
pub fn bins_percentile(buckets: &[(f64, f64)], p: f64) -> f64 {
    let total: f64 = buckets.iter().map(|b| b.1).sum();
    let mut sum = 0.0;
    for (v, n) in buckets {
        sum += n;
        if sum >= p / 100.0 * total {
            return *v;
        }
    }
    buckets.last().map_or(0.0, |b| b.0)
}

/// The percentiles `run` reports, in µs, from fio's histogram buckets (as [`bins_percentile`]).
fn from_bins(h: Vec<(f64, f64)>) -> LatencyUs {
    let h = sorted(h);
    let q = |p: f64| bins_percentile(&h, p) / 1e3;
    LatencyUs {
        p50: q(50.0),
        p90: q(90.0),
        p99: q(99.0),
        p999: q(99.9),
        p9999: q(99.99),
        ..LatencyUs::default()
    }
}

/// The smallest latency in the tables at which the count-weighted share of I/Os at or below
/// it reaches `p` percent (each table read as a step function of its percentiles). For one
/// direction it is that direction's percentile; for a mix it is an upper bound, coarse where
/// the tables are sparse: with reads' and writes' 99th percentiles far apart it can lie 10-20 %
/// above the joint p99 (fio's 70/30 mix: 68.1 against 56.1 µs from the same run's histogram),
/// so it is used only when fio reported no histogram.
pub fn joint_percentile(tables: &[(f64, Vec<(f64, f64)>)], p: f64) -> f64 {
    let total: f64 = tables.iter().map(|t| t.0).sum();
    let mut candidates: Vec<f64> = tables
        .iter()
        .flat_map(|t| t.1.iter().map(|e| e.1))
        .collect();
    candidates.sort_by(f64::total_cmp);
    for x in &candidates {
        let below: f64 = tables
            .iter()
            .map(|(n, t)| {
                let share = t
                    .iter()
                    .filter(|e| e.1 <= *x)
                    .map(|e| e.0)
                    .fold(0.0, f64::max);
                n * share
            })
            .sum();
        if below / total >= p - 1e-9 {
            return *x;
        }
    }
    candidates.last().copied().unwrap_or(0.0)
}

/// fio's run as a result beside sanbench's, for the store and the report: counts, rates and
/// latency (mean from `lat_ns`, p99 from `lat_ns`'s percentiles, or `clat_ns`'s without them,
/// as in the crosscheck) per direction and in
/// all; what fio does not report (histograms, CPU, the series) is left empty.
pub fn fio_result(json: &Value, f: &Figures, engine: &str) -> TargetResult {
    let jobs = json["jobs"].as_array().cloned().unwrap_or_default();
    let secs = jobs
        .iter()
        .filter_map(|j| j["job_runtime"].as_f64())
        .fold(0.0, f64::max)
        / 1e3;
    let dir = |d: &str| {
        let (mut ios, mut bytes, mut iops, mut lat) = (0u64, 0u64, 0.0, 0.0);
        let mut tables = Vec::new();
        let mut hist: Option<Vec<(f64, f64)>> = Some(Vec::new());
        for j in &jobs {
            let x = &j[d];
            let n = x["total_ios"].as_u64().unwrap_or(0);
            ios += n;
            bytes += x["io_bytes"].as_u64().unwrap_or(0);
            iops += x["iops"].as_f64().unwrap_or(0.0);
            lat += x["lat_ns"]["mean"].as_f64().unwrap_or(0.0) * n as f64;
            if n == 0 {
                continue;
            }
            if let Some((t, from)) = table(x) {
                tables.push((n as f64, t));
                add_bins(&mut hist, x, from);
            }
        }
        let mb = if secs > 0.0 { bytes as f64 / secs } else { 0.0 };
        DirResult {
            ios,
            bytes,
            iops,
            mb_per_s: mb / 1e6,
            mib_per_s: mb / (1u64 << 20) as f64,
            latency_us: LatencyUs {
                mean: if ios > 0 { lat / ios as f64 / 1e3 } else { 0.0 },
                ..match hist.filter(|h| !h.is_empty()) {
                    Some(h) => from_bins(h),
                    None => LatencyUs {
                        p99: joint_percentile(&tables, 99.0) / 1e3,
                        ..LatencyUs::default()
                    },
                }
            },
            service_us: None,
            issue_lag_us: None,
        }
    };
    let (read, write) = (dir("read"), dir("write"));
    let bytes = read.bytes + write.bytes;
    let mb = if secs > 0.0 { bytes as f64 / secs } else { 0.0 };
    TargetResult {
        target: "fio".into(),
        engine: format!("fio {engine}"),
        seconds: secs,
        ios: read.ios + write.ios,
        bytes,
        iops: f.iops,
        mb_per_s: mb / 1e6,
        mib_per_s: mb / (1u64 << 20) as f64,
        read,
        write,
        latency_us: LatencyUs {
            mean: f.mean_us,
            p99: f.p99_us,
            ..LatencyUs::default()
        },
        littles_law: LittlesLaw {
            outstanding: f.in_flight.unwrap_or(0.0) as u64,
            mean_outstanding: None,
            implied: f.iops * f.mean_us / 1e6,
            deviation: f.little(),
        },
        ..TargetResult::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_json_figures() {
        let j: Value = serde_json::json!({"jobs": [{
            "error": 0,
            "read": {"iops": 700.0, "total_ios": 700, "lat_ns": {"mean": 10000.0},
                "clat_ns": {"percentile": {"50.000000": 9000, "99.000000": 20000}}},
            "write": {"iops": 300.0, "total_ios": 300, "lat_ns": {"mean": 20000.0},
                "clat_ns": {"percentile": {"50.000000": 15000, "99.000000": 40000}}}
        }]});
        let f = fio_figures(&j, Some(1.0)).unwrap();
        assert_eq!(f.iops, 1000.0);
        assert!((f.mean_us - 13.0).abs() < 1e-9);
        // 99 % of all I/Os: every read (<= 20 µs) and 99 % of writes are at or below 40 µs;
        // at 20 µs only 0.99 x 700 + 0.5 x 300 of 1000 are.
        assert_eq!(f.p99_us, 40.0);
        assert!((f.little().unwrap() - 0.987).abs() < 1e-9);
        assert!(fio_figures(&serde_json::json!({"jobs": []}), None).is_err());
    }

    /// With `--lat_percentiles=1` fio reports percentiles of its total latency too: the p99 is
    /// taken from those (sanbench's span), not from `clat` (which starts after submission).
    #[test]
    fn the_p99_is_fios_total_latency_when_it_reports_one() {
        let dir = |clat: u64, lat: Option<u64>| {
            let mut x = serde_json::json!({"iops": 500.0, "total_ios": 1000, "io_bytes": 4096000,
                "lat_ns": {"mean": 8000.0},
                "clat_ns": {"percentile": {"99.000000": clat}}});
            if let Some(l) = lat {
                x["lat_ns"]["percentile"] = serde_json::json!({"99.000000": l});
            }
            x
        };
        let job = |x: Value| serde_json::json!({"jobs": [{"job_runtime": 2000, "read": x}]});
        let with = job(dir(30_000, Some(34_000)));
        let f = fio_figures(&with, Some(4.0)).unwrap();
        assert_eq!((f.p99_us, f.p99_from), (34.0, Some("lat_ns")));
        assert_eq!(fio_result(&with, &f, "io_uring").read.latency_us.p99, 34.0);
        // An older fio, or a job that turns it off: clat, as before.
        let without = job(dir(30_000, None));
        let f = fio_figures(&without, Some(4.0)).unwrap();
        assert_eq!((f.p99_us, f.p99_from), (30.0, Some("clat_ns")));
    }

    /// fio reports each direction's percentiles but no joint one. Read as step functions, the
    /// per-direction tables give an upper bound that can sit far above the joint p99 where they
    /// have no points; fio's histogram (json+ `bins`) gives it exactly.
    #[test]
    fn a_mixed_jobs_p99_comes_from_fios_histogram() {
        // Reads: 693 at 10 µs, 4 at 12, 3 at 100 (p99 10); writes: 294 at 25, 3 at 60, 3 at
        // 80 (p50 25, p99 60). Of all 1,000, 991 are at or below 25 µs: the joint p99 is 25.
        let dir = |n: u64, pct: Value, bins: Value| {
            serde_json::json!({"iops": n as f64, "total_ios": n, "io_bytes": n * 4096,
                "lat_ns": {"mean": 10000.0, "percentile": pct, "bins": bins}})
        };
        let mut j = serde_json::json!({"jobs": [{"job_runtime": 1000,
            "read": dir(700, serde_json::json!({"50.000000": 10000, "99.000000": 10000}),
                serde_json::json!({"10000": 693, "12000": 4, "100000": 3})),
            "write": dir(300, serde_json::json!({"50.000000": 25000, "99.000000": 60000}),
                serde_json::json!({"25000": 294, "60000": 3, "80000": 3}))}]});
        let f = fio_figures(&j, Some(4.0)).unwrap();
        assert_eq!((f.p99_us, f.p99_method), (25.0, Some("histogram")));
        let r = fio_result(&j, &f, "io_uring");
        assert_eq!(
            (r.read.latency_us.p99, r.write.latency_us.p99),
            (10.0, 60.0)
        );
        assert_eq!(
            (r.read.latency_us.p999, r.write.latency_us.p50),
            (100.0, 25.0)
        );
        // Without the histogram (plain json): the tables' bound, 60 µs, and said so.
        for d in ["read", "write"] {
            j["jobs"][0][d]["lat_ns"]
                .as_object_mut()
                .unwrap()
                .remove("bins");
        }
        let f = fio_figures(&j, Some(4.0)).unwrap();
        assert_eq!((f.p99_us, f.p99_method), (60.0, Some("percentile tables")));
    }

    /// The rule is fio's own: on a real fio run's histogram (fio 3.33, json+, a 70/30 random
    /// mix, trimmed to the fields read here) each direction's percentiles come out as the ones
    /// fio printed for it.
    #[test]
    fn percentiles_from_the_histogram_are_the_ones_fio_prints() {
        let j: Value =
            serde_json::from_str(include_str!("fixtures/fio-3.33-randrw-json-plus.json")).unwrap();
        for d in ["read", "write"] {
            let x = &j["jobs"][0][d];
            let h = sorted(bins(x, "lat_ns").unwrap());
            assert!(h.len() > 100, "{d}: {} buckets", h.len());
            for (p, v) in x["lat_ns"]["percentile"].as_object().unwrap() {
                let p: f64 = p.parse().unwrap();
                assert_eq!(bins_percentile(&h, p), v.as_f64().unwrap(), "{d} p{p}");
            }
        }
    }

    #[test]
    fn fio_as_a_result() {
        let j: Value = serde_json::json!({"jobs": [{"job_runtime": 2000,
            "read": {"iops": 500.0, "total_ios": 1000, "io_bytes": 4096000,
                "lat_ns": {"mean": 8000.0}, "clat_ns": {"percentile": {"99.000000": 30000}}},
            "write": {"iops": 0.0, "total_ios": 0, "io_bytes": 0, "lat_ns": {"mean": 0.0}}}]});
        let f = fio_figures(&j, Some(4.0)).unwrap();
        let r = fio_result(&j, &f, "io_uring");
        assert_eq!((r.ios, r.bytes, r.seconds), (1000, 4096000, 2.0));
        assert_eq!(r.read.latency_us.p99, 30.0);
        assert_eq!(r.latency_us.mean, 8.0);
        assert_eq!(r.engine, "fio io_uring");
        assert_eq!(r.littles_law.outstanding, 4);
        assert!((r.mb_per_s - 2.048).abs() < 1e-9);
    }
}
