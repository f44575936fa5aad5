//! Kernel TLS (Linux Documentation/networking/tls.rst): once the handshake (and, for NBD, the
//! option haggling) is over, the session's traffic keys and record sequence numbers are given
//! to the kernel (`TCP_ULP` "tls", then `SOL_TLS` `TLS_TX` and `TLS_RX`), which from then on
//! makes and opens the records itself: the connection's data path is the plaintext one
//! (`sendmsg` of the arena's iovecs, `recv` straight into it), with no copy or cipher in user
//! space.
//!
//! What the kernel does not do for us:
//! * Records other than application data (a TLS 1.3 NewSessionTicket or KeyUpdate, an alert)
//!   fail a plain `recv` with `EIO` and wait at the head of the socket; [`control_record`]
//!   takes one with its `TLS_GET_RECORD_TYPE` cmsg. Tickets are dropped (NBD never resumes),
//!   close_notify reads as the end of the stream, and anything else ends the connection: the
//!   6.1 kernel cannot take new keys after a KeyUpdate.
//! * close_notify on shutdown: an alert record sent with a `TLS_SET_RECORD_TYPE` cmsg
//!   ([`close_notify`]).
//!
//! Nothing here is tried blind: before the keys leave the TLS library (which cannot take them
//! back), [`check`] sets up the same version and cipher on a throwaway loopback connection, so
//! that a kernel without the cipher (or without the `tls` module) leaves the session in user
//! space instead of breaking it.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};

/// `?ktls=` of an `nbds` URI and `serve nbd --ktls`: whether TLS records may be left to the
/// kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KtlsMode {
    /// The kernel's records where it can make them (the `tls` module, the cipher), else user
    /// space, saying why.
    #[default]
    Auto,
    /// Always user space (rustls or OpenSSL make every record).
    Off,
}

impl std::str::FromStr for KtlsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(KtlsMode::Auto),
            "off" => Ok(KtlsMode::Off),
            _ => Err(format!("'{s}' is not a kernel TLS mode (auto, off)")),
        }
    }
}

/// Who makes a connection's records, as the result and serve's lines say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Records {
    Kernel,
    /// In user space, and why.
    User(String),
}

impl std::fmt::Display for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Records::Kernel => f.write_str("kernel"),
            Records::User(why) => write!(f, "user ({why})"),
        }
    }
}

/// The AEADs the kernel's TLS takes that rustls negotiates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl Cipher {
    fn kernel_id(self) -> u16 {
        match self {
            Cipher::Aes128Gcm => 51,
            Cipher::Aes256Gcm => 52,
            Cipher::Chacha20Poly1305 => 54,
        }
    }

    fn key_len(self) -> usize {
        match self {
            Cipher::Aes128Gcm => 16,
            Cipher::Aes256Gcm | Cipher::Chacha20Poly1305 => 32,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Cipher::Aes128Gcm => "AES-128-GCM",
            Cipher::Aes256Gcm => "AES-256-GCM",
            Cipher::Chacha20Poly1305 => "ChaCha20-Poly1305",
        }
    }
}

/// TLS 1.2 and 1.3 as the kernel numbers them (the wire's version).
pub(crate) const TLS12: u16 = 0x0303;
pub(crate) const TLS13: u16 = 0x0304;

/// One direction's keys: the AEAD key and the 12-byte IV as the TLS library derived them
/// (for TLS 1.2 AES-GCM: the 4-byte salt, then the 8 bytes rustls XORs with the sequence
/// number to make the explicit nonce), and the next record's sequence number.
pub(crate) struct Keys {
    pub cipher: Cipher,
    pub key: Vec<u8>,
    pub iv: [u8; 12],
    pub seq: u64,
}

const SOL_TLS: libc::c_int = 282;
const TLS_TX: libc::c_int = 1;
const TLS_RX: libc::c_int = 2;
const TLS_SET_RECORD_TYPE: libc::c_int = 1;
const TLS_GET_RECORD_TYPE: libc::c_int = 2;
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;

