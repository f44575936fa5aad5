//! Multipath end to end: `sanbench serve iscsi|nvme|nbd --listen A --listen B` driven by
//! `sanbench run` over the two-portal URI (both paths carry I/O, every read checked); two
//! paths to different targets refused with exit 2; a path cut mid-run (a forwarder in front
//! of one portal) fails over with `--verify`, and the result says so.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use sanbench_testkit::{Forwarder, Served};
use serde_json::Value;

mod failover;

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("sanbench")
}

/// `sanbench serve KIND` (32 MiB) on two loopback portals.
fn serve2(kind: &str) -> Served {
    let s = Served::start(
        bin(),
        &[
            kind,
            "--size",
            "32M",
            "--listen",
            "127.0.0.1:0",
            "--listen",
            "127.0.0.1:0",
        ],
    );
    assert_eq!(portals(&s.uri).len(), 2, "{}", s.line);
    s
}

/// The portals (`HOST:PORT`) of a URI.
fn portals(uri: &str) -> Vec<String> {
    let authority = uri.split("://").nth(1).unwrap().split('/').next().unwrap();
    authority.split(',').map(str::to_string).collect()
}

/// The URI with its portals replaced.
fn with_portals(uri: &str, portals: &[String]) -> String {
    let (scheme, rest) = uri.split_once("://").unwrap();
    let path = rest.find('/').map(|i| &rest[i..]).unwrap_or("");
    format!("{scheme}://{}{path}", portals.join(","))
}

/// A second of 50 % reads at depth 8 on two workers: enough I/O for both paths to carry some.
const BUSY: [&str; 8] = [
    "--time",
    "1s",
    "--read",
    "50",
    "--qd",
    "8",
    "--workers",
    "2",
];

fn run_cmd(uri: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(["run", uri, "--ramp", "0", "--quiet", "--no-monitor"])
        .args(["--verify", "--json", "-"])
        .args(extra);
    c
}

fn json(out: &Output) -> Value {
    sanbench_testkit::ok_json(out)
}

fn paths(r: &Value) -> &Vec<Value> {
    r["multipath"]["paths"].as_array().expect("multipath.paths")
}

#[test]
fn both_portals_carry_io_and_every_read_checks() {
    let layers: &[&str] = if uring_ok() {
        &["poll", "uring"]
    } else {
        &["poll"]
    };
    for (kind, layer) in ["iscsi", "nvme", "nbd"]
        .into_iter()
        .flat_map(|k| layers.iter().map(move |l| (k, *l)))
    {
        let server = serve2(kind);
        let uri = format!("{}?policy=round-robin&sockio={layer}", server.uri);
        let out = run_cmd(&uri, &BUSY).output().unwrap();
        let v = json(&out);
        let r = &v["results"][0];
        assert_eq!(r["multipath"]["policy"], "round-robin", "{kind}: {v}");
        assert_eq!(r["info"]["params"]["socket"], layer, "{kind}: {v}");
        let ps = paths(r);
        assert_eq!(ps.len(), 2, "{kind}: {v}");
        let ios: Vec<u64> = ps.iter().map(|p| p["ios"].as_u64().unwrap()).collect();
        // Round-robin: each path carries half, up to what was in flight at the end.
        assert!(ios.iter().all(|&n| n > 100), "{kind}: {ios:?}");
        assert!(ios[0].abs_diff(ios[1]) <= 16, "{kind}: {ios:?}");
        assert!(ps.iter().all(|p| p["bytes"].as_u64().unwrap() > 0));
        assert!(
            ps.iter()
                .all(|p| p["latency_mean_us"].as_f64().unwrap() > 0.0
                    && p["latency_max_us"].as_f64() >= p["latency_mean_us"].as_f64()),
            "{kind}: {v}"
        );
        assert!(r["info"]["params"]["lu_id"].is_string(), "{kind}: {v}");
        assert_shared_ring(r, layer, kind);
        assert_eq!(r["multipath"]["reissued"], 0);
        assert!(r["verify"]["reads"].as_u64().unwrap() > 0, "{kind}: {v}");
        assert_eq!(r["verify"]["bad_blocks"], serde_json::json!([]), "{kind}");
        // A single-portal URI stays an ordinary target.
        let one = with_portals(&server.uri, &portals(&server.uri)[..1]);
        let v = json(&run_cmd(&one, &["--time", "0.3s"]).output().unwrap());
        assert!(v["results"][0].get("multipath").is_none(), "{kind}: {v}");
    }
}

