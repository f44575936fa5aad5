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

use crate::gen::Rng;

mod fused;
mod lean;
pub use fused::prefetch_lines;
pub use fused::store_fence;

/// Bytes per stamped unit (the granularity of array dedupe and of the stamp).
pub const UNIT: usize = 4096;
/// Bytes of the stamp at the start of each unit.
pub const STAMP_LEN: usize = 40;
/// The stamp's first bytes: "SBK2" (sanbench block, format 2).
pub const MAGIC: [u8; 4] = *b"SBK2";
/// Bytes of random pool a stream keeps for write payloads (plus one unit, so that every window
/// of a unit fits). Small enough to stay in the L2 cache: the per-unit key, not the pool's size,
/// is what keeps units apart, and a pool in cache keeps the stamping at memcpy-in-cache speed.
pub const POOL: usize = 64 << 10;

pub use sanbench_doc::data::DataSpec;

/// The header at the start of every unit (little-endian):
///
/// | bytes  | field                                                    |
/// |--------|----------------------------------------------------------|
/// | 0..4   | magic "SBK2"                                             |
/// | 4..8   | CRC32C of bytes 8..40                                    |
/// | 8..16  | byte offset of the unit on the target                    |
/// | 16..24 | run id                                                   |
/// | 24..26 | worker                                                   |
/// | 26..28 | unit length in bytes (the unit this header starts)       |
/// | 28..32 | generation of the block (0: not tracked)                 |
/// | 32..38 | the worker's write sequence number (48 bits)             |
/// | 38..40 | bytes of zeros at the unit's end (`--compress`)          |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// Byte offset of this unit on the target.
    pub offset: u64,
    pub run_id: u64,
    pub worker: u16,
    /// Bytes of the unit this stamp starts.
    pub unit_len: u16,
    /// Per-block generation (0 when no generation map is kept).
    pub generation: u32,
    /// The worker's write sequence number (per stream, from 1; 48 bits are kept).
    pub seq: u64,
    /// Bytes of zeros at the end of the unit.
    pub zero_tail: u16,
}

/// What the start of a unit holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// A valid sanbench stamp.
    Stamped(Stamp),
    /// The magic, but a CRC that does not match: a damaged stamp.
    Damaged,
    /// Only zeros (never-written space of most targets).
    Zeros,
    /// Something else: another program's data.
    Foreign,
}

const SEQ_MASK: u64 = (1 << 48) - 1;

impl Stamp {
    pub fn encode(&self, out: &mut [u8]) {
        let h = &mut out[..STAMP_LEN];
        h[0..4].copy_from_slice(&MAGIC);
        h[8..16].copy_from_slice(&self.offset.to_le_bytes());
        h[16..24].copy_from_slice(&self.run_id.to_le_bytes());
        h[24..26].copy_from_slice(&self.worker.to_le_bytes());
        h[26..28].copy_from_slice(&self.unit_len.to_le_bytes());
        h[28..32].copy_from_slice(&self.generation.to_le_bytes());
        h[32..38].copy_from_slice(&(self.seq & SEQ_MASK).to_le_bytes()[..6]);
        h[38..40].copy_from_slice(&self.zero_tail.to_le_bytes());
        let crc = header_crc(&h[8..STAMP_LEN]);
        h[4..8].copy_from_slice(&crc.to_le_bytes());
    }

    /// The stamp at the start of `unit`, or `None` when there is none (wrong magic, bad CRC,
    /// too short): never-written space, another program's data or a corrupted header.
    pub fn decode(unit: &[u8]) -> Option<Stamp> {
        match inspect(unit) {
            Header::Stamped(s) => Some(s),
            _ => None,
        }
    }
}

