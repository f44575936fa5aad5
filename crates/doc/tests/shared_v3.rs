//! Version 3 of the comparison document (crate::shared): what every cell of a target repeats
//! is written once, in the target's `shared`, and every reader of the loaded document sees
//! each cell whole, as version 1 and 2 documents show it.

use std::io::Read;
use std::path::Path;

use sanbench_doc::{Comparison, COMPARE_SCHEMA};
use serde_json::Value;

fn v1_comparison() -> Comparison {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1/compare-results.json.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The version 1 fixture as a version 3 document in memory: histograms compacted, and its
/// figures to the digits any written document keeps (written and read back as version 2,
/// whose readers are the ones version 3's must match).
fn as_v3(mut cmp: Comparison) -> Comparison {
    for c in &mut cmp.cells {
        let r = &mut c.result;
        r.histogram = r.latency_histogram().map(sanbench_doc::run::Histogram);
        r.histogram_ns.clear();
    }
    cmp.schema = "sanbench.compare/2".into();
    let mut cmp: Comparison = serde_json::from_str(&write(&cmp)).unwrap();
    cmp.schema = COMPARE_SCHEMA.into();
    cmp
}

fn write(cmp: &Comparison) -> String {
    sanbench_doc::json::to_string(cmp).unwrap()
}

/// The shares of a CPU breakdown, in order.
fn shares(b: &sanbench_doc::host::CpuBreakdown) -> [f64; 9] {
    [
        b.busy_pct,
        b.user_pct,
        b.nice_pct,
        b.system_pct,
        b.irq_pct,
        b.softirq_pct,
        b.steal_pct,
        b.iowait_pct,
        b.idle_pct,
    ]
}

/// Written and loaded back, a version 3 comparison gives every cell the target info, the
/// precondition, power, network and efficiency blocks it had, and its CPU figures to a tenth
/// of a clock tick; writing it again gives the same text (a round trip).
#[test]
fn a_version_3_document_loads_back_to_what_was_written() {
    let cmp = as_v3(v1_comparison());
    let text = write(&cmp);
    let back: Comparison = serde_json::from_str(&text).unwrap();
    assert_eq!(back.schema, COMPARE_SCHEMA);
    assert_eq!(back.cells.len(), cmp.cells.len());
    assert!(back.targets.iter().all(|t| t.shared.is_none()));
    for (a, b) in cmp.cells.iter().zip(&back.cells) {
        let (ra, rb) = (&a.result, &b.result);
        assert!(ra.info.is_some());
        assert_eq!(ra.info, rb.info, "{}", a.target);
        assert_eq!(ra.precondition, rb.precondition);
        assert_eq!(ra.power, rb.power);
        assert_eq!(ra.net, rb.net);
        assert_eq!(ra.efficiency, rb.efficiency);
        assert_eq!(ra.bottleneck, rb.bottleneck);
        assert_eq!(ra.iops, rb.iops);
        let (ca, cb) = (ra.cpu.as_ref().unwrap(), rb.cpu.as_ref().unwrap());
        assert_eq!(
            (ca.clk_tck, ca.cores, &ca.groups),
            (cb.clk_tck, cb.cores, &cb.groups)
        );
        // One tick of one core over the window, in percent.
        let tick = 100.0 / (ca.clk_tck as f64 * ra.seconds);
        let rows = ca.per_core.iter().map(|r| &r.pct).chain([&ca.breakdown]);
        let back_rows = cb.per_core.iter().map(|r| &r.pct).chain([&cb.breakdown]);
        assert_eq!(ca.per_core.len(), cb.per_core.len());
        for (x, y) in rows.zip(back_rows) {
            for (p, q) in shares(x).iter().zip(shares(y)) {
                assert!((p - q).abs() <= tick / 10.0, "{p} -> {q} (tick {tick} %)");
            }
            assert_eq!(x.tick_busy_pct.is_some(), y.tick_busy_pct.is_some());
        }
    }
    assert_eq!(write(&back), text, "a second write differs from the first");
    // Each target's info is written once, in its `shared`, not in its cells.
    let raw: Value = serde_json::from_str(&text).unwrap();
    for t in raw["targets"].as_array().unwrap() {
        assert!(t["shared"]["info"].is_object(), "{t}");
    }
    for c in raw["cells"].as_array().unwrap() {
        assert!(c["result"].get("info").is_none(), "{}", c["result"]["info"]);
        assert!(c["result"]["iops"].is_number());
    }
}

/// A comparison written as version 3 is smaller than as version 2, by at least what it no
/// longer repeats: each target's info once per cell.
#[test]
fn version_3_writes_less_than_version_2() {
    let v3 = as_v3(v1_comparison());
    let mut v2 = v3.clone();
    v2.schema = "sanbench.compare/2".into();
    let (t2, t3) = (write(&v2), write(&v3));
    let info: usize = v3
        .cells
        .iter()
        .map(|c| serde_json::to_string(&c.result.info).unwrap().len())
        .sum();
    assert!(
        t3.len() + info <= t2.len(),
        "v3 {} bytes, v2 {}, info {info}",
        t3.len(),
        t2.len()
    );
    // Version 2 stays as it was written: no `shared`, every cell whole.
    assert!(!t2.contains("\"shared\""));
    let back: Comparison = serde_json::from_str(&t2).unwrap();
    assert_eq!(back, v2);
    assert_eq!(write(&back), t2);
}

/// Cells of one target that differ within a shared block (a controller id, a block one cell
/// lacks, a null where the others have a figure) load back exactly as they were; a target
/// whose cells a patch cannot express is written whole.
#[test]
fn cells_that_differ_from_their_target_keep_their_own() {
    let mut cmp = as_v3(v1_comparison());
    let ram: Vec<usize> = (0..cmp.cells.len())
        .filter(|&i| cmp.cells[i].target == cmp.targets[0].name)
        .collect();
    assert!(ram.len() >= 3);
    let info = |c: &mut Comparison, i: usize| c.cells[i].result.info.as_mut().unwrap().clone();
    let mut a = info(&mut cmp, ram[0]);
    a.params.insert("cntlid".into(), 4.into());
    cmp.cells[ram[0]].result.info = Some(a);
    cmp.cells[ram[1]].result.precondition = None;
    if let Some(p) = cmp.cells[ram[2]].result.power.as_mut() {
        p.idle_w = None;
    }
    cmp.cells[ram[2]].result.info.as_mut().unwrap().max_transfer = Some(1 << 20);
    let text = write(&cmp);
    let back: Comparison = serde_json::from_str(&text).unwrap();
    for (a, b) in cmp.cells.iter().zip(&back.cells) {
        assert_eq!(a.result.info, b.result.info);
        assert_eq!(a.result.precondition, b.result.precondition);
        assert_eq!(a.result.power, b.result.power);
    }
    let raw: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        raw["cells"][ram[0]]["result"]["info"],
        serde_json::json!({"params": {"cntlid": 4}})
    );

    // A params entry that is null in one cell and a value in the others: a merge patch would
    // remove the key, so the target is written whole.
    let mut cmp = as_v3(v1_comparison());
    for &i in &ram {
        let v = if i == ram[0] {
            Value::Null
        } else {
            Value::from(1)
        };
        cmp.cells[i]
            .result
            .info
            .as_mut()
            .unwrap()
            .params
            .insert("x".into(), v);
    }
    let text = write(&cmp);
    let raw: Value = serde_json::from_str(&text).unwrap();
    assert!(raw["targets"][0].get("shared").is_none());
    assert!(raw["targets"][1]["shared"].is_object());
    let back: Comparison = serde_json::from_str(&text).unwrap();
    for (a, b) in cmp.cells.iter().zip(&back.cells) {
        assert_eq!(a.result.info, b.result.info);
    }
}

