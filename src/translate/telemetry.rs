//! Telemetry access logging on gateways (pure): takes the snapshot and a proxy, yields the Envoy access logs its
//! HTTP connection managers and TCP proxies write, with Istio's semantics (mirrors `applicableTelemetries` and
//! `mergeLogs` in istio/pilot/pkg/model/telemetry.go): the namespace-wide Telemetry of the root namespace, then of
//! the gateway's namespace, then those selecting the gateway's labels, later ones overriding earlier ones per
//! provider; a gateway counts as a CLIENT workload for `match.mode`; `disabled` turns a provider off;
//! `filter.expression` becomes Envoy's CEL access-log filter.
//!
//! Without a mesh config the only provider known is Istio's built-in `envoy` (a file log to `/dev/stdout` in Istio's
//! default text format); other providers are named in the mesh config's `extensionProviders`, which admitpilot does
//! not read, so they are left out (the webhook says so, see [`super::enforcement`]).

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::accesslog::v3::{
    access_log, access_log_filter, AccessLog, AccessLogFilter, ExtensionFilter,
};
use envoy_types::pb::envoy::config::core::v3::{
    substitution_format_string, SubstitutionFormatString,
};
use envoy_types::pb::envoy::extensions::access_loggers::file::v3::{
    file_access_log, FileAccessLog,
};
use envoy_types::pb::envoy::extensions::access_loggers::filters::cel::v3::ExpressionFilter;

use super::envoy::any;
use super::types::Proxy;
use crate::model::istio::telemetry::{AccessLogging, Telemetry, TelemetryMode};
use crate::model::{ConfigObject, Kind, Snapshot, Spec};

/// The access-log provider Istio defines without any mesh config.
pub const BUILTIN_PROVIDER: &str = "envoy";
/// Where the built-in provider writes.
const BUILTIN_PATH: &str = "/dev/stdout";
/// Name of Envoy's file access logger.
const FILE_LOGGER: &str = "envoy.access_loggers.file";
/// Name of Envoy's CEL access-log filter.
const CEL_FILTER: &str = "envoy.access_loggers.extension_filters.cel";
/// Istio's default text access-log format (the mesh config's `accessLogFormat` unset).
const ISTIO_TEXT_FORMAT: &str = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" \
%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% \
\"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% \
%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \
\"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" %UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% \
%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n";

/// The access logs of `proxy`'s listeners (empty when no Telemetry turns one on).
pub fn access_logs(
    snapshot: &Snapshot,
    proxy: &Proxy,
    root_namespaces: &[String],
) -> Vec<AccessLog> {
    let levels = applicable(snapshot, proxy, root_namespaces);
    merge(&levels)
        .into_iter()
        .filter_map(|(provider, setting)| match setting {
            Setting::On { filter } if provider.eq_ignore_ascii_case(BUILTIN_PROVIDER) => {
                Some(file_log(filter))
            }
            _ => None,
        })
        .collect()
}

/// The access-logging blocks of the Telemetries that apply to `proxy`, least specific first.
fn applicable<'s>(
    snapshot: &'s Snapshot,
    proxy: &Proxy,
    root_namespaces: &[String],
) -> Vec<&'s [AccessLogging]> {
    let telemetries = |namespace: &str| -> Vec<(&'s ConfigObject, &'s Telemetry)> {
        let mut found: Vec<_> = snapshot
            .of_kind(Kind::Telemetry)
            .filter(|object| object.metadata.namespace == namespace)
            .filter_map(|object| match &object.spec {
                Spec::Telemetry(t) => Some((object.as_ref(), t)),
                _ => None,
            })
            .collect();
        // Istio takes the oldest first.
        found.sort_by(|(a, _), (b, _)| {
            (&a.metadata.creation_timestamp, &a.metadata.name)
                .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
        });
        found
    };
    let namespace_wide = |t: &Telemetry| {
        t.selector
            .as_ref()
            .is_none_or(|s| s.match_labels.is_empty())
            && t.target_ref.is_none()
            && t.target_refs.is_empty()
    };
    let mut levels = Vec::new();
    let root = root_namespaces.first().map(String::as_str);
    if let Some(root) = root {
        levels.extend(
            telemetries(root)
                .into_iter()
                .find(|(_, t)| namespace_wide(t))
                .map(|(_, t)| t.access_logging.as_slice()),
        );
    }
    let own = telemetries(&proxy.namespace);
    if root != Some(proxy.namespace.as_str()) {
        levels.extend(
            own.iter()
                .find(|(_, t)| namespace_wide(t))
                .map(|(_, t)| t.access_logging.as_slice()),
        );
    }
    levels.extend(
        own.iter()
            .filter(|(_, t)| {
                t.selector.as_ref().is_some_and(|s| {
                    !s.match_labels.is_empty() && proxy.has_labels(&s.match_labels)
                })
            })
            .map(|(_, t)| t.access_logging.as_slice()),
    );
    levels.retain(|level| !level.is_empty());
    levels
}

