"""Run `envcheck run --json -` inside one image: detached, bounded by a timeout, always removed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from envcheck.core.errors import FatalError
from envcheck.core.run_report import RunReport
from envcheck.images.engine import docker_sdk, explain_start_error, require_image
from envcheck.report.json_report import parse_report

RECOMMENDED_SHM = "8g"
STACK_BYTES = 64 * 2**20
RUNNER_LABEL = "io.envcheck.runner"
MEMLOCK_REFUSED = "error setting rlimit type 8"


@dataclass(frozen=True)
class RunOptions:
    """How the runner starts each container."""

    allow_cpu: bool = False
    timeout_s: float = 900.0
    ipc_host: bool = False
    shm_size: str = RECOMMENDED_SHM
    envcheck_args: Sequence[str] = ()
    command: Sequence[str] | None = None  # override the in-container command (tests: a sleeper)


@dataclass
class ImageRun:
    """What one image produced: a parsed report, or an error saying why there is none."""

    image: str
    report: RunReport | None = None
    error: str | None = None
    exit_code: int | None = None
    duration_s: float = 0.0
    stderr: str = ""
    notes: list[str] = field(default_factory=list)


def envcheck_command(options: RunOptions) -> list[str]:
    """The command run in the container; its own --timeout ends the checks before ours kills it."""
    if options.command is not None:
        return list(options.command)
    inner = max(1.0, min(options.timeout_s - 15.0, options.timeout_s * 0.9))
    cmd = ["envcheck", "run", "--json", "-", "--timeout", f"{inner:g}", *options.envcheck_args]
    if options.allow_cpu and "--allow-cpu" not in cmd:
        cmd.append("--allow-cpu")
    return cmd


def host_config(options: RunOptions, memlock: bool = True) -> dict[str, Any]:
    """GPU request, shared memory and ulimits a PyTorch job needs."""
    docker = docker_sdk()
    ulimits = [docker.types.Ulimit(name="stack", soft=STACK_BYTES, hard=STACK_BYTES)]
    if memlock:
        ulimits.append(docker.types.Ulimit(name="memlock", soft=-1, hard=-1))
    config: dict[str, Any] = {"ulimits": ulimits}
    if options.ipc_host:
        config["ipc_mode"] = "host"
    else:
        config["shm_size"] = options.shm_size
    if not options.allow_cpu:
        config["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return config


def run_in_image(client: Any, image: str, options: RunOptions) -> ImageRun:
    """Start the container, wait at most `timeout_s`, parse its JSON; the container is always removed, with the
    anonymous volumes the image's VOLUME lines made."""
    require_image(client, image)
    start = time.monotonic()
    notes: list[str] = []
    container = _start(client, image, options, memlock=True)
    if container is None:  # the engine itself runs under a memlock cap it may not raise
        notes.append(f"engine refused memlock=-1 ({MEMLOCK_REFUSED}); ran with the engine's default memlock")
        container = _start(client, image, options, memlock=False)
    assert container is not None
    try:
        try:
            status = container.wait(timeout=options.timeout_s)
        except Exception as exc:  # requests' ReadTimeout/ConnectionError: the SDK has no other deadline
            if not _is_timeout(exc):
                raise
            container.kill()
            return ImageRun(
                image,
                error=f"container exceeded its timeout of {options.timeout_s:g}s and was "
                "killed; raise --timeout or narrow the run with --only",
                duration_s=time.monotonic() - start,
                stderr=_logs(container, stdout=False),
                notes=notes,
            )
        out = _logs(container, stdout=True)
        err = _logs(container, stdout=False)
        run = ImageRun(
            image,
            exit_code=int(status.get("StatusCode", -1)),
            stderr=err,
            duration_s=time.monotonic() - start,
            notes=notes,
        )
        try:
            run.report = parse_report(out)
        except FatalError as exc:
            tail = (err.strip().splitlines() or ["no output"])[-1]
            run.error = f"no envcheck report from the container (exit {run.exit_code}): {exc.message}; {tail}"
        return run
    finally:
        container.remove(
            force=True, v=True
        )  # with its anonymous volumes (an image's VOLUME): nothing left behind


def _start(client: Any, image: str, options: RunOptions, memlock: bool) -> Any:
    """Create and start; None when only the memlock ulimit was refused. Failed containers are removed."""
    docker = docker_sdk()
    container = client.containers.create(
        image,
        command=envcheck_command(options),
        detach=True,
        labels={RUNNER_LABEL: "1"},
        **host_config(options, memlock),
    )
    try:
        container.start()
    except docker.errors.APIError as exc:
        container.remove(force=True, v=True)
        if memlock and MEMLOCK_REFUSED in str(exc):
            return None
        raise explain_start_error(image, exc) from None
    return container


def _is_timeout(exc: Exception) -> bool:
    name = type(exc).__name__
    return "Timeout" in name or "timed out" in str(exc) or name == "ConnectionError"


def _logs(container: Any, *, stdout: bool) -> str:
    data: bytes = container.logs(stdout=stdout, stderr=not stdout)
    return data.decode("utf-8", errors="replace")