/// The explicit nonce of the kernel's first TLS 1.2 AES-GCM record is `x ^ 2^63`, where the
/// records rustls sent used `x ^ seq` for the few sequence numbers before the handover. The
/// kernel adds one per record; starting from the other half of the 64-bit space it cannot
/// reach a nonce rustls used before 2^62 records (a nonce used twice under one GCM key gives
/// the key stream away). TLS 1.3 and ChaCha20 derive every nonce from the sequence number
/// alone, as rustls does.
const TLS12_GCM_NONCE_FLIP: u64 = 1 << 63;

/// `struct tls12_crypto_info_*` (linux/tls.h) as bytes: version and cipher (native endian),
/// then iv, key, salt and rec_seq, in that order, with no padding.
pub(crate) fn crypto_info(version: u16, tx: bool, k: &Keys) -> Vec<u8> {
    let mut b = Vec::with_capacity(56);
    b.extend_from_slice(&version.to_ne_bytes());
    b.extend_from_slice(&k.cipher.kernel_id().to_ne_bytes());
    match k.cipher {
        Cipher::Chacha20Poly1305 => {
            b.extend_from_slice(&k.iv);
            b.extend_from_slice(&k.key);
        }
        Cipher::Aes128Gcm | Cipher::Aes256Gcm => {
            let mut explicit = u64::from_be_bytes(k.iv[4..].try_into().unwrap_or_default());
            if version == TLS12 && tx {
                explicit ^= TLS12_GCM_NONCE_FLIP;
            }
            b.extend_from_slice(&explicit.to_be_bytes());
            b.extend_from_slice(&k.key);
            b.extend_from_slice(&k.iv[..4]);
        }
    }
    b.extend_from_slice(&k.seq.to_be_bytes());
    b
}

fn setsockopt(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &[u8]) -> io::Result<()> {
    // SAFETY: `val` is a live buffer of `val.len()` bytes; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val.as_ptr().cast(),
            val.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Attaches the kernel's TLS to a connected TCP socket (nothing changes on it until keys are
/// set). Err: why the kernel cannot, in words for the result.
pub(crate) fn attach(fd: RawFd) -> Result<(), String> {
    setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_ULP, b"tls").map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => "the tls module is not loaded: modprobe tls".to_string(),
        Some(libc::EOPNOTSUPP) | Some(libc::ENOPROTOOPT) => {
            "kernel TLS needs a TCP connection".to_string()
        }
        _ => format!("TCP_ULP tls: {e}"),
    })
}

/// Gives one direction's keys to the kernel.
pub(crate) fn install(fd: RawFd, version: u16, tx: bool, k: &Keys) -> io::Result<()> {
    let dir = if tx { TLS_TX } else { TLS_RX };
    setsockopt(fd, SOL_TLS, dir, &crypto_info(version, tx, k))
}

fn version_name(v: u16) -> &'static str {
    if v == TLS13 {
        "TLS 1.3"
    } else {
        "TLS 1.2"
    }
}

/// Whether this kernel makes records of `version` with `cipher`: both directions set up on a
/// throwaway loopback connection, with a zero key.
pub(crate) fn check(version: u16, cipher: Cipher) -> Result<(), String> {
    let why = |e: io::Error| format!("kernel TLS check: {e}");
    let l = TcpListener::bind(("127.0.0.1", 0)).map_err(why)?;
    let c = TcpStream::connect(l.local_addr().map_err(why)?).map_err(why)?;
    let _accepted = l.accept().map_err(why)?;
    attach(c.as_raw_fd())?;
    let k = Keys {
        cipher,
        key: vec![0; cipher.key_len()],
        iv: [0; 12],
        seq: 0,
    };
    for tx in [true, false] {
        install(c.as_raw_fd(), version, tx, &k).map_err(|e| {
            format!(
                "the kernel's TLS takes no {} for {}: {e}",
                cipher.name(),
                version_name(version)
            )
        })?;
    }
    Ok(())
}

/// Whether this kernel has TLS at all (serve's start line): `TCP_ULP` on a loopback
/// connection.
pub fn available() -> Result<(), String> {
    let why = |e: io::Error| format!("kernel TLS check: {e}");
    let l = TcpListener::bind(("127.0.0.1", 0)).map_err(why)?;
    let c = TcpStream::connect(l.local_addr().map_err(why)?).map_err(why)?;
    let _accepted = l.accept().map_err(why)?;
    attach(c.as_raw_fd())
}

