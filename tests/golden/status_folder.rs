//! Status without a cluster (issue 31's folder mode): `admitpilot serve --config-dir --istio-status` with a real
//! Envoy shows in `/debug/configz` the status the leader would write: Istio objects turn `Reconciled` once the
//! connected gateway that selects them has acknowledged their generation, an object no connected gateway selects
//! stays `Reconciled=False` saying so, and a VirtualService naming a missing Gateway carries Istio's `IST0101`
//! in `validationMessages`. Waits poll with a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

use envoy::{bootstrap, envoy_binary, free_port, AdsApi, EnvoyProcess};
use pipeline::*;
use serde_json::Value;

const NODE_ID: &str = "router~127.0.0.1~gw-status.default~default.svc.cluster.local";

/// The `status` `/debug/configz` gives the object `kind` `default/name`, if any.
fn status_of<'a>(configz: &'a Value, kind: &str, name: &str) -> Option<&'a Value> {
    configz["objects"]
        .as_array()?
        .iter()
        .find(|o| o["kind"] == kind && o["namespace"] == "default" && o["name"] == name)
        .and_then(|o| o.get("status"))
}

fn reconciled<'a>(configz: &'a Value, kind: &str, name: &str) -> Option<&'a Value> {
    status_of(configz, kind, name)?["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Reconciled")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configz_shows_istio_status_as_the_gateways_serve_it() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let dir = api_config_dir(free_port(), free_port());
    write(
        dir.path(),
        "orphan.yaml",
        &virtual_service("orphan", "/orphan", free_port())
            .replace("gateways: [gw]", "gateways: [missing]"),
    );
    let admitpilot = Admitpilot::start_with_args(dir.path(), &["--istio-status"]).await;
    // No gateway connected: nothing is reconciled, and the reference analysis already speaks.
    admitpilot
        .wait_for_admin(
            "/debug/configz",
            "Reconciled=False before any gateway connects",
            |text| {
                let configz: Value = serde_json::from_str(text).unwrap();
                let orphan = status_of(&configz, "VirtualService", "orphan");
                reconciled(&configz, "Gateway", "gw").is_some_and(|c| {
                    c["status"] == "False"
                        && c["message"]
                            .as_str()
                            .unwrap()
                            .contains("no connected gateway selects it")
                }) && orphan.is_some_and(|s| {
                    s["validationMessages"][0]["type"]["code"] == "IST0101"
                        && s["validationMessages"][0]["level"] == "ERROR"
                })
            },
        )
        .await;

    let gateway = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID)
        .replace("app: e2e", "istio: ingressgateway");
    let envoy = EnvoyProcess::start(&binary, &gateway, 56_100).await;
    admitpilot
        .wait_for_admin(
            "/debug/configz",
            "Reconciled=True once the gateway acknowledged",
            |text| {
                let configz: Value = serde_json::from_str(text).unwrap();
                let served = |kind, name| {
                    reconciled(&configz, kind, name).is_some_and(|c| c["status"] == "True")
                };
                served("Gateway", "gw")
                    && served("VirtualService", "api")
                    && served("ServiceEntry", "backend")
                    && reconciled(&configz, "VirtualService", "orphan").is_some_and(|c| {
                        c["status"] == "False"
                            && c["message"]
                                .as_str()
                                .unwrap()
                                .contains("no connected gateway selects it")
                    })
                    && status_of(&configz, "VirtualService", "api")
                        .is_some_and(|s| s["validationMessages"] == Value::Array(vec![]))
            },
        )
        .await;
    envoy.assert_nothing_rejected("served").await;
}
