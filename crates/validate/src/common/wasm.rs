//! Wasm modules (pure): takes the fields that locate and configure a Wasm module (URL, SHA-256, pull secret, plugin
//! name, VM env) and `match` traffic selectors, records Istio's findings; shared by Istio's WasmPlugin and
//! TrafficExtension and Higress's WasmPlugin.

use std::collections::BTreeSet;

use super::address::check_port;
use admitpilot_model::istio::wasm_plugin::{EnvValueSource, TrafficSelector, VmConfig};
use admitpilot_model::Findings;

/// Longest image pull secret name (a Kubernetes object name).
const MAX_PULL_SECRET_LEN: usize = 253;

/// Longest plugin name.
const MAX_PLUGIN_NAME_LEN: usize = 256;

/// Longest VM environment variable name, and most variables.
const MAX_ENV_NAME_LEN: usize = 256;

const MAX_ENV_VARS: usize = 256;

/// Longest inline environment value.
const MAX_ENV_VALUE_LEN: usize = 2048;

/// The fields that locate and configure a Wasm module, common to Istio's and Higress's WasmPlugin.
pub struct WasmModule<'a> {
    /// `url`.
    pub url: Option<&'a str>,
    /// `sha256`.
    pub sha256: Option<&'a str>,
    /// `imagePullSecret`.
    pub image_pull_secret: Option<&'a str>,
    /// `pluginName`.
    pub plugin_name: Option<&'a str>,
    /// `vmConfig`.
    pub vm_config: Option<&'a VmConfig>,
}

/// Validates a Wasm module's location and VM settings; `path` is the object holding the fields. The name rules
/// (`imagePullSecret`, `pluginName`, env names) mirror Istio's `validateWasmPluginImagePullSecret`,
/// `validateWasmPluginName` and `validateWasmPluginVMConfig`, with their texts; an explicitly empty value is the
/// CRD's `minLength: 1`, for which the webhook has no text. Higress's WasmPlugin has no validation of its own.
pub fn validate_module(module: &WasmModule<'_>, path: &str, out: &mut Findings) {
    match module.url {
        // Istio's `validateWasmPluginURL` text.
        None | Some("") => out.error(format!("{path}.url"), "url field needs to be set"),
        Some(url) => {
            if let Err(e) = check_wasm_url(url) {
                out.error(format!("{path}.url"), e);
            }
        }
    }
    if let Some(sha) = module.sha256 {
        if !sha.is_empty()
            && (sha.len() != 64 || !sha.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')))
        {
            out.error(
                format!("{path}.sha256"),
                "sha256 must be 64 lower-case hexadecimal characters",
            );
        }
    }
    if let Some(secret) = module.image_pull_secret {
        if secret.is_empty() {
            out.error(
                format!("{path}.imagePullSecret"),
                "imagePullSecret must not be empty when set",
            );
        } else if secret.len() > MAX_PULL_SECRET_LEN {
            out.error(
                format!("{path}.imagePullSecret"),
                format!(
                    "imagePullSecret field must be less than {MAX_PULL_SECRET_LEN} characters long"
                ),
            );
        }
    }
    if let Some(name) = module.plugin_name {
        if name.is_empty() {
            out.error(
                format!("{path}.pluginName"),
                "pluginName must not be empty when set",
            );
        } else if name.len() > MAX_PLUGIN_NAME_LEN {
            // Istio's text says 255 where its limit is 256.
            out.error(
                format!("{path}.pluginName"),
                "pluginName field must be less than 255 characters long",
            );
        }
    }
    if let Some(vm) = module.vm_config {
        validate_vm_config(vm, &format!("{path}.vmConfig"), out);
    }
}

fn validate_vm_config(vm: &VmConfig, path: &str, out: &mut Findings) {
    if vm.env.len() > MAX_ENV_VARS {
        out.error(
            format!("{path}.env"),
            format!("at most {MAX_ENV_VARS} environment variables are allowed"),
        );
    }
    let mut seen = BTreeSet::new();
    for (i, env) in vm.env.iter().enumerate() {
        let item = format!("{path}.env[{i}]");
        let name = env.name.as_deref().unwrap_or_default();
        if name.is_empty() {
            out.error(format!("{item}.name"), "spec.vmConfig.env invalid");
        } else if name.len() > MAX_ENV_NAME_LEN {
            // Istio's text says 255 where its limit is 256.
            out.error(
                format!("{item}.name"),
                "env.name field must be less than 255 characters long",
            );
        } else if !seen.insert(name) {
            out.error(format!("{item}.name"), "duplicate env");
        }
        if env.value_from == Some(EnvValueSource::Host) && env.value.is_some() {
            out.error(
                format!("{item}.value"),
                "value may only be set when valueFrom is INLINE",
            );
        }
        if env
            .value
            .as_ref()
            .is_some_and(|v| v.len() > MAX_ENV_VALUE_LEN)
        {
            out.error(
                format!("{item}.value"),
                format!("value is longer than {MAX_ENV_VALUE_LEN} characters"),
            );
        }
    }
}

/// Validates `match` traffic selectors: every port is set and in 1..65535, with no port listed twice.
pub fn validate_traffic_selectors(selectors: &[TrafficSelector], path: &str, out: &mut Findings) {
    for (i, selector) in selectors.iter().enumerate() {
        let mut seen = BTreeSet::new();
        for (j, port) in selector.ports.iter().enumerate() {
            let item = format!("{path}[{i}].ports[{j}].number");
            match port.number {
                None => out.error(item, "port number is required"),
                Some(n) => {
                    if let Err(e) = check_port(n) {
                        out.error(item, e);
                    } else if !seen.insert(n) {
                        out.error(item, format!("port {n} is listed twice"));
                    }
                }
            }
        }
    }
}

/// Checks a module URL: with `://` it must parse as a URI whose scheme is `oci`, `file`, `http` or `https`;
/// without, it is an OCI image reference (`registry:5000/image:tag`, `bar:latest`, or a local path) made of
/// letters, digits and `._-/:@+`. Istio's webhook reads `bar:latest` as scheme `bar`, but the CRD test data (and Istio's agent,
/// which treats a URL without `://` as OCI) accept it, so admitpilot follows the latter.
pub fn check_wasm_url(url: &str) -> Result<(), String> {
    if !url.contains("://") {
        let is_reference = url
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"._-/:@+".contains(&c));
        return if is_reference {
            Ok(())
        } else {
            Err(format!(
                "url {url:?} has no scheme and is not a valid OCI image reference"
            ))
        };
    }
    let scheme = parse_request_uri(url).map_err(|e| format!("url {url:?} does not parse: {e}"))?;
    if matches!(scheme.as_str(), "oci" | "file" | "http" | "https") {
        Ok(())
    } else {
        Err(format!(
            "url scheme {scheme:?} is not supported; use oci, file, http or https"
        ))
    }
}

