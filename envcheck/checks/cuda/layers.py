"""Why `torch.cuda.is_available()` is False: probe each layer, name the missing one and its fix.

`envcheck.checks.cuda.capture.capture_cuda()` reads the real system; `diagnose()` is pure, so every layer's finding
can be tested (and replayed from a bundle), including the ones that need a GPU host to occur for real.
"""

from __future__ import annotations

import re
from typing import Any

from envcheck.checks.cuda.codes import KERNEL_MODULE, cuda_code_finding, version_skew
from envcheck.checks.cuda.finding import CAPABILITIES, VISIBLE_DEVICES, CudaLayers, LayerFinding
from envcheck.checks.cuda.visible_devices import unchecked_uuids, visible_devices_problem
from envcheck.core.cuda_compat import (
    below_floor,
    by_minor_compat,
    cuda_release,
    driver_floor,
    needs_newer_major,
)
from envcheck.core.result import FaultClass
from envcheck.core.versions import cuda_numbers

NO_TORCH = "torch is not installed"
IMPORT_FAILED = "import torch failed:"  # torch_error's prefix when the import itself raised
# Docker sets NVIDIA_DRIVER_CAPABILITIES from the NVIDIA capabilities of the device request (moby
# daemon/nvidia_linux.go: compute, compat32, graphics, utility, video, display), so [gpu, utility] means no libcuda.
CAPABILITIES_FIX = (
    "in compose: capabilities: [gpu, compute, utility] (or just [gpu], which leaves the image's "
    "NVIDIA_DRIVER_CAPABILITIES, else the toolkit's default utility,compute); with docker run: --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility"
)
CPU_TORCH_FIX = (
    "pip install --force-reinstall torch torchvision  # PyPI's Linux wheels are CUDA builds; or "
    "pick a CUDA index: --index-url https://download.pytorch.org/whl/cu128"
)


def driver_finding(layers: CudaLayers) -> LayerFinding | None:
    """The driver's fault by CUDA's compatibility rule: compare majors, then that major's driver floor.

    A lower minor of the same major is no fault (minor-version compatibility); it is named only when nothing
    else explains the failure (see `diagnose`)."""
    if not layers.driver_cuda or not layers.torch_cuda:
        return None
    have = cuda_numbers(layers.driver_cuda)
    need = cuda_release(layers.torch_cuda)
    floor = driver_floor(need[0])
    # After an upgrade without a reboot the kernel module is the old driver: the skew is the cause (reboot), and
    # libcuda (driver_cuda) tells what the host will run, so the module's version is not held to the floor.
    kernel = None if version_skew(layers) else KERNEL_MODULE.search(layers.proc_driver_version or "")
    fix = (
        f"upgrade the host driver to >= {floor or 'one for CUDA ' + str(need[0])} (any driver from there runs "
        f"every CUDA {need[0]}.x build), or use an image built for CUDA {have[0]}.x (a -cuda{have[0]}.x tag)"
    )
    if needs_newer_major(have, need):
        return LayerFinding(
            f"the driver supports CUDA {have[0]}.{have[1]}, but torch was built for CUDA "
            f"{layers.torch_cuda}: a CUDA {need[0]}.x build needs a driver >= {floor}",
            fix,
            FaultClass.NODE,
            layer="driver",
        )
    if have[0] == need[0] and floor and kernel and below_floor(kernel.group(1), need[0]):
        return LayerFinding(
            f"the driver {kernel.group(1)} is below CUDA {need[0]}.x's floor {floor} "
            f"(torch was built for CUDA {layers.torch_cuda})",
            fix,
            FaultClass.NODE,
            layer="driver",
        )
    return None


# A running container loses its GPUs when systemd re-applies the container's device cgroup (`systemctl
# daemon-reload`) without the NVIDIA devices: runc names them by /dev/char/<major>:<minor> links that the driver does
# not create. NVIDIA/nvidia-container-toolkit#48 (and NVIDIA/nvidia-docker#1730): "Failed to initialize NVML: Unknown
# Error"; "The container needs to be deleted once the issue occurs"; workarounds in this order.
DAEMON_RELOAD_FIX = (
    "delete and recreate the container (it stays cut off until then); on the host, once: sudo nvidia-ctk system "
    'create-dev-char-symlinks --create-all, and make it run at boot with the udev rule ACTION=="add", '
    'DEVPATH=="/bus/pci/drivers/nvidia", RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all" '
    "in /lib/udev/rules.d/71-nvidia-dev-char.rules; or give GPUs through CDI (--device nvidia.com/gpu=all), or "
    'run Docker with the cgroupfs driver ("exec-opts": ["native.cgroupdriver=cgroupfs"] in daemon.json)'
)


