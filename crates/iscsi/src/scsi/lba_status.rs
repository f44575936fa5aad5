//! GET LBA STATUS parameter data (SBC-4 5.7.2, "LBA status descriptor"): which blocks of a
//! thin-provisioned LUN are mapped, deallocated or anchored. Bytes in, values out.
//!
//! ```text
//! 0..4   PARAMETER DATA LENGTH (bytes after this field)
//! 4..8   reserved
//! 8..    descriptors of 16 bytes: LBA(64) NUMBER OF LOGICAL BLOCKS(32) PROVISIONING STATUS(4 bits)
//!        ADDITIONAL STATUS(8) reserved(16)
//! ```

use thiserror::Error;

/// PROVISIONING STATUS values.
pub mod status {
    pub const MAPPED: u8 = 0;
    pub const DEALLOCATED: u8 = 1;
    pub const ANCHORED: u8 = 2;
}

const HEADER: usize = 8;
const DESCRIPTOR: usize = 16;

/// One LBA status descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LbaStatusDescriptor {
    pub lba: u64,
    pub blocks: u32,
    /// [`status`]: 0 mapped (or unknown), 1 deallocated, 2 anchored.
    pub provisioning: u8,
}

impl LbaStatusDescriptor {
    /// True for blocks that were never written or were unmapped (deallocated or anchored): they
    /// read without touching the medium.
    pub fn unwritten(&self) -> bool {
        matches!(self.provisioning, status::DEALLOCATED | status::ANCHORED)
    }
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum LbaStatusError {
    #[error("GET LBA STATUS data of {0} bytes is shorter than its header")]
    Short(usize),
    #[error("GET LBA STATUS descriptor {0} covers no blocks")]
    EmptyDescriptor(usize),
}

/// Encodes parameter data for `descriptors` (a target's answer).
pub fn encode(descriptors: &[LbaStatusDescriptor], out: &mut Vec<u8>) {
    let len = (HEADER - 4 + DESCRIPTOR * descriptors.len()) as u32;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    for d in descriptors {
        out.extend_from_slice(&d.lba.to_be_bytes());
        out.extend_from_slice(&d.blocks.to_be_bytes());
        out.extend_from_slice(&[d.provisioning & 0x0f, 0, 0, 0]);
    }
}

/// Decodes the descriptors present in `data` (the Data-In the target sent, which the allocation
/// length may have cut short of what PARAMETER DATA LENGTH announces: only whole descriptors
/// count).
pub fn decode(data: &[u8]) -> Result<Vec<LbaStatusDescriptor>, LbaStatusError> {
    if data.len() < HEADER {
        return Err(LbaStatusError::Short(data.len()));
    }
    let announced = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
    let end = data.len().min(announced.saturating_add(4));
    let body = data.get(HEADER..end).unwrap_or(&[]);
    body.chunks_exact(DESCRIPTOR)
        .enumerate()
        .map(|(i, d)| {
            let mut lba = [0u8; 8];
            lba.copy_from_slice(&d[..8]);
            let blocks = u32::from_be_bytes([d[8], d[9], d[10], d[11]]);
            if blocks == 0 {
                return Err(LbaStatusError::EmptyDescriptor(i));
            }
            Ok(LbaStatusDescriptor {
                lba: u64::from_be_bytes(lba),
                blocks,
                provisioning: d[12] & 0x0f,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_and_cut_short_data() {
        let ds = [
            LbaStatusDescriptor {
                lba: 0,
                blocks: 128,
                provisioning: status::MAPPED,
            },
            LbaStatusDescriptor {
                lba: 128,
                blocks: 1 << 20,
                provisioning: status::DEALLOCATED,
            },
        ];
        let mut b = Vec::new();
        encode(&ds, &mut b);
        assert_eq!(b.len(), 8 + 32);
        assert_eq!(&b[..4], &[0, 0, 0, 36]);
        assert_eq!(b[8 + 16 + 12], 1);
        assert_eq!(decode(&b).unwrap(), ds);
        // Cut by the allocation length: whole descriptors only.
        assert_eq!(decode(&b[..8 + 20]).unwrap(), ds[..1]);
        assert_eq!(decode(&b[..8]).unwrap(), []);
        assert_eq!(decode(&b[..7]), Err(LbaStatusError::Short(7)));
        assert!(ds[1].unwritten() && !ds[0].unwritten());
        let anchored = LbaStatusDescriptor {
            provisioning: status::ANCHORED,
            ..ds[0]
        };
        assert!(anchored.unwritten());
    }

    proptest! {
        #[test]
        fn round_trip(ds in prop::collection::vec((any::<u64>(), 1u32.., 0u8..16), 0..40)) {
            let ds: Vec<LbaStatusDescriptor> = ds
                .into_iter()
                .map(|(lba, blocks, provisioning)| LbaStatusDescriptor { lba, blocks, provisioning })
                .collect();
            let mut b = Vec::new();
            encode(&ds, &mut b);
            prop_assert_eq!(decode(&b).unwrap(), ds);
        }

        #[test]
        fn never_panics(b in prop::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(ds) = decode(&b) {
                prop_assert!(ds.len() * 16 + 8 <= b.len());
                prop_assert!(ds.iter().all(|d| d.blocks > 0));
            }
        }
    }
}
