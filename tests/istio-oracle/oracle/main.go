// Command istio-authz-oracle is admitpilot's differential harness for AuthorizationPolicy semantics: for each case
// (a YAML file of policies), it builds the RBAC filters with Istio's own builder and with `admitpilot render`,
// normalizes both (see normalize.go and README.md) and prints what agrees and what differs.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	admitpilot := flag.String("admitpilot", "", "path of the admitpilot binary (required)")
	verbose := flag.Bool("v", false, "print the normalized form of every case, agreeing or not")
	dump := flag.String("dump", "", "also write each case's raw and normalized filters of both sides under this folder")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s -admitpilot BIN [-v] [-dump DIR] CASE.yaml|FOLDER...\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if *admitpilot == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	files, err := caseFiles(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var sum summary
	for _, file := range files {
		r := runCase(file, *admitpilot, *dump)
		sum.add(r)
		r.print(os.Stdout, *verbose)
	}
	sum.print(os.Stdout)
	if sum.differ > 0 || sum.errors > 0 {
		os.Exit(1)
	}
}

// caseFiles expands folders into the *.yaml files under them, sorted.
func caseFiles(args []string) ([]string, error) {
	var out []string
	for _, arg := range args {
		info, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, arg)
			continue
		}
		err = filepath.WalkDir(arg, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(out)
	return out, nil
}
