//! Identify data structures (NVMe Base 2.0 §5.17.2; NVM Command Set 1.0 §4.1.5): controller
//! (CNS 01h, with the Fabrics fields of NVMe-oF 1.1 §4.1 and the ANA fields of §8.1),
//! namespace (CNS 00h, with NMIC and ANAGRPID), the NVM command set's controller limits
//! (CNS 06h, CSI 00h: NVM Command Set 1.0 §4.1.5.2), active
//! namespace list (CNS 02h) and namespace identification descriptors (CNS 03h). Only the fields
//! sanbench sets or reads are typed; the rest of the 4096 bytes stay zero. Each field's offset
//! is a named constant next to its encode and decode.

use super::WireError;

pub const IDENTIFY_LEN: usize = 4096;

/// CNS values.
pub mod cns {
    pub const NAMESPACE: u8 = 0x00;
    pub const CONTROLLER: u8 = 0x01;
    pub const ACTIVE_NS_LIST: u8 = 0x02;
    pub const NS_DESC_LIST: u8 = 0x03;
    /// The I/O command set specific Identify Controller of the CSI in CDW11 (NVM: 0).
    pub const IO_CTRL: u8 = 0x06;
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

fn get<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut w = [0u8; N];
    w.copy_from_slice(&b[at..at + N]);
    w
}

fn text<const N: usize>(s: &str) -> [u8; N] {
    // ASCII, space padded (§1.5: ASCII string fields).
    let mut w = [b' '; N];
    for (d, c) in w.iter_mut().zip(s.bytes().filter(u8::is_ascii)) {
        *d = c;
    }
    w
}

fn check_len(b: &[u8], what: &'static str) -> Result<(), WireError> {
    if b.len() < IDENTIFY_LEN {
        return Err(WireError::Length {
            what,
            len: b.len(),
            want: IDENTIFY_LEN,
        });
    }
    Ok(())
}

/// Controller type (CNTRLTYPE).
pub const CNTRLTYPE_IO: u8 = 1;
pub const CNTRLTYPE_DISCOVERY: u8 = 2;

/// Identify Controller, the fields sanbench uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdCtrl {
    pub vid: u16,
    pub sn: String,
    pub mn: String,
    pub fr: String,
    /// Maximum data transfer size, a power of two in 4 KiB pages (0: no limit).
    pub mdts: u8,
    /// Multi-path I/O and namespace sharing capabilities (`ana::cmic`).
    pub cmic: u8,
    pub cntlid: u16,
    pub ver: u32,
    /// Optional asynchronous events supported (bit 11: ANA change notices).
    pub oaes: u32,
    pub cntrltype: u8,
    /// Asynchronous Event Request limit, 0's based.
    pub aerl: u8,
    /// Keep-alive granularity in 100 ms units (0: keep-alive not supported).
    pub kas: u16,
    /// ANA transition time, seconds: how long a group may stay in the change state.
    pub anatt: u8,
    /// ANA capabilities (`ana::anacap`).
    pub anacap: u8,
    /// The largest ANA group id, and how many group ids the controller supports.
    pub anagrpmax: u32,
    pub nanagrpid: u32,
    pub maxcmd: u16,
    /// Number of namespaces (the largest NSID).
    pub nn: u32,
    /// Optional NVM commands: bit 2 DSM, bit 3 Write Zeroes.
    pub oncs: u16,
    /// Volatile write cache present (bit 0).
    pub vwc: u8,
    pub sgls: u32,
    /// Maximum number of allowed namespaces (Linux's host sizes the ANA log buffer from it
    /// and refuses ANA when it is 0 or above NN).
    pub mnan: u32,
    pub subnqn: String,
    /// I/O queue command capsule size in 16-byte units (SQE plus in-capsule data).
    pub ioccsz: u32,
    /// I/O queue response capsule size in 16-byte units.
    pub iorcsz: u32,
    pub icdoff: u16,
    pub msdbd: u8,
}

