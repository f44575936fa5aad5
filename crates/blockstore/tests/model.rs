//! Random operations against a `Vec<u8>` model, for every kind of store: reads must return
//! what the model holds, allocation must cover every written byte, holes must read as zeros.

use proptest::prelude::*;
use sanbench_blockstore::{BlockStore, CHUNK};

const SIZE: u64 = 5 * CHUNK as u64 + 1000;

#[derive(Clone, Debug)]
enum Op {
    Write { off: u64, len: usize, seed: u8 },
    Read { off: u64, len: usize },
    Zero { off: u64, len: u64, keep: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..SIZE).prop_flat_map(|off| (Just(off), 0..=(SIZE - off).min(3 * CHUNK as u64)));
    prop_oneof![
        (range.clone(), any::<u8>()).prop_map(|((off, len), seed)| Op::Write {
            off,
            len: len as usize,
            seed
        }),
        range.clone().prop_map(|(off, len)| Op::Read {
            off,
            len: len as usize
        }),
        (range, any::<bool>()).prop_map(|((off, len), keep)| Op::Zero { off, len, keep }),
    ]
}

fn stores() -> Vec<(&'static str, BlockStore, Option<tempfile::NamedTempFile>)> {
    let f = tempfile::NamedTempFile::new().unwrap();
    let file = BlockStore::file(f.reopen().unwrap(), SIZE, false).unwrap();
    vec![
        ("ram", BlockStore::ram(SIZE, false).unwrap(), None),
        ("prealloc", BlockStore::ram(SIZE, true).unwrap(), None),
        ("file", file, Some(f)),
    ]
}

fn check_store(name: &str, s: &BlockStore, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut model = vec![0u8; SIZE as usize];
    // Bytes that must be reported as data: written or zeroed with keep, not trimmed since.
    let mut data = vec![false; SIZE as usize];
    for op in ops {
        match *op {
            Op::Write { off, len, seed } => {
                let buf: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8) | 1).collect();
                s.write(off, &buf, false).unwrap();
                model[off as usize..off as usize + len].copy_from_slice(&buf);
                data[off as usize..off as usize + len].fill(true);
            }
            Op::Read { off, len } => {
                let mut got = Vec::new();
                s.read_append(off, len, &mut got).unwrap();
                prop_assert_eq!(
                    &got[..],
                    &model[off as usize..off as usize + len],
                    "{}",
                    name
                );
            }
            Op::Zero { off, len, keep } => {
                s.zero(off, len, keep).unwrap();
                model[off as usize..(off + len) as usize].fill(0);
                data[off as usize..(off + len) as usize].fill(keep);
            }
        }
    }
    // The allocation map: every byte with data is reported mapped; every hole reads as zeros.
    let mut pos = 0;
    while pos < SIZE {
        let (mapped, end) = s.mapped(pos, SIZE - pos);
        prop_assert!(end > pos && end <= SIZE, "{}: {} -> {}", name, pos, end);
        // A file system may report zeroed (unwritten) extents as holes: the spec allows a
        // hole wherever the bytes read as zeros, which is checked for every store.
        if !mapped && name != "file" {
            prop_assert!(
                !data[pos as usize..end as usize].iter().any(|&d| d),
                "{}: data in hole {}..{}",
                name,
                pos,
                end
            );
        }
        if !mapped {
            prop_assert!(model[pos as usize..end as usize].iter().all(|&b| b == 0));
        }
        pos = end;
    }
    if name == "ram" {
        let chunks = (0..SIZE as usize)
            .step_by(CHUNK)
            .filter(|&c| data[c..(c + CHUNK).min(SIZE as usize)].iter().any(|&d| d))
            .count() as u64;
        // Whole chunks trimmed leave no allocation; partly trimmed ones stay.
        prop_assert!(s.allocated_bytes() >= chunks * CHUNK as u64, "{}", name);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn stores_behave_like_a_vec(ops in prop::collection::vec(op(), 1..40)) {
        for (name, s, _keep) in stores() {
            check_store(name, &s, &ops)?;
        }
    }
}
