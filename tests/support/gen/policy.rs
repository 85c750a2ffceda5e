//! Random AuthorizationPolicies and RequestAuthentications: takes a [`Rng`] and a name, yields the document (JSON)
//! over the whole grammar admitpilot's validator accepts (crates/validate/src/authorization_policy.rs,
//! request_authentication.rs): every source and operation field and its `not*` form, `when` conditions on every
//! key the validator knows, `*` prefixes and suffixes, `{*}`/`{**}` path templates, all four actions (CUSTOM with
//! the base config's providers), `istio.io/dry-run` spellings, selectors and `targetRefs`, and policies in the
//! gateway's namespace, a root namespace or another one. A few values in each pool are ones the validator refuses
//! (empty, badly placed wildcards, bad IPs and ports, unknown keys), so that refusals are exercised too.

use serde_json::{json, Map, Value};

use super::base::{GATEWAY_API_NAME, NAMESPACE, PROVIDERS};
use super::Rng;

/// Namespaces a generated policy is put in: the gateway's, the root ones, another.
const NAMESPACES: [&str; 4] = [NAMESPACE, "istio-system", "higress-system", "other"];

/// A string of `low..=high` characters from `alphabet`.
fn word(rng: &mut Rng, alphabet: &[u8], low: usize, high: usize) -> String {
    let len = rng.between(low, high);
    (0..len).map(|_| *rng.pick(alphabet) as char).collect()
}

const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-";
/// Characters with a meaning in regexes, headers or paths.
const ODD: &[u8] = b"abc.-_~!$&'()*+,;=:@/?#[]{}|\\^%\" <>`";

/// A string drawn from `fixed` most of the time, else a random word (sometimes long, sometimes with odd
/// characters), sometimes given a `*` at its start or end.
fn value(rng: &mut Rng, fixed: &[&str], wildcards: bool) -> String {
    let mut v = if rng.percent(60) {
        rng.pick(fixed).to_string()
    } else if rng.percent(15) {
        word(rng, LOWER, 60, 300)
    } else if rng.percent(20) {
        word(rng, ODD, 1, 12)
    } else if rng.percent(5) {
        ["ünïcödé", "\u{0}", "a\nb", "\t", "é*"][rng.below(5)].to_string()
    } else {
        word(rng, LOWER, 1, 16)
    };
    if wildcards && rng.percent(25) {
        match rng.below(3) {
            0 => v.insert(0, '*'),
            1 => v.push('*'),
            _ => v = "*".into(),
        }
    }
    if rng.junk(5) {
        v.clear();
    }
    v
}

fn list(rng: &mut Rng, mut each: impl FnMut(&mut Rng) -> String) -> Vec<String> {
    (0..rng.between(1, 3)).map(|_| each(rng)).collect()
}

fn ipv4(rng: &mut Rng) -> String {
    let octets: Vec<String> = (0..4).map(|_| rng.below(256).to_string()).collect();
    octets.join(".")
}

fn ipv6(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => format!("::ffff:{}", ipv4(rng)),
        1 => format!("2001:db8::{:x}", rng.below(65536)),
        2 => {
            let fields: Vec<String> = (0..8).map(|_| format!("{:x}", rng.below(65536))).collect();
            fields.join(":")
        }
        _ => "::".into(),
    }
}

/// An IP or CIDR (mostly valid, with every prefix length; a few invalid).
fn ip(rng: &mut Rng) -> String {
    let draw = if rng.junk(30) { 9 } else { rng.below(9) };
    match draw {
        0..=3 => ipv4(rng),
        4..=5 => format!("{}/{}", ipv4(rng), rng.below(33)),
        6 => ipv6(rng),
        7..=8 => format!("{}/{}", ipv6(rng), rng.below(129)),
        _ => rng
            .pick(&[
                "10.0.0.0/33",
                "1.2.3",
                "fe80::1%eth0",
                "::1/129",
                "not-an-ip",
                "1.2.3.04",
                "",
                "00000::",
            ])
            .to_string(),
    }
}

