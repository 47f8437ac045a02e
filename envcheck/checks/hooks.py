"""The check layer's policies, which the engine calls by reference (core imports nothing from checks): the facts, the
diagnosis of a crash that is the GPU's state, and when a worker must be replaced. Apart from the registry, so that the
node path passes them without importing the torch path's checks."""

from __future__ import annotations

from envcheck.checks.cuda.live_errors import busy_gpu_finding, sticky_cuda_error
from envcheck.core.check import Hooks
from envcheck.probe.facts import collect_facts

HOOKS = Hooks(facts=collect_facts, diagnose=busy_gpu_finding, recycle=sticky_cuda_error)
