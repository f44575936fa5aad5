//! Round trips of every BHS layout, checked against RFC 7143 §11 written out a second time:
//! each test takes random bytes, clears what its section reserves (bytes and flag bits) and
//! makes the header valid, then requires `decode` to accept it and `encode` to give back the
//! same 48 bytes. A field the typed value dropped, or put at a wrong offset, fails here.

use super::bhs::Bhs;
use proptest::prelude::*;

fn zero(b: &mut [u8; 48], ranges: &[std::ops::Range<usize>]) {
    for r in ranges {
        b[r.clone()].fill(0);
    }
}

/// Byte 0: the opcode, with the I bit kept only where the PDU has one.
fn op(b: &mut [u8; 48], opcode: u8, may_be_immediate: bool) {
    let i = if may_be_immediate { b[0] & 0x40 } else { 0 };
    b[0] = opcode | i;
}

/// Login flags: T, C, CSG, NSG valid for a request (`request`) or any response.
fn login_flags(b: &mut [u8; 48], request: bool) {
    let t = b[1] & 0x80 != 0;
    let mut csg = (b[1] >> 2) & 3;
    if csg == 2 || (request && csg == 3) {
        csg = 0;
    }
    let mut flags = csg << 2;
    if t {
        let mut nsg = b[1] & 3;
        if nsg == 2 || (request && nsg <= csg) {
            nsg = 3;
        }
        flags |= 0x80 | nsg;
    } else {
        flags |= b[1] & 0x40;
    }
    b[1] = flags;
}

/// The residual flags O/U (and o/u when `bidi`) without both of a pair set.
fn residual_flags(f: u8, bidi: bool) -> u8 {
    let mut f = f & if bidi { 0x1e } else { 0x06 };
    if f & 0x06 == 0x06 {
        f &= !0x02;
    }
    if f & 0x18 == 0x18 {
        f &= !0x08;
    }
    f
}

fn reserved_tag(b: &mut [u8; 48], at: usize) {
    b[at..at + 4].fill(0xff);
}

/// Makes `b` a valid header of `opcode` with every reserved bit zero (RFC 7143 §11).
fn fix(opcode: u8, b: &mut [u8; 48]) {
    match opcode {
        // NOP-Out, §11.18: not a ping response (TTT reserved, ITT valid).
        0x00 => {
            op(b, 0x00, true);
            b[1] = 0x80;
            zero(b, &[2..8, 32..48]);
            reserved_tag(b, 20);
            b[16] &= 0x7f;
        }
        // SCSI Command, §11.3.
        0x01 => {
            op(b, 0x01, true);
            let mut f = (b[1] & 0xe0) | ((b[1] & 7) % 5);
            if f & 0xa0 == 0 {
                f |= 0x80;
            }
            b[1] = f;
            b[2..8].fill(0);
        }
        // Task Management Function Request, §11.5.
        0x02 => {
            op(b, 0x02, true);
            b[1] |= 0x80;
            zero(b, &[2..8, 40..48]);
        }
        // Login Request, §11.12: always immediate.
        0x03 => {
            b[0] = 0x43;
            login_flags(b, true);
            zero(b, &[4..8, 22..24, 32..48]);
        }
        // Text Request, §11.10.
        0x04 => {
            op(b, 0x04, true);
            b[1] &= if b[1] & 0x80 != 0 { 0x80 } else { 0x40 };
            zero(b, &[2..8, 32..48]);
        }
        // Data-Out, §11.7.
        0x05 => {
            op(b, 0x05, false);
            b[1] &= 0x80;
            zero(b, &[2..8, 24..28, 32..36, 44..48]);
        }
        // Logout Request, §11.14.
        0x06 => {
            op(b, 0x06, true);
            b[1] |= 0x80;
            zero(b, &[2..16, 22..24, 32..48]);
        }
        // SNACK Request, §11.16.
        0x10 => {
            op(b, 0x10, false);
            b[1] = 0x80 | (b[1] & 3);
            zero(b, &[2..8, 24..28, 32..40]);
        }
        // NOP-In, §11.19.
        0x20 => {
            op(b, 0x20, false);
            b[1] = 0x80;
            zero(b, &[2..8, 36..48]);
        }
        // SCSI Response, §11.4.
        0x21 => {
            op(b, 0x21, false);
            b[1] = 0x80 | residual_flags(b[1], true);
            b[4..16].fill(0);
        }
        // Task Management Function Response, §11.6.
        0x22 => {
            op(b, 0x22, false);
            b[1] = 0x80;
            zero(b, &[3..16, 20..24, 36..48]);
        }
        // Login Response, §11.13.
        0x23 => {
            op(b, 0x23, false);
            login_flags(b, false);
            zero(b, &[4..8, 20..24, 38..48]);
        }
        // Text Response, §11.11.
        0x24 => {
            op(b, 0x24, false);
            b[1] &= if b[1] & 0x80 != 0 { 0x80 } else { 0x40 };
            zero(b, &[2..8, 36..48]);
        }
        // Data-In, §11.7: status only with S, S only with F.
        0x25 => {
            op(b, 0x25, false);
            let s = b[1] & 0x01;
            let f = if s != 0 { 0x80 } else { b[1] & 0x80 };
            b[1] = f | (b[1] & 0x40) | residual_flags(b[1], false) | s;
            if s == 0 {
                b[3] = 0;
            }
            zero(b, &[2..3, 4..8]);
        }
        // Logout Response, §11.15.
        0x26 => {
            op(b, 0x26, false);
            b[1] = 0x80;
            zero(b, &[3..16, 20..24, 36..40, 44..48]);
        }
        // R2T, §11.8: a valid TTT and a non-zero length.
        0x31 => {
            op(b, 0x31, false);
            b[1] = 0x80;
            b[2..8].fill(0);
            b[20] &= 0x7f;
            b[47] |= 1;
        }
        // Asynchronous Message, §11.9.
        0x32 => {
            op(b, 0x32, false);
            b[1] = 0x80;
            zero(b, &[2..8, 20..24, 44..48]);
            reserved_tag(b, 16);
        }
        // Reject, §11.17.
        0x3f => {
            op(b, 0x3f, false);
            b[1] = 0x80;
            zero(b, &[3..16, 20..24, 40..48]);
            reserved_tag(b, 16);
        }
        _ => unreachable!("not an opcode of RFC 7143"),
    }
}

