#!/usr/bin/env python3
"""Checks and measurements of scripts/istiod-e2e (the real istiod reading admitpilot's MCP feed).

  compare  --configz URL --folder DIR [--absent KIND/NS/NAME]...
      istiod's /debug/configz holds exactly the folder's objects (no more, no fewer: an object only in the API
      server must not show) and each one equals its file field by field: kind, apiVersion, name, namespace,
      labels, annotations and the whole spec (proto3 JSON drops fields at their zero value, so fields the file
      sets to 0, "", false, [] or {} count as absent on both sides; nothing else is forgiven).
  measure  --file VS.yaml --path a.b.0.c --runs N --target configz|envoy ...
      changes one value of the file N times (atomic rename) and measures how long until istiod's configz
      (--configz URL) or a real HTTP response through Envoy (--url URL --host HOST --header NAME) shows it.
      Prints one line per run and a JSON summary line (median and max, milliseconds).
"""

import argparse
import http.client
import json
import os
import statistics
import sys
import time
import urllib.parse

import yaml


def load_folder(folder):
    objs = {}
    for root, _, files in os.walk(folder):
        for f in sorted(files):
            if f.startswith(".") or not f.endswith((".yaml", ".yml")):
                continue
            with open(os.path.join(root, f)) as fh:
                for doc in yaml.safe_load_all(fh):
                    if doc:
                        m = doc["metadata"]
                        objs[(doc["kind"], m.get("namespace", "default"), m["name"])] = doc
    return objs


class Getter:
    """GETs on one keep-alive connection, reconnecting on errors."""

    def __init__(self, url, host=None):
        u = urllib.parse.urlsplit(url)
        self.netloc, self.path, self.host = u.netloc, u.path or "/", host
        self.conn = None

    def get(self, timeout=5):
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.netloc, timeout=timeout)
                headers = {"Host": self.host} if self.host else {}
                self.conn.request("GET", self.path, headers=headers)
                r = self.conn.getresponse()
                body = r.read()
                return r.status, dict((k.lower(), v) for k, v in r.getheaders()), body
            except (OSError, http.client.HTTPException):
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def configz(url):
    status, _, body = Getter(url).get(timeout=10)
    if status != 200:
        raise SystemExit(f"configz: {url} answered {status}")
    return json.loads(body)


