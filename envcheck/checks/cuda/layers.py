"""Why `torch.cuda.is_available()` is False: probe each layer, name the missing one and its fix.

`envcheck.checks.cuda.capture.capture_cuda()` reads the real system; `diagnose()` is pure, so every layer's finding
can be tested (and replayed from a bundle), including the ones that need a GPU host to occur for real.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envcheck.core.cuda_compat import (
    below_floor,
    by_minor_compat,
    cuda_release,
    driver_floor,
    needs_newer_major,
)
from envcheck.core.versions import cuda_numbers
from envcheck.probe.nvml import NVML_BUDGET_S, hang_text, read_nvml

NO_TORCH = "torch is not installed"
IMPORT_FAILED = "import torch failed:"  # torch_error's prefix when the import itself raised
# Docker sets NVIDIA_DRIVER_CAPABILITIES from the NVIDIA capabilities of the device request (moby
# daemon/nvidia_linux.go: compute, compat32, graphics, utility, video, display), so [gpu, utility] means no libcuda.
CAPABILITIES_FIX = ("in compose: capabilities: [gpu, compute, utility] (or just [gpu], which leaves the image's "
                    "NVIDIA_DRIVER_CAPABILITIES, else the toolkit's default utility,compute); with docker run: --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility")
CPU_TORCH_FIX = ("pip install --force-reinstall torch torchvision  # PyPI's Linux wheels are CUDA builds; or "
                 "pick a CUDA index: --index-url https://download.pytorch.org/whl/cu128")


@dataclass(frozen=True)
class CudaLayers:
    """What each layer between the GPU and torch looks like here."""

    torch_installed: bool
    torch_cuda: str | None = None
    visible_devices: str | None = None
    device_nodes: list[str] = field(default_factory=list)
    proc_driver: bool = False
    in_container: bool = False
    libcuda_error: str | None = None
    driver_cuda: int | None = None  # e.g. 12080
    driver_capabilities: str | None = None
    torch_error: str | None = None
    cu_init: int | None = None  # cuInit(0)'s CUresult, asked of libcuda directly when torch saw no GPU
    proc_driver_version: str | None = None  # /proc/driver/nvidia/version
    libraries: list[str] = field(default_factory=list)  # CUDA-stack libraries mapped (/proc/self/maps)
    nvml_error: str | None = None  # NVML's first error (e.g. "GPU 0: GPU is lost")
    nvml_gpus: list[dict[str, Any]] | str | None = None  # NVML's GPUs (uuid, mig, mig_devices), or why not known
    device_access: dict[str, str] | None = None  # /dev/nvidia* nodes open() refuses: name -> errno name; None: unread
    char_symlinks_missing: list[str] | None = None  # host only: nodes without a /dev/char/<major>:<minor> link


@dataclass(frozen=True)
class Finding:
    """One broken layer: what is wrong and the concrete fix."""

    layer: str
    problem: str
    fix: str
    fault_class: str  # node, image or config: who has to act (see envcheck.core.result.FaultClass)
    # The stable finding code (`cuda.error.802`); empty: `cuda.<layer>` (see `finding_code`).
    code: str = ""


def finding_code(finding: Finding) -> str:
    """The finding's stable code: its own, else `cuda.<layer>` (cuda.container, cuda.driver, cuda.devices ...)."""
    return finding.code or f"cuda.{finding.layer.replace('-', '_')}"


def nvml_uuids(nvml: list[dict[str, Any]] | str | None) -> list[str] | None:
    """Every GPU and MIG device UUID NVML lists; None when NVML could not tell."""
    if not isinstance(nvml, list):
        return None
    return [u for g in nvml for u in [g.get("uuid"), *g.get("mig_devices", [])] if isinstance(u, str)]


def _uuid_problem(value: str, token: str, nvml: list[dict[str, Any]] | str | None) -> str | None:
    known = nvml_uuids(nvml)
    if known is None:  # not a finding: said in the unknown finding's text (see unchecked_uuids)
        return None
    if not any(u.lower().startswith(token.lower()) for u in known):  # CUDA accepts an unambiguous UUID prefix
        return (f"CUDA_VISIBLE_DEVICES={value!r} names {token}, which no GPU here has (NVML lists "
                f"{', '.join(known) or 'no GPU'}): CUDA then sees no device")
    return None


