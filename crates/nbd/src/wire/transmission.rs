//! The transmission phase (proto.md "Request message", "Simple reply message", "Structured
//! reply chunk message", "Request types", "Structured reply types").
//!
//! Only headers are decoded here: a WRITE request's payload and a READ reply's data follow their
//! header on the stream, and the I/O code moves them straight between the socket buffer and the
//! data store or the caller's buffers without this module copying them.

use super::{
    be16, be32, be64, DecodeResult, Parsed, WireError, MAX_CHUNK_META, MAX_PAYLOAD, REQUEST_MAGIC,
    SIMPLE_REPLY_MAGIC, STRUCTURED_REPLY_MAGIC,
};

/// Command types (`NBD_CMD_*`).
pub mod cmd {
    pub const READ: u16 = 0;
    pub const WRITE: u16 = 1;
    pub const DISC: u16 = 2;
    pub const FLUSH: u16 = 3;
    pub const TRIM: u16 = 4;
    pub const CACHE: u16 = 5;
    pub const WRITE_ZEROES: u16 = 6;
    pub const BLOCK_STATUS: u16 = 7;
}

/// Command flags (`NBD_CMD_FLAG_*`).
pub mod cmd_flags {
    pub const FUA: u16 = 1 << 0;
    pub const NO_HOLE: u16 = 1 << 1;
    pub const DF: u16 = 1 << 2;
    pub const REQ_ONE: u16 = 1 << 3;
    pub const FAST_ZERO: u16 = 1 << 4;
}

/// Structured reply chunk types (`NBD_REPLY_TYPE_*`) and flags.
pub mod chunk {
    pub const FLAG_DONE: u16 = 1;
    pub const NONE: u16 = 0;
    pub const OFFSET_DATA: u16 = 1;
    pub const OFFSET_HOLE: u16 = 2;
    pub const BLOCK_STATUS: u16 = 5;
    pub const ERROR_BIT: u16 = 1 << 15;
    pub const ERROR: u16 = ERROR_BIT | 1;
    pub const ERROR_OFFSET: u16 = ERROR_BIT | 2;
}

pub const REQUEST_LEN: usize = 28;
pub const SIMPLE_REPLY_LEN: usize = 16;
pub const CHUNK_HEADER_LEN: usize = 20;

/// A request header. `cmd` stays a raw number so that a server can answer unknown commands
/// with `NBD_EINVAL` instead of dropping the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub cmd: u16,
    pub cookie: u64,
    pub offset: u64,
    pub len: u32,
}

