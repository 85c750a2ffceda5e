use super::*;
use std::collections::BTreeMap;

use admitpilot_model::{Findings, Kind, ObjectMeta};

fn errors_of(f: impl FnOnce(&mut Findings)) -> Vec<String> {
    let mut out = Findings::default();
    f(&mut out);
    out.0
        .iter()
        .filter(|f| f.is_error())
        .map(|f| format!("{}: {}", f.field, f.message))
        .collect()
}

#[test]
fn empty_regex() {
    let errs = errors_of(|o| validate_regex("", "spec.x", o));
    assert_eq!(errs, vec!["spec.x: regex must not be empty".to_string()]);
}

#[test]
fn field_paths_grow_and_shrink() {
    let mut p = FieldPath::new("spec");
    {
        let mut http = p.field("http");
        let mut first = http.index(0);
        let route = first.field("route");
        assert_eq!(route.as_str(), "spec.http[0].route");
    }
    assert_eq!(p.as_str(), "spec");
    assert_eq!(p.child("hosts"), "spec.hosts");
    assert_eq!(FieldPath::new("").field("a").as_str(), "a");
}

#[test]
fn dns_labels() {
    // Object names: subdomains without a per-part limit (apimachinery IsDNS1123Subdomain).
    assert!(is_k8s_object_name(&"a".repeat(66)));
    assert!(is_k8s_object_name(&"a".repeat(253)));
    assert!(!is_k8s_object_name(&"a".repeat(254)));
    assert!(is_k8s_object_name("a.b-c.0"));
    for bad in ["", "A", "a.", ".a", "a..b", "-a", "a-", "a_b", "a.-b"] {
        assert!(!is_k8s_object_name(bad), "{bad:?}");
    }
    assert!(is_dns1123_label("foo-1"));
    assert!(is_dns1123_label("Foo"));
    assert!(!is_dns1123_label("-foo"));
    assert!(!is_dns1123_label("foo-"));
    assert!(!is_dns1123_label(""));
    assert!(!is_dns1123_label(&"a".repeat(64)));
    assert!(is_wildcard_dns1123_label("*"));
    assert!(is_wildcard_dns1123_label("*foo"));
    assert!(is_wildcard_dns1123_label("*-foo"));
    assert!(!is_wildcard_dns1123_label("f*o"));
}

#[test]
fn fqdns() {
    assert!(check_fqdn("istio.io").is_ok());
    assert!(check_fqdn("istio.io.").is_ok());
    assert!(check_fqdn("reviews").is_ok());
    assert!(check_fqdn("1.2.3.4").is_err()); // all-numeric TLD
    assert!(check_fqdn("").is_err());
    assert!(check_fqdn("a..b").is_err());
    assert!(check_fqdn(&format!("{}.com", "a.".repeat(130))).is_err());
    assert!(check_fqdn("*.istio.io").is_err());
}

#[test]
fn subset_names_use_istios_texts() {
    assert_eq!(check_subset_name("v1"), Ok(()));
    assert_eq!(
        check_subset_name("").unwrap_err(),
        "subset name cannot be empty"
    );
    assert_eq!(
        check_subset_name("2.0.0").unwrap_err(),
        "subset name is invalid: 2.0.0"
    );
}

#[test]
fn wildcard_domains() {
    // `*.` passes as in Istio's ValidateWildcardDomain: the empty rest counts as a trailing dot.
    for ok in [
        "*",
        "*.istio.io",
        "*istio.io",
        "istio.io",
        "*.bar.com.",
        "*.",
    ] {
        assert!(check_wildcard_domain(ok).is_ok(), "{ok}");
    }
    for bad in ["", "istio.*.io", "foo.*", "**.com", "a b.com"] {
        assert!(check_wildcard_domain(bad).is_err(), "{bad}");
    }
    // Istio's texts, and Go's Atoi for the all-numeric top-level label (a sign counts, 64 bits at most).
    assert_eq!(
        check_wildcard_domain("a.*.io").unwrap_err(),
        r#"domain name "*.io" invalid (label "*" invalid)"#
    );
    assert_eq!(
        check_fqdn("a.+5").unwrap_err(),
        r#"domain name "a.+5" invalid (top level domain "+5" cannot be all-numeric)"#
    );
    assert!(check_fqdn("a.99999999999999999999").is_ok());
    assert_eq!(check_fqdn("").unwrap_err(), "empty domain name not allowed");
    assert!(check_partial_wildcard("*.com").is_ok());
    assert!(check_partial_wildcard("*").is_ok());
    assert!(check_partial_wildcard("*foo.com").is_err());
}

