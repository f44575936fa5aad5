//! SCSI-3 Persistent Reservations (SPC-4 §5.13, PERSISTENT RESERVE IN/OUT §6.16–6.17).
//!
//! Registrations are keyed by I_T nexus name (`initiator,i,0x<ISID>`), so they survive
//! logout as the standard requires. Reservation types: see [`pr_type`].

use crate::scsi::sense::Sense;

/// Persistent reservation types (SPC-4 §6.16.3.4, Table 172).
pub mod pr_type {
    pub const WRITE_EXCLUSIVE: u8 = 1;
    pub const EXCLUSIVE_ACCESS: u8 = 3;
    pub const WRITE_EXCLUSIVE_REGISTRANTS_ONLY: u8 = 5;
    pub const EXCLUSIVE_ACCESS_REGISTRANTS_ONLY: u8 = 6;
    pub const WRITE_EXCLUSIVE_ALL_REGISTRANTS: u8 = 7;
    pub const EXCLUSIVE_ACCESS_ALL_REGISTRANTS: u8 = 8;
}

/// PERSISTENT RESERVE IN service actions (SPC-4 §6.15.1).
pub mod in_action {
    pub const READ_KEYS: u8 = 0;
    pub const READ_RESERVATION: u8 = 1;
    pub const REPORT_CAPABILITIES: u8 = 2;
    pub const READ_FULL_STATUS: u8 = 3;
}

/// PERSISTENT RESERVE OUT service actions (SPC-4 §6.16.2).
pub mod out_action {
    pub const REGISTER: u8 = 0;
    pub const RESERVE: u8 = 1;
    pub const RELEASE: u8 = 2;
    pub const CLEAR: u8 = 3;
    pub const PREEMPT: u8 = 4;
    pub const PREEMPT_AND_ABORT: u8 = 5;
    pub const REGISTER_AND_IGNORE_EXISTING_KEY: u8 = 6;
}

#[derive(Debug, Default)]
pub struct PrState {
    generation: u32,
    regs: Vec<Registration>,
    res: Option<Reservation>,
}

/// An I_T nexus registered with its reservation key.
#[derive(Debug, Clone)]
struct Registration {
    nexus: String,
    key: u64,
}

/// The reservation and who holds it. For all-registrants types the holder is every registrant.
#[derive(Debug, Clone)]
struct Reservation {
    holder: String,
    rtype: u8,
}

/// How a command touches the medium, for conflict checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    None,
    Read,
    Write,
}

pub enum PrError {
    Conflict,
    Check(Sense),
}

fn all_registrants(t: u8) -> bool {
    t == pr_type::WRITE_EXCLUSIVE_ALL_REGISTRANTS || t == pr_type::EXCLUSIVE_ACCESS_ALL_REGISTRANTS
}

impl PrState {
    fn key_of(&self, nexus: &str) -> Option<u64> {
        self.regs.iter().find(|r| r.nexus == nexus).map(|r| r.key)
    }

    fn is_holder(&self, nexus: &str) -> bool {
        match &self.res {
            Some(r) => {
                r.holder == nexus || (all_registrants(r.rtype) && self.key_of(nexus).is_some())
            }
            None => false,
        }
    }

    /// Whether any registration (and so possibly a reservation) exists.
    pub fn active(&self) -> bool {
        !self.regs.is_empty() || self.res.is_some()
    }

    /// True when `nexus` may perform `access` under the current reservation.
    pub fn allowed(&self, nexus: &str, access: Access) -> bool {
        use pr_type::*;
        let Some(res) = &self.res else { return true };
        if access == Access::None || self.is_holder(nexus) {
            return true;
        }
        let registered = self.key_of(nexus).is_some();
        match res.rtype {
            EXCLUSIVE_ACCESS => false,
            WRITE_EXCLUSIVE => access == Access::Read,
            WRITE_EXCLUSIVE_REGISTRANTS_ONLY | WRITE_EXCLUSIVE_ALL_REGISTRANTS => {
                access == Access::Read || registered
            }
            EXCLUSIVE_ACCESS_REGISTRANTS_ONLY | EXCLUSIVE_ACCESS_ALL_REGISTRANTS => registered,
            _ => false,
        }
    }