impl Request {
    /// Writes the 28-byte header into `out`.
    pub fn encode_to(&self, out: &mut [u8; REQUEST_LEN]) {
        out[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        out[4..6].copy_from_slice(&self.flags.to_be_bytes());
        out[6..8].copy_from_slice(&self.cmd.to_be_bytes());
        out[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        out[16..24].copy_from_slice(&self.offset.to_be_bytes());
        out[24..28].copy_from_slice(&self.len.to_be_bytes());
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut h = [0u8; REQUEST_LEN];
        self.encode_to(&mut h);
        out.extend_from_slice(&h);
    }

    /// Decodes a request header. The length is not limited here: a server checks it against
    /// its own maximum payload and answers or disconnects.
    pub fn decode(b: &[u8]) -> DecodeResult<Request> {
        if b.len() < REQUEST_LEN {
            return Ok(Parsed::Incomplete {
                needed: REQUEST_LEN,
            });
        }
        let magic = be32(b, 0);
        if magic != REQUEST_MAGIC {
            return Err(WireError::BadMagic {
                what: "request",
                found: magic.into(),
            });
        }
        Ok(Parsed::Done {
            value: Request {
                flags: be16(b, 4),
                cmd: be16(b, 6),
                cookie: be64(b, 8),
                offset: be64(b, 16),
                len: be32(b, 24),
            },
            len: REQUEST_LEN,
        })
    }

    /// Whether `len` bytes of payload follow this header on the wire.
    pub fn has_payload(&self) -> bool {
        self.cmd == cmd::WRITE
    }
}

/// A reply header, simple or structured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyHeader {
    /// Followed by the read data when it answers a successful READ.
    Simple { error: u32, cookie: u64 },
    /// Followed by `len` bytes of chunk payload.
    Structured {
        flags: u16,
        kind: u16,
        cookie: u64,
        len: u32,
    },
}

impl ReplyHeader {
    pub fn cookie(&self) -> u64 {
        match self {
            ReplyHeader::Simple { cookie, .. } | ReplyHeader::Structured { cookie, .. } => *cookie,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            ReplyHeader::Simple { error, cookie } => {
                let mut h = [0u8; SIMPLE_REPLY_LEN];
                h[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
                h[4..8].copy_from_slice(&error.to_be_bytes());
                h[8..16].copy_from_slice(&cookie.to_be_bytes());
                out.extend_from_slice(&h);
            }
            ReplyHeader::Structured {
                flags,
                kind,
                cookie,
                len,
            } => {
                let mut h = [0u8; CHUNK_HEADER_LEN];
                h[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
                h[4..6].copy_from_slice(&flags.to_be_bytes());
                h[6..8].copy_from_slice(&kind.to_be_bytes());
                h[8..16].copy_from_slice(&cookie.to_be_bytes());
                h[16..20].copy_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&h);
            }
        }
    }

    /// Decodes a reply header. A structured chunk longer than a data chunk of
    /// [`MAX_PAYLOAD`] bytes (plus its offset) is an error.
    pub fn decode(b: &[u8]) -> DecodeResult<ReplyHeader> {
        if b.len() < 4 {
            return Ok(Parsed::Incomplete { needed: 4 });
        }
        match be32(b, 0) {
            SIMPLE_REPLY_MAGIC => {
                if b.len() < SIMPLE_REPLY_LEN {
                    return Ok(Parsed::Incomplete {
                        needed: SIMPLE_REPLY_LEN,
                    });
                }
                Ok(Parsed::Done {
                    value: ReplyHeader::Simple {
                        error: be32(b, 4),
                        cookie: be64(b, 8),
                    },
                    len: SIMPLE_REPLY_LEN,
                })
            }
            STRUCTURED_REPLY_MAGIC => {
                if b.len() < CHUNK_HEADER_LEN {
                    return Ok(Parsed::Incomplete {
                        needed: CHUNK_HEADER_LEN,
                    });
                }
                let len = be32(b, 16);
                let max = MAX_PAYLOAD + 8;
                if len > max {
                    return Err(WireError::TooLong {
                        what: "structured reply chunk",
                        len: len.into(),
                        max: max.into(),
                    });
                }
                Ok(Parsed::Done {
                    value: ReplyHeader::Structured {
                        flags: be16(b, 4),
                        kind: be16(b, 6),
                        cookie: be64(b, 8),
                        len,
                    },
                    len: CHUNK_HEADER_LEN,
                })
            }
            m => Err(WireError::BadMagic {
                what: "reply",
                found: m.into(),
            }),
        }
    }
}

/// The payload of one structured reply chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunk<'a> {
    None,
    OffsetData {
        offset: u64,
        data: &'a [u8],
    },
    OffsetHole {
        offset: u64,
        size: u32,
    },
    Error {
        error: u32,
        message: &'a [u8],
    },
    ErrorOffset {
        error: u32,
        message: &'a [u8],
        offset: u64,
    },
    /// Block status or a type this module does not model; the client must treat an unknown
    /// non-error type as a protocol violation.
    Other {
        kind: u16,
        payload: &'a [u8],
    },
}

impl<'a> Chunk<'a> {
    pub fn kind(&self) -> u16 {
        match self {
            Chunk::None => chunk::NONE,
            Chunk::OffsetData { .. } => chunk::OFFSET_DATA,
            Chunk::OffsetHole { .. } => chunk::OFFSET_HOLE,
            Chunk::Error { .. } => chunk::ERROR,
            Chunk::ErrorOffset { .. } => chunk::ERROR_OFFSET,
            Chunk::Other { kind, .. } => *kind,
        }
    }

