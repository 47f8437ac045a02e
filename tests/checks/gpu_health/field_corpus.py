"""The field corpus of kernel-log excerpts (field_records/*.toml, sources in field_records/SOURCES.md) and a loader
that turns each excerpt into the records the kernel really writes, and the node it implies.

Each excerpt is verbatim from a public thread, as its poster published it (dmesg, dmesg -T, journal, syslog,
/dev/kmsg or plain). The loader reads it back into printk records by the rules of the form it was published in (a
stamped line begins a record; an indented line without a stamp, a `#012` or a `\\x0a` continues it; a driver
message printed line by line with one stamp is one message), independently of envcheck's own reader, then writes
each record again in the three forms envcheck reads: /dev/kmsg (`prio,seq,usec,-;text`, newlines as `\\x0a`, one
record per printk), `dmesg` text (a stamp, continuation lines indented) and journal lines (`Mon DD HH:MM:SS host
kernel: text`, continuation lines indented).

The node state comes from the thread where it says (`[state]`), else from what the driver does in that class of
failure (the driver's behaviour, not the test's wish): a GPU refused at probe stays on the PCI bus without a driver
entry, and NVML does not list it; a GPU whose RmInitAdapter fails has a driver entry and a device node, and NVML
counts it but cannot open it ("Unknown Error"); a GPU that fell off the bus at run time answers NVML "GPU is lost"; an
API mismatch makes NVML's init fail with NVML_ERROR_LIB_RM_VERSION_MISMATCH; another driver's GPU has no nvidia entry.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

FOLDER = Path(__file__).with_name("field_records")
PROBE_CAUSES = ("fell_off_bus_probe", "probe_failed", "bar_invalid", "other", "probe_not_called")
OPEN_CAUSES = ("init_failed", "gsp_boot")
_STAMP = re.compile(
    r"^(\[\s*[+\d][^\]]*\]|\[[A-Z][a-z]{2} [^\]]+\]|[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d\S*|"
    r"\d{4}-\d\d-\d\dT\S+|(?:\S+: )?kern:\s*\w+:\s*\[[^\]]+\]:|\d+,\d+,\d+,|[a-z]+\s*:\s*[a-z]+\s*:\s*\d{4}-\d\d-\d\dT\S+)"
)


@dataclass
class Case:
    """One excerpt with its source, ground truth and node state."""

    name: str
    source: str
    published_as: str
    excerpt: str
    truth: dict[str, Any]
    state: dict[str, Any]
    grepped: bool = False
    composed: bool = False
    records: list[str] = field(default_factory=list)


def load() -> list[Case]:
    """Every case of the corpus, in file order, with its records."""
    cases = []
    for path in sorted(FOLDER.glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        case = Case(
            path.stem,
            data["source"],
            data["published_as"],
            data["excerpt"],
            data["truth"],
            data["state"],
            data.get("grepped", False),
            data.get("composed", False),
        )
        case.records = records(case.excerpt)
        cases.append(case)
    return cases


def _text(line: str) -> str:
    """A published line without its stamp, host and facility prefix: the text the kernel logged."""
    line = re.sub(r"^\d+,\d+,\d+,[^;]*;", "", line)
    line = re.sub(r"^(?:\S+: )?kern:\s*\w+:\s*\[[^\]]+\]:\s?", "", line)
    line = re.sub(r"^\[[^\]]*\]\s?", "", line)
    line = re.sub(
        r"^(?:[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d\S*|\d{4}-\d\d-\d\dT\S+)\s+(?:\S+\s+)?kernel:\s?", "", line
    )
    line = re.sub(r"^\[\s*\d+\.\d+\]\s?", "", line)  # a syslog line that kept the kernel's stamp
    line = re.sub(r"^[a-z]+\s*:\s*[a-z]+\s*:\s*\d{4}-\d\d-\d\dT\S+\s", "", line)  # dmesg -x --time-format iso
    return line.replace("#012", "\n").replace("#011", "\t").replace("\\x0a", "\n").rstrip()


def records(excerpt: str) -> list[str]:
    """The printk records of a published excerpt, each with real newlines."""
    out: list[tuple[str, str]] = []  # (stamp, text)
    for line in excerpt.split("\n"):
        if not line.strip() or re.match(r"^ [A-Z_]+=", line):  # blank, or a /dev/kmsg dictionary line
            continue
        stamp = _STAMP.match(line)
        if stamp is None and line[:1].isspace() and out:
            out[-1] = (out[-1][0], out[-1][1] + "\n" + line.strip())
            continue
        key, text = (stamp.group(1) if stamp else ""), _text(line)
        last = out[-1][1].split("\n")[-1] if out else ""
        joins = (
            out
            and key == out[-1][0]
            and text.startswith("NVRM: ")
            and last.startswith("NVRM: ")
            and not last.rstrip().endswith((".", "!"))
            and not re.match(
                r"NVRM: (Xid|GPU[ \d]|loading|The NVIDIA|API mismatch|RmInitAdapter|rm_init)", text
            )
        )
        if joins:  # one message printed line by line with one stamp (the syslog(2) form, old releases)
            out[-1] = (key, out[-1][1] + "\n" + text)
        else:
            out.append((key, text))
    return [text for _, text in out]


def as_kmsg(texts: list[str]) -> list[str]:
    """/dev/kmsg lines: one record per printk, control characters and backslashes escaped as \\xNN."""

    def escape(text: str) -> str:
        return "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or ord(c) == 127 or c == "\\" else c for c in text)

    return [f"4,{n},{1_000_000 + n * 1000},-;{escape(t)}" for n, t in enumerate(texts, start=100)]


def _indented(texts: list[str], prefix: Callable[[int], str]) -> list[str]:
    """One line per record under its prefix, the record's further lines indented to its text."""
    out = []
    for n, text in enumerate(texts):
        first, *rest = text.split("\n")
        head = prefix(n)
        out += [head + first, *(" " * len(head) + r for r in rest)]
    return out


