//! SCSI-3 Persistent Reservations (SPC-4 §5.13, PERSISTENT RESERVE IN/OUT §6.16–6.17).
//!
//! Registrations are keyed by I_T nexus name (`initiator,i,0x<ISID>`), so they survive
//! logout as the standard requires. Reservation types: 1 WE, 3 EA, 5 WERO, 6 EARO, 7 WEAR,
//! 8 EAAR.

use crate::scsi::sense::Sense;

#[derive(Debug, Default)]
pub struct PrState {
    generation: u32,
    regs: Vec<(String, u64)>,
    /// (holder nexus, type). For all-registrants types the holder is every registrant.
    res: Option<(String, u8)>,
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
    t == 7 || t == 8
}

impl PrState {
    fn key_of(&self, nexus: &str) -> Option<u64> {
        self.regs.iter().find(|r| r.0 == nexus).map(|r| r.1)
    }

    fn is_holder(&self, nexus: &str) -> bool {
        match &self.res {
            Some((h, t)) => h == nexus || (all_registrants(*t) && self.key_of(nexus).is_some()),
            None => false,
        }
    }

    /// Whether any registration (and so possibly a reservation) exists.
    pub fn active(&self) -> bool {
        !self.regs.is_empty() || self.res.is_some()
    }

    /// True when `nexus` may perform `access` under the current reservation.
    pub fn allowed(&self, nexus: &str, access: Access) -> bool {
        let Some((_, t)) = &self.res else { return true };
        if access == Access::None || self.is_holder(nexus) {
            return true;
        }
        let registered = self.key_of(nexus).is_some();
        match (*t, access) {
            (1, Access::Read) => true,
            (1, _) | (3, _) => false,
            (5 | 7, Access::Read) => true,
            (5 | 7, _) => registered,
            (6 | 8, _) => registered,
            _ => false,
        }
    }

    /// PERSISTENT RESERVE IN.
    pub fn read(&self, action: u8) -> Result<Vec<u8>, PrError> {
        let mut b = Vec::new();
        b.extend_from_slice(&self.generation.to_be_bytes());
        match action {
            0 => {
                b.extend_from_slice(&((self.regs.len() * 8) as u32).to_be_bytes());
                for (_, k) in &self.regs {
                    b.extend_from_slice(&k.to_be_bytes());
                }
            }
            1 => match &self.res {
                None => b.extend_from_slice(&0u32.to_be_bytes()),
                Some((h, t)) => {
                    b.extend_from_slice(&16u32.to_be_bytes());
                    let key = if all_registrants(*t) {
                        0
                    } else {
                        self.key_of(h).unwrap_or(0)
                    };
                    b.extend_from_slice(&key.to_be_bytes());
                    b.extend_from_slice(&[0, 0, 0, 0, 0, *t & 0x0f, 0, 0]);
                }
            },
            2 => {
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
            3 => {
                let mut d = Vec::new();
                for (n, k) in &self.regs {
                    d.extend_from_slice(&k.to_be_bytes());
                    d.extend_from_slice(&[0; 4]);
                    let holder = self.is_holder(n);
                    d.push(holder as u8);
                    d.push(
                        self.res
                            .as_ref()
                            .filter(|_| holder)
                            .map_or(0, |r| r.1 & 0x0f),
                    );
                    d.extend_from_slice(&[0; 4]);
                    d.extend_from_slice(&1u16.to_be_bytes());
                    let mut tid = vec![0x45, 0, 0, 0];
                    tid.extend_from_slice(n.as_bytes());
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
        let type_ok = matches!(rtype, 1 | 3 | 5 | 6 | 7 | 8);
        match action {
            0 | 6 => {
                if action == 0 && mine.unwrap_or(0) != key {
                    return Err(PrError::Conflict);
                }
                if sark == 0 {
                    if mine.is_some() {
                        self.unregister(nexus);
                    }
                } else if let Some(r) = self.regs.iter_mut().find(|r| r.0 == nexus) {
                    r.1 = sark;
                } else {
                    self.regs.push((nexus.to_string(), sark));
                }
                self.generation = self.generation.wrapping_add(1);
            }
            1 => {
                if mine != Some(key) {
                    return Err(PrError::Conflict);
                }
                if scope != 0 || !type_ok {
                    return Err(PrError::Check(
                        Sense::INVALID_FIELD_IN_CDB.with_field(true, 2, None),
                    ));
                }
                match &self.res {
                    None => self.res = Some((nexus.to_string(), rtype)),
                    Some((_, t)) if self.is_holder(nexus) && *t == rtype => {}
                    Some(_) => return Err(PrError::Conflict),
                }
            }
            2 => {
                if mine != Some(key) {
                    return Err(PrError::Conflict);
                }
                if let Some((_, t)) = &self.res {
                    if self.is_holder(nexus) {
                        if *t != rtype {
                            return Err(PrError::Check(Sense::new(5, 0x26, 0x04)));
                        }
                        self.res = None;
                    }
                }
            }
            3 => {
                if mine != Some(key) {
                    return Err(PrError::Conflict);
                }
                self.regs.clear();
                self.res = None;
                self.generation = self.generation.wrapping_add(1);
            }
            4 | 5 => {
                if mine != Some(key) {
                    return Err(PrError::Conflict);
                }
                if !type_ok {
                    return Err(PrError::Check(
                        Sense::INVALID_FIELD_IN_CDB.with_field(true, 2, None),
                    ));
                }
                match self.res.clone() {
                    Some((_, t)) if all_registrants(t) => {
                        if sark == 0 {
                            self.regs.retain(|r| r.0 == nexus);
                            self.res = Some((nexus.to_string(), rtype));
                        } else {
                            self.regs.retain(|r| r.1 != sark);
                        }
                    }
                    Some((h, _)) if self.key_of(&h) == Some(sark) => {
                        self.regs.retain(|r| r.1 != sark || r.0 == nexus);
                        self.res = Some((nexus.to_string(), rtype));
                    }
                    _ => {
                        if sark == 0 {
                            return Err(PrError::Check(Sense::INVALID_FIELD_IN_PARAM));
                        }
                        self.regs.retain(|r| r.1 != sark || r.0 == nexus);
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
        self.regs.retain(|r| r.0 != nexus);
        if let Some((h, t)) = &self.res {
            let gone = if all_registrants(*t) {
                self.regs.is_empty()
            } else {
                h == nexus
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
