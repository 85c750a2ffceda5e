//! A real Kubernetes API server for tests: kube-apiserver and etcd started by `scripts/kube-up` on 127.0.0.1.
//!
//! In: `ADMITPILOT_KUBECONFIG` (set by `scripts/test-all`, which starts one server for the whole run) or else the
//! kube-apiserver that `scripts/kube-up` built into its cache. Out: a [`Kube`] with a kubeconfig, a fresh namespace
//! of its own, a `kube::Client` and `kubectl`.
//!
//! * [`Kube::shared`] attaches to test-all's server (a private one when there is none); tests must then keep to their
//!   namespace and to cluster-scoped objects they name uniquely, since other tests run on the same server.
//! * [`Kube::private`] starts a server only this test uses, which it may [`Kube::stop`] and [`Kube::start`] again (same
//!   URL, same data) and fill with cluster-wide objects such as webhook configurations; it is stopped and deleted
//!   on drop.
//!
//! When kube-apiserver is not built, both answer `None` after printing why, except in CI (`CI=true`), where they
//! panic: a CI run must not pass without the real server.
//!
//! A kube-controller-manager runs with the server: namespaces get their `default` ServiceAccount, Deployments their
//! ReplicaSets and Pods, Services with selectors their EndpointSlices, and owned objects are garbage-collected. No
//! scheduler or kubelet runs: Pods never run (`crate::kubelet` plays the kubelet's part where a test needs it). Mint
//! tokens with [`Kube::token`].
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

const ROOT: &str = crate::REPO_ROOT;

/// The exit code of `scripts/kube-up --no-build` when kube-apiserver, etcd or kubectl is not installed.
const NOT_INSTALLED: i32 = 3;

/// A real API server and a namespace of this test's own on it.
pub struct Kube {
    kubeconfig: PathBuf,
    namespace: String,
    /// The run dir of a private server (`None` when attached to test-all's).
    private: Option<tempfile::TempDir>,
}

impl Kube {
    /// The API server of this test run (`ADMITPILOT_KUBECONFIG`), or a private one when there is none, with a new
    /// namespace named after `test`. `None` when no kube-apiserver is built, outside CI.
    pub async fn shared(test: &str) -> Option<Kube> {
        let kube = match std::env::var_os("ADMITPILOT_KUBECONFIG") {
            Some(path) => Kube {
                kubeconfig: PathBuf::from(path),
                namespace: unique_name(test),
                private: None,
            },
            None => Self::start_private(test).await?,
        };
        kube.create_namespace(&kube.namespace).await;
        Some(kube)
    }

    /// A new API server only this test uses, with a new namespace named after `test`. `None` when no
    /// kube-apiserver is built, outside CI.
    pub async fn private(test: &str) -> Option<Kube> {
        let kube = Self::start_private(test).await?;
        kube.create_namespace(&kube.namespace).await;
        Some(kube)
    }

    async fn start_private(test: &str) -> Option<Kube> {
        let dir = tempfile::Builder::new()
            .prefix("kube-up-")
            .tempdir()
            .unwrap();
        let kube = Kube {
            kubeconfig: dir.path().join("kubeconfig"),
            namespace: unique_name(test),
            private: Some(dir),
        };
        kube.up().await.then_some(kube)
    }

    /// The kubeconfig file (the admin: group `system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// This test's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A client with the admin's credentials.
    pub async fn client(&self) -> kube::Client {
        client_for(&self.kubeconfig).await
    }

