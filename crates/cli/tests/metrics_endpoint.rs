//! `--metrics-listen` (issue 25): the endpoint's text parses under a strict reading of the
//! Prometheus text format 0.0.4 and of OpenMetrics (tests/expo), counters never go down
//! between scrapes, the host monitor's power is there where a source exists, a port in use or a
//! bad address is one line and exit 2 before any I/O, and a real Prometheus server (Debian's
//! `prometheus`, started here on loopback) scraping a run computes the run's own IOPS with
//! `rate()` and its p99 within one bucket with `histogram_quantile`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

/// The real Prometheus's test runs with no other test of this binary beside it: its open
/// loop's rate is compared within 2 %, and a run beside it (the test threads share the host's
/// two cores) made the rate uneven enough at the range's edges to miss by 3.5 % once.
static ALONE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

mod expo;
use expo::{parse, Sample};

/// GET /metrics as Prometheus text (no Accept): the body of a 200 answer.
fn scrape(port: u16) -> Option<String> {
    let (ctype, body) = expo::get(port, "/metrics", None)?;
    assert_eq!(ctype, "text/plain; version=0.0.4; charset=utf-8");
    Some(body)
}

/// GET /metrics as OpenMetrics (Prometheus' own Accept header).
fn scrape_om(port: u16) -> Option<String> {
    let (ctype, body) = expo::get(port, "/metrics", Some(PROMETHEUS_ACCEPT))?;
    assert_eq!(
        ctype,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    Some(body)
}

/// What Prometheus 2.x sends with every scrape.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

fn start_run(port: u16, extra: &[&str]) -> Child {
    Command::new(bin())
        .args([
            "run",
            "mem:16m",
            "--qd",
            "4",
            "--quiet",
            "--no-monitor",
            "--baseline",
            "0",
        ])
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
        .args(extra)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_scrape(port: u16) -> String {
    let t0 = Instant::now();
    loop {
        if let Some(s) = scrape(port) {
            return s;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no endpoint");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_endpoint_parses_strictly_and_counters_only_grow() {
    let _shared = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let port = sanbench_testkit::free_port();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let mut run = start_run(
        port,
        &[
            "--time",
            "3s",
            "--log-interval",
            "100ms",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    wait_scrape(port);
    std::thread::sleep(Duration::from_millis(1000));
    let a = parse(&wait_scrape(port), false);
    // The same figures in OpenMetrics, parsed as strictly.
    let om = parse(&scrape_om(port).unwrap(), true);
    std::thread::sleep(Duration::from_millis(700));
    let b = parse(&wait_scrape(port), false);
    assert!(run.wait().unwrap().success());
    let ios = |s: &[Sample]| expo::total(s, "sanbench_ios_total", &[]);
    assert!(ios(&a) <= ios(&om) && ios(&om) <= ios(&b), "{om:?}");
    // Exact: the counters move a whole interval at a time, so every scrape's total is the
    // I/Os of the result's first k intervals for some k (the window only, none lost or
    // counted twice, whatever the lag).
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let mut prefix = vec![0u64];
    for iv in doc["results"][0]["intervals"].as_array().unwrap() {
        let n = iv["read_ios"].as_u64().unwrap() + iv["write_ios"].as_u64().unwrap();
        prefix.push(prefix.last().unwrap() + n);
    }
    assert_eq!(
        *prefix.last().unwrap(),
        doc["results"][0]["ios"].as_u64().unwrap()
    );
    for (what, s) in [("first", &a), ("openmetrics", &om), ("last", &b)] {
        let n = ios(s) as u64;
        assert!(
            n > 0 && prefix.contains(&n),
            "{what} scrape: {n} I/Os is no whole number of the result's intervals \
             (their running totals: {prefix:?})"
        );
    }
    // The host's CPU: the busy share and the seconds per mode only grow.
    let user =
        |s: &[Sample]| expo::total(s, "sanbench_host_cpu_seconds_total", &[("mode", "user")]);
    assert!(user(&a) > 0.0 && user(&a) <= user(&b), "{a:?}");
    assert!(
        a.iter().any(|x| x.0 == "sanbench_host_cpu_busy_ratio"),
        "{a:?}"
    );
    // The endpoint counts its own scrapes by format (this one included).
    let scrapes = |s: &[Sample], f| expo::total(s, "sanbench_scrapes_total", &[("format", f)]);
    assert_eq!(scrapes(&om, "openmetrics"), 1.0);
    assert_eq!(scrapes(&b, "openmetrics"), 1.0);
    assert!(scrapes(&b, "prometheus") >= 2.0);
    let total =
        |s: &[Sample], name: &str| s.iter().filter(|x| x.0 == name).map(|x| x.2).sum::<f64>();
    assert!(total(&a, "sanbench_ios_total") > 0.0, "{a:?}");
    assert!(total(&b, "sanbench_ios_total") > total(&a, "sanbench_ios_total"));
    for (n, l, v) in &a {
        if n.ends_with("_total") || n.ends_with("_bucket") || n.ends_with("_count") {
            let later = b.iter().find(|x| &x.0 == n && &x.1 == l).map(|x| x.2);
            assert!(
                later.is_some_and(|w| w >= *v),
                "{n}{l:?}: {v} then {later:?}"
            );
        }
    }
    let read = a
        .iter()
        .find(|x| x.0 == "sanbench_ios_total" && x.1.get("op").is_some_and(|o| o == "read"))
        .unwrap();
    assert_eq!(read.1.get("target").map(String::as_str), Some("mem:16m"));
}

#[test]
fn the_host_monitor_s_power_is_on_the_endpoint_where_a_source_exists() {
    let _shared = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let port = sanbench_testkit::free_port();
    // start_run turns the host monitor off; this run keeps it, with the labeled model as
    // its power source (no meter on a VM).
    let mut run = Command::new(bin())
        .args(["run", "mem:16m", "--qd", "4", "--quiet", "--baseline", "0"])
        .args(["--time", "5s", "--power", "model"])
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut seen = None;
    while run.try_wait().unwrap().is_none() && seen.is_none() {
        std::thread::sleep(Duration::from_millis(250));
        let Some(text) = scrape(port) else { continue };
        seen = parse(&text, false)
            .into_iter()
            .find(|x| x.0 == "sanbench_host_power_watts");
    }
    assert!(run.wait().unwrap().success());
    let (_, labels, watts) = seen.expect("the monitor's power on the endpoint");
    assert_eq!(labels.get("source").map(String::as_str), Some("model"));
    assert_eq!(labels.get("modeled").map(String::as_str), Some("true"));
    assert!(watts > 0.0, "{watts}");
}

#[test]
fn a_port_in_use_or_a_bad_address_is_one_line_and_exit_2_before_any_io() {
    let _shared = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("target.img");
    for addr in [
        format!("127.0.0.1:{port}"),
        "nonsense".into(),
        "127.0.0.1:99999".into(),
        // Not an address of this host.
        "192.0.2.1:9100".into(),
    ] {
        let out = Command::new(bin())
            .arg("run")
            .arg(&file)
            .args([
                "--size",
                "1M",
                "--time",
                "100ms",
                "--no-monitor",
                "--baseline",
                "0",
            ])
            .args(["--metrics-listen", &addr])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{addr}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{addr}: {err}");
        assert!(
            !file.exists(),
            "{addr}: the target was created before the refusal"
        );
    }
}

/// A Prometheus server on loopback scraping `port` every second, data in a temp dir; killed
/// by its process id when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target_port: u16) -> Prometheus {
        sanbench_testkit::require("prometheus", "prometheus");
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: sanbench\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .unwrap();
        let port = sanbench_testkit::free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Prometheus {
            child,
            port,
            _dir: dir,
        }
    }

    /// GET an API path (`/api/v1/...`): its JSON.
    fn api(&self, path: &str) -> Option<Value> {
        let mut c = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        write!(
            c,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut s = String::new();
        c.read_to_string(&mut s).ok()?;
        serde_json::from_str(s.split_once("\r\n\r\n")?.1).ok()
    }

    /// An instant query at `at` (Unix seconds): the first result, if any.
    fn query_result(&self, q: &str, at: f64) -> Option<Value> {
        let enc: String = q
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let v = self.api(&format!("/api/v1/query?query={enc}&time={at:.3}"))?;
        Some(v["data"]["result"][0].clone())
    }

    /// An instant query at `at` (Unix seconds): the first result's value, if any.
    fn query(&self, q: &str, at: f64) -> Option<f64> {
        self.query_result(q, at)?["value"][1].as_str()?.parse().ok()
    }

    /// The timestamps (Unix seconds) of a range selector's samples, e.g. `m[4s]`, at `at`.
    fn sample_times(&self, selector: &str, at: f64) -> Vec<f64> {
        self.query_result(selector, at)
            .and_then(|r| {
                r["values"]
                    .as_array()
                    .map(|v| v.iter().filter_map(|s| s[0].as_f64()).collect())
            })
            .unwrap_or_default()
    }

    fn ready(&self) -> bool {
        TcpStream::connect(("127.0.0.1", self.port)).is_ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // SAFETY: a signal to the child this test started, by its process id.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// The nearest-rank p99 (seconds) of a histogram log's intervals that start in `[from, to)`
/// seconds of the window, merged.
fn window_p99(log: &std::path::Path, from: f64, to: f64) -> f64 {
    const SCRIPT: &str = r#"
import math, sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
ref = HdrHistogram(1, 3600 * 10**9, 3)
r = HistogramLogReader(sys.argv[1], ref)
total = HdrHistogram(1, 3600 * 10**9, 3)
lo, hi = float(sys.argv[2]), float(sys.argv[3])
while True:
    h = r.get_next_interval_histogram()
    if h is None:
        break
    t = h.get_start_time_stamp() / 1000.0 - r.get_start_time_sec()
    if lo - 1e-6 <= t < hi - 1e-6:
        total.add(h)
rank, seen = max(1, math.ceil(0.99 * total.get_total_count())), 0
for i in range(total.counts_len):
    seen += total.get_count_at_index(i)
    if seen >= rank:
        print(total.get_highest_equivalent_value(total.get_value_from_index(i)) / 1e9)
        break
"#;
    let args = [log.into(), from.to_string().into(), to.to_string().into()];
    let out = sanbench_testkit::hdr_python::<std::ffi::OsString>(SCRIPT, &args);
    String::from_utf8_lossy(&out)
        .trim()
        .parse()
        .expect("a p99 from the log")
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
#[cfg_attr(
    not(feature = "interop"),
    ignore = "interop tier: needs prometheus and python3 with hdrhistogram"
)]
fn a_real_prometheus_computes_the_run_s_iops_and_p99() {
    let _alone = ALONE.write().unwrap_or_else(|e| e.into_inner());
    let port = sanbench_testkit::free_port();
    let prom = Prometheus::start(port);
    let t0 = Instant::now();
    // Up and scraping (its `up` series exists, 0 while nothing listens yet): the run's
    // whole window is then scraped.
    while !prom.ready() || prom.query("count(up)", unix(SystemTime::now())).is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "prometheus did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let hlog = dir.path().join("run.hlog");
    // Open loop at a rate the host keeps whatever else runs: the IOPS are steady, so the
    // comparison is about the counters, not the machine.
    let mut run = start_run(
        port,
        &[
            "--time",
            "8s",
            "--ramp",
            "0",
            "--rate",
            "4000",
            "--workers",
            "1",
            "--log-interval",
            "100ms",
            "--json",
            json.to_str().unwrap(),
            "--hist-log",
            hlog.to_str().unwrap(),
        ],
    );
    // While it runs: the target is up, its last scrape without an error, and the metadata
    // holds the unit that only OpenMetrics states.
    let (mut seen_up, mut seen) = (None, (Value::Null, Value::Null));
    while run.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(500));
        let targets = prom.api("/api/v1/targets").unwrap_or_default();
        let meta = prom
            .api("/api/v1/metadata?metric=sanbench_latency_seconds")
            .unwrap_or_default();
        let t = &targets["data"]["activeTargets"][0];
        if t["health"] == "up"
            && t["lastError"] == ""
            && meta["data"]["sanbench_latency_seconds"][0]["unit"] == "seconds"
        {
            seen_up = Some(SystemTime::now());
        }
        seen = (targets, meta);
    }
    assert!(run.wait().unwrap().success());
    // Two more scrapes' worth of Prometheus time to be sure the last samples are in.
    std::thread::sleep(Duration::from_millis(1500));
    // Prometheus asked for OpenMetrics and parsed it: every scrape was answered in it, the
    // target was up throughout, and the metadata holds the unit only OpenMetrics states.
    let up_at = seen_up.unwrap_or_else(|| panic!("never up with its metadata: {seen:?}"));
    let now = unix(up_at);
    let om = prom.query("max(sanbench_scrapes_total{format=\"openmetrics\"})", now);
    assert!(om.is_some_and(|n| n >= 5.0), "openmetrics scrapes: {om:?}");
    let text = prom.query("max(sanbench_scrapes_total{format=\"prometheus\"})", now);
    assert_eq!(text, Some(0.0));
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let r = &doc["results"][0];
    // The window's start from the histogram log (its StartTime).
    let log = std::fs::read_to_string(&hlog).unwrap();
    let start: f64 = log
        .lines()
        .find_map(|l| l.strip_prefix("#[StartTime: "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    // A 4 s range ending 6 s into the window: well inside it, several scrapes.
    let (range, end) = (4.0, 6.0);
    let q = format!("sum(rate(sanbench_ios_total[{range}s]))");
    let prom_iops = prom.query(&q, start + end).expect("a rate from prometheus");
    // sanbench's own figure over the same window, from its 100 ms intervals.
    let ios: u64 = r["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|iv| {
            let t = iv["t"].as_f64().unwrap();
            t >= end - range - 1e-6 && t < end - 1e-6
        })
        .map(|iv| iv["read_ios"].as_u64().unwrap() + iv["write_ios"].as_u64().unwrap())
        .sum();
    let own = ios as f64 / range;
    // The counters are as of the last interval collected: they lag a scrape by up to one
    // interval (100 ms) and the collector's poll (up to 50 ms; docs/MEASURE.md). Prometheus's
    // rate divides by its own scrape times, so over samples 1 s apart (3 s between the first
    // and last of the range) two lags that differ by up to 150 ms move it by up to 5 %.
    // (With a 2 % bound it failed once on a loaded machine: 3866.7/s against 4000/s.)
    assert!(
        (prom_iops - own).abs() <= own * 0.05,
        "prometheus rate {prom_iops:.1}/s, sanbench {own:.1}/s (run {} IOPS; samples in range: {:?})",
        r["iops"],
        prom.query(&format!("count_over_time(sanbench_ios_total{{op=\"read\"}}[{range}s])"), start + end)
    );
    let q = format!(
        "histogram_quantile(0.99, sum by (le) (rate(sanbench_latency_seconds_bucket[{range}s])))"
    );
    let p99_s = prom
        .query(&q, start + end)
        .expect("a quantile from prometheus");
    // sanbench's own p99 over the I/Os Prometheus's figure covers: rate() takes the increase
    // between the range's first and last scrape (about 3 s of the 4, each sample as of the
    // last interval collected: up to 150 ms earlier), so those are the histogram log's
    // intervals between the two scrapes, a step earlier (merged by the hdrhistogram Python
    // package, as hist_log.rs reads the log). Over the whole 4 s instead, a stall of the open
    // loop in the part Prometheus leaves out dilutes the tail: sanbench 28 µs against
    // Prometheus's 64 µs, 1 run in 4 once the coordinator stopped waking every 2 ms.
    let times = prom.sample_times(
        &format!("sanbench_ios_total{{op=\"read\"}}[{range}s]"),
        start + end,
    );
    assert!(times.len() >= 3, "scrapes in the range: {times:?}");
    let (first, last) = (times[0] - start, times[times.len() - 1] - start);
    let own_p99 = window_p99(&hlog, first - 0.1, last - 0.1);
    eprintln!(
        "p99: prometheus {:.1} µs, sanbench {:.1} µs (intervals from {first:.2} to {last:.2} s)",
        p99_s * 1e6,
        own_p99 * 1e6
    );
    // The buckets double: one bucket either way is a factor of two.
    assert!(
        p99_s <= own_p99 * 2.0 && p99_s >= own_p99 / 2.0,
        "prometheus p99 {p99_s} s, sanbench {own_p99} s (intervals from {first:.2} to {last:.2} s)"
    );
}
