//! Open-loop load (`--rate`): the rate asked is the rate achieved, response time is measured
//! from the intended issue time (a stalled target shows every I/O that should have been
//! issued during the stall, with its full wait), and on a server of known service time the
//! mean response time is what queueing theory says.

use std::process::{Command as Proc, Stdio};
use std::time::Duration;

use assert_cmd::Command;
use sanbench_testkit::{wait_port, Peer};
use serde_json::Value;

/// The queueing-theory test runs with no other run of this binary beside it: its Poisson
/// arrivals' mean response is held to M/D/1 within 10 %, and a curve of runs beside it (the
/// test threads share the host's two cores) delayed its arrivals into a 17 ms mean against
/// 7.7 ms once. The other tests share the lock.
static ALONE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn run_json(args: &[&str]) -> Value {
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args(["run", "--json", "-", "--quiet", "--no-monitor"])
        .args(args)
        .output()
        .unwrap();
    sanbench_testkit::ok_json(&out)
}

/// The result's histogram `field` (HdrHistogram's compressed encoding), decoded.
fn histogram(r: &Value, field: &str) -> sanbench_stats::LatencyHistogram {
    sanbench_stats::LatencyHistogram::from_hdr_base64(r[field].as_str().unwrap()).unwrap()
}

/// Counts of histogram `field` at or above `ns`.
fn count_field_above(r: &Value, field: &str, ns: u64) -> u64 {
    histogram(r, field)
        .buckets()
        .iter()
        .filter(|b| b.0 >= ns)
        .map(|b| b.1)
        .sum()
}

/// Counts of the result's (response time) histogram at or above `ns`.
fn count_above(r: &Value, ns: u64) -> u64 {
    count_field_above(r, "histogram", ns)
}

#[test]
fn the_asked_rate_is_the_achieved_rate() {
    let _shared = ALONE.read().unwrap_or_else(|e| e.into_inner());
    for target in ["null:", "mem:64M"] {
        for rate in ["1000", "10000", "100000"] {
            let doc = run_json(&[
                target, "--rate", rate, "--qd", "64", "--time", "2s", "--ramp", "0.5s", "--read",
                "70", "--bs", "4k",
            ]);
            let r = &doc["results"][0];
            let o = &r["open_loop"];
            let asked = o["asked_iops"].as_f64().unwrap();
            let achieved = r["iops"].as_f64().unwrap();
            // Never more than asked (the schedule is fixed; edge effects are a few I/Os).
            assert!(
                achieved <= asked * 1.01,
                "{target} at {rate}: achieved {achieved}"
            );
            // 1k and 10k per second leave a loaded 2-core debug build ample room; 100k may not,
            // and then the point must say it is invalid and why, never pass as met.
            if rate == "100000" && achieved < asked * 0.98 {
                assert_eq!(o["valid"], false, "{target} at {rate}: {r}");
                assert!(o["invalid"].to_string().contains("below the asked"), "{o}");
            } else {
                assert!(
                    achieved >= asked * 0.98,
                    "{target} at {rate}: achieved {achieved}"
                );
            }
            assert!(
                r["service_us"].is_object() && r["issue_lag_us"].is_object(),
                "{r}"
            );
            eprintln!(
                "{target} {rate}/s: achieved {achieved:.0}, issue lag p99 {} µs, valid {}",
                r["issue_lag_us"]["p99"], o["valid"]
            );
        }
    }
}

/// A rate beyond what one slot on an io_uring file can do: every slot is busy and the next
/// arrival is already due. The stream must wait for a completion, not spin on a deadline
/// that has passed (with DEFER_TASKRUN a ring posts no completion without entering the
/// kernel: it ran at 0 IOPS), and the point says it fell short.
#[test]
fn an_overdue_rate_with_every_slot_busy_still_completes() {
    let _shared = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.img");
    let doc = run_json(&[
        file.to_str().unwrap(),
        "--size",
        "8M",
        "--rate",
        "200000",
        "--qd",
        "1",
        "--time",
        "1s",
        "--ramp",
        "0",
        "--read",
        "100",
        "--bs",
        "4k",
        "--engine",
        "io_uring",
    ]);
    let r = &doc["results"][0];
    assert!(r["ios"].as_u64().unwrap() > 100, "{r}");
    assert_eq!(r["open_loop"]["valid"], false, "{r}");
}

