//! Tests of stamp.rs.

use super::*;
use std::collections::HashSet;

fn pool() -> Vec<u8> {
    let mut p = vec![0u8; POOL + UNIT];
    crate::arena::fill_random(&mut p, 9);
    p
}

#[test]
fn stamps_round_trip_and_reject_damage() {
    let s = Stamp {
        offset: 1 << 40,
        run_id: 0xdead_beef,
        worker: 3,
        unit_len: 512,
        generation: 7,
        seq: 99,
        zero_tail: 0,
    };
    let mut b = [0u8; 64];
    s.encode(&mut b);
    assert_eq!(Stamp::decode(&b), Some(s));
    for i in 0..STAMP_LEN {
        let mut c = b;
        c[i] ^= 0x10;
        assert_eq!(Stamp::decode(&c), None, "byte {i} flipped");
    }
    assert_eq!(Stamp::decode(&[0u8; 4096]), None);
    assert_eq!(inspect(&[0u8; 4096]), Header::Zeros);
    assert_eq!(inspect(&[7u8; 4096]), Header::Foreign);
    let mut c = b;
    c[20] ^= 1;
    assert_eq!(inspect(&c), Header::Damaged);
}

#[test]
fn the_header_crc_is_crc32c() {
    let mut b = [0u8; 32];
    for i in 0..200u8 {
        b[(i % 32) as usize] = b[(i % 32) as usize].wrapping_mul(31).wrapping_add(i);
        assert_eq!(header_crc(&b), crc32c::crc32c(&b));
    }
}

#[test]
fn payloads_check_from_the_stamp_alone() {
    let mut pool = vec![0u8; POOL + UNIT];
    fill_pool(&mut pool, 77);
    for (unit, compress) in [(512usize, 0.0), (4096, 0.0), (512, 30.0), (4096, 50.0)] {
        let spec = DataSpec {
            dedupe_pct: 0.0,
            compress_pct: compress,
        };
        let mut st = Stamper::new(&spec, 77, 2).with_unit(unit);
        let mut buf = vec![0u8; 16384];
        st.fill_gen(&mut buf, 1 << 20, &pool, |off| (off >> 9) as u32 & 63);
        for (k, u) in buf.chunks(unit).enumerate() {
            let s = Stamp::decode(u).expect("stamped");
            assert_eq!(s.offset, (1 << 20) + (k * unit) as u64);
            assert_eq!(s.unit_len as usize, unit);
            assert_eq!(s.generation, ((s.offset >> 9) & 63) as u32);
            assert!(payload_matches(u, &s, &pool), "unit {unit} k {k}");
            // One flipped payload bit anywhere is found.
            for at in [STAMP_LEN, unit / 2, unit - 1] {
                let mut bad = u.to_vec();
                bad[at] ^= 0x20;
                assert!(!payload_matches(&bad, &s, &pool), "flip at {at}");
            }
            // A stamp claiming another generation does not fit this payload.
            let other = Stamp {
                generation: s.generation + 1,
                ..s
            };
            assert!(!payload_matches(u, &other, &pool));
        }
    }
}

#[test]
fn every_unit_is_distinct_and_stamped_with_its_offset() {
    let pool = pool();
    let mut st = Stamper::new(&DataSpec::default(), 42, 1);
    let mut seen = HashSet::new();
    let mut buf = vec![0u8; 64 * 1024];
    for i in 0..200u64 {
        // Rewrite the same offsets: still distinct (the sequence number differs).
        let off = (i % 10) * buf.len() as u64;
        st.fill(&mut buf, off, &pool);
        for (k, u) in buf.chunks(UNIT).enumerate() {
            let s = Stamp::decode(u).expect("stamped");
            assert_eq!(s.offset, off + (k * UNIT) as u64);
            assert_eq!((s.run_id, s.worker, s.seq), (42, 1, i + 1));
            assert!(seen.insert(u.to_vec()));
        }
    }
}

#[test]
fn short_writes_are_one_unit() {
    let pool = pool();
    let mut st = Stamper::new(&DataSpec::default(), 1, 0);
    let mut b = vec![0u8; 512];
    st.fill(&mut b, 4096 * 3 + 512, &pool);
    assert_eq!(Stamp::decode(&b).unwrap().offset, 4096 * 3 + 512);
    // Shorter than a stamp: filled, not stamped, no panic.
    let mut tiny = [0u8; 7];
    st.fill(&mut tiny, 0, &pool);
}

#[test]
fn dedupe_share_holds() {
    let pool = pool();
    let spec = DataSpec {
        dedupe_pct: 50.0,
        compress_pct: 0.0,
    };
    let mut st = Stamper::new(&spec, 5, 0);
    let mut seen = HashSet::new();
    let mut buf = vec![0u8; UNIT];
    let n = 20_000;
    for i in 0..n {
        st.fill(&mut buf, i * UNIT as u64, &pool);
        seen.insert(buf.clone());
    }
    let distinct = seen.len() as f64 / n as f64;
    assert!((distinct - 0.5).abs() < 0.02, "{distinct}");
    // The duplicate block is the same in another worker's stream.
    let mut other = Stamper::new(&spec, 5, 1);
    let mut found = false;
    for i in 0..100 {
        other.fill(&mut buf, i * UNIT as u64, &pool);
        found |= buf[..] == st.dup[..];
    }
    assert!(found);
}

#[test]
fn compressible_tail() {
    let pool = pool();
    let spec = DataSpec {
        dedupe_pct: 0.0,
        compress_pct: 25.0,
    };
    let mut st = Stamper::new(&spec, 5, 0);
    let mut buf = vec![1u8; 2 * UNIT];
    st.fill(&mut buf, 0, &pool);
    for u in buf.chunks(UNIT) {
        assert!(u[3 * UNIT / 4..].iter().all(|&b| b == 0));
        assert!(u[..3 * UNIT / 4].iter().filter(|&&b| b == 0).count() < 64);
    }
}

#[test]
fn same_pool_window_differs_under_another_key() {
    // Two units from one pool must not share 8-byte runs at the same positions.
    let pool = pool();
    let mut a = Stamper::new(&DataSpec::default(), 1, 0);
    let mut x = vec![0u8; UNIT];
    let mut y = vec![0u8; UNIT];
    a.fill(&mut x, 0, &pool);
    a.fill(&mut y, 0, &pool);
    let same_words = x.chunks(8).zip(y.chunks(8)).filter(|(p, q)| p == q).count();
    assert!(same_words < 4, "{same_words}");
}

#[test]
fn spec_validation() {
    assert!(DataSpec {
        dedupe_pct: 101.0,
        compress_pct: 0.0
    }
    .validate()
    .is_err());
    assert!(DataSpec::default().validate().is_ok());
}
