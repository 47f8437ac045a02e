"""The Slurm deployments of docs/cluster.md, run as written on the real Slurm of tests/helpers/slurm.py: the prolog
(docs/cluster/slurm-prolog.sh) and epilog run by slurmd for a real job, the HealthCheckProgram
(docs/cluster/slurm-health.sh) started as slurmd starts it, each read from its doc file with its placeholders filled
(tests/cluster/documented.py).

They assert the deployment contract, not the node path's internals (which may change): the exit code, whether
slurmd drains the node, the reason `sinfo -R` shows, that the metrics file is written, and what a usage error does.

Real: slurmctld, slurmd, munged, srun, sinfo, scontrol; the prolog and epilog run by slurmd as root with Slurm's own
environment (no PATH, SLURM_SCRIPT_CONTEXT); envcheck's torch-free node path; the textfile read back with
prometheus_client's parser. Staged (no GPU can exist here): an 8-GPU node in a private mount namespace (device nodes,
/proc/driver/nvidia) with a stand-in libcuda.so.1 (healthy, or cuInit answering 802 as on an NVSwitch node without
nvidia-fabricmanager), and for the epilog a stand-in `dcgmi` printing a real DCGM failure document.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.checks.dcgm import health_documents as watch
from tests.checks.dcgm.documents import V3_3_9
from tests.cluster.documented import CLUSTER, documented_command, fill, launcher, node_script, staged_node
from tests.helpers.slurm import Cluster
from tests.staging import dcgmi
from tests.staging.libcuda import build

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
FABRIC_DOWN = {
    "STUB_INIT": "802"
}  # cuInit's CUDA_ERROR_SYSTEM_NOT_READY (tests/checks/node/test_node_path.py cites it)


@pytest.fixture(scope="module")
def libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("libcuda"))


@pytest.fixture
def textfile(tmp_path: Path) -> Path:
    folder = tmp_path / "textfile"
    folder.mkdir()
    return folder


def samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(path.read_text())
        for s in fam.samples
    }


def job(cluster: Cluster) -> tuple[bool, str]:
    """Submit one real job; (it ran, srun's stderr)."""
    done = cluster.run("srun", "-n", "1", "echo", "job-ran", timeout=120)
    return done.stdout.strip() == "job-ran", done.stderr


def wait_drained(cluster: Cluster, timeout: float = 15) -> str:
    deadline = time.monotonic() + timeout
    while "drain" not in (state := cluster.state()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return state


def log(cluster: Cluster, kind: str = "prolog") -> str:
    path = cluster.dir / f"{kind}.log"
    return path.read_text() if path.exists() else ""


def health(cluster: Cluster, script: Path, stage: str) -> tuple[int, str]:
    """The HealthCheckProgram as slurmd starts it: root, on the node, SLURMD_NODENAME unset so the script's own
    fallback (hostname -s) names the node; the same staged node as the prolog's."""
    state = cluster.dir / "slurm-prolog.json"
    done = cluster.run(
        "/bin/sh", "-c", f"{stage} {script}", env={"ENVCHECK_SLURM_STATE": str(state)}, timeout=90
    )
    return done.returncode, done.stdout + done.stderr


def test_the_docs_show_the_scripts_as_they_are() -> None:
    """docs/cluster.md quotes both scripts' commands: the quote and the file must be the same command."""
    text = " ".join((CLUSTER.parent / "cluster.md").read_text().replace("\\\n", " ").split())
    for name in ("slurm-prolog.sh", "slurm-health.sh"):
        assert documented_command(name) in text, name


def test_documented_prolog_lets_a_healthy_node_run_the_job(
    cluster: Cluster, libdir: Path, textfile: Path, tmp_path: Path
) -> None:
    cluster.set_prolog(
        f"exec {staged_node(tmp_path, libdir)} {node_script('slurm-prolog.sh', tmp_path, textfile)}"
    )
    ran, err = job(cluster)
    assert ran, err + log(cluster)
    cluster.wait_state("idle", timeout=15)
    assert cluster.reason() == ""
    got = samples(textfile / "envcheck.prom")  # written, and says the node is fine
    assert got[("envcheck_node_fault", ())] == 0
    assert got[("envcheck_exit_code", (("mode", "prolog"),))] == 0
    assert got[("envcheck_usage_error", (("mode", "prolog"),))] == 0
    assert not (cluster.dir / "slurm-prolog.json").exists()


def test_documented_prolog_drains_a_node_fault_health_names_it_and_resumes_it(
    cluster: Cluster, libdir: Path, textfile: Path, tmp_path: Path
) -> None:
    prolog = node_script("slurm-prolog.sh", tmp_path, textfile)
    cluster.set_prolog(f"exec {staged_node(tmp_path, libdir, **FABRIC_DOWN)} {prolog}")
    ran, err = job(cluster)
    assert not ran and "prolog failed" in err.lower(), err
    assert wait_drained(cluster) in ("drained", "draining", "drain")
    assert cluster.reason() == "Prolog error"  # slurmd's own reason: a prolog calls no Slurm command
    kept = json.loads((cluster.dir / "slurm-prolog.json").read_text())
    assert kept["reason"].startswith("[node] "), kept
    got = samples(textfile / "envcheck.prom")
    assert got[("envcheck_node_fault", ())] == 1 and got[("envcheck_exit_code", (("mode", "prolog"),))] == 1
    script = node_script("slurm-health.sh", tmp_path, textfile)
    code, out = health(cluster, script, staged_node(tmp_path, libdir, **FABRIC_DOWN))
    assert code == 1, out
    assert cluster.reason().startswith("envcheck: [node] "), cluster.reason()  # envcheck's reason in sinfo -R
    assert samples(textfile / "envcheck.prom")[("envcheck_exit_code", (("mode", "health"),))] == 1
    code, out = health(cluster, script, staged_node(tmp_path, libdir))  # the fabric manager is back
    assert code == 0 and "clean run 1 of 2 before a resume" in out, (
        out
    )  # no flapping: one clean run is not enough
    code, out = health(cluster, script, staged_node(tmp_path, libdir))
    assert code == 0, out
    assert re.search(rf"envcheck: node {cluster.node} resumed: \S+ passes again", out), out
    cluster.wait_state("idle", timeout=15)
    assert samples(textfile / "envcheck.prom")[("envcheck_node_fault", ())] == 0


def test_documented_epilog_drains_the_node_a_job_broke(cluster: Cluster, tmp_path: Path) -> None:
    """The epilog of docs/cluster.md (its code block: `--level full --only gpu.health,dcgm.health,dcgm.diag`) after a
    real job; DCGM's level 2 fails GPU 1, or DCGM's Driver watch fails GPU 0 while the diagnostic passes (a stand-in
    dcgmi prints DCGM's own documents, tests/staging/dcgmi.py): slurmd drains the node with its "Epilog error". Its
    healthy twin (DCGM's diagnostic and watches passing) leaves the node idle."""
    text = (CLUSTER.parent / "cluster.md").read_text()
    (command,) = re.findall(r"^Epilog=.*\n```\n\n```sh\n(.+)\n```", text, flags=re.M)
    script = tmp_path / "epilog.sh"
    script.write_text(
        "#!/bin/sh\n" + fill(command, {"/opt/envcheck/bin/envcheck": str(launcher(tmp_path))}) + "\n"
    )
    script.chmod(0o755)
    bin_dir = tmp_path / "bin"
    passing = json.dumps({"DCGM GPU Diagnostic": {"test_categories": []}})
    reset = watch.report_24([watch.Incident(0, watch.DRIVER, watch.FAIL, watch.recovery_reset(0))])
    cases = (
        ("pass", passing, watch.HEALTHY_263, ""),
        (
            "fail",
            V3_3_9,
            watch.HEALTHY_263,
            "[node] dcgm.diag: DCGM test 'GPU Memory' (Hardware) failed on GPU 1",
        ),
        ("fail", passing, reset, "[node] dcgm.health: DCGM health watch Driver: Failure on GPU 0"),
    )  # V3_3_9: DCGM isolates GPU 1's faulty memory
    for verdict, doc, watches, said in cases:
        answers: dict[str, tuple[int, str] | str] = {f"health -g {g} -c -j": (0, watches) for g in "gas"}
        dcgmi.install(
            bin_dir, {**answers, "-v": (0, watch.version_output("4.6.0")), "diag -r 2 -j": (0, doc)}
        )
        cluster.set_prolog(f"PATH={bin_dir}:/usr/bin:/bin exec {script}", kind="epilog")
        ran, err = job(cluster)
        assert ran, err  # the epilog runs after the job
        if verdict == "pass":
            cluster.wait_state("idle", timeout=30)
            assert cluster.reason() == "", log(cluster, "epilog")
        else:
            assert wait_drained(cluster, timeout=30) in ("drained", "draining", "drain"), log(
                cluster, "epilog"
            )
            assert cluster.reason() == "Epilog error"
            assert said in log(cluster, "epilog"), log(cluster, "epilog")
            cluster.resume()


@pytest.mark.parametrize(
    "typo",
    [
        ("--timeout 120", "--timout 120"),  # an unknown flag
        ("--timeout 120", "--timeout sixty"),
    ],
)  # a bad value
def test_a_mistyped_flag_in_the_documented_prolog_neither_drains_nor_goes_unnoticed(
    cluster: Cluster, libdir: Path, textfile: Path, tmp_path: Path, typo: tuple[str, str]
) -> None:
    """docs/cluster.md, "Usage errors in node modes": under slurmd the prolog exits 0 (the same typo is in every
    node's prolog: 2 would drain each node that gets a job), says so in the prolog's log and the metrics file, and
    the health check repeats it on every run until the prolog is fixed."""
    stage = staged_node(
        tmp_path, libdir, **FABRIC_DOWN
    )  # even a faulty node: it was not judged, so not drained
    cluster.set_prolog(f"exec {stage} {node_script('slurm-prolog.sh', tmp_path, textfile, typo=typo)}")
    ran, err = job(cluster)
    assert ran, err + log(cluster)
    cluster.wait_state("idle", timeout=15)
    assert cluster.reason() == ""
    said = log(cluster)
    assert (
        "envcheck: error: " in said
        and "a usage error in the prolog command: this node was not checked" in said
    )
    assert "exit 0 so that slurmd does not drain this node for it" in said and "Traceback" not in said
    got = samples(textfile / "envcheck.prom")
    assert got[("envcheck_usage_error", (("mode", "prolog"),))] == 1
    assert ("envcheck_node_fault", ()) not in got  # nothing was judged: no verdict in the file
    # the health check (correct, on a healthy node) keeps saying it, in its output and its metrics
    code, out = health(
        cluster, node_script("slurm-health.sh", tmp_path, textfile), staged_node(tmp_path, libdir)
    )
    assert code == 0, out
    assert "this node's prolog runs envcheck with a usage error" in out, out
    got = samples(textfile / "envcheck.prom")
    assert got[("envcheck_usage_error", (("mode", "prolog"),))] == 1
    assert got[("envcheck_usage_error", (("mode", "health"),))] == 0
    assert cluster.state() == "idle"
    # fixed: the next job's prolog parses, and the health check stops repeating it
    cluster.set_prolog(
        f"exec {staged_node(tmp_path, libdir)} {node_script('slurm-prolog.sh', tmp_path, textfile)}"
    )
    ran, err = job(cluster)
    assert ran, err
    code, out = health(
        cluster, node_script("slurm-health.sh", tmp_path, textfile), staged_node(tmp_path, libdir)
    )
    assert "usage error" not in out, out
    assert samples(textfile / "envcheck.prom").get(("envcheck_usage_error", (("mode", "prolog"),)), 0) == 0


def test_a_prolog_whose_textfile_folder_is_missing_runs_the_job_and_says_why(
    cluster: Cluster, libdir: Path, tmp_path: Path
) -> None:
    """The docs' default folder on a node without node_exporter: the --prometheus path is itself the usage error,
    so no metrics file can carry it; the prolog's log and the health check do."""
    missing = tmp_path / "no-node-exporter" / "textfile"
    cluster.set_prolog(
        f"exec {staged_node(tmp_path, libdir)} {node_script('slurm-prolog.sh', tmp_path, missing)}"
    )
    ran, err = job(cluster)
    assert ran, err + log(cluster)
    assert f"folder {missing} does not exist" in log(cluster)
    assert "usage_error" in (cluster.dir / "slurm-prolog.json").read_text()
    cluster.wait_state("idle", timeout=15)  # through "completing"
    assert cluster.reason() == ""


def test_the_same_typo_run_by_hand_exits_2(libdir: Path, textfile: Path, tmp_path: Path) -> None:
    """An admin trying the script outside slurmd (no SLURM_SCRIPT_CONTEXT) gets the plain usage error and 2."""
    import subprocess

    script = node_script("slurm-prolog.sh", tmp_path, textfile, typo=("--timeout 120", "--timout 120"))
    done = subprocess.run(
        ["/bin/sh", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "ENVCHECK_SLURM_STATE": str(tmp_path / "state.json")},
    )
    assert done.returncode == 2, done.stderr
    assert (
        "unrecognized arguments: --timout 120" in done.stderr and "exit 2, the node not judged" in done.stderr
    )
    assert samples(textfile / "envcheck.prom")[("envcheck_usage_error", (("mode", "prolog"),))] == 1
    assert not (tmp_path / "state.json").exists()  # not a slurmd prolog: nothing for a health check to repeat


def test_a_mistyped_health_check_neither_drains_nor_resumes(
    cluster: Cluster, libdir: Path, textfile: Path, tmp_path: Path
) -> None:
    script = node_script(
        "slurm-health.sh", tmp_path, textfile, typo=("--for health", "--for health --verbose")
    )
    code, out = health(cluster, script, staged_node(tmp_path, libdir, **FABRIC_DOWN))
    assert code == 2 and "a usage error in the health command" in out, out
    assert cluster.state() == "idle" and cluster.reason() == ""
    assert samples(textfile / "envcheck.prom")[("envcheck_usage_error", (("mode", "health"),))] == 1
    assert ("envcheck_node_fault", ()) not in samples(textfile / "envcheck.prom")  # no checks ran
