"""The README states facts, and each is checked against the code or by running it (not its sentences):
its sample run is re-staged and compared, its tables match the enums and constants the code uses, its commands
parse with envcheck's own parser or are make targets, its links resolve, and it stays a front page.

Where each README command runs as written: `envcheck host`, `envcheck list` and the sample run here;
`make verify ALLOW_CPU=1` inside the runtime image (tests/images/test_runtime_image.py) and from a fresh clone
(bench/newcomer.sh); `make test` in CI (.ci/run); the `docker run` lines in tests/images/test_readme_quickstart.py
(and here, that `make image TARGET=runtime` tags the image they run); `pipx install .` and `make dist` + `pipx install
dist/...whl` from a fresh clone in tests/test_quickstart_install.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.app.docs_reference import codes_page
from envcheck.app.guard import guard
from envcheck.app.main import build_parser
from envcheck.cluster import policy
from envcheck.core.errors import INTERNAL_ERROR_EXIT, UsageError
from envcheck.core.result import FaultClass, Status
from tests.helpers import ROOT, run_cli

README = (ROOT / "README.md").read_text()
MAX_LINES = 250


def _section(heading: str) -> str:
    """The text under `### heading` (or `## heading`) up to the next heading."""
    match = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#|\Z)", README, flags=re.M | re.S)
    assert match, heading
    return match.group(1)


def _rows(heading: str) -> list[list[str]]:
    """A table's body rows, each as its stripped cells."""
    lines = [line for line in _section(heading).splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[2:]]


def test_the_readme_is_a_front_page() -> None:
    lines = README.splitlines()
    assert 100 <= len(lines) <= MAX_LINES, len(lines)
    # the newcomer's two commands, one to set up and run the main job, one to pass the tests, early on
    quick = README.index("```bash\nmake verify ALLOW_CPU=1\nmake test\n```")
    assert README[:quick].count("\n") < 60


def test_the_status_table_is_the_status_enum() -> None:
    assert [row[0].strip("`") for row in _rows("Statuses")] == [s.value for s in Status]


def test_the_fault_class_table_is_the_enum_and_its_examples_have_that_class() -> None:
    rows = _rows("Fault classes")
    assert [row[0].strip("`") for row in rows] == [c.value for c in FaultClass]
    page = codes_page()
    for row in rows:
        for code in re.findall(r"`([a-z0-9_.]+)`", row[2]):
            section = page.split(f"### `{code}` {{#{code}}}\n\n", 1)
            assert len(section) == 2, f"{code}: not in the codes page"
            facts = section[1].split("\n", 1)[
                0
            ]  # "**node**, drains: hard: ..."; an Xid: "**node**, fails: yes: ..."
            if code.startswith("xid."):
                assert facts.startswith("**node**, fails: yes: "), (
                    code,
                    facts,
                )  # an Xid that fails: a node finding
            else:
                assert facts.startswith(f"**{row[0].strip('`')}**"), (code, facts)


def test_the_exit_codes_are_the_codes_envcheck_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = {int(row[0]) for row in _rows("Exit codes")}
    assert table == {0, 1, 2, 3, 130}
    assert UsageError("x").exit_code == 2 and INTERNAL_ERROR_EXIT == 3
    assert run_cli("run", "--no-such-flag").returncode == 2
    assert (
        run_cli(
            "run",
            "--allow-cpu",
            "--only",
            "net.ifname",
            env={
                k: v for k, v in os.environ.items() if not k.endswith("SOCKET_IFNAME") and k != "NCCL_IB_HCA"
            },
        ).returncode
        == 0
    )

    def interrupted() -> int:
        raise KeyboardInterrupt

    def crashed() -> int:
        raise RuntimeError("a bug")

    monkeypatch.setenv("ENVCHECK_LOG_DIR", str(tmp_path))
    assert guard(interrupted, signals=False) == 130
    assert guard(crashed, signals=False) == 3
    # the cluster line: only a node fault exits non-zero (1, or 10 for preflight); npd's 2 when it cannot judge
    line = _section("Exit codes").split("With `--for")[1]
    assert "(1, or 10 for `preflight`)" in line and "`npd` exits 2" in line
    assert (policy.NODE_FAULT, policy.PREFLIGHT_NODE, policy.NPD_UNKNOWN) == (1, 10, 2)


