//! Metadata contexts and block status (proto.md "`NBD_OPT_LIST_META_CONTEXT`",
//! "`NBD_OPT_SET_META_CONTEXT`", "`NBD_REP_META_CONTEXT`", "Metadata contexts",
//! "`NBD_CMD_BLOCK_STATUS`", "`NBD_REPLY_TYPE_BLOCK_STATUS`").
//!
//! ```text
//! C: NBD_OPT_SET_META_CONTEXT: export-name-len(32) export-name queries(32) {len(32) query}*
//! S: NBD_REP_META_CONTEXT: context-id(32) name        (one per selected context)
//! S: NBD_REP_ACK
//! C: NBD_CMD_BLOCK_STATUS offset length               (a request header, no payload)
//! S: NBD_REPLY_TYPE_BLOCK_STATUS: context-id(32) {length(32) flags(32)}+
//! ```
//!
//! Both options travel as [`ClientOption::Other`] and their replies as [`ReplyBody::Other`]:
//! this module gives their payloads a type, both ways (a client's query and a server's answer).

use super::handshake::{ClientOption, ReplyBody};
use super::{be32, utf8, WireError, MAX_NAME_LEN};

/// `NBD_OPT_LIST_META_CONTEXT`.
pub const OPT_LIST_META_CONTEXT: u32 = 9;
/// `NBD_OPT_SET_META_CONTEXT`.
pub const OPT_SET_META_CONTEXT: u32 = 10;
/// `NBD_REP_META_CONTEXT`.
pub const REP_META_CONTEXT: u32 = 4;
/// The one context the spec defines: which extents are allocated.
pub const BASE_ALLOCATION: &str = "base:allocation";

/// Status flags of `base:allocation` extents (`NBD_STATE_*`).
pub mod state {
    /// Not allocated in the backend (a hole).
    pub const HOLE: u32 = 1 << 0;
    /// Reads as zeroes.
    pub const ZERO: u32 = 1 << 1;
}

/// The payload of `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaContextQuery {
    pub export: String,
    pub queries: Vec<String>,
}

impl MetaContextQuery {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.export.len() as u32).to_be_bytes());
        out.extend_from_slice(self.export.as_bytes());
        out.extend_from_slice(&(self.queries.len() as u32).to_be_bytes());
        for q in &self.queries {
            out.extend_from_slice(&(q.len() as u32).to_be_bytes());
            out.extend_from_slice(q.as_bytes());
        }
    }

    /// The option carrying this query (`option` is one of the two `OPT_*_META_CONTEXT`).
    pub fn to_option(&self, option: u32) -> ClientOption {
        let mut data = Vec::new();
        self.encode(&mut data);
        ClientOption::Other { option, data }
    }

    /// Decodes the complete payload of the option (its length came in the option header, which
    /// bounds it by [`super::MAX_OPTION_LEN`]).
    pub fn decode(d: &[u8]) -> Result<MetaContextQuery, WireError> {
        let mut at = 0;
        let export = string(d, &mut at, "meta context export name")?;
        let n = word(d, &mut at, "meta context query count")? as usize;
        // Every query takes at least its 4-byte length: a count beyond that is a lie, and
        // the vector is never sized from it.
        if n > (d.len() - at) / 4 {
            return Err(WireError::BadValue {
                what: "meta context query count",
                value: n as u64,
            });
        }
        let mut queries = Vec::with_capacity(n);
        for _ in 0..n {
            queries.push(string(d, &mut at, "meta context query")?);
        }
        if at != d.len() {
            return Err(WireError::BadLength {
                what: "meta context option",
                len: d.len() as u64,
            });
        }
        Ok(MetaContextQuery { export, queries })
    }
}

fn word(d: &[u8], at: &mut usize, what: &'static str) -> Result<u32, WireError> {
    if d.len() < *at + 4 {
        return Err(WireError::BadLength {
            what,
            len: d.len() as u64,
        });
    }
    let v = be32(d, *at);
    *at += 4;
    Ok(v)
}

