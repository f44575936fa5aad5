use super::*;
use crate::wire::header::{digest_bits, zeroed, CommonHeader, Cqe, Sqe, SQE_LEN};
use crate::wire::status::Status;
use proptest::prelude::*;
use zerocopy::little_endian::{U16, U32};

fn rx(h: bool, d: bool) -> RxConfig {
    RxConfig {
        header_digest: h,
        data_digest: d,
        max_data: 65536,
    }
}

fn tx(h: bool, d: bool, pda: u8) -> TxConfig {
    TxConfig {
        header_digest: h,
        data_digest: d,
        pda,
    }
}

fn capsule(data: &[u8], t: &TxConfig) -> Vec<u8> {
    let mut c: CapsuleCmd = zeroed();
    c.ch = CommonHeader::new(pdu_type::CAPSULE_CMD);
    c.sqe.opcode = 0x01;
    c.sqe.command_id = U16::new(77);
    let mut out = Vec::new();
    encode_pdu(&mut out, &c, data, t);
    out
}

fn parse_all<'a>(buf: &'a [u8], cfg: &RxConfig) -> Result<Pdu<'a>, WireError> {
    match parse_pdu(buf, cfg)? {
        Parsed::Complete { pdu, consumed } => {
            assert_eq!(consumed, buf.len());
            pdu.decode()
        }
        Parsed::Incomplete { needed } => panic!("incomplete, {needed} more"),
    }
}

#[test]
fn capsule_round_trip_every_digest_and_alignment() {
    for (h, d) in [(false, false), (true, false), (false, true), (true, true)] {
        for pda in [0u8, 1, 7, 31] {
            let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
            let b = capsule(&data, &tx(h, d, pda));
            let align = (pda as usize + 1) * 4;
            assert_eq!(b[3] as usize % align, 0);
            match parse_all(&b, &rx(h, d)).unwrap() {
                Pdu::CapsuleCmd(c, got) => {
                    assert_eq!(c.sqe.command_id.get(), 77);
                    assert_eq!(got, &data[..]);
                }
                p => panic!("{p:?}"),
            }
            // Every prefix asks for exactly what is missing, once the header is in.
            for cut in 0..b.len() {
                match parse_pdu(&b[..cut], &rx(h, d)).unwrap() {
                    Parsed::Incomplete { needed } if cut < 8 => assert_eq!(needed, 8 - cut),
                    Parsed::Incomplete { needed } => assert_eq!(needed, b.len() - cut),
                    Parsed::Complete { .. } => panic!("complete at {cut}"),
                }
            }
        }
    }
}

#[test]
fn no_data_pdu_has_no_data_digest() {
    let mut r: CapsuleResp = zeroed();
    r.ch = CommonHeader::new(pdu_type::CAPSULE_RESP);
    r.cqe = Cqe {
        result: 5.into(),
        sq_head: 1.into(),
        sq_id: 0.into(),
        command_id: 3.into(),
        status: 0.into(),
    };
    let mut b = Vec::new();
    assert_eq!(encode_pdu(&mut b, &r, &[], &tx(true, true, 0)), 28);
    assert_eq!(b[1], flags::HDGSTF);
    match parse_all(&b, &rx(true, true)).unwrap() {
        Pdu::CapsuleResp(got) => {
            assert_eq!(got.cqe, r.cqe);
            assert_eq!((got.ch.hlen, got.ch.plen.get()), (24, 28));
        }
        p => panic!("{p:?}"),
    }
}

#[test]
fn digests_are_checked() {
    let b = capsule(&[1, 2, 3, 4], &tx(true, true, 0));
    let mut bad = b.clone();
    bad[10] ^= 1; // inside the SQE: header digest
    assert!(matches!(
        parse_pdu(&bad, &rx(true, true)),
        Err(WireError::HeaderDigest { .. })
    ));
    let mut bad = b.clone();
    bad[72 + 4] ^= 1; // first data byte
    assert!(matches!(
        parse_pdu(&bad, &rx(true, true)),
        Err(WireError::DataDigest { .. })
    ));
    // A digest the receiver did not negotiate (or a missing one) is a header field error.
    assert!(parse_pdu(&b, &rx(false, false)).is_err());
    let plain = capsule(&[1, 2, 3, 4], &tx(false, false, 0));
    assert!(parse_pdu(&plain, &rx(true, false)).is_err());
    assert!(parse_pdu(&plain, &rx(false, true)).is_err());
}

