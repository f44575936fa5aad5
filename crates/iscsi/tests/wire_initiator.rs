//! End-to-end over TCP with this crate's own wire API as the initiator: login (CHAP, digests),
//! R2T-driven writes, multi-PDU reads, a hostile connection beside a good one, a file-backed LUN.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use sanbench_iscsi::scsi::cdb::{Cdb, CdbLen};
use sanbench_iscsi::target::{Target, TargetConfig};
use sanbench_iscsi::wire::bhs::Bhs;
use sanbench_iscsi::wire::chap::Credentials;
use sanbench_iscsi::wire::framer::{encode_pdu, parse_pdu, FrameConfig, Parsed};
use sanbench_iscsi::wire::login_initiator::{InitiatorLogin, InitiatorLoginConfig, InitiatorStep};
use sanbench_iscsi::wire::pdu::{DataOut, ScsiCommand};

struct Running(Arc<AtomicBool>, Option<JoinHandle<()>>, u16);
impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        if let Some(t) = self.1.take() {
            let _ = t.join();
        }
    }
}

fn start(cfg: TargetConfig) -> Running {
    let t = Target::bind(TargetConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..cfg
    })
    .unwrap();
    let port = t.local_addr().port();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    Running(
        stop,
        Some(std::thread::spawn(move || t.run(s).unwrap())),
        port,
    )
}

struct Client {
    s: TcpStream,
    buf: Vec<u8>,
    rx: FrameConfig,
    tx: FrameConfig,
    cmd_sn: u32,
    itt: u32,
    burst: usize,
}

