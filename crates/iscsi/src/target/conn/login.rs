//! The login phase (RFC 7143 §6, the negotiation itself in [`crate::wire::login`]) and text
//! requests in full feature phase: SendTargets (Appendix C) and renegotiation (§6.1).

use std::sync::atomic::Ordering;

use super::Conn;
use crate::wire::bhs::Bhs;
use crate::wire::codes::LoginStatus;
use crate::wire::discovery::{send_targets, TargetRecord};
use crate::wire::framer::{encode_pdu, FrameConfig};
use crate::wire::layout::RESERVED_TAG;
use crate::wire::login::{LoginOutcome, TargetLogin};
use crate::wire::pdu_ctl::{LoginRequest, TextRequest, TextResponse};
use crate::wire::{keys, text};

/// The session a connection logged in to.
pub(super) struct Session {
    /// What login negotiated.
    pub(super) login: LoginOutcome,
    /// The I_T nexus name (`initiator,i,0x<ISID>`) persistent reservations are keyed by.
    pub(super) nexus: String,
}

impl Session {
    fn new(login: LoginOutcome) -> Session {
        let nexus = format!("{},i,0x{:012x}", login.initiator_name, login.isid);
        Session { login, nexus }
    }
}

impl Conn {
    /// One Login Request; the last answer of a successful login puts the connection in full
    /// feature phase with the negotiated framing and sequence numbers.
    pub(super) fn on_login(&mut self, req: &LoginRequest, data: &[u8]) {
        let sh = self.shared.clone();
        // The first StatSN is drawn from the OS as the CHAP challenges are; without it the
        // login fails (target error) rather than starting from a guessable number.
        let mut s = [0u8; 4];
        let seeded = self.login.is_some() || crate::os_random(&mut s).is_ok();
        let login = self.login.get_or_insert_with(|| {
            let tsih = sh.next_tsih.fetch_add(1, Ordering::Relaxed).max(1);
            TargetLogin::new(sh.login.clone(), tsih, u32::from_be_bytes(s) & 0xffff)
        });
        let reply = if seeded {
            login.on_request(req, data, &mut crate::os_random)
        } else {
            login.refuse(req, LoginStatus::TARGET_ERROR)
        };
        encode_pdu(
            self.out.buf(),
            &Bhs::LoginResponse(reply.header.clone()).encode(),
            &[],
            &reply.data,
            &self.tx,
        );
        if reply.is_failure() {
            self.close = true;
            return;
        }
        if let Some(o) = reply.outcome {
            let p = &o.params;
            self.rx = FrameConfig {
                header_digest: p.header_digest,
                data_digest: p.data_digest,
                max_recv_data_segment_length: p.our_max_recv_data_segment_length,
            };
            self.tx = FrameConfig {
                max_recv_data_segment_length: p.peer_max_recv_data_segment_length,
                ..self.rx
            };
            // A data digest covers the data as sent: it is computed on a copy.
            self.out.zero_copy = !self.tx.data_digest;
            self.stat_sn = o.next_stat_sn;
            self.exp_cmd_sn = o.exp_cmd_sn;
            self.session = Some(Session::new(o));
            self.login = None;
        }
    }

    /// A Text Request in full feature phase: SendTargets, and the keys it may renegotiate.
    pub(super) fn on_text(&mut self, t: &TextRequest, data: &[u8], discovery: bool) {
        let mut out = Vec::new();
        if let Ok(pairs) = text::decode(data) {
            if let Some(v) = text::get(&pairs, "SendTargets") {
                let recs = [TargetRecord {
                    name: self.shared.cfg.iqn.clone(),
                    addresses: self.shared.portals.clone(),
                }];
                let cur = self
                    .session
                    .as_ref()
                    .and_then(|s| s.login.target_name.clone());
                text::encode(&send_targets(v, &recs, discovery, cur.as_deref()), &mut out);
            }
            // Renegotiation in full feature phase (§6.1): only MaxRecvDataSegmentLength among
            // our keys may change; login-only keys are rejected, unknown keys not understood.
            let mut answers = Vec::new();
            for p in pairs.iter().filter(|p| p.key != "SendTargets") {
                let ans = match keys::key_def(&p.key) {
                    None => "NotUnderstood".to_string(),
                    Some(def) if p.key == "MaxRecvDataSegmentLength" => {
                        match keys::parse_num(def, &p.value) {
                            Ok(n) => {
                                self.tx.max_recv_data_segment_length = n as u32;
                                self.rx.max_recv_data_segment_length.to_string()
                            }
                            Err(_) => "Reject".to_string(),
                        }
                    }
                    Some(def) if def.scope == keys::Scope::Any => "Irrelevant".to_string(),
                    Some(_) => "Reject".to_string(),
                };
                answers.push(text::Pair::new(p.key.clone(), ans));
            }
            text::encode(&answers, &mut out);
        }
        let r = TextResponse {
            final_: true,
            cont: false,
            lun: t.lun,
            itt: t.itt,
            ttt: RESERVED_TAG,
            stat_sn: self.next_stat_sn(),
            exp_cmd_sn: self.exp_cmd_sn,
            max_cmd_sn: self.max_cmd_sn(),
        };
        self.send(Bhs::TextResponse(r), &out);
    }
}
