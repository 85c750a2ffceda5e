//! AuthorizationPolicy rules: takes a decoded istio AuthorizationPolicy spec and its metadata, records findings
//! with field paths (`spec.rules[0].from[1].source.principals[0]`).
//!
//! Follows Istio's webhook (`ValidateAuthorizationPolicy`, `pkg/config/security`) and the CRD's CEL rules:
//! attachment, CUSTOM/DENY/provider rules, non-empty sources and operations, IPs, ports, service accounts, trust
//! domains, path templates and `when` attributes; DENY rules that only use HTTP attributes get a warning.

use crate::model::istio::authorization_policy::{Action, Condition, Operation, Rule, Source};
use crate::model::{istio::AuthorizationPolicy, Findings, ObjectMeta};

use super::common::{check_ip_or_cidr, validate_policy_attachment, DRY_RUN_ANNOTATION};

/// Most rules (and `from` entries per rule) the CRD accepts.
const MAX_RULES: usize = 512;
/// Most service accounts per list, and longest service account (`ns/name`).
const MAX_SERVICE_ACCOUNTS: usize = 16;
const MAX_SERVICE_ACCOUNT_LEN: usize = 320;

/// Validates one AuthorizationPolicy.
pub fn validate(spec: &AuthorizationPolicy, meta: &ObjectMeta, out: &mut Findings) {
    validate_policy_attachment(
        spec.selector.as_ref(),
        spec.target_ref.as_ref(),
        &spec.target_refs,
        out,
    );
    if meta.annotations.contains_key(DRY_RUN_ANNOTATION)
        && !matches!(spec.action, Action::Allow | Action::Deny)
    {
        out.error(
            format!("metadata.annotations.{DRY_RUN_ANNOTATION}"),
            format!(
                "annotation {DRY_RUN_ANNOTATION} is only supported with action ALLOW or DENY, not {:?}",
                spec.action
            ),
        );
    }
    validate_action(spec, out);
    if spec.rules.len() > MAX_RULES {
        out.error(
            "spec.rules",
            format!("at most {MAX_RULES} rules are allowed"),
        );
    }
    for (i, rule) in spec.rules.iter().enumerate() {
        if super::deadline::expired() {
            break;
        }
        validate_rule(rule, &format!("spec.rules[{i}]"), spec.action, out);
    }
}

fn validate_action(spec: &AuthorizationPolicy, out: &mut Findings) {
    match spec.action {
        Action::Custom => {
            if spec.rules.is_empty() {
                out.error(
                    "spec.rules",
                    "a CUSTOM policy without rules never triggers; add an empty rule `{}` to apply it to every request",
                );
            } else if spec.provider.as_ref().is_none_or(|p| p.name.is_empty()) {
                out.error("spec.provider.name", "a CUSTOM policy needs provider.name");
            }
            for (i, rule) in spec.rules.iter().enumerate() {
        if super::deadline::expired() {
            break;
        }
                check_custom_rule(rule, &format!("spec.rules[{i}]"), out);
            }
        }
        Action::Deny if spec.rules.is_empty() => out.error(
            "spec.rules",
            "a DENY policy without rules never triggers; add an empty rule `{}` to apply it to every request",
        ),
        _ => {}
    }
    if spec.provider.is_some() && spec.action != Action::Custom {
        out.error(
            "spec.provider",
            format!(
                "provider is only allowed with action CUSTOM, not {:?}",
                spec.action
            ),
        );
    }
}