fn port(rng: &mut Rng) -> String {
    let draw = if rng.junk(30) { 0 } else { rng.between(1, 11) };
    match draw {
        0 => rng
            .pick(&["65536", "-1", "abc", "", "+80", "4294967296"])
            .to_string(),
        1 => "0".into(),
        2 => "65535".into(),
        3..=6 => rng.pick(&["80", "443", "8080", "9000", "5000"]).to_string(),
        _ => rng.below(65536).to_string(),
    }
}

/// A path: exact, `*` prefix or suffix, `*`, or a `{*}`/`{**}` template (some of them invalid).
fn path(rng: &mut Rng) -> String {
    let segment = |rng: &mut Rng| -> String {
        match rng.below(10) {
            0 => "{*}".into(),
            1 => "{**}".into(),
            2 => word(rng, b"abc.-_~!$&'()+,;=:@%", 1, 6),
            3 if rng.junk(50) => rng.pick(&["{x}", "{*", "a{*}", "", "a b"]).to_string(),
            _ => word(rng, LOWER, 1, 10),
        }
    };
    match rng.below(8) {
        0 => rng
            .pick(&[
                "/",
                "*",
                "/*",
                "*/",
                "/admin/{**}",
                "/{*}",
                "/{**}",
                "/a/{*}/b/{**}",
            ])
            .to_string(),
        1 => format!("{}*", path_of(rng, segment)),
        2 => format!("*{}", path_of(rng, segment)),
        3 => value(rng, &["/healthz", "/api/v1"], true),
        _ => path_of(rng, segment),
    }
}

fn path_of(rng: &mut Rng, mut segment: impl FnMut(&mut Rng) -> String) -> String {
    let mut p = String::new();
    for _ in 0..rng.between(1, 5) {
        p.push('/');
        p.push_str(&segment(rng));
    }
    if rng.percent(10) {
        p.push('/');
    }
    if rng.percent(5) {
        p = p.trim_start_matches('/').to_string();
    }
    p
}

fn host(rng: &mut Rng) -> String {
    let v = value(
        rng,
        &[
            "example.com",
            "*.example.com",
            "api.example.com",
            "Example.COM",
            "api.example.com:8080",
            "*",
            "mtls.example.com",
            "pass.example.com",
            "[::1]:80",
            "10.0.0.1",
        ],
        true,
    );
    if rng.percent(5) {
        format!("{}.example.com", word(rng, LOWER, 120, 120))
    } else {
        v
    }
}

fn method(rng: &mut Rng) -> String {
    value(
        rng,
        &[
            "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT", "P*", "*T", "*",
            "get", "PROPFIND",
        ],
        true,
    )
}

fn principal(rng: &mut Rng) -> String {
    value(
        rng,
        &[
            "cluster.local/ns/default/sa/web",
            "cluster.local/ns/edge/sa/gateway",
            "*/ns/prod/*",
            "spiffe://cluster.local/ns/a/sa/b",
            "*",
            "td/ns/a/sa/*",
        ],
        true,
    )
}

fn request_principal(rng: &mut Rng) -> String {
    value(
        rng,
        &[
            "https://idp.test/user",
            "https://idp.test/*",
            "*",
            "*/user",
            "https://idp.test*",
            "iss/sub",
            "a/b/c",
            "/",
            "//",
            "*/",
            "/*",
        ],
        true,
    )
}

fn namespace(rng: &mut Rng) -> String {
    value(
        rng,
        &[
            "prod",
            "edge",
            "istio-system",
            "*",
            "pr*",
            "*od",
            "a.b",
            "a+b",
        ],
        true,
    )
}

fn service_account(rng: &mut Rng) -> String {
    let draw = if rng.junk(30) { 1 } else { 2 + rng.below(8) };
    match draw {
        0 => format!(
            "{}/{}",
            word(rng, LOWER, 150, 150),
            word(rng, LOWER, 150, 150)
        ),
        1 => rng
            .pick(&["ns/*", "a/b/c", "/sa", "ns/", "*", ""])
            .to_string(),
        2 => format!("{}/{}", word(rng, ODD, 5, 5), word(rng, ODD, 5, 5)).replace(['*', '/'], "x"),
        3..=5 => rng.pick(&["web", "gateway", "default"]).to_string(),
        _ => format!(
            "{}/{}",
            rng.pick(&["prod", "edge", "default", "a.b"]),
            rng.pick(&["web", "sa", "x-y"])
        ),
    }
}

