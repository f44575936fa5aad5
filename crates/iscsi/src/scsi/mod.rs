//! SCSI: CDB decode/encode, sense data, GET LBA STATUS parameter data, the
//! provisioning VPD pages.
pub mod cdb;
mod cdb_encode;
pub mod lba_status;
pub mod sense;
pub mod unmap;
pub mod vpd;
