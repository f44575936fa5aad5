//! A [`RingConn`]'s opt-in io_uring features (issue 43), kept apart from the plain
//! SENDMSG/RECV path:
//!
//! * `sendzc`: a send of at least [`ZC_MIN`] bytes goes as SENDMSG_ZC. The kernel reads the
//!   pages until the send's notification, so the send counts as in the kernel (`sending()`)
//!   and its `Done::Sent` comes only with the notification: a queue that waits for its send
//!   before touching the buffers (NBD's arena regions and header buffer) keeps them
//!   untouched that long, and a drain waits for the notification too.
//! * `multishot`: one multishot RECV stays armed into a provided buffer ring of
//!   [`RING_BUFS`] x [`RING_BUF`] bytes, and [`RingConn::recv`] becomes a copy from the
//!   kernel's buffers into the caller's: bytes that came while no receive was asked wait in
//!   their buffers for the next one (served without a system call), a buffer goes back to
//!   the kernel once copied out, and a ring run dry (ENOBUFS) is armed again once buffers
//!   are back. The protocol code sees the same `Done::Received(n)` into its own buffer.
//!
//! Neither pays on loopback as measured (docs/BENCHMARKS.md, scripts/bench_ringfeat.py), so
//! both stay opt-in: [`FEATURES_ENV`] names them, the probe at open drops what the kernel
//! lacks, and the engine info says which ran (`socket_features`).

use std::collections::VecDeque;
use std::io;

use super::super::{BufRing, Cqe, SockRing, SocketLayer};
use super::{Backing, Done, RingConn};

/// The environment variable naming the features a connection asks for
/// (`sendzc`, `multishot`, comma-separated; `none` or unset: neither).
pub const FEATURES_ENV: &str = "SANBENCH_SOCKRING_FEATURES";
/// The smallest send that goes zero-copy.
pub const ZC_MIN: usize = 64 * 1024;
/// Provided buffers per connection and their size: a 4 KiB QD 32 batch of replies, or a
/// 1 MiB READ, fits in the ring without running it dry.
pub const RING_BUFS: u16 = 64;
pub const RING_BUF: usize = 32 * 1024;

/// The `user_data` of the armed multishot receive (conn.rs uses 1 and 2).
pub(super) const RECV_MULTI: u64 = 3;

/// Which opt-in features a connection uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingFeatures {
    pub send_zc: bool,
    pub multishot: bool,
}

