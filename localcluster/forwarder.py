"""A TCP forwarder: `python -m localcluster.forwarder LISTEN_HOST LISTEN_PORT TARGET_PORT`.

The apiserver listens on loopback only, which pods cannot reach. Binding it to every
interface would also expose it on the machine's uplink; this forwards the one address pods
can reach (the bridge's) to loopback instead. TLS passes through untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def serve(listen_host: str, listen_port: int, target_port: int) -> None:
    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(forward, listen_host, listen_port)
    async with server:
        await server.serve_forever()


def main() -> None:
    host, port, target = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    asyncio.run(serve(host, port, target))


if __name__ == "__main__":
    main()
