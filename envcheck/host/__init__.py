"""`envcheck host`: before anything is pulled, which of our images will run on this host, and why not.

No torch: the driver and GPUs come from NVML (nvidia-ml-py, when installed), else `nvidia-smi`, else libcuda;
Docker's GPU setup from files (`/etc/docker/daemon.json`, CDI specs: envcheck.host.cdi, /dev/char links) and
`nvidia-ctk` on PATH; `--compose FILE` lints a compose file's GPU requests (envcheck.host.compose_gpu).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envcheck.checks.cuda.layers import MAJOR_FLOOR
from envcheck.core.versions import cuda_version_text, parse_version, release

# The driver floor per CUDA major (minor-version compatibility) is one table: envcheck.checks.cuda.layers.
MINOR_COMPAT_DRIVER = MAJOR_FLOOR


@dataclass
class HostGpus:
    """What the host's driver says, without torch."""

    source: str | None = None  # nvml, nvidia-smi, libcuda; None when no NVIDIA driver answered
    driver: str | None = None
    driver_cuda: str | None = None
    capabilities: list[tuple[int, int]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    why_none: str = ""
    listed: list[dict[str, Any]] = field(default_factory=list)  # each GPU: name and compute capability


def driver_problem(driver: str | None, driver_cuda: str | None, row_cuda: str) -> str | None:
    """Why a driver cannot run a CUDA `row_cuda` build, or None when it can (possibly via minor compat)."""
    if driver is None:
        return None
    row = release(row_cuda) or (0, 0)
    have = release(driver_cuda) if driver_cuda else None
    if have is not None and have[:2] >= row[:2]:
        return None
    need = MINOR_COMPAT_DRIVER.get(row[0])
    if need is None:
        return f"no record of the minimum driver for CUDA {row_cuda}"
    version = parse_version(driver)
    if version is None:
        return f"driver version {driver!r} is not a version"
    if version < parse_version(need):  # type: ignore[operator]
        supports = f" (supports CUDA {driver_cuda})" if driver_cuda else ""
        return (f"driver {driver}{supports} is too old for CUDA {row_cuda}: CUDA {row[0]}.x needs >= {need} "
                "(minor-version compatibility); upgrade the driver or pick a row with an older CUDA")
    return None


def minor_compat_note(driver_cuda: str | None, row_cuda: str) -> str:
    """A note when a row runs only through minor-version compatibility."""
    have = release(driver_cuda) if driver_cuda else None
    row = release(row_cuda) or (0, 0)
    if have is not None and have[:2] < row[:2]:
        return f"runs via minor-version compatibility (driver's CUDA {driver_cuda} < {row_cuda}: no newer PTX JIT)"
    return ""


def arch_problem(capabilities: list[tuple[int, int]], arch_list: list[str] | None) -> str | None:
    """Why some GPU's compute capability is not in a build's arch list, or None when all are covered."""
    from envcheck.checks.cuda.arch import arch_coverage

    if arch_list is None or not capabilities:
        return None
    missing = sorted({cap for cap in capabilities if arch_coverage(cap, arch_list) is None})
    if not missing:
        return None
    sms = ", ".join(f"sm_{a}{b}" for a, b in missing)
    return f"GPU arch {sms} is not in this build's arch list ({' '.join(arch_list)})"


def row_verdicts(gpus: HostGpus, rows: list[Any]) -> list[dict[str, Any]]:
    """For each matrix row: runs (True/False, or None when unknown without a GPU), why, and its tags."""
    out: list[dict[str, Any]] = []
    for row in rows:
        problems = [p for p in (driver_problem(gpus.driver, gpus.driver_cuda, row.cuda),
                                arch_problem(gpus.capabilities, row.arch_list)) if p]
        if gpus.source is None:
            runs: bool | None = None
            why = (f"needs an NVIDIA driver >= {MINOR_COMPAT_DRIVER.get((release(row.cuda) or (0,))[0], '?')} "
                   f"and a GPU in {' '.join(row.arch_list) if row.arch_list else 'an unrecorded arch list'}")
        else:
            runs = not problems
            why = "; ".join(problems) or minor_compat_note(gpus.driver_cuda, row.cuda) or "driver and GPU arch fit"
        out.append({"row": row.id, "torch": row.torch, "cuda": row.cuda, "runs": runs, "why": why,
                    "arch_list": row.arch_list,
                    "tags": [t for target in row.targets for t in row.tags(target)]})
    return out


def _capability(text: Any) -> tuple[int, int] | None:
    numbers = release(str(text))
    return (numbers[0], numbers[1]) if numbers and len(numbers) >= 2 else None


def read_host_gpus() -> HostGpus:
    """The driver, its CUDA and each GPU's compute capability: NVML, else nvidia-smi, else libcuda."""
    from envcheck.probe.inventory import nvml_inventory, smi_inventory
    from envcheck.probe.system import driver_cuda_version, is_absent, load_library, run_command

    reasons: list[str] = []
    nvml = nvml_inventory(torch_uuids=lambda: None)
    smi = nvml if isinstance(nvml, dict) else smi_inventory(run_command)
    if isinstance(nvml, str):
        reasons.append(nvml)
    if isinstance(smi, str):
        reasons.append(smi)
    lib = load_library("libcuda.so.1")
    lib_cuda = driver_cuda_version(lib) if not isinstance(lib, str) else None
    if isinstance(lib, str):
        reasons.append(lib)
    if isinstance(smi, dict) and isinstance(smi.get("gpus"), list) and smi["gpus"]:
        gpus = [g for g in smi["gpus"] if isinstance(g, dict)]
        caps = [c for c in (_capability(g.get("compute_capability")) for g in gpus) if c]
        driver_cuda = smi.get("driver_cuda")
        if is_absent(driver_cuda) or not isinstance(driver_cuda, str):
            driver_cuda = cuda_version_text(lib_cuda) if lib_cuda else None
        driver = smi.get("driver_version")
        listed: list[dict[str, Any]] = [{"name": g.get("name") if isinstance(g.get("name"), str) else "GPU",
                   "compute_capability": g.get("compute_capability") if _capability(g.get("compute_capability"))
                   else None} for g in gpus]
        return HostGpus(source=str(smi.get("source")), driver=driver if isinstance(driver, str) else None,
                        driver_cuda=driver_cuda, capabilities=caps, names=[str(g["name"]) for g in listed],
                        listed=listed)
    if lib_cuda:
        return HostGpus(source="libcuda", driver_cuda=cuda_version_text(lib_cuda),
                        why_none="libcuda loads but no GPU was listed (" + "; ".join(reasons) + ")")
    return HostGpus(why_none="; ".join(reasons) or "no NVIDIA driver answered")


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def docker_gpu_setup(root: str = "/") -> dict[str, Any]:
    """Whether Docker can hand GPUs to containers: the nvidia runtime in daemon.json, nvidia-ctk, CDI specs."""
    base = Path(root)
    found: dict[str, Any] = {}
    daemon = base / "etc/docker/daemon.json"
    try:
        config = json.loads(daemon.read_text())
        runtimes = sorted((config.get("runtimes") or {}) if isinstance(config, dict) else {})
        found["daemon_json_runtimes"] = runtimes
        found["default_runtime"] = config.get("default-runtime") if isinstance(config, dict) else None
        opts = config.get("exec-opts") if isinstance(config, dict) else None
        found["cgroup_driver"] = next((str(o).partition("=")[2] for o in opts or [] if isinstance(opts, list)
                                       and str(o).startswith("native.cgroupdriver=")), None)
    except FileNotFoundError:
        found["daemon_json_runtimes"] = []
    except (OSError, ValueError) as exc:
        found["daemon_json_runtimes"] = []
        found["daemon_json_error"] = f"{daemon}: {exc}"
    path = os.pathsep.join(str(base / p.lstrip("/")) for p in os.environ.get("PATH", "").split(os.pathsep) if p) \
        if root != "/" else None
    found["nvidia_ctk"] = shutil.which("nvidia-ctk", path=path)
    found["nvidia_container_runtime"] = shutil.which("nvidia-container-runtime", path=path)
    from envcheck.host.cdi import CDI_DIRS, spec_paths

    specs = spec_paths([str(base / d.lstrip("/")) for d in CDI_DIRS])
    found["cdi_specs"] = specs
    found["cdi_nvidia"] = [s for s in specs if "nvidia.com/gpu" in _read(s)]
    runtime = "nvidia" in found["daemon_json_runtimes"]
    if runtime or found["cdi_nvidia"]:
        how = " and ".join(filter(None, ["the nvidia runtime in daemon.json" if runtime else "",
                                          "CDI specs for nvidia.com/gpu" if found["cdi_nvidia"] else ""]))
        found["summary"] = f"Docker GPU setup: {how} (docker run --gpus all ...)"
        found["ready"] = True
    else:
        hint = ("nvidia-ctk is installed: run `sudo nvidia-ctk runtime configure --runtime=docker && "
                "sudo systemctl restart docker`" if found["nvidia_ctk"] else
                "install nvidia-container-toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker`")
        found["summary"] = f"Docker GPU setup: none found (no nvidia runtime in {daemon}, no CDI spec); {hint}"
        found["ready"] = False
    return found


def dev_char_problem(missing: list[str], cgroup_driver: str | None) -> dict[str, str] | None:
    """The host's NVIDIA nodes without /dev/char links: GPU containers under systemd's cgroup management lose them
    at the next `systemctl daemon-reload` (NVIDIA/nvidia-container-toolkit#48); None when none is missing or
    Docker is set to cgroupfs."""
    if not missing or cgroup_driver == "cgroupfs":
        return None
    from envcheck.checks.cuda.layers import DAEMON_RELOAD_FIX

    return {"problem": f"no /dev/char/<major>:<minor> link for {', '.join(missing)}: GPU containers run under the "
                       "systemd cgroup driver lose these GPUs at the next `systemctl daemon-reload` ('Failed to "
                       "initialize NVML: Unknown Error' inside them)",
            "fix": DAEMON_RELOAD_FIX.partition("; on the host, once: ")[2], "fault_class": "node"}


def dev_char_links(dev: str = "/dev") -> dict[str, Any]:
    """The NVIDIA nodes lacking /dev/char links, read on the host (a container's /dev has no /dev/char)."""
    from envcheck.checks.cuda.capture import missing_char_symlinks
    from envcheck.probe.system import in_container

    if in_container() is True:
        return {"checked": False, "why": "envcheck runs inside a container: run `envcheck host` on the host"}
    return {"checked": True, "missing": missing_char_symlinks(dev)}


def read_compose(path: str) -> dict[str, Any]:
    """A compose file as a mapping; one-line UsageError for a missing or malformed one."""
    from envcheck.core.errors import UsageError
    from envcheck.host.documents import read_document

    data = read_document(path, "compose file")
    if not isinstance(data, dict) or not isinstance(data.get("services", {}), dict):
        raise UsageError(f"compose file {path}: not a compose file (a mapping with a 'services' mapping is expected)")
    return data


def collect(matrix_path: str | None, compose_path: str | None = None) -> dict[str, Any]:
    """Everything `envcheck host` reports, as one JSON-able document."""
    from envcheck.core.errors import UsageError
    from envcheck.host.cdi import cdi_dirs, cdi_report
    from envcheck.host.compose_gpu import compose_gpu_problems, gpu_services
    from envcheck.images.matrix import default_matrix_path, load_matrix

    compose = read_compose(compose_path) if compose_path else None  # bad input fails before anything is probed
    gpus = read_host_gpus()
    doc: dict[str, Any] = {
        "gpu": {"source": gpus.source, "driver": gpus.driver, "driver_cuda": gpus.driver_cuda,
                "gpus": gpus.listed,
                "why_none": gpus.why_none or None},
        "docker": docker_gpu_setup(),
        "cdi": cdi_report(cdi_dirs(), bool(gpus.listed), gpus.driver),
        "dev_char": dev_char_links(),
    }
    doc["dev_char"]["problem"] = dev_char_problem(doc["dev_char"].get("missing", []),
                                                  doc["docker"].get("cgroup_driver"))
    if compose is not None:
        doc["compose"] = {"file": compose_path, "gpu_services": gpu_services(compose),
                          "problems": compose_gpu_problems(compose)}
    path = Path(matrix_path) if matrix_path else default_matrix_path()
    if not path.is_file():
        doc["matrix"] = None
        doc["matrix_why"] = (f"no matrix at {path}: pass --matrix PATH (docker/matrix.toml of a clone) "
                             "or set ENVCHECK_MATRIX")
        if matrix_path:
            raise UsageError(f"--matrix {matrix_path}: no such file")
        return doc
    matrix = load_matrix(path)
    doc["matrix"] = str(matrix.path)
    doc["rows"] = row_verdicts(gpus, list(matrix.rows))
    return doc

