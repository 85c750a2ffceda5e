//! DestinationRule rules: takes a decoded istio DestinationRule spec and its metadata, records findings with field
//! paths (host, subsets, traffic policies: load balancer, connection pool, outlier detection, client TLS, tunnel,
//! locality settings, exportTo, workload selector). The connection-pool check, shared with Sidecar, is in
//! [`super::common::connection_pool`].

use std::collections::{BTreeMap, BTreeSet};

use super::common::{self, validate_connection_pool, FieldPath};
use admitpilot_model::istio::destination_rule::{
    ClientTlsMode, ClientTlsSettings, ConnectionPoolSettings, LoadBalancerSettings,
    LocalityFailover, LocalityLoadBalancerSetting, OutlierDetection, PortTrafficPolicy,
    TrafficPolicy, TunnelSettings, ZoneAwareLoadBalancerSetting,
};
use admitpilot_model::{istio::DestinationRule, Findings, ObjectMeta};

/// Maglev table sizes must stay below this (Envoy's limit).
const MAGLEV_TABLE_MAX: u64 = 5_000_011;
/// Topology labels that may not be combined with explicit failover.
const TOPOLOGY_LABELS: &[&str] = &[
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.istio.io/subzone",
];

/// Validates one DestinationRule, recording every error and warning.
pub fn validate(spec: &DestinationRule, meta: &ObjectMeta, out: &mut Findings) {
    let mut p = FieldPath::new("spec");
    // Mirrors Istio's `ValidateDestinationRule`: the host is a `ValidateWildcardDomain` domain.
    if let Err(e) = common::check_wildcard_domain(&spec.host) {
        out.error(p.child("host"), e);
    }
    if let Some(policy) = &spec.traffic_policy {
        validate_traffic_policy(&meta.namespace, policy, &mut p.field("trafficPolicy"), out);
    }
    {
        let mut subsets = p.field("subsets");
        let mut names = BTreeSet::new();
        for (i, subset) in spec.subsets.iter().enumerate() {
            if super::deadline::expired() {
                break;
            }
            let mut at = subsets.index(i);
            // Mirrors Istio's `ValidateDestinationRule` (unique names) and `validateSubset` (`validateSubsetName`),
            // with their texts.
            if !names.insert(subset.name.as_str()) {
                out.error(
                    at.child("name"),
                    format!("duplicate subset names: {}", subset.name),
                );
            }
            if let Err(e) = common::check_subset_name(&subset.name) {
                out.error(at.child("name"), e);
            }
            common::validate_labels(&subset.labels, &at.child("labels"), out);
            if let Some(policy) = &subset.traffic_policy {
                validate_traffic_policy(
                    &meta.namespace,
                    policy,
                    &mut at.field("trafficPolicy"),
                    out,
                );
            }
        }
    }
    let context = if spec.workload_selector.is_some() {
        common::ExportToContext::DestinationRuleWithSelector
    } else {
        common::ExportToContext::Plain
    };
    common::validate_export_to(
        &meta.namespace,
        &spec.export_to,
        context,
        &p.child("exportTo"),
        out,
    );
    if let Some(selector) = &spec.workload_selector {
        common::validate_workload_selector(
            &selector.match_labels,
            &p.child("workloadSelector.matchLabels"),
            out,
        );
    }
}

/// Mirrors Istio's `validateTrafficPolicy` (pkg/config/validation/validation.go), with its texts: at least one
/// field, tunnel and proxyProtocol exclusive, then each part.
fn validate_traffic_policy(
    namespace: &str,
    policy: &TrafficPolicy,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    let TrafficPolicy {
        load_balancer,
        connection_pool,
        outlier_detection,
        tls,
        port_level_settings,
        tunnel,
        proxy_protocol,
        retry_budget,
    } = policy;
    if load_balancer.is_none()
        && connection_pool.is_none()
        && outlier_detection.is_none()
        && tls.is_none()
        && port_level_settings.is_empty()
        && tunnel.is_none()
        && proxy_protocol.is_none()
        && retry_budget.is_none()
    {
        out.error(p.as_str(), "traffic policy must have at least one field");
        return;
    }
    if tunnel.is_some() && proxy_protocol.is_some() {
        out.error(
            p.as_str(),
            "tunnel and proxyProtocol must not be set together",
        );
    }
    validate_policy_parts(
        namespace,
        load_balancer.as_ref(),
        connection_pool.as_ref(),
        outlier_detection.as_ref(),
        tls.as_ref(),
        p,
        out,
    );
    {
        let mut ports = p.field("portLevelSettings");
        for (i, port_policy) in port_level_settings.iter().enumerate() {
            validate_port_policy(namespace, port_policy, &mut ports.index(i), out);
        }
    }
    if let Some(tunnel) = tunnel {
        validate_tunnel(tunnel, &mut p.field("tunnel"), out);
    }
    if let Some(budget) = retry_budget {
        let b = p.field("retryBudget");
        if let Some(percent) = budget.percent {
            if !(0.0..=100.0).contains(&percent) {
                out.error(
                    b.child("percent"),
                    format!("percent {percent} is outside 0..100"),
                );
            }
        }
        common::validate_duration_field(budget.budget_interval.as_ref(), &b, "budgetInterval", out);
    }
}

