//! `admitpilot serve`: takes the command-line flags, builds a [`ServeConfig`] and runs the [`App`] until
//! SIGTERM or ctrl-c.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use admitpilot::admission::effects::ReferenceCheck;
use admitpilot::admission::server::ServerLimits;
use admitpilot::app::{shutdown_signal, App, ServeConfig, WebhookConfig, XdsAuth, XdsConfig};
use admitpilot::leader::LeaderConfig;
use admitpilot::model::decode::DecodeOptions;
use admitpilot::model::gateway_api::gateway::AddressPools;
use admitpilot::provision::Settings;
use admitpilot::provisioner::ProvisionerConfig;
use admitpilot::source::mcp::{McpAddress, McpClientAuth};
use admitpilot::source::{AdmitOptions, SourceSettings, StateLocation, StoreConfig};
use admitpilot::status::StatusScope;
use admitpilot::status_writer::StatusWriterConfig;
use admitpilot::tls::{CertSource, TlsFiles};
use admitpilot::xds::{ConnectionLimits, TlsFiles as XdsTlsFiles, TranslateFn};
use anyhow::Context;
use clap::Args;

use super::args::IngressArgs;

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

    /// Seconds between fallback checks of the certificate files (webhook and xDS); changes are normally noticed
    /// at once through file notifications on their folders.
    #[arg(long, default_value_t = 30.0, value_parser = parse_interval)]
    tls_reload_interval: f64,

    /// Without --tls-cert/--tls-key: where to write the CA of the generated self-signed certificate
    /// (default: admitpilot-webhook-ca.crt in the temp folder).
    #[arg(long, conflicts_with = "tls_cert")]
    self_signed_ca_out: Option<PathBuf>,

    /// Namespace of the higress-config ConfigMap; other ConfigMaps are allowed untouched.
    #[arg(long, default_value = "higress-system")]
    higress_namespace: String,

    /// Namespace of Istio's mesh config, the ConfigMap `istio` (its `extensionProviders` serve CUSTOM
    /// AuthorizationPolicies); other ConfigMaps there are not admitpilot's business.
    #[arg(long, default_value = "istio-system")]
    istio_namespace: String,

    /// Most webhook connections served at once.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,

    /// Seconds allowed per webhook request before it is answered with 408.
    #[arg(long, default_value_t = 30.0, value_parser = parse_interval)]
    request_timeout: f64,

    /// Seconds one review's validation may take; past it the rules stop and the object is denied as too large to
    /// check in time. Keep it well under the webhook's timeoutSeconds (chart: 10).
    #[arg(long, default_value_t = 3.0, value_parser = parse_interval)]
    review_budget: f64,

    /// Seconds a webhook client gets to finish the TLS handshake before the connection is dropped.
    #[arg(long, default_value_t = 10.0, value_parser = parse_interval)]
    handshake_timeout: f64,

    /// Seconds a webhook client gets to send a request's headers before the connection is closed; idle time
    /// between requests counts too (HTTP/1.1 keep-alive and HTTP/2).
    #[arg(long, default_value_t = 10.0, value_parser = parse_interval)]
    header_read_timeout: f64,

    /// Folder of config to load and watch: every *.yaml, *.yml and *.json below it (multi-document YAML and
    /// `kind: List` accepted; names starting with "." skipped). On duplicates the lexicographically first path wins.
    #[arg(long)]
    config_dir: Option<PathBuf>,

    /// Watch the Kubernetes API for config (in-cluster service account, else $KUBECONFIG / ~/.kube/config).
    #[arg(long)]
    kube: bool,

    /// Kubeconfig file to watch with (implies --kube).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,

    /// Subscribe to an MCP-over-xDS server (istiod's or Higress's configSources protocol: another admitpilot,
    /// Higress's controller on :15051…) and take every Istio/Higress collection it serves as config, validated
    /// like files and watched objects (invalid objects are excluded and keep their last good version).
    /// Repeatable; combines with --config-dir and --kube.
    #[arg(long, value_name = "xds://HOST:PORT")]
    mcp_source: Vec<McpAddress>,

    /// PEM CA bundle of the --mcp-source servers: connect over TLS (1.2+) and verify their certificates for the
    /// address's host. Without it the connection is plaintext.
    #[arg(long, value_name = "FILE")]
    mcp_source_ca: Option<PathBuf>,

    /// File holding a service-account token (a projected token with the server's audience) sent to the
    /// --mcp-source servers as `authorization: Bearer`, read again on every connection (rotation). Needs
    /// --mcp-source-ca.
    #[arg(long, value_name = "FILE")]
    mcp_source_token_file: Option<PathBuf>,

    /// Namespaces to watch, comma-separated (default: all namespaces). higress-config is always read from
    /// --higress-namespace.
    #[arg(long, value_delimiter = ',')]
    watch_namespaces: Vec<String>,

    /// Do not watch TLS Secrets (Gateways with credentialName then get no certificate): for clusters where
    /// admitpilot is not allowed to read Secrets.
    #[arg(long)]
    no_tls_secrets: bool,

    /// Do not watch the ConfigMaps other objects reference (BackendTLSPolicy `caCertificateRefs` then resolve to no
    /// CA and the backends they protect get no traffic; a Gateway with a `parametersRef`, its own or its class's, is
    /// not accepted): for clusters where admitpilot is not allowed to read ConfigMaps.
    #[arg(long)]
    no_referenced_configmaps: bool,

    /// Folder where the last good versions of currently invalid objects are persisted (file last-good.json), so a
    /// restarted admitpilot keeps serving them instead of dropping their routes. At most 900 KiB; objects past it
    /// are served but not persisted (logged, metric admitpilot_source_last_good_unsaved).
    #[arg(long, conflicts_with = "state_configmap")]
    state_dir: Option<PathBuf>,

    /// Like --state-dir, in the key last-good.json of this ConfigMap (NAMESPACE/NAME, e.g. admitpilot's own
    /// namespace); needs --kube. Replicas share it; only the holder of the leader Lease writes it.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    state_configmap: Option<StateLocation>,

    /// Namespace given to config objects that name none.
    #[arg(long, default_value = admitpilot::source::DEFAULT_NAMESPACE)]
    default_namespace: String,

    /// The GatewayClass controllerName whose Gateway API Gateways admitpilot serves (e.g. istio.io/gateway-controller
    /// or higress.io/gateway-controller when admitpilot replaces them).
    #[arg(long, default_value = admitpilot::model::gateway_api::DEFAULT_CONTROLLER_NAME)]
    gateway_controller_name: String,

    #[command(flatten)]
    ingress: IngressArgs,

    /// Serve what Envoy would reject instead of holding it back (the push guard off): for tests and diagnosis only;
    /// gateways then NACK such config (and a Gateway's status says so).
    #[arg(long, hide = true)]
    no_push_guard: bool,

    /// Do not write Gateway API status. By default, with --kube, the replica holding the Lease
    /// admitpilot-leader writes the status of the GatewayClasses of --gateway-controller-name, their
    /// Gateways (Programmed once every connected gateway of it acknowledged the config) and HTTPRoutes.
    /// (--istio-status is separate.)
    #[arg(long)]
    no_status: bool,

    /// Run the proxies of every Gateway of --gateway-controller-name's classes (with --kube; the leader does it):
    /// in the Gateway's namespace, a ServiceAccount, a Role that lets it read the Secrets of that namespace its
    /// config names, a ConfigMap with the Envoy bootstrap (ADS to --gateway-xds-address over TLS trusting --gateway-ca-file, with a
    /// projected token for --xds-token-audience) and the CA, a Deployment of --gateway-image and a Service of
    /// --gateway-service-type with one port per listener port; all named `<gateway>-<class>`, owned by the Gateway
    /// and kept as generated (server-side apply). A Gateway annotated `admitpilot.io/manual-deployment: "true"` is
    /// left to proxies deployed by hand.
    #[arg(long, requires_all = ["gateway_xds_address", "gateway_ca_file"])]
    provision_gateways: bool,

    /// The Envoy image of provisioned gateways.
    #[arg(long, default_value = "envoyproxy/envoy:v1.40.0")]
    gateway_image: String,

    /// `host:port` of this process's authenticated xDS port (--xds-addr with TLS and --xds-auth=token) as
    /// provisioned gateways reach it, e.g. `admitpilot.admitpilot.svc:15012`; the xDS certificate must name the
    /// host.
    #[arg(long)]
    gateway_xds_address: Option<String>,

    /// PEM CA that signed the xDS certificate (read again every 30 s and copied into every provisioned gateway's
    /// ConfigMap).
    #[arg(long)]
    gateway_ca_file: Option<PathBuf>,

    /// IP ranges (CIDRs, comma-separated) the cluster's load balancer can give provisioned gateways: a Gateway whose
    /// `spec.addresses` asks for an IP outside them is not Programmed (AddressNotUsable), and the first IP inside
    /// them is asked of its Service (`loadBalancerIP`). None: every IP is taken to be usable.
    #[arg(long, value_delimiter = ',', value_parser = parse_cidr)]
    gateway_address_pool: Vec<String>,

    /// The type of provisioned gateways' Services.
    #[arg(long, default_value = "LoadBalancer", value_parser = ["LoadBalancer", "NodePort", "ClusterIP"])]
    gateway_service_type: String,

    /// Lifetime of provisioned gateways' projected tokens, in seconds (the kubelet renews them at 80%).
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(i64).range(600..=86_400))]
    gateway_token_expiration_seconds: i64,

    /// Also give Istio objects a status, as istiod does when asked to: on Gateways, VirtualServices,
    /// DestinationRules, ServiceEntries, EnvoyFilters, AuthorizationPolicies, RequestAuthentications and
    /// Telemetries, a Reconciled condition (True once every connected gateway that selects the object serves its
    /// current generation) and validationMessages with Istio's analyzer codes (IST0101, IST0109, IST0132). Written
    /// by the leader with --kube; shown in /debug/configz in every mode.
    #[arg(long)]
    istio_status: bool,

    /// Namespace of the leader Lease admitpilot-leader, whose holder alone writes status and the --state-configmap,
    /// and of the replicas' status reports (default: $POD_NAMESPACE, else `default`).
    #[arg(long)]
    lease_namespace: Option<String>,

    /// Quiet period that ends a burst of config changes before a snapshot is published (e.g. 20ms, 0.1s).
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    debounce: Duration,

    /// Longest a config change waits for a quiet period before it is published anyway.
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    debounce_max: Duration,

    /// Address of the xDS server (gRPC ADS, SotW and Delta) that Envoy gateways connect to; MCP subscribers
    /// (istiod's or Higress's configSources, another admitpilot's --mcp-source) are served on it too.
    #[arg(long, default_value = "0.0.0.0:15010")]
    xds_addr: SocketAddr,

    /// PEM certificate chain for serving xDS over TLS (1.2+); reloaded when the file changes. Needs --xds-tls-key.
    #[arg(long, requires = "xds_tls_key")]
    xds_tls_cert: Option<PathBuf>,

    /// PEM private key for serving xDS over TLS; reloaded when the file changes. Needs --xds-tls-cert.
    #[arg(long, requires = "xds_tls_cert")]
    xds_tls_key: Option<PathBuf>,

    /// How xDS and MCP callers on --xds-addr are verified. `token`: each call carries a Kubernetes
    /// service-account token for --xds-token-audience (`authorization: Bearer`), checked with TokenReview; the
    /// node's namespace must be the token's; certificates go only to a proxy whose service account may get Secrets
    /// in its namespace, or that very Secret (asked by name), the MCP feed only to one that may list
    /// VirtualServices (SubjectAccessReview). Needs
    /// --xds-tls-cert/--xds-tls-key. `none`: nobody is verified and no Kubernetes Secret is sent (see
    /// --xds-unauthenticated-secrets). Default: token with --kube/--kubeconfig, none otherwise.
    #[arg(long, value_name = "token|none")]
    xds_auth: Option<XdsAuthMode>,

    /// Audience the service-account tokens of xDS callers must carry (--xds-auth=token).
    #[arg(long, default_value = "admitpilot")]
    xds_token_audience: String,

    /// Also serve xDS in plaintext on this address (istiod's 15010): nobody is verified and no Kubernetes Secret
    /// is ever sent on it.
    #[arg(long)]
    xds_plaintext_addr: Option<SocketAddr>,

    /// With --xds-auth=none: send Gateways' certificates and private keys (Kubernetes Secrets) to any xDS client
    /// that asks. For a folder of config on a trusted machine only: refused with --kube/--kubeconfig and with
    /// --xds-tls-cert.
    #[arg(long)]
    xds_unauthenticated_secrets: bool,

    /// Most connections open at once on each xDS port; past it a new connection is closed at once (counted in
    /// admitpilot_xds_limits_total{limit="connections"}).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    xds_max_connections: u32,

    /// Most xDS calls open at once on one connection (Envoy and istiod open one).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    xds_max_streams_per_connection: u32,

    /// Time a connection to an xDS port has to start a call that passes authentication (any call on an open
    /// port); after it, the connection is closed.
    #[arg(long, default_value = "10s", value_parser = parse_timeout)]
    xds_pre_auth_timeout: Duration,

    /// Time an xDS connection may stay without any open call before it is closed.
    #[arg(long, default_value = "60s", value_parser = parse_timeout)]
    xds_idle_timeout: Duration,

    /// How often an open authenticated xDS or MCP stream's token and access are checked again (TokenReview and
    /// SubjectAccessReview answers are reused no longer): a revoked permission ends the stream within twice this.
    #[arg(long, default_value = "30s", value_parser = parse_timeout)]
    xds_auth_recheck_interval: Duration,

    /// PEM CA bundle: xDS clients must present a certificate it signed (mTLS). Needs --xds-tls-cert.
    #[arg(long, requires = "xds_tls_cert")]
    xds_client_ca: Option<PathBuf>,

    /// What the webhook does when an object names what the config lacks (a Gateway, host, subset, Secret…;
    /// reported with Istio's analyzer codes): warn (admit with a warning), deny, or off.
    #[arg(long, default_value = "warn", value_parser = clap::value_parser!(ReferenceCheck), value_name = "warn|deny|off")]
    reference_check: ReferenceCheck,

    /// Adds a do-nothing POST /noop route to the webhook (for measuring the transport; benchmarks only).
    #[arg(long, hide = true)]
    bench_noop: bool,
}

