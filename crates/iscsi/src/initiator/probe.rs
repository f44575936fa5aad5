//! What `open` asks the LUN (SPC-5, SBC-4): TEST UNIT READY (clears a pending unit attention),
//! standard INQUIRY (device type, vendor, product), READ CAPACITY(16) with a fallback to (10),
//! the Block Limits VPD page (B0h) and the MODE SENSE(6) write-protect bit.

use sanbench_io::{EngineError, TargetInfo};
use serde_json::Value;

use super::discard::Discard;
use super::session::{Cmd, Dir, Session};
use super::uri::IscsiUri;
use super::Spec;
use crate::scsi::cdb::Cdb;
use crate::scsi::vpd::{BlockLimits, Provisioning};

/// Arena bytes for the probe's replies.
pub(super) const ARENA: usize = 4096;

fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn ascii(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_string()
}

/// Runs a data-in (or no-data) command; returns (result, bytes) with bytes a copy of the reply
/// (at most the session's arena).
pub(super) fn ask(s: &mut Session, cdb: Cdb, len: u32) -> Result<(i32, Vec<u8>), EngineError> {
    let (cdb, _) = cdb.encode();
    let cmd = Cmd {
        tag: 0,
        cdb,
        dir: if len == 0 { Dir::None } else { Dir::In },
        buf: 0,
        len,
        src: super::session::Src::Arena,
        allow_short: true,
        retries: 0,
    };
    let (r, got) = s.run_sync(cmd)?;
    let arena = s.arena();
    // SAFETY: the command completed, so nothing writes the region any more; `got <= len <=` the
    // arena's length (Data-In offsets are checked against `len`).
    let data = unsafe { arena.slice(0, got as usize) }.to_vec();
    Ok((r, data))
}

pub(super) fn failed(s: &Session, what: &str) -> EngineError {
    let sense = s
        .counters
        .last_sense
        .map(|x| {
            format!(
                ": sense key {:#x}, ASC {:#04x}, ASCQ {:#04x}",
                x.key, x.asc, x.ascq
            )
        })
        .unwrap_or_default();
    s.link.proto(format!("{what} failed{sense}"))
}

pub(super) fn probe(s: &mut Session, uri: &IscsiUri) -> Result<(TargetInfo, Discard), EngineError> {
    // A fresh nexus may report a unit attention (power on, reset) once per condition.
    for _ in 0..4 {
        if ask(s, Cdb::TestUnitReady, 0)?.0 == 0 {
            break;
        }
    }
    let inquiry = |evpd, page, alloc_len| Cdb::Inquiry {
        evpd,
        page,
        alloc_len,
    };
    let (r, inq) = ask(s, inquiry(false, 0, 96), 96)?;
    if r != 0 || inq.len() < 36 {
        return Err(failed(s, "INQUIRY"));
    }
    if inq[0] >> 5 != 0 {
        return Err(EngineError::Invalid(format!(
            "{}: LUN {} is not present on {}",
            s.link.peer, uri.lun, uri.iqn
        )));
    }
    if inq[0] & 0x1f != 0 {
        return Err(EngineError::Invalid(format!(
            "{}: LUN {} is not a disk (peripheral device type {:#04x})",
            s.link.peer,
            uri.lun,
            inq[0] & 0x1f
        )));
    }
    let (r, cap) = ask(s, Cdb::ReadCapacity16 { alloc_len: 32 }, 32)?;
    // LBPME (byte 14, bit 7): the LUN is thin provisioned and answers GET LBA STATUS.
    let lbpme = (r == 0 && cap.len() >= 15).then(|| cap[14] & 0x80 != 0);
    let (blocks, block_size) = if r == 0 && cap.len() >= 12 {
        let mut last = [0u8; 8];
        last.copy_from_slice(&cap[..8]);
        (u64::from_be_bytes(last).wrapping_add(1), be32(&cap, 8))
    } else {
        let (r, cap) = ask(s, Cdb::ReadCapacity10, 8)?;
        if r != 0 || cap.len() < 8 {
            return Err(failed(s, "READ CAPACITY(16) and (10)"));
        }
        (be32(&cap, 0) as u64 + 1, be32(&cap, 4))
    };
    if block_size == 0 || !block_size.is_power_of_two() {
        return Err(s
            .link
            .proto(format!("READ CAPACITY: block length {block_size}")));
    }
    s.set_block_size(block_size);
    let mut params = serde_json::Map::new();
    let mut max_transfer = None;
    let (r, b0) = ask(s, inquiry(true, 0xb0, 64), 64)?;
    let limits = (r == 0).then(|| BlockLimits::decode(&b0)).flatten();
    if r == 0 && b0.len() >= 16 && b0[1] == 0xb0 {
        let max = be32(&b0, 8) as u64 * block_size as u64;
        let opt = be32(&b0, 12) as u64 * block_size as u64;
        if max > 0 {
            max_transfer = Some(max.min(u32::MAX as u64) as u32);
        }
        params.insert("block_limits.max_transfer_bytes".into(), max.into());
        params.insert("block_limits.optimal_transfer_bytes".into(), opt.into());
    }
    // Logical Block Provisioning: asked only of a thin LUN (others cannot unmap).
    let prov = if lbpme == Some(true) {
        let (r, b2) = ask(s, inquiry(true, 0xb2, 8), 8)?;
        (r == 0).then(|| Provisioning::decode(&b2)).flatten()
    } else {
        None
    };
    let disc = Discard::new(lbpme == Some(true), limits, prov);
    // The LU's name (VPD 0x83), which a multipath target compares across its paths.
    let (r, d83) = ask(s, inquiry(true, 0x83, 252), 252)?;
    if r == 0 && d83.len() >= 4 && d83[1] == 0x83 {
        if let Some(id) = lu_designator(&d83) {
            params.insert(sanbench_io::params::LU_ID.into(), id.into());
        }
    }
    let mode = Cdb::ModeSense {
        ten: false,
        dbd: true,
        llbaa: false,
        pc: 0,
        page: 0x3f,
        subpage: 0,
        alloc_len: 4,
    };
    let (r, ms) = ask(s, mode, 4)?;
    let read_only = r == 0 && ms.len() >= 3 && ms[2] & 0x80 != 0;
    params.insert("vendor".into(), ascii(&inq[8..16]).into());
    params.insert("lbpme".into(), lbpme.unwrap_or(false).into());
    params.insert("product".into(), ascii(&inq[16..32]).into());
    params.insert("revision".into(), ascii(&inq[32..36]).into());
    let mut info = TargetInfo {
        uri: String::new(),
        engine: "iscsi".into(),
        size: blocks * block_size as u64,
        block_size,
        max_transfer,
        read_only,
        params: params.into_iter().collect(),
    };
    disc.record(&mut info);
    Ok((info, disc))
}

