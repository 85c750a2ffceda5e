//! AuthorizationPolicy semantics as Istio's generator gives them (pilot/pkg/security/authz/{builder,model,matcher}),
//! checked end to end: the real `admitpilot serve --config-dir` binary, a real Envoy 1.40 (SotW, default
//! `initial_fetch_timeout`) and a backend on 127.0.0.1, real HTTP (and TLS with client certificates) through Envoy.
//! Path templates (`{*}`, `{**}`) match without crashing Envoy, and a template Envoy cannot parse is held back;
//! method wildcards; request principals split at the last `/`; the mesh config's root namespace (read live) and
//! path normalization; hosts against the whole authority; peer principals, namespaces and bare service accounts on
//! a MUTUAL server; `istio.io/dry-run` read as Go's `strconv.ParseBool`; `experimental.envoy.filters.*`
//! conditions on another filter's dynamic metadata; `ports` as the port Envoy listens on. Every `*update_rejected`
//! stat stays 0 and Envoy keeps running.
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::jwt;
use support::pipeline;

use std::time::Duration;

use envoy::*;
use pipeline::*;
use serde_json::{json, Value};

const NODE_ID: &str = "router~127.0.0.1~gw-istio.default~default.svc.cluster.local";

/// A gateway (`istio: ingressgateway` in `default`) with its config folder, serving through a real Envoy.
struct Gateway {
    /// `http://127.0.0.1:<port>` of the gateway's HTTP server.
    base: String,
    dir: tempfile::TempDir,
    envoy: EnvoyProcess,
    admitpilot: Admitpilot,
    _backend: Backend,
}

impl Gateway {
    /// Starts admitpilot on a catch-all config folder holding `files` too, and Envoy (`envoy_id`) on it; `None`
    /// when Envoy is not installed.
    async fn start(envoy_id: u32, files: &[(&str, String)]) -> Option<Gateway> {
        let binary = envoy_binary()?;
        let backend = Backend::start("backend").await;
        let (port, dir) = catch_all_config_dir(backend.port);
        for (name, text) in files {
            write(dir.path(), name, text);
        }
        let admitpilot =
            Admitpilot::start_with_args(dir.path(), &["--xds-unauthenticated-secrets"]).await;
        let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID)
            .replace("app: e2e", "istio: ingressgateway");
        let envoy = EnvoyProcess::start(&binary, &bootstrap, envoy_id).await;
        let gateway = Gateway {
            base: format!("http://127.0.0.1:{port}"),
            dir,
            envoy,
            admitpilot,
            _backend: backend,
        };
        wait_for_response(&unpooled_client(), &gateway.url("/ready"), 200, "backend").await;
        Some(gateway)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn write(&self, name: &str, text: &str) {
        write(self.dir.path(), name, text);
    }

    /// Envoy rejected nothing and is still running (its stats answer).
    async fn assert_healthy(&self, step: &str) {
        self.envoy.assert_nothing_rejected(step).await;
    }
}

/// An AuthorizationPolicy `<namespace>/<name>`; `selector` adds the gateway's selector.
fn policy(namespace: &str, name: &str, selector: bool, spec: Value) -> String {
    let mut spec = spec;
    if selector {
        spec["selector"] = json!({"matchLabels": {"istio": "ingressgateway"}});
    }
    yaml(&json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "AuthorizationPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }))
}

/// The `istio` mesh ConfigMap in `istio-system` holding `mesh`.
fn mesh_config(mesh: &str) -> String {
    yaml(&json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "istio", "namespace": "istio-system"},
        "data": {"mesh": mesh},
    }))
}

fn yaml(object: &Value) -> String {
    serde_yaml_ng::to_string(object).unwrap()
}

