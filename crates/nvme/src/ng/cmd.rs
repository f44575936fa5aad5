//! The kernel's NVMe passthrough interface as values, apart from the ring that carries them:
//! `struct nvme_uring_cmd` / `struct nvme_passthru_cmd` (include/uapi/linux/nvme_ioctl.h, the
//! same 72 bytes but for the last word), the ioctl and URING_CMD numbers, the I/O commands
//! sanbench sends (NVM Command Set 1.0 §3: Read 02h, Write 01h, Flush 00h, Write Zeroes 08h,
//! Dataset Management 09h), what a namespace's Identify data says about its geometry, and how
//! a completion's result becomes the engine's errno.

use crate::wire::cmd::{admin, io};
use crate::wire::cmd::{DsmRange, DSM_RANGE_LEN};
use crate::wire::identify::{IdCtrl, IdCtrlNvm, IDENTIFY_LEN};
use crate::wire::status::Status;
use sanbench_io::{Op, PATH_ERROR};

/// `struct nvme_uring_cmd` (the first 72 of URING_CMD's 80 command bytes) and, with `rsvd2`
/// read as `result`, `struct nvme_passthru_cmd` of the ioctls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PassthruCmd {
    pub opcode: u8,
    pub flags: u8,
    pub rsvd1: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    pub metadata: u64,
    pub addr: u64,
    pub metadata_len: u32,
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    pub timeout_ms: u32,
    /// `rsvd2` in `nvme_uring_cmd`; the completion's DW0 in `nvme_passthru_cmd`.
    pub result: u32,
}

pub const PASSTHRU_CMD_LEN: usize = 72;

const _: () = {
    assert!(core::mem::size_of::<PassthruCmd>() == PASSTHRU_CMD_LEN);
    assert!(core::mem::offset_of!(PassthruCmd, addr) == 24);
    assert!(core::mem::offset_of!(PassthruCmd, data_len) == 36);
    assert!(core::mem::offset_of!(PassthruCmd, cdw10) == 40);
    assert!(core::mem::offset_of!(PassthruCmd, timeout_ms) == 64);
};

/// `_IOC(dir, 'N', nr, size)` as asm-generic/ioctl.h composes it.
const fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
    dir << 30 | size << 16 | (b'N' as u32) << 8 | nr
}

/// `NVME_IOCTL_ID`: `_IO('N', 0x40)`, the namespace id behind the file.
pub const NVME_IOCTL_ID: u32 = ioc(0, 0x40, 0);
/// `NVME_IOCTL_ADMIN_CMD`: `_IOWR('N', 0x41, struct nvme_admin_cmd)`.
pub const NVME_IOCTL_ADMIN_CMD: u32 = ioc(3, 0x41, PASSTHRU_CMD_LEN as u32);
/// `NVME_URING_CMD_IO`: `_IOWR('N', 0x80, struct nvme_uring_cmd)`, URING_CMD's `cmd_op`.
pub const NVME_URING_CMD_IO: u32 = ioc(3, 0x80, PASSTHRU_CMD_LEN as u32);

impl PassthruCmd {
    /// The command as URING_CMD's 80 command bytes (native endianness, as the kernel reads
    /// the struct).
    pub fn to_uring_bytes(&self) -> [u8; 80] {
        let mut b = [0u8; 80];
        let mut at = 0;
        let mut put = |v: &[u8]| {
            b[at..at + v.len()].copy_from_slice(v);
            at += v.len();
        };
        put(&[self.opcode, self.flags]);
        put(&self.rsvd1.to_ne_bytes());
        for w in [self.nsid, self.cdw2, self.cdw3] {
            put(&w.to_ne_bytes());
        }
        put(&self.metadata.to_ne_bytes());
        put(&self.addr.to_ne_bytes());
        for w in [
            self.metadata_len,
            self.data_len,
            self.cdw10,
            self.cdw11,
            self.cdw12,
            self.cdw13,
            self.cdw14,
            self.cdw15,
            self.timeout_ms,
            self.result,
        ] {
            put(&w.to_ne_bytes());
        }
        b
    }
}

/// Blocks one Read, Write or Write Zeroes names at most (NLB is a 16-bit 0's based field).
pub const MAX_NLB: u64 = 1 << 16;