def unchecked_uuids(value: str | None, nvml: list[dict[str, Any]] | str | None) -> str:
    """' (CUDA_VISIBLE_DEVICES names GPU-..., which could not be checked ...)' when NVML could not tell, else ''."""
    tokens = [t.strip() for t in (value or "").split(",") if t.strip().startswith(("GPU-", "MIG-"))]
    if not tokens or nvml_uuids(nvml) is not None:
        return ""
    why = nvml if isinstance(nvml, str) else "NVML state was not captured"
    return (f" (CUDA_VISIBLE_DEVICES names {', '.join(tokens)}, which could not be checked against this host's "
            f"GPUs: {why})")


def _visible_devices_problem(value: str | None, gpu_nodes: int,
                             nvml: list[dict[str, Any]] | str | None = None) -> str | None:
    if value is None:
        return None
    if not value.strip():
        return "CUDA_VISIBLE_DEVICES is set but empty, which hides every GPU"
    tokens = [t.strip() for t in value.split(",")]
    if tokens[0] == "-1":
        return "CUDA_VISIBLE_DEVICES=-1 hides every GPU (the usual way to ask for none)"
    repeated = sorted({t for t in tokens if tokens.count(t) > 1})
    if repeated:
        return f"CUDA_VISIBLE_DEVICES={value!r} names {', '.join(repeated)} more than once (CUDA then sees no GPU)"
    for token in (t.strip() for t in value.split(",")):
        if token.startswith(("GPU-", "MIG-")):
            uuid = _uuid_problem(value, token, nvml)
            if uuid:
                return uuid
            continue
        if not re.fullmatch(r"\d+", token):
            return f"CUDA_VISIBLE_DEVICES={value!r} is invalid ({token!r} is not a GPU index or UUID)"
        if gpu_nodes and int(token) >= gpu_nodes:
            return f"CUDA_VISIBLE_DEVICES={value!r} names GPU {token}, but only {gpu_nodes} exist"
    return None


# CUDA driver errors as torch's warning shows them ("CUDA initialization: ... Error 802: system not yet
# initialized"): the cause each code means on a host, its fix, and who must act.
CUDA_CODES: dict[int, tuple[str, str, str]] = {
    802: ("CUDA error 802 (system not yet initialized): on NVSwitch systems (HGX/DGX) nvidia-fabricmanager is not "
          "running, or its version differs from the driver's",
          "on the host: systemctl enable --now nvidia-fabricmanager, with the fabricmanager package of exactly the "
          "driver's version (nvidia-smi -q | grep -i fabric shows the state)", "node"),
    803: ("CUDA error 803 (unsupported display driver / cuda driver combination): the libcuda in use is not the "
          "kernel driver's (a stale libcuda.so.1, or a forward-compat libcuda from the image on a newer driver)",
          "make libcuda.so.1 the one of the loaded driver (cat /proc/driver/nvidia/version vs ls -l the libcuda "
          "that ldconfig -p lists); in a container, remove a cuda-compat package/LD_LIBRARY_PATH entry", "node"),
    804: ("CUDA error 804 (forward compatibility was attempted on non supported HW): a cuda-compat libcuda is in "
          "use on a GPU that does not support forward compatibility (it is for data-center GPUs)",
          "drop the forward-compat libcuda (cuda-compat package, /usr/local/cuda/compat on LD_LIBRARY_PATH) and "
          "upgrade the host driver instead", "image"),
    100: ("CUDA error 100 (no CUDA-capable device is detected): every GPU is hidden from this process",
          "check NVIDIA_VISIBLE_DEVICES (void/none hide all) and CUDA_VISIBLE_DEVICES, and docker run --gpus all",
          "config"),
    35: ("CUDA error 35 (CUDA driver version is insufficient for CUDA runtime version)",
         "upgrade the host driver (CUDA 12.x needs >= 525.60.13, 13.x >= 580), or use a torch built for an older "
         "CUDA major", "node"),
    999: ("CUDA error 999 (unknown error): the driver is likely wedged (after suspend/resume, or a GPU fell off "
          "the bus)", "on the host: check dmesg for NVRM/Xid, reload nvidia_uvm (rmmod nvidia_uvm; "
          "modprobe nvidia_uvm) or reboot", "node"),
}
_CODE = re.compile(r"(?:Error|error=|error \()\s*(\d{2,3})")
# Codes torch names only in words (c10/cuda/CUDAFunctions.cpp words these cudaGetDeviceCount results).
_WORDED = (("CUDA unknown error", 999), ("driver on your system is too old", 35),
           ("Found no NVIDIA driver", 35))