/// What the merged configuration says of one provider.
#[derive(Debug, Clone, PartialEq)]
enum Setting<'s> {
    On { filter: Option<&'s str> },
    Off,
}

/// A gateway is a CLIENT workload to Istio's telemetry.
fn applies_to_gateways(block: &AccessLogging) -> bool {
    block.match_.as_ref().is_none_or(|m| {
        matches!(
            m.mode,
            TelemetryMode::Client | TelemetryMode::ClientAndServer
        )
    })
}

fn provider_names(block: &AccessLogging) -> Vec<&str> {
    block
        .providers
        .iter()
        .filter_map(|p| p.name.as_deref())
        .collect()
}

/// Istio's `mergeLogs` for a CLIENT workload with no default providers.
fn merge<'s>(levels: &[&'s [AccessLogging]]) -> BTreeMap<&'s str, Setting<'s>> {
    let mut filters: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    let mut in_scope: BTreeSet<&str> = BTreeSet::new();
    for level in levels {
        let mut named = BTreeSet::new();
        for block in level.iter().filter(|b| applies_to_gateways(b)) {
            for provider in provider_names(block) {
                named.insert(provider);
                filters.insert(
                    provider,
                    block.filter.as_ref().map(|f| f.expression.as_str()),
                );
            }
        }
        if !named.is_empty() {
            in_scope = named;
        }
    }
    let mut out = BTreeMap::new();
    let mut parent: Vec<&str> = Vec::new();
    for block in levels.iter().flat_map(|level| level.iter()) {
        let mut names = provider_names(block);
        if names.is_empty() {
            names = parent.clone();
        }
        parent = names.clone();
        for provider in names {
            if !in_scope.contains(provider) || !applies_to_gateways(block) {
                continue;
            }
            let setting = if block.disabled == Some(true) {
                Setting::Off
            } else {
                Setting::On {
                    filter: filters.get(provider).copied().flatten(),
                }
            };
            out.insert(provider, setting);
        }
    }
    out
}

/// The built-in provider's log: `/dev/stdout` in Istio's text format, behind the CEL filter when one is given.
fn file_log(filter: Option<&str>) -> AccessLog {
    let file = FileAccessLog {
        path: BUILTIN_PATH.into(),
        access_log_format: Some(file_access_log::AccessLogFormat::LogFormat(
            SubstitutionFormatString {
                format: Some(substitution_format_string::Format::TextFormatSource(
                    envoy_types::pb::envoy::config::core::v3::DataSource {
                        specifier: Some(
                            envoy_types::pb::envoy::config::core::v3::data_source::Specifier::InlineString(
                                ISTIO_TEXT_FORMAT.into(),
                            ),
                        ),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            },
        )),
    };
    AccessLog {
        name: FILE_LOGGER.into(),
        filter: filter.filter(|e| !e.is_empty()).map(|expression| AccessLogFilter {
            filter_specifier: Some(access_log_filter::FilterSpecifier::ExtensionFilter(
                ExtensionFilter {
                    name: CEL_FILTER.into(),
                    config_type: Some(
                        envoy_types::pb::envoy::config::accesslog::v3::extension_filter::ConfigType::TypedConfig(
                            any(ExpressionFilter {
                                expression: expression.to_string(),
                                ..Default::default()
                            }),
                        ),
                    ),
                },
            )),
        }),
        config_type: Some(access_log::ConfigType::TypedConfig(any(file))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::istio::telemetry::{LogFilter, ModeSelector, ProviderRef};

    fn block(
        providers: &[&str],
        disabled: Option<bool>,
        mode: Option<TelemetryMode>,
    ) -> AccessLogging {
        AccessLogging {
            providers: providers
                .iter()
                .map(|p| ProviderRef {
                    name: Some((*p).into()),
                })
                .collect(),
            disabled,
            match_: mode.map(|mode| ModeSelector { mode }),
            filter: None,
        }
    }

    #[test]
    fn later_levels_override_earlier_ones_per_provider() {
        let root = vec![block(&["envoy"], None, None)];
        let workload = vec![block(&[], Some(true), None)];
        let merged = merge(&[root.as_slice(), workload.as_slice()]);
        assert_eq!(merged.get("envoy"), Some(&Setting::Off));

        let server_only = vec![block(&["envoy"], None, Some(TelemetryMode::Server))];
        assert!(merge(&[server_only.as_slice()]).is_empty());

        let mut filtered = block(&["envoy"], None, None);
        filtered.filter = Some(LogFilter {
            expression: "response.code >= 400".into(),
        });
        let merged = merge(&[root.as_slice(), std::slice::from_ref(&filtered)]);
        assert_eq!(
            merged.get("envoy"),
            Some(&Setting::On {
                filter: Some("response.code >= 400")
            })
        );
    }
}
