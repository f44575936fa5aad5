//! Initiator side of login (RFC 7143 §6.3): drives security (optional CHAP) and operational
//! stages and returns the negotiated [`SessionParams`].
//!
//! ```text
//! let mut l = InitiatorLogin::new(cfg);
//! let (req, data) = l.start();            // send it
//! loop { match l.on_response(&resp, &resp_data)? {
//!     InitiatorStep::Send(req, data) => /* send, read next response */,
//!     InitiatorStep::Done(outcome) => break } }
//! ```

use super::chap::{self, ChapAlgorithm, Credentials};
use super::keys::{self, SessionParams};
use super::login::{LoginOutcome, SessionType};
use super::pdu_ctl::{LoginRequest, LoginResponse, Stage};
use super::text::{self, Pair};
use super::WireError;

/// What the initiator asks for.
#[derive(Debug, Clone)]
pub struct InitiatorLoginConfig {
    pub initiator_name: String,
    /// `None` logs in a discovery session.
    pub target_name: Option<String>,
    pub isid: u64,
    /// What we prove ourselves with when the target asks for CHAP.
    pub chap: Option<Credentials>,
    /// Mutual CHAP: the name the target must answer with and its secret. The initiator then
    /// offers only CHAP and refuses a target that does not prove this secret.
    pub target_chap: Option<Credentials>,
    pub header_digest: bool,
    pub data_digest: bool,
    pub max_recv_data_segment_length: u32,
    pub max_burst_length: u32,
    pub first_burst_length: u32,
    pub immediate_data: bool,
    pub initial_r2t: bool,
    pub cmd_sn: u32,
    pub itt: u32,
}

impl Default for InitiatorLoginConfig {
    fn default() -> Self {
        InitiatorLoginConfig {
            initiator_name: "iqn.2026-11.io.sanbench:initiator".into(),
            target_name: None,
            isid: 0x8000_0000_0001,
            chap: None,
            target_chap: None,
            header_digest: false,
            data_digest: false,
            max_recv_data_segment_length: 262_144,
            max_burst_length: 1_048_576,
            first_burst_length: 262_144,
            immediate_data: true,
            initial_r2t: false,
            cmd_sn: 1,
            itt: 0,
        }
    }
}

/// What to do after a response.
#[derive(Debug, Clone)]
pub enum InitiatorStep {
    Send(LoginRequest, Vec<u8>),
    Done(LoginOutcome),
}

/// Initiator-side login state.
pub struct InitiatorLogin {
    cfg: InitiatorLoginConfig,
    stage: Stage,
    offered: Vec<Pair>,
    params: SessionParams,
    exp_stat_sn: u32,
    chap_sent: bool,
    /// Mutual CHAP: the challenge we sent (algorithm, identifier, challenge), until the
    /// target's answer is checked.
    our_challenge: Option<(ChapAlgorithm, u8, Vec<u8>)>,
    /// The target proved the secret of `target_chap`.
    target_proved: bool,
}

/// What we ask for is what we measure: CRC32C alone when digests are wanted, so a target
/// that cannot do them fails the login (answering Reject) instead of a run silently going
/// without.
fn digest_offer(on: bool) -> &'static str {
    if on {
        "CRC32C"
    } else {
        "None"
    }
}

impl InitiatorLogin {
    pub fn new(cfg: InitiatorLoginConfig) -> InitiatorLogin {
        let params = SessionParams {
            our_max_recv_data_segment_length: cfg.max_recv_data_segment_length,
            ..SessionParams::default()
        };
        InitiatorLogin {
            cfg,
            stage: Stage::Security,
            offered: Vec::new(),
            params,
            exp_stat_sn: 0,
            chap_sent: false,
            our_challenge: None,
            target_proved: false,
        }
    }

    fn request(&self, transit: bool, nsg: Stage) -> LoginRequest {
        LoginRequest {
            transit,
            cont: false,
            csg: self.stage,
            nsg: if transit { nsg } else { self.stage },
            version_max: 0,
            version_min: 0,
            isid: self.cfg.isid,
            tsih: 0,
            itt: self.cfg.itt,
            cid: 0,
            cmd_sn: self.cfg.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
        }
    }

