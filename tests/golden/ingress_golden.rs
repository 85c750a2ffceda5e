//! Golden tests for Ingress translation: each `tests/golden-ingress/<case>/input.yaml` (Ingresses of class
//! `higress` with their Services, EndpointSlices and Secrets; one group of Higress annotations per case) is decoded
//! through the sources' gate, translated with `Translator::new(Options::default())` for Higress's default gateway
//! (namespace `higress-system`, label `higress: higress-system-higress-gateway`) and compared with `output.json`.
//! Every output must also leave nothing out and pass the effect check (the protoc-gen-validate rules Envoy applies
//! when it loads a resource). `UPDATE_GOLDEN=1` rewrites the outputs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::cases;

use std::path::{Path, PathBuf};

use admitpilot::translate::effect::check_changed;
use admitpilot::translate::{GatewayResources, Options, Proxy, Translator};

/// Higress's default gateway, the proxy Ingresses of class `higress` are served to.
fn proxy() -> Proxy {
    Proxy {
        namespace: "higress-system".into(),
        labels: [(
            "higress".to_string(),
            "higress-system-higress-gateway".to_string(),
        )]
        .into(),
        ..Default::default()
    }
}

fn golden_cases() -> Vec<PathBuf> {
    cases::case_dirs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden-ingress"))
}

/// The case's `input.yaml` translated for [`proxy`].
fn translate_case(case: &Path) -> GatewayResources {
    let input = case.join("input.yaml");
    let text = std::fs::read_to_string(&input).unwrap();
    let snapshot = cases::snapshot_from_yaml(&text, &input.display().to_string());
    let mut translator = Translator::new(Options::default());
    translator.translate(&snapshot, &proxy());
    translator.into_resources()
}

/// The output as its golden file holds it (private keys redacted).
fn golden_text(resources: &GatewayResources) -> String {
    let json = admitpilot::translate::output::to_json(resources, true).unwrap();
    serde_json::to_string_pretty(&json).unwrap() + "\n"
}

#[test]
fn ingress_golden_outputs_match_leave_nothing_out_and_pass_envoy_validation() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let cases = golden_cases();
    assert!(cases.len() >= 4, "golden cases missing: {cases:?}");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let resources = translate_case(case);
        assert!(
            resources.left_out.is_empty(),
            "{name}: left out {:?}",
            resources.left_out
        );
        let rejections = check_changed(&GatewayResources::default(), &resources);
        assert!(
            rejections.is_empty(),
            "{name}: Envoy would reject {rejections:#?}"
        );
        assert!(
            !resources.listeners.is_empty() && !resources.route_configs.is_empty(),
            "{name}: the Ingress gateway got no listener or routes"
        );
        let actual = golden_text(&resources);
        let expected_path = case.join("output.json");
        if update {
            std::fs::write(&expected_path, &actual).unwrap();
        } else if std::fs::read_to_string(&expected_path).unwrap_or_default() != actual {
            failures.push(name);
        }
    }
    assert!(
        failures.is_empty(),
        "golden outputs differ for {failures:?}; inspect with UPDATE_GOLDEN=1 and git diff"
    );
}

/// The virtual host domains of every route configuration.
fn domains(resources: &GatewayResources) -> Vec<String> {
    resources
        .route_configs
        .iter()
        .flat_map(|r| &r.virtual_hosts)
        .flat_map(|v| v.domains.iter().cloned())
        .collect()
}

/// The ordering case serves its `higress` Ingresses but not the one of class `nginx`, and a proxy without the
/// Ingress gateway's label gets none of them.
#[test]
fn ingress_of_another_class_and_other_proxies_are_not_served() {
    let case =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden-ingress/ordering-and-conflicts");
    let served = domains(&translate_case(&case));
    assert!(served.iter().any(|d| d == "order.example"), "{served:?}");
    assert!(
        !served.iter().any(|d| d.starts_with("nginx.example")),
        "{served:?}"
    );

    let text = std::fs::read_to_string(case.join("input.yaml")).unwrap();
    let snapshot = cases::snapshot_from_yaml(&text, "ordering-and-conflicts");
    let other = Proxy {
        namespace: "higress-system".into(),
        labels: [("app".to_string(), "other".to_string())].into(),
        ..Default::default()
    };
    let resources = admitpilot::translate::translate(&snapshot, &other);
    assert!(resources.listeners.is_empty(), "{:?}", resources.listeners);
}
