//! Kubernetes side of certs-gen: reads and writes the `kubernetes.io/tls` Secret holding the bundle, and
//! sets `caBundle` on every webhook of a ValidatingWebhookConfiguration. Uses the in-cluster service account
//! or the kubeconfig, like kubectl.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Context};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};

use crate::bundle::Bundle;

/// The Secret type Kubernetes uses for TLS pairs.
const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

/// How many times a write is retried after a conflict (someone else updated the object in between).
const CONFLICT_RETRIES: usize = 5;

/// Connects with the in-cluster service account or the kubeconfig.
pub async fn client() -> anyhow::Result<Client> {
    Client::try_default()
        .await
        .context("cannot configure a Kubernetes client (no in-cluster service account and no usable kubeconfig)")
}

/// Explains an API error; 403 gets the RBAC rule that is missing.
fn explain(error: kube::Error, verb: &str, what: &str) -> anyhow::Error {
    match &error {
        kube::Error::Api(status) if status.code == 403 => anyhow!(
            "forbidden to {verb} {what}: {}. The account running certs-gen needs RBAC permission to {verb} it \
             (check the Role/ClusterRole bound to its ServiceAccount)",
            status.message
        ),
        kube::Error::Api(status) => anyhow!("cannot {verb} {what}: {} ({})", status.message, status.code),
        _ => anyhow!(error).context(format!("cannot {verb} {what}")),
    }
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// Reads the bundle stored in Secret `name`; `None` when the Secret does not exist or lacks a key.
pub async fn read_secret(
    client: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<Bundle>> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let what = format!("Secret {namespace}/{name}");
    let Some(secret) = api
        .get_opt(name)
        .await
        .map_err(|e| explain(e, "get", &what))?
    else {
        return Ok(None);
    };
    let data = secret.data.unwrap_or_default();
    let text = |key: &str| {
        data.get(key)
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
    };
    Ok(match (text("ca.crt"), text("tls.crt"), text("tls.key")) {
        (Some(ca_crt), Some(tls_crt), Some(tls_key)) => Some(Bundle {
            ca_crt,
            tls_crt,
            tls_key,
        }),
        _ => None,
    })
}

/// Creates or updates Secret `name` (type `kubernetes.io/tls`) with `tls.crt`, `tls.key` and `ca.crt`.
pub async fn write_secret(
    client: &Client,
    namespace: &str,
    name: &str,
    bundle: &Bundle,
) -> anyhow::Result<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let what = format!("Secret {namespace}/{name}");
    let data: BTreeMap<String, ByteString> = [
        ("tls.crt", &bundle.tls_crt),
        ("tls.key", &bundle.tls_key),
        ("ca.crt", &bundle.ca_crt),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
    .collect();
    for _ in 0..CONFLICT_RETRIES {
        let existing = api
            .get_opt(name)
            .await
            .map_err(|e| explain(e, "get", &what))?;
        let result = match existing {
            None => {
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(name.to_string()),
                        namespace: Some(namespace.to_string()),
                        labels: Some(BTreeMap::from([(
                            "app.kubernetes.io/managed-by".to_string(),
                            "admitpilot-certs-gen".to_string(),
                        )])),
                        ..ObjectMeta::default()
                    },
                    type_: Some(TLS_SECRET_TYPE.to_string()),
                    data: Some(data.clone()),
                    ..Secret::default()
                };
                api.create(&PostParams::default(), &secret)
                    .await
                    .map_err(|e| (e, "create"))
            }
            Some(mut secret) => {
                let type_ = secret.type_.as_deref().unwrap_or("Opaque");
                if type_ != TLS_SECRET_TYPE {
                    bail!("{what} exists with type {type_}, not {TLS_SECRET_TYPE}; delete it or choose another --secret");
                }
                secret.data = Some(data.clone());
                api.replace(name, &PostParams::default(), &secret)
                    .await
                    .map_err(|e| (e, "update"))
            }
        };
        match result {
            Ok(_) => return Ok(()),
            Err((error, _)) if is_conflict(&error) => continue,
            Err((error, verb)) => return Err(explain(error, verb, &what)),
        }
    }
    bail!("{what} kept changing underneath; gave up after {CONFLICT_RETRIES} conflicts")
}

/// Sets `caBundle` of every webhook in ValidatingWebhookConfiguration `name`; returns how many webhooks were
/// changed (0 when all already carried this CA). Uses a merge patch (RBAC verb `patch`) carrying the
/// resourceVersion that was read, so a concurrent change makes it fail with a conflict and it is retried.
pub async fn patch_ca_bundle(client: &Client, name: &str, ca_pem: &str) -> anyhow::Result<usize> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let what = format!("ValidatingWebhookConfiguration {name}");
    let bundle = ByteString(ca_pem.as_bytes().to_vec());
    for _ in 0..CONFLICT_RETRIES {
        let config = api.get(name).await.map_err(|e| explain(e, "get", &what))?;
        let mut webhooks = config.webhooks.unwrap_or_default();
        if webhooks.is_empty() {
            bail!("{what} has no webhooks to patch");
        }
        let mut changed = 0;
        for webhook in &mut webhooks {
            if webhook.client_config.ca_bundle.as_ref() != Some(&bundle) {
                webhook.client_config.ca_bundle = Some(bundle.clone());
                changed += 1;
            }
        }
        if changed == 0 {
            return Ok(0);
        }
        // A merge patch replaces lists whole: send every webhook, each otherwise as read.
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": config.metadata.resource_version},
            "webhooks": webhooks,
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(changed),
            Err(error) if is_conflict(&error) => continue,
            Err(error) => return Err(explain(error, "patch", &what)),
        }
    }
    bail!("{what} kept changing underneath; gave up after {CONFLICT_RETRIES} conflicts")
}