def device_access_finding(layers: CudaLayers) -> LayerFinding | None:
    """The /dev/nvidia* nodes exist but cannot be opened: EPERM is a device cgroup, EACCES the nodes' mode or a
    nodev mount. Without captured open() results, NVML's "Unknown Error" in a container stands in for EPERM."""
    refused = layers.device_access or {}
    gpus = [n for n in layers.device_nodes if re.fullmatch(r"nvidia\d+", n)]
    if not ({"nvidiactl", "nvidia-uvm"} & set(refused) or gpus and all(n in refused for n in gpus)):
        refused = {}  # some GPUs refused, the rest usable: a restriction by design (Slurm's ConstrainDevices)
    unknown = "unknown error" in (layers.nvml_error or "").lower()
    said = f"; NVML says {layers.nvml_error!r}" if unknown else ""
    eperm = ", ".join(f"/dev/{n}" for n, e in sorted(refused.items()) if e == "EPERM")
    eacces = ", ".join(f"/dev/{n}" for n, e in sorted(refused.items()) if e == "EACCES")
    if eperm and layers.in_container:
        return LayerFinding(
            f"{eperm} exist but open() is refused (EPERM){said}: the container's device "
            "cgroup no longer allows the GPUs. With the systemd cgroup driver a `systemctl daemon-reload` "
            "on the host re-applies it without them when the host lacks /dev/char/<major>:<minor> links "
            "for the NVIDIA nodes (NVIDIA/nvidia-container-toolkit#48)",
            DAEMON_RELOAD_FIX,
            FaultClass.NODE,
            layer="devices",
        )
    if eperm:
        return LayerFinding(
            f"{eperm} exist but open() is refused (EPERM){said}: a device cgroup denies this "
            "process the GPUs (a Slurm job without a GPU allocation under ConstrainDevices=yes, or a "
            "systemd unit's DevicePolicy=/DeviceAllow=)",
            "ask for the GPUs (srun/sbatch --gpus=N or --gres=gpu:N), or allow them to the unit "
            "(systemctl show <unit> -p DevicePolicy -p DeviceAllow; DeviceAllow=/dev/nvidiactl rw, "
            "/dev/nvidia0 rw, /dev/nvidia-uvm rw)",
            FaultClass.CONFIG,
            layer="devices",
        )
    if eacces:
        where = "this container's user" if layers.in_container else "this user"
        return LayerFinding(
            f"{eacces} exist but open() is refused (EACCES: permission denied){said}: the "
            f"nodes' mode or group bars {where}, or /dev is mounted nodev",
            "ls -l /dev/nvidia* and findmnt -T /dev/nvidia0 (no nodev); add the user to the nodes' group "
            "(docker run --group-add $(stat -c %g /dev/nvidia0), or usermod -aG video USER on a host), "
            "or on the host set the driver's NVreg_DeviceFileMode=0666",
            FaultClass.CONFIG if layers.in_container else FaultClass.NODE,
            layer="devices",
        )
    if unknown and layers.in_container and layers.device_nodes and layers.device_access is None:
        return LayerFinding(
            f"NVML says {layers.nvml_error!r} in a container whose /dev/nvidia* nodes exist: "
            "most often its device cgroup was re-applied without the GPUs (`systemctl daemon-reload` "
            "under the systemd cgroup driver, NVIDIA/nvidia-container-toolkit#48); whether open() is "
            "refused was not captured",
            DAEMON_RELOAD_FIX,
            FaultClass.NODE,
            layer="devices",
        )
    return None


MIG_FIX = (
    "CUDA enumerates one MIG device per process: run one process per slice with "
    "CUDA_VISIBLE_DEVICES=MIG-<uuid> (nvidia-smi -L lists them; e.g. one rank per slice), or disable MIG "
    "(nvidia-smi -i <gpu> -mig 0) for multi-GPU work in one process"
)


def visible_mig_devices(nvml: list[dict[str, Any]] | str | None, visible: str | None) -> list[str]:
    """The MIG devices this process was offered (all of them, or those CUDA_VISIBLE_DEVICES names)."""
    if not isinstance(nvml, list):
        return []
    slices = [u for g in nvml if g.get("mig") for u in g.get("mig_devices", []) if isinstance(u, str)]
    if visible is None:
        return slices
    tokens = [t.strip().lower() for t in visible.split(",") if t.strip()]
    return [u for u in slices if any(u.lower().startswith(t) for t in tokens if t.startswith("mig-"))]


def cpu_torch_finding(gpu_host: bool) -> LayerFinding:
    """A CPU-only torch: on a GPU host the CUDA wheels are the fix; on a host without one, CPU is what it is."""
    if gpu_host:
        return LayerFinding(
            "torch is a CPU-only build (torch.version.cuda is None) on a host with an NVIDIA GPU",
            CPU_TORCH_FIX,
            FaultClass.IMAGE,
            layer="torch",
        )
    return LayerFinding(
        "torch is a CPU-only build and this host has no NVIDIA GPU: CPU is what this install is",
        "nothing to reinstall for CPU work: run with --allow-cpu; for GPU work run on a GPU host "
        "(a CUDA wheel of torch is only needed there)",
        FaultClass.NODE,
        layer="torch",
    )