#[test]
fn a_stalled_server_shows_in_response_time_not_in_service_time() {
    let _shared = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let port = sanbench_testkit::free_port();
    let server = Proc::new(env!("CARGO_BIN_EXE_sanbench"))
        .args([
            "serve",
            "nbd",
            "--size",
            "64M",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = server.id() as i32;
    let _server = Peer(server);
    wait_port(port);
    let uri = format!("nbd://127.0.0.1:{port}");
    let stall = std::thread::spawn(move || {
        // Inside the window (ramp 0.5 s): stop the server for 500 ms.
        std::thread::sleep(Duration::from_millis(1800));
        // SAFETY: signals to the child process we started.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(Duration::from_millis(500));
        unsafe { libc::kill(pid, libc::SIGCONT) };
    });
    let doc = run_json(&[
        &uri,
        "--rate",
        "1000",
        "--qd",
        "4",
        "--time",
        "3s",
        "--ramp",
        "0.5s",
        "--read",
        "100",
        "--bs",
        "4k",
        "--precondition",
        "none",
    ]);
    stall.join().unwrap();
    let r = &doc["results"][0];
    // 500 arrivals fell in the stall; the one at its start waited ~500 ms, the one at its
    // end ~0: about 300 waited 200 ms or more.
    let waited = count_above(r, 200_000_000);
    assert!(
        (200..=400).contains(&waited),
        "{waited} I/Os waited >= 200 ms: {r}"
    );
    assert!(r["latency_us"]["max"].as_f64().unwrap() >= 400_000.0, "{r}");
    // The service-time histogram holds no such wait beyond the few I/Os in the server.
    let service_long = count_field_above(r, "service_histogram", 200_000_000);
    assert!(service_long <= 8, "{service_long} service times >= 200 ms");
    assert!(histogram(r, "issue_lag_histogram").count() > 0);
    // Only the qd 4 in the server when it stopped waited in service: p99 stays small.
    assert!(r["service_us"]["p99"].as_f64().unwrap() < 50_000.0, "{r}");
    // The generator was held back by the cap: the point says it is not a clean load point.
    assert_eq!(r["open_loop"]["valid"], false, "{r}");
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs nbdkit")]
fn response_time_follows_queueing_theory_on_a_server_of_known_service_time() {
    let _alone = ALONE.write().unwrap_or_else(|e| e.into_inner());
    sanbench_testkit::require("nbdkit", "nbdkit");
    let port = sanbench_testkit::free_port();
    let d_ms = 5.0;
    let child = Proc::new("nbdkit")
        .args(["-f", "-p", &port.to_string(), "-i", "127.0.0.1"])
        .args(["--filter=noparallel", "--filter=delay", "memory", "64M"])
        .args([format!("rdelay={d_ms}ms"), format!("wdelay={d_ms}ms")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _peer = Peer(child);
    wait_port(port);
    let uri = format!("nbd://127.0.0.1:{port}");
    let point = |rate: f64, arrival: &str, secs: &str| {
        let doc = run_json(&[
            &uri,
            "--rate",
            &rate.to_string(),
            "--arrival",
            arrival,
            "--qd",
            "64",
            "--time",
            secs,
            "--ramp",
            "0.5s",
            "--read",
            "100",
            "--bs",
            "4k",
            "--precondition",
            "none",
        ]);
        doc["results"][0].clone()
    };
    // The service time as this client sees it, with no queue: fixed arrivals at 10 % load.
    let d = point(20.0, "fixed", "3s")["latency_us"]["mean"]
        .as_f64()
        .unwrap()
        / 1000.0;
    // nbdkit's delay overshoots by its timer's wake-up (about 0.8 ms here idle, 1.8 ms seen
    // while other builds ran): the formula below takes the service time measured, not the one
    // asked, so this bound only catches a delay that did not apply or a client gone wrong.
    assert!(
        d >= d_ms && d < d_ms * 1.6,
        "service time {d} ms for a {d_ms} ms delay"
    );
    // Loads where the queueing excess (rho D / (2 (1 - rho)): half to three quarters of D)
    // stands well clear of the drift of nbdkit's timer overshoot under other load (which
    // failed this test at 0.3, where the excess is a fifth of D), and where 8 s of Poisson
    // arrivals still pin the mean within a few per cent.
    for rho in [0.5, 0.6] {
        let rate = rho / (d / 1000.0);
        // Fixed arrivals below saturation never queue: response = service time.
        let fixed = point(rate, "fixed", "4s")["latency_us"]["mean"]
            .as_f64()
            .unwrap()
            / 1000.0;
        assert!(
            (fixed - d).abs() / d < 0.10,
            "fixed at {rho}: {fixed} ms vs {d} ms"
        );
        // Poisson arrivals: M/D/1, W = D + rho D / (2 (1 - rho)), with D the service time
        // the fixed arrivals just measured at the same rate (the closest in time).
        let r = point(rate, "poisson", "8s");
        let w = r["latency_us"]["mean"].as_f64().unwrap() / 1000.0;
        let rho_e = rate * fixed / 1000.0;
        let md1 = fixed + rho_e * fixed / (2.0 * (1.0 - rho_e));
        eprintln!("rho {rho}: fixed {fixed:.2} ms, poisson {w:.2} ms, M/D/1 {md1:.2} ms");
        assert!(
            (w - md1).abs() / md1 < 0.10,
            "poisson at {rho}: {w} ms vs M/D/1 {md1} ms"
        );
    }
    // Past saturation the queue grows for as long as the run lasts.
    let over = point(1.3 / (d / 1000.0), "fixed", "3s");
    let w = over["latency_us"]["mean"].as_f64().unwrap() / 1000.0;
    assert!(w > 10.0 * d, "past saturation: {w} ms");
    assert_eq!(over["open_loop"]["valid"], false);
}

#[test]
fn a_curve_runs_every_level_of_every_target_and_reports_it() {
    let _shared = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("s.toml");
    std::fs::write(
        &suite,
        "name = \"curve-test\"\ncurve = [90, 10]\ntime = \"0.5s\"\nramp = \"0.1s\"\n\
         [[workload]]\nid = \"rr\"\nqd = 8\n[[workload.segment]]\nbs = \"4k\"\nread = 100\n",
    )
    .unwrap();
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args([
            "compare",
            "--repeat",
            "1",
            "--no-store",
            "--quiet",
            "--suite",
        ])
        .arg(&suite)
        .arg("--out")
        .arg(dir.path())
        .args(["a=mem:16M", "b=null:"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).unwrap()).unwrap();
    assert_eq!(doc["curve"], serde_json::json!([10.0, 90.0]));
    let cells = doc["cells"].as_array().unwrap();
    let closed: Vec<&Value> = cells.iter().filter(|c| c["load_pct"].is_null()).collect();
    assert_eq!(closed.len(), 2);
    for (name, max) in closed
        .iter()
        .map(|c| (&c["target"], c["result"]["iops"].as_f64().unwrap()))
    {
        for pct in [10.0, 90.0] {
            let p = cells
                .iter()
                .find(|c| &c["target"] == name && c["load_pct"] == pct)
                .unwrap_or_else(|| panic!("no {pct} % point for {name}"));
            let asked = p["result"]["open_loop"]["asked_iops"].as_f64().unwrap();
            assert!(
                // Both written to seven significant digits (doc::json::SIGNIFICANT).
                (asked - max * pct / 100.0).abs() <= 1.0 + 2e-6 * asked,
                "{asked} vs {max} x {pct} %"
            );
            assert!(p["result"]["service_us"].is_object());
        }
    }
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("## Response time under load"), "{md}");
    assert!(md.contains("| a | 10 % |"), "{md}");
    // The closed-loop tables are not polluted by the curve's points.
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("Response time vs IOPS"));
}

/// An open loop's spin for its schedule is measured and left out of the CPU per I/O: the
/// result carries it (`pacing_cpu_s`, `efficiency.pacing_cpu_pct`), the summary says it, and
/// the figure per I/O is what is left.
#[test]
fn the_open_loops_pacing_is_reported_and_left_out_of_cpu_per_io() {
    let _shared = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args([
            "run", "mem:64M", "--rate", "2000", "--qd", "8", "--time", "2s",
        ])
        .args([
            "--ramp",
            "0.3s",
            "--baseline",
            "0.3s",
            "--read",
            "70",
            "--bs",
            "4k",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let r = &doc["results"][0];
    let pacing_s = r["pacing_cpu_s"].as_f64().unwrap();
    let e = &r["efficiency"];
    let pct = e["pacing_cpu_pct"].as_f64().unwrap();
    // 2,000 gaps a second spin at least 10 µs each: 2 % of a core, 1 % of two; 0.1 % holds on a
    // host whose wake-ups came late.
    assert!(pacing_s > 0.002 && pct > 0.1, "{pacing_s} s, {pct} %: {e}");
    assert!(
        stdout.contains("of which the open loop's pacing"),
        "{stdout}"
    );
    // Per I/O: the busy time above the idle baseline less the pacing; the gross figure keeps
    // everything.
    let cpu = &r["cpu"];
    let cores = cpu["cores"].as_f64().unwrap();
    let window = doc["host"]["window_s"].as_f64().unwrap();
    let idle_s = cpu["baseline_busy_pct"].as_f64().unwrap() / 100.0 * cores * window;
    let busy_s = cpu["busy_cpu_s"].as_f64().unwrap();
    let ios = r["ios"].as_f64().unwrap();
    let want = (busy_s - idle_s - pacing_s) * 1e6 / ios;
    if want > 0.0 {
        let net = e["cpu_us_per_io"].as_f64();
        let net = net.unwrap_or_else(|| panic!("no cpu_us_per_io, {want} wanted: {r}"));
        // The figures are written to seven significant digits (doc::json::SIGNIFICANT); the
        // difference of busy and idle keeps their absolute error, not their relative one.
        let scale = (busy_s + idle_s + pacing_s) * 1e6 / ios;
        assert!(
            (net - want).abs() <= 1e-5 * scale.max(1e-3),
            "{net} against {want}: {r}"
        );
    } else {
        // On a loaded host the baseline can catch more of the other processes' CPU than the
        // window: nothing above idle is left once the pacing is out, and there is no figure.
        assert!(e["cpu_us_per_io"].is_null(), "{want}: {r}");
    }
    let gross = e["cpu_us_per_io_gross"].as_f64().unwrap();
    assert!(
        (gross - busy_s * 1e6 / ios).abs() <= 2e-6 * gross.max(1e-3),
        "{gross}"
    );
}

#[test]
fn bad_rates_are_refused() {
    for args in [
        &["run", "null:", "--rate", "0"][..],
        &["run", "null:", "--rate", "1000", "--arrival", "burst"][..],
        &["run", "null:", "--arrival", "poisson"][..],
        &["compare", "--repeat", "1", "null:", "--curve", "10,abc"][..],
        &["compare", "--repeat", "1", "null:", "--curve", "0,50"][..],
    ] {
        let out = Command::cargo_bin("sanbench")
            .unwrap()
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
    }
    // A suite's curve is checked where the suite is read (the error names the file).
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("s.toml");
    std::fs::write(
        &suite,
        "name = \"c\"\ncurve = [50, 250]\n[[workload]]\nid = \"r\"\n\
         segment = [{ bs = \"4k\", read = 100 }]\n",
    )
    .unwrap();
    let out = Command::cargo_bin("sanbench")
        .unwrap()
        .args(["compare", "null:", "--suite", suite.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("s.toml: curve: 250 is not a load level between 0 and 200 %"),
        "{err}"
    );
}