    fn operational_offer(&self) -> Vec<Pair> {
        let c = &self.cfg;
        let yn = |b: bool| if b { "Yes" } else { "No" };
        let mut v = vec![
            Pair::new("HeaderDigest", digest_offer(c.header_digest)),
            Pair::new("DataDigest", digest_offer(c.data_digest)),
            Pair::new(
                "MaxRecvDataSegmentLength",
                c.max_recv_data_segment_length.to_string(),
            ),
            Pair::new("DefaultTime2Wait", "0"),
            Pair::new("DefaultTime2Retain", "0"),
            Pair::new("ErrorRecoveryLevel", "0"),
        ];
        if c.target_name.is_some() {
            v.extend([
                Pair::new("InitialR2T", yn(c.initial_r2t)),
                Pair::new("ImmediateData", yn(c.immediate_data)),
                Pair::new("MaxBurstLength", c.max_burst_length.to_string()),
                Pair::new("FirstBurstLength", c.first_burst_length.to_string()),
                Pair::new("MaxConnections", "1"),
                Pair::new("MaxOutstandingR2T", "1"),
                Pair::new("DataPDUInOrder", "Yes"),
                Pair::new("DataSequenceInOrder", "Yes"),
            ]);
        }
        v
    }

    /// The first Login Request.
    pub fn start(&mut self) -> (LoginRequest, Vec<u8>) {
        let mut pairs = vec![Pair::new("InitiatorName", self.cfg.initiator_name.clone())];
        match &self.cfg.target_name {
            Some(t) => {
                pairs.push(Pair::new("TargetName", t.clone()));
                pairs.push(Pair::new("SessionType", "Normal"));
            }
            None => pairs.push(Pair::new("SessionType", "Discovery")),
        }
        let auth = match (&self.cfg.chap, &self.cfg.target_chap) {
            // A target that must prove itself may not skip authentication.
            (_, Some(_)) => "CHAP",
            (Some(_), None) => "CHAP,None",
            (None, None) => "None",
        };
        pairs.push(Pair::new("AuthMethod", auth));
        // Without CHAP ask to move on at once; with CHAP stay until authenticated.
        let req = self.request(self.cfg.chap.is_none(), Stage::Operational);
        (req, text::encode_vec(&pairs))
    }

    /// Processes a Login Response. `random` fills the challenge of mutual CHAP.
    pub fn on_response(
        &mut self,
        resp: &LoginResponse,
        data: &[u8],
        random: &mut dyn FnMut(&mut [u8]) -> std::io::Result<()>,
    ) -> Result<InitiatorStep, WireError> {
        if !resp.status.is_success() {
            return Err(WireError::Login(format!(
                "target refused login: {}",
                resp.status
            )));
        }
        self.exp_stat_sn = resp.stat_sn.wrapping_add(1);
        let pairs = text::decode(data)?;
        if let Some((alg, id, challenge)) = self.our_challenge.take() {
            self.check_target(&pairs, alg, id, &challenge)?;
        }
        if resp.transit
            && self.stage == Stage::Security
            && self.cfg.target_chap.is_some()
            && !self.target_proved
        {
            return Err(WireError::Login(
                "target failed mutual CHAP: it left security negotiation without proving its \
                 secret"
                    .into(),
            ));
        }
        for p in &pairs {
            if let Some(o) = self.offered.iter().find(|o| o.key == p.key) {
                if let Some(def) = keys::key_def(&p.key) {
                    if p.value != "Irrelevant" && p.value != "NotUnderstood" {
                        let v = if def.rule == keys::Rule::Declarative {
                            p.value.clone()
                        } else {
                            keys::accept(def, &o.value, &p.value)?
                        };
                        self.params.apply(&p.key, &v)?;
                    }
                }
            }
            if p.key == "MaxRecvDataSegmentLength" {
                let def = keys::key_def(&p.key).ok_or_else(|| WireError::Login("no key".into()))?;
                self.params.peer_max_recv_data_segment_length =
                    keys::parse_num(def, &p.value)? as u32;
            }
        }
        if resp.transit {
            if resp.nsg == Stage::FullFeature {
                self.params.finish();
                return Ok(InitiatorStep::Done(LoginOutcome {
                    session_type: if self.cfg.target_name.is_some() {
                        SessionType::Normal
                    } else {
                        SessionType::Discovery
                    },
                    initiator_name: self.cfg.initiator_name.clone(),
                    target_name: self.cfg.target_name.clone(),
                    isid: self.cfg.isid,
                    tsih: resp.tsih,
                    cid: 0,
                    params: self.params.clone(),
                    next_stat_sn: self.exp_stat_sn,
                    exp_cmd_sn: self.cfg.cmd_sn,
                }));
            }
            self.stage = resp.nsg;
            self.offered = self.operational_offer();
            let req = self.request(true, Stage::FullFeature);
            return Ok(InitiatorStep::Send(req, text::encode_vec(&self.offered)));
        }
        match self.stage {
            Stage::Security => self.chap_step(&pairs, random),
            _ => Ok(InitiatorStep::Send(
                self.request(true, Stage::FullFeature),
                Vec::new(),
            )),
        }
    }

