//! Write data that a target cannot deduplicate or compress, and that says where it came from.
//!
//! A write's buffer is cut into units of [`UNIT`] bytes (a shorter transfer is one unit). Each
//! unit starts with a 40-byte [`Stamp`] (the unit's byte offset on the target, the run's id, the
//! worker, a generation and the worker's write sequence number, under a CRC32C), followed by a
//! window of the stream's random pool XORed with a 64-bit key drawn from (run id, worker, offset,
//! sequence number). So no two units a run writes are equal (the stamp differs), no two share a
//! byte run a compressor could match (the key differs), and the cost is one pass over the bytes
//! in cache, the price of a `memcpy`, instead of generating random bytes per write.
//!
//! Data reduction on request ([`DataSpec`], vdbench's dedupratio/compratio, fio's
//! dedupe_percentage/buffer_compress_percentage): with `dedupe_pct`, that share of units is an
//! identical copy of one block derived from the run id alone (the same in every worker and
//! stream); with `compress_pct`, that share of every unit's tail is zeros.
//!
//! The integrity verification reuses the format: a reader that knows the run id, the worker's
//! pool seed and the expected (offset, generation, sequence) recomputes a unit exactly, so a
//! payload check is a comparison, not a hash; [`Stamp::decode`] classifies what it finds.

use serde::{Deserialize, Serialize};

use crate::gen::Rng;

/// Bytes per stamped unit (the granularity of array dedupe and of the stamp).
pub const UNIT: usize = 4096;
/// Bytes of the stamp at the start of each unit.
pub const STAMP_LEN: usize = 40;
/// The stamp's first bytes: "SBK1" (sanbench block, format 1).
pub const MAGIC: [u8; 4] = *b"SBK1";
/// Bytes of random pool a stream keeps for write payloads (plus one unit, so that every window
/// of a unit fits). Small enough to stay in the L2 cache: the per-unit key, not the pool's size,
/// is what keeps units apart, and a pool in cache keeps the stamping at memcpy-in-cache speed.
pub const POOL: usize = 64 << 10;

/// What the written data looks like. Recorded in every result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DataSpec {
    /// Share of written units (percent) that are duplicates of one block.
    pub dedupe_pct: f64,
    /// Share of every unit (percent) that compresses away (zeros).
    pub compress_pct: f64,
}

impl DataSpec {
    pub fn validate(&self) -> Result<(), String> {
        for (what, p) in [
            ("--dedupe", self.dedupe_pct),
            ("--compress", self.compress_pct),
        ] {
            if !(0.0..=100.0).contains(&p) || p.is_nan() {
                return Err(format!("{what} {p} is not a percentage between 0 and 100"));
            }
        }
        Ok(())
    }

    /// "unique, incompressible" or "50 % duplicate units, 50 % compressible".
    pub fn describe(&self) -> String {
        if self.dedupe_pct == 0.0 && self.compress_pct == 0.0 {
            return "unique, incompressible (stamped 4 KiB units)".into();
        }
        format!(
            "{} % duplicate units, {} % compressible (stamped 4 KiB units)",
            self.dedupe_pct, self.compress_pct
        )
    }
}

/// The header at the start of every unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// Byte offset of this unit on the target.
    pub offset: u64,
    pub run_id: u64,
    pub worker: u32,
    /// Per-block generation (0 until the integrity verification keeps a map).
    pub generation: u32,
    /// The worker's write sequence number (per stream, from 1).
    pub seq: u64,
}

impl Stamp {
    pub fn encode(&self, out: &mut [u8]) {
        let h = &mut out[..STAMP_LEN];
        h[0..4].copy_from_slice(&MAGIC);
        h[8..16].copy_from_slice(&self.offset.to_le_bytes());
        h[16..24].copy_from_slice(&self.run_id.to_le_bytes());
        h[24..28].copy_from_slice(&self.worker.to_le_bytes());
        h[28..32].copy_from_slice(&self.generation.to_le_bytes());
        h[32..40].copy_from_slice(&self.seq.to_le_bytes());
        let crc = crc32c::crc32c(&h[8..STAMP_LEN]);
        h[4..8].copy_from_slice(&crc.to_le_bytes());
    }

    /// The stamp at the start of `unit`, or `None` when there is none (wrong magic, bad CRC,
    /// too short): never-written space, another program's data or a corrupted header.
    pub fn decode(unit: &[u8]) -> Option<Stamp> {
        let h = unit.get(..STAMP_LEN)?;
        if h[0..4] != MAGIC {
            return None;
        }
        let crc = u32::from_le_bytes(h[4..8].try_into().ok()?);
        if crc32c::crc32c(&h[8..STAMP_LEN]) != crc {
            return None;
        }
        let u64at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap_or_default());
        let u32at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap_or_default());
        Some(Stamp {
            offset: u64at(8),
            run_id: u64at(16),
            worker: u32at(24),
            generation: u32at(28),
            seq: u64at(32),
        })
    }
}

