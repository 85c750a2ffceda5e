//! Certificate bundles: takes a service's names and a lifetime and yields a fresh CA + serving certificate
//! (ECDSA P-256, PEM), or decides whether an existing bundle can be kept.

use std::net::IpAddr;

use anyhow::{bail, Context};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData,
};
use time::{Duration, OffsetDateTime};
use x509_parser::extensions::GeneralName;

/// The three PEM documents certs-gen writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The CA certificate (what the API server must trust: the webhook's `caBundle`).
    pub ca_crt: String,
    /// The serving certificate.
    pub tls_crt: String,
    /// The serving certificate's private key (PKCS#8).
    pub tls_key: String,
}

/// The names a serving certificate must cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// DNS names, in order, without duplicates.
    pub dns: Vec<String>,
    /// IP addresses, in order, without duplicates.
    pub ips: Vec<IpAddr>,
}

impl Names {
    /// The service's in-cluster names (`S`, `S.N`, `S.N.svc`, `S.N.svc.cluster.local`) plus extras.
    pub fn for_service(
        service: &str,
        namespace: &str,
        extra_dns: &[String],
        ips: &[IpAddr],
    ) -> Self {
        let mut dns = vec![
            service.to_string(),
            format!("{service}.{namespace}"),
            format!("{service}.{namespace}.svc"),
            format!("{service}.{namespace}.svc.cluster.local"),
        ];
        for name in extra_dns {
            if !dns.contains(name) {
                dns.push(name.clone());
            }
        }
        let mut unique_ips = Vec::new();
        for ip in ips {
            if !unique_ips.contains(ip) {
                unique_ips.push(*ip);
            }
        }
        Names {
            dns,
            ips: unique_ips,
        }
    }
}

/// Creates a new CA and a serving certificate for `names`, both valid for `days` (from five minutes ago, to
/// allow for clock skew).
pub fn generate(names: &Names, days: u32) -> anyhow::Result<Bundle> {
    let now = OffsetDateTime::now_utc();
    generate_between(
        names,
        now - Duration::minutes(5),
        now + Duration::days(i64::from(days)),
    )
}

fn generate_between(
    names: &Names,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
) -> anyhow::Result<Bundle> {
    let mut ca_params = CertificateParams::new(Vec::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "admitpilot webhook CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut sans = names.dns.clone();
    sans.extend(names.ips.iter().map(IpAddr::to_string));
    let mut params = CertificateParams::new(sans)?;
    let common_name = names
        .dns
        .get(2)
        .or(names.dns.first())
        .cloned()
        .unwrap_or_default();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = not_before;
    params.not_after = not_after;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Bundle {
        ca_crt: ca_cert.pem(),
        tls_crt: cert.pem(),
        tls_key: key.serialize_pem(),
    })
}

/// Tells whether an existing bundle can be kept: it parses, the key matches, it covers exactly `names`, and
/// at least a third of its lifetime is left. Returns `Ok(expiry)` to keep, or `Err(reason)` to renew.
pub fn check_existing(bundle: &Bundle, names: &Names) -> Result<OffsetDateTime, String> {
    inspect(bundle, names).map_err(|e| format!("{e:#}"))
}

