"""Capture and replay: `envcheck facts --bundle FILE`, then `envcheck explain FILE` anywhere.

Real: the round trip runs the real capture on this host (CPU torch, no GPU) through the real engine, and compares
with `envcheck run` of the same checks. The healthy H100 bundle is built from the real proof run's evidence (see
its `provenance`): no GPU is touched here. Malformed bundles are real files (a FIFO, a directory, a sparse huge file).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from envcheck.app.main import main
from envcheck.checks.check_registry import SECTIONS
from envcheck.checks.cuda.capture import loaded_libraries
from envcheck.evidence.bundle import SCHEMA_VERSION, redact_env
from tests.helpers import HEALTHY_H100, no_gpu_env, run_cli

CHECKS = ",".join(["cuda.available", "cuda.devices", *(s.check for s in SECTIONS)])  # what explain replays


def _explain(capsys: pytest.CaptureFixture[str], path: Path | str, *flags: str) -> tuple[int, dict[str, Any]]:
    rc = main(["explain", str(path), "--json", "-", *flags])
    return rc, json.loads(capsys.readouterr().out)


def _verdicts(report: dict[str, Any]) -> list[tuple[str, str, str, str | None]]:
    return [(r["name"], r["status"], r["summary"], r.get("fault_class")) for r in report["results"]]


def test_healthy_h100_bundle_explains_as_healthy(capsys: pytest.CaptureFixture[str]) -> None:
    rc, report = _explain(capsys, HEALTHY_H100, "--expect-gpus", "1")
    assert rc == 0 and report["exit_code"] == 0
    by = {r["name"]: r for r in report["results"]}
    assert by["cuda.available"]["status"] == "pass"
    assert "NVIDIA H100 80GB HBM3" in by["cuda.available"]["summary"]
    assert by["cuda.devices"]["status"] == "pass"


def test_healthy_bundle_still_fails_a_wrong_gpu_count(capsys: pytest.CaptureFixture[str]) -> None:
    rc, report = _explain(capsys, HEALTHY_H100, "--expect-gpus", "2")
    devices = {r["name"]: r for r in report["results"]}["cuda.devices"]
    assert rc == 1 and devices["status"] == "fail" and devices["fault_class"] == "config"
    assert devices["summary"] == "1 GPU(s) visible, 2 expected"


def test_a_broken_bundle_is_diagnosed_from_its_contents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same H100 bundle with its libcuda made unloadable: the replay names libcuda (not this host's state)."""
    bundle = json.loads(HEALTHY_H100.read_text())
    bundle["cuda"].update(
        available=False,
        gpus=[],
        driver_cuda=None,
        libcuda_error="libcuda.so.1: cannot open shared object file: No such file or directory",
    )
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(bundle))
    rc, report = _explain(capsys, path)
    available = report["results"][0]
    assert rc == 1 and available["status"] == "fail" and available["fault_class"] == "node"
    assert "libcuda.so.1 cannot be loaded" in available["summary"]


@pytest.mark.parametrize("flags", [(), ("--allow-cpu",), ("--allow-cpu", "--expect-gpus", "1")])
def test_round_trip_on_this_host_matches_run(tmp_path: Path, flags: tuple[str, ...]) -> None:
    env = {
        **no_gpu_env(),
        "NCCL_IB_AUTH_KEY": "hunter2-nccl",
        "PIP_EXTRA_INDEX_URL": "https://alice:tok-3141@pypi.example.com/simple",
        "TORCH_HUB_MIRROR": "https://carol:tok-2718@hub.example.com/",
    }  # also in facts' own env list
    bundle = tmp_path / "bundle.json"
    captured = run_cli("facts", "--bundle", str(bundle), env=env)
    assert captured.returncode == 0, captured.stderr
    text = bundle.read_text()
    assert (
        "hunter2-nccl" not in text
        and "tok-3141" not in text
        and "alice" not in text
        and "tok-2718" not in text
    )
    assert "https://<redacted>@hub.example.com/" in text
    explained = run_cli("explain", str(bundle), "--json", "-", *flags, env=env)
    ran = run_cli("run", "--only", CHECKS, "--json", "-", *flags, env=env)
    assert explained.returncode == ran.returncode, (explained.stderr, ran.stderr)
    assert _verdicts(json.loads(explained.stdout)) == _verdicts(json.loads(ran.stdout))


def _write(tmp_path: Path, body: Any) -> Path:
    path = tmp_path / "bundle.json"
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


def _healthy(**changes: Any) -> dict[str, Any]:
    bundle: dict[str, Any] = json.loads(HEALTHY_H100.read_text())
    for key, value in changes.items():
        if value is None:
            bundle.pop(key)
        else:
            bundle[key] = value
    return bundle


