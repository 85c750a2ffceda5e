//! Flags shared by several commands: takes their text, yields library settings (label maps, [`IngressOptions`]).

use std::collections::BTreeMap;

use admitpilot::model::ingress::{IngressOptions, DEFAULT_CLASS, DEFAULT_CONTROLLER};
use clap::Args;

/// Parses `k=v,k2=v2` into a label map (blanks around pairs ignored; an empty text is no labels).
pub fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("`{pair}` is not key=value"));
        };
        if key.is_empty() {
            return Err(format!("`{pair}` has an empty key"));
        }
        labels.insert(key.to_string(), value.to_string());
    }
    Ok(labels)
}

/// Parses a gateway selector: labels as [`parse_labels`] reads them, at least one (an empty selector would serve
/// Ingresses to every gateway).
fn parse_selector(text: &str) -> Result<BTreeMap<String, String>, String> {
    let labels = parse_labels(text)?;
    if labels.is_empty() {
        return Err("needs at least one KEY=VALUE".into());
    }
    Ok(labels)
}

/// Which Ingresses are served, to which gateways and on which ports: the flags of Higress's controller that decide
/// it, under admitpilot's names.
#[derive(Debug, Clone, Args)]
pub struct IngressArgs {
    /// The Ingress class served (Higress's --ingressClass): Ingresses whose `kubernetes.io/ingress.class`
    /// annotation or `spec.ingressClassName` names it, or names an IngressClass of --ingress-controller. Empty
    /// serves every Ingress, whatever its class.
    #[arg(long, default_value = DEFAULT_CLASS, value_name = "CLASS")]
    pub ingress_class: String,

    /// The IngressClass `spec.controller` whose classes are served, the default class among them taking
    /// Ingresses that name none (what Higress's chart writes in its IngressClass; Higress's controller has no flag
    /// for it).
    #[arg(long, default_value = DEFAULT_CONTROLLER, value_name = "NAME")]
    pub ingress_controller: String,

    /// Labels of the gateway pods that serve Ingresses (Higress's --gatewaySelectorKey and
    /// --gatewaySelectorValue, as one KEY=VALUE; more pairs all have to match).
    #[arg(
        long,
        default_value = "higress=higress-system-higress-gateway",
        value_parser = parse_selector,
        value_name = "KEY=VALUE[,KEY=VALUE]"
    )]
    pub ingress_gateway_selector: BTreeMap<String, String>,

    /// Port of those gateways' HTTP listener for Ingresses (Higress's --gatewayHttpPort).
    #[arg(
        long,
        default_value_t = 80,
        value_parser = clap::value_parser!(u32).range(1..=65535),
        value_name = "PORT"
    )]
    pub ingress_http_port: u32,

    /// Port of those gateways' HTTPS listener for Ingresses with `tls` (Higress's --gatewayHttpsPort).
    #[arg(
        long,
        default_value_t = 443,
        value_parser = clap::value_parser!(u32).range(1..=65535),
        value_name = "PORT"
    )]
    pub ingress_https_port: u32,
}

impl IngressArgs {
    /// The Ingress options these flags set.
    pub fn options(&self) -> IngressOptions {
        IngressOptions {
            controller: self.ingress_controller.clone(),
            class: self.ingress_class.clone(),
            gateway_selector: self.ingress_gateway_selector.clone(),
            http_port: self.ingress_http_port,
            https_port: self.ingress_https_port,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        ingress: IngressArgs,
    }

    fn parse(args: &[&str]) -> Result<IngressOptions, clap::Error> {
        Flags::try_parse_from(std::iter::once("test").chain(args.iter().copied()))
            .map(|flags| flags.ingress.options())
    }

    #[test]
    fn labels_parse() {
        let labels = parse_labels("app=gw, istio=ingressgateway").unwrap();
        assert_eq!(labels.len(), 2);
        assert_eq!(labels["istio"], "ingressgateway");
        assert!(parse_labels("novalue").is_err());
        assert!(parse_labels("=x").is_err());
        assert!(parse_labels("").unwrap().is_empty());
    }

    #[test]
    fn ingress_defaults_are_higress_defaults() {
        assert_eq!(parse(&[]).unwrap(), IngressOptions::default());
    }

    #[test]
    fn ingress_flags_set_the_options() {
        let options = parse(&[
            "--ingress-class=",
            "--ingress-controller=example.com/ingress",
            "--ingress-gateway-selector=app=gw,tier=edge",
            "--ingress-http-port=8080",
            "--ingress-https-port=8443",
        ])
        .unwrap();
        assert_eq!(
            options,
            IngressOptions {
                controller: "example.com/ingress".into(),
                class: String::new(),
                gateway_selector: BTreeMap::from([
                    ("app".to_string(), "gw".to_string()),
                    ("tier".to_string(), "edge".to_string()),
                ]),
                http_port: 8080,
                https_port: 8443,
            }
        );
    }

    /// `serve`, `render` and `analyze` translate, so each takes the Ingress flags, and its --help says which Higress
    /// flag each mirrors.
    #[test]
    fn commands_that_translate_take_the_ingress_flags() {
        use clap::CommandFactory;

        let mut cli = super::super::Cli::command();
        cli.build();
        for name in ["serve", "render", "analyze"] {
            let command = cli.find_subcommand_mut(name).expect(name);
            for (flag, higress) in [
                ("ingress-class", "--ingressClass"),
                ("ingress-controller", "IngressClass"),
                ("ingress-gateway-selector", "--gatewaySelectorKey"),
                ("ingress-http-port", "--gatewayHttpPort"),
                ("ingress-https-port", "--gatewayHttpsPort"),
            ] {
                let arg = command
                    .get_arguments()
                    .find(|a| a.get_long() == Some(flag))
                    .unwrap_or_else(|| panic!("{name} --{flag}"));
                let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
                assert!(help.contains(higress), "{name} --{flag}: {help}");
            }
        }
    }

    #[test]
    fn bad_ingress_flags_are_usage_errors() {
        for args in [
            &["--ingress-gateway-selector="][..],
            &["--ingress-gateway-selector=higress"],
            &["--ingress-http-port=0"],
            &["--ingress-https-port=65536"],
        ] {
            let error = parse(args).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{args:?}"
            );
        }
    }
}
