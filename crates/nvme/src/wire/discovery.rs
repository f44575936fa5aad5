//! The discovery log page (Get Log Page 70h; NVMe over Fabrics 1.1 §5.3, figures 32 and 33):
//! a 1024-byte header (generation counter, number of records, record format) followed by one
//! 1024-byte entry per record: transport type, address family, subsystem type, port id,
//! transport service id (the TCP port, as text), subsystem NQN and transport address (text).
//! The target builds the page with [`encode`]; a host lists it with [`decode`], which takes
//! untrusted bytes and never panics: a page shorter than NUMREC entries yields the whole
//! entries it holds.

use std::mem::{offset_of, size_of};

use zerocopy::little_endian::{U16, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::WireError;

/// Log page identifier of the discovery log.
pub const LID: u8 = 0x70;
/// Transport type: TCP.
pub const TRTYPE_TCP: u8 = 3;
/// Address families.
pub const ADRFAM_IPV4: u8 = 1;
pub const ADRFAM_IPV6: u8 = 2;
/// Subsystem types.
pub const SUBTYPE_REFERRAL: u8 = 1;
pub const SUBTYPE_NVM: u8 = 2;
pub const SUBTYPE_CURRENT_DISCOVERY: u8 = 3;

/// Discovery log page header, 1024 bytes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct Header {
    pub genctr: U64,
    pub numrec: U64,
    pub recfmt: U16,
    pub rsvd: [u8; 1006],
}

/// Discovery log page entry, 1024 bytes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct Entry {
    pub trtype: u8,
    pub adrfam: u8,
    pub subtype: u8,
    pub treq: u8,
    pub portid: U16,
    pub cntlid: U16,
    pub asqsz: U16,
    pub eflags: U16,
    pub rsvd12: [u8; 20],
    pub trsvcid: [u8; 32],
    pub rsvd64: [u8; 192],
    pub subnqn: [u8; 256],
    pub traddr: [u8; 256],
    pub tsas: [u8; 256],
}

pub const HEADER_LEN: usize = 1024;
pub const ENTRY_LEN: usize = 1024;

const _: () = {
    assert!(size_of::<Header>() == HEADER_LEN);
    assert!(offset_of!(Header, numrec) == 8 && offset_of!(Header, recfmt) == 16);
    assert!(size_of::<Entry>() == ENTRY_LEN);
    assert!(offset_of!(Entry, portid) == 4 && offset_of!(Entry, cntlid) == 6);
    assert!(offset_of!(Entry, asqsz) == 8 && offset_of!(Entry, eflags) == 10);
    assert!(offset_of!(Entry, trsvcid) == 32 && offset_of!(Entry, subnqn) == 256);
    assert!(offset_of!(Entry, traddr) == 512 && offset_of!(Entry, tsas) == 768);
};

/// One discovery log record, as a host lists it and a target describes itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub trtype: u8,
    pub adrfam: u8,
    pub subtype: u8,
    pub portid: u16,
    pub cntlid: u16,
    pub asqsz: u16,
    pub trsvcid: String,
    pub subnqn: String,
    pub traddr: String,
}

impl Record {
    pub fn trtype_name(&self) -> &'static str {
        match self.trtype {
            1 => "rdma",
            2 => "fc",
            TRTYPE_TCP => "tcp",
            254 => "loop",
            _ => "unknown",
        }
    }

    pub fn adrfam_name(&self) -> &'static str {
        match self.adrfam {
            ADRFAM_IPV4 => "ipv4",
            ADRFAM_IPV6 => "ipv6",
            3 => "ib",
            4 => "fc",
            254 => "loop",
            _ => "unknown",
        }
    }

    pub fn subtype_name(&self) -> &'static str {
        match self.subtype {
            SUBTYPE_REFERRAL => "referral",
            SUBTYPE_NVM => "nvm subsystem",
            SUBTYPE_CURRENT_DISCOVERY => "current discovery subsystem",
            _ => "unknown",
        }
    }

    fn entry(&self) -> Entry {
        let mut e = Entry::new_zeroed();
        e.trtype = self.trtype;
        e.adrfam = self.adrfam;
        e.subtype = self.subtype;
        e.portid.set(self.portid);
        e.cntlid.set(self.cntlid);
        e.asqsz.set(self.asqsz);
        put_text(&mut e.trsvcid, &self.trsvcid);
        put_text(&mut e.subnqn, &self.subnqn);
        put_text(&mut e.traddr, &self.traddr);
        e
    }

    fn from_entry(e: &Entry) -> Record {
        Record {
            trtype: e.trtype,
            adrfam: e.adrfam,
            subtype: e.subtype,
            portid: e.portid.get(),
            cntlid: e.cntlid.get(),
            asqsz: e.asqsz.get(),
            trsvcid: text(&e.trsvcid),
            subnqn: text(&e.subnqn),
            traddr: text(&e.traddr),
        }
    }
}

