//! `admitpilot serve` as a process: starts with a self-signed certificate, logs where its CA is, answers a
//! review over HTTPS, reports ready, and exits 0 on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the server if the test ends before it does.
struct ServerGuard(Child);

impl Drop for ServerGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn serve_runs_with_a_self_signed_cert_and_stops_on_sigterm() {
    if Command::new("kill").arg("-l").output().is_err() {
        println!("skipped: no `kill` command to send SIGTERM with");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    let (webhook_port, admin_port) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_admitpilot"))
        .args(["--log-format", "json", "serve"])
        .args(["--webhook-addr", &format!("127.0.0.1:{webhook_port}")])
        .args(["--admin-addr", &format!("127.0.0.1:{admin_port}")])
        .arg("--self-signed-ca-out")
        .arg(&ca)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = ServerGuard(child);

    let deadline = Instant::now() + Duration::from_secs(30);
    let ready_url = format!("http://127.0.0.1:{admin_port}/readyz");
    loop {
        if let Ok(response) = reqwest::get(&ready_url).await {
            if response.status() == 200 {
                break;
            }
        }
        assert!(Instant::now() < deadline, "server never became ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&ca).unwrap()).unwrap())
        .build()
        .unwrap();
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "cli", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "DELETE"},
    });
    let answer: serde_json::Value = client
        .post(format!("https://localhost:{webhook_port}/admitpilot"))
        .json(&review)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["response"]["allowed"], true);

    let status = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(exit) = server.0.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut logs = String::new();
    server
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    assert!(exit.success(), "exit {exit:?}; logs:\n{logs}");
    // JSON log lines, one of which names the CA file.
    let ca_line = logs
        .lines()
        .find(|line| line.contains("self-signed"))
        .unwrap_or_else(|| panic!("no self-signed notice in:\n{logs}"));
    let parsed: serde_json::Value = serde_json::from_str(ca_line).unwrap();
    assert_eq!(parsed["ca"], ca.to_str().unwrap());
    assert!(logs.contains("SIGTERM received"), "{logs}");
}
