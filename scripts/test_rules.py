#!/usr/bin/env python3
"""Unit tests of every alert rule leasectl ships, with `promtool test rules`.

- assets/monitoring/leasectl.rules.yml, tested by
  assets/monitoring/tests/leasectl.rules.test.yml;
- the PrometheusRule of deploy/kubernetes/prometheusrule.yaml: promtool reads
  rule files, not Kubernetes objects, so its `spec` is written out as
  prometheusrule.rules.yml, tested by deploy/kubernetes/tests/prometheusrule.test.yml.

Each test file and the rule files it names are put in one temporary directory
and run there. Besides promtool's verdict, every alert of the shipped rules
must have a case where it fires (`exp_alerts` not empty) and one where it must
not (`exp_alerts: []`), and no test may name an alert that is not shipped.

  scripts/test_rules.py [--promtool PATH]

Exits 1 naming each problem, 0 when none. Needs PyYAML (the kubernetes-validate
virtualenv of scripts/setup-test-env.sh has it).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# (the test file, {the rule file's name in the test: where its groups come from})
SUITES = [
    ("assets/monitoring/tests/leasectl.rules.test.yml",
     {"leasectl.rules.yml": ("rules", "assets/monitoring/leasectl.rules.yml")}),
    ("deploy/kubernetes/tests/prometheusrule.test.yml",
     {"prometheusrule.rules.yml": ("PrometheusRule", "deploy/kubernetes/prometheusrule.yaml")}),
]


def rule_groups(kind, path):
    """The rule groups of a rule file, or of the PrometheusRule objects of a manifest."""
    with open(os.path.join(REPO, path)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    if kind == "rules":
        return docs[0]["groups"]
    groups = [g for d in docs if d.get("kind") == "PrometheusRule" for g in d["spec"]["groups"]]
    if not groups:
        sys.exit(f"test_rules: {path} holds no PrometheusRule")
    return groups


def coverage(test, staged, alerts, problems):
    """Every alert of `alerts` fires in some case of the test file `test`
    (read from its copy `staged`) and is quiet in another."""
    with open(staged) as f:
        doc = yaml.safe_load(f)
    fires, quiet = set(), set()
    for t in doc.get("tests", []):
        for case in t.get("alert_rule_test", []):
            name = case["alertname"]
            if name not in alerts:
                problems.append(f"{test}: tests {name}, which is not shipped")
            (fires if case.get("exp_alerts") else quiet).add(name)
    for a in sorted(alerts):
        if a not in fires:
            problems.append(f"{test}: no case where {a} fires")
        if a not in quiet:
            problems.append(f"{test}: no case where {a} must not fire")
    return len(fires & quiet & alerts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--promtool", default=shutil.which("promtool"))
    args = ap.parse_args()
    if not args.promtool:
        sys.exit("test_rules: promtool not found (scripts/setup-test-env.sh installs Debian's prometheus)")
    problems = []
    covered = 0
    for test, rule_files in SUITES:
        with tempfile.TemporaryDirectory(prefix="leasectl-rules-") as tmp:
            alerts = set()
            for name, (kind, src) in rule_files.items():
                groups = rule_groups(kind, src)
                alerts |= {r["alert"] for g in groups for r in g.get("rules", []) if "alert" in r}
                with open(os.path.join(tmp, name), "w") as f:
                    yaml.safe_dump({"groups": groups}, f, sort_keys=False)
            staged = os.path.join(tmp, os.path.basename(test))
            shutil.copy(os.path.join(REPO, test), staged)
            r = subprocess.run([args.promtool, "test", "rules", os.path.basename(test)],
                               cwd=tmp, capture_output=True, text=True)
            if r.returncode != 0:
                problems.append(f"{test}: promtool test rules failed:\n{r.stdout}{r.stderr}")
            covered += coverage(test, staged, alerts, problems)
    for p in problems:
        print(f"test_rules: {p}", file=sys.stderr)
    print(f"test_rules: {covered} alerts tested firing and quiet, {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