/// Sends the request `make` builds until it answers `status` (panics after [`CONVERGE`]).
async fn wait_status(what: &str, status: u16, make: impl Fn() -> reqwest::RequestBuilder) {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let last = match make().send().await {
            Ok(response) if response.status().as_u16() == status => return,
            Ok(response) => Some(response.status().as_u16()),
            Err(error) => Some(error.status().map_or(0, |s| s.as_u16())),
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} never answered {status}; last: {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The status of the request `request` (panics when it fails).
async fn status(request: reqwest::RequestBuilder) -> u16 {
    request.send().await.unwrap().status().as_u16()
}

/// `{*}` and `{**}` become Envoy's `*` and `**` (Istio's `matcher.PathTemplateMatcher`): Envoy loads them and
/// matches one segment or the rest. Written as given, Envoy aborts on the listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_templates_match_without_crashing_envoy() {
    let deny = policy(
        "default",
        "deny-templates",
        true,
        json!({"action": "DENY", "rules": [{"to": [{"operation": {
            "paths": ["/admin/{**}", "/files/{*}/raw"]}}]}]}),
    );
    let Some(gw) = Gateway::start(55_100, &[("deny.yaml", deny)]).await else {
        return;
    };
    let http = unpooled_client();
    wait_status("/admin/x/y", 403, || http.get(gw.url("/admin/x/y"))).await;
    assert_eq!(status(http.get(gw.url("/files/a/raw"))).await, 403);
    assert_eq!(status(http.get(gw.url("/files/a/b/raw"))).await, 200);
    assert_eq!(status(http.get(gw.url("/administrator"))).await, 200);
    assert_eq!(status(http.get(gw.url("/api/x"))).await, 200);
    gw.assert_healthy("path templates").await;
}

/// A template Istio admits but Envoy cannot parse (`=` in a literal, which Envoy's URI template grammar leaves
/// out) is denied by the webhook's effect check, naming the gateway, and left out by the push guard (the policy is excluded, counted in `admitpilot_xds_excluded_objects_total`):
/// Envoy keeps running, rejects nothing, and gets the rest of the config (another DENY written with it applies).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_envoy_cannot_parse_is_held_back() {
    let Some(gw) = Gateway::start(55_110, &[]).await else {
        return;
    };
    let http = unpooled_client();
    let bad = policy(
        "default",
        "bad-template",
        true,
        json!({"action": "DENY", "rules": [{"to": [{"operation": {"paths": ["/a=b/{*}"]}}]}]}),
    );
    // The webhook denies it, naming the gateway.
    let review = gw
        .admitpilot
        .review(serde_yaml_ng::from_str(&bad).unwrap())
        .await;
    assert_eq!(review["allowed"], false, "{review}");
    let message = review["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("would be rejected by gateway default {istio=ingressgateway}")
            && message.contains("URI template \"/a=b/*\""),
        "{message}"
    );
    // Written into the folder anyway (as when the webhook is down), the push guard leaves it out.
    gw.write("bad.yaml", &bad);
    gw.write(
        "good.yaml",
        &policy(
            "default",
            "good",
            true,
            json!({"action": "DENY", "rules": [{"to": [{"operation": {"paths": ["/good*"]}}]}]}),
        ),
    );
    wait_status("/good", 403, || http.get(gw.url("/good"))).await;
    gw.admitpilot
        .wait_for_admin(
            "/metrics",
            "the push guard leaving the policy out",
            |text| {
                text.lines().any(|line| {
                    line.starts_with("admitpilot_xds_excluded_objects_total")
                        && !line.ends_with(" 0")
                })
            },
        )
        .await;
    assert_eq!(status(http.get(gw.url("/a=b/x"))).await, 200);
    gw.assert_healthy("held back template").await;
}

/// `methods` with `*`: `P*` a prefix, `*TE` a suffix, `*` any (Istio's `matcher.HeaderMatcher` on `:method`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn method_wildcards_match_like_istio() {
    let deny = policy(
        "default",
        "deny-methods",
        true,
        json!({"action": "DENY", "rules": [
            {"to": [{"operation": {"methods": ["P*"], "paths": ["/write*"]}}]},
            {"to": [{"operation": {"methods": ["*TE"], "paths": ["/remove*"]}}]},
            {"to": [{"operation": {"methods": ["*"], "paths": ["/closed*"]}}]}]}),
    );
    let Some(gw) = Gateway::start(55_120, &[("deny.yaml", deny)]).await else {
        return;
    };
    let http = unpooled_client();
    let write = gw.url("/write/x");
    wait_status("POST /write", 403, || http.post(&write)).await;
    assert_eq!(status(http.put(&write)).await, 403);
    assert_eq!(status(http.patch(&write)).await, 403);
    assert_eq!(status(http.get(&write)).await, 200);
    let remove = gw.url("/remove/x");
    assert_eq!(status(http.delete(&remove)).await, 403);
    assert_eq!(status(http.post(&remove)).await, 200);
    assert_eq!(status(http.get(gw.url("/closed"))).await, 403);
    gw.assert_healthy("method wildcards").await;
}

