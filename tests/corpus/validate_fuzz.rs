//! Property test: decoding and validating arbitrary input never panics. Feeds arbitrary bytes, arbitrary JSON
//! values, and documents of every known kind whose specs are random JSON built from real field names, into
//! `validate_document`. Runs 2,000 cases per property by default; set `PROPTEST_CASES` for long runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use admitpilot::model::decode::DecodeOptions;
use admitpilot::model::Kind;
use admitpilot::validate::validate_document;
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Field names seen across the Istio/Higress kinds, so random specs hit real decode and rule paths.
const KEYS: &[&str] = &[
    "hosts",
    "gateways",
    "http",
    "tls",
    "tcp",
    "exportTo",
    "match",
    "route",
    "destination",
    "host",
    "subset",
    "port",
    "number",
    "name",
    "protocol",
    "weight",
    "uri",
    "prefix",
    "exact",
    "regex",
    "headers",
    "request",
    "response",
    "set",
    "add",
    "remove",
    "redirect",
    "rewrite",
    "uriRegexRewrite",
    "rewrite",
    "directResponse",
    "status",
    "body",
    "string",
    "bytes",
    "delegate",
    "timeout",
    "retries",
    "attempts",
    "perTryTimeout",
    "retryOn",
    "fault",
    "abort",
    "delay",
    "httpStatus",
    "grpcStatus",
    "fixedDelay",
    "percentage",
    "value",
    "mirror",
    "mirrors",
    "mirrorPercentage",
    "corsPolicy",
    "allowOrigins",
    "allowMethods",
    "maxAge",
    "sniHosts",
    "destinationSubnets",
    "sourceLabels",
    "sourceNamespace",
    "withoutHeaders",
    "queryParams",
    "trafficPolicy",
    "loadBalancer",
    "simple",
    "consistentHash",
    "httpCookie",
    "maglev",
    "tableSize",
    "ringHash",
    "localityLbSetting",
    "distribute",
    "failover",
    "from",
    "to",
    "connectionPool",
    "http2KeepAlive",
    "interval",
    "outlierDetection",
    "consecutive5xxErrors",
    "baseEjectionTime",
    "mode",
    "credentialName",
    "subsets",
    "labels",
    "portLevelSettings",
    "tunnel",
    "targetHost",
    "targetPort",
    "warmup",
    "duration",
    "aggression",
    "workloadSelector",
    "matchLabels",
    "selector",
    "servers",
    "bind",
    "credentialNames",
    "tlsCertificates",
    "cipherSuites",
    "minProtocolVersion",
    "addresses",
    "ports",
    "resolution",
    "location",
    "endpoints",
    "address",
    "network",
    "ingress",
    "egress",
    "defaultEndpoint",
    "captureMode",
    "outboundTrafficPolicy",
    "egressProxy",
    "template",
    "metadata",
    "probe",
    "httpGet",
    "tcpSocket",
    "exec",
    "command",
    "concurrency",
    "environmentVariables",
    "sessionPersistence",
    "type",
    "cookie",
    "header",
    "configPatches",
    "applyTo",
    "patch",
    "operation",
    "rules",
    "action",
    "provider",
    "when",
    "key",
    "values",
    "jwtRules",
    "issuer",
    "jwksUri",
    "targetRef",
    "targetRefs",
    "kind",
    "group",
    "namespace",
    "mtls",
    "portLevelMtls",
    "url",
    "sha256",
    "phase",
    "priority",
    "pluginConfig",
    "registries",
    "higress",
];

/// Text values that exercise parsers: hosts, wildcards, durations, regexes, header expressions, enum names.
const STRINGS: &[&str] = &[
    "",
    "*",
    "*.example.com",
    "a.b.c",
    "reviews",
    "ns/gw",
    "./*",
    "~",
    ".",
    "1.2.3.4",
    "10.0.0.0/8",
    "::1",
    "2001:db8::/32",
    "unix:///var/run/a.sock",
    "unix://",
    "@abstract",
    "1.5s",
    "0s",
    "100ms",
    "1h30m",
    "-1s",
    "0.0001ms",
    "(",
    "^/api/.*$",
    "a{1000}{1000}",
    "%HOSTNAME%",
    "%",
    "%VAR(",
    "x-header",
    ":authority",
    "host",
    "@request.auth.claims.sub",
    "HTTP",
    "HTTPS",
    "TLS",
    "TCP",
    "GRPC",
    "SIMPLE",
    "MUTUAL",
    "ISTIO_MUTUAL",
    "PASSTHROUGH",
    "DNS",
    "STATIC",
    "NONE",
    "DYNAMIC_DNS",
    "MESH_EXTERNAL",
    "ROUND_ROBIN",
    "FROM_REQUEST_PORT",
    "HEADER",
    "COOKIE",
    "ALLOW_ANY",
    "5xx,reset",
    "NOT_FOUND",
    "Service",
    "gateway.networking.k8s.io",
    "ñ",
    "\u{0}",
    "a\nb",
    "outbound_.80_._.x.com",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (0u32..70_000).prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(STRINGS).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner.clone()), 0..6).prop_map(
                |pairs| {
                    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
                }
            ),
            prop::collection::vec((".{0,6}", inner), 0..3)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn document() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(Kind::ALL.to_vec()),
        prop::sample::select(STRINGS),
        json_value(),
        prop::option::of(prop::collection::btree_map(".{0,20}", ".{0,8}", 0..3)),
    )
        .prop_map(|(kind, name, spec, annotations)| {
            let mut doc = Map::new();
            doc.insert("apiVersion".into(), Value::from(kind.api_version()));
            doc.insert("kind".into(), Value::from(kind.info().kind));
            let mut meta = Map::new();
            meta.insert(
                "name".into(),
                Value::from(if name.is_empty() { "x" } else { name }),
            );
            meta.insert("namespace".into(), Value::from("default"));
            if let Some(annotations) = annotations {
                meta.insert(
                    "annotations".into(),
                    serde_json::to_value(annotations).unwrap(),
                );
            }
            doc.insert("metadata".into(), Value::Object(meta));
            doc.insert("spec".into(), spec);
            Value::Object(doc)
        })
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(doc) = serde_json::from_slice::<Value>(&bytes) {
            let _ = validate_document(&doc, &DecodeOptions::default());
        }
    }

    #[test]
    fn arbitrary_json_never_panics(doc in json_value()) {
        let _ = validate_document(&doc, &DecodeOptions::default());
    }

    #[test]
    fn documents_of_every_kind_never_panic(doc in document()) {
        let report = validate_document(&doc, &DecodeOptions::default());
        // Every error must name where it is, unless it is about the whole document.
        for finding in report.errors() {
            prop_assert!(!finding.message.is_empty());
        }
    }
}
