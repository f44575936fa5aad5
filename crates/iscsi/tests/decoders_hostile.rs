//! Stable (non-fuzz) robustness test: every decoder gets random, truncated and mutated buffers
//! and must return a value or an error, never panic. Deterministic xorshift, so it reproduces.

use sanbench_iscsi::scsi::cdb::Cdb;
use sanbench_iscsi::scsi::sense::Sense;
use sanbench_iscsi::wire::bhs::Bhs;
use sanbench_iscsi::wire::framer::{encode_pdu, parse_ahs, parse_pdu, FrameConfig, Parsed};
use sanbench_iscsi::wire::login::{TargetLogin, TargetLoginConfig};
use sanbench_iscsi::wire::pdu::ScsiCommand;
use sanbench_iscsi::wire::{discovery, text};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn all_decoders(b: &[u8]) {
    for flags in 0..4u8 {
        let cfg = FrameConfig {
            header_digest: flags & 1 != 0,
            data_digest: flags & 2 != 0,
            max_recv_data_segment_length: 1 << 16,
        };
        if let Ok(Parsed::Complete { pdu, consumed }) = parse_pdu(b, &cfg) {
            assert!(consumed <= b.len());
            let _ = pdu.decode();
            let _ = parse_ahs(pdu.ahs);
        }
    }
    let _ = Bhs::decode(b);
    let _ = text::decode(b);
    let _ = discovery::parse_send_targets(b);
    let _ = Cdb::decode(b);
    let _ = Sense::decode(b);
    if let Ok(Bhs::LoginRequest(req)) = Bhs::decode(b) {
        let mut t = TargetLogin::new(
            TargetLoginConfig {
                target_names: vec!["iqn.t".into()],
                ..Default::default()
            },
            1,
            1,
        );
        let _ = t.on_request(&req, b.get(48..).unwrap_or(&[]), &mut |x: &mut [u8]| {
            x.fill(1);
            Ok(())
        });
    }
}

#[test]
fn random_buffers() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let n = (r.next() % 200) as usize;
        let mut b = r.bytes(n);
        if n > 0 && r.next() & 1 == 0 {
            // Aim at real opcodes so the typed decoders are exercised, not only UnknownOpcode.
            let ops = [
                0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25,
                0x26, 0x31, 0x32, 0x3f, 0x28, 0x2a, 0x9e, 0x5e, 0x5f, 0x89,
            ];
            b[0] = ops[(r.next() % ops.len() as u64) as usize];
        }
        all_decoders(&b);
    }
}

#[test]
fn truncated_and_mutated_valid_pdus() {
    let mut r = Rng(42);
    let mut cdb = [0u8; 16];
    cdb[0] = 0x28;
    let cmd = ScsiCommand {
        immediate: false,
        final_: true,
        read: true,
        write: false,
        attr: 1,
        lun: 0,
        itt: 1,
        expected_data_len: 4096,
        cmd_sn: 1,
        exp_stat_sn: 1,
        cdb,
    };
    let cfg = FrameConfig {
        header_digest: true,
        data_digest: true,
        max_recv_data_segment_length: 1 << 16,
    };
    let mut wire = Vec::new();
    encode_pdu(
        &mut wire,
        &Bhs::ScsiCommand(cmd).encode(),
        &[],
        b"InitiatorName=iqn.x\0",
        &cfg,
    );
    for cut in 0..wire.len() {
        match parse_pdu(&wire[..cut], &cfg) {
            Ok(Parsed::Incomplete { needed }) => assert!(cut + needed <= wire.len()),
            other => panic!("cut {cut}: {other:?}"),
        }
        all_decoders(&wire[..cut]);
    }
    for _ in 0..5_000 {
        let mut m = wire.clone();
        let i = (r.next() as usize) % m.len();
        m[i] ^= 1 << (r.next() % 8);
        all_decoders(&m);
    }
}