/// Dataset Management's Attribute - Deallocate (cdw11 bit 2).
const DSM_AD: u32 = 1 << 2;
/// Force Unit Access (cdw12 bit 30) of a Read or Write.
const FUA: u32 = 1 << 30;

/// Why an I/O cannot become one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// Offset or length not whole blocks.
    Unaligned,
    /// More blocks than one command names.
    TooLong,
}

impl BuildError {
    pub fn errno(self) -> i32 {
        -libc::EINVAL
    }
}

/// The NVMe command for one of the engine's I/Os on namespace `nsid` of `lbads` (block size
/// 2^lbads). `addr`: the data's address (Read, Write) or the one DSM range's (Trim); the
/// caller fills the range with [`dsm_range`].
pub fn io_cmd(
    op: Op,
    nsid: u32,
    lbads: u8,
    offset: u64,
    len: u32,
    fua: bool,
    addr: u64,
) -> Result<PassthruCmd, BuildError> {
    let mask = (1u64 << lbads) - 1;
    if offset & mask != 0 || u64::from(len) & mask != 0 {
        return Err(BuildError::Unaligned);
    }
    let slba = offset >> lbads;
    let nlb = u64::from(len) >> lbads;
    let mut c = PassthruCmd {
        nsid,
        ..PassthruCmd::default()
    };
    let rw = |c: &mut PassthruCmd, opcode: u8| -> Result<(), BuildError> {
        if nlb == 0 || nlb > MAX_NLB {
            return Err(BuildError::TooLong);
        }
        c.opcode = opcode;
        c.cdw10 = slba as u32;
        c.cdw11 = (slba >> 32) as u32;
        c.cdw12 = (nlb - 1) as u32;
        Ok(())
    };
    match op {
        Op::Read | Op::Write => {
            rw(&mut c, if op == Op::Read { io::READ } else { io::WRITE })?;
            if fua && op == Op::Write {
                c.cdw12 |= FUA;
            }
            c.addr = addr;
            c.data_len = len;
        }
        Op::WriteZeroes => rw(&mut c, io::WRITE_ZEROES)?,
        Op::Flush => c.opcode = io::FLUSH,
        Op::Trim => {
            if nlb == 0 || nlb > u64::from(u32::MAX) {
                return Err(BuildError::TooLong);
            }
            c.opcode = io::DSM;
            // NR is 0's based: one range.
            c.cdw10 = 0;
            c.cdw11 = DSM_AD;
            c.addr = addr;
            c.data_len = DSM_RANGE_LEN as u32;
        }
    }
    Ok(c)
}

/// The DSM range of a trim of `len` bytes at `offset` (checked whole by [`io_cmd`]).
pub fn dsm_range(lbads: u8, offset: u64, len: u32) -> DsmRange {
    DsmRange::new(offset >> lbads, len >> lbads)
}

/// Ranges one Dataset Management command names at most (NR is an 8-bit 0's based field).
pub const MAX_DSM_RANGES: usize = 256;

/// A Dataset Management deallocate of `n` ranges (1..=256) at `addr`.
pub fn dsm_cmd(nsid: u32, n: usize, addr: u64) -> PassthruCmd {
    debug_assert!((1..=MAX_DSM_RANGES).contains(&n));
    PassthruCmd {
        opcode: io::DSM,
        nsid,
        addr,
        data_len: (n * DSM_RANGE_LEN) as u32,
        cdw10: (n.clamp(1, MAX_DSM_RANGES) - 1) as u32,
        cdw11: DSM_AD,
        ..PassthruCmd::default()
    }
}

/// Identify (CNS `cns`) of `nsid` into a 4 KiB buffer at `addr`, for the admin ioctl.
pub fn identify_cmd(cns: u8, nsid: u32, addr: u64) -> PassthruCmd {
    PassthruCmd {
        opcode: admin::IDENTIFY,
        nsid,
        addr,
        data_len: IDENTIFY_LEN as u32,
        cdw10: u32::from(cns),
        ..PassthruCmd::default()
    }
}