fn trust_domain(rng: &mut Rng) -> String {
    let fixed: &[&str] = if rng.junk(30) {
        &["a/b", "a*b", "**"]
    } else {
        &["cluster.local", "*.local", "td*", "*", "example.org"]
    };
    let wildcards = rng.junk(50);
    value(rng, fixed, wildcards).replace('/', "-")
}

/// A `from.source`: each field present now and then.
fn source(rng: &mut Rng) -> Value {
    let mut src = Map::new();
    type Each = fn(&mut Rng) -> String;
    let fields: [(&str, &str, Each); 7] = [
        ("principals", "notPrincipals", principal),
        (
            "requestPrincipals",
            "notRequestPrincipals",
            request_principal,
        ),
        ("namespaces", "notNamespaces", namespace),
        ("ipBlocks", "notIpBlocks", ip),
        ("remoteIpBlocks", "notRemoteIpBlocks", ip),
        ("serviceAccounts", "notServiceAccounts", service_account),
        ("trustDomains", "notTrustDomains", trust_domain),
    ];
    // serviceAccounts cannot go with namespaces or principals: mostly keep them apart.
    let accounts = rng.percent(20);
    for (name, not_name, each) in fields {
        let is_account = name == "serviceAccounts";
        let skip = if !rng.junk(10) {
            if accounts {
                matches!(name, "principals" | "namespaces")
            } else {
                is_account
            }
        } else {
            false
        };
        if skip {
            continue;
        }
        for field in [name, not_name] {
            if rng.percent(22) {
                src.insert(field.into(), json!(list(rng, each)));
            }
        }
    }
    if src.is_empty() && !rng.junk(20) {
        src.insert("ipBlocks".into(), json!(list(rng, ip)));
    }
    Value::Object(src)
}

/// A `to.operation`: each field present now and then.
fn operation(rng: &mut Rng) -> Value {
    let mut op = Map::new();
    type Each = fn(&mut Rng) -> String;
    let fields: [(&str, &str, Each); 4] = [
        ("hosts", "notHosts", host),
        ("ports", "notPorts", port),
        ("methods", "notMethods", method),
        ("paths", "notPaths", path),
    ];
    for (name, not_name, each) in fields {
        for field in [name, not_name] {
            if rng.percent(30) {
                op.insert(field.into(), json!(list(rng, each)));
            }
        }
    }
    if op.is_empty() && !rng.junk(20) {
        op.insert("paths".into(), json!(list(rng, path)));
    }
    Value::Object(op)
}

/// A `when` key (every attribute the validator knows, map keys with odd names, a few it refuses) and a value for
/// it.
fn condition(rng: &mut Rng) -> Value {
    let draw = if rng.junk(25) {
        3
    } else {
        [0, 1, 2, 4][rng.below(4)] + rng.below(2) * 4
    };
    let key = match draw {
        0 => format!("request.headers[{}]", header_name(rng)),
        1 => format!("request.auth.claims[{}]", claim_path(rng)),
        2 => format!(
            "experimental.envoy.filters.{}[{}]",
            rng.pick(&["network.mysql_proxy", "http.a.b", "x"]),
            rng.pick(&["db.table", "k", "a]b"])
        ),
        3 => rng
            .pick(&[
                "request.headers",
                "request.auth.claims[]",
                "source.user",
                "destination.namespace",
                "destination.labels[app]",
                "destination.user",
                "request.experimental.inline.headers[x-a]",
                "",
            ])
            .to_string(),
        _ => {
            let items = [
                "request.headers[x-tenant]",
                "request.headers[:authority]",
                "request.auth.claims[groups]",
                "request.auth.claims[nested][key]",
            ];
            let keys: Vec<&str> = admitpilot::validate::PLAIN_CONDITION_KEYS
                .into_iter()
                .chain(items)
                .collect();
            rng.pick(&keys).to_string()
        }
    };
    let each = |rng: &mut Rng| -> String {
        match key.as_str() {
            "source.ip" | "remote.ip" | "destination.ip" => ip(rng),
            "destination.port" => port(rng),
            "source.serviceAccount" => service_account(rng),
            "source.trustDomain" => trust_domain(rng),
            "source.namespace" => namespace(rng),
            "source.principal" => principal(rng),
            "request.auth.principal" => request_principal(rng),
            "connection.sni" => host(rng),
            _ => value(rng, &["acme", "demo", "admin", "web"], true),
        }
    };
    let mut c = Map::new();
    c.insert("key".into(), json!(key));
    let (values, not_values) = match rng.below(10) {
        0..=5 => (true, false),
        6..=8 => (false, true),
        _ => (true, true),
    };
    if values && !rng.junk(5) {
        c.insert("values".into(), json!(list(rng, each)));
    }
    if not_values {
        c.insert("notValues".into(), json!(list(rng, each)));
    }
    Value::Object(c)
}

