//! The `nbd://` engine.
//!
//! [`open`] connects once, negotiates (`NBD_OPT_STRUCTURED_REPLY` when wanted, then
//! `NBD_OPT_GO` asking for block sizes, falling back to `NBD_OPT_EXPORT_NAME` on old servers)
//! and reports what it learnt in [`TargetInfo`]. Every queue then opens its own connection and
//! negotiates again; see [`queue`] for the I/O path. [`Target::allocation`] asks the server for
//! holes on a short-lived connection of its own ([`block_status`]).
//!
//! URIs: `nbd://HOST[:PORT][/EXPORT]` (port 10809, export "" by default; IPv6 as `[::1]`) and
//! `nbd+unix:///EXPORT?socket=PATH`; `nbds://` and `nbds+unix://` negotiate TLS
//! (`NBD_OPT_STARTTLS`) before anything else and never fall back to plaintext (see [`uri`] for
//! libnbd's TLS keys and [`crate::tls`]).

mod block_status;
mod handshake;
mod queue;
mod uri;

use std::collections::BTreeMap;
use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::io::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use sanbench_io::{
    Allocation, EngineError, Queue, QueueConfig, SockRing, SocketLayer, Target, TargetInfo,
};
use serde_json::json;

use crate::tls::{kernel_recv, Connector, Handover, KtlsMode, Records, Tls, Wait};
use crate::wire::handshake::tflags;
use crate::wire::MAX_PAYLOAD;
use handshake::Negotiated;

/// Client knobs; `Default` is what a benchmark wants.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Ask for structured replies (`NBD_OPT_STRUCTURED_REPLY`) when the server offers them.
    /// Simple replies cost 12 bytes less per READ; structured ones carry error messages.
    pub structured_replies: bool,
    /// Limit for connecting and for the whole handshake.
    pub connect_timeout: Duration,
    /// Set `NBD_CMD_FLAG_FUA` on writes (when the server supports it).
    pub fua: bool,
    /// Receive buffer per queue: replies are read in pieces of up to this size.
    pub recv_buffer: usize,
    /// Up to this many new requests wait to be sent together while more than half the queue
    /// depth is still outstanding at the server (1 = send every batch at once), as the iSCSI
    /// initiator does: fewer send calls and server wake-ups per I/O, and the server still
    /// always has at least half the depth to work on. Held requests count as outstanding, so
    /// against a server that is not saturated a batch of N costs up to N-1 of the queue depth;
    /// the default of 2 keeps that to one request (against nbdkit at QD 32 it halves the
    /// client's send calls and cuts its CPU per I/O by about a fifth).
    pub submit_batch: u32,
    /// The socket layer asked for: the poll loop, or io_uring where this kernel has what it
    /// needs (checked at open; plaintext and kernel TLS only, user-space TLS stays on the poll
    /// loop). The default is
    /// `SANBENCH_SOCKET` from the environment, else poll.
    pub socket: SocketLayer,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            structured_replies: true,
            connect_timeout: Duration::from_secs(10),
            fua: false,
            recv_buffer: 256 * 1024,
            submit_batch: 2,
            socket: SocketLayer::from_env(),
        }
    }
}

/// Where the server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Addr {
    Tcp(String),
    Unix(PathBuf),
}

impl std::fmt::Display for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Addr::Tcp(a) => f.write_str(a),
            Addr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// A connected socket of either kind.
pub(crate) enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    pub(crate) fn fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Unix(s) => s.as_raw_fd(),
        }
    }

    pub(crate) fn set_read_timeout(&self, t: Duration) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.set_read_timeout(Some(t)),
            Sock::Unix(s) => s.set_read_timeout(Some(t)),
        }
    }

    pub(crate) fn set_write_timeout(&self, t: Duration) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.set_write_timeout(Some(t)),
            Sock::Unix(s) => s.set_write_timeout(Some(t)),
        }
    }
}

impl AsFd for Sock {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Sock::Tcp(s) => s.as_fd(),
            Sock::Unix(s) => s.as_fd(),
        }
    }
}

impl io::Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.read(buf),
            Sock::Unix(s) => s.read(buf),
        }
    }
}

