"""The result model shared by checks, the run loop, reports and the Docker runner."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

SCHEMA_VERSION = 2  # 2: the run report gained `verdict` and `counts` (report_schema.json)
SCHEMA_MINOR = 2  # 2.1: every result carries a stable finding `code`; 2.2: `crashed` (additive: a 2.0 reader ignores them)

JSONValue = Any  # measured/expected values must be JSON-serialisable


class Status(str, enum.Enum):
    """Outcome of one check. ERROR means the check itself crashed or timed out."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"

    @property
    def is_bad(self) -> bool:
        """True for outcomes that make the run exit non-zero."""
        return self in (Status.FAIL, Status.ERROR)


class FaultClass(str, enum.Enum):
    """Who has to act on a finding: `node` (host, driver, hardware, fabric), `image` (the software in the image
    or venv), `config` (how the container or process was started: flags, env, limits). None for pass and skip;
    an ERROR (envcheck's own failure) has none, so no cluster policy ever blames a node for it."""

    NODE = "node"
    IMAGE = "image"
    CONFIG = "config"

    def __str__(self) -> str:
        return self.value


FAULT_CLASSES = tuple(c.value for c in FaultClass)


@dataclass(frozen=True)
class Result:
    """What one check found. `summary` is one line; SKIP and ERROR carry a `reason`."""

    status: Status
    summary: str
    measured: dict[str, JSONValue] = field(default_factory=dict)
    expected: dict[str, JSONValue] = field(default_factory=dict)
    remediation: str | None = None
    reason: str | None = None
    details: str = ""
    name: str = ""
    duration_s: float = 0.0
    fault_class: FaultClass | None = None
    # The finding's stable code (`cuda.error.802`, `xid.79`, `gpu.lost`, `runtime.tmp_readonly`): what cluster
    # policy, metrics and tests switch on, never the human text. Defaults to `<check>.<status>` once named.
    code: str | None = None
    # The worker that ran this check is poisoned (a sticky CUDA error): the engine replaces it before the next.
    restart_worker: bool = False
    # envcheck's own failure, typed: an exception escaped the check, or the process running it died or could not be
    # run. The engine and reports read this flag, never the summary's words.
    crashed: bool = False

    def __post_init__(self) -> None:
        if self.fault_class is not None and not isinstance(self.fault_class, FaultClass):
            try:
                object.__setattr__(self, "fault_class", FaultClass(self.fault_class))
            except ValueError:
                raise ValueError(
                    f"fault_class must be one of {FAULT_CLASSES} or None, got {self.fault_class!r}"
                ) from None
        if self.status in (Status.PASS, Status.SKIP):
            object.__setattr__(self, "fault_class", None)
            object.__setattr__(self, "code", None)
        if self.crashed and self.status is not Status.ERROR:
            object.__setattr__(
                self, "crashed", False
            )  # a crash the check's hook diagnosed is a finding, not ours
        if self.status in (Status.SKIP, Status.ERROR) and not (self.reason or "").strip():
            object.__setattr__(self, "reason", self.summary or "no reason given")
        if "\n" in self.summary:
            object.__setattr__(self, "summary", " ".join(self.summary.split()))

    def named(self, name: str, duration_s: float) -> Result:
        """Return a copy stamped with the check name and its wall time (and a default code for a finding)."""
        code = self.code
        if code is None and self.status in (Status.WARN, Status.FAIL, Status.ERROR):
            code = f"{name}.{self.status.value}"
        return replace(self, name=name, duration_s=round(duration_s, 4), code=code)

    def to_dict(self) -> dict[str, JSONValue]:
        """Serialise for the JSON report and the worker protocol."""
        data = asdict(self)
        data["status"] = self.status.value
        data["fault_class"] = self.fault_class.value if self.fault_class is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, JSONValue]) -> Result:
        """Parse what `to_dict` wrote (also used by the Docker runner)."""
        known = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["status"] = Status(kwargs["status"])
        kwargs.setdefault("summary", "")
        return cls(**kwargs)


def passed(summary: str, **kw: Any) -> Result:
    """A passing result."""
    return Result(Status.PASS, summary, **kw)


def warned(summary: str, remediation: str | None = None, **kw: Any) -> Result:
    """A warning: works, but not as it should for real workloads."""
    return Result(Status.WARN, summary, remediation=remediation, **kw)


def failed(summary: str, remediation: str | None = None, **kw: Any) -> Result:
    """The environment is broken; `remediation` says how to fix it."""
    return Result(Status.FAIL, summary, remediation=remediation, **kw)


def skipped(reason: str, **kw: Any) -> Result:
    """The check does not apply here; `reason` says why."""
    return Result(Status.SKIP, reason, reason=reason, **kw)


def errored(reason: str, **kw: Any) -> Result:
    """The check itself crashed or timed out."""
    return Result(Status.ERROR, reason, reason=reason, **kw)


def first_of(problems: Sequence[str]) -> str:
    """A one-line summary of several problems: the first, and how many more follow."""
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{problems[0]}{more}"
