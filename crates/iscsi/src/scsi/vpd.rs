//! The two VPD pages that say how a LUN discards (SBC-4 §6.6.4 Block Limits, §6.6.6 Logical
//! Block Provisioning), decoded from a target's Data-In. The bytes are the target's: a page
//! shorter than a field leaves that field at "not reported", never a panic.

/// Block Limits (page B0h), the fields an initiator needs to size its commands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockLimits {
    /// MAXIMUM TRANSFER LENGTH in blocks (0: not reported).
    pub max_transfer: u32,
    /// OPTIMAL TRANSFER LENGTH in blocks.
    pub optimal_transfer: u32,
    /// MAXIMUM UNMAP LBA COUNT: blocks one UNMAP command may name in all (0: UNMAP not
    /// supported; 0xFFFF_FFFF: no limit).
    pub max_unmap_lbas: u32,
    /// MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT (0: UNMAP not supported; 0xFFFF_FFFF: no limit).
    pub max_unmap_descriptors: u32,
    /// OPTIMAL UNMAP GRANULARITY in blocks (0: not reported).
    pub unmap_granularity: u32,
    /// UNMAP GRANULARITY ALIGNMENT when UGAVALID is set.
    pub unmap_alignment: Option<u32>,
    /// MAXIMUM WRITE SAME LENGTH in blocks (0: not reported).
    pub max_write_same: u64,
}

fn be32(p: &[u8], o: usize) -> u32 {
    p.get(o..o + 4)
        .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The page's body (after its 4-byte header) as long as both the header and the bytes say,
/// when it is page `code`.
fn body(page: &[u8], code: u8) -> Option<&[u8]> {
    if page.len() < 4 || page[1] != code {
        return None;
    }
    let n = u16::from_be_bytes([page[2], page[3]]) as usize;
    Some(&page[..(4 + n).min(page.len())])
}

impl BlockLimits {
    /// Decodes page B0h; `None` when `page` is not one.
    pub fn decode(page: &[u8]) -> Option<BlockLimits> {
        let p = body(page, 0xb0)?;
        let align = be32(p, 32);
        let ws = p
            .get(36..44)
            .map_or(0, |b| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])));
        Some(BlockLimits {
            max_transfer: be32(p, 8),
            optimal_transfer: be32(p, 12),
            max_unmap_lbas: be32(p, 20),
            max_unmap_descriptors: be32(p, 24),
            unmap_granularity: be32(p, 28),
            unmap_alignment: (align & 0x8000_0000 != 0).then_some(align & 0x7fff_ffff),
            max_write_same: ws,
        })
    }
}

/// Logical Block Provisioning (page B2h).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Provisioning {
    /// LBPU: UNMAP is supported.
    pub unmap: bool,
    /// LBPWS: WRITE SAME(16) with the UNMAP bit is supported.
    pub write_same_unmap: bool,
    /// LBPRZ (3 bits): non-zero means an unmapped block reads back as zeros (1) or as the
    /// provisioning initialization pattern, which SBC-4 also requires to be zeros (2).
    pub lbprz: u8,
    /// PROVISIONING TYPE: 0 full, 1 resource, 2 thin.
    pub kind: u8,
}

impl Provisioning {
    /// Decodes page B2h; `None` when `page` is not one or is too short to say anything.
    pub fn decode(page: &[u8]) -> Option<Provisioning> {
        let p = body(page, 0xb2)?;
        let b5 = *p.get(5)?;
        Some(Provisioning {
            unmap: b5 & 0x80 != 0,
            write_same_unmap: b5 & 0x40 != 0,
            lbprz: b5 >> 2 & 7,
            kind: p.get(6).map_or(0, |b| b & 7),
        })
    }
}

