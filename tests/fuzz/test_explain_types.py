"""`explain` on a bundle with any field replaced by a value of another JSON type (or removed): a verdict, or one
UsageError (exit 2) naming the field, never a traceback. The base bundle (bundle_full.json) has every section
with at least one entry in each list (an H100's cuda section from tests/checks/fixtures, interfaces, an HCA
with a port, a library dist, an LD_LIBRARY_PATH folder, a GPU and an Xid event), so every element is reached."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envcheck.core.check import Context
from envcheck.core.errors import UsageError
from envcheck.core.run_report import RunReport
from envcheck.evidence import replay
from envcheck.evidence.bundle import validate_bundle
from envcheck.report.json_report import render_json
from envcheck.report.junit import render_junit
from tests.fuzz.strategies import HOSTILE
from tests.helpers import run_cli

BUNDLE = json.loads((Path(__file__).parent / "bundle_full.json").read_text())
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | HOSTILE,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE, inner, max_size=3),
    max_leaves=6,
)
REMOVE = object()


def paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if path:
        yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from paths(child, (*path, key))


PATHS = [p for p in paths(BUNDLE) if p[0] not in ("schema", "schema_version")]


def changed(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    bundle = copy.deepcopy(BUNDLE)
    parent = bundle
    for key in path[:-1]:
        parent = parent[key]
    if value is REMOVE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return bundle


def explain(bundle: dict[str, Any]) -> None:
    """What `envcheck explain` does with a loaded bundle, renderers included; only UsageError may escape."""
    data = validate_bundle(bundle, "b.json")
    results = replay.explain_bundle(data, Context())
    report = RunReport(results=results, facts=data.get("facts") or {})
    render_json(report)
    render_junit(report)


@pytest.fixture(autouse=True)
def no_safety_net(monkeypatch: pytest.MonkeyPatch) -> None:
    """replay's catch-all turns a verdict's crash into a UsageError; switch it off, so a field the validators
    miss fails here instead of hiding behind it."""

    class NotCaught(Exception):
        pass

    monkeypatch.setattr(replay, "UsageError", NotCaught)


@given(st.sampled_from(PATHS), st.one_of(JSON, st.just(REMOVE)))
def test_any_wrong_type_is_one_usage_error_or_a_verdict(path: tuple[Any, ...], value: Any) -> None:
    try:
        explain(changed(path, value))
    except UsageError as exc:
        assert "\n" not in exc.message and exc.message.startswith("b.json")


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (("libraries", "ld_preload"), {"a": "b"}, "libraries.ld_preload"),
        (("network", "interfaces", 0, "ipv4"), [1, 2], "interfaces[0].ipv4[0]"),
        (("cuda", "gpus"), [{"junk": 1}], "cuda.gpus"),
        (("gpu_health", "gpus"), ["junk"], "gpu_health.gpus[0]"),
        (("network", "infiniband", 0, "ports"), [{"port": "one"}], "infiniband[0].ports[0].port"),
    ],
)
def test_the_first_wrong_field_is_named(path: tuple[Any, ...], value: Any, named: str) -> None:
    with pytest.raises(UsageError) as caught:
        explain(changed(path, value))
    assert named in caught.value.message


def test_the_cli_says_one_line_and_exits_2(tmp_path: Path) -> None:
    bundle = tmp_path / "b.json"
    bundle.write_text(json.dumps(changed(("network", "interfaces", 0, "ipv4"), [1, 2])))
    done = run_cli("explain", str(bundle), timeout=60)
    assert done.returncode == 2, done.stderr
    assert (
        len(done.stderr.splitlines()) == 1
        and "ipv4[0] must be str" in done.stderr
        and "Traceback" not in done.stderr
    )
