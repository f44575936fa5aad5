//! The client side of fixed newstyle negotiation, over a blocking socket with timeouts.

use std::io::{self, Read, Write};

use sanbench_io::EngineError;

use super::{ClientOptions, Stream};
use crate::tls::{Connector, Tls};
use crate::wire::handshake::{
    cflags, hflags, info, opt, rep, ClientOption, ExportNameReply, GoRequest, Greeting, Info,
    OptionReply, ReplyBody,
};
use crate::wire::meta::MetaContextRequest;
use crate::wire::{DecodeResult, Parsed};

/// What the handshake settled.
#[derive(Clone, Debug)]
pub(crate) struct Negotiated {
    pub size: u64,
    pub flags: u16,
    pub structured: bool,
    /// (minimum, preferred, maximum payload) when the server sent `NBD_INFO_BLOCK_SIZE`.
    pub block_sizes: Option<(u32, u32, u32)>,
    pub name: Option<String>,
    pub description: Option<String>,
    /// False when the server did not know `NBD_OPT_GO`.
    pub used_go: bool,
    /// The id the server gave the metadata context asked for, when it selected it.
    pub meta_context: Option<u32>,
}

/// Said when an X.509 server ends the connection right after the TLS handshake: with TLS 1.3
/// a server's verdict on the client's certificate comes only then (GnuTLS hangs up, rustls
/// sends an alert).
const CLIENT_CERT_HINT: &str = " (a server that verifies client certificates ends the \
connection when the client has none it trusts: put client-cert.pem and client-key.pem, signed \
by the server's CA, in tls-certificates=DIR)";

struct Conv<'a> {
    sock: &'a mut Stream,
    peer: &'a str,
    buf: Vec<u8>,
    /// Set between an X.509 handshake and the first reply inside TLS.
    cert_hint: bool,
}

impl Conv<'_> {
    fn err(&self, e: io::Error, doing: &str) -> EngineError {
        let tls_refusal = e.kind() == io::ErrorKind::UnexpectedEof
            || e.kind() == io::ErrorKind::ConnectionReset
            || e.kind() == io::ErrorKind::InvalidData;
        if self.cert_hint && tls_refusal {
            return EngineError::Disconnected {
                peer: self.peer.into(),
                reason: format!("{doing}: {e}{CLIENT_CERT_HINT}"),
            };
        }
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => EngineError::Timeout {
                peer: self.peer.into(),
                secs: 0.0,
            },
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe => EngineError::Disconnected {
                peer: self.peer.into(),
                reason: format!("{doing}: {e}"),
            },
            _ => EngineError::Io {
                op: "NBD handshake",
                offset: 0,
                source: e,
            },
        }
    }

    fn protocol(&self, reason: impl Into<String>) -> EngineError {
        EngineError::Protocol {
            peer: self.peer.into(),
            reason: reason.into(),
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), EngineError> {
        self.sock
            .write_all(bytes)
            .map_err(|e| self.err(e, "sending handshake"))
    }

    /// Reads until `decode` yields a message, and removes it from the buffer.
    fn recv<T>(&mut self, decode: impl Fn(&[u8]) -> DecodeResult<T>) -> Result<T, EngineError> {
        loop {
            match decode(&self.buf) {
                Ok(Parsed::Done { value, len }) => {
                    self.buf.drain(..len);
                    return Ok(value);
                }
                Ok(Parsed::Incomplete { needed }) => {
                    let have = self.buf.len();
                    self.buf.resize(needed, 0);
                    let r = self.sock.read(&mut self.buf[have..]);
                    match r {
                        Ok(0) => {
                            self.buf.truncate(have);
                            return Err(self.err(
                                io::ErrorKind::UnexpectedEof.into(),
                                "server closed the connection during the handshake",
                            ));
                        }
                        Ok(n) => self.buf.truncate(have + n),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => self.buf.truncate(have),
                        Err(e) => return Err(self.err(e, "reading handshake")),
                    }
                }
                Err(e) => return Err(self.protocol(e.to_string())),
            }
        }
    }

    fn option(&mut self, o: &ClientOption) -> Result<(), EngineError> {
        let mut b = Vec::new();
        o.encode(&mut b);
        self.send(&b)
    }

    fn reply(&mut self, option: u32) -> Result<ReplyBody, EngineError> {
        let r = self.recv(OptionReply::decode)?;
        self.cert_hint = false;
        if r.option != option {
            return Err(self.protocol(format!(
                "reply to option {} while waiting for option {option}",
                r.option
            )));
        }
        Ok(r.body)
    }
}

