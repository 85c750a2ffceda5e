//! Connection pools (pure): takes connection-pool settings, records Istio's findings (durations, limits);
//! shared by DestinationRule traffic policies and Sidecar ingress listeners.

use super::duration::{parse_duration_nanos, validate_duration, validate_duration_field};
use super::path::FieldPath;
use admitpilot_model::istio::destination_rule::{ConnectionPoolSettings, H2UpgradePolicy};
use admitpilot_model::Findings;

/// Validates connection-pool settings (shared by DestinationRule and Sidecar).
pub fn validate_connection_pool(
    pool: &ConnectionPoolSettings,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    if pool.http.is_none() && pool.tcp.is_none() {
        out.error(p.as_str(), "a connection pool must set http and/or tcp");
        return;
    }
    if let Some(http) = &pool.http {
        let mut h = p.field("http");
        for (field, value) in [
            ("http1MaxPendingRequests", http.http1_max_pending_requests),
            ("http2MaxRequests", http.http2_max_requests),
            ("maxRequestsPerConnection", http.max_requests_per_connection),
            ("maxRetries", http.max_retries),
            ("maxConcurrentStreams", http.max_concurrent_streams),
        ] {
            if value.is_some_and(|v| v < 0) {
                out.error(h.child(field), format!("{field} must not be negative"));
            }
        }
        validate_duration_field(http.idle_timeout.as_ref(), &h, "idleTimeout", out);
        if http.h2_upgrade_policy == Some(H2UpgradePolicy::Upgrade)
            && http.use_client_protocol == Some(true)
        {
            out.error(
                h.child("useClientProtocol"),
                "useClientProtocol must not be true when h2UpgradePolicy is UPGRADE",
            );
        }
        if let Some(keepalive) = &http.http2_keep_alive {
            let k = h.field("http2KeepAlive");
            for (field, value) in [
                ("interval", &keepalive.interval),
                ("timeout", &keepalive.timeout),
            ] {
                match value {
                    None => out.error(
                        k.child(field),
                        format!("http2KeepAlive {field} is required"),
                    ),
                    Some(d) => validate_duration(d, &k.child(field), out),
                }
            }
        }
    }
    if let Some(tcp) = &pool.tcp {
        let t = p.field("tcp");
        if tcp.max_connections.is_some_and(|v| v < 0) {
            out.error(
                t.child("maxConnections"),
                "maxConnections must not be negative",
            );
        }
        validate_duration_field(tcp.connect_timeout.as_ref(), &t, "connectTimeout", out);
        validate_duration_field(
            tcp.max_connection_duration.as_ref(),
            &t,
            "maxConnectionDuration",
            out,
        );
        if let Some(idle) = &tcp.idle_timeout {
            // 0 disables the idle timeout and is allowed.
            if parse_duration_nanos(idle).is_none_or(|n| n / 1_000_000 != 0) {
                validate_duration(idle, &t.child("idleTimeout"), out);
            }
        }
        if let Some(ka) = &tcp.tcp_keepalive {
            validate_duration_field(ka.time.as_ref(), &t, "tcpKeepalive.time", out);
            validate_duration_field(ka.interval.as_ref(), &t, "tcpKeepalive.interval", out);
        }
    }
}
