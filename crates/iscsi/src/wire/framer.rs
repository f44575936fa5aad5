//! PDU framing (RFC 7143 §11.2): header, optional AHS, header digest, data segment, padding,
//! data digest. [`parse_pdu`] is the receive side, [`encode_pdu`]/[`encode_pdu_with`]/
//! [`encode_pdu_append`] the send side ([`encode_pdu_head`] alone for a data segment sent
//! from elsewhere). Neither does I/O: the caller owns the buffers.

use super::bhs::{raw_ahs_len, raw_data_len, raw_opcode, Bhs, BHS_LEN};
use super::digest::{crc32c, data_digest, pad_len, read_digest};
use super::layout::BasicHeader;
use super::{be16, be32, WireError};
use zerocopy::IntoBytes;

/// What the framer needs to know from the negotiation. Before login completes both digests
/// are off and the limit is 8192 (§13.12 default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameConfig {
    pub header_digest: bool,
    pub data_digest: bool,
    /// The largest data segment this side accepts (our declared MaxRecvDataSegmentLength).
    pub max_recv_data_segment_length: u32,
}

impl Default for FrameConfig {
    fn default() -> Self {
        FrameConfig {
            header_digest: false,
            data_digest: false,
            max_recv_data_segment_length: 8192,
        }
    }
}

/// Result of a framing attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    /// `needed` more bytes must be appended to the buffer before the PDU is complete.
    Incomplete { needed: usize },
    /// A whole PDU, which used the first `consumed` bytes of the buffer.
    Complete { pdu: T, consumed: usize },
}

/// A framed PDU borrowed from the receive buffer. The header is not yet typed: call
/// [`Bhs::decode`] on `header` (it is cheap) or read raw fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PduRef<'a> {
    pub header: &'a [u8; BHS_LEN],
    pub ahs: &'a [u8],
    pub data: &'a [u8],
}

impl PduRef<'_> {
    pub fn decode(&self) -> Result<Bhs, WireError> {
        Bhs::decode(self.header)
    }
}

/// Total on-wire length of the PDU whose header is `h` under `cfg`.
pub fn pdu_len(h: &[u8], cfg: &FrameConfig) -> usize {
    let dl = raw_data_len(h) as usize;
    let mut n = BHS_LEN + raw_ahs_len(h);
    if cfg.header_digest {
        n += 4;
    }
    if dl > 0 {
        n += dl + pad_len(dl);
        if cfg.data_digest {
            n += 4;
        }
    }
    n
}

/// Frames one PDU from the start of `buf`.
///
/// Errors: a header digest mismatch (the connection cannot be trusted any more), a data segment
/// larger than `cfg.max_recv_data_segment_length`, or a data digest mismatch — the latter
/// carries `pdu_len` so a target can skip the PDU and answer with a Reject (§7.8).
pub fn parse_pdu<'a>(buf: &'a [u8], cfg: &FrameConfig) -> Result<Parsed<PduRef<'a>>, WireError> {
    if buf.len() < BHS_LEN {
        return Ok(Parsed::Incomplete {
            needed: BHS_LEN - buf.len(),
        });
    }
    let h = &buf[..BHS_LEN];
    let opcode = raw_opcode(h);
    let ahs_len = raw_ahs_len(h);
    let hd_end = BHS_LEN + ahs_len + if cfg.header_digest { 4 } else { 0 };
    if buf.len() < hd_end {
        return Ok(Parsed::Incomplete {
            needed: hd_end - buf.len(),
        });
    }
    if cfg.header_digest {
        let got = read_digest(&buf[hd_end - 4..]);
        let want = crc32c(&buf[..BHS_LEN + ahs_len]);
        if got != want {
            return Err(WireError::HeaderDigest { opcode, got, want });
        }
    }
    let dl = raw_data_len(h);
    if dl > cfg.max_recv_data_segment_length {
        return Err(WireError::DataTooLong {
            opcode,
            len: dl,
            max: cfg.max_recv_data_segment_length,
        });
    }
    let total = pdu_len(h, cfg);
    if buf.len() < total {
        return Ok(Parsed::Incomplete {
            needed: total - buf.len(),
        });
    }
    let dl = dl as usize;
    let data = &buf[hd_end..hd_end + dl];
    if cfg.data_digest && dl > 0 {
        let padded = &buf[hd_end..hd_end + dl + pad_len(dl)];
        let got = read_digest(&buf[total - 4..]);
        let want = crc32c(padded);
        if got != want {
            return Err(WireError::DataDigest {
                opcode,
                got,
                want,
                pdu_len: total,
            });
        }
    }
    let header: &[u8; BHS_LEN] = buf[..BHS_LEN].try_into().map_err(|_| WireError::Ahs {
        offset: 0,
        reason: "short header",
    })?;
    Ok(Parsed::Complete {
        pdu: PduRef {
            header,
            ahs: &buf[BHS_LEN..BHS_LEN + ahs_len],
            data,
        },
        consumed: total,
    })
}

