//! Several threads on one store at once, as several connections are: disjoint writers see
//! exactly their own data; racing writers of the same bytes see torn-but-defined data (every
//! byte one some writer stored); chunk installation races never lose a write.

use std::sync::Arc;

use sanbench_blockstore::{BlockStore, CHUNK};

const THREADS: usize = 6;

#[test]
fn disjoint_writers_racing_to_allocate_the_same_chunks() {
    let size = 64 * CHUNK as u64;
    let s = Arc::new(BlockStore::ram(size, false).unwrap());
    // Each thread owns every THREADS-th 512-byte block, so all threads install the same
    // chunks at the same moments.
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                let block = [t as u8 + 1; 512];
                for b in (t..(size / 512) as usize).step_by(THREADS) {
                    s.write(b as u64 * 512, &block, false).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut all = Vec::new();
    s.read_append(0, size as usize, &mut all).unwrap();
    for (b, block) in all.chunks(512).enumerate() {
        let want = (b % THREADS) as u8 + 1;
        assert!(block.iter().all(|&x| x == want), "block {b}");
    }
    assert_eq!(s.allocated_bytes(), size);
    assert_eq!(s.mapped(0, size), (true, size));
}

#[test]
fn overlapping_writers_readers_and_trims_stay_defined() {
    let size = 8 * CHUNK as u64;
    let s = Arc::new(BlockStore::ram(size, false).unwrap());
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                let fill = [(t as u8 + 1) * 16; 3 * CHUNK];
                let mut buf = Vec::with_capacity(3 * CHUNK);
                for i in 0..200u64 {
                    let off = (i * 7919 + t as u64 * 4099) % (size - fill.len() as u64);
                    match (i + t as u64) % 4 {
                        0 | 1 => s.write(off, &fill, false).unwrap(),
                        2 => s.trim(off, CHUNK as u64).unwrap(),
                        _ => {
                            buf.clear();
                            s.read_append(off, fill.len(), &mut buf).unwrap();
                            // Torn but defined: zeros or some thread's fill byte.
                            assert!(buf.iter().all(|&b| b % 16 == 0 && b / 16 <= THREADS as u8));
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut all = Vec::new();
    s.read_append(0, size as usize, &mut all).unwrap();
    assert!(all.iter().all(|&b| b % 16 == 0 && b / 16 <= THREADS as u8));
}