def diagnose(layers: CudaLayers) -> list[LayerFinding]:
    """Every broken layer, from the host up to torch, each with its fix."""
    found: list[LayerFinding] = []
    if not layers.torch_installed:
        return [LayerFinding(NO_TORCH, "pip install torch torchvision", FaultClass.IMAGE, layer="torch")]
    if layers.torch_error and layers.torch_error.startswith(IMPORT_FAILED):
        return [
            LayerFinding(
                f"torch cannot be imported ({layers.torch_error[len(IMPORT_FAILED) :].strip()})",
                "envcheck run --only libs.cuda  # names the library that failed to load and its fix "
                "(LD_LIBRARY_PATH, a duplicate nvidia-* wheel, a missing pin)",
                FaultClass.IMAGE,
                layer="torch",
            )
        ]
    gpu_nodes = sum(1 for n in layers.device_nodes if re.fullmatch(r"nvidia\d+", n))
    devices = device_access_finding(layers) if layers.device_nodes else None
    if devices:  # the nodes are there but unusable: the first broken layer, whatever CUDA then reports
        found.append(devices)
    if not layers.device_nodes and not layers.proc_driver:
        if layers.in_container:
            found.append(
                LayerFinding(
                    "no /dev/nvidia* device nodes and no /proc/driver/nvidia: the "
                    "container was started without GPU access",
                    "docker run --gpus all ... (and install nvidia-container-toolkit on the host: "
                    "nvidia-ctk runtime configure --runtime=docker)",
                    FaultClass.CONFIG,
                    layer="container",
                )
            )
        else:
            found.append(
                LayerFinding(
                    "no /dev/nvidia* device nodes and no /proc/driver/nvidia: no NVIDIA "
                    "driver is loaded on this host",
                    "install the NVIDIA driver and reboot "
                    "(nvidia-smi must work), or run with --allow-cpu on a CPU-only machine",
                    FaultClass.NODE,
                    layer="driver",
                )
            )
    elif layers.libcuda_error:
        caps = layers.driver_capabilities
        if layers.in_container and caps is not None and "compute" not in caps and "all" not in caps:
            fix = CAPABILITIES_FIX
            fault = FaultClass.CONFIG
            problem = (
                f"libcuda.so.1 cannot be loaded: NVIDIA_DRIVER_CAPABILITIES={caps!r} lacks 'compute' (set by "
                "-e, or by Docker from the GPU request's capabilities: compose's `capabilities:` list, "
                "docker run --gpus 'all,capabilities=...')"
            )
        else:
            fix = (
                "install the NVIDIA driver's user-space libraries (libcuda.so.1), or in a container "
                "use nvidia-container-toolkit with NVIDIA_DRIVER_CAPABILITIES=compute,utility"
            )
            problem = f"libcuda.so.1 cannot be loaded ({layers.libcuda_error})"
            fault = FaultClass.NODE
        own = CAPABILITIES if fault is FaultClass.CONFIG else ""
        found.append(LayerFinding(problem, fix, fault, code=own, layer="libcuda"))
    elif layers.driver_cuda and layers.torch_cuda:
        driver = driver_finding(layers)
        if driver:
            found.append(driver)
    code = cuda_code_finding(layers.torch_error, layers)
    # The driver-version finding already names error 35's cause, and unopenable nodes explain 999 and 100; any other
    # code is its own, more precise one.
    if code is not None:
        words = code.problem
        explained = (
            words.startswith("CUDA error 35")
            and any(f.layer == "driver" for f in found)
            or devices is not None
            and words.startswith(("CUDA error 999", "CUDA error 100"))
        )
        code = None if explained else code
    if code:
        found.append(code)
    cvd = visible_devices_problem(layers.visible_devices, gpu_nodes, layers.nvml_gpus)
    if cvd:
        found.append(
            LayerFinding(
                cvd,
                "unset CUDA_VISIBLE_DEVICES, or set it to valid indices such as 0 or 0,1",
                FaultClass.CONFIG,
                code=VISIBLE_DEVICES,
                layer="CUDA_VISIBLE_DEVICES",
            )
        )
    if layers.torch_cuda is None:
        found.append(cpu_torch_finding(gpu_host=bool(layers.device_nodes or layers.proc_driver)))
    if not found and layers.driver_cuda and layers.torch_cuda:
        have = cuda_numbers(layers.driver_cuda)
        if by_minor_compat(have, cuda_release(layers.torch_cuda)):  # allowed by minor-version compatibility
            found.append(
                LayerFinding(
                    f"nothing else explains it; the driver supports CUDA {have[0]}.{have[1]} "
                    f"and torch was built for {layers.torch_cuda}, which minor-version compatibility "
                    "allows except for features that need the newer driver (e.g. PTX JIT)",
                    f"try a driver of CUDA {layers.torch_cuda} or newer",
                    FaultClass.NODE,
                    layer="driver",
                )
            )
    if not found:
        found.append(
            LayerFinding(
                "CUDA init failed for a reason envcheck does not recognise: "
                f"{layers.torch_error or 'no error text'}"
                f"{unchecked_uuids(layers.visible_devices, layers.nvml_gpus)}",
                "run nvidia-smi on the host and in the container; check dmesg for NVRM errors",
                FaultClass.NODE,
                layer="unknown",
            )
        )
    return found
