package conformance

// Network plumbing for the harness (Linux, root): a bridge on the host (apconf0, 10.244.0.1/16) and, for every
// Pod, a network namespace of its own joined to the bridge by a veth pair, so each has an address of its own on
// which it binds the ports it names, as it would in a cluster. One L2 segment: no routing,
// no ip_forward; the host (admitpilot, the suite) reaches every address through the bridge.

import (
	"fmt"
	"os/exec"
	"strings"
)

// bridge is the host's bridge; bridgeIP its address (where admitpilot's xDS answers the Envoys).
const (
	bridge   = "apconf0"
	bridgeIP = "10.244.0.1"
)

// run runs a command and returns an error with its output when it fails.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// podIP is the address of the n-th Pod (n from 1): 10.244.1.1 on.
func podIP(n int) string {
	return fmt.Sprintf("10.244.%d.%d", 1+n/250, 1+n%250)
}

// setUpBridge creates the bridge (replacing one left by an earlier run).
func setUpBridge() error {
	_ = run("ip", "link", "del", bridge)
	for _, step := range [][]string{
		{"ip", "link", "add", bridge, "type", "bridge"},
		{"ip", "addr", "add", bridgeIP + "/16", "dev", bridge},
		{"ip", "link", "set", bridge, "up"},
	} {
		if err := run(step[0], step[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// tearDownBridge removes the bridge.
func tearDownBridge() {
	_ = run("ip", "link", "del", bridge)
}

// addNetns creates network namespace `name` with address ip on a veth joined to the bridge (replacing one left
// by an earlier run).
func addNetns(name, ip string) error {
	deleteNetns(name)
	host := name + "h"
	steps := [][]string{
		{"ip", "netns", "add", name},
		{"ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", name},
		{"ip", "link", "set", host, "master", bridge},
		{"ip", "link", "set", host, "up"},
		{"ip", "-n", name, "addr", "add", ip + "/16", "dev", "eth0"},
		{"ip", "-n", name, "link", "set", "eth0", "up"},
		{"ip", "-n", name, "link", "set", "lo", "up"},
		{"ip", "-n", name, "route", "add", "default", "via", bridgeIP},
	}
	for _, step := range steps {
		if err := run(step[0], step[1:]...); err != nil {
			deleteNetns(name)
			return err
		}
	}
	return nil
}

// deleteNetns removes network namespace `name` and its veth (if there).
func deleteNetns(name string) {
	_ = run("ip", "link", "del", name+"h")
	_ = run("ip", "netns", "del", name)
}
