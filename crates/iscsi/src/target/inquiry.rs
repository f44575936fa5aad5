//! INQUIRY (standard data and VPD pages 00, 80, 83, B0, B1, B2; SPC-5 §6.7, §7.7, SBC-4 §6.6)
//! and MODE SENSE(6/10) with the caching, control and informational exceptions pages.

use super::outcome::{Outcome, BLOCK, MAX_UNMAP_BLOCKS, MAX_UNMAP_DESCRIPTORS, MAX_XFER_BLOCKS};
use crate::scsi::cdb::Cdb;
use crate::scsi::sense::Sense;
use sanbench_blockstore::CHUNK;

const VPD_PAGES: [u8; 6] = [0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2];

fn vpd(page: u8, body: Vec<u8>) -> Vec<u8> {
    let mut v = vec![0, page];
    v.extend_from_slice(&(body.len() as u16).to_be_bytes());
    v.extend_from_slice(&body);
    v
}

fn pad(s: &str, n: usize) -> Vec<u8> {
    let mut v: Vec<u8> = s.bytes().take(n).collect();
    v.resize(n, b' ');
    v
}

/// The INQUIRY data (standard, or VPD page `page` when `evpd`) of LUN `id` of target `target`
/// (see `Lun::new`), whose serial number is `serial`.
pub fn inquiry(target: u32, id: u16, serial: &str, evpd: bool, page: u8) -> Result<Vec<u8>, Sense> {
    if !evpd {
        // T10 vendor "SANBENCH": clients rely on it to know the LUN is sanbench's own scratch
        // disk, which they may overwrite (see sanbench-blockstore's docs). Keep it.
        let mut v = vec![0u8; 96];
        v[2] = 0x06; // SPC-4
        v[3] = 0x12; // HiSup, response data format 2
        v[4] = 91;
        v[7] = 0x02; // CmdQue
        v[8..16].copy_from_slice(&pad("SANBENCH", 8));
        v[16..32].copy_from_slice(&pad("RAMDISK", 16));
        v[32..36].copy_from_slice(&pad("0001", 4));
        // Version descriptors: SAM-5, iSCSI, SPC-4, SBC-3.
        for (i, d) in [0x00a0u16, 0x0960, 0x0460, 0x04c0].iter().enumerate() {
            v[58 + 2 * i..60 + 2 * i].copy_from_slice(&d.to_be_bytes());
        }
        return Ok(v);
    }
    // NAA 3 (locally assigned, 8 bytes, SPC-5 §7.7.6.6.3): the target's identity and the LUN,
    // the same on every portal and different between two targets.
    let naa = 3u64 << 60 | (target as u64) << 16 | id as u64;
    Ok(match page {
        0x00 => vpd(0, VPD_PAGES.to_vec()),
        0x80 => vpd(0x80, serial.as_bytes().to_vec()),
        0x83 => {
            let mut b = vec![0x01, 0x03, 0x00, 0x08];
            b.extend_from_slice(&naa.to_be_bytes());
            let t10 = [pad("SANBENCH", 8), serial.as_bytes().to_vec()].concat();
            b.extend_from_slice(&[0x02, 0x01, 0x00, t10.len() as u8]);
            b.extend_from_slice(&t10);
            vpd(0x83, b)
        }
        0xb0 => {
            let mut b = vec![0u8; 0x3c];
            b[1] = 255; // MAXIMUM COMPARE AND WRITE LENGTH
            b[2..4].copy_from_slice(&8u16.to_be_bytes()); // OPTIMAL TRANSFER LENGTH GRANULARITY
            b[4..8].copy_from_slice(&MAX_XFER_BLOCKS.to_be_bytes());
            b[8..12].copy_from_slice(&(CHUNK as u32 / BLOCK as u32).to_be_bytes());
            b[16..20].copy_from_slice(&MAX_UNMAP_BLOCKS.to_be_bytes()); // MAX UNMAP LBA COUNT
            b[20..24].copy_from_slice(&(MAX_UNMAP_DESCRIPTORS as u32).to_be_bytes());
            b[24..28].copy_from_slice(&1u32.to_be_bytes()); // UNMAP GRANULARITY
            b[32..40].copy_from_slice(&(1u64 << 22).to_be_bytes()); // MAX WRITE SAME LENGTH
            vpd(0xb0, b)
        }
        0xb1 => {
            let mut b = vec![0u8; 0x3c];
            b[1] = 1; // non-rotating medium
            vpd(0xb1, b)
        }
        0xb2 => vpd(0xb2, vec![0, 0x80 | 0x40 | 0x20 | 0x04, 0x02, 0]),
        _ => return Err(Sense::INVALID_FIELD_IN_CDB.with_field(true, 2, None)),
    })
}

