//! How the engine's trims and write-zeroes become SCSI commands (SBC-4 §5.30 UNMAP, §5.49
//! WRITE SAME(16)), within what the LUN said at open: the Block Limits page (B0h) bounds an
//! UNMAP's blocks and descriptors and a WRITE SAME's length, the Logical Block Provisioning page
//! (B2h) says which of UNMAP (LBPU) and WRITE SAME with UNMAP (LBPWS) it takes and whether an
//! unmapped block reads back zeros (LBPRZ).
//!
//! Trims that one submit hands over together go out as one UNMAP with a descriptor each (up to
//! the descriptor and LBA-count limits): the first I/O's task carries the command, the others
//! follow it and complete with it. A trim larger than one command allows is sent as a chain of
//! commands on its task, each issued when the one before completes. Write-zeroes are WRITE
//! SAME(16) of one zero block without the UNMAP bit, chained the same way beyond the LUN's
//! MAXIMUM WRITE SAME LENGTH.

use sanbench_io::{Op, TargetInfo};
use serde_json::Value;

use crate::scsi::vpd::{granular, BlockLimits, Provisioning};

/// Which command carries a trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TrimBy {
    Unmap,
    WriteSameUnmap,
}

/// What the LUN offers for discarding and zeroing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Discard {
    pub trim: Option<TrimBy>,
    pub zeroes: bool,
    pub limits: BlockLimits,
    /// LBPRZ: a block the LUN unmapped reads back as zeros.
    pub lbprz: bool,
}

/// Descriptors one UNMAP carries at most, whatever the LUN allows: 256 (4 KiB of parameter
/// data per task) is where fio's multi-range UNMAP (PR #590) took its gain.
pub(crate) const MAX_DESCRIPTORS: usize = 256;

impl Discard {
    /// From READ CAPACITY(16)'s LBPME and the two VPD pages (`None`: not returned). UNMAP
    /// needs LBPU and non-zero UNMAP limits; WRITE SAME with UNMAP needs LBPWS; both need
    /// LBPME (SBC-4 §4.7.3.1: no unmapping on a fully provisioned LUN). Zeroing by WRITE
    /// SAME(16) is offered when the LUN reports a WRITE SAME limit or takes WRITE SAME for
    /// unmapping.
    pub fn new(lbpme: bool, b0: Option<BlockLimits>, b2: Option<Provisioning>) -> Discard {
        let limits = b0.unwrap_or_default();
        let prov = b2.unwrap_or_default();
        let trim = if !lbpme {
            None
        } else if prov.unmap && limits.max_unmap_lbas > 0 && limits.max_unmap_descriptors > 0 {
            Some(TrimBy::Unmap)
        } else if prov.write_same_unmap {
            Some(TrimBy::WriteSameUnmap)
        } else {
            None
        };
        Discard {
            trim,
            zeroes: limits.max_write_same > 0 || prov.write_same_unmap,
            limits,
            lbprz: lbpme && prov.lbprz != 0,
        }
    }

    pub fn supports(&self, op: Op) -> bool {
        match op {
            Op::Trim => self.trim.is_some(),
            Op::WriteZeroes => self.zeroes,
            _ => true,
        }
    }

    /// Blocks one UNMAP may name in all.
    pub fn unmap_lbas(&self) -> u64 {
        u64::from(self.limits.max_unmap_lbas.max(1))
    }

    /// Descriptors per UNMAP for a queue of `depth`.
    pub fn descriptors(&self, depth: usize) -> usize {
        (self.limits.max_unmap_descriptors as usize)
            .clamp(1, MAX_DESCRIPTORS)
            .min(depth.max(1))
    }

    /// Blocks one WRITE SAME may cover (0 in the page: no limit reported; the CDB's field
    /// is 32 bits and 0 there would mean "to the end").
    pub fn write_same_blocks(&self) -> u64 {
        match self.limits.max_write_same {
            0 => u64::from(u32::MAX),
            n => n.min(u64::from(u32::MAX)),
        }
    }

