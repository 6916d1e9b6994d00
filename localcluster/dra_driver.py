"""What a DRA GPU driver publishes, for KWOK nodes that have no driver of their own.

KWOK runs no kubelet plugin, so nothing would publish a node's devices. These builders
write the objects NVIDIA's k8s-dra-driver-gpu writes: one pool per node, named after the
node, with devices `gpu-<minor>` carrying `type`, `uuid`, `productName`, `brand`,
`architecture`, `cudaComputeCapability`, `driverVersion` and the PCI bus id, and a
`memory` capacity. The scheduler allocates from them exactly as from a driver's slices:
it reads the API, not the driver. The DeviceClasses are the driver's own two.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Mapping
from typing import Any

DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
API = "resource.k8s.io/v1"

H100 = ("NVIDIA H100 80GB HBM3", "81559Mi", "Hopper", "9.0")
A100_40 = ("NVIDIA A100-SXM4-40GB", "40960Mi", "Ampere", "8.0")


def _attr(kind: str, value: Any) -> dict[str, Any]:
    return {kind: value}


def gpu_device(
    node: str,
    minor: int,
    product: str | None = H100[0],
    memory: str | None = H100[1],
    architecture: str = H100[2],
    compute: str = H100[3],
    uuid: str | None = None,
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "type": _attr("string", "gpu"),
        "uuid": _attr(
            "string", uuid or f"GPU-{uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f'{node}/{minor}')}"
        ),
        "brand": _attr("string", "Nvidia"),
        "architecture": _attr("string", architecture),
        "cudaComputeCapability": _attr("version", f"{compute}.0"),
        "driverVersion": _attr("version", "580.82.7"),
        "index": _attr("int", minor),
        "minor": _attr("int", minor),
        "resource.kubernetes.io/pciBusID": _attr("string", f"0000:{0x10 + minor:02x}:00.0"),
    }
    if product is not None:
        attributes["productName"] = _attr("string", product)
    capacity = {"memory": {"value": memory}} if memory is not None else {}
    return {"name": f"gpu-{minor}", "attributes": attributes, "capacity": capacity}


def mig_device(node: str, parent: int, index: int, profile: str, memory: str) -> dict[str, Any]:
    parent_uuid = f"GPU-{uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f'{node}/{parent}')}"
    return {
        "name": f"gpu-{parent}-mig-{profile}-{index}",
        "attributes": {
            "type": _attr("string", "mig"),
            "uuid": _attr(
                "string", f"MIG-{uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f'{node}/{parent}/{index}')}"
            ),
            "parentUUID": _attr("string", parent_uuid),
            "profile": _attr("string", profile),
            "productName": _attr("string", A100_40[0]),
        },
        "capacity": {"memory": {"value": memory}, "multiprocessors": {"value": "14"}},
    }


def resource_slice(
    node: str,
    devices: list[dict[str, Any]],
    *,
    pool: str | None = None,
    generation: int = 1,
    name: str | None = None,
    slice_count: int = 1,
) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {
                "name": pool or node,
                "generation": generation,
                "resourceSliceCount": slice_count,
            },
            "devices": devices,
        },
    }


def gpu_slice(
    node: str, count: int, model: tuple[str, str, str, str] = H100, **kwargs: Any
) -> dict[str, Any]:
    product, memory, arch, compute = model
    devices = [gpu_device(node, i, product, memory, arch, compute) for i in range(count)]
    return resource_slice(node, devices, **kwargs)


def device_class(name: str, type_: str = "gpu") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selectors": [
            {
                "cel": {
                    "expression": f"device.driver == '{DRIVER}' &&"
                    f" device.attributes['{DRIVER}'].type == '{type_}'"
                }
            }
        ]
    }
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def device_classes() -> list[dict[str, Any]]:
    """The driver's own classes. The extendedResourceName one is the chart's
    (`dra.extendedResource`), rendered from it where a test or bench needs it."""
    return [device_class(GPU_CLASS), device_class(MIG_CLASS, "mig")]


def claim_template(name: str, gpus: int, device_class_name: str = GPU_CLASS) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": device_class_name,
                                "allocationMode": "ExactCount",
                                "count": gpus,
                            },
                        }
                    ]
                }
            }
        },
    }


def with_claim(pod_spec: Mapping[str, Any], template: str) -> dict[str, Any]:
    """A pod spec whose containers use a claim made from `template` (as a Deployment's pods
    do: one claim per pod)."""
    spec = dict(pod_spec)
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    containers = []
    for container in spec.get("containers") or []:
        c = dict(container)
        resources = dict(c.get("resources") or {})
        resources["claims"] = [{"name": "gpu"}]
        c["resources"] = resources
        containers.append(c)
    spec["containers"] = containers
    return spec