fn inspect(bundle: &Bundle, names: &Names) -> anyhow::Result<OffsetDateTime> {
    let (_, ca_pem) =
        x509_parser::pem::parse_x509_pem(bundle.ca_crt.as_bytes()).context("ca.crt is not PEM")?;
    let ca = ca_pem.parse_x509().context("ca.crt is not a certificate")?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(bundle.tls_crt.as_bytes())
        .context("tls.crt is not PEM")?;
    let cert = pem.parse_x509().context("tls.crt is not a certificate")?;
    if cert.issuer() != ca.subject() {
        bail!("tls.crt was not issued by ca.crt");
    }
    let key = KeyPair::from_pem(&bundle.tls_key).context("tls.key is not a usable private key")?;
    if key.subject_public_key_info() != cert.public_key().raw {
        bail!("tls.key does not belong to tls.crt");
    }

    let mut dns = Vec::new();
    let mut ips = Vec::new();
    if let Some(san) = cert
        .subject_alternative_name()
        .context("tls.crt has a bad SAN extension")?
    {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(d) => dns.push(d.to_string()),
                GeneralName::IPAddress(bytes) => match bytes.len() {
                    4 => ips.push(IpAddr::from(<[u8; 4]>::try_from(*bytes)?)),
                    16 => ips.push(IpAddr::from(<[u8; 16]>::try_from(*bytes)?)),
                    _ => bail!("tls.crt has a malformed IP address SAN"),
                },
                _ => {}
            }
        }
    }
    let (mut want_dns, mut want_ips) = (names.dns.clone(), names.ips.clone());
    dns.sort();
    ips.sort();
    want_dns.sort();
    want_ips.sort();
    if dns != want_dns || ips != want_ips {
        bail!("tls.crt covers other names ({})", describe(&dns, &ips));
    }

    let now = OffsetDateTime::now_utc().unix_timestamp();
    let not_before = cert.validity().not_before.timestamp();
    let not_after = cert
        .validity()
        .not_after
        .timestamp()
        .min(ca.validity().not_after.timestamp());
    if now < not_before || now >= not_after {
        bail!("tls.crt or ca.crt is not valid now");
    }
    let lifetime = not_after - not_before;
    if (not_after - now) * 3 < lifetime {
        bail!("less than a third of the certificate's lifetime is left");
    }
    Ok(OffsetDateTime::from_unix_timestamp(not_after)?)
}

fn describe(dns: &[String], ips: &[IpAddr]) -> String {
    let mut all: Vec<String> = dns.to_vec();
    all.extend(ips.iter().map(IpAddr::to_string));
    all.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names::for_service(
            "admitpilot",
            "higress-system",
            &["extra.example".into()],
            &["10.0.0.1".parse().unwrap()],
        )
    }

    #[test]
    fn covers_the_service_names_and_extras() {
        let names = names();
        assert_eq!(
            names.dns,
            vec![
                "admitpilot",
                "admitpilot.higress-system",
                "admitpilot.higress-system.svc",
                "admitpilot.higress-system.svc.cluster.local",
                "extra.example"
            ]
        );
    }

    #[test]
    fn a_fresh_bundle_is_kept_for_the_same_names_only() {
        let bundle = generate(&names(), 365).unwrap();
        assert!(check_existing(&bundle, &names()).is_ok());
        let other = Names::for_service("admitpilot", "other", &[], &[]);
        let reason = check_existing(&bundle, &other).unwrap_err();
        assert!(reason.contains("other names"), "{reason}");
    }

    #[test]
    fn a_mismatched_key_is_renewed() {
        let mut bundle = generate(&names(), 365).unwrap();
        bundle.tls_key = generate(&names(), 365).unwrap().tls_key;
        assert!(check_existing(&bundle, &names())
            .unwrap_err()
            .contains("does not belong"));
    }

    #[test]
    fn a_bundle_with_less_than_a_third_left_is_renewed() {
        let now = OffsetDateTime::now_utc();
        let old = generate_between(
            &names(),
            now - Duration::days(300),
            now + Duration::days(65),
        )
        .unwrap();
        let reason = check_existing(&old, &names()).unwrap_err();
        assert!(reason.contains("a third"), "{reason}");
        let young = generate_between(
            &names(),
            now - Duration::days(200),
            now + Duration::days(165),
        )
        .unwrap();
        assert!(check_existing(&young, &names()).is_ok());
    }

    #[test]
    fn uses_ecdsa_p256() {
        let bundle = generate(&names(), 1).unwrap();
        let key = KeyPair::from_pem(&bundle.tls_key).unwrap();
        assert_eq!(key.algorithm(), &rcgen::PKCS_ECDSA_P256_SHA256);
    }
}