/// A namespace's geometry as the engine needs it, from Identify Namespace (NVM Command Set
/// 1.0 §4.1.5.1): the format in use and its metadata, which a data-only engine must refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub blocks: u64,
    pub lbads: u8,
    /// Metadata bytes per block of the format in use.
    pub ms: u16,
    /// DLFEAT bits 2:0 = 001b: a deallocated block reads back as zeros.
    pub dealloc_reads_zeros: bool,
}

impl Geometry {
    /// From the 4096 bytes of Identify Namespace; `None` for a page that names no usable
    /// format (an inactive namespace reads as zeros).
    pub fn decode(b: &[u8]) -> Option<Geometry> {
        if b.len() < IDENTIFY_LEN {
            return None;
        }
        let f = (b[26] & 0x0f) as usize | (((b[26] >> 5) & 0x03) as usize) << 4;
        let lbaf = 128 + 4 * f;
        let lbads = b[lbaf + 2];
        let blocks = u64::from_le_bytes(b[0..8].try_into().ok()?);
        if !(9..=16).contains(&lbads) || blocks == 0 {
            return None;
        }
        Some(Geometry {
            blocks,
            lbads,
            ms: u16::from_le_bytes([b[lbaf], b[lbaf + 1]]),
            dealloc_reads_zeros: b[33] & 0x07 == 0x01,
        })
    }

    pub fn block_size(&self) -> u32 {
        1 << self.lbads
    }
}

/// What the controller offers the engine, from Identify Controller: Dataset Management and
/// Write Zeroes (ONCS bits 2 and 3), and MDTS; and from the NVM command set's Identify
/// Controller where it answers (NVMe 2.0), the limits of Write Zeroes and DSM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offers {
    pub dsm: bool,
    pub write_zeroes: bool,
    /// Largest transfer in units of the minimum memory page (2^MDTS pages; 0: no limit).
    pub mdts: u8,
    /// CNS 06h's limits (`None`: the controller did not answer it).
    pub nvm: Option<IdCtrlNvm>,
}

impl Offers {
    pub fn decode(b: &[u8]) -> Option<Offers> {
        let c = IdCtrl::decode(b).ok()?;
        Some(Offers {
            dsm: c.oncs & (1 << 2) != 0,
            write_zeroes: c.oncs & (1 << 3) != 0,
            mdts: c.mdts,
            nvm: None,
        })
    }

    /// Blocks of `2^lbads` bytes one Write Zeroes names at most: WZSL where the controller
    /// sets it, else MDTS as Linux's driver takes it (some controllers fail a Write Zeroes
    /// longer than a transfer), within NLB's 65536.
    pub fn write_zeroes_blocks(&self, lbads: u8) -> u64 {
        let pages = match self.nvm.map_or(0, |n| n.wzsl) {
            0 => self.mdts,
            w => w,
        };
        if pages == 0 {
            return MAX_NLB;
        }
        ((4096u64 << pages.min(40)) >> lbads).clamp(1, MAX_NLB)
    }

    /// Ranges one DSM carries: DMRL where set, else 256.
    pub fn dsm_ranges(&self) -> usize {
        match self.nvm.map_or(0, |n| n.dmrl) {
            0 => MAX_DSM_RANGES,
            n => usize::from(n),
        }
    }

    /// Blocks one DSM range names at most: DMRSL where set, else NLB's 32 bits.
    pub fn dsm_range_blocks(&self) -> u64 {
        match self.nvm.map_or(0, |n| n.dmrsl) {
            0 => u64::from(u32::MAX),
            n => u64::from(n),
        }
    }

    /// Blocks of all one DSM's ranges: DMSL where set.
    pub fn dsm_blocks(&self) -> u64 {
        match self.nvm.map_or(0, |n| n.dmsl) {
            0 => u64::MAX,
            n => n,
        }
    }

    /// MDTS in bytes, taking the 4 KiB minimum page every PCIe controller has (CAP.MPSMIN is
    /// not readable through the namespace's device).
    pub fn max_transfer(&self) -> Option<u32> {
        (self.mdts != 0).then(|| (4096u64 << self.mdts.min(19)).min(u64::from(u32::MAX)) as u32)
    }
}