/// Values of `--xds-auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum XdsAuthMode {
    /// Service-account tokens checked with TokenReview.
    Token,
    /// Nobody is verified.
    None,
}

fn parse_interval(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 86_400.0 => Ok(seconds),
        _ => Err(format!(
            "`{text}` is not a number of seconds between 0 and 86400"
        )),
    }
}

/// Parses a positive Go duration (`500ms`, `10s`) of at most one hour.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    match parse_duration(text) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(format!(
            "`{text}` is not a duration between 1ms and 1h (a number with a unit: ms, s, m, h; e.g. 10s)"
        )),
    }
}

/// A CIDR of --gateway-address-pool, checked.
fn parse_cidr(value: &str) -> Result<String, String> {
    AddressPools::parse(&[value.to_string()]).map(|_| value.to_string())
}

/// Parses a Go duration (`20ms`, `1.5s`, `0`) of at most one hour.
fn parse_duration(text: &str) -> Result<Duration, String> {
    match admitpilot::model::duration::parse_duration_nanos(text).map(u64::try_from) {
        Some(Ok(nanos)) if nanos <= 3_600_000_000_000 => Ok(Duration::from_nanos(nanos)),
        _ => Err(format!(
            "`{text}` is not a duration between 0 and 1h (a number with a unit: ms, s, m, h; e.g. 20ms)"
        )),
    }
}