/// `requestPrincipals` split at the last `/`: the issuer exactly, the subject by Istio's wildcard rule
/// (`requestPrincipalGenerator.extendedPrincipal`); `notRequestPrincipals` negate the same match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_principals_match_issuer_and_subject_apart() {
    const IDP: &str = "https://idp.test";
    const PARTNER: &str = "https://idp.test/partner";
    let signer = jwt::key();
    let keys = jwt::jwks(&signer);
    let authn = yaml(&json!({
        "apiVersion": "security.istio.io/v1", "kind": "RequestAuthentication",
        "metadata": {"name": "jwt", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"istio": "ingressgateway"}},
                 "jwtRules": [{"issuer": IDP, "jwks": keys}, {"issuer": PARTNER, "jwks": keys}]},
    }));
    let allow = policy(
        "default",
        "principals",
        true,
        json!({"action": "ALLOW", "rules": [
            {"from": [{"source": {"requestPrincipals": [format!("{IDP}/*")]}}],
             "to": [{"operation": {"paths": ["/idp*"]}}]},
            {"from": [{"source": {"requestPrincipals": ["*/alice"]}}],
             "to": [{"operation": {"paths": ["/alice*"]}}]},
            {"from": [{"source": {"notRequestPrincipals": [format!("{IDP}/b*")], "requestPrincipals": ["*"]}}],
             "to": [{"operation": {"paths": ["/not-b*"]}}]},
            {"to": [{"operation": {"notPaths": ["/idp*", "/alice*", "/not-b*"]}}]}]}),
    );
    let Some(gw) = Gateway::start(55_130, &[("jwt.yaml", authn), ("allow.yaml", allow)]).await
    else {
        return;
    };
    let http = unpooled_client();
    let get = |path: &str, issuer: &str, subject: &str| {
        http.get(gw.url(path))
            .bearer_auth(jwt::token(&signer, issuer, subject))
    };
    wait_status("/idp without a token", 403, || http.get(gw.url("/idp"))).await;
    assert_eq!(status(get("/idp", IDP, "bob")).await, 200);
    assert_eq!(
        status(get("/idp", PARTNER, "bob")).await,
        403,
        "another issuer that merely starts with the same text"
    );
    assert_eq!(status(get("/alice", PARTNER, "alice")).await, 200);
    assert_eq!(status(get("/alice", IDP, "malice")).await, 403);
    assert_eq!(status(get("/not-b", IDP, "carol")).await, 200);
    assert_eq!(status(get("/not-b", IDP, "bob")).await, 403);
    assert_eq!(status(get("/not-b", PARTNER, "bob")).await, 200);
    gw.assert_healthy("request principals").await;
}

/// The root namespace comes from the mesh config (default `istio-system`), read live: an ALLOW-all policy in
/// `higress-system` does not open the gateway when the root namespace is `istio-system`; with `rootNamespace:
/// mesh-root` a DENY in `mesh-root` applies to the gateway, and one in `istio-system` no longer does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_namespace_comes_from_the_mesh_config() {
    let files = [
        ("mesh.yaml", mesh_config("rootNamespace: istio-system\n")),
        (
            "open.yaml",
            policy(
                "default",
                "only-open",
                true,
                json!({"action": "ALLOW", "rules": [{"to": [{"operation": {"paths": ["/open*"]}}]}]}),
            ),
        ),
        (
            "higress.yaml",
            policy(
                "higress-system",
                "allow-all",
                false,
                json!({"action": "ALLOW", "rules": [{}]}),
            ),
        ),
        (
            "istio-root.yaml",
            policy(
                "istio-system",
                "deny-root",
                false,
                json!({"action": "DENY", "rules": [{"to": [{"operation": {"paths": ["/open/istio*"]}}]}]}),
            ),
        ),
    ];
    let Some(gw) = Gateway::start(55_140, &[]).await else {
        return;
    };
    // Written once the gateway serves (the ALLOW policy closes the path `start` waits on).
    for (name, text) in &files {
        gw.write(name, text);
    }
    let http = unpooled_client();
    // An ALLOW in higress-system is not in the root namespace: the ALLOW of /open closes the rest.
    wait_status("/closed", 403, || http.get(gw.url("/closed"))).await;
    assert_eq!(status(http.get(gw.url("/open"))).await, 200);
    assert_eq!(status(http.get(gw.url("/open/istio"))).await, 403);

    gw.write(
        "mesh-root.yaml",
        &policy(
            "mesh-root",
            "deny-open",
            false,
            json!({"action": "DENY", "rules": [{"to": [{"operation": {"paths": ["/open/mesh*"]}}]}]}),
        ),
    );
    gw.write("mesh.yaml", &mesh_config("rootNamespace: mesh-root\n"));
    wait_status("/open/mesh", 403, || http.get(gw.url("/open/mesh"))).await;
    assert_eq!(status(http.get(gw.url("/open/istio"))).await, 200);
    assert_eq!(status(http.get(gw.url("/closed"))).await, 403);
    gw.assert_healthy("root namespace").await;
}

