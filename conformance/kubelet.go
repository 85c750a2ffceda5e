package conformance

// What a kubelet and a cloud's load-balancer controller would do, on a cluster whose kube-controller-manager makes
// the ReplicaSets, Pods, EndpointSlices and ServiceAccounts but where nothing runs a Pod: the harness registers one
// Node, binds every Pod to it, runs the Pod's containers (containers.go) in a network namespace of its own with an
// IP of its own on the host's bridge (netns.go), reports it Running and, once its readiness probe answers (at once
// when it has none), Ready, through the status subresource, and confirms a deleted Pod's deletion once its
// containers are stopped. A LoadBalancer Service gets a load-balancer address (status.loadBalancer.ingress) that
// reaches the first Ready Pod it selects, as a cloud's controller gives one: the `loadBalancerIP` it asks for when
// that is in the load balancer's pool (lbPool; the address is added to that Pod's network), none when it is outside
// (an address the cloud cannot give), else the Pod's own IP.
// When a Pod running Envoy goes, its `*update_rejected` counters must be 0 and it must still have been running, or
// the run fails.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// managedBy marks the objects the harness writes.
const managedBy = "admitpilot-conformance-harness"

// nodeName is the one Node the harness's Pods run on.
const nodeName = "conformance-node"

// runningPod is a Pod the harness runs.
type runningPod struct {
	key   client.ObjectKey
	ip    string
	netns string
	procs *processes
	// probe is the readiness URL ("" when the Pod is Ready from the start); ready once it answered 200.
	probe string
	ready bool
	envoy bool
	// Load-balancer addresses added to the Pod's network.
	lbIPs map[string]bool
}

// kubelet runs the Pods.
type kubelet struct {
	client  client.Client
	bins    programs
	workDir string
	mu      sync.Mutex
	pods    map[types.UID]*runningPod
	next    int
	node    bool
	// Pods not run (a container of a program the harness does not have), reported once each.
	skipped  map[types.UID]bool
	failures []string
	logf     func(format string, args ...any)
}

// reconcile runs the Pods that should run, stops those that should not, and gives LoadBalancer Services their
// address.
func (k *kubelet) reconcile(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.node {
		if err := k.registerNode(ctx); err != nil {
			return err
		}
		k.node = true
	}
	var pods corev1.PodList
	if err := k.client.List(ctx, &pods); err != nil {
		return err
	}
	current := map[types.UID]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil {
			if running, ok := k.pods[pod.UID]; ok {
				k.stop(running)
				delete(k.pods, pod.UID)
			}
			if pod.Spec.NodeName == nodeName {
				// The kubelet confirms the deletion once the containers are gone.
				zero := int64(0)
				if err := k.client.Delete(ctx, pod, &client.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			continue
		}
		current[pod.UID] = true
		if running, ok := k.pods[pod.UID]; ok {
			if !running.ready && probe(running.probe) {
				if err := k.reportReady(ctx, pod, running); err != nil {
					return err
				}
			}
			continue
		}
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if !k.bins.runnable(pod) {
			if !k.skipped[pod.UID] {
				k.skipped[pod.UID] = true
				k.logf("harness: Pod %s/%s not run: a container's program is not one the harness has", pod.Namespace, pod.Name)
			}
			continue
		}
		// Not fatal: a Pod may wait for a Secret its volume names (the suite creates them after the Deployments).
		if err := k.start(ctx, pod); err != nil {
			k.logf("harness: pod %s/%s not started yet: %v", pod.Namespace, pod.Name, err)
		}
	}
	for uid, running := range k.pods {
		if !current[uid] {
			k.stop(running)
			delete(k.pods, uid)
		}
	}
	return k.loadBalancers(ctx, pods.Items)
}

// registerNode creates the Node the Pods run on, Ready (no node-lifecycle controller runs to judge it: there is
// no kubelet heartbeat; scripts/kube-up).
func (k *kubelet) registerNode(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: nodeName, Labels: map[string]string{"app.kubernetes.io/managed-by": managedBy},
	}}
	if err := k.client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("node: %w", err)
	}
	now := metav1.Now()
	status := map[string]any{"status": map[string]any{
		"conditions": []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		"addresses": []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: bridgeIP}},
	}}
	return k.patchStatus(ctx, node, status)
}

