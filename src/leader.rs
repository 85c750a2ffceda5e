//! Leader election (I/O): takes a Kubernetes client, a namespace and this replica's name, and competes for the Lease
//! [`LEASE_NAME`] there (kube-lease-manager, server-side apply); yields a channel that is true while this replica
//! holds it. The leader alone writes Gateway API status ([`crate::status_writer`]) and the last-good ConfigMap
//! (`--state-configmap`); every replica serves the webhook and xDS. On shutdown the Lease is released; another
//! replica takes it at its next attempt, within the Lease duration (30 s).

use std::time::Duration;

use kube::Client;
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
