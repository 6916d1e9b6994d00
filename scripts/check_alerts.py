"""`make lint`'s alert check: the chart's PrometheusRule as helm renders it, through promtool.

1. `helm template` with the rule on and the chart's default thresholds and durations;
2. its `spec` is written out as a plain rules file, which is what promtool reads;
3. `promtool check rules` on it, then `promtool test rules` on tests/alerts/, whose cases
   were written against those defaults;
4. before that, every alert must have a case where it fires and one where it must not: an
   alert without a negative case could fire on everything and still pass.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from localcluster import binaries, chart

TESTS = binaries.REPO / "tests" / "alerts"
OUT = binaries.REPO / ".cluster" / "alerts"


def rendered_rules() -> dict[str, Any]:
    docs = chart.render(
        "templates/monitoring/prometheusrule.yaml",
        values={"monitoring": {"prometheusRule": {"enabled": True}}},
    )
    (rule,) = docs
    return dict(rule["spec"])


def alert_names(rules: dict[str, Any]) -> set[str]:
    return {r["alert"] for group in rules["groups"] for r in group["rules"] if "alert" in r}


def coverage(test_file: Path) -> dict[str, set[str]]:
    """For each alert the tests name: "fires" and/or "silent", from their expected alerts."""
    seen: dict[str, set[str]] = defaultdict(set)
    for test in yaml.safe_load(test_file.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            seen[case["alertname"]].add("fires" if case.get("exp_alerts") else "silent")
    return seen


def uncovered(alerts: set[str], seen: dict[str, set[str]]) -> list[str]:
    problems = []
    for alert in sorted(alerts):
        for kind in ("fires", "silent"):
            if kind not in seen.get(alert, set()):
                problems.append(f"{alert} has no promtool case where it {kind}")
    problems += [
        f"tests name {a}, which the chart does not ship" for a in sorted(set(seen) - alerts)
    ]
    return problems


def promtool(*args: str) -> None:
    proc = subprocess.run([str(binaries.path("promtool")), *args], cwd=OUT, text=True)
    if proc.returncode != 0:
        sys.exit(f"check_alerts: promtool {' '.join(args)} failed (exit {proc.returncode})")


def main() -> None:
    rules = rendered_rules()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    tests = sorted(TESTS.glob("*_test.yaml"))
    seen: dict[str, set[str]] = defaultdict(set)
    for test in tests:
        shutil.copy(test, OUT / test.name)
        for alert, kinds in coverage(test).items():
            seen[alert] |= kinds
    problems = uncovered(alert_names(rules), seen)
    if problems:
        sys.exit("check_alerts: " + "; ".join(problems))
    promtool("check", "rules", "rules.yaml")
    promtool("test", "rules", *(t.name for t in tests))
    print(f"check_alerts: {len(alert_names(rules))} alerts, each firing and silent, pass")


if __name__ == "__main__":
    main()
