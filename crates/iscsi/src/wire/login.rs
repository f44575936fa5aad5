//! Target side of the login phase (RFC 7143 §6.3, §11.12–11.13): security stage (AuthMethod,
//! CHAP), operational stage (key negotiation), transition to full feature phase.
//!
//! [`TargetLogin::on_request`] takes one Login Request (header + data) and returns the Login
//! Response to send. When the response moves to full feature phase the reply carries the
//! [`LoginOutcome`]; when it carries a non-zero status class the connection must be closed
//! after sending it. The initiator side lives in [`super::login_initiator`].

use super::chap::{self, ChapAlgorithm, Credentials};
use super::codes::LoginStatus;
use super::keys::{self, SessionParams};
use super::pdu_ctl::{LoginRequest, LoginResponse, Stage};
use super::text::{self, Pair};

/// CmdSN window we grant (MaxCmdSN - ExpCmdSN + 1).
pub const CMD_WINDOW: u32 = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionType {
    Normal,
    Discovery,
}

/// What the target accepts.
#[derive(Debug, Clone)]
pub struct TargetLoginConfig {
    /// Names that accept normal sessions.
    pub target_names: Vec<String>,
    pub portal_group_tag: u16,
    /// What the initiator must prove with CHAP; `None` = AuthMethod=None.
    pub chap: Option<Credentials>,
    /// Mutual CHAP: what the target answers an initiator's challenge with. Without it, an
    /// initiator that asks the target to authenticate itself is refused.
    pub target_chap: Option<Credentials>,
    /// Our MaxRecvDataSegmentLength (declared to the initiator).
    pub max_recv_data_segment_length: u32,
    pub max_burst_length: u32,
    pub first_burst_length: u32,
    pub immediate_data: bool,
    pub initial_r2t: bool,
    pub max_outstanding_r2t: u32,
    /// Digests we accept, e.g. "CRC32C,None".
    pub digests: String,
}

impl Default for TargetLoginConfig {
    fn default() -> Self {
        TargetLoginConfig {
            target_names: Vec::new(),
            portal_group_tag: 1,
            chap: None,
            target_chap: None,
            max_recv_data_segment_length: 262_144,
            max_burst_length: 1_048_576,
            first_burst_length: 262_144,
            immediate_data: true,
            initial_r2t: false,
            max_outstanding_r2t: 1,
            digests: "CRC32C,None".into(),
        }
    }
}

/// The result of a successful login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginOutcome {
    pub session_type: SessionType,
    pub initiator_name: String,
    pub target_name: Option<String>,
    pub isid: u64,
    pub tsih: u16,
    pub cid: u16,
    pub params: SessionParams,
    /// StatSN for the first full-feature response.
    pub next_stat_sn: u32,
    /// CmdSN expected next.
    pub exp_cmd_sn: u32,
}

/// One Login Response to send.
#[derive(Debug, Clone)]
pub struct LoginReply {
    pub header: LoginResponse,
    pub data: Vec<u8>,
    /// Set when this response ends the login in full feature phase.
    pub outcome: Option<LoginOutcome>,
}