/// Reads the header at the start of `unit`.
pub fn inspect(unit: &[u8]) -> Header {
    let Some(h) = unit.get(..STAMP_LEN) else {
        return if unit.iter().all(|&b| b == 0) {
            Header::Zeros
        } else {
            Header::Foreign
        };
    };
    if h[0..4] != MAGIC {
        return if h.iter().all(|&b| b == 0) && unit.iter().all(|&b| b == 0) {
            Header::Zeros
        } else {
            Header::Foreign
        };
    }
    let le = |r: std::ops::Range<usize>| {
        let mut b = [0u8; 8];
        b[..r.len()].copy_from_slice(&h[r]);
        u64::from_le_bytes(b)
    };
    if header_crc(&h[8..STAMP_LEN]) != le(4..8) as u32 {
        return Header::Damaged;
    }
    Header::Stamped(Stamp {
        offset: le(8..16),
        run_id: le(16..24),
        worker: le(24..26) as u16,
        unit_len: le(26..28) as u16,
        generation: le(28..32) as u32,
        seq: le(32..38),
        zero_tail: le(38..40) as u16,
    })
}

/// Whether the bytes after a valid stamp are exactly what its writer put there: the pool
/// window its key selects, XORed with the key, then `zero_tail` zeros. A comparison at memory
/// speed, not a hash: `pool` is the run's pool ([`fill_pool`]).
pub fn payload_matches(unit: &[u8], s: &Stamp, pool: &[u8]) -> bool {
    KeyCache::default().payload_matches(unit, s, pool)
}

/// The key of the last write seen (its run, sequence number, worker and generation), so the
/// units of one write, which a read usually returns together, cost one multiply each instead
/// of a full mix.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyCache {
    tag: Option<(u64, u64, u16, u32)>,
    kw: u64,
}

