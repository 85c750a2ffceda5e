//! The kubelet's part, for tests on the real API server (which has a controller-manager but no kubelet): takes a
//! Pod from the API server and runs its Envoy container as a kubelet would — the container's command and args, its
//! environment (`$(VAR)` from `fieldRef`s), its volumes as files (ConfigMaps read from the API server, projected
//! service-account tokens minted by the TokenRequest API for the Pod's ServiceAccount and audience, emptyDirs) —
//! and reports the Pod `Ready` on its status once the readiness probe answers, so the ReplicaSet and Deployment
//! controllers count it available.
//!
//! What differs from a kubelet, because every pod here shares one machine: file paths (each mount is a folder of a
//! temp dir; the mount paths are rewritten in the args and in the mounted files) and the pod network (the pod's
//! IP is 127.0.0.1, and the fixed ports the bootstrap names, Envoy's admin and readiness ports, are remapped to
//! free ports). The command `envoy` is the Envoy binary the tests use.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::envoy::{free_port, EnvoyProcess, CONVERGE};
use crate::kube_server::Kube;

/// A Pod's Envoy container, running.
pub struct RunningPod {
    /// The Envoy process.
    pub envoy: EnvoyProcess,
    /// Where the readiness probe's port went.
    pub readiness_port: u16,
    _volumes: tempfile::TempDir,
}

/// The Pod `name` of the test's namespace, as the API server has it.
pub async fn pod(kube: &Kube, name: &str) -> Value {
    let json = kube
        .kubectl_ok(
            &["-n", kube.namespace(), "get", "pod", name, "-o", "json"],
            None,
        )
        .await;
    serde_json::from_str(&json).unwrap()
}

/// Runs the first container of `pod` (an Envoy) with `envoy`; `fixed_ports` are the container's own ports
/// (admin, readiness) that are remapped to free ones, the first of them the readiness probe's.
pub async fn run_envoy_pod(
    kube: &Kube,
    pod: &Value,
    envoy: &Path,
    fixed_ports: &[u16],
) -> RunningPod {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap();
    let name = pod["metadata"]["name"].as_str().unwrap();
    let spec = &pod["spec"];
    let container = &spec["containers"][0];
    let volumes = tempfile::tempdir().unwrap();
    // Mount path → folder, longest first so a nested mount is rewritten before its parent.
    let mut mounts: Vec<(String, String)> = Vec::new();
    for mount in container["volumeMounts"].as_array().unwrap() {
        let volume_name = mount["name"].as_str().unwrap();
        let volume = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == volume_name)
            .expect("a volume for the mount");
        let folder = volumes.path().join(volume_name);
        std::fs::create_dir_all(&folder).unwrap();
        if let Some(config_map) = volume["configMap"]["name"].as_str() {
            let json = kube
                .kubectl_ok(
                    &[
                        "-n",
                        namespace,
                        "get",
                        "configmap",
                        config_map,
                        "-o",
                        "json",
                    ],
                    None,
                )
                .await;
            let object: Value = serde_json::from_str(&json).unwrap();
            for (key, value) in object["data"].as_object().unwrap() {
                std::fs::write(folder.join(key), value.as_str().unwrap()).unwrap();
            }
        }
        for source in volume["projected"]["sources"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let token = &source["serviceAccountToken"];
            if token.is_null() {
                continue;
            }
            let account = spec["serviceAccountName"].as_str().unwrap();
            let minted = kube
                .token(namespace, account, token["audience"].as_str(), "1h")
                .await;
            std::fs::write(folder.join(token["path"].as_str().unwrap()), minted).unwrap();
        }
        mounts.push((
            mount["mountPath"].as_str().unwrap().to_string(),
            folder.display().to_string(),
        ));
    }
    mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    let remapped: Vec<(u16, u16)> = fixed_ports
        .iter()
        .map(|port| (*port, free_port()))
        .collect();
    // The mounted files name the other mounts' paths (the bootstrap names the token and the CA) and the ports.
    for (_, folder) in &mounts {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            let Ok(mut text) = std::fs::read_to_string(&path) else {
                continue;
            };
            text = rewrite_paths(&text, &mounts);
            for (fixed, free) in &remapped {
                text = text.replace(
                    &format!("\"port_value\": {fixed}"),
                    &format!("\"port_value\": {free}"),
                );
            }
            std::fs::write(&path, text).unwrap();
        }
    }
    let env: Vec<(String, String)> = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|var| {
            let value = match var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("status.podIP") => "127.0.0.1".to_string(),
                Some("metadata.name") => name.to_string(),
                Some("metadata.namespace") => namespace.to_string(),
                Some(other) => panic!("no value for fieldRef {other}"),
                None => var["value"].as_str().unwrap_or_default().to_string(),
            };
            (var["name"].as_str().unwrap().to_string(), value)
        })
        .collect();
    let command: Vec<&str> = container["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(command, ["envoy"], "the container runs Envoy");
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|arg| {
            let mut arg = rewrite_paths(arg.as_str().unwrap(), &mounts);
            for (key, value) in &env {
                arg = arg.replace(&format!("$({key})"), value);
            }
            arg
        })
        .collect();
    let envoy = EnvoyProcess::start_argv(envoy, &args).await;
    RunningPod {
        envoy,
        readiness_port: remapped.first().map_or(0, |(_, free)| *free),
        _volumes: volumes,
    }
}

fn rewrite_paths(text: &str, mounts: &[(String, String)]) -> String {
    mounts
        .iter()
        .fold(text.to_string(), |text, (path, folder)| {
            text.replace(path.as_str(), folder)
        })
}

/// Waits until the pod's readiness probe (`GET path` on its remapped port) answers 200, then reports the Pod
/// `Running` and `Ready` on its status, as the kubelet does.
pub async fn report_ready(kube: &Kube, pod_name: &str, running: &RunningPod, path: &str) {
    let url = format!("http://127.0.0.1:{}{path}", running.readiness_port);
    let http = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if let Ok(response) = http.get(&url).send().await {
            if response.status() == 200 {
                break;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pod never became ready ({url}):\n{}",
            running.envoy.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let now = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .unwrap()
        .to_string();
    let status = serde_json::json!({"status": {
        "phase": "Running",
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
        ],
    }});
    kube.kubectl_ok(
        &[
            "-n",
            kube.namespace(),
            "patch",
            "pod",
            pod_name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ],
        None,
    )
    .await;
}
