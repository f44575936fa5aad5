//! The handshake: greeting, client flags, options (proto.md "Fixed newstyle negotiation",
//! "Option types"), including the metadata contexts (`base:allocation`) a client selects for
//! `NBD_CMD_BLOCK_STATUS`.

use std::time::Instant;

use super::{Conn, End, HANDSHAKE_TIMEOUT, MAX_OPTIONS, R};
use crate::tls::TlsMode;
use crate::wire::handshake::{
    hflags, info, opt, rep, tflags, ClientOption, ExportNameReply, GoRequest, Greeting, Info,
    OptionReply, ReplyBody,
};
use crate::wire::meta::{selects_base_allocation, MetaContextRequest, BASE_ALLOCATION};
use crate::wire::{handshake, Parsed, WireError};

/// The id `base:allocation` gets when selected (ids are per connection and opaque).
pub(crate) const BASE_ALLOCATION_ID: u32 = 1;

impl Conn<'_> {
    /// Negotiates; true when the client entered transmission.
    pub(super) fn handshake(&mut self) -> R<bool> {
        self.deadline = Instant::now() + HANDSHAKE_TIMEOUT;
        let deadline = Some(self.deadline);
        Greeting {
            flags: hflags::FIXED_NEWSTYLE | hflags::NO_ZEROES,
        }
        .encode(&mut self.out);
        self.flush_out()?;
        let flags = loop {
            match handshake::decode_client_flags(self.avail()) {
                Ok(Parsed::Done { value, len }) => {
                    self.rpos += len;
                    break value;
                }
                Ok(Parsed::Incomplete { .. }) => self.read_more(deadline)?,
                Err(e) => return self.wire(e),
            }
        };
        self.no_zeroes = flags & handshake::cflags::NO_ZEROES != 0;
        for _ in 0..MAX_OPTIONS {
            let option = loop {
                match ClientOption::decode(self.avail()) {
                    Ok(Parsed::Done { value, len }) => {
                        self.rpos += len;
                        break value;
                    }
                    Ok(Parsed::Incomplete { .. }) => self.read_more(deadline)?,
                    Err(e @ WireError::TooLong { .. }) => {
                        // Framing can no longer be trusted: say why, then hang up.
                        let option = crate::wire::be32(self.avail(), 8);
                        self.reply(option, rep::ERR_TOO_BIG, "option too long");
                        let _ = self.flush_out();
                        return self.wire(e);
                    }
                    Err(e) => return self.wire(e),
                }
            };
            if self.option(option)? {
                return Ok(true);
            }
            self.flush_out()?;
        }
        self.fail("too many options")
    }

    pub(super) fn reply(&mut self, option: u32, code: u32, message: &str) {
        OptionReply {
            option,
            body: ReplyBody::Error {
                code,
                message: message.into(),
            },
        }
        .encode(&mut self.out);
    }

    pub(super) fn ack(&mut self, option: u32) {
        OptionReply {
            option,
            body: ReplyBody::Ack,
        }
        .encode(&mut self.out);
    }

    fn tflags(&self) -> u16 {
        let mut f = tflags::HAS_FLAGS
            | tflags::SEND_FLUSH
            | tflags::SEND_FUA
            | tflags::SEND_TRIM
            | tflags::SEND_WRITE_ZEROES
            | tflags::SEND_FAST_ZERO
            | tflags::CAN_MULTI_CONN;
        if self.sh.cfg.read_only {
            f |= tflags::READ_ONLY;
        }
        if self.structured {
            f |= tflags::SEND_DF;
        }
        f
    }

    fn name_ok(&self, name: &str) -> bool {
        name.is_empty() || name == self.sh.cfg.export
    }

    /// Answers one option; true when transmission starts.
    fn option(&mut self, option: ClientOption) -> R<bool> {
        let n = option.number();
        if let ClientOption::Other {
            option: opt::STARTTLS,
            data,
        } = &option
        {
            let empty = data.is_empty();
            return self.starttls(empty).map(|()| false);
        }
        if self.tls.is_none() && self.sh.cfg.tls == TlsMode::Require {
            match option {
                ClientOption::Abort => {}
                // It has no error reply: all a server that requires TLS can do is hang up.
                ClientOption::ExportName(_) => {
                    return self.fail("NBD_OPT_EXPORT_NAME before NBD_OPT_STARTTLS (TLS required)")
                }
                _ => {
                    self.reply(n, rep::ERR_TLS_REQD, "TLS required: send NBD_OPT_STARTTLS");
                    return Ok(false);
                }
            }
        }
        match option {
            ClientOption::ExportName(name) => {
                if !self.name_ok(&name) {
                    return self.fail(format!("unknown export {name:?}"));
                }
                ExportNameReply {
                    size: self.sh.size,
                    flags: self.tflags(),
                }
                .encode(self.no_zeroes, &mut self.out);
                self.flush_out()?;
                return Ok(true);
            }
            ClientOption::Abort => {
                self.ack(n);
                let _ = self.flush_out();
                return Err(End::Clean);
            }
            ClientOption::List => {
                OptionReply {
                    option: n,
                    body: ReplyBody::Server {
                        name: self.sh.cfg.export.clone(),
                        details: self.sh.cfg.description.clone(),
                    },
                }
                .encode(&mut self.out);
                self.ack(n);
            }
            ClientOption::Info(go) => {
                self.info(n, &go);
            }
            ClientOption::Go(go) => {
                if self.info(n, &go) {
                    self.flush_out()?;
                    return Ok(true);
                }
            }
            ClientOption::StructuredReply => {
                if self.structured {
                    self.reply(n, rep::ERR_INVALID, "structured replies already negotiated");
                } else {
                    self.structured = true;
                    self.ack(n);
                }
            }
            ClientOption::ListMetaContext(req) => self.meta_context(n, &req, true),
            ClientOption::SetMetaContext(req) => self.meta_context(n, &req, false),
            ClientOption::Other { option, .. } => {
                if option == opt::SET_META_CONTEXT {
                    // A failed SET still replaces the selection (proto.md).
                    self.meta = false;
                }
                let known = matches!(
                    option,
                    opt::EXPORT_NAME
                        | opt::LIST
                        | opt::INFO
                        | opt::GO
                        | opt::STRUCTURED_REPLY
                        | opt::LIST_META_CONTEXT
                        | opt::SET_META_CONTEXT
                );
                if known {
                    self.reply(option, rep::ERR_INVALID, "malformed option");
                } else {
                    self.reply(option, rep::ERR_UNSUP, "option not supported");
                }
            }
        }
        Ok(false)
    }

    /// Answers LIST_META_CONTEXT (`listing`) or SET_META_CONTEXT: the one context there is,
    /// `base:allocation`, when a query names it (or, listing, asks for `base:` or everything).
    fn meta_context(&mut self, n: u32, req: &MetaContextRequest, listing: bool) {
        if !listing {
            self.meta = false;
        }
        if !self.structured {
            return self.reply(n, rep::ERR_INVALID, "negotiate structured replies first");
        }
        if !self.name_ok(&req.export) {
            return self.reply(n, rep::ERR_UNKNOWN, "no such export");
        }
        let hit = if listing && req.queries.is_empty() {
            true
        } else {
            req.queries
                .iter()
                .any(|q| selects_base_allocation(q, listing))
        };
        if hit {
            OptionReply {
                option: n,
                body: ReplyBody::MetaContext {
                    id: if listing { 0 } else { BASE_ALLOCATION_ID },
                    name: BASE_ALLOCATION.into(),
                },
            }
            .encode(&mut self.out);
            if !listing {
                self.meta = true;
            }
        }
        self.ack(n);
    }

    /// Answers INFO or GO; true on success.
    fn info(&mut self, n: u32, go: &GoRequest) -> bool {
        if !self.name_ok(&go.name) {
            self.reply(n, rep::ERR_UNKNOWN, "no such export");
            return false;
        }
        let cfg = &self.sh.cfg;
        let mut items = vec![
            Info::Export {
                size: self.sh.size,
                flags: self.tflags(),
            },
            Info::BlockSize {
                min: cfg.min_block,
                preferred: cfg.preferred_block,
                max_payload: cfg.max_payload,
            },
        ];
        if go.requests.contains(&info::NAME) {
            items.push(Info::Name(cfg.export.clone()));
        }
        if go.requests.contains(&info::DESCRIPTION) && !cfg.description.is_empty() {
            items.push(Info::Description(cfg.description.clone()));
        }
        for i in items {
            OptionReply {
                option: n,
                body: ReplyBody::Info(i),
            }
            .encode(&mut self.out);
        }
        self.ack(n);
        true
    }
}
