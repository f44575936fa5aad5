//! Framing one Data-In PDU into a connection's [`Out`] (RFC 7143 §11.2, §11.7).
//!
//! Header and header digest are copied into the buffer. Read data from a RAM store is then
//! only referenced ([`Out::store`]) and the pad to 4 bytes copied after it, so the bytes on the
//! wire are those [`encode_pdu_append`] would have built with a copy. Under a data digest the
//! whole PDU is built by copying (the digest needs the bytes fixed when it is computed), as it
//! is for a file store (which [`Out::store`] copies) and for data the target made (INQUIRY,
//! MODE SENSE...).

use sanbench_blockstore::out::Out;
use sanbench_blockstore::BlockStore;

use crate::wire::bhs::BHS_LEN;
use crate::wire::digest::pad_len;
use crate::wire::framer::{encode_pdu_append, encode_pdu_head, FrameConfig};

/// Where a Data-In sequence's bytes come from.
pub(super) enum Payload<'a> {
    /// Bytes the target made (the whole transfer, indexed by buffer offset).
    Bytes(&'a [u8]),
    /// A read: the transfer's buffer offset 0 is byte `off` of `store`.
    Store { store: &'a BlockStore, off: u64 },
}

/// Appends the Data-In PDU with header `h` carrying the payload's `[at, at + len)`.
pub(super) fn frame(
    out: &mut Out,
    h: &[u8; BHS_LEN],
    payload: &Payload<'_>,
    at: usize,
    len: usize,
    tx: &FrameConfig,
) {
    match *payload {
        Payload::Bytes(v) => encode_pdu_append(out.buf(), h, &[], len, tx, |b| {
            b.extend_from_slice(&v[at..at + len])
        }),
        Payload::Store { store, off } if out.zero_copy && !tx.data_digest => {
            encode_pdu_head(out.buf(), h, &[], len, tx);
            // As encode_pdu_append does when a read fails (a file's I/O error, which is all
            // Out::store can return here: the LUN checked the range), zeros take its place.
            if out.store(store, off + at as u64, len).is_err() {
                let b = out.buf();
                b.resize(b.len() + len, 0);
            }
            out.buf().extend_from_slice(&[0u8; 3][..pad_len(len)]);
        }
        Payload::Store { store, off } => encode_pdu_append(out.buf(), h, &[], len, tx, |b| {
            // Straight from the store into the send buffer, not zero-filled first; should the
            // read fail, the framer sends zeros in its place.
            let _ = store.read_append(off + at as u64, len, b);
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::framer::encode_pdu;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    /// What `out` puts on the wire.
    fn wire(out: &mut Out) -> Vec<u8> {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            got
        });
        out.send(&a).unwrap();
        assert!(out.is_empty());
        drop(a);
        reader.join().unwrap()
    }

    fn header(i: u8) -> [u8; BHS_LEN] {
        let mut h = [0u8; BHS_LEN];
        h[0] = 0x25; // SCSI Data-In
        h[1] = 0x80 | (i & 1);
        h[16..20].copy_from_slice(&u32::from(i).to_be_bytes());
        h
    }

    /// Several Data-In PDUs per burst, between other PDUs, framed through Out, against the
    /// copy path (every byte through `encode_pdu_append` into one Vec).
    fn same_as_copy(store: &BlockStore, tx: FrameConfig, zero_copy: bool) {
        let made: Vec<u8> = (0..9000u32).map(|i| (i * 7 % 251) as u8).collect();
        // Lengths needing padding (1..3 bytes) and not, small and past a 64 KiB chunk.
        let lens = [512usize, 4096, 13, 4093, 4094, 4095, 1, 70_000, 131_072, 3];
        let mut out = Out::new(64);
        out.zero_copy = zero_copy;
        let mut want = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            let h = header(i as u8);
            let off = 1000 + 777 * i as u64;
            // A burst of three PDUs of one read, then a PDU that is not Data-In.
            let p = Payload::Store { store, off };
            for at in [0, len, 2 * len] {
                frame(&mut out, &h, &p, at, len, &tx);
                encode_pdu_append(&mut want, &h, &[], len, &tx, |b| {
                    store.read_append(off + at as u64, len, b).unwrap()
                });
            }
            let n = len.min(made.len() - 5);
            frame(&mut out, &h, &Payload::Bytes(&made), 5, n, &tx);
            encode_pdu(&mut want, &h, &[], &made[5..5 + n], &tx);
            let r = header(0x80 | i as u8);
            encode_pdu(out.buf(), &r, &[], &made[..i], &tx);
            encode_pdu(&mut want, &r, &[], &made[..i], &tx);
        }
        assert_eq!(out.len(), want.len());
        let got = wire(&mut out);
        assert_eq!(got.len(), want.len());
        assert!(got == want, "wire bytes differ from the copy path ({tx:?})");
    }

    fn tx(header_digest: bool, data_digest: bool) -> FrameConfig {
        FrameConfig {
            header_digest,
            data_digest,
            max_recv_data_segment_length: 262_144,
        }
    }

    fn ram() -> BlockStore {
        let s = BlockStore::ram(4 << 20, false).unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        s.write(0, &data, false).unwrap();
        s
    }

    #[test]
    fn referenced_data_in_is_framed_as_copied() {
        let s = ram();
        for hd in [false, true] {
            same_as_copy(&s, tx(hd, false), true);
        }
    }

    #[test]
    fn data_digest_and_file_store_copy() {
        let s = ram();
        for hd in [false, true] {
            // zero_copy is off under a data digest (set at login); both must hold anyway.
            same_as_copy(&s, tx(hd, true), false);
            same_as_copy(&s, tx(hd, true), true);
            same_as_copy(&s, tx(hd, false), false);
        }
        let f = tempfile::tempfile().unwrap();
        let fs = BlockStore::file(f, 4 << 20, false).unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        fs.write(0, &data, false).unwrap();
        same_as_copy(&fs, tx(true, false), true);
        same_as_copy(&fs, tx(false, false), true);
    }
}
