//! PDU framing (NVMe/TCP 1.0 §3.3, §3.6.1): common header, header, header digest, padding up
//! to the PDU data offset, data, data digest. [`parse_pdu`] is the receive side,
//! [`encode_pdu`] the send side; neither does I/O.
//!
//! Digests are CRC32C over the header (`hlen` bytes) and over the data alone, little-endian on
//! the wire. ICReq/ICResp and TermReqs never carry digests. PDU data alignment (HPDA from the
//! host, CPDA from the controller) is 0's based in dwords: the receiver asked the sender to
//! start data at a multiple of `(pda + 1) * 4` bytes from the start of the PDU.

use super::header::{
    flags, hlen_of, pdu_type, CapsuleCmd, CapsuleResp, DataHdr, IcReq, IcResp, R2t, TermReq,
    IC_LEN, TERM_REQ_MAX_DATA,
};
use super::{crc32c, Parsed, WireError};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// What the receiver of PDUs negotiated. Before the ICReq/ICResp exchange both digests are off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxConfig {
    pub header_digest: bool,
    pub data_digest: bool,
    /// The largest data one PDU may carry to us (in-capsule data, an H2CData or C2HData piece).
    pub max_data: u32,
}

impl Default for RxConfig {
    fn default() -> Self {
        RxConfig {
            header_digest: false,
            data_digest: false,
            max_data: 128 * 1024,
        }
    }
}

/// What the sender of PDUs negotiated: digests, and the data alignment the peer asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxConfig {
    pub header_digest: bool,
    pub data_digest: bool,
    /// The peer's PDA (0's based dwords); values above 31 are treated as 31.
    pub pda: u8,
}

/// A framed PDU borrowed from the receive buffer, digests already checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PduRef<'a> {
    pub pdu_type: u8,
    pub flags: u8,
    /// The `hlen` header bytes (common header included, digest excluded).
    pub header: &'a [u8],
    /// The data, without padding or digest; empty when the PDU has none.
    pub data: &'a [u8],
}