impl Conv<'_> {
    /// `NBD_OPT_STARTTLS`, then the TLS handshake; every later byte goes through TLS. A
    /// server that answers anything but an ack ends the connection: a client that asked for
    /// TLS never goes on in plaintext.
    fn starttls(&mut self, connector: &Connector, opts: &ClientOptions) -> Result<(), EngineError> {
        self.option(&ClientOption::Other {
            option: opt::STARTTLS,
            data: Vec::new(),
        })?;
        match self.reply(opt::STARTTLS)? {
            ReplyBody::Ack => {}
            ReplyBody::Error { code, message } => {
                let what = match code {
                    rep::ERR_UNSUP => "the server does not offer TLS",
                    rep::ERR_POLICY => "the server's policy refuses TLS",
                    _ => "the server refused TLS",
                };
                return Err(EngineError::Connect {
                    addr: self.peer.into(),
                    reason: format!(
                        "NBD_OPT_STARTTLS: {what} ({code:#x}{}{message}); nbds:// never falls \
                         back to plaintext",
                        if message.is_empty() { "" } else { ": " }
                    ),
                });
            }
            other => {
                return Err(
                    self.protocol(format!("unexpected reply to NBD_OPT_STARTTLS: {other:?}"))
                )
            }
        }
        // Anything the server sent after its ack and before TLS is not to be trusted.
        if !self.buf.is_empty() {
            return Err(self.protocol("data after the NBD_OPT_STARTTLS reply before TLS"));
        }
        let session = connector.session().map_err(|e| EngineError::Connect {
            addr: self.peer.into(),
            reason: e.to_string(),
        })?;
        let deadline = std::time::Instant::now() + opts.connect_timeout;
        let fd = self.sock.fd();
        let t = Tls::handshake(fd, session, deadline, &|| false).map_err(|e| {
            // A GnuTLS server hangs up on an unknown identity or a wrong key without a word.
            let hint = if connector.is_psk() {
                " (is the PSK identity known to the server and its key the same?)"
            } else {
                ""
            };
            EngineError::Connect {
                addr: self.peer.into(),
                reason: format!("TLS handshake: {e}{hint}"),
            }
        })?;
        self.sock.tls = Some(t);
        self.cert_hint = !connector.is_psk();
        Ok(())
    }
}

