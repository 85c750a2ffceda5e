// Package istiod replays the real istiod's MCP opening sequence against admitpilot with istio's own client.
//
// istiod (pilot/pkg/bootstrap/configcontroller.go, initConfigSources, for an `xds://` entry of
// meshConfig.configSources) dials the address in plaintext, opens one ADS stream with istio.io/istio/pkg/adsc,
// sends adsc.ConfigInitialRequests() (core/v1alpha1/MeshConfig first, then every collection of collections.Pilot)
// with node metadata {GENERATOR: api, ISTIO_REVISION}, stores what arrives in a validating memory store
// (memory.Make(collections.Pilot)) and counts the source synced when adsc.HasSynced: every collection answered
// once. This test does exactly that against a running admitpilot serving a folder, then checks that every type of
// the opening got a response (MeshConfig an empty one: istiod keeps its own mesh config), that the store holds each
// folder object equal to its file (labels, annotations, spec as proto), and that a change of a file reaches the store.
package istiod

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"istio.io/istio/pilot/pkg/config/memory"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pkg/adsc"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/collections"
	"istio.io/istio/pkg/config/schema/gvk"
	"istio.io/istio/pkg/keepalive"
	"istio.io/istio/pkg/util/protomarshal"
)

const gatewayYAML = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: gw
  namespace: istio-system
  labels: {app.kubernetes.io/part-of: istiod-adsc}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["demo/app.example.test"]
`

const serviceEntryYAML = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: backend
  namespace: demo
spec:
  hosts: ["backend.demo.test"]
  location: MESH_INTERNAL
  resolution: STATIC
  ports:
  - {number: 80, name: http, protocol: HTTP}
  endpoints:
  - address: 127.0.0.1
    ports: {http: 18081}
`

