package main

// normalize.go: takes one side's RBAC filters (generic proto-JSON) and yields a canonical form in which two
// filters that Envoy evaluates alike print alike. Every rewrite below is listed, with why it is sound, in
// README.md ("Normalizations"); anything not recognized is kept as its canonical JSON, so it can only show up as a
// difference, never hide one.

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp/syntax"
	"sort"
	"strconv"
	"strings"
)

// expr is a boolean expression over request attributes: TRUE, FALSE, an atom, or and/or/not of expressions.
type expr struct {
	op   string // "true", "false", "atom", "and", "or", "not"
	atom string
	kids []expr
}

var (
	exprTrue  = expr{op: "true"}
	exprFalse = expr{op: "false"}
)

func atom(s string) expr { return expr{op: "atom", atom: s} }

func (e expr) String() string {
	switch e.op {
	case "true":
		return "ANY"
	case "false":
		return "NONE"
	case "atom":
		return e.atom
	case "not":
		return "!" + e.kids[0].String()
	}
	parts := make([]string, len(e.kids))
	for i, k := range e.kids {
		parts[i] = k.String()
	}
	sep := " & "
	if e.op == "or" {
		sep = " | "
	}
	return "(" + strings.Join(parts, sep) + ")"
}

// and/or/not build simplified expressions: nested operators of the same kind are flattened, TRUE and FALSE
// absorbed, duplicates removed, operands sorted, a single operand stands for itself, double negation cancels.
func and(kids ...expr) expr { return junction("and", kids) }
func or(kids ...expr) expr  { return junction("or", kids) }

func not(e expr) expr {
	switch e.op {
	case "true":
		return exprFalse
	case "false":
		return exprTrue
	case "not":
		return e.kids[0]
	}
	return expr{op: "not", kids: []expr{e}}
}