/// Appends a complete PDU to `out`: `header` (48 bytes, lengths filled in here), `ahs`
/// (already padded to 4-byte units), header digest, data, padding, data digest.
pub fn encode_pdu(
    out: &mut Vec<u8>,
    header: &[u8; BHS_LEN],
    ahs: &[u8],
    data: &[u8],
    cfg: &FrameConfig,
) {
    encode_pdu_with(out, header, ahs, data.len(), cfg, |dst| {
        dst.copy_from_slice(data)
    });
}

/// Like [`encode_pdu`] but lets `fill` write the `data_len` data bytes in place, so a target can
/// copy straight from its store into the send buffer (one copy, one `write` per response).
pub fn encode_pdu_with(
    out: &mut Vec<u8>,
    header: &[u8; BHS_LEN],
    ahs: &[u8],
    data_len: usize,
    cfg: &FrameConfig,
    fill: impl FnOnce(&mut [u8]),
) {
    encode_pdu_append(out, header, ahs, data_len, cfg, |out| {
        let at = out.len();
        out.resize(at + data_len, 0);
        fill(&mut out[at..]);
    });
}

/// Like [`encode_pdu_with`] but `append` pushes the `data_len` data bytes onto `out` itself,
/// so they need not be zero-filled before being overwritten (a target reading its store
/// straight into the send buffer). Should `append` push a different number of bytes, the
/// data is cut or zero-padded to `data_len`, so the PDU stays well framed.
pub fn encode_pdu_append(
    out: &mut Vec<u8>,
    header: &[u8; BHS_LEN],
    ahs: &[u8],
    data_len: usize,
    cfg: &FrameConfig,
    append: impl FnOnce(&mut Vec<u8>),
) {
    encode_pdu_head(out, header, ahs, data_len, cfg);
    if data_len > 0 {
        let dstart = out.len();
        append(out);
        out.resize(dstart + data_len, 0);
        out.resize(dstart + data_len + pad_len(data_len), 0);
        if cfg.data_digest {
            let d = data_digest(&out[dstart..dstart + data_len]);
            out.extend_from_slice(&d.to_le_bytes());
        }
    }
}

/// The part of a PDU before its data segment: header (with `data_len` and the AHS length set),
/// AHS and header digest. A sender that places the `data_len` data bytes itself, followed by
/// [`pad_len`]`(data_len)` zeros, frames the same bytes as [`encode_pdu`] when no data digest
/// was negotiated (a data digest needs the data: use [`encode_pdu_append`]).
pub fn encode_pdu_head(
    out: &mut Vec<u8>,
    header: &[u8; BHS_LEN],
    ahs: &[u8],
    data_len: usize,
    cfg: &FrameConfig,
) {
    debug_assert!(ahs.len() & 3 == 0 && ahs.len() <= 255 * 4);
    let start = out.len();
    let mut h: BasicHeader = zerocopy::transmute!(*header);
    h.total_ahs_len = (ahs.len() / 4) as u8;
    h.set_data_len(data_len as u32);
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(ahs);
    if cfg.header_digest {
        let d = crc32c(&out[start..]);
        out.extend_from_slice(&d.to_le_bytes());
    }
}

/// One Additional Header Segment (§11.2.1.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ahs {
    /// Type 1: CDB bytes beyond the first 16.
    ExtendedCdb(Vec<u8>),
    /// Type 2: Bidirectional Expected Read-Data Length.
    BidiReadLength(u32),
    Other {
        ahs_type: u8,
        data: Vec<u8>,
    },
}