fn validate_policy_parts(
    namespace: &str,
    load_balancer: Option<&LoadBalancerSettings>,
    connection_pool: Option<&ConnectionPoolSettings>,
    outlier: Option<&OutlierDetection>,
    tls: Option<&ClientTlsSettings>,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    if let Some(outlier) = outlier {
        validate_outlier_detection(outlier, &mut p.field("outlierDetection"), out);
    }
    if let Some(pool) = connection_pool {
        validate_connection_pool(pool, &mut p.field("connectionPool"), out);
    }
    if let Some(lb) = load_balancer {
        validate_load_balancer(lb, outlier.is_some(), &mut p.field("loadBalancer"), out);
    }
    if let Some(tls) = tls {
        validate_client_tls(namespace, tls, &p.child("tls"), out);
    }
}

/// Mirrors one entry of Istio's `validatePortTrafficPolicies` (pkg/config/validation/validation.go), with its texts.
/// The port-number range check is ours (Istio's webhook does not check it).
fn validate_port_policy(
    namespace: &str,
    policy: &PortTrafficPolicy,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    match policy.port.as_ref() {
        None => out.error(p.child("port"), "portTrafficPolicy must have valid port"),
        Some(port) => {
            if let Some(number) = port.number.filter(|n| *n != 0) {
                common::validate_port(number, &p.child("port.number"), out);
            }
        }
    }
    if policy.load_balancer.is_none()
        && policy.connection_pool.is_none()
        && policy.outlier_detection.is_none()
        && policy.tls.is_none()
    {
        out.error(
            p.as_str(),
            "port traffic policy must have at least one field",
        );
        return;
    }
    validate_policy_parts(
        namespace,
        policy.load_balancer.as_ref(),
        policy.connection_pool.as_ref(),
        policy.outlier_detection.as_ref(),
        policy.tls.as_ref(),
        p,
        out,
    );
}

fn validate_tunnel(tunnel: &TunnelSettings, p: &mut FieldPath, out: &mut Findings) {
    if !tunnel.protocol.is_empty() && tunnel.protocol != "CONNECT" && tunnel.protocol != "POST" {
        out.error(
            p.child("protocol"),
            "tunnel protocol must be \"CONNECT\" or \"POST\"",
        );
    }
    // Mirrors Istio's `validateTunnelSettings`: an FQDN (`ValidateFQDN`) or an IP (`ValidateIPAddress`), with its
    // text naming both errors.
    if let (Err(fqdn), Err(ip)) = (
        common::check_fqdn(&tunnel.target_host),
        common::check_ip(&tunnel.target_host),
    ) {
        out.error(
            p.child("targetHost"),
            format!("tunnel target host must be valid FQDN or IP address: {fqdn}; {ip}"),
        );
    }
    // Same function: the target port through `agent.ValidatePort`, its error wrapped.
    if let Err(e) = common::check_port(tunnel.target_port.unwrap_or(0)) {
        out.error(
            p.child("targetPort"),
            format!("tunnel target port is invalid: {e}"),
        );
    }
}

/// Mirrors Istio's `validateOutlierDetection` (pkg/config/validation/validation.go), with its texts (durations and
/// percentages through the shared helpers). The HTTP error-code range is ours.
fn validate_outlier_detection(o: &OutlierDetection, p: &mut FieldPath, out: &mut Findings) {
    common::validate_duration_field(o.base_ejection_time.as_ref(), p, "baseEjectionTime", out);
    if o.consecutive_errors.unwrap_or(0) != 0 {
        out.warning(
            p.child("consecutiveErrors"),
            "outlier detection consecutive errors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead",
        );
    }
    if !o.split_external_local_origin_errors.unwrap_or(false)
        && o.consecutive_local_origin_failures.unwrap_or(0) > 0
    {
        out.error(
            p.child("consecutiveLocalOriginFailures"),
            "outlier detection consecutive local origin failures is specified, but split external local origin errors is set to false",
        );
    }
    common::validate_duration_field(o.interval.as_ref(), p, "interval", out);
    common::validate_percent(
        i64::from(o.max_ejection_percent.unwrap_or(0)),
        &p.child("maxEjectionPercent"),
        out,
    );
    common::validate_percent(
        i64::from(o.min_health_percent.unwrap_or(0)),
        &p.child("minHealthPercent"),
        out,
    );
    let mut codes = p.field("outlierDetectionHttpErrorCodes");
    for (i, code) in o.outlier_detection_http_error_codes.iter().enumerate() {
        if !(100..=599).contains(code) {
            out.error(
                codes.index(i).as_str(),
                format!("HTTP status {code} is outside 100..599"),
            );
        }
    }
}

