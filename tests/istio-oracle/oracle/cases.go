package main

// cases.go: takes one case file (YAML documents: AuthorizationPolicies, optionally RequestAuthentications, and an
// optional `# proxy:` line) and yields the gateway proxy both sides render it for.

import (
	"fmt"
	"sort"
	"strings"

	"istio.io/istio/pilot/pkg/config/kube/crd"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/gvk"
	"istio.io/istio/pkg/config/validation"

	authpb "istio.io/api/security/v1beta1"
)

const (
	defaultNamespace = "default"
	// rootNamespace is Istio's default mesh root namespace (meshConfig.rootNamespace).
	rootNamespace = "istio-system"
	// trustDomain is Istio's default trust domain; admitpilot has no trust-domain setting.
	trustDomain = "cluster.local"
	// gatewayLabel is put on every proxy; the harness's Gateway selects it.
	gatewayLabelKey, gatewayLabelValue = "admitpilot-authz-diff", "gateway"
	gatewayNameLabel                   = "gateway.networking.k8s.io/gateway-name"
)

// proxyContext is the gateway proxy a case is rendered for.
type proxyContext struct {
	Namespace     string
	Labels        map[string]string
	RootNamespace string
	TrustDomain   string
}

func (p proxyContext) labelText() string {
	keys := make([]string, 0, len(p.Labels))
	for k := range p.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+p.Labels[k])
	}
	return strings.Join(parts, ",")
}

// parsedCase is a case's documents as Istio reads them.
type parsedCase struct {
	configs []config.Config
	proxy   proxyContext
	// invalid holds Istio's validation errors: a case Istio's webhook refuses is not compared.
	invalid []string
	custom  bool
}

// parseCase reads the documents with Istio's CRD parser, validates each with Istio's validation, and chooses the
// proxy: the `# proxy: namespace=NS labels=k=v,k2=v2` line when present, otherwise the namespace of the first
// AuthorizationPolicy and the union of every policy's selector labels and the Gateway names its targetRefs name
// (so each policy applies unless the case says otherwise).
func parseCase(text string) (parsedCase, error) {
	pc := parsedCase{proxy: proxyContext{
		Labels:        map[string]string{gatewayLabelKey: gatewayLabelValue},
		RootNamespace: rootNamespace,
		TrustDomain:   trustDomain,
	}}
	// ParseInputs also runs each kind's validation: its refusal is Istio's webhook refusing the case.
	configs, _, err := crd.ParseInputs(text)
	if err != nil {
		pc.invalid = append(pc.invalid, err.Error())
		return pc, nil
	}
	for i := range configs {
		c := &configs[i]
		if c.Namespace == "" {
			c.Namespace = defaultNamespace
		}
		var verr error
		switch c.GroupVersionKind {
		case gvk.AuthorizationPolicy:
			_, verr = validation.ValidateAuthorizationPolicy(*c)
			spec := c.Spec.(*authpb.AuthorizationPolicy)
			if pc.proxy.Namespace == "" {
				pc.proxy.Namespace = c.Namespace
			}
			for k, v := range spec.GetSelector().GetMatchLabels() {
				pc.proxy.Labels[k] = v
			}
			refs := spec.GetTargetRefs()
			if spec.GetTargetRef() != nil {
				refs = append(refs, spec.GetTargetRef())
			}
			for _, r := range refs {
				if r.GetKind() == "Gateway" && r.GetGroup() == "gateway.networking.k8s.io" {
					pc.proxy.Labels[gatewayNameLabel] = r.GetName()
				}
			}
			if spec.GetAction() == authpb.AuthorizationPolicy_CUSTOM {
				pc.custom = true
			}
		case gvk.RequestAuthentication:
			_, verr = validation.ValidateRequestAuthentication(*c)
		}
		if verr != nil {
			pc.invalid = append(pc.invalid, fmt.Sprintf("%s %s/%s: %v", c.GroupVersionKind.Kind, c.Namespace, c.Name, verr))
		}
	}
	pc.configs = configs
	if pc.proxy.Namespace == "" {
		pc.proxy.Namespace = defaultNamespace
	}
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "# proxy:")
		if !ok {
			continue
		}
		for _, field := range strings.Fields(rest) {
			key, value, _ := strings.Cut(field, "=")
			switch key {
			case "namespace":
				pc.proxy.Namespace = value
			case "labels":
				pc.proxy.Labels = map[string]string{gatewayLabelKey: gatewayLabelValue}
				for _, kv := range strings.Split(value, ",") {
					if k, v, ok := strings.Cut(kv, "="); ok {
						pc.proxy.Labels[k] = v
					}
				}
			default:
				return pc, fmt.Errorf("unknown `# proxy:` field %q", key)
			}
		}
	}
	return pc, nil
}
