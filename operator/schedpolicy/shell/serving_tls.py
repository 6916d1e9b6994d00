"""TLS for the ports this project serves: the webhook's /hints and both /metrics.

TLS 1.2 or later, and on 1.2 only ECDHE key exchange with AEAD ciphers (Mozilla's
intermediate profile, without its DHE suites); TLS 1.3's suites are all of that kind.
"""

from __future__ import annotations

import datetime
import ssl
from asyncio import sslproto
from pathlib import Path

TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"

# asyncio gives every TLS connection a read buffer of SSLProtocol.max_size (256 KiB), kept
# for the connection's life. The apiserver calls the webhook over HTTP/1.1 (aiohttp serves
# no HTTP/2), one connection per call in flight, so a burst of creates opens hundreds: after
# a 5,000-pod burst they held 145 MiB of the heap (bench/profiles/b3-webhook-heap.txt). A TLS
# record carries at most 16 KiB, so a buffer of one record only costs a large request a few
# more reads.
READ_BUFFER_BYTES = 16 * 1024


def bound_read_buffers() -> None:
    """Every TLS connection this process accepts from now on reads through a buffer of
    READ_BUFFER_BYTES (process-wide: asyncio reads the size from the class)."""
    sslproto.SSLProtocol.max_size = READ_BUFFER_BYTES


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context that refuses TLS below 1.2 and ciphers without forward secrecy."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(TLS12_CIPHERS)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    context.load_cert_chain(cert, key)
    return context


def self_signed(directory: Path, host: str) -> tuple[str, str]:
    """A fresh key and a self-signed certificate for `host`, written under `directory`."""
    # Imported here: only a process without a mounted certificate pays for it.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)