/// CUSTOM (external authorization) cannot match on peer identity or request authentication.
fn check_custom_rule(rule: &Rule, path: &str, out: &mut Findings) {
    for (j, from) in rule.from.iter().flatten().enumerate() {
        let Some(src) = &from.source else { continue };
        let fields: [(&str, &[String]); 10] = [
            ("namespaces", &src.namespaces),
            ("notNamespaces", &src.not_namespaces),
            ("serviceAccounts", &src.service_accounts),
            ("notServiceAccounts", &src.not_service_accounts),
            ("trustDomains", &src.trust_domains),
            ("notTrustDomains", &src.not_trust_domains),
            ("principals", &src.principals),
            ("notPrincipals", &src.not_principals),
            ("requestPrincipals", &src.request_principals),
            ("notRequestPrincipals", &src.not_request_principals),
        ];
        for (name, values) in fields {
            if !values.is_empty() {
                out.error(
                    format!("{path}.from[{j}].source.{name}"),
                    format!("source.{name} is not supported with action CUSTOM"),
                );
            }
        }
    }
    for (j, cond) in rule.when.iter().enumerate() {
        let key = cond.key.as_str();
        if matches!(
            key,
            "source.namespace"
                | "source.serviceAccount"
                | "source.trustDomain"
                | "source.principal"
        ) || key.starts_with("request.auth.")
        {
            out.error(
                format!("{path}.when[{j}].key"),
                format!("condition key {key:?} is not supported with action CUSTOM"),
            );
        }
    }
}

fn validate_rule(rule: &Rule, path: &str, action: Action, out: &mut Findings) {
    for (name, empty) in [
        ("from", rule.from.as_ref().is_some_and(Vec::is_empty)),
        ("to", rule.to.as_ref().is_some_and(Vec::is_empty)),
    ] {
        if empty {
            out.error(
                format!("{path}.{name}"),
                format!("{name} must not be an empty list (omit it to match everything)"),
            );
        }
    }
    let from_list = rule.from.as_deref().unwrap_or_default();
    let to_list = rule.to.as_deref().unwrap_or_default();
    if from_list.len() > MAX_RULES {
        out.error(
            format!("{path}.from"),
            format!("at most {MAX_RULES} from entries are allowed"),
        );
    }
    let mut from_exists = false;
    let mut tcp_in_from = false;
    for (j, from) in from_list.iter().enumerate() {
        let path = format!("{path}.from[{j}].source");
        match &from.source {
            None => out.error(&path, "from.source is required"),
            Some(src) => {
                from_exists = true;
                tcp_in_from |= validate_source(src, &path, out);
            }
        }
    }
    let mut to_exists = false;
    let mut tcp_in_to = false;
    for (j, to) in to_list.iter().enumerate() {
        let path = format!("{path}.to[{j}].operation");
        match &to.operation {
            None => out.error(&path, "to.operation is required"),
            Some(op) => {
                to_exists = true;
                tcp_in_to |= validate_operation(op, &path, out);
            }
        }
    }
    for (j, cond) in rule.when.iter().enumerate() {
        validate_condition(cond, &format!("{path}.when[{j}]"), out);
    }
    if action == Action::Deny
        && ((from_exists && !to_exists && !tcp_in_from) || (to_exists && !tcp_in_to))
    {
        out.warning(
            path,
            "this DENY rule uses only HTTP attributes, so it denies all traffic to TCP ports in scope; \
             consider naming the ports explicitly",
        );
    }
}