impl RingFeatures {
    /// `sendzc`, `multishot`, comma-separated, or `none`/empty.
    pub fn parse(s: &str) -> Option<RingFeatures> {
        let mut f = RingFeatures::default();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match w {
                "sendzc" | "send_zc" => f.send_zc = true,
                "multishot" => f.multishot = true,
                "none" => {}
                _ => return None,
            }
        }
        Some(f)
    }

    /// What [`FEATURES_ENV`] asks (unset or unknown: none).
    pub fn from_env() -> RingFeatures {
        std::env::var(FEATURES_ENV)
            .ok()
            .and_then(|v| RingFeatures::parse(&v))
            .unwrap_or_default()
    }

    /// The names, as [`parse`](Self::parse) takes them (`none` for neither).
    pub fn name(self) -> String {
        match (self.send_zc, self.multishot) {
            (false, false) => "none".into(),
            (true, false) => "sendzc".into(),
            (false, true) => "multishot".into(),
            (true, true) => "sendzc,multishot".into(),
        }
    }

    pub fn any(self) -> bool {
        self.send_zc || self.multishot
    }

    /// What [`FEATURES_ENV`] asks and this kernel has (the kernel probed once per process).
    pub fn from_env_chosen() -> RingFeatures {
        let asked = RingFeatures::from_env();
        if !asked.any() {
            return asked;
        }
        static PROBED: std::sync::OnceLock<RingFeatures> = std::sync::OnceLock::new();
        let have = *PROBED.get_or_init(|| {
            RingFeatures {
                send_zc: true,
                multishot: true,
            }
            .choose()
            .0
        });
        RingFeatures {
            send_zc: asked.send_zc && have.send_zc,
            multishot: asked.multishot && have.multishot,
        }
    }

    /// The engine info's `socket_features` (`none` when nothing was asked) and, when the
    /// kernel lacked something asked, `socket_features_fallback`, for a target whose queues
    /// run on `layer` (nothing on the poll loop, which has no features).
    pub fn info_params(layer: SocketLayer) -> Vec<(&'static str, String)> {
        if layer != SocketLayer::Uring {
            return Vec::new();
        }
        let (on, why) = RingFeatures::from_env().choose();
        let mut v = vec![("socket_features", on.name())];
        if let Some(why) = why {
            v.push(("socket_features_fallback", why));
        }
        v
    }

    /// What this kernel runs of `self`, and why the rest was dropped.
    pub fn choose(self) -> (RingFeatures, Option<String>) {
        self.choose_with(SockRing::probe_zc, SockRing::probe_multishot)
    }

    /// [`choose`](Self::choose) with the kernel's answers given (tests).
    pub fn choose_with(
        self,
        zc: impl FnOnce() -> Result<(), String>,
        multi: impl FnOnce() -> Result<(), String>,
    ) -> (RingFeatures, Option<String>) {
        let mut out = self;
        let mut why = Vec::new();
        if self.send_zc {
            if let Err(e) = zc() {
                out.send_zc = false;
                why.push(format!("sendzc: {e}"));
            }
        }
        if self.multishot {
            if let Err(e) = multi() {
                out.multishot = false;
                why.push(format!("multishot: {e}"));
            }
        }
        (out, (!why.is_empty()).then(|| why.join("; ")))
    }
}

/// The multishot receive's state.
struct Multi {
    br: BufRing,
    armed: bool,
    /// Filled buffers not yet copied out: buffer id, bytes read from it, bytes in it.
    held: VecDeque<(u16, usize, usize)>,
    /// The receive asked by the owner: where and how much.
    want: Option<(*mut u8, usize)>,
    /// How the armed receive ended, other than ENOBUFS (end of stream, an error), for the
    /// next receive asked once the held bytes are out.
    ended: Option<i32>,
}

/// The state of the features beside the connection's plain send and receive.
#[derive(Default)]
pub(super) struct Feat {
    pub(super) on: RingFeatures,
    /// A zero-copy send's result, kept until its notification.
    zc_result: Option<i32>,
    /// The flags of the zero-copy send in the kernel (to send it again without).
    zc_flags: i32,
    /// The send in the kernel went zero-copy: its buffers are the kernel's until the
    /// notification.
    zc_pending: bool,
    multi: Option<Multi>,
    /// Receives satisfied from held buffers, reported by the next take.
    ready: Vec<i32>,
}

impl RingConn {
    /// A connection with `features` on (those this kernel has: see
    /// [`RingFeatures::choose`]); a buffer ring is registered for `multishot`.
    pub fn open_with(fd: std::os::fd::RawFd, features: RingFeatures) -> Result<RingConn, String> {
        let mut c = RingConn::open_plain(fd)?;
        c.feat.on = features;
        if features.multishot {
            let br =
                BufRing::new(RING_BUFS, RING_BUF, 0).map_err(|e| format!("buffer ring: {e}"))?;
            c.own()
                .and_then(|r| r.register_buf_ring(&br))
                .map_err(|e| format!("IORING_REGISTER_PBUF_RING: {e}"))?;
            c.feat.multi = Some(Multi {
                br,
                armed: false,
                held: VecDeque::new(),
                want: None,
                ended: None,
            });
        }
        Ok(c)
    }

    /// The features this connection runs.
    pub fn features(&self) -> RingFeatures {
        self.feat.on
    }

