//! Real Envoy is the oracle: random AuthorizationPolicies and RequestAuthentications over the validator's whole
//! grammar, and random mutations of the corpus's VirtualServices, DestinationRules, Gateways and EnvoyFilters
//! (tests/support/gen), are offered to admitpilot one by one; what it admits (validation, then the webhook's
//! effect check) is loaded in batches into a real Envoy 1.40 through admitpilot's xDS server and its caching
//! translator, on a gateway with HTTP, HTTPS (SIMPLE and MUTUAL), TCP and TLS-passthrough servers. Envoy must
//! neither crash nor reject anything (every `*update_rejected` stat 0, the process alive after a few requests, no
//! deprecated field). A failing batch is bisected to the object that breaks it, printed with Envoy's message.
//!
//! `ADMITPILOT_GEN_SEED` (default below) and `ADMITPILOT_GEN_COUNT` (default: the CI sample) reproduce or
//! lengthen a run; BENCHMARKS.md records the long run. Skips with a message without Envoy; without the corpus
//! (`ADMITPILOT_CORPUS` or `../shared/corpus`) only policies are generated. Failures that did not come back when
//! their batch prefix was loaded again are printed and counted, not failed on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::corpus;
use support::envoy;
use support::gen;

use std::collections::BTreeMap;
use std::sync::Arc;

use admitpilot::model::ConfigObject;
use gen::admission::Outcome;
use gen::oracle::{Oracle, Verdict};
use serde_json::Value;

/// The CI sample's seed and size.
const SEED: u64 = 20_261_126;
const COUNT: usize = 400;
/// Admitted objects per Envoy load.
const BATCH: usize = 25;
/// At most this many culprits are looked for in one batch.
const MAX_FINDINGS_PER_BATCH: usize = 8;

/// One object Envoy crashed on or rejected.
struct Finding {
    verdict: Verdict,
    /// Whether the object breaks the base config alone (else only after the objects admitted before it).
    alone: bool,
    document: Value,
    /// The objects admitted before it in its batch, as JSON text.
    before: String,
    /// Whether the failure came back when the prefix ending with it was loaded again.
    reproduced: bool,
}

#[derive(Default)]
struct Counts {
    generated: BTreeMap<&'static str, usize>,
    admitted: BTreeMap<&'static str, usize>,
    invalid: usize,
    refused: usize,
    ignored: usize,
    /// Load verdicts other than loaded, by kind, over every load (bisection included).
    failed_loads: BTreeMap<&'static str, usize>,
}

fn verdict_kind(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Loaded => "loaded",
        Verdict::Crashed(_) => "crash",
        Verdict::Rejected(_) => "rejection",
        Verdict::Deprecated(_) => "deprecated",
        Verdict::Stuck(_) => "stuck",
    }
}

async fn load(
    oracle: &mut Oracle,
    objects: &[(Arc<ConfigObject>, Value)],
    counts: &mut Counts,
) -> Verdict {
    let objects: Vec<Arc<ConfigObject>> = objects.iter().map(|(o, _)| Arc::clone(o)).collect();
    let verdict = oracle.load(&objects).await;
    if verdict != Verdict::Loaded {
        *counts
            .failed_loads
            .entry(verdict_kind(&verdict))
            .or_default() += 1;
    }
    verdict
}

