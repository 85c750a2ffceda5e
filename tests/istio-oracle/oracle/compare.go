package main

// compare.go: takes one case file, runs both sides, compares their normalized filters and yields the case's
// verdict with each difference in a compact form; summary adds verdicts up.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type verdict int

const (
	agree verdict = iota
	differ
	skipped // Istio's validation refuses the case: not comparable
	failed  // a side could not run
)

type caseResult struct {
	name    string
	verdict verdict
	// empty: both sides built no RBAC filter (agreement, but a weak one).
	empty bool
	proxy proxyContext
	diffs []string
	note  string
	istio map[string][]normFilter
	ours  map[string][]normFilter
}

func runCase(file, admitpilot, dump string) caseResult {
	r := caseResult{name: file}
	text, err := os.ReadFile(file)
	if err != nil {
		r.verdict, r.note = failed, err.Error()
		return r
	}
	pc, err := parseCase(string(text))
	if err != nil {
		r.verdict, r.note = failed, err.Error()
		return r
	}
	r.proxy = pc.proxy
	if len(pc.invalid) > 0 {
		r.verdict, r.note = skipped, "Istio's validation refuses it: "+strings.Join(pc.invalid, "; ")
		return r
	}
	istio, err := istioFilters(pc)
	if err != nil {
		r.verdict, r.note = failed, err.Error()
		return r
	}
	ours, stderr, err := admitpilotFilters(admitpilot, file, pc.proxy)
	if err != nil {
		r.verdict, r.note = failed, err.Error()
		return r
	}
	r.istio = map[string][]normFilter{"http": normalizeFilters(istio.HTTP), "tcp": normalizeFilters(istio.TCP)}
	r.ours = map[string][]normFilter{"http": normalizeFilters(ours.HTTP), "tcp": normalizeFilters(ours.TCP)}
	if dump != "" {
		writeDump(dump, file, map[string]any{
			"proxy": pc.proxy, "istio_raw": istio, "admitpilot_raw": ours,
			"istio": r.istio, "admitpilot": r.ours,
		})
	}
	for _, kind := range []string{"http", "tcp"} {
		r.diffs = append(r.diffs, diffFilters(kind, r.istio[kind], r.ours[kind])...)
	}
	r.empty = len(r.istio["http"])+len(r.istio["tcp"])+len(r.ours["http"])+len(r.ours["tcp"]) == 0
	if len(r.diffs) > 0 {
		r.verdict = differ
		if s := strings.TrimSpace(stderr); s != "" {
			r.note = "admitpilot said: " + firstLines(s, 3)
		}
	}
	return r
}

// diffFilters compares two filter lists position by position (the order of RBAC filters on a chain is kept:
// an AUDIT filter after a DENY one would not see denied requests).
func diffFilters(kind string, istio, ours []normFilter) []string {
	var out []string
	if len(istio) != len(ours) {
		out = append(out, fmt.Sprintf("%s: Istio builds %d RBAC filters %s, admitpilot %d %s", kind,
			len(istio), actions(istio), len(ours), actions(ours)))
	}
	for i := len(ours); i < len(istio); i++ {
		out = append(out, fmt.Sprintf("%s filter %d only Istio: %s", kind, i, describe(istio[i])))
	}
	for i := len(istio); i < len(ours); i++ {
		out = append(out, fmt.Sprintf("%s filter %d only admitpilot: %s", kind, i, describe(ours[i])))
	}
	for i := 0; i < len(istio) && i < len(ours); i++ {
		a, b := istio[i], ours[i]
		at := fmt.Sprintf("%s filter %d", kind, i)
		if a.Kind != b.Kind {
			out = append(out, fmt.Sprintf("%s: name Istio %s, admitpilot %s", at, a.Kind, b.Kind))
		}
		out = append(out, diffRBAC(at+" rules", a.Rules, b.Rules)...)
		out = append(out, diffRBAC(at+" shadow_rules", a.ShadowRules, b.ShadowRules)...)
		for _, f := range []struct{ name, a, b string }{
			{"shadow_rules_stat_prefix", a.ShadowRulesStatPrefix, b.ShadowRulesStatPrefix},
			{"stat_prefix", a.StatPrefix, b.StatPrefix},
			{"other fields", canonicalJSON(a.Other), canonicalJSON(b.Other)},
		} {
			if f.a != f.b {
				out = append(out, fmt.Sprintf("%s %s: Istio %q, admitpilot %q", at, f.name, f.a, f.b))
			}
		}
	}
	return out
}

