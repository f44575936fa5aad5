//! `nvme-ng:/dev/ngXnY`: NVMe I/O commands through the namespace's generic character device,
//! carried by io_uring's URING_CMD (Linux 5.19+: `IORING_OP_URING_CMD` with
//! `NVME_URING_CMD_IO` on a ring of 128-byte SQEs and 32-byte CQEs). Nothing of the block
//! layer's upper half runs: no bio, no merging, no I/O scheduler, no partition remapping; the
//! request still goes through the namespace's blk-mq queue to the driver. Beside the block
//! device of the same namespace it separates the block layer's cost from the device's.
//!
//! * Geometry: `NVME_IOCTL_ID` names the namespace; Identify Namespace (admin ioctl) gives its
//!   size, block size and metadata (a format with metadata is refused: the engine moves data
//!   only), Identify Controller whether it takes Dataset Management and Write Zeroes
//!   (ONCS) and its MDTS.
//! * Commands ([`cmd`]): Read, Write (FUA), Flush, Write Zeroes (split within WZSL, from the
//!   NVM command set's Identify Controller where the controller answers it, else within
//!   MDTS as Linux's driver does), and trims as Dataset Management deallocate: the trims of
//!   one submit in one command, a range each, within 256 ranges, DMRL, DMRSL and DMSL
//!   ([`queue`]). Data by user address: not a fixed buffer (`IORING_URING_CMD_FIXED`),
//!   which Linux 6.1 maps wrongly for large arenas (see `NgQueue::open`).
//! * One command moves at most what the block device's queue takes unsplit
//!   (`sysfs::max_command_bytes`: max_hw_sectors_kb and max_segments), and MDTS.
//! * The block device behind the namespace ([`sysfs`]) is named in the target's parameters
//!   (`block_device`), for the safety check before writes and the manifest's transport label.

pub mod cmd;
mod queue;
pub mod sysfs;

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;

use sanbench_io::engine::{Op, Queue, QueueConfig, Target, TargetInfo};
use sanbench_io::EngineError;

use crate::wire::identify::{cns, IdCtrlNvm, IDENTIFY_LEN};
use cmd::{Geometry, Offers, PassthruCmd};
use queue::NgQueue;

/// The target's `kind` parameter.
pub const KIND: &str = "nvme passthrough";

/// An opened namespace generic device.
pub struct NgTarget {
    info: TargetInfo,
    file: Arc<File>,
    nsid: u32,
    geo: Geometry,
    offers: Offers,
}

/// Issues one admin command through the ioctl; `Err` carries the errno or the NVMe status.
fn admin(f: &File, c: &mut PassthruCmd) -> Result<(), String> {
    // SAFETY: NVME_IOCTL_ADMIN_CMD reads and writes one `struct nvme_passthru_cmd`, which
    // PassthruCmd is (layout asserted in cmd.rs); its `addr` points to a buffer of
    // `data_len` bytes the caller keeps alive across the call.
    let r = unsafe {
        libc::ioctl(
            f.as_raw_fd(),
            cmd::NVME_IOCTL_ADMIN_CMD as _,
            c as *mut PassthruCmd,
        )
    };
    match r {
        0 => Ok(()),
        r if r > 0 => Err(match cmd::completion_status(r) {
            Some(s) => format!("NVMe status {s}"),
            None => format!("status {r}"),
        }),
        _ => Err(std::io::Error::last_os_error().to_string()),
    }
}

fn identify(f: &File, cns: u8, nsid: u32) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; IDENTIFY_LEN];
    let mut c = cmd::identify_cmd(cns, nsid, buf.as_mut_ptr() as u64);
    admin(f, &mut c)?;
    Ok(buf)
}