    /// Pushes the prepared `msg` as SENDMSG, or SENDMSG_ZC when zero-copy is on and the
    /// send is large.
    ///
    /// # Safety
    /// As [`RingConn::send`]: the buffers stay untouched until the `Done::Sent`.
    pub(super) unsafe fn push_msg(&mut self, flags: i32, total: usize) -> io::Result<()> {
        let msg: *const libc::msghdr = &*self.msg;
        if self.feat.on.send_zc && total >= ZC_MIN {
            self.feat.zc_result = None;
            self.feat.zc_flags = flags;
            self.feat.zc_pending = true;
            // SAFETY: forwarded from the caller; the send is reported only at the
            // notification, so the caller keeps the buffers that long.
            unsafe { self.own()?.send_msg_zc(0, msg, flags, super::SEND) }
        } else {
            // SAFETY: forwarded from the caller.
            unsafe { self.push_plain_msg(flags) }
        }
    }

    /// Pushes the prepared `msg` as a plain SENDMSG, on whichever ring the connection is.
    ///
    /// # Safety
    /// As [`RingConn::send`].
    unsafe fn push_plain_msg(&mut self, flags: i32) -> io::Result<()> {
        let e = super::super::send_msg_sqe(self.ring.file(), &*self.msg, flags, false);
        // SAFETY: forwarded from the caller.
        unsafe { self.ring.push(e, super::SEND) }
    }

    /// The connection's own ring: the features run only there (a connection that asks for
    /// them never attaches to a shared ring, `RingConn::open_on`).
    fn own(&mut self) -> io::Result<&mut SockRing> {
        match &mut self.ring {
            Backing::Own(r) => Ok(r),
            Backing::Shared(_) => Err(io::Error::other(
                "the io_uring features run on a ring of the connection's own",
            )),
        }
    }

    /// A completion of the send: its result once the kernel is done with the buffers (at
    /// once for a plain send; at the notification for a zero-copy one), else `None`.
    pub(super) fn send_done(&mut self, c: &Cqe) -> Option<i32> {
        let r = self.send_result(c);
        if r.is_some() {
            self.feat.zc_pending = false;
        }
        r
    }

    /// Whether the send in the kernel went zero-copy: the kernel may read its buffers until
    /// its `Done::Sent` (the notification), even after the peer answered what it carried.
    pub fn zero_copy_in_flight(&self) -> bool {
        self.sending.is_some() && self.feat.zc_pending
    }

    fn send_result(&mut self, c: &Cqe) -> Option<i32> {
        if self.feat.on.send_zc && !c.more() && !c.notif() && c.result == -libc::EOPNOTSUPP {
            // A socket that takes no zero-copy sends (kernel TLS): this one again as a plain
            // SENDMSG (msg and its buffers are untouched until the Done), and no more tries.
            self.feat.on.send_zc = false;
            let flags = self.feat.zc_flags;
            // SAFETY: the caller of `send` keeps the buffers until the Done, which is not out.
            if unsafe { self.push_plain_msg(flags) }.is_ok() {
                return None;
            }
        }
        if c.notif() {
            return Some(self.feat.zc_result.take().unwrap_or(c.result));
        }
        if c.more() {
            self.feat.zc_result = Some(c.result);
            return None;
        }
        Some(c.result)
    }

    /// [`RingConn::recv`] on the multishot ring: true when it handled it.
    ///
    /// # Safety
    /// As [`RingConn::recv`].
    pub(super) unsafe fn recv_multi(&mut self, buf: *mut u8, len: usize) -> io::Result<bool> {
        let Some(m) = self.feat.multi.as_mut() else {
            return Ok(false);
        };
        m.want = Some((buf, len));
        self.receiving = true;
        if let Some(n) = self.fill_want() {
            self.feat.ready.push(n);
        }
        self.arm()?;
        Ok(true)
    }