/// Validates a source; returns whether it uses attributes that also apply to TCP traffic.
fn validate_source(src: &Source, path: &str, out: &mut Findings) -> bool {
    let has_sa = !src.service_accounts.is_empty() || !src.not_service_accounts.is_empty();
    let has_ns_or_principal = !src.principals.is_empty()
        || !src.not_principals.is_empty()
        || !src.namespaces.is_empty()
        || !src.not_namespaces.is_empty();
    if has_sa && has_ns_or_principal {
        out.error(
            path,
            "serviceAccounts cannot be combined with namespaces or principals",
        );
    }
    let plain: [(&str, &[String]); 8] = [
        ("principals", &src.principals),
        ("notPrincipals", &src.not_principals),
        ("requestPrincipals", &src.request_principals),
        ("notRequestPrincipals", &src.not_request_principals),
        ("namespaces", &src.namespaces),
        ("notNamespaces", &src.not_namespaces),
        ("serviceAccounts", &src.service_accounts),
        ("notServiceAccounts", &src.not_service_accounts),
    ];
    let ips: [(&str, &[String]); 4] = [
        ("ipBlocks", &src.ip_blocks),
        ("notIpBlocks", &src.not_ip_blocks),
        ("remoteIpBlocks", &src.remote_ip_blocks),
        ("notRemoteIpBlocks", &src.not_remote_ip_blocks),
    ];
    let domains: [(&str, &[String]); 2] = [
        ("trustDomains", &src.trust_domains),
        ("notTrustDomains", &src.not_trust_domains),
    ];
    if plain
        .iter()
        .chain(&ips)
        .chain(&domains)
        .all(|(_, v)| v.is_empty())
    {
        out.error(path, "from.source must set at least one field");
    }
    for (name, values) in &plain[..6] {
        check_non_empty(values, &format!("{path}.{name}"), out);
    }
    for (name, values) in &plain[6..] {
        check_service_accounts(values, &format!("{path}.{name}"), out);
    }
    for (name, values) in ips {
        for (k, v) in values.iter().enumerate() {
            let item = format!("{path}.{name}[{k}]");
            if v.is_empty() {
                out.error(item, empty_value(&go_field(name)));
            } else if let Err(e) = check_ip_or_cidr(v) {
                out.error(item, e);
            }
        }
    }
    for (name, values) in domains {
        for (k, v) in values.iter().enumerate() {
            let item = format!("{path}.{name}[{k}]");
            if let Err(e) = check_trust_domain(v, &go_field(name)) {
                out.error(item, e);
            }
        }
    }
    // Peer identity, namespaces, service accounts and IPs all apply to plain TCP connections.
    [
        &src.principals,
        &src.not_principals,
        &src.namespaces,
        &src.not_namespaces,
        &src.service_accounts,
        &src.not_service_accounts,
        &src.ip_blocks,
        &src.not_ip_blocks,
        &src.remote_ip_blocks,
        &src.not_remote_ip_blocks,
    ]
    .iter()
    .any(|v| !v.is_empty())
}

/// Validates an operation; returns whether it names ports (the only TCP attribute of an operation).
fn validate_operation(op: &Operation, path: &str, out: &mut Findings) -> bool {
    let fields: [(&str, &[String]); 8] = [
        ("hosts", &op.hosts),
        ("notHosts", &op.not_hosts),
        ("ports", &op.ports),
        ("notPorts", &op.not_ports),
        ("methods", &op.methods),
        ("notMethods", &op.not_methods),
        ("paths", &op.paths),
        ("notPaths", &op.not_paths),
    ];
    if fields.iter().all(|(_, v)| v.is_empty()) {
        out.error(path, "to.operation must set at least one field");
    }
    for (name, values) in fields {
        check_non_empty(values, &format!("{path}.{name}"), out);
    }
    for (name, values) in [("ports", &op.ports), ("notPorts", &op.not_ports)] {
        for (k, port) in values.iter().enumerate() {
            if !port.is_empty() {
                if let Err(e) = check_port_string(port) {
                    out.error(format!("{path}.{name}[{k}]"), e);
                }
            }
        }
    }
    for (name, values) in [("paths", &op.paths), ("notPaths", &op.not_paths)] {
        for (k, p) in values.iter().enumerate() {
            if let Err(e) = check_path_template(p) {
                out.error(format!("{path}.{name}[{k}]"), e);
            }
        }
    }
    !op.ports.is_empty() || !op.not_ports.is_empty()
}

fn validate_condition(cond: &Condition, path: &str, out: &mut Findings) {
    if cond.key.is_empty() {
        out.error(format!("{path}.key"), "condition key is required");
        return;
    }
    if cond.values.is_empty() && cond.not_values.is_empty() {
        out.error(
            path,
            format!("condition {:?} needs values or notValues", cond.key),
        );
        return;
    }
    for (name, values) in [("values", &cond.values), ("notValues", &cond.not_values)] {
        for (k, v) in values.iter().enumerate() {
            if let Err(e) = check_attribute(&cond.key, v) {
                out.error(format!("{path}.{name}[{k}]"), e);
            }
        }
        // An unknown or retired key is reported once, whatever the values.
        if values.is_empty() {
            continue;
        }
        if let Err(e) = check_attribute_key(&cond.key) {
            out.error(format!("{path}.key"), e);
            break;
        }
    }
}

/// Records an error for each empty value of the list at `path`. Mirrors Istio's `security.CheckEmptyValues`, with
/// its text (which names the list by its Go field name).
fn check_non_empty(values: &[String], path: &str, out: &mut Findings) {
    for (k, v) in values.iter().enumerate() {
        if v.is_empty() {
            out.error(format!("{path}[{k}]"), empty_value(&go_field(path)));
        }
    }
}

