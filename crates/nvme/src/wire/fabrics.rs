//! NVMe over Fabrics 1.1: the Connect command and its 1024-byte data (§3.3), and the
//! controller properties a host reads and writes with Property Get/Set instead of registers
//! (§3.4; NVMe Base 2.0 §3.1.3: CAP, VS, CC, CSTS).

use super::header::Sqe;
use super::sqe::{admin, fctype, sqe, DataPtr};
use super::WireError;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::U16;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Connect attribute: disable SQ flow control (NVMe-oF 1.1 figure 20).
pub const CATTR_DISABLE_SQ_FLOW: u8 = 1 << 2;

/// The fields of a Connect SQE (CDW10-12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connect {
    /// Record format, 0.
    pub recfmt: u16,
    /// 0: the admin queue; 1..: an I/O queue.
    pub qid: u16,
    /// Submission queue size, 0's based.
    pub sqsize: u16,
    /// Connect attributes; [`CATTR_DISABLE_SQ_FLOW`] asks the controller not to report SQ head
    /// pointers, which lets it end a successful read with its last C2HData (SUCCESS flag)
    /// instead of a CapsuleResp (NVMe/TCP 1.0 §3.6.2.3).
    pub cattr: u8,
    /// Keep-alive timeout in milliseconds (admin queue only).
    pub kato: u32,
    /// The length the SGL declares for the Connect data.
    pub data_len: u32,
}

impl Connect {
    pub fn from_sqe(s: &Sqe) -> Connect {
        let c10 = s.cdw10.get();
        let c11 = s.cdw11.get();
        Connect {
            recfmt: c10 as u16,
            qid: (c10 >> 16) as u16,
            sqsize: c11 as u16,
            cattr: (c11 >> 16) as u8,
            kato: s.cdw12.get(),
            data_len: s.dptr.length.get(),
        }
    }

    /// The SQE, with the 1024 bytes of Connect data in the capsule.
    pub fn to_sqe(&self, command_id: u16) -> Sqe {
        let mut s = sqe(
            admin::FABRICS,
            command_id,
            fctype::CONNECT as u32,
            DataPtr::InCapsule {
                offset: 0,
                len: CONNECT_DATA_LEN as u32,
            },
        );
        s.cdw10.set(self.recfmt as u32 | (self.qid as u32) << 16);
        s.cdw11.set(self.sqsize as u32 | (self.cattr as u32) << 16);
        s.cdw12.set(self.kato);
        s
    }
}

pub const CONNECT_DATA_LEN: usize = 1024;
pub const NQN_LEN: usize = 256;

/// Connect data (§3.3.1, Figure 20).
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct ConnectData {
    pub hostid: [u8; 16],
    /// 0xffff on the admin queue (dynamic controller); the controller's id on I/O queues.
    pub cntlid: U16,
    pub rsvd: [u8; 238],
    pub subsysnqn: [u8; NQN_LEN],
    pub hostnqn: [u8; NQN_LEN],
    pub rsvd2: [u8; 256],
}

const _: () = {
    assert!(size_of::<ConnectData>() == CONNECT_DATA_LEN);
    assert!(offset_of!(ConnectData, cntlid) == 16);
    assert!(offset_of!(ConnectData, subsysnqn) == 256);
    assert!(offset_of!(ConnectData, hostnqn) == 512);
};

/// The text of a NUL-padded NQN field, or `None` if it is not NUL-terminated UTF-8.
pub fn nqn_str(field: &[u8; NQN_LEN]) -> Option<&str> {
    let end = field.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&field[..end]).ok()
}

/// Writes `nqn` NUL-padded; an NQN of 256 bytes or more is refused (the spec's limit is 223),
/// and so is one with a NUL in it, which [`nqn_str`] would read back cut short.
pub fn set_nqn(field: &mut [u8; NQN_LEN], nqn: &str) -> Result<(), WireError> {
    if nqn.len() >= NQN_LEN {
        return Err(WireError::Length {
            what: "NQN",
            len: nqn.len(),
            want: NQN_LEN - 1,
        });
    }
    if nqn.contains('\0') {
        return Err(WireError::Unrepresentable {
            what: "NQN",
            reason: "contains a NUL byte",
        });
    }
    field.fill(0);
    field[..nqn.len()].copy_from_slice(nqn.as_bytes());
    Ok(())
}

impl ConnectData {
    pub fn new(
        hostid: [u8; 16],
        cntlid: u16,
        subsysnqn: &str,
        hostnqn: &str,
    ) -> Result<Self, WireError> {
        let mut d = ConnectData::new_zeroed();
        d.hostid = hostid;
        d.cntlid.set(cntlid);
        set_nqn(&mut d.subsysnqn, subsysnqn)?;
        set_nqn(&mut d.hostnqn, hostnqn)?;
        Ok(d)
    }

    pub fn parse(b: &[u8]) -> Result<ConnectData, WireError> {
        ConnectData::read_from_bytes(b).map_err(|_| WireError::Length {
            what: "Connect data",
            len: b.len(),
            want: CONNECT_DATA_LEN,
        })
    }
}

/// Property offsets and fields.
pub mod prop {
    pub const CAP: u32 = 0x00;
    pub const VS: u32 = 0x08;
    pub const CC: u32 = 0x14;
    pub const CSTS: u32 = 0x1c;
    pub const NSSR: u32 = 0x20;

    pub const CC_EN: u32 = 1;
    /// CC.SHN, bits 15:14: a shutdown notification.
    pub const CC_SHN_MASK: u32 = 3 << 14;
    pub const CSTS_RDY: u32 = 1;
    pub const CSTS_CFS: u32 = 2;
    /// CSTS.SHST = 10b: shutdown processing complete.
    pub const CSTS_SHST_CMPLT: u32 = 2 << 2;

