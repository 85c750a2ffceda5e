package conformance

// The Pods' containers, run as the conformance echo server (the suite's own `echo-basic`, built from the
// conformance module, which is the program of the base manifests' image) in the Pod's network namespace, with the
// container's environment (fieldRef values resolved as a kubelet would) and its Secret volumes written to a
// folder that stands for the mount path. Containers of other images are not run (see README).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// echoImage is the image path of the conformance echo server (any tag).
const echoImage = "registry.k8s.io/gateway-api/echo-basic"

// runsEcho says whether a container is the echo server (the only image the harness runs).
func runsEcho(c corev1.Container) bool {
	return strings.HasPrefix(c.Image, echoImage+":") && len(c.Command) == 0
}

// podProcesses starts the echo server of each of pod's echo containers in network namespace netns; the returned
// function stops them. Logs go to <dir>/<container>.log, a timestamp per line (served as the Pod's logs, logs.go).
func podProcesses(echoBin, dir, netns, ip string, pod *corev1.Pod, secrets map[string]map[string][]byte) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var cmds []*exec.Cmd
	var files []*os.File
	stop := func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		for _, file := range files {
			file.Close()
		}
	}
	for _, c := range pod.Spec.Containers {
		if !runsEcho(c) {
			continue
		}
		mounts, err := writeVolumes(dir, c, pod, secrets)
		if err != nil {
			stop()
			return nil, err
		}
		env := []string{"PATH=/usr/bin:/bin"}
		for _, e := range c.Env {
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
			for mountPath, folder := range mounts {
				if strings.HasPrefix(value, mountPath+"/") {
					value = folder + strings.TrimPrefix(value, mountPath)
				}
			}
			env = append(env, e.Name+"="+value)
		}
		file, err := os.Create(filepath.Join(dir, c.Name+".log"))
		if err != nil {
			stop()
			return nil, err
		}
		log := &timestampedLog{file: file}
		cmd := exec.Command("ip", "netns", "exec", netns, echoBin)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
		if err := cmd.Start(); err != nil {
			file.Close()
			stop()
			return nil, err
		}
		cmds = append(cmds, cmd)
		files = append(files, file)
	}
	return stop, nil
}

// writeVolumes writes the Secret volumes container c mounts under dir; it returns mount path -> folder.
func writeVolumes(dir string, c corev1.Container, pod *corev1.Pod, secrets map[string]map[string][]byte) (map[string]string, error) {
	mounts := map[string]string{}
	for _, mount := range c.VolumeMounts {
		for _, volume := range pod.Spec.Volumes {
			if volume.Name != mount.Name || volume.Secret == nil {
				continue
			}
			data, ok := secrets[volume.Secret.SecretName]
			if !ok {
				return nil, fmt.Errorf("secret %s/%s of volume %s not found", pod.Namespace, volume.Secret.SecretName, volume.Name)
			}
			folder := filepath.Join(dir, "volumes", volume.Name)
			if err := os.MkdirAll(folder, 0o700); err != nil {
				return nil, err
			}
			// Every key as a file of its name, or only the listed items, at their paths.
			files := map[string][]byte{}
			for name, value := range data {
				files[name] = value
			}
			if len(volume.Secret.Items) > 0 {
				files = map[string][]byte{}
				for _, item := range volume.Secret.Items {
					files[item.Path] = data[item.Key]
				}
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
			mounts[strings.TrimRight(mount.MountPath, "/")] = folder
		}
	}
	return mounts, nil
}

// podNetns names the network namespace of the n-th Pod.
func podNetns(n int) string {
	return fmt.Sprintf("appod%d", n)
}

// podLogDir is the folder of a Pod's container logs.
func podLogDir(root string, key client.ObjectKey) string {
	return filepath.Join(root, "pods", key.Namespace, key.Name)
}