func junction(op string, kids []expr) expr {
	identity, absorbing := exprTrue, exprFalse
	if op == "or" {
		identity, absorbing = exprFalse, exprTrue
	}
	seen := map[string]bool{}
	var flat []expr
	var add func(e expr)
	add = func(e expr) {
		if e.op == op {
			for _, k := range e.kids {
				add(k)
			}
			return
		}
		key := e.String()
		if !seen[key] {
			seen[key] = true
			flat = append(flat, e)
		}
	}
	for _, k := range kids {
		add(k)
	}
	var out []expr
	for _, k := range flat {
		switch k.op {
		case absorbing.op:
			return absorbing
		case identity.op:
			continue
		}
		out = append(out, k)
	}
	switch len(out) {
	case 0:
		return identity
	case 1:
		return out[0]
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	if op == "or" {
		if factored, ok := factorOr(out); ok {
			return factored
		}
	}
	return expr{op: op, kids: out}
}

// factorOr takes the conjuncts every operand of an OR shares out of it: (c & a) | (c & b) = c & (a | b), the
// distributive law (Istio adds a rule's `when` conditions to each of its sources and operations, admitpilot once).
func factorOr(kids []expr) (expr, bool) {
	conjuncts := func(e expr) []expr {
		if e.op == "and" {
			return e.kids
		}
		return []expr{e}
	}
	count := map[string]int{}
	byKey := map[string]expr{}
	for _, k := range kids {
		for _, c := range conjuncts(k) {
			count[c.String()]++
			byKey[c.String()] = c
		}
	}
	var common []expr
	shared := map[string]bool{}
	for key, n := range count {
		if n == len(kids) {
			common = append(common, byKey[key])
			shared[key] = true
		}
	}
	if len(common) == 0 {
		return expr{}, false
	}
	rest := make([]expr, 0, len(kids))
	for _, k := range kids {
		var left []expr
		for _, c := range conjuncts(k) {
			if !shared[c.String()] {
				left = append(left, c)
			}
		}
		rest = append(rest, and(left...))
	}
	return and(append(common, or(rest...))...), true
}

// normFilter is one RBAC filter in canonical form.
type normFilter struct {
	Kind                  string            `json:"kind"`
	Rules                 *normRBAC         `json:"rules,omitempty"`
	ShadowRules           *normRBAC         `json:"shadow_rules,omitempty"`
	ShadowRulesStatPrefix string            `json:"shadow_rules_stat_prefix,omitempty"`
	StatPrefix            string            `json:"stat_prefix,omitempty"`
	Other                 map[string]string `json:"other,omitempty"`
}

type normRBAC struct {
	Action   string            `json:"action"`
	Policies map[string]string `json:"policies"`
}

func normalizeFilters(filters []any) []normFilter {
	var out []normFilter
	for _, f := range filters {
		tc := obj(obj(f)["typed_config"])
		n := normFilter{Kind: fmt.Sprint(obj(f)["name"]), Other: map[string]string{}}
		for key, v := range tc {
			switch key {
			case "@type":
			case "rules":
				n.Rules = normalizeRBAC(obj(v))
			case "shadow_rules":
				n.ShadowRules = normalizeRBAC(obj(v))
			case "shadow_rules_stat_prefix":
				n.ShadowRulesStatPrefix, _ = v.(string)
			case "stat_prefix":
				n.StatPrefix, _ = v.(string)
			default:
				n.Other[key] = canonicalJSON(v)
			}
		}
		// Rules of a DENY or LOG engine that holds no policy never act: as if absent.
		for _, r := range []**normRBAC{&n.Rules, &n.ShadowRules} {
			if *r != nil && len((*r).Policies) == 0 && (*r).Action != "ALLOW" {
				*r = nil
			}
		}
		// The shadow stat prefix only names the stats of shadow rules.
		if n.ShadowRules == nil {
			n.ShadowRulesStatPrefix = ""
		}
		// A filter with no rules and no shadow rules does nothing.
		if n.Rules == nil && n.ShadowRules == nil && len(n.Other) == 0 {
			continue
		}
		out = append(out, n)
	}
	return out
}

func normalizeRBAC(m map[string]any) *normRBAC {
	if m == nil {
		return nil
	}
	action, _ := m["action"].(string)
	if action == "" {
		action = "ALLOW"
	}
	r := &normRBAC{Action: action, Policies: map[string]string{}}
	for name, p := range obj(m["policies"]) {
		// A policy that matches no request never decides anything, nor is it counted: as if absent.
		if e := normalizePolicy(obj(p)); e.op != "false" {
			r.Policies[name] = e.String()
		}
	}
	return r
}

// normalizePolicy: a policy matches when one of its permissions and one of its principals match.
func normalizePolicy(p map[string]any) expr {
	var perms, princs []expr
	for _, x := range list(p["permissions"]) {
		perms = append(perms, permission(obj(x)))
	}
	for _, x := range list(p["principals"]) {
		princs = append(princs, principal(obj(x)))
	}
	e := and(or(perms...), or(princs...))
	for key, v := range p {
		if key != "permissions" && key != "principals" {
			e = and(e, atom("policy."+key+"="+canonicalJSON(v)))
		}
	}
	return e
}

func permission(p map[string]any) expr {
	for key, v := range p {
		switch key {
		case "any":
			if v == true {
				return exprTrue
			}
		case "and_rules":
			return and(each(obj(v)["rules"], permission)...)
		case "or_rules":
			return or(each(obj(v)["rules"], permission)...)
		case "not_rule":
			return not(permission(obj(v)))
		case "header":
			return header(obj(v))
		case "url_path":
			return pathMatcher(obj(v))
		case "destination_ip":
			return atom("dst.ip in " + cidr(obj(v)))
		case "destination_port":
			return atom("dst.port=" + fmt.Sprint(v))
		case "requested_server_name":
			return stringAtom("sni", obj(v))
		case "metadata":
			return metadata(obj(v))
		case "sourced_metadata":
			if e, ok := sourcedMetadata(obj(v)); ok {
				return e
			}
		case "uri_template":
			// The extension's name is not what Envoy dispatches on (its typed_config's type is).
			return atom("path~template(" + canonicalJSON(obj(v)["typed_config"]) + ")")
		}
	}
	return atom("permission" + canonicalJSON(p))
}

func principal(p map[string]any) expr {
	for key, v := range p {
		switch key {
		case "any":
			if v == true {
				return exprTrue
			}
		case "and_ids":
			return and(each(obj(v)["ids"], principal)...)
		case "or_ids":
			return or(each(obj(v)["ids"], principal)...)
		case "not_id":
			return not(principal(obj(v)))
		case "authenticated":
			if name, ok := obj(v)["principal_name"]; ok {
				return stringAtom("peer", obj(name))
			}
			return atom("peer.authenticated")
		case "direct_remote_ip":
			return atom("direct_remote_ip in " + cidr(obj(v)))
		case "remote_ip":
			return atom("remote_ip in " + cidr(obj(v)))
		case "source_ip":
			return atom("source_ip in " + cidr(obj(v)))
		case "header":
			return header(obj(v))
		case "url_path":
			return pathMatcher(obj(v))
		case "metadata":
			return metadata(obj(v))
		case "sourced_metadata":
			if e, ok := sourcedMetadata(obj(v)); ok {
				return e
			}
		}
	}
	return atom("principal" + canonicalJSON(p))
}

// sourcedMetadata: with DYNAMIC (the default source), a sourced metadata matcher reads the same dynamic metadata
// as the older `metadata` field of a permission or principal.
func sourcedMetadata(v map[string]any) (expr, bool) {
	if src, _ := v["metadata_source"].(string); src == "" || src == "DYNAMIC" {
		return metadata(obj(v["metadata_matcher"])), true
	}
	return expr{}, false
}

func each(v any, f func(map[string]any) expr) []expr {
	var out []expr
	for _, x := range list(v) {
		out = append(out, f(obj(x)))
	}
	return out
}

func pathMatcher(m map[string]any) expr {
	if p, ok := m["path"]; ok && len(m) == 1 {
		return stringAtom("path", obj(p))
	}
	return atom("path" + canonicalJSON(m))
}

// header: the name is lower-cased (Envoy matches header names case-insensitively), `invert_match` is a negation.
func header(h map[string]any) expr {
	name := strings.ToLower(fmt.Sprint(h["name"]))
	var e expr
	switch {
	case h["string_match"] != nil:
		e = stringAtom("hdr["+name+"]", obj(h["string_match"]))
	case h["present_match"] == true:
		e = atom("hdr[" + name + "] present")
	case h["exact_match"] != nil:
		e = stringAtom("hdr["+name+"]", map[string]any{"exact": h["exact_match"]})
	case h["prefix_match"] != nil:
		e = stringAtom("hdr["+name+"]", map[string]any{"prefix": h["prefix_match"]})
	case h["suffix_match"] != nil:
		e = stringAtom("hdr["+name+"]", map[string]any{"suffix": h["suffix_match"]})
	case h["safe_regex_match"] != nil:
		e = stringAtom("hdr["+name+"]", map[string]any{"safe_regex": h["safe_regex_match"]})
	default:
		rest := map[string]any{}
		for k, v := range h {
			if k != "name" && k != "invert_match" {
				rest[k] = v
			}
		}
		e = atom("hdr[" + name + "]" + canonicalJSON(rest))
	}
	if h["invert_match"] == true {
		return not(e)
	}
	return e
}

// metadata: an OR of value matchers is lifted out of the matcher (a value matches an OR when it matches one of
// its members), and so is an OR inside a list's one_of (a list has an element matching x|y exactly when it has one
// matching x or one matching y).
func metadata(m map[string]any) expr {
	var path []string
	for _, seg := range list(m["path"]) {
		path = append(path, fmt.Sprint(obj(seg)["key"]))
	}
	key := strings.Join(path, ".")
	prefix := "md[" + fmt.Sprint(m["filter"]) + ":" + key + "]"
	e := valueMatcher(prefix, obj(m["value"]))
	if m["filter"] == "envoy.filters.http.jwt_authn" && (key == "payload.iss" || key == "payload.sub") {
		e = dropListAtoms(e, prefix+" has ")
	}
	if m["invert"] == true {
		return not(e)
	}
	return e
}

// dropListAtoms makes "the claim is a list holding …" false: Envoy's JWT parser refuses a token whose `iss` or
// `sub` is not a string, so a validated payload never holds a list there.
func dropListAtoms(e expr, listPrefix string) expr {
	switch e.op {
	case "atom":
		if strings.HasPrefix(e.atom, listPrefix) {
			return exprFalse
		}
		return e
	case "and", "or":
		kids := make([]expr, len(e.kids))
		for i, k := range e.kids {
			kids[i] = dropListAtoms(k, listPrefix)
		}
		return junction(e.op, kids)
	case "not":
		return not(dropListAtoms(e.kids[0], listPrefix))
	}
	return e
}

func valueMatcher(prefix string, v map[string]any) expr {
	switch {
	case v["or_match"] != nil:
		var kids []expr
		for _, x := range list(obj(v["or_match"])["value_matchers"]) {
			kids = append(kids, valueMatcher(prefix, obj(x)))
		}
		return or(kids...)
	case v["string_match"] != nil:
		return stringAtom(prefix, obj(v["string_match"]))
	case v["list_match"] != nil:
		return valueMatcher(prefix+" has", obj(obj(v["list_match"])["one_of"]))
	case v["present_match"] == true:
		return atom(prefix + " present")
	}
	return atom(prefix + canonicalJSON(v))
}

// stringAtom prints a StringMatcher in one canonical form: exact, prefix, suffix, contains or regex, `/i` when
// case is ignored. A safe_regex that is a literal, a literal followed by `.*` or `.*` followed by a literal (with
// or without `(?i)`) prints as exact, prefix or suffix: Envoy's regexes must match the whole value, and `.`
// matches any character but a newline, which header values, paths and SPIFFE names never hold.
func stringAtom(subject string, m map[string]any) expr {
	ic := ""
	if m["ignore_case"] == true {
		ic = "/i"
	}
	for _, kind := range []string{"exact", "prefix", "suffix", "contains"} {
		if s, ok := m[kind].(string); ok {
			return atom(subject + " " + kind + strconv.Quote(s) + ic)
		}
	}
	if r := obj(m["safe_regex"]); r != nil {
		re, _ := r["regex"].(string)
		if kind, lit, fold, ok := literalRegex(re); ok {
			suffix := ""
			if fold {
				suffix = "/i"
			}
			return atom(subject + " " + kind + strconv.Quote(lit) + suffix)
		}
		return atom(subject + " regex" + strconv.Quote(canonicalRegex(re)) + ic)
	}
	return atom(subject + " " + canonicalJSON(m))
}

// canonicalRegex prints a regex as Go's regexp/syntax prints its simplified parse tree, so that spellings of one
// RE2 regex (`\-` or `-` outside a class, redundant groups) print alike; unparsable regexes print as written.
func canonicalRegex(re string) string {
	parsed, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return re
	}
	return parsed.Simplify().String()
}

