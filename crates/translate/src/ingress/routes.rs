//! One Ingress path as the Istio HTTP route Higress makes of it (pure): takes a path, its backend and the
//! Ingress's parsed annotations, yields the route (as Istio's JSON), the key Higress finds it by (conflicts and
//! canaries) and its place in Higress's order. Mirrors `ConvertHTTPRoute` and `generateHttpMatches`
//! (`pkg/ingress/kube/ingressv1/controller.go`), the route handlers of `pkg/ingress/kube/annotations`, and
//! `SortHTTPRoutes` (`pkg/ingress/kube/common/tool.go`).

use std::cmp::Reverse;

use serde_json::{json, Map, Value};

use admitpilot_model::ingress::annotations::{
    Annotations, Canary, Cors, HeaderControl, MatchKind, MatchRule, MatchTarget, Redirect,
};
pub use admitpilot_model::ingress::{path_kind, PathKind};

/// One route of a host, with what orders it and finds it.
#[derive(Debug, Clone)]
pub struct PathRoute {
    /// `kind-path` plus the method and header/query matches (Higress's rule key, without the host).
    pub key: String,
    /// How the path matches.
    pub kind: PathKind,
    /// The path (a Prefix path without its trailing `/`).
    pub path: String,
    /// Whether it is the Ingress default backend's catch-all.
    pub default_backend: bool,
    /// Whether it is a header or cookie canary's copy of a main route (later canaries apply to the main route).
    pub canary: bool,
    /// The Istio HTTP route.
    pub route: Value,
}

impl PathRoute {
    /// Higress's `SortHTTPRoutes` as a total order: the default backend last, the catch-all (Prefix `/` with no
    /// other match) before it; Exact before Prefix before regexes; then longer paths, method matches, more
    /// headers, more query parameters first. Ties keep their order (the sort is stable).
    pub fn order(&self) -> impl Ord {
        let matches = self.route["match"].as_array().and_then(|m| m.first());
        let count = |field: &str| {
            matches
                .and_then(|m| m[field].as_object())
                .map_or(0, Map::len)
        };
        let method = matches
            .and_then(|m| m["method"]["regex"].as_str())
            .map(str::len);
        let catch_all = self.kind == PathKind::Prefix
            && self.path == "/"
            && method.is_none()
            && count("headers") == 0;
        let rank = match self.kind {
            PathKind::Exact => 0,
            PathKind::Prefix => 1,
            PathKind::PrefixRegex | PathKind::FullPathRegex => 2,
        };
        (
            self.default_backend,
            catch_all,
            rank,
            Reverse(self.path.len()),
            method.is_none(),
            method.unwrap_or(0),
            Reverse(count("headers")),
            Reverse(count("queryParams")),
        )
    }
}

/// A string match of Istio's (`{exact|prefix|regex: value}`).
fn string_match(kind: MatchKind, value: &str) -> Value {
    match kind {
        MatchKind::Exact => json!({"exact": value}),
        MatchKind::Prefix => json!({"prefix": value}),
        MatchKind::Regex => json!({"regex": value}),
    }
}

/// The rule key's suffix: methods and header/query matches, sorted (`createRuleKey`).
fn match_key(a: &Annotations) -> String {
    let mut rules: Vec<&MatchRule> = a.matches.iter().collect();
    rules.sort();
    let mut key = a.match_methods.join(" ");
    for r in rules {
        key.push_str(&format!(
            "|{:?}-{:?}-{}={}",
            r.target, r.kind, r.name, r.value
        ));
    }
    key
}

