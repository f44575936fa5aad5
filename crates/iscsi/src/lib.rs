//! sanbench's iSCSI crate.
//!
//! * [`wire`]: sans-I/O iSCSI (RFC 7143): typed Basic Header Segments for every opcode, the PDU
//!   framer with CRC32C digests, the key=value text codec with each key's negotiation rule, the
//!   login state machine for both sides, CHAP and SendTargets. It never touches a socket, so every
//!   parser can be fuzzed and unit-tested on plain bytes.
//! * [`scsi`]: SCSI CDB decode/encode (SBC-3/SPC-4 subset) and sense data.
//! * [`initiator`]: the `iscsi://` engine: one iSCSI session per queue, pipelined READ/WRITE
//!   inside the CmdSN window, immediate and unsolicited data, R2T, digests and CHAP.
//! * [`target`]: a thread-per-connection iSCSI target over sparse RAM (or a file), used as the
//!   reference peer in benchmarks and as the system under test of libiscsi's `iscsi-test-cu`.
//!
//! Invariant: `wire` and `scsi` never import `std::net`; only `initiator` and `target` do I/O.

pub mod initiator;
pub mod scsi;
pub mod sg;

/// Fills `b` from the kernel (getrandom(2), as the engine's run ids): CHAP challenges and
/// identifiers, the target's first StatSN. An error fails the login that asked; there is no
/// time-based fallback, since a challenge one can predict lets a recorded response be replayed.
pub(crate) fn os_random(b: &mut [u8]) -> std::io::Result<()> {
    let mut done = 0;
    while done < b.len() {
        let rest = &mut b[done..];
        // SAFETY: getrandom writes at most `rest.len()` bytes into the buffer we own.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // Requests over 256 bytes may come back short; the rest is asked for again.
        done += n as usize;
    }
    Ok(())
}

pub mod target;
pub mod wire;