fn validate_load_balancer(
    lb: &LoadBalancerSettings,
    has_outlier: bool,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    if lb.simple.is_some() && lb.consistent_hash.is_some() {
        out.error(
            p.as_str(),
            "only one of simple and consistentHash may be set",
        );
    }
    if let Some(ch) = &lb.consistent_hash {
        let mut c = p.field("consistentHash");
        let keys = usize::from(ch.http_header_name.is_some())
            + usize::from(ch.http_cookie.is_some())
            + usize::from(ch.use_source_ip.is_some())
            + usize::from(ch.http_query_parameter_name.is_some());
        if keys > 1 {
            out.error(
                c.as_str(),
                "only one of httpHeaderName, httpCookie, useSourceIp and httpQueryParameterName may be set",
            );
        }
        if ch.ring_hash.is_some() && ch.maglev.is_some() {
            out.error(c.as_str(), "only one of ringHash and maglev may be set");
        }
        if let Some(cookie) = &ch.http_cookie {
            // Mirrors Istio's `validateLoadBalancer` (pkg/config/validation/validation.go) HttpCookie rules, with its
            // texts: a name is required, and attribute names are non-empty and unique.
            let mut ck = c.field("httpCookie");
            if cookie.name.is_empty() {
                out.error(ck.child("name"), "name required for HttpCookie");
            }
            common::validate_duration_field(cookie.ttl.as_ref(), &ck, "ttl", out);
            let mut names = BTreeSet::new();
            let mut attrs = ck.field("attributes");
            for (i, attr) in cookie.attributes.iter().enumerate() {
                if attr.name.is_empty() {
                    out.error(
                        attrs.index(i).child("name"),
                        "cookie attribute name cannot be empty",
                    );
                } else if !names.insert(attr.name.as_str()) {
                    out.error(
                        attrs.index(i).child("name"),
                        format!("duplicate cookie attribute name: {}", attr.name),
                    );
                }
            }
        }
        if ch.minimum_ring_size.unwrap_or(0) != 0 {
            out.warning(
                c.child("minimumRingSize"),
                "consistent hash MinimumRingSize is deprecated, use ConsistentHashLB's RingHash configuration instead",
            );
            if ch.ring_hash.is_some() || ch.maglev.is_some() {
                out.error(
                    c.child("minimumRingSize"),
                    "only one of MinimumRingSize or Maglev/Ringhash can be specified",
                );
            }
        }
        // Mirrors Istio's `validateLoadBalancer` Maglev rules, with its texts.
        if let Some(maglev) = &ch.maglev {
            let path = c.child("maglev.tableSize");
            let size = maglev.table_size.unwrap_or(0);
            if size == 0 {
                out.error(&path, "tableSize must be set for maglev");
            }
            if size >= MAGLEV_TABLE_MAX {
                out.error(
                    &path,
                    format!("tableSize must be less than {MAGLEV_TABLE_MAX} for maglev"),
                );
            }
            if !is_prime(size) {
                out.error(&path, "tableSize must be a prime number for maglev");
            }
        }
    }
    // Mirrors Istio's `validateLoadBalancer`, with its text.
    if lb.locality_lb_setting.is_some() && lb.zone_aware_lb_setting.is_some() {
        out.error(
            p.as_str(),
            "only one of localityLbSetting and zoneAwareLbSetting can be set",
        );
    }
    if let Some(locality) = &lb.locality_lb_setting {
        validate_locality_lb(locality, has_outlier, &p.child("localityLbSetting"), out);
    }
    if let Some(zone) = &lb.zone_aware_lb_setting {
        validate_zone_aware_lb(zone, has_outlier, &p.child("zoneAwareLbSetting"), out);
    }
    common::validate_duration_field(
        lb.warmup_duration_secs.as_ref(),
        p,
        "warmupDurationSecs",
        out,
    );
    // Mirrors Istio's `validateLoadBalancer` warmup rules, with its texts; a negative minimumPercent is refused by
    // the CRD's `minimum: 0` (Istio's webhook checks only the upper bound), with our text.
    if let Some(warmup) = &lb.warmup {
        let w = p.field("warmup");
        match &warmup.duration {
            None => out.error(w.child("duration"), "duration is required"),
            Some(d) => common::validate_duration(d, &w.child("duration"), out),
        }
        if let Some(min) = warmup.minimum_percent {
            if min > 100.0 {
                out.error(
                    w.child("minimumPercent"),
                    "minimumPercent value should be less than or equal to 100",
                );
            } else if !(0.0..=100.0).contains(&min) {
                out.error(
                    w.child("minimumPercent"),
                    format!("minimumPercent {min} is outside 0..100"),
                );
            }
        }
        if warmup.aggression.is_some_and(|a| a <= 0.0) {
            out.error(w.child("aggression"), "aggression should be greater than 0");
        }
    }
}

/// Tells whether `x` is prime, the way Envoy decides it for Maglev table sizes (1, 2 and 3 count as prime).
fn is_prime(x: u64) -> bool {
    if x != 0 && x < 4 {
        return true;
    }
    if x & 1 == 0 {
        return false;
    }
    let mut factor = 3u64;
    while factor.saturating_mul(factor) <= x {
        if x.is_multiple_of(factor) {
            return false;
        }
        factor += 2;
    }
    true
}