_KERNEL_MODULE = re.compile(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)")
_LIBCUDA = re.compile(r"/libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$")


def cuda_code(error: str | None, cu_init: int | None = None) -> int | None:
    """The CUDA error code in torch's warning (by number or by torch's words), else cuInit's, else None."""
    m = _CODE.search(error or "")
    if m and int(m.group(1)) in CUDA_CODES:
        return int(m.group(1))
    for words, code in _WORDED:
        if words in (error or ""):
            return code
    return cu_init if cu_init in CUDA_CODES else None


def version_skew(layers: CudaLayers) -> tuple[str, str] | None:
    """(kernel module version, libcuda version) when they differ: a driver upgraded without a reboot."""
    kernel = _KERNEL_MODULE.search(layers.proc_driver_version or "")
    user = next((m.group(1) for p in layers.libraries if (m := _LIBCUDA.search(p))), None)
    return (kernel.group(1), user) if kernel and user and kernel.group(1) != user else None


def unknown_error_cause(layers: CudaLayers) -> tuple[str, str] | None:
    """Error 999's likely causes on the host, checked one by one: (cause, fix) for the first one found."""
    if "gpu is lost" in (layers.nvml_error or "").lower():
        return (f"NVML reports {layers.nvml_error}: the GPU has fallen off the bus (PCIe link or hardware fault)",
                "drain the node and reboot it (nvidia-smi shows 'GPU is lost'); check dmesg for Xid 79 and the "
                "GPU's seating, power and PCIe link")
    skew = version_skew(layers)
    if skew:
        return (f"the loaded kernel module is {skew[0]} (/proc/driver/nvidia/version) but libcuda is "
                f"{skew[1]}: the driver was upgraded without a reboot (or a stale libcuda is first on the path)",
                "reboot the host (or reload the nvidia modules) so the kernel module matches libcuda")
    if layers.device_nodes and "nvidia-uvm" not in layers.device_nodes:
        return ("/dev/nvidia-uvm is missing: the nvidia_uvm kernel module is not loaded (CUDA needs it)",
                "on the host: modprobe nvidia-uvm (or nvidia-modprobe -u -c0), then restart the container")
    return None


def cuda_code_finding(error: str | None, layers: CudaLayers | None = None) -> Finding | None:
    """The finding for a CUDA error code in torch's warning or cuInit's result, or None."""
    code = cuda_code(error, layers.cu_init if layers else None)
    if code is None:
        return None
    problem, fix, fault = CUDA_CODES[code]
    cause = unknown_error_cause(layers) if code in (999, 803) and layers else None
    if cause and code == 803 and not cause[0].startswith("the loaded kernel module"):
        cause = None  # 803 is a libcuda/kernel mismatch: only the version skew explains it further
    if cause:
        problem = f"CUDA error {code} ({'unknown error' if code == 999 else 'driver combination'}): {cause[0]}"
        fix = cause[1]
    elif code == 999 and layers:
        problem += (" (checked and ruled out: a GPU lost in NVML, kernel module vs libcuda version"
                    f"{'' if layers.proc_driver_version and layers.libraries else ' (not readable here)'}, "
                    "/dev/nvidia-uvm present)")
    return Finding("cuda-init", problem, fix, fault, code=f"cuda.error.{code}")


