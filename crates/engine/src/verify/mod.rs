//! Data integrity verification: every written unit stamped, every read checked, every fault
//! named (issue 12).
//!
//! * [`map`]: the generation map (one byte per granule), which also keeps in-flight I/Os of a
//!   run from overlapping;
//! * [`check`]: a read's units against the map, classified ([`report::Class`]); `fast.rs`: the
//!   same check while a fused engine copies the read (the common case in one pass, anything
//!   else handed to the full check);
//! * [`report`]: counts per class and the first bad blocks, as the result carries them;
//! * [`pass`]: reading a whole span back (`sanbench verify`);
//! * `trimmed.rs`: a read over trimmed or zeroed granules (zeros, or zeros or the old data,
//!   as the map's discard state says).
//!
//! The data format is the one every write uses ([`crate::stamp`]): a verified run stamps units
//! of [`Verifier::unit`] bytes (512 B or the target's logical block) instead of 4 KiB, with the
//! block's generation in the stamp and in the payload's key.

pub mod check;
mod fast;
pub mod map;
pub mod pass;
pub mod report;
pub mod state;
mod trimmed;

pub use check::{Checker, Strict};
pub use map::GenMap;
pub use report::{BadBlock, Class, Counts, VerifyReport};

use crate::spec::Workload;

/// One target's verification state, shared by every stream that drives it and kept across the
/// cells of a comparison.
pub struct Verifier {
    pub run_id: u64,
    /// Bytes per stamped unit.
    pub unit: u32,
    pub span: u64,
    pub map: GenMap,
    /// Continues a session kept in a state file (its map already knows the span).
    pub resumed: bool,
}

impl Verifier {
    pub fn new(run_id: u64, unit: u32, granule: u64, span: u64) -> Verifier {
        Verifier {
            run_id,
            unit,
            span,
            map: GenMap::new(span, granule.max(unit as u64)),
            resumed: false,
        }
    }

    /// A verifier whose map lives in the state file at `path`: a new session (the file is
    /// created) or, when the file exists for the same target geometry, the session it holds
    /// (its run id and generations; `resumed` is then true).
    pub fn with_state(
        path: &std::path::Path,
        run_id: u64,
        unit: u32,
        granule: u64,
        span: u64,
    ) -> Result<(Verifier, bool), crate::EngineError> {
        let granule = granule.max(unit as u64);
        let want = state::Geometry {
            run_id,
            unit,
            granule,
            span,
            cells: span.div_ceil(granule),
        };
        let (g, create) = match state::read_geometry(path)? {
            None => (want, true),
            Some(g) if (g.unit, g.granule, g.span) == (unit, granule, span) => (g, false),
            Some(g) => {
                return Err(crate::EngineError::Invalid(format!(
                    "--verify-state {}: kept for a span of {} B in {} B granules of {} B units, \
                     not this run's {span} B, {granule} B, {unit} B (another file, or remove it \
                     to start over)",
                    path.display(),
                    g.span,
                    g.granule,
                    g.unit
                )))
            }
        };
        let (mapping, cur, dur) = state::map(path, g, create)?;
        Ok((
            Verifier {
                run_id: g.run_id,
                unit,
                span,
                map: GenMap::mapped(granule, mapping, cur, dur),
                resumed: !create,
            },
            !create,
        ))
    }

    /// The session a state file holds, for `sanbench verify --verify-state`.
    pub fn open_state(path: &std::path::Path) -> Result<Verifier, crate::EngineError> {
        let g = state::read_geometry(path)?.ok_or_else(|| {
            crate::EngineError::Invalid(format!("--verify-state {}: no such file", path.display()))
        })?;
        let (mapping, cur, dur) = state::map(path, g, false)?;
        Ok(Verifier {
            run_id: g.run_id,
            unit: g.unit,
            span: g.span,
            map: GenMap::mapped(g.granule, mapping, cur, dur),
            resumed: true,
        })
    }

    pub fn granule(&self) -> u64 {
        self.map.granule()
    }

    /// An empty report with this verifier's geometry filled in.
    pub fn report(&self) -> VerifyReport {
        let g = self.granule();
        VerifyReport {
            unit: self.unit,
            granule: g,
            map_bytes: self.map.len() as u64,
            map_bytes_per_tib: (1u64 << 40) / g,
            ..VerifyReport::default()
        }
    }

    pub fn checker(&self, inline: bool) -> Checker {
        Checker::new(self.run_id, self.unit, self.granule(), Strict::No, inline)
    }
}

/// The stamped unit for a target of logical block `block`: 512 B, or the block when larger.
pub fn unit_for(block: u32) -> u32 {
    block.max(512)
}

/// The largest power-of-two granule (at least `unit`, at most 64 KiB) that every offset and
/// length of the workloads is a multiple of, so that no I/O covers part of a granule.
pub fn granule_for<'a>(unit: u32, workloads: impl IntoIterator<Item = &'a Workload>) -> u64 {
    let mut g: u64 = 64 << 10;
    for w in workloads {
        for s in &w.segments {
            for v in [s.read_bs, s.write_bs, s.align.unwrap_or(s.read_bs)] {
                if v > 0 {
                    g = g.min(1 << v.trailing_zeros());
                }
            }
        }
    }
    g.max(unit as u64)
}

/// Why a workload cannot be verified on a target of logical block `block`, if it cannot.
pub fn unverifiable(w: &Workload, unit: u32, dedupe_pct: f64) -> Option<String> {
    if dedupe_pct > 0.0 {
        return Some(
            "--verify cannot check --dedupe data (duplicate units carry no stamp); drop one".into(),
        );
    }
    for s in &w.segments {
        for (what, v) in [
            ("read size", s.read_bs),
            ("write size", s.write_bs),
            ("alignment", s.align.unwrap_or(s.read_bs)),
        ] {
            if v > 0 && v % unit as u64 != 0 {
                return Some(format!(
                    "--verify needs every I/O on whole {unit}-byte units; the {what} {v} is not a multiple"
                ));
            }
        }
    }
    None
}