#[test]
fn header_checks() {
    let b = capsule(&[], &tx(false, false, 0));
    let mut bad = b.clone();
    bad[0] = 0x08;
    assert_eq!(
        parse_pdu(&bad, &rx(false, false)),
        Err(WireError::UnknownType { pdu_type: 8 })
    );
    let mut bad = b.clone();
    bad[2] = 24;
    assert!(parse_pdu(&bad, &rx(false, false)).is_err());
    // Oversized: refused from the 8-byte common header alone.
    let mut bad = b[..8].to_vec();
    bad[4..8].copy_from_slice(&(1u32 << 30).to_le_bytes());
    assert!(matches!(
        parse_pdu(&bad, &rx(false, false)),
        Err(WireError::TooLong { .. })
    ));
    // A data offset inside the header.
    let mut d = capsule(&[0; 8], &tx(false, false, 0));
    d[3] = 8;
    assert!(parse_pdu(&d, &rx(false, false)).is_err());
}

#[test]
fn icreq_round_trip_and_checks() {
    let mut r: IcReq = zeroed();
    r.ch = CommonHeader::new(pdu_type::IC_REQ);
    r.hpda = 0;
    r.digest = digest_bits::HDGST_ENABLE | digest_bits::DDGST_ENABLE;
    r.maxr2t = U32::new(0);
    let mut b = Vec::new();
    // Digests never apply to ICReq even when the sender has them on.
    assert_eq!(encode_pdu(&mut b, &r, &[], &tx(true, true, 0)), 128);
    r.ch.plen = U32::new(128);
    assert_eq!(parse_all(&b, &rx(false, false)).unwrap(), Pdu::IcReq(r));
    let mut bad = b.clone();
    bad[8] = 1;
    assert!(parse_all(&bad, &rx(false, false)).is_err());
    let mut bad = b.clone();
    bad[4] = 127;
    assert!(parse_pdu(&bad, &rx(false, false)).is_err());
}

#[test]
fn data_pdu_length_must_match() {
    let mut h: DataHdr = zeroed();
    h.ch = CommonHeader::new(pdu_type::H2C_DATA);
    h.data_length = U32::new(16);
    let mut b = Vec::new();
    encode_pdu(&mut b, &h, &[9; 16], &tx(false, false, 0));
    assert!(matches!(
        parse_all(&b, &rx(false, false)),
        Ok(Pdu::H2cData(_, d)) if d.len() == 16
    ));
    h.data_length = U32::new(15);
    let mut b = Vec::new();
    encode_pdu(&mut b, &h, &[9; 16], &tx(false, false, 0));
    assert!(parse_all(&b, &rx(false, false)).is_err());
}

#[test]
fn term_req_carries_header() {
    let mut t: TermReq = zeroed();
    t.ch = CommonHeader::new(pdu_type::C2H_TERM_REQ);
    t.fes = U16::new(crate::wire::fes::HEADER_DIGEST_ERROR);
    let mut b = Vec::new();
    encode_pdu(&mut b, &t, &[1; 72], &tx(true, true, 3));
    assert_eq!(b.len(), 24 + 72);
    match parse_all(&b, &rx(true, true)).unwrap() {
        Pdu::C2hTermReq(got, d) => {
            assert_eq!(got.fes.get(), 3);
            assert_eq!(d, &[1; 72][..]);
        }
        p => panic!("{p:?}"),
    }
}