/// The cell in progress is written over its target's shared blocks and loads back whole.
#[test]
fn the_cell_in_progress_loads_whole() {
    let mut cmp = as_v3(v1_comparison());
    let mut c = cmp.cells.last().unwrap().clone();
    c.result.precondition = None;
    cmp.in_progress = Some(Box::new(c));
    cmp.complete = Some(false);
    let back: Comparison = serde_json::from_str(&write(&cmp)).unwrap();
    let (a, b) = (cmp.in_progress.unwrap(), back.in_progress.unwrap());
    assert_eq!(a.result.info, b.result.info);
    assert!(b.result.precondition.is_none());
    assert_eq!(a.result.power, b.result.power);
}

/// A version 2 document written by main before version 3 (tests/fixtures/v2) loads and writes
/// back as it was (less the report's derived fields), and as version 3 loads back to the same
/// target info in every cell.
#[test]
fn a_version_2_demo_loads_and_writes_back_unchanged() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2/compare-demo.json.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut raw: Value = serde_json::from_str(&text).unwrap();
    for k in [
        "findings",
        "findings_withheld",
        "min_rel",
        "questions",
        "design_assumed",
    ] {
        raw.as_object_mut().unwrap().remove(k);
    }
    let v2: Comparison = serde_json::from_str(&text).unwrap();
    assert_eq!(v2.schema, "sanbench.compare/2");
    assert_eq!(serde_json::to_value(&v2).unwrap(), raw);
    let mut v3 = v2.clone();
    v3.schema = COMPARE_SCHEMA.into();
    let back: Comparison = serde_json::from_str(&write(&v3)).unwrap();
    assert!(v2.cells.len() > 5);
    for (a, b) in v2.cells.iter().zip(&back.cells) {
        assert!(a.result.info.is_some());
        assert_eq!(a.result.info, b.result.info, "{}", a.target);
        assert_eq!(a.result.precondition, b.result.precondition);
        assert_eq!(a.result.power, b.result.power);
        assert_eq!(a.result.bottleneck, b.result.bottleneck);
    }
}