def driver_finding(layers: CudaLayers) -> Finding | None:
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
    kernel = None if version_skew(layers) else _KERNEL_MODULE.search(layers.proc_driver_version or "")
    fix = (f"upgrade the host driver to >= {floor or 'one for CUDA ' + str(need[0])} (any driver from there runs "
           f"every CUDA {need[0]}.x build), or use an image built for CUDA {have[0]}.x (a -cuda{have[0]}.x tag)")
    if needs_newer_major(have, need):
        return Finding("driver", f"the driver supports CUDA {have[0]}.{have[1]}, but torch was built for CUDA "
                       f"{layers.torch_cuda}: a CUDA {need[0]}.x build needs a driver >= {floor}", fix, "node")
    if have[0] == need[0] and floor and kernel and below_floor(kernel.group(1), need[0]):
        return Finding("driver", f"the driver {kernel.group(1)} is below CUDA {need[0]}.x's floor {floor} "
                       f"(torch was built for CUDA {layers.torch_cuda})", fix, "node")
    return None


# A running container loses its GPUs when systemd re-applies the container's device cgroup (`systemctl
# daemon-reload`) without the NVIDIA devices: runc names them by /dev/char/<major>:<minor> links that the driver does
# not create. NVIDIA/nvidia-container-toolkit#48 (and NVIDIA/nvidia-docker#1730): "Failed to initialize NVML: Unknown
# Error"; "The container needs to be deleted once the issue occurs"; workarounds in this order.
DAEMON_RELOAD_FIX = (
    "delete and recreate the container (it stays cut off until then); on the host, once: sudo nvidia-ctk system "
    "create-dev-char-symlinks --create-all, and make it run at boot with the udev rule ACTION==\"add\", "
    "DEVPATH==\"/bus/pci/drivers/nvidia\", RUN+=\"/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all\" "
    "in /lib/udev/rules.d/71-nvidia-dev-char.rules; or give GPUs through CDI (--device nvidia.com/gpu=all), or "
    "run Docker with the cgroupfs driver (\"exec-opts\": [\"native.cgroupdriver=cgroupfs\"] in daemon.json)")


def device_access_finding(layers: CudaLayers) -> Finding | None:
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
        return Finding("devices", f"{eperm} exist but open() is refused (EPERM){said}: the container's device "
                       "cgroup no longer allows the GPUs. With the systemd cgroup driver a `systemctl daemon-reload` "
                       "on the host re-applies it without them when the host lacks /dev/char/<major>:<minor> links "
                       "for the NVIDIA nodes (NVIDIA/nvidia-container-toolkit#48)", DAEMON_RELOAD_FIX, "node")
    if eperm:
        return Finding("devices", f"{eperm} exist but open() is refused (EPERM){said}: a device cgroup denies this "
                       "process the GPUs (a Slurm job without a GPU allocation under ConstrainDevices=yes, or a "
                       "systemd unit's DevicePolicy=/DeviceAllow=)",
                       "ask for the GPUs (srun/sbatch --gpus=N or --gres=gpu:N), or allow them to the unit "
                       "(systemctl show <unit> -p DevicePolicy -p DeviceAllow; DeviceAllow=/dev/nvidiactl rw, "
                       "/dev/nvidia0 rw, /dev/nvidia-uvm rw)", "config")
    if eacces:
        where = "this container's user" if layers.in_container else "this user"
        return Finding("devices", f"{eacces} exist but open() is refused (EACCES: permission denied){said}: the "
                       f"nodes' mode or group bars {where}, or /dev is mounted nodev",
                       "ls -l /dev/nvidia* and findmnt -T /dev/nvidia0 (no nodev); add the user to the nodes' group "
                       "(docker run --group-add $(stat -c %g /dev/nvidia0), or usermod -aG video USER on a host), "
                       "or on the host set the driver's NVreg_DeviceFileMode=0666",
                       "config" if layers.in_container else "node")
    if unknown and layers.in_container and layers.device_nodes and layers.device_access is None:
        return Finding("devices", f"NVML says {layers.nvml_error!r} in a container whose /dev/nvidia* nodes exist: "
                       "most often its device cgroup was re-applied without the GPUs (`systemctl daemon-reload` "
                       "under the systemd cgroup driver, NVIDIA/nvidia-container-toolkit#48); whether open() is "
                       "refused was not captured", DAEMON_RELOAD_FIX, "node")
    return None


