//! What the written data looks like (`data` of a run): unique and incompressible unless asked.

use serde::{Deserialize, Serialize};

/// What the written data looks like. Recorded in every result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct DataSpec {
    /// Share of written units (percent) that are duplicates of one block.
    pub dedupe_pct: f64,
    /// Share of every unit (percent) that compresses away (zeros).
    pub compress_pct: f64,
}

impl DataSpec {
    pub fn validate(&self) -> Result<(), String> {
        for (what, p) in [
            ("--dedupe", self.dedupe_pct),
            ("--compress", self.compress_pct),
        ] {
            if !(0.0..=100.0).contains(&p) || p.is_nan() {
                return Err(format!("{what} {p} is not a percentage between 0 and 100"));
            }
        }
        Ok(())
    }

    /// "unique, incompressible" or "50 % duplicate units, 50 % compressible".
    pub fn describe(&self) -> String {
        if self.dedupe_pct == 0.0 && self.compress_pct == 0.0 {
            return "unique, incompressible (stamped 4 KiB units)".into();
        }
        format!(
            "{} % duplicate units, {} % compressible (stamped 4 KiB units)",
            self.dedupe_pct, self.compress_pct
        )
    }
}