/// Parses an absolute URI or absolute path the way Go's `url.ParseRequestURI` does, returning the lower-cased
/// scheme. Only what decides acceptance is modelled: control characters, the scheme, the authority (user info,
/// host, port) and `%` escapes.
fn parse_request_uri(raw: &str) -> Result<String, String> {
    if raw.bytes().any(|c| c < 0x20 || c == 0x7f) {
        return Err("contains a control character".into());
    }
    let (scheme, rest) = split_scheme(raw)?;
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    if !rest.starts_with('/') {
        return if scheme.is_empty() {
            Err("not an absolute URI or path".into())
        } else {
            Ok(scheme)
        };
    }
    let path = match rest.strip_prefix("//") {
        Some(after) if !scheme.is_empty() => {
            let (authority, path) = after.find('/').map_or((after, ""), |i| after.split_at(i));
            check_authority(authority)?;
            path
        }
        _ => rest,
    };
    check_escapes(path)?;
    Ok(scheme)
}

/// Splits `scheme:rest`; a first segment that is not a scheme (a digit first, or another character before `:`)
/// means there is no scheme.
fn split_scheme(raw: &str) -> Result<(String, &str), String> {
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing scheme before ':'".into()),
            ':' => return Ok((raw[..i].to_ascii_lowercase(), &raw[i + 1..])),
            _ => return Ok((String::new(), raw)),
        }
    }
    Ok((String::new(), raw))
}

fn check_authority(authority: &str) -> Result<(), String> {
    let host = match authority.rfind('@') {
        Some(i) => {
            let user = &authority[..i];
            if !user
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c))
            {
                return Err("invalid user info".into());
            }
            check_escapes(user)?;
            &authority[i + 1..]
        }
        None => authority,
    };
    let port = if let Some(v6) = host.strip_prefix('[') {
        let (_, after) = v6.split_once(']').ok_or("unclosed '[' in host")?;
        if !after.is_empty() && !after.starts_with(':') {
            return Err("invalid characters after IPv6 address".into());
        }
        after.strip_prefix(':')
    } else {
        if host
            .bytes()
            .any(|c| !(c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:%<>\"".contains(&c)))
        {
            return Err("invalid character in host".into());
        }
        check_escapes(host)?;
        host.rfind(':').map(|i| &host[i + 1..])
    };
    match port {
        Some(p) if !p.bytes().all(|c| c.is_ascii_digit()) => Err(format!("invalid port {p:?}")),
        _ => Ok(()),
    }
}

fn check_escapes(s: &str) -> Result<(), String> {
    match bad_escape(s) {
        Some(_) => Err("invalid % escape".into()),
        None => Ok(()),
    }
}

/// The first `%` escape that is not `%` and two hex digits (as Go's URL parser reports it), if any.
pub fn bad_escape(s: &str) -> Option<&str> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let ok = bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
            if !ok {
                return s.get(i..(i + 3).min(s.len())).or(Some("%"));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    None
}