    /// PERSISTENT RESERVE IN.
    pub fn read(&self, action: u8) -> Result<Vec<u8>, PrError> {
        let mut b = Vec::new();
        b.extend_from_slice(&self.generation.to_be_bytes());
        match action {
            in_action::READ_KEYS => {
                b.extend_from_slice(&((self.regs.len() * 8) as u32).to_be_bytes());
                for r in &self.regs {
                    b.extend_from_slice(&r.key.to_be_bytes());
                }
            }
            in_action::READ_RESERVATION => match &self.res {
                None => b.extend_from_slice(&0u32.to_be_bytes()),
                Some(res) => {
                    b.extend_from_slice(&16u32.to_be_bytes());
                    let key = if all_registrants(res.rtype) {
                        0
                    } else {
                        self.key_of(&res.holder).unwrap_or(0)
                    };
                    b.extend_from_slice(&key.to_be_bytes());
                    b.extend_from_slice(&[0, 0, 0, 0, 0, res.rtype & 0x0f, 0, 0]);
                }
            },
            in_action::REPORT_CAPABILITIES => {
                // REPORT CAPABILITIES: length 8, TMV, the six supported types.
                b = vec![
                    0,
                    8,
                    0x00,
                    0x80,
                    0x80 | 0x40 | 0x20 | 0x08 | 0x02,
                    0x01,
                    0,
                    0,
                ];
            }
            in_action::READ_FULL_STATUS => {
                let mut d = Vec::new();
                for r in &self.regs {
                    d.extend_from_slice(&r.key.to_be_bytes());
                    d.extend_from_slice(&[0; 4]);
                    let holder = self.is_holder(&r.nexus);
                    d.push(holder as u8);
                    d.push(
                        self.res
                            .as_ref()
                            .filter(|_| holder)
                            .map_or(0, |res| res.rtype & 0x0f),
                    );
                    d.extend_from_slice(&[0; 4]);
                    d.extend_from_slice(&1u16.to_be_bytes());
                    let mut tid = vec![0x45, 0, 0, 0];
                    tid.extend_from_slice(r.nexus.as_bytes());
                    tid.push(0);
                    while tid.len() % 4 != 0 {
                        tid.push(0);
                    }
                    let l = (tid.len() - 4) as u16;
                    tid[2..4].copy_from_slice(&l.to_be_bytes());
                    d.extend_from_slice(&(tid.len() as u32).to_be_bytes());
                    d.extend_from_slice(&tid);
                }
                b.extend_from_slice(&(d.len() as u32).to_be_bytes());
                b.extend_from_slice(&d);
            }
            _ => {
                return Err(PrError::Check(Sense::INVALID_FIELD_IN_CDB.with_field(
                    true,
                    1,
                    Some(4),
                )))
            }
        }
        Ok(b)
    }

    /// PERSISTENT RESERVE OUT with its 24-byte parameter list.
    pub fn out(
        &mut self,
        nexus: &str,
        action: u8,
        scope: u8,
        rtype: u8,
        p: &[u8],
    ) -> Result<(), PrError> {
        if p.len() < 24 {
            return Err(PrError::Check(Sense::PARAM_LIST_LENGTH_ERROR));
        }
        let key = u64::from_be_bytes(p[0..8].try_into().unwrap_or([0; 8]));
        let sark = u64::from_be_bytes(p[8..16].try_into().unwrap_or([0; 8]));
        let mine = self.key_of(nexus);
        let type_ok = {
            use pr_type::*;
            matches!(
                rtype,
                WRITE_EXCLUSIVE
                    | EXCLUSIVE_ACCESS
                    | WRITE_EXCLUSIVE_REGISTRANTS_ONLY
                    | EXCLUSIVE_ACCESS_REGISTRANTS_ONLY
                    | WRITE_EXCLUSIVE_ALL_REGISTRANTS
                    | EXCLUSIVE_ACCESS_ALL_REGISTRANTS
            )
        };
        let reserve = |holder: &str| {
            Some(Reservation {
                holder: holder.to_string(),
                rtype,
            })
        };
        match action {
            out_action::REGISTER | out_action::REGISTER_AND_IGNORE_EXISTING_KEY => {
                if action == out_action::REGISTER && mine.unwrap_or(0) != key {
                    return Err(PrError::Conflict);
                }
                if sark == 0 {
                    if mine.is_some() {
                        self.unregister(nexus);
                    }
                } else if let Some(r) = self.regs.iter_mut().find(|r| r.nexus == nexus) {
                    r.key = sark;
                } else {
                    self.regs.push(Registration {
                        nexus: nexus.to_string(),
                        key: sark,
                    });
                }
                self.generation = self.generation.wrapping_add(1);
            }
            out_action::RESERVE => {
                if mine != Some(key) {
                    return Err(PrError::Conflict);
                }
                if scope != 0 || !type_ok {
                    return Err(PrError::Check(
                        Sense::INVALID_FIELD_IN_CDB.with_field(true, 2, None),
                    ));
                }
                match &self.res {
                    None => self.res = reserve(nexus),
                    Some(r) if self.is_holder(nexus) && r.rtype == rtype => {}
                    Some(_) => return Err(PrError::Conflict),
                }
            }
            out_action::RELEASE => {
                if mine != Some(key) {
                    return Err(PrError::Conflict);
                }
                if let Some(r) = &self.res {
                    if self.is_holder(nexus) {
                        if r.rtype != rtype {
                            return Err(PrError::Check(Sense::INVALID_RELEASE_OF_PR));
                        }
                        self.res = None;
                    }
                }
            }
            out_action::CLEAR => {
                if mine != Some(key) {
                    return Err(PrError::Conflict);
                }
                self.regs.clear();
                self.res = None;
                self.generation = self.generation.wrapping_add(1);
            }
            out_action::PREEMPT | out_action::PREEMPT_AND_ABORT => {
                if mine != Some(key) {
                    return Err(PrError::Conflict);
                }
                if !type_ok {
                    return Err(PrError::Check(
                        Sense::INVALID_FIELD_IN_CDB.with_field(true, 2, None),
                    ));
                }
                match self.res.clone() {
                    Some(r) if all_registrants(r.rtype) => {
                        if sark == 0 {
                            self.regs.retain(|r| r.nexus == nexus);
                            self.res = reserve(nexus);
                        } else {
                            self.regs.retain(|r| r.key != sark);
                        }
                    }
                    Some(r) if self.key_of(&r.holder) == Some(sark) => {
                        self.regs.retain(|r| r.key != sark || r.nexus == nexus);
                        self.res = reserve(nexus);
                    }
                    _ => {
                        if sark == 0 {
                            return Err(PrError::Check(Sense::INVALID_FIELD_IN_PARAM));
                        }
                        self.regs.retain(|r| r.key != sark || r.nexus == nexus);
                    }
                }
                self.generation = self.generation.wrapping_add(1);
            }
            _ => {
                return Err(PrError::Check(Sense::INVALID_FIELD_IN_CDB.with_field(
                    true,
                    1,
                    Some(4),
                )))
            }
        }
        Ok(())
    }