def prune(v):
    """Drops proto3 zero values (absent on the wire) recursively."""
    if isinstance(v, dict):
        out = {k: prune(x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x not in (None, 0, "", False, [], {})}
    if isinstance(v, list):
        return [prune(x) for x in v]
    return v


def diff(a, b, path, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}"
            if k not in b:
                out.append(f"{p}: in the folder ({json.dumps(a[k])}) but not in istiod")
            elif k not in a:
                out.append(f"{p}: in istiod ({json.dumps(b[k])}) but not in the folder")
            else:
                diff(a[k], b[k], p, out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: folder {json.dumps(a)} != istiod {json.dumps(b)}")


def cmd_compare(args):
    want = load_folder(args.folder)
    got = {}
    for c in configz(args.configz):
        m = c["metadata"]
        got[(c["kind"], m.get("namespace", ""), m["name"])] = c
    problems = []
    for key in sorted(set(want) - set(got)):
        problems.append(f"{'/'.join(key)}: in the folder but not in istiod's configz")
    for key in sorted(set(got) - set(want)):
        problems.append(f"{'/'.join(key)}: in istiod's configz but not in the folder")
    for absent in args.absent or []:
        if tuple(absent.split("/")) in got:
            problems.append(f"{absent}: the decoy (only in the API server) is in istiod's configz")
    fields = 0
    for key in sorted(set(want) & set(got)):
        w, g = want[key], got[key]
        name = "/".join(key)
        out = []
        if w["apiVersion"] != g["apiVersion"]:
            out.append(f".apiVersion: folder {w['apiVersion']} != istiod {g['apiVersion']}")
        wm, gm = w["metadata"], g["metadata"]
        for field in ("labels", "annotations"):
            diff(wm.get(field) or {}, gm.get(field) or {}, f".metadata.{field}", out)
        ws, gs = prune(w.get("spec") or {}), prune(g.get("spec") or {})
        diff(ws, gs, ".spec", out)
        fields += count_leaves(ws)
        if not gm.get("resourceVersion"):
            out.append(".metadata.resourceVersion: empty (admitpilot sends each object's version)")
        if not gm.get("creationTimestamp"):
            out.append(".metadata.creationTimestamp: empty")
        problems += [f"{name}{p}" for p in out]
        print(f"compare: {name}: apiVersion {g['apiVersion']}, resourceVersion {gm.get('resourceVersion')}, "
              f"{count_leaves(ws)} spec fields, labels {len(gm.get('labels') or {})}, "
              f"annotations {len(gm.get('annotations') or {})}: {'DIFFERENT' if out else 'equal'}")
    for p in problems:
        print(f"compare: MISMATCH {p}")
    if problems:
        return 1
    print(f"compare: istiod's configz equals the folder: {len(want)} objects, {fields} spec fields; "
          f"absent as they should be: {', '.join(args.absent or []) or '-'}")
    return 0


def count_leaves(v):
    if isinstance(v, dict):
        return sum(count_leaves(x) for x in v.values())
    if isinstance(v, list):
        return sum(count_leaves(x) for x in v)
    return 1


def walk(doc, path):
    keys = [int(p) if p.isdigit() else p for p in path.split(".")]
    for k in keys[:-1]:
        doc = doc[k]
    return doc, keys[-1]


def write_value(file, path, value):
    with open(file) as fh:
        doc = yaml.safe_load(fh)
    parent, key = walk(doc, path)
    parent[key] = value
    tmp = os.path.join(os.path.dirname(file), "." + os.path.basename(file) + ".tmp")
    with open(tmp, "w") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False)
    os.replace(tmp, file)


def cmd_measure(args):
    kind, ns, name = args.object.split("/")
    if args.target == "configz":
        getter = Getter(args.configz)

        def seen():
            status, _, body = getter.get(timeout=10)
            if status != 200:
                return None
            for c in json.loads(body):
                m = c["metadata"]
                if (c["kind"], m.get("namespace"), m["name"]) == (kind, ns, name):
                    parent, key = walk(c, args.path)
                    return parent.get(key)
            return None
    else:
        getter = Getter(args.url, args.host)

        def seen():
            try:
                status, headers, _ = getter.get(timeout=5)
            except (OSError, http.client.HTTPException):
                return None
            return headers.get(args.header.lower()) if status == 200 else None

    lat = []
    for i in range(1, args.runs + 1):
        value = f"{args.prefix}{i}-{int(time.time() * 1000) % 100000}"
        t0 = time.monotonic()
        write_value(args.file, args.path, value)
        deadline = t0 + args.timeout
        polls = 0
        while True:
            polls += 1
            if seen() == value:
                break
            if time.monotonic() > deadline:
                print(f"measure: run {i}: {value} not seen by {args.target} after {args.timeout}s", file=sys.stderr)
                return 1
            time.sleep(args.interval)
        ms = (time.monotonic() - t0) * 1000
        lat.append(ms)
        print(f"measure: {args.target} run {i}: {value} seen after {ms:.1f} ms ({polls} polls)")
        time.sleep(args.settle)
    summary = {
        "target": args.target,
        "runs": len(lat),
        "median_ms": round(statistics.median(lat), 1),
        "max_ms": round(max(lat), 1),
        "min_ms": round(min(lat), 1),
        "all_ms": [round(x, 1) for x in lat],
    }
    print("measure: summary " + json.dumps(summary))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--configz", required=True)
    c.add_argument("--folder", required=True)
    c.add_argument("--absent", action="append")
    m = sub.add_parser("measure")
    m.add_argument("--file", required=True)
    m.add_argument("--object", required=True, help="KIND/NAMESPACE/NAME of the changed object")
    m.add_argument("--path", required=True, help="dotted path of the changed value, from the document root")
    m.add_argument("--target", choices=["configz", "envoy"], required=True)
    m.add_argument("--configz")
    m.add_argument("--url")
    m.add_argument("--host")
    m.add_argument("--header")
    m.add_argument("--prefix", default="v")
    m.add_argument("--runs", type=int, default=5)
    m.add_argument("--timeout", type=float, default=60)
    m.add_argument("--interval", type=float, default=0.005)
    m.add_argument("--settle", type=float, default=0.0, help="pause between runs (s)")
    args = ap.parse_args()
    return cmd_compare(args) if args.cmd == "compare" else cmd_measure(args)


if __name__ == "__main__":
    sys.exit(main())