/// The Istio matches of a path (`generateHttpMatches`): a Prefix path `/foo` matches `/foo` exactly and
/// `/foo/…`; each match also carries the method, header and query annotations and `ignore-path-case`.
fn matches(kind: PathKind, path: &str, a: &Annotations, http_port: Option<u32>) -> Vec<Value> {
    let uris = match kind {
        PathKind::Exact => vec![json!({"exact": path})],
        PathKind::Prefix if path == "/" => vec![json!({"prefix": "/"})],
        PathKind::Prefix => vec![
            json!({"exact": path}),
            json!({"prefix": format!("{path}/")}),
        ],
        PathKind::PrefixRegex => vec![json!({"regex": format!("{path}.*")})],
        PathKind::FullPathRegex => vec![json!({"regex": format!("{path}$")})],
    };
    let mut headers = Map::new();
    let mut query = Map::new();
    for r in &a.matches {
        let value = string_match(r.kind, &r.value);
        match r.target {
            MatchTarget::Header => headers.entry(r.name.clone()).or_insert(value),
            MatchTarget::PseudoHeader => headers.entry(format!(":{}", r.name)).or_insert(value),
            MatchTarget::Query => query.entry(r.name.clone()).or_insert(value),
        };
    }
    uris.into_iter()
        .map(|uri| {
            let mut m = Map::new();
            m.insert("uri".into(), uri);
            if a.ignore_path_case {
                m.insert("ignoreUriCase".into(), json!(true));
            }
            if !a.match_methods.is_empty() {
                m.insert("method".into(), json!({"regex": a.match_methods.join("|")}));
            }
            if !headers.is_empty() {
                m.insert("headers".into(), Value::Object(headers.clone()));
            }
            if !query.is_empty() {
                m.insert("queryParams".into(), Value::Object(query.clone()));
            }
            if let Some(port) = http_port {
                m.insert("port".into(), json!(port));
            }
            Value::Object(m)
        })
        .collect()
}

/// Header operations as Istio's `{add, set, remove}`, `None` when there are none.
pub fn header_operations(h: &HeaderControl) -> Option<Value> {
    if h.is_empty() {
        return None;
    }
    let pairs = |list: &[(String, String)]| {
        Value::Object(list.iter().map(|(k, v)| (k.clone(), json!(v))).collect())
    };
    Some(json!({"add": pairs(&h.add), "set": pairs(&h.set), "remove": h.remove}))
}

/// The route's `headers`: request and response operations (`header_control.go`).
pub fn headers(a: &Annotations) -> Option<Value> {
    let request = header_operations(&a.request_headers);
    let response = header_operations(&a.response_headers);
    (request.is_some() || response.is_some()).then(|| {
        let mut h = Map::new();
        if let Some(r) = request {
            h.insert("request".into(), r);
        }
        if let Some(r) = response {
            h.insert("response".into(), r);
        }
        Value::Object(h)
    })
}

/// An origin as Istio's string match (`cors.go`): `*` any, `scheme://*.host` a suffix regex (scheme dropped, as
/// Higress does), else exact.
fn origin(origin: &str) -> Value {
    if origin == "*" {
        return json!({"regex": ".*"});
    }
    match origin.split_once("://").map(|(_, host)| host) {
        Some(host) if host.starts_with('*') => {
            json!({"regex": format!(".*{}", regex_syntax::escape(host.trim_start_matches('*')))})
        }
        _ => json!({"exact": origin}),
    }
}

/// CORS as Istio's `corsPolicy`.
fn cors_policy(c: &Cors) -> Value {
    json!({
        "allowOrigins": c.allow_origin.iter().map(|o| origin(o)).collect::<Vec<_>>(),
        "allowMethods": c.allow_methods,
        "allowHeaders": c.allow_headers,
        "exposeHeaders": c.expose_headers,
        "allowCredentials": c.allow_credentials,
        "maxAge": format!("{}s", c.max_age),
    })
}

/// The regex a `rewrite-target` replaces (`rewrite.go ApplyRoute`, from the first match), anchored at the start
/// of the path; Higress leaves an exact or prefix path unanchored and unescaped, which rewrites a repeated
/// segment too.
fn rewrite_pattern(kind: PathKind, path: &str) -> String {
    match kind {
        PathKind::Exact => format!("^{}$", regex_syntax::escape(path)),
        PathKind::Prefix => format!("^{}", regex_syntax::escape(path)),
        PathKind::PrefixRegex => format!("{path}.*"),
        PathKind::FullPathRegex => format!("{path}$"),
    }
}

