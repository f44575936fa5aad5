//! Round trips for every message type, and a stable-toolchain stand-in for the fuzz targets:
//! random and truncated buffers through every decoder, which must never panic and must never
//! claim more bytes than they were given.

use proptest::prelude::*;

use super::handshake::*;
use super::meta::*;
use super::transmission::*;
use super::{Parsed, MAX_PAYLOAD};

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 /_.\u{e9}-]{0,40}"
}

fn go_request() -> impl Strategy<Value = GoRequest> {
    (name(), prop::collection::vec(any::<u16>(), 0..6))
        .prop_map(|(name, requests)| GoRequest { name, requests })
}

fn meta_request() -> impl Strategy<Value = MetaContextRequest> {
    (name(), prop::collection::vec(name(), 0..4))
        .prop_map(|(export, queries)| MetaContextRequest { export, queries })
}

fn client_option() -> impl Strategy<Value = ClientOption> {
    prop_oneof![
        name().prop_map(ClientOption::ExportName),
        Just(ClientOption::Abort),
        Just(ClientOption::List),
        go_request().prop_map(ClientOption::Info),
        go_request().prop_map(ClientOption::Go),
        Just(ClientOption::StructuredReply),
        meta_request().prop_map(ClientOption::ListMetaContext),
        meta_request().prop_map(ClientOption::SetMetaContext),
        (11u32.., prop::collection::vec(any::<u8>(), 0..64))
            .prop_map(|(option, data)| ClientOption::Other { option, data }),
    ]
}

fn info() -> impl Strategy<Value = Info> {
    prop_oneof![
        (any::<u64>(), any::<u16>()).prop_map(|(size, flags)| Info::Export { size, flags }),
        name().prop_map(Info::Name),
        name().prop_map(Info::Description),
        (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(min, preferred, max_payload)| {
            Info::BlockSize {
                min,
                preferred,
                max_payload,
            }
        }),
        (4u16.., prop::collection::vec(any::<u8>(), 0..32))
            .prop_map(|(info, data)| Info::Other { info, data }),
    ]
}

fn reply_body() -> impl Strategy<Value = ReplyBody> {
    prop_oneof![
        Just(ReplyBody::Ack),
        (name(), name()).prop_map(|(name, details)| ReplyBody::Server { name, details }),
        info().prop_map(ReplyBody::Info),
        (any::<u32>(), name()).prop_map(|(c, message)| ReplyBody::Error {
            code: c | rep::ERR_BIT,
            message
        }),
        (any::<u32>(), name()).prop_map(|(id, name)| ReplyBody::MetaContext { id, name }),
        (5u32..0x8000_0000, prop::collection::vec(any::<u8>(), 0..32))
            .prop_map(|(reply, data)| ReplyBody::Other { reply, data }),
    ]
}