mod ctrl_off {
    pub const VID: usize = 0;
    pub const SN: usize = 4;
    pub const MN: usize = 24;
    pub const FR: usize = 64;
    pub const CMIC: usize = 76;
    pub const MDTS: usize = 77;
    pub const CNTLID: usize = 78;
    pub const VER: usize = 80;
    pub const OAES: usize = 92;
    pub const CNTRLTYPE: usize = 111;
    pub const AERL: usize = 259;
    pub const LPA: usize = 261;
    pub const KAS: usize = 320;
    pub const ANATT: usize = 342;
    pub const ANACAP: usize = 343;
    pub const ANAGRPMAX: usize = 344;
    pub const NANAGRPID: usize = 348;
    pub const SQES: usize = 512;
    pub const CQES: usize = 513;
    pub const MAXCMD: usize = 514;
    pub const NN: usize = 516;
    pub const ONCS: usize = 520;
    pub const VWC: usize = 525;
    pub const SGLS: usize = 536;
    pub const MNAN: usize = 540;
    pub const SUBNQN: usize = 768;
    pub const IOCCSZ: usize = 1792;
    pub const IORCSZ: usize = 1796;
    pub const ICDOFF: usize = 1800;
    pub const MSDBD: usize = 1803;
}

impl IdCtrl {
    pub fn encode(&self) -> Vec<u8> {
        use ctrl_off::*;
        let mut b = vec![0u8; IDENTIFY_LEN];
        put(&mut b, VID, &self.vid.to_le_bytes());
        put(&mut b, VID + 2, &self.vid.to_le_bytes());
        put(&mut b, SN, &text::<20>(&self.sn));
        put(&mut b, MN, &text::<40>(&self.mn));
        put(&mut b, FR, &text::<8>(&self.fr));
        b[CMIC] = self.cmic;
        b[MDTS] = self.mdts;
        put(&mut b, CNTLID, &self.cntlid.to_le_bytes());
        put(&mut b, VER, &self.ver.to_le_bytes());
        put(&mut b, OAES, &self.oaes.to_le_bytes());
        b[CNTRLTYPE] = self.cntrltype;
        b[AERL] = self.aerl;
        // LPA bit 2: extended data for Get Log Page.
        b[LPA] = 1 << 2;
        put(&mut b, KAS, &self.kas.to_le_bytes());
        b[ANATT] = self.anatt;
        b[ANACAP] = self.anacap;
        put(&mut b, ANAGRPMAX, &self.anagrpmax.to_le_bytes());
        put(&mut b, NANAGRPID, &self.nanagrpid.to_le_bytes());
        // 64-byte SQEs and 16-byte CQEs, required and maximum.
        b[SQES] = 0x66;
        b[CQES] = 0x44;
        put(&mut b, MAXCMD, &self.maxcmd.to_le_bytes());
        put(&mut b, NN, &self.nn.to_le_bytes());
        put(&mut b, ONCS, &self.oncs.to_le_bytes());
        b[VWC] = self.vwc;
        put(&mut b, SGLS, &self.sgls.to_le_bytes());
        put(&mut b, MNAN, &self.mnan.to_le_bytes());
        let n = self.subnqn.len().min(255);
        put(&mut b, SUBNQN, &self.subnqn.as_bytes()[..n]);
        put(&mut b, IOCCSZ, &self.ioccsz.to_le_bytes());
        put(&mut b, IORCSZ, &self.iorcsz.to_le_bytes());
        put(&mut b, ICDOFF, &self.icdoff.to_le_bytes());
        b[MSDBD] = self.msdbd;
        b
    }

