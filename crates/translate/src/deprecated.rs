//! Deprecated Envoy fields (pure): takes the resources after EnvoyFilters were applied and moves deprecated fields
//! that patches set to their replacements, with the same effect, so Envoy loads no deprecated field. Higress's
//! own patches set three: `Cluster.common_http_protocol_options` (upstream idle timeout; moves into the cluster's
//! `HttpProtocolOptions`), `HeaderValueOption.append` (`addXRealIpHeader`; becomes `append_action`) and the
//! compressor's `content_type` (gzip; becomes `content_type_matcher` with one exact matcher per type, which
//! Envoy compares with the response's content type without its parameters, as it did the list). User EnvoyFilters
//! (corpus examples, found by tests/e2e/envoy_generated.rs) also set `Cluster.http2_protocol_options` (becomes the
//! explicit HTTP/2 config of `HttpProtocolOptions`), the Lua filter's `inline_code` (becomes
//! `default_source_code`) and `append` in header options of HTTP filter configs, typed or in a `TypedStruct`
//! ([`super::deprecated_filter_headers`]).

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{data_source, DataSource, Http1ProtocolOptions};
use envoy_types::pb::envoy::extensions::filters::http::lua::v3::Lua;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    http_protocol_options, HttpProtocolOptions,
};
use prost::Message;

use envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction;
use envoy_types::pb::envoy::config::core::v3::HeaderValueOption;
use envoy_types::pb::envoy::config::route::v3::{
    route, route_action, RouteConfiguration, VirtualHost,
};
use envoy_types::pb::envoy::extensions::filters::http::compressor::v3::{compressor, Compressor};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpConnectionManager,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, StringMatcher};

use super::envoy::{any, for_each_hcm};
use super::policy::HTTP_PROTOCOL_OPTIONS;
use super::types::{GatewayResources, RebuiltHosts};

/// Moves every deprecated field patches set in `out` to its replacement (see the module docs).
pub fn upgrade(out: &mut GatewayResources, rebuilt: Option<&RebuiltHosts>) {
    for cluster in &mut out.clusters {
        upgrade_http2_protocol_options(cluster);
        upgrade_http_protocol_options(cluster);
    }
    out.route_configs
        .iter_mut()
        .for_each(|config| upgrade_header_options(config, rebuilt));
    for_each_hcm(&mut out.listeners, |_, hcm| {
        let compressors = upgrade_compressors(hcm);
        let lua = upgrade_lua(hcm);
        super::deprecated_filter_headers::upgrade(hcm) || lua || compressors
    });
}

/// Moves `cluster.http2_protocol_options` (HTTP/2 to the upstream) into its `HttpProtocolOptions` as the explicit
/// HTTP/2 config, when the typed options choose no upstream protocol yet (created when there are none). Otherwise,
/// or when the typed entry does not decode, the deprecated field stays for Envoy to judge.
#[allow(deprecated)]
fn upgrade_http2_protocol_options(cluster: &mut Cluster) {
    let Some(http2) = cluster.http2_protocol_options.take() else {
        return;
    };
    let mut options = match cluster
        .typed_extension_protocol_options
        .get(HTTP_PROTOCOL_OPTIONS)
    {
        None => HttpProtocolOptions::default(),
        Some(typed) => match HttpProtocolOptions::decode(typed.value.as_slice()) {
            Ok(options) if options.upstream_protocol_options.is_none() => options,
            _ => {
                cluster.http2_protocol_options = Some(http2);
                return;
            }
        },
    };
    options.upstream_protocol_options = Some(
        http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
            http_protocol_options::ExplicitHttpConfig {
                protocol_config: Some(
                    http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                        http2,
                    ),
                ),
            },
        ),
    );
    cluster
        .typed_extension_protocol_options
        .insert(HTTP_PROTOCOL_OPTIONS.into(), any(options));
}