    fn unregister(&mut self, nexus: &str) {
        self.regs.retain(|r| r.nexus != nexus);
        if let Some(r) = &self.res {
            let gone = if all_registrants(r.rtype) {
                self.regs.is_empty()
            } else {
                r.holder == nexus
            };
            if gone {
                self.res = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(key: u64, sark: u64) -> Vec<u8> {
        let mut p = vec![0u8; 24];
        p[0..8].copy_from_slice(&key.to_be_bytes());
        p[8..16].copy_from_slice(&sark.to_be_bytes());
        p
    }

    fn ok(r: Result<(), PrError>) {
        assert!(r.is_ok());
    }

    fn conflict(r: Result<(), PrError>) {
        assert!(matches!(r, Err(PrError::Conflict)));
    }

    #[test]
    fn register_reserve_release() {
        let mut s = PrState::default();
        assert!(!s.active());
        ok(s.out("a", 0, 0, 0, &params(0, 1)));
        ok(s.out("b", 0, 0, 0, &params(0, 2)));
        conflict(s.out("b", 0, 0, 0, &params(9, 3)));
        ok(s.out("a", 1, 0, 1, &params(1, 0)));
        // Write Exclusive: others read but cannot write.
        assert!(s.allowed("b", Access::Read) && !s.allowed("b", Access::Write));
        assert!(s.allowed("a", Access::Write));
        conflict(s.out("b", 1, 0, 1, &params(2, 0)));
        // Releasing with the wrong type is an error, the holder keeps it.
        assert!(matches!(
            s.out("a", 2, 0, 3, &params(1, 0)),
            Err(PrError::Check(_))
        ));
        ok(s.out("a", 2, 0, 1, &params(1, 0)));
        assert!(s.allowed("b", Access::Write));
        let keys = s.read(0).ok().unwrap();
        assert_eq!(&keys[4..8], &16u32.to_be_bytes());
    }

    #[test]
    fn access_by_type() {
        for (t, reg_write, other_read) in [
            (3u8, false, false),
            (5, true, true),
            (6, true, false),
            (7, true, true),
            (8, true, false),
        ] {
            let mut s = PrState::default();
            ok(s.out("a", 0, 0, 0, &params(0, 1)));
            ok(s.out("b", 0, 0, 0, &params(0, 2)));
            ok(s.out("a", 1, 0, t, &params(1, 0)));
            assert_eq!(s.allowed("b", Access::Write), reg_write, "type {t}");
            assert_eq!(s.allowed("c", Access::Read), other_read, "type {t}");
            assert!(!s.allowed("c", Access::Write), "type {t}");
        }
    }

    #[test]
    fn preempt_and_clear() {
        let mut s = PrState::default();
        ok(s.out("a", 0, 0, 0, &params(0, 1)));
        ok(s.out("b", 0, 0, 0, &params(0, 2)));
        ok(s.out("a", 1, 0, 3, &params(1, 0)));
        ok(s.out("b", 4, 0, 3, &params(2, 1)));
        assert!(s.allowed("b", Access::Write) && !s.allowed("a", Access::Read));
        assert_eq!(s.key_of("a"), None);
        ok(s.out("b", 3, 0, 0, &params(2, 0)));
        assert!(!s.active());
    }
}