impl ServeArgs {
    /// With --kube: this replica's place in the leader election (the leader writes status and the last-good
    /// ConfigMap).
    fn leader_config(&self) -> Option<LeaderConfig> {
        (self.kube || self.kubeconfig.is_some()).then(|| LeaderConfig {
            namespace: self
                .lease_namespace
                .clone()
                .or_else(|| std::env::var("POD_NAMESPACE").ok())
                .unwrap_or_else(|| "default".into()),
            identity: std::env::var("POD_NAME").unwrap_or_else(|_| {
                let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "admitpilot".into());
                format!("{host}-{}", std::process::id())
            }),
        })
    }

    /// The status writer's settings: with --kube, unless there is no status to write (--no-status without
    /// --istio-status).
    fn status_writer_config(&self, leader: Option<&LeaderConfig>) -> Option<StatusWriterConfig> {
        let leader = leader?;
        (!self.no_status || self.istio_status).then(|| StatusWriterConfig {
            scope: StatusScope {
                gateway_api: !self.no_status,
                ..self.status_scope()
            },
            namespace: leader.namespace.clone(),
            identity: leader.identity.clone(),
            interval: Duration::from_millis(500),
            max_writes: 100,
        })
    }

    /// --gateway-address-pool (each CIDR checked when parsed).
    fn address_pools(&self) -> AddressPools {
        AddressPools::parse(&self.gateway_address_pool).unwrap_or_default()
    }

    /// The provisioner's settings: with --kube and --provision-gateways.
    fn provisioner_config(&self, leader: Option<&LeaderConfig>) -> Option<ProvisionerConfig> {
        let leader = leader?;
        if !self.provision_gateways {
            return None;
        }
        Some(ProvisionerConfig {
            controller: self.gateway_controller_name.clone(),
            settings: Settings {
                image: self.gateway_image.clone(),
                xds_address: self.gateway_xds_address.clone()?,
                token_audience: self.xds_token_audience.clone(),
                token_expiration_seconds: self.gateway_token_expiration_seconds,
                ca_pem: String::new(),
                service_type: self.gateway_service_type.clone(),
                address_pools: self.address_pools(),
            },
            ca_file: self.gateway_ca_file.clone()?,
            leader: leader.clone(),
            namespaces: self
                .watch_namespaces
                .iter()
                .map(|ns| ns.trim().to_string())
                .filter(|ns| !ns.is_empty())
                .collect(),
        })
    }

    /// Which objects get a status (in /debug/configz): the Gateway API objects of --gateway-controller-name and,
    /// with --istio-status, Istio objects.
    fn status_scope(&self) -> StatusScope {
        StatusScope {
            address_pools: self.address_pools(),
            controller: self.gateway_controller_name.clone(),
            gateway_api: true,
            istio_domain_suffix: self
                .istio_status
                .then(|| admitpilot::translate::Options::default().domain_suffix),
        }
    }

    /// Builds the source settings from the flags.
    fn source_settings(&self) -> SourceSettings {
        SourceSettings {
            config_dir: self.config_dir.clone(),
            kube: self.kube,
            kubeconfig: self.kubeconfig.clone(),
            mcp_sources: self.mcp_source.clone(),
            mcp_auth: McpClientAuth {
                ca: self.mcp_source_ca.clone(),
                token_file: self.mcp_source_token_file.clone(),
            },
            watch_namespaces: self
                .watch_namespaces
                .iter()
                .map(|ns| ns.trim().to_string())
                .filter(|ns| !ns.is_empty())
                .collect(),
            instance: std::env::var("POD_NAME").ok(),
            tls_secrets: !self.no_tls_secrets,
            referenced_configmaps: !self.no_referenced_configmaps,
            admit: Some(AdmitOptions {
                decode: DecodeOptions {
                    higress_namespace: self.higress_namespace.clone(),
                    mesh_namespace: self.istio_namespace.clone(),
                    ..DecodeOptions::default()
                },
                default_namespace: self.default_namespace.clone(),
            }),
            store: StoreConfig {
                debounce: self.debounce,
                debounce_max: self.debounce_max.max(self.debounce),
            },
            state: self
                .state_dir
                .clone()
                .map(StateLocation::Dir)
                .or_else(|| self.state_configmap.clone()),
        }
    }

    /// The xDS server settings from the flags.
    fn xds_config(&self) -> anyhow::Result<XdsConfig> {
        let tls = match (&self.xds_tls_cert, &self.xds_tls_key) {
            (Some(cert), Some(key)) => Some(XdsTlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.xds_client_ca.clone(),
            }),
            _ => None,
        };
        let kube = self.kube || self.kubeconfig.is_some();
        let mode = self.xds_auth.unwrap_or(if kube {
            XdsAuthMode::Token
        } else {
            XdsAuthMode::None
        });
        if self.xds_unauthenticated_secrets && kube {
            anyhow::bail!(
                "--xds-unauthenticated-secrets cannot be used with --kube/--kubeconfig: it would hand every \
                 Kubernetes Secret's private key to any xDS client that connects. In a cluster, gateways prove who \
                 they are (--xds-auth=token, the default) and get the Secrets their service account may read"
            );
        }
        if self.xds_unauthenticated_secrets && tls.is_some() {
            anyhow::bail!(
                "--xds-unauthenticated-secrets cannot be used with --xds-tls-cert: a TLS port is meant for the \
                 network, and this flag would hand private keys to any client on it. Use --xds-auth=token, or keep \
                 the flag for a plaintext port on a trusted machine"
            );
        }
        let auth = match mode {
            XdsAuthMode::Token if self.xds_unauthenticated_secrets => anyhow::bail!(
                "--xds-unauthenticated-secrets needs --xds-auth=none: with tokens, secrets go to the proxies allowed \
                 to read them"
            ),
            XdsAuthMode::Token => XdsAuth::Token {
                audience: self.xds_token_audience.clone(),
                kubeconfig: self.kubeconfig.clone(),
                recheck: self.xds_auth_recheck_interval,
            },
            XdsAuthMode::None => XdsAuth::Open {
                serve_secrets: self.xds_unauthenticated_secrets,
            },
        };
        Ok(XdsConfig {
            addr: self.xds_addr,
            tls,
            auth,
            plaintext_addr: self.xds_plaintext_addr,
            reload_interval: Duration::from_secs_f64(self.tls_reload_interval),
            limits: ConnectionLimits {
                max_connections: self.xds_max_connections as usize,
                max_streams: self.xds_max_streams_per_connection as usize,
                pre_auth_timeout: self.xds_pre_auth_timeout,
                idle_timeout: self.xds_idle_timeout,
                ..ConnectionLimits::default()
            },
        })
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
            review_budget: Duration::from_secs_f64(self.review_budget),
            handshake_timeout: Duration::from_secs_f64(self.handshake_timeout),
            header_read_timeout: Duration::from_secs_f64(self.header_read_timeout),
            ..ServerLimits::default()
        };
        ServeConfig {
            webhook: WebhookConfig {
                addr: self.webhook_addr,
                cert,
                reload_interval: Duration::from_secs_f64(self.tls_reload_interval),
                decode: DecodeOptions {
                    higress_namespace: self.higress_namespace,
                    mesh_namespace: self.istio_namespace,
                    ..DecodeOptions::default()
                },
                limits,
                bench_noop: self.bench_noop,
                reference_check: self.reference_check,
            },
            admin_addr: self.admin_addr,
        }
    }
}