/// A typed PDU. Data slices borrow from the receive buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pdu<'a> {
    IcReq(IcReq),
    IcResp(IcResp),
    H2cTermReq(TermReq, &'a [u8]),
    C2hTermReq(TermReq, &'a [u8]),
    CapsuleCmd(CapsuleCmd, &'a [u8]),
    CapsuleResp(CapsuleResp),
    H2cData(DataHdr, &'a [u8]),
    C2hData(DataHdr, &'a [u8]),
    R2t(R2t),
}

fn is_plain(t: u8) -> bool {
    matches!(
        t,
        pdu_type::IC_REQ | pdu_type::IC_RESP | pdu_type::H2C_TERM_REQ | pdu_type::C2H_TERM_REQ
    )
}

fn may_carry_data(t: u8) -> bool {
    matches!(
        t,
        pdu_type::H2C_TERM_REQ
            | pdu_type::C2H_TERM_REQ
            | pdu_type::CAPSULE_CMD
            | pdu_type::H2C_DATA
            | pdu_type::C2H_DATA
    )
}

fn le32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        w.copy_from_slice(s);
    }
    u32::from_le_bytes(w)
}

fn invalid(pdu_type: u8, offset: usize, reason: &'static str) -> WireError {
    WireError::InvalidField {
        pdu_type,
        offset,
        reason,
    }
}

/// Frames one PDU from the start of `buf`. The common header is checked as soon as its 8 bytes
/// are in, so an oversized or malformed PDU is refused before its body is awaited.
pub fn parse_pdu<'a>(buf: &'a [u8], cfg: &RxConfig) -> Result<Parsed<PduRef<'a>>, WireError> {
    if buf.len() < 8 {
        return Ok(Parsed::Incomplete {
            needed: 8 - buf.len(),
        });
    }
    let t = buf[0];
    let fl = buf[1];
    let hlen = buf[2] as usize;
    let pdo = buf[3] as usize;
    let plen = le32(buf, 4);
    let want_hlen = hlen_of(t).ok_or(WireError::UnknownType { pdu_type: t })?;
    if hlen != want_hlen {
        return Err(invalid(t, 2, "header length does not match the PDU type"));
    }
    let plain = is_plain(t);
    let hd = if plain {
        if fl & (flags::HDGSTF | flags::DDGSTF) != 0 {
            return Err(invalid(
                t,
                1,
                "digest flag on a PDU type that has no digests",
            ));
        }
        0
    } else {
        let has = fl & flags::HDGSTF != 0;
        if has != cfg.header_digest {
            return Err(invalid(
                t,
                1,
                "header digest flag differs from the negotiated one",
            ));
        }
        if has {
            4
        } else {
            0
        }
    };
    let max_plen: u64 = match t {
        pdu_type::IC_REQ | pdu_type::IC_RESP => IC_LEN as u64,
        pdu_type::H2C_TERM_REQ | pdu_type::C2H_TERM_REQ => (hlen + TERM_REQ_MAX_DATA) as u64,
        // Header, digest, alignment padding (PDO is one byte), data, data digest.
        _ => 256 + cfg.max_data as u64 + 4,
    };
    if (plen as u64) < (hlen + hd) as u64 {
        return Err(invalid(t, 4, "PDU length shorter than its header"));
    }
    if plen as u64 > max_plen {
        return Err(WireError::TooLong {
            pdu_type: t,
            plen,
            max: max_plen.min(u32::MAX as u64) as u32,
        });
    }
    let plen = plen as usize;
    if (t == pdu_type::IC_REQ || t == pdu_type::IC_RESP) && plen != IC_LEN {
        return Err(invalid(t, 4, "ICReq/ICResp length is not 128"));
    }
    let has_data = plen > hlen + hd;
    if has_data && !may_carry_data(t) {
        return Err(invalid(t, 4, "PDU type carries no data"));
    }
    let dd = if plain || !has_data {
        if fl & flags::DDGSTF != 0 {
            return Err(invalid(t, 1, "data digest flag without data"));
        }
        0
    } else {
        let has = fl & flags::DDGSTF != 0;
        if has != cfg.data_digest {
            return Err(invalid(
                t,
                1,
                "data digest flag differs from the negotiated one",
            ));
        }
        if has {
            4
        } else {
            0
        }
    };
    let data_start = if !has_data {
        plen
    } else if plain {
        hlen
    } else {
        if pdo < hlen + hd || !pdo.is_multiple_of(4) || pdo > plen - dd {
            return Err(invalid(
                t,
                3,
                "PDU data offset outside the PDU or misaligned",
            ));
        }
        pdo
    };
    let data_end = plen - dd;
    if data_end - data_start > cfg.max_data as usize && !plain {
        return Err(WireError::TooLong {
            pdu_type: t,
            plen: plen as u32,
            max: cfg.max_data,
        });
    }
    if buf.len() < plen {
        return Ok(Parsed::Incomplete {
            needed: plen - buf.len(),
        });
    }
    if hd != 0 {
        let got = le32(buf, hlen);
        let want = crc32c(&buf[..hlen]);
        if got != want {
            return Err(WireError::HeaderDigest {
                pdu_type: t,
                got,
                want,
            });
        }
    }
    let data = &buf[data_start..data_end];
    if dd != 0 {
        let got = le32(buf, data_end);
        let want = crc32c(data);
        if got != want {
            return Err(WireError::DataDigest {
                pdu_type: t,
                got,
                want,
            });
        }
    }
    Ok(Parsed::Complete {
        pdu: PduRef {
            pdu_type: t,
            flags: fl,
            header: &buf[..hlen],
            data,
        },
        consumed: plen,
    })
}

fn read<T: FromBytes>(p: &PduRef<'_>) -> Result<T, WireError> {
    T::read_from_bytes(p.header).map_err(|_| WireError::Length {
        what: "PDU header",
        len: p.header.len(),
        want: core::mem::size_of::<T>(),
    })
}