fn caching(changeable: bool) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[0] = 0x08;
    p[1] = 0x12;
    if !changeable {
        p[2] = 0x04; // WCE
    }
    p
}

fn control(changeable: bool) -> Vec<u8> {
    let mut p = vec![0u8; 12];
    p[0] = 0x0a;
    p[1] = 0x0a;
    if !changeable {
        p[8..10].copy_from_slice(&0xffffu16.to_be_bytes()); // BUSY TIMEOUT PERIOD: unlimited
    }
    p
}

fn info_exceptions(_changeable: bool) -> Vec<u8> {
    let mut p = vec![0u8; 12];
    p[0] = 0x1c;
    p[1] = 0x0a;
    p
}

/// MODE SENSE(6/10) for a LUN of `blocks` blocks.
pub fn mode_sense(blocks: u64, cdb: &Cdb) -> Result<Outcome, Sense> {
    let Cdb::ModeSense {
        ten,
        dbd,
        llbaa,
        pc,
        page,
        subpage,
        alloc_len,
    } = *cdb
    else {
        return Err(Sense::INVALID_OPCODE);
    };
    if pc == 3 {
        return Err(Sense::SAVING_PARAMS_UNSUPPORTED);
    }
    let ch = pc == 1;
    let pages: Vec<u8> = match (page, subpage) {
        (0x08, 0) => caching(ch),
        (0x0a, 0) => control(ch),
        (0x1c, 0) => info_exceptions(ch),
        (0x3f, 0 | 0xff) => [caching(ch), control(ch), info_exceptions(ch)].concat(),
        _ => return Err(Sense::INVALID_FIELD_IN_CDB.with_field(true, 2, None)),
    };
    let bd: Vec<u8> = if dbd {
        Vec::new()
    } else if llbaa {
        let mut b = vec![0u8; 16];
        b[0..8].copy_from_slice(&blocks.to_be_bytes());
        b[12..16].copy_from_slice(&(BLOCK as u32).to_be_bytes());
        b
    } else {
        let mut b = vec![0u8; 8];
        b[0..4].copy_from_slice(&(blocks.min(0xffff_ffff) as u32).to_be_bytes());
        b[5..8].copy_from_slice(&(BLOCK as u32).to_be_bytes()[1..]);
        b
    };
    let dev_specific = 0x10; // DPOFUA
    let mut v = if ten {
        let total = 8 + bd.len() + pages.len();
        let mut h = vec![0u8; 8];
        h[0..2].copy_from_slice(&((total - 2) as u16).to_be_bytes());
        h[3] = dev_specific;
        h[4] = llbaa as u8 & (!dbd) as u8;
        h[6..8].copy_from_slice(&(bd.len() as u16).to_be_bytes());
        h
    } else {
        let total = 4 + bd.len() + pages.len();
        vec![(total - 1).min(255) as u8, 0, dev_specific, bd.len() as u8]
    };
    v.extend_from_slice(&bd);
    v.extend_from_slice(&pages);
    v.truncate(alloc_len as usize);
    Ok(Outcome::Data(v))
}
