//! Envoy resource names (pure): takes ports, hosts, subsets and gateway identities and yields the names Istio
//! gives the matching resources, so EnvoyFilters written for Istio/Higress gateways match unchanged.

/// Cluster-local DNS suffix of Kubernetes Services (Istio's default `cluster.local`).
pub const DEFAULT_DOMAIN_SUFFIX: &str = "cluster.local";

/// Returns the listener name for a gateway port: `0.0.0.0_<port>`.
pub fn listener(port: u32) -> String {
    format!("0.0.0.0_{port}")
}

/// Returns the RDS name shared by every plain-HTTP server on a port: `http.<port>`.
pub fn http_route_config(port: u32) -> String {
    format!("http.{port}")
}

/// Returns the RDS name of one HTTPS server: `https.<port>.<portName>.<gatewayName>.<gatewayNamespace>`.
pub fn https_route_config(port: u32, port_name: &str, gateway: &str, namespace: &str) -> String {
    format!("https.{port}.{port_name}.{gateway}.{namespace}")
}

/// Returns an outbound cluster name: `outbound|<port>|<subset>|<host>`.
pub fn cluster(port: u32, subset: &str, host: &str) -> String {
    format!("outbound|{port}|{subset}|{host}")
}

/// Returns a virtual host name: `<host>:<port>`.
pub fn virtual_host(host: &str, port: u32) -> String {
    format!("{host}:{port}")
}

/// Prefix of a credential naming a Secret of a namespace of its own (Istio's `kubernetes-gateway://<ns>/<name>`,
/// a Gateway API certificate in another namespace); it is its own SDS name.
pub const GATEWAY_CREDENTIAL_PREFIX: &str = "kubernetes-gateway://";

/// The credential of Secret `namespace/name` for a Gateway of another namespace: `kubernetes-gateway://<ns>/<name>`.
pub fn gateway_credential(namespace: &str, name: &str) -> String {
    format!("{GATEWAY_CREDENTIAL_PREFIX}{namespace}/{name}")
}

/// The namespace and name of a `kubernetes-gateway://<ns>/<name>` credential; `None` for any other.
pub fn parse_gateway_credential(credential_name: &str) -> Option<(&str, &str)> {
    credential_name
        .strip_prefix(GATEWAY_CREDENTIAL_PREFIX)?
        .split_once('/')
}

/// Prefix of the credential name of a CA bundle held in a ConfigMap (Istio's `configmap://<ns>/<name>`, what
/// BackendTLSPolicy `caCertificateRefs` become).
pub const CONFIGMAP_CREDENTIAL_PREFIX: &str = "configmap://";

/// The credential of the CA bundle in ConfigMap `namespace/name` (`configmap://<ns>/<name>`).
pub fn configmap_credential(namespace: &str, name: &str) -> String {
    format!("{CONFIGMAP_CREDENTIAL_PREFIX}{namespace}/{name}")
}

/// The namespace and name of a `configmap://<ns>/<name>` credential; `None` for any other.
pub fn parse_configmap_credential(credential_name: &str) -> Option<(&str, &str)> {
    credential_name
        .strip_prefix(CONFIGMAP_CREDENTIAL_PREFIX)?
        .split_once('/')
}

/// Prefix of the credential of an Ingress TLS Secret: `kubernetes-ingress://<namespace>/<name>` (Higress's, without
/// its cluster id).
pub const INGRESS_CREDENTIAL_PREFIX: &str = "kubernetes-ingress://";

/// Returns the SDS name of a gateway credential: `kubernetes://<credentialName>`, or a `kubernetes-gateway://`,
/// `kubernetes-ingress://` or `configmap://` credential as it is (Istio's `credentials.ToResourceName`).
pub fn credential_secret(credential_name: &str) -> String {
    if credential_name.starts_with(GATEWAY_CREDENTIAL_PREFIX)
        || credential_name.starts_with(INGRESS_CREDENTIAL_PREFIX)
        || credential_name.starts_with(CONFIGMAP_CREDENTIAL_PREFIX)
    {
        credential_name.to_string()
    } else {
        format!("kubernetes://{credential_name}")
    }
}

/// Returns the SDS name of a credential's CA bundle: [`credential_secret`] followed by `-cacert`.
pub fn credential_ca_secret(credential_name: &str) -> String {
    format!("{}-cacert", credential_secret(credential_name))
}

/// Prefix of the SDS name of a certificate and key read from files on the gateway.
pub const FILE_CERT_PREFIX: &str = "file-cert:";
/// Prefix of the SDS name of a CA bundle read from a file on the gateway.
pub const FILE_ROOT_PREFIX: &str = "file-root:";

/// Returns the SDS name of a client certificate and key in files, as Istio names it: `file-cert:<cert>~<key>`.
pub fn file_cert_secret(certificate: &str, private_key: &str) -> String {
    format!("{FILE_CERT_PREFIX}{certificate}~{private_key}")
}

/// Returns the SDS name of a CA bundle in a file, as Istio names it: `file-root:<ca>`.
pub fn file_root_secret(ca: &str) -> String {
    format!("{FILE_ROOT_PREFIX}{ca}")
}

/// Returns the fully qualified name of a Kubernetes Service: `<name>.<namespace>.svc.<suffix>`.
pub fn service_fqdn(name: &str, namespace: &str, domain_suffix: &str) -> String {
    format!("{name}.{namespace}.svc.{domain_suffix}")
}

/// Resolves a host as Istio does for VirtualService destinations and DestinationRule hosts: a name without
/// dots (`reviews`) is a Service in `namespace`; anything else (FQDN, wildcard, ServiceEntry host) is kept.
pub fn resolve_short_name(host: &str, namespace: &str, domain_suffix: &str) -> String {
    if host.contains('.') || host.starts_with('*') {
        host.to_string()
    } else {
        service_fqdn(host, namespace, domain_suffix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_istio() {
        assert_eq!(listener(8443), "0.0.0.0_8443");
        assert_eq!(http_route_config(80), "http.80");
        assert_eq!(
            https_route_config(443, "https", "gw", "istio-system"),
            "https.443.https.gw.istio-system"
        );
        assert_eq!(
            cluster(9080, "v1", "reviews.default.svc.cluster.local"),
            "outbound|9080|v1|reviews.default.svc.cluster.local"
        );
        assert_eq!(cluster(80, "", "a.b"), "outbound|80||a.b");
        assert_eq!(virtual_host("*.example.com", 443), "*.example.com:443");
        assert_eq!(credential_ca_secret("cert"), "kubernetes://cert-cacert");
        let other = gateway_credential("certs", "gw");
        assert_eq!(credential_secret(&other), "kubernetes-gateway://certs/gw");
        assert_eq!(
            credential_ca_secret(&other),
            "kubernetes-gateway://certs/gw-cacert"
        );
        assert_eq!(parse_gateway_credential(&other), Some(("certs", "gw")));
        assert_eq!(parse_gateway_credential("gw"), None);
    }

    #[test]
    fn short_names_resolve_in_namespace() {
        assert_eq!(
            resolve_short_name("reviews", "shop", DEFAULT_DOMAIN_SUFFIX),
            "reviews.shop.svc.cluster.local"
        );
        assert_eq!(
            resolve_short_name("api.example.com", "shop", DEFAULT_DOMAIN_SUFFIX),
            "api.example.com"
        );
        assert_eq!(resolve_short_name("*", "shop", DEFAULT_DOMAIN_SUFFIX), "*");
    }
}