    fn chap_step(
        &mut self,
        pairs: &[Pair],
        random: &mut dyn FnMut(&mut [u8]) -> std::io::Result<()>,
    ) -> Result<InitiatorStep, WireError> {
        let Some(Credentials { user, secret }) = self.cfg.chap.clone() else {
            return Err(WireError::Login(
                "target wants authentication; no CHAP secret configured".into(),
            ));
        };
        if text::get(pairs, "AuthMethod") == Some("CHAP") && !self.chap_sent {
            self.chap_sent = true;
            // MD5 only, as open-iscsi and libiscsi offer by default: code 7 is SHA-256 in
            // IANA's registry, but tgtd (and IET before it) take 7 for SHA-1, so a target that
            // picks 7 may expect either digest (seen against tgtd: "7,5" made tgtd choose 7
            // and refuse our 32-byte SHA-256 response).
            let data = text::encode_vec(&[Pair::new("CHAP_A", "5")]);
            return Ok(InitiatorStep::Send(
                self.request(false, Stage::Security),
                data,
            ));
        }
        let (Some(a), Some(i), Some(c)) = (
            text::get(pairs, "CHAP_A"),
            text::get(pairs, "CHAP_I"),
            text::get(pairs, "CHAP_C"),
        ) else {
            return Err(WireError::Login(
                "CHAP: expected CHAP_A, CHAP_I and CHAP_C".into(),
            ));
        };
        let alg = ChapAlgorithm::from_code(a)
            .ok_or_else(|| WireError::Login(format!("CHAP_A={a} unsupported")))?;
        let id: u8 = i
            .parse()
            .map_err(|_| WireError::Login(format!("CHAP_I={i} invalid")))?;
        let challenge = chap::decode_binary("CHAP_C", c)?;
        let r = chap::response(alg, id, secret.as_bytes(), &challenge);
        let mut answer = vec![
            Pair::new("CHAP_N", user),
            Pair::new("CHAP_R", chap::encode_hex(&r)),
        ];
        if self.cfg.target_chap.is_some() {
            // Our own challenge, never the target's (a target that reflected it back would
            // prove nothing).
            let mut idc = vec![0u8; 1 + alg.challenge_len()];
            loop {
                // No random bytes from the OS: the login fails, never a guessable challenge.
                random(&mut idc).map_err(|e| {
                    WireError::Login(format!("no random bytes for our CHAP challenge: {e}"))
                })?;
                if idc[1..] != challenge[..] {
                    break;
                }
            }
            let (our_id, ours) = (idc[0], idc[1..].to_vec());
            answer.push(Pair::new("CHAP_I", our_id.to_string()));
            answer.push(Pair::new("CHAP_C", chap::encode_hex(&ours)));
            self.our_challenge = Some((alg, our_id, ours));
        }
        let data = text::encode_vec(&answer);
        Ok(InitiatorStep::Send(
            self.request(true, Stage::Operational),
            data,
        ))
    }

