"""The webhook's TLS connections each keep a read buffer of one TLS record, not asyncio's
256 KiB: hundreds of them are open during a burst of creates."""

from __future__ import annotations

import ssl
from asyncio import sslproto
from collections.abc import Iterator
from unittest import mock

import pytest

from schedpolicy.shell import serving_tls


@pytest.fixture
def restored() -> Iterator[None]:
    before = sslproto.SSLProtocol.max_size
    yield
    sslproto.SSLProtocol.max_size = before


def _protocol() -> sslproto.SSLProtocol:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    return sslproto.SSLProtocol(mock.Mock(), mock.Mock(), context, None, server_side=True)


def test_a_connection_accepted_after_the_bound_reads_through_one_record(restored: None) -> None:
    serving_tls.bound_read_buffers()
    proto = _protocol()
    assert len(proto.get_buffer(-1)) == serving_tls.READ_BUFFER_BYTES == 16 * 1024
    assert len(proto.get_buffer(1 << 20)) == 16 * 1024  # a larger ask is capped too
