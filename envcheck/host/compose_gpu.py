"""A compose file's GPU requests, linted without Docker: capabilities that leave CUDA out, or that no driver has.

Docker turns the NVIDIA capabilities of a device request into NVIDIA_DRIVER_CAPABILITIES (moby
daemon/nvidia_linux.go, devices_nvidia_linux.go: `allNvidiaCaps` = compute, compat32, graphics, utility, video,
display), so `capabilities: [gpu, utility]` gives the container nvidia-smi but no libcuda.so.1
(mudler/LocalAI#11973, weaviate/weaviate#1736). `[gpu]` alone sets nothing, and the image's value or the toolkit's
default (utility,compute) applies. A capability outside the driver's set matches no driver (moby
daemon/devices.go, capabilities.Set.Match): Docker refuses with `could not select device driver "nvidia" with
capabilities: [[gpu all]]`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from envcheck.images.gpu_errors import DRIVER_CAPS, NVIDIA_CAPS

COMPUTE_FIX = (
    "capabilities: [gpu, compute, utility] (or just [gpu]: the image's or the toolkit's default applies)"
)
ENV_FIX = "NVIDIA_DRIVER_CAPABILITIES: compute,utility (or all)"


def _path(node: Any, *keys: str) -> Any:
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment")
    if isinstance(env, dict):
        return {str(k): str(v) for k, v in env.items() if v is not None}
    if isinstance(env, list):
        return dict(str(item).partition("=")[::2] for item in env if "=" in str(item))
    return {}


def _capabilities(device: dict[str, Any]) -> list[str]:
    raw = device.get("capabilities")
    return [str(c) for c in raw] if isinstance(raw, list) else []


def _services(compose: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    services = _path(compose, "services")
    for name, service in sorted(services.items() if isinstance(services, dict) else []):
        if isinstance(service, dict):
            yield str(name), service


def _gpu_devices(service: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    devices = _path(service, "deploy", "resources", "reservations", "devices")
    for index, device in enumerate(devices if isinstance(devices, list) else []):
        driver = device.get("driver") if isinstance(device, dict) else "-"
        if isinstance(device, dict) and (
            driver == "nvidia" or driver is None and DRIVER_CAPS.intersection(_capabilities(device))
        ):
            yield index, device  # other vendors' requests are left alone


def gpu_services(compose: Any) -> list[str]:
    """The services with an NVIDIA GPU request (deploy.resources.reservations.devices)."""
    return [name for name, service in _services(compose) if any(True for _ in _gpu_devices(service))]


def _device_problem(name: str, index: int, device: dict[str, Any]) -> dict[str, str] | None:
    caps = _capabilities(device)
    driver = device.get("driver")
    where = f"service {name!r}: deploy.resources.reservations.devices[{index}]"
    unknown = [c for c in caps if c not in DRIVER_CAPS]
    if unknown:
        return {
            "service": name,
            "fault_class": "config",
            "problem": f"{where} asks for capabilities {caps}, and {', '.join(map(repr, unknown))} is none of "
            "Docker's nvidia driver's (gpu, nvidia, " + ", ".join(NVIDIA_CAPS) + "): Docker "
            f'refuses with \'could not select device driver "{driver or ""}" with capabilities: '
            f"[[{' '.join(caps)}]]'",
            "fix": f"{COMPUTE_FIX}; for every driver capability: environment: NVIDIA_DRIVER_CAPABILITIES: all",
        }
    asked = [c for c in caps if c in NVIDIA_CAPS]
    if asked and "compute" not in asked:
        return {
            "service": name,
            "fault_class": "config",
            "problem": f"{where} asks for capabilities {caps}, so Docker sets NVIDIA_DRIVER_CAPABILITIES="
            f"{','.join(asked)}: without 'compute' libcuda.so.1 is not mounted and CUDA is "
            "unavailable in the container",
            "fix": COMPUTE_FIX,
        }
    return None


def compose_gpu_problems(compose: Any) -> list[dict[str, str]]:
    """Each service's GPU request problem (service, problem, fix, fault_class); [] when every request gets CUDA."""
    found: list[dict[str, str]] = []
    for name, service in _services(compose):
        for index, device in _gpu_devices(service):
            problem = _device_problem(name, index, device)
            if problem:
                found.append(problem)
        caps = _environment(service).get("NVIDIA_DRIVER_CAPABILITIES")
        if (
            caps is not None
            and "${" not in caps
            and not {"compute", "all"} & {c.strip() for c in caps.split(",")}
        ):
            found.append(
                {
                    "service": str(name),
                    "fault_class": "config",
                    "problem": f"service {name!r}: environment NVIDIA_DRIVER_CAPABILITIES={caps!r} lacks "
                    "'compute': libcuda.so.1 is not mounted and CUDA is unavailable",
                    "fix": f"environment: {ENV_FIX}",
                }
            )
    return found
