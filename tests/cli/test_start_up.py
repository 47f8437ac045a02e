"""What a command imports before it does its work: building the parser (every command's flags, `--version`, `--help`)
imports no engine, no check, no cluster policy and no rich; each handler imports what it runs. A Slurm prolog, a
`--help` and each CLI call of the suite pay for what they use, not for every command (docs/architecture.md: app/).

Real: the entry point as the `envcheck` script runs it (envcheck.__main__.main), in a fresh interpreter; the modules
it imported are read from sys.modules at exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT

# What only a handler may import: the engine, the check registry, the cluster policies, the table renderer,
# packaging's requirement parser (logging, subprocess, sysconfig) and torch.
HEAVY = (
    "envcheck.checks",
    "envcheck.core.runner",
    "envcheck.core.isolation.server_handle",
    "envcheck.cluster.policy",
    "envcheck.cluster.severity",
    "envcheck.numerics",
    "rich",
    "packaging.requirements",
    "torch",
)
PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('MODULES', *sorted(sys.modules), file=sys.stderr))\n"
    "sys.argv = ['envcheck', *sys.argv[1:]]\n"
    "from envcheck.__main__ import main\n"
    "sys.exit(main())\n"
)


def imported(*argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    line = [x for x in done.stderr.splitlines() if x.startswith("MODULES ")]
    assert line, done.stderr[-2000:]
    return set(line[-1].split()[1:])


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize(
    "argv",
    [
        ("--version",),
        ("--help",),
        ("run", "--help"),
        ("image", "--help"),
        ("fleet", "--help"),
        ("burn", "--help"),
        ("bench", "--help"),
        ("matrix", "pins"),
    ],
)
def test_the_parser_and_light_commands_import_no_engine_check_or_policy(argv: tuple[str, ...]) -> None:
    assert heavy(imported(*argv)) == []


def test_a_command_that_needs_the_checks_still_imports_them() -> None:
    """The twin: `envcheck list` prints the registry in a table, so the probe sees both (it can fail)."""
    found = heavy(imported("list"))
    assert "envcheck.checks" in found and "rich" in found, found


# The torch path's check domains: a node-path run (a Slurm prolog before every job) imports none of them.
TORCH_PATH_DOMAINS = (
    "envcheck.numerics",
    "envcheck.checks.torch_compile",
    "envcheck.checks.libraries",
    "envcheck.checks.linalg",
    "envcheck.checks.vision",
    "envcheck.checks.dist",
    "envcheck.checks.check_registry",
    "torch",
)


def torch_path(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == d or m.startswith(d + ".") for d in TORCH_PATH_DOMAINS))


def test_the_node_path_imports_its_own_checks_and_no_torch_path_check() -> None:
    """`--for prolog` on this GPU-less host: the node checks run (they skip here) from the node path's registry."""
    found = imported("run", "--for", "prolog")
    assert torch_path(found) == [], torch_path(found)
    assert {"envcheck.checks.gpu_health", "envcheck.checks.dcgm", "envcheck.checks.node"} <= found


def test_a_torch_check_named_on_the_node_path_loads_every_check_to_name_it() -> None:
    """The twin: a name outside the node path's checks (here a torch-path one, skipped) needs the whole registry."""
    assert "envcheck.checks.check_registry" in imported("run", "--for", "prolog", "--skip", "linalg.svd")


def test_the_node_path_registry_holds_exactly_the_registrys_node_checks() -> None:
    from envcheck.checks.check_registry import registry
    from envcheck.checks.node_path_registry import node_path_checks

    every = registry()
    node = node_path_checks()
    assert list(node) == [
        s.name for s in sorted(every.values(), key=lambda s: s.node_order or 0) if s.node_order is not None
    ]
    assert all(node[name] is every[name] for name in node)