    /// Encodes header and payload of a chunk.
    pub fn encode(&self, flags: u16, cookie: u64, out: &mut Vec<u8>) {
        let len = match self {
            Chunk::None => 0,
            Chunk::OffsetData { data, .. } => 8 + data.len(),
            Chunk::OffsetHole { .. } => 12,
            Chunk::Error { message, .. } => 6 + message.len(),
            Chunk::ErrorOffset { message, .. } => 14 + message.len(),
            Chunk::Other { payload, .. } => payload.len(),
        };
        ReplyHeader::Structured {
            flags,
            kind: self.kind(),
            cookie,
            len: len as u32,
        }
        .encode(out);
        match *self {
            Chunk::None => {}
            Chunk::OffsetData { offset, data } => {
                out.extend_from_slice(&offset.to_be_bytes());
                out.extend_from_slice(data);
            }
            Chunk::OffsetHole { offset, size } => {
                out.extend_from_slice(&offset.to_be_bytes());
                out.extend_from_slice(&size.to_be_bytes());
            }
            Chunk::Error { error, message } | Chunk::ErrorOffset { error, message, .. } => {
                out.extend_from_slice(&error.to_be_bytes());
                out.extend_from_slice(&(message.len() as u16).to_be_bytes());
                out.extend_from_slice(message);
                if let Chunk::ErrorOffset { offset, .. } = *self {
                    out.extend_from_slice(&offset.to_be_bytes());
                }
            }
            Chunk::Other { payload, .. } => out.extend_from_slice(payload),
        }
    }

    /// Interprets the complete payload of a chunk of type `kind`.
    pub fn decode(kind: u16, p: &'a [u8]) -> Result<Chunk<'a>, WireError> {
        let bad = |what| WireError::BadLength {
            what,
            len: p.len() as u64,
        };
        match kind {
            chunk::NONE if p.is_empty() => Ok(Chunk::None),
            chunk::NONE => Err(bad("NBD_REPLY_TYPE_NONE")),
            chunk::OFFSET_DATA if p.len() >= 8 => Ok(Chunk::OffsetData {
                offset: be64(p, 0),
                data: &p[8..],
            }),
            chunk::OFFSET_DATA => Err(bad("NBD_REPLY_TYPE_OFFSET_DATA")),
            chunk::OFFSET_HOLE if p.len() == 12 => {
                let size = be32(p, 8);
                if size == 0 {
                    return Err(WireError::BadValue {
                        what: "hole size",
                        value: 0,
                    });
                }
                Ok(Chunk::OffsetHole {
                    offset: be64(p, 0),
                    size,
                })
            }
            chunk::OFFSET_HOLE => Err(bad("NBD_REPLY_TYPE_OFFSET_HOLE")),
            chunk::ERROR | chunk::ERROR_OFFSET => {
                let fixed = if kind == chunk::ERROR { 6 } else { 14 };
                if p.len() < fixed || p.len() > MAX_CHUNK_META as usize {
                    return Err(bad("error chunk"));
                }
                let error = be32(p, 0);
                let n = be16(p, 4) as usize;
                if n != p.len() - fixed {
                    return Err(bad("error chunk message"));
                }
                let message = &p[6..6 + n];
                if kind == chunk::ERROR {
                    Ok(Chunk::Error { error, message })
                } else {
                    Ok(Chunk::ErrorOffset {
                        error,
                        message,
                        offset: be64(p, 6 + n),
                    })
                }
            }
            kind => Ok(Chunk::Other { kind, payload: p }),
        }
    }
}