/// Runs the server until SIGTERM or ctrl-c.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let sources = args.source_settings();
    sources.mcp_auth.check().map_err(anyhow::Error::msg)?;
    let xds = args.xds_config()?;
    let gateway_controller = args.gateway_controller_name.clone();
    let ingress = args.ingress.options();
    let push_guard = !args.no_push_guard;
    let leader = args.leader_config();
    let status = args.status_writer_config(leader.as_ref());
    let provisioner = args.provisioner_config(leader.as_ref());
    let status_scope = args.status_scope();
    let config = args.into_config();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let mut translate = TranslateFn::caching(admitpilot::translate::Options {
            gateway_controller,
            ingress,
            ..admitpilot::translate::Options::default()
        });
        if !push_guard {
            tracing::warn!(
                "--no-push-guard: config Envoy would reject is served (tests and diagnosis only)"
            );
            translate = translate.unguarded();
        }
        let mut app = App::new(config)
            .sources(sources)
            .xds(xds, translate)
            .status_view(status_scope);
        if let Some(leader) = leader {
            app = app.leader(leader);
        }
        if let Some(status) = status {
            app = app.status_writer(status);
        }
        if let Some(provisioner) = provisioner {
            app = app.provisioner(provisioner);
        }
        let running = app.start().await?;
        running.run_until(shutdown_signal()).await
    })?;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve_args(flags: &[&str]) -> Result<ServeArgs, clap::Error> {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let args = std::iter::once("serve").chain(flags.iter().copied());
        <Cli as clap::Parser>::try_parse_from(args).map(|cli| cli.serve)
    }

    /// Private keys to anyone is for a folder on a trusted machine: never with a cluster, never on a TLS port.
    #[test]
    fn unauthenticated_secrets_are_refused_with_a_cluster_or_a_tls_port() {
        let error = |flags: &[&str]| match serve_args(flags).map(|args| args.xds_config()) {
            Ok(Err(error)) => error.to_string(),
            other => panic!("{flags:?} was accepted: {:?}", other.map(|c| c.map(|_| ()))),
        };
        let kube = error(&["--kube", "--xds-auth=none", "--xds-unauthenticated-secrets"]);
        assert!(kube.contains("cannot be used with --kube"), "{kube}");
        let tls = error(&[
            "--xds-auth=none",
            "--xds-unauthenticated-secrets",
            "--xds-tls-cert=c.pem",
            "--xds-tls-key=k.pem",
        ]);
        assert!(tls.contains("cannot be used with --xds-tls-cert"), "{tls}");
        let folder = serve_args(&["--config-dir=x", "--xds-unauthenticated-secrets"]);
        assert!(folder.is_ok_and(|args| args.xds_config().is_ok()));
    }

    /// The flags' defaults are the limits' defaults.
    #[test]
    fn xds_limit_flags_default_to_the_limits_defaults() {
        let limits = serve_args(&[])
            .map(|args| args.xds_config().map(|config| config.limits))
            .ok()
            .and_then(Result::ok);
        assert_eq!(limits, Some(ConnectionLimits::default()));
    }

    #[test]
    fn parses_durations_with_units() {
        assert_eq!(parse_duration("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("20").is_err());
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("2h").is_err());
    }
}