/// Moves `cluster.common_http_protocol_options` into its `HttpProtocolOptions` (created with HTTP/1.1, Envoy's
/// default upstream protocol, when the cluster has none). Fields the typed options already set win. A typed
/// entry that does not decode is left alone with the deprecated field, for Envoy to judge.
#[allow(deprecated)]
fn upgrade_http_protocol_options(cluster: &mut Cluster) {
    let Some(deprecated) = cluster.common_http_protocol_options.take() else {
        return;
    };
    let mut options = match cluster
        .typed_extension_protocol_options
        .get(HTTP_PROTOCOL_OPTIONS)
    {
        None => HttpProtocolOptions {
            upstream_protocol_options: Some(
                http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                    http_protocol_options::ExplicitHttpConfig {
                        protocol_config: Some(
                            http_protocol_options::explicit_http_config::ProtocolConfig::HttpProtocolOptions(
                                Http1ProtocolOptions::default(),
                            ),
                        ),
                    },
                ),
            ),
            ..Default::default()
        },
        Some(typed) => match HttpProtocolOptions::decode(typed.value.as_slice()) {
            Ok(options) => options,
            Err(_) => {
                cluster.common_http_protocol_options = Some(deprecated);
                return;
            }
        },
    };
    let mut common = deprecated;
    if let Some(typed) = options.common_http_protocol_options.take() {
        // A message merge: what the typed options set overwrites the deprecated values.
        if common.merge(typed.encode_to_vec().as_slice()).is_err() {
            common = typed;
        }
    }
    options.common_http_protocol_options = Some(common);
    cluster
        .typed_extension_protocol_options
        .insert(HTTP_PROTOCOL_OPTIONS.into(), any(options));
}

/// Turns `append` into `append_action` on every header option of the route configuration, its virtual hosts,
/// routes and weighted clusters (where `append_action` is not set too, which Envoy rejects either way); with
/// `rebuilt`, only on its virtual hosts in that set (the others are the call before's, upgraded then).
fn upgrade_header_options(config: &mut RouteConfiguration, rebuilt: Option<&RebuiltHosts>) {
    upgrade_headers(&mut config.request_headers_to_add);
    upgrade_headers(&mut config.response_headers_to_add);
    match rebuilt {
        None => config.virtual_hosts.iter_mut().for_each(upgrade_host),
        Some(rebuilt) => {
            for at in rebuilt.positions(&config.name) {
                if let Some(host) = config.virtual_hosts.get_mut(at) {
                    upgrade_host(host);
                }
            }
        }
    }
}

/// Turns `append` into `append_action` on header options where `append_action` is the default.
#[allow(deprecated)]
fn upgrade_headers(options: &mut [HeaderValueOption]) {
    for option in options {
        let default_action = option.append_action == HeaderAppendAction::AppendIfExistsOrAdd as i32;
        if let (Some(append), true) = (option.append, default_action) {
            option.append = None;
            option.append_action = if append.value {
                HeaderAppendAction::AppendIfExistsOrAdd
            } else {
                HeaderAppendAction::OverwriteIfExistsOrAdd
            } as i32;
        }
    }
}

/// [`upgrade_header_options`] of one virtual host and its routes.
fn upgrade_host(host: &mut VirtualHost) {
    upgrade_headers(&mut host.request_headers_to_add);
    upgrade_headers(&mut host.response_headers_to_add);
    for r in &mut host.routes {
        upgrade_headers(&mut r.request_headers_to_add);
        upgrade_headers(&mut r.response_headers_to_add);
        let Some(route::Action::Route(action)) = r.action.as_mut() else {
            continue;
        };
        let Some(route_action::ClusterSpecifier::WeightedClusters(weighted)) =
            action.cluster_specifier.as_mut()
        else {
            continue;
        };
        for cluster in &mut weighted.clusters {
            upgrade_headers(&mut cluster.request_headers_to_add);
            upgrade_headers(&mut cluster.response_headers_to_add);
        }
    }
}

/// Turns the compressor's deprecated `content_type` lists into `content_type_matcher`s; returns whether any
/// compressor of `hcm` changed.
#[allow(deprecated)]
fn upgrade_compressors(hcm: &mut HttpConnectionManager) -> bool {
    fn upgrade(common: Option<&mut compressor::CommonDirectionConfig>) -> bool {
        let Some(common) = common else {
            return false;
        };
        if common.content_type.is_empty() || !common.content_type_matcher.is_empty() {
            return false;
        }
        common.content_type_matcher = std::mem::take(&mut common.content_type)
            .into_iter()
            .map(|content_type| StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Exact(content_type)),
                ..Default::default()
            })
            .collect();
        true
    }
    each_http_filter(hcm, |config: &mut Compressor| {
        let response = upgrade(
            config
                .response_direction_config
                .as_mut()
                .and_then(|d| d.common_config.as_mut()),
        );
        let request = upgrade(
            config
                .request_direction_config
                .as_mut()
                .and_then(|d| d.common_config.as_mut()),
        );
        response || request
    })
}