/// The texts of one failover check, in the order: same region, not a bare region, a wildcard.
type FailoverTexts = [&'static str; 3];

/// `agent.ValidateLocalityLbSetting`'s failover texts.
const LOCALITY_FAILOVER: FailoverTexts = [
    "locality lb failover settings must specify different regions",
    "locality lb failover only specify region",
    "locality lb failover region should not contain '*' wildcard",
];

/// `agent.ValidateZoneAwareLbSetting`'s failover texts.
const ZONE_AWARE_FAILOVER: FailoverTexts = [
    "zone aware lb failover settings must specify different regions",
    "zone aware lb failover only specifies region; zone and subzone failover are handled automatically",
    "zone aware lb failover region should not contain '*' wildcard",
];

/// Istio's warning for failover settings without outlier detection (both locality settings).
const FAILOVER_NEEDS_OUTLIER: &str = "outlier detection policy must be provided for failover";

/// Mirrors the failover loop shared by Istio's `agent.ValidateLocalityLbSetting` and
/// `agent.ValidateZoneAwareLbSetting` (pkg/config/validation/agent/validation.go): each failover names two different
/// regions, with no `/` and no `*`; `texts` are the calling function's.
fn validate_failovers(
    failovers: &[LocalityFailover],
    texts: FailoverTexts,
    path: &str,
    out: &mut Findings,
) {
    let [same, not_region, wildcard] = texts;
    for f in failovers {
        if f.from == f.to {
            out.error(path, same);
        }
        if f.from.contains('/') || f.to.contains('/') {
            out.error(path, not_region);
        }
        if f.from.contains('*') || f.to.contains('*') {
            out.error(path, wildcard);
        }
    }
}

/// Mirrors Istio's `agent.ValidateLocalityLbSetting` (pkg/config/validation/agent/validation.go), with its texts:
/// distribute and failover exclusive, no topology label in failoverPriority beside failover, weights in 1..=100
/// adding up to 100, localities through `validateLocalities`, the failover rules, and a warning for failover
/// without outlier detection.
fn validate_locality_lb(
    lb: &LocalityLoadBalancerSetting,
    has_outlier: bool,
    path: &str,
    out: &mut Findings,
) {
    if !lb.distribute.is_empty() && !lb.failover.is_empty() {
        out.error(
            path,
            "can not simultaneously specify 'distribute' and 'failover'",
        );
        return;
    }
    if !lb.failover.is_empty() {
        if let Some(label) = lb
            .failover_priority
            .iter()
            .find(|l| TOPOLOGY_LABELS.contains(&l.as_str()))
        {
            out.error(
                path,
                format!("can not simultaneously set 'failover' and topology label '{label}' in 'failover_priority'"),
            );
            return;
        }
    }
    let mut sources = Vec::with_capacity(lb.distribute.len());
    for d in &lb.distribute {
        sources.push(d.from.as_str());
        let mut total: u64 = 0;
        for weight in d.to.values() {
            if !(1..=100).contains(weight) {
                out.error(path, "locality weight must be in range [1, 100]");
                return;
            }
            total += u64::from(*weight);
        }
        if total != 100 {
            out.error(path, format!("total locality weight {total} != 100"));
            return;
        }
        if let Err(e) = check_localities(d.to.keys().map(String::as_str)) {
            out.error(path, e);
        }
    }
    if let Err(e) = check_localities(sources.into_iter()) {
        out.error(path, e);
    }
    if (!lb.failover.is_empty() || !lb.failover_priority.is_empty()) && !has_outlier {
        out.warning(path, FAILOVER_NEEDS_OUTLIER);
    }
    validate_failovers(&lb.failover, LOCALITY_FAILOVER, path, out);
}

/// Mirrors Istio's `agent.ValidateZoneAwareLbSetting` (pkg/config/validation/agent/validation.go), with its texts: no
/// topology label in failoverPriority, the failover rules, and a warning for failover without outlier detection.
fn validate_zone_aware_lb(
    lb: &ZoneAwareLoadBalancerSetting,
    has_outlier: bool,
    path: &str,
    out: &mut Findings,
) {
    for label in lb
        .failover_priority
        .iter()
        .filter(|l| TOPOLOGY_LABELS.contains(&l.as_str()))
    {
        out.error(
            path,
            format!("'failover_priority' for zone aware lb must not use topology label '{label}'; region- and zone-level routing are handled automatically"),
        );
    }
    if (!lb.failover.is_empty() || !lb.failover_priority.is_empty()) && !has_outlier {
        out.warning(path, FAILOVER_NEEDS_OUTLIER);
    }
    validate_failovers(&lb.failover, ZONE_AWARE_FAILOVER, path, out);
    // Istio's webhook has no such check: this mirrors the CRD's `minimum: 1` on `minClusterSize`
    // (manifests/charts/base/files/crd-all.gen.yaml), which the API server enforces.
    if lb.min_cluster_size == Some(0) {
        out.error(path, "minClusterSize must be at least 1");
    }
}

/// Checks a set of `region/zone/subzone` localities: wildcards only as a final `*`, no empty parts, no overlap.
/// Mirrors Istio's `validateLocalities` (pkg/config/validation/agent/validation.go, with `getLocalityParam`), with its
/// texts; the first problem ends the check.
fn check_localities<'a>(localities: impl Iterator<Item = &'a str>) -> Result<(), String> {
    // region → zone → subzones; "*" stands for "everything below".
    let mut seen: BTreeMap<&str, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for locality in localities {
        let stars = locality.matches('*').count();
        if stars > 1 || (stars == 1 && !locality.ends_with('*')) {
            return Err(format!(
                "locality {locality} wildcard '*' number can not exceed 1 and must be in the end"
            ));
        }
        let overlap = || {
            Err(format!(
                "locality {locality} overlap with previous specified ones"
            ))
        };
        if seen.contains_key("*") {
            return overlap();
        }
        let parts: Vec<&str> = locality.splitn(3, '/').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(format!(
                "locality {locality} must not contain empty region/zone/subzone info"
            ));
        }
        match parts.as_slice() {
            [region] => {
                if seen.contains_key(region) {
                    return overlap();
                }
                seen.insert(region, BTreeMap::from([("*", BTreeSet::from(["*"]))]));
            }
            [region, zone] => {
                let zones = seen.entry(region).or_default();
                if zones.contains_key("*") || zones.contains_key(zone) {
                    return overlap();
                }
                zones.insert(zone, BTreeSet::from(["*"]));
            }
            [region, zone, subzone] => {
                let zones = seen.entry(region).or_default();
                if zones.contains_key("*") {
                    return overlap();
                }
                let subzones = zones.entry(zone).or_default();
                if subzones.contains("*") || !subzones.insert(subzone) {
                    return overlap();
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The namespace of a `configmap://<namespace>/<name>` credential (`rest` follows the scheme). Mirrors Istio's
/// `credentials.ParseResourceName` for that scheme, with its texts: both parts are required, and anything after a
/// second `/` is ignored.
fn configmap_namespace<'a>(resource: &str, rest: &'a str) -> Result<&'a str, String> {
    let mut parts = rest.split('/');
    let (ns, name) = match (parts.next(), parts.next()) {
        (Some(ns), Some(name)) => (ns, name),
        _ => {
            return Err(format!(
                "invalid resource name {}. Expected namespace and name",
                common::go_quote(resource)
            ))
        }
    };
    let missing = if ns.is_empty() {
        "namespace"
    } else if name.is_empty() {
        "name"
    } else {
        return Ok(ns);
    };
    Err(format!(
        "invalid resource name {}. Expected {missing}",
        common::go_quote(resource)
    ))
}

/// Validates client TLS settings (Istio's `ValidateTLS`).
/// Mirrors Istio's `agent.ValidateTLS` (pkg/config/validation/agent/validation.go), with its texts: the
/// `configmap://` credential rule (with `credentials.ParseResourceName`), what insecureSkipVerify excludes, no
/// files beside a credentialName, and MUTUAL's client certificate and key.
fn validate_client_tls(namespace: &str, tls: &ClientTlsSettings, path: &str, out: &mut Findings) {
    if let Some(rest) = tls.credential_name.strip_prefix("configmap://") {
        match configmap_namespace(&tls.credential_name, rest) {
            Err(e) => out.error(path, format!("invalid configmap:// credentialName: {e}")),
            Ok(ns) if ns != namespace || namespace.is_empty() => out.error(
                path,
                format!(
                    "invalid configmap:// credentialName: namespace must match the configuration namespace {}",
                    common::go_quote(namespace)
                ),
            ),
            Ok(_) => {}
        }
    }
    let mode = tls.mode;
    if tls.insecure_skip_verify == Some(true) {
        if mode == Some(ClientTlsMode::Simple)
            && (!tls.ca_certificates.is_empty()
                || !tls.credential_name.is_empty()
                || !tls.subject_alt_names.is_empty())
        {
            out.error(
                path,
                "cannot specify CaCertificates or CredentialName or SubjectAltNames when InsecureSkipVerify is set true",
            );
        }
        if mode == Some(ClientTlsMode::Mutual)
            && (!tls.ca_certificates.is_empty() || !tls.subject_alt_names.is_empty())
        {
            out.error(
                path,
                "cannot specify CaCertificates or SubjectAltNames when InsecureSkipVerify is set true",
            );
        }
    }
    let simple_or_mutual = matches!(mode, Some(ClientTlsMode::Simple | ClientTlsMode::Mutual));
    if simple_or_mutual && !tls.credential_name.is_empty() {
        if !tls.client_certificate.is_empty()
            || !tls.ca_certificates.is_empty()
            || !tls.private_key.is_empty()
            || !tls.ca_crl.is_empty()
        {
            out.error(
                path,
                "cannot specify client certificates or CA certificate or CA CRL If credentialName is set",
            );
        }
        return;
    }
    if mode == Some(ClientTlsMode::Mutual) {
        if tls.client_certificate.is_empty() {
            out.error(path, "client certificate required for mutual tls");
        }
        if tls.private_key.is_empty() {
            out.error(path, "private key required for mutual tls");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(spec: serde_json::Value) -> (Vec<String>, Vec<String>) {
        crate::testing::run_rules(spec, &crate::testing::meta("dr", "ns1"), validate)
    }

    #[test]
    fn accepts_a_typical_rule() {
        let (e, w) = run(json!({
            "host": "reviews.prod.svc.cluster.local",
            "trafficPolicy": {
                "connectionPool": {"tcp": {"maxConnections": 100, "connectTimeout": "30ms", "idleTimeout": "0s"},
                                   "http": {"http2MaxRequests": 1000, "http2KeepAlive": {"interval": "10s", "timeout": "5s"}}},
                "outlierDetection": {"consecutive5xxErrors": 7, "interval": "5m", "baseEjectionTime": "15m"},
                "loadBalancer": {"consistentHash": {"httpCookie": {"name": "user", "ttl": "0.5s"}, "maglev": {"tableSize": 65537}}},
                "tls": {"mode": "MUTUAL", "clientCertificate": "/c", "privateKey": "/k"},
                "portLevelSettings": [{"port": {"number": 80}, "loadBalancer": {"simple": "LEAST_REQUEST"}}]
            },
            "subsets": [{"name": "v1", "labels": {"version": "v1"}}, {"name": "v2", "labels": {"version": "v2"},
                         "trafficPolicy": {"loadBalancer": {"simple": "ROUND_ROBIN"}}}]
        }));
        assert!(e.is_empty(), "{e:?}");
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn host_and_subsets() {
        let (e, _) = run(
            json!({"host": "", "subsets": [{"name": "v1"}, {"name": "v1"}, {"name": "Bad_Name", "labels": {"a b": "c"}}]}),
        );
        assert_eq!(e.len(), 4, "{e:?}");
    }

    #[test]
    fn traffic_policy_shape() {
        // Istio's `validateTrafficPolicy` and `validatePortTrafficPolicies` texts.
        let (e, _) = run(json!({"host": "a", "trafficPolicy": {}}));
        assert_eq!(
            e,
            ["spec.trafficPolicy: traffic policy must have at least one field"]
        );
        let (e, _) = run(
            json!({"host": "a", "trafficPolicy": {"tunnel": {"targetHost": "x.com", "targetPort": 80}, "proxyProtocol": {}}}),
        );
        assert_eq!(
            e,
            ["spec.trafficPolicy: tunnel and proxyProtocol must not be set together"]
        );
        let (e, _) = run(json!({"host": "a", "trafficPolicy": {"portLevelSettings": [{}]}}));
        assert_eq!(
            e,
            [
                "spec.trafficPolicy.portLevelSettings[0].port: portTrafficPolicy must have valid port",
                "spec.trafficPolicy.portLevelSettings[0]: port traffic policy must have at least one field"
            ]
        );
        let (e, _) = run(
            json!({"host": "a", "trafficPolicy": {"tunnel": {"protocol": "GET", "targetHost": "bad host", "targetPort": 0}}}),
        );
        assert_eq!(e.len(), 3, "{e:?}");
        // Istio's `validateTunnelSettings` wraps `agent.ValidatePort`'s text.
        assert_eq!(
            e[2],
            "spec.trafficPolicy.tunnel.targetPort: tunnel target port is invalid: port number 0 must be in the range 1..65535"
        );
    }

    #[test]
    fn connection_pool_and_outlier() {
        let (e, w) = run(json!({"host": "a", "trafficPolicy": {
            "connectionPool": {"http": {"maxRetries": -1, "h2UpgradePolicy": "UPGRADE", "useClientProtocol": true, "http2KeepAlive": {}},
                               "tcp": {"connectTimeout": "0.1ms"}},
            "outlierDetection": {"consecutiveErrors": 5, "consecutiveLocalOriginFailures": 2, "maxEjectionPercent": 101,
                                 "outlierDetectionHttpErrorCodes": [99]}
        }}));
        assert_eq!(e.len(), 8, "{e:?}");
        assert_eq!(w.len(), 1, "{w:?}");
        // Istio's `validateOutlierDetection` texts.
        let od = "spec.trafficPolicy.outlierDetection";
        assert_eq!(
            w,
            [format!("{od}.consecutiveErrors: outlier detection consecutive errors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead")]
        );
        assert!(
            e.contains(&format!("{od}.consecutiveLocalOriginFailures: outlier detection consecutive local origin failures is specified, but split external local origin errors is set to false")),
            "{e:?}"
        );
        let (e, _) = run(json!({"host": "a", "trafficPolicy": {"connectionPool": {}}}));
        assert_eq!(e.len(), 1);
    }

    #[test]
    fn load_balancer() {
        let (e, w) = run(json!({"host": "a", "trafficPolicy": {"loadBalancer": {
            "consistentHash": {"httpCookie": {"name": "", "attributes": [{"name": "a"}, {"name": "a"}]}, "minimumRingSize": 10,
                               "maglev": {"tableSize": 10}},
            "warmup": {"aggression": 0, "minimumPercent": 150}
        }}}));
        // cookie name, duplicate attr, minRing+maglev, not prime, warmup duration, minimumPercent, aggression
        assert_eq!(e.len(), 7, "{e:?}");
        assert_eq!(w.len(), 1, "{w:?}");
        // Istio's `validateLoadBalancer` texts.
        let lb = "spec.trafficPolicy.loadBalancer";
        assert_eq!(
            e[2..],
            [
                format!("{lb}.consistentHash.minimumRingSize: only one of MinimumRingSize or Maglev/Ringhash can be specified"),
                format!("{lb}.consistentHash.maglev.tableSize: tableSize must be a prime number for maglev"),
                format!("{lb}.warmup.duration: duration is required"),
                format!("{lb}.warmup.minimumPercent: minimumPercent value should be less than or equal to 100"),
                format!("{lb}.warmup.aggression: aggression should be greater than 0"),
            ]
        );
        assert_eq!(
            w,
            [format!("{lb}.consistentHash.minimumRingSize: consistent hash MinimumRingSize is deprecated, use ConsistentHashLB's RingHash configuration instead")]
        );
        let (e2, _) = run(json!({"host": "a", "trafficPolicy": {"loadBalancer": {
            "consistentHash": {"httpHeaderName": "h", "maglev": {"tableSize": 5000011}}}}}));
        assert_eq!(
            e2,
            [format!(
                "{lb}.consistentHash.maglev.tableSize: tableSize must be less than 5000011 for maglev"
            )]
        );
        let (e2, _) = run(json!({"host": "a", "trafficPolicy": {"loadBalancer": {
            "consistentHash": {"httpHeaderName": "h", "maglev": {}}}}}));
        assert_eq!(
            e2[0],
            format!("{lb}.consistentHash.maglev.tableSize: tableSize must be set for maglev")
        );
        let cookie = "spec.trafficPolicy.loadBalancer.consistentHash.httpCookie";
        assert_eq!(e[0], format!("{cookie}.name: name required for HttpCookie"));
        assert_eq!(
            e[1],
            format!("{cookie}.attributes[1].name: duplicate cookie attribute name: a")
        );
        let (e, _) = run(json!({"host": "a", "trafficPolicy": {"loadBalancer": {
            "consistentHash": {"httpCookie": {"name": "c", "attributes": [{"name": ""}]}}
        }}}));
        assert_eq!(
            e,
            [format!(
                "{cookie}.attributes[0].name: cookie attribute name cannot be empty"
            )]
        );
        assert!(is_prime(65537) && is_prime(3) && !is_prime(9) && !is_prime(0));
    }

    #[test]
    fn locality_settings() {
        let (e, w) = run(
            json!({"host": "a", "trafficPolicy": {"loadBalancer": {"localityLbSetting": {
                "distribute": [{"from": "us-west/zone1/*", "to": {"us-west/zone1/*": 80, "us-west/zone2/*": 20}}]
            }}}}),
        );
        assert!(e.is_empty() && w.is_empty(), "{e:?} {w:?}");
        let (e, _) = run(
            json!({"host": "a", "trafficPolicy": {"loadBalancer": {"localityLbSetting": {
            "distribute": [{"from": "a", "to": {"b": 50}}]}}}}),
        );
        assert_eq!(
            e,
            ["spec.trafficPolicy.loadBalancer.localityLbSetting: total locality weight 50 != 100"]
        );
        let (e, w) = run(
            json!({"host": "a", "trafficPolicy": {"loadBalancer": {"localityLbSetting": {
            "failover": [{"from": "us-east", "to": "us-east"}, {"from": "a/b", "to": "c*"}]}}}}),
        );
        let at = "spec.trafficPolicy.loadBalancer.localityLbSetting: ";
        assert_eq!(
            e,
            LOCALITY_FAILOVER.map(|text| format!("{at}{text}")),
            "agent.ValidateLocalityLbSetting's texts"
        );
        assert_eq!(w, [format!("{at}{FAILOVER_NEEDS_OUTLIER}")]);
        assert_eq!(
            w[0],
            format!("{at}outlier detection policy must be provided for failover")
        );
        assert_eq!(
            LOCALITY_FAILOVER[1],
            "locality lb failover only specify region"
        );
        let lb = |setting: serde_json::Value| {
            run(json!({"host": "a", "trafficPolicy": {"loadBalancer": setting, "outlierDetection": {}}})).0
        };
        assert_eq!(
            lb(
                json!({"localityLbSetting": {"distribute": [{"from": "a", "to": {"b": 100}}], "failover": [{"from": "a", "to": "b"}]}})
            ),
            [format!(
                "{at}can not simultaneously specify 'distribute' and 'failover'"
            )]
        );
        assert_eq!(
            lb(json!({"localityLbSetting": {"failover": [{"from": "a", "to": "b"}], "failoverPriority": ["topology.kubernetes.io/zone"]}})),
            [format!("{at}can not simultaneously set 'failover' and topology label 'topology.kubernetes.io/zone' in 'failover_priority'")]
        );
        assert_eq!(
            lb(json!({"localityLbSetting": {"distribute": [{"from": "a", "to": {"b": 0}}]}})),
            [format!("{at}locality weight must be in range [1, 100]")]
        );
        let zone = "spec.trafficPolicy.loadBalancer.zoneAwareLbSetting: ";
        assert_eq!(
            lb(json!({"zoneAwareLbSetting": {"failover": [{"from": "a", "to": "a"}, {"from": "a/b", "to": "*"}],
                                             "failoverPriority": ["topology.istio.io/subzone"]}})),
            [
                format!("{zone}'failover_priority' for zone aware lb must not use topology label 'topology.istio.io/subzone'; region- and zone-level routing are handled automatically"),
                format!("{zone}zone aware lb failover settings must specify different regions"),
                format!("{zone}zone aware lb failover only specifies region; zone and subzone failover are handled automatically"),
                format!("{zone}zone aware lb failover region should not contain '*' wildcard"),
            ]
        );
        assert_eq!(
            lb(json!({"localityLbSetting": {}, "zoneAwareLbSetting": {}})),
            ["spec.trafficPolicy.loadBalancer: only one of localityLbSetting and zoneAwareLbSetting can be set"]
        );
        // `validateLocalities`' texts.
        assert_eq!(
            check_localities(["a/*", "a/b"].into_iter()),
            Err("locality a/b overlap with previous specified ones".into())
        );
        assert_eq!(
            check_localities(["*/b"].into_iter()),
            Err("locality */b wildcard '*' number can not exceed 1 and must be in the end".into())
        );
        assert_eq!(
            check_localities(["a//c"].into_iter()),
            Err("locality a//c must not contain empty region/zone/subzone info".into())
        );
    }

    /// `agent.ValidateTLS`'s texts.
    #[test]
    fn client_tls() {
        let at = "spec.trafficPolicy.tls: ";
        let (e, _) = run(json!({"host": "a", "trafficPolicy": {"tls": {"mode": "MUTUAL"}}}));
        assert_eq!(
            e,
            [
                format!("{at}client certificate required for mutual tls"),
                format!("{at}private key required for mutual tls")
            ]
        );
        let (e, _) = run(
            json!({"host": "a", "trafficPolicy": {"tls": {"mode": "SIMPLE", "credentialName": "c", "caCertificates": "/ca"}}}),
        );
        assert_eq!(
            e,
            [format!("{at}cannot specify client certificates or CA certificate or CA CRL If credentialName is set")]
        );
        let (e, _) = run(
            json!({"host": "a", "trafficPolicy": {"tls": {"mode": "SIMPLE", "insecureSkipVerify": true, "subjectAltNames": ["x"]}}}),
        );
        assert_eq!(
            e,
            [format!("{at}cannot specify CaCertificates or CredentialName or SubjectAltNames when InsecureSkipVerify is set true")]
        );
        let (e, _) = run(
            json!({"host": "a", "trafficPolicy": {"tls": {"mode": "MUTUAL", "insecureSkipVerify": true, "caCertificates": "/ca",
                   "clientCertificate": "/c", "privateKey": "/k"}}}),
        );
        assert_eq!(
            e,
            [format!("{at}cannot specify CaCertificates or SubjectAltNames when InsecureSkipVerify is set true")]
        );
        let (e, _) = run(
            json!({"host": "a", "trafficPolicy": {"tls": {"mode": "SIMPLE", "credentialName": "configmap://other/x"}}}),
        );
        assert_eq!(e.len(), 1);
    }

    /// Istio's `credentials.ParseResourceName` needs both parts of `configmap://<namespace>/<name>` and ignores
    /// anything after the name.
    #[test]
    fn configmap_credential_names() {
        let tls = |name: &str| {
            run(json!({"host": "a", "trafficPolicy": {"tls": {"mode": "SIMPLE", "credentialName": name}}})).0
        };
        assert!(tls("configmap://ns1/x").is_empty());
        assert!(tls("configmap://ns1/x/extra").is_empty());
        let e = tls("configmap://x");
        assert!(
            e[0].ends_with(
                r#"invalid configmap:// credentialName: invalid resource name "configmap://x". Expected namespace and name"#
            ),
            "{e:?}"
        );
        assert!(tls("configmap:///x")[0].ends_with("Expected namespace"));
        assert!(tls("configmap://ns1/")[0].ends_with("Expected name"));
        let e = tls("configmap://other/x");
        assert!(
            e[0].ends_with(r#"namespace must match the configuration namespace "ns1""#),
            "{e:?}"
        );
    }

    #[test]
    fn export_to_and_selector() {
        let (e, w) = run(json!({"host": "a", "workloadSelector": {}, "exportTo": ["*"]}));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(w.len(), 1, "{w:?}");
        let (e, _) = run(
            json!({"host": "a", "workloadSelector": {"matchLabels": {"app": "x"}}, "exportTo": ["."]}),
        );
        assert!(e.is_empty(), "{e:?}");
    }
}