// start binds pod to the Node, runs its containers in a network namespace of its own and reports it Running
// (and Ready, when it has no readiness probe).
func (k *kubelet) start(ctx context.Context, pod *corev1.Pod) error {
	key := client.ObjectKeyFromObject(pod)
	if pod.Spec.NodeName == "" {
		binding := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
		}
		if err := k.client.SubResource("binding").Create(ctx, pod, binding); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("binding: %w", err)
		}
	}
	k.next++
	ip, netns := podIP(k.next), podNetns(k.next)
	if err := addNetns(netns, ip); err != nil {
		return err
	}
	procs, err := podProcesses(ctx, k.client, k.bins, podLogDir(k.workDir, key), netns, ip, pod)
	if err != nil {
		deleteNetns(netns)
		return err
	}
	running := &runningPod{key: key, ip: ip, netns: netns, procs: procs, probe: readinessURL(pod, ip)}
	for _, c := range pod.Spec.Containers {
		running.envoy = running.envoy || k.bins.binary(c) == k.bins.envoy
	}
	k.pods[pod.UID] = running
	running.ready = running.probe == ""
	return k.reportStatus(ctx, pod, running)
}

// readinessURL is the URL of the first container's HTTP readiness probe on ip ("" when it has none).
func readinessURL(pod *corev1.Pod, ip string) string {
	for _, c := range pod.Spec.Containers {
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
			continue
		}
		get := c.ReadinessProbe.HTTPGet
		port := get.Port.IntValue()
		for _, p := range c.Ports {
			if p.Name == get.Port.String() {
				port = int(p.ContainerPort)
			}
		}
		return fmt.Sprintf("http://%s:%d%s", ip, port, get.Path)
	}
	return ""
}

// probe says whether url answers 200.
func probe(url string) bool {
	if url == "" {
		return true
	}
	httpClient := http.Client{Timeout: time.Second}
	response, err := httpClient.Get(url)
	if err != nil {
		return false
	}
	response.Body.Close()
	return response.StatusCode == http.StatusOK
}

// reportReady reports a running Pod Ready, now that its probe answers.
func (k *kubelet) reportReady(ctx context.Context, pod *corev1.Pod, running *runningPod) error {
	running.ready = true
	return k.reportStatus(ctx, pod, running)
}

// reportStatus writes the Pod's status: Running on its IP, its containers started, Ready as running.ready says.
func (k *kubelet) reportStatus(ctx context.Context, pod *corev1.Pod, running *runningPod) error {
	now := metav1.Now()
	readiness := corev1.ConditionFalse
	if running.ready {
		readiness = corev1.ConditionTrue
	}
	condition := func(t corev1.PodConditionType, status corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: status, LastTransitionTime: now}
	}
	var containers []corev1.ContainerStatus
	for _, c := range pod.Spec.Containers {
		started := true
		containers = append(containers, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: running.ready, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	status := map[string]any{"status": corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			condition(corev1.PodScheduled, corev1.ConditionTrue), condition(corev1.PodInitialized, corev1.ConditionTrue),
			condition(corev1.ContainersReady, readiness), condition(corev1.PodReady, readiness),
		},
		HostIP: bridgeIP, HostIPs: []corev1.HostIP{{IP: bridgeIP}},
		PodIP: running.ip, PodIPs: []corev1.PodIP{{IP: running.ip}},
		StartTime:         &now,
		ContainerStatuses: containers,
	}}
	return k.patchStatus(ctx, pod, status)
}

// patchStatus merge-patches object's status subresource with patch.
func (k *kubelet) patchStatus(ctx context.Context, object client.Object, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return k.client.Status().Patch(ctx, object, client.RawPatch(types.MergePatchType, body))
}