impl LoginReply {
    /// True when the response reports failure: close the connection after sending it.
    pub fn is_failure(&self) -> bool {
        !self.header.status.is_success()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Auth {
    /// AuthMethod not yet agreed.
    Start,
    /// CHAP agreed, waiting for CHAP_A.
    ChapWaitAlgorithm,
    /// Challenge sent.
    ChapWaitResponse {
        alg: ChapAlgorithm,
        id: u8,
        challenge: Vec<u8>,
    },
    Done,
}

/// Target-side login state for one connection.
pub struct TargetLogin {
    cfg: TargetLoginConfig,
    tsih: u16,
    stat_sn: u32,
    first: bool,
    isid: u64,
    itt: u32,
    cid: u16,
    pending: Vec<u8>,
    auth: Auth,
    session_type: SessionType,
    initiator_name: String,
    target_name: Option<String>,
    params: SessionParams,
    declared_mrdsl: bool,
}

impl TargetLogin {
    /// `tsih` is the session handle to assign on success, `stat_sn` the connection's first
    /// StatSN.
    pub fn new(cfg: TargetLoginConfig, tsih: u16, stat_sn: u32) -> TargetLogin {
        let mut params = SessionParams {
            our_max_recv_data_segment_length: cfg.max_recv_data_segment_length,
            ..SessionParams::default()
        };
        params.max_burst_length = params.max_burst_length.min(cfg.max_burst_length);
        params.first_burst_length = params.first_burst_length.min(cfg.first_burst_length);
        TargetLogin {
            cfg,
            tsih,
            stat_sn,
            first: true,
            isid: 0,
            itt: 0,
            cid: 0,
            pending: Vec::new(),
            auth: Auth::Start,
            session_type: SessionType::Normal,
            initiator_name: String::new(),
            target_name: None,
            params,
            declared_mrdsl: false,
        }
    }

    fn reply(
        &mut self,
        req: &LoginRequest,
        st: LoginStatus,
        transit: bool,
        data: Vec<u8>,
    ) -> LoginReply {
        let header = LoginResponse {
            transit,
            cont: false,
            csg: req.csg,
            nsg: if transit { req.nsg } else { req.csg },
            version_max: 0,
            version_active: 0,
            isid: req.isid,
            tsih: if transit && req.nsg == Stage::FullFeature {
                self.tsih
            } else {
                0
            },
            itt: req.itt,
            stat_sn: self.stat_sn,
            exp_cmd_sn: req.cmd_sn,
            max_cmd_sn: req.cmd_sn.wrapping_add(CMD_WINDOW - 1),
            status: st,
        };
        self.stat_sn = self.stat_sn.wrapping_add(1);
        LoginReply {
            header,
            data,
            outcome: None,
        }
    }

    fn fail(&mut self, req: &LoginRequest, st: LoginStatus) -> LoginReply {
        self.reply(req, st, false, Vec::new())
    }

    /// Refuses the request with status `st` without looking at it: for a failure outside the
    /// negotiation (no random bytes for the session's first StatSN).
    pub fn refuse(&mut self, req: &LoginRequest, st: LoginStatus) -> LoginReply {
        self.fail(req, st)
    }

    /// Handles one Login Request. `random` fills CHAP challenges.
    pub fn on_request(
        &mut self,
        req: &LoginRequest,
        data: &[u8],
        random: &mut dyn FnMut(&mut [u8]) -> std::io::Result<()>,
    ) -> LoginReply {
        if self.first {
            self.isid = req.isid;
            self.itt = req.itt;
            self.cid = req.cid;
            if req.version_min > 0 {
                return self.fail(req, LoginStatus::UNSUPPORTED_VERSION);
            }
            if req.tsih != 0 {
                return self.fail(req, LoginStatus::SESSION_DOES_NOT_EXIST);
            }
        } else if req.isid != self.isid || req.itt != self.itt {
            return self.fail(req, LoginStatus::INITIATOR_ERROR);
        }
        if self.pending.len() + data.len() > 65536 {
            return self.fail(req, LoginStatus::INITIATOR_ERROR);
        }
        self.pending.extend_from_slice(data);
        if req.cont {
            // §6.3: answer a partial text with an empty response and wait for the rest.
            return self.reply(req, LoginStatus::SUCCESS, false, Vec::new());
        }
        let joined = std::mem::take(&mut self.pending);
        let pairs = match text::decode(&joined) {
            Ok(p) => p,
            Err(_) => return self.fail(req, LoginStatus::INITIATOR_ERROR),
        };
        let mut out: Vec<Pair> = Vec::new();
        if self.first {
            self.first = false;
            match self.leading(&pairs) {
                Ok(()) => {}
                Err(st) => return self.fail(req, st),
            }
            if self.session_type == SessionType::Normal {
                out.push(Pair::new(
                    "TargetPortalGroupTag",
                    self.cfg.portal_group_tag.to_string(),
                ));
            }
        }
        if let Err(st) = self.negotiate(req, &pairs, &mut out, random) {
            return self.fail(req, st);
        }
        let mut transit = req.transit;
        if req.csg == Stage::Security && self.auth != Auth::Done {
            if self.cfg.chap.is_some() {
                transit = false;
            } else {
                self.auth = Auth::Done;
            }
        }
        if req.csg == Stage::Operational && self.cfg.chap.is_some() && self.auth != Auth::Done {
            return self.fail(req, LoginStatus::AUTH_FAILURE);
        }
        if transit
            && req.nsg != Stage::Security
            && !self.declared_mrdsl
            && req.csg == Stage::Operational
        {
            // MaxRecvDataSegmentLength is declarative per direction: state ours even if the
            // initiator never asked.
            self.declared_mrdsl = true;
            out.push(Pair::new(
                "MaxRecvDataSegmentLength",
                self.cfg.max_recv_data_segment_length.to_string(),
            ));
        }
        let mut reply = self.reply(req, LoginStatus::SUCCESS, transit, text::encode_vec(&out));
        if transit && req.nsg == Stage::FullFeature {
            self.params.finish();
            reply.outcome = Some(LoginOutcome {
                session_type: self.session_type,
                initiator_name: self.initiator_name.clone(),
                target_name: self.target_name.clone(),
                isid: self.isid,
                tsih: self.tsih,
                cid: self.cid,
                params: self.params.clone(),
                next_stat_sn: self.stat_sn,
                exp_cmd_sn: req.cmd_sn,
            });
        }
        reply
    }

    fn leading(&mut self, pairs: &[Pair]) -> Result<(), LoginStatus> {
        let Some(iname) = text::get(pairs, "InitiatorName") else {
            return Err(LoginStatus::MISSING_PARAMETER);
        };
        if iname.is_empty() {
            return Err(LoginStatus::MISSING_PARAMETER);
        }
        self.initiator_name = iname.to_string();
        self.session_type = match text::get(pairs, "SessionType").unwrap_or("Normal") {
            "Normal" => SessionType::Normal,
            "Discovery" => SessionType::Discovery,
            _ => return Err(LoginStatus::SESSION_TYPE_UNSUPPORTED),
        };
        if self.session_type == SessionType::Normal {
            let Some(t) = text::get(pairs, "TargetName") else {
                return Err(LoginStatus::MISSING_PARAMETER);
            };
            if !self.cfg.target_names.iter().any(|n| n == t) {
                return Err(LoginStatus::NOT_FOUND);
            }
            self.target_name = Some(t.to_string());
        }
        Ok(())
    }

    fn negotiate(
        &mut self,
        req: &LoginRequest,
        pairs: &[Pair],
        out: &mut Vec<Pair>,
        random: &mut dyn FnMut(&mut [u8]) -> std::io::Result<()>,
    ) -> Result<(), LoginStatus> {
        let security = req.csg == Stage::Security;
        for p in pairs {
            let (k, v) = (p.key.as_str(), p.value.as_str());
            match k {
                "InitiatorName" | "TargetName" | "SessionType" | "InitiatorAlias" => continue,
                "AuthMethod" => {
                    if !security {
                        return Err(LoginStatus::INITIATOR_ERROR);
                    }
                    let ours = if self.cfg.chap.is_some() {
                        "CHAP"
                    } else {
                        "None"
                    };
                    let ans = v.split(',').find(|m| *m == ours).unwrap_or("Reject");
                    if ans == "Reject" {
                        return Err(LoginStatus::AUTH_FAILURE);
                    }
                    if ans == "CHAP" {
                        self.auth = Auth::ChapWaitAlgorithm;
                    }
                    out.push(Pair::new(k, ans));
                }
                "CHAP_A" => {
                    if self.auth != Auth::ChapWaitAlgorithm {
                        return Err(LoginStatus::INITIATOR_ERROR);
                    }
                    let Some(alg) = v.split(',').find_map(ChapAlgorithm::from_code) else {
                        out.push(Pair::new(k, "Reject"));
                        return Err(LoginStatus::AUTH_FAILURE);
                    };
                    let mut idc = vec![0u8; 1 + alg.challenge_len()];
                    // No random bytes from the OS: the login fails (a guessable challenge
                    // would let a recorded response be replayed).
                    random(&mut idc).map_err(|_| LoginStatus::TARGET_ERROR)?;
                    let (id, challenge) = (idc[0], idc[1..].to_vec());
                    out.push(Pair::new("CHAP_A", alg.code()));
                    out.push(Pair::new("CHAP_I", id.to_string()));
                    out.push(Pair::new("CHAP_C", chap::encode_hex(&challenge)));
                    self.auth = Auth::ChapWaitResponse { alg, id, challenge };
                }
                "CHAP_N" => {}
                "CHAP_R" => self.check_chap(pairs, out)?,
                // The initiator's challenge (mutual CHAP) is answered in `check_chap`, with the
                // CHAP_R it must come with.
                "CHAP_I" | "CHAP_C" => {
                    if text::get(pairs, "CHAP_R").is_none() {
                        return Err(LoginStatus::INITIATOR_ERROR);
                    }
                }
                _ => self.operational(k, v, out)?,
            }
        }
        Ok(())
    }

    fn check_chap(&mut self, pairs: &[Pair], out: &mut Vec<Pair>) -> Result<(), LoginStatus> {
        let Auth::ChapWaitResponse { alg, id, challenge } = &self.auth else {
            return Err(LoginStatus::INITIATOR_ERROR);
        };
        let Some(Credentials { user, secret }) = &self.cfg.chap else {
            return Err(LoginStatus::AUTH_FAILURE);
        };
        let name = text::get(pairs, "CHAP_N").unwrap_or("");
        let resp = text::get(pairs, "CHAP_R").unwrap_or("");
        let Ok(resp) = chap::decode_binary("CHAP_R", resp) else {
            return Err(LoginStatus::AUTH_FAILURE);
        };
        if name != user || !chap::verify(*alg, *id, secret.as_bytes(), challenge, &resp) {
            return Err(LoginStatus::AUTH_FAILURE);
        }
        match (text::get(pairs, "CHAP_I"), text::get(pairs, "CHAP_C")) {
            (None, None) => {}
            (Some(i), Some(c)) => {
                let Some(ours) = &self.cfg.target_chap else {
                    return Err(LoginStatus::AUTH_FAILURE);
                };
                let their_id: u8 = i.parse().map_err(|_| LoginStatus::AUTH_FAILURE)?;
                let theirs =
                    chap::decode_binary("CHAP_C", c).map_err(|_| LoginStatus::AUTH_FAILURE)?;
                // RFC 7143 §12.1.3: our own challenge sent back to us would have us answer it
                // for the initiator (a reflection attack).
                if theirs == *challenge {
                    return Err(LoginStatus::AUTH_FAILURE);
                }
                let r = chap::response(*alg, their_id, ours.secret.as_bytes(), &theirs);
                out.push(Pair::new("CHAP_N", ours.user.clone()));
                out.push(Pair::new("CHAP_R", chap::encode_hex(&r)));
            }
            _ => return Err(LoginStatus::INITIATOR_ERROR),
        }
        self.auth = Auth::Done;
        Ok(())
    }

    fn operational(&mut self, k: &str, v: &str, out: &mut Vec<Pair>) -> Result<(), LoginStatus> {
        let Some(def) = keys::key_def(k) else {
            out.push(Pair::new(k, "NotUnderstood"));
            return Ok(());
        };
        if self.session_type == SessionType::Discovery
            && matches!(
                k,
                "MaxConnections"
                    | "InitialR2T"
                    | "ImmediateData"
                    | "MaxBurstLength"
                    | "FirstBurstLength"
                    | "MaxOutstandingR2T"
                    | "DataPDUInOrder"
                    | "DataSequenceInOrder"
            )
        {
            out.push(Pair::new(k, "Irrelevant"));
            return Ok(());
        }
        let c = &self.cfg;
        let yn = |b: bool| if b { "Yes" } else { "No" }.to_string();
        let ours: String = match k {
            "HeaderDigest" | "DataDigest" => c.digests.clone(),
            "MaxConnections" => "1".into(),
            "InitialR2T" => yn(c.initial_r2t),
            "ImmediateData" => yn(c.immediate_data),
            "MaxBurstLength" => c.max_burst_length.to_string(),
            "FirstBurstLength" => c.first_burst_length.to_string(),
            "DefaultTime2Wait" | "DefaultTime2Retain" | "ErrorRecoveryLevel" => "0".into(),
            "MaxOutstandingR2T" => c.max_outstanding_r2t.to_string(),
            "DataPDUInOrder" | "DataSequenceInOrder" => "Yes".into(),
            "IFMarker" | "OFMarker" => "No".into(),
            "MaxRecvDataSegmentLength" => {
                let n = keys::parse_num(def, v).map_err(|_| LoginStatus::INITIATOR_ERROR)?;
                self.params.peer_max_recv_data_segment_length = n as u32;
                self.declared_mrdsl = true;
                out.push(Pair::new(k, c.max_recv_data_segment_length.to_string()));
                return Ok(());
            }
            // Declarations by the target only, or keys not valid from an initiator here.
            _ => {
                out.push(Pair::new(k, "Irrelevant"));
                return Ok(());
            }
        };
        let ans = keys::respond(def, v, &ours).map_err(|_| LoginStatus::INITIATOR_ERROR)?;
        if ans != "Reject" {
            self.params
                .apply(k, &ans)
                .map_err(|_| LoginStatus::INITIATOR_ERROR)?;
        }
        out.push(Pair::new(k, ans));
        Ok(())
    }
}
