package conformance

// One Envoy per Gateway of admitpilot's class, as a gateway deployment would run it: the harness watches
// Gateways, gives each a network namespace and an Envoy whose node metadata names the Gateway (label
// gateway.networking.k8s.io/gateway-name), and a Service selecting that label whose externalIPs is the Envoy's
// address, from which admitpilot writes the Gateway's status.addresses.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// gatewayNameLabel is the label a Gateway's proxies carry.
const gatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// envoyAdminPort is the admin port of each Envoy, on the Gateway's address.
const envoyAdminPort = 15000

// gatewayProxy is the running Envoy of one Gateway.
type gatewayProxy struct {
	index   int
	address string
	cmd     *exec.Cmd
	done    chan struct{}
	service client.ObjectKey
}

// gateways runs one Envoy per Gateway of the class.
type gateways struct {
	client   client.Client
	class    string
	envoy    string
	xdsPort  int
	workDir  string
	mu       sync.Mutex
	running  map[client.ObjectKey]*gatewayProxy
	next     int
	failures []string
}

// gatewayNetns names the network namespace of the n-th Gateway's Envoy.
func gatewayNetns(n int) string {
	return fmt.Sprintf("apgw%d", n)
}

// reconcile starts an Envoy for every Gateway of the class that has none and stops those whose Gateway is gone.
func (g *gateways) reconcile(ctx context.Context) error {
	var list gatewayv1.GatewayList
	if err := g.client.List(ctx, &list); err != nil {
		return err
	}
	wanted := map[client.ObjectKey]*gatewayv1.Gateway{}
	for i := range list.Items {
		gw := &list.Items[i]
		if string(gw.Spec.GatewayClassName) == g.class && gw.DeletionTimestamp == nil {
			wanted[client.ObjectKeyFromObject(gw)] = gw
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for key, proxy := range g.running {
		if _, ok := wanted[key]; !ok {
			g.stop(ctx, key, proxy)
		}
	}
	for key, gw := range wanted {
		if _, ok := g.running[key]; ok {
			continue
		}
		proxy, err := g.start(ctx, gw)
		if err != nil {
			return fmt.Errorf("gateway %s: %w", key, err)
		}
		g.running[key] = proxy
	}
	return nil
}

// start gives gw a network namespace, a Service with its address and an Envoy.
func (g *gateways) start(ctx context.Context, gw *gatewayv1.Gateway) (*gatewayProxy, error) {
	g.next++
	index, address, host := g.next, gatewayIP(g.next), bridgeIP
	if err := addNetns(gatewayNetns(index), address); err != nil {
		return nil, err
	}
	service, err := g.ensureService(ctx, gw, address)
	if err != nil {
		deleteNetns(gatewayNetns(index))
		return nil, err
	}
	dir := filepath.Join(g.workDir, fmt.Sprintf("envoy-%d-%s-%s", index, gw.Namespace, gw.Name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bootstrap := filepath.Join(dir, "bootstrap.yaml")
	if err := os.WriteFile(bootstrap, []byte(envoyBootstrap(gw, address, host, g.xdsPort)), 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "envoy.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", "netns", "exec", gatewayNetns(index), g.envoy,
		"-c", bootstrap, "--disable-hot-restart", "--concurrency", "1", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		deleteNetns(gatewayNetns(index))
		return nil, err
	}
	proxy := &gatewayProxy{index: index, address: address, cmd: cmd, done: make(chan struct{}), service: service}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(proxy.done)
	}()
	return proxy, nil
}

// ensureService creates the Service that gives gw its address (the Envoy's).
func (g *gateways) ensureService(ctx context.Context, gw *gatewayv1.Gateway, address string) (client.ObjectKey, error) {
	name := gw.Name
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-.") + "-admitpilot"
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gw.Namespace, Labels: map[string]string{gatewayNameLabel: gw.Name}},
		Spec: corev1.ServiceSpec{
			Selector:    map[string]string{gatewayNameLabel: gw.Name},
			ExternalIPs: []string{address},
		},
	}
	seen := map[int32]bool{}
	for _, listener := range gw.Spec.Listeners {
		port := int32(listener.Port)
		if seen[port] {
			continue
		}
		seen[port] = true
		service.Spec.Ports = append(service.Spec.Ports, corev1.ServicePort{
			Name: fmt.Sprintf("port-%d", port), Port: port, TargetPort: intstr.FromInt32(port),
		})
	}
	if len(service.Spec.Ports) == 0 {
		service.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80}}
	}
	_ = g.client.Delete(ctx, service)
	if err := g.client.Create(ctx, service); err != nil && !apierrors.IsAlreadyExists(err) {
		return client.ObjectKey{}, err
	}
	return client.ObjectKeyFromObject(service), nil
}

