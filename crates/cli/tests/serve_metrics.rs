//! `serve nbd|iscsi|nvme --metrics-listen` (issue 25): the servers' endpoints parse strictly
//! in both formats; scraped during a run they show its connections open with I/O in flight
//! bounded by its depth, and after it the store's counters equal the I/Os the run counted up
//! to what was in flight when its window closed (the drain it does not count); a port in use
//! or a bad address is one line and exit 2 before the server serves.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sanbench_testkit::Served;
use serde_json::Value;

mod expo;
use expo::{parse, total, Sample};

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

/// The endpoint's port from the ready line ("metrics at http://127.0.0.1:PORT/metrics").
fn metrics_port(s: &Served) -> u16 {
    let url = s
        .line
        .split("metrics at http://")
        .nth(1)
        .unwrap_or_else(|| panic!("no metrics in {:?}", s.line));
    let addr = url.split('/').next().unwrap();
    addr.rsplit_once(':').unwrap().1.parse().unwrap()
}

fn scrape(port: u16, om: bool) -> Vec<Sample> {
    let accept = om.then_some("application/openmetrics-text;version=1.0.0");
    let (_, body) = expo::get(port, "/metrics", accept).expect("the endpoint answers");
    parse(&body, om)
}

const WORKERS: u64 = 2;
const QD: u64 = 4;

#[test]
fn a_server_s_counters_are_the_i_os_a_run_did_against_it() {
    for (kind, store) in [("nbd", "default"), ("iscsi", "lun0"), ("nvme", "ns1")] {
        let server = Served::start(
            bin(),
            &[
                kind,
                "--size",
                "16M",
                "--listen",
                "127.0.0.1:0",
                "--metrics-listen",
                "127.0.0.1:0",
            ],
        );
        let port = metrics_port(&server);
        let before = scrape(port, false);
        assert_eq!(total(&before, "sanbench_server_connections_open", &[]), 0.0);
        assert_eq!(
            total(&before, "sanbench_server_store_ios_total", &[]),
            0.0,
            "{kind}"
        );
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let mut run = Command::new(bin())
            .args(["run", &server.uri, "--time", "1.5s", "--ramp", "0"])
            .args(["--qd", &QD.to_string(), "--workers", &WORKERS.to_string()])
            .args(["--read", "70", "--precondition", "none"])
            .args(["--quiet", "--no-monitor", "--baseline", "0", "--json"])
            .arg(&json)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // During the run: its connections are open and carry I/O, at most its depth in flight.
        let t0 = Instant::now();
        let mut during = None;
        while run.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(20) {
            let s = scrape(port, true);
            let conn_ios = total(&s, "sanbench_server_conn_ios_total", &[]);
            if conn_ios > 0.0 {
                during = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let during = during.unwrap_or_else(|| panic!("{kind}: no connection with I/O seen"));
        assert!(
            total(&during, "sanbench_server_connections_open", &[]) >= WORKERS as f64,
            "{kind}: {during:?}"
        );
        let inflight: Vec<f64> = during
            .iter()
            .filter(|x| x.0 == "sanbench_server_conn_inflight")
            .map(|x| x.2)
            .collect();
        assert!(!inflight.is_empty(), "{kind}");
        assert!(
            inflight.iter().all(|&n| n <= QD as f64),
            "{kind}: {inflight:?}"
        );
        assert!(run.wait().unwrap().success(), "{kind}");
        let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let r = &doc["results"][0];
        let ran = |op: &str| r[op]["ios"].as_u64().unwrap();
        // After it: the run's connections are closed and the store has every I/O they did.
        let after = scrape(port, false);
        assert_eq!(total(&after, "sanbench_server_connections_open", &[]), 0.0);
        assert!(total(&after, "sanbench_server_connections_accepted_total", &[]) >= WORKERS as f64);
        let srv = |op: &str, fig: &str| {
            let name = format!("sanbench_server_store_{fig}_total");
            total(&after, &name, &[("store", store), ("op", op)]) as u64
        };
        for op in ["read", "write"] {
            let (served, counted) = (srv(op, "ios"), ran(op));
            // The server answered every I/O the run counted, and those still in flight when
            // the window closed (the drain, which the run does not count).
            assert!(
                served >= counted && served - counted <= WORKERS * QD,
                "{kind} {op}: served {served}, the run counted {counted}"
            );
            assert_eq!(srv(op, "bytes"), served * 4096, "{kind} {op}");
            assert_eq!(srv(op, "errors"), 0, "{kind} {op}");
        }
        assert!(ran("read") > 100 && ran("write") > 10, "{kind}: {r}");
        // Both formats carry the same figures.
        let om = scrape(port, true);
        assert_eq!(
            total(&om, "sanbench_server_store_ios_total", &[]),
            total(&after, "sanbench_server_store_ios_total", &[]),
            "{kind}"
        );
        assert!(total(&after, "sanbench_server_allocated_bytes", &[]) > 0.0);
        server.interrupt();
    }
}

#[test]
fn a_metrics_port_in_use_or_a_bad_address_is_one_line_and_exit_2_before_serving() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    for kind in ["nbd", "iscsi", "nvme"] {
        for addr in [
            format!("127.0.0.1:{port}"),
            "nonsense".into(),
            // Not an address of this host.
            "192.0.2.1:9100".into(),
        ] {
            let out = Command::new(bin())
                .args(["serve", kind, "--size", "1M", "--listen", "127.0.0.1:0"])
                .args(["--metrics-listen", &addr])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{kind} {addr}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{kind} {addr}: {err}");
            assert!(out.stdout.is_empty(), "{kind} {addr}: served anyway");
        }
    }
}
