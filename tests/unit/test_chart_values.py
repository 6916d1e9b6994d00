"""The chart's values are all documented: a comment on each in values.yaml, and a row each
in the chart README's table."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

from localcluster.binaries import REPO

VALUES = REPO / "chart" / "values.yaml"
README = REPO / "chart" / "README.md"
# Maps whose keys are the user's (labels, resources, selectors): documented as one value.
FREE_FORM = {"resources", "nodeSelector", "affinity", "issuerRef", "labels", "metricsFrom"}
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_]*):")


def leaves(node: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in node.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and key not in FREE_FORM:
            yield from leaves(value, f"{path}.")
        else:
            yield path


def test_every_value_has_a_comment_in_values_yaml() -> None:
    lines = VALUES.read_text().splitlines()
    uncommented = []
    free_form_indent: int | None = None
    for i, line in enumerate(lines):
        match = KEY.match(line)
        if not match:
            continue
        indent = len(match["indent"])
        if free_form_indent is not None and indent > free_form_indent:
            continue  # a key the user supplies, inside a free-form map
        free_form_indent = indent if match["key"] in FREE_FORM else None
        before = next((p.strip() for p in reversed(lines[:i]) if p.strip()), "")
        if not before.startswith("#"):
            uncommented.append(f"line {i + 1}: {match['key']}")
    assert uncommented == []


def test_every_value_has_a_row_in_the_readme_table() -> None:
    documented = set(re.findall(r"^\| `([A-Za-z0-9_.]+)` \|", README.read_text(), re.MULTILINE))
    values = set(leaves(yaml.safe_load(VALUES.read_text())))
    assert values - documented == set(), "values without a README row"
    assert documented - values == set(), "README rows for values that do not exist"