macro_rules! roundtrips {
    ($($name:ident: $opcode:expr),* $(,)?) => {
        proptest! {
            $(
                #[test]
                fn $name(bytes in any::<[u8; 48]>()) {
                    let mut b = bytes;
                    fix($opcode, &mut b);
                    let v = Bhs::decode(&b);
                    prop_assert!(v.is_ok(), "{:02x?}: {:?}", b, v);
                    let v = v.unwrap();
                    prop_assert_eq!(v.opcode() as u8, $opcode);
                    prop_assert_eq!(v.encode(), b);
                }
            )*
        }
    };
}

roundtrips! {
    nop_out: 0x00,
    scsi_command: 0x01,
    task_mgmt_request: 0x02,
    login_request: 0x03,
    text_request: 0x04,
    data_out: 0x05,
    logout_request: 0x06,
    snack: 0x10,
    nop_in: 0x20,
    scsi_response: 0x21,
    task_mgmt_response: 0x22,
    login_response: 0x23,
    text_response: 0x24,
    data_in: 0x25,
    logout_response: 0x26,
    r2t: 0x31,
    async_message: 0x32,
    reject: 0x3f,
}

/// A header captured from the byte layout of RFC 7143 §11.3 by hand: each field at its offset.
#[test]
fn scsi_command_fields_at_their_offsets() {
    use super::pdu::ScsiCommand;
    let mut h = [0u8; 48];
    h[0] = 0x41;
    h[1] = 0xc1;
    h[8..16].copy_from_slice(&0x0001_0000_0000_0000u64.to_be_bytes());
    h[16..20].copy_from_slice(&7u32.to_be_bytes());
    h[20..24].copy_from_slice(&4096u32.to_be_bytes());
    h[24..28].copy_from_slice(&9u32.to_be_bytes());
    h[28..32].copy_from_slice(&3u32.to_be_bytes());
    h[32] = 0x88;
    let c = ScsiCommand::decode(&h).unwrap();
    assert_eq!(
        c,
        ScsiCommand {
            immediate: true,
            final_: true,
            read: true,
            write: false,
            attr: 1,
            lun: 1 << 48,
            itt: 7,
            expected_data_len: 4096,
            cmd_sn: 9,
            exp_stat_sn: 3,
            cdb: {
                let mut cdb = [0u8; 16];
                cdb[0] = 0x88;
                cdb
            },
        }
    );
    let mut back = [0u8; 48];
    c.encode(&mut back);
    assert_eq!(back, h);
}
