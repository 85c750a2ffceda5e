//! EnvoyFilter patch engine (pure): takes one proxy's [`GatewayResources`] and the EnvoyFilter objects of a
//! snapshot, and applies the patches that select that proxy, with Istio's semantics for a GATEWAY proxy.
//!
//! Selection: filters in a root namespace apply to every proxy, others only to proxies in their namespace;
//! `workloadSelector` labels must all be on the proxy; `targetRefs` attach to Gateway API gateways by the
//! `gateway.networking.k8s.io/gateway-name` pod label. Order: priority, root namespaces first, creation time,
//! then `name.namespace`. Patches with context SIDECAR_* or WAYPOINT never apply to gateways. Values that do
//! not convert to their Envoy type are skipped (the validator rejects such filters before they get here).
//! `filterClass` is accepted but, as in Istio, does not change placement.

mod cluster;
mod listener;
mod route;

use std::collections::BTreeMap;

use prost::Message;
use prost_reflect::DynamicMessage;

use super::types::{GatewayResources, Proxy};
use admitpilot_envoy_proto::{self as envoy_proto, ListMerge};
use admitpilot_model::istio::envoy_filter::{
    ApplyTo, ClusterMatch, EnvoyFilter, ListenerMatch, ObjectMatch, Operation, PatchContext,
    RouteConfigurationMatch,
};
use admitpilot_model::mesh_config::DEFAULT_ROOT_NAMESPACE;
use admitpilot_model::{ConfigObject, Spec};

/// Pod label carrying the Gateway API gateway name of a gateway deployment.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// Longest proxyVersion regex Istio honours; longer ones never match.
const MAX_PROXY_VERSION_LEN: usize = 1024;

/// Settings of the patch engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchOptions {
    /// The namespace whose EnvoyFilters apply to every proxy: the mesh config's `rootNamespace`
    /// ([`admitpilot_model::Snapshot::mesh_settings`]).
    pub root_namespace: String,
    /// The proxy's Istio version, matched by `match.proxy.proxyVersion`; `None` makes version matches fail,
    /// as Istio does for proxies that report no version.
    pub proxy_version: Option<String>,
    /// The proxy's node metadata, matched by `match.proxy.metadata`.
    pub node_metadata: BTreeMap<String, String>,
}

impl Default for PatchOptions {
    fn default() -> Self {
        PatchOptions {
            root_namespace: DEFAULT_ROOT_NAMESPACE.to_string(),
            proxy_version: None,
            node_metadata: BTreeMap::new(),
        }
    }
}

/// One patch ready to apply: its target, operation, match and converted value.
struct Prepared<'a> {
    apply_to: ApplyTo,
    operation: Operation,
    matcher: Option<&'a ObjectMatch>,
    value: Option<DynamicMessage>,
}

impl Prepared<'_> {
    fn listener(&self) -> Option<&ListenerMatch> {
        self.matcher.and_then(|m| m.listener.as_ref())
    }

    fn route_configuration(&self) -> Option<&RouteConfigurationMatch> {
        self.matcher.and_then(|m| m.route_configuration.as_ref())
    }

    fn cluster(&self) -> Option<&ClusterMatch> {
        self.matcher.and_then(|m| m.cluster.as_ref())
    }

    /// Returns the value as the generated Envoy type.
    fn typed<M: Message + Default + prost::Name>(&self) -> Option<M> {
        self.value
            .as_ref()
            .and_then(|v| envoy_proto::from_dynamic(v).ok())
    }

    fn list_merge(&self) -> ListMerge {
        if self.operation == Operation::MergeAndReplaceList {
            ListMerge::Replace
        } else {
            ListMerge::Append
        }
    }

    /// Merges the value into `dst` (MERGE / MERGE_AND_REPLACE_LIST); a failed conversion leaves `dst` as is.
    fn merge_into<M: Message + Default + prost::Name>(&self, dst: &mut M) {
        if let Some(value) = &self.value {
            // merge_into only assigns on success, so a failed round trip leaves `dst` untouched rather than
            // half-patched; both sides come from the same pool, so it does not fail for valid messages.
            let _ = envoy_proto::merge_into(dst, value, self.list_merge());
        }
    }
}