def _sample() -> tuple[str, dict[str, dict[str, str]]]:
    """The sample's command and, per check, its status, class, summary and fix as the table prints them."""
    block = re.search(r"```console\n\$ (envcheck run [^\n]+)\n(.*?)\n\$ echo", README, flags=re.S)
    assert block
    rows: dict[str, dict[str, str]] = {}
    current = ""
    for line in block.group(2).splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) != 4:
            continue
        if cells[0]:
            current = cells[0]
            status, _, cls = cells[1].partition(" ")
            rows[current] = {"status": status.lower(), "class": cls.strip("()"), "summary": "", "fix": ""}
        part = "fix" if rows[current]["fix"] or cells[2].startswith("fix: ") else "summary"
        rows[current][part] = (rows[current][part] + " " + cells[2].removeprefix("fix: ")).strip()
    return block.group(1), rows


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"), reason="staging mounts needs root and unshare"
)
def test_the_sample_run_is_what_envcheck_prints_on_that_machine() -> None:
    """Real: envcheck, torch, the kernel's tmpfs mounts. Staged: the 64 MiB /dev/shm and the noexec /tmp, mounted in
    a private mount namespace (nothing outside it sees them)."""
    command, rows = _sample()
    argv = shlex.split(command)[1:]
    # A checkout or interpreter under /tmp (a clone in /tmp/x) would vanish under the staged /tmp: the original /tmp
    # is bound on /mnt (inside the namespace only) first, and each such top folder is bound back over the tmpfs.
    keep = sorted(
        {
            Path(p).resolve().relative_to("/tmp").parts[0]
            for p in (ROOT, sys.prefix, sys.executable)
            if Path(p).resolve().is_relative_to("/tmp")
        }
    )
    back = "".join(
        f"mkdir -p /tmp/{shlex.quote(k)} && mount --bind /mnt/{shlex.quote(k)} /tmp/{shlex.quote(k)} && "
        for k in keep
    )
    stage = (
        ("mount --bind /tmp /mnt && " if keep else "")
        + "mount -t tmpfs -o size=64m tmpfs /dev/shm && mount -t tmpfs -o noexec,size=64m tmpfs /tmp && "
        + back
        + 'exec "$@"'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            stage,
            "sh",
            sys.executable,
            "-m",
            "envcheck",
            *argv,
            "--json",
            "-",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == int(re.search(r"\$ echo \$\?\n(\d+)", README).group(1)), done.stderr  # type: ignore[union-attr]
    report = {r["name"]: r for r in json.loads(done.stdout)["results"]}
    assert list(rows) == list(report)
    for name, row in rows.items():
        real = report[name]
        assert row["status"] == real["status"] and row["class"] == (real["fault_class"] or ""), name
        assert row["fix"] == " ".join((real["remediation"] or "").split()), name
        if (
            real["status"] != "pass"
        ):  # a pass names this machine's versions; a finding's text is the machine's
            assert row["summary"] == " ".join(real["summary"].split()), name
    codes = re.findall(r"`([a-z_]+\.[a-z_]+)`", README[README.index("stable **code**") :].split("\n\n")[0])
    assert codes == [report[n]["code"] for n in report if report[n]["code"]]


def _commands() -> list[str]:
    """Every command of the README's bash blocks and of its commands table."""
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    lines = [
        line.split("  #")[0].strip()
        for block in blocks
        for line in block.replace("\\\n", " ").splitlines()
        if line.strip()
    ]
    table = [row[0].strip("`").replace("\\|", "|") for row in _rows("Commands at a glance")]
    return lines + [part.strip().strip("`") for cell in table for part in cell.split("`, `")]


def test_every_envcheck_command_parses_and_every_make_target_exists(tmp_path: Path) -> None:
    parser = build_parser()
    (tmp_path / "old.json").write_text("{}")
    targets = set(re.findall(r"^([a-zA-Z_-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    seen = {"envcheck": 0, "make": 0}
    for command in _commands():
        words = shlex.split(re.sub(r"\[([^\]]*)\]", r"\1", command))  # optional parts are given
        if words[0] == "envcheck":
            words = [w.split("|")[0] for w in words[1:]]  # `--for prolog|health` -> its first choice
            values = {
                "PATH": str(tmp_path / "out.json"),
                "FILE": "x",
                "DIR": "x",
                "IMAGE": "img:tag",
                "old.json": str(tmp_path / "old.json"),
            }
            args = parser.parse_args([values.get(w, w) for w in words] or ["run"])
            assert args.command, command
            seen["envcheck"] += 1
        elif words[0] == "make":
            assert all(w in targets for w in words[1:] if "=" not in w), command
            seen["make"] += 1
    assert seen["envcheck"] >= 10 and seen["make"] >= 4
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    for block in re.findall(r"```bash\n(.*?)```", contributing, flags=re.S):
        for line in block.splitlines():
            words = line.split("#")[0].split()
            assert words[0] == "make" and all(w in targets for w in words[1:] if "=" not in w), line


def test_the_host_check_and_the_check_list_run_as_written() -> None:
    host = run_cli("host")
    assert host.returncode == 0, host.stderr
    assert "latest-runtime" in host.stdout  # it names which tags run here
    listing = run_cli("list")
    assert listing.returncode == 0 and "container.shm" in listing.stdout


def test_the_image_and_install_names_are_the_real_ones() -> None:
    """Every tag the README names is one the matrix gives; the image its `docker run` lines run is a tag `make image
    TARGET=runtime` (the Makefile's default row) gives; the package name is pyproject's; `make test` is CI's."""
    from envcheck.images.matrix import default_matrix_path, load_matrix

    matrix = load_matrix(default_matrix_path())
    tags = {tag for row in matrix.rows for tag in row.tags("runtime")}
    for tag in re.findall(r"envcheck:(\S+-runtime)\b", README) + re.findall(r"`(\d\S+-runtime)`", README):
        assert tag in tags, tag
    default_row = re.search(r"^ROW \?= (\S+)$", (ROOT / "Makefile").read_text(), re.M)[1]  # type: ignore[index]
    run_lines = re.findall(r"envcheck:(\S+-runtime)", _section("Quick start"))
    assert run_lines and set(run_lines) <= set(matrix.row(default_row).tags("runtime")), run_lines
    assert "make image TARGET=runtime" in README and "ghcr.io/OWNER" not in README
    assert 'name = "torch-envcheck"' in (ROOT / "pyproject.toml").read_text()
    assert "pipx install torch-envcheck" in README  # said of a release, which the release workflow makes
    assert "make test" in (ROOT / ".ci" / "run").read_text()


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"])
def test_every_link_resolves(name: str) -> None:
    text = (ROOT / name).read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", text, flags=re.M)
    }
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        if path:
            assert (ROOT / path).exists(), f"{name}: {target}"
        else:
            assert anchor in anchors, f"{name}: {target}"


def test_every_compose_command_in_the_docs_names_its_files() -> None:
    """Kept from the README's old dev-container section, which moved to docs/dev-containers.md: a bare
    `docker compose up` would pick whatever compose file lies in the current folder."""
    commands = [
        line
        for page in sorted((ROOT / "docs").rglob("*.md"))
        for line in page.read_text().splitlines()
        if "docker compose " in line and "docker compose version" not in line
    ]
    assert commands
    for line in commands:
        for command in re.findall(r"docker compose (?:.(?!docker compose))*", line):
            assert "-f compose.yaml" in command, line


def test_gitignore_covers_what_the_makefile_creates() -> None:
    ignored = (ROOT / ".gitignore").read_text().split()
    for entry in (
        ".venv/",
        ".venv-test/",
        "bench.json",
        "bench-plots/",
        "/gpu-proof/",
        "*.egg-info/",
        "/build/",
        "/site/",
    ):
        assert entry in ignored, entry
