//! iSCSI CHAP through `sanbench run` and `sanbench serve iscsi`: one-way and mutual, secrets
//! from the command line, files and the environment, the options checked, and no secret in
//! anything sanbench writes.

use sanbench_testkit::Served;

use super::{expect_usage_error, run_json, sanbench};

/// `sanbench serve iscsi` with one-way and mutual CHAP, on a port the kernel picks; stopped
/// (SIGKILL, by process id) when dropped.
fn iscsi_server(extra: &[&str]) -> Served {
    let mut args = vec!["iscsi", "--size", "16M", "--listen", "127.0.0.1:0"];
    args.extend(extra);
    Served::start(assert_cmd::cargo::cargo_bin("sanbench"), &args)
}

/// Mutual CHAP end to end through the CLI, and no secret in anything sanbench writes.
#[test]
fn iscsi_chap_secrets_never_reach_the_result() {
    let s = iscsi_server(&[
        "--chap",
        "bench:initiator-secret-1",
        "--target-chap",
        "tgt:target-secret-2",
    ]);
    let uri = format!(
        "iscsi://bench%initiator-secret-1@{}/iqn.2026-11.io.sanbench:ram/0\
         ?target_user=tgt&target_password=target-secret-2",
        s.addr()
    );
    let doc = run_json(&["--time", "300ms", &uri]);
    let text = doc.to_string();
    for secret in ["initiator-secret-1", "target-secret-2"] {
        assert!(!text.contains(secret), "{secret} in the result");
    }
    let r = &doc["results"][0];
    assert_eq!(
        r["info"]["params"]["auth"], "CHAP (mutual)",
        "{}",
        r["info"]
    );
    assert!(r["ios"].as_u64().unwrap() > 0);
    assert!(
        r["target"].as_str().unwrap().contains("bench%***@"),
        "{}",
        r["target"]
    );
    // The target refuses an initiator whose idea of its secret is wrong... by the initiator.
    let wrong = uri.replace("target-secret-2", "target-secret-9");
    let out = sanbench()
        .args(["run", "--time", "300ms", &wrong])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("target failed mutual CHAP"), "{err}");
    assert!(
        !err.contains("target-secret-9") && !err.contains("initiator-secret-1"),
        "{err}"
    );
}

#[test]
fn chap_options_are_checked() {
    let base = "iscsi://bench%secret-one-1@127.0.0.1:9/iqn.x:y/0";
    expect_usage_error(
        &["run", &format!("{base}?target_user=tgt")],
        "both target_user and target_password",
    );
    expect_usage_error(
        &[
            "run",
            &format!("{base}?target_user=tgt&target_password=secret-one-1"),
        ],
        "must differ",
    );
    expect_usage_error(
        &["serve", "iscsi", "--size", "1M", "--target-chap", "tgt:s-1"],
        "needs --chap",
    );
    expect_usage_error(
        &[
            "serve",
            "iscsi",
            "--size",
            "1M",
            "--chap",
            "a:s-1",
            "--target-chap",
            "t:s-1",
        ],
        "different secrets",
    );
}

/// Secrets kept off the command line: the target's from --chap-file and --target-chap-file,
/// the initiator's from `USER%@FILE@` and `target_password_env=`; a missing file is bad input.
#[test]
fn iscsi_chap_secrets_from_files_and_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let (ichap, tchap, isecret) = (
        dir.path().join("chap"),
        dir.path().join("target-chap"),
        dir.path().join("secret"),
    );
    std::fs::write(&ichap, "bench:initiator-secret-7\n").unwrap();
    std::fs::write(&tchap, "tgt:target-secret-8\n").unwrap();
    std::fs::write(&isecret, "initiator-secret-7\n").unwrap();
    let s = iscsi_server(&[
        "--chap-file",
        ichap.to_str().unwrap(),
        "--target-chap-file",
        tchap.to_str().unwrap(),
    ]);
    let uri = format!(
        "iscsi://bench%@{}@{}/iqn.2026-11.io.sanbench:ram/0\
         ?target_user=tgt&target_password_env=SB_TEST_TARGET_SECRET",
        isecret.display(),
        s.addr()
    );
    let out = sanbench()
        .args(["run", "--json", "-", "--quiet", "--time", "300ms", &uri])
        .env("SB_TEST_TARGET_SECRET", "target-secret-8")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("secret-7") && !text.contains("secret-8"));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["results"][0]["info"]["params"]["auth"], "CHAP (mutual)");
    // A wrong secret in the file fails the login (exit 1).
    std::fs::write(&isecret, "initiator-secret-0\n").unwrap();
    let out = sanbench()
        .args(["run", "--time", "300ms", &uri])
        .env("SB_TEST_TARGET_SECRET", "target-secret-8")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    drop(s);
    let missing = dir.path().join("none");
    expect_usage_error(
        &[
            "serve",
            "iscsi",
            "--size",
            "1M",
            "--chap-file",
            missing.to_str().unwrap(),
        ],
        "--chap-file",
    );
    expect_usage_error(
        &[
            "run",
            &format!("iscsi://bench%@{}@127.0.0.1:9/iqn.x:y/0", missing.display()),
        ],
        "CHAP secret file",
    );
}
