//! Route-side patches: takes the proxy's route configurations and the prepared patches, applies
//! ROUTE_CONFIGURATION merges, VIRTUAL_HOST merge/replace/remove/add and HTTP_ROUTE merge/remove/add/insert in
//! place. Gateway route configuration names (`http.8080`, `https.443.<port name>.<gateway>.<namespace>`) are
//! parsed for the `portNumber`, `portName` and `gateway` matches, as Istio does for gateways.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::route::v3::{route, Route, RouteConfiguration, VirtualHost};

use super::{Patches, Prepared};
use admitpilot_model::istio::envoy_filter::{ApplyTo, Operation, RouteAction};

pub(super) fn patch_route_configurations(
    configs: &mut [RouteConfiguration],
    patches: &Patches<'_>,
) {
    for config in configs.iter_mut() {
        for patch in patches.of(ApplyTo::RouteConfiguration) {
            if patch.operation.is_merge() && route_configuration_match(&config.name, patch) {
                patch.merge_into(config);
            }
        }
        patch_virtual_hosts(config, patches);
    }
}

/// The parts of a gateway RDS name: port, port name and `namespace/name` of the Istio Gateway.
fn parse_gateway_route_name(name: &str) -> (u32, &str, String) {
    let parts: Vec<&str> = name.split('.').collect();
    let port = parts
        .get(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_default();
    match parts.as_slice() {
        ["https", _, port_name, gateway, namespace, ..] => {
            (port, *port_name, format!("{namespace}/{gateway}"))
        }
        _ => (port, "", String::new()),
    }
}

fn route_configuration_match(name: &str, patch: &Prepared<'_>) -> bool {
    let Some(m) = patch.route_configuration() else {
        return true;
    };
    if !m.name.is_empty() && m.name != name {
        return false;
    }
    let (port, port_name, gateway) = parse_gateway_route_name(name);
    if !m.port_name.is_empty() && m.port_name != port_name {
        return false;
    }
    if !m.gateway.is_empty() && m.gateway != gateway {
        return false;
    }
    m.port_number == 0 || m.port_number == port
}

fn virtual_host_match(vhost: &VirtualHost, patch: &Prepared<'_>) -> bool {
    let Some(m) = patch.route_configuration().and_then(|r| r.vhost.as_ref()) else {
        return true;
    };
    (m.name.is_empty() || m.name == vhost.name)
        && (m.domain_name.is_empty() || vhost.domains.contains(&m.domain_name))
}

fn has_route_match(patch: &Prepared<'_>) -> bool {
    patch
        .route_configuration()
        .and_then(|r| r.vhost.as_ref())
        .is_some_and(|v| v.route.is_some())
}

fn route_match(route: &Route, patch: &Prepared<'_>) -> bool {
    let Some(m) = patch
        .route_configuration()
        .and_then(|r| r.vhost.as_ref())
        .and_then(|v| v.route.as_ref())
    else {
        return true;
    };
    if !m.name.is_empty() && m.name != route.name {
        return false;
    }
    match (m.action, &route.action) {
        (RouteAction::Any, _) => true,
        (RouteAction::Route, Some(route::Action::Route(_))) => true,
        (RouteAction::Redirect, Some(route::Action::Redirect(_))) => true,
        (RouteAction::DirectResponse, Some(route::Action::DirectResponse(_))) => true,
        // Istio lets other action kinds (filter_action, non-forwarding) match anything.
        (
            _,
            Some(
                route::Action::Route(_)
                | route::Action::Redirect(_)
                | route::Action::DirectResponse(_),
            ),
        ) => false,
        _ => true,
    }
}

fn patch_virtual_hosts(config: &mut RouteConfiguration, patches: &Patches<'_>) {
    let applicable: Vec<&Prepared<'_>> = patches
        .of(ApplyTo::VirtualHost)
        .filter(|p| route_configuration_match(&config.name, p))
        .collect();
    let routes: Vec<&Prepared<'_>> = patches
        .of(ApplyTo::HttpRoute)
        .filter(|p| route_configuration_match(&config.name, p))
        .collect();
    let mut removed = BTreeSet::new();
    for vhost in &mut config.virtual_hosts {
        if patch_virtual_host(vhost, &applicable, &routes) {
            removed.insert(vhost.name.clone());
        }
    }
    for patch in &applicable {
        if patch.operation == Operation::Add {
            config.virtual_hosts.extend(patch.typed::<VirtualHost>());
        }
    }
    if !removed.is_empty() {
        config.virtual_hosts.retain(|v| !removed.contains(&v.name));
    }
}

/// Patches one virtual host; returns true when it was removed.
fn patch_virtual_host(
    vhost: &mut VirtualHost,
    patches: &[&Prepared<'_>],
    routes: &[&Prepared<'_>],
) -> bool {
    for patch in patches {
        if !virtual_host_match(vhost, patch) {
            continue;
        }
        match patch.operation {
            Operation::Remove => return true,
            Operation::Replace => {
                if let Some(replacement) = patch.typed::<VirtualHost>() {
                    *vhost = replacement;
                }
            }
            op if op.is_merge() => patch.merge_into(vhost),
            _ => {}
        }
    }
    patch_http_routes(vhost, routes);
    false
}

fn patch_http_routes(vhost: &mut VirtualHost, patches: &[&Prepared<'_>]) {
    let applicable: Vec<&Prepared<'_>> = patches
        .iter()
        .copied()
        .filter(|p| virtual_host_match(vhost, p))
        .collect();
    vhost.routes.retain_mut(|route| {
        for patch in &applicable {
            if !route_match(route, patch) {
                continue;
            }
            match patch.operation {
                Operation::Remove => return false,
                op if op.is_merge() => patch.merge_into(route),
                _ => {}
            }
        }
        true
    });
    for patch in &applicable {
        let has_match = has_route_match(patch);
        let position = |routes: &[Route]| routes.iter().position(|r| route_match(r, patch));
        let at = match patch.operation {
            Operation::Add => Some(vhost.routes.len()),
            Operation::InsertAfter if has_match => position(&vhost.routes).map(|i| i + 1),
            Operation::InsertAfter => Some(vhost.routes.len()),
            Operation::InsertBefore if has_match => position(&vhost.routes),
            // INSERT_FIRST with a route match only applies when some route matches.
            Operation::InsertFirst if has_match => position(&vhost.routes).map(|_| 0),
            Operation::InsertBefore | Operation::InsertFirst => Some(0),
            _ => None,
        };
        if let (Some(at), Some(route)) = (at, at.and_then(|_| patch.typed::<Route>())) {
            vhost.routes.insert(at, route);
        }
    }
}
