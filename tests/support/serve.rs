//! `serve` configuration for app tests: the webhook and the admin server on 127.0.0.1 port 0, a self-signed
//! certificate whose CA is written into the given folder, default decoding and limits.

use std::path::Path;
use std::time::Duration;

use admitpilot::admission::server::ServerLimits;
use admitpilot::app::{ServeConfig, WebhookConfig};
use admitpilot::model::decode::DecodeOptions;
use admitpilot::tls::CertSource;

/// Builds the test `ServeConfig`; the self-signed CA goes to `dir/ca.crt`.
pub fn serve_config(dir: &Path) -> ServeConfig {
    ServeConfig {
        webhook: WebhookConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: CertSource::SelfSigned {
                ca_out: dir.join("ca.crt"),
            },
            reload_interval: Duration::from_secs(5),
            decode: DecodeOptions::default(),
            limits: ServerLimits::default(),
            bench_noop: false,
            reference_check: Default::default(),
        },
        admin_addr: "127.0.0.1:0".parse().unwrap(),
    }
}

/// GETs `url` and returns the body as text (the admin endpoints: `/metrics`, `/debug/*`).
pub async fn get_text(http: &reqwest::Client, url: &str) -> String {
    http.get(url).send().await.unwrap().text().await.unwrap()
}