def _case(tmp_path: Path, case: str) -> Path:
    if case == "not-json":
        return _write(tmp_path, "{not json")
    if case == "not-utf8":
        path = tmp_path / "bundle.json"
        path.write_bytes(b"\xff\xfe\x00garbage")
        return path
    if case == "array":
        return _write(tmp_path, [1, 2])
    if case == "nested":
        return _write(tmp_path, "[" * 100_000 + "]" * 100_000)
    if case == "wrong-schema-version":
        return _write(tmp_path, _healthy(schema_version=SCHEMA_VERSION + 1))
    if case == "other-json":
        return _write(tmp_path, {"results": []})
    if case == "missing-key":
        bundle = _healthy()
        del bundle["cuda"]["available"]
        return _write(tmp_path, bundle)
    if case == "wrong-type":
        bundle = _healthy()
        bundle["cuda"]["driver_cuda"] = "13.0"
        return _write(tmp_path, bundle)
    if case == "no-cuda":
        return _write(tmp_path, _healthy(cuda=None))
    if case == "huge":
        path = tmp_path / "huge.json"
        with open(path, "wb") as fh:
            fh.truncate(64 * 2**20)  # sparse: costs no disk
        return path
    if case == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)  # opening it for reading would block forever
        return path
    if case == "directory":
        return tmp_path
    return tmp_path / "absent.json"


@pytest.mark.parametrize(
    "case, words",
    [
        ("not-json", "not JSON"),
        ("not-utf8", "not JSON"),
        ("array", "a JSON object is expected"),
        ("nested", "nested too deeply"),
        ("wrong-schema-version", "schema_version 2 is not supported"),
        ("other-json", "not an envcheck bundle"),
        ("missing-key", "lacks 'available'"),
        ("wrong-type", "cuda.driver_cuda must be int or null"),
        ("no-cuda", "no 'cuda' section"),
        ("huge", "a bundle is at most"),
        ("fifo", "not a regular file"),
        ("directory", "is a directory"),
        ("missing", "No such file or directory"),
    ],
)
def test_malformed_bundle_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, words: str
) -> None:
    rc = main(["explain", str(_case(tmp_path, case))])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("envcheck: error: ") and words in err, err
    assert "Traceback" not in err


def test_env_is_redacted_by_name_and_url() -> None:
    env = redact_env(
        {
            "NCCL_IB_AUTH_KEY": "k1",
            "TORCH_HUB_TOKEN": "t1",
            "NVIDIA_PASSWORD": "p1",
            "CUDA_CRED_FILE": "c1",
            "ENVCHECK_SECRET": "s1",
            "PIP_INDEX_URL": "https://bob:t0k@mirror.example/simple",
            "CUDA_VISIBLE_DEVICES": "0,1",
            "HOME": "/root",
        }
    )
    assert env == {
        "CUDA_CRED_FILE": "<redacted>",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "ENVCHECK_SECRET": "<redacted>",
        "NCCL_IB_AUTH_KEY": "<redacted>",
        "NVIDIA_PASSWORD": "<redacted>",
        "PIP_INDEX_URL": "https://<redacted>@mirror.example/simple",
        "TORCH_HUB_TOKEN": "<redacted>",
    }


def test_loaded_libraries_are_the_cuda_stack_paths_from_maps() -> None:
    maps = (
        "7f00-7f10 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n"
        "7f10-7f20 r-xp 00000000 08:01 2 /venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9\n"
        "7f20-7f30 r-xp 00000000 08:01 3 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f30-7f40 rw-p 00000000 00:00 0 \n"
        "7f40-7f50 r-xp 00000000 08:01 4 /opt/nccl/lib/libnccl.so.2.28.9\n"
    )
    assert loaded_libraries(maps) == [
        "/opt/nccl/lib/libnccl.so.2.28.9",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04",
        "/venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
    ]


def test_a_hung_nvml_is_named_within_the_budget(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Simulated NVML (none here: the one NVML fake, tests/staging/nvml.py): nvmlInit does not return in time, as
    on a GPU in a bad state. The capture names the hang instead of letting cuda.available run into its timeout."""
    import time

    from envcheck.checks.cuda.capture import first_nvml_error, nvml_gpus
    from tests.staging import nvml

    nvml.install(monkeypatch, tmp_path, nvml.state(nvml.gpu(0), init_hang="S", init_hang_s=2))
    began = time.monotonic()
    state = nvml_gpus(budget_s=0.3)
    assert time.monotonic() - began < 5
    assert state == "NVML did not answer within 0.3 s (a GPU or the driver is hung)"
    assert first_nvml_error(state) == state