    /// The blocks of a trim of `lba..lba + blocks` that go out: whole unmap granules only.
    pub fn granules(&self, lba: u64, blocks: u64) -> Option<(u64, u64)> {
        let l = &self.limits;
        granular(
            lba,
            blocks,
            l.unmap_granularity,
            l.unmap_alignment.unwrap_or(0),
        )
    }

    /// A trimmed range reads back zeros: LBPRZ and no granule left out.
    pub fn trim_reads_zeros(&self) -> bool {
        self.lbprz && self.trim.is_some() && self.limits.unmap_granularity <= 1
    }

    /// The figures a result records under `TargetInfo::params`.
    pub fn record(&self, info: &mut TargetInfo) {
        let l = &self.limits;
        let mut put = |k: &str, v: Value| {
            info.params.insert(k.into(), v);
        };
        put(
            "trim_by",
            match self.trim {
                Some(TrimBy::Unmap) => "UNMAP",
                Some(TrimBy::WriteSameUnmap) => "WRITE SAME(16) UNMAP",
                None => "none",
            }
            .into(),
        );
        put(
            "write_zeroes_by",
            if self.zeroes {
                "WRITE SAME(16)"
            } else {
                "none"
            }
            .into(),
        );
        put("lbprz", self.lbprz.into());
        put(
            sanbench_io::params::TRIM_READS_ZEROS,
            self.trim_reads_zeros().into(),
        );
        put("block_limits.max_unmap_lba_count", l.max_unmap_lbas.into());
        put(
            "block_limits.max_unmap_descriptors",
            l.max_unmap_descriptors.into(),
        );
        put("block_limits.unmap_granularity", l.unmap_granularity.into());
        if let Some(a) = l.unmap_alignment {
            put("block_limits.unmap_alignment", a.into());
        }
        put(
            "block_limits.max_write_same_blocks",
            l.max_write_same.into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(lbas: u32, descs: u32, ws: u64) -> BlockLimits {
        BlockLimits {
            max_unmap_lbas: lbas,
            max_unmap_descriptors: descs,
            max_write_same: ws,
            ..BlockLimits::default()
        }
    }

    fn prov(unmap: bool, ws: bool, lbprz: u8) -> Provisioning {
        Provisioning {
            unmap,
            write_same_unmap: ws,
            lbprz,
            kind: 2,
        }
    }

    #[test]
    fn the_pages_choose_the_command() {
        let d = Discard::new(
            true,
            Some(limits(1 << 20, 256, 0)),
            Some(prov(true, true, 1)),
        );
        assert_eq!(d.trim, Some(TrimBy::Unmap));
        assert!(d.zeroes && d.lbprz && d.trim_reads_zeros());
        // LBPU without UNMAP limits: WRITE SAME with UNMAP.
        let d = Discard::new(true, Some(limits(0, 0, 0)), Some(prov(true, true, 0)));
        assert_eq!(d.trim, Some(TrimBy::WriteSameUnmap));
        assert!(!d.trim_reads_zeros());
        // Not thin provisioned: no trims, whatever the pages say.
        let d = Discard::new(false, Some(limits(8, 8, 8)), Some(prov(true, true, 1)));
        assert_eq!(d.trim, None);
        assert!(!d.lbprz && d.zeroes);
        // No pages at all (an SPC-3 target): nothing.
        let d = Discard::new(true, None, None);
        assert!(!d.supports(Op::Trim) && !d.supports(Op::WriteZeroes));
        assert!(d.supports(Op::Read));
    }

    #[test]
    fn limits_bound_the_commands() {
        let d = Discard::new(true, Some(limits(4096, 16, 0)), Some(prov(true, false, 0)));
        assert_eq!(d.unmap_lbas(), 4096);
        assert_eq!(d.descriptors(32), 16);
        assert_eq!(d.descriptors(4), 4);
        assert_eq!(d.write_same_blocks(), u32::MAX as u64);
        let d = Discard::new(true, Some(limits(1, u32::MAX, 1 << 40)), None);
        assert_eq!(d.descriptors(4096), MAX_DESCRIPTORS);
        assert_eq!(d.write_same_blocks(), u32::MAX as u64);
    }
}
