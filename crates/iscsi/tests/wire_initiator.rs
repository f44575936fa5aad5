//! End-to-end over TCP with this crate's own wire API as the initiator: login (CHAP, digests),
//! R2T-driven writes, multi-PDU reads, a hostile connection beside a good one, a file-backed LUN.
//! The checks of Data-Out, ordering and task management are in wire_initiator_checks.rs.

mod wire_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sanbench_iscsi::scsi::cdb::{Cdb, CdbLen};
use sanbench_iscsi::target::{Target, TargetConfig};
use sanbench_iscsi::wire::bhs::Bhs;
use sanbench_iscsi::wire::chap::Credentials;
use sanbench_iscsi::wire::login_initiator::InitiatorLoginConfig;
use sanbench_iscsi::wire::pdu::{DataOut, ScsiCommand};
use wire_support::*;

#[test]
fn digests_r2t_and_multi_pdu_reads() {
    let t = start(TargetConfig::default());
    let mut c = Client::login(
        t.2,
        InitiatorLoginConfig {
            header_digest: true,
            data_digest: true,
            ..icfg()
        },
    )
    .unwrap();
    assert!(c.rx.header_digest && c.rx.data_digest);
    write_read(&mut c);
}

#[test]
fn chap_required_and_checked() {
    let chap = Some(Credentials::new("bench", "0123456789ab"));
    let t = start(TargetConfig {
        chap: chap.clone(),
        ..TargetConfig::default()
    });
    assert!(
        Client::login(t.2, icfg()).is_err(),
        "login without CHAP must fail"
    );
    let wrong = Some(Credentials::new("bench", "wrongwrongwr"));
    assert!(Client::login(
        t.2,
        InitiatorLoginConfig {
            chap: wrong,
            ..icfg()
        }
    )
    .is_err());
    let mut c = Client::login(t.2, InitiatorLoginConfig { chap, ..icfg() }).unwrap();
    write_read(&mut c);
}

#[test]
fn hostile_connection_does_not_hurt_others() {
    let t = start(TargetConfig::default());
    let mut good = Client::login(t.2, icfg()).unwrap();
    let mut bad = TcpStream::connect(("127.0.0.1", t.2)).unwrap();
    let mut junk = vec![0x43u8; 48];
    junk[5..8].copy_from_slice(&[0xff, 0xff, 0xff]);
    let _ = bad.write_all(&junk);
    let _ = bad.write_all(&[0xa5; 4096]);
    let mut sink = [0u8; 64];
    let _ = bad.read(&mut sink);
    write_read(&mut good);
}

#[test]
fn file_backed_lun() {
    let path = std::env::temp_dir().join(format!("sanbench-iscsi-{}.img", std::process::id()));
    std::fs::File::create(&path)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    {
        let t = start(TargetConfig {
            file: Some(path.clone()),
            ..TargetConfig::default()
        });
        let mut c = Client::login(t.2, icfg()).unwrap();
        write_read(&mut c);
    }
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 64 << 20);
    assert_eq!(bytes[1000 * 512 + 1], 7);
    std::fs::remove_file(&path).unwrap();
}

