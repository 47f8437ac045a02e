"""What a check reads, declared beside it: one `Source` per piece of evidence (an NVML query, a file under /proc,
/sys or /dev, a command's output, a kernel-log catalogue, a daemon), the finding codes it can lead to, where its rule
comes from, and the tests that inject its faults and its healthy twins. The check registry gathers every node-path
module's sources (envcheck.checks.check_registry.EVIDENCE) and the evidence map is rendered from them (docs/reference/evidence.md),
so the map cannot drift from the code: a test holds each declared code to the code table and each test file to the
tree."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(str, Enum):
    """How a source is read."""

    NVML = "NVML"
    FILE = "file"
    COMMAND = "command"
    KERNEL_LOG = "kernel log"
    DAEMON = "daemon"
    LIBRARY = "library"
    ENVIRONMENT = "environment"


@dataclass(frozen=True)
class Source:
    """One piece of evidence: `name` as an operator would look it up (the NVML call, the path, the command),
    what is read from it, the finding codes it can lead to (a code, or a family such as `xid.<xid>`; empty: read
    to qualify other findings only, `qualifies` says which), the field source of each rule, and its tests."""

    name: str
    kind: Kind
    reads: str
    codes: tuple[str, ...]
    rule: str
    tests: tuple[str, ...]
    qualifies: str = ""
    key: str = ""  # the word its tests name it by (a captured field), where they name no code of it