#[test]
fn values_are_quoted_as_go_quotes_them() {
    assert_eq!(go_quote("a.b"), r#""a.b""#);
    assert_eq!(go_quote("say \"hi\"\\"), r#""say \"hi\"\\""#);
    assert_eq!(
        go_quote("\n\t\r\u{7}\u{8}\u{b}\u{c}"),
        r#""\n\t\r\a\b\v\f""#
    );
    assert_eq!(go_quote("\u{1}\u{7f}"), r#""\x01\x7f""#);
    assert_eq!(go_quote("héllo 日本"), r#""héllo 日本""#);
    assert_eq!(go_quote("\u{a0}\u{200b}\u{85}"), r#""\u00a0\u200b\u0085""#);
    assert_eq!(go_quote("\u{f0000}"), r#""\U000f0000""#);
}

#[test]
fn cidr_prefix_lengths_follow_go() {
    assert!(check_ip_or_cidr("10.0.0.0/8").is_ok());
    assert!(check_ip_or_cidr("10.0.0.0/0").is_ok());
    assert_eq!(
        check_ip_or_cidr("10.0.0.0/08"),
        Err("10.0.0.0/08 is not a valid CIDR block".into())
    );
    assert_eq!(
        check_ip_or_cidr("10.0.0.0/8/8"),
        Err("10.0.0.0/8/8 is not a valid IP".into())
    );
    assert!(check_ip_or_cidr("::1/129").is_err());
}

#[test]
fn namespace_slash_hosts() {
    let sidecar =
        |h: &str| errors_of(|o| validate_namespace_slash_host(h, NsHostContext::Sidecar, "h", o));
    let gateway =
        |h: &str| errors_of(|o| validate_namespace_slash_host(h, NsHostContext::Gateway, "h", o));
    assert!(sidecar("*/*").is_empty());
    assert!(sidecar("./foo.com").is_empty());
    // A sidecar's namespace may be `~`-prefixed to exclude it (Istio strips the `~` before checking).
    assert!(sidecar("~/*.foo.com").is_empty());
    assert!(sidecar("~ns/*.foo.com").is_empty());
    assert!(sidecar("~*/*.foo.com").is_empty());
    assert_eq!(
        sidecar("~Bad_ns/*.foo.com"),
        [r#"h: invalid namespace value "~Bad_ns" in sidecar"#]
    );
    assert_eq!(
        gateway("~/*.foo.com"),
        [r#"h: invalid namespace value "~" in gateway"#]
    );
    assert!(!sidecar("foo.com").is_empty());
    assert!(!sidecar("ns/foo").is_empty()); // short name
    assert!(!sidecar("ns/*foo.com").is_empty()); // partial wildcard
    assert!(!sidecar("Bad_ns/foo.com").is_empty());
    assert!(gateway("foo.com").is_empty());
    assert!(gateway("1.2.3.4").is_empty());
    assert!(gateway("*").is_empty());
    assert!(!gateway("~/foo.com").is_empty());
    assert!(errors_of(|o| validate_namespace_slash_host(
        "~/foo.com",
        NsHostContext::GatewayApi,
        "h",
        o
    ))
    .is_empty());
    assert!(!gateway("ns/").is_empty());
}

#[test]
fn addresses() {
    assert!(check_ip_or_cidr("10.0.0.0/8").is_ok());
    assert!(check_ip_or_cidr("2001:db8::/32").is_ok());
    assert!(check_ip_or_cidr("1.2.3.4").is_ok());
    assert!(check_ip_or_cidr("1.2.3.4/33").is_err());
    assert!(check_ip_or_cidr("1.2.3/8").is_err());
    assert!(check_ip_or_cidr("foo").is_err());
    assert!(check_ip_or_cidr("1.2.3.4/").is_err());
    assert!(check_port(1).is_ok() && check_port(65535).is_ok());
    assert!(check_port(0).is_err() && check_port(65536).is_err());
    assert!(check_unix_address("/var/run/x.sock").is_ok());
    assert!(check_unix_address("@abstract").is_ok());
    assert!(check_unix_address("relative").is_err());
    assert!(check_unix_address("/dir/").is_err());
}

#[test]
fn durations() {
    assert!(check_duration("1ms").is_ok());
    assert!(check_duration("3m").is_ok());
    assert!(check_duration("0s").is_err());
    assert!(check_duration("0.5ms").is_err());
    assert!(check_duration("1.0001s").is_err());
    assert!(check_duration("-5s").is_err());
}

#[test]
fn percentages() {
    assert!(errors_of(|o| validate_percent(100, "p", o)).is_empty());
    assert_eq!(errors_of(|o| validate_percent(101, "p", o)).len(), 1);
    assert!(errors_of(|o| validate_fractional_percent(0.0, "p", o)).is_empty());
    assert!(errors_of(|o| validate_fractional_percent(0.0001, "p", o)).is_empty());
    assert_eq!(
        errors_of(|o| validate_fractional_percent(0.00001, "p", o)).len(),
        1
    );
    assert_eq!(
        errors_of(|o| validate_fractional_percent(100.5, "p", o)).len(),
        1
    );
}

#[test]
fn labels() {
    assert!(check_label_key("app").is_ok());
    assert!(check_label_key("app.kubernetes.io/name").is_ok());
    assert!(check_label_key("a_b.c-d").is_ok());
    assert!(check_label_key("").is_err());
    assert!(check_label_key("/app").is_err());
    assert!(check_label_key("-app").is_err());
    assert!(check_label_key(&"a".repeat(64)).is_err());
    assert!(check_label_value("").is_ok());
    assert!(check_label_value("v1.2_3").is_ok());
    assert!(check_label_value("bad value").is_err());
    let mut out = Findings::default();
    validate_workload_selector(&BTreeMap::new(), "sel", &mut out);
    assert!(!out.has_errors());
    assert_eq!(out.0.len(), 1);
    let sel: BTreeMap<String, String> = [("app".to_string(), "*".to_string())].into();
    assert_eq!(
        errors_of(|o| validate_workload_selector(&sel, "sel", o)).len(),
        1
    );
}

#[test]
fn export_to() {
    let v = |list: &[&str], ctx| {
        let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        errors_of(|o| validate_export_to("ns1", &list, ctx, "e", o))
    };
    use ExportToContext::*;
    assert!(v(&[".", "ns2"], Plain).is_empty());
    assert!(v(&["*"], Plain).is_empty());
    assert!(v(&["~"], ServiceEntry).is_empty());
    assert!(!v(&["~"], Plain).is_empty());
    assert!(!v(&[".", "ns1"], Plain).is_empty());
    assert!(!v(&["ns2", "ns2"], Plain).is_empty());
    assert!(!v(&["*", "ns2"], Plain).is_empty());
    assert!(!v(&["~", "ns2"], ServiceEntry).is_empty());
    assert!(!v(&["Bad_NS"], Plain).is_empty());
    assert!(v(&["."], DestinationRuleWithSelector).is_empty());
    assert!(!v(&["*"], DestinationRuleWithSelector).is_empty());
    assert!(!v(&[".", "ns2"], DestinationRuleWithSelector).is_empty());
}

#[test]
fn target_refs() {
    let v = |g: &str, k: &str, n: &str, ns: &str| {
        errors_of(|o| validate_target_ref(g, k, n, ns, "t", o)).len()
    };
    assert_eq!(v("", "Service", "a", ""), 0);
    assert_eq!(v("gateway.networking.k8s.io", "Gateway", "a", ""), 0);
    assert_eq!(v("networking.istio.io", "ServiceEntry", "a", ""), 0);
    assert_eq!(v("", "Pod", "a", ""), 1);
    assert_eq!(v("", "Service", "", "other"), 2);
    assert_eq!(
        errors_of(|o| validate_one_selector_kind(true, false, true, "s", o)).len(),
        1
    );
}

#[test]
fn headers() {
    assert!(is_header_token("x-foo_bar"));
    assert!(!is_header_token("x foo"));
    assert!(is_jwt_claim_route("@request.auth.claims.group"));
    assert!(is_jwt_claim_route("@request.auth.claims[a][b]"));
    assert!(!is_jwt_claim_route("@request.auth.claims"));
    assert!(errors_of(|o| validate_match_header_name(":authority", "h", o)).is_empty());
    assert!(!errors_of(|o| validate_match_header_name("a b", "h", o)).is_empty());
    assert!(errors_of(|o| validate_request_header_set_name("host", "h", o)).is_empty());
    assert!(!errors_of(|o| validate_request_header_set_name(":path", "h", o)).is_empty());
    assert!(!errors_of(|o| validate_header_operation_name("Host", "h", o)).is_empty());
    for ok in [
        "foo",
        "%HOSTNAME%",
        "100%%",
        "a %REQ(x-y)% b",
        "%DYNAMIC_METADATA([\"a\", \"b\"])%",
    ] {
        assert!(check_header_value(ok).is_ok(), "{ok}");
    }
    for bad in ["abc%", "%START_TIME%%", "%VAR(", "a\nb"] {
        assert!(check_header_value(bad).is_err(), "{bad}");
    }
}

#[test]
fn metadata_rules() {
    let meta = |pairs: &[(&str, &str)]| ObjectMeta {
        name: "x".into(),
        annotations: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..ObjectMeta::default()
    };
    let run = |kind, m: &ObjectMeta| errors_of(|o| validate_metadata(kind, m, o)).len();
    assert_eq!(run(Kind::VirtualService, &meta(&[])), 0);
    assert_eq!(
        run(Kind::VirtualService, &meta(&[(DRY_RUN_ANNOTATION, "true")])),
        1
    );
    assert_eq!(
        run(
            Kind::AuthorizationPolicy,
            &meta(&[(DRY_RUN_ANNOTATION, "true")])
        ),
        0
    );
    assert_eq!(
        run(
            Kind::AuthorizationPolicy,
            &meta(&[(DRY_RUN_ANNOTATION, "maybe")])
        ),
        1
    );
    assert_eq!(
        run(Kind::Gateway, &meta(&[(ALWAYS_REJECT_ANNOTATION, "")])),
        1
    );
    assert_eq!(
        run(Kind::Sidecar, &meta(&[("internal.istio.io/parents", "x")])),
        1
    );
    assert_eq!(
        run(Kind::Service, &meta(&[(ALWAYS_REJECT_ANNOTATION, "")])),
        0
    );
}

/// Object names and namespaces get the API server's texts (apimachinery `ValidateObjectMeta`: `IsDNS1123Subdomain`
/// for the name, `IsDNS1123Label` for the namespace, each text as a `field.Invalid`).
#[test]
fn metadata_names_use_apimachinery_texts() {
    let meta = |name: &str, namespace: &str| ObjectMeta {
        name: name.into(),
        namespace: namespace.into(),
        ..ObjectMeta::default()
    };
    let run = |m: &ObjectMeta| errors_of(|o| validate_metadata(Kind::VirtualService, m, o));
    assert_eq!(run(&meta("a.b-c", "ns-1")), Vec::<String>::new());
    assert_eq!(
        run(&meta("Foo", "")),
        [format!(
            "metadata.name: Invalid value: \"Foo\": {DNS1123_SUBDOMAIN_ERROR}"
        )]
    );
    assert!(DNS1123_SUBDOMAIN_ERROR.starts_with(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must \
         start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    ));
    assert!(DNS1123_SUBDOMAIN_ERROR
        .ends_with(r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"));
    // Both texts, in apimachinery's order; the value is written as Go's %q.
    let long_bad = format!("{}_", "a".repeat(253));
    assert_eq!(
        run(&meta(&long_bad, "")),
        [
            format!(
                "metadata.name: Invalid value: \"{long_bad}\": must be no more than 253 characters"
            ),
            format!("metadata.name: Invalid value: \"{long_bad}\": {DNS1123_SUBDOMAIN_ERROR}"),
        ]
    );
    assert_eq!(
        run(&meta("a", "Ns\n")),
        [format!(
            "metadata.namespace: Invalid value: \"Ns\\n\": {DNS1123_LABEL_ERROR}"
        )]
    );
    assert_eq!(
        DNS1123_LABEL_ERROR,
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and \
         end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
         '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    );
    assert_eq!(
        run(&meta("a", "a.b")),
        ["metadata.namespace: Invalid value: \"a.b\": must not contain dots"]
    );
    let long = "a".repeat(64);
    assert_eq!(
        run(&meta("a", &long)),
        [format!(
            "metadata.namespace: Invalid value: \"{long}\": must be no more than 63 characters"
        )]
    );
    assert_eq!(
        dns1123_label_errors(&format!("{long}.b")),
        [
            "must be no more than 63 characters",
            "must not contain dots"
        ]
    );
    assert_eq!(dns1123_label_errors(""), [DNS1123_LABEL_ERROR]);
    assert_eq!(dns1123_subdomain_errors(""), [DNS1123_SUBDOMAIN_ERROR]);
}

/// apimachinery's `IsDNS1123Label` refuses upper case, unlike Istio's `labels.IsDNS1123Label`.
#[test]
fn namespaces_are_lowercase_labels() {
    assert!(is_k8s_namespace("ns-1"));
    assert!(is_dns1123_label("Ns"));
    assert!(!is_k8s_namespace("Ns"));
    assert!(is_k8s_namespace(&"a".repeat(63)));
    assert!(!is_k8s_namespace(&"a".repeat(64)));
    for bad in ["", "a.b", "-a", "a-", "a_b", "é"] {
        assert!(!is_k8s_namespace(bad), "{bad:?}");
    }
}

/// Istio's `validateTagKey` and `Instance.Validate` write the key and value with Go's %q.
#[test]
fn label_texts_quote_as_go_does() {
    assert_eq!(
        check_label_key("a\u{1}b").unwrap_err(),
        r#"invalid tag key: "a\x01b""#
    );
    assert_eq!(
        check_label_key("say \"é\"").unwrap_err(),
        r#"invalid tag key: "say \"é\"""#
    );
    let long_name = "a".repeat(64);
    assert_eq!(
        check_label_key(&long_name).unwrap_err(),
        format!("invalid tag key: \"{long_name}\" (name is too long)")
    );
    let long_prefix = format!("{}.{}/a", "b".repeat(200), "c".repeat(53));
    assert_eq!(
        check_label_key(&long_prefix).unwrap_err(),
        format!("invalid tag key: \"{long_prefix}\" (DNS prefix is too long)")
    );
    assert_eq!(
        check_label_value("a\tb").unwrap_err(),
        r#"invalid tag value: "a\tb""#
    );
}

/// The CRD's `maxLength` rules (selector values 63, targetRef names 253) fail with apimachinery's `field.TooLong`.
#[test]
fn attachment_lengths_use_the_api_servers_text() {
    use admitpilot_model::istio::proxy_config::TypeWorkloadSelector;
    use admitpilot_model::istio::PolicyTargetReference;
    let selector = TypeWorkloadSelector {
        match_labels: [
            ("app".to_string(), "v".repeat(63)),
            ("team".to_string(), "v".repeat(64)),
        ]
        .into(),
    };
    assert_eq!(
        errors_of(|o| validate_policy_attachment(Some(&selector), None, &[], o)),
        ["spec.selector.matchLabels.team: Too long: may not be more than 63 bytes"]
    );
    let target = |name: String| PolicyTargetReference {
        group: "gateway.networking.k8s.io".into(),
        kind: "Gateway".into(),
        name,
        namespace: String::new(),
    };
    assert_eq!(
        errors_of(|o| validate_policy_attachment(None, None, &[target("g".repeat(253))], o)),
        Vec::<String>::new()
    );
    assert_eq!(
        errors_of(|o| validate_policy_attachment(None, Some(&target("g".repeat(254))), &[], o)),
        ["spec.targetRef: Too long: may not be more than 253 bytes"]
    );
    assert_eq!(field_too_long(1), "Too long: may not be more than 1 byte");
}