/// Negotiates `export`; returns what was agreed and any bytes read past the handshake.
/// `meta`: a metadata context to select (`NBD_OPT_SET_META_CONTEXT`, only once structured
/// replies are agreed); the data path asks for none.
pub(crate) fn negotiate(
    sock: &mut Stream,
    export: &str,
    opts: &ClientOptions,
    tls: Option<&Connector>,
    meta: Option<&str>,
    peer: &str,
) -> Result<(Negotiated, Vec<u8>), EngineError> {
    let mut c = Conv {
        sock,
        peer,
        buf: Vec::with_capacity(4096),
        cert_hint: false,
    };
    let timeout = opts.connect_timeout.as_secs_f64();
    let fix_timeout = |e: EngineError| match e {
        EngineError::Timeout { peer, .. } => EngineError::Timeout {
            peer,
            secs: timeout,
        },
        e => e,
    };
    let g = c.recv(Greeting::decode).map_err(fix_timeout)?;
    if g.flags & hflags::FIXED_NEWSTYLE == 0 {
        return Err(c.protocol("server does not speak fixed newstyle negotiation"));
    }
    let no_zeroes = g.flags & hflags::NO_ZEROES != 0;
    let mut cf = cflags::FIXED_NEWSTYLE;
    if no_zeroes {
        cf |= cflags::NO_ZEROES;
    }
    c.send(&cf.to_be_bytes())?;
    if let Some(connector) = tls {
        c.starttls(connector, opts).map_err(fix_timeout)?;
    }

    let mut structured = false;
    if opts.structured_replies {
        c.option(&ClientOption::StructuredReply)?;
        structured = matches!(
            c.reply(opt::STRUCTURED_REPLY).map_err(fix_timeout)?,
            ReplyBody::Ack
        );
    }

    let mut meta_context = None;
    if let (Some(want), true) = (meta, structured) {
        c.option(&ClientOption::SetMetaContext(MetaContextRequest {
            export: export.into(),
            queries: vec![want.into()],
        }))?;
        loop {
            match c.reply(opt::SET_META_CONTEXT).map_err(fix_timeout)? {
                ReplyBody::Ack => break,
                ReplyBody::MetaContext { id, name } => {
                    if name == want {
                        meta_context = Some(id);
                    }
                }
                // NBD_REP_ERR_UNSUP and the like: the server has no metadata contexts.
                ReplyBody::Error { .. } => break,
                other => {
                    return Err(c.protocol(format!(
                        "unexpected reply to NBD_OPT_SET_META_CONTEXT: {other:?}"
                    )))
                }
            }
        }
    }

    let go = GoRequest {
        name: export.into(),
        requests: vec![info::BLOCK_SIZE, info::NAME, info::DESCRIPTION],
    };
    c.option(&ClientOption::Go(go))?;
    let mut n = Negotiated {
        size: 0,
        flags: 0,
        structured,
        block_sizes: None,
        name: None,
        description: None,
        used_go: true,
        meta_context,
    };
    let mut have_export = false;
    loop {
        match c.reply(opt::GO).map_err(fix_timeout)? {
            ReplyBody::Ack => break,
            ReplyBody::Info(Info::Export { size, flags }) => {
                (n.size, n.flags, have_export) = (size, flags, true)
            }
            ReplyBody::Info(Info::BlockSize {
                min,
                preferred,
                max_payload,
            }) => n.block_sizes = Some((min, preferred, max_payload)),
            ReplyBody::Info(Info::Name(s)) => n.name = Some(s),
            ReplyBody::Info(Info::Description(s)) => n.description = Some(s),
            ReplyBody::Info(Info::Other { .. })
            | ReplyBody::MetaContext { .. }
            | ReplyBody::Other { .. } => {}
            ReplyBody::Error { code, .. } if code == rep::ERR_UNSUP => {
                // Old server: NBD_OPT_EXPORT_NAME cannot report errors, but it is all there is.
                c.option(&ClientOption::ExportName(export.into()))?;
                let r = c
                    .recv(|b| ExportNameReply::decode(b, no_zeroes))
                    .map_err(fix_timeout)?;
                (n.size, n.flags, have_export, n.used_go) = (r.size, r.flags, true, false);
                break;
            }
            ReplyBody::Error { code, message } => {
                let what = match code {
                    rep::ERR_UNKNOWN => "no such export",
                    rep::ERR_TLS_REQD => "the server requires TLS (use nbds://)",
                    rep::ERR_POLICY => "refused by server policy",
                    rep::ERR_BLOCK_SIZE_REQD => "block size negotiation required",
                    _ => "option refused",
                };
                return Err(EngineError::Connect {
                    addr: peer.into(),
                    reason: format!("export {export:?}: {what} ({code:#x}) {message}"),
                });
            }
            ReplyBody::Server { .. } => return Err(c.protocol("NBD_REP_SERVER in reply to GO")),
        }
    }
    if !have_export {
        return Err(c.protocol("server accepted GO without NBD_INFO_EXPORT"));
    }
    Ok((n, c.buf))
}