    /// NVMe 1.3.
    pub const VS_1_3: u32 = 0x0001_0300;

    /// CAP: `mqes` the largest queue size (1-based, at least 2), CQR set, TO in 500 ms units,
    /// NVM command set, 4 KiB memory pages.
    pub fn cap(mqes: u16, timeout_500ms: u8) -> u64 {
        (mqes.max(2) - 1) as u64 | 1 << 16 | (timeout_500ms as u64) << 24 | 1 << 37
    }

    /// CAP.MQES as a 1-based queue size.
    pub fn cap_mqes(cap: u64) -> u32 {
        (cap & 0xffff) as u32 + 1
    }

    /// CAP.TO in milliseconds.
    pub fn cap_timeout_ms(cap: u64) -> u64 {
        ((cap >> 24) & 0xff) * 500
    }

    /// CC as Linux writes it to enable: EN, NVM command set, 4 KiB pages, round robin,
    /// 64-byte SQEs (IOSQES 6) and 16-byte CQEs (IOCQES 4).
    pub const CC_ENABLE: u32 = CC_EN | 6 << 16 | 4 << 20;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::cmd::Command;

    #[test]
    fn connect_round_trip() {
        let c = Connect {
            recfmt: 0,
            qid: 3,
            sqsize: 127,
            cattr: 0,
            kato: 0,
            data_len: 1024,
        };
        let s = c.to_sqe(9);
        assert_eq!(Command::parse(&s, false), Ok(Command::Connect(c)));
        let d = ConnectData::new([7; 16], 0xffff, "nqn.a", "nqn.h").unwrap();
        let p = ConnectData::parse(d.as_bytes()).unwrap();
        assert_eq!(nqn_str(&p.subsysnqn), Some("nqn.a"));
        assert_eq!(nqn_str(&p.hostnqn), Some("nqn.h"));
        assert_eq!(p.cntlid.get(), 0xffff);
        assert!(ConnectData::parse(&[0; 100]).is_err());
        assert!(set_nqn(&mut [0; NQN_LEN], &"x".repeat(256)).is_err());
        assert_eq!(nqn_str(&[b'a'; NQN_LEN]), None);
    }

    #[test]
    fn cap_fields() {
        let cap = prop::cap(128, 20);
        assert_eq!(prop::cap_mqes(cap), 128);
        assert_eq!(prop::cap_timeout_ms(cap), 10_000);
    }

    #[test]
    fn nqn_with_nul_refused() {
        // nqn_str would read "nqn.a" back: the encoder refuses what cannot round-trip.
        let mut f = [0; NQN_LEN];
        assert!(matches!(
            set_nqn(&mut f, "nqn.a\0b"),
            Err(WireError::Unrepresentable { .. })
        ));
        assert!(ConnectData::new([0; 16], 1, "nqn.a", "\0").is_err());
    }

    use proptest::collection::vec;
    // Not the prelude: its `prop` would shadow the property module.
    use proptest::prelude::{any, prop_assert_eq, prop_assert_ne, prop_oneof, proptest, Strategy};

    fn nqn() -> impl Strategy<Value = String> {
        // Any text without NUL up to the field's 255 bytes (63 characters of at most 4 bytes),
        // and ASCII NQNs right up to the limit.
        prop_oneof!["[^\\x00]{0,63}", "[ -~]{250,255}"]
    }

    proptest! {
        #[test]
        fn connect_sqe_round_trip(
            (recfmt, qid, sqsize, cattr) in any::<(u16, u16, u16, u8)>(),
            kato in any::<u32>(),
            cid in any::<u16>(),
        ) {
            let c = Connect { recfmt, qid, sqsize, cattr, kato, data_len: CONNECT_DATA_LEN as u32 };
            let s = c.to_sqe(cid);
            prop_assert_eq!(Connect::from_sqe(&s), c);
            prop_assert_eq!(Command::parse(&s, qid == 0), Ok(Command::Connect(c)));
            prop_assert_eq!(s.command_id.get(), cid);
        }

        #[test]
        fn connect_data_round_trip(
            hostid in any::<[u8; 16]>(),
            cntlid in any::<u16>(),
            sub in nqn(),
            host in nqn(),
        ) {
            let d = ConnectData::new(hostid, cntlid, &sub, &host).unwrap();
            let b = d.as_bytes();
            let p = ConnectData::parse(b).unwrap();
            prop_assert_eq!(p.as_bytes(), b);
            prop_assert_eq!(p.hostid, hostid);
            prop_assert_eq!(p.cntlid.get(), cntlid);
            prop_assert_eq!(nqn_str(&p.subsysnqn), Some(sub.as_str()));
            prop_assert_eq!(nqn_str(&p.hostnqn), Some(host.as_str()));
        }

        /// Any 1024 bytes are Connect data and come back unchanged; NQN fields never panic.
        #[test]
        fn connect_data_bytes(b in vec(any::<u8>(), 0..1100)) {
            match ConnectData::parse(&b) {
                Ok(d) => {
                    prop_assert_eq!(d.as_bytes(), &b[..]);
                    let _ = (nqn_str(&d.subsysnqn), nqn_str(&d.hostnqn));
                }
                Err(_) => prop_assert_ne!(b.len(), CONNECT_DATA_LEN),
            }
        }

        #[test]
        fn cap_round_trip(mqes in any::<u16>(), to in any::<u8>()) {
            let cap = prop::cap(mqes, to);
            prop_assert_eq!(prop::cap_mqes(cap), mqes.max(2) as u32);
            prop_assert_eq!(prop::cap_timeout_ms(cap), to as u64 * 500);
        }
    }
}
