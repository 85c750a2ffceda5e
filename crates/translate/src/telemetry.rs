//! Telemetry access logging on gateways (pure): takes the snapshot and a proxy, yields the Envoy access logs its
//! HTTP connection managers and TCP proxies write, with Istio's semantics (mirrors `applicableTelemetries` and
//! `mergeLogs` in istio/pilot/pkg/model/telemetry.go): the namespace-wide Telemetry of the root namespace, then of
//! the gateway's namespace, then those selecting the gateway's labels (or, for a Gateway API gateway, naming its
//! Gateway in `targetRefs`, see [`Proxy::attaches`]), later ones overriding earlier ones per
//! provider; a gateway counts as a CLIENT workload for `match.mode`; `disabled` turns a provider off;
//! `filter.expression` becomes Envoy's CEL access-log filter.
//!
//! Providers are the mesh config's `extensionProviders` (mirrors `telemetryAccessLog` and
//! `buildOpenTelemetryAccessLogConfig` in istio/pilot/pkg/model/telemetry_logging.go):
//! - `envoyFileAccessLog`: Envoy's file logger at `path` (`/dev/stdout` when empty), Istio's text format, the
//!   provider's `text` (a newline added) or its `labels` as a JSON line;
//! - `envoyOtelAls`: Envoy's OpenTelemetry logger sending to the collector's cluster (`outbound|<port>||<host>`;
//!   left out, as istiod does, when the gateway has no such service), body `text` (Istio's text format by
//!   default), attributes from string `labels`;
//! - `envoy`, when the mesh config defines no provider of that name: Istio's built-in file log to `/dev/stdout`.
//!
//! A block without providers uses the mesh config's `defaultProviders.accessLogging`, which also apply when no
//! Telemetry does. Providers of other kinds, or not defined, are left out (the webhook warns, see
//! `admitpilot_validate::references`).

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
use envoy_types::pb::envoy::extensions::access_loggers::open_telemetry::v3::OpenTelemetryAccessLogConfig;
use envoy_types::pb::envoy::extensions::formatter::req_without_query::v3::ReqWithoutQuery;
use envoy_types::pb::opentelemetry::proto::common::v1::{
    any_value, AnyValue, KeyValue, KeyValueList,
};

use super::envoy::{any, json_struct};
use super::services::Registry;
use super::types::{target_refs, Proxy};
use admitpilot_model::istio::telemetry::{AccessLogging, Telemetry, TelemetryMode};
use admitpilot_model::mesh_config::{
    FileAccessLog as FileProvider, OtelAccessLog, Provider, BUILTIN_ACCESS_LOG_PROVIDER,
};
use admitpilot_model::{ConfigObject, Kind, Snapshot, Spec};

/// Where the built-in provider writes.
const BUILTIN_PATH: &str = "/dev/stdout";
/// Name of Envoy's file access logger.
const FILE_LOGGER: &str = "envoy.access_loggers.file";
/// Name of Envoy's OpenTelemetry access logger.
const OTEL_LOGGER: &str = "envoy.access_loggers.open_telemetry";
/// The log name of an `envoyOtelAls` provider that names none (Istio's `OtelEnvoyAccessLogFriendlyName`).
const OTEL_LOG_NAME: &str = "otel_envoy_accesslog";
/// The command operator that needs Envoy's `req_without_query` formatter extension.
const REQ_WITHOUT_QUERY: &str = "%REQ_WITHOUT_QUERY";
/// Name of Envoy's CEL access-log filter.
const CEL_FILTER: &str = "envoy.access_loggers.extension_filters.cel";
/// Istio's default text access-log format (the mesh config's `accessLogFormat` unset).
const ISTIO_TEXT_FORMAT: &str = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" \
%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% \
\"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% \
%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \
\"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" %UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% \
%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n";

/// The access logs of `proxy`'s listeners (empty when no Telemetry or default provider turns one on); `registry`
/// resolves the collectors of OpenTelemetry providers.
pub fn access_logs(snapshot: &Snapshot, proxy: &Proxy, registry: &Registry) -> Vec<AccessLog> {
    let mesh = snapshot.mesh_config();
    let defaults: &[String] = mesh.map_or(&[], |m| &m.default_access_log_providers);
    let levels = applicable(snapshot, proxy);
    merge(&levels, defaults)
        .into_iter()
        .filter_map(|(name, setting)| {
            let Setting::On { filter } = setting else {
                return None;
            };
            let logger = match mesh.and_then(|m| m.provider(name)).map(|p| &p.provider) {
                Some(Provider::EnvoyFileAccessLog(file)) => file_logger(file),
                Some(Provider::EnvoyOtelAls(otel)) => {
                    otel_logger(otel, registry, &proxy.namespace)?
                }
                Some(_) => return None,
                None if name.eq_ignore_ascii_case(BUILTIN_ACCESS_LOG_PROVIDER) => {
                    file_logger(&FileProvider::default())
                }
                None => return None,
            };
            Some(with_filter(logger, filter))
        })
        .collect()
}

