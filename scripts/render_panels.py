"""Draw the dashboards' main panels from what a real Prometheus returned, so an admin can
see what the dashboards show before installing Grafana.

tests/incluster/test_monitoring.py saves every panel's query_range result in
.cluster/incluster/panels/<dashboard uid>.json; this draws the chosen panels into
chart/dashboards/preview/<dashboard uid>.png.
    .venv/bin/python -m scripts.render_panels
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from localcluster.binaries import REPO

DATA = REPO / ".cluster" / "incluster" / "panels"
OUT = REPO / "chart" / "dashboards" / "preview"
MAIN_PANELS = {
    "schedpolicy-operator": [
        "Webhook latency p50 / p99",
        "Cost writes/s by result",
        "Pods per cost band",
        "Pods waiting on a policy's scheduler",
        "GPU nodes labelled, by policy",
        "Node label writes/s by result",
    ],
    "schedpolicy-scheduler": [
        "Scheduling attempts/s by result",
        "Scheduling attempt duration p95 by profile and result",
        "Pending pods by queue",
    ],
}


def legend(template: str, metric: dict[str, str]) -> str:
    out = template
    for key, value in metric.items():
        out = out.replace("{{" + key + "}}", value).replace("{{ " + key + " }}", value)
    return out or ",".join(f"{k}={v}" for k, v in metric.items()) or "value"


def draw(uid: str, targets: list[dict[str, Any]]) -> Path:
    by_panel: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for target in targets:
        by_panel[target["panel"]].append(target)
    titles = [t for t in MAIN_PANELS[uid] if t in by_panel]
    cols = 2 if len(titles) > 3 else len(titles)
    rows = math.ceil(len(titles) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 3.2 * rows), squeeze=False)
    for ax, title in zip(axes.flat, titles, strict=False):
        start = None
        for target in by_panel[title]:
            for series in target["result"]:
                points = [(float(t), float(v)) for t, v in series["values"]]
                start = min(start or points[0][0], points[0][0])
                xs = [t - start for t, _ in points]
                ax.plot(
                    xs, [v for _, v in points], label=legend(target["legend"], series["metric"])
                )
        unit = by_panel[title][0]["unit"]
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("seconds")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    for ax in list(axes.flat)[len(titles) :]:
        ax.axis("off")
    fig.suptitle(f"{uid}: panels from a real Prometheus scraping the chart (tests/incluster)")
    fig.tight_layout()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{uid}.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def main() -> None:
    files = sorted(DATA.glob("*.json"))
    if not files:
        sys.exit(f"render_panels: no panel data in {DATA}; run make incluster first")
    for path in files:
        print(draw(path.stem, json.loads(path.read_text())))


if __name__ == "__main__":
    main()