/// Writes `s` NUL-padded (as Linux's nvmet does), cut to the field's length less one.
fn put_text(field: &mut [u8], s: &str) {
    let n = s.len().min(field.len() - 1);
    field[..n].copy_from_slice(&s.as_bytes()[..n]);
}

/// A text field up to its first NUL, trailing spaces removed (the spec pads some fields with
/// spaces, Linux with NULs); bytes that are not UTF-8 are replaced, never trusted.
fn text(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end])
        .trim_end_matches(' ')
        .to_string()
}

/// A whole discovery log page for `records`.
pub fn encode(genctr: u64, records: &[Record]) -> Vec<u8> {
    let mut h = Header::new_zeroed();
    h.genctr.set(genctr);
    h.numrec.set(records.len() as u64);
    let mut out = h.as_bytes().to_vec();
    for r in records {
        out.extend_from_slice(r.entry().as_bytes());
    }
    out
}

/// The header's (generation counter, number of records) of a page of at least 1024 bytes.
pub fn decode_header(page: &[u8]) -> Result<(u64, u64), WireError> {
    let (h, _) = Header::read_from_prefix(page).map_err(|_| WireError::Length {
        what: "discovery log header",
        len: page.len(),
        want: HEADER_LEN,
    })?;
    Ok((h.genctr.get(), h.numrec.get()))
}

/// The generation counter and the records of a page: at most NUMREC, and only the whole
/// entries `page` holds.
pub fn decode(page: &[u8]) -> Result<(u64, Vec<Record>), WireError> {
    let (genctr, numrec) = decode_header(page)?;
    let n = usize::try_from(numrec).unwrap_or(usize::MAX);
    let recs = page[HEADER_LEN..]
        .chunks_exact(ENTRY_LEN)
        .take(n)
        .filter_map(|c| Entry::ref_from_bytes(c).ok())
        .map(Record::from_entry)
        .collect();
    Ok((genctr, recs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(nqn: &str) -> Record {
        Record {
            trtype: TRTYPE_TCP,
            adrfam: ADRFAM_IPV4,
            subtype: SUBTYPE_NVM,
            portid: 1,
            cntlid: 0xffff,
            asqsz: 32,
            trsvcid: "4420".into(),
            subnqn: nqn.into(),
            traddr: "127.0.0.1".into(),
        }
    }

    #[test]
    fn round_trip_and_short_pages() {
        let page = encode(5, &[rec("nqn.a"), rec("nqn.b")]);
        assert_eq!(page.len(), 3 * 1024);
        let (g, r) = decode(&page).unwrap();
        assert_eq!((g, r), (5, vec![rec("nqn.a"), rec("nqn.b")]));
        // A page cut inside the second entry holds one record.
        assert_eq!(decode(&page[..2500]).unwrap().1.len(), 1);
        assert!(decode(&page[..1000]).is_err());
        assert_eq!(decode_header(&page).unwrap(), (5, 2));
    }

    #[test]
    fn space_padded_fields() {
        let mut page = encode(1, &[rec("nqn.a")]);
        page[1024 + 32 + 4..1024 + 64].fill(b' ');
        assert_eq!(decode(&page).unwrap().1[0].trsvcid, "4420");
    }

    proptest! {
        #[test]
        fn decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..4200)) {
            let _ = decode(&b);
        }

        #[test]
        fn round_trips(nqn in "[a-z0-9.:-]{1,223}", port in 0u16.., sub in 1u8..4) {
            let mut r = rec(&nqn);
            r.portid = port;
            r.subtype = sub;
            prop_assert_eq!(decode(&encode(7, &[r.clone()])).unwrap(), (7, vec![r]));
        }
    }
}
