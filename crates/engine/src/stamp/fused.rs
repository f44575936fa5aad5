//! The kernels of the fused data path ([`crate::engine::Queue::submit_fused`]), for engines
//! that move the bytes themselves in this process (`mem:`):
//!
//! * stamping a write straight into far memory (a RAM disk, not read again soon): ordinary
//!   stores to lines not in cache first read each line from memory (read for ownership), which
//!   made an XOR-copy to the disk slower than stamping into the cached arena slot and letting
//!   `memcpy` (`rep movsb`, which writes whole lines without reading them) move it. So whole
//!   aligned units go out by non-temporal stores, with the stamp composed in the unit's first
//!   line before it is stored;
//! * checking a read as soon as it is copied, while it is in the L1 cache: the verification's
//!   common case (a unit the stream expects, exactly as it was written) by a lean test of the
//!   stamp's fields and one comparison of the payload. Anything else is left to the full
//!   classification ([`crate::verify::Checker`]), which this never replaces: it only answers
//!   "exactly the expected unit" or "look closer". (Checking inside the copy loop itself was
//!   tried and is slower: each unit's stamp is then a dependent load from memory, where
//!   `memcpy` has all of a read's lines in flight at once.)

use super::{
    header_crc, window, xor_copy, xor_equal, KeyCache, Stamp, Stamper, MAGIC, SEQ_MASK, STAMP_LEN,
};

impl Stamper {
    /// [`unique`](Stamper::unique) by non-temporal stores, for a unit that starts 32-byte
    /// aligned, is a multiple of 32 bytes long (64 at least) and has no zero tail; `false`
    /// (nothing written) for any other unit or CPU, which then takes the ordinary stores.
    #[inline]
    pub(super) fn unique_far(
        &mut self,
        unit: &mut [u8],
        offset: u64,
        pool: &[u8],
        generation: u32,
    ) -> bool {
        let n = unit.len();
        let zeros = (n as u64 * self.compress_permille / 1000) as usize;
        if zeros != 0 || n < 64 || n % 32 != 0 || unit.as_ptr() as usize % 32 != 0 || !avx2() {
            return false;
        }
        let seq = self.seq & SEQ_MASK;
        let key = self
            .keys
            .key(self.run_id, offset, seq, self.worker, generation);
        let w = window(key, pool.len(), n);
        let Some(src) = pool.get(w..w + n) else {
            return false;
        };
        // The first line as the ordinary path leaves it: payload, then the stamp over it.
        let mut head = [0u8; 64];
        xor_copy(&mut head, &src[..64], key);
        Stamp {
            offset,
            run_id: self.run_id,
            worker: self.worker,
            unit_len: n as u16,
            generation,
            seq,
            zero_tail: 0,
        }
        .encode(&mut head);
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: the CPU has AVX2 (checked above).
            unsafe { stream_xor_avx2(unit, &head, src, key) };
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }
}

/// Whether the CPU has AVX2 (decided once).
#[inline]
fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static AVX2: OnceLock<bool> = OnceLock::new();
        *AVX2.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Orders the non-temporal stores of [`Stamper::fill_gen_far`] before whatever follows (the
/// completion that publishes them: another stream may read the block next), as they are
/// otherwise weakly ordered.
#[inline]
pub fn store_fence() {
    // SAFETY: SSE is part of x86_64; a fence has no operands.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// `dst[..64] = head`, then `dst[i] = src[i] ^ key`, all by 32-byte non-temporal stores.
/// `dst` must be 32-byte aligned and a multiple of 32 bytes long, `src` as long (callers
/// check; anything else writes nothing).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn stream_xor_avx2(dst: &mut [u8], head: &[u8; 64], src: &[u8], key: u64) {
    use std::arch::x86_64::{
        __m256i, _mm256_loadu_si256, _mm256_set1_epi64x, _mm256_stream_si256, _mm256_xor_si256,
    };
    let n = dst.len();
    if n % 32 != 0 || n < 64 || src.len() < n || dst.as_ptr() as usize % 32 != 0 {
        return;
    }
    let k = _mm256_set1_epi64x(key as i64);
    let d = dst.as_mut_ptr();
    // SAFETY: every access is 32 bytes inside `dst` (aligned, checked above), `head` or
    // `src` (at least `n` bytes); the loads are unaligned loads.
    unsafe {
        for i in [0usize, 32] {
            let v = _mm256_loadu_si256(head.as_ptr().add(i).cast::<__m256i>());
            _mm256_stream_si256(d.add(i).cast::<__m256i>(), v);
        }
        let mut i = 64;
        while i < n {
            let v = _mm256_loadu_si256(src.as_ptr().add(i).cast::<__m256i>());
            _mm256_stream_si256(d.add(i).cast::<__m256i>(), _mm256_xor_si256(v, k));
            i += 32;
        }
    }
}

/// A little-endian field of a stamp (at most 8 bytes).
#[inline(always)]
fn le(h: &[u8], r: std::ops::Range<usize>) -> u64 {
    let mut b = [0u8; 8];
    b[..r.len()].copy_from_slice(&h[r]);
    u64::from_le_bytes(b)
}

impl KeyCache {
    /// Whether `unit`, read at `offset`, is exactly a unit of run `run_id` for `offset` of
    /// generation `generation` whose payload is the pool window its key selects: the units the
    /// full check passes without recording anything ([`crate::verify::Checker`]'s current
    /// generation). `false` says only "look closer".
    #[inline]
    pub fn is_expected(
        &mut self,
        unit: &[u8],
        offset: u64,
        run_id: u64,
        generation: u32,
        pool: &[u8],
    ) -> bool {
        let n = unit.len();
        if n < STAMP_LEN || !self.header_ok(unit, offset, run_id, generation) {
            return false;
        }
        let h = &unit[..STAMP_LEN];
        let zero_tail = le(h, 38..40) as usize;
        if zero_tail > n - STAMP_LEN {
            return false;
        }
        let random_end = n - zero_tail;
        let (seq, worker) = (le(h, 32..38), le(h, 24..26) as u16);
        let key = self.key(run_id, offset, seq, worker, generation);
        let w = window(key, pool.len(), n);
        w + random_end <= pool.len()
            && xor_equal(
                &unit[STAMP_LEN..random_end],
                &pool[w + STAMP_LEN..w + random_end],
                key,
            )
            && unit[random_end..].iter().all(|&b| b == 0)
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
