//! The JSON Schema of both documents, generated from the types (schemars), is what docs/schema
//! publishes, and every document written by an earlier sanbench (tests/fixtures/v1) validates
//! against it. `SANBENCH_WRITE_SCHEMA=1 cargo test -p sanbench-doc --test schema` writes the
//! files again after a change to the types.

use std::io::Read;
use std::path::{Path, PathBuf};

use sanbench_doc::{Comparison, RunDoc};
use serde_json::Value;

fn docs_schema(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/schema")
        .join(name)
}

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/v1")
        .join(name);
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The schema of `T` as published, checked against (or, asked to, written to) docs/schema.
fn published<T: schemars::JsonSchema>(file: &str) -> Value {
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap();
    let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    let path = docs_schema(file);
    if std::env::var_os("SANBENCH_WRITE_SCHEMA").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == text,
        "docs/schema/{file} is not the schema of the types: run \
         SANBENCH_WRITE_SCHEMA=1 cargo test -p sanbench-doc --test schema"
    );
    schema
}

fn validate(schema: &Value, doc: &Value, name: &str) {
    let v = jsonschema::validator_for(schema).unwrap();
    let errors: Vec<String> = v
        .iter_errors(doc)
        .take(5)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:#?}");
}

#[test]
fn run_documents_validate_against_the_published_schema() {
    let schema = published::<RunDoc>("run.schema.json");
    for name in [
        "run-verify.json.gz",
        "run-open.json.gz",
        "run-multipath.json.gz",
    ] {
        validate(&schema, &fixture(name), name);
    }
}

/// The v1 run documents as this crate writes them now (version 2: histograms compacted).
#[test]
fn version_2_run_documents_validate() {
    let schema = published::<RunDoc>("run.schema.json");
    for name in ["run-verify.json.gz", "run-open.json.gz"] {
        let mut doc: RunDoc = serde_json::from_value(fixture(name)).unwrap();
        doc.schema = sanbench_doc::run::SCHEMA.into();
        for r in doc.results.iter_mut().chain(doc.all.as_mut()) {
            r.histogram = r.latency_histogram().map(sanbench_doc::run::Histogram);
            r.histogram_ns.clear();
        }
        let v2: Value =
            serde_json::from_str(&sanbench_doc::json::to_string(&doc).unwrap()).unwrap();
        assert!(v2["results"][0]["histogram"].is_string(), "{name}");
        validate(&schema, &v2, name);
    }
}

/// The crosscheck document (`sanbench.crosscheck/1`) written before it had types loads into
/// them, validates against its published schema, and writes back the same JSON.
#[test]
fn crosscheck_documents_load_validate_and_write_back() {
    use sanbench_doc::crosscheck::CrosscheckDoc;
    let schema = published::<CrosscheckDoc>("crosscheck.schema.json");
    let old = fixture("crosscheck.json.gz");
    validate(&schema, &old, "crosscheck.json.gz");
    let doc: CrosscheckDoc = serde_json::from_value(old.clone()).unwrap();
    assert_eq!(doc.schema, sanbench_doc::crosscheck::CROSSCHECK_SCHEMA);
    assert_eq!((doc.sanbench.len(), doc.fio.len()), (2, 2));
    assert!(doc.medians.iops.interval.is_some());
    assert_eq!(serde_json::to_value(&doc).unwrap(), old);
}

#[test]
fn comparisons_validate_against_the_published_schema() {
    let schema = published::<Comparison>("compare.schema.json");
    validate(
        &schema,
        &fixture("compare-results.json.gz"),
        "compare-results.json.gz",
    );
}

/// A version 3 comparison as written (its cells' results patches over their targets'
/// `shared` blocks) validates too: a patch leaves out only what loads as its default.
#[test]
fn version_3_comparisons_validate() {
    let schema = published::<Comparison>("compare.schema.json");
    let mut cmp: Comparison = serde_json::from_value(fixture("compare-results.json.gz")).unwrap();
    cmp.schema = sanbench_doc::COMPARE_SCHEMA.into();
    for c in &mut cmp.cells {
        c.result.histogram = c
            .result
            .latency_histogram()
            .map(sanbench_doc::run::Histogram);
        c.result.histogram_ns.clear();
    }
    let v3: Value = serde_json::from_str(&sanbench_doc::json::to_string(&cmp).unwrap()).unwrap();
    assert!(v3["targets"][0]["shared"]["info"].is_object());
    assert!(v3["cells"][0]["result"].get("info").is_none());
    validate(&schema, &v3, "compare-results.json.gz as version 3");
}

/// The schema says something: a document missing a required field, or with a field of the
/// wrong type, does not validate.
#[test]
fn the_schema_rejects_what_does_not_load() {
    let schema = published::<RunDoc>("run.schema.json");
    let v = jsonschema::validator_for(&schema).unwrap();
    let mut doc = fixture("run-open.json.gz");
    assert!(v.is_valid(&doc));
    doc["results"][0]["iops"] = Value::String("fast".into());
    assert!(!v.is_valid(&doc));
    assert!(serde_json::from_value::<RunDoc>(doc.clone()).is_err());
    let mut doc = fixture("run-open.json.gz");
    doc.as_object_mut().unwrap().remove("results");
    assert!(!v.is_valid(&doc));
    assert!(serde_json::from_value::<RunDoc>(doc).is_err());
}
