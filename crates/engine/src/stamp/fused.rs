//! Checking a unit while copying it: the verification's common case (a read of a unit the
//! stream expects, exactly as it was written) in one pass over the bytes, for engines that
//! move the data themselves ([`crate::engine::Queue::submit_fused`]). Anything else is left to
//! the full classification ([`crate::verify::Checker`]), which this never replaces: it only
//! answers "exactly the expected unit" or "look closer".

use super::{header_crc, window, KeyCache, MAGIC, STAMP_LEN};

/// A little-endian field of a stamp (at most 8 bytes).
#[inline(always)]
fn le(h: &[u8], r: std::ops::Range<usize>) -> u64 {
    let mut b = [0u8; 8];
    b[..r.len()].copy_from_slice(&h[r]);
    u64::from_le_bytes(b)
}

impl KeyCache {
    /// Copies `src`, one unit read at `offset`, into `dst` (the same length), and says whether
    /// it is exactly a unit of run `run_id` for `offset` of generation `generation` whose
    /// payload is the pool window its key selects: the units the full check passes without
    /// recording anything ([`crate::verify::Checker`]'s current generation). `false` says only
    /// "look closer"; the copy is complete either way.
    #[inline]
    pub fn copy_expected(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        offset: u64,
        run_id: u64,
        generation: u32,
        pool: &[u8],
    ) -> bool {
        let n = src.len();
        let fast =
            n == dst.len() && n >= STAMP_LEN && self.header_ok(src, offset, run_id, generation);
        if !fast {
            dst.copy_from_slice(src);
            return false;
        }
        let h = &src[..STAMP_LEN];
        let zero_tail = le(h, 38..40) as usize;
        if zero_tail > n - STAMP_LEN {
            dst.copy_from_slice(src);
            return false;
        }
        let random_end = n - zero_tail;
        let (seq, worker) = (le(h, 32..38), le(h, 24..26) as u16);
        let key = self.key(run_id, offset, seq, worker, generation);
        let w = window(key, pool.len(), n);
        if w + random_end > pool.len() {
            dst.copy_from_slice(src);
            return false;
        }
        dst[..STAMP_LEN].copy_from_slice(h);
        let diff = copy_xor_diff(
            &mut dst[STAMP_LEN..random_end],
            &src[STAMP_LEN..random_end],
            &pool[w + STAMP_LEN..w + random_end],
            key,
        );
        dst[random_end..].copy_from_slice(&src[random_end..]);
        diff == 0 && src[random_end..].iter().all(|&b| b == 0)
    }

    /// The stamp at the start of `unit` is valid (magic, CRC) and says this run, this offset,
    /// this generation and the unit's length.
    #[inline(always)]
    fn header_ok(&self, unit: &[u8], offset: u64, run_id: u64, generation: u32) -> bool {
        let h = &unit[..STAMP_LEN];
        h[0..4] == MAGIC
            && le(h, 8..16) == offset
            && le(h, 16..24) == run_id
            && le(h, 26..28) == unit.len() as u64
            && le(h, 28..32) == generation as u64
            && header_crc(&h[8..STAMP_LEN]) == le(h, 4..8) as u32
    }
}

/// Copies `src` into `dst` and returns the OR of `src ^ pool ^ key` over it (0: every byte is
/// the pool's XORed with the key), in one pass; AVX2 where the CPU has it (decided once).
#[inline]
fn copy_xor_diff(dst: &mut [u8], src: &[u8], pool: &[u8], key: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static AVX2: OnceLock<bool> = OnceLock::new();
        if *AVX2.get_or_init(|| std::arch::is_x86_feature_detected!("avx2")) {
            // SAFETY: the CPU has AVX2 (checked above).
            return unsafe { copy_xor_diff_avx2(dst, src, pool, key) };
        }
    }
    copy_xor_diff_words(dst, src, pool, key)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn copy_xor_diff_avx2(dst: &mut [u8], src: &[u8], pool: &[u8], key: u64) -> u64 {
    copy_xor_diff_words(dst, src, pool, key)
}

/// 32 bytes at a time as four independent 64-bit lanes (so the loop vectorizes), then the
/// ragged end byte by byte with the key's bytes in the same phase.
#[inline(always)]
fn copy_xor_diff_words(dst: &mut [u8], src: &[u8], pool: &[u8], key: u64) -> u64 {
    let n = src.len().min(dst.len()).min(pool.len());
    let body = n / 32 * 32;
    let word = |b: &[u8], i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    };
    let mut acc = [0u64; 4];
    let chunks = dst[..body]
        .chunks_exact_mut(32)
        .zip(src[..body].chunks_exact(32))
        .zip(pool[..body].chunks_exact(32));
    for ((d, s), p) in chunks {
        d.copy_from_slice(s);
        for (i, a) in acc.iter_mut().enumerate() {
            *a |= word(s, i) ^ word(p, i) ^ key;
        }
    }
    let mut diff = acc[0] | acc[1] | acc[2] | acc[3];
    let kb = key.to_le_bytes();
    for i in body..n {
        dst[i] = src[i];
        diff |= u64::from(src[i] ^ pool[i] ^ kb[i % 8]);
    }
    diff
}