    /// Copies held bytes into the asked receive; the result to report, if one is due.
    fn fill_want(&mut self) -> Option<i32> {
        let m = self.feat.multi.as_mut()?;
        let (buf, len) = m.want?;
        let mut done = 0;
        while done < len {
            let Some(&mut (bid, ref mut at, n)) = m.held.front_mut() else {
                break;
            };
            let k = (n - *at).min(len - done);
            let src = &m.br.buf(bid, n)[*at..*at + k];
            // SAFETY: the owner gave `buf..buf+len` for this receive (see `recv`), and `src`
            // is a buffer the kernel filled and handed over (its completion was taken).
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), buf.add(done), k) };
            done += k;
            *at += k;
            if *at == n {
                m.held.pop_front();
                m.br.recycle(bid);
            }
        }
        if done == 0 && len > 0 {
            // Nothing held: the end of the stream, an error, or wait for bytes.
            let e = m.ended.take()?;
            m.want = None;
            self.receiving = false;
            return Some(e);
        }
        m.want = None;
        self.receiving = false;
        Some(done.min(i32::MAX as usize) as i32)
    }

    /// Arms the multishot receive unless it is armed, ended for good, or the ring is dry.
    fn arm(&mut self) -> io::Result<()> {
        let Some(m) = self.feat.multi.as_mut() else {
            return Ok(());
        };
        if m.armed || m.ended.is_some() || m.held.len() >= m.br.entries() as usize {
            return Ok(());
        }
        let bgid = m.br.bgid();
        // SAFETY: the buffer ring lives in `feat` beside the ring, which is dropped first (its
        // field comes first) or drained before; a drain that fails leaks the buffer ring.
        unsafe { self.own()?.recv_multi(0, bgid, RECV_MULTI)? };
        let Some(m) = self.feat.multi.as_mut() else {
            return Ok(());
        };
        m.armed = true;
        Ok(())
    }

    /// A completion of the multishot receive: its bytes wait in their buffer until
    /// [`feat_after_take`](Self::feat_after_take) copies what came in this take at once.
    pub(super) fn multi_done(&mut self, c: &Cqe) {
        let Some(m) = self.feat.multi.as_mut() else {
            return;
        };
        if !c.more() {
            m.armed = false;
        }
        match (c.buffer(), c.result) {
            (Some(bid), n) if n > 0 => m.held.push_back((bid, 0, n as usize)),
            (_, e) if e == -libc::ENOBUFS => {}
            (Some(bid), _) => m.br.recycle(bid),
            (None, n) if n > 0 => {}
            // Cancelled by a drain: nothing to report.
            (None, e) if e == -libc::ECANCELED => {}
            (None, e) => m.ended = Some(e),
        }
    }

    /// After a take's completions: the receive asked gets every byte that came (up to its
    /// length) as one `Done::Received`, as one RECV into the buffer would have taken them,
    /// rather than one per kernel buffer.
    pub(super) fn feat_after_take(&mut self, out: &mut Vec<Done>) {
        if let Some(n) = self.fill_want() {
            out.push(Done::Received(n));
        }
    }

    /// Reports receives served from held buffers, and arms the receive again if it ended
    /// for want of buffers (called at the end of every take).
    pub(super) fn feat_take(&mut self, out: &mut Vec<Done>) {
        out.extend(self.feat.ready.drain(..).map(Done::Received));
        if self.arm().is_err() {
            // A full submission queue: the next receive asked arms it.
        }
    }

    /// Whether a receive was served without the kernel and waits for `take`.
    pub(super) fn has_ready(&self) -> bool {
        !self.feat.ready.is_empty()
    }

    /// After a drain: forget the features' operations; `leak` when the kernel may still
    /// write into the buffer ring.
    pub(super) fn feat_drained(&mut self, leak: bool) {
        self.feat.zc_result = None;
        self.feat.zc_pending = false;
        self.feat.ready.clear();
        if let Some(m) = self.feat.multi.as_mut() {
            m.armed = false;
            m.want = None;
        }
        if leak {
            if let Some(m) = self.feat.multi.take() {
                std::mem::forget(m.br);
            }
        }
    }
}

#[cfg(test)]
mod tests;