// loadBalancers gives every LoadBalancer Service with a selector its load balancer's address (loadBalancerIP),
// reaching the first Ready Pod (by name) of `pods` it selects, or none.
func (k *kubelet) loadBalancers(ctx context.Context, pods []corev1.Pod) error {
	var services corev1.ServiceList
	if err := k.client.List(ctx, &services); err != nil {
		return err
	}
	for i := range services.Items {
		service := &services.Items[i]
		if service.Spec.Type != corev1.ServiceTypeLoadBalancer || len(service.Spec.Selector) == 0 {
			continue
		}
		selector := labels.SelectorFromSet(service.Spec.Selector)
		var ips []string
		names := map[string]string{}
		for _, pod := range pods {
			if pod.Namespace != service.Namespace {
				continue
			}
			running, ok := k.pods[pod.UID]
			if ok && running.ready && pod.DeletionTimestamp == nil && selector.Matches(labels.Set(pod.Labels)) {
				names[pod.Name] = running.ip
			}
		}
		keys := make([]string, 0, len(names))
		for name := range names {
			keys = append(keys, name)
		}
		sort.Strings(keys)
		if len(keys) > 0 {
			ip, err := k.loadBalancerIP(service, names[keys[0]])
			if err != nil {
				return fmt.Errorf("load balancer of %s/%s: %w", service.Namespace, service.Name, err)
			}
			if ip != "" {
				ips = append(ips, ip)
			}
		}
		want := []corev1.LoadBalancerIngress{}
		for _, ip := range ips {
			want = append(want, corev1.LoadBalancerIngress{IP: ip})
		}
		have := service.Status.LoadBalancer.Ingress
		if len(have) == len(want) && (len(want) == 0 || have[0].IP == want[0].IP) {
			continue
		}
		patch := map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": want}}}
		if err := k.patchStatus(ctx, service, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("load balancer of %s/%s: %w", service.Namespace, service.Name, err)
		}
	}
	return nil
}

// lbPool is the load balancer's address pool (admitpilot's --gateway-address-pool in scripts/conformance; the
// suite's usable static address is in it, its unusable one is not).
const lbPool = "10.244.250.0/24"

// loadBalancerIP is the address the load balancer gives service, whose first Ready Pod has podIP: its
// `loadBalancerIP` when that is in lbPool (added to that Pod's network), "" when outside, else podIP.
func (k *kubelet) loadBalancerIP(service *corev1.Service, podIP string) (string, error) {
	asked := service.Spec.LoadBalancerIP
	if asked == "" {
		return podIP, nil
	}
	_, pool, err := net.ParseCIDR(lbPool)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(asked); ip == nil || !pool.Contains(ip) {
		return "", nil
	}
	for _, running := range k.pods {
		if running.ip != podIP {
			continue
		}
		if !running.lbIPs[asked] {
			if err := run("ip", "-n", running.netns, "addr", "add", asked+"/16", "dev", "eth0"); err != nil {
				return "", err
			}
			if running.lbIPs == nil {
				running.lbIPs = map[string]bool{}
			}
			running.lbIPs[asked] = true
		}
	}
	return asked, nil
}

// stop stops a Pod's containers and network; an Envoy must not have exited on its own nor rejected an update.
func (k *kubelet) stop(running *runningPod) {
	if running.envoy {
		if running.procs.exited() {
			k.failures = append(k.failures, fmt.Sprintf("pod %s: Envoy exited before its Pod was deleted", running.key))
		} else if rejected := rejectedUpdates(running.netns); rejected != "" {
			k.failures = append(k.failures, fmt.Sprintf("pod %s: %s", running.key, rejected))
		}
	}
	running.procs.stop()
	deleteNetns(running.netns)
}

// stopAll stops every Pod (at the end of the run).
func (k *kubelet) stopAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for uid, running := range k.pods {
		k.stop(running)
		delete(k.pods, uid)
	}
}

// envoyAdminPort is the admin port of a provisioned Envoy, on the loopback of its Pod's network namespace.
const envoyAdminPort = 15000

// rejectedUpdates reads the `*update_rejected` counters of the Envoy in network namespace netns and names those
// above 0 ("" when none is, or when they cannot be read).
func rejectedUpdates(netns string) string {
	url := fmt.Sprintf("http://127.0.0.1:%d/stats?filter=update_rejected", envoyAdminPort)
	out, err := exec.Command("ip", "netns", "exec", netns, "curl", "-s", "--max-time", "2", url).Output()
	if err != nil {
		return ""
	}
	var bad []string
	for _, line := range strings.Split(string(out), "\n") {
		name, value, ok := strings.Cut(line, ": ")
		if ok && strings.TrimSpace(value) != "0" {
			bad = append(bad, name+"="+strings.TrimSpace(value))
		}
	}
	return strings.Join(bad, ", ")
}
