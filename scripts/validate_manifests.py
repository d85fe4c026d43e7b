#!/usr/bin/env python3
"""Checks deploy/kubernetes offline (no cluster): what .ci/run can check.

- Every built-in object (Namespace, ServiceAccount, DaemonSet, Service) against
  the Kubernetes schemas bundled with PyPI's kubernetes-validate, strictly
  (no unknown field), for the oldest and newest Kubernetes versions named below.
- The kubectl debug profile (a partial container) as the container of a Pod.
- The Prometheus Operator's objects (PodMonitor, ServiceMonitor,
  PrometheusRule), whose schemas are not bundled, by their structure: the
  fields they need, and each alert's severity and `for`.
- Every leasectl_* metric an alert names is one leasectl exports: the
  families of `leasectl -o prometheus --node` run on this machine.
- The flags the DaemonSet gives `leasectl serve` are flags of `serve`.

  scripts/validate_manifests.py --validator PATH/kubernetes-validate --leasectl PATH/leasectl

Exits 1 naming each problem, 0 when none.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import yaml  # installed with kubernetes-validate

VERSIONS = ["1.31.0", "1.37.0"]
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy", "kubernetes")
CRD_GROUP = "monitoring.coreos.com/v1"


def docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def validate(validator, path, problems):
    for v in VERSIONS:
        r = subprocess.run([validator, "--strict", "--no-warn", "-k", v, path],
                           capture_output=True, text=True)
        if r.returncode != 0:
            problems.append(f"{os.path.basename(path)} (Kubernetes {v}): {r.stdout}{r.stderr}".strip())


def need(obj, path, problems, where):
    cur = obj
    for key in path.split("."):
        if isinstance(cur, list):
            if not cur:
                problems.append(f"{where}: {path} is empty")
                return None
            cur = cur[0]
        if not isinstance(cur, dict) or key not in cur:
            problems.append(f"{where}: {path} is missing")
            return None
        cur = cur[key]
    return cur


def check_crd(d, where, problems):
    kind = d.get("kind")
    if kind == "PodMonitor":
        need(d, "spec.selector.matchLabels", problems, where)
        need(d, "spec.podMetricsEndpoints.port", problems, where)
    elif kind == "ServiceMonitor":
        need(d, "spec.selector.matchLabels", problems, where)
        need(d, "spec.endpoints.port", problems, where)
    elif kind == "PrometheusRule":
        for g in need(d, "spec.groups", problems, where) or []:
            for r in g.get("rules", []):
                name = r.get("alert", "?")
                for key in ("alert", "expr", "for"):
                    if key not in r:
                        problems.append(f"{where}: rule {name} has no {key}")
                if r.get("labels", {}).get("severity") not in ("critical", "warning"):
                    problems.append(f"{where}: rule {name} has no severity critical|warning")
                if not re.fullmatch(r"\d+[smh]", str(r.get("for", ""))):
                    problems.append(f"{where}: rule {name}: `for` is not a duration")
    else:
        problems.append(f"{where}: unexpected kind {kind}")


def exported_families(leasectl):
    """The families of `leasectl -o prometheus --node` here, and those the
    source registers (a family without series, e.g. one series per pod on a
    machine without pods, is not printed)."""
    r = subprocess.run([leasectl, "-o", "prometheus", "--node"], capture_output=True, text=True)
    fams = set(re.findall(r"^# TYPE (leasectl_\w+) ", r.stdout, re.M))
    if not fams:
        sys.exit(f"validate_manifests: `leasectl -o prometheus --node` exported nothing:\n{r.stderr}")
    src = os.path.join(HERE, "..", "..", "src", "monitor")
    for name in os.listdir(src):
        with open(os.path.join(src, name)) as f:
            fams |= {"leasectl_" + m for m in re.findall(r'register\(\s*"(\w+)"', f.read())}
    # A counter's samples end in _total.
    return fams | {f + "_total" for f in fams}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--validator", required=True)
    ap.add_argument("--leasectl", required=True)
    args = ap.parse_args()
    problems = []
    names = sorted(f for f in os.listdir(HERE) if f.endswith(".yaml"))
    rules = []
    serve_args = []
    for name in names:
        path = os.path.join(HERE, name)
        if name == "debug-profile.yaml":
            profile = docs(path)[0]
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug"},
                   "spec": {"containers": [dict(profile, name="debugger", image="leasectl:0.2.0")]}}
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as t:
                yaml.safe_dump(pod, t)
            validate(args.validator, t.name, problems)
            os.unlink(t.name)
            continue
        core = [d for d in docs(path) if d.get("apiVersion") != CRD_GROUP]
        for i, d in enumerate(docs(path)):
            where = f"{name}#{i}"
            if d.get("apiVersion") == CRD_GROUP:
                check_crd(d, where, problems)
                if d.get("kind") == "PrometheusRule":
                    rules += [r["expr"] for g in d["spec"]["groups"] for r in g.get("rules", [])]
            if d.get("kind") == "DaemonSet":
                c = d["spec"]["template"]["spec"]["containers"][0]
                serve_args = c.get("args", [])
        if core:
            validate(args.validator, path, problems)
    # The example exporter of docs/monitoring.md, built-in objects only.
    validate(args.validator, os.path.join(HERE, "..", "..", "assets", "monitoring", "daemonset.yaml"),
             problems)
    fams = exported_families(args.leasectl)
    for expr in rules:
        for m in re.findall(r"\bleasectl_\w+", expr):
            if m not in fams:
                problems.append(f"prometheusrule.yaml: {m} is not a family leasectl exports")
    if serve_args[:1] != ["serve"]:
        problems.append("daemonset.yaml: the container does not run `leasectl serve`")
    helptext = subprocess.run([args.leasectl, "serve", "--help"], capture_output=True, text=True).stdout
    for flag in (a for a in serve_args if a.startswith("--")):
        if flag not in helptext:
            problems.append(f"daemonset.yaml: {flag} is not a flag of `leasectl serve`")
    with open(os.path.join(HERE, "Containerfile")) as f:
        if "--bin leasectl" not in f.read():
            problems.append("Containerfile: does not build the leasectl binary")
    for p in problems:
        print(f"validate_manifests: {p}", file=sys.stderr)
    checked = len(names) + 2
    print(f"validate_manifests: {checked} files checked, {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
