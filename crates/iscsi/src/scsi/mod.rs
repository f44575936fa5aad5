//! SCSI: CDB decode/encode and sense data.
pub mod cdb;
pub mod sense;