/// What a control record meant.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Control {
    /// Nothing for us (a session ticket): receive again.
    Skip,
    /// The peer's close_notify: the end of the stream.
    Closed,
}

/// Reads the non-data record that made a `recv` on a kernel TLS socket fail with `EIO`, and
/// says what it meant. Err: an alert, a KeyUpdate (new keys this kernel cannot take), or the
/// `EIO` was not about a control record after all.
pub(crate) fn control_record(fd: RawFd) -> io::Result<Control> {
    // A whole record: 2^14 bytes of plaintext at most.
    let mut data = vec![0u8; (1 << 14) + 256];
    // A cmsghdr and one byte, aligned as CMSG_SPACE asks (u64 covers the header's alignment).
    let mut cbuf = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: a zeroed msghdr is valid (null name, no iovecs); the pointers set below are to
    // live buffers of the lengths given, which outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // The record waits at the head of the socket (the `EIO` said so): never blocks.
    // SAFETY: `msg` describes the buffers above.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut kind = None;
    // SAFETY: the kernel filled `msg_controllen` bytes of `cbuf`; CMSG_FIRSTHDR/NXTHDR stay
    // inside it and CMSG_DATA of a SOL_TLS record-type message holds one byte.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == SOL_TLS && (*c).cmsg_type == TLS_GET_RECORD_TYPE {
                kind = Some(*libc::CMSG_DATA(c));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    judge(kind, &data[..n as usize])
}

/// What a control record of type `kind` holding `body` means (pure, for the tests).
fn judge(kind: Option<u8>, body: &[u8]) -> io::Result<Control> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {why}"));
    match kind {
        Some(ALERT) => match body {
            [_, 0] => Ok(Control::Closed),
            [_, d] => Err(bad(format!("the peer sent alert {d}"))),
            _ => Err(bad("a malformed alert record".into())),
        },
        Some(HANDSHAKE) => {
            let mut rest = body;
            while rest.len() >= 4 {
                let len = u32::from_be_bytes([0, rest[1], rest[2], rest[3]]) as usize;
                match rest[0] {
                    // NewSessionTicket: NBD never resumes a session.
                    4 => {}
                    24 => {
                        return Err(bad(
                            "the peer updated its keys (KeyUpdate), which kernel TLS here cannot \
                             follow; ?ktls=off (serve: --ktls off) keeps records in user space"
                                .into(),
                        ))
                    }
                    t => return Err(bad(format!("handshake message {t} after the handshake"))),
                }
                rest = rest.get(4 + len..).unwrap_or_default();
            }
            Ok(Control::Skip)
        }
        Some(APPLICATION_DATA) | None => Err(io::Error::from_raw_os_error(libc::EIO)),
        Some(t) => Err(bad(format!("a record of type {t}"))),
    }
}

