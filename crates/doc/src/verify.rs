//! What a verification found: counts per class and the first bad blocks, as they go into the
//! result document (`verify` in every target's result) and the report.

use sanbench_units::fmt::bytes_binary as human;
use serde::{Deserialize, Serialize};

/// Bad blocks kept with their details (the counts cover all of them).
pub const KEEP_BAD: usize = 20;

/// Why a block did not verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The stamp's CRC fails, or the payload differs from what the stamp says was written.
    WrongData,
    /// A valid stamp of this run for another block: the data was written to (or read from)
    /// the wrong place.
    Misplaced,
    /// A valid stamp of this block with an older generation: a lost or stale write.
    Stale,
    /// One I/O returned units of two generations: part of a write landed.
    Torn,
    /// Zeros where this run wrote data.
    NeverWritten,
    /// Another run's stamp, or data not in sanbench's format.
    Foreign,
}

impl Class {
    pub const ALL: [Class; 6] = [
        Class::WrongData,
        Class::Misplaced,
        Class::Stale,
        Class::Torn,
        Class::NeverWritten,
        Class::Foreign,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Class::WrongData => "wrong data",
            Class::Misplaced => "misplaced",
            Class::Stale => "stale or lost write",
            Class::Torn => "torn",
            Class::NeverWritten => "never written",
            Class::Foreign => "foreign",
        }
    }
}

/// A stamp as the report shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StampView {
    pub offset: u64,
    /// Hex, as the run's `run_id`.
    pub run_id: String,
    pub generation: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

/// One block that did not verify.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BadBlock {
    /// Byte offset of the unit on the target.
    pub offset: u64,
    pub class: Class,
    /// What the map says should be there (none when the block's content was not known).
    pub expected: Option<StampView>,
    /// The stamp found there, when it has a valid one.
    pub found: Option<StampView>,
    /// The first 32 bytes of the unit, hex.
    pub excerpt: String,
    /// The read that found it.
    pub io_offset: u64,
    pub io_len: u32,
    /// Whether the inline check of a run's read found it (false: the verification pass).
    pub inline: bool,
}

/// Counts per class.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct Counts {
    pub wrong_data: u64,
    pub misplaced: u64,
    pub stale: u64,
    pub torn: u64,
    pub never_written: u64,
    pub foreign: u64,
}

impl Counts {
    pub fn add(&mut self, c: Class, n: u64) {
        *self.get_mut(c) += n;
    }

    fn get_mut(&mut self, c: Class) -> &mut u64 {
        match c {
            Class::WrongData => &mut self.wrong_data,
            Class::Misplaced => &mut self.misplaced,
            Class::Stale => &mut self.stale,
            Class::Torn => &mut self.torn,
            Class::NeverWritten => &mut self.never_written,
            Class::Foreign => &mut self.foreign,
        }
    }

    pub fn get(&self, c: Class) -> u64 {
        let mut s = *self;
        *s.get_mut(c)
    }

    pub fn total(&self) -> u64 {
        Class::ALL.iter().map(|&c| self.get(c)).sum()
    }

    fn merge(&mut self, o: &Counts) {
        for c in Class::ALL {
            self.add(c, o.get(c));
        }
    }
}

/// A target's verification outcome.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct VerifyReport {
    /// Bytes per stamped unit (each carries its own header).
    pub unit: u32,
    /// Bytes per generation-map cell.
    pub granule: u64,
    /// Memory the generation map takes for this span, and per TiB of span.
    pub map_bytes: u64,
    pub map_bytes_per_tib: u64,
    /// Reads checked and the bytes and units in them.
    pub reads: u64,
    pub bytes: u64,
    pub units: u64,
    /// Units whose content was not known (written before the map was kept): checked only for
    /// consistency (a sanbench stamp must match its own offset and payload).
    pub units_unknown: u64,
    /// Writes whose outcome is unknown (failed or cut off): their blocks accept either
    /// generation.
    pub writes_unconfirmed: u64,
    /// Draws that collided with an in-flight I/O and were redrawn.
    pub redrawn: u64,
    /// Bad units per class, counted every time a read meets one.
    pub bad: Counts,
    /// The first [`KEEP_BAD`] bad blocks.
    pub bad_blocks: Vec<BadBlock>,
}

impl VerifyReport {
    pub fn bad_total(&self) -> u64 {
        self.bad.total()
    }

    /// Counts a bad unit (every time a read meets it) and keeps the first [`KEEP_BAD`]
    /// distinct (offset, class) with their details.
    pub fn record(&mut self, b: BadBlock) {
        self.bad.add(b.class, 1);
        if self.bad_blocks.len() < KEEP_BAD
            && !self
                .bad_blocks
                .iter()
                .any(|k| k.offset == b.offset && k.class == b.class)
        {
            self.bad_blocks.push(b);
        }
    }

    pub fn merge(&mut self, o: &VerifyReport) {
        self.reads += o.reads;
        self.bytes += o.bytes;
        self.units += o.units;
        self.units_unknown += o.units_unknown;
        self.writes_unconfirmed += o.writes_unconfirmed;
        self.redrawn += o.redrawn;
        self.bad.merge(&o.bad);
        for b in &o.bad_blocks {
            let seen = self
                .bad_blocks
                .iter()
                .any(|k| k.offset == b.offset && k.class == b.class);
            if self.bad_blocks.len() < KEEP_BAD && !seen {
                self.bad_blocks.push(b.clone());
            }
        }
        self.bad_blocks.sort_by_key(|b| b.offset);
    }

    /// "verified 1.2 GiB (300,000 reads): no bad block" or the counts per class.
    pub fn summary(&self) -> String {
        let head = format!(
            "verified {} in {} reads ({} units of {} B{})",
            human(self.bytes),
            self.reads,
            self.units,
            self.unit,
            if self.units_unknown > 0 {
                format!(", {} of unknown prior content", self.units_unknown)
            } else {
                String::new()
            }
        );
        if self.reads == 0 {
            return "verification: no read to check in this run (its writes are in the map)".into();
        }
        if self.bad_total() == 0 {
            return format!("{head}: no bad block");
        }
        let classes: Vec<String> = Class::ALL
            .iter()
            .filter(|&&c| self.bad.get(c) > 0)
            .map(|&c| format!("{} {}", self.bad.get(c), c.label()))
            .collect();
        format!(
            "{head}: {} BAD BLOCKS ({})",
            self.bad_total(),
            classes.join(", ")
        )
    }
}