/// splitmix64's finalizer: a cheap 64-bit mix with full avalanche.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fills write buffers of one stream (one worker on one target).
pub struct Stamper {
    run_id: u64,
    worker: u32,
    /// A unit is a duplicate when a 32-bit draw falls below this.
    dedupe_thresh: u64,
    /// Per mille of each unit that is zeros.
    compress_permille: u64,
    rng: Rng,
    /// The one block every duplicate unit copies (derived from the run id only).
    dup: Box<[u8]>,
    seq: u64,
}

impl Stamper {
    pub fn new(spec: &DataSpec, run_id: u64, worker: u32) -> Stamper {
        let mut dup = vec![0u8; UNIT].into_boxed_slice();
        crate::arena::fill_random(&mut dup, mix(run_id ^ 0xd00b));
        let compress_permille = (spec.compress_pct * 10.0).round() as u64;
        let zeros = (UNIT as u64 * compress_permille / 1000) as usize;
        dup[UNIT.saturating_sub(zeros).max(STAMP_LEN.min(UNIT))..].fill(0);
        Stamper {
            run_id,
            worker,
            dedupe_thresh: ((spec.dedupe_pct / 100.0) * (1u64 << 32) as f64).round() as u64,
            compress_permille,
            rng: Rng::new(mix(run_id ^ ((worker as u64) << 40) ^ 0x5eed)),
            dup,
            seq: 0,
        }
    }

    /// Sequence number of the last write filled.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Fills `dst`, the buffer of one write at byte `offset`, from `pool` (at least
    /// [`POOL`] + [`UNIT`] random bytes, or any length above one unit for tests).
    #[inline]
    pub fn fill(&mut self, dst: &mut [u8], offset: u64, pool: &[u8]) {
        self.seq += 1;
        let mut at = 0usize;
        while at < dst.len() {
            let n = (dst.len() - at).min(UNIT);
            let unit = &mut dst[at..at + n];
            let uoff = offset + at as u64;
            if self.dedupe_thresh > 0 && (self.rng.next_u64() >> 32) < self.dedupe_thresh {
                unit.copy_from_slice(&self.dup[..n]);
            } else {
                self.unique(unit, uoff, pool);
            }
            at += n;
        }
    }

    #[inline]
    fn unique(&self, unit: &mut [u8], offset: u64, pool: &[u8]) {
        let n = unit.len();
        let key = mix(self.run_id ^ mix(offset ^ (self.seq << 20) ^ ((self.worker as u64) << 56)));
        let zeros = (n as u64 * self.compress_permille / 1000) as usize;
        let random_end = n.saturating_sub(zeros).max(STAMP_LEN.min(n));
        // A window of the pool at a key-chosen multiple of 8 bytes.
        let slots = (pool.len().saturating_sub(n) / 8).max(1) as u64;
        let w = ((key >> 11) % slots) as usize * 8;
        xor_copy(&mut unit[..random_end], &pool[w..w + random_end], key);
        unit[random_end..].fill(0);
        if n >= STAMP_LEN {
            Stamp {
                offset,
                run_id: self.run_id,
                worker: self.worker,
                generation: 0,
                seq: self.seq,
            }
            .encode(unit);
        }
    }
}

/// `dst[i] = src[i] ^ key` by 64-bit words (byte by byte for a ragged or unaligned edge). Write
/// slots are page-aligned and pool windows 8-byte aligned, so in practice the whole unit goes
/// through the word loop, which the compiler vectorizes.
#[inline]
fn xor_copy(dst: &mut [u8], src: &[u8], key: u64) {
    let kb = key.to_le_bytes();
    // SAFETY: u64 has no invalid bit patterns; align_to only reinterprets the aligned middle.
    let (dh, dm, dt) = unsafe { dst.align_to_mut::<u64>() };
    // SAFETY: as above, read-only.
    let (sh, sm, _) = unsafe { src.align_to::<u64>() };
    if dh.is_empty() && sh.is_empty() {
        xor_words(dm, sm, key.to_le());
        let done = dm.len() * 8;
        for (i, d) in dt.iter_mut().enumerate() {
            *d = src[done + i] ^ kb[i % 8];
        }
        return;
    }
    for (i, (d, s)) in dst.iter_mut().zip(src).enumerate() {
        *d = s ^ kb[i % 8];
    }
}

/// The word loop, with 256-bit vectors where the CPU has them (decided once).
#[inline]
fn xor_words(dst: &mut [u64], src: &[u64], key: u64) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static AVX2: OnceLock<bool> = OnceLock::new();
        if *AVX2.get_or_init(|| std::arch::is_x86_feature_detected!("avx2")) {
            // SAFETY: the CPU has AVX2 (checked above).
            unsafe { xor_words_avx2(dst, src, key) };
            return;
        }
    }
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s ^ key;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn xor_words_avx2(dst: &mut [u64], src: &[u64], key: u64) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s ^ key;
    }
}

/// A fresh 64-bit id from the OS (getrandom): a run's id must not repeat between runs, or two
/// runs would write identical blocks.
pub fn new_run_id() -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most `b.len()` bytes into the buffer we own.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
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
            generation: 7,
            seq: 99,
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
}
