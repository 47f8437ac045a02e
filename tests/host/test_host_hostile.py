"""`envcheck host` and `envcheck image verify` show outside text escaped: no terminal sequence reaches the screen.

The sequences are an OSC 8 hyperlink (`ESC ] 8 ;; URL ESC \\`, which makes text a link to anywhere) and CSI
clear-screen (`ESC [ 2J`). rich's own markup escape() leaves ESC alone, and rich strips only BEL, BS, VT, FF
and CR, so before core.text.visible both reached the terminal raw.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from envcheck.core.result import failed, passed
from envcheck.core.run_report import RunReport
from envcheck.images.docker_run import ImageRun
from envcheck.images.verify import print_matrix
from tests.helpers import run_cli

LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
CLEAR = "\x1b[2J"


def test_a_compose_files_text_in_dockers_quoted_message_is_shown_escaped(tmp_path: Path) -> None:
    """The unknown-capability problem quotes Docker's refusal with the file's capabilities in it."""
    compose = (
        tmp_path / "compose.yaml"
    )  # JSON is YAML; json.dumps writes ESC as \u001b, which YAML reads back
    compose.write_text(
        json.dumps(
            {
                "services": {
                    "app": {
                        "image": "x",
                        "deploy": {
                            "resources": {
                                "reservations": {
                                    "devices": [
                                        {"driver": "nvidia", "capabilities": ["gpu", f"x{LINK}{CLEAR}"]}
                                    ]
                                }
                            }
                        },
                    }
                }
            }
        )
    )
    done = run_cli("host", "--compose", str(compose), timeout=60)
    assert done.returncode == 1, done.stderr
    assert "could not select device driver" in done.stdout  # the premise: the quoted message is shown
    assert "\x1b" not in done.stdout and "\x1b" not in done.stderr
    quoted = done.stdout.replace("\n", "")  # the table may fold it
    assert (
        "with capabilities: [[gpu x\\x1b]8;;https://evil.example/\\x1b\\click\\x1b]8;;\\x1b\\\\x1b[2J]]"
        in quoted
    )


def test_a_gpu_name_with_a_hyperlink_is_shown_escaped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The NVML/nvidia-smi layer is injected (no GPU here): the name is what a driver would report."""
    from envcheck.app.main import main
    from envcheck.host import collect as host  # where `envcheck host` looks the reader up
    from envcheck.host.rows import HostGpus

    name = f"RTX 5090{LINK}{CLEAR}"
    fake = HostGpus(
        "nvidia-smi",
        "575.57.08",
        "12.9",
        [(12, 0)],
        [name],
        listed=[{"name": name, "compute_capability": "12.0"}],
    )
    monkeypatch.setattr(host, "read_host_gpus", lambda: fake)
    assert main(["host"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert out.splitlines()[0] == (
        "Driver 575.57.08 (CUDA 12.9, from nvidia-smi); GPUs: RTX 5090\\x1b]8;;"
        "https://evil.example/\\x1b\\click\\x1b]8;;\\x1b\\\\x1b[2J (sm_120)"
    )


def test_image_verify_table_shows_image_check_and_error_text_escaped() -> None:
    report = RunReport(
        [
            passed("fine").named(f"a.pass{CLEAR}", 0.1),
            failed(f"broken{LINK}", f"reinstall{CLEAR}").named("a.fail", 0.1),
        ]
    )
    runs = [
        ImageRun(image=f"img:1{CLEAR}", report=report, exit_code=1),
        ImageRun(image="img:2", error=f"docker: Error response from daemon: {LINK}"),
    ]
    buf = io.StringIO()
    print_matrix(runs, Console(file=buf, width=400))
    out = buf.getvalue()
    assert "\x1b" not in out
    assert "img:1\\x1b[2J a.fail (fail): broken\\x1b]8;;https://evil.example/\\x1b\\click" in out
    assert "a.pass\\x1b[2J" in out and "error: docker: Error response from daemon: \\x1b]8;;" in out