    pub fn decode(b: &[u8]) -> Result<IdCtrl, WireError> {
        use ctrl_off::*;
        check_len(b, "Identify Controller")?;
        let s = |at: usize, n: usize| {
            String::from_utf8_lossy(&b[at..at + n])
                .trim_end_matches([' ', '\0'])
                .to_string()
        };
        let nqn = &b[SUBNQN..SUBNQN + 256];
        let nqn_end = nqn.iter().position(|&c| c == 0).unwrap_or(256);
        Ok(IdCtrl {
            vid: u16::from_le_bytes(get(b, VID)),
            sn: s(SN, 20),
            mn: s(MN, 40),
            fr: s(FR, 8),
            mdts: b[MDTS],
            cmic: b[CMIC],
            cntlid: u16::from_le_bytes(get(b, CNTLID)),
            ver: u32::from_le_bytes(get(b, VER)),
            oaes: u32::from_le_bytes(get(b, OAES)),
            cntrltype: b[CNTRLTYPE],
            aerl: b[AERL],
            kas: u16::from_le_bytes(get(b, KAS)),
            anatt: b[ANATT],
            anacap: b[ANACAP],
            anagrpmax: u32::from_le_bytes(get(b, ANAGRPMAX)),
            nanagrpid: u32::from_le_bytes(get(b, NANAGRPID)),
            maxcmd: u16::from_le_bytes(get(b, MAXCMD)),
            nn: u32::from_le_bytes(get(b, NN)),
            oncs: u16::from_le_bytes(get(b, ONCS)),
            vwc: b[VWC],
            sgls: u32::from_le_bytes(get(b, SGLS)),
            mnan: u32::from_le_bytes(get(b, MNAN)),
            subnqn: String::from_utf8_lossy(&nqn[..nqn_end]).into_owned(),
            ioccsz: u32::from_le_bytes(get(b, IOCCSZ)),
            iorcsz: u32::from_le_bytes(get(b, IORCSZ)),
            icdoff: u16::from_le_bytes(get(b, ICDOFF)),
            msdbd: b[MSDBD],
        })
    }
}

/// Identify Namespace, the fields sanbench uses: one LBA format.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdNs {
    /// Size, capacity and utilization in logical blocks.
    pub nsze: u64,
    pub ncap: u64,
    pub nuse: u64,
    /// Bit 0: thin provisioning; bit 3: NGUID/EUI64 never reused.
    pub nsfeat: u8,
    /// Logical block size as a power of two (LBAF0.LBADS).
    pub lbads: u8,
    /// Deallocated blocks read back as zeros (DLFEAT = 001b) and Write Zeroes deallocates.
    pub dlfeat: u8,
    /// Namespace multi-path I/O and sharing (bit 0: shared by several controllers).
    pub nmic: u8,
    /// The ANA group the namespace belongs to (0: none reported).
    pub anagrpid: u32,
    pub nguid: [u8; 16],
}

mod ns_off {
    pub const NSZE: usize = 0;
    pub const NCAP: usize = 8;
    pub const NUSE: usize = 16;
    pub const NSFEAT: usize = 24;
    pub const NLBAF: usize = 25;
    pub const FLBAS: usize = 26;
    pub const NMIC: usize = 30;
    pub const DLFEAT: usize = 33;
    pub const ANAGRPID: usize = 92;
    pub const NGUID: usize = 104;
    pub const LBAF0: usize = 128;
}

impl IdNs {
    pub fn block_size(&self) -> u64 {
        1u64.checked_shl(self.lbads as u32).unwrap_or(0)
    }

    pub fn encode(&self) -> Vec<u8> {
        use ns_off::*;
        let mut b = vec![0u8; IDENTIFY_LEN];
        put(&mut b, NSZE, &self.nsze.to_le_bytes());
        put(&mut b, NCAP, &self.ncap.to_le_bytes());
        put(&mut b, NUSE, &self.nuse.to_le_bytes());
        b[NSFEAT] = self.nsfeat;
        b[NLBAF] = 0;
        b[FLBAS] = 0;
        b[NMIC] = self.nmic;
        b[DLFEAT] = self.dlfeat;
        put(&mut b, ANAGRPID, &self.anagrpid.to_le_bytes());
        put(&mut b, NGUID, &self.nguid);
        b[LBAF0 + 2] = self.lbads;
        b
    }

    pub fn decode(b: &[u8]) -> Result<IdNs, WireError> {
        use ns_off::*;
        check_len(b, "Identify Namespace")?;
        // The format in use: FLBAS bits 3:0, and bits 6:5 above them when there are more
        // than 16 formats (NVMe 2.0 base spec, Identify Namespace); 64 at most.
        let f = (b[FLBAS] & 0x0f) as usize | (((b[FLBAS] >> 5) & 0x03) as usize) << 4;
        Ok(IdNs {
            nsze: u64::from_le_bytes(get(b, NSZE)),
            ncap: u64::from_le_bytes(get(b, NCAP)),
            nuse: u64::from_le_bytes(get(b, NUSE)),
            nsfeat: b[NSFEAT],
            lbads: b[LBAF0 + 4 * f + 2],
            dlfeat: b[DLFEAT],
            nmic: b[NMIC],
            anagrpid: u32::from_le_bytes(get(b, ANAGRPID)),
            nguid: get(b, NGUID),
        })
    }
}

