"""How a check is declared: once, as a frozen spec in the explicit registry."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from envcheck.core.result import Result


class Level(str, enum.Enum):
    """`quick` runs in seconds; `full` adds the slower, deeper checks."""

    QUICK = "quick"
    FULL = "full"


@dataclass(frozen=True)
class Needs:
    """What a check needs to be meaningful; unmet needs give SKIP with a reason."""

    torch: bool = False
    cuda: bool = False
    min_gpus: int = 0

    def describe(self) -> str:
        """Short human text, e.g. `torch, cuda, 2+ gpus`."""
        parts = [n for n in ("torch", "cuda") if getattr(self, n)]
        if self.min_gpus > 1:
            parts.append(f"{self.min_gpus}+ gpus")
        return ", ".join(parts) or "-"


# Share of each GPU's memory `cuda.devices` fills and the GPU busbw sweep's largest message may use.
MEMORY_FRACTION = 0.1


@dataclass(frozen=True)
class DistOptions:
    """The distributed checks' settings (`--cpu-ranks`, `--min-busbw`, `--strict-perf`)."""

    # Gloo ranks the CPU distributed checks launch; must be at least 1.
    cpu_ranks: int = 2
    # dist.busbw: a peak below this floor warns, or fails with `strict_perf`.
    min_busbw_gbps: float | None = None
    # The message size (bytes) the floor was measured at: compared only with the sweep's row of that size (None: with
    # the sweep's peak). A profile's floor carries it (busbw_floor_bytes); --min-busbw-at sets it.
    min_busbw_at_bytes: int | None = None
    strict_perf: bool = False


@dataclass(frozen=True)
class DeviceOptions:
    """The GPU device checks' settings (`--memory-fraction`: see MEMORY_FRACTION)."""

    memory_fraction: float = MEMORY_FRACTION


@dataclass(frozen=True)
class BenchOptions:
    """`envcheck bench`'s settings."""

    # torch's intra-op threads for the CPU units (None: torch's default).
    cpu_threads: int | None = None
    # The envcheck process whose descendants count as envcheck's own GPU users.
    envcheck_pid: int | None = None


@dataclass(frozen=True)
class PerfOptions:
    """The relative verdict's settings (`--perf-margin`): a GPU or GPU pair more than `margin_pct` below the node's
    best of the same kind is named (perf.relative, bench.relative; gpu-fryer's default tolerance is 10%)."""

    margin_pct: float = 10.0


@dataclass(frozen=True)
class ProfileOptions:
    """What a node of this type must have (`--profile`: a TOML file or a built-in name; envcheck.cluster.node_profiles).
    None: that value is not part of the profile."""

    profile: str | None = None  # the profile's name, e.g. "h100-sxm-8"
    description: str | None = None  # "8x H100 SXM", as findings name the node type
    gpu_model: str | None = (
        None  # a substring of NVML's / cuDeviceGetName's product name, e.g. "H100 80GB HBM3"
    )
    gpu_count: int | None = None
    driver_floor: str | None = None  # oldest acceptable driver, e.g. "535.104.05"
    nvlink_links: int | None = None  # NVLinks up per GPU (0: no NVLink)
    pcie_gen: int | None = (
        None  # the PCIe generation each GPU's link must reach (its maximum; idle GPUs downshift)
    )
    pcie_width: int | None = None  # the lanes each GPU's link must run at
    busbw_floor_gbps: float | None = None  # all-reduce busbw floor for dist.busbw (a torch check)
    busbw_floor_bytes: int | None = (
        None  # the all-reduce message size that floor was measured at (Azure: 16 GiB)
    )
    level: str = (
        "node"  # "node": the cluster modes run the torch-free node checks; "torch": the torch checks too
    )


_GROUPS = {
    "dist": DistOptions,
    "devices": DeviceOptions,
    "bench": BenchOptions,
    "profile": ProfileOptions,
    "perf": PerfOptions,
}


@dataclass(frozen=True)
class CheckOptions:
    """The run's settings beyond level/allow_cpu/expect_gpus, grouped by concern, each group typed; set by the
    front door that starts the run (`envcheck run`, `envcheck bench`, the torchrun entry)."""

    dist: DistOptions = field(default_factory=DistOptions)
    devices: DeviceOptions = field(default_factory=DeviceOptions)
    bench: BenchOptions = field(default_factory=BenchOptions)
    profile: ProfileOptions = field(default_factory=ProfileOptions)
    perf: PerfOptions = field(default_factory=PerfOptions)
    # The torch-free node path (`--for prolog|npd`): no torch import; node.* checks judge the node alone.
    node_path: bool = False
    # Which front door built the context when it is not `envcheck run` (e.g. "torchrun"); None otherwise.
    front_door: str | None = None
    # `--for MODE` (prolog, health, npd, preflight): who reads the verdict; None for a plain run. Checks that
    # touch other jobs' GPUs or write node state read it (docs/cluster.md: what each mode runs and touches).
    cluster_mode: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Serialise for the worker protocol and the JSON report."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckOptions:
        """Inverse of `to_dict`. Keys this version does not know are ignored; a flat dict (a report of an older
        envcheck, or `run_check(cpu_ranks=3)` in the tests) is sorted into its groups by field name."""
        groups: dict[str, dict[str, Any]] = {name: {} for name in _GROUPS}
        for key, value in data.items():
            if key in _GROUPS and isinstance(value, dict):
                groups[key].update(value)
                continue
            for name, group in _GROUPS.items():
                if key in {f.name for f in fields(group)}:
                    groups[name][key] = value
        made = {
            name: group(**{k: v for k, v in groups[name].items() if k in {f.name for f in fields(group)}})
            for name, group in _GROUPS.items()
        }
        return cls(
            front_door=data.get("front_door", data.get("mode")),
            node_path=bool(data.get("node_path")),
            cluster_mode=data.get("cluster_mode"),
            **made,
        )


