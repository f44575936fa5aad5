//! Where a trace's offsets land on the replayed target (`--offset-map`).
//!
//! * `none` (the default): offsets as recorded; a trace reaching past the target's span is
//!   refused before the replay starts.
//! * `scale`: the trace's range `[lowest offset, highest end)` stretched or shrunk linearly
//!   onto `[0, span)`: an I/O at a fraction f of the trace's range lands at f of the span
//!   (rounded down to the target's block), so the access pattern's shape (sequential runs,
//!   hot regions, their relative distances) is kept, at another scale.
//! * `modulo`: offsets wrapped around the span (offset mod span, rounded down to the block):
//!   distances within a span's length are kept exactly, and regions a span apart overlap.
//!
//! In both, an I/O that would cross the span's end is moved back so that it ends there
//! (lengths are never changed: a replay moves the bytes the trace moved).

use crate::scan::Summary;

/// How offsets are mapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OffsetMap {
    #[default]
    None,
    Scale,
    Modulo,
}

impl OffsetMap {
    pub fn name(self) -> &'static str {
        match self {
            OffsetMap::None => "none",
            OffsetMap::Scale => "scale",
            OffsetMap::Modulo => "modulo",
        }
    }
}

impl std::str::FromStr for OffsetMap {
    type Err = String;
    fn from_str(s: &str) -> Result<OffsetMap, String> {
        match s {
            "none" => Ok(OffsetMap::None),
            "scale" => Ok(OffsetMap::Scale),
            "modulo" | "mod" => Ok(OffsetMap::Modulo),
            _ => Err(format!("unknown offset map {s:?} (none, scale or modulo)")),
        }
    }
}

/// An offset map fitted to one trace and one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub kind: OffsetMap,
    min: u64,
    extent: u64,
    span: u64,
    block: u64,
}

impl Mapping {
    /// The map of the trace `s` onto a span of `span` bytes of `block`-byte blocks; an error
    /// (a sentence) when the trace cannot be placed there.
    pub fn new(kind: OffsetMap, s: &Summary, span: u64, block: u64) -> Result<Mapping, String> {
        let block = block.max(1);
        if s.max_len as u64 > span {
            return Err(format!(
                "the trace's largest I/O ({} bytes) is larger than the target's span ({span} bytes)",
                s.max_len
            ));
        }
        if kind == OffsetMap::None && s.max_end > span {
            return Err(format!(
                "the trace reaches byte {}, past the target's span of {span} bytes: \
                 replay it with --offset-map scale or modulo, or on a larger target",
                s.max_end
            ));
        }
        Ok(Mapping {
            kind,
            min: s.min_offset,
            extent: s.max_end.saturating_sub(s.min_offset).max(1),
            span,
            block,
        })
    }

    /// Where an I/O of `len` bytes at the trace's `offset` goes.
    #[inline]
    pub fn apply(&self, offset: u64, len: u32) -> u64 {
        let o = match self.kind {
            OffsetMap::None => return offset,
            OffsetMap::Scale => {
                let rel = offset.saturating_sub(self.min) as u128;
                (rel * self.span as u128 / self.extent as u128) as u64
            }
            OffsetMap::Modulo => offset % self.span,
        };
        let o = o / self.block * self.block;
        if o + len as u64 > self.span {
            (self.span - len as u64) / self.block * self.block
        } else {
            o
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TraceOp, TraceRecord};

    fn summary(recs: &[(u64, u32)]) -> Summary {
        let mut s = Summary::default();
        for &(offset, len) in recs {
            s.add(&TraceRecord {
                time_ns: 0,
                op: TraceOp::Read,
                offset,
                len,
            });
        }
        s
    }

    #[test]
    fn none_keeps_offsets_and_refuses_a_trace_past_the_span() {
        let s = summary(&[(0, 4096), (1 << 20, 4096)]);
        let m = Mapping::new(OffsetMap::None, &s, 2 << 20, 512).unwrap();
        assert_eq!(m.apply(1 << 20, 4096), 1 << 20);
        let e = Mapping::new(OffsetMap::None, &s, 1 << 20, 512).unwrap_err();
        assert!(e.contains("--offset-map"), "{e}");
    }

    #[test]
    fn scale_maps_the_trace_range_onto_the_span_proportionally() {
        // A trace over [1 GiB, 2 GiB) onto 100 MiB.
        let g = 1u64 << 30;
        let s = summary(&[(g, 4096), (g + g / 2, 4096), (2 * g - 4096, 4096)]);
        let span = 100 << 20;
        let m = Mapping::new(OffsetMap::Scale, &s, span, 4096).unwrap();
        assert_eq!(m.apply(g, 4096), 0);
        assert_eq!(m.apply(g + g / 2, 4096), span / 2);
        // The last I/O ends at the span's end, and every mapped offset is on a block.
        assert_eq!(m.apply(2 * g - 4096, 4096) + 4096, span);
        for k in 0..1000u64 {
            let o = m.apply(g + k * (g / 1000), 4096);
            assert_eq!(o % 4096, 0);
            assert!(o + 4096 <= span);
        }
        // Order is kept.
        assert!(m.apply(g + 10 * 4096, 4096) <= m.apply(g + 20 * 4096, 4096));
    }

    #[test]
    fn modulo_wraps_and_keeps_short_distances() {
        let s = summary(&[(0, 4096), (10 << 20, 8192)]);
        let m = Mapping::new(OffsetMap::Modulo, &s, 1 << 20, 512).unwrap();
        assert_eq!(m.apply((3 << 20) + 8192, 4096), 8192);
        assert_eq!(
            m.apply((3 << 20) + 20480, 4096) - m.apply((3 << 20) + 8192, 4096),
            12288
        );
        // Crossing the end: moved back to end there.
        assert_eq!(m.apply((1 << 20) - 512, 4096), (1 << 20) - 4096);
    }

    #[test]
    fn an_io_larger_than_the_span_is_refused() {
        let s = summary(&[(0, 1 << 20)]);
        assert!(Mapping::new(OffsetMap::Scale, &s, 4096, 512).is_err());
        assert_eq!("modulo".parse::<OffsetMap>(), Ok(OffsetMap::Modulo));
        assert!("wrap".parse::<OffsetMap>().is_err());
    }
}