/// Every strict prefix of a valid encoding must be `Incomplete`, never an error.
fn check_prefixes<T: std::fmt::Debug>(
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> super::DecodeResult<T>,
) -> Result<(), TestCaseError> {
    for cut in 0..bytes.len() {
        match decode(&bytes[..cut]) {
            Ok(Parsed::Incomplete { needed }) => prop_assert!(needed > cut),
            other => prop_assert!(false, "prefix {cut}: {other:?}"),
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn greeting_round_trip(flags in any::<u16>()) {
        let mut b = Vec::new();
        Greeting { flags }.encode(&mut b);
        prop_assert_eq!(Greeting::decode(&b).unwrap(), Parsed::Done { value: Greeting { flags }, len: b.len() });
        check_prefixes(&b, Greeting::decode)?;
    }

    #[test]
    fn client_flags_round_trip(flags in 0u32..4) {
        let mut b = Vec::new();
        encode_client_flags(flags, &mut b);
        prop_assert_eq!(decode_client_flags(&b).unwrap(), Parsed::Done { value: flags, len: 4 });
    }

    #[test]
    fn option_round_trip(o in client_option(), tail in prop::collection::vec(any::<u8>(), 0..8)) {
        let mut b = Vec::new();
        o.encode(&mut b);
        let len = b.len();
        check_prefixes(&b, ClientOption::decode)?;
        b.extend_from_slice(&tail);
        prop_assert_eq!(ClientOption::decode(&b).unwrap(), Parsed::Done { value: o, len });
    }

    #[test]
    fn option_reply_round_trip(option in any::<u32>(), body in reply_body()) {
        let r = OptionReply { option, body };
        let mut b = Vec::new();
        r.encode(&mut b);
        check_prefixes(&b, OptionReply::decode)?;
        prop_assert_eq!(OptionReply::decode(&b).unwrap(), Parsed::Done { value: r, len: b.len() });
    }

    #[test]
    fn export_name_reply_round_trip(size in any::<u64>(), flags in any::<u16>(), nz in any::<bool>()) {
        let r = ExportNameReply { size, flags };
        let mut b = Vec::new();
        r.encode(nz, &mut b);
        prop_assert_eq!(ExportNameReply::decode(&b, nz).unwrap(), Parsed::Done { value: r, len: b.len() });
    }

    #[test]
    fn request_round_trip(flags in any::<u16>(), cmd in any::<u16>(), cookie in any::<u64>(),
                          offset in any::<u64>(), len in any::<u32>()) {
        let r = Request { flags, cmd, cookie, offset, len };
        let mut b = Vec::new();
        r.encode(&mut b);
        check_prefixes(&b, Request::decode)?;
        prop_assert_eq!(Request::decode(&b).unwrap(), Parsed::Done { value: r, len: REQUEST_LEN });
    }

    #[test]
    fn simple_reply_round_trip(error in any::<u32>(), cookie in any::<u64>()) {
        let r = ReplyHeader::Simple { error, cookie };
        let mut b = Vec::new();
        r.encode(&mut b);
        check_prefixes(&b, ReplyHeader::decode)?;
        prop_assert_eq!(ReplyHeader::decode(&b).unwrap(), Parsed::Done { value: r, len: b.len() });
    }

    #[test]
    fn chunk_round_trip(flags in any::<u16>(), cookie in any::<u64>(), which in 0u8..6,
                        offset in any::<u64>(), n in 1u32.., error in 1u32..,
                        data in prop::collection::vec(any::<u8>(), 0..300)) {
        let c = match which {
            0 => Chunk::None,
            1 => Chunk::OffsetData { offset, data: &data },
            2 => Chunk::OffsetHole { offset, size: n },
            3 => Chunk::Error { error, message: &data },
            4 => Chunk::ErrorOffset { error, message: &data, offset },
            _ => Chunk::Other { kind: chunk::BLOCK_STATUS, payload: &data },
        };
        let mut b = Vec::new();
        c.encode(flags, cookie, &mut b);
        check_prefixes(&b[..CHUNK_HEADER_LEN], ReplyHeader::decode)?;
        let (h, used) = ReplyHeader::decode(&b).unwrap().done().unwrap();
        let ReplyHeader::Structured { flags: f, kind, cookie: k, len } = h else {
            return Err(TestCaseError::fail("not structured"));
        };
        prop_assert_eq!((f, kind, k, len as usize), (flags, c.kind(), cookie, b.len() - used));
        prop_assert_eq!(Chunk::decode(kind, &b[used..]).unwrap(), c);
    }

    #[test]
    fn block_status_round_trip(context in any::<u32>(), flags in any::<u16>(), cookie in any::<u64>(),
                               ext in prop::collection::vec((1u32.., any::<u32>()), 1..20)) {
        let s = BlockStatus {
            context,
            extents: ext.into_iter().map(|(len, flags)| Extent { len, flags }).collect(),
        };
        let mut b = Vec::new();
        s.encode(flags, cookie, &mut b);
        let (h, n) = ReplyHeader::decode(&b).unwrap().done().unwrap();
        prop_assert_eq!(h, ReplyHeader::Structured { flags, kind: chunk::BLOCK_STATUS, cookie,
                                                     len: (b.len() - n) as u32 });
        prop_assert_eq!(BlockStatus::decode(&b[n..]).unwrap(), s);
    }

    #[test]
    fn decoders_never_panic(b in prop::collection::vec(any::<u8>(), 0..200), kind in any::<u16>()) {
        fuzz_all(&b, kind);
    }
}

/// Feeds one buffer to every decoder; used by the random-buffer test and mirrors the fuzz
/// targets.
fn fuzz_all(b: &[u8], kind: u16) {
    let within = |len: usize| assert!(len <= b.len());
    if let Ok(Parsed::Done { len, .. }) = Greeting::decode(b) {
        within(len)
    }
    if let Ok(Parsed::Done { len, .. }) = decode_client_flags(b) {
        within(len)
    }
    if let Ok(Parsed::Done { len, .. }) = ClientOption::decode(b) {
        within(len)
    }
    if let Ok(Parsed::Done { len, .. }) = OptionReply::decode(b) {
        within(len)
    }
    for nz in [false, true] {
        if let Ok(Parsed::Done { len, .. }) = ExportNameReply::decode(b, nz) {
            within(len)
        }
    }
    if let Ok(Parsed::Done { len, .. }) = Request::decode(b) {
        within(len)
    }
    if let Ok(Parsed::Done { value, len }) = ReplyHeader::decode(b) {
        within(len);
        if let ReplyHeader::Structured { len: n, .. } = value {
            assert!(n <= MAX_PAYLOAD + 8);
        }
    }
    let _ = Chunk::decode(kind, b);
    if let Ok(m) = MetaContextRequest::decode(b) {
        let mut again = Vec::new();
        m.encode(&mut again);
        assert_eq!(&again[..], b);
    }
    if let Ok(s) = BlockStatus::decode(b) {
        assert!(!s.extents.is_empty() && s.extents.iter().all(|e| e.len > 0));
    }
}

/// Thousands of random, magic-prefixed and truncated buffers through every decoder, so that the
/// stable toolchain in CI covers what the fuzz targets cover.
#[test]
fn random_and_truncated_buffers() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let magics: [&[u8]; 6] = [
        &super::NBDMAGIC.to_be_bytes(),
        &super::IHAVEOPT.to_be_bytes(),
        &super::REPLY_MAGIC.to_be_bytes(),
        &super::REQUEST_MAGIC.to_be_bytes(),
        &super::SIMPLE_REPLY_MAGIC.to_be_bytes(),
        &super::STRUCTURED_REPLY_MAGIC.to_be_bytes(),
    ];
    for i in 0..5000 {
        let len = (next() % 300) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let m = magics[i % magics.len()];
        if i % 2 == 0 && b.len() >= m.len() {
            b[..m.len()].copy_from_slice(m);
        }
        let kind = next() as u16;
        for cut in [b.len(), b.len() / 2, b.len().min(20)] {
            fuzz_all(&b[..cut], kind);
            fuzz_all(&b[..cut], kind & 0x8003);
        }
    }
}
