"""Everything `envcheck host` reports, as one JSON-able document (and the compose file it lints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envcheck.host.docker_setup import dev_char_links, dev_char_problem, docker_gpu_setup
from envcheck.host.gpus import read_host_gpus
from envcheck.host.rows import host_platform, row_verdicts


def read_compose(path: str) -> dict[str, Any]:
    """A compose file as a mapping; one-line UsageError for a missing or malformed one."""
    from envcheck.core.errors import UsageError
    from envcheck.host.documents import read_document

    data = read_document(path, "compose file")
    if not isinstance(data, dict) or not isinstance(data.get("services", {}), dict):
        raise UsageError(
            f"compose file {path}: not a compose file (a mapping with a 'services' mapping is expected)"
        )
    return data


def collect(matrix_path: str | None, compose_path: str | None = None) -> dict[str, Any]:
    """Everything `envcheck host` reports, as one JSON-able document."""
    from envcheck.host.cdi import cdi_dirs, cdi_report
    from envcheck.host.compose_gpu import compose_gpu_problems, gpu_services
    from envcheck.images.matrix import default_matrix_path, load_matrix

    # Bad input (a compose file, a matrix: missing or broken is a usage error, exit 2) fails before anything is probed.
    compose = read_compose(compose_path) if compose_path else None
    matrix = load_matrix(Path(matrix_path) if matrix_path else default_matrix_path())
    gpus = read_host_gpus()
    doc: dict[str, Any] = {
        "gpu": {
            "source": gpus.source,
            "driver": gpus.driver,
            "driver_cuda": gpus.driver_cuda,
            "gpus": gpus.listed,
            "why_none": gpus.why_none or None,
        },
        "docker": docker_gpu_setup(),
        "cdi": cdi_report(cdi_dirs(), bool(gpus.listed), gpus.driver),
        "dev_char": dev_char_links(),
    }
    doc["dev_char"]["problem"] = dev_char_problem(
        doc["dev_char"].get("missing", []), doc["docker"].get("cgroup_driver")
    )
    if compose is not None:
        doc["compose"] = {
            "file": compose_path,
            "gpu_services": gpu_services(compose),
            "problems": compose_gpu_problems(compose),
        }
    doc["matrix"] = str(matrix.path)
    doc["platform"] = host_platform()
    doc["rows"] = row_verdicts(gpus, list(matrix.rows), doc["platform"])
    return doc