    /// Runs `kubectl` with `args` against this server, `stdin` as its input; returns its output whatever the exit.
    pub async fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut command = Command::new(kubectl());
        command.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        run(command, stdin.map(str::to_string)).await
    }

    /// Like [`Kube::kubectl`], and fails the test unless it succeeds; returns its stdout.
    pub async fn kubectl_ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let output = self.kubectl(args, stdin).await;
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// The `holderIdentity` of the Lease `namespace/name` (empty when it has none).
    pub async fn lease_holder(&self, namespace: &str, name: &str) -> String {
        let args = [
            "-n",
            namespace,
            "get",
            "lease",
            name,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ];
        self.kubectl_ok(&args, None).await
    }

    /// `kubectl apply -f -` of `yaml`; returns its output whatever the exit (denials are in stderr).
    pub async fn apply(&self, yaml: &str) -> Output {
        self.kubectl(&["apply", "-f", "-"], Some(yaml)).await
    }

    /// Creates namespace `name` unless it exists.
    pub async fn create_namespace(&self, name: &str) {
        let yaml = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}}}\n");
        self.kubectl_ok(&["apply", "-f", "-"], Some(&yaml)).await;
    }

    /// Applies the CustomResourceDefinitions in the YAML file `path` (server-side, so concurrent tests may apply
    /// the same ones) and waits until they are Established.
    pub async fn install_crds(&self, path: &Path) {
        let file = path.to_str().unwrap();
        let args = [
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            file,
            "-o",
            "name",
        ];
        let names = self.kubectl_ok(&args, None).await;
        let mut wait = vec!["wait", "--for=condition=Established", "--timeout=60s"];
        wait.extend(names.lines());
        self.kubectl_ok(&wait, None).await;
    }

    /// Creates ServiceAccount `name` in this test's namespace (the controller-manager creates only `default`).
    pub async fn create_service_account(&self, name: &str) {
        let ns = self.namespace.as_str();
        let yaml = format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: {ns}}}\n"
        );
        self.kubectl_ok(&["apply", "-f", "-"], Some(&yaml)).await;
    }

    /// A token of ServiceAccount `namespace/name` from the TokenRequest API (`kubectl create token`), valid for
    /// `duration` (e.g. `10m`), for `audience` (default: the API server itself).
    pub async fn token(
        &self,
        namespace: &str,
        name: &str,
        audience: Option<&str>,
        duration: &str,
    ) -> String {
        let mut args = vec![
            "-n",
            namespace,
            "create",
            "token",
            name,
            "--duration",
            duration,
        ];
        if let Some(audience) = audience {
            args.extend(["--audience", audience]);
        }
        self.kubectl_ok(&args, None).await.trim().to_string()
    }

    /// Writes a copy of the admin's kubeconfig to `path`, with `server` as the API server's URL (e.g. a relay in
    /// front of it) and `token` as the credentials (e.g. a ServiceAccount's, to run with its RBAC) when given.
    pub fn write_kubeconfig(&self, path: &Path, server: Option<&str>, token: Option<&str>) {
        let admin = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let mut config: serde_json::Value = serde_yaml_ng::from_str(&admin).unwrap();
        if let Some(server) = server {
            config["clusters"][0]["cluster"]["server"] = server.into();
        }
        if let Some(token) = token {
            config["users"][0]["user"] = serde_json::json!({ "token": token });
        }
        std::fs::write(path, serde_yaml_ng::to_string(&config).unwrap()).unwrap();
    }

    /// Stops a private server (`scripts/kube-down`): connections are refused until [`Kube::start`]. Its data and
    /// ports are kept.
    pub async fn stop(&self) {
        let dir = self.run_dir().to_path_buf();
        let mut command = Command::new(Path::new(ROOT).join("scripts/kube-down"));
        command.arg("--run-dir").arg(dir);
        let output = run(command, None).await;
        assert!(
            output.status.success(),
            "kube-down failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Starts a stopped private server again, on the same URL with the same data, and waits until it is ready.
    pub async fn start(&self) {
        assert!(self.up().await, "kube-apiserver disappeared");
    }

    /// The log of a private server's kube-apiserver (empty when attached to test-all's).
    pub fn apiserver_log(&self) -> String {
        self.private
            .as_ref()
            .and_then(|dir| std::fs::read_to_string(dir.path().join("apiserver.log")).ok())
            .unwrap_or_default()
    }

    fn run_dir(&self) -> &Path {
        self.private
            .as_ref()
            .expect("only a private API server (Kube::private) can be stopped and started")
            .path()
    }

    /// Runs `scripts/kube-up --no-build` on the run dir; false when kube-apiserver is not built (outside CI).
    async fn up(&self) -> bool {
        let mut command = Command::new(Path::new(ROOT).join("scripts/kube-up"));
        command
            .arg("--no-build")
            .arg("--run-dir")
            .arg(self.run_dir());
        let output = run(command, None).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.code() == Some(NOT_INSTALLED) {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI needs the real API server: {stderr}"
            );
            eprintln!("skipping: no real API server: {stderr}");
            return false;
        }
        assert!(output.status.success(), "kube-up failed: {stderr}");
        true
    }
}

impl Drop for Kube {
    fn drop(&mut self) {
        if let Some(dir) = &self.private {
            if std::thread::panicking() {
                let log = self.apiserver_log();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                eprintln!(
                    "---- kube-apiserver log (last lines) ----\n{}",
                    tail.join("\n")
                );
            }
            let _ = Command::new(Path::new(ROOT).join("scripts/kube-down"))
                .arg("--run-dir")
                .arg(dir.path())
                .arg("--purge")
                .status();
        }
    }
}

/// A client for the server and user of the kubeconfig file `path`.
pub async fn client_for(path: &Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(path).unwrap();
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// The kubectl of `scripts/setup-tools` (or `ADMITPILOT_KUBECTL`).
pub fn kubectl() -> PathBuf {
    std::env::var_os("ADMITPILOT_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join("tools/bin/kubectl"))
}

/// A DNS label from `test`, unique in this process and unlikely to repeat across runs.
fn unique_name(test: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let stem: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{}-{:x}{n}",
        stem.trim_matches('-'),
        nanos ^ std::process::id()
    )
}

/// Runs `command` on a blocking thread (the runtime keeps serving in-process servers meanwhile), feeding `stdin`.
async fn run(mut command: Command, stdin: Option<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        command
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("run a kube tool");
        if let Some(text) = stdin {
            use std::io::Write;
            let mut pipe = child.stdin.take().unwrap();
            pipe.write_all(text.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}