/// Loads `batch`; when Envoy fails it, finds the first object whose addition fails it (bisecting on prefixes),
/// records it, and goes on without it.
async fn judge(
    oracle: &mut Oracle,
    mut batch: Vec<(Arc<ConfigObject>, Value)>,
    counts: &mut Counts,
    findings: &mut Vec<Finding>,
) {
    for _ in 0..MAX_FINDINGS_PER_BATCH {
        let mut verdict = load(oracle, &batch, counts).await;
        if verdict == Verdict::Loaded {
            return;
        }
        // The base config alone loads; `batch[..hi]` fails.
        let (mut lo, mut hi) = (0, batch.len());
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            let at_mid = load(oracle, &batch[..mid], counts).await;
            if at_mid == Verdict::Loaded {
                lo = mid;
            } else {
                hi = mid;
                verdict = at_mid;
            }
        }
        if hi == 0 {
            return;
        }
        // A failure that needs the objects before the culprit is checked once more: the prefix with it fails
        // again and the prefix without it loads again.
        let reproduced = hi == 1
            || (load(oracle, &batch[..hi], counts).await != Verdict::Loaded
                && load(oracle, &batch[..hi - 1], counts).await == Verdict::Loaded);
        let before = batch[..hi - 1]
            .iter()
            .map(|(_, doc)| doc.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        let (culprit, document) = batch.remove(hi - 1);
        let alone = load(oracle, &[(culprit, document.clone())], counts).await != Verdict::Loaded;
        findings.push(Finding {
            verdict,
            alone,
            document,
            before,
            reproduced,
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_admitted_config_neither_crashes_nor_is_rejected_by_envoy() {
    let Some(binary) = envoy::envoy_binary() else {
        return;
    };
    let (seed, count) = gen::settings(SEED, COUNT);
    let started = std::time::Instant::now();
    let mut rng = gen::Rng::new(seed);
    let ports: Vec<u16> = (0..8).map(|_| envoy::free_port()).collect();
    let corpus = corpus::corpus_dir("istio/valid").map(|dir| gen::mutate::Corpus::read(&dir));
    if let Some(corpus) = &corpus {
        println!("corpus documents: {:?}", corpus.counts());
    }
    let (base, mut admission, mut oracle) = gen::base_admission_and_oracle(&binary, ports).await;
    let base_snapshot = base.snapshot();
    assert_eq!(oracle.load(&[]).await, Verdict::Loaded, "the base config");

    let mut counts = Counts::default();
    let mut findings = Vec::new();
    let mut batch = Vec::new();
    for index in 0..count {
        let name = format!("g{index}");
        let junk = rng.percent(25);
        rng.junk_allowed(junk);
        let (kind, document) = match (rng.below(100), &corpus) {
            (0..=14, _) => (
                "RequestAuthentication",
                gen::policy::request_authentication(&mut rng, &name),
            ),
            (15..=39, Some(corpus)) => match corpus.mutant(&mut rng, &name, &base) {
                Some(doc) => ("corpus mutant", doc),
                None => (
                    "AuthorizationPolicy",
                    gen::policy::authorization_policy(&mut rng, &name),
                ),
            },
            _ => (
                "AuthorizationPolicy",
                gen::policy::authorization_policy(&mut rng, &name),
            ),
        };
        *counts.generated.entry(kind).or_default() += 1;
        match admission.offer(document.clone()) {
            Outcome::Admitted(object) => {
                *counts.admitted.entry(kind).or_default() += 1;
                batch.push((object, document));
            }
            Outcome::Invalid(_) => counts.invalid += 1,
            Outcome::Refused(_) => counts.refused += 1,
            Outcome::Ignored => counts.ignored += 1,
        }
        if batch.len() == BATCH || (index + 1 == count && !batch.is_empty()) {
            judge(
                &mut oracle,
                std::mem::take(&mut batch),
                &mut counts,
                &mut findings,
            )
            .await;
            admission.reset(base_snapshot.clone());
        }
    }
    let generated: usize = counts.generated.values().sum();
    let admitted: usize = counts.admitted.values().sum();
    println!(
        "seed {seed}: generated {generated} {:?}; admitted {admitted} {:?}; discarded {} (invalid {}, refused by \
         the effect check {}, ignored {}); Envoy loads {} (Envoy starts {}); failed loads {:?}; findings {}; \
         wall {:.1} s",
        counts.generated,
        counts.admitted,
        counts.invalid + counts.refused + counts.ignored,
        counts.invalid,
        counts.refused,
        counts.ignored,
        oracle.loads,
        oracle.starts,
        counts.failed_loads,
        findings.len(),
        started.elapsed().as_secs_f64()
    );
    oracle.shutdown().await;
    let (findings, unreproduced): (Vec<Finding>, Vec<Finding>) =
        findings.into_iter().partition(|f| f.reproduced);
    println!(
        "failures not reproduced when their batch prefix was loaded again: {} ({:?})",
        unreproduced.len(),
        unreproduced
            .iter()
            .map(|f| f.document["metadata"]["name"].as_str().unwrap_or_default())
            .collect::<Vec<_>>()
    );
    let report: Vec<String> = findings
        .iter()
        .map(|f| {
            format!(
                "--- {} ({}, {}):\n{}\n{:?}",
                verdict_kind(&f.verdict),
                if f.alone {
                    "alone".to_string()
                } else {
                    format!("after the objects admitted before it: {}", f.before)
                },
                if f.reproduced {
                    "reproduced"
                } else {
                    "not reproduced"
                },
                serde_yaml_ng::to_string(&f.document).unwrap(),
                f.verdict
            )
        })
        .collect();
    assert!(
        findings.is_empty(),
        "Envoy failed {} admitted objects (seed {seed}):\n{}",
        findings.len(),
        report.join("\n")
    );
    assert!(admitted > 0, "nothing was admitted");
}

/// Found by the generator (seed 20261126): inline key sets that admitpilot admitted and Envoy refused to load
/// (`invalid local jwks: Jwks doesn't have any valid public key`, `Jwks EC [x] and [y] fields have a parse error`),
/// taking every listener of the gateway down with them. Envoy is the oracle both ways: each key set is admitted
/// exactly when Envoy loads it (a refused one is loaded undecoded, past validation, to show Envoy refuses it too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_jwks_is_admitted_exactly_when_envoy_loads_it() {
    let ec = r#"{"kty": "EC", "crv": "P-256", "x": "axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY", "y": "T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU"}"#;
    let set = |key: &str| format!(r#"{{"keys": [{key}]}}"#);
    let cases = [
        set(ec),
        // A single key: admitted as Istio admits it, given to Envoy as a one-key set.
        ec.to_string(),
        set(
            r#"{"kty": "RSA", "alg": "RS256", "n": "up97uqrF9MWOPaPkwSaBeuAPLOr9FKcaWGdVEGzQ4f3Zq5WKVZowx9TCBxmImNJ1qmUi13pB8otwM_l5lfY1AFBMxVbQCUXntLovhDaiSvYp4wGDjFzQiYA-pUq8h6MUZBnhleYrkU7XlCBwNVyN8qNMkpLA7KFZYz-486GnV2NIJJx_4BGa3HdKwQGxi2tjuQsQvao5W4xmSVaaEWopBwMy2QmlhSFQuPUpTaywTqUcUq_6SfAHhZ4IDa_FxEd2c2z8gFGtfst9cY3lRYf-c_ZdboY3mqN9Su3-j3z5r2SHWlhB_LNAjyWlBGsvbGPlTqDziYQwZN4aGsqVKQb9Vw", "e": "AQAB"}"#,
        ),
        set(r#"{"kty": "oct", "alg": "HS256", "k": "c2VjcmV0"}"#),
        set(
            r#"{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#,
        ),
        r#"{"keys": []}"#.to_string(),
        set(r#"{"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA"}"#),
        set(r#"{"kty": "RSA", "n": "abc", "e": "AAE"}"#),
        set(r#"{"kty": "RSA", "alg": "PS256", "n": "abc", "e": "AQAB"}"#),
        set(r#"{"kty": "oct", "alg": "RS256", "k": "c2VjcmV0"}"#),
        set(
            r#"{"kty": "OKP", "crv": "X25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#,
        ),
    ];
    let docs = cases.iter().enumerate().map(|(i, jwks)| {
        serde_json::json!({
            "apiVersion": "security.istio.io/v1",
            "kind": "RequestAuthentication",
            "metadata": {"name": format!("jwks-{i}"), "namespace": "edge"},
            "spec": {
                "selector": {"matchLabels": {"istio": "ingressgateway"}},
                "jwtRules": [{"issuer": "https://idp.test", "jwks": jwks}],
            },
        })
    });
    admitted_exactly_when_envoy_loads(docs.collect()).await;
}

/// Found by the generator (seed 20261126): a principal `*<suffix>` becomes the regex `spiffe://.*<suffix>`
/// (as in Istio's `srcPrincipalGenerator`), and Envoy refuses a regex whose RE2 program exceeds 100 instructions
/// (`RE2 program size of 113 > max program size of 100`), taking the listener down. The effect check now refuses
/// it at admission; namespaces and trust domains build regexes the same way. Envoy judges each length both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_regexes_are_admitted_exactly_when_envoy_loads_them() {
    let source = |field: &str, value: String| serde_json::json!({field: [value]});
    let mut sources = Vec::new();
    for length in [60, 85, 90, 95, 100, 120] {
        let tail = "v".repeat(length);
        sources.push(source("principals", format!("*{tail}")));
        sources.push(source("namespaces", format!("{tail}-*")));
        sources.push(source("trustDomains", format!("*{tail}")));
        sources.push(source(
            "serviceAccounts",
            format!("edge/{}", &tail[..length / 2]),
        ));
    }
    let docs = sources.into_iter().enumerate().map(|(i, source)| {
        serde_json::json!({
            "apiVersion": "security.istio.io/v1",
            "kind": "AuthorizationPolicy",
            "metadata": {"name": format!("regex-{i}"), "namespace": "edge"},
            "spec": {
                "selector": {"matchLabels": {"istio": "ingressgateway"}},
                "action": "DENY",
                "rules": [{"from": [{"source": source}]}],
            },
        })
    });
    admitted_exactly_when_envoy_loads(docs.collect()).await;
}

/// Found by the 10,000-object run (seed 20261126, `g7811`): an EnvoyFilter `ADD` of an HTTP filter appends it
/// behind the router (as Istio's patch engine does), and Envoy rejects the listener (`terminal filter named
/// envoy.filters.http.router … must be the last filter in a http filter chain`). The effect check now refuses it;
/// the same filter inserted before the router is admitted and loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_filter_added_behind_the_router_is_refused() {
    let filter = |name: &str, operation: &str, sub_filter: bool| {
        let mut r#match = serde_json::json!({"context": "GATEWAY"});
        if sub_filter {
            r#match["listener"] = serde_json::json!({"filterChain": {"filter": {
                "name": "envoy.filters.network.http_connection_manager",
                "subFilter": {"name": "envoy.filters.http.router"}}}});
        }
        serde_json::json!({
            "apiVersion": "networking.istio.io/v1alpha3",
            "kind": "EnvoyFilter",
            "metadata": {"name": name, "namespace": "edge"},
            "spec": {
                "workloadSelector": {"labels": {"istio": "ingressgateway"}},
                "configPatches": [{"applyTo": "HTTP_FILTER", "match": r#match, "patch": {
                    "operation": operation,
                    "value": {"name": "envoy.filters.http.cors", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"}},
                }}],
            },
        })
    };
    admitted_exactly_when_envoy_loads(vec![
        filter("added", "ADD", false),
        filter("before-router", "INSERT_BEFORE", true),
    ])
    .await;
}

/// Found by the 10,000-object run (seed 20261126, `g4692`): a `TypedStruct` whose value Envoy cannot convert into
/// its `type_url`'s message (a Duration given as a number) was admitted and Envoy rejected the listener. The
/// effect check now converts it as Envoy does; the same filter with a Duration string is admitted and loads, with
/// no deprecated field (its `append` becomes `append_action`, found by the same run: `g1901`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_struct_envoy_cannot_convert_is_refused() {
    let filter = |name: &str, fill_interval: serde_json::Value| {
        serde_json::json!({
            "apiVersion": "networking.istio.io/v1alpha3",
            "kind": "EnvoyFilter",
            "metadata": {"name": name, "namespace": "edge"},
            "spec": {
                "workloadSelector": {"labels": {"istio": "ingressgateway"}},
                "configPatches": [{"applyTo": "HTTP_FILTER", "match": {"context": "GATEWAY", "listener": {
                    "filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager",
                        "subFilter": {"name": "envoy.filters.http.router"}}}}},
                    "patch": {"operation": "INSERT_BEFORE", "value": {
                        "name": "envoy.filters.http.local_ratelimit",
                        "typed_config": {
                            "@type": "type.googleapis.com/udpa.type.v1.TypedStruct",
                            "type_url": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
                            "value": {"stat_prefix": "local", "token_bucket": {
                                "max_tokens": 1, "tokens_per_fill": 1, "fill_interval": fill_interval},
                                // Istio's example sets the deprecated `append`: gateways get `append_action`.
                                "response_headers_to_add": [{"append": false,
                                    "header": {"key": "x-local-rate-limit", "value": "true"}}]},
                        }}}}],
            },
        })
    };
    admitted_exactly_when_envoy_loads(vec![
        filter("number", serde_json::json!(65536)),
        filter("duration", serde_json::json!("60s")),
    ])
    .await;
}

