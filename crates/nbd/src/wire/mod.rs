//! The NBD protocol as bytes in, values out: no sockets, no clocks, no allocation beyond the
//! decoded value. Everything here follows `doc/proto.md` of the NetworkBlockDevice project
//! ("fixed newstyle" handshake and the transmission phase with simple and structured replies).
//!
//! Every decoder takes `&[u8]` that starts at a message boundary and returns
//! [`Parsed::Done`] with the value and the number of bytes it used, [`Parsed::Incomplete`] with the
//! total number of bytes it needs before it can say more, or a [`WireError`] when the bytes can
//! never form a valid message. Decoders never panic, whatever the input: that is what the fuzz
//! targets under `fuzz/` check. Lengths that the peer controls are bounded by the limits below
//! before anything is buffered.
//!
//! * [`handshake`]: greeting, client flags, options (`NBD_OPT_*`) and option replies
//!   (`NBD_REP_*`, `NBD_INFO_*`).
//! * [`transmission`]: requests (`NBD_CMD_*`), simple replies and structured reply chunks.
//! * [`meta`]: the metadata context options' data and block status chunks, one declaration
//!   for the client and the server (the replies naming a context are in [`handshake`]).

pub mod handshake;
pub mod meta;
pub mod transmission;

#[cfg(test)]
mod proptests;

use thiserror::Error;

/// `NBDMAGIC`, first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: newstyle greeting and the start of every option the client sends.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Start of every option reply.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Longest option payload either side accepts. An `NBD_OPT_GO` carries a name of at most
/// [`MAX_NAME_LEN`] plus a short list of info requests; nothing legitimate comes near this.
pub const MAX_OPTION_LEN: u32 = 16 * 1024;
/// Longest export name or description (the spec's limit for strings).
pub const MAX_NAME_LEN: usize = 4096;
/// Largest READ/WRITE payload this implementation sends or accepts (the spec's default maximum).
pub const MAX_PAYLOAD: u32 = 32 * 1024 * 1024;
/// Largest structured reply chunk that is not data (errors, holes): error messages are
/// strings of at most 4096 bytes plus a few fixed fields.
pub const MAX_CHUNK_META: u32 = 64 * 1024;

/// The result of a decoder that did not fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    /// A complete value that used the first `len` bytes of the input.
    Done { value: T, len: usize },
    /// The input is a valid prefix; at least `needed` bytes in total are required.
    Incomplete { needed: usize },
}

impl<T> Parsed<T> {
    /// The value and its length, or `None` while incomplete.
    pub fn done(self) -> Option<(T, usize)> {
        match self {
            Parsed::Done { value, len } => Some((value, len)),
            Parsed::Incomplete { .. } => None,
        }
    }
}

/// Why bytes cannot be a valid NBD message.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("bad {what} magic {found:#x}")]
    BadMagic { what: &'static str, found: u64 },
    #[error("{what} length {len} exceeds the limit {max}")]
    TooLong {
        what: &'static str,
        len: u64,
        max: u64,
    },
    #[error("{what} has invalid length {len}")]
    BadLength { what: &'static str, len: u64 },
    #[error("{what} is not valid UTF-8")]
    Utf8 { what: &'static str },
    #[error("unknown client flags {0:#x}")]
    ClientFlags(u32),
    #[error("{what} has invalid value {value}")]
    BadValue { what: &'static str, value: u64 },
}

/// Shorthand for decoder results.
pub type DecodeResult<T> = Result<Parsed<T>, WireError>;

/// NBD error values (`NBD_E*`), which are Linux errno numbers.
pub mod errno {
    pub const EPERM: u32 = 1;
    pub const EIO: u32 = 5;
    pub const ENOMEM: u32 = 12;
    pub const EINVAL: u32 = 22;
    pub const ENOSPC: u32 = 28;
    pub const EOVERFLOW: u32 = 75;
    pub const ENOTSUP: u32 = 95;
    pub const ESHUTDOWN: u32 = 108;

    /// The negative errno a [`Completion`](sanbench_io::Completion) carries for an NBD error
    /// value; unknown values count as `EINVAL`, as the spec asks of clients.
    pub fn to_result(nbd: u32) -> i32 {
        match nbd {
            0 => 0,
            EPERM | EIO | ENOMEM | EINVAL | ENOSPC | EOVERFLOW | ENOTSUP | ESHUTDOWN => {
                -(nbd as i32)
            }
            _ => -(EINVAL as i32),
        }
    }

    /// The NBD error value for an OS error seen by the server.
    pub fn from_io(e: &std::io::Error) -> u32 {
        match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) | Some(libc::EROFS) => EPERM,
            Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => ENOSPC,
            Some(libc::ENOMEM) => ENOMEM,
            Some(libc::EINVAL) => EINVAL,
            Some(libc::EOPNOTSUPP) => ENOTSUP,
            _ => EIO,
        }
    }
}

/// Big-endian readers over a slice whose length the caller checked.
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_be_bytes(a)
}

pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

pub(crate) fn utf8(b: &[u8], what: &'static str) -> Result<String, WireError> {
    std::str::from_utf8(b)
        .map(str::to_owned)
        .map_err(|_| WireError::Utf8 { what })
}