    /// Mutual CHAP: the target's CHAP_N and CHAP_R must answer our challenge with the secret
    /// we hold for it.
    fn check_target(
        &mut self,
        pairs: &[Pair],
        alg: ChapAlgorithm,
        id: u8,
        challenge: &[u8],
    ) -> Result<(), WireError> {
        let Some(Credentials { user: name, secret }) = &self.cfg.target_chap else {
            return Ok(());
        };
        let fail = |why: &str| WireError::Login(format!("target failed mutual CHAP: {why}"));
        let (Some(n), Some(r)) = (text::get(pairs, "CHAP_N"), text::get(pairs, "CHAP_R")) else {
            return Err(fail("no CHAP_N and CHAP_R in its answer"));
        };
        if n != name {
            return Err(fail(&format!("it names itself '{n}', expected '{name}'")));
        }
        let r = chap::decode_binary("CHAP_R", r).map_err(|_| fail("CHAP_R is not binary"))?;
        if !chap::verify(alg, id, secret.as_bytes(), challenge, &r) {
            return Err(fail("wrong response (the target does not hold the secret)"));
        }
        self.target_proved = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::codes::LoginStatus;
    use crate::wire::login::{TargetLogin, TargetLoginConfig};

    fn run(
        icfg: InitiatorLoginConfig,
        tcfg: TargetLoginConfig,
    ) -> Result<(LoginOutcome, LoginOutcome), String> {
        run_with(icfg, tcfg, true, true)
    }

    /// A login; `t_random` / `i_random` false: that side's random source fails.
    fn run_with(
        icfg: InitiatorLoginConfig,
        tcfg: TargetLoginConfig,
        t_random: bool,
        i_random: bool,
    ) -> Result<(LoginOutcome, LoginOutcome), String> {
        let mut i = InitiatorLogin::new(icfg);
        let mut t = TargetLogin::new(tcfg, 7, 100);
        let no_entropy = || std::io::Error::from_raw_os_error(libc::ENOSYS);
        let mut rnd = |b: &mut [u8]| {
            if !t_random {
                return Err(no_entropy());
            }
            b.iter_mut().enumerate().for_each(|(n, x)| *x = n as u8);
            Ok(())
        };
        let (mut req, mut data) = i.start();
        for _ in 0..10 {
            let r = t.on_request(&req, &data, &mut rnd);
            let tout = r.outcome.clone();
            let mut irnd = |b: &mut [u8]| {
                if !i_random {
                    return Err(no_entropy());
                }
                b.fill(0x5a);
                Ok(())
            };
            match i
                .on_response(&r.header, &r.data, &mut irnd)
                .map_err(|e| e.to_string())?
            {
                InitiatorStep::Send(q, d) => (req, data) = (q, d),
                InitiatorStep::Done(o) => return Ok((o, tout.ok_or("target not done")?)),
            }
        }
        Err("login did not finish".into())
    }

    fn tcfg() -> TargetLoginConfig {
        TargetLoginConfig {
            target_names: vec!["iqn.t".into()],
            ..Default::default()
        }
    }

    #[test]
    fn plain_login() {
        let ic = InitiatorLoginConfig {
            target_name: Some("iqn.t".into()),
            header_digest: true,
            ..Default::default()
        };
        let (i, t) = run(ic, tcfg()).unwrap();
        assert_eq!(i.tsih, 7);
        assert!(i.params.header_digest && t.params.header_digest);
        assert!(!i.params.initial_r2t && i.params.immediate_data);
        assert_eq!(i.params.peer_max_recv_data_segment_length, 262_144);
        assert_eq!(t.params.peer_max_recv_data_segment_length, 262_144);
        assert_eq!(i.next_stat_sn, t.next_stat_sn);
    }

    #[test]
    fn chap_login() {
        let chap = Some(Credentials::new("user", "secretsecret"));
        let ic = InitiatorLoginConfig {
            target_name: Some("iqn.t".into()),
            chap: chap.clone(),
            ..Default::default()
        };
        let tc = TargetLoginConfig {
            chap: chap.clone(),
            ..tcfg()
        };
        assert!(run(ic.clone(), tc.clone()).is_ok());
        let bad = InitiatorLoginConfig {
            chap: Some(Credentials::new("user", "wrong")),
            ..ic.clone()
        };
        assert!(run(bad, tc.clone()).is_err());
        let none = InitiatorLoginConfig { chap: None, ..ic };
        assert!(run(none, tc).is_err());
    }

    #[test]
    fn no_random_bytes_fail_the_login() {
        let ic = InitiatorLoginConfig {
            target_name: Some("iqn.t".into()),
            chap: Some(Credentials::new("user", "initiator-secret")),
            target_chap: Some(Credentials::new("tgt", "target-secret")),
            ..Default::default()
        };
        let tc = TargetLoginConfig {
            chap: ic.chap.clone(),
            target_chap: ic.target_chap.clone(),
            ..tcfg()
        };
        // The target cannot draw its challenge: it answers Target Error (3/0), no challenge.
        let e = run_with(ic.clone(), tc.clone(), false, true).unwrap_err();
        assert!(e.contains("target error (status class 3, detail 0)"), "{e}");
        // The initiator cannot draw its mutual-CHAP challenge: the login fails on its side.
        let e = run_with(ic.clone(), tc.clone(), true, false).unwrap_err();
        assert!(e.contains("no random bytes"), "{e}");
        // One-way CHAP needs no initiator randomness.
        let one_way = InitiatorLoginConfig {
            target_chap: None,
            ..ic
        };
        let tc = TargetLoginConfig {
            target_chap: None,
            ..tc
        };
        assert!(run_with(one_way, tc, true, false).is_ok());
    }

    #[test]
    fn os_random_fills_from_getrandom() {
        // Long enough that getrandom may answer short and be asked again.
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        crate::os_random(&mut a).unwrap();
        crate::os_random(&mut b).unwrap();
        assert_ne!(a, b);
        assert!(a[4000..].iter().any(|x| *x != 0));
    }

    #[test]
    fn mutual_chap() {
        let ic = InitiatorLoginConfig {
            target_name: Some("iqn.t".into()),
            chap: Some(Credentials::new("user", "initiator-secret")),
            target_chap: Some(Credentials::new("tgt", "target-secret")),
            ..Default::default()
        };
        let tc = TargetLoginConfig {
            chap: ic.chap.clone(),
            target_chap: ic.target_chap.clone(),
            ..tcfg()
        };
        assert!(run(ic.clone(), tc.clone()).is_ok());
        // The target holds another secret, or another name: the initiator refuses it.
        for wrong in [("tgt", "other-secret"), ("someone", "target-secret")] {
            let tc = TargetLoginConfig {
                target_chap: Some(Credentials::new(wrong.0, wrong.1)),
                ..tc.clone()
            };
            let e = run(ic.clone(), tc).unwrap_err();
            assert!(e.contains("target failed mutual CHAP"), "{e}");
        }
        // A target without credentials of its own refuses to be asked (status, not a hang).
        let tc_one_way = TargetLoginConfig {
            target_chap: None,
            ..tc.clone()
        };
        assert!(run(ic.clone(), tc_one_way).unwrap_err().contains("refused"));
        // A target that skips authentication altogether is refused by an initiator that
        // wants it to prove itself: it offers only CHAP.
        let open_target = TargetLoginConfig {
            chap: None,
            target_chap: None,
            ..tcfg()
        };
        assert!(run(ic, open_target).is_err());
    }

    /// A hostile target that answers the initiator's first request by moving straight to the
    /// operational stage, with no CHAP at all, while the initiator wants mutual CHAP.
    #[test]
    fn mutual_chap_cannot_be_skipped() {
        let mut i = InitiatorLogin::new(InitiatorLoginConfig {
            target_name: Some("iqn.t".into()),
            chap: Some(Credentials::new("user", "initiator-secret")),
            target_chap: Some(Credentials::new("tgt", "target-secret")),
            ..Default::default()
        });
        let (req, _) = i.start();
        let resp = LoginResponse {
            transit: true,
            cont: false,
            csg: Stage::Security,
            nsg: Stage::Operational,
            version_max: 0,
            version_active: 0,
            isid: req.isid,
            tsih: 0,
            itt: req.itt,
            stat_sn: 1,
            exp_cmd_sn: 1,
            max_cmd_sn: 1,
            status: LoginStatus::SUCCESS,
        };
        let data = text::encode_vec(&[Pair::new("AuthMethod", "None")]);
        let e = i
            .on_response(&resp, &data, &mut |b: &mut [u8]| {
                b.fill(1);
                Ok(())
            })
            .unwrap_err();
        assert!(e.to_string().contains("target failed mutual CHAP"), "{e}");
    }

    #[test]
    fn unknown_target_and_discovery() {
        let ic = InitiatorLoginConfig {
            target_name: Some("iqn.nope".into()),
            ..Default::default()
        };
        assert!(run(ic, tcfg()).is_err());
        let (i, _) = run(InitiatorLoginConfig::default(), tcfg()).unwrap();
        assert_eq!(i.session_type, SessionType::Discovery);
    }
}