/// The access-logging blocks of the Telemetries that apply to `proxy`, least specific first.
fn applicable<'s>(snapshot: &'s Snapshot, proxy: &Proxy) -> Vec<&'s [AccessLogging]> {
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
    let mesh = snapshot.mesh_settings();
    let root = mesh.root_namespace();
    levels.extend(
        telemetries(root)
            .into_iter()
            .find(|(_, t)| namespace_wide(t))
            .map(|(_, t)| t.access_logging.as_slice()),
    );
    let own = telemetries(&proxy.namespace);
    if root != proxy.namespace {
        levels.extend(
            own.iter()
                .find(|(_, t)| namespace_wide(t))
                .map(|(_, t)| t.access_logging.as_slice()),
        );
    }
    levels.extend(
        own.iter()
            .filter(|(object, t)| {
                !namespace_wide(t)
                    && proxy.attaches(
                        &object.metadata.namespace,
                        t.selector.as_ref().map(|s| &s.match_labels),
                        target_refs(t.target_ref.as_ref(), &t.target_refs),
                        root,
                    )
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

/// Istio's `mergeLogs` for a CLIENT workload, with the mesh config's default providers `defaults`.
fn merge<'s>(
    levels: &[&'s [AccessLogging]],
    defaults: &'s [String],
) -> BTreeMap<&'s str, Setting<'s>> {
    let defaults: Vec<&str> = defaults.iter().map(String::as_str).collect();
    if levels.is_empty() {
        return defaults
            .into_iter()
            .map(|name| (name, Setting::On { filter: None }))
            .collect();
    }
    let mut filters: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    let mut in_scope: BTreeSet<&str> = defaults.iter().copied().collect();
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
    let mut parent: Vec<&str> = defaults;
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

/// An `envoyFileAccessLog` provider's log (Istio's `fileAccessLogFromTelemetry`).
fn file_logger(provider: &FileProvider) -> (&'static str, envoy_types::pb::google::protobuf::Any) {
    let path = if provider.path.is_empty() {
        BUILTIN_PATH
    } else {
        &provider.path
    };
    let labels = provider
        .log_format
        .as_ref()
        .and_then(|f| f.labels.as_ref())
        .filter(|labels| !labels.is_empty());
    let (format, formatters) = match labels {
        Some(labels) => (
            substitution_format_string::Format::JsonFormat(json_struct(labels)),
            formatters(labels.values().filter_map(|v| v.as_str())),
        ),
        None => {
            let text = text_format(provider.log_format.as_ref().and_then(|f| f.text.as_deref()));
            let formatters = formatters([text.as_str()].into_iter());
            (
                substitution_format_string::Format::TextFormatSource(inline(text)),
                formatters,
            )
        }
    };
    let file = FileAccessLog {
        path: path.into(),
        access_log_format: Some(file_access_log::AccessLogFormat::LogFormat(
            SubstitutionFormatString {
                format: Some(format),
                omit_empty_values: provider.omit_empty_values,
                formatters,
                ..Default::default()
            },
        )),
    };
    (FILE_LOGGER, any(file))
}

/// An `envoyOtelAls` provider's log (Istio's `openTelemetryLog`), or `None` when the gateway has no cluster for
/// its collector.
fn otel_logger(
    provider: &OtelAccessLog,
    registry: &Registry,
    namespace: &str,
) -> Option<(&'static str, envoy_types::pb::google::protobuf::Any)> {
    let (cluster, authority) = registry
        .provider_cluster(&provider.service, provider.port, namespace)
        .ok()?;
    let format = provider.log_format.as_ref();
    let text = format
        .and_then(|f| f.text.clone())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| ISTIO_TEXT_FORMAT.to_string());
    let labels = format
        .and_then(|f| f.labels.as_ref())
        .filter(|l| !l.is_empty());
    let attributes = labels.map(|labels| KeyValueList {
        values: labels
            .iter()
            .map(|(key, value)| KeyValue {
                key: key.clone(),
                value: Some(string_value(value.as_str().unwrap_or_default())),
                ..Default::default()
            })
            .collect(),
    });
    let label_texts = labels
        .into_iter()
        .flat_map(|l| l.values().filter_map(|v| v.as_str()));
    let config = OpenTelemetryAccessLogConfig {
        grpc_service: Some(envoy_types::pb::envoy::config::core::v3::GrpcService {
            target_specifier: Some(
                envoy_types::pb::envoy::config::core::v3::grpc_service::TargetSpecifier::EnvoyGrpc(
                    envoy_types::pb::envoy::config::core::v3::grpc_service::EnvoyGrpc {
                        cluster_name: cluster,
                        authority,
                        ..Default::default()
                    },
                ),
            ),
            ..Default::default()
        }),
        log_name: if provider.log_name.is_empty() {
            OTEL_LOG_NAME.into()
        } else {
            provider.log_name.clone()
        },
        disable_builtin_labels: true,
        formatters: formatters(std::iter::once(text.as_str()).chain(label_texts)),
        body: Some(string_value(&text)),
        attributes,
        ..Default::default()
    };
    Some((OTEL_LOGGER, any(config)))
}

fn string_value(text: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(text.to_string())),
    }
}

/// Istio's text format: the provider's, with a newline added when missing, else the default.
fn text_format(text: Option<&str>) -> String {
    match text.filter(|t| !t.is_empty()) {
        Some(text) if text.ends_with('\n') => text.to_string(),
        Some(text) => format!("{text}\n"),
        None => ISTIO_TEXT_FORMAT.to_string(),
    }
}

fn inline(text: String) -> envoy_types::pb::envoy::config::core::v3::DataSource {
    envoy_types::pb::envoy::config::core::v3::DataSource {
        specifier: Some(
            envoy_types::pb::envoy::config::core::v3::data_source::Specifier::InlineString(text),
        ),
        ..Default::default()
    }
}

/// The formatter extensions the format strings need (Envoy builds `%CEL%` and `%METADATA%` in; only
/// `%REQ_WITHOUT_QUERY%` needs one, as Istio's `accessLogFormatters` adds).
fn formatters<'a>(
    mut texts: impl Iterator<Item = &'a str>,
) -> Vec<envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig> {
    if texts.any(|t| t.contains(REQ_WITHOUT_QUERY)) {
        vec![
            envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig {
                name: "envoy.formatter.req_without_query".into(),
                typed_config: Some(any(ReqWithoutQuery {})),
            },
        ]
    } else {
        Vec::new()
    }
}