/// Active namespace list: the NSIDs above `after`, ascending, up to 1024 of them.
pub fn encode_ns_list(nsids: &[u32], after: u32) -> Vec<u8> {
    let mut b = vec![0u8; IDENTIFY_LEN];
    for (i, id) in nsids.iter().filter(|&&n| n > after).take(1024).enumerate() {
        put(&mut b, i * 4, &id.to_le_bytes());
    }
    b
}

pub fn decode_ns_list(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .take(1024)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .take_while(|&n| n != 0)
        .collect()
}

/// Namespace identification descriptor types (NIDT).
pub mod nidt {
    pub const EUI64: u8 = 1;
    pub const NGUID: u8 = 2;
    pub const UUID: u8 = 3;
    pub const CSI: u8 = 4;
}

/// One namespace identification descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsDesc {
    pub nidt: u8,
    pub nid: Vec<u8>,
}

/// The descriptor list (CNS 03h) in a 4096-byte page.
pub fn encode_ns_descs(descs: &[NsDesc]) -> Vec<u8> {
    let mut b = Vec::with_capacity(IDENTIFY_LEN);
    for d in descs {
        let n = d.nid.len().min(255);
        if b.len() + 4 + n > IDENTIFY_LEN {
            break;
        }
        b.extend_from_slice(&[d.nidt, n as u8, 0, 0]);
        b.extend_from_slice(&d.nid[..n]);
    }
    b.resize(IDENTIFY_LEN, 0);
    b
}

/// Reads descriptors until a zero type or the end; a descriptor running past the end is an
/// error.
pub fn decode_ns_descs(b: &[u8]) -> Result<Vec<NsDesc>, WireError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= b.len() && b[at] != 0 {
        let n = b[at + 1] as usize;
        let nid = b.get(at + 4..at + 4 + n).ok_or(WireError::Length {
            what: "namespace identification descriptor",
            len: b.len() - at,
            want: 4 + n,
        })?;
        out.push(NsDesc {
            nidt: b[at],
            nid: nid.to_vec(),
        });
        at += 4 + n;
    }
    Ok(out)
}

/// The NVM command set's Identify Controller (CNS 06h, CSI 00h): the size limits of the
/// commands that move no data. Each is 0 where the controller sets no limit of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdCtrlNvm {
    /// Verify Size Limit, a power of two in minimum memory pages.
    pub vsl: u8,
    /// Write Zeroes Size Limit, a power of two in minimum memory pages.
    pub wzsl: u8,
    /// Write Uncorrectable Size Limit, a power of two in minimum memory pages.
    pub wusl: u8,
    /// Dataset Management Ranges Limit: ranges one command carries (of the 256 the command
    /// can name).
    pub dmrl: u8,
    /// Dataset Management Range Size Limit, in logical blocks.
    pub dmrsl: u32,
    /// Dataset Management Size Limit: blocks of all of one command's ranges.
    pub dmsl: u64,
}

mod nvm_off {
    pub const VSL: usize = 0;
    pub const WZSL: usize = 1;
    pub const WUSL: usize = 2;
    pub const DMRL: usize = 3;
    pub const DMRSL: usize = 4;
    pub const DMSL: usize = 8;
}

impl IdCtrlNvm {
    pub fn encode(&self) -> Vec<u8> {
        use nvm_off::*;
        let mut b = vec![0u8; IDENTIFY_LEN];
        b[VSL] = self.vsl;
        b[WZSL] = self.wzsl;
        b[WUSL] = self.wusl;
        b[DMRL] = self.dmrl;
        put(&mut b, DMRSL, &self.dmrsl.to_le_bytes());
        put(&mut b, DMSL, &self.dmsl.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<IdCtrlNvm, WireError> {
        use nvm_off::*;
        check_len(b, "Identify Controller (NVM command set)")?;
        Ok(IdCtrlNvm {
            vsl: b[VSL],
            wzsl: b[WZSL],
            wusl: b[WUSL],
            dmrl: b[DMRL],
            dmrsl: u32::from_le_bytes(get(b, DMRSL)),
            dmsl: u64::from_le_bytes(get(b, DMSL)),
        })
    }
}

#[cfg(test)]
#[path = "identify_tests.rs"]
mod tests;
