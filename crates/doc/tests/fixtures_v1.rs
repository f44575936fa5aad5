//! Documents written by main at 9a6bb39 (before this crate; tests/fixtures/v1/README.md has the
//! commands) load into the typed document and write back unchanged: every field is typed or
//! kept, none is dropped or renamed, and no block falls back to a default.

use std::io::Read;
use std::path::Path;

use sanbench_doc::{Comparison, RunDoc};
use serde_json::Value;

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/v1")
        .join(name);
    let gz = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .unwrap();
    text
}

/// The first place two JSON values differ, as a path.
fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    None => return Some(format!("{at}.{k}: dropped")),
                    Some(w) => {
                        if let Some(d) = first_difference(v, w, &format!("{at}.{k}")) {
                            return Some(d);
                        }
                    }
                }
            }
            y.keys()
                .find(|k| !x.contains_key(*k))
                .map(|k| format!("{at}.{k}: added"))
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(format!("{at}: {} items became {}", x.len(), y.len()));
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (v, w))| first_difference(v, w, &format!("{at}[{i}]")))
        }
        _ => (a != b).then(|| format!("{at}: {a} became {b}")),
    }
}

/// What the report's JSON exporter adds to a comparison's results.json: judged again from the
/// cells whenever the document is rendered, so not part of the document's type.
const DERIVED: &[&str] = &[
    "findings",
    "findings_withheld",
    "min_rel",
    "questions",
    "design_assumed",
];

fn round_trips<T: serde::de::DeserializeOwned + serde::Serialize>(name: &str) -> T {
    let text = fixture(name);
    let mut raw: Value = serde_json::from_str(&text).unwrap();
    if let Some(o) = raw.as_object_mut() {
        if o.get("schema").and_then(Value::as_str) == Some("sanbench.compare/1") {
            DERIVED.iter().for_each(|k| {
                o.remove(*k);
            });
        }
    }
    let doc: T = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let back = serde_json::to_value(&doc).unwrap();
    if let Some(d) = first_difference(&raw, &back, name) {
        panic!("{d}");
    }
    doc
}

#[test]
fn run_documents_load_and_write_back_unchanged() {
    for name in [
        "run-verify.json.gz",
        "run-open.json.gz",
        "run-multipath.json.gz",
    ] {
        let doc: RunDoc = round_trips(name);
        assert_eq!(doc.schema, "sanbench.run/1");
        assert!(!doc.results.is_empty(), "{name}");
        for r in &doc.results {
            assert!(r.ios > 0, "{name}: {}", r.target);
        }
    }
}

#[test]
fn a_comparison_loads_and_writes_back_unchanged() {
    let cmp: Comparison = round_trips("compare-results.json.gz");
    assert_eq!(cmp.schema, "sanbench.compare/1");
    assert_eq!(cmp.targets.len(), 2);
    assert_eq!(cmp.cells.len(), 20);
}

/// A version 1 comparison written as version 2 (histograms compacted, the text indented down
/// to the blocks) reads back to the same figures and histograms, at under a fifth of its
/// version 1 size (pretty-printed as version 1 wrote it: 1.8 MB).
#[test]
fn version_2_holds_the_same_in_a_fifth_of_the_text() {
    let text = fixture("compare-results.json.gz");
    let mut cmp: Comparison = serde_json::from_str(&text).unwrap();
    let v1_buckets: Vec<Vec<(u64, u64)>> = cmp
        .cells
        .iter()
        .map(|c| c.result.histogram_ns.clone())
        .collect();
    for c in &mut cmp.cells {
        let r = &mut c.result;
        r.histogram = r.latency_histogram().map(sanbench_doc::run::Histogram);
        assert!(r.histogram.is_some());
        r.histogram_ns.clear();
    }
    cmp.schema = sanbench_doc::COMPARE_SCHEMA.into();
    let v2 = sanbench_doc::json::to_string(&cmp).unwrap();
    assert!(
        v2.len() * 5 < text.len(),
        "version 2: {} bytes, version 1: {}",
        v2.len(),
        text.len()
    );
    // Figures are written to seven significant digits (doc::json::SIGNIFICANT): reading the
    // text back and writing it again gives the same text.
    let back: Comparison = serde_json::from_str(&v2).unwrap();
    assert_eq!(sanbench_doc::json::to_string(&back).unwrap(), v2);
    assert_eq!(back.cells.len(), cmp.cells.len());
    for (c, v1) in back.cells.iter().zip(&v1_buckets) {
        assert_eq!(&c.result.latency_histogram().unwrap().buckets(), v1);
        assert!(c.result.histogram_ns.is_empty());
    }
    assert!(!v2.contains("histogram_ns"));
}

#[test]
fn the_typed_blocks_hold_what_was_written() {
    let doc: RunDoc = round_trips("run-verify.json.gz");
    let raw: Value = serde_json::from_str(&fixture("run-verify.json.gz")).unwrap();
    let r = &doc.results[1];
    assert_eq!(r.target, "null:");
    let bad = r.verify.as_ref().expect("verify block").bad_total();
    assert_eq!(
        bad,
        raw["results"][1]["verify"]["bad"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_u64)
            .sum::<u64>()
    );
    assert!(bad > 0);
    let open: RunDoc = round_trips("run-open.json.gz");
    let ol = open.results[0].open_loop.as_ref().expect("open loop block");
    assert_eq!(ol.asked_iops, 20000.0);
    let mp: RunDoc = round_trips("run-multipath.json.gz");
    assert_eq!(mp.results[0].multipath.as_ref().unwrap().paths.len(), 2);
}
