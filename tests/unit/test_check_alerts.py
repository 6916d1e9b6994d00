"""The alert check refuses an alert without a firing case or without a silent one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scripts.check_alerts import TESTS, coverage, uncovered


def cases(*pairs: tuple[str, bool]) -> dict[str, object]:
    return {
        "tests": [
            {"alert_rule_test": [{"alertname": name, "exp_alerts": [{}] if fires else []}]}
            for name, fires in pairs
        ]
    }


@pytest.mark.parametrize(
    ("written", "problems"),
    [
        ([("A", True), ("A", False)], []),
        ([("A", True)], ["A has no promtool case where it silent"]),
        ([("A", False)], ["A has no promtool case where it fires"]),
        (
            [],
            ["A has no promtool case where it fires", "A has no promtool case where it silent"],
        ),
        (
            [("A", True), ("A", False), ("Gone", True)],
            ["tests name Gone, which the chart does not ship"],
        ),
    ],
)
def test_uncovered(tmp_path: Path, written: list[tuple[str, bool]], problems: list[str]) -> None:
    test_file = tmp_path / "t_test.yaml"
    test_file.write_text(yaml.safe_dump(cases(*written)))
    assert uncovered({"A"}, coverage(test_file)) == problems


def test_the_shipped_tests_cover_nine_alerts_both_ways() -> None:
    seen = coverage(TESTS / "schedpolicy_test.yaml")
    assert len(seen) == 9
    assert all(kinds == {"fires", "silent"} for kinds in seen.values())
