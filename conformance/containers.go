package conformance

// The Pods' containers, run as a container runtime would in the Pod's network namespace: the image (or, for
// admitpilot's provisioned gateways, the command) picks the program — the suite's own echo server for
// `echo-basic` (built from the conformance module: the program of that image), CoreDNS for `coredns/coredns`
// (built from its module at the image's version), Envoy for a container whose command is `envoy` — run with the
// container's args and environment ($(VAR) and fieldRef values resolved as a kubelet does) and its volumes
// (Secrets, ConfigMaps, projected service-account tokens minted by the TokenRequest API) written to folders that
// stand for the mount paths; the mount paths are rewritten to those folders in the args, the environment and the
// mounted ConfigMap files. Containers of other programs are not run (see README).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Programs the harness runs, by the images they stand for.
const (
	echoImage    = "registry.k8s.io/gateway-api/echo-basic"
	corednsImage = "registry.k8s.io/coredns/coredns"
)

// xdsTokenLifetime is how long a projected service-account token the harness mints is valid: longer than any run
// (a full one takes minutes, the suite's process has a 60-minute timeout), where a kubelet would rewrite the file
// at 80% of the projected `expirationSeconds` (Envoy reads the file again on every reconnect). The test API server
// sets no --service-account-max-token-expiration; mintToken checks that the token got the whole lifetime.
const xdsTokenLifetime = 4 * time.Hour

// programs are the binaries the harness runs containers with.
type programs struct {
	echo, coredns, envoy string
}

// binary is the program of container c, or "" when the harness does not run it.
func (p programs) binary(c corev1.Container) string {
	switch {
	case strings.HasPrefix(c.Image, echoImage+":") && len(c.Command) == 0:
		return p.echo
	case strings.HasPrefix(c.Image, corednsImage+":") && len(c.Command) == 0:
		return p.coredns
	case len(c.Command) == 1 && c.Command[0] == "envoy":
		return p.envoy
	}
	return ""
}

// runnable says whether the harness runs every container of pod (and it has one).
func (p programs) runnable(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if p.binary(c) == "" {
			return false
		}
	}
	return len(pod.Spec.Containers) > 0
}

// processes are a Pod's running containers.
type processes struct {
	cmds  []*exec.Cmd
	done  []chan struct{}
	files []*os.File
}

// stop kills the containers and waits for them.
func (p *processes) stop() {
	for i, cmd := range p.cmds {
		_ = cmd.Process.Kill()
		<-p.done[i]
	}
	for _, file := range p.files {
		file.Close()
	}
}

// exited says whether a container has exited on its own.
func (p *processes) exited() bool {
	for _, done := range p.done {
		select {
		case <-done:
			return true
		default:
		}
	}
	return false
}

// podProcesses starts every container of pod in network namespace netns with address ip. Logs go to
// <dir>/<container>.log, a timestamp per line (served as the Pod's logs, logs.go).
func podProcesses(ctx context.Context, c client.Client, bins programs, dir, netns, ip string, pod *corev1.Pod) (*processes, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	running := &processes{}
	for _, container := range pod.Spec.Containers {
		mounts, err := writeVolumes(ctx, c, filepath.Join(dir, "volumes"), container, pod)
		if err != nil {
			running.stop()
			return nil, err
		}
		vars := map[string]string{}
		env := []string{"PATH=/usr/bin:/bin"}
		for _, e := range container.Env {
			value := e.Value
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				switch e.ValueFrom.FieldRef.FieldPath {
				case "metadata.name":
					value = pod.Name
				case "metadata.namespace":
					value = pod.Namespace
				case "status.podIP":
					value = ip
				}
			}
			value = rewritePaths(value, mounts)
			vars[e.Name] = value
			env = append(env, e.Name+"="+value)
		}
		args := []string{"netns", "exec", netns, bins.binary(container)}
		for _, arg := range container.Args {
			for name, value := range vars {
				arg = strings.ReplaceAll(arg, "$("+name+")", value)
			}
			args = append(args, rewritePaths(arg, mounts))
		}
		file, err := os.Create(filepath.Join(dir, container.Name+".log"))
		if err != nil {
			running.stop()
			return nil, err
		}
		log := &timestampedLog{file: file}
		cmd := exec.Command("ip", args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
		if err := cmd.Start(); err != nil {
			file.Close()
			running.stop()
			return nil, err
		}
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		running.cmds = append(running.cmds, cmd)
		running.done = append(running.done, done)
		running.files = append(running.files, file)
	}
	return running, nil
}

