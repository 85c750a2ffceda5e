package main

// istio.go: takes a parsed case and yields the RBAC filters Istio's own builder
// (istio.io/istio/pilot/pkg/security/authz/builder) builds for its proxy, as snake_case proto-JSON, the form
// `admitpilot render` prints: the CUSTOM builder's filters first (with no extension provider configured, as the
// harness configures none on either side), then AUDIT, DENY and ALLOW, as istiod orders them on a gateway.

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	meshconfig "istio.io/api/mesh/v1alpha1"

	"istio.io/istio/pilot/pkg/config/memory"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/security/authz/builder"
	"istio.io/istio/pilot/pkg/security/trustdomain"
	"istio.io/istio/pkg/config/schema/collections"
	"istio.io/istio/pkg/config/schema/gvk"
)

// Filters is what one side built for a proxy: the HTTP RBAC filters of its HTTP connection managers and the
// network RBAC filters of its TCP chains, each as generic JSON.
type Filters struct {
	HTTP []any `json:"http"`
	TCP  []any `json:"tcp"`
}

func istioFilters(pc parsedCase) (Filters, error) {
	store := memory.Make(collections.Pilot)
	for _, c := range pc.configs {
		if c.GroupVersionKind != gvk.AuthorizationPolicy {
			continue
		}
		if _, err := store.Create(c); err != nil {
			return Filters{}, fmt.Errorf("istio store: %w", err)
		}
	}
	policies := model.GetAuthorizationPolicies(&model.Environment{ConfigStore: store})
	policies.RootNamespace = pc.proxy.RootNamespace
	proxy := &model.Proxy{
		ID:              "gateway",
		Type:            model.Router,
		ConfigNamespace: pc.proxy.Namespace,
		Labels:          pc.proxy.Labels,
		Metadata:        &model.NodeMetadata{Labels: pc.proxy.Labels, Namespace: pc.proxy.Namespace},
	}
	result := policies.ListAuthorizationPolicies(model.PolicyMatcherForProxy(proxy))
	bundle := trustdomain.NewBundle(pc.proxy.TrustDomain, nil)
	// No extension provider: CUSTOM policies take the builder's "bad provider" path, as on admitpilot's side.
	push := &model.PushContext{Mesh: &meshconfig.MeshConfig{RootNamespace: pc.proxy.RootNamespace}}
	var out Filters
	for _, custom := range []bool{true, false} {
		b := builder.New(bundle, push, result, builder.Option{IsCustomBuilder: custom})
		if b == nil {
			continue
		}
		for _, f := range b.BuildHTTP() {
			v, err := toJSON(f)
			if err != nil {
				return out, err
			}
			out.HTTP = append(out.HTTP, v)
		}
		for _, f := range b.BuildTCP() {
			v, err := toJSON(f)
			if err != nil {
				return out, err
			}
			out.TCP = append(out.TCP, v)
		}
	}
	return out, nil
}

func toJSON(m proto.Message) (any, error) {
	data, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	var v any
	return v, json.Unmarshal(data, &v)
}