fn header_name(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => word(rng, ODD, 1, 8),
        1 => rng
            .pick(&[
                ":path", ":method", "Host", "X-Upper", "a b", "x\ny", "]", "[x",
            ])
            .to_string(),
        2 => word(rng, LOWER, 100, 100),
        _ => rng.pick(&["x-tenant", "x-user", "user-agent"]).to_string(),
    }
}

fn claim_path(rng: &mut Rng) -> String {
    match rng.below(5) {
        0 => rng
            .pick(&["a][b", "a][][b", "]", "a.b", "[x", "a][b][c][d", "sub"])
            .to_string(),
        1 => word(rng, ODD, 1, 6).replace(']', ""),
        _ => rng
            .pick(&["iss", "sub", "aud", "groups", "scope", "tenant"])
            .to_string(),
    }
}

fn rule(rng: &mut Rng) -> Value {
    let mut r = Map::new();
    if rng.percent(55) {
        let n = if rng.junk(5) { 0 } else { rng.between(1, 3) };
        let from: Vec<Value> = (0..n)
            .map(|_| {
                if rng.junk(3) {
                    json!({})
                } else {
                    json!({"source": source(rng)})
                }
            })
            .collect();
        r.insert("from".into(), json!(from));
    }
    if rng.percent(65) {
        let n = if rng.junk(5) { 0 } else { rng.between(1, 3) };
        let to: Vec<Value> = (0..n)
            .map(|_| {
                if rng.junk(3) {
                    json!({})
                } else {
                    json!({"operation": operation(rng)})
                }
            })
            .collect();
        r.insert("to".into(), json!(to));
    }
    if rng.percent(40) {
        let when: Vec<Value> = (0..rng.between(1, 3)).map(|_| condition(rng)).collect();
        r.insert("when".into(), json!(when));
    }
    Value::Object(r)
}

/// How a policy attaches: a selector (the gateway's labels or others), `targetRef(s)` (the gateway's Gateway API
/// Gateway, another, a Service or a GatewayClass), or nothing (the whole namespace).
fn attachment(rng: &mut Rng, spec: &mut Map<String, Value>) {
    let target = |rng: &mut Rng| -> Value {
        match rng.below(6) {
            0..=2 => {
                json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_API_NAME})
            }
            3 => {
                json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "other-gw"})
            }
            4 => json!({"kind": "Service", "name": "web"}),
            _ => {
                json!({"group": "gateway.networking.k8s.io", "kind": "GatewayClass", "name": "istio"})
            }
        }
    };
    match rng.below(10) {
        0..=4 => {
            let labels = match rng.below(4) {
                0 => json!({"app": "other"}),
                1 => {
                    json!({"istio": "ingressgateway", "gateway.networking.k8s.io/gateway-name": GATEWAY_API_NAME})
                }
                _ => json!({"istio": "ingressgateway"}),
            };
            spec.insert("selector".into(), json!({"matchLabels": labels}));
        }
        5..=6 => {
            let refs: Vec<Value> = (0..rng.between(1, 2)).map(|_| target(rng)).collect();
            spec.insert("targetRefs".into(), json!(refs));
        }
        7 => {
            spec.insert("targetRef".into(), target(rng));
        }
        _ => {}
    }
}

