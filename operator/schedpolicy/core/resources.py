"""Kubernetes resource quantities and a pod's effective requests. Pure.

The effective request is what the scheduler reserves for a pod: the larger of
(app containers + sidecars) and the peak of the init phase, plus overhead. A
container that sets only a limit is treated as requesting its limit, which is
what the apiserver's defaulting does on create.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


class QuantityError(ValueError):
    pass


def parse_quantity(value: str | int | float) -> Decimal:
    """'100m' -> 0.1, '2Gi' -> 2147483648, '1e3' -> 1000."""
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(value.strip())
    if not match:
        raise QuantityError(f"not a Kubernetes quantity: {value!r}")
    number, suffix = match.groups()
    try:
        return Decimal(number) * _SUFFIX[suffix]
    except InvalidOperation as err:
        raise QuantityError(f"not a Kubernetes quantity: {value!r}") from err


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = {**limits, **(resources.get("requests") or {})}
    out: dict[str, Decimal] = {}
    for name, quantity in requests.items():
        try:
            out[name] = parse_quantity(quantity)
        except QuantityError:
            continue  # the apiserver would have refused it; never let one field sink the pod
    return out


def _add(into: dict[str, Decimal], more: Mapping[str, Decimal]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, Decimal(0)) + amount


def _max(into: dict[str, Decimal], other: Mapping[str, Decimal]) -> None:
    for name, amount in other.items():
        into[name] = max(into.get(name, Decimal(0)), amount)


def effective_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    app: dict[str, Decimal] = {}
    for container in pod_spec.get("containers") or []:
        _add(app, _container_requests(container))

    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for container in pod_spec.get("initContainers") or []:
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            # A sidecar keeps running, both through later init containers and beside the app.
            _add(sidecars, requests)
            _max(init_peak, sidecars)
        else:
            during = dict(sidecars)
            _add(during, requests)
            _max(init_peak, during)

    total = dict(app)
    _add(total, sidecars)
    _max(total, init_peak)
    overhead: dict[str, Decimal] = {}
    for name, quantity in (pod_spec.get("overhead") or {}).items():
        try:
            overhead[name] = parse_quantity(quantity)
        except QuantityError:
            continue
    _add(total, overhead)
    return total


def millicores(amount: Decimal) -> int:
    return int((amount * 1000).to_integral_value())
