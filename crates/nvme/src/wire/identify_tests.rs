use super::*;

#[test]
fn ctrl_round_trip() {
    let c = IdCtrl {
        vid: 0x1b36,
        sn: "sb0001".into(),
        mn: "sanbench".into(),
        fr: "0.1".into(),
        mdts: 5,
        cmic: 0x0b,
        cntlid: 1,
        ver: 0x10300,
        oaes: 1 << 11,
        cntrltype: CNTRLTYPE_IO,
        aerl: 3,
        kas: 1,
        anatt: 10,
        anacap: 0x5f,
        anagrpmax: 1,
        nanagrpid: 1,
        maxcmd: 128,
        nn: 1,
        oncs: 0x0c,
        vwc: 1,
        sgls: 1,
        mnan: 1,
        subnqn: "nqn.2026-11.io.sanbench:ram".into(),
        ioccsz: 4 + 512,
        iorcsz: 1,
        icdoff: 0,
        msdbd: 1,
    };
    assert_eq!(IdCtrl::decode(&c.encode()).unwrap(), c);
    assert!(IdCtrl::decode(&[0; 100]).is_err());
}

#[test]
fn ns_round_trip() {
    let n = IdNs {
        nsze: 1 << 21,
        ncap: 1 << 21,
        nuse: 0,
        nsfeat: 1,
        lbads: 9,
        dlfeat: 1,
        nmic: 1,
        anagrpid: 1,
        nguid: [3; 16],
    };
    let d = IdNs::decode(&n.encode()).unwrap();
    assert_eq!(d, n);
    assert_eq!(d.block_size(), 512);
}

/// The multipath and ANA fields at the offsets of Linux's `struct nvme_id_ctrl` (cmic 76,
/// oaes 92, anatt 342, anacap 343, anagrpmax 344, nanagrpid 348, mnan 540) and
/// `struct nvme_id_ns` (nmic 30, anagrpid 92).
#[test]
fn ana_fields_lie_where_linux_reads_them() {
    let c = IdCtrl {
        cmic: 0x0b,
        oaes: 0x0800,
        anatt: 10,
        anacap: 0x5f,
        anagrpmax: 0x0102_0304,
        nanagrpid: 0x0506_0708,
        mnan: 0x090a_0b0c,
        ..IdCtrl::default()
    }
    .encode();
    assert_eq!(c[76], 0x0b);
    assert_eq!(&c[92..96], &[0, 8, 0, 0]);
    assert_eq!((c[342], c[343]), (10, 0x5f));
    assert_eq!(&c[344..348], &[4, 3, 2, 1]);
    assert_eq!(&c[348..352], &[8, 7, 6, 5]);
    assert_eq!(&c[540..544], &[0xc, 0xb, 0xa, 9]);
    let n = IdNs {
        nmic: 1,
        anagrpid: 0x0102_0304,
        ..IdNs::default()
    }
    .encode();
    assert_eq!(n[30], 1);
    assert_eq!(&n[92..96], &[4, 3, 2, 1]);
}

/// FLBAS selects among up to 64 formats: bits 3:0 and, above 16 formats, bits 6:5.
#[test]
fn the_format_in_use_may_be_above_16() {
    let mut b = vec![0u8; IDENTIFY_LEN];
    b[25] = 63; // NLBAF: 64 formats
    for (flbas, index) in [
        (0x00u8, 0usize),
        (0x03, 3),
        (0x0f, 15),
        (0x20, 16),
        (0x6f, 63),
    ] {
        b[26] = flbas | 0x10; // bit 4 (metadata at the end of the data) is not the index
        b.iter_mut()
            .skip(130)
            .step_by(4)
            .take(64)
            .for_each(|x| *x = 0);
        b[128 + 4 * index + 2] = 12;
        assert_eq!(IdNs::decode(&b).unwrap().lbads, 12, "FLBAS {flbas:#x}");
    }
}

#[test]
fn lists() {
    assert_eq!(decode_ns_list(&encode_ns_list(&[1, 2, 5], 1)), vec![2, 5]);
    let descs = vec![
        NsDesc {
            nidt: nidt::NGUID,
            nid: vec![9; 16],
        },
        NsDesc {
            nidt: nidt::CSI,
            nid: vec![0],
        },
    ];
    assert_eq!(decode_ns_descs(&encode_ns_descs(&descs)).unwrap(), descs);
    assert!(decode_ns_descs(&[2, 16, 0, 0, 1]).is_err());
}

mod props {
    use super::super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// Printable ASCII of at most `n` characters not ending in a space: what a space-padded
    /// ASCII field (SN, MN, FR) holds and reads back unchanged.
    fn ascii(n: usize) -> impl Strategy<Value = String> {
        proptest::string::string_regex(&format!("([ -~]{{0,{}}}[!-~])?", n - 1)).unwrap()
    }

    /// An NQN field's text: anything without NUL up to 255 bytes.
    fn nqn() -> impl Strategy<Value = String> {
        prop_oneof!["[^\\x00]{0,63}", "[ -~]{250,255}"]
    }

