from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from schedpolicy.core.resources import QuantityError, effective_requests, millicores, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Decimal("0.1")),
        ("1", Decimal(1)),
        ("2.5", Decimal("2.5")),
        ("1Ki", Decimal(1024)),
        ("2Gi", Decimal(2 * 2**30)),
        ("1e3", Decimal(1000)),
        ("5k", Decimal(5000)),
        ("250u", Decimal("0.00025")),
        (4, Decimal(4)),
    ],
)
def test_parse_quantity(text: str | int, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "10 m", "1Xi"])
def test_bad_quantity(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def c(
    cpu: str | None = None, limit: str | None = None, gpu: str | None = None, **extra: Any
) -> dict[str, Any]:
    requests = {k: v for k, v in {"cpu": cpu}.items() if v}
    limits = {k: v for k, v in {"cpu": limit, "nvidia.com/gpu": gpu}.items() if v}
    return {"name": "x", "resources": {"requests": requests, "limits": limits}, **extra}


@pytest.mark.parametrize(
    ("spec", "cpu_m", "gpus"),
    [
        ({"containers": [c("100m"), c("250m")]}, 350, 0),
        ({"containers": [c(limit="500m")]}, 500, 0),  # limits-only: request defaults to limit
        ({"containers": [c("100m", limit="500m")]}, 100, 0),
        ({"containers": [c(gpu="2")]}, 0, 2),  # GPUs are set as limits
        # A regular init container larger than the app sets the peak.
        ({"initContainers": [c("2")], "containers": [c("500m")]}, 2000, 0),
        # Sidecars run beside the app, and beside later init containers.
        (
            {
                "initContainers": [c("200m", restartPolicy="Always"), c("1")],
                "containers": [c("500m")],
            },
            1200,
            0,
        ),
        ({"initContainers": [c("1", gpu="1")], "containers": [c("1", gpu="2")]}, 1000, 2),
        ({"containers": [c("100m")], "overhead": {"cpu": "50m"}}, 150, 0),
        ({"containers": [{"name": "x"}]}, 0, 0),
        ({}, 0, 0),
    ],
)
def test_effective_requests(spec: dict[str, Any], cpu_m: int, gpus: int) -> None:
    requests = effective_requests(spec)
    assert millicores(requests.get("cpu", Decimal(0))) == cpu_m
    assert int(requests.get("nvidia.com/gpu", 0)) == gpus