/// The Go field name Istio's security checks print for the list at `path` (`…source.notPrincipals` →
/// `NotPrincipals`).
fn go_field(path: &str) -> String {
    let name = path.rsplit('.').next().unwrap_or(path);
    let mut chars = name.chars();
    chars
        .next()
        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// Istio's text for an empty value in the list `key`.
fn empty_value(key: &str) -> String {
    format!("empty value not allowed, found in {key}")
}

/// Service accounts: `sa` or `ns/sa`, no wildcard, at most 320 characters, at most 16 per list. Mirrors Istio's
/// `security.CheckServiceAccount`, with its texts.
fn check_service_accounts(values: &[String], path: &str, out: &mut Findings) {
    if values.len() > MAX_SERVICE_ACCOUNTS {
        out.error(
            path,
            format!("may not have more than {MAX_SERVICE_ACCOUNTS} values"),
        );
    }
    let key = go_field(path);
    for (k, v) in values.iter().enumerate() {
        if let Err(e) = check_service_account(v, &key) {
            out.error(format!("{path}[{k}]"), e);
        }
    }
}

/// Checks one service account of the list `key` (a Go field name or a condition key), as Istio's
/// `security.CheckServiceAccount` does for each value, in its order and with its texts.
fn check_service_account(v: &str, key: &str) -> Result<(), String> {
    const FORMAT: &str = "expected format 'serviceAccount' or 'namespace/serviceAccount', found";
    if v.is_empty() {
        return Err(empty_value(key));
    }
    if v.contains('*') {
        return Err(format!("wildcard not allowed, found in {key}"));
    }
    let quoted = super::common::go_quote(v);
    if v.matches('/').count() > 1 {
        return Err(format!("{FORMAT} {quoted} in {key}"));
    }
    if v.len() > MAX_SERVICE_ACCOUNT_LEN {
        return Err(format!(
            "value cannot exceed {MAX_SERVICE_ACCOUNT_LEN} characters, found {quoted} in {key}"
        ));
    }
    match v.split_once('/') {
        Some(("", _)) => Err(format!("{FORMAT} empty namespace {quoted} in {key}")),
        Some((_, "")) => Err(format!("{FORMAT} empty serviceAccount {quoted} in {key}")),
        _ => Ok(()),
    }
}

/// Values that may hold one `*` at the start or end (or be `*`). Mirrors Istio's `security.CheckWildcardValues`
/// for one value of the list `key`, with its texts.
fn check_wildcard_value(v: &str, key: &str) -> Result<(), String> {
    if v.is_empty() {
        return Err(empty_value(key));
    }
    let quoted = super::common::go_quote(v);
    match v.matches('*').count() {
        0 => Ok(()),
        1 if v.starts_with('*') || v.ends_with('*') => Ok(()),
        1 => Err(format!(
            "wildcard is only allowed at the start or end, found in {key}: {quoted}"
        )),
        _ => Err(format!(
            "at most one wildcard is allowed, found in {key}: {quoted}"
        )),
    }
}

/// Checks one trust domain of the list `key`: a wildcard value without `/`. Mirrors Istio's
/// `security.CheckTrustDomainValues`, with its texts.
fn check_trust_domain(v: &str, key: &str) -> Result<(), String> {
    check_wildcard_value(v, key)?;
    if v.contains('/') {
        return Err(format!(
            "trust domain must not contain '/', found in {key}: {}",
            super::common::go_quote(v)
        ));
    }
    Ok(())
}

/// A port as a decimal string in 0..=65535 (as Istio's `ValidatePorts`).
fn check_port_string(port: &str) -> Result<(), String> {
    match port.parse::<u32>() {
        Ok(p) if p <= 65535 && port.bytes().all(|c| c.is_ascii_digit()) => Ok(()),
        _ => Err(format!("{port:?} is not a port number (0..65535)")),
    }
}

/// Path templates: `{*}` matches one segment, `{**}` the rest and must come last; other braces are refused, and
/// with a template every other segment must be a plain RFC 3986 path literal.
fn check_path_template(path: &str) -> Result<(), String> {
    let has_template = path.contains("{*}") || path.contains("{**}");
    let trimmed = path.trim_matches('/');
    let mut seen_any = false;
    for segment in trimmed.split('/') {
        match segment {
            "{*}" | "{**}" if seen_any => {
                return Err(format!("path {path:?}: {{**}} must be the last segment"))
            }
            "{*}" => continue,
            "{**}" => {
                seen_any = true;
                continue;
            }
            _ => {}
        }
        if segment.contains(['{', '}']) {
            return Err(format!(
                "path {path:?}: '{{' and '}}' are only allowed as the templates {{*}} and {{**}}"
            ));
        }
        if has_template && !is_path_literal(segment) {
            return Err(format!(
                "path {path:?}: segment {segment:?} is not a valid path literal"
            ));
        }
    }
    Ok(())
}

fn is_path_literal(segment: &str) -> bool {
    !segment.is_empty()
        && segment.bytes().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'-' | b'.'
                        | b'_'
                        | b'~'
                        | b'%'
                        | b'!'
                        | b'$'
                        | b'&'
                        | b'\''
                        | b'('
                        | b')'
                        | b'+'
                        | b','
                        | b';'
                        | b':'
                        | b'@'
                        | b'='
                )
        })
}

