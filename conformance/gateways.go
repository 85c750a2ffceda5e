package conformance

// One Envoy per Gateway of admitpilot's class, as a gateway deployment would run it: the harness watches
// Gateways, gives each a network namespace and an Envoy whose node metadata names the Gateway (label
// gateway.networking.k8s.io/gateway-name), and a Service selecting that label whose externalIPs is the Envoy's
// address, from which admitpilot writes the Gateway's status.addresses.
//
// admitpilot runs with the security configuration the chart ships (TLS on the xDS port, --xds-auth=token): each
// Envoy proves who it is as a gateway pod would, with a token of a ServiceAccount in its Gateway's namespace
// (minted with the TokenRequest API for the audience admitpilot, sent as `authorization: Bearer` on every xDS
// call), over TLS verifying admitpilot's certificate, and gets the Gateway's certificates only because RBAC lets
// that ServiceAccount get Secrets.

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

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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

// gatewayServiceAccount is the ServiceAccount the Envoys of a namespace's Gateways run as (one per namespace).
const gatewayServiceAccount = "admitpilot-gateway"

// gatewaySecretsRole is the ClusterRole that lets the gateways' ServiceAccounts get Secrets, bound to each of them
// by a ClusterRoleBinding of its own.
const gatewaySecretsRole = "admitpilot-conformance-gateway-secrets"

// xdsTokenAudience is the audience admitpilot checks tokens for (--xds-token-audience, default admitpilot).
const xdsTokenAudience = "admitpilot"

// xdsTokenLifetime is how long a gateway's token is valid: longer than any run (a full one takes minutes, and the
// suite's process has a 60-minute timeout), since admitpilot ends a stream when its token expires and a token in
// the bootstrap's initial_metadata is not rotated. The test API server (scripts/kube-up) sets no
// --service-account-max-token-expiration; mintToken checks that the token got the whole lifetime.
const xdsTokenLifetime = 4 * time.Hour

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
	client  client.Client
	class   string
	envoy   string
	xdsPort int
	// xdsCA is the CA file that signed admitpilot's xDS certificate (for bridgeIP).
	xdsCA    string
	workDir  string
	mu       sync.Mutex
	running  map[client.ObjectKey]*gatewayProxy
	next     int
	failures []string
	// Namespaces whose gateway ServiceAccount and its ClusterRoleBinding exist.
	identities map[string]bool
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

// start gives gw a network namespace, a Service with its address and an Envoy with a token of its namespace.
func (g *gateways) start(ctx context.Context, gw *gatewayv1.Gateway) (*gatewayProxy, error) {
	token, err := g.token(ctx, gw.Namespace)
	if err != nil {
		return nil, err
	}
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
	config := envoyBootstrap(gw, address, host, g.xdsPort, g.xdsCA, token)
	if err := os.WriteFile(bootstrap, []byte(config), 0o600); err != nil {
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

// token is a token of the gateway ServiceAccount of namespace ns for admitpilot, creating that ServiceAccount and
// its RBAC first if need be.
func (g *gateways) token(ctx context.Context, ns string) (string, error) {
	if !g.identities[ns] {
		if err := g.ensureIdentity(ctx, ns); err != nil {
			return "", err
		}
		g.identities[ns] = true
	}
	return mintToken(ctx, g.client, ns, gatewayServiceAccount)
}

// ensureIdentity creates the gateway ServiceAccount of namespace ns and what lets it get Secrets: admitpilot asks
// (SubjectAccessReview) before it sends a proxy the certificates of its namespace, and a ReferenceGrant'ed
// Secret of another namespace needs `get secrets` cluster-wide. A deployment grants a Role in the gateway's
// namespace (the chart's) and the ClusterRole only if its gateways serve other namespaces' Secrets; the suite's
// Gateways may be given any namespace's Secret, so the harness binds one ClusterRole to every gateway
// ServiceAccount with a ClusterRoleBinding, which covers both.
func (g *gateways) ensureIdentity(ctx context.Context, ns string) error {
	labels := map[string]string{"app.kubernetes.io/managed-by": managedBy}
	account := &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: gatewayServiceAccount, Namespace: ns, Labels: labels},
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: gatewaySecretsRole, Labels: labels},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: gatewaySecretsRole + "-" + ns, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: gatewaySecretsRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: gatewayServiceAccount, Namespace: ns}},
	}
	for _, object := range []client.Object{account, role, binding} {
		if err := g.client.Create(ctx, object); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%T %s: %w", object, object.GetName(), err)
		}
	}
	return nil
}

// mintToken asks the TokenRequest API for a token of ServiceAccount ns/name for admitpilot, valid for
// xdsTokenLifetime.
func mintToken(ctx context.Context, c client.Client, ns, name string) (string, error) {
	seconds := int64(xdsTokenLifetime / time.Second)
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{xdsTokenAudience},
		ExpirationSeconds: &seconds,
	}}
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := c.SubResource("token").Create(ctx, account, request); err != nil {
		return "", fmt.Errorf("token of ServiceAccount %s/%s: %w", ns, name, err)
	}
	if request.Status.Token == "" {
		return "", fmt.Errorf("token of ServiceAccount %s/%s: the API server returned none", ns, name)
	}
	if left := time.Until(request.Status.ExpirationTimestamp.Time); left < xdsTokenLifetime-time.Minute {
		return "", fmt.Errorf("token of ServiceAccount %s/%s: the API server shortened it to %s (asked %s): Envoy's "+
			"xDS stream would end when it expires", ns, name, left.Round(time.Second), xdsTokenLifetime)
	}
	return request.Status.Token, nil
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

// envoyBootstrap is the bootstrap of gw's Envoy: ADS (Delta) to admitpilot at host:xdsPort over TLS (trusting the CA
// in the file xdsCA, admitpilot's certificate checked for host), every call carrying `authorization: Bearer token`
// (initial_metadata: the token outlives the run, see xdsTokenLifetime); node metadata NAMESPACE and
// SERVICE_ACCOUNT those of the token; Envoy's default initial_fetch_timeout; the admin on the Gateway's address.
func envoyBootstrap(gw *gatewayv1.Gateway, address, host string, xdsPort int, xdsCA, token string) string {
	return fmt.Sprintf(`node:
  id: "router~%[1]s~%[2]s.%[3]s~%[3]s.svc.cluster.local"
  cluster: %[2]s.%[3]s
  metadata: { NAMESPACE: %[3]q, SERVICE_ACCOUNT: %[8]q, LABELS: { %[4]q: %[2]q } }
admin:
  address: { socket_address: { address: %[1]s, port_value: %[5]d } }
dynamic_resources:
  ads_config:
    api_type: DELTA_GRPC
    transport_api_version: V3
    set_node_on_first_message_only: true
    grpc_services:
    - envoy_grpc: { cluster_name: xds_cluster }
      initial_metadata: [{ key: authorization, value: %[9]q }]
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
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        common_tls_context:
          alpn_protocols: [h2]
          validation_context:
            trusted_ca: { filename: %[10]q }
            match_typed_subject_alt_names: [{ san_type: IP_ADDRESS, matcher: { exact: %[6]q } }]
    load_assignment:
      cluster_name: xds_cluster
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: %[6]s, port_value: %[7]d } } }
`, address, gw.Name, gw.Namespace, gatewayNameLabel, envoyAdminPort, host, xdsPort, gatewayServiceAccount,
		"Bearer "+token, xdsCA)
}
