//! Gateway API status (pure): takes a snapshot, the controller name admitpilot answers for and, per Gateway, what
//! its gateways did with the config ([`Programmed`]), and yields the `status` of every GatewayClass, Gateway,
//! ListenerSet and route of that controller, and of the BackendTLSPolicies on their backends
//! ([`super::backend_tls`]) ([`StatusUpdate`]), with the spec's conditions and reasons (gateway-api
//! `apis/v1/{gatewayclass,gateway,shared}_types.go`) and `observedGeneration` on each condition.
//!
//! It reads attachment and references exactly as translation does ([`attachment`], [`backends::destination`],
//! the certificate rules of `translate::secret`), so a route said Accepted is one the gateways get. Route parents
//! of other controllers are not produced here: a writer merges ours into `status.parents` and leaves theirs.

use serde_json::{json, Value};

use crate::backend_tls::backend_tls_policy_status;
use crate::programmed::GATEWAY_NAME_LABEL;
use admitpilot_model::gateway_api::attachment::{
    default_kinds, parent_verdict, Owner, ParentVerdict,
};
use admitpilot_model::gateway_api::common::{BackendRef, HttpRouteFilter, ParentReference};
use admitpilot_model::gateway_api::gateway::AddressPools;
use admitpilot_model::gateway_api::gateway::{conflict, Listener};
use admitpilot_model::gateway_api::listener_set;
use admitpilot_model::gateway_api::parameters;
use admitpilot_model::gateway_api::reference_grant::granted;
use admitpilot_model::gateway_api::{
    route_view, Gateway, ListenerSet, RouteView, GROUP, ROUTE_KINDS,
};
use admitpilot_model::gateway_api::{PROVISIONED_LABEL, PROVISIONER};
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot, Spec};
use admitpilot_translate::gateway_api::backend_tls::{client_certificate, unmet_policy};
use admitpilot_translate::gateway_api::backends;
use admitpilot_translate::gateway_api::frontend_tls;
use admitpilot_translate::secret::{listener_may_use, serves_certificate};

/// The listener protocols admitpilot serves (others are Accepted=False, UnsupportedProtocol).
const SERVED_PROTOCOLS: [&str; 4] = ["HTTP", "HTTPS", "TLS", "TCP"];

/// What the gateways of one Gateway did with the config version holding its current generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Programmed {
    /// Every connected gateway of it has ACKed it.
    Served,
    /// Not yet (no gateway connected, or not yet acknowledged): the message says which.
    Pending(String),
    /// A gateway NACKed it: Envoy's error.
    Rejected(String),
}

/// The `status` one object should carry.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    /// The object.
    pub key: ObjectKey,
    /// Its generation the status describes (`observedGeneration`).
    pub generation: i64,
    /// The `status` (for routes, the `parents` entries of admitpilot's controller only).
    pub status: Value,
}

/// What the gateways did with the config, as status reports it.
pub struct Served<'a> {
    /// Per Gateway: whether its gateways serve its current generation.
    pub programmed: &'a dyn Fn(&ObjectKey) -> Programmed,
    /// Per route and Gateway: why the push guard leaves the route out of that Gateway's config (what Envoy would
    /// reject), if it does.
    pub held_back: &'a dyn Fn(&ObjectKey, &ObjectKey) -> Option<String>,
    /// The bundle version of the Gateway API CRDs installed (their `gateway.networking.k8s.io/bundle-version`
    /// annotation), when known: a GatewayClass's `SupportedVersion` says whether admitpilot supports it.
    pub bundle_version: Option<&'a str>,
    /// The addresses a provisioned gateway's load balancer can give: a Gateway asking for another is not
    /// Programmed (`AddressNotUsable`).
    pub address_pools: &'a AddressPools,
}

/// The newest Gateway API minor version admitpilot is built and tested against (its `crds/gateway-api` bundle).
pub const NEWEST_SUPPORTED_MINOR: u64 = 6;

/// The `SupportedVersion` condition of a GatewayClass for the installed CRDs' bundle version (`v1.<minor>.<patch>`):
/// True for v1.0 up to [`NEWEST_SUPPORTED_MINOR`]; False, reason `UnsupportedVersion`, for anything else (as the spec
/// asks of an implementation that does not support the installed version; the class stays Accepted, as Istio
/// keeps it).
fn supported_version(bundle: &str, generation: i64, now: &str) -> Value {
    let minor = bundle
        .strip_prefix("v1.")
        .and_then(|rest| rest.split(['.', '-']).next())
        .and_then(|minor| minor.parse::<u64>().ok());
    match minor {
        Some(minor) if minor <= NEWEST_SUPPORTED_MINOR => condition(
            "SupportedVersion",
            true,
            "SupportedVersion",
            &format!("Gateway API CRDs {bundle} are supported"),
            generation,
            now,
        ),
        _ => condition(
            "SupportedVersion",
            false,
            "UnsupportedVersion",
            &format!(
                "Gateway API CRDs {bundle} are not supported: admitpilot supports v1.0 to v1.{NEWEST_SUPPORTED_MINOR}"
            ),
            generation,
            now,
        ),
    }
}

/// The status of every GatewayClass of `controller`, every Gateway of those classes and every HTTPRoute attached
/// to one of them; `served` says what the gateways did; `now` (RFC 3339) stamps the conditions.
pub fn gateway_api_status(
    snapshot: &Snapshot,
    controller: &str,
    served: &Served<'_>,
    now: &str,
) -> Vec<StatusUpdate> {
    let programmed = served.programmed;
    let address_pools = served.address_pools;
    let mut out = Vec::new();
    let ours: Vec<&str> = snapshot
        .of_kind(Kind::GatewayClass)
        .filter_map(|object| match &object.spec {
            Spec::GatewayClass(class) if class.controller_name == controller => {
                let generation = generation(object);
                let accepted =
                    match parameters::class_parameters(snapshot, &object.metadata.name, class) {
                        Ok(_) => condition(
                            "Accepted",
                            true,
                            "Accepted",
                            "handled by admitpilot",
                            generation,
                            now,
                        ),
                        Err(why) => condition(
                            "Accepted",
                            false,
                            "InvalidParameters",
                            &why,
                            generation,
                            now,
                        ),
                    };
                let mut conditions = vec![accepted];
                conditions.extend(
                    served
                        .bundle_version
                        .map(|bundle| supported_version(bundle, generation, now)),
                );
                out.push(StatusUpdate {
                    key: object.key(),
                    generation,
                    status: json!({ "conditions": conditions }),
                });
                Some(object.metadata.name.as_str())
            }
            _ => None,
        })
        .collect();
    let gateways: Vec<(&ConfigObject, &Gateway)> = snapshot
        .of_kind(Kind::KubernetesGateway)
        .filter_map(|object| match &object.spec {
            Spec::KubernetesGateway(gateway)
                if ours.contains(&gateway.gateway_class_name.as_str()) =>
            {
                Some((object.as_ref(), gateway.as_ref()))
            }
            _ => None,
        })
        .collect();
    // Every ListenerSet naming one of them: (set, spec, admitted, its Gateway).
    let mut sets: Vec<(&ConfigObject, &ListenerSet, bool, &ConfigObject)> = Vec::new();
    for (object, gateway) in &gateways {
        let served = programmed(&object.key());
        let mut earlier = gateway.listeners.clone();
        let mut attached = 0;
        for (set, spec, admitted) in listener_set::naming(snapshot, object, gateway) {
            let (update, accepted) = listener_set_status(
                snapshot,
                (set, spec, admitted),
                &mut earlier,
                (object, gateway),
                &served,
                now,
            );
            attached += usize::from(accepted);
            out.push(update);
            sets.push((set, spec, admitted, object));
        }
        out.push(gateway_status(
            snapshot,
            (object, gateway),
            (&served, address_pools),
            attached,
            now,
        ));
    }
    let routes = ROUTE_KINDS.iter().flat_map(|kind| snapshot.of_kind(*kind));
    for object in routes {
        let Some(route) = route_view(object) else {
            continue;
        };
        let parents: Vec<Value> = route
            .parent_refs
            .iter()
            .filter_map(|parent| {
                let names = |o: &ConfigObject| {
                    parent.group() == GROUP
                        && o.metadata.name == parent.name
                        && o.metadata.namespace == parent.namespace_or(&object.metadata.namespace)
                };
                // The Gateway or ListenerSet it names, its listeners, whether it is attached, and its Gateway.
                let (owner, listeners, attached, gateway) = match parent.kind() {
                    "Gateway" => gateways
                        .iter()
                        .find(|(g, _)| names(g))
                        .map(|(g, spec)| (Owner::gateway(g), &spec.listeners, true, *g))?,
                    "ListenerSet" => {
                        sets.iter()
                            .find(|(s, ..)| names(s))
                            .map(|(s, spec, admitted, g)| {
                                (Owner::listener_set(s), &spec.listeners, *admitted, *g)
                            })?
                    }
                    _ => return None,
                };
                let mut entry = route_parent(
                    snapshot,
                    (object, &route),
                    (owner, listeners, attached),
                    parent,
                    controller,
                    now,
                );
                if let Some(why) = (served.held_back)(&object.key(), &gateway.key()) {
                    hold_back(&mut entry, &why);
                }
                Some(entry)
            })
            .collect();
        if !parents.is_empty() {
            out.push(StatusUpdate {
                key: object.key(),
                generation: generation(object),
                status: json!({"parents": parents}),
            });
        }
    }
    let ours: Vec<&ConfigObject> = gateways.iter().map(|(g, _)| *g).collect();
    out.extend(backend_tls_policy_status(snapshot, &ours, controller, now));
    out
}

