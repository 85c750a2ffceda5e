//! certs-gen: creates the admitpilot webhook's CA and serving certificate (ECDSA P-256), writes them as PEM
//! files and/or a `kubernetes.io/tls` Secret, and puts the CA into a ValidatingWebhookConfiguration's
//! `caBundle`. Safe to re-run: a bundle still valid for the same names with a third of its life left is kept.

mod bundle;
mod kube;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use bundle::{Bundle, Names};

/// Generates the admitpilot webhook's certificates and wires them into Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "certs-gen", version, about)]
struct Args {
    /// Name of the webhook's Service.
    #[arg(long)]
    service: String,
    /// Namespace of the Service (and of the Secret).
    #[arg(long)]
    namespace: String,
    /// Folder for ca.crt, tls.crt and tls.key (required unless --secret is given).
    #[arg(long, required_unless_present = "secret")]
    out_dir: Option<PathBuf>,
    /// Extra DNS name for the serving certificate (repeatable).
    #[arg(long = "dns-name")]
    dns_names: Vec<String>,
    /// Extra IP address for the serving certificate (repeatable).
    #[arg(long = "ip")]
    ips: Vec<IpAddr>,
    /// Lifetime of new certificates, in days.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=3650))]
    days: u32,
    /// Renew even if the existing certificates are still good.
    #[arg(long)]
    force: bool,
    /// Store the bundle in this kubernetes.io/tls Secret in --namespace (and read the existing one from it).
    #[arg(long)]
    secret: Option<String>,
    /// Set caBundle on every webhook of this ValidatingWebhookConfiguration.
    #[arg(long)]
    webhook_config: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("certs-gen: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("certs-gen: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let names = Names::for_service(&args.service, &args.namespace, &args.dns_names, &args.ips);
    let client = match (&args.secret, &args.webhook_config) {
        (None, None) => None,
        _ => Some(kube::client().await?),
    };
    let existing = match (&client, &args.secret) {
        (Some(client), Some(secret)) => kube::read_secret(client, &args.namespace, secret).await?,
        _ => match &args.out_dir {
            Some(dir) => read_dir(dir)?,
            None => None,
        },
    };
    let kept = existing.clone();
    let bundle = choose(existing, &names, &args)?;
    if let Some(dir) = &args.out_dir {
        write_dir(dir, &bundle)?;
    }
    if let (Some(client), Some(secret)) = (&client, &args.secret) {
        if kept.as_ref() == Some(&bundle) {
            println!(
                "Secret {}/{secret} already holds these certificates",
                args.namespace
            );
        } else {
            kube::write_secret(client, &args.namespace, secret, &bundle).await?;
            println!(
                "Secret {}/{secret} holds the new certificates",
                args.namespace
            );
        }
    }
    if let (Some(client), Some(config)) = (&client, &args.webhook_config) {
        match kube::patch_ca_bundle(client, config, &bundle.ca_crt).await? {
            0 => println!("ValidatingWebhookConfiguration {config}: caBundle already up to date"),
            n => {
                println!("ValidatingWebhookConfiguration {config}: caBundle set on {n} webhook(s)")
            }
        }
    }
    Ok(())
}

/// Keeps a still-good bundle, or generates a new one.
fn choose(existing: Option<Bundle>, names: &Names, args: &Args) -> anyhow::Result<Bundle> {
    match existing {
        Some(bundle) if !args.force => match bundle::check_existing(&bundle, names) {
            Ok(expiry) => {
                println!(
                    "existing certificates are valid for the same names until {expiry} (at least a third of \
                     their lifetime left); keeping them (use --force to renew)"
                );
                return Ok(bundle);
            }
            Err(reason) => println!("renewing the existing certificates: {reason}"),
        },
        Some(_) => println!("renewing the existing certificates (--force)"),
        None => {}
    }
    let bundle = bundle::generate(names, args.days)?;
    println!(
        "generated a new CA and serving certificate for {} (valid {} days)",
        names.dns.join(", "),
        args.days
    );
    Ok(bundle)
}

/// Reads ca.crt, tls.crt and tls.key from `dir`; `None` when any is missing.
fn read_dir(dir: &Path) -> anyhow::Result<Option<Bundle>> {
    let read = |name: &str| -> anyhow::Result<Option<String>> {
        let path = dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
        }
    };
    Ok(
        match (read("ca.crt")?, read("tls.crt")?, read("tls.key")?) {
            (Some(ca_crt), Some(tls_crt), Some(tls_key)) => Some(Bundle {
                ca_crt,
                tls_crt,
                tls_key,
            }),
            _ => None,
        },
    )
}

/// Writes the bundle into `dir` (each file replaced atomically; the key readable by its owner only).
fn write_dir(dir: &Path, bundle: &Bundle) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write_file(&dir.join("ca.crt"), &bundle.ca_crt, 0o644)?;
    write_file(&dir.join("tls.key"), &bundle.tls_key, 0o600)?;
    write_file(&dir.join("tls.crt"), &bundle.tls_crt, 0o644)?;
    println!("wrote ca.crt, tls.crt and tls.key to {}", dir.display());
    Ok(())
}

fn write_file(path: &Path, contents: &str, mode: u32) -> anyhow::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;

    let tmp = path.with_extension("certs-gen-tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    // The mode given to open() applies only when the file is new; set it in case a stale temp file existed.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot set permissions on {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))
}
