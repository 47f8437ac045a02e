"""compose.yaml and its overrides: `docker compose config` accepts them and they match the compose-spec."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.compose.stack import ROOT, Project

OVERRIDES = [(), ("compose.cpu.yaml",), ("compose.secrets.yaml",)]
SECRET_FILES = {"JUPYTER_TOKEN_SECRET": "/dev/null", "SSH_AUTHORIZED_KEYS_SECRET": "/dev/null"}


def rendered(*overrides: str) -> dict[str, Any]:
    """The merged model `docker compose config` prints (every profile enabled)."""
    proj = Project(files=("compose.yaml", *overrides), env=SECRET_FILES)
    out = proj.compose("--profile", "*", "config", "--format", "json", timeout=60).stdout
    model: dict[str, Any] = json.loads(out)
    return model


def check_jsonschema(path: Path) -> subprocess.CompletedProcess[str]:
    """Validate a compose file against the compose-spec schema bundled with check-jsonschema."""
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("overrides", OVERRIDES, ids=lambda o: "+".join(o) or "base")
def test_compose_config_renders_and_validates(overrides: tuple[str, ...], tmp_path: Path) -> None:
    model = rendered(*overrides)
    assert set(model["services"]) == {"jupyter", "ssh", "verify"}
    merged = tmp_path / "merged.json"
    merged.write_text(json.dumps(model))
    done = check_jsonschema(merged)
    assert done.returncode == 0, done.stdout + done.stderr


def test_committed_files_validate_against_compose_spec() -> None:
    # compose.cpu.yaml uses the `!reset` tag, which only Compose understands; it is validated merged above.
    for name in ("compose.yaml", "compose.secrets.yaml"):
        done = check_jsonschema(ROOT / name)
        assert done.returncode == 0, done.stdout + done.stderr


def test_schema_validation_can_fail(tmp_path: Path) -> None:
    broken = tmp_path / "compose.yaml"
    broken.write_text((ROOT / "compose.yaml").read_text().replace("shm_size:", "shm_sise:", 1))
    assert check_jsonschema(broken).returncode != 0


def test_gpu_reservation_and_its_cpu_reset() -> None:
    gpu, cpu = rendered(), rendered("compose.cpu.yaml")
    for name in ("jupyter", "ssh", "verify"):
        devices = gpu["services"][name]["deploy"]["resources"]["reservations"]["devices"]
        assert devices == [{"driver": "nvidia", "count": -1, "capabilities": ["gpu"]}]
        assert "devices" not in cpu["services"][name]["deploy"]["resources"]["reservations"]
        assert "memlock" not in cpu["services"][name]["ulimits"]  # pinned memory is for GPUs only
    assert gpu["services"]["verify"]["command"] == ["make", "verify"]
    assert cpu["services"]["verify"]["command"] == ["make", "verify", "ALLOW_CPU=1"]


def test_services_are_localhost_only_with_limits_and_profiles() -> None:
    model = rendered()
    for name in ("jupyter", "ssh"):
        service = model["services"][name]
        assert [p["host_ip"] for p in service["ports"]] == ["127.0.0.1"]
        assert service["ulimits"]["memlock"] == -1 and service["ulimits"]["stack"] == 67108864
        assert int(service["shm_size"]) >= 1 << 30
        assert service["cap_drop"] == ["ALL"] and "no-new-privileges:true" in service["security_opt"]
        assert service["healthcheck"]["test"][0] == "CMD"
        assert {v["target"] for v in service["volumes"]} >= {"/workspace", "/home/dev/.cache"}
        assert service["profiles"] == [name]
    ssh_volumes = {v["target"]: v for v in model["services"]["ssh"]["volumes"]}
    assert ssh_volumes["/var/lib/envcheck/ssh-host-keys"]["type"] == "volume"
    assert model["services"]["verify"]["volumes"][0]["read_only"] is True


def test_env_example_sets_tag_and_ports() -> None:
    keys = {
        line.split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert {"ENVCHECK_IMAGE_REPO", "ENVCHECK_TAG", "JUPYTER_PORT", "SSH_PORT", "HOST_UID", "HOST_GID"} <= keys
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line.startswith(("JUPYTER_TOKEN=", "SSH_AUTHORIZED_KEYS=")):
            assert line.endswith("="), f"no secret may be committed: {line}"


def test_devcontainer_uses_devel_with_optional_gpu() -> None:
    text = (ROOT / ".devcontainer" / "devcontainer.json").read_text()
    config = json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))
    assert config["hostRequirements"]["gpu"] == "optional"
    assert config["remoteUser"] == "dev" and config["workspaceFolder"] == "/workspace"
    assert "devel" in (config.get("image") or config["build"]["target"])