MIG_FIX = ("CUDA enumerates one MIG device per process: run one process per slice with "
           "CUDA_VISIBLE_DEVICES=MIG-<uuid> (nvidia-smi -L lists them; e.g. one rank per slice), or disable MIG "
           "(nvidia-smi -i <gpu> -mig 0) for multi-GPU work in one process")


def visible_mig_devices(nvml: list[dict[str, Any]] | str | None, visible: str | None) -> list[str]:
    """The MIG devices this process was offered (all of them, or those CUDA_VISIBLE_DEVICES names)."""
    if not isinstance(nvml, list):
        return []
    slices = [u for g in nvml if g.get("mig") for u in g.get("mig_devices", []) if isinstance(u, str)]
    if visible is None:
        return slices
    tokens = [t.strip().lower() for t in visible.split(",") if t.strip()]
    return [u for u in slices if any(u.lower().startswith(t) for t in tokens if t.startswith("mig-"))]


def cpu_torch_finding(gpu_host: bool) -> Finding:
    """A CPU-only torch: on a GPU host the CUDA wheels are the fix; on a host without one, CPU is what it is."""
    if gpu_host:
        return Finding("torch", "torch is a CPU-only build (torch.version.cuda is None) on a host with an NVIDIA "
                       "GPU", CPU_TORCH_FIX, "image")
    return Finding("torch", "torch is a CPU-only build and this host has no NVIDIA GPU: CPU is what this install "
                   "is", "nothing to reinstall for CPU work: run with --allow-cpu; for GPU work run on a GPU host "
                   "(a CUDA wheel of torch is only needed there)", "node")


def diagnose(layers: CudaLayers) -> list[Finding]:
    """Every broken layer, from the host up to torch, each with its fix."""
    found: list[Finding] = []
    if not layers.torch_installed:
        return [Finding("torch", NO_TORCH, "pip install torch torchvision", "image")]
    if layers.torch_error and layers.torch_error.startswith(IMPORT_FAILED):
        return [Finding("torch", f"torch cannot be imported ({layers.torch_error[len(IMPORT_FAILED):].strip()})",
                        "envcheck run --only libs.cuda  # names the library that failed to load and its fix "
                        "(LD_LIBRARY_PATH, a duplicate nvidia-* wheel, a missing pin)", "image")]
    gpu_nodes = sum(1 for n in layers.device_nodes if re.fullmatch(r"nvidia\d+", n))
    devices = device_access_finding(layers) if layers.device_nodes else None
    if devices:  # the nodes are there but unusable: the first broken layer, whatever CUDA then reports
        found.append(devices)
    if not layers.device_nodes and not layers.proc_driver:
        if layers.in_container:
            found.append(Finding("container", "no /dev/nvidia* device nodes and no /proc/driver/nvidia: the "
                                 "container was started without GPU access",
                                 "docker run --gpus all ... (and install nvidia-container-toolkit on the host: "
                                 "nvidia-ctk runtime configure --runtime=docker)", "config"))
        else:
            found.append(Finding("driver", "no /dev/nvidia* device nodes and no /proc/driver/nvidia: no NVIDIA "
                                 "driver is loaded on this host", "install the NVIDIA driver and reboot "
                                 "(nvidia-smi must work), or run with --allow-cpu on a CPU-only machine", "node"))
    elif layers.libcuda_error:
        caps = layers.driver_capabilities
        if layers.in_container and caps is not None and "compute" not in caps and "all" not in caps:
            fix = CAPABILITIES_FIX
            fault = "config"
            problem = (f"libcuda.so.1 cannot be loaded: NVIDIA_DRIVER_CAPABILITIES={caps!r} lacks 'compute' (set by "
                       "-e, or by Docker from the GPU request's capabilities: compose's `capabilities:` list, "
                       "docker run --gpus 'all,capabilities=...')")
        else:
            fix = ("install the NVIDIA driver's user-space libraries (libcuda.so.1), or in a container "
                   "use nvidia-container-toolkit with NVIDIA_DRIVER_CAPABILITIES=compute,utility")
            problem = f"libcuda.so.1 cannot be loaded ({layers.libcuda_error})"
            fault = "node"
        found.append(Finding("libcuda", problem, fix, fault))
    elif layers.driver_cuda and layers.torch_cuda:
        driver = driver_finding(layers)
        if driver:
            found.append(driver)
    code = cuda_code_finding(layers.torch_error, layers)
    # The driver-version finding already names error 35's cause, and unopenable nodes explain 999 and 100; any other
    # code is its own, more precise one.
    if code is not None:
        words = code.problem
        explained = (words.startswith("CUDA error 35") and any(f.layer == "driver" for f in found)
                     or devices is not None and words.startswith(("CUDA error 999", "CUDA error 100")))
        code = None if explained else code
    if code:
        found.append(code)
    cvd = _visible_devices_problem(layers.visible_devices, gpu_nodes, layers.nvml_gpus)
    if cvd:
        found.append(Finding("CUDA_VISIBLE_DEVICES", cvd,
                             "unset CUDA_VISIBLE_DEVICES, or set it to valid indices such as 0 or 0,1", "config"))
    if layers.torch_cuda is None:
        found.append(cpu_torch_finding(gpu_host=bool(layers.device_nodes or layers.proc_driver)))
    if not found and layers.driver_cuda and layers.torch_cuda:
        have = cuda_numbers(layers.driver_cuda)
        if by_minor_compat(have, cuda_release(layers.torch_cuda)):  # allowed by minor-version compatibility
            found.append(Finding("driver", f"nothing else explains it; the driver supports CUDA {have[0]}.{have[1]} "
                                 f"and torch was built for {layers.torch_cuda}, which minor-version compatibility "
                                 "allows except for features that need the newer driver (e.g. PTX JIT)",
                                 f"try a driver of CUDA {layers.torch_cuda} or newer", "node"))
    if not found:
        found.append(Finding("unknown", "CUDA init failed for a reason envcheck does not recognise: "
                             f"{layers.torch_error or 'no error text'}"
                             f"{unchecked_uuids(layers.visible_devices, layers.nvml_gpus)}",
                             "run nvidia-smi on the host and in the container; check dmesg for NVRM errors", "node"))
    return found