// describe prints a filter's engines and policies on one line.
func describe(f normFilter) string {
	var parts []string
	for _, r := range []*normRBAC{f.Rules, f.ShadowRules} {
		if r == nil {
			continue
		}
		label := r.Action
		if r == f.ShadowRules {
			label = "shadow " + label
		}
		names := make([]string, 0, len(r.Policies))
		for n := range r.Policies {
			names = append(names, n)
		}
		sort.Strings(names)
		var ps []string
		for _, n := range names {
			ps = append(ps, n+": "+r.Policies[n])
		}
		parts = append(parts, label+" {"+strings.Join(ps, "; ")+"}")
	}
	return strings.Join(parts, " + ")
}

func actions(fs []normFilter) string {
	var parts []string
	for _, f := range fs {
		var a []string
		if f.Rules != nil {
			a = append(a, f.Rules.Action)
		}
		if f.ShadowRules != nil {
			a = append(a, "shadow "+f.ShadowRules.Action)
		}
		parts = append(parts, strings.Join(a, "+"))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func diffRBAC(at string, a, b *normRBAC) []string {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		return []string{fmt.Sprintf("%s: Istio none, admitpilot %s with %d policies", at, b.Action, len(b.Policies))}
	case b == nil:
		return []string{fmt.Sprintf("%s: Istio %s with %d policies, admitpilot none", at, a.Action, len(a.Policies))}
	}
	var out []string
	if a.Action != b.Action {
		out = append(out, fmt.Sprintf("%s: action Istio %s, admitpilot %s", at, a.Action, b.Action))
	}
	names := map[string]bool{}
	for n := range a.Policies {
		names[n] = true
	}
	for n := range b.Policies {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		pa, inA := a.Policies[n]
		pb, inB := b.Policies[n]
		switch {
		case !inA:
			out = append(out, fmt.Sprintf("%s %s: only admitpilot: %s", at, n, pb))
		case !inB:
			out = append(out, fmt.Sprintf("%s %s: only Istio: %s", at, n, pa))
		case pa != pb:
			out = append(out, fmt.Sprintf("%s %s:\n      Istio:      %s\n      admitpilot: %s", at, n, pa, pb))
		}
	}
	return out
}

func (r caseResult) print(w io.Writer, verbose bool) {
	name := r.name
	switch r.verdict {
	case agree:
		if verbose {
			fmt.Fprintf(w, "AGREE   %s (proxy %s %s)\n", name, r.proxy.Namespace, r.proxy.labelText())
			printSide(w, "both", r.istio)
		}
	case differ:
		fmt.Fprintf(w, "DIFFER  %s (proxy %s %s)\n", name, r.proxy.Namespace, r.proxy.labelText())
		for _, d := range r.diffs {
			fmt.Fprintf(w, "  - %s\n", d)
		}
		if r.note != "" {
			fmt.Fprintf(w, "  (%s)\n", r.note)
		}
	case skipped:
		fmt.Fprintf(w, "SKIP    %s: %s\n", name, r.note)
	case failed:
		fmt.Fprintf(w, "ERROR   %s: %s\n", name, r.note)
	}
}

func printSide(w io.Writer, label string, side map[string][]normFilter) {
	for _, kind := range []string{"http", "tcp"} {
		for i, f := range side[kind] {
			for _, r := range []*normRBAC{f.Rules, f.ShadowRules} {
				if r == nil {
					continue
				}
				shadow := ""
				if r == f.ShadowRules {
					shadow = " (shadow)"
				}
				fmt.Fprintf(w, "    %s %s[%d] %s%s\n", label, kind, i, r.Action, shadow)
				names := make([]string, 0, len(r.Policies))
				for n := range r.Policies {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					fmt.Fprintf(w, "      %s: %s\n", n, r.Policies[n])
				}
			}
		}
	}
}

func writeDump(dir, file string, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return
	}
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))+".json"), data, 0o644)
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, " / ")
}

type summary struct {
	total, agree, agreeEmpty, differ, skipped, errors int
}

func (s *summary) add(r caseResult) {
	s.total++
	switch r.verdict {
	case agree:
		s.agree++
		if r.empty {
			s.agreeEmpty++
		}
	case differ:
		s.differ++
	case skipped:
		s.skipped++
	case failed:
		s.errors++
	}
}

func (s summary) print(w io.Writer) {
	compared := s.agree + s.differ
	fmt.Fprintf(w, "\n%d cases: %d compared, %d agree (%d of them with no RBAC filter on either side), %d differ; "+
		"%d skipped (refused by Istio's validation), %d errors\n",
		s.total, compared, s.agree, s.agreeEmpty, s.differ, s.skipped, s.errors)
}
