//! End-to-end over TCP with this crate's own wire API as the initiator: Data-Out checked against
//! its R2T, a read queued before a write, task management and logout (the harness:
//! wire_support/).

mod wire_support;

use std::io::{Read, Write};

use sanbench_iscsi::scsi::cdb::{Cdb, CdbLen};
use sanbench_iscsi::target::TargetConfig;
use sanbench_iscsi::wire::bhs::Bhs;
use sanbench_iscsi::wire::framer::encode_pdu;
use sanbench_iscsi::wire::login_initiator::InitiatorLoginConfig;
use sanbench_iscsi::wire::pdu::DataOut;
use wire_support::*;

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
        let rw = (data.is_empty(), !data.is_empty());
        let cmd = c.scsi_command(100 + i as u32, cdb.encode().0, rw, 4096);
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