fn metadata(rng: &mut Rng, name: &str, dry_run: bool) -> Value {
    let namespace = if rng.percent(60) {
        NAMESPACE
    } else {
        *rng.pick(&NAMESPACES)
    };
    let mut meta = json!({"name": name, "namespace": namespace});
    if dry_run {
        let v = *rng.pick(&["true", "True", "TRUE", "1", "t", "false", "0", "yes", ""]);
        meta["annotations"] = json!({"istio.io/dry-run": v});
    }
    meta
}

/// A random AuthorizationPolicy named `name`.
pub fn authorization_policy(rng: &mut Rng, name: &str) -> Value {
    let action = *rng.pick(&["ALLOW", "ALLOW", "DENY", "DENY", "AUDIT", "CUSTOM", ""]);
    let mut spec = Map::new();
    if !action.is_empty() {
        spec.insert("action".into(), json!(action));
    }
    if action == "CUSTOM" || rng.junk(10) {
        let provider = if !rng.junk(30) {
            *rng.pick(&PROVIDERS)
        } else {
            "not-a-provider"
        };
        spec.insert("provider".into(), json!({"name": provider}));
    }
    attachment(rng, &mut spec);
    let rules = if rng.percent(8) { 0 } else { rng.between(1, 4) };
    let rules: Vec<Value> = (0..rules).map(|_| rule(rng)).collect();
    if !rules.is_empty() || rng.percent(50) {
        spec.insert("rules".into(), json!(rules));
    }
    // CUSTOM cannot match identities: mostly leave those fields out so that some CUSTOM policies are admitted.
    if action == "CUSTOM" && !rng.junk(50) {
        strip_identities(&mut spec);
    }
    let dry_run = rng.percent(15) && (matches!(action, "ALLOW" | "DENY" | "") || rng.junk(50));
    json!({
        "apiVersion": *rng.pick(&["security.istio.io/v1", "security.istio.io/v1beta1"]),
        "kind": "AuthorizationPolicy",
        "metadata": metadata(rng, name, dry_run),
        "spec": spec,
    })
}

/// Removes the source fields and `when` keys CUSTOM refuses.
fn strip_identities(spec: &mut Map<String, Value>) {
    let Some(Value::Array(rules)) = spec.get_mut("rules") else {
        return;
    };
    for rule in rules {
        if let Some(Value::Array(from)) = rule.get_mut("from") {
            for entry in from {
                if let Some(Value::Object(src)) = entry.get_mut("source") {
                    src.retain(|k, _| k.ends_with("pBlocks") || k.ends_with("IpBlocks"));
                    if src.is_empty() {
                        src.insert("ipBlocks".into(), json!(["10.0.0.0/8"]));
                    }
                }
            }
        }
        if let Some(Value::Array(when)) = rule.get_mut("when") {
            when.retain(|c| {
                let key = c["key"].as_str().unwrap_or_default();
                !(key.starts_with("request.auth.")
                    || matches!(
                        key,
                        "source.namespace"
                            | "source.serviceAccount"
                            | "source.trustDomain"
                            | "source.principal"
                    ))
            });
        }
    }
}

/// Public keys (JWK) of each kind Envoy's JWT filter reads, and a few it may not.
const JWKS: [&str; 7] = [
    r#"{"keys": [{"kty": "EC", "crv": "P-256", "alg": "ES256", "kid": "g", "x": "axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY", "y": "T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU"}]}"#,
    r#"{"kty": "EC", "crv": "P-256", "x": "axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY", "y": "T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU"}"#,
    r#"{"keys": [{"kty": "RSA", "alg": "RS256", "n": "up97uqrF9MWOPaPkwSaBeuAPLOr9FKcaWGdVEGzQ4f3Zq5WKVZowx9TCBxmImNJ1qmUi13pB8otwM_l5lfY1AFBMxVbQCUXntLovhDaiSvYp4wGDjFzQiYA-pUq8h6MUZBnhleYrkU7XlCBwNVyN8qNMkpLA7KFZYz-486GnV2NIJJx_4BGa3HdKwQGxi2tjuQsQvao5W4xmSVaaEWopBwMy2QmlhSFQuPUpTaywTqUcUq_6SfAHhZ4IDa_FxEd2c2z8gFGtfst9cY3lRYf-c_ZdboY3mqN9Su3-j3z5r2SHWlhB_LNAjyWlBGsvbGPlTqDziYQwZN4aGsqVKQb9Vw", "e": "AQAB"}]}"#,
    r#"{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#,
    r#"{"keys": []}"#,
    r#"{"keys": [{"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA"}]}"#,
    r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#,
];

