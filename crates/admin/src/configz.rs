//! `/debug/configz`: takes the snapshot channel and, with the xDS server, a view of the status, yields an axum
//! [`Router`] that serves the current valid snapshot (version and every object) as JSON; an object admitpilot does
//! not enforce on gateways carries `notEnforced`, saying why, and each object admitpilot writes status for carries
//! the `status` its gateways connected to this process give it (the status writer writes the same, combined over
//! replicas, onto the API server; in folder mode this is the only place it shows). Secret data is never shown:
//! only each Secret's type and data keys; fields that hold credentials elsewhere are redacted ([`super::redact`]).

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::watch;

use std::collections::HashMap;

use admitpilot_model::{ConfigObject, ObjectKey, Snapshot, Spec};
use admitpilot_status::{StatusUpdate, StatusView};
use admitpilot_validate::enforcement::unenforced;

#[derive(Clone)]
struct Configz {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    status: Option<StatusView>,
}

/// Builds the router serving `GET /debug/configz` from the latest snapshot and, when given, its `status`.
pub fn router(snapshots: watch::Receiver<Arc<Snapshot>>, status: Option<StatusView>) -> Router {
    Router::new()
        .route("/debug/configz", get(configz))
        .with_state(Configz { snapshots, status })
}

async fn configz(State(state): State<Configz>) -> Json<Value> {
    let snapshot = state.snapshots.borrow().clone();
    let status = state.status.map(|view| view(&snapshot)).unwrap_or_default();
    Json(render(&snapshot, &status))
}

/// Renders a snapshot, and the status of its objects, as the `/debug/configz` JSON document.
pub fn render(snapshot: &Snapshot, status: &[StatusUpdate]) -> Value {
    let status: HashMap<&ObjectKey, &Value> = status
        .iter()
        .map(|update| (&update.key, &update.status))
        .collect();
    let objects: Vec<Value> = snapshot
        .objects
        .iter()
        .map(|(key, object)| {
            let mut entry = json!({
                "kind": key.kind,
                "namespace": key.namespace,
                "name": key.name,
                "object": render_object(object),
            });
            if let Some(part) = unenforced(object) {
                entry["notEnforced"] = json!(part.to_string());
            }
            if let Some(status) = status.get(key) {
                entry["status"] = (*status).clone();
            }
            entry
        })
        .collect();
    json!({
        "version": snapshot.version,
        "count": objects.len(),
        "objects": objects,
    })
}

fn render_object(object: &ConfigObject) -> Value {
    match &object.spec {
        Spec::Secret(secret) => {
            let keys: Vec<&String> = secret
                .data
                .iter()
                .flat_map(|d| d.keys())
                .chain(secret.string_data.iter().flat_map(|d| d.keys()))
                .collect();
            json!({
                "apiVersion": object.api_version,
                "metadata": object.metadata,
                "type": secret.type_,
                "dataKeys": keys,
                "data": "<redacted>",
            })
        }
        _ => {
            let mut value = serde_json::to_value(object)
                .unwrap_or_else(|error| json!({"error": error.to_string()}));
            super::redact::credentials(&mut value);
            value
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::{Kind, ObjectKey, ObjectMeta};
    use axum::body::Body;
    use axum::http::Request;
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::ByteString;
    use tower::ServiceExt;

    fn snapshot() -> Snapshot {
        let secret = ConfigObject {
            api_version: "v1".into(),
            metadata: ObjectMeta {
                name: "tls".into(),
                namespace: "edge".into(),
                ..ObjectMeta::default()
            },
            spec: Spec::Secret(Box::new(Secret {
                type_: Some("kubernetes.io/tls".into()),
                data: Some(
                    [("tls.key".to_string(), ByteString(b"PRIVATE".to_vec()))]
                        .into_iter()
                        .collect(),
                ),
                ..Secret::default()
            })),
        };
        let vs = ConfigObject {
            api_version: "networking.istio.io/v1".into(),
            metadata: ObjectMeta {
                name: "vs".into(),
                namespace: "edge".into(),
                ..ObjectMeta::default()
            },
            spec: Spec::VirtualService(Default::default()),
        };
        Snapshot {
            version: 7,
            objects: [
                (
                    ObjectKey::new(Kind::Secret, "edge", "tls"),
                    Arc::new(secret),
                ),
                (
                    ObjectKey::new(Kind::VirtualService, "edge", "vs"),
                    Arc::new(vs),
                ),
            ]
            .into_iter()
            .collect(),
        }
    }

    #[tokio::test]
    async fn serves_the_snapshot_without_secret_data() {
        let (_tx, rx) = watch::channel(Arc::new(snapshot()));
        let response = router(rx, None)
            .oneshot(Request::get("/debug/configz").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(!text.contains("UFJJVkFURQ"), "secret bytes leaked: {text}");
        assert!(!text.contains("PRIVATE"));
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["version"], 7);
        assert_eq!(value["count"], 2);
        assert_eq!(value["objects"][0]["kind"], "VirtualService");
        assert_eq!(value["objects"][1]["object"]["dataKeys"][0], "tls.key");
    }
}