// stop stops the Envoy of a Gateway that is gone, records a rejected update if Envoy saw one, and removes its
// Service and network.
func (g *gateways) stop(ctx context.Context, key client.ObjectKey, proxy *gatewayProxy) {
	if rejected := rejectedUpdates(proxy.address); rejected != "" {
		g.failures = append(g.failures, fmt.Sprintf("gateway %s: %s", key, rejected))
	}
	select {
	case <-proxy.done:
		g.failures = append(g.failures, fmt.Sprintf("gateway %s: Envoy exited before its Gateway was deleted", key))
	default:
		_ = proxy.cmd.Process.Kill()
		<-proxy.done
	}
	_ = g.client.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: proxy.service.Name, Namespace: proxy.service.Namespace}})
	deleteNetns(gatewayNetns(proxy.index))
	delete(g.running, key)
}

// stopAll stops every Envoy (at the end of the run).
func (g *gateways) stopAll(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for key, proxy := range g.running {
		g.stop(ctx, key, proxy)
	}
}

// rejectedUpdates reads the Envoy's `*update_rejected` counters and names those above 0 ("" when none is).
func rejectedUpdates(address string) string {
	httpClient := http.Client{Timeout: 2 * time.Second}
	response, err := httpClient.Get(fmt.Sprintf("http://%s:%d/stats?filter=update_rejected", address, envoyAdminPort))
	if err != nil {
		return ""
	}
	defer response.Body.Close()
	var body strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := response.Body.Read(buf)
		body.Write(buf[:n])
		if err != nil {
			break
		}
	}
	var bad []string
	for _, line := range strings.Split(body.String(), "\n") {
		name, value, ok := strings.Cut(line, ": ")
		if ok && strings.TrimSpace(value) != "0" {
			bad = append(bad, name+"="+strings.TrimSpace(value))
		}
	}
	return strings.Join(bad, ", ")
}

// envoyBootstrap is the bootstrap of gw's Envoy: ADS (Delta) to admitpilot at host:xdsPort, Envoy's default
// initial_fetch_timeout, the admin on the Gateway's address.
func envoyBootstrap(gw *gatewayv1.Gateway, address, host string, xdsPort int) string {
	return fmt.Sprintf(`node:
  id: "router~%[1]s~%[2]s.%[3]s~%[3]s.svc.cluster.local"
  cluster: %[2]s.%[3]s
  metadata: { NAMESPACE: %[3]q, LABELS: { %[4]q: %[2]q } }
admin:
  address: { socket_address: { address: %[1]s, port_value: %[5]d } }
dynamic_resources:
  ads_config:
    api_type: DELTA_GRPC
    transport_api_version: V3
    set_node_on_first_message_only: true
    grpc_services:
    - envoy_grpc: { cluster_name: xds_cluster }
  lds_config: { ads: {}, resource_api_version: V3 }
  cds_config: { ads: {}, resource_api_version: V3 }
static_resources:
  clusters:
  - name: xds_cluster
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_assignment:
      cluster_name: xds_cluster
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: %[6]s, port_value: %[7]d } } }
`, address, gw.Name, gw.Namespace, gatewayNameLabel, envoyAdminPort, host, xdsPort)
}