fn jwt_rule(rng: &mut Rng) -> Value {
    let mut r = Map::new();
    if rng.percent(90) {
        let issuer = value(
            rng,
            &[
                "https://idp.test",
                "https://issuer.example.com",
                "iss",
                "https://idp.test/",
            ],
            false,
        );
        r.insert("issuer".into(), json!(issuer));
    }
    if rng.percent(30) {
        r.insert(
            "audiences".into(),
            json!(list(rng, |rng| value(rng, &["web", "api"], false))),
        );
    }
    match rng.below(4) {
        0 => {
            // Only loopback hosts: the gateway's Envoy resolves and fetches this.
            let uris: &[&str] = if rng.junk(30) {
                &["ftp://127.0.0.1/jwks", "http://localhost:x/jwks"]
            } else {
                &[
                    "http://127.0.0.1:9/jwks",
                    "https://localhost:8443/keys/jwks.json",
                    "http://[::1]:8080/jwks",
                    "https://127.0.0.1/jwks",
                ]
            };
            let uri = *rng.pick(uris);
            r.insert("jwksUri".into(), json!(uri));
        }
        1..=2 => {
            r.insert("jwks".into(), json!(*rng.pick(&JWKS)));
        }
        _ => {}
    }
    if rng.percent(30) {
        let headers: Vec<Value> = (0..rng.between(1, 2))
            .map(|_| {
                let mut h = json!({"name": value(rng, &["authorization", "x-jwt"], false)});
                if rng.percent(50) {
                    h["prefix"] = json!(*rng.pick(&["Bearer ", "", "Token"]));
                }
                h
            })
            .collect();
        r.insert("fromHeaders".into(), json!(headers));
    }
    for (field, fixed) in [
        ("fromParams", ["token", "access_token"]),
        ("fromCookies", ["session", "jwt"]),
        ("spaceDelimitedClaims", ["scope", "permissions"]),
    ] {
        if rng.percent(20) {
            r.insert(
                field.into(),
                json!(list(rng, |rng| value(rng, &fixed, false))),
            );
        }
    }
    if rng.percent(20) {
        r.insert(
            "outputPayloadToHeader".into(),
            json!(value(rng, &["x-jwt-payload", "X-Payload"], false)),
        );
    }
    if rng.percent(20) {
        r.insert("forwardOriginalToken".into(), json!(rng.percent(50)));
    }
    if rng.percent(20) {
        let pairs: Vec<Value> = (0..rng.between(1, 2))
            .map(|_| {
                json!({
                    "header": value(rng, &["x-tenant", "x-sub", "X-Upper", ":path", "host"], false),
                    "claim": value(rng, &["tenant", "sub", "a.b"], false),
                })
            })
            .collect();
        r.insert("outputClaimToHeaders".into(), json!(pairs));
    }
    if rng.percent(15) {
        r.insert(
            "timeout".into(),
            json!(if rng.junk(30) {
                *rng.pick(&["-1s", "x"])
            } else {
                *rng.pick(&["1s", "0s", "100ms", "2.5s", "1h"])
            }),
        );
    }
    Value::Object(r)
}

/// A random RequestAuthentication named `name`.
pub fn request_authentication(rng: &mut Rng, name: &str) -> Value {
    let mut spec = Map::new();
    attachment(rng, &mut spec);
    let rules: Vec<Value> = (0..rng.between(0, 3)).map(|_| jwt_rule(rng)).collect();
    spec.insert("jwtRules".into(), json!(rules));
    json!({
        "apiVersion": *rng.pick(&["security.istio.io/v1", "security.istio.io/v1beta1"]),
        "kind": "RequestAuthentication",
        "metadata": metadata(rng, name, false),
        "spec": spec,
    })
}
