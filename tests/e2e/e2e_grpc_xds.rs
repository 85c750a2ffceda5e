//! End-to-end with a proxyless gRPC client (python grpcio): it resolves `xds:///echo` through our LDS (API
//! listener), CDS (EDS cluster), EDS (weighted locality) and makes a real RPC to a gRPC server on 127.0.0.1;
//! CSDS reports every resource ACKED. Skips with a message when python/grpcio is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::xds_harness as harness;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use admitpilot::translate::GatewayResources;
use harness::*;

struct Client {
    child: Child,
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_line(reader: &mut BufReader<ChildStdout>) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    line.trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_client_resolves_and_calls_through_xds() {
    let Some(python) = envoy::python_with("grpc, grpc_csds, grpc_health") else {
        return;
    };
    let server = TestServer::start(GatewayResources::default()).await;
    let bootstrap = serde_json::json!({
        "xds_servers": [{
            "server_uri": format!("127.0.0.1:{}", server.addr.port()),
            "channel_creds": [{ "type": "insecure" }],
            "server_features": ["xds_v3"]
        }],
        "node": {
            "id": "sidecar~127.0.0.1~grpc-client.apps~apps.svc.cluster.local",
            "cluster": "test",
            "locality": { "zone": "local" }
        }
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/grpc_xds_client.py");
    let child = Command::new(python)
        .arg(script)
        .arg("echo")
        .env("GRPC_XDS_BOOTSTRAP_CONFIG", bootstrap.to_string())
        .env_remove("GRPC_XDS_BOOTSTRAP")
        .env("no_proxy", "*")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut client = Client { child };
    let mut stdout = BufReader::new(client.child.stdout.take().unwrap());
    let mut stdin = client.child.stdin.take().unwrap();

    let backend = tokio::task::block_in_place(|| read_line(&mut stdout));
    let port: u16 = backend
        .strip_prefix("BACKEND ")
        .unwrap_or_else(|| panic!("unexpected output {backend:?}"))
        .parse()
        .unwrap();
    server.set(GatewayResources {
        listeners: vec![api_listener("echo", "echo")],
        clusters: vec![eds_cluster("echo")],
        endpoints: vec![endpoints("echo", &[port])],
        ..Default::default()
    });
    writeln!(stdin, "GO").unwrap();
    stdin.flush().unwrap();

    let lines: Vec<String> = tokio::task::block_in_place(|| {
        let mut lines = Vec::new();
        loop {
            let line = read_line(&mut stdout);
            if line.is_empty() {
                break;
            }
            lines.push(line);
        }
        lines
    });
    assert!(lines.iter().any(|l| l == "RESULT SERVING"), "{lines:?}");
    for kind in [
        "Listener echo",
        "Cluster echo",
        "ClusterLoadAssignment echo",
    ] {
        assert!(
            lines.iter().any(|l| l == &format!("CSDS {kind} ACKED")),
            "{kind} not ACKED: {lines:?}"
        );
    }
    let status = server.server.status().list();
    let nacks: Vec<_> = status
        .iter()
        .flat_map(|c| c.types.values())
        .filter_map(|t| t.last_nack.as_ref())
        .collect();
    assert!(nacks.is_empty(), "{nacks:?}");
    drop(client);
    server.shutdown().await;
}