impl Client {
    fn recv(&mut self) -> (Bhs, Vec<u8>) {
        loop {
            if let Parsed::Complete { pdu, consumed } = parse_pdu(&self.buf, &self.rx).unwrap() {
                let r = (pdu.decode().unwrap(), pdu.data.to_vec());
                self.buf.drain(..consumed);
                return r;
            }
            let mut tmp = [0u8; 65536];
            let n = self.s.read(&mut tmp).unwrap();
            assert!(n > 0, "target closed the connection");
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }
    fn send(&mut self, b: Bhs, data: &[u8]) {
        let mut out = Vec::new();
        encode_pdu(&mut out, &b.encode(), &[], data, &self.tx);
        self.s.write_all(&out).unwrap();
    }

    fn login(port: u16, cfg: InitiatorLoginConfig) -> Result<Client, String> {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut c = Client {
            s,
            buf: Vec::new(),
            rx: FrameConfig::default(),
            tx: FrameConfig::default(),
            cmd_sn: 1,
            itt: 1,
            burst: 0,
        };
        let mut l = InitiatorLogin::new(cfg);
        let (req, data) = l.start();
        c.send(Bhs::LoginRequest(req), &data);
        loop {
            let (Bhs::LoginResponse(r), d) = c.recv() else {
                return Err("not a login response".into());
            };
            match l
                .on_response(&r, &d, &mut |b: &mut [u8]| {
                    b.fill(9);
                    Ok(())
                })
                .map_err(|e| e.to_string())?
            {
                InitiatorStep::Send(q, d) => c.send(Bhs::LoginRequest(q), &d),
                InitiatorStep::Done(o) => {
                    let p = o.params;
                    c.burst = p.max_burst_length as usize;
                    c.rx = FrameConfig {
                        header_digest: p.header_digest,
                        data_digest: p.data_digest,
                        max_recv_data_segment_length: p.our_max_recv_data_segment_length,
                    };
                    c.tx = FrameConfig {
                        max_recv_data_segment_length: p.peer_max_recv_data_segment_length,
                        ..c.rx
                    };
                    return Ok(c);
                }
            }
        }
    }

    fn command(&mut self, cdb: Cdb, read_len: u32, write: &[u8]) -> (u8, Vec<u8>) {
        let (b, _) = cdb.encode();
        self.itt += 1;
        let cmd = ScsiCommand {
            immediate: false,
            final_: true,
            read: read_len > 0,
            write: !write.is_empty(),
            attr: 1,
            lun: 0,
            itt: self.itt,
            expected_data_len: read_len.max(write.len() as u32),
            cmd_sn: self.cmd_sn,
            exp_stat_sn: 0,
            cdb: b,
        };
        self.cmd_sn += 1;
        self.send(Bhs::ScsiCommand(cmd), &[]);
        let mut data = Vec::new();
        loop {
            match self.recv() {
                (Bhs::R2t(r), _) => {
                    let mut off = r.buffer_offset as usize;
                    let end = off + r.desired_len as usize;
                    let mut sn = 0;
                    while off < end {
                        let n = (end - off).min(self.tx.max_recv_data_segment_length as usize);
                        let d = DataOut {
                            final_: off + n == end,
                            lun: 0,
                            itt: self.itt,
                            ttt: r.ttt,
                            exp_stat_sn: 0,
                            data_sn: sn,
                            buffer_offset: off as u32,
                        };
                        self.send(Bhs::DataOut(d), &write[off..off + n]);
                        off += n;
                        sn += 1;
                    }
                }
                (Bhs::DataIn(d), payload) => {
                    assert_eq!(d.buffer_offset as usize, data.len());
                    // F marks the end of each MaxBurstLength sequence.
                    let end = data.len() + payload.len();
                    assert_eq!(d.final_, end % self.burst == 0 || end == read_len as usize);
                    data.extend_from_slice(&payload);
                    if let Some(st) = d.status {
                        return (st, data);
                    }
                }
                (Bhs::ScsiResponse(r), _) => return (r.status, data),
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

impl Client {
    /// Sends a WRITE(16) of 32 blocks (16 KiB) at `lba` and returns the R2T the target
    /// answers with; the command's ITT is then `self.itt` and its CmdSN `self.cmd_sn - 1`.
    fn start_write(&mut self, lba: u64) -> sanbench_iscsi::wire::pdu::R2t {
        let (cdb, _) = Cdb::Write {
            len: CdbLen::L16,
            lba,
            blocks: 32,
            protect: 0,
            dpo: false,
            fua: false,
            verify: false,
        }
        .encode();
        self.itt += 1;
        let cmd = ScsiCommand {
            immediate: false,
            final_: true,
            read: false,
            write: true,
            attr: 1,
            lun: 0,
            itt: self.itt,
            expected_data_len: 16384,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: 0,
            cdb,
        };
        self.cmd_sn += 1;
        self.send(Bhs::ScsiCommand(cmd), &[]);
        let (Bhs::R2t(r), _) = self.recv() else {
            panic!("no R2T")
        };
        r
    }
}

fn icfg() -> InitiatorLoginConfig {
    InitiatorLoginConfig {
        target_name: Some("iqn.2026-11.io.sanbench:ram".into()),
        immediate_data: false,
        initial_r2t: true,
        max_recv_data_segment_length: 8192,
        ..Default::default()
    }
}

fn write_read(c: &mut Client) {
    let data: Vec<u8> = (0..256 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    let blocks = (data.len() / 512) as u32;
    let w = Cdb::Write {
        len: CdbLen::L16,
        lba: 1000,
        blocks,
        protect: 0,
        dpo: false,
        fua: false,
        verify: false,
    };
    assert_eq!(c.command(w, 0, &data).0, 0);
    let r = Cdb::Read {
        len: CdbLen::L16,
        lba: 1000,
        blocks,
        protect: 0,
        dpo: false,
        fua: false,
    };
    let (st, back) = c.command(r, data.len() as u32, &[]);
    assert_eq!(st, 0);
    assert!(back == data, "read back differs");
}

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
        let cmd = ScsiCommand {
            immediate: false,
            final_: !write || rnd() % 2 == 0,
            read: !write,
            write,
            attr: 1,
            lun: (rnd() % 3) << 48,
            itt: 10_000 + i,
            expected_data_len: (rnd() % 70_000) as u32,
            cmd_sn: c.cmd_sn,
            exp_stat_sn: 0,
            cdb,
        };
        c.cmd_sn += 1;
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
        let cmd = ScsiCommand {
            immediate: false,
            final_: true,
            read: false,
            write: true,
            attr: 1,
            lun: 0,
            itt: 100 + i,
            expected_data_len: blocks * 512,
            cmd_sn: c.cmd_sn,
            exp_stat_sn: 0,
            cdb,
        };
        c.cmd_sn += 1;
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

/// (key, ASC, ASCQ) from a SCSI Response's data segment (SenseLength, then sense data).
fn sense_of(data: &[u8]) -> (u8, u8, u8) {
    let s = &data[2..];
    if s[0] & 0x7f == 0x72 {
        (s[1] & 0xf, s[2], s[3])
    } else {
        (s[2] & 0xf, s[12], s[13])
    }
}

/// A hostile initiator: starts a 16 KiB write, takes the R2T, answers it with `bad` (a
/// Data-Out built from the R2T) and expects a Reject of `reason` then CHECK CONDITION with
/// ABORTED COMMAND and `asc_ascq`; the connection stays usable.
fn bad_data_out(
    c: &mut Client,
    bad: impl Fn(&sanbench_iscsi::wire::pdu::R2t) -> (DataOut, usize),
    reason: u8,
    asc_ascq: (u8, u8),
) {
    let r = c.start_write(64);
    assert_eq!((r.buffer_offset, r.desired_len), (0, 16384));
    let (d, len) = bad(&r);
    c.send(Bhs::DataOut(d.clone()), &vec![0xa5; len]);
    match c.recv() {
        (Bhs::Reject(j), hdr) => {
            assert_eq!(j.reason, reason, "{d:?}");
            // The Reject carries the offending header (its lengths filled in by the framer).
            let sent = Bhs::DataOut(d.clone()).encode();
            assert_eq!((&hdr[..4], &hdr[8..48]), (&sent[..4], &sent[8..48]));
        }
        other => panic!("{d:?}: expected a Reject, got {other:?}"),
    }
    match c.recv() {
        (Bhs::ScsiResponse(rsp), sense) => {
            assert_eq!(rsp.itt, c.itt);
            assert_eq!(rsp.status, 0x02, "{d:?}: CHECK CONDITION");
            assert_eq!(sense_of(&sense), (0x0b, asc_ascq.0, asc_ascq.1), "{d:?}");
        }
        other => panic!("{d:?}: expected a SCSI Response, got {other:?}"),
    }
}

/// Each way a Data-Out can differ from what the R2T asked (RFC 7143 §11.7, DataPDUInOrder=Yes)
/// is answered with its Reject and ends its task; the connection carries on.
#[test]
fn data_out_against_the_r2t_is_checked() {
    use sanbench_iscsi::wire::pdu_ctl::reject_reason::{INVALID_PDU_FIELD, PROTOCOL_ERROR};
    let t = start(TargetConfig::default());
    let mut c = Client::login(t.2, icfg()).unwrap();
    let pdu = |r: &sanbench_iscsi::wire::pdu::R2t, ttt, sn, off, final_| DataOut {
        final_,
        lun: 0,
        itt: r.itt,
        ttt,
        exp_stat_sn: 0,
        data_sn: sn,
        buffer_offset: off,
    };
    // A tag that names no R2T.
    bad_data_out(
        &mut c,
        |r| (pdu(r, r.ttt ^ 0x55, 0, 0, true), 8192),
        INVALID_PDU_FIELD,
        (0x4b, 0x01),
    );
    // Unsolicited data (InitialR2T=Yes): TTT 0xffffffff while an R2T is outstanding.
    bad_data_out(
        &mut c,
        |r| (pdu(r, 0xffff_ffff, 0, 0, true), 8192),
        PROTOCOL_ERROR,
        (0x0c, 0x0c),
    );
    // DataSN not 0 on the first PDU of the sequence.
    bad_data_out(
        &mut c,
        |r| (pdu(r, r.ttt, 1, 0, false), 8192),
        PROTOCOL_ERROR,
        (0x4b, 0x00),
    );
    // An offset that skips ahead (in order is negotiated).
    bad_data_out(
        &mut c,
        |r| (pdu(r, r.ttt, 0, 512, false), 4096),
        PROTOCOL_ERROR,
        (0x4b, 0x05),
    );
    // More than the R2T asked: 512 bytes past its 16 KiB in one PDU (the target accepts
    // 256 KiB segments, so the framer lets it through to the check).
    bad_data_out(
        &mut c,
        |r| (pdu(r, r.ttt, 0, 0, true), 16384 + 512),
        PROTOCOL_ERROR,
        (0x4b, 0x02),
    );
    // F before the R2T's range is complete.
    bad_data_out(
        &mut c,
        |r| (pdu(r, r.ttt, 0, 0, true), 4096),
        PROTOCOL_ERROR,
        (0x0c, 0x0d),
    );
    // A Data-Out for no task at all: rejected, nothing else.
    let stray = DataOut {
        final_: true,
        lun: 0,
        itt: 0xdead,
        ttt: 9,
        exp_stat_sn: 0,
        data_sn: 0,
        buffer_offset: 0,
    };
    c.send(Bhs::DataOut(stray), &[0u8; 512]);
    match c.recv() {
        (Bhs::Reject(j), _) => assert_eq!(j.reason, INVALID_PDU_FIELD),
        other => panic!("expected a Reject, got {other:?}"),
    }
    // The connection still works: a proper write and read back.
    write_read(&mut c);
}

/// A read's Data-In is sent from the RAM store without a copy; a write that arrives on the same
/// connection right behind the read (in the same batch) must not show in the read's data.
#[test]
fn read_queued_before_a_write_returns_the_old_data() {
    let t = start(TargetConfig::default());
    let mut c = Client::login(
        t.2,
        InitiatorLoginConfig {
            immediate_data: true,
            ..icfg()
        },
    )
    .unwrap();
    let old: Vec<u8> = (0..4096).map(|i| (i % 251) as u8).collect();
    let new = vec![0xa5u8; 4096];
    let w = Cdb::Write {
        len: CdbLen::L10,
        lba: 2000,
        blocks: 8,
        protect: 0,
        dpo: false,
        fua: false,
        verify: false,
    };
    let r = Cdb::Read {
        len: CdbLen::L10,
        lba: 2000,
        blocks: 8,
        protect: 0,
        dpo: false,
        fua: false,
    };
    assert_eq!(c.command(w.clone(), 0, &old).0, 0);
    // READ then WRITE (immediate data) in one segment, so the target handles them together.
    let mut seg = Vec::new();
    for (i, (cdb, data)) in [(r.clone(), &[][..]), (w, &new[..])]
        .into_iter()
        .enumerate()
    {
        let cmd = ScsiCommand {
            immediate: false,
            final_: true,
            read: data.is_empty(),
            write: !data.is_empty(),
            attr: 1,
            lun: 0,
            itt: 100 + i as u32,
            expected_data_len: 4096,
            cmd_sn: c.cmd_sn,
            exp_stat_sn: 0,
            cdb: cdb.encode().0,
        };
        c.cmd_sn += 1;
        encode_pdu(&mut seg, &Bhs::ScsiCommand(cmd).encode(), &[], data, &c.tx);
    }
    c.s.write_all(&seg).unwrap();
    let (mut read, mut done) = (Vec::new(), 0);
    while done < 2 {
        match c.recv() {
            (Bhs::DataIn(d), payload) => {
                assert_eq!(d.itt, 100);
                read.extend_from_slice(&payload);
                done += usize::from(d.status == Some(0));
            }
            (Bhs::ScsiResponse(r), _) => {
                assert_eq!((r.itt, r.status), (101, 0));
                done += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(read == old, "the read shows the write queued after it");
    assert_eq!(c.command(r, 4096, &[]), (0, new));
}

/// A Task Management Function Request, immediate; returns its response code.
fn tmf(c: &mut Client, function: u8, ref_task_tag: u32, ref_cmd_sn: u32) -> u8 {
    c.itt += 1;
    let t = sanbench_iscsi::wire::pdu_ctl::TaskMgmtRequest {
        immediate: true,
        function,
        lun: 0,
        itt: c.itt,
        ref_task_tag,
        cmd_sn: c.cmd_sn,
        exp_stat_sn: 0,
        ref_cmd_sn,
        exp_data_sn: 0,
    };
    c.send(Bhs::TaskMgmtRequest(t), &[]);
    match c.recv() {
        (Bhs::TaskMgmtResponse(r), _) => {
            assert_eq!(r.itt, c.itt);
            r.response
        }
        other => panic!("function {function}: expected a TMF response, got {other:?}"),
    }
}

/// Task management (RFC 7143 §11.5-11.6): ABORT TASK ends a write waiting for its data (whose
/// Data-Out then names no task) and finds no task once it is gone; CLEAR ACA and TASK
/// REASSIGN are not supported, an undefined function is rejected, the resets complete and a
/// cold reset closes the connection. Logout answers "closed" and closes it.
#[test]
fn task_management_and_logout() {
    use sanbench_iscsi::wire::codes::{logout_reason, logout_response};
    use sanbench_iscsi::wire::codes::{tmf_function as f, tmf_response as r};
    use sanbench_iscsi::wire::pdu_ctl::reject_reason::INVALID_PDU_FIELD;
    let t = start(TargetConfig::default());
    let mut c = Client::login(t.2, icfg()).unwrap();
    let r2t = c.start_write(0);
    let (write_itt, write_cmd_sn) = (c.itt, c.cmd_sn - 1);
    assert_eq!(
        tmf(&mut c, f::ABORT_TASK, write_itt, write_cmd_sn),
        r::COMPLETE
    );
    let late = DataOut {
        final_: true,
        lun: 0,
        itt: write_itt,
        ttt: r2t.ttt,
        exp_stat_sn: 0,
        data_sn: 0,
        buffer_offset: 0,
    };
    c.send(Bhs::DataOut(late), &[0u8; 16384]);
    match c.recv() {
        (Bhs::Reject(j), _) => assert_eq!(j.reason, INVALID_PDU_FIELD),
        other => panic!("expected a Reject of the aborted task's data, got {other:?}"),
    }
    assert_eq!(
        tmf(&mut c, f::ABORT_TASK, write_itt, write_cmd_sn),
        r::TASK_DOES_NOT_EXIST
    );
    assert_eq!(tmf(&mut c, f::CLEAR_ACA, 0, 0), r::FUNCTION_NOT_SUPPORTED);
    assert_eq!(
        tmf(&mut c, f::TASK_REASSIGN, 0, 0),
        r::FUNCTION_NOT_SUPPORTED
    );
    assert_eq!(tmf(&mut c, 0x55, 0, 0), r::REJECTED);
    for function in [
        f::ABORT_TASK_SET,
        f::LOGICAL_UNIT_RESET,
        f::TARGET_WARM_RESET,
    ] {
        assert_eq!(tmf(&mut c, function, 0xffff_ffff, 0), r::COMPLETE);
    }
    write_read(&mut c);
    c.itt += 1;
    let logout = sanbench_iscsi::wire::pdu_ctl::LogoutRequest {
        immediate: true,
        reason: logout_reason::CLOSE_SESSION,
        itt: c.itt,
        cid: 0,
        cmd_sn: c.cmd_sn,
        exp_stat_sn: 0,
    };
    c.send(Bhs::LogoutRequest(logout), &[]);
    match c.recv() {
        (Bhs::LogoutResponse(l), _) => {
            assert_eq!((l.itt, l.response), (c.itt, logout_response::CLOSED));
        }
        other => panic!("expected a Logout Response, got {other:?}"),
    }
    // A connection left open would fail the read by its timeout rather than hang the test.
    let closed = |c: &mut Client| {
        c.s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        c.s.read(&mut [0u8; 1]).unwrap() == 0
    };
    assert!(closed(&mut c), "open after logout");
    let mut c = Client::login(t.2, icfg()).unwrap();
    assert_eq!(
        tmf(&mut c, f::TARGET_COLD_RESET, 0xffff_ffff, 0),
        r::COMPLETE
    );
    assert!(closed(&mut c), "open after a cold reset");
}
