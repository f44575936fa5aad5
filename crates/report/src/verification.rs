//! The data verification section: per target, every cell's `verify` block merged (reads
//! checked, bad units per class, the first bad blocks), for comparisons run with `--verify`.
//! A target that returned wrong data also gets a caveat: its speed is not a figure to publish.

use sanbench_doc::verify::{BadBlock, Class, VerifyReport};
use sanbench_doc::Comparison;

/// One target's verification over the whole comparison.
#[derive(Clone, Debug)]
pub struct TargetVerification {
    pub target: String,
    pub report: VerifyReport,
}

impl TargetVerification {
    /// The summary row's cells as text: target, bytes verified, reads, units, bad units
    /// (each exporter escapes and marks them up in its own way).
    pub fn cells(&self) -> [String; 5] {
        let v = &self.report;
        let bad = if v.bad_total() == 0 {
            "none".to_string()
        } else {
            classes(v)
        };
        [
            self.target.clone(),
            format!("{:.1} MiB", v.bytes as f64 / (1u64 << 20) as f64),
            v.reads.to_string(),
            v.units.to_string(),
            bad,
        ]
    }
}

/// What a bad block should have held and what was found there, as text.
pub fn expected_found(b: &BadBlock) -> (String, String) {
    let expected = b
        .expected
        .as_ref()
        .map_or("unknown".into(), |e| format!("gen {}", e.generation));
    let found = b.found.as_ref().map_or("no valid stamp".into(), |f| {
        format!(
            "offset {:#x} gen {} run {}",
            f.offset, f.generation, f.run_id
        )
    });
    (expected, found)
}

/// Every verified target, in the comparison's order (empty when nothing was verified).
pub fn verification(cmp: &Comparison) -> Vec<TargetVerification> {
    let mut out: Vec<TargetVerification> = Vec::new();
    for t in &cmp.targets {
        let mut acc: Option<VerifyReport> = None;
        for c in cmp.cells.iter().filter(|c| c.target == t.name) {
            if let Some(v) = &c.result.verify {
                match acc.as_mut() {
                    None => acc = Some(v.clone()),
                    Some(a) => a.merge(v),
                }
            }
        }
        if let Some(report) = acc {
            out.push(TargetVerification {
                target: t.name.clone(),
                report,
            });
        }
    }
    out
}

/// Caveats for targets whose data did not verify.
pub fn caveats(v: &[TargetVerification]) -> Vec<String> {
    v.iter()
        .filter(|t| t.report.bad_total() > 0)
        .map(|t| {
            format!(
                "{} returned data that did not verify ({}): its figures describe a target that \
                 loses or corrupts data",
                t.target,
                classes(&t.report)
            )
        })
        .collect()
}

/// "3 stale or lost write, 1 torn".
pub fn classes(r: &VerifyReport) -> String {
    Class::ALL
        .iter()
        .filter(|&&c| r.bad.get(c) > 0)
        .map(|&c| format!("{} {}", r.bad.get(c), c.label()))
        .collect::<Vec<_>>()
        .join(", ")
}
