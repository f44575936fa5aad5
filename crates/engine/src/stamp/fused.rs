//! The kernels of the fused data path ([`crate::engine::Queue::submit_fused`]), for engines
//! that move the bytes themselves in this process (`mem:`):
//!
//! * stamping a write straight into far memory (a RAM disk, not read again soon): ordinary
//!   stores to lines not in cache first read each line from memory (read for ownership), which
//!   made an XOR-copy to the disk slower than stamping into the cached arena slot and letting
//!   `memcpy` (`rep movsb`, which writes whole lines without reading them) move it. So whole
//!   aligned units go out by non-temporal stores, with the stamp composed in the unit's first
//!   line before it is stored;
//! * checking a read: the verification's common case (a unit the stream expects, exactly as
//!   it was written) by a lean test of the stamp's fields and one comparison of the payload
//!   ([`KeyCache::all_expected`]). Anything else is left to the full classification
//!   ([`crate::verify::Checker`]), which this never replaces: it only answers "exactly the
//!   expected unit" or "look closer". On `mem:` the check happens while the read is copied
//!   into its buffer ([`KeyCache::copy_expected`]: each stamp copied, then checked; each
//!   payload vector loaded once, stored and compared), the RAM disk's lines already on their
//!   way because the engine prefetched this read during the previous one (without that
//!   prefetch, checking inside the copy was slower than `memcpy` then check: each unit's stamp
//!   was a dependent load from DRAM, where `memcpy` has all of a read's lines in flight).

