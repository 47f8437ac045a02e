"""A check starts from the process state its worker started with, whatever ran before it there.

A worker runs its group's checks one after another in one process, so whatever a check leaves in the process is what
the next check starts from: `torch.testing._internal.common_utils` freezes `torch.backends` flags at import
(`disable_global_flags`, after which `torch.backends.cudnn.allow_tf32 = False` raises), a TF32 setting made through
one API and undone through the other leaves cuBLAS's flags mixed (its getter then raises), an unseeded check draws
from wherever the last one left the generator, and a CUDA check's peak-memory reading includes the last check's peak.
The worker reads every knob (envcheck.core.isolation.knobs) before its first check (`Saved.take`) and, after each
check, sets back what the check changed (`Saved.put_back`), CUDA's state included (`reset_cuda`); what cannot be set
back (a context left open) replaces the worker: a fresh fork starts from the fork server's state.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from dataclasses import dataclass
from typing import Any

from envcheck.core.isolation.knobs import FROZEN, Knob, knobs

PASSES = 3  # setting one knob may move another (the matmul precision sets cuBLAS's fp32_precision): set again


def reset_cuda() -> list[str]:
    """Once CUDA is initialised here: every device with a context gets its generator's fresh seed back, its cached
    blocks released, its peak statistics reset and its memory fraction set back to 1. What could not be done."""
    torch: Any = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return []
    failed = []
    # without torch's answer, no device is touched: that would create a context on another job's GPU
    has_context = getattr(torch._C, "_cuda_hasPrimaryContext", lambda i: False)
    fresh_seed = torch.Generator().initial_seed()  # a new generator's seed: what a fresh process starts from
    for index in range(cuda.device_count()):
        if not has_context(index):
            continue  # touching it would create a context on another job's GPU
        try:
            cuda.default_generators[index].manual_seed(fresh_seed)
            cuda.reset_peak_memory_stats(index)
            getter = getattr(cuda, "get_per_process_memory_fraction", None)
            if getter is not None and getter(index) != 1.0:
                cuda.set_per_process_memory_fraction(1.0, index)
        except Exception as exc:  # a sticky CUDA error: the recycle hook replaces the worker anyway
            failed.append(f"cuda:{index}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
    with contextlib.suppress(Exception):
        cuda.empty_cache()
    return failed


class Unread(str):
    """A knob whose getter raised (a numpy that does not work, a private API that changed): compared, never set."""


def _read(knob: Knob) -> Any:
    try:
        return knob.get()
    except Exception as exc:
        return Unread(f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}")


def _unread(name: str, saved: Saved) -> bool:
    return isinstance(saved.values.get(name), Unread)


def _all_knobs() -> list[Knob]:
    """Every knob, or none where even listing them fails (a torch or numpy half-importable here): nothing is set back
    then, and the worker is replaced only for the reasons it always was."""
    try:
        return knobs()
    except Exception:
        return []


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # values that do not compare (a tensor): by their text
        return repr(a) == repr(b)


@dataclass
class Saved:
    """The knobs' values as a worker found them before its first check."""

    values: dict[str, Any]

    @classmethod
    def take(cls) -> Saved:
        """Read every knob now."""
        return cls({k.name: _read(k) for k in _all_knobs()})

    def changed(self) -> list[str]:
        """The knobs whose value differs from the saved one (a knob that appeared since, e.g. Inductor's config once
        imported, has no saved value: it is not named)."""
        return [
            k.name for k in _all_knobs() if k.name in self.values and not _same(_read(k), self.values[k.name])
        ]

    def put_back(self) -> tuple[list[str], list[str]]:
        """Set every changed knob back, and CUDA's state to fresh. Returns (what had changed, what is still not as
        saved: a read-only knob, or one whose setter failed)."""
        moved = self.changed()
        by_name = {k.name: k for k in _all_knobs()}
        still = moved
        for _ in range(PASSES if moved else 0):
            unfreeze = by_name.get(FROZEN)
            if unfreeze is not None and unfreeze.set is not None:
                unfreeze.set(False)  # the other flags may be set; the saved freeze comes back last
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for name in still:
                    knob = by_name[name]
                    if (
                        knob.set is not None
                        and name not in (FROZEN, "warnings.filters")
                        and not _unread(name, self)
                    ):
                        with contextlib.suppress(Exception):
                            knob.set(self.values[name])
            for name in ("warnings.filters", FROZEN):  # outside catch_warnings, which would undo the filters
                last = by_name.get(name)
                if last is not None and last.set is not None and name in self.values:
                    last.set(self.values[name])
            still = self.changed()
            if not still:
                break
        return moved, still + reset_cuda()
