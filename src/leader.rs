//! Leader election (I/O): takes a Kubernetes client, a namespace and this replica's name, and competes for the Lease
//! [`LEASE_NAME`] there (kube-lease-manager, server-side apply); yields a channel that is true while this replica
//! holds it. The leader alone writes Gateway API status ([`crate::status_writer`]) and the last-good ConfigMap
//! (`--state-configmap`); every replica serves the webhook and xDS. On shutdown the Lease is released; another
//! replica takes it at its next attempt, within the Lease duration (30 s). The election library does not say when
//! renewing fails, so a writer checks [`still_holds`] before it writes: a leader cut off from the API server stops
//! writing once its Lease has run out, when another may have taken it.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

/// The Lease replicas compete for.
pub const LEASE_NAME: &str = "admitpilot-leader";

/// Where the Lease lives and who this replica is.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Namespace of the Lease (admitpilot's own).
    pub namespace: String,
    /// This replica's name in the Lease (the pod name).
    pub identity: String,
}

/// Competes for the Lease until `stop` turns true, sending on `leader` whether this replica holds it. The Lease is
/// set up again until that works (its namespace may not exist yet, or RBAC may be on its way); meanwhile this
/// replica does not lead.
pub async fn run(
    client: Client,
    config: LeaderConfig,
    leader: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut delay = Duration::from_secs(1);
    let manager = loop {
        let built = LeaseManagerBuilder::new(client.clone(), LEASE_NAME)
            .with_namespace(&config.namespace)
            .with_identity(&config.identity)
            // The library's field manager names the replica: a shared one would let two replicas apply the same
            // free Lease without a conflict and both believe they hold it.
            .build()
            .await;
        match built {
            Ok(manager) => break manager,
            Err(error) => {
                tracing::warn!(%error, namespace = %config.namespace, retry_in = ?delay,
                    "cannot set up the leader Lease; this replica does not lead");
                tokio::select! {
                    _ = stop.wait_for(|stop| *stop) => return,
                    () = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    };
    let (mut held, lease_task) = manager.watch().await;
    loop {
        let holds = *held.borrow_and_update();
        if leader.send_replace(holds) != holds {
            tracing::info!(lease = LEASE_NAME, namespace = %config.namespace, leader = holds,
                "leadership changed");
        }
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break,
            changed = held.changed() => if changed.is_err() { break },
        }
    }
    leader.send_replace(false);
    // Closing the channel ends the Lease task, which releases the Lease.
    drop(held);
    if let Ok(Err(error)) = lease_task.await {
        tracing::warn!(%error, "could not release the leader Lease");
    }
}

/// Whether `config.identity` holds the Lease and its last renewal is still within the Lease duration, read from the
/// API server now (false when it cannot be read).
pub async fn still_holds(client: &Client, config: &LeaderConfig) -> bool {
    let api: Api<Lease> = Api::namespaced(client.clone(), &config.namespace);
    let lease = match api.get(LEASE_NAME).await {
        Ok(lease) => lease,
        Err(error) => {
            tracing::warn!(%error, lease = LEASE_NAME, "cannot read the leader Lease; not writing until it can be");
            return false;
        }
    };
    let Some(spec) = lease.spec else {
        return false;
    };
    let holds = spec.holder_identity.as_deref() == Some(config.identity.as_str());
    let fresh = match (spec.renew_time, spec.lease_duration_seconds) {
        (Some(renewed), Some(seconds)) => {
            // `checked_add`: a Lease renewed near the end of time is not a panic.
            renewed
                .0
                .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(i64::from(
                    seconds,
                )))
                .is_ok_and(|expires| expires > k8s_openapi::jiff::Timestamp::now())
        }
        _ => false,
    };
    holds && fresh
}