/// `meshConfig.pathNormalization`, as Istio sets the connection manager for each mode: a DENY on `/admin*` sees
/// `/%61dmin` as `/admin` unless normalization is `NONE`, `//admin` only with `MERGE_SLASHES` or more, and
/// `/%2Fadmin` only with `DECODE_AND_MERGE_SLASHES`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_normalization_follows_the_mesh_config() {
    let deny = policy(
        "default",
        "deny-admin",
        true,
        json!({"action": "DENY", "rules": [{"to": [{"operation": {"paths": ["/admin*"]}}]}]}),
    );
    let files = [
        ("deny.yaml", deny),
        (
            "mesh.yaml",
            mesh_config("pathNormalization: {normalization: NONE}\n"),
        ),
    ];
    let Some(gw) = Gateway::start(55_150, &files).await else {
        return;
    };
    let http = unpooled_client();
    let get = |path: &str| http.get(gw.url(path));
    wait_status("/admin", 403, || get("/admin")).await;
    // Every mode: (path, denied?) for the encoded, doubled and escaped-slash forms.
    let cases: [(&str, [bool; 3]); 4] = [
        ("NONE", [false, false, false]),
        ("BASE", [true, false, false]),
        ("MERGE_SLASHES", [true, true, false]),
        ("DECODE_AND_MERGE_SLASHES", [true, true, true]),
    ];
    for (mode, denied) in cases {
        gw.write(
            "mesh.yaml",
            &mesh_config(&format!("pathNormalization: {{normalization: {mode}}}\n")),
        );
        let expect = |d: bool| if d { 403 } else { 200 };
        // The form this mode changes tells when it arrived: the last one it denies (NONE: the first, allowed).
        let forms = ["/%61dmin/x", "//admin/x", "/%2Fadmin/x"];
        let (probe, first) = match denied.iter().rposition(|d| *d) {
            Some(last) => (forms[last], true),
            None => (forms[0], false),
        };
        wait_status(&format!("{mode}: {probe}"), expect(first), || get(probe)).await;
        for (path, denied) in ["/%61dmin/x", "//admin/x", "/%2Fadmin/x"]
            .into_iter()
            .zip(denied)
        {
            assert_eq!(status(get(path)).await, expect(denied), "{mode}: {path}");
        }
    }
    gw.assert_healthy("path normalization").await;
}

/// `hosts` match the whole authority, case-insensitively (Istio's `matcher.HostMatcher`): `example.com` is not
/// `example.com:8080`, and a suffix does not reach past a port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_match_the_authority_like_istio() {
    let deny = policy(
        "default",
        "deny-hosts",
        true,
        json!({"action": "DENY", "rules": [{"to": [{"operation": {"hosts": ["example.com", "*.example.org"]}}]}]}),
    );
    let Some(gw) = Gateway::start(55_160, &[("deny.yaml", deny)]).await else {
        return;
    };
    let http = unpooled_client();
    let with_host = |host: &str| http.get(gw.url("/x")).header("host", host);
    wait_status("example.com", 403, || with_host("example.com")).await;
    assert_eq!(status(with_host("EXAMPLE.com")).await, 403);
    assert_eq!(status(with_host("example.com:8080")).await, 200);
    assert_eq!(status(with_host("a.EXAMPLE.org")).await, 403);
    assert_eq!(status(with_host("a.example.org:8080")).await, 200);
    assert_eq!(status(with_host("example.net")).await, 200);
    gw.assert_healthy("hosts").await;
}

