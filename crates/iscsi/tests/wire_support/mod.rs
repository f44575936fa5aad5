//! The harness of the wire-level tests (wire_initiator.rs, wire_initiator_checks.rs): this
//! crate's target on a thread, and a client that speaks iSCSI with the crate's own wire API.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use sanbench_iscsi::scsi::cdb::{Cdb, CdbLen};
use sanbench_iscsi::target::{Target, TargetConfig};
use sanbench_iscsi::wire::bhs::Bhs;
use sanbench_iscsi::wire::framer::{encode_pdu, parse_pdu, FrameConfig, Parsed};
use sanbench_iscsi::wire::login_initiator::{InitiatorLogin, InitiatorLoginConfig, InitiatorStep};
use sanbench_iscsi::wire::pdu::{DataOut, ScsiCommand};

pub struct Running(pub Arc<AtomicBool>, pub Option<JoinHandle<()>>, pub u16);
impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        if let Some(t) = self.1.take() {
            let _ = t.join();
        }
    }
}

pub fn start(cfg: TargetConfig) -> Running {
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

pub struct Client {
    pub s: TcpStream,
    pub buf: Vec<u8>,
    pub rx: FrameConfig,
    pub tx: FrameConfig,
    pub cmd_sn: u32,
    pub itt: u32,
    pub burst: usize,
}

impl Client {
    pub fn recv(&mut self) -> (Bhs, Vec<u8>) {
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
    pub fn send(&mut self, b: Bhs, data: &[u8]) {
        let mut out = Vec::new();
        encode_pdu(&mut out, &b.encode(), &[], data, &self.tx);
        self.s.write_all(&out).unwrap();
    }

    pub fn login(port: u16, cfg: InitiatorLoginConfig) -> Result<Client, String> {
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

    pub fn command(&mut self, cdb: Cdb, read_len: u32, write: &[u8]) -> (u8, Vec<u8>) {
        self.itt += 1;
        let cmd = self.scsi_command(
            self.itt,
            cdb.encode().0,
            (read_len > 0, !write.is_empty()),
            read_len.max(write.len() as u32),
        );
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
    /// A SCSI Command PDU (final, simple task attribute, LUN 0; `(read, write)` its R and W
    /// bits) at the session's next CmdSN, which it takes.
    pub fn scsi_command(
        &mut self,
        itt: u32,
        cdb: [u8; 16],
        (read, write): (bool, bool),
        expected_data_len: u32,
    ) -> ScsiCommand {
        let cmd = ScsiCommand {
            immediate: false,
            final_: true,
            read,
            write,
            attr: 1,
            lun: 0,
            itt,
            expected_data_len,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: 0,
            cdb,
        };
        self.cmd_sn += 1;
        cmd
    }

    /// Sends a WRITE(16) of 32 blocks (16 KiB) at `lba` and returns the R2T the target
    /// answers with; the command's ITT is then `self.itt` and its CmdSN `self.cmd_sn - 1`.
    pub fn start_write(&mut self, lba: u64) -> sanbench_iscsi::wire::pdu::R2t {
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
        let cmd = self.scsi_command(self.itt, cdb, (false, true), 16384);
        self.send(Bhs::ScsiCommand(cmd), &[]);
        let (Bhs::R2t(r), _) = self.recv() else {
            panic!("no R2T")
        };
        r
    }
}

pub fn icfg() -> InitiatorLoginConfig {
    InitiatorLoginConfig {
        target_name: Some("iqn.2026-11.io.sanbench:ram".into()),
        immediate_data: false,
        initial_r2t: true,
        max_recv_data_segment_length: 8192,
        ..Default::default()
    }
}

pub fn write_read(c: &mut Client) {
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