// mount is one mounted volume: its path in the container and the folder that stands for it.
type mount struct{ path, folder string }

// rewritePaths replaces each mount path in text by its folder (the longest paths first).
func rewritePaths(text string, mounts []mount) string {
	for _, m := range mounts {
		text = strings.ReplaceAll(text, m.path, m.folder)
	}
	return text
}

// writeVolumes writes the volumes container c mounts under root: Secrets and ConfigMaps (every key as a file of
// its name, or only the listed items at their paths) and projected service-account tokens. ConfigMap files get the
// mount paths rewritten (a bootstrap names the token and CA files). Returns the mounts, longest path first.
func writeVolumes(ctx context.Context, c client.Client, root string, container corev1.Container, pod *corev1.Pod) ([]mount, error) {
	var mounts []mount
	var configFiles []string
	for _, volumeMount := range container.VolumeMounts {
		for _, volume := range pod.Spec.Volumes {
			if volume.Name != volumeMount.Name {
				continue
			}
			folder := filepath.Join(root, volume.Name)
			if err := os.MkdirAll(folder, 0o700); err != nil {
				return nil, err
			}
			files := map[string][]byte{}
			switch {
			case volume.Secret != nil:
				var secret corev1.Secret
				if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: volume.Secret.SecretName}, &secret); err != nil {
					return nil, fmt.Errorf("secret of volume %s: %w", volume.Name, err)
				}
				files = selectItems(secret.Data, volume.Secret.Items)
			case volume.ConfigMap != nil:
				var configMap corev1.ConfigMap
				if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: volume.ConfigMap.Name}, &configMap); err != nil {
					return nil, fmt.Errorf("configmap of volume %s: %w", volume.Name, err)
				}
				data := map[string][]byte{}
				for key, value := range configMap.Data {
					data[key] = []byte(value)
				}
				files = selectItems(data, volume.ConfigMap.Items)
				for path := range files {
					configFiles = append(configFiles, filepath.Join(folder, filepath.Clean("/"+path)))
				}
			case volume.Projected != nil:
				for _, source := range volume.Projected.Sources {
					if source.ServiceAccountToken == nil {
						continue
					}
					token, err := mintToken(ctx, c, pod.Namespace, pod.Spec.ServiceAccountName, source.ServiceAccountToken.Audience)
					if err != nil {
						return nil, err
					}
					files[source.ServiceAccountToken.Path] = []byte(token)
				}
			case volume.EmptyDir != nil:
			default:
				return nil, fmt.Errorf("volume %s: a kind the harness does not provide", volume.Name)
			}
			for path, value := range files {
				file := filepath.Join(folder, filepath.Clean("/"+path))
				if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
					return nil, err
				}
				if err := os.WriteFile(file, value, 0o600); err != nil {
					return nil, err
				}
			}
			mounts = append(mounts, mount{path: strings.TrimRight(volumeMount.MountPath, "/"), folder: folder})
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].path) > len(mounts[j].path) })
	for _, file := range configFiles {
		text, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(file, []byte(rewritePaths(string(text), mounts)), 0o600); err != nil {
			return nil, err
		}
	}
	return mounts, nil
}

// selectItems is every key of data as a file of its name, or only the listed items at their paths.
func selectItems(data map[string][]byte, items []corev1.KeyToPath) map[string][]byte {
	if len(items) == 0 {
		return data
	}
	files := map[string][]byte{}
	for _, item := range items {
		files[item.Path] = data[item.Key]
	}
	return files
}

// mintToken asks the TokenRequest API for a token of ServiceAccount ns/name for audience, valid for
// xdsTokenLifetime.
func mintToken(ctx context.Context, c client.Client, ns, name, audience string) (string, error) {
	seconds := int64(xdsTokenLifetime / time.Second)
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{audience},
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
		return "", fmt.Errorf("token of ServiceAccount %s/%s: the API server shortened it to %s (asked %s)",
			ns, name, left.Round(time.Second), xdsTokenLifetime)
	}
	return request.Status.Token, nil
}

// podNetns names the network namespace of the n-th Pod.
func podNetns(n int) string {
	return fmt.Sprintf("appod%d", n)
}

// podLogDir is the folder of a Pod's container logs.
func podLogDir(root string, key client.ObjectKey) string {
	return filepath.Join(root, "pods", key.Namespace, key.Name)
}