# CUDA errors that leave the context unusable: every later CUDA call in the process fails too, so the worker
# must be replaced before the next check (CUDA runtime API docs: "sticky" errors).
STICKY_CUDA_ERRORS = ("illegal memory access", "illegal instruction", "unspecified launch failure",
                      "uncorrectable ecc error", "misaligned address", "device-side assert triggered",
                      "hardware stack error", "launch timed out", "an exception occurred on the device",
                      "cudaerrorillegaladdress", "cudaerrorlaunchfailure", "cudaerrorecc")
DEVICES_BUSY = ("busy or unavailable", "cudaerrordevicesunavailable")  # cudaErrorDevicesUnavailable = 46
COMPUTE_MODES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}


# A check that crashed may leave the worker half-changed (a module half-imported, an operator registered twice:
# torchvision's "... already registered" on re-import), so later checks in that worker would fail for its sake.
# Said in the summary of a result that sets `restart_worker` (the flag is what the engine reads).
WORKER_RESTART = "envcheck restarts the worker for later checks"


def sticky_cuda_error(text: str) -> bool:
    """True when a result's text carries a CUDA error that poisons the process's context (CUDA's own words), so
    the worker must be replaced. A check that crashed, or one that sets `restart_worker`, is replaced anyway."""
    low = text.lower()
    return any(s in low for s in STICKY_CUDA_ERRORS)