/// Splits an AHS area into segments. Never panics.
pub fn parse_ahs(mut b: &[u8]) -> Result<Vec<Ahs>, WireError> {
    let mut out = Vec::new();
    let mut off = 0;
    while !b.is_empty() {
        if b.len() < 4 {
            return Err(WireError::Ahs {
                offset: off,
                reason: "truncated AHS header",
            });
        }
        let len = be16(b, 0) as usize;
        let ty = b[2];
        // AHSLength counts from the reserved/specific byte at offset 3.
        let body_end = 3 + len;
        let seg = body_end + pad_len(body_end);
        if len == 0 || b.len() < seg {
            return Err(WireError::Ahs {
                offset: off,
                reason: "AHS length beyond the AHS area",
            });
        }
        out.push(match ty {
            1 => Ahs::ExtendedCdb(b[4..body_end].to_vec()),
            2 if len == 5 => Ahs::BidiReadLength(be32(b, 4)),
            2 => {
                return Err(WireError::Ahs {
                    offset: off,
                    reason: "bidi AHS length must be 5",
                })
            }
            t => Ahs::Other {
                ahs_type: t,
                data: b[3..body_end].to_vec(),
            },
        });
        b = &b[seg..];
        off += seg;
    }
    Ok(out)
}

/// Encodes AHS segments (padded) for [`encode_pdu`].
pub fn encode_ahs(segs: &[Ahs]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in segs {
        let (ty, body): (u8, Vec<u8>) = match s {
            Ahs::ExtendedCdb(c) => (1, [&[0u8][..], c].concat()),
            Ahs::BidiReadLength(l) => (2, [&[0u8][..], &l.to_be_bytes()].concat()),
            Ahs::Other { ahs_type, data } => (*ahs_type, data.clone()),
        };
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.push(ty);
        out.extend_from_slice(&body);
        out.resize(out.len() + pad_len(3 + body.len()), 0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::pdu_ctl::NopOut;
    use proptest::prelude::*;

    fn nop() -> [u8; 48] {
        let mut h = [0u8; 48];
        NopOut {
            immediate: true,
            lun: 0,
            itt: 7,
            ttt: 0xffff_ffff,
            cmd_sn: 1,
            exp_stat_sn: 2,
        }
        .encode(&mut h);
        h
    }

    proptest! {
        #[test]
        fn frame_roundtrip(data in proptest::collection::vec(any::<u8>(), 0..300), hd: bool, dd: bool, cut in 0usize..400) {
            let cfg = FrameConfig { header_digest: hd, data_digest: dd, max_recv_data_segment_length: 8192 };
            let mut out = Vec::new();
            let ahs = encode_ahs(&[Ahs::ExtendedCdb(vec![1, 2, 3, 4, 5])]);
            encode_pdu(&mut out, &nop(), &ahs, &data, &cfg);
            match parse_pdu(&out, &cfg).unwrap() {
                Parsed::Complete { pdu, consumed } => {
                    prop_assert_eq!(consumed, out.len());
                    prop_assert_eq!(pdu.data, &data[..]);
                    prop_assert_eq!(parse_ahs(pdu.ahs).unwrap(), vec![Ahs::ExtendedCdb(vec![1, 2, 3, 4, 5])]);
                    prop_assert!(matches!(pdu.decode().unwrap(), Bhs::NopOut(_)));
                }
                p => prop_assert!(false, "{:?}", p),
            }
            let cut = cut.min(out.len().saturating_sub(1));
            match parse_pdu(&out[..cut], &cfg).unwrap() {
                Parsed::Incomplete { needed } => prop_assert!(needed > 0 && cut + needed <= out.len()),
                p => prop_assert!(false, "{:?}", p),
            }
        }
    }

    #[test]
    fn digest_errors_are_detected() {
        let cfg = FrameConfig {
            header_digest: true,
            data_digest: true,
            max_recv_data_segment_length: 8192,
        };
        let mut out = Vec::new();
        encode_pdu(&mut out, &nop(), &[], b"hello", &cfg);
        let mut bad = out.clone();
        bad[20] ^= 1;
        assert!(matches!(
            parse_pdu(&bad, &cfg),
            Err(WireError::HeaderDigest { .. })
        ));
        let mut bad = out.clone();
        bad[53] ^= 1;
        assert!(
            matches!(parse_pdu(&bad, &cfg), Err(WireError::DataDigest { pdu_len, .. }) if pdu_len == out.len())
        );
        let small = FrameConfig {
            max_recv_data_segment_length: 4,
            ..cfg
        };
        assert!(matches!(
            parse_pdu(&out, &small),
            Err(WireError::DataTooLong { .. })
        ));
    }
}