#[cfg(target_arch = "x86_64")]
use super::lean::xor_diff_copy_avx2;
use super::{
    avx2, header_crc, sse42, window, xor_copy, KeyCache, Stamper, MAGIC, SEQ_MASK, STAMP_LEN,
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
        if zeros != 0
            || n < 64
            || !n.is_multiple_of(32)
            || !(unit.as_ptr() as usize).is_multiple_of(32)
            || !avx2()
        {
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
        self.stamp(offset, n, generation, seq, 0).encode(&mut head);
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

/// The OR of `data ^ src ^ key` over the bytes (0: every byte matches). Both sides are 8-byte
/// aligned in practice (slots are page-aligned, pool windows multiples of 8): 64-bit words in
/// four independent lanes, so that it vectorizes where it is inlined, then the ragged end;
/// byte by byte otherwise.
#[inline(always)]
fn xor_diff_bytes(data: &[u8], src: &[u8], key: u64) -> u64 {
    let kb = key.to_le_bytes();
    let mut diff = (data.len() ^ src.len()) as u64;
    let src = &src[..data.len().min(src.len())];
    let data = &data[..src.len()];
    // SAFETY: u64 has no invalid bit patterns; align_to only reinterprets the aligned middle.
    let (dh, dm, dt) = unsafe { data.align_to::<u64>() };
    // SAFETY: as above.
    let (sh, sm, _) = unsafe { src.align_to::<u64>() };
    if !(dh.is_empty() && sh.is_empty() && sm.len() >= dm.len()) {
        for (i, (d, s)) in data.iter().zip(src).enumerate() {
            diff |= u64::from(d ^ s ^ kb[i % 8]);
        }
        return diff;
    }
    let key = key.to_le();
    let (dc, sc) = (dm.chunks_exact(4), sm[..dm.len()].chunks_exact(4));
    let (dr, sr) = (dc.remainder(), sc.remainder());
    let mut acc = [0u64; 4];
    for (d, s) in dc.zip(sc) {
        for i in 0..4 {
            acc[i] |= d[i] ^ s[i] ^ key;
        }
    }
    diff |= acc[0] | acc[1] | acc[2] | acc[3];
    for (d, s) in dr.iter().zip(sr) {
        diff |= d ^ s ^ key;
    }
    let done = dm.len() * 8;
    for (i, d) in dt.iter().enumerate() {
        diff |= u64::from(d ^ src[done + i] ^ kb[i % 8]);
    }
    diff
}

/// [`xor_diff_bytes`] by 32-byte vectors: the key is the same in every 64-bit lane, so the
/// vectors need no shuffling (the auto-vectorized word loop transposed its four lanes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn xor_diff_avx2(data: &[u8], src: &[u8], key: u64) -> u64 {
    use std::arch::x86_64::{
        __m256i, _mm256_loadu_si256, _mm256_or_si256, _mm256_set1_epi64x, _mm256_setzero_si256,
        _mm256_testz_si256, _mm256_xor_si256,
    };
    if src.len() < data.len() {
        return xor_diff_bytes(data, src, key);
    }
    let n = data.len();
    let k = _mm256_set1_epi64x(key as i64);
    let (d, s) = (data.as_ptr(), src.as_ptr());
    let (mut a0, mut a1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    let mut i = 0;
    // SAFETY: every load is 32 bytes at i < n - 31, inside both slices (src is at least as
    // long as data); the loads are unaligned loads.
    unsafe {
        while i + 64 <= n {
            let x0 = _mm256_xor_si256(
                _mm256_loadu_si256(d.add(i).cast::<__m256i>()),
                _mm256_loadu_si256(s.add(i).cast::<__m256i>()),
            );
            let x1 = _mm256_xor_si256(
                _mm256_loadu_si256(d.add(i + 32).cast::<__m256i>()),
                _mm256_loadu_si256(s.add(i + 32).cast::<__m256i>()),
            );
            a0 = _mm256_or_si256(a0, _mm256_xor_si256(x0, k));
            a1 = _mm256_or_si256(a1, _mm256_xor_si256(x1, k));
            i += 64;
        }
        if i + 32 <= n {
            let x = _mm256_xor_si256(
                _mm256_loadu_si256(d.add(i).cast::<__m256i>()),
                _mm256_loadu_si256(s.add(i).cast::<__m256i>()),
            );
            a0 = _mm256_or_si256(a0, _mm256_xor_si256(x, k));
            i += 32;
        }
    }
    if i < n && n >= 32 && n.is_multiple_of(8) {
        // The ragged end as the last 32 bytes, overlapping what was compared: they start at a
        // multiple of 8, so the key's lanes line up (a stamped unit's payload is 472 bytes).
        // SAFETY: n - 32 + 32 = n, inside both slices.
        unsafe {
            let x = _mm256_xor_si256(
                _mm256_loadu_si256(d.add(n - 32).cast::<__m256i>()),
                _mm256_loadu_si256(s.add(n - 32).cast::<__m256i>()),
            );
            a1 = _mm256_or_si256(a1, _mm256_xor_si256(x, k));
        }
        i = n;
    }
    let a = _mm256_or_si256(a0, a1);
    let mut diff = u64::from(_mm256_testz_si256(a, a) == 0);
    if i < n {
        // The ragged end: the key's byte phase continues from a multiple of 8 (i is one).
        diff |= xor_diff_bytes(&data[i..], &src[i..n], key);
    }
    diff
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
    if !n.is_multiple_of(32)
        || n < 64
        || src.len() < n
        || !(dst.as_ptr() as usize).is_multiple_of(32)
    {
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

/// The loop of [`KeyCache::all_expected`], expanded once per instruction set with its header
/// CRC and payload comparison named (`$crc(&[u8]) -> u32`, `$diff(data, pool, key) -> u64`),
/// so that a kernel with a target feature is called directly and inlines.
macro_rules! expected_units {
    ($keys:expr, $buf:expr, $io_off:expr, $unit:expr, $run_id:expr, $pool:expr, $gen:expr,
     $crc:path, $diff:path) => {{
        let (buf, pool, unit): (&[u8], &[u8], usize) = ($buf, $pool, $unit.max(1));
        let mut at = 0usize;
        let mut ok = true;
        while at < buf.len() {
            let u = &buf[at..(at + unit).min(buf.len())];
            let off = $io_off + at as u64;
            let g = $gen(off);
            let n = u.len();
            if g == 0 || n < STAMP_LEN {
                ok = false;
                break;
            }
            let h = &u[..STAMP_LEN];
            #[allow(unused_unsafe)]
            // SAFETY: (the SIMD expansion) the CPU has the kernel's features, checked by the
            // caller's dispatch.
            let crc = unsafe { $crc(&h[8..STAMP_LEN]) };
            let Some(zero_tail) = expected_stamp(h, crc, off, $run_id, n, g) else {
                ok = false;
                break;
            };
            let random_end = n - zero_tail;
            let key = $keys.key($run_id, off, le(h, 32..38), le(h, 24..26) as u16, g);
            let w = window(key, pool.len(), n);
            #[allow(unused_unsafe)]
            // SAFETY: as above.
            if w + random_end > pool.len()
                || unsafe {
                    $diff(
                        &u[STAMP_LEN..random_end],
                        &pool[w + STAMP_LEN..w + random_end],
                        key,
                    )
                } != 0
                || u[random_end..].iter().any(|&b| b != 0)
            {
                ok = false;
                break;
            }
            at += n;
        }
        ok
    }};
}

/// The lean test of one unit's stamp `h` (its first [`STAMP_LEN`] bytes, whose CRC over
/// `h[8..]` the caller computed as `crc`): this run's stamp for unit offset `off`, `n` bytes
/// long, of generation `g`. Its zero tail's length when so, `None` ("look closer") otherwise.
#[inline(always)]
fn expected_stamp(h: &[u8], crc: u32, off: u64, run_id: u64, n: usize, g: u32) -> Option<usize> {
    let zero_tail = le(h, 38..40) as usize;
    (h[0..4] == MAGIC
        && le(h, 8..16) == off
        && le(h, 16..24) == run_id
        && le(h, 26..28) == n as u64
        && le(h, 28..32) == g as u64
        && zero_tail <= n - STAMP_LEN
        && crc == le(h, 4..8) as u32)
        .then_some(zero_tail)
}

/// Asks for every 64-byte line of `mem` to be brought into the cache, without waiting for it
/// (a hint: no fault, no effect on results).
#[inline(always)]
pub fn prefetch_lines(mem: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut o = 0;
        while o < mem.len() {
            // SAFETY: a prefetch of an address inside `mem`; prefetches never fault.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    mem.as_ptr().add(o).cast::<i8>(),
                )
            };
            o += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = mem;
}

impl KeyCache {
    /// Whether every unit of `buf`, a read at `io_off` cut into units of `unit` bytes, is
    /// exactly a unit of run `run_id` for its offset, of the generation `gen(unit offset)`
    /// (0, unknown: not expected), whose payload is the pool window its key selects: the reads
    /// the full check passes without recording anything ([`crate::verify::Checker`], current
    /// generations). `false` says only "look closer". One dispatch per read, the per-unit work
    /// inlined with AVX2 and SSE4.2 where the CPU has them.
    #[inline]
    pub fn all_expected(
        &mut self,
        buf: &[u8],
        io_off: u64,
        unit: usize,
        run_id: u64,
        pool: &[u8],
        gen: impl Fn(u64) -> u32,
    ) -> bool {
        #[cfg(target_arch = "x86_64")]
        if avx2() && sse42() {
            // SAFETY: the CPU has AVX2 and SSE4.2 (checked above).
            return unsafe { self.all_expected_avx2(buf, io_off, unit, run_id, pool, gen) };
        }
        expected_units!(
            self,
            buf,
            io_off,
            unit,
            run_id,
            pool,
            gen,
            header_crc,
            xor_diff_bytes
        )
    }

    /// `dst = src` (a read's bytes as the target holds them, into the I/O's buffer), and
    /// [`all_expected`](Self::all_expected) of the copy, in one pass where the CPU allows:
    /// each unit's stamp is copied and then checked in `dst`, its payload compared while it is
    /// copied, so every byte is loaded once. `dst` holds all of `src` whatever the answer.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn copy_expected(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        io_off: u64,
        unit: usize,
        run_id: u64,
        pool: &[u8],
        gen: impl Fn(u64) -> u32,
        ahead: &[u8],
    ) -> bool {
        let n = src.len().min(dst.len());
        let (src, dst) = (&src[..n], &mut dst[..n]);
        #[cfg(target_arch = "x86_64")]
        if avx2() && sse42() {
            if super::lean::lean_shape(n, unit, pool) {
                // SAFETY: the CPU has AVX2 and SSE4.2 (checked above).
                let lean = unsafe {
                    self.copy_expected_lean(src, dst, io_off, unit, run_id, pool, &gen, ahead)
                };
                if lean == super::lean::Lean::Clean {
                    return true;
                }
            }
            // SAFETY: the CPU has AVX2 and SSE4.2 (checked above).
            return unsafe {
                self.copy_expected_avx2(src, dst, io_off, unit, run_id, pool, gen, ahead)
            };
        }
        prefetch_lines(ahead);
        dst.copy_from_slice(src);
        self.all_expected(dst, io_off, unit, run_id, pool, gen)
    }

    #[allow(clippy::too_many_arguments)]
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,sse4.2")]
    fn copy_expected_avx2(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        io_off: u64,
        unit: usize,
        run_id: u64,
        pool: &[u8],
        gen: impl Fn(u64) -> u32,
        ahead: &[u8],
    ) -> bool {
        let (len, unit) = (src.len(), unit.max(1));
        let mut at = 0usize;
        while at < len {
            prefetch_lines(ahead.get(at..(at + unit).min(ahead.len())).unwrap_or(&[]));
            let end = (at + unit).min(len);
            let n = end - at;
            let off = io_off + at as u64;
            let g = gen(off);
            let ok = 'unit: {
                if g == 0 || n < STAMP_LEN {
                    break 'unit false;
                }
                dst[at..at + STAMP_LEN].copy_from_slice(&src[at..at + STAMP_LEN]);
                let h = &dst[at..at + STAMP_LEN];
                let crc = super::header_crc_sse42(&h[8..STAMP_LEN]);
                let Some(zero_tail) = expected_stamp(h, crc, off, run_id, n, g) else {
                    break 'unit false;
                };
                let random_end = at + n - zero_tail;
                let key = self.key(run_id, off, le(h, 32..38), le(h, 24..26) as u16, g);
                let w = window(key, pool.len(), n);
                let Some(win) = pool.get(w + STAMP_LEN..w + n - zero_tail) else {
                    break 'unit false;
                };
                let pay = at + STAMP_LEN..random_end;
                if xor_diff_copy_avx2(&src[pay.clone()], &mut dst[pay], win, key) != 0 {
                    break 'unit false;
                }
                dst[random_end..end].copy_from_slice(&src[random_end..end]);
                dst[random_end..end].iter().all(|&b| b == 0)
            };
            if !ok {
                dst[at..].copy_from_slice(&src[at..]);
                return false;
            }
            at = end;
        }
        true
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,sse4.2")]
    fn all_expected_avx2(
        &mut self,
        buf: &[u8],
        io_off: u64,
        unit: usize,
        run_id: u64,
        pool: &[u8],
        gen: impl Fn(u64) -> u32,
    ) -> bool {
        // Direct calls, so that the kernels inline here (a closure between them did not).
        expected_units!(
            self,
            buf,
            io_off,
            unit,
            run_id,
            pool,
            gen,
            super::header_crc_sse42,
            xor_diff_avx2
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both AVX2 comparisons say "differs" exactly when the byte loop does, for every length up
    /// to a few vectors (the 64-byte loop, the 32-byte step, the overlapping tail and the byte
    /// tail) and a change at every position; the copying one leaves the full copy whatever it
    /// finds.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_kernels_agree_with_the_byte_loop() {
        if !avx2() {
            return;
        }
        let key = 0x0123_4567_89ab_cdef_u64;
        let kb = key.to_le_bytes();
        let pool: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        // SAFETY (both closures): the CPU has AVX2 (checked above).
        let diff = |d: &[u8]| unsafe { xor_diff_avx2(d, &pool, key) };
        let copy = |d: &[u8]| {
            let mut dst = vec![0xa5u8; d.len()];
            let r = unsafe { xor_diff_copy_avx2(d, &mut dst, &pool, key) };
            assert_eq!(dst, d, "len {}: not all copied", d.len());
            r
        };
        for n in 0..=200 {
            let data: Vec<u8> = (0..n).map(|i| pool[i] ^ kb[i % 8]).collect();
            assert_eq!(xor_diff_bytes(&data, &pool[..n], key), 0, "len {n}");
            assert_eq!(diff(&data), 0, "len {n}");
            assert_eq!(copy(&data), 0, "len {n}");
            for at in 0..n {
                let mut bad = data.clone();
                bad[at] ^= 0x40;
                assert_ne!(diff(&bad), 0, "len {n} at {at}");
                assert_ne!(copy(&bad), 0, "len {n} at {at}");
            }
        }
    }
}
