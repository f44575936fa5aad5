//! How long typing and writing a Basic Header Segment takes: the data path's five PDUs
//! (SCSI Command, Data-Out, Data-In, R2T, SCSI Response), decoded and encoded in a loop.
//! Used to compare wire-code changes (docs/BENCHMARKS.md); no I/O.
//!
//!   cargo run --release -p sanbench-iscsi --example bhs_speed [ROUNDS [decode|encode]]
//!
//! On a loaded machine time per header is noisy; the instruction count of one phase is not:
//! `valgrind --tool=cachegrind --cache-sim=no` on `ROUNDS decode` and on `ROUNDS encode`.
use sanbench_iscsi::wire::bhs::Bhs;
use sanbench_iscsi::wire::pdu::{DataIn, DataOut, R2t, Residual, ScsiCommand, ScsiResponse};
use std::hint::black_box;
use std::time::Instant;

fn headers() -> Vec<[u8; 48]> {
    let mut v = Vec::new();
    for i in 0..64u32 {
        let cmd = ScsiCommand {
            immediate: false,
            final_: true,
            read: i % 2 == 0,
            write: i % 2 == 1,
            attr: 1,
            lun: 1 << 48,
            itt: i,
            expected_data_len: 4096,
            cmd_sn: i + 7,
            exp_stat_sn: i + 3,
            cdb: [
                0x88,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                (i & 0xff) as u8,
                0,
                0,
                0,
                8,
                0,
                0,
            ],
        };
        let din = DataIn {
            final_: true,
            ack: false,
            residual: Residual::default(),
            status: Some(0),
            lun: 0,
            itt: i,
            ttt: u32::MAX,
            stat_sn: i,
            exp_cmd_sn: i + 1,
            max_cmd_sn: i + 64,
            data_sn: 0,
            buffer_offset: 0,
        };
        let dout = DataOut {
            final_: true,
            lun: 1 << 48,
            itt: i,
            ttt: i + 100,
            exp_stat_sn: i,
            data_sn: 0,
            buffer_offset: 0,
        };
        let r2t = R2t {
            lun: 1 << 48,
            itt: i,
            ttt: i + 100,
            stat_sn: i,
            exp_cmd_sn: i + 1,
            max_cmd_sn: i + 64,
            r2t_sn: 0,
            buffer_offset: 0,
            desired_len: 4096,
        };
        let rsp = ScsiResponse {
            bidi_overflow: false,
            bidi_underflow: false,
            residual: Residual::of(4096, 4096),
            response: 0,
            status: 0,
            itt: i,
            snack_tag: 0,
            stat_sn: i,
            exp_cmd_sn: i + 1,
            max_cmd_sn: i + 64,
            exp_data_sn: 0,
            bidi_residual: 0,
        };
        v.push(Bhs::ScsiCommand(cmd).encode());
        v.push(Bhs::DataIn(din).encode());
        v.push(Bhs::DataOut(dout).encode());
        v.push(Bhs::R2t(r2t).encode());
        v.push(Bhs::ScsiResponse(rsp).encode());
    }
    v
}

fn main() {
    let rounds: usize = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 200_000,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("usage: bhs_speed [ROUNDS]");
            std::process::exit(2);
        }
    };
    let phase = std::env::args().nth(2).unwrap_or_default();
    let hs = headers();
    let typed: Vec<Bhs> = hs.iter().filter_map(|h| Bhs::decode(h).ok()).collect();
    let n = (rounds * hs.len()) as f64;

    let t = Instant::now();
    let mut ok = 0usize;
    let dec_rounds = if phase == "encode" { 0 } else { rounds };
    for _ in 0..dec_rounds {
        for h in &hs {
            ok += Bhs::decode(black_box(h)).is_ok() as usize;
        }
    }
    let dec = t.elapsed().as_nanos() as f64 / n;
    assert_eq!(ok, dec_rounds * hs.len());

    let t = Instant::now();
    let mut x = 0u8;
    let enc_rounds = if phase == "decode" { 0 } else { rounds };
    for _ in 0..enc_rounds {
        for b in &typed {
            x ^= black_box(black_box(b).encode())[17];
        }
    }
    let enc = t.elapsed().as_nanos() as f64 / n;
    black_box(x);
    println!("decode {dec:.2} ns/header, encode {enc:.2} ns/header ({n:.0} each)");
}