fn string(d: &[u8], at: &mut usize, what: &'static str) -> Result<String, WireError> {
    let n = word(d, at, what)? as usize;
    if n > MAX_NAME_LEN {
        return Err(WireError::TooLong {
            what,
            len: n as u64,
            max: MAX_NAME_LEN as u64,
        });
    }
    if d.len() - *at < n {
        return Err(WireError::BadLength {
            what,
            len: n as u64,
        });
    }
    let s = utf8(&d[*at..*at + n], what)?;
    *at += n;
    Ok(s)
}

/// One `NBD_REP_META_CONTEXT`: a context the server selected, and the id its block status
/// chunks will carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaContext {
    pub id: u32,
    pub name: String,
}

impl MetaContext {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id.to_be_bytes());
        out.extend_from_slice(self.name.as_bytes());
    }

    /// The reply body carrying it.
    pub fn to_reply(&self) -> ReplyBody {
        let mut data = Vec::new();
        self.encode(&mut data);
        ReplyBody::Other {
            reply: REP_META_CONTEXT,
            data,
        }
    }

    /// Decodes the data of an `NBD_REP_META_CONTEXT` reply.
    pub fn decode(d: &[u8]) -> Result<MetaContext, WireError> {
        if d.len() < 4 || d.len() - 4 > MAX_NAME_LEN {
            return Err(WireError::BadLength {
                what: "NBD_REP_META_CONTEXT",
                len: d.len() as u64,
            });
        }
        Ok(MetaContext {
            id: be32(d, 0),
            name: utf8(&d[4..], "meta context name")?,
        })
    }
}

/// One block status descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Bytes it covers (never zero).
    pub length: u32,
    /// `NBD_STATE_*` for `base:allocation`; context-defined otherwise.
    pub flags: u32,
}

const EXTENT_LEN: usize = 8;

/// The payload of an `NBD_REPLY_TYPE_BLOCK_STATUS` chunk, borrowed from the receive buffer:
/// its extents are read on demand, so a hostile length costs no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockStatus<'a> {
    pub context_id: u32,
    descriptors: &'a [u8],
}

impl<'a> BlockStatus<'a> {
    /// Encodes a chunk payload (context id and descriptors).
    pub fn encode(context_id: u32, extents: &[Extent], out: &mut Vec<u8>) {
        out.extend_from_slice(&context_id.to_be_bytes());
        for e in extents {
            out.extend_from_slice(&e.length.to_be_bytes());
            out.extend_from_slice(&e.flags.to_be_bytes());
        }
    }

