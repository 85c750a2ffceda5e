//! `serve` with a config folder: the sources start with the app, `/readyz` reports "sources synced",
//! `/debug/configz` serves the current snapshot and `/metrics` carries the source metrics. Waits poll with a
//! deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use admitpilot::app::App;
use admitpilot::source::{SourceSettings, StoreConfig};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_the_folder_source_and_exposes_configz() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    std::fs::create_dir(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("vs.yaml"),
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: web}\nspec:\n  hosts: [example.com]\n  http:\n  - route:\n    - destination: {host: web}\n",
    )
    .unwrap();
    let config = support::serve::serve_config(dir.path());
    let settings = SourceSettings {
        config_dir: Some(config_dir.clone()),
        store: StoreConfig {
            debounce: Duration::from_millis(5),
            debounce_max: Duration::from_millis(50),
        },
        ..SourceSettings::default()
    };
    let running = App::new(config).sources(settings).start().await.unwrap();
    let mut snapshots = running.snapshots.clone().expect("no snapshot channel");
    support::wait_for(&mut snapshots, |s| s.objects.len() == 1).await;

    let base = format!("http://{}", running.admin_addr);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let start = tokio::time::Instant::now();
    let readyz = loop {
        let response = http.get(format!("{base}/readyz")).send().await.unwrap();
        let ok = response.status() == 200;
        let text = response.text().await.unwrap();
        if ok {
            break text;
        }
        assert!(start.elapsed() < support::DEADLINE, "never ready: {text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(readyz.contains("[+] sources synced"), "{readyz}");

    let configz: Value = http
        .get(format!("{base}/debug/configz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(configz["version"], 1);
    assert_eq!(configz["objects"][0]["name"], "web");
    assert_eq!(configz["objects"][0]["namespace"], "default");
    assert_eq!(
        configz["objects"][0]["object"]["spec"]["hosts"][0],
        "example.com"
    );

    let metrics = support::serve::get_text(&http, &format!("{base}/metrics")).await;
    assert!(
        metrics.contains("admitpilot_source_objects{kind=\"VirtualService\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("admitpilot_source_snapshot_publishes_total 1"));
    running.shutdown().await.unwrap();
}