/// The route's `rewrite` (`rewrite.go`): `rewrite-path` replaces the prefix, else `rewrite-target` is a regex
/// rewrite; `upstream-vhost` sets the Host.
fn rewrite(kind: PathKind, path: &str, a: &Annotations) -> Option<Value> {
    let mut r = Map::new();
    if let Some(new) = &a.rewrite_path {
        if kind == PathKind::Prefix && path != "/" && !new.ends_with('/') {
            // `/foo` and `/foo/…` both become `<new>…`.
            r.insert(
                "uriRegexRewrite".into(),
                json!({"match": format!("^{}(/.*)?", regex_syntax::escape(path)), "rewrite": format!("{new}\\1")}),
            );
        } else {
            r.insert("uri".into(), json!(new));
        }
    } else if let Some(target) = &a.rewrite_target {
        r.insert(
            "uriRegexRewrite".into(),
            json!({"match": rewrite_pattern(kind, path), "rewrite": target}),
        );
    }
    if let Some(host) = &a.upstream_vhost {
        r.insert("authority".into(), json!(host));
    }
    (!r.is_empty()).then_some(Value::Object(r))
}

/// A redirect as Istio's `redirect` (`redirect.go`).
fn redirect(r: &Redirect) -> Value {
    match r {
        Redirect::Url {
            scheme,
            authority,
            path,
            code,
        } => {
            let mut v = json!({"scheme": scheme, "authority": authority, "redirectCode": code});
            if !path.is_empty() {
                v["uri"] = json!(path);
            }
            v
        }
        Redirect::Https => json!({"scheme": "https", "redirectCode": 308}),
    }
}

/// Where a route sends requests: an Istio destination.
pub fn destination(host: &str, port: u32) -> Value {
    json!({"host": host, "port": {"number": port}})
}

/// What a path route is built from.
pub struct PathInput<'a> {
    /// The Ingress's `namespace/name` (the route's name).
    pub name: &'a str,
    /// The path as written (`/` when empty).
    pub path: &'a str,
    /// Its `pathType`.
    pub path_type: &'a str,
    /// The backend's Istio destination; `None` when it cannot be resolved (the route answers 503… but Higress
    /// drops it; so does admitpilot).
    pub destination: Value,
    /// The mirror's destination, when the annotation names a Service that exists.
    pub mirror: Option<Value>,
    /// The gateway's HTTP port (for `ssl-redirect`, which applies to it only).
    pub http_port: u32,
}

/// How a path matches and the path it matches (a Prefix path without its trailing `/`), and its rule key.
fn matched_path<'p>(
    path: &'p str,
    path_type: &str,
    a: &Annotations,
) -> (PathKind, &'p str, String) {
    let kind = path_kind(path, path_type, a);
    let path = match kind {
        PathKind::Prefix if path.len() > 1 => path.trim_end_matches('/'),
        _ => path,
    };
    let path = if path.is_empty() { "/" } else { path };
    (kind, path, format!("{kind:?}-{path}-{}", match_key(a)))
}

/// The key Higress finds a path's route by (`createRuleKey`, without the host): how it matches, the path, and the
/// method, header and query annotations.
pub fn rule_key(path: &str, path_type: &str, a: &Annotations) -> String {
    matched_path(path, path_type, a).2
}

