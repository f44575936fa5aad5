//! Fixed newstyle negotiation (proto.md "Newstyle negotiation", "Fixed newstyle negotiation",
//! "Option types", "Option reply types").
//!
//! ```text
//! S: NBDMAGIC IHAVEOPT handshake-flags(16)          -> Greeting
//! C: client-flags(32)                               -> client flags
//! C: IHAVEOPT option(32) length(32) data            -> ClientOption   (repeated)
//! S: REPLY_MAGIC option(32) reply(32) length(32) data -> OptionReply  (one or more per option)
//! S: size(64) transmission-flags(16) [124 zeroes]   -> ExportNameReply (after NBD_OPT_EXPORT_NAME)
//! ```

use super::meta::MetaContextRequest;
use super::{
    be16, be32, be64, utf8, DecodeResult, Parsed, WireError, IHAVEOPT, MAX_NAME_LEN,
    MAX_OPTION_LEN, NBDMAGIC, REPLY_MAGIC,
};

/// Handshake flags (server, 16 bits).
pub mod hflags {
    pub const FIXED_NEWSTYLE: u16 = 1 << 0;
    pub const NO_ZEROES: u16 = 1 << 1;
}

/// Client flags (32 bits). Any other bit makes the server drop the connection.
pub mod cflags {
    pub const FIXED_NEWSTYLE: u32 = 1 << 0;
    pub const NO_ZEROES: u32 = 1 << 1;
    pub const KNOWN: u32 = FIXED_NEWSTYLE | NO_ZEROES;
}

/// Transmission flags (16 bits), with the names reports use.
pub mod tflags {
    pub const HAS_FLAGS: u16 = 1 << 0;
    pub const READ_ONLY: u16 = 1 << 1;
    pub const SEND_FLUSH: u16 = 1 << 2;
    pub const SEND_FUA: u16 = 1 << 3;
    pub const ROTATIONAL: u16 = 1 << 4;
    pub const SEND_TRIM: u16 = 1 << 5;
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    pub const SEND_DF: u16 = 1 << 7;
    pub const CAN_MULTI_CONN: u16 = 1 << 8;
    pub const SEND_RESIZE: u16 = 1 << 9;
    pub const SEND_CACHE: u16 = 1 << 10;
    pub const SEND_FAST_ZERO: u16 = 1 << 11;

    pub const NAMES: [(u16, &str); 12] = [
        (HAS_FLAGS, "HAS_FLAGS"),
        (READ_ONLY, "READ_ONLY"),
        (SEND_FLUSH, "SEND_FLUSH"),
        (SEND_FUA, "SEND_FUA"),
        (ROTATIONAL, "ROTATIONAL"),
        (SEND_TRIM, "SEND_TRIM"),
        (SEND_WRITE_ZEROES, "SEND_WRITE_ZEROES"),
        (SEND_DF, "SEND_DF"),
        (CAN_MULTI_CONN, "CAN_MULTI_CONN"),
        (SEND_RESIZE, "SEND_RESIZE"),
        (SEND_CACHE, "SEND_CACHE"),
        (SEND_FAST_ZERO, "SEND_FAST_ZERO"),
    ];

    /// Names of the set flags; unknown bits appear as `BIT<n>`.
    pub fn names(flags: u16) -> Vec<String> {
        (0..16)
            .filter(|b| flags & (1 << b) != 0)
            .map(|b| {
                NAMES
                    .iter()
                    .find(|(f, _)| *f == 1 << b)
                    .map_or_else(|| format!("BIT{b}"), |(_, n)| (*n).to_string())
            })
            .collect()
    }
}

/// Option numbers (`NBD_OPT_*`).
pub mod opt {
    pub const EXPORT_NAME: u32 = 1;
    pub const ABORT: u32 = 2;
    pub const LIST: u32 = 3;
    pub const STARTTLS: u32 = 5;
    pub const INFO: u32 = 6;
    pub const GO: u32 = 7;
    pub const STRUCTURED_REPLY: u32 = 8;
    pub const LIST_META_CONTEXT: u32 = 9;
    pub const SET_META_CONTEXT: u32 = 10;
}