    fn id_ctrl() -> impl Strategy<Value = IdCtrl> {
        (
            (any::<u16>(), ascii(20), ascii(40), ascii(8), any::<u8>()),
            (
                any::<u16>(),
                any::<u32>(),
                any::<u8>(),
                any::<u8>(),
                any::<u16>(),
            ),
            (
                any::<u16>(),
                any::<u32>(),
                any::<u16>(),
                any::<u8>(),
                any::<u32>(),
            ),
            (nqn(), any::<u32>(), any::<u32>(), any::<u16>(), any::<u8>()),
            (
                any::<u8>(),
                any::<u32>(),
                any::<(u8, u8)>(),
                any::<(u32, u32)>(),
                any::<u32>(),
            ),
        )
            .prop_map(
                |(
                    (vid, sn, mn, fr, mdts),
                    (cntlid, ver, cntrltype, aerl, kas),
                    (maxcmd, nn, oncs, vwc, sgls),
                    (subnqn, ioccsz, iorcsz, icdoff, msdbd),
                    (cmic, oaes, (anatt, anacap), (anagrpmax, nanagrpid), mnan),
                )| IdCtrl {
                    vid,
                    sn,
                    mn,
                    fr,
                    mdts,
                    cmic,
                    cntlid,
                    ver,
                    oaes,
                    cntrltype,
                    aerl,
                    kas,
                    anatt,
                    anacap,
                    anagrpmax,
                    nanagrpid,
                    maxcmd,
                    nn,
                    oncs,
                    vwc,
                    sgls,
                    mnan,
                    subnqn,
                    ioccsz,
                    iorcsz,
                    icdoff,
                    msdbd,
                },
            )
    }

    fn id_ns() -> impl Strategy<Value = IdNs> {
        (
            any::<(u64, u64, u64)>(),
            any::<(u8, u8, u8)>(),
            any::<[u8; 16]>(),
            any::<(u8, u32)>(),
        )
            .prop_map(
                |((nsze, ncap, nuse), (nsfeat, lbads, dlfeat), nguid, (nmic, anagrpid))| IdNs {
                    nsze,
                    ncap,
                    nuse,
                    nsfeat,
                    lbads,
                    dlfeat,
                    nmic,
                    anagrpid,
                    nguid,
                },
            )
    }

    fn ns_desc() -> impl Strategy<Value = NsDesc> {
        (1u8..=255, vec(any::<u8>(), 0..=255)).prop_map(|(nidt, nid)| NsDesc { nidt, nid })
    }

    proptest! {
        /// decode(encode(v)) == v, and the page decodes to what re-encodes byte for byte.
        #[test]
        fn ctrl_round_trip_prop(c in id_ctrl()) {
            let b = c.encode();
            prop_assert_eq!(b.len(), IDENTIFY_LEN);
            let d = IdCtrl::decode(&b).unwrap();
            prop_assert_eq!(&d, &c);
            prop_assert_eq!(d.encode(), b);
        }

        #[test]
        fn ns_round_trip_prop(n in id_ns()) {
            let b = n.encode();
            let d = IdNs::decode(&b).unwrap();
            prop_assert_eq!(&d, &n);
            prop_assert_eq!(d.encode(), b);
        }

        /// Any page: what IdNs keeps of it (the LBA format FLBAS selects among 64) survives
        /// a re-encoding, which names it as format 0.
        #[test]
        fn ns_from_any_page(b in vec(any::<u8>(), IDENTIFY_LEN)) {
            let d = IdNs::decode(&b).unwrap();
            prop_assert_eq!(IdNs::decode(&d.encode()).unwrap(), d);
        }

        /// The list holds the NSIDs above `after`, in the order given, up to 1024.
        #[test]
        fn ns_list_round_trip(ids in vec(any::<u32>(), 0..1100), after in prop_oneof![Just(0u32), any::<u32>()]) {
            let b = encode_ns_list(&ids, after);
            prop_assert_eq!(b.len(), IDENTIFY_LEN);
            let want: Vec<u32> = ids.iter().copied().filter(|&n| n > after).take(1024).collect();
            prop_assert_eq!(decode_ns_list(&b), want.clone());
            prop_assert_eq!(encode_ns_list(&want, 0), b);
        }

        #[test]
        fn ns_descs_round_trip(d in vec(ns_desc(), 0..16)) {
            let b = encode_ns_descs(&d);
            prop_assert_eq!(b.len(), IDENTIFY_LEN);
            let got = decode_ns_descs(&b).unwrap();
            // Descriptors that do not fit in the page are left out, never cut.
            prop_assert_eq!(&got[..], &d[..got.len()]);
            let used: usize = d.iter().map(|x| 4 + x.nid.len()).sum();
            if used <= IDENTIFY_LEN {
                prop_assert_eq!(got.len(), d.len());
            }
            prop_assert_eq!(encode_ns_descs(&got), b);
        }

        /// Decoders take any bytes without panicking; what the descriptor list decodes from a
        /// page re-encodes to a page that decodes the same.
        #[test]
        fn decoders_never_panic(b in vec(any::<u8>(), 0..4200)) {
            let _ = IdCtrl::decode(&b);
            let _ = IdNs::decode(&b).map(|n| n.block_size());
            let _ = decode_ns_list(&b);
            if let Ok(d) = decode_ns_descs(&b) {
                if b.len() <= IDENTIFY_LEN {
                    prop_assert_eq!(decode_ns_descs(&encode_ns_descs(&d)).unwrap(), d);
                }
            }
        }
    }
}

#[test]
fn nvm_ctrl_limits_round_trip_at_their_offsets() {
    let c = IdCtrlNvm {
        vsl: 1,
        wzsl: 6,
        wusl: 2,
        dmrl: 64,
        dmrsl: 0x0102_0304,
        dmsl: 1 << 40,
    };
    let b = c.encode();
    assert_eq!((b[1], b[3]), (6, 64));
    assert_eq!(b[4..8], 0x0102_0304u32.to_le_bytes());
    assert_eq!(IdCtrlNvm::decode(&b).unwrap(), c);
    // A controller without the page answers with an error; a short buffer is one too.
    assert!(IdCtrlNvm::decode(&b[..16]).is_err());
    assert_eq!(
        IdCtrlNvm::decode(&[0u8; IDENTIFY_LEN]).unwrap(),
        IdCtrlNvm::default()
    );
}