impl NgTarget {
    /// Opens `path` (read-write when the workload writes). Bad input (not an NVMe generic
    /// device, a namespace the engine cannot drive) is `Invalid`, so the CLI exits 2.
    pub fn open(uri: &str, path: &Path, writes: bool) -> Result<NgTarget, EngineError> {
        let shown = path.display().to_string();
        let file = sanbench_io::chardev::open(
            path,
            writes,
            "nvme-ng: takes a namespace's generic device, /dev/ngXnY",
        )?;
        // SAFETY: NVME_IOCTL_ID takes no argument and returns the namespace id.
        let nsid = unsafe { libc::ioctl(file.as_raw_fd(), cmd::NVME_IOCTL_ID as _) };
        if nsid <= 0 {
            return Err(EngineError::Invalid(format!(
                "{shown}: not an NVMe namespace device (NVME_IOCTL_ID: {})",
                std::io::Error::last_os_error()
            )));
        }
        let nsid = nsid as u32;
        let ask = |c: u8, n: u32, what: &str| {
            identify(&file, c, n)
                .map_err(|e| EngineError::Invalid(format!("{shown}: Identify {what} failed: {e}")))
        };
        let geo = Geometry::decode(&ask(cns::NAMESPACE, nsid, "Namespace")?).ok_or_else(|| {
            EngineError::Invalid(format!(
                "{shown}: namespace {nsid} reports no usable format (inactive?)"
            ))
        })?;
        if geo.ms != 0 {
            return Err(EngineError::Invalid(format!(
                "{shown}: the namespace's format carries {} bytes of metadata per block; \
                 nvme-ng: moves data only (format it without metadata, or use its block device)",
                geo.ms
            )));
        }
        let mut offers =
            Offers::decode(&ask(cns::CONTROLLER, 0, "Controller")?).unwrap_or_default();
        // NVMe 2.0's limits of Write Zeroes and DSM; a controller before it fails the
        // command (Invalid Field), and then MDTS and the commands' own fields bound them.
        offers.nvm = identify(&file, cns::IO_CTRL, 0)
            .ok()
            .and_then(|b| IdCtrlNvm::decode(&b).ok());
        let block = sysfs::block_device_of(Path::new("/"), path, nsid);
        let mut max_transfer = offers.max_transfer();
        if let Some(hw) = block.as_ref().and_then(|b| b.max_hw_bytes) {
            max_transfer = Some(max_transfer.map_or(hw, |m| m.min(hw)));
        }
        let mut params: BTreeMap<String, serde_json::Value> = BTreeMap::new();
        params.insert("path".into(), shown.clone().into());
        params.insert("kind".into(), KIND.into());
        params.insert("nsid".into(), nsid.into());
        params.insert("lba_size".into(), geo.block_size().into());
        params.insert("lba_count".into(), geo.blocks.into());
        params.insert(
            "trim_by".into(),
            if offers.dsm {
                "Dataset Management (deallocate; a submit's trims in one command)"
            } else {
                "none"
            }
            .into(),
        );
        params.insert(
            "write_zeroes_max_blocks".into(),
            offers.write_zeroes_blocks(geo.lbads).into(),
        );
        params.insert("dsm_max_ranges".into(), offers.dsm_ranges().into());
        if let Some(n) = offers.nvm {
            params.insert("identify_nvm.wzsl".into(), n.wzsl.into());
            params.insert("identify_nvm.dmrl".into(), n.dmrl.into());
            params.insert("identify_nvm.dmrsl".into(), n.dmrsl.into());
            params.insert("identify_nvm.dmsl".into(), n.dmsl.into());
        }
        params.insert(
            "write_zeroes_by".into(),
            if offers.write_zeroes {
                "Write Zeroes"
            } else {
                "none"
            }
            .into(),
        );
        params.insert(
            sanbench_io::params::TRIM_READS_ZEROS.into(),
            (offers.dsm && geo.dealloc_reads_zeros).into(),
        );
        match &block {
            Some(b) => {
                params.insert("block_device".into(), b.dev.clone().into());
            }
            None => {
                params.insert(
                    "block_device_note".into(),
                    "no block device of this namespace found in sysfs".into(),
                );
            }
        }
        Ok(NgTarget {
            info: TargetInfo {
                uri: uri.to_string(),
                engine: "nvme-ng".into(),
                size: geo.blocks << geo.lbads,
                block_size: geo.block_size(),
                max_transfer,
                read_only: !writes,
                params,
            },
            file: Arc::new(file),
            nsid,
            geo,
            offers,
        })
    }
}

impl Target for NgTarget {
    fn info(&self) -> &TargetInfo {
        &self.info
    }

    fn supports(&self, op: Op) -> bool {
        match op {
            Op::Trim => self.offers.dsm,
            Op::WriteZeroes => self.offers.write_zeroes,
            _ => true,
        }
    }

    fn open_queue(&self, cfg: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
        Ok(Box::new(NgQueue::open(self, cfg)?))
    }
}