/// Found by the 10,000-object run (seed 20261126, `g3099`): an EnvoyFilter removing every cluster leaves the gateway
/// nothing to serve, and its proxies were never told that the new version changed nothing for them (the oracle saw
/// it as stuck). Their streams now record the version they serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_every_cluster_is_loaded_and_acknowledged() {
    let Some(binary) = envoy::envoy_binary() else {
        return;
    };
    let ports: Vec<u16> = (0..5).map(|_| envoy::free_port()).collect();
    let (_base, mut admission, mut oracle) = gen::base_admission_and_oracle(&binary, ports).await;
    let doc = serde_json::json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": {"name": "remove-all", "namespace": "edge"},
        "spec": {"workloadSelector": {"labels": {"istio": "ingressgateway"}},
            "configPatches": [{"applyTo": "CLUSTER", "match": {"context": "GATEWAY"},
                "patch": {"operation": "REMOVE"}}]},
    });
    let Outcome::Admitted(object) = admission.offer(doc) else {
        panic!("removing every cluster is admitted (the listeners that need them are left out, and reported)");
    };
    assert_eq!(oracle.load(&[Arc::clone(&object)]).await, Verdict::Loaded);
    assert_eq!(oracle.load(&[object]).await, Verdict::Loaded, "and again");
    oracle.shutdown().await;
}