/// Option reply types (`NBD_REP_*`); errors have bit 31 set.
pub mod rep {
    pub const ACK: u32 = 1;
    pub const SERVER: u32 = 2;
    pub const INFO: u32 = 3;
    pub const META_CONTEXT: u32 = 4;
    pub const ERR_BIT: u32 = 1 << 31;
    pub const ERR_UNSUP: u32 = ERR_BIT | 1;
    pub const ERR_POLICY: u32 = ERR_BIT | 2;
    pub const ERR_INVALID: u32 = ERR_BIT | 3;
    pub const ERR_PLATFORM: u32 = ERR_BIT | 4;
    pub const ERR_TLS_REQD: u32 = ERR_BIT | 5;
    pub const ERR_UNKNOWN: u32 = ERR_BIT | 6;
    pub const ERR_SHUTDOWN: u32 = ERR_BIT | 7;
    pub const ERR_BLOCK_SIZE_REQD: u32 = ERR_BIT | 8;
    pub const ERR_TOO_BIG: u32 = ERR_BIT | 9;
}

/// Information types (`NBD_INFO_*`) in `NBD_OPT_INFO`/`GO` requests and `NBD_REP_INFO` replies.
pub mod info {
    pub const EXPORT: u16 = 0;
    pub const NAME: u16 = 1;
    pub const DESCRIPTION: u16 = 2;
    pub const BLOCK_SIZE: u16 = 3;
}

/// The server's first message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Greeting {
    pub flags: u16,
}

pub const GREETING_LEN: usize = 18;

impl Greeting {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&NBDMAGIC.to_be_bytes());
        out.extend_from_slice(&IHAVEOPT.to_be_bytes());
        out.extend_from_slice(&self.flags.to_be_bytes());
    }

    /// Decodes a fixed newstyle greeting; oldstyle servers fail with `BadMagic`.
    pub fn decode(b: &[u8]) -> DecodeResult<Greeting> {
        if b.len() < GREETING_LEN {
            return Ok(Parsed::Incomplete {
                needed: GREETING_LEN,
            });
        }
        check_magic("NBDMAGIC", be64(b, 0), NBDMAGIC)?;
        check_magic("IHAVEOPT", be64(b, 8), IHAVEOPT)?;
        Ok(Parsed::Done {
            value: Greeting { flags: be16(b, 16) },
            len: GREETING_LEN,
        })
    }
}

/// Encodes the client flags.
pub fn encode_client_flags(flags: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&flags.to_be_bytes());
}

/// Decodes the client flags; unknown bits are an error (the server must hang up).
pub fn decode_client_flags(b: &[u8]) -> DecodeResult<u32> {
    if b.len() < 4 {
        return Ok(Parsed::Incomplete { needed: 4 });
    }
    let flags = be32(b, 0);
    if flags & !cflags::KNOWN != 0 {
        return Err(WireError::ClientFlags(flags));
    }
    Ok(Parsed::Done {
        value: flags,
        len: 4,
    })
}

/// The body of `NBD_OPT_INFO` and `NBD_OPT_GO`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoRequest {
    pub name: String,
    /// Requested `NBD_INFO_*` items.
    pub requests: Vec<u16>,
}

/// One option the client sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientOption {
    ExportName(String),
    Abort,
    List,
    Info(GoRequest),
    Go(GoRequest),
    StructuredReply,
    ListMetaContext(MetaContextRequest),
    SetMetaContext(MetaContextRequest),
    /// An option this module does not model, or a known one whose payload is malformed (the
    /// server answers `NBD_REP_ERR_UNSUP` or `NBD_REP_ERR_INVALID` respectively).
    Other {
        option: u32,
        data: Vec<u8>,
    },
}

const OPTION_HEADER: usize = 16;