impl io::Write for Sock {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.write(buf),
            Sock::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A connection: the socket, and the TLS session over it after `NBD_OPT_STARTTLS` until the
/// kernel takes the records over (`ktls`; the socket then carries plaintext). Its
/// `Read`/`Write` are blocking (the socket's timeouts); the queue's data path uses the parts
/// directly.
pub(crate) struct Stream {
    pub sock: Sock,
    pub tls: Option<Tls>,
    /// The kernel makes this connection's TLS records (see [`handover`]).
    pub ktls: bool,
}

impl Stream {
    pub(crate) fn fd(&self) -> RawFd {
        self.sock.fd()
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl io::Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.tls {
            Some(t) => t.recv(self.sock.fd(), buf, Wait::Block),
            None if self.ktls => kernel_recv(self.sock.fd(), buf, Wait::Block),
            None => self.sock.read(buf),
        }
    }
}

impl io::Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.tls {
            Some(t) => t.send_all(self.sock.fd(), buf).map(|()| buf.len()),
            None => self.sock.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Opens an NBD export: one handshake to learn its size and flags.
pub fn open(uri: &str, opts: &ClientOptions) -> Result<Box<dyn Target>, EngineError> {
    let u = uri::parse_uri(uri)?;
    let tls = match &u.tls {
        Some(t) => Some(Connector::new(t).map_err(|e| {
            EngineError::Invalid(format!("{}: {e}", sanbench_io::redact::redact(uri)))
        })?),
        None => None,
    };
    let (addr, export) = (u.addr, u.export);
    let (mut sock, neg, _rest) = connect(&addr, &export, opts, tls.as_ref(), None)?;
    let tls_desc = sock.tls.as_ref().map(Tls::describe);
    // The queues' connections are handed over alike: this one says in the result who made
    // the records (and leaves through the kernel's close_notify when it took them).
    let records = match &tls {
        Some(c) => Some(handover(&mut sock, c.ktls(), &addr)?),
        None => None,
    };
    // Leave politely: this connection only served to learn the export's parameters.
    disconnect(&mut sock);
    let mut info = target_info(uri, &addr, &export, &neg);
    // Chosen once, here, and named in the engine info: the layer every queue uses.
    // Over kernel TLS the socket carries plaintext: io_uring's sends and receives work on it.
    let user_tls = tls.is_some() && records != Some(Records::Kernel);
    let (socket, fallback) = choose_socket(opts.socket, user_tls, SockRing::probe);
    info.params.insert("socket".into(), json!(socket.name()));
    for (k, v) in sanbench_io::RingFeatures::info_params(socket) {
        info.params.insert(k.into(), json!(v));
    }
    if let Some(f) = fallback {
        info.params
            .insert("socket_fallback".into(), json!(format!("uring asked: {f}")));
    }
    info.params
        .insert("tls".into(), tls_desc.map_or(json!(false), |d| json!(d)));
    if let Some(r) = &records {
        info.params
            .insert("tls_records".into(), json!(r.to_string()));
    }
    Ok(Box::new(NbdTarget {
        info,
        flags: neg.flags,
        addr,
        export,
        opts: opts.clone(),
        tls,
        socket,
    }))
}

/// The socket layer a target's queues use: io_uring only when asked, over plaintext, and
/// where `probe` finds what it needs; else the poll loop and, when io_uring was asked for, why
/// not.
fn choose_socket(
    asked: SocketLayer,
    tls: bool,
    probe: impl FnOnce() -> Result<(), String>,
) -> (SocketLayer, Option<String>) {
    match asked {
        SocketLayer::Uring if tls => (
            SocketLayer::Poll,
            Some("TLS records are made in user space".to_string()),
        ),
        _ => asked.choose_with(probe),
    }
}

/// Sends NBD_CMD_DISC (best effort: the connection is dropped next anyway), and TLS's
/// close_notify.
fn disconnect(sock: &mut Stream) {
    let mut disc = Vec::with_capacity(28);
    crate::wire::transmission::Request {
        flags: 0,
        cmd: crate::wire::transmission::cmd::DISC,
        cookie: 0,
        offset: 0,
        len: 0,
    }
    .encode(&mut disc);
    let _ = io::Write::write_all(sock, &disc);
    let fd = sock.fd();
    if let Some(t) = &mut sock.tls {
        t.close(fd);
    } else if sock.ktls {
        crate::tls::close_notify(fd);
    }
}

/// Offers a connection's TLS session to the kernel once the NBD handshake is over (the server
/// then waits for requests, so no record is in flight): who makes its records from now on.
fn handover(s: &mut Stream, mode: KtlsMode, addr: &Addr) -> Result<Records, EngineError> {
    let Some(t) = s.tls.take() else {
        return Ok(Records::User("no TLS session".into()));
    };
    if mode == KtlsMode::Off {
        s.tls = Some(t);
        return Ok(Records::User("ktls=off".into()));
    }
    match t.into_kernel(s.fd()) {
        Ok(Handover::Kernel) => {
            s.ktls = true;
            Ok(Records::Kernel)
        }
        Ok(Handover::User(t, why)) => {
            s.tls = Some(t);
            Ok(Records::User(why))
        }
        Err(e) => Err(EngineError::Connect {
            addr: addr.to_string(),
            reason: format!("handing TLS to the kernel: {e} (?ktls=off keeps it in user space)"),
        }),
    }
}

fn connect(
    addr: &Addr,
    export: &str,
    opts: &ClientOptions,
    tls: Option<&Connector>,
    meta: Option<&str>,
) -> Result<(Stream, Negotiated, Vec<u8>), EngineError> {
    let peer = addr.to_string();
    let cerr = |reason: String| EngineError::Connect {
        addr: peer.clone(),
        reason,
    };
    let sock = match addr {
        Addr::Tcp(a) => {
            let addrs = a.to_socket_addrs().map_err(|e| cerr(e.to_string()))?;
            let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
            let mut found = None;
            for sa in addrs {
                match TcpStream::connect_timeout(&sa, opts.connect_timeout) {
                    Ok(s) => {
                        found = Some(s);
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            let s = found.ok_or_else(|| cerr(last.to_string()))?;
            s.set_nodelay(true).map_err(|e| cerr(e.to_string()))?;
            Sock::Tcp(s)
        }
        Addr::Unix(p) => Sock::Unix(UnixStream::connect(p).map_err(|e| cerr(e.to_string()))?),
    };
    sock.set_read_timeout(opts.connect_timeout)
        .and_then(|()| sock.set_write_timeout(opts.connect_timeout))
        .map_err(|e| cerr(e.to_string()))?;
    let mut stream = Stream {
        sock,
        tls: None,
        ktls: false,
    };
    let (neg, rest) = handshake::negotiate(&mut stream, export, opts, tls, meta, &peer)?;
    Ok((stream, neg, rest))
}

fn target_info(uri: &str, addr: &Addr, export: &str, n: &Negotiated) -> TargetInfo {
    let mut params = BTreeMap::new();
    params.insert("server".into(), json!(addr.to_string()));
    params.insert("export".into(), json!(export));
    // All NBD can say of what it reached (a multipath target compares it across its paths).
    params.insert(
        sanbench_io::params::LU_ID.into(),
        json!(format!("export {export:?} of {} bytes", n.size)),
    );
    params.insert("transmission_flags".into(), json!(tflags::names(n.flags)));
    params.insert("structured_replies".into(), json!(n.structured));
    params.insert(
        sanbench_io::params::MULTI_CONN.into(),
        json!(n.flags & tflags::CAN_MULTI_CONN != 0),
    );
    params.insert(
        "negotiation".into(),
        json!(if n.used_go { "GO" } else { "EXPORT_NAME" }),
    );
    if let Some((min, preferred, max)) = n.block_sizes {
        params.insert("min_block_size".into(), json!(min));
        params.insert("preferred_block_size".into(), json!(preferred));
        params.insert("max_payload".into(), json!(max));
    }
    if let Some(name) = &n.name {
        params.insert("canonical_name".into(), json!(name));
    }
    if let Some(d) = &n.description {
        params.insert("description".into(), json!(d));
    }
    let (min, max) = n.block_sizes.map_or((1, MAX_PAYLOAD), |(min, _, max)| {
        (min.max(1), max.min(MAX_PAYLOAD))
    });
    TargetInfo {
        uri: uri.to_string(),
        engine: "nbd".into(),
        size: n.size,
        block_size: min,
        max_transfer: Some(max),
        read_only: n.flags & tflags::READ_ONLY != 0,
        params,
    }
}

struct NbdTarget {
    info: TargetInfo,
    /// The export's transmission flags (what it offers).
    flags: u16,
    addr: Addr,
    export: String,
    opts: ClientOptions,
    /// The TLS credentials of an `nbds` URI, loaded once for every connection.
    tls: Option<Connector>,
    /// The socket layer chosen at open.
    socket: SocketLayer,
}

impl Target for NbdTarget {
    fn info(&self) -> &TargetInfo {
        &self.info
    }

    fn allocation(&self, offset: u64, len: u64) -> Result<Option<Allocation>, EngineError> {
        block_status::allocation(self, offset, len)
    }

    /// TRIM and WRITE_ZEROES where the export offers them (SEND_TRIM, SEND_WRITE_ZEROES).
    fn supports(&self, op: sanbench_io::Op) -> bool {
        match op {
            sanbench_io::Op::Trim => self.flags & tflags::SEND_TRIM != 0,
            sanbench_io::Op::WriteZeroes => self.flags & tflags::SEND_WRITE_ZEROES != 0,
            _ => true,
        }
    }

    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        let (mut sock, neg, rest) = connect(
            &self.addr,
            &self.export,
            &self.opts,
            self.tls.as_ref(),
            None,
        )?;
        if let Some(c) = &self.tls {
            handover(&mut sock, c.ktls(), &self.addr)?;
        }
        if neg.size != self.info.size {
            return Err(EngineError::Protocol {
                peer: self.addr.to_string(),
                reason: format!(
                    "export size changed from {} to {} between connections",
                    self.info.size, neg.size
                ),
            });
        }
        let q = queue::NbdQueue::new(
            sock,
            self.addr.to_string(),
            &neg,
            &rest,
            cfg,
            &self.opts,
            self.socket,
        )?;
        Ok(Box::new(q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_uring_is_used_only_when_asked_plaintext_and_supported() {
        let ok = || Ok(());
        let old = || Err("no IORING_OP_RECV".to_string());
        assert_eq!(
            choose_socket(SocketLayer::Uring, false, ok),
            (SocketLayer::Uring, None)
        );
        assert_eq!(
            choose_socket(SocketLayer::Poll, false, ok),
            (SocketLayer::Poll, None)
        );
        let (l, why) = choose_socket(SocketLayer::Uring, false, old);
        assert_eq!(
            (l, why.as_deref()),
            (SocketLayer::Poll, Some("no IORING_OP_RECV"))
        );
        let (l, why) = choose_socket(SocketLayer::Uring, true, ok);
        assert_eq!(l, SocketLayer::Poll);
        assert!(why.unwrap().contains("TLS"));
    }
}