/// `istio.io/dry-run` is read as Go's `strconv.ParseBool` reads it: `1` and `T` make a dry run (counted, not
/// enforced), `0` and `F` an enforced policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_is_read_as_go_reads_booleans() {
    let dry_run = |name: &str, value: &str, path: &str| {
        let mut object: Value = serde_yaml_ng::from_str(&policy(
            "default",
            name,
            true,
            json!({"action": "DENY", "rules": [{"to": [{"operation": {"paths": [path]}}]}]}),
        ))
        .unwrap();
        object["metadata"]["annotations"] = json!({"istio.io/dry-run": value});
        yaml(&object)
    };
    let files = [
        ("one.yaml", dry_run("one", "1", "/one*")),
        ("t.yaml", dry_run("t", "T", "/t*")),
        ("zero.yaml", dry_run("zero", "0", "/zero*")),
        ("f.yaml", dry_run("f", "F", "/f*")),
    ];
    let Some(gw) = Gateway::start(55_170, &files).await else {
        return;
    };
    let http = unpooled_client();
    wait_status("/zero", 403, || http.get(gw.url("/zero"))).await;
    assert_eq!(status(http.get(gw.url("/f"))).await, 403);
    assert_eq!(status(http.get(gw.url("/one"))).await, 200);
    assert_eq!(status(http.get(gw.url("/t"))).await, 200);
    let shadow: u64 = gw
        .envoy
        .stats("istio_dry_run_deny_")
        .await
        .into_iter()
        .filter(|(name, _)| name.ends_with("shadow_denied"))
        .map(|(_, value)| value)
        .sum();
    assert_eq!(shadow, 2, "both dry runs counted");
    gw.assert_healthy("dry run").await;
}

/// `experimental.envoy.filters.<filter>[<key>]` matches the dynamic metadata another filter set (Istio's
/// `envoyFilterGenerator`): an EnvoyFilter copies the `x-tier` header into metadata before RBAC, and a DENY on
/// `blocked` applies to that request only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_filter_conditions_match_dynamic_metadata() {
    let header_to_metadata = yaml(&json!({
        "apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
        "metadata": {"name": "tier", "namespace": "default"},
        "spec": {
            "workloadSelector": {"labels": {"istio": "ingressgateway"}},
            "configPatches": [{
                "applyTo": "HTTP_FILTER",
                "match": {"context": "GATEWAY", "listener": {"filterChain": {"filter": {
                    "name": "envoy.filters.network.http_connection_manager"}}}},
                "patch": {"operation": "INSERT_FIRST", "value": {
                    "name": "envoy.filters.http.header_to_metadata",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config",
                        "request_rules": [{"header": "x-tier", "on_header_present": {
                            "metadata_namespace": "envoy.filters.http.header_to_metadata",
                            "key": "tier", "type": "STRING"}}]}}}}]},
    }));
    let deny = policy(
        "default",
        "deny-tier",
        true,
        json!({"action": "DENY", "rules": [{"when": [{
            "key": "experimental.envoy.filters.http.header_to_metadata[tier]", "values": ["blocked", "bad*"]}]}]}),
    );
    let Some(gw) = Gateway::start(
        55_180,
        &[("tier.yaml", header_to_metadata), ("deny.yaml", deny)],
    )
    .await
    else {
        return;
    };
    let http = unpooled_client();
    let tier = |value: &str| http.get(gw.url("/x")).header("x-tier", value);
    wait_status("x-tier: blocked", 403, || tier("blocked")).await;
    assert_eq!(status(tier("badly")).await, 403);
    assert_eq!(status(tier("gold")).await, 200);
    assert_eq!(status(http.get(gw.url("/x"))).await, 200);
    gw.assert_healthy("envoy filter conditions").await;
}

/// `ports` name the port Envoy listens on, which for admitpilot's gateways is the Gateway server's port number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_are_the_port_envoy_listens_on() {
    let Some(gw) = Gateway::start(55_190, &[]).await else {
        return;
    };
    let port = gw.base.rsplit(':').next().unwrap().to_string();
    let other = (port.parse::<u32>().unwrap() + 1).to_string();
    gw.write(
        "deny.yaml",
        &policy(
            "default",
            "deny-ports",
            true,
            json!({"action": "DENY", "rules": [
                {"to": [{"operation": {"ports": [port], "paths": ["/listening*"]}}]},
                {"to": [{"operation": {"ports": [other], "paths": ["/other*"]}}]}]}),
        ),
    );
    let http = unpooled_client();
    wait_status("/listening", 403, || http.get(gw.url("/listening"))).await;
    assert_eq!(status(http.get(gw.url("/other"))).await, 200);
    gw.assert_healthy("ports").await;
}

