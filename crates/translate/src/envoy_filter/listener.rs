//! Listener-side patches: takes the proxy's listeners and the prepared patches, applies LISTENER,
//! LISTENER_FILTER, FILTER_CHAIN, NETWORK_FILTER and HTTP_FILTER patches in place (Istio's order: listener
//! merges/removals, listener filters, then each filter chain, its network filters and the HTTP filters of
//! its HTTP connection manager; ADDs last at each level).

use envoy_types::pb::envoy::config::core::v3::address::Address as AddressKind;
use envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier;
use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType as SocketConfig;
use envoy_types::pb::envoy::config::listener::v3::{
    filter, listener_filter, Filter, FilterChain, Listener, ListenerFilter,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpConnectionManager, HttpFilter,
};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;

use super::{apply_list_op, Patches, Prepared};
use admitpilot_envoy_proto as envoy_proto;
use admitpilot_model::istio::envoy_filter::{ApplyTo, FilterMatch, Operation};

/// Network filter name of the HTTP connection manager.
const HCM: &str = "envoy.filters.network.http_connection_manager";

/// What listener-level matches look at, copied out so filter chains can be patched in place.
struct ListenerView {
    name: String,
    port: Option<u32>,
}

pub(super) fn patch_listeners(listeners: &mut Vec<Listener>, patches: &Patches<'_>) {
    listeners.retain_mut(|listener| patch_listener(listener, patches));
    for patch in patches.of(ApplyTo::Listener) {
        if patch.operation == Operation::Add {
            listeners.extend(patch.typed::<Listener>());
        }
    }
}

/// Patches one listener; returns false when it was removed.
fn patch_listener(listener: &mut Listener, patches: &Patches<'_>) -> bool {
    for patch in patches.of(ApplyTo::Listener) {
        if !listener_match(&view(listener), patch) {
            continue;
        }
        match patch.operation {
            Operation::Remove => return false,
            op if op.is_merge() => patch.merge_into(listener),
            _ => {}
        }
    }
    let view = view(listener);
    patch_listener_filters(&view, &mut listener.listener_filters, patches);
    listener
        .filter_chains
        .retain_mut(|chain| patch_filter_chain(&view, chain, patches));
    if let Some(chain) = listener.default_filter_chain.as_mut() {
        if !patch_filter_chain(&view, chain, patches) {
            listener.default_filter_chain = None;
        }
    }
    for patch in patches.of(ApplyTo::FilterChain) {
        if patch.operation == Operation::Add && listener_match(&view, patch) {
            listener.filter_chains.extend(patch.typed::<FilterChain>());
        }
    }
    true
}

fn view(listener: &Listener) -> ListenerView {
    let port = listener
        .address
        .as_ref()
        .and_then(|a| a.address.as_ref())
        .and_then(|a| match a {
            AddressKind::SocketAddress(s) => match s.port_specifier {
                Some(PortSpecifier::PortValue(port)) => Some(port),
                _ => None,
            },
            _ => None,
        });
    ListenerView {
        name: listener.name.clone(),
        port,
    }
}

fn listener_match(listener: &ListenerView, patch: &Prepared<'_>) -> bool {
    let Some(m) = patch.listener() else {
        return true;
    };
    if !m.name.is_empty() && m.name != listener.name {
        return false;
    }
    m.port_number == 0 || listener.port == Some(m.port_number)
}

fn filter_chain_match(chain: &FilterChain, patch: &Prepared<'_>) -> bool {
    let Some(m) = patch.listener().and_then(|l| l.filter_chain.as_ref()) else {
        return true;
    };
    if !m.name.is_empty() && m.name != chain.name {
        return false;
    }
    let fcm = chain.filter_chain_match.as_ref();
    if !m.sni.is_empty() && !fcm.is_some_and(|f| f.server_names.contains(&m.sni)) {
        return false;
    }
    if !m.transport_protocol.is_empty()
        && fcm.map(|f| f.transport_protocol.as_str()) != Some(m.transport_protocol.as_str())
    {
        return false;
    }
    if !m.application_protocols.is_empty() {
        let Some(f) = fcm else { return false };
        if !m
            .application_protocols
            .split(',')
            .all(|p| f.application_protocols.iter().any(|a| a == p))
        {
            return false;
        }
    }
    if m.destination_port > 0 {
        let port = fcm
            .and_then(|f| f.destination_port.as_ref())
            .map(|p| p.value);
        if port != Some(m.destination_port) {
            return false;
        }
    }
    true
}

fn filter_match_of<'p>(patch: &'p Prepared<'_>) -> Option<&'p FilterMatch> {
    patch
        .listener()
        .and_then(|l| l.filter_chain.as_ref())
        .and_then(|fc| fc.filter.as_ref())
}

fn network_filter_match(name: &str, patch: &Prepared<'_>) -> bool {
    filter_match_of(patch).is_none_or(|f| f.name == name)
}

fn sub_filter_name<'p>(patch: &'p Prepared<'_>) -> Option<&'p str> {
    filter_match_of(patch)
        .and_then(|f| f.sub_filter.as_ref())
        .map(|s| s.name.as_str())
}

