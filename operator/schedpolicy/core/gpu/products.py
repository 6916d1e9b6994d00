"""GPU product names as GPU Feature Discovery and NVML report them, shortened to the model
our labels carry (NVIDIA-A100-SXM4-80GB -> A100). Pure."""

from __future__ import annotations

import re

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# GFD appends `-MIG-<profile>` under MIG single (a compute-instance profile may lead:
# 1c.2g.10gb) and `-MIG-INVALID` when the node's MIG layout breaks that strategy.
_MIG = re.compile(r"[-_]MIG[-_](?:\d+c\.)?(?P<profile>\d+g\.(?P<gb>\d+)gb)", re.IGNORECASE)
_MIG_INVALID = re.compile(r"[-_]MIG[-_]INVALID\b", re.IGNORECASE)
_MIG_ANY = re.compile(r"[-_]MIG[-_]", re.IGNORECASE)
_SHARED = re.compile(r"[-_]SHARED$", re.IGNORECASE)
# Brand words in front of the model: NVIDIA-Tesla-V100, GRID-T4-16Q (a vGPU profile).
_BRANDS = {"nvidia", "tesla", "geforce", "quadro", "grid"}
# Words that name a product line, not a GPU: they join the word after them (RTX-4090,
# GT-710, RTX-PRO-6000, TITAN-RTX).
_SERIES = {"rtx", "gtx", "gt", "gts", "titan", "pro"}
# Words after the model number that make it another product, often with other memory
# (RTX 6000 has 24 GB, RTX 6000 Ada 48 GB). Everything else there is form factor, memory
# size, interconnect or a vGPU profile, and is dropped.
_QUALIFIERS = {q.lower(): q for q in ("Ti", "SUPER", "Ada", "Blackwell", "D", "Laptop", "SFF")}
# What NVML answers for a device it cannot name.
_PLACEHOLDERS = {("graphics", "device"), ("device",), ("unknown",)}


def normalize_product(product: str) -> str | None:
    """GFD product string to a short model: NVIDIA-A100-SXM4-80GB -> A100.

    The product line stays (RTX-4090, GT-710, RTX-PRO-6000), and so do the words that make
    it another card (RTX-3090-Ti, RTX-6000-Ada); form factor, memory size, interconnect,
    vGPU profile, MIG and sharing suffixes go. None for a placeholder or nothing left.
    """
    name = _MIG_ANY.split(product, maxsplit=1)[0]
    name = _SHARED.sub("", name)
    tokens = [t for t in re.split(r"[-_ ]+", name) if t]
    while tokens and tokens[0].lower() in _BRANDS:
        tokens = tokens[1:]
    if not tokens or tuple(t.lower() for t in tokens) in _PLACEHOLDERS:
        return None
    words: list[str] = []
    rest = iter(tokens)
    for token in rest:
        if token.lower() in _SERIES:
            words.append(token.upper())
            continue
        words.append(token)
        break
    words += [_QUALIFIERS[t.lower()] for t in rest if t.lower() in _QUALIFIERS]
    model = "-".join(words)
    return model if _LABEL_VALUE.match(model) and len(model) <= 63 else None
