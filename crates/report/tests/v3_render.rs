//! A comparison renders the same whichever version of the document it was read from: the
//! version 2 demo written by main at b7cf9e6 (crates/doc/tests/fixtures/v2), and the same
//! document written as version 3 (its targets' shared blocks once, the cells' results patches
//! over them) and loaded back.

use std::io::Read;
use std::path::Path;

use sanbench_doc::{Comparison, COMPARE_SCHEMA};
use sanbench_report::{exporter, Options, Report};

fn v2_demo() -> Comparison {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../doc/tests/fixtures/v2/compare-demo.json.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn render(cmp: &Comparison, format: &str) -> String {
    let report = Report::new(cmp, &Options::default());
    String::from_utf8(exporter(format).unwrap().render(&report).unwrap()).unwrap()
}

#[test]
fn version_3_renders_as_version_2_did() {
    let v2 = v2_demo();
    assert_eq!(v2.schema, "sanbench.compare/2");
    let mut v3 = v2.clone();
    v3.schema = COMPARE_SCHEMA.into();
    let text = sanbench_doc::json::to_string(&v3).unwrap();
    let raw: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(raw["targets"][0]["shared"]["info"].is_object());
    let v3: Comparison = serde_json::from_str(&text).unwrap();
    assert_eq!(v3.cells.len(), v2.cells.len());
    for (a, b) in v2.cells.iter().zip(&v3.cells) {
        assert_eq!(a.result.info, b.result.info);
        assert!(b.result.info.is_some());
    }
    for format in ["markdown", "csv", "html"] {
        let (a, b) = (render(&v2, format), render(&v3, format));
        // The HTML's footer names the version it was read from.
        let b = b.replace(COMPARE_SCHEMA, "sanbench.compare/2");
        if a != b {
            let line = a.lines().zip(b.lines()).position(|(x, y)| x != y);
            let at = line.unwrap_or(0);
            panic!(
                "{format} differs at line {}:\nv2: {:?}\nv3: {:?}",
                at + 1,
                a.lines().nth(at).map(|l| &l[..l.len().min(300)]),
                b.lines().nth(at).map(|l| &l[..l.len().min(300)])
            );
        }
    }
}
