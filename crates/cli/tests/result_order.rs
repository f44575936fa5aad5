//! Figures that must hold on any real run, checked on short real runs of every local engine:
//! percentiles in order (min <= p50 <= p90 <= p99 <= p99.9 <= p99.99 <= max, the mean inside
//! [min, max]) overall and per direction. A histogram or merge bug that reorders them (or a
//! percentile taken from the wrong direction) fails here.

use serde_json::Value;

fn run(args: &[&str]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sanbench"))
        .args([
            "run", "--json", "-", "--quiet", "--ramp", "0s", "--time", "400ms",
        ])
        .args(["--baseline", "0"])
        .args(args)
        .output()
        .unwrap();
    sanbench_testkit::ok_json(&out)
}

fn check_order(what: &str, l: &Value) {
    let keys = ["min", "p50", "p90", "p99", "p999", "p9999", "max"];
    let v: Vec<f64> = keys
        .iter()
        .map(|k| {
            l[*k]
                .as_f64()
                .unwrap_or_else(|| panic!("{what}: no {k} in {l}"))
        })
        .collect();
    for (i, w) in v.windows(2).enumerate() {
        assert!(
            w[0] <= w[1],
            "{what}: {} {} > {} {} in {l}",
            keys[i],
            w[0],
            keys[i + 1],
            w[1]
        );
    }
    let mean = l["mean"].as_f64().unwrap();
    assert!(
        v[0] <= mean && mean <= v[6],
        "{what}: mean {mean} outside [min, max] in {l}"
    );
    assert!(v[6] > 0.0, "{what}: max latency 0 in {l}");
}

fn check_doc(doc: &Value) {
    let results = doc["results"].as_array().unwrap();
    assert!(!results.is_empty());
    for r in results {
        let name = r["target"].as_str().unwrap_or("?").to_string();
        assert!(r["ios"].as_u64().unwrap() > 0, "{name}: no I/O");
        check_order(&name, &r["latency_us"]);
        for dir in ["read", "write"] {
            let d = &r[dir];
            if d["ios"].as_u64().unwrap_or(0) > 0 {
                check_order(&format!("{name} {dir}"), &d["latency_us"]);
            }
        }
    }
}

#[test]
fn percentiles_are_ordered_on_null_and_mem() {
    check_doc(&run(&["null:", "--qd", "32"]));
    check_doc(&run(&[
        "mem:64M", "--qd", "8", "--read", "50", "--random", "100", "--bs", "4k",
    ]));
    // Mixed sizes in one run: two segments with different transfer sizes.
    check_doc(&run(&[
        "mem:64M",
        "--qd",
        "4",
        "--read-bs",
        "64k",
        "--write-bs",
        "4k",
        "--read",
        "70",
    ]));
}

#[test]
fn percentiles_are_ordered_on_files_with_both_engines() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let f = dir.path().join("disk");
    let fs = f.to_str().unwrap();
    for engine in ["sync", "auto"] {
        check_doc(&run(&[
            fs, "--size", "16M", "--engine", engine, "--qd", "8", "--read", "50", "--random",
            "100", "--bs", "4k",
        ]));
    }
}