/// A CA and the certificates it signs, for a MUTUAL gateway server and its clients.
struct Pki {
    ca: rcgen::Certificate,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new() -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        // A subject of its own: rcgen gives every certificate the same default one, and Envoy (BoringSSL) does not
        // build a chain from a leaf whose issuer name equals its own subject.
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "admitpilot test CA");
        let key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap();
        Pki {
            ca,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A certificate for `dns` names (and 127.0.0.1) or for the SPIFFE identity `uri`: (certificate, key) PEM.
    fn leaf(&self, dns: &[&str], uri: Option<&str>) -> (String, String) {
        let mut params =
            rcgen::CertificateParams::new(dns.iter().map(ToString::to_string).collect::<Vec<_>>())
                .unwrap();
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap()));
        if let Some(uri) = uri {
            params
                .subject_alt_names
                .push(rcgen::SanType::URI(uri.try_into().unwrap()));
        }
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// On a MUTUAL server, peer identities match as Istio's generator matches them: a principal `*x` is a suffix of
/// the SPIFFE identity (`srcPrincipalGenerator`), a namespace `team-*` any namespace starting so
/// (`srcNamespaceGenerator`), and a service account without a namespace one in the policy's namespace
/// (`serviceAccountRegex`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_identities_match_like_istio_on_a_mutual_server() {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    let Some(gw) = Gateway::start(55_200, &[]).await else {
        return;
    };
    let pki = Pki::new();
    let (server_cert, server_key) = pki.leaf(&["localhost"], None);
    gw.write(
        "secret.yaml",
        &yaml(&json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "gw-cert", "namespace": "default"},
            "data": {"tls.crt": STANDARD.encode(&server_cert), "tls.key": STANDARD.encode(&server_key),
                     "ca.crt": STANDARD.encode(pki.ca.pem())},
        })),
    );
    let port = gw.base.rsplit(':').next().unwrap().to_string();
    let mtls_port = free_port();
    gw.write(
        "gateway.yaml",
        &yaml(&json!({
            "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "default"},
            "spec": {"selector": {"istio": "ingressgateway"}, "servers": [
                {"port": {"number": port.parse::<u32>().unwrap(), "name": "http", "protocol": "HTTP"},
                 "hosts": ["*"]},
                {"port": {"number": mtls_port, "name": "https", "protocol": "HTTPS"}, "hosts": ["*"],
                 "tls": {"mode": "MUTUAL", "credentialName": "gw-cert"}}]},
        })),
    );
    gw.write(
        "deny.yaml",
        &policy(
            "default",
            "deny-peers",
            true,
            json!({"action": "DENY", "rules": [
                {"from": [{"source": {"principals": ["*/sa/bar"]}}],
                 "to": [{"operation": {"paths": ["/suffix*"]}}]},
                {"from": [{"source": {"namespaces": ["team-*"]}}],
                 "to": [{"operation": {"paths": ["/ns*"]}}]},
                {"from": [{"source": {"serviceAccounts": ["reader"]}}],
                 "to": [{"operation": {"paths": ["/sa*"]}}]}]}),
        ),
    );
    let ca = reqwest::Certificate::from_pem(pki.ca.pem().as_bytes()).unwrap();
    let client_for = |identity: &str| {
        let (cert, key) = pki.leaf(&[], Some(identity));
        reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca.clone())
            .identity(reqwest::Identity::from_pem(format!("{cert}{key}").as_bytes()).unwrap())
            .resolve("localhost", ([127, 0, 0, 1], mtls_port).into())
            .pool_max_idle_per_host(0)
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap()
    };
    let foo_bar = client_for("spiffe://cluster.local/ns/foo/sa/bar");
    let team_bar = client_for("spiffe://cluster.local/ns/team-a/sa/bar");
    let reader = client_for("spiffe://cluster.local/ns/default/sa/reader");
    let other_reader = client_for("spiffe://cluster.local/ns/other/sa/reader");
    let url = |path: &str| format!("https://localhost:{mtls_port}{path}");
    wait_status("/suffix as foo/bar", 403, || foo_bar.get(url("/suffix"))).await;
    assert_eq!(status(team_bar.get(url("/suffix"))).await, 403);
    assert_eq!(status(reader.get(url("/suffix"))).await, 200);
    assert_eq!(status(team_bar.get(url("/ns"))).await, 403);
    assert_eq!(status(foo_bar.get(url("/ns"))).await, 200);
    assert_eq!(status(reader.get(url("/sa"))).await, 403);
    assert_eq!(
        status(other_reader.get(url("/sa"))).await,
        200,
        "a bare service account is in the policy's namespace"
    );
    gw.assert_healthy("mutual").await;
}