/// Moves the Lua filter's deprecated `inline_code` into `default_source_code` (the same script, inline), unless
/// that is set too (Envoy then judges); returns whether any Lua filter of `hcm` changed.
#[allow(deprecated)]
fn upgrade_lua(hcm: &mut HttpConnectionManager) -> bool {
    each_http_filter(hcm, |lua: &mut Lua| {
        if lua.inline_code.is_empty() || lua.default_source_code.is_some() {
            return false;
        }
        lua.default_source_code = Some(DataSource {
            specifier: Some(data_source::Specifier::InlineString(std::mem::take(
                &mut lua.inline_code,
            ))),
            ..Default::default()
        });
        true
    })
}

/// Calls `change` with the config of every HTTP filter of `hcm` whose typed config is an `M` (decoded), and stores
/// it back when `change` returns `true`; returns whether any changed. A config that does not decode is skipped.
fn each_http_filter<M: Message + prost::Name + Default>(
    hcm: &mut HttpConnectionManager,
    mut change: impl FnMut(&mut M) -> bool,
) -> bool {
    let mut changed = false;
    for filter in &mut hcm.http_filters {
        let Some(http_filter::ConfigType::TypedConfig(typed)) = filter.config_type.as_mut() else {
            continue;
        };
        if typed.type_url != M::type_url() {
            continue;
        }
        let Ok(mut config) = M::decode(typed.value.as_slice()) else {
            continue;
        };
        if change(&mut config) {
            typed.value = config.encode_to_vec();
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
#[allow(deprecated)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::{
        Http2ProtocolOptions, HttpProtocolOptions as Common,
    };
    use envoy_types::pb::google::protobuf::{Duration, UInt32Value};

    fn typed(cluster: &Cluster) -> HttpProtocolOptions {
        HttpProtocolOptions::decode(
            cluster.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS]
                .value
                .as_slice(),
        )
        .unwrap()
    }

    fn idle(seconds: i64) -> Common {
        Common {
            idle_timeout: Some(Duration { seconds, nanos: 0 }),
            ..Default::default()
        }
    }

    #[test]
    fn a_cluster_without_typed_options_gets_http1_with_the_deprecated_values() {
        let mut cluster = Cluster {
            common_http_protocol_options: Some(idle(20)),
            ..Default::default()
        };
        upgrade_http_protocol_options(&mut cluster);
        assert_eq!(cluster.common_http_protocol_options, None);
        let options = typed(&cluster);
        assert_eq!(options.common_http_protocol_options, Some(idle(20)));
        assert!(matches!(
            options.upstream_protocol_options,
            Some(http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(_))
        ));
    }

    #[test]
    fn existing_typed_options_keep_their_protocol_and_their_own_values() {
        let http2 = HttpProtocolOptions {
            common_http_protocol_options: Some(Common {
                max_headers_count: Some(UInt32Value { value: 50 }),
                ..Default::default()
            }),
            upstream_protocol_options: Some(
                http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                    http_protocol_options::ExplicitHttpConfig {
                        protocol_config: Some(
                            http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                                Http2ProtocolOptions::default(),
                            ),
                        ),
                    },
                ),
            ),
            ..Default::default()
        };
        let mut cluster = Cluster {
            common_http_protocol_options: Some(idle(20)),
            ..Default::default()
        };
        cluster
            .typed_extension_protocol_options
            .insert(HTTP_PROTOCOL_OPTIONS.into(), any(http2.clone()));
        upgrade_http_protocol_options(&mut cluster);
        let options = typed(&cluster);
        assert_eq!(
            options.upstream_protocol_options,
            http2.upstream_protocol_options
        );
        let common = options.common_http_protocol_options.unwrap();
        assert_eq!(
            common.idle_timeout,
            Some(Duration {
                seconds: 20,
                nanos: 0
            })
        );
        assert_eq!(common.max_headers_count, Some(UInt32Value { value: 50 }));
        assert_eq!(cluster.common_http_protocol_options, None);
    }

    #[test]
    fn header_append_becomes_an_append_action() {
        use envoy_types::pb::envoy::config::core::v3::HeaderValue;
        use envoy_types::pb::google::protobuf::BoolValue;
        let header = |append: Option<bool>, action: HeaderAppendAction| HeaderValueOption {
            header: Some(HeaderValue {
                key: "x-real-ip".into(),
                value: "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%".into(),
                ..Default::default()
            }),
            append: append.map(|value| BoolValue { value }),
            append_action: action as i32,
            ..Default::default()
        };
        let mut config = RouteConfiguration {
            request_headers_to_add: vec![
                header(Some(false), HeaderAppendAction::AppendIfExistsOrAdd),
                header(Some(true), HeaderAppendAction::AppendIfExistsOrAdd),
                header(None, HeaderAppendAction::AddIfAbsent),
            ],
            ..Default::default()
        };
        upgrade_header_options(&mut config, None);
        let got: Vec<_> = config
            .request_headers_to_add
            .iter()
            .map(|h| (h.append, h.append_action))
            .collect();
        assert_eq!(
            got,
            [
                (None, HeaderAppendAction::OverwriteIfExistsOrAdd as i32),
                (None, HeaderAppendAction::AppendIfExistsOrAdd as i32),
                (None, HeaderAppendAction::AddIfAbsent as i32),
            ]
        );
    }

    #[test]
    fn compressor_content_types_become_exact_matchers() {
        use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
        let compressor = Compressor {
            response_direction_config: Some(compressor::ResponseDirectionConfig {
                common_config: Some(compressor::CommonDirectionConfig {
                    content_type: vec!["text/plain".into(), "application/json".into()],
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut hcm = HttpConnectionManager {
            http_filters: vec![HttpFilter {
                name: "envoy.filters.http.compressor".into(),
                config_type: Some(http_filter::ConfigType::TypedConfig(any(compressor))),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(upgrade_compressors(&mut hcm));
        let Some(http_filter::ConfigType::TypedConfig(typed)) = &hcm.http_filters[0].config_type
        else {
            panic!("typed config");
        };
        let common = Compressor::decode(typed.value.as_slice())
            .unwrap()
            .response_direction_config
            .unwrap()
            .common_config
            .unwrap();
        assert!(common.content_type.is_empty());
        let exact: Vec<_> = common
            .content_type_matcher
            .iter()
            .map(|m| m.match_pattern.clone())
            .collect();
        assert_eq!(
            exact,
            [
                Some(string_matcher::MatchPattern::Exact("text/plain".into())),
                Some(string_matcher::MatchPattern::Exact(
                    "application/json".into()
                )),
            ]
        );
        assert!(!upgrade_compressors(&mut hcm), "nothing left to move");
    }

    #[test]
    fn lua_inline_code_becomes_the_default_source_code() {
        use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
        let lua = Lua {
            inline_code: "function envoy_on_request(h) end".into(),
            ..Default::default()
        };
        let mut hcm = HttpConnectionManager {
            http_filters: vec![HttpFilter {
                name: "envoy.lua".into(),
                config_type: Some(http_filter::ConfigType::TypedConfig(any(lua))),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(upgrade_lua(&mut hcm));
        let Some(http_filter::ConfigType::TypedConfig(typed)) = &hcm.http_filters[0].config_type
        else {
            panic!("typed config");
        };
        let lua = Lua::decode(typed.value.as_slice()).unwrap();
        assert!(lua.inline_code.is_empty());
        assert_eq!(
            lua.default_source_code.unwrap().specifier,
            Some(data_source::Specifier::InlineString(
                "function envoy_on_request(h) end".into()
            ))
        );
        assert!(!upgrade_lua(&mut hcm), "nothing left to move");
    }

    #[test]
    fn cluster_http2_options_become_the_explicit_http2_config() {
        let mut cluster = Cluster {
            http2_protocol_options: Some(Http2ProtocolOptions {
                max_concurrent_streams: Some(envoy_types::pb::google::protobuf::UInt32Value {
                    value: 100,
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        upgrade_http2_protocol_options(&mut cluster);
        assert!(cluster.http2_protocol_options.is_none());
        let options = HttpProtocolOptions::decode(
            cluster.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS]
                .value
                .as_slice(),
        )
        .unwrap();
        let Some(http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(explicit)) =
            options.upstream_protocol_options
        else {
            panic!("explicit config");
        };
        let Some(
            http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                http2,
            ),
        ) = explicit.protocol_config
        else {
            panic!("HTTP/2");
        };
        assert_eq!(
            http2.max_concurrent_streams,
            Some(envoy_types::pb::google::protobuf::UInt32Value { value: 100 })
        );
    }

    #[test]
    fn clusters_without_the_deprecated_field_are_untouched() {
        let mut cluster = Cluster::default();
        upgrade_http_protocol_options(&mut cluster);
        assert_eq!(cluster, Cluster::default());
    }
}