    /// Validates a complete chunk payload: a context id and one or more descriptors, none of
    /// length zero.
    pub fn decode(p: &'a [u8]) -> Result<BlockStatus<'a>, WireError> {
        if p.len() < 4 + EXTENT_LEN || !(p.len() - 4).is_multiple_of(EXTENT_LEN) {
            return Err(WireError::BadLength {
                what: "NBD_REPLY_TYPE_BLOCK_STATUS",
                len: p.len() as u64,
            });
        }
        let bs = BlockStatus {
            context_id: be32(p, 0),
            descriptors: &p[4..],
        };
        if bs.extents().any(|e| e.length == 0) {
            return Err(WireError::BadValue {
                what: "block status extent length",
                value: 0,
            });
        }
        Ok(bs)
    }

    pub fn len(&self) -> usize {
        self.descriptors.len() / EXTENT_LEN
    }

    pub fn is_empty(&self) -> bool {
        self.descriptors.is_empty()
    }

    pub fn extents(&self) -> impl Iterator<Item = Extent> + 'a {
        self.descriptors.chunks_exact(EXTENT_LEN).map(|c| Extent {
            length: be32(c, 0),
            flags: be32(c, 4),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_meta_context_matches_the_spec_layout() {
        let q = MetaContextQuery {
            export: "ab".into(),
            queries: vec![BASE_ALLOCATION.into()],
        };
        let mut b = Vec::new();
        q.encode(&mut b);
        let mut want = vec![0, 0, 0, 2, b'a', b'b', 0, 0, 0, 1, 0, 0, 0, 15];
        want.extend_from_slice(b"base:allocation");
        assert_eq!(b, want);
        assert_eq!(MetaContextQuery::decode(&b).unwrap(), q);
        // A count no payload could hold, trailing bytes, a short string: refused.
        assert!(MetaContextQuery::decode(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]).is_err());
        let mut long = b.clone();
        long.push(0);
        assert!(MetaContextQuery::decode(&long).is_err());
        assert!(MetaContextQuery::decode(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn block_status_chunks() {
        let ext = [
            Extent {
                length: 4096,
                flags: 0,
            },
            Extent {
                length: 1 << 20,
                flags: state::HOLE | state::ZERO,
            },
        ];
        let mut p = Vec::new();
        BlockStatus::encode(7, &ext, &mut p);
        let bs = BlockStatus::decode(&p).unwrap();
        assert_eq!(bs.context_id, 7);
        assert_eq!(bs.extents().collect::<Vec<_>>(), ext);
        assert!(BlockStatus::decode(&p[..4]).is_err(), "no descriptor");
        assert!(BlockStatus::decode(&p[..p.len() - 1]).is_err());
        let mut zero = Vec::new();
        BlockStatus::encode(
            1,
            &[Extent {
                length: 0,
                flags: 0,
            }],
            &mut zero,
        );
        assert!(BlockStatus::decode(&zero).is_err());
        let m = MetaContext {
            id: 3,
            name: BASE_ALLOCATION.into(),
        };
        let ReplyBody::Other { reply, data } = m.to_reply() else {
            unreachable!()
        };
        assert_eq!(reply, REP_META_CONTEXT);
        assert_eq!(MetaContext::decode(&data).unwrap(), m);
        assert!(MetaContext::decode(&[0, 0, 1]).is_err());
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        fn text() -> impl Strategy<Value = String> {
            "[a-zA-Z0-9 :/_.\u{e9}-]{0,40}"
        }

        proptest! {
            #[test]
            fn query_round_trip(export in text(), queries in prop::collection::vec(text(), 0..5)) {
                let q = MetaContextQuery { export, queries };
                let ClientOption::Other { option, data } = q.to_option(OPT_SET_META_CONTEXT) else {
                    return Err(TestCaseError::fail("not Other"));
                };
                prop_assert_eq!(option, OPT_SET_META_CONTEXT);
                prop_assert_eq!(MetaContextQuery::decode(&data).unwrap(), q);
                for cut in 0..data.len() {
                    prop_assert!(MetaContextQuery::decode(&data[..cut]).is_err());
                }
            }

            #[test]
            fn context_round_trip(id in any::<u32>(), name in text()) {
                let m = MetaContext { id, name };
                let mut b = Vec::new();
                m.encode(&mut b);
                prop_assert_eq!(MetaContext::decode(&b).unwrap(), m);
            }

            #[test]
            fn block_status_round_trip(id in any::<u32>(),
                                       ext in prop::collection::vec((1u32.., any::<u32>()), 1..20)) {
                let ext: Vec<Extent> =
                    ext.into_iter().map(|(length, flags)| Extent { length, flags }).collect();
                let mut p = Vec::new();
                BlockStatus::encode(id, &ext, &mut p);
                let bs = BlockStatus::decode(&p).unwrap();
                prop_assert_eq!(bs.context_id, id);
                prop_assert_eq!(bs.len(), ext.len());
                prop_assert_eq!(bs.extents().collect::<Vec<_>>(), ext);
            }

            #[test]
            fn decoders_never_panic(b in prop::collection::vec(any::<u8>(), 0..200)) {
                if let Ok(q) = MetaContextQuery::decode(&b) {
                    let mut again = Vec::new();
                    q.encode(&mut again);
                    prop_assert_eq!(again, b.clone());
                }
                let _ = MetaContext::decode(&b);
                if let Ok(bs) = BlockStatus::decode(&b) {
                    prop_assert_eq!(bs.extents().count() * 8 + 4, b.len());
                    prop_assert!(bs.extents().all(|e| e.length > 0));
                }
            }
        }
    }
}