impl ClientOption {
    pub fn number(&self) -> u32 {
        match self {
            ClientOption::ExportName(_) => opt::EXPORT_NAME,
            ClientOption::Abort => opt::ABORT,
            ClientOption::List => opt::LIST,
            ClientOption::Info(_) => opt::INFO,
            ClientOption::Go(_) => opt::GO,
            ClientOption::StructuredReply => opt::STRUCTURED_REPLY,
            ClientOption::ListMetaContext(_) => opt::LIST_META_CONTEXT,
            ClientOption::SetMetaContext(_) => opt::SET_META_CONTEXT,
            ClientOption::Other { option, .. } => *option,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&IHAVEOPT.to_be_bytes());
        out.extend_from_slice(&self.number().to_be_bytes());
        let len_at = out.len();
        out.extend_from_slice(&[0; 4]);
        match self {
            ClientOption::ExportName(name) => out.extend_from_slice(name.as_bytes()),
            ClientOption::Info(go) | ClientOption::Go(go) => {
                out.extend_from_slice(&(go.name.len() as u32).to_be_bytes());
                out.extend_from_slice(go.name.as_bytes());
                out.extend_from_slice(&(go.requests.len() as u16).to_be_bytes());
                for r in &go.requests {
                    out.extend_from_slice(&r.to_be_bytes());
                }
            }
            ClientOption::ListMetaContext(m) | ClientOption::SetMetaContext(m) => m.encode(out),
            ClientOption::Other { data, .. } => out.extend_from_slice(data),
            ClientOption::Abort | ClientOption::List | ClientOption::StructuredReply => {}
        }
        let len = (out.len() - len_at - 4) as u32;
        out[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
    }

    /// Decodes one option. Framing errors (magic, length over [`MAX_OPTION_LEN`]) are errors;
    /// a malformed payload of a well-framed option decodes to [`ClientOption::Other`].
    pub fn decode(b: &[u8]) -> DecodeResult<ClientOption> {
        if b.len() < OPTION_HEADER {
            return Ok(Parsed::Incomplete {
                needed: OPTION_HEADER,
            });
        }
        check_magic("option", be64(b, 0), IHAVEOPT)?;
        let option = be32(b, 8);
        let len = be32(b, 12);
        if len > MAX_OPTION_LEN {
            return Err(WireError::TooLong {
                what: "option",
                len: len.into(),
                max: MAX_OPTION_LEN.into(),
            });
        }
        let total = OPTION_HEADER + len as usize;
        if b.len() < total {
            return Ok(Parsed::Incomplete { needed: total });
        }
        let data = &b[OPTION_HEADER..total];
        let value = parse_option(option, data).unwrap_or_else(|| ClientOption::Other {
            option,
            data: data.to_vec(),
        });
        Ok(Parsed::Done { value, len: total })
    }
}

fn parse_option(option: u32, data: &[u8]) -> Option<ClientOption> {
    match option {
        opt::EXPORT_NAME if data.len() <= MAX_NAME_LEN => {
            Some(ClientOption::ExportName(utf8(data, "name").ok()?))
        }
        // The spec asks servers to ignore data sent with ABORT.
        opt::ABORT => Some(ClientOption::Abort),
        opt::LIST if data.is_empty() => Some(ClientOption::List),
        opt::STRUCTURED_REPLY if data.is_empty() => Some(ClientOption::StructuredReply),
        opt::INFO => parse_go(data).map(ClientOption::Info),
        opt::GO => parse_go(data).map(ClientOption::Go),
        opt::LIST_META_CONTEXT => MetaContextRequest::decode(data)
            .ok()
            .map(ClientOption::ListMetaContext),
        opt::SET_META_CONTEXT => MetaContextRequest::decode(data)
            .ok()
            .map(ClientOption::SetMetaContext),
        _ => None,
    }
}

fn parse_go(data: &[u8]) -> Option<GoRequest> {
    if data.len() < 6 {
        return None;
    }
    let name_len = be32(data, 0) as usize;
    if name_len > MAX_NAME_LEN || name_len > data.len() - 6 {
        return None;
    }
    let name = utf8(&data[4..4 + name_len], "name").ok()?;
    let rest = &data[4 + name_len..];
    let n = be16(rest, 0) as usize;
    if rest.len() != 2 + 2 * n {
        return None;
    }
    let requests = (0..n).map(|i| be16(rest, 2 + 2 * i)).collect();
    Some(GoRequest { name, requests })
}

/// One `NBD_REP_INFO` item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Info {
    Export {
        size: u64,
        flags: u16,
    },
    Name(String),
    Description(String),
    BlockSize {
        min: u32,
        preferred: u32,
        max_payload: u32,
    },
    Other {
        info: u16,
        data: Vec<u8>,
    },
}

