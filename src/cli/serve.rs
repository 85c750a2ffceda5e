//! `admitpilot serve`: takes the command-line flags, builds a [`ServeConfig`] and runs the [`App`] until
//! SIGTERM or ctrl-c.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use admitpilot::admission::server::ServerLimits;
use admitpilot::admission::tls::{CertSource, TlsFiles};
use admitpilot::app::{shutdown_signal, App, ServeConfig, WebhookConfig, XdsConfig};
use admitpilot::model::decode::DecodeOptions;
use admitpilot::model::Snapshot;
use admitpilot::xds::{TlsFiles as XdsTlsFiles, TranslateFn};
use anyhow::Context;
use clap::Args;
use tokio::sync::watch;

/// Arguments of `admitpilot serve`. Other subsystems add their flags here and carry them into [`ServeConfig`].
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address of the HTTPS admission webhook.
    #[arg(long, default_value = "0.0.0.0:15017")]
    webhook_addr: SocketAddr,

    /// Address of the plain-HTTP admin server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "0.0.0.0:15014")]
    admin_addr: SocketAddr,

    /// PEM certificate chain for the webhook; reloaded when the file changes. Needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// PEM private key for the webhook; reloaded when the file changes. Needs --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Seconds between checks of the certificate files for changes.
    #[arg(long, default_value_t = 5.0, value_parser = parse_interval)]
    tls_reload_interval: f64,

    /// Without --tls-cert/--tls-key: where to write the CA of the generated self-signed certificate
    /// (default: admitpilot-webhook-ca.crt in the temp folder).
    #[arg(long, conflicts_with = "tls_cert")]
    self_signed_ca_out: Option<PathBuf>,

    /// Namespace of the higress-config ConfigMap; other ConfigMaps are allowed untouched.
    #[arg(long, default_value = "higress-system")]
    higress_namespace: String,

    /// Most webhook connections served at once.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,

    /// Seconds allowed per webhook request before it is answered with 408.
    #[arg(long, default_value_t = 30.0, value_parser = parse_interval)]
    request_timeout: f64,

    /// Address of the xDS server (gRPC ADS, SotW and Delta) that Envoy gateways connect to.
    #[arg(long, default_value = "0.0.0.0:15010")]
    xds_addr: SocketAddr,

    /// PEM certificate chain for serving xDS over TLS. Needs --xds-tls-key.
    #[arg(long, requires = "xds_tls_key")]
    xds_tls_cert: Option<PathBuf>,

    /// PEM private key for serving xDS over TLS. Needs --xds-tls-cert.
    #[arg(long, requires = "xds_tls_cert")]
    xds_tls_key: Option<PathBuf>,

    /// PEM CA bundle: xDS clients must present a certificate it signed (mTLS). Needs --xds-tls-cert.
    #[arg(long, requires = "xds_tls_cert")]
    xds_client_ca: Option<PathBuf>,

    /// Adds a do-nothing POST /noop route to the webhook (for measuring the transport; benchmarks only).
    #[arg(long, hide = true)]
    bench_noop: bool,
}

fn parse_interval(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 86_400.0 => Ok(seconds),
        _ => Err(format!(
            "`{text}` is not a number of seconds between 0 and 86400"
        )),
    }
}

impl ServeArgs {
    /// The xDS server settings from the flags.
    fn xds_config(&self) -> XdsConfig {
        let tls = match (&self.xds_tls_cert, &self.xds_tls_key) {
            (Some(cert), Some(key)) => Some(XdsTlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.xds_client_ca.clone(),
            }),
            _ => None,
        };
        XdsConfig {
            addr: self.xds_addr,
            tls,
        }
    }

    /// Builds the process configuration from the flags.
    fn into_config(self) -> ServeConfig {
        let cert = match (self.tls_cert, self.tls_key) {
            (Some(cert), Some(key)) => CertSource::Files(TlsFiles { cert, key }),
            _ => CertSource::SelfSigned {
                ca_out: self
                    .self_signed_ca_out
                    .unwrap_or_else(|| std::env::temp_dir().join("admitpilot-webhook-ca.crt")),
            },
        };
        let limits = ServerLimits {
            max_connections: self.max_connections.max(1),
            request_timeout: Duration::from_secs_f64(self.request_timeout),
            ..ServerLimits::default()
        };
        ServeConfig {
            webhook: WebhookConfig {
                addr: self.webhook_addr,
                cert,
                reload_interval: Duration::from_secs_f64(self.tls_reload_interval),
                decode: DecodeOptions {
                    higress_namespace: self.higress_namespace,
                    ..DecodeOptions::default()
                },
                limits,
                bench_noop: self.bench_noop,
            },
            admin_addr: self.admin_addr,
        }
    }
}

/// Runs the server until SIGTERM or ctrl-c.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let xds = args.xds_config();
    let config = args.into_config();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        // Until a config source is wired in, the snapshot stays empty (the sender is dropped: no changes).
        let (_, snapshots) = watch::channel(Arc::new(Snapshot::default()));
        let translate: TranslateFn = Arc::new(admitpilot::translate::translate);
        let running = App::new(config)
            .xds(xds, snapshots, translate)
            .start()
            .await?;
        running.run_until(shutdown_signal()).await
    })?;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}
