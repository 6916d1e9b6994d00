"""The report's plots and table rows, shared by every benchmark's section.

Plots are written to bench/results/<name>.png, and linked from REPORT.md as
`results/<name>.png`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

RESULTS = Path(__file__).parent / "results"
COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3")


def save(fig: Figure, name: str) -> str:
    """The figure written as results/<name>.png and closed; its link from REPORT.md."""
    path = RESULTS / f"{name}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return f"results/{path.name}"


def bars(name: str, title: str, labels: list[str], values: list[float], unit: str) -> str:
    """A bar per value, each annotated with it; the plot's link from REPORT.md."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar(labels, values, color=list(COLORS[: len(values)]))
    for i, v in enumerate(values):
        ax.annotate(f"{v:g}", (i, v), ha="center", va="bottom")
    ax.set_title(title)
    ax.set_ylabel(unit)
    fig.tight_layout()
    return save(fig, name)


def row(*cells: Any) -> str:
    """One Markdown table row; an empty cell is a single space (`| | a |`)."""
    return "|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|"


def header(*names: str) -> list[str]:
    """A Markdown table's header row and its rule."""
    return [row(*names), "|" + "---|" * len(names)]