@dataclass(frozen=True)
class Context:
    """Run-wide settings a check may read. Plain data so it crosses into a worker as JSON."""

    level: Level = Level.QUICK
    allow_cpu: bool = False
    expect_gpus: int | None = None
    options: CheckOptions = field(default_factory=CheckOptions)
    # When this check must be done by, on CLOCK_MONOTONIC (one clock for every process on the host): its own
    # timeout capped by the run's. None outside a runner. Checks budget their time with `time_left()`.
    deadline: float | None = None

    def time_left(self) -> float | None:
        """Seconds until `deadline` (never negative); None when there is none."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def to_dict(self) -> dict[str, Any]:
        """Serialise for the worker protocol."""
        data = asdict(self)
        data["level"] = self.level.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Context:
        """Inverse of `to_dict`."""
        return cls(
            level=Level(data.get("level", "quick")),
            allow_cpu=bool(data.get("allow_cpu", False)),
            expect_gpus=data.get("expect_gpus"),
            options=CheckOptions.from_dict(data.get("options") or {}),
            deadline=data.get("deadline"),
        )

    @property
    def full(self) -> bool:
        """True at `--level full`."""
        return self.level is Level.FULL


def reference(fn: Callable[..., Any]) -> str:
    """How a worker process finds `fn` (`module:qualname`), taken from the function object itself: never written
    by hand, so a renamed or moved function is still found (and mypy checks every hook's type)."""
    return f"{fn.__module__}:{fn.__qualname__}"


@dataclass(frozen=True)
class Hooks:
    """Check-layer policies the engine calls, given as function objects, so `core` imports nothing from `checks`
    (the registry passes `envcheck.checks.hooks.HOOKS`). None: the engine does without."""

    # () -> dict: the environment facts, collected in a worker.
    facts: Callable[[], dict[str, Any]] | None = None
    # (error text) -> an object with `problem` and `fix`, or None: a crash that is the environment's state
    # (e.g. an EXCLUSIVE_PROCESS GPU held by another process), reported as FAIL instead of ERROR.
    diagnose: Callable[[str], Any] | None = None
    # (result text) -> bool: the worker's state is poisoned (a sticky CUDA error) and must be replaced.
    recycle: Callable[[str], bool] | None = None

    def references(self) -> dict[str, str | None]:
        """Each hook as a worker process finds it across the fork-server boundary (see `reference`)."""
        return {
            "facts": reference(self.facts) if self.facts else None,
            "diagnose": reference(self.diagnose) if self.diagnose else None,
            "recycle": reference(self.recycle) if self.recycle else None,
        }


@dataclass(frozen=True)
class CheckSpec:
    """One check, declared once. `name` is public (`domain.name`) and must never churn."""

    name: str
    func: Callable[[Context], Result]
    description: str
    level: Level = Level.QUICK
    needs: Needs = field(default_factory=Needs)
    timeout_s: float = 60.0
    # Isolated checks run in a forked worker process (one per `group`), never in the CLI process.
    isolated: bool = True
    group: str = "torch"
    # Whether the check may touch a GPU (create a CUDA context, spawn GPU ranks). None: it does when it
    # needs torch or CUDA. The runner never lets two groups that use the GPU run at the same time.
    uses_gpu: bool | None = None
    # Heavy modules (e.g. `torchvision`) the fork server imports once, so workers forked later inherit them.
    preload: tuple[str, ...] = ()
    # Its place on the torch-free node path of `--for prolog|npd|health` (inline, no fork server), lowest first;
    # None: not on it. Membership is this field, not a list of names.
    node_order: int | None = None

    @property
    def gpu(self) -> bool:
        """True when this check may use a GPU (see `uses_gpu`)."""
        if self.uses_gpu is not None:
            return self.uses_gpu
        return bool(self.needs.torch or self.needs.cuda or self.needs.min_gpus)

    def __post_init__(self) -> None:
        domain, _, leaf = self.name.partition(".")
        if not domain or not leaf or not self.name.replace(".", "").replace("_", "").isalnum():
            raise ValueError(f"check name {self.name!r} is not of the form domain.name")
        if self.timeout_s <= 0:
            raise ValueError(f"check {self.name}: timeout must be positive")