/// The prepared patches of every selected filter, in application order.
struct Patches<'a> {
    all: Vec<Prepared<'a>>,
}

impl<'a> Patches<'a> {
    fn of(&self, apply_to: ApplyTo) -> impl Iterator<Item = &Prepared<'a>> + '_ {
        self.all.iter().filter(move |p| p.apply_to == apply_to)
    }
}

/// Which parts of the resources [`apply`] may have changed besides the listeners and extension configs,
/// so a caller reusing earlier output knows what to rebuild.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Touched {
    /// Route configurations (ROUTE_CONFIGURATION, VIRTUAL_HOST or HTTP_ROUTE patches applied).
    pub route_configs: bool,
    /// Clusters (CLUSTER patches applied).
    pub clusters: bool,
}

/// Applies every EnvoyFilter in `filters` that selects `proxy` to `resources` (other kinds are ignored).
/// Endpoints and secrets are never patched.
pub fn apply(
    resources: &mut GatewayResources,
    filters: &[&ConfigObject],
    proxy: &Proxy,
    options: &PatchOptions,
) -> Touched {
    let patches = prepare(filters, proxy, options);
    let touched = Touched {
        route_configs: [
            ApplyTo::RouteConfiguration,
            ApplyTo::VirtualHost,
            ApplyTo::HttpRoute,
        ]
        .into_iter()
        .any(|kind| patches.of(kind).next().is_some()),
        clusters: patches.of(ApplyTo::Cluster).next().is_some(),
    };
    if patches.all.is_empty() {
        return touched;
    }
    listener::patch_listeners(&mut resources.listeners, &patches);
    if touched.route_configs {
        route::patch_route_configurations(&mut resources.route_configs, &patches);
        resources.route_configs.sort_by(|a, b| a.name.cmp(&b.name));
    }
    if touched.clusters {
        cluster::patch_clusters(&mut resources.clusters, &patches);
        resources.clusters.sort_by(|a, b| a.name.cmp(&b.name));
    }
    for patch in patches.of(ApplyTo::ExtensionConfig) {
        if patch.operation != Operation::Add {
            continue;
        }
        if let Some(config) =
            patch.typed::<envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig>()
        {
            resources
                .extension_configs
                .retain(|c| c.name != config.name);
            resources.extension_configs.push(config);
        }
    }
    resources.listeners.sort_by(|a, b| a.name.cmp(&b.name));
    resources
        .extension_configs
        .sort_by(|a, b| a.name.cmp(&b.name));
    touched
}

/// Selects, orders and converts the patches that apply to `proxy`.
fn prepare<'a>(filters: &[&'a ConfigObject], proxy: &Proxy, options: &PatchOptions) -> Patches<'a> {
    let mut selected: Vec<(&'a ConfigObject, &'a EnvoyFilter, bool)> = filters
        .iter()
        .filter_map(|object| match &object.spec {
            Spec::EnvoyFilter(spec) => {
                let root = options.root_namespace == object.metadata.namespace;
                selects(object, spec, root, proxy).then_some((*object, spec, root))
            }
            _ => None,
        })
        .collect();
    selected.sort_by(|(a, sa, ra), (b, sb, rb)| {
        sa.priority
            .cmp(&sb.priority)
            .then_with(|| rb.cmp(ra))
            .then_with(|| {
                a.metadata
                    .creation_timestamp
                    .cmp(&b.metadata.creation_timestamp)
            })
            .then_with(|| {
                (a.metadata.name.as_str(), a.metadata.namespace.as_str())
                    .cmp(&(b.metadata.name.as_str(), b.metadata.namespace.as_str()))
            })
    });
    let mut all = Vec::new();
    for (_, spec, _) in selected {
        for cp in &spec.config_patches {
            let Some(patch) = &cp.patch else { continue };
            if patch.operation == Operation::Invalid || cp.apply_to == ApplyTo::Invalid {
                continue;
            }
            let matcher = cp.r#match.as_ref();
            if let Some(m) = matcher {
                if !matches!(m.context, PatchContext::Any | PatchContext::Gateway)
                    || !proxy_matches(m, options)
                {
                    continue;
                }
            }
            let value = match (&patch.value, cp.apply_to.envoy_message()) {
                (Some(value), Some(name)) if !value.is_null() => {
                    match envoy_proto::from_json(name, value) {
                        Ok(message) => Some(message),
                        Err(_) => continue,
                    }
                }
                _ => None,
            };
            if value.is_none() && patch.operation != Operation::Remove {
                continue;
            }
            all.push(Prepared {
                apply_to: cp.apply_to,
                operation: normalize(cp.apply_to, patch.operation),
                matcher,
                value,
            });
        }
    }
    Patches { all }
}

