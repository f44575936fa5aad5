//! Metadata querying (proto.md "Metadata querying", "The `base:` metadata namespace",
//! `NBD_OPT_LIST_META_CONTEXT`, `NBD_OPT_SET_META_CONTEXT`, `NBD_REP_META_CONTEXT`,
//! `NBD_CMD_BLOCK_STATUS`, `NBD_REPLY_TYPE_BLOCK_STATUS`), both ways: the client encodes a
//! request and decodes block status chunks, the server decodes requests and encodes chunks.
//!
//! ```text
//! C: option 9 or 10, data: export-name-len(32) export-name n-queries(32)
//!                          { query-len(32) query }*          -> MetaContextRequest
//! S: NBD_REP_META_CONTEXT, data: context-id(32) name         -> ReplyBody::MetaContext
//! S: NBD_REPLY_TYPE_BLOCK_STATUS chunk, payload: context-id(32)
//!                          { length(32) status-flags(32) }+  -> BlockStatus
//! ```

use super::transmission::{chunk, ReplyHeader};
use super::{be32, utf8, WireError, MAX_NAME_LEN, MAX_OPTION_LEN};

/// The one context this implementation knows: allocated or hole.
pub const BASE_ALLOCATION: &str = "base:allocation";
/// The `base:` namespace query that lists every `base:` context.
pub const BASE_NAMESPACE: &str = "base:";

/// Status flags of `base:allocation` (`NBD_STATE_*`).
pub mod state {
    /// Not allocated in the backend.
    pub const HOLE: u32 = 1 << 0;
    /// Reads as zeros.
    pub const ZERO: u32 = 1 << 1;
}

/// The body of `NBD_OPT_LIST_META_CONTEXT` and `NBD_OPT_SET_META_CONTEXT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaContextRequest {
    pub export: String,
    pub queries: Vec<String>,
}

impl MetaContextRequest {
    /// Encodes the option data (without the option header).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.export.len() as u32).to_be_bytes());
        out.extend_from_slice(self.export.as_bytes());
        out.extend_from_slice(&(self.queries.len() as u32).to_be_bytes());
        for q in &self.queries {
            out.extend_from_slice(&(q.len() as u32).to_be_bytes());
            out.extend_from_slice(q.as_bytes());
        }
    }

    /// Decodes complete option data. The spec asks for `NBD_REP_ERR_INVALID` when a length
    /// points past the data, so any inconsistency (or trailing byte) is an error. Strings are
    /// limited to [`MAX_NAME_LEN`]; the number of queries is bounded by the data's length
    /// (at most [`MAX_OPTION_LEN`]), so nothing here allocates more than the input.
    pub fn decode(data: &[u8]) -> Result<MetaContextRequest, WireError> {
        if data.len() > MAX_OPTION_LEN as usize {
            return Err(WireError::TooLong {
                what: "meta context option",
                len: data.len() as u64,
                max: MAX_OPTION_LEN.into(),
            });
        }
        let mut at = 0;
        let export = string(data, &mut at, "export name")?;
        let n = u32_at(data, &mut at, "number of queries")?;
        let mut queries = Vec::new();
        for _ in 0..n {
            queries.push(string(data, &mut at, "meta context query")?);
        }
        if at != data.len() {
            return Err(WireError::BadLength {
                what: "meta context option",
                len: data.len() as u64,
            });
        }
        Ok(MetaContextRequest { export, queries })
    }
}

fn u32_at(data: &[u8], at: &mut usize, what: &'static str) -> Result<u32, WireError> {
    if data.len() < *at + 4 {
        return Err(WireError::BadLength {
            what,
            len: data.len() as u64,
        });
    }
    let v = be32(data, *at);
    *at += 4;
    Ok(v)
}

fn string(data: &[u8], at: &mut usize, what: &'static str) -> Result<String, WireError> {
    let n = u32_at(data, at, what)? as usize;
    if n > MAX_NAME_LEN {
        return Err(WireError::TooLong {
            what,
            len: n as u64,
            max: MAX_NAME_LEN as u64,
        });
    }
    if data.len() - *at < n {
        return Err(WireError::BadLength {
            what,
            len: n as u64,
        });
    }
    let s = utf8(&data[*at..*at + n], what)?;
    *at += n;
    Ok(s)
}