def gpu_label(index: int) -> str:
    """`GPU 0 (NVIDIA H100 80GB HBM3, UUID GPU-..., PCI 0000:19:00.0)`; parts that cannot be read are left out.

    Reads device properties only (no CUDA context is created), so it works on a GPU that cannot run kernels.
    """
    parts: list[str] = []
    try:
        import torch

        props = torch.cuda.get_device_properties(index)
        parts.append(str(props.name))
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            text = str(uuid)
            parts.append(f"UUID {text}")
        bus = getattr(props, "pci_bus_id", None)
        if bus is not None:
            domain, device = getattr(props, "pci_domain_id", 0), getattr(props, "pci_device_id", 0)
            parts.append(f"PCI {int(domain):08x}:{int(bus):02x}:{int(device):02x}.0")
    except Exception as exc:  # the properties of a broken GPU may not be readable either
        parts.append(f"properties unreadable: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    return f"GPU {index} ({', '.join(parts)})"


def nvml_compute_modes() -> dict[int, str] | str:
    """Each physical GPU's compute mode by NVML index, or why NVML cannot tell."""
    def modes(pynvml: Any) -> dict[int, str] | str:
        found: dict[int, str] = {}
        for i in range(pynvml.nvmlDeviceGetCount()):
            try:
                mode = int(pynvml.nvmlDeviceGetComputeMode(pynvml.nvmlDeviceGetHandleByIndex(i)))
                found[i] = COMPUTE_MODES.get(mode, str(mode))
            except Exception as exc:
                found[i] = f"unknown ({exc})"
        return found

    got = read_nvml(lambda pynvml, progress: modes(pynvml), lambda exc: f"compute mode unknown (NVML unavailable: "
                    f"{exc})")
    if got.value is None:
        return f"compute mode unknown ({hang_text(got.hang or {'budget_s': NVML_BUDGET_S})})"
    return got.value


def busy_gpu_finding(error: str, where: str | None = None,
                     modes: Callable[[], dict[int, str] | str] | None = None) -> Finding | None:
    """For cudaErrorDevicesUnavailable ('CUDA-capable device(s) is/are busy or unavailable'): which GPU, its
    compute mode, and the fix; None for any other error."""
    if not any(s in error.lower() for s in DEVICES_BUSY):
        return None
    found = (modes or nvml_compute_modes)()
    if isinstance(found, str):
        mode_text = found
        exclusive: list[int] = []
    else:
        exclusive = [i for i, m in found.items() if m in ("EXCLUSIVE_PROCESS", "EXCLUSIVE_THREAD", "PROHIBITED")]
        mode_text = "compute mode " + ", ".join(f"NVML GPU {i}: {m}" for i, m in sorted(found.items()))
    subject = where or "a GPU"
    fix = ("wait for the other job on that GPU to end (nvidia-smi lists it), or as root set the default "
           "compute mode: nvidia-smi -i <index> -c DEFAULT (on Slurm, request the GPU for this job)")
    if exclusive:  # another process holds an exclusive GPU: busy, not broken (issue 31: never a node fault)
        problem = (f"{subject} is busy or unavailable (cudaErrorDevicesUnavailable): {mode_text}; an "
                   "EXCLUSIVE_PROCESS GPU admits one process, and another process already holds it")
        return Finding("gpu", problem, fix, "config", code="cuda.gpu_busy")
    problem = f"{subject} is busy or unavailable (cudaErrorDevicesUnavailable); {mode_text}"
    if isinstance(found, str):  # no evidence of who holds it, nor that nobody does: not the node's on a guess
        return Finding("gpu", problem, fix, "config", code="cuda.gpu_busy")
    return Finding("gpu", problem + "; no GPU is in an exclusive mode, so the GPU itself refuses contexts",
                   "drain; nvidia-smi -q -i <index>; dmesg | grep -iE 'NVRM|Xid'; reset the GPU (nvidia-smi -r -i "
                   "<index>) or reboot the node", "node", code="cuda.gpu_unusable")


def gpu_error(index: int | None, exc: BaseException | str, what: str = "") -> Finding:
    """A CUDA error on one GPU, named (index, UUID, PCI bus id), with the fix its kind calls for."""
    text = str(exc)
    first = (text.strip().splitlines() or [type(exc).__name__])[0]
    where = gpu_label(index) if index is not None else "a GPU"
    busy = busy_gpu_finding(text, where)
    if busy is not None:
        return busy
    if sticky_cuda_error(text):
        return Finding("gpu", f"{where}{': ' + what if what else ''}: {first} (a sticky CUDA error: the "
                       "process's CUDA context is unusable; envcheck restarts the worker for later checks)",
                       "the GPU or its driver faulted: check dmesg for Xid errors and nvidia-smi -q -d ECC,"
                       "PAGE_RETIREMENT; reset the GPU (nvidia-smi -r -i <index>) or drain the node", "node")
    return Finding("gpu", f"{where}{': ' + what if what else ''}: {first}",
                   "run nvidia-smi -q -i <index> and check dmesg for Xid errors on that GPU", "node")
