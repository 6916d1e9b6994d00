"""A pod's effective requests (core/resources.py) in milli-units, from its decoded spec. Pure.

Parsing the quantities is most of what building a pod's record costs, and the pods of one
ReplicaSet ask alike: each shape of containers is worked out once. Bounded: when full the
cache starts over, which costs only time.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from schedpolicy.core.resources import effective_requests, millicores
from schedpolicy.view import wire

_LIMIT = 8_192
_ENCODER = msgspec.json.Encoder()
_BY_SHAPE: dict[bytes, Mapping[str, int]] = {}


def milli_requests(spec: wire.PodSpec) -> Mapping[str, int]:
    """Shared between the pods of one shape: read it, never change it."""
    # The decoded containers hold only what effective_requests reads, so they are the key.
    key = _ENCODER.encode((spec.containers, spec.init_containers, spec.overhead))
    found = _BY_SHAPE.get(key)
    if found is None:
        if len(_BY_SHAPE) >= _LIMIT:
            _BY_SHAPE.clear()
        # effective_requests is written over the API's JSON shape; a pod has few containers,
        # so rebuilding that much of it is cheap.
        requests = effective_requests(msgspec.to_builtins(spec))
        found = _BY_SHAPE[key] = {k: millicores(v) for k, v in requests.items()}
    return found