#[test]
fn paths_to_different_targets_are_refused() {
    for kind in ["iscsi", "nvme"] {
        let (a, b) = (serve2(kind), serve2(kind));
        let mixed = with_portals(
            &a.uri,
            &[portals(&a.uri)[0].clone(), portals(&b.uri)[1].clone()],
        );
        let out = run_cmd(&mixed, &["--time", "1s"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{kind}: {err}");
        assert!(err.contains("different logical units"), "{kind}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{kind}: {err}");
    }
    // Bad multipath options: one line, exit 2.
    let s = serve2("iscsi");
    let out = run_cmd(&format!("{}?policy=fastest", s.uri), &["--time", "1s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("policy 'fastest'"), "{err}");
}

/// On io_uring every worker's queue ran its paths on one shared ring (and says so); on the
/// poll loop none was opened.
fn assert_shared_ring(r: &Value, layer: &str, kind: &str) {
    let queues = r["queues"].as_array().map_or(&[][..], |q| &q[..]);
    assert!(layer != "uring" || !queues.is_empty(), "{kind}: {r}");
    for q in queues {
        let (ring, enters) = (
            &q["multipath.socket_ring"],
            &q["multipath.socket_ring_enters"],
        );
        if layer == "uring" {
            assert_eq!(ring, "shared", "{kind}: {q}");
            assert!(enters.as_u64().unwrap() > 0, "{kind}: {q}");
            assert_eq!(r["info"]["params"]["socket_ring"], "shared", "{kind}");
        } else {
            assert!(ring.is_null() && enters.is_null(), "{kind}: {q}");
        }
    }
}

/// Whether this kernel runs the io_uring socket layer (else the test says it skipped).
fn uring_ok() -> bool {
    match sanbench_io::SockRing::probe() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("skipped: no io_uring socket layer here: {e}");
            false
        }
    }
}

#[test]
fn no_path_left_past_no_path_retry_fails_the_io_with_its_offset() {
    let server = serve2("iscsi");
    let fwd: Vec<Forwarder> = portals(&server.uri)
        .iter()
        .map(|p| Forwarder::start(p.parse().unwrap()))
        .collect();
    let via: Vec<String> = fwd.iter().map(|f| f.addr().to_string()).collect();
    let uri = format!("{}?no_path_retry=1s", with_portals(&server.uri, &via));
    let started = std::time::Instant::now();
    let child = run_cmd(&uri, &["--time", "20s", "--qd", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    for f in &fwd {
        f.cut();
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("offset"), "{err}");
    // Failed within no_path_retry of the cut (plus detection and the run's own ending),
    // not at the end of the 20 s run.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}: {err}");
}

#[test]
#[cfg_attr(not(feature = "interop"), ignore = "interop tier: needs tgtd")]
fn tgtd_with_two_portals_is_one_lu_over_two_paths() {
    sanbench_testkit::require("tgtd", "tgt");
    let tgt = sanbench_testkit::Tgtd::start(16 << 20);
    let second = tgt.add_portal();
    let uri = tgt.uri().replacen(
        &format!(":{}/", tgt.port),
        &format!(":{},127.0.0.1:{second}/", tgt.port),
        1,
    );
    let out = run_cmd(
        &format!("{uri}?policy=round-robin"),
        // tgtd's LUN is not sanbench's own: written once so every read can be checked.
        &[&BUSY[..], &["--precondition", "fill"]].concat(),
    )
    .output()
    .unwrap();
    let v = json(&out);
    let r = &v["results"][0];
    let ps = paths(r);
    assert_eq!(ps.len(), 2, "{v}");
    assert!(ps.iter().all(|p| p["ios"].as_u64().unwrap() > 50), "{v}");
    assert!(
        r["info"]["params"]["lu_id"]
            .as_str()
            .unwrap()
            .starts_with("naa."),
        "{v}"
    );
    assert!(r["verify"]["reads"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(r["verify"]["bad_blocks"], serde_json::json!([]));
}

#[test]
fn discovery_lists_every_port_of_a_two_port_nvme_target() {
    let server = serve2("nvme");
    let ps = portals(&server.uri);
    for p in &ps {
        let out = Command::new(bin())
            .args(["discover", "--json", &format!("nvme+tcp://{p}")])
            .output()
            .unwrap();
        let v = json(&out);
        let recs = v.as_array().unwrap();
        let ports: Vec<String> = recs
            .iter()
            .map(|r| {
                format!(
                    "{}:{}",
                    r["traddr"].as_str().unwrap(),
                    r["trsvcid"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(&ports, &ps, "{v}");
        let ids: Vec<u64> = recs.iter().map(|r| r["portid"].as_u64().unwrap()).collect();
        assert_eq!(ids, [1, 2], "{v}");
    }
}

/// A suite's `paths` sweep: the two-portal iSCSI target runs over 1 and 3 paths (its portals
/// in turn: 3 paths are two sessions to the first portal and one to the second), each cell's
/// result naming that many paths; `mem:` has no portals and skips those workloads (a note,
/// no cells), while the plain workload runs on both.
#[test]
fn a_suite_paths_sweep_runs_each_target_over_that_many_paths() {
    let server = serve2("iscsi");
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("paths.toml");
    std::fs::write(
        &suite,
        r#"name = "paths-test"
ramp = "0.2s"
time = "0.6s"
qd = 4
[[workload]]
id = "plain"
segment = [{ bs = "4k", read = 100, random = 100 }]
[[sweep]]
id = "mp"
group = "iops"
paths = [1, 3]
segment = [{ bs = "4k", read = 100, random = 100 }]
"#,
    )
    .unwrap();
    let out = Command::new(bin())
        .args(["compare", "--suite"])
        .arg(&suite)
        .args(["--repeat", "2", "--no-store", "--no-monitor", "--out"])
        .arg(dir.path().join("out"))
        .arg(format!("iscsi={}", server.uri))
        .arg("ram=mem:32M")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("note: ram skips mp-p1") && err.contains("note: ram skips mp-p3"),
        "{err}"
    );
    let cmp: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out/results.json")).unwrap())
            .unwrap();
    let cells = cmp["cells"].as_array().unwrap();
    let of = |w: &str, t: &str| -> Vec<&Value> {
        cells
            .iter()
            .filter(|c| c["workload"] == w && c["target"] == t)
            .collect()
    };
    assert_eq!(of("plain", "ram").len(), 2);
    assert_eq!(of("plain", "iscsi").len(), 2);
    assert!(of("mp-p1", "ram").is_empty() && of("mp-p3", "ram").is_empty());
    for (w, k) in [("mp-p1", 1), ("mp-p3", 3)] {
        let cs = of(w, "iscsi");
        assert_eq!(cs.len(), 2, "{w}");
        for c in cs {
            let paths = c["result"]["multipath"]["paths"].as_array().unwrap();
            assert_eq!(paths.len(), k, "{w}");
            assert!(
                paths.iter().all(|p| p["ios"].as_u64().unwrap() > 0),
                "{w}: {paths:?}"
            );
        }
    }
    // The plain workload keeps the target as given: its two portals.
    let given = &of("plain", "iscsi")[0]["result"]["multipath"]["paths"];
    assert_eq!(given.as_array().unwrap().len(), 2);
    let w = cmp["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == "mp-p3")
        .unwrap();
    assert_eq!(w["paths"], 3);
}

#[test]
fn an_open_loop_asking_more_than_two_paths_give_still_completes() {
    // Behind its schedule, an open loop waits for completions with a deadline already past,
    // every time; the multipath layer returned before looking at the sockets then, and
    // nothing completed for the rest of the window (0 IOPS at 150k asked, on every kind).
    // Round-robin, so that every path must carry I/O: the service-time selector rightly
    // leaves a path whose first completions were slow until its estimate goes stale (1 s, this
    // run's window), which on a crowded host left one NBD path 15 I/Os (2026-11-29, load 14).
    for kind in ["iscsi", "nvme", "nbd"] {
        let server = serve2(kind);
        let out = run_cmd(
            &format!("{}?policy=round-robin", server.uri),
            &["--time", "1s", "--qd", "16", "--rate", "5000000"],
        )
        .output()
        .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{kind}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        let r = &v["results"][0];
        let ios: Vec<u64> = paths(r)
            .iter()
            .map(|p| p["ios"].as_u64().unwrap())
            .collect();
        assert!(r["iops"].as_f64().unwrap() > 1000.0, "{kind}: {ios:?} {v}");
        assert!(ios.iter().all(|&n| n > 100), "{kind}: {ios:?}");
        assert_eq!(r["verify"]["bad_blocks"], serde_json::json!([]), "{kind}");
    }
}