/// An access log of `logger`, behind the CEL filter when one is given.
fn with_filter(
    (name, config): (&'static str, envoy_types::pb::google::protobuf::Any),
    filter: Option<&str>,
) -> AccessLog {
    AccessLog {
        name: name.into(),
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
        config_type: Some(access_log::ConfigType::TypedConfig(config)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::istio::telemetry::{LogFilter, ModeSelector, ProviderRef};

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
        let merged = merge(&[root.as_slice(), workload.as_slice()], &[]);
        assert_eq!(merged.get("envoy"), Some(&Setting::Off));

        let server_only = vec![block(&["envoy"], None, Some(TelemetryMode::Server))];
        assert!(merge(&[server_only.as_slice()], &[]).is_empty());

        let mut filtered = block(&["envoy"], None, None);
        filtered.filter = Some(LogFilter {
            expression: "response.code >= 400".into(),
        });
        let merged = merge(&[root.as_slice(), std::slice::from_ref(&filtered)], &[]);
        assert_eq!(
            merged.get("envoy"),
            Some(&Setting::On {
                filter: Some("response.code >= 400")
            })
        );
    }

    #[test]
    fn default_providers_apply_without_telemetry_and_to_blocks_without_providers() {
        let defaults = vec!["otel".to_string()];
        let on = Some(&Setting::On { filter: None });
        assert_eq!(merge(&[], &defaults).get("otel"), on);
        let unnamed = vec![block(&[], None, None)];
        assert_eq!(merge(&[unnamed.as_slice()], &defaults).get("otel"), on);
        let off = vec![block(&[], Some(true), None)];
        assert_eq!(
            merge(&[off.as_slice()], &defaults).get("otel"),
            Some(&Setting::Off)
        );
        let named = vec![block(&["envoy"], None, None)];
        let merged = merge(&[named.as_slice()], &defaults);
        assert_eq!((merged.get("envoy"), merged.get("otel")), (on, None));
    }
}
