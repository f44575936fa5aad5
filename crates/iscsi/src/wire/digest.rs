//! CRC32C digests and padding (RFC 7143 §11.2.2, §13.1, Appendix B.4).
//!
//! Digests are CRC32C (Castagnoli), hardware accelerated by the `crc32c` crate, and go on the
//! wire least significant byte first. The data digest covers the data segment *and* its padding.

/// CRC32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// CRC32C of `data` followed by zero padding up to a multiple of 4, as the data digest requires.
pub fn data_digest(data: &[u8]) -> u32 {
    let pad = pad_len(data.len());
    let c = crc32c::crc32c(data);
    if pad == 0 {
        c
    } else {
        crc32c::crc32c_append(c, &[0u8; 3][..pad])
    }
}

/// Number of zero bytes needed after `len` bytes to reach a 4-byte boundary.
pub fn pad_len(len: usize) -> usize {
    (4 - (len & 3)) & 3
}

/// Reads a digest as it is stored on the wire (little-endian).
pub fn read_digest(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        // RFC 3720 Appendix B.4: 32 bytes of zeros -> aa 36 91 8a (as transmitted).
        assert_eq!(crc32c(&[0u8; 32]).to_le_bytes(), [0xaa, 0x36, 0x91, 0x8a]);
        assert_eq!(
            crc32c(&[0xffu8; 32]).to_le_bytes(),
            [0x43, 0xab, 0xa8, 0x62]
        );
        let inc: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&inc).to_le_bytes(), [0x4e, 0x79, 0xdd, 0x46]);
    }

    #[test]
    fn digest_covers_padding() {
        assert_eq!(data_digest(b"abcde"), crc32c(b"abcde\0\0\0"));
        assert_eq!(pad_len(0), 0);
        assert_eq!(pad_len(5), 3);
        assert_eq!(pad_len(8), 0);
    }
}