/// What a server says in one option reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyBody {
    Ack,
    Server {
        name: String,
        details: String,
    },
    Info(Info),
    /// `NBD_REP_META_CONTEXT`: a context's id (0 when listing) and name.
    MetaContext {
        id: u32,
        name: String,
    },
    /// Any `NBD_REP_ERR_*` (`code` has bit 31 set), with the optional human-readable message.
    Error {
        code: u32,
        message: String,
    },
    /// A reply type this module does not model.
    Other {
        reply: u32,
        data: Vec<u8>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionReply {
    /// The option this answers.
    pub option: u32,
    pub body: ReplyBody,
}

const REPLY_HEADER: usize = 20;

impl OptionReply {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
        out.extend_from_slice(&self.option.to_be_bytes());
        let reply = match &self.body {
            ReplyBody::Ack => rep::ACK,
            ReplyBody::Server { .. } => rep::SERVER,
            ReplyBody::Info(_) => rep::INFO,
            ReplyBody::MetaContext { .. } => rep::META_CONTEXT,
            ReplyBody::Error { code, .. } => *code | rep::ERR_BIT,
            ReplyBody::Other { reply, .. } => *reply,
        };
        out.extend_from_slice(&reply.to_be_bytes());
        let len_at = out.len();
        out.extend_from_slice(&[0; 4]);
        match &self.body {
            ReplyBody::Ack => {}
            ReplyBody::Server { name, details } => {
                out.extend_from_slice(&(name.len() as u32).to_be_bytes());
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(details.as_bytes());
            }
            ReplyBody::Info(i) => encode_info(i, out),
            ReplyBody::MetaContext { id, name } => {
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(name.as_bytes());
            }
            ReplyBody::Error { message, .. } => out.extend_from_slice(message.as_bytes()),
            ReplyBody::Other { data, .. } => out.extend_from_slice(data),
        }
        let len = (out.len() - len_at - 4) as u32;
        out[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
    }

    pub fn decode(b: &[u8]) -> DecodeResult<OptionReply> {
        if b.len() < REPLY_HEADER {
            return Ok(Parsed::Incomplete {
                needed: REPLY_HEADER,
            });
        }
        check_magic("option reply", be64(b, 0), REPLY_MAGIC)?;
        let option = be32(b, 8);
        let reply = be32(b, 12);
        let len = be32(b, 16);
        if len > MAX_OPTION_LEN {
            return Err(WireError::TooLong {
                what: "option reply",
                len: len.into(),
                max: MAX_OPTION_LEN.into(),
            });
        }
        let total = REPLY_HEADER + len as usize;
        if b.len() < total {
            return Ok(Parsed::Incomplete { needed: total });
        }
        let data = &b[REPLY_HEADER..total];
        let body = match reply {
            rep::ACK if data.is_empty() => ReplyBody::Ack,
            rep::ACK => return Err(bad_len("NBD_REP_ACK", data.len())),
            rep::SERVER => {
                if data.len() < 4 {
                    return Err(bad_len("NBD_REP_SERVER", data.len()));
                }
                let n = be32(data, 0) as usize;
                if n > data.len() - 4 {
                    return Err(bad_len("NBD_REP_SERVER name", n));
                }
                ReplyBody::Server {
                    name: utf8(&data[4..4 + n], "export name")?,
                    details: String::from_utf8_lossy(&data[4 + n..]).into_owned(),
                }
            }
            rep::INFO => ReplyBody::Info(decode_info(data)?),
            rep::META_CONTEXT => {
                if data.len() < 4 || data.len() - 4 > MAX_NAME_LEN {
                    return Err(bad_len("NBD_REP_META_CONTEXT", data.len()));
                }
                ReplyBody::MetaContext {
                    id: be32(data, 0),
                    name: utf8(&data[4..], "meta context name")?,
                }
            }
            r if r & rep::ERR_BIT != 0 => ReplyBody::Error {
                code: r,
                message: String::from_utf8_lossy(data).into_owned(),
            },
            r => ReplyBody::Other {
                reply: r,
                data: data.to_vec(),
            },
        };
        Ok(Parsed::Done {
            value: OptionReply { option, body },
            len: total,
        })
    }
}

fn encode_info(i: &Info, out: &mut Vec<u8>) {
    match i {
        Info::Export { size, flags } => {
            out.extend_from_slice(&info::EXPORT.to_be_bytes());
            out.extend_from_slice(&size.to_be_bytes());
            out.extend_from_slice(&flags.to_be_bytes());
        }
        Info::Name(s) | Info::Description(s) => {
            let t = if matches!(i, Info::Name(_)) {
                info::NAME
            } else {
                info::DESCRIPTION
            };
            out.extend_from_slice(&t.to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        Info::BlockSize {
            min,
            preferred,
            max_payload,
        } => {
            out.extend_from_slice(&info::BLOCK_SIZE.to_be_bytes());
            out.extend_from_slice(&min.to_be_bytes());
            out.extend_from_slice(&preferred.to_be_bytes());
            out.extend_from_slice(&max_payload.to_be_bytes());
        }
        Info::Other { info, data } => {
            out.extend_from_slice(&info.to_be_bytes());
            out.extend_from_slice(data);
        }
    }
}

fn decode_info(d: &[u8]) -> Result<Info, WireError> {
    if d.len() < 2 {
        return Err(bad_len("NBD_REP_INFO", d.len()));
    }
    let t = be16(d, 0);
    let body = &d[2..];
    Ok(match t {
        info::EXPORT if body.len() == 10 => Info::Export {
            size: be64(body, 0),
            flags: be16(body, 8),
        },
        info::EXPORT => return Err(bad_len("NBD_INFO_EXPORT", d.len())),
        info::NAME => Info::Name(utf8(body, "export name")?),
        info::DESCRIPTION => Info::Description(utf8(body, "export description")?),
        info::BLOCK_SIZE if body.len() == 12 => Info::BlockSize {
            min: be32(body, 0),
            preferred: be32(body, 4),
            max_payload: be32(body, 8),
        },
        info::BLOCK_SIZE => return Err(bad_len("NBD_INFO_BLOCK_SIZE", d.len())),
        info => Info::Other {
            info,
            data: body.to_vec(),
        },
    })
}

/// The server's answer to `NBD_OPT_EXPORT_NAME`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportNameReply {
    pub size: u64,
    pub flags: u16,
}

impl ExportNameReply {
    /// Encodes the reply; the 124 reserved zeroes are left out when the client negotiated
    /// `NBD_FLAG_C_NO_ZEROES`.
    pub fn encode(&self, no_zeroes: bool, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&self.flags.to_be_bytes());
        if !no_zeroes {
            out.extend_from_slice(&[0; 124]);
        }
    }

    pub fn decode(b: &[u8], no_zeroes: bool) -> DecodeResult<ExportNameReply> {
        let total = if no_zeroes { 10 } else { 134 };
        if b.len() < total {
            return Ok(Parsed::Incomplete { needed: total });
        }
        Ok(Parsed::Done {
            value: ExportNameReply {
                size: be64(b, 0),
                flags: be16(b, 8),
            },
            len: total,
        })
    }
}

fn check_magic(what: &'static str, found: u64, want: u64) -> Result<(), WireError> {
    if found == want {
        Ok(())
    } else {
        Err(WireError::BadMagic { what, found })
    }
}

fn bad_len(what: &'static str, len: usize) -> WireError {
    WireError::BadLength {
        what,
        len: len as u64,
    }
}