/// Checks that a condition key is a known, supported attribute.
fn check_attribute_key(key: &str) -> Result<(), String> {
    const MAP_KEYS: [&str; 3] = [
        "request.headers",
        "request.auth.claims",
        "experimental.envoy.filters.",
    ];
    const PLAIN: [&str; 11] = [
        "source.ip",
        "remote.ip",
        "source.namespace",
        "source.serviceAccount",
        "source.principal",
        "source.trustDomain",
        "request.auth.principal",
        "request.auth.audiences",
        "request.auth.presenter",
        "destination.ip",
        "destination.port",
    ];
    if PLAIN.contains(&key) || key == "connection.sni" {
        return Ok(());
    }
    if MAP_KEYS.iter().any(|p| key.starts_with(p)) {
        let open = key.find('[');
        return match open {
            Some(open) if key.ends_with(']') && open > 0 && open + 2 < key.len() => Ok(()),
            _ => Err(format!(
                "condition key {key:?} must have the form name[item]"
            )),
        };
    }
    if key == "destination.namespace" {
        return Err(format!(
            "condition key {key:?} is not supported: use the policy's namespace instead"
        ));
    }
    if key.starts_with("destination.labels") {
        return Err(format!(
            "condition key {key:?} is not supported: use the workload selector instead"
        ));
    }
    if key == "destination.name" || key == "destination.user" {
        return Err(format!(
            "condition key {key:?} was only supported by the retired v1alpha1 API"
        ));
    }
    Err(format!("unknown condition key {key:?}"))
}

