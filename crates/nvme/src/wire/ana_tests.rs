use super::*;

fn page() -> AnaLog {
    AnaLog {
        chgcnt: 7,
        groups: vec![
            AnaGroup {
                grpid: 1,
                chgcnt: 7,
                state: AnaState::NonOptimized,
                nsids: vec![1, 2, 5],
            },
            AnaGroup {
                grpid: 9,
                chgcnt: 3,
                state: AnaState::Inaccessible,
                nsids: vec![],
            },
        ],
    }
}

/// The bytes where Linux's `struct nvme_ana_rsp_hdr` and `struct nvme_ana_group_desc` have
/// them: chgcnt at 0, ngrps at 8, then per group grpid, nnsids, chgcnt, state at 16, NSIDs at 32.
#[test]
fn the_page_lies_where_the_specification_puts_it() {
    let b = page().encode(false);
    assert_eq!(b.len(), 16 + 32 + 12 + 32);
    assert_eq!(b.len(), page().len());
    assert_eq!(&b[0..8], &7u64.to_le_bytes());
    assert_eq!(&b[8..10], &2u16.to_le_bytes());
    assert_eq!(&b[16..20], &1u32.to_le_bytes());
    assert_eq!(&b[20..24], &3u32.to_le_bytes());
    assert_eq!(&b[24..32], &7u64.to_le_bytes());
    assert_eq!(b[32], 0x02);
    assert_eq!(&b[48..60], &[1, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0]);
    assert_eq!(&b[60..64], &9u32.to_le_bytes());
    assert_eq!(b[60 + 16], 0x03);
    assert_eq!(AnaLog::decode(&b).unwrap(), page());
}

#[test]
fn groups_only_leaves_the_nsids_out() {
    let b = page().encode(true);
    assert_eq!(b.len(), 16 + 2 * 32);
    let d = AnaLog::decode(&b).unwrap();
    assert!(d.groups.iter().all(|g| g.nsids.is_empty()));
    assert_eq!(d.groups[0].state, AnaState::NonOptimized);
    // By ANAGRPID the state is still found; by NSID alone it is not.
    assert_eq!(d.state_of(1, 5), Some(AnaState::NonOptimized));
    assert_eq!(d.state_of(0, 5), None);
    assert_eq!(page().state_of(0, 5), Some(AnaState::NonOptimized));
    assert_eq!(page().state_of(9, 1), Some(AnaState::Inaccessible));
}

#[test]
fn bad_pages_are_errors() {
    let good = page().encode(false);
    // Cut anywhere inside: the descriptors NGRPS promises are not all there.
    for cut in 0..good.len() {
        assert!(AnaLog::decode(&good[..cut]).is_err(), "cut at {cut}");
    }
    let mut zero_group = good.clone();
    zero_group[16..20].copy_from_slice(&0u32.to_le_bytes());
    assert!(AnaLog::decode(&zero_group).is_err());
    for bad_state in [0u8, 5, 0x0e] {
        let mut b = good.clone();
        b[32] = bad_state;
        assert!(AnaLog::decode(&b).is_err(), "state {bad_state:#x}");
    }
    // Bits 7:4 of the state byte are reserved.
    let mut b = good.clone();
    b[32] = 0xf1;
    assert_eq!(
        AnaLog::decode(&b).unwrap().groups[0].state,
        AnaState::Optimized
    );
    // An NSID count that would run past any buffer.
    let mut huge = good;
    huge[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(AnaLog::decode(&huge).is_err());
}

#[test]
fn states_by_name_and_code() {
    for s in AnaState::ALL {
        assert_eq!(s.name().parse::<AnaState>(), Ok(s));
        assert_eq!(AnaState::from_code(s.code()), Some(s));
    }
    assert!("fast".parse::<AnaState>().unwrap_err().contains("'fast'"));
    assert!(AnaState::Optimized.serves_io() && AnaState::NonOptimized.serves_io());
    assert!(!AnaState::Inaccessible.serves_io() && !AnaState::Change.serves_io());
    assert_eq!(
        AnaLog::max_len(1, 1024),
        16 + 32 + 4096,
        "Linux's buffer for one group"
    );
}

#[test]
fn the_ana_change_event() {
    // Linux: nvme_aer_type (bits 2:0) NVME_AER_NOTICE, nvme_aer_subtype (15:8)
    // NVME_AER_NOTICE_ANA; the log page in 23:16.
    assert_eq!(aen::ana_change(), 0x000c_0302);
    assert_eq!(aen::decode(aen::ana_change()), (2, 3, 0x0c));
}

mod props {
    use super::super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    fn state() -> impl Strategy<Value = AnaState> {
        proptest::sample::select(AnaState::ALL.to_vec())
    }

    fn group() -> impl Strategy<Value = AnaGroup> {
        (1u32.., any::<u64>(), state(), vec(any::<u32>(), 0..40)).prop_map(
            |(grpid, chgcnt, state, nsids)| AnaGroup {
                grpid,
                chgcnt,
                state,
                nsids,
            },
        )
    }

    fn log() -> impl Strategy<Value = AnaLog> {
        (any::<u64>(), vec(group(), 0..12)).prop_map(|(chgcnt, groups)| AnaLog { chgcnt, groups })
    }

    proptest! {
        /// decode(encode(v)) == v, and the bytes re-encode unchanged; with RGO the same
        /// groups come back without NSIDs.
        #[test]
        fn round_trip(l in log()) {
            let b = l.encode(false);
            prop_assert_eq!(b.len(), l.len());
            let d = AnaLog::decode(&b).unwrap();
            prop_assert_eq!(&d, &l);
            prop_assert_eq!(d.encode(false), b);
            let g = AnaLog::decode(&l.encode(true)).unwrap();
            prop_assert_eq!(g.groups.len(), l.groups.len());
            for (a, b) in g.groups.iter().zip(&l.groups) {
                prop_assert!(a.nsids.is_empty());
                prop_assert_eq!((a.grpid, a.chgcnt, a.state), (b.grpid, b.chgcnt, b.state));
            }
        }

        /// A page followed by anything (a host's buffer is as large as the page can be)
        /// decodes to the page.
        #[test]
        fn trailing_bytes_are_not_read(l in log(), tail in vec(any::<u8>(), 0..64)) {
            let mut b = l.encode(false);
            b.extend_from_slice(&tail);
            prop_assert_eq!(AnaLog::decode(&b).unwrap(), l);
        }

        /// Any bytes: an error or a page, never a panic; a page re-encodes to the bytes it
        /// came from (up to the reserved bits).
        #[test]
        fn any_bytes(b in vec(any::<u8>(), 0..600)) {
            if let Ok(l) = AnaLog::decode(&b) {
                prop_assert_eq!(AnaLog::decode(&l.encode(false)).unwrap(), l);
            }
        }
    }
}