func virtualServiceYAML(version string) string {
	return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: app
  namespace: demo
  labels: {app: app}
  annotations: {admitpilot.test/note: served by admitpilot}
spec:
  hosts: ["app.example.test"]
  gateways: ["istio-system/gw"]
  http:
  - name: backend
    match:
    - uri: {prefix: /}
    route:
    - destination: {host: backend.demo.test, port: {number: 80}}
    headers:
      response:
        set: {x-admitpilot-version: ` + version + `}
    timeout: 5s
`
}

// admitpilotBinary: ADMITPILOT_BIN, else the debug build of the clone this module is in.
func admitpilotBinary(t *testing.T) string {
	bin := os.Getenv("ADMITPILOT_BIN")
	if bin == "" {
		bin, _ = filepath.Abs("../../target/debug/admitpilot")
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("admitpilot binary %s: %v (cargo build --bin admitpilot)", bin, err)
		}
		t.Skipf("skipping: no admitpilot binary at %s (cargo build --bin admitpilot, or set ADMITPILOT_BIN)", bin)
	}
	return bin
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// poll calls ok until it is true, failing the test after timeout.
func poll(t *testing.T, timeout time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func writeAtomically(t *testing.T, path, content string) {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startAdmitpilot serves dir in folder mode with plaintext xDS on 127.0.0.1 and waits for /readyz.
func startAdmitpilot(t *testing.T, dir string) string {
	xds, admin := freePort(t), freePort(t)
	logf, err := os.Create(filepath.Join(t.TempDir(), "admitpilot.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(admitpilotBinary(t), "serve", "--config-dir", dir,
		"--xds-addr", fmt.Sprintf("127.0.0.1:%d", xds), "--webhook-addr", "127.0.0.1:0",
		"--admin-addr", fmt.Sprintf("127.0.0.1:%d", admin),
		"--self-signed-ca-out", filepath.Join(t.TempDir(), "ca.crt"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("admitpilot log:\n%s", b)
		}
	})
	poll(t, 60*time.Second, "admitpilot /readyz", func() bool {
		select {
		case <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("admitpilot exited:\n%s", b)
		default:
		}
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", admin))
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})
	return fmt.Sprintf("127.0.0.1:%d", xds)
}

// responses records every DiscoveryResponse adsc receives (its ResponseHandler), by type URL.
type responses struct {
	mu     sync.Mutex
	byType map[string][]*discovery.DiscoveryResponse
}

func (r *responses) HandleResponse(_ *adsc.ADSC, resp *discovery.DiscoveryResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byType[resp.TypeUrl] = append(r.byType[resp.TypeUrl], resp)
}

func (r *responses) get(typeURL string) []*discovery.DiscoveryResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byType[typeURL]
}

// expected parses one of the folder's documents as istiod would hold it.
func expected(t *testing.T, doc string) config.Config {
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name        string            `json:"name"`
			Namespace   string            `json:"namespace"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	group, version, _ := strings.Cut(obj.APIVersion, "/")
	schema, ok := collections.Pilot.FindByGroupKind(config.GroupVersionKind{Group: group, Version: version, Kind: obj.Kind})
	if !ok {
		t.Fatalf("no schema in collections.Pilot for %s %s", obj.APIVersion, obj.Kind)
	}
	spec, err := schema.NewInstance()
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.Marshal(obj.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := protomarshal.ApplyYAMLStrict(string(js), spec.(proto.Message)); err != nil {
		t.Fatalf("%s %s/%s spec: %v", obj.Kind, obj.Metadata.Namespace, obj.Metadata.Name, err)
	}
	return config.Config{
		Meta: config.Meta{
			GroupVersionKind: schema.GroupVersionKind(),
			Name:             obj.Metadata.Name, Namespace: obj.Metadata.Namespace,
			Labels: obj.Metadata.Labels, Annotations: obj.Metadata.Annotations,
		},
		Spec: spec,
	}
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkStored: the store holds want, field by field.
func checkStored(t *testing.T, store model.ConfigStore, want config.Config) {
	t.Helper()
	got := store.Get(want.GroupVersionKind, want.Name, want.Namespace)
	if got == nil {
		t.Fatalf("%s %s/%s: not in the store", want.GroupVersionKind.Kind, want.Namespace, want.Name)
	}
	if !proto.Equal(got.Spec.(proto.Message), want.Spec.(proto.Message)) {
		g, _ := protomarshal.ToJSON(got.Spec.(proto.Message))
		w, _ := protomarshal.ToJSON(want.Spec.(proto.Message))
		t.Fatalf("%s %s/%s spec:\n got  %s\n want %s", want.GroupVersionKind.Kind, want.Namespace, want.Name, g, w)
	}
	if !sameMap(got.Labels, want.Labels) || !sameMap(got.Annotations, want.Annotations) {
		t.Fatalf("%s %s/%s metadata: labels %v annotations %v, want %v %v", want.GroupVersionKind.Kind,
			want.Namespace, want.Name, got.Labels, got.Annotations, want.Labels, want.Annotations)
	}
	if got.ResourceVersion == "" || got.CreationTimestamp.IsZero() {
		t.Fatalf("%s %s/%s: resourceVersion %q creationTimestamp %v", want.GroupVersionKind.Kind, want.Namespace,
			want.Name, got.ResourceVersion, got.CreationTimestamp)
	}
}

func TestIstiodOpeningSequenceAgainstAdmitpilot(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"gateway.yaml":        gatewayYAML,
		"serviceentry.yaml":   serviceEntryYAML,
		"virtualservice.yaml": virtualServiceYAML("v0"),
	}
	for name, doc := range files {
		writeAtomically(t, filepath.Join(dir, name), doc)
	}
	addr := startAdmitpilot(t, dir)

	// As istiod's initConfigSources builds it (Namespace, Workload and Revision as istiod-up sets them).
	seen := &responses{byType: map[string][]*discovery.DiscoveryResponse{}}
	client, err := adsc.New(addr, &adsc.ADSConfig{
		InitialDiscoveryRequests: adsc.ConfigInitialRequests(),
		Config: adsc.Config{
			Namespace: "istio-system",
			Workload:  "istiod-adsc-test",
			Revision:  "default",
			Meta: model.NodeMetadata{
				Generator:     "api",
				IstioRevision: "default",
			}.ToStruct(),
			GrpcOpts: []grpc.DialOption{
				keepalive.DefaultOption().ConvertToClientOption(),
				grpc.WithTransportCredentials(insecure.NewCredentials()),
			},
		},
		ResponseHandler: seen,
	})
	if err != nil {
		t.Fatalf("adsc.New(%s): %v", addr, err)
	}
	defer client.Close()
	store := memory.NewController(memory.Make(collections.Pilot))
	store.RegisterHasSyncedHandler(client.HasSynced)
	client.Store = store
	stop := make(chan struct{})
	defer close(stop)
	go store.Run(stop)
	start := time.Now()
	if err := client.Run(); err != nil {
		t.Fatalf("adsc Run: %v", err)
	}

	synced := poll(t, 30*time.Second, "adsc HasSynced (every collection of the opening answered)", store.HasSynced)
	t.Logf("istiod's config source would be synced %v after the stream opened", synced.Round(time.Millisecond))

	// Every type of the opening got a response, MeshConfig included (an empty one).
	var missing []string
	for _, req := range adsc.ConfigInitialRequests() {
		if len(seen.get(req.TypeUrl)) == 0 {
			missing = append(missing, req.TypeUrl)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("%d of %d types of istiod's opening got no response: %s", len(missing),
			len(adsc.ConfigInitialRequests()), strings.Join(missing, ", "))
	}
	if mc := seen.get(gvk.MeshConfig.String()); len(mc[0].Resources) != 0 {
		t.Fatalf("MeshConfig answered with %d resources; admitpilot serves none (istiod keeps its own)", len(mc[0].Resources))
	}
	t.Logf("all %d types of istiod's opening answered", len(adsc.ConfigInitialRequests()))

	// The folder's objects, field by field, and nothing else.
	for _, doc := range files {
		checkStored(t, store, expected(t, doc))
	}
	total := 0
	for _, s := range collections.Pilot.All() {
		total += len(store.List(s.GroupVersionKind(), ""))
	}
	if total != len(files) {
		t.Fatalf("the store holds %d objects, the folder %d", total, len(files))
	}

	// A change of the folder reaches the store.
	var lat []time.Duration
	for i := 1; i <= 5; i++ {
		doc := virtualServiceYAML(fmt.Sprintf("v%d", i))
		want := expected(t, doc)
		writeAtomically(t, filepath.Join(dir, "virtualservice.yaml"), doc)
		lat = append(lat, poll(t, 30*time.Second, "the changed VirtualService in adsc's store", func() bool {
			got := store.Get(want.GroupVersionKind, want.Name, want.Namespace)
			return got != nil && proto.Equal(got.Spec.(proto.Message), want.Spec.(proto.Message))
		}))
		checkStored(t, store, want)
	}
	var b bytes.Buffer
	for _, d := range lat {
		fmt.Fprintf(&b, " %v", d.Round(time.Millisecond))
	}
	t.Logf("change → adsc store:%s (%v from the stream's opening to the last change seen)", b.String(),
		time.Since(start).Round(time.Millisecond))
}
