package main

// admitpilot.go: takes a case file and its proxy and yields the RBAC filters `admitpilot render` builds for that
// proxy. The case's documents go in a temporary config folder beside a Gateway (one HTTP and one TCP server) and
// the VirtualService and ServiceEntry its routes need, all named `admitpilot-authz-diff*`; the RBAC filters are
// read from the first HTTP connection manager and the first TCP proxy chain of the rendered listeners.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const harnessObjects = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: admitpilot-authz-diff
  namespace: {{NS}}
spec:
  selector:
    admitpilot-authz-diff: gateway
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
  - port: {number: 9000, name: tcp, protocol: TCP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: admitpilot-authz-diff
  namespace: {{NS}}
spec:
  hosts: ["*"]
  gateways: [admitpilot-authz-diff]
  http:
  - route:
    - destination: {host: admitpilot-authz-diff.backend, port: {number: 80}}
  tcp:
  - match:
    - port: 9000
    route:
    - destination: {host: admitpilot-authz-diff.backend, port: {number: 80}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: admitpilot-authz-diff
  namespace: {{NS}}
spec:
  hosts: [admitpilot-authz-diff.backend]
  location: MESH_INTERNAL
  resolution: STATIC
  ports:
  - {number: 80, name: http, protocol: HTTP}
  endpoints:
  - address: 127.0.0.1
`

// admitpilotFilters renders the case with admitpilot. The returned text is what admitpilot wrote on stderr
// (refusals of documents are logged there).
func admitpilotFilters(bin, caseFile string, p proxyContext) (Filters, string, error) {
	dir, err := os.MkdirTemp("", "admitpilot-authz-diff-")
	if err != nil {
		return Filters{}, "", err
	}
	defer os.RemoveAll(dir)
	text, err := os.ReadFile(caseFile)
	if err != nil {
		return Filters{}, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "case.yaml"), text, 0o600); err != nil {
		return Filters{}, "", err
	}
	gw := strings.ReplaceAll(harnessObjects, "{{NS}}", p.Namespace)
	if err := os.WriteFile(filepath.Join(dir, "admitpilot-authz-diff.yaml"), []byte(gw), 0o600); err != nil {
		return Filters{}, "", err
	}
	cmd := exec.Command(bin, "render", "--config-dir", dir, "--namespace", p.Namespace, "--labels", p.labelText(),
		"--output", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "RUST_LOG=warn")
	if err := cmd.Run(); err != nil {
		return Filters{}, stderr.String(), fmt.Errorf("admitpilot render: %v: %s", err, stderr.String())
	}
	var rendered map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &rendered); err != nil {
		return Filters{}, stderr.String(), fmt.Errorf("admitpilot render output: %w", err)
	}
	f, err := extract(rendered)
	return f, stderr.String(), err
}

// extract finds the RBAC filters of the rendered listeners: those of the first HTTP connection manager and of the
// first chain that ends in a TCP proxy. Every other chain of the same kind must carry the same ones.
func extract(rendered map[string]any) (Filters, error) {
	var http, tcp [][]any
	for _, l := range list(rendered["listeners"]) {
		for _, chain := range list(obj(l)["filter_chains"]) {
			var network []any
			for _, f := range list(obj(chain)["filters"]) {
				name, _ := obj(f)["name"].(string)
				switch name {
				case "envoy.filters.network.http_connection_manager":
					var rbac []any
					for _, hf := range list(obj(obj(f)["typed_config"])["http_filters"]) {
						if n, _ := obj(hf)["name"].(string); n == "envoy.filters.http.rbac" {
							rbac = append(rbac, hf)
						}
					}
					http = append(http, rbac)
				case "envoy.filters.network.rbac":
					network = append(network, f)
				case "envoy.filters.network.tcp_proxy":
					tcp = append(tcp, network)
				}
			}
		}
	}
	if len(http) == 0 || len(tcp) == 0 {
		return Filters{}, fmt.Errorf("admitpilot rendered %d HTTP and %d TCP chains, want both", len(http), len(tcp))
	}
	for _, group := range [][][]any{http, tcp} {
		first, _ := json.Marshal(group[0])
		for _, other := range group[1:] {
			if o, _ := json.Marshal(other); !bytes.Equal(first, o) {
				return Filters{}, fmt.Errorf("admitpilot chains of one kind carry different RBAC filters")
			}
		}
	}
	return Filters{HTTP: http[0], TCP: tcp[0]}, nil
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