/// After login, random SCSI commands (random CDB bytes, flags, lengths, immediate data) and
/// stray Data-Outs must never panic a target thread; the connection keeps answering pings.
#[test]
fn random_commands_in_full_feature_phase() {
    static PANICKED: AtomicBool = AtomicBool::new(false);
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |i| {
        PANICKED.store(true, Ordering::SeqCst);
        prev(i);
    }));
    let t = start(TargetConfig {
        lun_size: 8 << 20,
        ..TargetConfig::default()
    });
    let mut c = Client::login(
        t.2,
        InitiatorLoginConfig {
            immediate_data: true,
            initial_r2t: false,
            ..icfg()
        },
    )
    .unwrap();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let ops = [
        0x00u8, 0x03, 0x08, 0x0a, 0x12, 0x1a, 0x1b, 0x25, 0x28, 0x2a, 0x2e, 0x2f, 0x35, 0x41, 0x42,
        0x5a, 0x5e, 0x5f, 0x88, 0x89, 0x8a, 0x8e, 0x8f, 0x91, 0x93, 0x9e, 0xa0, 0xa8, 0xaa, 0xaf,
    ];
    for i in 0..3000u32 {
        let mut cdb = [0u8; 16];
        cdb.iter_mut().for_each(|b| *b = rnd() as u8);
        cdb[0] = ops[(rnd() % ops.len() as u64) as usize];
        if rnd() % 2 == 0 {
            // Keep LBAs and lengths small often enough to reach the execution paths.
            cdb[2..10].fill(0);
            cdb[10] = 0;
            cdb[11] = 0;
        }
        let imm_len = (rnd() % 1500) as usize;
        let imm: Vec<u8> = (0..imm_len).map(|_| rnd() as u8).collect();
        let write = rnd() % 2 == 0;
        let (final_, lun, len) = (!write || rnd() % 2 == 0, (rnd() % 3) << 48, rnd() % 70_000);
        let cmd = ScsiCommand {
            final_,
            lun,
            ..c.scsi_command(10_000 + i, cdb, (!write, write), len as u32)
        };
        c.send(Bhs::ScsiCommand(cmd), if write { &imm } else { &[] });
        if rnd() % 4 == 0 {
            let d = DataOut {
                final_: rnd() % 2 == 0,
                lun: 0,
                itt: 10_000 + i,
                ttt: if rnd() % 2 == 0 {
                    0xffff_ffff
                } else {
                    rnd() as u32
                },
                exp_stat_sn: 0,
                data_sn: (rnd() % 3) as u32,
                buffer_offset: (rnd() % 80_000) as u32,
            };
            c.send(Bhs::DataOut(d), &imm[..imm_len.min(1024)]);
        }
    }
    c.itt = 50_000;
    let ping = sanbench_iscsi::wire::pdu_ctl::NopOut {
        immediate: true,
        lun: 0,
        itt: 99_999,
        ttt: 0xffff_ffff,
        cmd_sn: c.cmd_sn,
        exp_stat_sn: 0,
    };
    c.send(Bhs::NopOut(ping), b"ping");
    loop {
        match c.recv() {
            (Bhs::NopIn(n), d) if n.itt == 99_999 => {
                assert_eq!(d, b"ping");
                break;
            }
            _ => continue,
        }
    }
    assert!(!PANICKED.load(Ordering::SeqCst), "a target thread panicked");
}

/// Writes whose data never arrives cannot pin unbounded memory: past the per-connection budget
/// the target answers TASK SET FULL.
#[test]
fn stalled_writes_are_bounded() {
    let t = start(TargetConfig::default());
    let mut c = Client::login(t.2, icfg()).unwrap();
    let blocks = 128 * 1024u32; // 64 MiB each
    let mut full = false;
    for i in 0..8u32 {
        let (cdb, _) = Cdb::Write {
            len: CdbLen::L16,
            lba: 0,
            blocks,
            protect: 0,
            dpo: false,
            fua: false,
            verify: false,
        }
        .encode();
        let cmd = c.scsi_command(100 + i, cdb, (false, true), blocks * 512);
        c.send(Bhs::ScsiCommand(cmd), &[]);
        match c.recv() {
            (Bhs::R2t(_), _) => {}
            (Bhs::ScsiResponse(r), _) => {
                assert_eq!(r.status, 0x28);
                full = true;
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(full, "eight stalled 64 MiB writes were all accepted");
}

/// GET LBA STATUS reports the block store's allocation map (written 64 KiB chunks mapped,
/// the rest deallocated), and the target's stats count connections and allocated bytes.
#[test]
fn get_lba_status_and_stats_follow_the_store() {
    let t = Target::bind(TargetConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        lun_size: 16 << 20,
        ..TargetConfig::default()
    })
    .unwrap();
    let stats = t.stats();
    let port = t.local_addr().port();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let _running = Running(
        stop,
        Some(std::thread::spawn(move || t.run(s).unwrap())),
        port,
    );
    let mut c = Client::login(port, icfg()).unwrap();
    assert_eq!(stats.allocated_bytes(), 0);
    // 256 KiB at LBA 1000 (byte 512000) touches chunks 7..=11.
    write_read(&mut c);
    assert_eq!(stats.allocated_bytes(), 5 * 65536);
    assert_eq!(stats.connections.load(Ordering::Relaxed), 1);
    // Room for exactly the three descriptors expected (the helper wants the whole length).
    let (st, v) = c.command(
        Cdb::GetLbaStatus {
            lba: 0,
            alloc_len: 8 + 16 * 3,
        },
        8 + 16 * 3,
        &[],
    );
    assert_eq!(st, 0);
    let descs: Vec<(u64, u32, u8)> = v[8..]
        .chunks_exact(16)
        .map(|d| {
            let lba = u64::from_be_bytes(d[0..8].try_into().unwrap());
            let n = u32::from_be_bytes(d[8..12].try_into().unwrap());
            (lba, n, d[12])
        })
        .collect();
    let blocks = (16 << 20) / 512;
    assert_eq!(
        descs,
        vec![
            (0, 7 * 128, 1),
            (7 * 128, 5 * 128, 0),
            (12 * 128, blocks - 12 * 128, 1)
        ]
    );
}