fn patch_listener_filters(
    listener: &ListenerView,
    filters: &mut Vec<ListenerFilter>,
    patches: &Patches<'_>,
) {
    for patch in patches.of(ApplyTo::ListenerFilter) {
        if !listener_match(listener, patch) {
            continue;
        }
        let wanted = patch
            .listener()
            .map(|l| l.listener_filter.as_str())
            .filter(|n| !n.is_empty());
        let is_match = |f: &ListenerFilter| wanted.is_none_or(|n| f.name == n);
        if patch.operation == Operation::Merge {
            if wanted.is_none() {
                continue;
            }
            let Some(user) = patch.typed::<ListenerFilter>() else {
                continue;
            };
            for existing in filters.iter_mut().filter(|f| is_match(f)) {
                let Some(listener_filter::ConfigType::TypedConfig(current)) =
                    existing.config_type.as_mut()
                else {
                    continue;
                };
                if let Some(listener_filter::ConfigType::TypedConfig(src)) = &user.config_type {
                    envoy_proto::merge_any(current, src);
                }
                if !user.name.is_empty() {
                    existing.name.clone_from(&user.name);
                }
            }
        } else {
            apply_list_op(filters, patch.operation, wanted.is_some(), is_match, || {
                patch.typed::<ListenerFilter>()
            });
        }
    }
}

/// Patches one filter chain; returns false when it was removed.
fn patch_filter_chain(
    listener: &ListenerView,
    chain: &mut FilterChain,
    patches: &Patches<'_>,
) -> bool {
    for patch in patches.of(ApplyTo::FilterChain) {
        if !listener_match(listener, patch) || !filter_chain_match(chain, patch) {
            continue;
        }
        match patch.operation {
            Operation::Remove => return false,
            // The guard merges a matching transport socket itself; only otherwise is the whole value merged.
            op if op.is_merge() && !merge_transport_socket(chain, patch) => patch.merge_into(chain),
            _ => {}
        }
    }
    let network: Vec<&Prepared<'_>> = patches
        .of(ApplyTo::NetworkFilter)
        .filter(|p| listener_match(listener, p) && filter_chain_match(chain, p))
        .collect();
    let http: Vec<&Prepared<'_>> = patches
        .of(ApplyTo::HttpFilter)
        .filter(|p| listener_match(listener, p) && filter_chain_match(chain, p))
        .collect();
    for patch in &network {
        let wanted = filter_match_of(patch).map(|f| f.name.as_str());
        apply_list_op(
            &mut chain.filters,
            patch.operation,
            wanted.is_some(),
            |f: &Filter| wanted.is_none_or(|n| f.name == n),
            || patch.typed::<Filter>(),
        );
    }
    for network_filter in &mut chain.filters {
        patch_network_filter(network_filter, &network, &http);
    }
    true
}

/// Merges a patch's transport socket into the chain's socket of the same name, as Istio does; returns
/// whether the patch was handled this way (the rest of the value is then not merged).
fn merge_transport_socket(chain: &mut FilterChain, patch: &Prepared<'_>) -> bool {
    let Some(user) = patch.typed::<FilterChain>() else {
        return false;
    };
    let (Some(src), Some(dst)) = (
        user.transport_socket.as_ref(),
        chain.transport_socket.as_mut(),
    ) else {
        return false;
    };
    if src.name != dst.name {
        return false;
    }
    if let (Some(SocketConfig::TypedConfig(dst_any)), Some(SocketConfig::TypedConfig(src_any))) =
        (dst.config_type.as_mut(), src.config_type.as_ref())
    {
        envoy_proto::merge_any(dst_any, src_any);
    }
    true
}

fn patch_network_filter(
    network_filter: &mut Filter,
    network: &[&Prepared<'_>],
    http: &[&Prepared<'_>],
) {
    for patch in network {
        if patch.operation != Operation::Merge || !network_filter_match(&network_filter.name, patch)
        {
            continue;
        }
        let Some(filter::ConfigType::TypedConfig(current)) = network_filter.config_type.as_mut()
        else {
            // Istio does not merge into filters configured without typed_config.
            continue;
        };
        let Some(user) = patch.typed::<Filter>() else {
            continue;
        };
        if let Some(filter::ConfigType::TypedConfig(src)) = &user.config_type {
            envoy_proto::merge_any(current, src);
        }
        if !user.name.is_empty() {
            network_filter.name = user.name;
        }
    }
    if network_filter.name == HCM {
        let applicable: Vec<&Prepared<'_>> = http
            .iter()
            .copied()
            .filter(|p| network_filter_match(HCM, p))
            .collect();
        if let Some(filter::ConfigType::TypedConfig(any)) = network_filter.config_type.as_mut() {
            patch_http_filters(any, &applicable);
        }
    }
}

fn patch_http_filters(any: &mut Any, patches: &[&Prepared<'_>]) {
    if patches.is_empty() {
        return;
    }
    let Ok(mut hcm) = HttpConnectionManager::decode(any.value.as_slice()) else {
        return;
    };
    for patch in patches {
        let wanted = sub_filter_name(patch);
        apply_list_op(
            &mut hcm.http_filters,
            patch.operation,
            wanted.is_some(),
            |f: &HttpFilter| wanted.is_none_or(|n| f.name == n),
            || patch.typed::<HttpFilter>(),
        );
    }
    for http_filter in &mut hcm.http_filters {
        for patch in patches {
            if patch.operation != Operation::Merge
                || sub_filter_name(patch).is_some_and(|n| n != http_filter.name)
            {
                continue;
            }
            let Some(http_filter::ConfigType::TypedConfig(current)) =
                http_filter.config_type.as_mut()
            else {
                continue;
            };
            let Some(user) = patch.typed::<HttpFilter>() else {
                continue;
            };
            if let Some(http_filter::ConfigType::TypedConfig(src)) = &user.config_type {
                envoy_proto::merge_any(current, src);
            }
            if !user.name.is_empty() {
                http_filter.name = user.name;
            }
        }
    }
    any.value = hcm.encode_to_vec();
}
