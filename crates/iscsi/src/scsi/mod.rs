//! SCSI: CDB decode/encode, sense data, GET LBA STATUS parameter data.
pub mod cdb;
mod cdb_encode;
pub mod lba_status;
pub mod sense;