/// INSERT_* only means something for ordered lists; elsewhere Istio treats it as ADD.
fn normalize(apply_to: ApplyTo, operation: Operation) -> Operation {
    let ordered = matches!(
        apply_to,
        ApplyTo::HttpFilter | ApplyTo::NetworkFilter | ApplyTo::HttpRoute | ApplyTo::ListenerFilter
    );
    match operation {
        Operation::InsertBefore | Operation::InsertAfter | Operation::InsertFirst if !ordered => {
            Operation::Add
        }
        other => other,
    }
}

/// Tells whether a filter in `object`'s namespace selects `proxy`.
pub(crate) fn selects(
    object: &ConfigObject,
    spec: &EnvoyFilter,
    root: bool,
    proxy: &Proxy,
) -> bool {
    let same_namespace = object.metadata.namespace == proxy.namespace;
    if !root && !same_namespace {
        return false;
    }
    if !spec.target_refs.is_empty() {
        return same_namespace
            && spec.target_refs.iter().any(|target| {
                target.kind == "Gateway"
                    && target.group == "gateway.networking.k8s.io"
                    && proxy.labels.get(GATEWAY_NAME_LABEL) == Some(&target.name)
            });
    }
    match &spec.workload_selector {
        Some(selector) => proxy.has_labels(&selector.labels),
        None => true,
    }
}

fn proxy_matches(m: &ObjectMatch, options: &PatchOptions) -> bool {
    let Some(proxy) = &m.proxy else { return true };
    if !proxy.proxy_version.is_empty() {
        if proxy.proxy_version.len() > MAX_PROXY_VERSION_LEN {
            return false;
        }
        let Some(version) = options.proxy_version.as_deref().filter(|v| !v.is_empty()) else {
            return false;
        };
        match regex::Regex::new(&proxy.proxy_version) {
            Ok(re) if re.is_match(version) => {}
            _ => return false,
        }
    }
    proxy
        .metadata
        .iter()
        .all(|(k, v)| options.node_metadata.get(k) == Some(v))
}

/// Applies one list operation (ADD, INSERT_*, REPLACE, REMOVE) to an ordered list of filters or routes.
/// `has_match` tells whether the patch names an element; `is_match` finds it.
fn apply_list_op<T>(
    items: &mut Vec<T>,
    operation: Operation,
    has_match: bool,
    is_match: impl Fn(&T) -> bool,
    value: impl FnOnce() -> Option<T>,
) {
    let position = || items.iter().position(&is_match);
    match operation {
        Operation::Add => items.extend(value()),
        Operation::InsertFirst => {
            if let Some(v) = value() {
                items.insert(0, v);
            }
        }
        Operation::InsertAfter => {
            let at = if has_match {
                position().map(|i| i + 1)
            } else {
                Some(items.len())
            };
            if let (Some(at), Some(v)) = (at, value()) {
                items.insert(at, v);
            }
        }
        Operation::InsertBefore => {
            let at = if has_match { position() } else { Some(0) };
            if let (Some(at), Some(v)) = (at, value()) {
                items.insert(at, v);
            }
        }
        Operation::Replace if has_match => {
            if let (Some(at), Some(v)) = (position(), value()) {
                items[at] = v;
            }
        }
        Operation::Remove if has_match => items.retain(|item| !is_match(item)),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