/// Sends close_notify (a warning-level alert 0) as the kernel's record; best effort, never
/// blocks.
pub(crate) fn close_notify(fd: RawFd) {
    let mut body = [1u8, 0];
    let mut iov = libc::iovec {
        iov_base: body.as_mut_ptr().cast(),
        iov_len: body.len(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: as in `control_record`: the msghdr points at live buffers of the given sizes;
    // CMSG_FIRSTHDR of a control buffer of CMSG_SPACE(1) bytes or more is a valid header.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(1) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = SOL_TLS;
        (*c).cmsg_type = TLS_SET_RECORD_TYPE;
        (*c).cmsg_len = libc::CMSG_LEN(1) as _;
        *libc::CMSG_DATA(c) = ALERT;
        libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(cipher: Cipher) -> Keys {
        Keys {
            cipher,
            key: (0..cipher.key_len() as u8).collect(),
            iv: [0xa0, 0xa1, 0xa2, 0xa3, 1, 2, 3, 4, 5, 6, 7, 8],
            seq: 0x0102,
        }
    }

    /// The layouts of linux/tls.h, which the libc crate declares too.
    #[test]
    fn crypto_info_is_the_kernels_struct() {
        let sizes = [
            (
                Cipher::Aes128Gcm,
                std::mem::size_of::<libc::tls12_crypto_info_aes_gcm_128>(),
            ),
            (
                Cipher::Aes256Gcm,
                std::mem::size_of::<libc::tls12_crypto_info_aes_gcm_256>(),
            ),
            (
                Cipher::Chacha20Poly1305,
                std::mem::size_of::<libc::tls12_crypto_info_chacha20_poly1305>(),
            ),
        ];
        for (c, size) in sizes {
            assert_eq!(crypto_info(TLS13, true, &keys(c)).len(), size, "{c:?}");
        }
        let b = crypto_info(TLS13, true, &keys(Cipher::Aes128Gcm));
        assert_eq!(
            &b[..4],
            &[0x04, 0x03, 51, 0][..],
            "native-endian version, cipher"
        );
        assert_eq!(&b[4..12], &[1, 2, 3, 4, 5, 6, 7, 8], "iv: after the salt");
        assert_eq!(b[12], 0, "key");
        assert_eq!(&b[28..32], &[0xa0, 0xa1, 0xa2, 0xa3], "salt");
        assert_eq!(&b[32..], &[0, 0, 0, 0, 0, 0, 1, 2], "rec_seq, big-endian");
        let c = crypto_info(TLS12, false, &keys(Cipher::Chacha20Poly1305));
        assert_eq!(
            &c[4..16],
            &keys(Cipher::Chacha20Poly1305).iv,
            "whole iv, no salt"
        );
    }

    /// TLS 1.2 GCM: the kernel counts its explicit nonces up from the other half of the space
    /// than the one rustls used; received records carry theirs, so RX keeps the IV as is.
    #[test]
    fn tls12_gcm_tx_nonces_start_apart_from_rustls() {
        let k = keys(Cipher::Aes256Gcm);
        let tx = crypto_info(TLS12, true, &k);
        let rx = crypto_info(TLS12, false, &k);
        assert_eq!(&rx[4..12], &k.iv[4..]);
        assert_eq!(tx[4], k.iv[4] ^ 0x80);
        assert_eq!(&tx[5..12], &k.iv[5..]);
        let t13 = crypto_info(TLS13, true, &k);
        assert_eq!(&t13[4..12], &k.iv[4..]);
    }

    #[test]
    fn control_records_are_judged() {
        assert_eq!(judge(Some(ALERT), &[1, 0]).unwrap(), Control::Closed);
        assert!(judge(Some(ALERT), &[2, 40]).is_err());
        assert!(judge(Some(ALERT), &[2]).is_err());
        // Two tickets in one record.
        let t = [4, 0, 0, 2, 9, 9, 4, 0, 0, 1, 7];
        assert_eq!(judge(Some(HANDSHAKE), &t).unwrap(), Control::Skip);
        let ku = [4, 0, 0, 0, 24, 0, 0, 1, 0];
        let e = judge(Some(HANDSHAKE), &ku).unwrap_err();
        assert!(e.to_string().contains("KeyUpdate"), "{e}");
        assert!(judge(Some(HANDSHAKE), &[1, 0, 0, 0]).is_err());
        assert!(judge(Some(APPLICATION_DATA), b"x").is_err());
        assert!(judge(Some(99), b"").is_err());
    }

    #[test]
    fn modes_parse() {
        assert_eq!("auto".parse::<KtlsMode>(), Ok(KtlsMode::Auto));
        assert_eq!("off".parse::<KtlsMode>(), Ok(KtlsMode::Off));
        assert!("on".parse::<KtlsMode>().is_err());
    }

    /// On a kernel with the tls module, every cipher rustls offers checks out; without it the
    /// reason names the module.
    #[test]
    fn check_says_why_not() {
        match available() {
            Ok(()) => check(TLS13, Cipher::Aes128Gcm).unwrap(),
            Err(why) => {
                assert!(why.contains("tls module"), "{why}");
                assert!(check(TLS13, Cipher::Aes128Gcm)
                    .unwrap_err()
                    .contains("tls module"));
            }
        }
    }
}
