package conformance

// What a kubelet and kube-controller-manager would do for the suite's backends, on a cluster that has neither:
// every Deployment gets its Pods (created through the API, marked Ready through the status subresource, each
// with a pod IP of its own on the host), each Pod's containers are served by echo servers on that IP, and every
// Service with a selector gets an EndpointSlice of the Ready Pods it selects. Namespaces get their `default`
// ServiceAccount (Pod admission wants it).

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// managedBy marks the objects the harness writes.
const managedBy = "admitpilot-conformance-harness"

// nodeName is the node the harness's Pods are bound to (none exists; no scheduler runs).
const nodeName = "conformance-node"

// runningPod is a Pod the harness serves.
type runningPod struct {
	ip   string
	stop func()
}

// kubelet runs the backends.
type kubelet struct {
	client  client.Client
	echoBin string
	workDir string
	mu      sync.Mutex
	pods    map[client.ObjectKey]*runningPod
	next    int
	// Deployments not run (a container of another image than the echo server), reported once each.
	skipped map[string]bool
	// Namespaces (by UID) that have their ServiceAccount.
	accounts map[string]bool
	logf     func(format string, args ...any)
}

// reconcile brings Pods, echo servers, EndpointSlices and ServiceAccounts in line with the Deployments and Services.
func (k *kubelet) reconcile(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.serviceAccounts(ctx); err != nil {
		return err
	}
	if err := k.deployments(ctx); err != nil {
		return err
	}
	return k.endpointSlices(ctx)
}

// serviceAccounts creates the `default` ServiceAccount of every namespace that lacks it.
func (k *kubelet) serviceAccounts(ctx context.Context) error {
	var namespaces corev1.NamespaceList
	if err := k.client.List(ctx, &namespaces); err != nil {
		return err
	}
	for _, ns := range namespaces.Items {
		if ns.DeletionTimestamp != nil || k.accounts[string(ns.UID)] {
			continue
		}
		account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
		if err := k.client.Create(ctx, account); err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
			return err
		}
		k.accounts[string(ns.UID)] = true
	}
	return nil
}

// deployments creates the Pods each Deployment wants, deletes those no Deployment wants, and serves each Pod.
func (k *kubelet) deployments(ctx context.Context) error {
	var deployments appsv1.DeploymentList
	if err := k.client.List(ctx, &deployments); err != nil {
		return err
	}
	wanted := map[client.ObjectKey]*appsv1.Deployment{}
	for i := range deployments.Items {
		d := &deployments.Items[i]
		if d.DeletionTimestamp != nil {
			continue
		}
		if !allEcho(d.Spec.Template.Spec.Containers) {
			key := d.Namespace + "/" + d.Name
			if !k.skipped[key] {
				k.skipped[key] = true
				k.logf("harness: Deployment %s not run: a container's image is not the echo server", key)
			}
			continue
		}
		replicas := 1
		if d.Spec.Replicas != nil {
			replicas = int(*d.Spec.Replicas)
		}
		for n := 0; n < replicas; n++ {
			// <deployment>-<template hash>-<id>, as a ReplicaSet names its Pods (the suite takes the Deployment's
			// name from the Pod's by dropping the last two parts).
			wanted[client.ObjectKey{Namespace: d.Namespace, Name: fmt.Sprintf("%s-harness-%d", d.Name, n)}] = d
		}
	}
	var pods corev1.PodList
	if err := k.client.List(ctx, &pods, client.MatchingLabels{"app.kubernetes.io/managed-by": managedBy}); err != nil {
		return err
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		key := client.ObjectKeyFromObject(pod)
		if _, ok := wanted[key]; ok && pod.DeletionTimestamp == nil {
			continue
		}
		if running, ok := k.pods[key]; ok {
			running.stop()
			delete(k.pods, key)
		}
		zero := int64(0)
		if err := k.client.Delete(ctx, pod, &client.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	existing := map[client.ObjectKey]*corev1.Pod{}
	for i := range pods.Items {
		existing[client.ObjectKeyFromObject(&pods.Items[i])] = &pods.Items[i]
	}
	keys := make([]client.ObjectKey, 0, len(wanted))
	for key := range wanted {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, key := range keys {
		if _, ok := k.pods[key]; ok {
			continue
		}
		// Not fatal: a Pod may wait for a Secret its volume names (the suite creates them after the Deployments).
		if err := k.startPod(ctx, key, wanted[key], existing[key]); err != nil {
			k.logf("harness: pod %s not started yet: %v", key, err)
		}
	}
	return nil
}

// startPod creates the Pod (unless there), gives it an IP, starts its echo servers and marks it Ready.
func (k *kubelet) startPod(ctx context.Context, key client.ObjectKey, d *appsv1.Deployment, pod *corev1.Pod) error {
	if pod == nil || pod.DeletionTimestamp != nil {
		podLabels := map[string]string{"app.kubernetes.io/managed-by": managedBy}
		for name, value := range d.Spec.Template.Labels {
			podLabels[name] = value
		}
		pod = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: key.Name, Namespace: key.Namespace, Labels: podLabels,
				Annotations: d.Spec.Template.Annotations,
			},
			Spec: *d.Spec.Template.Spec.DeepCopy(),
		}
		pod.Spec.NodeName = nodeName
		if err := k.client.Create(ctx, pod); err != nil {
			return err
		}
	}
	secrets, err := k.volumeSecrets(ctx, pod)
	if err != nil {
		return err
	}
	k.next++
	ip, netns := podIP(k.next), podNetns(k.next)
	if err := addNetns(netns, ip); err != nil {
		return err
	}
	stopProcesses, err := podProcesses(k.echoBin, podLogDir(k.workDir, key), netns, ip, pod, secrets)
	if err != nil {
		deleteNetns(netns)
		return err
	}
	stop := func() {
		stopProcesses()
		deleteNetns(netns)
	}
	now := metav1.Now()
	ready := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now}
	}
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{ready(corev1.PodScheduled), ready(corev1.PodInitialized), ready(corev1.ContainersReady), ready(corev1.PodReady)},
		HostIP:     ip, HostIPs: []corev1.HostIP{{IP: ip}},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		StartTime: &now,
	}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: boolPtr(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if err := k.client.Status().Update(ctx, pod); err != nil {
		stop()
		return err
	}
	k.pods[key] = &runningPod{ip: ip, stop: stop}
	return nil
}

