"""B3's baseline webhook: the least a Python admission webhook costs on this machine.

`python -m bench.null_webhook PORT CERT KEY` serves `/hints` over the same TLS, with the
same aiohttp server and msgspec decoding as `schedpolicy webhook`, and answers every
review `allowed` with no patch, holding no view and deciding nothing. Its latency under
the same load and burst is what this machine lets any webhook of ours reach: the gap
between it and ours is our code's.
"""

from __future__ import annotations

import ssl
import sys

import msgspec
from aiohttp import web


class _Request(msgspec.Struct):
    uid: str


class _Review(msgspec.Struct):
    request: _Request


async def admit(request: web.Request) -> web.Response:
    review = msgspec.json.decode(await request.read(), type=_Review)
    answer = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review.request.uid, "allowed": True},
    }
    return web.Response(body=msgspec.json.encode(answer), content_type="application/json")


def main() -> None:
    port, cert, key = sys.argv[1:4]
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    app = web.Application()
    app.router.add_post("/hints", admit)
    print("null webhook serving", flush=True)
    web.run_app(
        app, host="127.0.0.1", port=int(port), ssl_context=context, print=None, access_log=None
    )


if __name__ == "__main__":
    main()