impl KeyCache {
    #[inline]
    fn key(&mut self, run_id: u64, offset: u64, seq: u64, worker: u16, generation: u32) -> u64 {
        let tag = (run_id, seq, worker, generation);
        if self.tag != Some(tag) {
            self.kw = write_key(run_id, seq, worker, generation);
            self.tag = Some(tag);
        }
        self.kw ^ offset.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// [`payload_matches`] with this cache.
    #[inline]
    pub fn payload_matches(&mut self, unit: &[u8], s: &Stamp, pool: &[u8]) -> bool {
        let n = unit.len();
        if n != s.unit_len as usize || n < STAMP_LEN || s.zero_tail as usize > n - STAMP_LEN {
            return false;
        }
        let random_end = n - s.zero_tail as usize;
        let key = self.key(s.run_id, s.offset, s.seq & SEQ_MASK, s.worker, s.generation);
        let w = window(key, pool.len(), n);
        if w + random_end > pool.len() {
            return false;
        }
        xor_equal(
            &unit[STAMP_LEN..random_end],
            &pool[w + STAMP_LEN..w + random_end],
            key,
        ) && unit[random_end..].iter().all(|&b| b == 0)
    }
}

/// splitmix64's finalizer: a cheap 64-bit mix with full avalanche.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The key of one write's units before each unit's offset is folded in (see [`KeyCache`]):
/// from everything the stamps say but the offset, so that a reader recomputes it from a
/// stamp alone.
#[inline]
fn write_key(run_id: u64, seq: u64, worker: u16, generation: u32) -> u64 {
    mix(run_id ^ mix(seq ^ ((worker as u64) << 48) ^ ((generation as u64) << 32)))
}

/// The pool window (a multiple of 8 bytes) a key selects for a unit of `n` bytes.
#[inline]
fn window(key: u64, pool_len: usize, n: usize) -> usize {
    let slots = (pool_len.saturating_sub(n) / 8).max(1) as u64;
    // Multiply-shift instead of a modulo: a division costs more than the rest of a unit's
    // bookkeeping on the verification path.
    (((key >> 32) * slots) >> 32) as usize * 8
}

/// Whether the CPU has SSE4.2 (decided once; every SIMD kernel of the stamps asks here).
#[inline]
pub(crate) fn sse42() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static SSE42: OnceLock<bool> = OnceLock::new();
        *SSE42.get_or_init(|| std::arch::is_x86_feature_detected!("sse4.2"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether the CPU has AVX2 (decided once).
#[inline]
pub(crate) fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static AVX2: OnceLock<bool> = OnceLock::new();
        *AVX2.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// CRC32C of a stamp's 32 covered bytes: four `crc32` instructions where the CPU has SSE4.2
/// (the same value as `crc32c::crc32c`, without its dispatch for long buffers).
#[inline]
fn header_crc(b: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if b.len() == 32 && sse42() {
            // SAFETY: the CPU has SSE4.2 (checked above).
            return unsafe { header_crc_sse42(b) };
        }
    }
    crc32c::crc32c(b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn header_crc_sse42(b: &[u8]) -> u32 {
    use std::arch::x86_64::_mm_crc32_u64;
    let mut c = u32::MAX as u64;
    for w in b.chunks_exact(8) {
        let v = u64::from_le_bytes(w.try_into().unwrap_or_default());
        c = _mm_crc32_u64(c, v);
    }
    !(c as u32)
}

/// Fills a run's write pool: the same bytes in every stream of the run and in any later
/// reader that knows the run id, so a payload can be checked without the writer's memory.
pub fn fill_pool(pool: &mut [u8], run_id: u64) {
    crate::arena::fill_random(pool, mix(run_id ^ 0x9001_5eed));
}

/// Fills write buffers of one stream (one worker on one target).
pub struct Stamper {
    run_id: u64,
    worker: u16,
    /// Bytes per stamped unit.
    unit: usize,
    /// A unit is a duplicate when a 32-bit draw falls below this.
    dedupe_thresh: u64,
    /// Per mille of each unit that is zeros.
    compress_permille: u64,
    rng: Rng,
    /// The one block every duplicate unit copies (derived from the run id only).
    dup: Box<[u8]>,
    seq: u64,
    keys: KeyCache,
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
            worker: worker as u16,
            unit: UNIT,
            dedupe_thresh: ((spec.dedupe_pct / 100.0) * (1u64 << 32) as f64).round() as u64,
            compress_permille,
            rng: Rng::new(mix(run_id ^ ((worker as u64) << 40) ^ 0x5eed)),
            dup,
            seq: 0,
            keys: KeyCache::default(),
        }
    }

    /// Stamps units of `unit` bytes (the integrity verification's block: 512 B or the target's
    /// logical block) instead of [`UNIT`].
    pub fn with_unit(mut self, unit: usize) -> Stamper {
        self.unit = unit.clamp(STAMP_LEN, UNIT);
        self
    }

    /// Sequence number of the last write filled.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Fills `dst`, the buffer of one write at byte `offset`, from `pool` (at least
    /// [`POOL`] + [`UNIT`] random bytes, or any length above one unit for tests), with
    /// generation 0 (no generation map).
    #[inline]
    pub fn fill(&mut self, dst: &mut [u8], offset: u64, pool: &[u8]) {
        self.fill_gen(dst, offset, pool, |_| 0)
    }

    /// As [`fill`](Self::fill), with each unit's generation from `gen(unit offset)`.
    #[inline]
    pub fn fill_gen(&mut self, dst: &mut [u8], offset: u64, pool: &[u8], gen: impl Fn(u64) -> u32) {
        self.fill_units(dst, offset, pool, gen, false)
    }

    /// As [`fill_gen`](Self::fill_gen), for a destination that is not read again soon (a RAM
    /// disk's memory, not an arena slot): whole aligned units go out by non-temporal stores,
    /// which write full cache lines without reading them first. The same bytes either way;
    /// [`store_fence`] orders them before what follows (once per batch is enough).
    #[inline]
    pub fn fill_gen_far(
        &mut self,
        dst: &mut [u8],
        offset: u64,
        pool: &[u8],
        gen: impl Fn(u64) -> u32,
    ) {
        self.fill_units(dst, offset, pool, gen, true);
    }

    #[inline(always)]
    fn fill_units(
        &mut self,
        dst: &mut [u8],
        offset: u64,
        pool: &[u8],
        gen: impl Fn(u64) -> u32,
        far: bool,
    ) {
        self.seq += 1;
        #[cfg(target_arch = "x86_64")]
        if far
            && avx2()
            && sse42()
            // SAFETY: the CPU has AVX2 and SSE4.2 (checked just before).
            && unsafe { self.fill_far_lean(dst, offset, pool, &gen) }
        {
            return;
        }
        let mut at = 0usize;
        while at < dst.len() {
            let n = (dst.len() - at).min(self.unit);
            let unit = &mut dst[at..at + n];
            let uoff = offset + at as u64;
            if self.dedupe_thresh > 0 && (self.rng.next_u64() >> 32) < self.dedupe_thresh {
                let d = n.min(UNIT);
                unit[..d].copy_from_slice(&self.dup[..d]);
            } else {
                let g = gen(uoff);
                if !(far && self.unique_far(unit, uoff, pool, g)) {
                    self.unique(unit, uoff, pool, g);
                }
            }
            at += n;
        }
    }

    #[inline]
    fn unique(&mut self, unit: &mut [u8], offset: u64, pool: &[u8], generation: u32) {
        let n = unit.len();
        let seq = self.seq & SEQ_MASK;
        let key = self
            .keys
            .key(self.run_id, offset, seq, self.worker, generation);
        let zeros = (n as u64 * self.compress_permille / 1000) as usize;
        let random_end = n.saturating_sub(zeros).max(STAMP_LEN.min(n));
        let w = window(key, pool.len(), n);
        xor_copy(&mut unit[..random_end], &pool[w..w + random_end], key);
        unit[random_end..].fill(0);
        if n >= STAMP_LEN {
            self.stamp(offset, n, generation, seq, n - random_end)
                .encode(unit);
        }
    }

    /// The stamp of this stream's unit of `n` bytes at `offset`.
    #[inline]
    fn stamp(&self, offset: u64, n: usize, generation: u32, seq: u64, zero_tail: usize) -> Stamp {
        Stamp {
            offset,
            run_id: self.run_id,
            worker: self.worker,
            unit_len: n as u16,
            generation,
            seq,
            zero_tail: zero_tail as u16,
        }
    }
}

/// Whether `data[i] == src[i] ^ key` for every byte (both slices 8-byte aligned in practice:
/// a word loop the compiler vectorizes; a byte loop otherwise).
#[inline]
fn xor_equal(data: &[u8], src: &[u8], key: u64) -> bool {
    if data.len() != src.len() {
        return false;
    }
    // SAFETY: u64 has no invalid bit patterns; align_to only reinterprets the aligned middle.
    let (dh, dm, dt) = unsafe { data.align_to::<u64>() };
    // SAFETY: as above.
    let (sh, sm, _) = unsafe { src.align_to::<u64>() };
    let kb = key.to_le_bytes();
    if dh.is_empty() && sh.is_empty() {
        let diff = xor_diff(dm, sm, key.to_le());
        let done = dm.len() * 8;
        return diff == 0
            && dt
                .iter()
                .enumerate()
                .all(|(i, d)| *d == src[done + i] ^ kb[i % 8]);
    }
    data.iter()
        .zip(src)
        .enumerate()
        .all(|(i, (d, s))| *d == s ^ kb[i % 8])
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
        if avx2() {
            // SAFETY: the CPU has AVX2 (checked above).
            unsafe { xor_words_avx2(dst, src, key) };
            return;
        }
    }
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s ^ key;
    }
}

/// OR of `d ^ s ^ key` over the words: 0 when every word matches.
#[inline]
fn xor_diff(dst: &[u64], src: &[u64], key: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if avx2() {
            // SAFETY: the CPU has AVX2 (checked above).
            return unsafe { xor_diff_avx2(dst, src, key) };
        }
    }
    let mut diff = 0u64;
    for (d, s) in dst.iter().zip(src) {
        diff |= *d ^ *s ^ key;
    }
    diff
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn xor_diff_avx2(dst: &[u64], src: &[u64], key: u64) -> u64 {
    // Four independent lanes of accumulation, so the loop vectorizes into 256-bit ORs.
    let mut acc = [0u64; 4];
    let (dc, sc) = (dst.chunks_exact(4), src.chunks_exact(4));
    let (dr, sr) = (dc.remainder(), sc.remainder());
    for (d, s) in dc.zip(sc) {
        for i in 0..4 {
            acc[i] |= d[i] ^ s[i] ^ key;
        }
    }
    let mut diff = acc[0] | acc[1] | acc[2] | acc[3];
    for (d, s) in dr.iter().zip(sr) {
        diff |= *d ^ *s ^ key;
    }
    diff
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
#[path = "stamp_tests.rs"]
mod tests;