/// Offers each of `docs` alone to the admission (validation and effect check) and loads it alone into real Envoy
/// (undecoded past validation, so a refused one reaches Envoy too); fails on any object admitted that Envoy does
/// not load, or refused that Envoy loads, and unless both verdicts occur.
async fn admitted_exactly_when_envoy_loads(docs: Vec<Value>) {
    let Some(binary) = envoy::envoy_binary() else {
        return;
    };
    let ports: Vec<u16> = (0..5).map(|_| envoy::free_port()).collect();
    let (base, mut admission, mut oracle) = gen::base_admission_and_oracle(&binary, ports).await;
    let mut disagreements = Vec::new();
    let mut admitted_count = 0;
    let total = docs.len();
    for doc in docs {
        admission.reset(base.snapshot());
        let admitted = matches!(admission.offer(doc.clone()), Outcome::Admitted(_));
        admitted_count += usize::from(admitted);
        let object = match admitpilot::model::decode::decode(&doc, &Default::default()) {
            admitpilot::model::decode::Decoded::Object { object, .. } => Arc::new(object),
            other => panic!("{doc} does not decode: {other:?}"),
        };
        let verdict = oracle.load(&[object]).await;
        if admitted != (verdict == Verdict::Loaded) {
            disagreements.push(format!("{doc}: admitted {admitted}, Envoy {verdict:?}"));
        }
    }
    oracle.shutdown().await;
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    assert!(
        0 < admitted_count && admitted_count < total,
        "both verdicts are exercised: {admitted_count} of {total} admitted"
    );
}
