//! Kubernetes Ingress as Higress reads it (pure): which Ingresses a gateway serves ([`IngressOptions`],
//! [`is_served`]), their defaults, and their annotations ([`annotations`]). Takes Ingress and IngressClass objects
//! of a snapshot, yields the served Ingresses in Higress's order; `translate::ingress` turns them into Istio objects.

pub mod annotations;

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{HTTPIngressPath, IngressSpec};

use crate::{ConfigObject, Kind, Snapshot, Spec};

/// Higress's IngressClass controller (`helm/core/templates/ingressclass.yaml`).
pub const DEFAULT_CONTROLLER: &str = "higress.io/higress-controller";
/// Higress's default `--ingressClass`.
pub const DEFAULT_CLASS: &str = "higress";
/// The legacy class annotation, read before `spec.ingressClassName` (as Higress and ingress-nginx do).
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// The annotation that makes an IngressClass the class of Ingresses that name none.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// Which Ingresses admitpilot serves, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressOptions {
    /// IngressClasses whose `spec.controller` is this are admitpilot's (`higress.io/higress-controller`).
    pub controller: String,
    /// The class name served even without an IngressClass object (Higress's `--ingressClass`, `higress`); empty
    /// serves every Ingress.
    pub class: String,
    /// Labels of the gateway pods Ingresses are served to (Higress's `--gatewaySelectorKey/Value`).
    pub gateway_selector: BTreeMap<String, String>,
    /// The gateway's HTTP port (Higress's `--gatewayHttpPort`).
    pub http_port: u32,
    /// The gateway's HTTPS port (Higress's `--gatewayHttpsPort`).
    pub https_port: u32,
}

impl Default for IngressOptions {
    fn default() -> Self {
        IngressOptions {
            controller: DEFAULT_CONTROLLER.into(),
            class: DEFAULT_CLASS.into(),
            gateway_selector: BTreeMap::from([(
                "higress".to_string(),
                "higress-system-higress-gateway".to_string(),
            )]),
            http_port: 80,
            https_port: 443,
        }
    }
}

/// The IngressClass objects of a snapshot whose controller is admitpilot's, by name, with whether each is the
/// default class.
fn own_classes<'a>(
    snapshot: &'a Snapshot,
    options: &IngressOptions,
) -> impl Iterator<Item = (&'a str, bool)> {
    let controller = options.controller.clone();
    snapshot
        .of_kind(Kind::IngressClass)
        .filter_map(move |o| match &o.spec {
            Spec::IngressClass(class)
                if class.controller.as_deref() == Some(controller.as_str()) =>
            {
                Some((
                    o.metadata.name.as_str(),
                    o.metadata
                        .annotations
                        .get(DEFAULT_CLASS_ANNOTATION)
                        .is_some_and(|v| v == "true"),
                ))
            }
            _ => None,
        })
}

/// Whether admitpilot serves the Ingress. Mirrors Higress's `shouldProcessIngressWithClass`
/// (`pkg/ingress/kube/ingressv1/controller.go`), plus the IngressClass `controller` and default-class annotation
/// Kubernetes defines (Higress reads neither):
/// 1. the annotation `kubernetes.io/ingress.class`, when present, decides: it must be the class option or name an
///    IngressClass of admitpilot's controller;
/// 2. else `spec.ingressClassName` must name an IngressClass of admitpilot's controller, or name no IngressClass
///    object and equal the class option;
/// 3. else (no class) an IngressClass of admitpilot's controller must be the default class.
///
/// An empty class option serves every Ingress.
pub fn is_served(
    ingress: &ConfigObject,
    spec: &IngressSpec,
    snapshot: &Snapshot,
    options: &IngressOptions,
) -> bool {
    if options.class.is_empty() {
        return true;
    }
    let own = |name: &str| own_classes(snapshot, options).any(|(class, _)| class == name);
    if let Some(class) = ingress.metadata.annotations.get(CLASS_ANNOTATION) {
        return *class == options.class || own(class);
    }
    match spec.ingress_class_name.as_deref() {
        Some(name) => {
            let exists = snapshot
                .of_kind(Kind::IngressClass)
                .any(|o| o.metadata.name == name);
            own(name) || (!exists && name == options.class)
        }
        None => own_classes(snapshot, options).any(|(_, default)| default),
    }
}

/// The Ingresses admitpilot serves, oldest first (Higress's `SortIngressByCreationTime`: creation time, then
/// `name.namespace`), each with its spec.
pub fn served<'a>(
    snapshot: &'a Snapshot,
    options: &IngressOptions,
) -> Vec<(&'a std::sync::Arc<ConfigObject>, &'a IngressSpec)> {
    let mut out: Vec<_> = snapshot
        .of_kind(Kind::Ingress)
        .filter_map(|o| match &o.spec {
            Spec::Ingress(spec) if is_served(o, spec, snapshot, options) => {
                Some((o, spec.as_ref()))
            }
            _ => None,
        })
        .collect();
    out.sort_by_cached_key(|(o, _)| {
        (
            o.metadata.creation_timestamp.clone().unwrap_or_default(),
            format!("{}.{}", o.metadata.name, o.metadata.namespace),
        )
    });
    out
}

/// How a path matches, after Higress's defaulting (`ImplementationSpecific` is `Prefix`) and regex annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathKind {
    /// `Exact`.
    Exact,
    /// `Prefix`, path element by element.
    Prefix,
    /// `use-regex` (or a regex `rewrite-target`): a regex the path starts with.
    PrefixRegex,
    /// `higress.io/full-path-regex`: a regex the whole path matches.
    FullPathRegex,
}

/// Regex metacharacters that make a path with `rewrite-target` a regex (`NeedRegexMatch`).
const REGEX_CHARS: &str = "\\.+*?()|[]{}^$";

/// The kind of a path: its `pathType` unless the annotations make it a regex (Higress's `NeedRegexMatch`).
pub fn path_kind(path: &str, path_type: &str, a: &annotations::Annotations) -> PathKind {
    let target_is_regex = a
        .rewrite_target
        .as_deref()
        .is_some_and(|t| t.contains(['$', '\\']) || path.contains(|c| REGEX_CHARS.contains(c)));
    if a.full_path_regex {
        PathKind::FullPathRegex
    } else if a.use_regex || target_is_regex {
        PathKind::PrefixRegex
    } else if path_type == "Exact" {
        PathKind::Exact
    } else {
        PathKind::Prefix
    }
}

/// A path as Higress reads it: `/` when empty (`setDefaultMSEIngressOptionalField`).
pub fn path_of(path: &HTTPIngressPath) -> &str {
    path.path
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or("/")
}

/// A rule's host as Higress reads it: `*` when empty.
pub fn host_of(host: Option<&str>) -> &str {
    host.filter(|h| !h.is_empty()).unwrap_or("*")
}
