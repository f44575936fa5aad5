//! SCSI: CDB decode/encode and sense data.
pub mod cdb;
mod cdb_encode;
pub mod sense;
