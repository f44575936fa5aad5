//! `NBD_OPT_STARTTLS` (proto.md "TLS support", "NBD_OPT_STARTTLS"): the upgrade of a
//! connection to TLS in the middle of the handshake.

use std::os::unix::io::AsRawFd;
use std::sync::atomic::Ordering;

use super::{Conn, End, R};
use crate::error::NbdError;
use crate::tls::{Handover, KtlsMode, Tls};
use crate::wire::handshake::{opt, rep};

impl Conn<'_> {
    /// Answers STARTTLS (`empty`: it carried no data, as it must) and, when accepted, runs the
    /// TLS handshake; the option haggling then goes on inside TLS.
    pub(super) fn starttls(&mut self, empty: bool) -> R<()> {
        let n = opt::STARTTLS;
        let Some(acceptor) = self.sh.tls.clone() else {
            self.reply(n, rep::ERR_UNSUP, "TLS is not configured on this server");
            return Ok(());
        };
        if self.tls.is_some() {
            self.reply(n, rep::ERR_INVALID, "TLS is already negotiated");
            return Ok(());
        }
        if !empty {
            self.reply(n, rep::ERR_INVALID, "NBD_OPT_STARTTLS carries no data");
            return Ok(());
        }
        self.ack(n);
        self.flush_out()?;
        // Bytes sent after STARTTLS but before the TLS handshake would be plaintext taken as
        // if they came through TLS (the STARTTLS injection attack): refuse them.
        if self.rpos != self.rlen {
            return self.fail("data after NBD_OPT_STARTTLS before the TLS handshake");
        }
        let session = match acceptor.session() {
            Ok(s) => s,
            Err(e) => return self.fail(e.to_string()),
        };
        let stop = || self.shutdown.load(Ordering::Relaxed);
        let fd = self.sock.as_raw_fd();
        match Tls::handshake(fd, session, self.deadline, &stop) {
            Ok(t) => self.tls = Some(t),
            Err(e) => {
                return Err(End::Fail(NbdError::TlsHandshake {
                    peer: self.peer.clone(),
                    reason: e.to_string().trim_start_matches("TLS: ").to_string(),
                }))
            }
        }
        // What was negotiated in plaintext does not carry over into TLS (as nbdkit does).
        self.structured = false;
        self.meta = false;
        Ok(())
    }
}

impl Conn<'_> {
    /// Gives the TLS records to the kernel as transmission begins (the client has its last
    /// option reply and sends requests next; replies still unsent go out through the kernel).
    /// Where it cannot, the session stays, and `SANBENCH_NBD_DEBUG` says why.
    pub(super) fn handover(&mut self) -> R<()> {
        let Some(t) = self.tls.take() else {
            return Ok(());
        };
        if self.sh.cfg.ktls == KtlsMode::Off {
            self.tls = Some(t);
            return Ok(());
        }
        match t.into_kernel(self.sock.as_raw_fd()) {
            Ok(Handover::Kernel) => {
                self.ktls = true;
                self.sh.kernel_tls.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Handover::User(t, why)) => {
                if std::env::var_os("SANBENCH_NBD_DEBUG").is_some() {
                    eprintln!(
                        "nbd server: {}: TLS records in user space: {why}",
                        self.peer
                    );
                }
                self.tls = Some(t);
            }
            Err(e) => {
                return Err(End::Fail(NbdError::io(
                    format!("hand TLS of {} to the kernel", self.peer),
                    e,
                )))
            }
        }
        Ok(())
    }
}
