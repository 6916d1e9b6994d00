"""GPU product names as GPU Feature Discovery and NVML report them, shortened to the model
our labels carry (NVIDIA-A100-SXM4-80GB -> A100). Pure."""

from __future__ import annotations

import re

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# A MIG profile names its slice's memory: 1g.5gb is one compute slice with 5 GB. A
# compute-instance profile may lead (1c.2g.10gb). GFD and the DRA driver spell it alike.
_MIG_PROFILE = r"(?:\d+c\.)?(?P<profile>\d+g\.(?P<gb>\d+)gb)"
# GFD appends `-MIG-<profile>` under MIG single and `-MIG-INVALID` when the node's MIG
# layout breaks that strategy.
_MIG_IN_PRODUCT = re.compile(rf"[-_]MIG[-_]{_MIG_PROFILE}", re.IGNORECASE)
_MIG_NAME = re.compile(rf"^{_MIG_PROFILE}$", re.IGNORECASE)
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


# Sources that disagree by less than this on memory agree: NVML counts what the driver leaves
# usable, EC2 the card's size. ECC on GDDR cards keeps 1/16 back (a T4 shows 15109 MiB of
# EC2's 16384, 7.8% less); a real disagreement is another size class (40 GB against 80 GB).
MEMORY_TOLERANCE = 0.10


def memory_agrees(a_mib: int, b_mib: int) -> bool:
    """Two memory figures for one device agree: within MEMORY_TOLERANCE of the larger."""
    return abs(a_mib - b_mib) <= MEMORY_TOLERANCE * max(a_mib, b_mib)


def mig_profile_mib(profile: str) -> int | None:
    """A MIG profile's slice memory in MiB (1g.5gb -> 5120); None if it is no profile."""
    match = _MIG_NAME.match(profile)
    return int(match.group("gb")) * 1024 if match else None


def mig_profile_in_product(product: str) -> str | None:
    """The MIG profile GFD appended to a product name under MIG single, if any."""
    match = _MIG_IN_PRODUCT.search(product)
    return match.group("profile") if match else None


def mig_invalid(product: str) -> bool:
    """GFD names the node's MIG layout one the device plugin cannot serve."""
    return _MIG_INVALID.search(product) is not None
