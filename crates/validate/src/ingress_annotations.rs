//! Ingress annotation rules (pure): takes an Ingress (its annotations and spec) and yields the findings of
//! Higress's annotations: an invalid value is an error naming the key and why (Higress's parsers in
//! `pkg/ingress/kube/annotations` fail on it, and Higress then silently ignores it; admitpilot denies it instead);
//! a regex an annotation makes (`use-regex` paths, canary header values and patterns, regex match annotations)
//! must be valid RE2 for Envoy; an unknown key under `nginx.ingress.kubernetes.io/` or `higress.io/`, or one
//! admitpilot does not enforce, is a warning naming it.

use k8s_openapi::api::networking::v1::IngressSpec;

use super::regex::check_regex;
use admitpilot_model::finding::Findings;
use admitpilot_model::ingress::annotations::{self, Canary, MatchKind};
use admitpilot_model::ingress::{path_kind, path_of, PathKind};
use admitpilot_model::ObjectMeta;

/// The field path of an annotation.
fn field(key: &str) -> String {
    format!("metadata.annotations[{key}]")
}

/// Checks the annotations of an Ingress.
pub fn validate(spec: &IngressSpec, meta: &ObjectMeta, out: &mut Findings) {
    let parsed = annotations::parse(&meta.annotations);
    for e in &parsed.errors {
        out.error(field(&e.key), &e.message);
    }
    for w in &parsed.warnings {
        out.warning(field(&w.key), &w.message);
    }
    let a = &parsed.annotations;
    let canary_key = |suffix: &str| {
        [annotations::NGINX, annotations::HIGRESS]
            .iter()
            .map(|p| format!("{p}{suffix}"))
            .find(|k| meta.annotations.contains_key(k))
            .unwrap_or_default()
    };
    match &a.canary {
        Some(Canary::Header { value: Some(v), .. }) => {
            if let Err(e) = check_regex(&format!("always|{v}")) {
                out.error(
                    field(&canary_key("canary-by-header-value")),
                    format!("the value is used as a regex: {e}"),
                );
            }
        }
        Some(Canary::Header {
            pattern: Some(p), ..
        }) => {
            if let Err(e) = check_regex(p) {
                out.error(field(&canary_key("canary-by-header-pattern")), e);
            }
        }
        _ => {}
    }
    if a.canary.is_some() && spec.tls.as_ref().is_some_and(|t| !t.is_empty()) {
        out.warning(
            "spec.tls",
            "spec.tls of a canary Ingress is not enforced on gateways by admitpilot: the main Ingress's TLS serves \
             its hosts (as in Higress)",
        );
    }
    for r in a.matches.iter().filter(|r| r.kind == MatchKind::Regex) {
        if let Err(e) = check_regex(&r.value) {
            let key = meta
                .annotations
                .keys()
                .find(|k| k.ends_with(&r.name) && k.contains("regex-match-"))
                .cloned()
                .unwrap_or_default();
            out.error(field(&key), e);
        }
    }
    if a.whitelist.is_some() {
        let regex = spec
            .rules
            .iter()
            .flatten()
            .flat_map(|r| r.http.iter().flat_map(|h| &h.paths))
            .any(|p| {
                matches!(
                    path_kind(path_of(p), &p.path_type, a),
                    PathKind::PrefixRegex | PathKind::FullPathRegex
                )
            });
        if regex || a.ignore_path_case {
            out.warning(
                field(&canary_key("whitelist-source-range")),
                "with regex or case-insensitive paths the source ranges apply to every path of the Ingress's \
                 hosts (the access policy cannot match such paths; stricter than Higress, never looser)",
            );
        }
    }
    for (i, rule) in spec.rules.iter().flatten().enumerate() {
        for (j, path) in rule.http.iter().flat_map(|h| &h.paths).enumerate() {
            let at = format!("spec.rules[{i}].http.paths[{j}]");
            let value = path_of(path);
            if matches!(
                path_kind(value, &path.path_type, a),
                PathKind::PrefixRegex | PathKind::FullPathRegex
            ) {
                if let Err(e) = check_regex(value) {
                    out.error(
                        format!("{at}.path"),
                        format!("the annotations make this path a regex: {e}"),
                    );
                }
            }
            if path.backend.resource.is_some() {
                out.warning(
                    format!("{at}.backend.resource"),
                    "a resource backend is not enforced on gateways by admitpilot: only Service backends are \
                     served",
                );
            }
        }
    }
    if a.whitelist.is_some() && spec.default_backend.is_some() {
        out.warning(
            "spec.defaultBackend",
            "whitelist-source-range is not enforced on gateways by admitpilot for spec.defaultBackend: its catch-all \
             route takes no route annotations (as in Higress)",
        );
    }
    if spec
        .default_backend
        .as_ref()
        .is_some_and(|b| b.resource.is_some())
    {
        out.warning(
            "spec.defaultBackend.resource",
            "a resource backend is not enforced on gateways by admitpilot: only Service backends are served",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::decode::test_object;
    use admitpilot_model::Spec;
    use serde_json::json;

    /// A whitelist does not reach the default backend's catch-all: admission says so.
    #[test]
    fn a_whitelist_beside_a_default_backend_is_warned() {
        let object = test_object(
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "a", "namespace": "d",
                "annotations": {"nginx.ingress.kubernetes.io/whitelist-source-range": "10.0.0.0/8"}},
            "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}}),
        );
        let Spec::Ingress(spec) = &object.spec else {
            panic!("not an Ingress");
        };
        let mut out = Findings::default();
        validate(spec, &object.metadata, &mut out);
        let findings = out.into_vec();
        assert!(
            findings.iter().any(|f| f.field == "spec.defaultBackend"
                && f.message
                    .contains("is not enforced on gateways by admitpilot")),
            "{findings:?}"
        );
    }
}