/// Which contexts a query selects: `base:allocation` for itself, and for `base:` when
/// listing (the spec's wildcard; ignored when setting). Unknown namespaces and leaf names are
/// ignored, as the spec requires.
pub fn selects_base_allocation(query: &str, listing: bool) -> bool {
    query == BASE_ALLOCATION || (listing && query == BASE_NAMESPACE)
}

/// One block status descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Bytes the status applies to; never 0.
    pub len: u32,
    pub flags: u32,
}

/// The spec's recommended limit of descriptors per chunk.
pub const MAX_EXTENTS: usize = 1 << 20;

/// The payload of an `NBD_REPLY_TYPE_BLOCK_STATUS` chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockStatus {
    pub context: u32,
    pub extents: Vec<Extent>,
}

impl BlockStatus {
    /// Encodes the chunk, header included.
    pub fn encode(&self, flags: u16, cookie: u64, out: &mut Vec<u8>) {
        ReplyHeader::Structured {
            flags,
            kind: chunk::BLOCK_STATUS,
            cookie,
            len: (4 + 8 * self.extents.len()) as u32,
        }
        .encode(out);
        out.extend_from_slice(&self.context.to_be_bytes());
        for e in &self.extents {
            out.extend_from_slice(&e.len.to_be_bytes());
            out.extend_from_slice(&e.flags.to_be_bytes());
        }
    }

    /// Decodes a complete chunk payload: a context id and one or more non-empty extents.
    pub fn decode(p: &[u8]) -> Result<BlockStatus, WireError> {
        if p.len() < 12 || !(p.len() - 4).is_multiple_of(8) || (p.len() - 4) / 8 > MAX_EXTENTS {
            return Err(WireError::BadLength {
                what: "NBD_REPLY_TYPE_BLOCK_STATUS",
                len: p.len() as u64,
            });
        }
        let extents = p[4..]
            .chunks_exact(8)
            .map(|d| {
                let len = be32(d, 0);
                if len == 0 {
                    return Err(WireError::BadValue {
                        what: "block status extent length",
                        value: 0,
                    });
                }
                Ok(Extent {
                    len,
                    flags: be32(d, 4),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(BlockStatus {
            context: be32(p, 0),
            extents,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_context_request_round_trips_and_rejects_bad_lengths() {
        let r = MetaContextRequest {
            export: "disk".into(),
            queries: vec![BASE_ALLOCATION.into(), "qemu:dirty-bitmap:x".into()],
        };
        let mut b = Vec::new();
        r.encode(&mut b);
        assert_eq!(MetaContextRequest::decode(&b).unwrap(), r);
        for cut in 0..b.len() {
            assert!(MetaContextRequest::decode(&b[..cut]).is_err(), "{cut}");
        }
        b.push(0);
        assert!(MetaContextRequest::decode(&b).is_err());
        // A query count far beyond the data allocates nothing and fails.
        let huge = [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        assert!(MetaContextRequest::decode(&huge).is_err());
    }

    #[test]
    fn block_status_round_trips() {
        let s = BlockStatus {
            context: 7,
            extents: vec![
                Extent {
                    len: 65536,
                    flags: 0,
                },
                Extent {
                    len: 512,
                    flags: state::HOLE | state::ZERO,
                },
            ],
        };
        let mut b = Vec::new();
        s.encode(1, 99, &mut b);
        assert_eq!(b.len(), 20 + 4 + 16);
        assert_eq!(BlockStatus::decode(&b[20..]).unwrap(), s);
        assert!(BlockStatus::decode(&b[20..28]).is_err());
        let mut zero = b[20..].to_vec();
        zero[4..8].fill(0);
        assert!(BlockStatus::decode(&zero).is_err());
        assert!(selects_base_allocation("base:", true));
        assert!(!selects_base_allocation("base:", false));
        assert!(!selects_base_allocation("base:other", true));
    }
}