def as_dmesg(texts: list[str]) -> list[str]:
    """util-linux dmesg lines: `[seconds] text`, a record's further lines indented under its text."""
    return _indented(texts, lambda n: f"[{1 + n / 1000:12.6f}] ")


def as_journal(texts: list[str]) -> list[str]:
    """journalctl -k lines: `Mon DD HH:MM:SS host kernel: text`, further lines indented under the text."""
    return _indented(texts, lambda n: f"Nov 27 10:{n // 60 % 60:02d}:{n % 60:02d} gpu-node kernel: ")


FORMS = {"kmsg": as_kmsg, "dmesg": as_dmesg, "journal": as_journal}


def _key(address: str) -> str:
    parts = address.lower().split(":")
    return f"{int(parts[0], 16):04x}:{int(parts[1], 16):02x}:{int(parts[2].split('.')[0], 16):02x}"


def node_state(case: Case) -> dict[str, Any]:
    """The parts of a gpu_health capture that are not the kernel log: the PCI bus, the driver's GPUs, NVML, the
    versions of the driver's two halves (see the module docstring for the rules)."""
    truth, state = case.truth, case.state
    cause = truth["cause"]
    named = [_key(a) for a in truth.get("gpus") or []]
    in_text = [k for k in named if k.split(":", 1)[1] in case.excerpt.lower()]
    bus = sorted({_key(a) for a in state.get("pci_gpus") or []} | set(in_text)) or ["0000:3b:00"]
    at_probe = cause in PROBE_CAUSES or (
        cause == "fell_off_bus" and "installed in this system" in case.excerpt
    )
    driver = [k for k in bus if not (at_probe and k in in_text)]
    drivers = {f"{k}.0": "vfio-pci" for k in in_text} if "vfio" in case.excerpt else {}
    if cause == "probe_not_called" and not drivers:
        driver = []
    gpus = []
    for i, key in enumerate(k for k in driver if f"{k}.0" not in drivers):
        gpu: dict[str, Any] = {
            "index": i,
            "name": "NVIDIA GPU",
            "pci": f"0000{key}.0".upper(),
            "persistence": True,
        }
        if cause in OPEN_CAUSES and (key in in_text or not in_text):
            gpu = {"index": i, "error": "nvmlDeviceGetHandleByIndex: Unknown Error"}
        elif cause == "fell_off_bus" and key in in_text:
            gpu["name"] = {"absent": "nvmlDeviceGetName: GPU is lost"}
        gpus.append(gpu)
    nvml_error = None
    if cause == "api_mismatch" or state.get("nvml") == "mismatch":
        nvml_error, gpus = "NVML could not start: Driver/library version mismatch", []
    elif state.get("nvml") == "not loaded" or (not driver and cause != "healthy"):
        nvml_error, gpus = "NVML could not start: Driver Not Loaded", []
    return {
        "nvml_error": nvml_error,
        "nvml_code": 18 if nvml_error and "mismatch" in nvml_error else (9 if nvml_error else None),
        "driver_version": None,
        "gpus": gpus,
        "nvml_hung": None,
        "nvml_hang": None,
        "pci_gpus": [f"{k}.0" for k in bus],
        "pci_drivers": drivers,
        "access": {
            "device_nodes": {str(i): "ok" for i in range(len(driver))},
            "driver_gpus": {k: {"minor": i} for i, k in enumerate(driver)},
            "proc_view": "host" if driver else "absent",
            "in_container": False,
        },
        "versions": {
            "kernel_module": state.get("kernel_module") or None,
            "userspace": state.get("userspace") or None,
        },
    }


def staged(case: Case) -> Any:
    """The node of `case` as tests/staging/gpu_node.py stages it (for `envcheck run` on it), its kernel log as
    /dev/kmsg records: the same node node_state() describes, one GPU per PCI address."""
    from tests.staging.gpu_node import Gpu, Node

    state = node_state(case)
    driver = state["access"]["driver_gpus"]
    gpus = []
    for minor, address in enumerate(state["pci_gpus"]):
        key = _key(address)
        nvml: dict[str, Any] = {}
        listed = [
            g for g in state["gpus"] if str(g.get("pci", "")).lower().endswith(key.split(":", 1)[1] + ".0")
        ]
        if key in driver and not listed and state["gpus"]:  # counted by NVML, but its handle fails
            nvml = {"handle": {"nvml_error": 999}}
        elif listed and isinstance(listed[0].get("name"), dict):  # fell off the bus at run time
            nvml = {"lost": True}
        gpus.append(
            Gpu(
                address,
                minor,
                f"GPU-{minor:08x}-1c2b-4d5e-8f90-a1b2c3d4e5f6",
                nvml=nvml,
                in_driver=key in driver,
                bound=state["pci_drivers"].get(address),
            )
        )
    return Node(
        gpus,
        driver=bool(driver),
        kmsg=as_kmsg(case.records),
        nvml_init_code=int(state["nvml_code"] or 0) if state["nvml_code"] == 18 else 0,
    )