/// The routes of one path: with `ssl-redirect` a redirect on the HTTP port first, then the route itself.
pub fn path_routes(input: &PathInput<'_>, a: &Annotations) -> Vec<PathRoute> {
    let (kind, path, key) = matched_path(input.path, input.path_type, a);
    let mut route = Map::new();
    route.insert("name".into(), json!(input.name));
    route.insert("match".into(), json!(matches(kind, path, a, None)));
    match &a.redirect {
        Some(r @ Redirect::Url { .. }) => {
            route.insert("redirect".into(), redirect(r));
        }
        _ => {
            route.insert("route".into(), json!([{"destination": input.destination}]));
            if let Some(rw) = rewrite(kind, path, a) {
                route.insert("rewrite".into(), rw);
            }
            if let Some(t) = a.timeout.filter(|t| *t > 0) {
                route.insert("timeout".into(), json!(format!("{t}s")));
            }
            if let Some(r) = &a.retry {
                let mut retries = json!({"attempts": r.attempts});
                if r.attempts > 0 {
                    retries["retryOn"] = json!(r.retry_on);
                    if r.per_try_timeout > 0 {
                        retries["perTryTimeout"] = json!(format!("{}s", r.per_try_timeout));
                    }
                }
                route.insert("retries".into(), retries);
            }
            if let Some(m) = &input.mirror {
                route.insert("mirror".into(), m.clone());
                if let Some(p) = a.mirror.as_ref().and_then(|m| m.percentage) {
                    route.insert("mirrorPercentage".into(), json!({"value": p}));
                }
            }
        }
    }
    if let Some(c) = &a.cors {
        route.insert("corsPolicy".into(), cors_policy(c));
    }
    if let Some(h) = headers(a) {
        route.insert("headers".into(), h);
    }
    let main = PathRoute {
        key,
        kind,
        path: path.to_string(),
        default_backend: false,
        canary: false,
        route: Value::Object(route),
    };
    if a.redirect == Some(Redirect::Https) {
        // Higress's fork skips this redirect on the HTTPS port (`IgnoreRedirect`); a port match does the same.
        let mut to_https = main.clone();
        to_https.route = json!({
            "name": input.name,
            "match": matches(kind, path, a, Some(input.http_port)),
            "redirect": redirect(&Redirect::Https),
        });
        return vec![to_https, main];
    }
    vec![main]
}

/// The canary of `main` that a canary Ingress's header or cookie selects (`ApplyByHeader`): `main`'s matches with
/// their headers replaced by the canary's, sent to `destination` with the canary's own header changes.
pub fn header_canary(
    main: &PathRoute,
    canary: &Canary,
    destination: &Value,
    a: &Annotations,
) -> Option<PathRoute> {
    let (name, value) = match canary {
        Canary::Header {
            name,
            value: Some(v),
            ..
        } => (name.clone(), json!({"regex": format!("always|{v}")})),
        Canary::Header {
            name,
            pattern: Some(p),
            ..
        } => (name.clone(), json!({"regex": format!(".*{p}.*")})),
        Canary::Header { name, .. } => (name.clone(), json!({"exact": "always"})),
        Canary::Cookie(cookie) => (
            "cookie".into(),
            json!({"regex": format!("^(.*?;\\s*)?({}=always)(;.*)?$", regex_syntax::escape(cookie))}),
        ),
        Canary::Weight { .. } => return None,
    };
    let mut route = main.route.clone();
    if let Some(matches) = route["match"].as_array_mut() {
        for m in matches {
            m["headers"] = json!({ name.clone(): value.clone() });
        }
    }
    if route.get("route").is_some() {
        route["route"] = json!([{"destination": destination}]);
    }
    match headers(a) {
        Some(h) => route["headers"] = h,
        None => {
            if let Some(r) = route.as_object_mut() {
                r.remove("headers");
            }
        }
    }
    Some(PathRoute {
        route,
        canary: true,
        ..main.clone()
    })
}