proptest! {
    #[test]
    fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400), cfg in 0u8..8) {
        let c = RxConfig { header_digest: cfg & 1 != 0, data_digest: cfg & 2 != 0, max_data: if cfg & 4 != 0 { 64 } else { 1 << 20 } };
        if let Ok(Parsed::Complete { pdu, consumed }) = parse_pdu(&bytes, &c) {
            prop_assert!(consumed <= bytes.len());
            let _ = pdu.decode();
        }
    }

    #[test]
    fn data_round_trip(data in proptest::collection::vec(any::<u8>(), 1..3000), cfg in 0u8..4, pda in 0u8..32) {
        let t = tx(cfg & 1 != 0, cfg & 2 != 0, pda);
        let mut h: DataHdr = zeroed();
        h.ch = CommonHeader::new(pdu_type::C2H_DATA);
        h.ch.flags = flags::LAST_PDU;
        h.data_length = U32::new(data.len() as u32);
        let mut b = Vec::new();
        let n = encode_pdu(&mut b, &h, &data, &t);
        prop_assert_eq!(n, b.len());
        let r = RxConfig { header_digest: t.header_digest, data_digest: t.data_digest, max_data: 4096 };
        match parse_all(&b, &r).unwrap() {
            Pdu::C2hData(got, d) => {
                prop_assert_eq!(d, &data[..]);
                prop_assert_eq!(got.ch.flags & flags::LAST_PDU, flags::LAST_PDU);
            }
            p => prop_assert!(false, "{:?}", p),
        }
    }

    /// A completion entry of any content, its status with the phase tag set as a host sees it,
    /// comes back from a CapsuleResp field for field, and its status as it was sent.
    #[test]
    fn cqe_round_trip(
        (result, sq_head, sq_id, command_id) in any::<(u64, u16, u16, u16)>(),
        code in 0u16..0x800,
        dnr in any::<bool>(),
        phase in any::<bool>(),
        cfg in 0u8..4,
    ) {
        let st = Status { code, dnr };
        let cqe = Cqe {
            result: result.into(),
            sq_head: sq_head.into(),
            sq_id: sq_id.into(),
            command_id: command_id.into(),
            status: (st.to_field() | phase as u16).into(),
        };
        prop_assert_eq!(Cqe::read_from_bytes(cqe.as_bytes()).unwrap(), cqe);
        let mut r: CapsuleResp = zeroed();
        r.ch = CommonHeader::new(pdu_type::CAPSULE_RESP);
        r.cqe = cqe;
        let t = tx(cfg & 1 != 0, cfg & 2 != 0, 0);
        let mut b = Vec::new();
        encode_pdu(&mut b, &r, &[], &t);
        match parse_all(&b, &rx(t.header_digest, t.data_digest)).unwrap() {
            Pdu::CapsuleResp(got) => {
                prop_assert_eq!(got.cqe, cqe);
                prop_assert_eq!(Status::from_field(got.cqe.status.get()), st);
            }
            p => prop_assert!(false, "{:?}", p),
        }
    }

    /// Any 64-byte SQE and any in-capsule data, under every digest setting and alignment.
    #[test]
    fn capsule_cmd_round_trip(
        sqe in proptest::collection::vec(any::<u8>(), SQE_LEN),
        data in proptest::collection::vec(any::<u8>(), 0..600),
        cfg in 0u8..4,
        pda in 0u8..32,
    ) {
        let t = tx(cfg & 1 != 0, cfg & 2 != 0, pda);
        let mut c: CapsuleCmd = zeroed();
        c.ch = CommonHeader::new(pdu_type::CAPSULE_CMD);
        c.sqe = Sqe::read_from_bytes(&sqe).unwrap();
        let mut b = Vec::new();
        encode_pdu(&mut b, &c, &data, &t);
        match parse_all(&b, &rx(t.header_digest, t.data_digest)).unwrap() {
            Pdu::CapsuleCmd(got, d) => {
                prop_assert_eq!(got.sqe.as_bytes(), &sqe[..]);
                prop_assert_eq!(d, &data[..]);
            }
            p => prop_assert!(false, "{:?}", p),
        }
    }

    /// R2T, ICReq and ICResp with any field values the receiver accepts.
    #[test]
    fn control_pdus_round_trip(
        (cid, ttag, off, len) in any::<(u16, u16, u32, u32)>(),
        (pda, digest, word) in (0u8..32, 0u8..4, any::<u32>()),
        cfg in 0u8..4,
    ) {
        let t = tx(cfg & 1 != 0, cfg & 2 != 0, 0);
        let r = rx(t.header_digest, t.data_digest);
        let mut h: R2t = zeroed();
        h.ch = CommonHeader::new(pdu_type::R2T);
        h.command_id = cid.into();
        h.ttag = ttag.into();
        h.r2t_offset = off.into();
        h.r2t_length = len.into();
        let mut b = Vec::new();
        let n = encode_pdu(&mut b, &h, &[], &t);
        h.ch.flags = if t.header_digest { flags::HDGSTF } else { 0 };
        h.ch.plen = (n as u32).into();
        prop_assert_eq!(parse_all(&b, &r).unwrap(), Pdu::R2t(h));

        let mut q: IcReq = zeroed();
        q.ch = CommonHeader::new(pdu_type::IC_REQ);
        q.hpda = pda;
        q.digest = digest;
        q.maxr2t = word.into();
        let mut b = Vec::new();
        encode_pdu(&mut b, &q, &[], &t);
        q.ch.plen = U32::new(128);
        // ICReq/ICResp go before digests are negotiated, whatever the sender has on.
        prop_assert_eq!(parse_all(&b, &rx(false, false)).unwrap(), Pdu::IcReq(q));

        let mut p: IcResp = zeroed();
        p.ch = CommonHeader::new(pdu_type::IC_RESP);
        p.cpda = pda;
        p.digest = digest;
        p.maxh2cdata = word.max(4096).into();
        let mut b = Vec::new();
        encode_pdu(&mut b, &p, &[], &t);
        p.ch.plen = U32::new(128);
        prop_assert_eq!(parse_all(&b, &rx(false, false)).unwrap(), Pdu::IcResp(p));
    }
}