/// The logical unit's best designator from a Device Identification page (SPC-5 §7.7.6), named
/// as Linux names WWIDs: NAA (`naa.`), EUI-64 (`eui.`), SCSI name string, then T10 vendor ID
/// (`t10.`). Only designators of the logical unit (association 0) count: target port ones
/// differ between paths by design.
pub(super) fn lu_designator(page: &[u8]) -> Option<String> {
    let len = u16::from_be_bytes([page[2], page[3]]) as usize;
    let body = page.get(4..(4 + len).min(page.len()))?;
    let mut best: Option<(u8, String)> = None;
    let mut i = 0;
    while i + 4 <= body.len() {
        let (assoc, kind, n) = (
            body[i + 1] >> 4 & 3,
            body[i + 1] & 0xf,
            body[i + 3] as usize,
        );
        let Some(d) = body.get(i + 4..i + 4 + n) else {
            break;
        };
        i += 4 + n;
        if assoc != 0 {
            continue;
        }
        let hex = || d.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let named = match kind {
            3 => (0, format!("naa.{}", hex())),
            2 => (1, format!("eui.{}", hex())),
            8 => (2, ascii(d)),
            1 => (3, format!("t10.{}", ascii(d))),
            _ => continue,
        };
        if best.as_ref().is_none_or(|b| named.0 < b.0) {
            best = Some(named);
        }
    }
    best.map(|b| b.1)
}

fn yn(b: bool) -> Value {
    if b { "Yes" } else { "No" }.into()
}

fn digest(b: bool) -> Value {
    if b { "CRC32C" } else { "None" }.into()
}

/// Records the negotiated keys (RFC 7143 names) and the session's identity.
pub(super) fn session_params(s: &Session, spec: &Spec, info: &mut TargetInfo) {
    let p = &s.params;
    let m = &mut info.params;
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("target_name", spec.uri.iqn.clone().into());
    put("portal", spec.uri.portal().into());
    put("lun", spec.uri.lun.into());
    put("initiator_name", spec.opts.initiator_name.clone().into());
    put("tsih", s.tsih.into());
    put(
        "auth",
        match (&spec.uri.chap, &spec.opts.target_chap) {
            (_, Some(_)) => "CHAP (mutual)",
            (Some(_), None) => "CHAP",
            (None, None) => "None",
        }
        .into(),
    );
    put(
        "MaxRecvDataSegmentLength.initiator",
        p.our_max_recv_data_segment_length.into(),
    );
    put(
        "MaxRecvDataSegmentLength.target",
        p.peer_max_recv_data_segment_length.into(),
    );
    put("MaxBurstLength", p.max_burst_length.into());
    put("FirstBurstLength", p.first_burst_length.into());
    put("ImmediateData", yn(p.immediate_data));
    put("InitialR2T", yn(p.initial_r2t));
    put("HeaderDigest", digest(p.header_digest));
    put("DataDigest", digest(p.data_digest));
    put("MaxOutstandingR2T", p.max_outstanding_r2t.into());
    put("ErrorRecoveryLevel", p.error_recovery_level.into());
    put("MaxConnections", p.max_connections.into());
    put("DataPDUInOrder", yn(p.data_pdu_in_order));
    put("DataSequenceInOrder", yn(p.data_sequence_in_order));
}

#[cfg(test)]
mod tests {
    use super::lu_designator;

    #[test]
    fn the_lu_designator_prefers_naa_and_skips_port_designators() {
        let page = [
            0u8, 0x83, 0, 28, // header
            0x02, 0x01, 0, 4, b'A', b'B', b'C', b'D', // T10 vendor ID, LU
            0x01, 0x13, 0, 4, 9, 9, 9, 9, // NAA of a target port (association 1)
            0x01, 0x03, 0, 4, 0x30, 0, 0, 1, // NAA of the LU
        ];
        assert_eq!(lu_designator(&page).as_deref(), Some("naa.30000001"));
        assert_eq!(lu_designator(&page[..16]).as_deref(), Some("t10.ABCD"));
        assert_eq!(lu_designator(&[0, 0x83, 0, 9, 0x01, 0x03, 0, 200]), None);
    }
}
