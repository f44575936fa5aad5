//! The UNMAP parameter list (SBC-4 §5.30.2): an 8-byte header (UNMAP DATA LENGTH, UNMAP BLOCK
//! DESCRIPTOR DATA LENGTH) and 16-byte block descriptors (LBA, NUMBER OF LOGICAL BLOCKS). The
//! initiator encodes it; the target decodes what an initiator sent, which is untrusted.

/// Why a parameter list is refused (the target answers ILLEGAL REQUEST for each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnmapError {
    /// Shorter than its header (PARAMETER LIST LENGTH ERROR).
    Length,
    /// More descriptors than `max_descriptors` (INVALID FIELD IN PARAMETER LIST).
    TooManyDescriptors,
}

/// Encodes the list for `ranges` of (LBA, blocks) into `out` (at least `8 + 16 *
/// ranges.len()` bytes); returns its length. Block counts must fit 32 bits.
pub fn encode(ranges: &[(u64, u64)], out: &mut [u8]) -> usize {
    let n = 8 + 16 * ranges.len();
    out[..n].fill(0);
    out[0..2].copy_from_slice(&((n - 2) as u16).to_be_bytes());
    out[2..4].copy_from_slice(&((n - 8) as u16).to_be_bytes());
    for (i, &(lba, blocks)) in ranges.iter().enumerate() {
        let d = &mut out[8 + 16 * i..24 + 16 * i];
        d[0..8].copy_from_slice(&lba.to_be_bytes());
        d[8..12].copy_from_slice(&(blocks as u32).to_be_bytes());
    }
    n
}

/// Decodes a list of `data` (the Data-Out, as long as the CDB's PARAMETER LIST LENGTH said);
/// an empty list is no descriptors (SBC-4: not an error). Whole descriptors count, within both
/// the header's descriptor data length and the bytes that arrived (a list cut short by the
/// CDB's PARAMETER LIST LENGTH is what SBC-4 says to process).
pub fn decode(data: &[u8], max_descriptors: usize) -> Result<Vec<(u64, u32)>, UnmapError> {
    if data.is_empty() {
        return Ok(Vec::new());
    }
    if data.len() < 8 {
        return Err(UnmapError::Length);
    }
    let dlen = u16::from_be_bytes([data[2], data[3]]) as usize;
    let descs = &data[8..(8 + dlen).min(data.len())];
    if descs.len() / 16 > max_descriptors {
        return Err(UnmapError::TooManyDescriptors);
    }
    Ok(descs
        .chunks_exact(16)
        .map(|d| {
            let mut lba = [0u8; 8];
            lba.copy_from_slice(&d[0..8]);
            (
                u64::from_be_bytes(lba),
                u32::from_be_bytes([d[8], d[9], d[10], d[11]]),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let mut b = [0xffu8; 64];
        let n = encode(&[(1, 2), (0x1_0000_0000, 7)], &mut b);
        assert_eq!(n, 40);
        assert_eq!(&b[0..8], &[0, 38, 0, 32, 0, 0, 0, 0]);
        assert_eq!(&b[8..24], &[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0]);
        assert_eq!(&b[24..36], &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7]);
        assert_eq!(b[40], 0xff, "nothing written past the list");
        assert_eq!(decode(&b[..n], 256), Ok(vec![(1, 2), (0x1_0000_0000, 7)]));
    }

    #[test]
    fn untrusted_lists() {
        let mut b = [0u8; 8 + 16 * 3];
        let n = encode(&[(0, 1), (5, 1), (9, 1)], &mut b);
        assert_eq!(decode(&b[..n], 2), Err(UnmapError::TooManyDescriptors));
        // Cut short: the whole descriptors that arrived.
        assert_eq!(decode(&b[..n - 1], 3), Ok(vec![(0, 1), (5, 1)]));
        assert_eq!(decode(&b[..5], 3), Err(UnmapError::Length));
        assert_eq!(decode(&[], 3), Ok(vec![]));
        // A descriptor length of 20: one whole descriptor.
        let mut c = b;
        c[3] = 20;
        assert_eq!(decode(&c[..28], 3), Ok(vec![(0, 1)]));
    }
}