// literalRegex recognizes `L`, `L.*`, `.*L` (L a literal, case-folded as a whole or not at all).
func literalRegex(re string) (kind, lit string, fold, ok bool) {
	parsed, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return "", "", false, false
	}
	parsed = parsed.Simplify()
	isAny := func(r *syntax.Regexp) bool {
		return r.Op == syntax.OpStar && len(r.Sub) == 1 && r.Sub[0].Op == syntax.OpAnyCharNotNL
	}
	literal := func(r *syntax.Regexp) (string, bool, bool) {
		if r.Op != syntax.OpLiteral {
			return "", false, false
		}
		return string(r.Rune), r.Flags&syntax.FoldCase != 0, true
	}
	if l, f, ok := literal(parsed); ok {
		return "exact", l, f, true
	}
	if parsed.Op == syntax.OpConcat && len(parsed.Sub) == 2 {
		a, b := parsed.Sub[0], parsed.Sub[1]
		if l, f, ok := literal(a); ok && isAny(b) {
			return "prefix", l, f, true
		}
		if l, f, ok := literal(b); ok && isAny(a) {
			return "suffix", l, f, true
		}
	}
	return "", "", false, false
}

// cidr prints an address range with the address in canonical form and its prefix length.
func cidr(m map[string]any) string {
	addr := fmt.Sprint(m["address_prefix"])
	if a, err := netip.ParseAddr(addr); err == nil {
		addr = a.String()
	}
	length := "0"
	switch l := m["prefix_len"].(type) {
	case float64:
		length = strconv.Itoa(int(l))
	case map[string]any:
		length = fmt.Sprint(l["value"])
	}
	return addr + "/" + length
}

func canonicalJSON(v any) string {
	data, err := json.Marshal(v) // map keys come out sorted
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}