pub(super) fn generation(object: &ConfigObject) -> i64 {
    object.metadata.generation.unwrap_or(0)
}

/// A `metav1.Condition`.
pub(super) fn condition(
    kind: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: i64,
    now: &str,
) -> Value {
    json!({
        "type": kind,
        "status": if ok { "True" } else { "False" },
        "reason": reason,
        "message": bounded(message),
        "observedGeneration": generation,
        "lastTransitionTime": now,
    })
}

/// The longest condition message written (the CRDs allow 32,768 characters; Envoy's rejections can be longer).
const MESSAGE_MAX_CHARS: usize = 4096;

/// `message`, cut to [`MESSAGE_MAX_CHARS`] characters.
fn bounded(message: &str) -> String {
    match message.char_indices().nth(MESSAGE_MAX_CHARS) {
        Some((at, _)) => format!("{}…", &message[..at]),
        None => message.to_string(),
    }
}

/// One listener's status entry (of a Gateway or a ListenerSet, `owner`)
/// and whether the listener is valid; `conflict` is its conflict with the listeners it yields to.
fn listener_status(
    snapshot: &Snapshot,
    (owner, gateway): (Owner<'_>, (&ConfigObject, &Gateway)),
    listener: &Listener,
    conflict: Option<(&'static str, String)>,
    programmed: &Programmed,
    (generation, now): (i64, &str),
) -> (Value, bool) {
    let cond =
        |kind, ok, reason, message: &str| condition(kind, ok, reason, message, generation, now);
    let supported = SERVED_PROTOCOLS.contains(&listener.protocol.as_str());
    // The Gateway's client certificate validation for this listener (translation serves it only with a CA).
    let frontend = frontend_tls::client_validation(snapshot, gateway, listener);
    let certificates = certificate_refs(snapshot, owner, listener);
    let valid = supported && certificates.is_ok() && !frontend.refused() && conflict.is_none();
    let refs = certificates.and_then(|()| frontend.unresolved.clone().map_or(Ok(()), Err));
    let attached = attached_routes(snapshot, owner, listener);
    let (programmed_ok, programmed_reason, programmed_message) = match (valid, programmed) {
        (false, _) => (false, "Invalid", "the listener is not valid".to_string()),
        (true, Programmed::Served) => (true, "Programmed", "served by the gateways".to_string()),
        (true, Programmed::Pending(why)) => (false, "Pending", why.clone()),
        (true, Programmed::Rejected(why)) => (false, "Invalid", why.clone()),
    };
    let invalid_kinds = unsupported_route_kinds(listener);
    let (refs_ok, refs_reason, refs_message) = match &refs {
        _ if !invalid_kinds.is_empty() => (
            false,
            "InvalidRouteKinds",
            format!(
                "allowedRoutes.kinds names route kinds a {} listener does not take: {}",
                listener.protocol,
                invalid_kinds.join(", ")
            ),
        ),
        Ok(()) => (true, "ResolvedRefs", "references resolved".to_string()),
        Err((reason, message)) => (false, *reason, message.clone()),
    };
    let entry = json!({
        "name": listener.name,
        "supportedKinds": supported_kinds(listener),
        "attachedRoutes": attached,
        "conditions": [
            if frontend.refused() {
                cond("Accepted", false, "NoValidCACertificate", &format!(
                    "no CA of the Gateway's client certificate validation for port {} resolves: {}",
                    listener.port,
                    frontend.unresolved.as_ref().map_or("", |(_, why)| why.as_str())
                ))
            } else if supported {
                cond("Accepted", true, "Accepted", "accepted")
            } else {
                cond("Accepted", false, "UnsupportedProtocol",
                     &format!("admitpilot does not serve {} listeners yet", listener.protocol))
            },
            cond("ResolvedRefs", refs_ok, refs_reason, &refs_message),
            match conflict {
                None => cond("Conflicted", false, "NoConflicts", "no conflicts"),
                Some((reason, message)) => cond("Conflicted", true, reason, &message),
            },
            cond("Programmed", programmed_ok, programmed_reason, &programmed_message),
        ],
    });
    (entry, valid)
}

/// Sets `OverlappingTLSConfig` (True, `OverlappingHostnames`) on every HTTPS or TLS listener whose host name
/// overlaps another's on the same port, and on nothing else: Gateway API v1.6 `apis/v1/gateway_types.go`,
/// `ListenerConditionOverlappingTLSConfig`: "Controllers MUST detect the presence of overlapping hostnames … This
/// condition MUST be set on all Listeners with overlapping TLS config … a negative polarity condition and MUST NOT be
/// set when it is False". Overlapping certificates (a MAY) are not looked for.
fn mark_overlapping_tls(
    listeners: &[Listener],
    entries: &mut [Value],
    (generation, now): (i64, &str),
) {
    let tls = |l: &Listener| ["HTTPS", "TLS"].contains(&l.protocol.as_str());
    for (i, listener) in listeners.iter().enumerate() {
        if !tls(listener) {
            continue;
        }
        let other = listeners.iter().enumerate().find(|(j, other)| {
            *j != i
                && tls(other)
                && other.port == listener.port
                && hostnames_overlap(listener.hostname.as_deref(), other.hostname.as_deref())
        });
        let Some((_, other)) = other else {
            continue;
        };
        let shown = |h: Option<&str>| {
            h.filter(|h| !h.is_empty())
                .unwrap_or("(any host)")
                .to_string()
        };
        let message = format!(
            "the host name {} overlaps the host name {} of listener {:?} on port {}: a client may reuse one's \
             TLS connection for the other",
            shown(listener.hostname.as_deref()),
            shown(other.hostname.as_deref()),
            other.name,
            listener.port
        );
        if let Some(conditions) = entries
            .get_mut(i)
            .and_then(|e| e["conditions"].as_array_mut())
        {
            conditions.push(condition(
                "OverlappingTLSConfig",
                true,
                "OverlappingHostnames",
                &message,
                generation,
                now,
            ));
        }
    }
}

/// Whether two listener host names can match one request: equal, either absent (any host), or a wildcard
/// (`*.example.com`, any name under `example.com`) covering the other name or wildcard.
fn hostnames_overlap(a: Option<&str>, b: Option<&str>) -> bool {
    let covers = |pattern: &str, host: &str| {
        pattern == host
            || pattern.strip_prefix('*').is_some_and(|suffix| {
                suffix.starts_with('.') && host.ends_with(suffix) && host.len() > suffix.len()
            })
    };
    match (a.filter(|h| !h.is_empty()), b.filter(|h| !h.is_empty())) {
        (Some(a), Some(b)) => covers(a, b) || covers(b, a),
        _ => true,
    }
}

/// The `Programmed` condition of a Gateway or ListenerSet: what its gateways did, when a listener of it is valid;
/// `none_valid` is the reason when none is (a Gateway's `Invalid`, a ListenerSet's `ListenersNotValid`).
fn programmed_condition(
    programmed: &Programmed,
    (any_valid, none_valid): (bool, &str),
    (generation, now): (i64, &str),
) -> Value {
    let cond =
        |ok, reason, message: &str| condition("Programmed", ok, reason, message, generation, now);
    match programmed {
        Programmed::Served if any_valid => cond(true, "Programmed", "served by the gateways"),
        Programmed::Served => cond(false, none_valid, "no listener is valid"),
        Programmed::Pending(why) => cond(false, "Pending", why),
        Programmed::Rejected(why) => cond(false, "Invalid", why),
    }
}

/// A Gateway's conditions, listeners and addresses; `attached_sets` ListenerSets are attached to it.
fn gateway_status(
    snapshot: &Snapshot,
    (object, gateway): (&ConfigObject, &Gateway),
    (programmed, address_pools): (&Programmed, &AddressPools),
    attached_sets: usize,
    now: &str,
) -> StatusUpdate {
    let generation = generation(object);
    let owner = Owner::gateway(object);
    let mut any_valid = false;
    let mut listeners: Vec<Value> = gateway
        .listeners
        .iter()
        .enumerate()
        .map(|(i, listener)| {
            let conflict = conflict(
                gateway.listeners[..i]
                    .iter()
                    .chain(&gateway.listeners[i + 1..]),
                listener,
            );
            let (entry, valid) = listener_status(
                snapshot,
                (owner, (object, gateway)),
                listener,
                conflict,
                programmed,
                (generation, now),
            );
            any_valid |= valid;
            entry
        })
        .collect();
    mark_overlapping_tls(&gateway.listeners, &mut listeners, (generation, now));
    // Listeners whose own Accepted is False (a protocol admitpilot does not serve).
    let unaccepted: Vec<&str> = gateway
        .listeners
        .iter()
        .zip(&listeners)
        .filter(|(_, entry)| entry["conditions"][0]["status"] == "False")
        .map(|(listener, _)| listener.name.as_str())
        .collect();
    // Accepted while some listener is: a listener that is accepted but not valid (a certificate that does not
    // resolve, a conflict) has its own conditions and is left out of what the gateways serve, and Programmed says
    // whether any is served. Gateway API v1.6 `apis/v1/gateway_types.go`, `GatewayReasonListenersNotValid`: "one or
    // more Listeners have an invalid or unsupported configuration and cannot be configured on the Gateway. This can
    // be the reason when "Accepted" is "True" or "False", depending on whether the listener being invalid causes
    // the entire Gateway to not be accepted"; the conformance suite (v1.6 `gateway-invalid-listeners-unsupported-
    // protocol.go`: "Gateway with at least one accepted listeners should be accepted") and its
    // GatewayInvalidTLSConfiguration (the listener's ResolvedRefs False, InvalidCertificateRef) read it so.
    let any_accepted = unaccepted.len() < gateway.listeners.len();
    let accepted = if unaccepted.is_empty() {
        condition(
            "Accepted",
            true,
            "Accepted",
            "accepted by admitpilot",
            generation,
            now,
        )
    } else if any_accepted {
        // The spec: ListenersNotValid also when the Gateway is accepted with some listeners left out.
        condition(
            "Accepted",
            true,
            "ListenersNotValid",
            &format!(
                "accepted; listeners not accepted: {}",
                unaccepted.join(", ")
            ),
            generation,
            now,
        )
    } else {
        condition(
            "Accepted",
            false,
            "ListenersNotValid",
            "no listener is accepted",
            generation,
            now,
        )
    };
    let unusable: Vec<String> = gateway
        .requested_ips()
        .into_iter()
        .filter(|(_, value)| !address_pools.usable(value))
        .map(|(i, value)| format!("spec.addresses[{i}] {value}"))
        .collect();
    let programmed = match unassigned_address(snapshot, object) {
        // Asked for an address the load balancer cannot give (`GatewayReasonAddressNotUsable`).
        _ if !unusable.is_empty() => condition(
            "Programmed",
            false,
            "AddressNotUsable",
            &format!(
                "{}: not an address the load balancer can give (--gateway-address-pool)",
                unusable.join(", ")
            ),
            generation,
            now,
        ),
        // Served, but not reachable yet: the provisioned load balancer has no address.
        Some(why) if any_valid && matches!(programmed, Programmed::Served) => condition(
            "Programmed",
            false,
            "AddressNotAssigned",
            &why,
            generation,
            now,
        ),
        _ => programmed_condition(programmed, (any_valid, "Invalid"), (generation, now)),
    };
    // Parameters that are not a ConfigMap, an address type admitpilot cannot give: not accepted, nothing served or
    // provisioned (model's `Gateway::not_accepted`). Parameters whose ConfigMap does not resolve (its own or its
    // class's): not accepted, but its proxies keep what was last provisioned and keep being served.
    let (accepted, programmed) = match gateway.not_accepted() {
        Some((reason, why)) => (
            condition("Accepted", false, reason, &why, generation, now),
            condition("Programmed", false, "Invalid", &why, generation, now),
        ),
        None => match parameters::gateway_parameters(snapshot, object, gateway) {
            Err((reason, why)) => {
                let why = format!(
                    "{why}; its proxies keep what was last provisioned for it, and are still served"
                );
                (
                    condition("Accepted", false, reason, &why, generation, now),
                    programmed,
                )
            }
            Ok(_) => (accepted, programmed),
        },
    };
    let (refs_ok, refs_reason, refs_message) =
        match gateway_refs(snapshot, object, gateway, &listeners) {
            Ok(()) => (true, "ResolvedRefs", "references resolved".to_string()),
            Err((reason, message)) => (false, reason, message),
        };
    let resolved = condition(
        "ResolvedRefs",
        refs_ok,
        refs_reason,
        &refs_message,
        generation,
        now,
    );
    // Written even when empty, so a merge patch clears addresses whose Service is gone.
    let mut conditions = vec![accepted, programmed, resolved];
    if gateway.insecure_frontend_validation() {
        conditions.push(condition(
            "InsecureFrontendValidationMode",
            true,
            "ConfigurationChanged",
            "spec.tls.frontend lets clients without a valid certificate through (AllowInsecureFallback)",
            generation,
            now,
        ));
    }
    let status = json!({"conditions": conditions, "listeners": listeners,
        "addresses": addresses(snapshot, object), "attachedListenerSets": attached_sets});
    StatusUpdate {
        key: object.key(),
        generation,
        status,
    }
}

/// The Gateway's own `ResolvedRefs` (Gateway API v1.6 `apis/v1/gateway_types.go`, `GatewayConditionResolvedRefs`
/// and `GatewayBackendTLS.ClientCertificateRef`): `spec.tls.backend.clientCertificateRef` MUST name a Secret the
/// Gateway may use (its namespace, or one a ReferenceGrant opens to Gateways of its namespace, else
/// `RefNotPermitted`) that exists and holds `tls.crt` and `tls.key` that serve (else `InvalidClientCertificateRef`),
/// the verdict the conversion presents the certificate by ([`client_certificate`]); then every listener's
/// `ResolvedRefs` must be True (else `ListenersNotResolved`, the positive-polarity summary).
fn gateway_refs(
    snapshot: &Snapshot,
    object: &ConfigObject,
    gateway: &Gateway,
    listeners: &[Value],
) -> Result<(), (&'static str, String)> {
    client_certificate(snapshot, object, gateway)?;
    let unresolved: Vec<&str> = listeners
        .iter()
        .filter(|entry| {
            entry["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "ResolvedRefs" && c["status"] == "False")
        })
        .filter_map(|entry| entry["name"].as_str())
        .collect();
    if unresolved.is_empty() {
        Ok(())
    } else {
        Err((
            "ListenersNotResolved",
            format!(
                "listeners whose references do not resolve: {}",
                unresolved.join(", ")
            ),
        ))
    }
}

/// A ListenerSet naming the Gateway `gateway`: Accepted when the Gateway admits it (`allowedListeners`, else
/// `NotAllowed`) and a listener of it is valid (else `ListenersNotValid`); its listeners yield to the Gateway's and
/// to those of the sets before it (`earlier`), as translation serves them. Returns the status and whether the set
/// is attached.
fn listener_set_status(
    snapshot: &Snapshot,
    (object, set, admitted): (&ConfigObject, &ListenerSet, bool),
    earlier: &mut Vec<Listener>,
    (gateway, gateway_spec): (&ConfigObject, &Gateway),
    programmed: &Programmed,
    now: &str,
) -> (StatusUpdate, bool) {
    let generation = generation(object);
    let owner = Owner::listener_set(object);
    let mut any_valid = false;
    let mut listeners = Vec::new();
    for listener in &set.listeners {
        let conflict = if admitted {
            conflict(earlier.iter(), listener)
        } else {
            None
        };
        // As translation does: every listener it serves is one the later ones yield to, valid or not.
        let yields_to = admitted && conflict.is_none();
        let lost = conflict.clone();
        let (mut entry, valid) = listener_status(
            snapshot,
            (owner, (gateway, gateway_spec)),
            listener,
            conflict,
            programmed,
            (generation, now),
        );
        // A set's listener that yields to an earlier one is not accepted (the spec's listener precedence for
        // ListenerSets): Accepted and Programmed False with the conflict's reason.
        if let Some((reason, message)) = lost {
            entry["conditions"][0] =
                condition("Accepted", false, reason, &message, generation, now);
            entry["conditions"][3] =
                condition("Programmed", false, reason, &message, generation, now);
        }
        if yields_to {
            earlier.push(listener.clone());
        }
        any_valid |= valid;
        listeners.push(entry);
    }
    let attached = admitted && any_valid;
    let accepted = if !admitted {
        condition(
            "Accepted",
            false,
            "NotAllowed",
            &format!(
                "Gateway {}/{} does not allow ListenerSets from this namespace (spec.allowedListeners)",
                gateway.metadata.namespace, gateway.metadata.name
            ),
            generation,
            now,
        )
    } else if attached {
        condition(
            "Accepted",
            true,
            "Accepted",
            "attached to its Gateway",
            generation,
            now,
        )
    } else {
        condition(
            "Accepted",
            false,
            "ListenersNotValid",
            "no listener is valid",
            generation,
            now,
        )
    };
    let programmed = if admitted {
        programmed_condition(
            programmed,
            (any_valid, "ListenersNotValid"),
            (generation, now),
        )
    } else {
        // The same reason as Accepted's (the conformance suite's ListenerSetAllowedNamespace* expect it).
        condition(
            "Programmed",
            false,
            "NotAllowed",
            "not attached to its Gateway",
            generation,
            now,
        )
    };
    let status = json!({"conditions": [accepted, programmed], "listeners": listeners});
    (
        StatusUpdate {
            key: object.key(),
            generation,
            status,
        },
        attached,
    )
}

/// A Gateway's addresses: those of the Services in its namespace that select its proxies (selector
/// `gateway.networking.k8s.io/gateway-name: <name>`): their `externalIPs`, `loadBalancerIP` and the load balancer
/// addresses of their status (`status.loadBalancer.ingress`, IPs and host names), else their cluster DNS name
/// (Istio's gateway status gives the Service's host name when no address is assigned); each address once, at most
/// [`MAX_ADDRESSES`].
fn addresses(snapshot: &Snapshot, gateway: &ConfigObject) -> Vec<Value> {
    let namespace = gateway.metadata.namespace.as_str();
    let mut out: Vec<Value> = Vec::new();
    for object in snapshot.of_kind(Kind::Service) {
        let Spec::Service(service) = &object.spec else {
            continue;
        };
        let selects = object.metadata.namespace == namespace
            && service
                .selector
                .as_ref()
                .and_then(|selector| selector.get(GATEWAY_NAME_LABEL))
                .is_some_and(|name| *name == gateway.metadata.name);
        if !selects {
            continue;
        }
        let ip = |value: &String| json!({"type": "IPAddress", "value": value});
        let hostname = |value: &String| json!({"type": "Hostname", "value": value});
        let mut assigned: Vec<Value> = service
            .external_ips
            .iter()
            .flatten()
            .chain(service.load_balancer_ip.iter())
            .map(ip)
            .collect();
        for ingress in &service.load_balancer_ingress {
            assigned.extend(ingress.ip.iter().map(ip));
            assigned.extend(ingress.hostname.iter().map(hostname));
        }
        // A provisioned load balancer still waiting for its address has none to give yet (its cluster DNS name is
        // not what clients outside the cluster reach).
        if assigned.is_empty() && !pending_load_balancer(object, service, gateway) {
            assigned.push(hostname(&format!(
                "{}.{namespace}.svc.cluster.local",
                object.metadata.name
            )));
        }
        for address in assigned {
            if !out.contains(&address) && out.len() < MAX_ADDRESSES {
                out.push(address);
            }
        }
    }
    out
}

/// Why a provisioned Gateway has no address yet: its provisioned LoadBalancer Service (labelled
/// [`PROVISIONED_LABEL`]) has no load-balancer address in its status (Gateway API v1.6 `apis/v1/gateway_types.go`,
/// `GatewayReasonAddressNotAssigned`: "one or more addresses have not been assigned"). `None` when it has one, or
/// the Gateway's proxies are not provisioned.
fn unassigned_address(snapshot: &Snapshot, gateway: &ConfigObject) -> Option<String> {
    snapshot.of_kind(Kind::Service).find_map(|object| {
        let Spec::Service(service) = &object.spec else {
            return None;
        };
        pending_load_balancer(object, service, gateway).then(|| {
            format!(
                "Service {}/{} (LoadBalancer) has no load-balancer address yet",
                object.metadata.namespace, object.metadata.name
            )
        })
    })
}

/// Whether `object` (spec `service`) is the provisioned LoadBalancer Service of `gateway` and has no load-balancer
/// address yet.
fn pending_load_balancer(
    object: &ConfigObject,
    service: &admitpilot_model::service::Service,
    gateway: &ConfigObject,
) -> bool {
    let labels = &object.metadata.labels;
    object.metadata.namespace == gateway.metadata.namespace
        && labels.get(PROVISIONED_LABEL).map(String::as_str) == Some(PROVISIONER)
        && labels.get(GATEWAY_NAME_LABEL) == Some(&gateway.metadata.name)
        && service.type_.as_deref() == Some("LoadBalancer")
        && service.load_balancer_ingress.is_empty()
}

/// The most addresses a Gateway's status holds (the CRD's `maxItems`).
const MAX_ADDRESSES: usize = 16;

/// The route kinds a listener takes: its protocol's ([`default_kinds`]), narrowed by `allowedRoutes.kinds`.
fn supported_kinds(listener: &Listener) -> Vec<Value> {
    let wanted = listener
        .allowed_routes
        .as_ref()
        .map(|a| a.kinds.as_slice())
        .unwrap_or_default();
    default_kinds(listener)
        .iter()
        .filter(|kind| {
            wanted.is_empty()
                || wanted
                    .iter()
                    .any(|k| k.kind == **kind && k.group.as_deref().unwrap_or(GROUP) == GROUP)
        })
        .map(|kind| json!({"group": GROUP, "kind": kind}))
        .collect()
}

/// The kinds of `allowedRoutes.kinds` the listener's protocol does not take ([`default_kinds`]), as `group/kind`
/// (the listener's `ResolvedRefs` is then False with reason InvalidRouteKinds, as the spec asks).
fn unsupported_route_kinds(listener: &Listener) -> Vec<String> {
    let served = default_kinds(listener);
    listener
        .allowed_routes
        .iter()
        .flat_map(|a| a.kinds.iter())
        .filter(|k| {
            let group = k.group.as_deref().unwrap_or(GROUP);
            group != GROUP || !served.contains(&k.kind.as_str())
        })
        .map(|k| format!("{}/{}", k.group.as_deref().unwrap_or(GROUP), k.kind))
        .collect()
}

/// Whether a terminating listener's certificate resolves: a Secret (by default in the namespace of the listener's
/// Gateway or ListenerSet, `owner`), in that namespace or one a ReferenceGrant opens to it, that exists and holds a
/// certificate with its key, as `translate::secret` serves it. The error is the condition's reason and message.
fn certificate_refs(
    snapshot: &Snapshot,
    owner: Owner<'_>,
    listener: &Listener,
) -> Result<(), (&'static str, String)> {
    let owner_namespace = owner.namespace;
    let Some(tls) = listener.tls.as_ref().filter(|_| listener.terminates()) else {
        // No TLS, or passed through: certificateRefs are not used (the spec: ignored in Passthrough mode).
        return Ok(());
    };
    for cert in tls.certificates() {
        let target = cert.namespace_or(owner_namespace);
        if !cert.is_core_secret() {
            return Err((
                "InvalidCertificateRef",
                format!("{} is not a core Secret", cert.name),
            ));
        }
        // The listener's Gateway or ListenerSet may use it: a Secret of its own namespace, or one a ReferenceGrant
        // opens to its kind and namespace. Gateway API v1.6 `apis/v1/listenerset_types.go`, "ReferenceGrant
        // Semantics": "ReferenceGrants applied to a Gateway are not inherited by child ListenerSets" and "A
        // ListenerSet can reference secrets/backends in its own namespace without a ReferenceGrant".
        if !listener_may_use(snapshot, owner, (target, &cert.name)) {
            return Err((
                "RefNotPermitted",
                format!("Secret {target}/{} is in another namespace and no ReferenceGrant there allows it", cert.name),
            ));
        }
        if let Err(why) = serves_certificate(snapshot, target, &cert.name) {
            return Err((
                "InvalidCertificateRef",
                format!("Secret {target}/{} cannot serve: {why}", cert.name),
            ));
        }
    }
    Ok(())
}

/// How many routes attach to `listener` of `owner` (named it, allowed by it, host names intersecting).
fn attached_routes(snapshot: &Snapshot, owner: Owner<'_>, listener: &Listener) -> usize {
    ROUTE_KINDS
        .iter()
        .flat_map(|kind| snapshot.of_kind(*kind))
        .filter(|object| {
            let Some(route) = route_view(object) else {
                return false;
            };
            let namespace = object.metadata.namespace.as_str();
            route.parent_refs.iter().any(|parent| {
                parent_verdict(
                    snapshot,
                    [listener],
                    parent,
                    (route.kind, namespace),
                    owner,
                    route.hostnames,
                ) == ParentVerdict::Attached
            })
        })
        .count()
}

/// One `status.parents` entry: whether the route attaches to the Gateway or ListenerSet `parent` names (its
/// `owner`, with `listeners`; a ListenerSet its Gateway does not take attaches nothing), and whether its backends
/// resolve.
fn route_parent(
    snapshot: &Snapshot,
    (object, route): (&ConfigObject, &RouteView<'_>),
    (owner, listeners, attached): (Owner<'_>, &[Listener], bool),
    parent: &ParentReference,
    controller: &str,
    now: &str,
) -> Value {
    let generation = generation(object);
    let namespace = object.metadata.namespace.as_str();
    let verdict = parent_verdict(
        snapshot,
        listeners,
        parent,
        (route.kind, namespace),
        owner,
        route.hostnames,
    );
    let (ok, reason, message) = match verdict {
        _ if !attached => (
            false,
            "NoMatchingParent",
            "the ListenerSet is not attached to its Gateway (its spec.allowedListeners)",
        ),
        ParentVerdict::Attached => (true, "Accepted", "attached"),
        ParentVerdict::NoMatchingParent => (
            false,
            "NoMatchingParent",
            "no listener matches the parentRef's sectionName or port",
        ),
        ParentVerdict::NotAllowedByListeners => (
            false,
            "NotAllowedByListeners",
            "no listener it names allows this route (kind or namespace)",
        ),
        ParentVerdict::NoMatchingListenerHostname => (
            false,
            "NoMatchingListenerHostname",
            "no listener's host name intersects the route's",
        ),
    };
    let refs = resolved_refs(snapshot, (object, route), namespace);
    let (refs_ok, refs_reason, refs_message) = match &refs {
        Ok(()) => (true, "ResolvedRefs", "every backend resolves".to_string()),
        Err((reason, message)) => (false, *reason, message.clone()),
    };
    json!({
        "parentRef": parent_ref_as_written(parent),
        "controllerName": controller,
        "conditions": [
            condition("Accepted", ok, reason, message, generation, now),
            condition("ResolvedRefs", refs_ok, refs_reason, &refs_message, generation, now),
        ],
    })
}

/// A route parent entry's `parentRef`: the reference as written, fields left out staying out (the API server
/// compares parentRefs field by field).
pub(super) fn parent_ref_as_written(parent: &ParentReference) -> Value {
    let mut parent_ref = json!(parent);
    if let Some(fields) = parent_ref.as_object_mut() {
        fields.retain(|_, value| !value.is_null());
    }
    parent_ref
}

/// An attached route the push guard leaves out is not Accepted: the gateways keep its last good version, or
/// nothing of it.
fn hold_back(entry: &mut Value, why: &str) {
    let Some(accepted) = entry["conditions"]
        .as_array_mut()
        .and_then(|conditions| conditions.iter_mut().find(|c| c["type"] == "Accepted"))
    else {
        return;
    };
    if accepted["status"] == "True" {
        accepted["status"] = json!("False");
        accepted["reason"] = json!("UnsupportedValue");
        accepted["message"] = json!(format!(
            "not served: Envoy would reject what it makes of the gateways' config ({why}); they keep its last \
             good version, if any"
        ));
    }
}

/// The backendRefs of a route's RequestMirror filters (of its rules and of their backendRefs; HTTPRoute and
/// GRPCRoute).
fn mirror_refs(object: &ConfigObject) -> Vec<&BackendRef> {
    fn of(filters: &[HttpRouteFilter]) -> impl Iterator<Item = &BackendRef> {
        filters
            .iter()
            .filter_map(|f| f.request_mirror.as_ref().map(|m| &m.backend_ref))
    }
    fn rule<'a>(filters: &'a [HttpRouteFilter], backends: &'a [BackendRef]) -> Vec<&'a BackendRef> {
        of(filters)
            .chain(backends.iter().flat_map(|b| of(&b.filters)))
            .collect()
    }
    match &object.spec {
        Spec::HttpRoute(route) => route
            .rules
            .iter()
            .flat_map(|r| rule(&r.filters, &r.backend_refs))
            .collect(),
        Spec::GrpcRoute(route) => route
            .rules
            .iter()
            .flat_map(|r| rule(&r.filters, &r.backend_refs))
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether every backendRef of a route in `namespace` resolves as translation resolves it; else the first failure's
/// reason (InvalidKind, RefNotPermitted, BackendNotFound, NoValidCACertificate for a BackendTLSPolicy whose CA
/// cannot be had) and message. The backendRefs of its RequestMirror filters
/// count too: Gateway API v1.6 `apis/v1/httproute_types.go`, `HTTPRequestMirrorFilter.BackendRef`: "If the
/// referent cannot be found, this BackendRef is invalid ... The controller must ensure the "ResolvedRefs" condition
/// on the Route status is set to `status: False`" (and RefNotPermitted for a cross-namespace one without a grant).
fn resolved_refs(
    snapshot: &Snapshot,
    (object, route): (&ConfigObject, &RouteView<'_>),
    namespace: &str,
) -> Result<(), (&'static str, String)> {
    let refs = route
        .backend_refs
        .iter()
        .copied()
        .chain(mirror_refs(object));
    for backend in refs {
        let target = backend.namespace_or(namespace);
        if !backend.is_service() {
            return Err((
                "InvalidKind",
                format!("{} {} is not a core Service", backend.kind(), backend.name),
            ));
        }
        if target != namespace
            && !granted(
                snapshot,
                (route.kind, namespace),
                ("", "Service", target, &backend.name),
            )
        {
            return Err((
                "RefNotPermitted",
                format!("Service {target}/{} is in another namespace and no ReferenceGrant there allows it", backend.name),
            ));
        }
        if backends::destination(snapshot, backend, (route.kind, namespace), "cluster.local")
            .is_none()
        {
            return Err((
                "BackendNotFound",
                format!(
                    "Service {target}/{} or its port {} does not exist",
                    backend.name,
                    backend.port.unwrap_or(0)
                ),
            ));
        }
        // The spec lists no route reason for this case and lets controllers use others; the policy's own reason
        // (`BackendTLSPolicyReasonNoValidCACertificate`) says what to fix.
        if let Some(policy) =
            unmet_policy(snapshot, target, &backend.name, backend.port.unwrap_or(0))
        {
            return Err((
                "NoValidCACertificate",
                format!(
                    "Service {target}/{} is targeted by BackendTLSPolicy {target}/{policy}, none of whose \
                     caCertificateRefs resolves: requests to it fail until one does",
                    backend.name
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::snapshot::snapshot_from_yaml as snapshot;

    const BASE: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ap, generation: 1}
spec: {controllerName: admitpilot.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default, generation: 2}
spec:
  gatewayClassName: ap
  listeners:
  - {name: http, port: 80, protocol: HTTP, hostname: '*.example'}
  - {name: tcp, port: 9000, protocol: TCP}
  - {name: udp, port: 9001, protocol: UDP}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{port: 8080}]}
";

    fn status(yaml: &str) -> Vec<StatusUpdate> {
        let snapshot = snapshot(&format!("{BASE}---\n{yaml}"));
        gateway_api_status(
            &snapshot,
            "admitpilot.io/gateway-controller",
            &Served {
                programmed: &|_| Programmed::Served,
                held_back: &|_, _| None,
                bundle_version: None,
                address_pools: &AddressPools::default(),
            },
            "2026-11-26T00:00:00Z",
        )
    }

    fn find<'a>(updates: &'a [StatusUpdate], kind: Kind, name: &str) -> &'a Value {
        &updates
            .iter()
            .find(|u| u.key.kind == kind && u.key.name == name)
            .unwrap()
            .status
    }

    /// The spec's example: A `foo.example.com`, B `foo.example.org`, C `*.example.com` on one port: A and C get
    /// OverlappingTLSConfig, B does not; nor does a listener on another port.
    #[test]
    fn overlapping_tls_host_names_are_marked_on_both_listeners() {
        let listener = |name: &str, port: u32, hostname: &str| Listener {
            name: name.into(),
            port,
            protocol: "HTTPS".into(),
            hostname: Some(hostname.into()),
            ..Default::default()
        };
        let listeners = [
            listener("a", 443, "foo.example.com"),
            listener("b", 443, "foo.example.org"),
            listener("c", 443, "*.example.com"),
            listener("d", 8443, "foo.example.com"),
        ];
        let mut entries: Vec<Value> = listeners
            .iter()
            .map(|l| json!({"name": l.name, "conditions": []}))
            .collect();
        mark_overlapping_tls(&listeners, &mut entries, (1, "2026-01-01T00:00:00Z"));
        let marked: Vec<&str> = entries
            .iter()
            .filter(|e| e["conditions"].as_array().is_some_and(|c| !c.is_empty()))
            .map(|e| e["name"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(marked, ["a", "c"]);
        assert_eq!(entries[0]["conditions"][0]["type"], "OverlappingTLSConfig");
        assert_eq!(entries[0]["conditions"][0]["status"], "True");
        assert_eq!(
            entries[0]["conditions"][0]["reason"],
            "OverlappingHostnames"
        );
        assert!(hostnames_overlap(None, Some("a.example")));
        assert!(hostnames_overlap(
            Some("*.example.com"),
            Some("*.a.example.com")
        ));
        assert!(!hostnames_overlap(
            Some("*.example.com"),
            Some("example.com")
        ));
    }

    fn conditions(value: &Value) -> Vec<(String, String, String)> {
        value["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["type"].as_str().unwrap().into(),
                    c["status"].as_str().unwrap().into(),
                    c["reason"].as_str().unwrap().into(),
                )
            })
            .collect()
    }

    fn route(name: &str, host: &str, backend: &str) -> String {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: default, generation: 3}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{host}]
  rules: [{{backendRefs: [{{name: {backend}, port: 8080}}]}}]
"
        )
    }

    #[test]
    fn a_route_the_push_guard_holds_back_is_not_accepted() {
        let snapshot = snapshot(&format!("{BASE}---\n{}", route("held", "a.example", "web")));
        let served = Served {
            programmed: &|_| Programmed::Served,
            held_back: &|key, _| {
                (key.name == "held").then(|| "listener x: regex too large".to_string())
            },
            bundle_version: None,
            address_pools: &AddressPools::default(),
        };
        let updates =
            gateway_api_status(&snapshot, "admitpilot.io/gateway-controller", &served, "t");
        let parent = &find(&updates, Kind::HttpRoute, "held")["parents"][0];
        let accepted = &parent["conditions"][0];
        assert_eq!(
            (&accepted["status"], &accepted["reason"]),
            (&json!("False"), &json!("UnsupportedValue"))
        );
        assert!(
            accepted["message"]
                .as_str()
                .unwrap()
                .contains("regex too large"),
            "{accepted}"
        );
    }

    #[test]
    fn addresses_come_from_the_services_selecting_the_gateway() {
        let none = status("");
        assert_eq!(
            find(&none, Kind::KubernetesGateway, "gw")["addresses"],
            json!([])
        );
        let updates = status(
            "apiVersion: v1
kind: Service
metadata: {name: gw-lb, namespace: default}
spec: {selector: {gateway.networking.k8s.io/gateway-name: gw}, externalIPs: [203.0.113.7], ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: gw-internal, namespace: default}
spec: {selector: {gateway.networking.k8s.io/gateway-name: gw}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: other, namespace: default}
spec: {selector: {gateway.networking.k8s.io/gateway-name: other}, externalIPs: [203.0.113.8], ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: gw-public, namespace: default}
spec: {type: LoadBalancer, selector: {gateway.networking.k8s.io/gateway-name: gw}, ports: [{port: 80}]}
status: {loadBalancer: {ingress: [{ip: 198.51.100.4}, {hostname: lb.example}, {ip: 203.0.113.7}]}}
",
        );
        assert_eq!(
            find(&updates, Kind::KubernetesGateway, "gw")["addresses"],
            json!([{"type": "Hostname", "value": "gw-internal.default.svc.cluster.local"},
                   {"type": "IPAddress", "value": "203.0.113.7"},
                   {"type": "IPAddress", "value": "198.51.100.4"},
                   {"type": "Hostname", "value": "lb.example"}])
        );
    }

    /// GatewayStaticAddresses: an address type admitpilot cannot give is not accepted (UnsupportedAddress); an IP
    /// outside the load balancer's pools is accepted but not Programmed (AddressNotUsable); one inside is fine.
    #[test]
    fn requested_addresses_must_be_of_a_type_and_pool_the_load_balancer_gives() {
        let pools = AddressPools::parse(&["10.244.250.0/24".into()]).unwrap();
        let conditions = |addresses: &str| {
            let snapshot = snapshot(&format!(
                "{BASE}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: static, namespace: default}}
spec:
  gatewayClassName: ap
  addresses: {addresses}
  listeners: [{{name: http, port: 8080, protocol: HTTP}}]
"
            ));
            let updates = gateway_api_status(
                &snapshot,
                "admitpilot.io/gateway-controller",
                &Served {
                    programmed: &|_| Programmed::Served,
                    held_back: &|_, _| None,
                    bundle_version: None,
                    address_pools: &pools,
                },
                "now",
            );
            let conditions =
                find(&updates, Kind::KubernetesGateway, "static")["conditions"].clone();
            let of = |kind: &str| {
                let c = conditions
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["type"] == kind)
                    .unwrap()
                    .clone();
                (c["status"].clone(), c["reason"].clone())
            };
            (of("Accepted"), of("Programmed"))
        };
        let (accepted, _) =
            conditions("[{type: test/fake-invalid-type, value: x}, {value: 10.244.250.10}]");
        assert_eq!(accepted, (json!("False"), json!("UnsupportedAddress")));
        let (accepted, programmed) = conditions("[{value: 192.0.2.200}, {value: 10.244.250.10}]");
        assert_eq!(accepted, (json!("True"), json!("Accepted")));
        assert_eq!(programmed, (json!("False"), json!("AddressNotUsable")));
        let (_, programmed) = conditions("[{type: IPAddress, value: 10.244.250.10}]");
        assert_eq!(programmed, (json!("True"), json!("Programmed")));
    }

    #[test]
    fn a_gateway_with_infrastructure_parameters_is_not_accepted() {
        let updates = status(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: params, namespace: default}
spec:
  gatewayClassName: ap
  infrastructure: {parametersRef: {group: invalid.io, kind: InvalidParameters, name: invalid}}
  listeners: [{name: http, port: 80, protocol: HTTP}]
",
        );
        let conditions = &find(&updates, Kind::KubernetesGateway, "params")["conditions"];
        assert_eq!(
            (&conditions[0]["status"], &conditions[0]["reason"]),
            (&json!("False"), &json!("InvalidParameters"))
        );
        assert!(conditions[0]["message"]
            .as_str()
            .unwrap()
            .contains("invalid.io/InvalidParameters invalid"));
        assert_eq!(conditions[1]["status"], "False");
    }

    /// A ConfigMap of parameters that resolves is accepted; a GatewayClass whose parameters do not resolve is not
    /// accepted (InvalidParameters), nor are its Gateways.
    #[test]
    fn parameters_configmaps_resolve_or_the_class_and_its_gateways_are_not_accepted() {
        let updates = status(
            "apiVersion: v1
kind: ConfigMap
metadata: {name: params, namespace: default}
data: {deployment: 'spec: {replicas: 2}'}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: with-params, namespace: default}
spec:
  gatewayClassName: ap
  infrastructure: {parametersRef: {group: '', kind: ConfigMap, name: params}}
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: broken}
spec:
  controllerName: admitpilot.io/gateway-controller
  parametersRef: {group: '', kind: ConfigMap, name: missing, namespace: default}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: of-broken, namespace: default}
spec:
  gatewayClassName: broken
  listeners: [{name: http, port: 80, protocol: HTTP}]
",
        );
        let accepted = |kind, name| {
            let condition = &find(&updates, kind, name)["conditions"][0];
            (
                condition["status"].as_str().unwrap().to_string(),
                condition["reason"].as_str().unwrap().to_string(),
                condition["message"].as_str().unwrap().to_string(),
            )
        };
        assert_eq!(accepted(Kind::KubernetesGateway, "with-params").0, "True");
        let (status, reason, message) = accepted(Kind::GatewayClass, "broken");
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "InvalidParameters")
        );
        assert!(
            message.contains("ConfigMap default/missing does not exist"),
            "{message}"
        );
        let (status, reason, message) = accepted(Kind::KubernetesGateway, "of-broken");
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "InvalidParameters")
        );
        assert!(
            message.contains("its GatewayClass broken is not accepted"),
            "{message}"
        );
    }

    /// Client certificate validation: a listener whose CA resolves is accepted; one whose references all fail is
    /// not (NoValidCACertificate), with ResolvedRefs naming why; AllowInsecureFallback sets the Gateway's
    /// InsecureFrontendValidationMode.
    #[test]
    fn frontend_validation_decides_listener_conditions() {
        let (cert, key) = self_signed();
        let indent = |pem: &str| pem.trim_end().replace('\n', "\n    ");
        let updates = status(&format!(
            "apiVersion: v1
kind: ConfigMap
metadata: {{name: client-ca, namespace: default}}
data:
  ca.crt: |
    {}
---
{}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: mtls, namespace: default}}
spec:
  gatewayClassName: ap
  tls:
    frontend:
      default: {{validation: {{caCertificateRefs: [{{group: '', kind: ConfigMap, name: client-ca}}]}}}}
      perPort:
      - {{port: 8443, tls: {{validation: {{caCertificateRefs: [{{group: '', kind: Service, name: web}}]}}}}}}
      - {{port: 9443, tls: {{validation: {{mode: AllowInsecureFallback,
          caCertificateRefs: [{{group: '', kind: ConfigMap, name: elsewhere, namespace: other}}]}}}}}}
  listeners:
  - {{name: http, port: 80, protocol: HTTP}}
  - {{name: validating, port: 443, protocol: HTTPS, tls: {{certificateRefs: [{{name: cert}}]}}}}
  - {{name: wrong-kind, port: 8443, protocol: HTTPS, tls: {{certificateRefs: [{{name: cert}}]}}}}
  - {{name: not-granted, port: 9443, protocol: HTTPS, tls: {{certificateRefs: [{{name: cert}}]}}}}
",
            indent(&cert),
            tls_secret("default", "cert", &cert, &key),
        ));
        let gateway = find(&updates, Kind::KubernetesGateway, "mtls");
        let listener = |name: &str| {
            let entry = gateway["listeners"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["name"] == name)
                .unwrap();
            let reason = |kind: &str| {
                let c = entry["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["type"] == kind)
                    .unwrap();
                format!(
                    "{} {}",
                    c["status"].as_str().unwrap(),
                    c["reason"].as_str().unwrap()
                )
            };
            (reason("Accepted"), reason("ResolvedRefs"))
        };
        assert_eq!(
            listener("wrong-kind"),
            (
                "False NoValidCACertificate".into(),
                "False InvalidCACertificateKind".into()
            )
        );
        assert_eq!(
            listener("not-granted"),
            (
                "False NoValidCACertificate".into(),
                "False RefNotPermitted".into()
            )
        );
        assert_eq!(
            listener("http").0,
            "True Accepted",
            "HTTP listeners validate nothing"
        );
        let insecure = gateway["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "InsecureFrontendValidationMode")
            .unwrap();
        assert_eq!(
            (&insecure["status"], &insecure["reason"]),
            (&json!("True"), &json!("ConfigurationChanged"))
        );
    }

    /// A provisioned LoadBalancer Service without a load-balancer address keeps its served Gateway from
    /// Programmed (AddressNotAssigned); with one, the Gateway is Programmed. A Service of the user's is not waited for.
    #[test]
    fn a_provisioned_gateway_is_programmed_once_its_load_balancer_has_an_address() {
        let service = |status: &str, labels: &str| {
            format!(
                "apiVersion: v1
kind: Service
metadata: {{name: gw-ap, namespace: default, labels: {{{labels}}}}}
spec: {{type: LoadBalancer, selector: {{gateway.networking.k8s.io/gateway-name: gw}}, ports: [{{port: 80}}]}}
status: {{loadBalancer: {status}}}
"
            )
        };
        let provisioned =
            "app.kubernetes.io/managed-by: admitpilot-provisioner, gateway.networking.k8s.io/gateway-name: gw";
        let programmed = |yaml: &str| {
            let updates = status(yaml);
            let conditions = &find(&updates, Kind::KubernetesGateway, "gw")["conditions"];
            let programmed = conditions
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == "Programmed")
                .unwrap()
                .clone();
            (programmed["status"].clone(), programmed["reason"].clone())
        };
        assert_eq!(
            programmed(&service("{}", provisioned)),
            (json!("False"), json!("AddressNotAssigned"))
        );
        let pending = status(&service("{}", provisioned));
        assert_eq!(
            find(&pending, Kind::KubernetesGateway, "gw")["addresses"],
            json!([]),
            "no cluster DNS name while the load balancer has no address"
        );
        assert_eq!(
            programmed(&service("{ingress: [{ip: 198.51.100.4}]}", provisioned)),
            (json!("True"), json!("Programmed"))
        );
        assert_eq!(
            programmed(&service("{}", "team: a")),
            (json!("True"), json!("Programmed"))
        );
    }

    #[test]
    fn a_served_gateway_is_accepted_and_programmed_with_its_attached_routes() {
        let tcp_route = "apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: db, namespace: default}
spec: {parentRefs: [{name: gw, sectionName: tcp}], rules: [{backendRefs: [{name: web, port: 8080}]}]}
";
        let updates = status(&format!(
            "{}---\n{tcp_route}",
            route("web", "shop.example", "web")
        ));
        let class = find(&updates, Kind::GatewayClass, "ap");
        assert_eq!(
            conditions(class),
            [("Accepted".into(), "True".into(), "Accepted".into())]
        );
        let gateway = find(&updates, Kind::KubernetesGateway, "gw");
        // Accepted, with its UDP listener left out (the spec's ListenersNotValid for an accepted Gateway).
        assert_eq!(
            conditions(gateway),
            [
                ("Accepted".into(), "True".into(), "ListenersNotValid".into()),
                ("Programmed".into(), "True".into(), "Programmed".into()),
                ("ResolvedRefs".into(), "True".into(), "ResolvedRefs".into())
            ]
        );
        assert!(gateway["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .ends_with("listeners not accepted: udp"));
        assert_eq!(gateway["conditions"][0]["observedGeneration"], 2);
        let http = &gateway["listeners"][0];
        assert_eq!(http["attachedRoutes"], 1);
        assert_eq!(
            http["supportedKinds"],
            json!([{"group": GROUP, "kind": "HTTPRoute"}, {"group": GROUP, "kind": "GRPCRoute"}])
        );
        let tcp = &gateway["listeners"][1];
        assert_eq!(tcp["attachedRoutes"], 1);
        assert_eq!(
            tcp["supportedKinds"],
            json!([{"group": GROUP, "kind": "TCPRoute"}])
        );
        assert_eq!(
            conditions(tcp)[0],
            ("Accepted".into(), "True".into(), "Accepted".into())
        );
        let tcp_parent = &find(&updates, Kind::TcpRoute, "db")["parents"][0];
        assert_eq!(
            conditions(tcp_parent)[0],
            ("Accepted".into(), "True".into(), "Accepted".into())
        );
        let udp = &gateway["listeners"][2];
        assert_eq!(
            conditions(udp)[0],
            (
                "Accepted".into(),
                "False".into(),
                "UnsupportedProtocol".into()
            )
        );
        assert_eq!(
            conditions(udp)[3],
            ("Programmed".into(), "False".into(), "Invalid".into())
        );
        let route = find(&updates, Kind::HttpRoute, "web");
        let parent = &route["parents"][0];
        assert_eq!(parent["controllerName"], "admitpilot.io/gateway-controller");
        assert_eq!(
            conditions(parent),
            [
                ("Accepted".into(), "True".into(), "Accepted".into()),
                ("ResolvedRefs".into(), "True".into(), "ResolvedRefs".into())
            ]
        );
        assert_eq!(parent["conditions"][0]["observedGeneration"], 3);
    }

    /// gateway_types.go, GatewayConditionResolvedRefs and GatewayBackendTLS.ClientCertificateRef.
    #[test]
    fn the_gateway_resolves_its_backend_client_certificate_and_sums_up_its_listeners() {
        let gateway = |tls: &str, listener: &str| {
            format!(
                "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: ap}}
spec: {{controllerName: admitpilot.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: ap
  {tls}
  listeners: [{listener}]
"
            )
        };
        let http = "{name: http, port: 80, protocol: HTTP}";
        let resolved_refs = |yaml: &str| {
            let updates = status(yaml);
            let gw = find(&updates, Kind::KubernetesGateway, "gw");
            let row = conditions(gw)
                .into_iter()
                .find(|c| c.0 == "ResolvedRefs")
                .expect("the Gateway has ResolvedRefs");
            (row.1, row.2)
        };
        assert_eq!(
            resolved_refs(&gateway("", http)),
            ("True".into(), "ResolvedRefs".into())
        );
        assert_eq!(
            resolved_refs(&gateway(
                "tls: {backend: {clientCertificateRef: {name: client, namespace: certs}}}",
                http
            )),
            ("False".into(), "RefNotPermitted".into())
        );
        assert_eq!(
            resolved_refs(&gateway(
                "tls: {backend: {clientCertificateRef: {name: client}}}",
                http
            )),
            ("False".into(), "InvalidClientCertificateRef".into())
        );
        assert_eq!(
            resolved_refs(&gateway(
                "",
                "{name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: gone}]}}"
            )),
            ("False".into(), "ListenersNotResolved".into())
        );
    }

    /// httproute_types.go, HTTPBackendRef: a backend whose BackendTLSPolicy cannot be met is an invalid
    /// BackendRef, so the route is not ResolvedRefs; a policy whose CA resolves (here: the system's) leaves it so.
    #[test]
    fn a_backend_whose_tls_policy_cannot_be_met_is_not_resolved() {
        let policy = |ca: &str| {
            format!(
                "{}---\napiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: tls, namespace: default}}
spec:
  targetRefs: [{{group: '', kind: Service, name: web}}]
  validation: {{hostname: web.example, {ca}}}
",
                route("r", "shop.example", "web")
            )
        };
        let unmet = status(&policy(
            "caCertificateRefs: [{group: '', kind: ConfigMap, name: gone}]",
        ));
        let parent = &find(&unmet, Kind::HttpRoute, "r")["parents"][0];
        assert_eq!(
            conditions(parent)[1],
            (
                "ResolvedRefs".into(),
                "False".into(),
                "NoValidCACertificate".into()
            )
        );
        let message = parent["conditions"][1]["message"].as_str().unwrap();
        assert!(
            message.contains("BackendTLSPolicy default/tls"),
            "{message}"
        );
        let met = status(&policy("wellKnownCACertificates: System"));
        let parent = &find(&met, Kind::HttpRoute, "r")["parents"][0];
        assert_eq!(conditions(parent)[1].2, "ResolvedRefs");
    }

    #[test]
    fn routes_say_why_they_are_not_accepted_or_resolved() {
        let updates = status(&format!(
            "{}---\n{}",
            route("missing-backend", "shop.example", "nowhere"),
            route("other-host", "shop.other", "web")
        ));
        let missing = &find(&updates, Kind::HttpRoute, "missing-backend")["parents"][0];
        assert_eq!(
            conditions(missing)[1],
            (
                "ResolvedRefs".into(),
                "False".into(),
                "BackendNotFound".into()
            )
        );
        let other = &find(&updates, Kind::HttpRoute, "other-host")["parents"][0];
        assert_eq!(
            conditions(other)[0],
            (
                "Accepted".into(),
                "False".into(),
                "NoMatchingListenerHostname".into()
            )
        );
        let gateway = find(&updates, Kind::KubernetesGateway, "gw");
        assert_eq!(gateway["listeners"][0]["attachedRoutes"], 1);
    }

    #[test]
    fn supported_version_follows_the_installed_bundle() {
        let status = |bundle| supported_version(bundle, 1, "t");
        for bundle in ["v1.0.0", "v1.6.3", "v1.2.0-rc1"] {
            assert_eq!(status(bundle)["status"], "True", "{bundle}");
        }
        for bundle in ["v1.7.0", "v2.0.0", "v0.8.1", "main"] {
            let condition = status(bundle);
            assert_eq!(
                (&condition["status"], &condition["reason"]),
                (&json!("False"), &json!("UnsupportedVersion")),
                "{bundle}"
            );
        }
    }

    #[test]
    fn programmed_follows_what_the_gateways_did() {
        let snapshot = snapshot(BASE);
        let rejected = gateway_api_status(
            &snapshot,
            "admitpilot.io/gateway-controller",
            &Served {
                programmed: &|_| Programmed::Rejected("lds NACK: bad listener".into()),
                held_back: &|_, _| None,
                bundle_version: None,
                address_pools: &AddressPools::default(),
            },
            "2026-11-26T00:00:00Z",
        );
        let gateway = find(&rejected, Kind::KubernetesGateway, "gw");
        assert_eq!(gateway["conditions"][1]["status"], "False");
        assert_eq!(
            gateway["conditions"][1]["message"],
            "lds NACK: bad listener"
        );
        let other = gateway_api_status(
            &snapshot,
            "someone.else/controller",
            &Served {
                programmed: &|_| Programmed::Served,
                held_back: &|_, _| None,
                bundle_version: None,
                address_pools: &AddressPools::default(),
            },
            "t",
        );
        assert!(
            other.is_empty(),
            "another controller's objects get no status from admitpilot"
        );
    }

    #[test]
    fn a_secret_without_a_pem_certificate_is_an_invalid_certificate_ref() {
        let updates = status(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: tls, namespace: default}
spec:
  gatewayClassName: ap
  listeners:
  - {name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: malformed}]}}
---
apiVersion: v1
kind: Secret
metadata: {name: malformed, namespace: default}
type: kubernetes.io/tls
data: {tls.crt: SGVsbG8gd29ybGQK, tls.key: SGVsbG8gd29ybGQK}
",
        );
        let listener = &find(&updates, Kind::KubernetesGateway, "tls")["listeners"][0];
        assert_eq!(
            conditions(listener)[1],
            (
                "ResolvedRefs".into(),
                "False".into(),
                "InvalidCertificateRef".into()
            )
        );
        assert!(listener["conditions"][1]["message"]
            .as_str()
            .unwrap()
            .contains("not a PEM certificate chain"));
    }

    #[test]
    fn route_kinds_a_listener_does_not_take_are_invalid_route_kinds() {
        let updates = status(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: kinds, namespace: default}
spec:
  gatewayClassName: ap
  listeners:
  - {name: none, port: 80, protocol: HTTP, allowedRoutes: {kinds: [{kind: InvalidRoute}]}}
  - {name: some, port: 81, protocol: HTTP, allowedRoutes: {kinds: [{kind: InvalidRoute}, {kind: HTTPRoute}]}}
  - {name: tcp, port: 82, protocol: TCP, allowedRoutes: {kinds: [{kind: HTTPRoute}]}}
  - {name: ok, port: 83, protocol: HTTP, allowedRoutes: {kinds: [{kind: HTTPRoute}]}}
",
        );
        let listeners = &find(&updates, Kind::KubernetesGateway, "kinds")["listeners"];
        let refs = |i: usize| conditions(&listeners[i])[1].clone();
        let invalid = (
            "ResolvedRefs".to_string(),
            "False".to_string(),
            "InvalidRouteKinds".to_string(),
        );
        assert_eq!(refs(0), invalid);
        assert_eq!(listeners[0]["supportedKinds"], json!([]));
        assert_eq!(refs(1), invalid);
        assert_eq!(
            listeners[1]["supportedKinds"],
            json!([{"group": GROUP, "kind": "HTTPRoute"}])
        );
        assert_eq!(refs(2), invalid);
        assert!(listeners[2]["conditions"][1]["message"]
            .as_str()
            .unwrap()
            .contains("gateway.networking.k8s.io/HTTPRoute"));
        assert_eq!(refs(3).2, "ResolvedRefs");
    }

    #[test]
    fn listener_sets_report_attachment_and_their_listeners() {
        let snapshot = snapshot(
            "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ap}
spec: {controllerName: admitpilot.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: ap
  allowedListeners: {namespaces: {from: Same}}
  listeners: [{name: http, port: 80, protocol: HTTP, hostname: a.example}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: mine, namespace: default, generation: 4}
spec:
  parentRef: {name: gw}
  listeners:
  - {name: b, port: 80, protocol: HTTP, hostname: b.example}
  - {name: dup, port: 80, protocol: HTTP, hostname: a.example}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: theirs, namespace: other}
spec:
  parentRef: {name: gw, namespace: default}
  listeners: [{name: c, port: 80, protocol: HTTP, hostname: c.example}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{kind: ListenerSet, name: mine, sectionName: b}]
  rules: [{backendRefs: [{name: web, port: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{port: 8080}]}
",
        );
        let updates = gateway_api_status(
            &snapshot,
            "admitpilot.io/gateway-controller",
            &Served {
                programmed: &|_| Programmed::Served,
                held_back: &|_, _| None,
                bundle_version: None,
                address_pools: &AddressPools::default(),
            },
            "2026-11-27T00:00:00Z",
        );
        let gateway = find(&updates, Kind::KubernetesGateway, "gw");
        assert_eq!(gateway["attachedListenerSets"], 1);
        let mine = find(&updates, Kind::ListenerSet, "mine");
        assert_eq!(
            conditions(mine),
            [
                ("Accepted".into(), "True".into(), "Accepted".into()),
                ("Programmed".into(), "True".into(), "Programmed".into())
            ]
        );
        assert_eq!(mine["conditions"][0]["observedGeneration"], 4);
        assert_eq!(mine["listeners"][0]["attachedRoutes"], 1);
        let lost = conditions(&mine["listeners"][1]);
        assert_eq!(
            lost[2],
            (
                "Conflicted".into(),
                "True".into(),
                "HostnameConflict".into()
            )
        );
        // Not accepted, nor programmed, for that reason.
        for at in [0, 3] {
            assert_eq!(
                (lost[at].1.as_str(), lost[at].2.as_str()),
                ("False", "HostnameConflict")
            );
        }
        let theirs = find(&updates, Kind::ListenerSet, "theirs");
        assert_eq!(
            conditions(theirs)[0],
            ("Accepted".into(), "False".into(), "NotAllowed".into())
        );
        let parent = &find(&updates, Kind::HttpRoute, "r")["parents"][0];
        assert_eq!(
            conditions(parent)[0],
            ("Accepted".into(), "True".into(), "Accepted".into())
        );
    }

    /// A Secret `name` in `namespace` holding `cert` and `key` (PEM) as `stringData`.
    fn tls_secret(namespace: &str, name: &str, cert: &str, key: &str) -> String {
        let indent = |pem: &str| pem.trim_end().replace('\n', "\n    ");
        format!(
            "apiVersion: v1
kind: Secret
metadata: {{name: {name}, namespace: {namespace}}}
type: kubernetes.io/tls
stringData:
  tls.crt: |
    {}
  tls.key: |
    {}
",
            indent(cert),
            indent(key)
        )
    }

    fn self_signed() -> (String, String) {
        let pair = rcgen::generate_simple_self_signed(vec!["shop.example".to_string()]).unwrap();
        (pair.cert.pem(), pair.signing_key.serialize_pem())
    }

    #[test]
    fn a_gateway_with_an_accepted_listener_stays_accepted_when_another_has_a_bad_certificate() {
        let updates = status(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: mixed, namespace: default, generation: 5}
spec:
  gatewayClassName: ap
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: missing}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: only-https, namespace: default, generation: 6}
spec:
  gatewayClassName: ap
  listeners:
  - {name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: missing}]}}
