//! results.json: the comparison document itself plus `questions` (every question's ratio,
//! interval and verdict), `design`, a `findings` array and, where a block device ran beside its
//! passthrough device, `block_layer` (what the block layer cost), so one file carries the raw figures
//! and the conclusions drawn from them.

use super::Exporter;
use crate::{Report, ReportError};

pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn file_name(&self) -> &'static str {
        "results.json"
    }

    fn render(&self, r: &Report) -> Result<Vec<u8>, ReportError> {
        let mut v = serde_json::to_value(r.cmp)?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("findings".into(), serde_json::to_value(&r.findings)?);
            obj.insert("min_rel".into(), serde_json::json!(r.design.min_effect));
            if r.cmp.design.is_none() {
                // Older documents: the design they are judged by, under its own key so the
                // document part still reads back as it was.
                obj.insert("design_assumed".into(), serde_json::to_value(&r.design)?);
            }
            obj.insert(
                "questions".into(),
                serde_json::to_value(&r.judgement.questions)?,
            );
            if !r.block_layer.is_empty() {
                obj.insert("block_layer".into(), serde_json::to_value(&r.block_layer)?);
            }
            obj.insert(
                "findings_withheld".into(),
                serde_json::json!(r.withheld.as_deref()),
            );
        }
        let mut out = sanbench_doc::json::to_string(&v)?.into_bytes();
        out.push(b'\n');
        Ok(out)
    }
}
