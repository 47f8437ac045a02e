"""--for prolog|preflight|npd: exit codes by fault class, the one-line reason, and the lost-GPU rule."""

from __future__ import annotations

import pytest

from envcheck.cluster import policy
from envcheck.cluster.mode_names import ModeName
from envcheck.cluster.policy import decide, one_line, reclassify
from envcheck.core.result import Result, errored, failed, passed, warned


def fail(name: str, cls: str | None, summary: str = "broken") -> Result:
    return failed(summary, "fix", fault_class=cls).named(name, 0.1)


HEALTHY = [passed("ok").named("cuda.available", 0.1)]
NODE = [fail("cuda.available", "node", "Error 802, nvidia-fabricmanager not running")]
IMAGE = [fail("vision.ops", "image")]
CONFIG = [fail("container.shm", "config")]
ENVCHECK_CRASHED = [errored("worker died").named("autograd.gradcheck", 1.0)]


@pytest.mark.parametrize(
    ("results", "mode", "code"),
    [
        (HEALTHY, ModeName.PROLOG, 0),
        (NODE, ModeName.PROLOG, 1),
        (IMAGE, ModeName.PROLOG, 0),
        (CONFIG, ModeName.PROLOG, 0),
        (ENVCHECK_CRASHED, ModeName.PROLOG, 0),
        (HEALTHY, ModeName.NPD, 0),
        (NODE, ModeName.NPD, 1),
        (IMAGE, ModeName.NPD, 0),
        (CONFIG, ModeName.NPD, 0),
        (ENVCHECK_CRASHED, ModeName.NPD, 2),
        (HEALTHY, ModeName.PREFLIGHT, 0),
        (NODE, ModeName.PREFLIGHT, 10),
        (IMAGE, ModeName.PREFLIGHT, 0),
        (CONFIG, ModeName.PREFLIGHT, 0),
        (ENVCHECK_CRASHED, ModeName.PREFLIGHT, 0),
        (IMAGE + NODE, ModeName.PREFLIGHT, 10),
        (CONFIG + IMAGE, ModeName.PREFLIGHT, 0),
        (IMAGE + NODE, ModeName.PROLOG, 1),
    ],
)
def test_exit_code_by_class(results: list[Result], mode: ModeName, code: int) -> None:
    assert decide(results, mode).code == code


def test_the_documented_codes_are_the_constants() -> None:
    assert (policy.OK, policy.NODE_FAULT, policy.USAGE) == (0, 1, 2)
    assert policy.PREFLIGHT_NODE == 10


def test_node_reason_is_one_line_for_scontrol() -> None:
    d = decide(NODE + [fail("cuda.devices", "node", 'two\nlines "quoted"' + "x" * 300)], ModeName.PROLOG)
    assert d.reason.startswith("[node] cuda.available: Error 802, nvidia-fabricmanager not running")
    assert d.reason.endswith("(+1 more node faults)")
    long = one_line(fail("cuda.devices", "node", 'two\nlines "quoted"' + "x" * 300))
    assert "\n" not in long and '"' not in long and len(long) == policy.REASON_MAX
    two_long = decide(
        [fail("node.cuda_driver", "node", "y" * 300), fail("node.profile", "node", "z" * 300)], ModeName.NPD
    )  # NPD's max_output_length: the suffix too stays inside the limit
    assert len(two_long.reason) == policy.REASON_MAX and two_long.reason.endswith("... (+1 more node faults)")


def test_image_and_config_faults_are_warnings_not_reasons() -> None:
    d = decide(IMAGE + CONFIG + [warned("slow", fault_class="node").named("dist.busbw", 1)], ModeName.PROLOG)
    assert d.code == 0 and d.reason == ""
    assert [w.split(":")[0] for w in d.warnings] == [
        "[image] vision.ops",
        "[config] container.shm",
        "[node] dist.busbw",
    ]


LOST_AVAILABLE = failed(
    "CUDA is not available: no /dev/nvidia* device nodes and no /proc/driver/nvidia: the "
    "container was started without GPU access",
    "docker run --gpus all",
    measured={
        "findings": [
            {
                "layer": "container",
                "problem": "no /dev/nvidia* device nodes "
                "and no /proc/driver/nvidia: the container was started without "
                "GPU access",
            }
        ]
    },
    fault_class="config",
    code="cuda.container",
).named("cuda.available", 1)
LOST_DEVICES = failed(
    "0 GPU(s) visible, 1 expected",
    "docker run --gpus all",
    measured={"gpus": 0},
    expected={"gpus": 1},
    fault_class="config",
    code="cuda.gpu_count",
).named("cuda.devices", 0)


@pytest.mark.parametrize("mode", [ModeName.PROLOG, ModeName.NPD])
def test_a_host_short_of_expected_gpus_is_a_node_fault_in_host_modes(mode: ModeName) -> None:
    out = reclassify([LOST_DEVICES], mode, expect_gpus=1)
    assert [r.fault_class for r in out] == ["node"]
    assert out[0].summary == "0 GPU(s) visible, 1 expected: this node lost GPUs"
    assert decide(out, mode).code == 1


@pytest.mark.parametrize("mode", [ModeName.PROLOG, ModeName.NPD, ModeName.HEALTH])
def test_a_container_given_no_gpu_stays_config_and_npd_cannot_judge(mode: ModeName) -> None:
    """envcheck's own container started without GPU access (an npd DaemonSet without the nvidia runtime): its
    configuration, never the node's, whatever --expect-gpus says; npd answers 'unknown' (2), nothing drains."""
    out = reclassify(
        [LOST_AVAILABLE, LOST_DEVICES], mode, expect_gpus=1
    )  # its count of 0 is no lost GPU either
    assert [r.fault_class for r in out] == ["config", "config"] and out[0].code == "cuda.container"
    assert decide(out, mode).code == (2 if mode is ModeName.NPD else 0)


def test_in_a_pod_or_without_expect_gpus_it_stays_config() -> None:
    assert [r.fault_class for r in reclassify([LOST_AVAILABLE, LOST_DEVICES], ModeName.PREFLIGHT, 1)] == [
        "config"
    ] * 2
    assert [r.fault_class for r in reclassify([LOST_AVAILABLE, LOST_DEVICES], ModeName.PROLOG, None)] == [
        "config"
    ] * 2
    assert [r.fault_class for r in reclassify([LOST_AVAILABLE], None, 1)] == ["config"]
    hidden = failed(
        "CUDA_VISIBLE_DEVICES=-1 hides every GPU",
        measured={"findings": [{"layer": "env"}]},
        fault_class="config",
    ).named("cuda.available", 0)
    assert reclassify([hidden], ModeName.PROLOG, 1)[0].fault_class == "config"