",
        );
        let mixed = find(&updates, Kind::KubernetesGateway, "mixed");
        assert_eq!(
            conditions(mixed),
            [
                ("Accepted".into(), "True".into(), "Accepted".into()),
                ("Programmed".into(), "True".into(), "Programmed".into()),
                (
                    "ResolvedRefs".into(),
                    "False".into(),
                    "ListenersNotResolved".into()
                )
            ]
        );
        let https = conditions(&mixed["listeners"][1]);
        assert_eq!(
            https[1],
            (
                "ResolvedRefs".into(),
                "False".into(),
                "InvalidCertificateRef".into()
            )
        );
        assert_eq!(
            https[3],
            ("Programmed".into(), "False".into(), "Invalid".into())
        );
        assert_eq!(
            conditions(&mixed["listeners"][0])[3],
            ("Programmed".into(), "True".into(), "Programmed".into())
        );
        // Its only listener is accepted but cannot be served: accepted, not programmed.
        let only = find(&updates, Kind::KubernetesGateway, "only-https");
        assert_eq!(
            conditions(only),
            [
                ("Accepted".into(), "True".into(), "Accepted".into()),
                ("Programmed".into(), "False".into(), "Invalid".into()),
                (
                    "ResolvedRefs".into(),
                    "False".into(),
                    "ListenersNotResolved".into()
                )
            ]
        );
    }

    #[test]
    fn a_foreign_key_or_a_malformed_certificate_is_an_invalid_certificate_ref() {
        let (cert, key) = self_signed();
        let (_, other_key) = self_signed();
        let garbage = "-----BEGIN CERTIFICATE-----\nSGVsbG8gd29ybGQK\n-----END CERTIFICATE-----\n";
        let updates = status(&format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: tls, namespace: default}}