impl<'a> PduRef<'a> {
    /// Types the PDU and checks the fields every receiver must check whatever its role.
    pub fn decode(&self) -> Result<Pdu<'a>, WireError> {
        let t = self.pdu_type;
        Ok(match t {
            pdu_type::IC_REQ => {
                let h: IcReq = read(self)?;
                if h.pfv.get() != 0 {
                    return Err(invalid(t, 8, "unsupported PDU format version"));
                }
                if h.hpda > 31 {
                    return Err(invalid(t, 10, "HPDA above 31"));
                }
                Pdu::IcReq(h)
            }
            pdu_type::IC_RESP => {
                let h: IcResp = read(self)?;
                if h.pfv.get() != 0 {
                    return Err(invalid(t, 8, "unsupported PDU format version"));
                }
                if h.cpda > 31 {
                    return Err(invalid(t, 10, "CPDA above 31"));
                }
                if h.maxh2cdata.get() < 4096 {
                    return Err(invalid(t, 12, "MAXH2CDATA below 4096"));
                }
                Pdu::IcResp(h)
            }
            pdu_type::H2C_TERM_REQ => Pdu::H2cTermReq(read(self)?, self.data),
            pdu_type::C2H_TERM_REQ => Pdu::C2hTermReq(read(self)?, self.data),
            pdu_type::CAPSULE_CMD => Pdu::CapsuleCmd(read(self)?, self.data),
            pdu_type::CAPSULE_RESP => Pdu::CapsuleResp(read(self)?),
            pdu_type::H2C_DATA | pdu_type::C2H_DATA => {
                let h: DataHdr = read(self)?;
                if h.data_length.get() as usize != self.data.len() || self.data.is_empty() {
                    return Err(invalid(t, 16, "DATAL differs from the data carried"));
                }
                if t == pdu_type::H2C_DATA {
                    Pdu::H2cData(h, self.data)
                } else {
                    Pdu::C2hData(h, self.data)
                }
            }
            pdu_type::R2T => Pdu::R2t(read(self)?),
            _ => return Err(WireError::UnknownType { pdu_type: t }),
        })
    }
}

/// Appends one PDU to `out`: the header as given with `hlen`, `pdo`, `plen` and the digest
/// flags filled in, its digest, zero padding up to the peer's alignment, the data and its
/// digest. Returns the PDU's length.
pub fn encode_pdu<H: IntoBytes + Immutable>(
    out: &mut Vec<u8>,
    header: &H,
    data: &[u8],
    tx: &TxConfig,
) -> usize {
    let start = out.len();
    let digest = encode_head(out, header, data.len(), tx);
    out.extend_from_slice(data);
    if digest {
        out.extend_from_slice(&crc32c(data).to_le_bytes());
    }
    out.len() - start
}

/// The first part of [`encode_pdu`], for data the caller appends itself (straight from a
/// store, without an intermediate buffer): everything up to where `data_len` bytes of data
/// start. Returns whether a data digest (CRC32C of those bytes, little-endian) must follow them.
pub fn encode_head<H: IntoBytes + Immutable>(
    out: &mut Vec<u8>,
    header: &H,
    data_len: usize,
    tx: &TxConfig,
) -> bool {
    let start = out.len();
    let h = header.as_bytes();
    let hlen = h.len();
    out.extend_from_slice(h);
    let t = h.first().copied().unwrap_or(0);
    let plain = is_plain(t);
    let hd = tx.header_digest && !plain;
    let dd = tx.data_digest && !plain && data_len > 0;
    let hd_len = if hd { 4 } else { 0 };
    let align = (tx.pda.min(31) as usize + 1) * 4;
    let pdo = if data_len == 0 {
        0
    } else if plain {
        hlen
    } else {
        (hlen + hd_len).div_ceil(align) * align
    };
    let plen = if data_len == 0 {
        hlen + hd_len
    } else {
        pdo + data_len + if dd { 4 } else { 0 }
    };
    let mut fl = out[start + 1] & !(flags::HDGSTF | flags::DDGSTF);
    if hd {
        fl |= flags::HDGSTF;
    }
    if dd {
        fl |= flags::DDGSTF;
    }
    out[start + 1] = fl;
    out[start + 2] = hlen as u8;
    out[start + 3] = if plain { 0 } else { pdo as u8 };
    out[start + 4..start + 8].copy_from_slice(&(plen as u32).to_le_bytes());
    if hd {
        let c = crc32c(&out[start..start + hlen]);
        out.extend_from_slice(&c.to_le_bytes());
    }
    if data_len > 0 {
        out.resize(start + pdo, 0);
    }
    dd
}

#[cfg(test)]
#[path = "pdu_tests.rs"]
mod tests;
