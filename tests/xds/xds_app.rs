//! `serve` wiring: the App starts the xDS server next to the webhook, serves ADS on its address, exports xDS
//! metrics and shows connected proxies on the admin server's `/debug/syncz`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::serve;
use support::xds_harness as harness;

use std::sync::Arc;

use admitpilot::app::{App, XdsAuth, XdsConfig};
use admitpilot::model::Snapshot;
use admitpilot::translate::{GatewayResources, Proxy};
use admitpilot::xds::TranslateFn;
use harness::*;
use serve::serve_config;

#[tokio::test]
async fn app_serves_xds_and_syncz() {
    let dir = tempfile::tempdir().unwrap();
    let config = serve_config(dir.path());
    let (snapshots, receiver) = tokio::sync::watch::channel(Arc::new(Snapshot {
        version: 1,
        ..Snapshot::default()
    }));
    let translate = TranslateFn::stateless(|snapshot: &Snapshot, _: &Proxy| GatewayResources {
        clusters: vec![eds_cluster(&format!("v{}", snapshot.version))],
        ..Default::default()
    });
    let xds = XdsConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        tls: None,
        auth: XdsAuth::Open {
            serve_secrets: false,
        },
        plaintext_addr: None,
        reload_interval: std::time::Duration::from_secs(30),
        limits: admitpilot::xds::ConnectionLimits::default(),
    };
    let running = App::new(config)
        .snapshots(receiver)
        .xds(xds, translate)
        .start()
        .await
        .unwrap();
    let xds_addr = running.xds_addr.unwrap();

    let mut client = SotwClient::connect(&format!("http://{xds_addr}")).await;
    client
        .request(
            Some(node("router~10.0.0.1~gw-0.edge~edge.svc.cluster.local")),
            CDS,
            &[],
            "",
            "",
        )
        .await;
    let first = client.next().await;
    assert_eq!(sotw_names(&first), ["v1"]);
    client.ack(&first, &[]).await;
    snapshots.send_replace(Arc::new(Snapshot {
        version: 7,
        objects: Default::default(),
    }));
    let pushed = client.next().await;
    assert_eq!(sotw_names(&pushed), ["v7"]);
    client.ack(&pushed, &[]).await;

    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let admin = format!("http://{}", running.admin_addr);
    let syncz: serde_json::Value = http
        .get(format!("{admin}/debug/syncz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let proxy = &syncz[0];
    assert_eq!(proxy["namespace"], "edge");
    assert_eq!(proxy["api"], "sotw");
    assert_eq!(proxy["snapshot_version"], 7);
    assert_eq!(
        proxy["types"]["cds"]["sent_version"],
        pushed.version_info.as_str()
    );
    let metrics = serve::get_text(&http, &format!("{admin}/metrics")).await;
    assert!(
        metrics.contains("admitpilot_xds_connected_proxies{api=\"sotw\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("admitpilot_xds_pushes_total{type=\"cds\"} 2"),
        "{metrics}"
    );

    drop(client);
    running.shutdown().await.unwrap();
}