spec:
  gatewayClassName: ap
  listeners:
  - {{name: good, port: 443, protocol: HTTPS, hostname: a.example, tls: {{certificateRefs: [{{name: good}}]}}}}
  - {{name: mismatch, port: 443, protocol: HTTPS, hostname: b.example, tls: {{certificateRefs: [{{name: mismatch}}]}}}}
  - {{name: malformed, port: 443, protocol: HTTPS, hostname: c.example, tls: {{certificateRefs: [{{name: malformed}}]}}}}
---
{}---
{}---
{}",
            tls_secret("default", "good", &cert, &key),
            tls_secret("default", "mismatch", &cert, &other_key),
            tls_secret("default", "malformed", garbage, &key),
        ));
        let listeners = &find(&updates, Kind::KubernetesGateway, "tls")["listeners"];
        assert_eq!(conditions(&listeners[0])[1].1, "True", "{}", listeners[0]);
        for (at, why) in [
            (1, "not the private key of its tls.crt"),
            (2, "not a well-formed X.509 certificate"),
        ] {
            assert_eq!(
                conditions(&listeners[at])[1],
                (
                    "ResolvedRefs".into(),
                    "False".into(),
                    "InvalidCertificateRef".into()
                )
            );
            let message = listeners[at]["conditions"][1]["message"].as_str().unwrap();
            assert!(message.contains(why), "{message}");
        }
    }

    #[test]
    fn a_mirror_to_a_missing_service_is_backend_not_found() {
        let updates = status(
            "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mirrored, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [a.example]
  rules:
  - backendRefs: [{name: web, port: 8080}]
    filters:
    - {type: RequestMirror, requestMirror: {backendRef: {name: gone, port: 8080}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mirrored-ok, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [b.example]
  rules:
  - backendRefs: [{name: web, port: 8080}]
    filters:
    - {type: RequestMirror, requestMirror: {backendRef: {name: web, port: 8080}}}
",
        );
        let parent = &find(&updates, Kind::HttpRoute, "mirrored")["parents"][0];
        assert_eq!(
            conditions(parent),
            [
                ("Accepted".into(), "True".into(), "Accepted".into()),
                (
                    "ResolvedRefs".into(),
                    "False".into(),
                    "BackendNotFound".into()
                )
            ]
        );
        assert!(parent["conditions"][1]["message"]
            .as_str()
            .unwrap()
            .contains("default/gone"));
        let ok = &find(&updates, Kind::HttpRoute, "mirrored-ok")["parents"][0];
        assert_eq!(conditions(ok)[1].1, "True");
    }

    #[test]
    fn a_listener_sets_certificate_of_its_own_namespace_needs_no_grant() {
        let (cert, key) = self_signed();
        let updates = status(&format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: shared, namespace: default}}
spec:
  gatewayClassName: ap
  allowedListeners: {{namespaces: {{from: All}}}}
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: team, namespace: team}}
spec:
  parentRef: {{name: shared, namespace: default}}
  listeners:
  - {{name: own, port: 443, protocol: HTTPS, hostname: a.example, tls: {{certificateRefs: [{{name: team-cert}}]}}}}
  - {{name: gateways, port: 443, protocol: HTTPS, hostname: b.example, tls: {{certificateRefs: [{{name: gw-cert, namespace: default}}]}}}}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {{name: to-gateways, namespace: default}}
spec:
  from: [{{group: gateway.networking.k8s.io, kind: Gateway, namespace: team}}]
  to: [{{group: '', kind: Secret}}]
---
{}---
{}",
            tls_secret("team", "team-cert", &cert, &key),
            tls_secret("default", "gw-cert", &cert, &key),
        ));
        let listeners = &find(&updates, Kind::ListenerSet, "team")["listeners"];
        assert_eq!(
            conditions(&listeners[0])[1],
            ("ResolvedRefs".into(), "True".into(), "ResolvedRefs".into()),
            "{}",
            listeners[0]
        );
        // A grant to Gateways is not one to ListenerSets (grants are not inherited).
        assert_eq!(
            conditions(&listeners[1])[1],
            (
                "ResolvedRefs".into(),
                "False".into(),
                "RefNotPermitted".into()
            )
        );
    }
}