/// A URING_CMD completion's result as the engine's: 0, or a negative errno. The kernel
/// returns a negative errno when it did not carry the command out and the NVMe status
/// (`cqe.status >> 1`: SC, SCT, CRD, More, DNR) when the controller failed it.
pub fn completion_errno(res: i32) -> i32 {
    if res <= 0 {
        return res;
    }
    let st = Status::from_field((res as u16) << 1);
    match (st.sct(), st.sc()) {
        (3, _) => PATH_ERROR,
        (0, 0x01) => -libc::EOPNOTSUPP,
        (0, 0x80) => -libc::ERANGE,
        (0, 0x81) => -libc::ENOSPC,
        _ => -libc::EIO,
    }
}

/// The NVMe status of a failed completion, for messages (`None` when the kernel failed it).
pub fn completion_status(res: i32) -> Option<Status> {
    (res > 0).then(|| Status::from_field((res as u16) << 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_are_the_kernels() {
        // As printed by a C program including <linux/nvme_ioctl.h>.
        assert_eq!(NVME_IOCTL_ID, 0x4e40);
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xc048_4e41);
        assert_eq!(NVME_URING_CMD_IO, 0xc048_4e80);
    }

    #[test]
    fn reads_writes_and_zeroes_name_their_blocks() {
        let c = io_cmd(Op::Read, 1, 12, 8 << 12, 4 << 12, false, 0x1000).unwrap();
        assert_eq!(
            (c.opcode, c.nsid, c.cdw10, c.cdw11, c.cdw12),
            (2, 1, 8, 0, 3)
        );
        assert_eq!((c.addr, c.data_len), (0x1000, 16384));
        let c = io_cmd(Op::Write, 7, 9, (1 << 40) + 512, 512, true, 0x2000).unwrap();
        let slba = ((1u64 << 40) + 512) >> 9;
        assert_eq!((c.opcode, c.nsid), (1, 7));
        assert_eq!(u64::from(c.cdw11) << 32 | u64::from(c.cdw10), slba);
        assert_eq!(c.cdw12, FUA, "one block, FUA");
        let c = io_cmd(Op::WriteZeroes, 1, 9, 4096, 65536 * 512, false, 0).unwrap();
        assert_eq!(
            (c.opcode, c.cdw10, c.cdw12, c.data_len, c.addr),
            (8, 8, 65535, 0, 0)
        );
        assert_eq!(
            io_cmd(Op::WriteZeroes, 1, 9, 0, 65537 * 512, false, 0),
            Err(BuildError::TooLong)
        );
        assert_eq!(
            io_cmd(Op::Read, 1, 12, 512, 4096, false, 0),
            Err(BuildError::Unaligned)
        );
        assert_eq!(
            io_cmd(Op::Read, 1, 12, 0, 0, false, 0),
            Err(BuildError::TooLong)
        );
        assert_eq!(io_cmd(Op::Flush, 3, 9, 0, 0, false, 0).unwrap().opcode, 0);
    }

    #[test]
    fn a_trim_is_one_deallocate_range() {
        let c = io_cmd(Op::Trim, 1, 12, 3 << 12, 1 << 20, false, 0xabc0).unwrap();
        assert_eq!((c.opcode, c.cdw10, c.cdw11), (9, 0, DSM_AD));
        assert_eq!((c.addr, c.data_len), (0xabc0, 16));
        let r = dsm_range(12, 3 << 12, 1 << 20);
        assert_eq!((r.slba.get(), r.nlb.get()), (3, 256));
    }

    #[test]
    fn uring_bytes_follow_the_struct() {
        let c = io_cmd(Op::Write, 0x0102_0304, 9, 512 * 5, 1024, false, 0x1122).unwrap();
        let b = c.to_uring_bytes();
        assert_eq!(b[0], 1);
        assert_eq!(u32::from_ne_bytes(b[4..8].try_into().unwrap()), 0x0102_0304);
        assert_eq!(u64::from_ne_bytes(b[24..32].try_into().unwrap()), 0x1122);
        assert_eq!(u32::from_ne_bytes(b[36..40].try_into().unwrap()), 1024);
        assert_eq!(u32::from_ne_bytes(b[40..44].try_into().unwrap()), 5);
        assert_eq!(u32::from_ne_bytes(b[48..52].try_into().unwrap()), 1);
        assert!(b[72..].iter().all(|&x| x == 0));
    }

    #[test]
    fn geometry_from_identify_namespace() {
        let mut b = vec![0u8; IDENTIFY_LEN];
        b[0..8].copy_from_slice(&2048u64.to_le_bytes());
        // Two formats; the second (512 + 8 bytes of metadata) in use.
        b[25] = 1;
        b[26] = 1;
        b[128 + 2] = 12;
        b[132] = 8;
        b[132 + 2] = 9;
        b[33] = 0x09;
        let g = Geometry::decode(&b).unwrap();
        assert_eq!(
            g,
            Geometry {
                blocks: 2048,
                lbads: 9,
                ms: 8,
                dealloc_reads_zeros: true
            }
        );
        b[26] = 0;
        b[33] = 0x02;
        let g = Geometry::decode(&b).unwrap();
        assert_eq!(
            (g.block_size(), g.ms, g.dealloc_reads_zeros),
            (4096, 0, false)
        );
        // An inactive namespace: all zeros.
        assert_eq!(Geometry::decode(&[0u8; IDENTIFY_LEN]), None);
        assert_eq!(Geometry::decode(&b[..100]), None);
    }

    #[test]
    fn controller_offers() {
        let c = IdCtrl {
            oncs: 1 << 2 | 1 << 3,
            mdts: 5,
            ..IdCtrl::default()
        };
        let o = Offers::decode(&c.encode()).unwrap();
        assert!(o.dsm && o.write_zeroes);
        assert_eq!(o.max_transfer(), Some(128 * 1024));
        let o = Offers::decode(
            &IdCtrl {
                oncs: 1 << 3,
                ..IdCtrl::default()
            }
            .encode(),
        )
        .unwrap();
        assert!(!o.dsm && o.write_zeroes && o.max_transfer().is_none());
    }

    #[test]
    fn write_zeroes_and_dsm_limits() {
        let mut o = Offers {
            dsm: true,
            write_zeroes: true,
            mdts: 5,
            nvm: None,
        };
        // No CNS 06h: MDTS (128 KiB), in 512-byte blocks.
        assert_eq!(o.write_zeroes_blocks(9), 256);
        assert_eq!((o.dsm_ranges(), o.dsm_range_blocks()), (256, 0xffff_ffff));
        // WZSL of 2^8 pages (1 MiB) where the controller sets it.
        o.nvm = Some(IdCtrlNvm {
            wzsl: 8,
            dmrl: 16,
            dmrsl: 1000,
            dmsl: 5000,
            ..IdCtrlNvm::default()
        });
        assert_eq!(o.write_zeroes_blocks(9), 2048);
        assert_eq!(o.write_zeroes_blocks(12), 256);
        assert_eq!(
            (o.dsm_ranges(), o.dsm_range_blocks(), o.dsm_blocks()),
            (16, 1000, 5000)
        );
        // Within NLB, and at least a block.
        o.nvm = Some(IdCtrlNvm {
            wzsl: 30,
            ..IdCtrlNvm::default()
        });
        assert_eq!(o.write_zeroes_blocks(9), MAX_NLB);
        o.mdts = 0;
        o.nvm = None;
        assert_eq!(o.write_zeroes_blocks(12), MAX_NLB);
        let c = dsm_cmd(3, 256, 0x1000);
        assert_eq!(
            (c.opcode, c.cdw10, c.cdw11, c.data_len),
            (9, 255, DSM_AD, 4096)
        );
    }

    #[test]
    fn completions_become_errnos() {
        assert_eq!(completion_errno(0), 0);
        assert_eq!(completion_errno(-libc::EINVAL), -libc::EINVAL);
        // LBA out of range, DNR set (status field >> 1: DNR is bit 14).
        let res = 0x080 | 1 << 14;
        assert_eq!(completion_errno(res), -libc::ERANGE);
        assert_eq!(
            completion_status(res).unwrap().to_string(),
            "LBA out of range (sct 0x0 sc 0x80)"
        );
        assert_eq!(completion_errno(0x001), -libc::EOPNOTSUPP);
        assert_eq!(completion_errno(0x302), PATH_ERROR);
        assert_eq!(completion_errno(0x281), -libc::EIO);
        assert_eq!(completion_status(-5), None);
    }
}