/// Descriptors for blocks `lba..lba + blocks` trimmed to whole granules of `granularity`
/// blocks starting at `alignment` (SBC-4 §4.7.3.5: a device server may ignore the part of a
/// descriptor that is not a whole granule). `None` when no whole granule is inside.
pub fn granular(lba: u64, blocks: u64, granularity: u32, alignment: u32) -> Option<(u64, u64)> {
    let g = u64::from(granularity.max(1));
    if g == 1 {
        return (blocks > 0).then_some((lba, blocks));
    }
    let a = u64::from(alignment) % g;
    let end = lba.checked_add(blocks)?;
    // First granule boundary at or after lba, last at or before end.
    let up = |x: u64| match x.checked_sub(a) {
        Some(y) => y.div_ceil(g).checked_mul(g)?.checked_add(a),
        None => Some(a),
    };
    let down = |x: u64| x.checked_sub(a).map(|y| y / g * g + a);
    let s = up(lba)?;
    let e = down(end)?;
    (e > s).then(|| (s, e - s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b0() -> Vec<u8> {
        let mut p = vec![0u8; 64];
        p[1] = 0xb0;
        p[3] = 0x3c;
        p[8..12].copy_from_slice(&1024u32.to_be_bytes());
        p[20..24].copy_from_slice(&4096u32.to_be_bytes());
        p[24..28].copy_from_slice(&16u32.to_be_bytes());
        p[28..32].copy_from_slice(&8u32.to_be_bytes());
        p[32..36].copy_from_slice(&(0x8000_0000u32 | 2).to_be_bytes());
        p[36..44].copy_from_slice(&65536u64.to_be_bytes());
        p
    }

    #[test]
    fn block_limits_fields_at_their_sbc4_offsets() {
        let l = BlockLimits::decode(&b0()).unwrap();
        assert_eq!(
            l,
            BlockLimits {
                max_transfer: 1024,
                optimal_transfer: 0,
                max_unmap_lbas: 4096,
                max_unmap_descriptors: 16,
                unmap_granularity: 8,
                unmap_alignment: Some(2),
                max_write_same: 65536,
            }
        );
        // A short (SPC-3 era) page: the unmap fields are absent, so zero (not supported).
        let mut short = b0();
        short[3] = 12;
        let l = BlockLimits::decode(&short).unwrap();
        assert_eq!(
            (l.max_transfer, l.max_unmap_lbas, l.unmap_alignment),
            (1024, 0, None)
        );
        // The header may claim more than arrived.
        assert_eq!(BlockLimits::decode(&b0()[..22]).unwrap().max_unmap_lbas, 0);
        assert_eq!(BlockLimits::decode(&[0, 0xb2, 0, 0]), None);
        assert_eq!(BlockLimits::decode(&[0, 0xb0]), None);
    }

    #[test]
    fn provisioning_bits() {
        let p = Provisioning::decode(&[0, 0xb2, 0, 4, 0, 0x80 | 0x40 | 0x04, 2, 0]).unwrap();
        assert_eq!(
            p,
            Provisioning {
                unmap: true,
                write_same_unmap: true,
                lbprz: 1,
                kind: 2
            }
        );
        let p = Provisioning::decode(&[0, 0xb2, 0, 4, 0, 0x40, 0, 0]).unwrap();
        assert!(!p.unmap && p.write_same_unmap && p.lbprz == 0);
        assert_eq!(Provisioning::decode(&[0, 0xb2, 0, 1, 0]), None);
    }

    #[test]
    fn granules_inside_a_range() {
        assert_eq!(granular(3, 5, 1, 0), Some((3, 5)));
        assert_eq!(granular(0, 16, 8, 0), Some((0, 16)));
        assert_eq!(granular(1, 16, 8, 0), Some((8, 8)));
        assert_eq!(granular(1, 6, 8, 0), None);
        // Granules start at 2, 10, 18...
        assert_eq!(granular(0, 20, 8, 2), Some((2, 16)));
        assert_eq!(granular(0, 5, 8, 2), None);
        assert_eq!(granular(u64::MAX - 3, 3, 8, 0), None);
    }
}
