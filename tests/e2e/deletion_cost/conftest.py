"""Deletion costs: one operator process for every module of the package.

The helpers these tests share with test_dra (waiting for costs, scaling down) are in the
e2e conftest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess, running


@pytest.fixture(scope="package")
def operator(cluster: LocalCluster, crd: str) -> Iterator[OperatorProcess]:
    """An operator process from this checkout, as its own user, shared by the package's
    modules (the suite's own `operator` is one per module)."""
    with running(cluster, "--verbose") as proc:
        yield proc