/// Checks one condition value against what its key expects.
fn check_attribute(key: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(empty_value(key));
    }
    // Istio's `security.ValidateAttribute` passes the condition key as the list name.
    match key {
        "source.ip" | "remote.ip" | "destination.ip" => check_ip_or_cidr(value),
        "destination.port" => check_port_string(value),
        "source.serviceAccount" => check_service_account(value, key),
        "source.trustDomain" => check_wildcard_value(value, key),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn value_checks_never_panic(s in r"([a-z0-9/*{}\[\].:]|é){0,32}") {
            let _ = check_path_template(&s);
            let _ = check_attribute_key(&s);
            let _ = check_service_account(&s, "k");
            let _ = check_wildcard_value(&s, "k");
            let _ = check_port_string(&s);
        }
    }
    use serde_json::json;

    fn findings(spec: serde_json::Value) -> Vec<(String, bool)> {
        findings_with_meta(spec, json!({"name": "p", "namespace": "ns"}))
    }

    fn findings_with_meta(spec: serde_json::Value, meta: serde_json::Value) -> Vec<(String, bool)> {
        crate::validate::testing::findings_of(
            "security.istio.io/v1",
            "AuthorizationPolicy",
            meta,
            spec,
        )
    }

    fn error_paths(spec: serde_json::Value) -> Vec<String> {
        crate::validate::testing::error_fields(findings(spec))
    }

    #[test]
    fn accepts_typical_policies() {
        for spec in [
            json!({}),
            json!({"action": "DENY", "rules": [{}]}),
            json!({"selector": {"matchLabels": {"app": "a"}}, "rules": [{
                "from": [{"source": {"principals": ["cluster.local/ns/default/sa/sleep"],
                                     "ipBlocks": ["10.0.0.0/8", "::1"]}}],
                "to": [{"operation": {"methods": ["GET"], "paths": ["/api/{*}/x/{**}"], "ports": ["8080"]}}],
                "when": [{"key": "request.headers[x-token]", "values": ["a"]},
                         {"key": "source.ip", "notValues": ["1.2.3.4"]},
                         {"key": "experimental.envoy.filters.a.b[c]", "values": ["d"]}]}]}),
            json!({"action": "CUSTOM", "provider": {"name": "ext"}, "rules": [{"to": [{"operation": {"paths": ["/a"]}}]}]}),
            json!({"rules": [{"from": [{"source": {"serviceAccounts": ["ns/sa", "sa"], "trustDomains": ["*.td"]}}]}]}),
            json!({"targetRefs": [{"kind": "Gateway", "group": "gateway.networking.k8s.io", "name": "gw"}]}),
        ] {
            assert_eq!(error_paths(spec.clone()), Vec::<String>::new(), "{spec}");
        }
    }

    #[test]
    fn rejects_service_accounts_with_principals() {
        assert_eq!(
            error_paths(
                json!({"rules": [{"from": [{"source": {"serviceAccounts": ["bar/sa"], "namespaces": ["bar"]}}]}]})
            ),
            vec!["spec.rules[0].from[0].source"]
        );
    }

    #[test]
    fn reports_every_bad_value_with_its_path() {
        let paths = error_paths(json!({"rules": [{
            "from": [{"source": {"principals": [""], "ipBlocks": ["not-ip"]}}, {}],
            "to": [{"operation": {"ports": ["99999"], "paths": ["/a/{**}/{*}"]}}, {"operation": {}}],
            "when": [{"values": ["key is missing"]}, {"key": "source.ip"}, {"key": "destination.labels[x]", "values": ["y"]}]}]}));
        assert_eq!(
            paths,
            vec![
                "spec.rules[0].from[0].source.principals[0]",
                "spec.rules[0].from[0].source.ipBlocks[0]",
                "spec.rules[0].from[1].source",
                "spec.rules[0].to[0].operation.ports[0]",
                "spec.rules[0].to[0].operation.paths[0]",
                "spec.rules[0].to[1].operation",
                "spec.rules[0].when[0].key",
                "spec.rules[0].when[1]",
                "spec.rules[0].when[2].key",
            ]
        );
    }

    #[test]
    fn checks_actions_and_providers() {
        assert_eq!(error_paths(json!({"action": "DENY"})), vec!["spec.rules"]);
        assert_eq!(error_paths(json!({"action": "CUSTOM"})), vec!["spec.rules"]);
        assert_eq!(
            error_paths(
                json!({"action": "CUSTOM", "rules": [{"from": [{"source": {"namespaces": ["a"]}}],
                "when": [{"key": "request.auth.claims[iss]", "values": ["x"]}]}]})
            ),
            vec![
                "spec.provider.name",
                "spec.rules[0].from[0].source.namespaces",
                "spec.rules[0].when[0].key"
            ]
        );
        assert_eq!(
            error_paths(json!({"provider": {"name": "x"}})),
            vec!["spec.provider"]
        );
        let bad_action = findings(json!({"action": "MAYBE"}));
        assert_eq!(bad_action, vec![("spec.action".to_string(), true)]);
    }

    #[test]
    fn rejects_empty_from_and_to_lists() {
        assert_eq!(
            error_paths(json!({"rules": [{"from": [], "to": []}]})),
            vec!["spec.rules[0].from", "spec.rules[0].to"]
        );
    }

    #[test]
    fn warns_on_http_only_deny_rules() {
        let f = findings(
            json!({"action": "DENY", "rules": [{"to": [{"operation": {"methods": ["GET"]}}]}]}),
        );
        assert_eq!(f, vec![("spec.rules[0]".to_string(), false)]);
        let f = findings(
            json!({"action": "DENY", "rules": [{"to": [{"operation": {"methods": ["GET"], "ports": ["80"]}}]}]}),
        );
        assert!(f.is_empty());
    }

    #[test]
    fn checks_attachment_and_dry_run() {
        assert_eq!(
            error_paths(json!({"selector": {"matchLabels": {"a*": "b"}},
                "targetRef": {"kind": "Service", "name": "s", "namespace": "other"}})),
            vec!["spec", "spec.selector.matchLabels", "spec.targetRef"]
        );
        let meta = json!({"name": "p", "annotations": {"istio.io/dry-run": "true"}});
        assert!(
            findings_with_meta(json!({"action": "DENY", "rules": [{}]}), meta.clone()).is_empty()
        );
        assert_eq!(
            findings_with_meta(json!({"action": "AUDIT"}), meta),
            vec![("metadata.annotations.istio.io/dry-run".to_string(), true)]
        );
    }

    #[test]
    fn path_templates_follow_envoy_rules() {
        assert!(check_path_template("/a/{*}/b/{**}").is_ok());
        assert!(check_path_template("/a*").is_ok());
        assert!(check_path_template("/{**}/a").is_ok());
        assert!(check_path_template("/{**}/{*}").is_err());
        assert!(check_path_template("/a/{x}").is_err());
        assert!(check_path_template("/a b/{*}").is_err());
    }

    #[test]
    fn service_accounts_have_one_optional_namespace() {
        assert!(check_service_account("ns/sa", "k").is_ok());
        assert!(check_service_account("sa", "k").is_ok());
        assert!(check_service_account("a/b/c", "k").is_err());
        assert!(check_service_account("/sa", "k").is_err());
        assert!(check_service_account("ns/*", "k").is_err());
    }

    /// Istio's `security.CheckServiceAccount` and `CheckTrustDomainValues`, edge by edge, with their texts.
    #[test]
    fn identity_texts() {
        let sa = |v: &str| check_service_account(v, "ServiceAccounts");
        let ns = "n".repeat(160);
        assert!(sa(&format!("{ns}/{}", "s".repeat(159))).is_ok()); // 320 characters
        assert_eq!(
            sa(&format!("{ns}/{}", "s".repeat(160))).unwrap_err(),
            format!(
                "value cannot exceed 320 characters, found \"{ns}/{}\" in ServiceAccounts",
                "s".repeat(160)
            )
        );
        assert_eq!(
            sa("ns/").unwrap_err(),
            "expected format 'serviceAccount' or 'namespace/serviceAccount', found empty serviceAccount \"ns/\" in ServiceAccounts"
        );
        assert_eq!(
            sa("a/b/c").unwrap_err(),
            "expected format 'serviceAccount' or 'namespace/serviceAccount', found \"a/b/c\" in ServiceAccounts"
        );
        assert_eq!(
            sa("*").unwrap_err(),
            "wildcard not allowed, found in ServiceAccounts"
        );
        assert_eq!(
            check_trust_domain("a/b", "NotTrustDomains").unwrap_err(),
            "trust domain must not contain '/', found in NotTrustDomains: \"a/b\""
        );
        assert_eq!(
            check_trust_domain("a*b", "TrustDomains").unwrap_err(),
            "wildcard is only allowed at the start or end, found in TrustDomains: \"a*b\""
        );
        assert_eq!(
            go_field("spec.rules[0].from[0].source.notIpBlocks"),
            "NotIpBlocks"
        );
        let mut out = Findings::default();
        let sixteen: Vec<String> = (0..16).map(|i| format!("sa{i}")).collect();
        check_service_accounts(&sixteen, "p.serviceAccounts", &mut out);
        assert!(out.0.is_empty());
        let seventeen: Vec<String> = (0..17).map(|i| format!("sa{i}")).collect();
        check_service_accounts(&seventeen, "p.serviceAccounts", &mut out);
        assert_eq!(out.0[0].message, "may not have more than 16 values");
    }
}