func boolPtr(b bool) *bool { return &b }

// allEcho says whether every container is the echo server.
func allEcho(containers []corev1.Container) bool {
	for _, c := range containers {
		if !runsEcho(c) {
			return false
		}
	}
	return len(containers) > 0
}

// volumeSecrets reads the Secrets pod's volumes name.
func (k *kubelet) volumeSecrets(ctx context.Context, pod *corev1.Pod) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	for _, volume := range pod.Spec.Volumes {
		if volume.Secret == nil {
			continue
		}
		var secret corev1.Secret
		key := client.ObjectKey{Namespace: pod.Namespace, Name: volume.Secret.SecretName}
		if err := k.client.Get(ctx, key, &secret); err != nil {
			return nil, err
		}
		out[secret.Name] = secret.Data
	}
	return out, nil
}

// endpointSlices writes, for every Service with a selector, one EndpointSlice of the Ready Pods it selects.
func (k *kubelet) endpointSlices(ctx context.Context) error {
	var services corev1.ServiceList
	if err := k.client.List(ctx, &services); err != nil {
		return err
	}
	var pods corev1.PodList
	if err := k.client.List(ctx, &pods, client.MatchingLabels{"app.kubernetes.io/managed-by": managedBy}); err != nil {
		return err
	}
	var slices discoveryv1.EndpointSliceList
	if err := k.client.List(ctx, &slices, client.MatchingLabels{discoveryv1.LabelManagedBy: managedBy}); err != nil {
		return err
	}
	written := map[client.ObjectKey]*discoveryv1.EndpointSlice{}
	for i := range slices.Items {
		written[client.ObjectKeyFromObject(&slices.Items[i])] = &slices.Items[i]
	}
	for i := range services.Items {
		service := &services.Items[i]
		if len(service.Spec.Selector) == 0 || service.DeletionTimestamp != nil {
			continue
		}
		have := written[client.ObjectKey{Namespace: service.Namespace, Name: service.Name + "-harness"}]
		if err := k.writeSlice(ctx, service, pods.Items, have); err != nil {
			return fmt.Errorf("EndpointSlice of %s/%s: %w", service.Namespace, service.Name, err)
		}
	}
	return nil
}

// writeSlice creates service's EndpointSlice, or updates `have` (nil when there is none yet).
func (k *kubelet) writeSlice(ctx context.Context, service *corev1.Service, pods []corev1.Pod, have *discoveryv1.EndpointSlice) error {
	selector := labels.SelectorFromSet(service.Spec.Selector)
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: service.Name + "-harness", Namespace: service.Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: service.Name,
				discoveryv1.LabelManagedBy:   managedBy,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	var selected []corev1.Pod
	for _, pod := range pods {
		key := client.ObjectKeyFromObject(&pod)
		if pod.Namespace != service.Namespace || pod.DeletionTimestamp != nil || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		running, ok := k.pods[key]
		if !ok {
			continue
		}
		selected = append(selected, pod)
		yes := true
		name := pod.Name
		want.Endpoints = append(want.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{running.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: boolPtr(false)},
			NodeName:   &name,
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		})
	}
	for _, port := range service.Spec.Ports {
		number, ok := targetPort(port, selected)
		if !ok {
			continue
		}
		name, protocol := port.Name, port.Protocol
		want.Ports = append(want.Ports, discoveryv1.EndpointPort{
			Name: &name, Port: &number, Protocol: &protocol, AppProtocol: port.AppProtocol,
		})
	}
	if have == nil {
		return k.client.Create(ctx, want)
	}
	if reflect.DeepEqual(have.Endpoints, want.Endpoints) && reflect.DeepEqual(have.Ports, want.Ports) {
		return nil
	}
	have.Endpoints, have.Ports = want.Endpoints, want.Ports
	return k.client.Update(ctx, have)
}

// targetPort resolves a Service port's targetPort (a number, or a container port's name in the selected Pods).
func targetPort(port corev1.ServicePort, pods []corev1.Pod) (int32, bool) {
	switch {
	case port.TargetPort.Type == intstr.Int && port.TargetPort.IntVal != 0:
		return port.TargetPort.IntVal, true
	case port.TargetPort.Type == intstr.String && port.TargetPort.StrVal != "":
		for _, pod := range pods {
			for _, c := range pod.Spec.Containers {
				for _, p := range c.Ports {
					if p.Name == port.TargetPort.StrVal {
						return p.ContainerPort, true
					}
				}
			}
		}
		return 0, false
	default:
		return port.Port, true
	}
}

// stopAll stops every echo server.
func (k *kubelet) stopAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, pod := range k.pods {
		pod.stop()
		delete(k.pods, key)
	}
}