/// Adds a weighted canary destination to `main` (`ApplyByWeight`, weights made whole percents as
/// `normalizeWeightedCluster` does); the main route's header changes move to its own destination.
pub fn weight_canary(
    main: &mut PathRoute,
    weight: u32,
    total: u32,
    destination: &Value,
    a: &Annotations,
) {
    let Some(routes) = main.route["route"].as_array_mut() else {
        return;
    };
    let Some(first) = routes.first_mut() else {
        return;
    };
    let canary_percent = (u64::from(weight) * 100 / u64::from(total.max(1))).min(100);
    let main_percent = 100 - canary_percent;
    first["weight"] = json!(main_percent);
    let mut canary = json!({"destination": destination, "weight": canary_percent});
    if let Some(h) = headers(a) {
        canary["headers"] = h;
    }
    routes.push(canary);
    routes.retain(|r| r["weight"].as_u64() != Some(0));
    if let Some(route) = main.route.as_object_mut() {
        if let Some(h) = route.remove("headers") {
            if let Some(first) = route.get_mut("route").and_then(|r| r.get_mut(0)) {
                if first["destination"] != *destination {
                    first["headers"] = h;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::ingress::annotations::parse;

    fn annotations(pairs: &[(&str, &str)]) -> Annotations {
        parse(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .annotations
    }

    fn input<'a>(path: &'a str, path_type: &'a str) -> PathInput<'a> {
        PathInput {
            name: "default/web",
            path,
            path_type,
            destination: destination("v1.default.svc.cluster.local", 80),
            mirror: None,
            http_port: 80,
        }
    }

    #[test]
    fn prefix_paths_match_element_wise() {
        let routes = path_routes(&input("/foo/", "Prefix"), &Annotations::default());
        assert_eq!(
            routes[0].route["match"],
            json!([{"uri": {"exact": "/foo"}}, {"uri": {"prefix": "/foo/"}}])
        );
        let routes = path_routes(
            &input("/svc/(.*)", "ImplementationSpecific"),
            &annotations(&[("nginx.ingress.kubernetes.io/rewrite-target", "/$1")]),
        );
        assert_eq!(routes[0].kind, PathKind::PrefixRegex);
        assert_eq!(
            routes[0].route["rewrite"]["uriRegexRewrite"],
            json!({"match": "/svc/(.*).*", "rewrite": "/\\1"})
        );
    }

    #[test]
    fn ssl_redirect_applies_on_the_http_port_only() {
        let routes = path_routes(
            &input("/", "Prefix"),
            &annotations(&[("nginx.ingress.kubernetes.io/ssl-redirect", "true")]),
        );
        assert_eq!(routes.len(), 2);
        assert_eq!(routes[0].route["match"][0]["port"], json!(80));
        assert_eq!(routes[0].route["redirect"]["redirectCode"], json!(308));
        assert!(routes[1].route.get("redirect").is_none());
    }

    #[test]
    fn order_is_higress_order() {
        let none = Annotations::default();
        let mut routes: Vec<PathRoute> = [
            ("/", "Prefix"),
            ("/a", "Prefix"),
            ("/abc", "Prefix"),
            ("/a", "Exact"),
        ]
        .iter()
        .flat_map(|(p, t)| path_routes(&input(p, t), &none))
        .collect();
        routes.sort_by_key(|r| r.order());
        let order: Vec<(PathKind, &str)> =
            routes.iter().map(|r| (r.kind, r.path.as_str())).collect();
        assert_eq!(
            order,
            [
                (PathKind::Exact, "/a"),
                (PathKind::Prefix, "/abc"),
                (PathKind::Prefix, "/a"),
                (PathKind::Prefix, "/")
            ]
        );
    }

    #[test]
    fn canaries() {
        let main = path_routes(&input("/echo", "Exact"), &Annotations::default()).remove(0);
        let canary_dest = destination("v2.default.svc.cluster.local", 80);
        let c = header_canary(
            &main,
            &Canary::Header {
                name: "x-canary".into(),
                value: Some("yes".into()),
                pattern: None,
            },
            &canary_dest,
            &Annotations::default(),
        )
        .unwrap();
        assert_eq!(
            c.route["match"][0]["headers"],
            json!({"x-canary": {"regex": "always|yes"}})
        );
        let mut weighted = main.clone();
        weight_canary(
            &mut weighted,
            30,
            100,
            &canary_dest,
            &Annotations::default(),
        );
        assert_eq!(weighted.route["route"][0]["weight"], json!(70));
        assert_eq!(weighted.route["route"][1]["weight"], json!(30));
        let mut all = main;
        weight_canary(&mut all, 100, 100, &canary_dest, &Annotations::default());
        assert_eq!(all.route["route"].as_array().map(Vec::len), Some(1));
    }
}
