"""The daemon's GPU refusals, in the words users met them, mapped to cause, fix and fault class.

Simulated: the daemon's error (no NVIDIA toolkit, driver, CDI spec or old driver can be staged in this engine);
each text is copied from the public report named beside it. Real: the docker SDK's APIError carrying the text, the
runner's translation (engine.explain_start_error) and the repository's matrix naming the row.
"""

from __future__ import annotations

import pytest

from envcheck.images.engine import explain_start_error
from envcheck.images.gpu_errors import default_row_of, explain_gpu_refusal, matrix_row_of
from envcheck.images.matrix import default_matrix_path, load_matrix

DAEMON = "docker: Error response from daemon: "
HOOK = (
    "failed to create task for container: failed to create shim task: OCI runtime create failed: runc create "
    "failed: unable to start container process: error during container init: error running prestart hook #0: "
    "exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
)
# https://github.com/NVIDIA/nvidia-docker/issues/1352, https://github.com/OpenBMB/XAgent/issues/273
NO_TOOLKIT = DAEMON + 'could not select device driver "" with capabilities: [[gpu]].'
# https://github.com/infiniflow/ragflow/issues/9573 (compose names the driver)
NO_TOOLKIT_NAMED = (
    'Error response from daemon: could not select device driver "nvidia" with capabilities: [[gpu]]'
)
# https://github.com/NVIDIA/nvidia-container-toolkit/issues/146 (podman) and moby/moby#47633 (docker)
CDI_PODMAN = "Error: error setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all"
CDI_DOCKER = DAEMON + "CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=all."
# https://github.com/NVIDIA/nvidia-container-toolkit/issues/260
NO_DRIVER = (
    DAEMON + "failed to create shim: OCI runtime create failed: container_linux.go:380: starting container "
    "process caused: process_linux.go:545: container init caused: Running hook #0:: error running hook: "
    "exit status 1, stdout: , stderr: nvidia-container-cli: initialization error: nvml error: driver not "
    "loaded: unknown."
)
# https://github.com/SyneRBI/PETRIC2/issues/27, https://github.com/theroyallab/tabbyAPI/issues/324
OLD_DRIVER = (
    DAEMON + HOOK + "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please "
    "update your driver to a newer version, or use an earlier cuda container: unknown"
)


@pytest.mark.parametrize("text", [NO_TOOLKIT, NO_TOOLKIT_NAMED])
def test_no_toolkit(text: str) -> None:
    refusal = explain_gpu_refusal(text)
    assert refusal is not None and refusal.fault_class == "node"
    assert "nvidia-container-toolkit is not installed" in refusal.cause
    assert "nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker" in refusal.fix
    assert refusal.matched.startswith("could not select device driver")


def test_a_capability_no_driver_has_is_config() -> None:
    """What compose's `capabilities: [gpu, all]` produces (moby capabilities.Set.Match: every one must match)."""
    refusal = explain_gpu_refusal('could not select device driver "nvidia" with capabilities: [[gpu all]]')
    assert refusal is not None and refusal.fault_class == "config"
    assert (
        "'all' is none of the nvidia driver's" in refusal.cause and "[gpu, compute, utility]" in refusal.fix
    )


@pytest.mark.parametrize("text", [CDI_PODMAN, CDI_DOCKER])
def test_unresolvable_cdi(text: str) -> None:
    refusal = explain_gpu_refusal(text)
    assert refusal is not None and refusal.fault_class == "node"
    assert "no CDI spec on the host offers nvidia.com/gpu=all" in refusal.cause
    assert refusal.fix.startswith("sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml")


def test_driver_not_loaded() -> None:
    refusal = explain_gpu_refusal(NO_DRIVER)
    assert refusal is not None and refusal.fault_class == "node"
    assert refusal.cause == "the NVIDIA kernel driver is not loaded on the host"
    assert "modprobe nvidia" in refusal.fix and "DKMS" in refusal.fix


def test_image_needs_a_newer_driver_names_the_row() -> None:
    refusal = explain_gpu_refusal(OLD_DRIVER, default_row_of("envcheck:2.8-cuda12.8-runtime"))
    assert refusal is not None and refusal.fault_class == "node"
    assert refusal.cause.startswith("the image (matrix row 2.8-cu128) needs a driver with CUDA >= 12.8")
    assert (
        "envcheck host" in refusal.fix
        and "525.60.13" in refusal.fix
        and "NVIDIA_DISABLE_REQUIRES" in refusal.fix
    )
    unnamed = explain_gpu_refusal(OLD_DRIVER, default_row_of("someone/else:latest"))
    assert unnamed is not None and unnamed.cause.startswith("the image needs a driver with CUDA >= 12.8")


def test_matrix_row_of_reads_every_tag_form() -> None:
    rows = list(load_matrix(default_matrix_path()).rows)
    latest = next(r for r in rows if r.latest)
    assert matrix_row_of("envcheck:latest-devel", rows) == latest.id
    assert matrix_row_of("ghcr.io/o/envcheck:2.8.0-cuda12.6-jupyter", rows) == "2.8-cu126"
    assert matrix_row_of("localhost:5000/envcheck", rows) is None  # a registry port is not a tag


def test_other_errors_are_not_claimed() -> None:
    assert (
        explain_gpu_refusal(
            'OCI runtime create failed: unable to start container process: exec: "x": '
            "executable file not found in $PATH"
        )
        is None
    )


def test_the_runner_reports_the_mapping_in_one_line() -> None:
    """engine.explain_start_error, as the runner calls it when container.start() raises the SDK's APIError."""
    docker = pytest.importorskip("docker")
    exc = docker.errors.APIError("500 Server Error", explanation=OLD_DRIVER.removeprefix(DAEMON))
    message = explain_start_error("envcheck:2.8-cuda12.8-runtime", exc).message
    assert "\n" not in message
    assert message.startswith(
        "envcheck:2.8-cuda12.8-runtime: cannot give the container a GPU: the image (matrix "
        "row 2.8-cu128) needs a driver with CUDA >= 12.8"
    )
    assert (
        "(the daemon said: nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12"
        in message
    )
    assert message.endswith("[fault: node]")
    toolkit = explain_start_error(
        "x", docker.errors.APIError("500", explanation=NO_TOOLKIT.removeprefix(DAEMON))
    )
    assert 'could not select device driver "" with capabilities: [[gpu]]' in toolkit.message
    assert "install nvidia-container-toolkit" in toolkit.message and "--allow-cpu" in toolkit.message
    other = explain_start_error("x", docker.errors.APIError("500", explanation="port is already allocated"))
    assert other.message == "x: the container did not start: port is already allocated"
