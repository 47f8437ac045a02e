"""The JSON report of a real CPU bench validates against the published schema; broken ones do not."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from envcheck.perf.report import schema


def test_real_cpu_report_validates(cpu_report: dict[str, Any]) -> None:
    doc = cpu_report["doc"]
    jsonschema.validate(doc, schema())
    assert cpu_report["code"] == 0 and doc["schema_version"] == 1
    keys = {f["key"] for f in doc["figures"]}
    assert {"cpu_matmul.float32.n1024", "cpu_memory.copy.67108864"} <= keys
    assert all(f["value"] > 0 for f in doc["figures"])


def test_cpu_report_says_which_gpu_parts_were_skipped(cpu_report: dict[str, Any]) -> None:
    """With --only the GPU units are not selected; the full CPU run lists them (see test_cli)."""
    assert cpu_report["doc"]["device"]["cuda"] is False


@pytest.mark.parametrize("breakage", ["no_version", "bad_better", "negative_reps", "extra_field"])
def test_schema_rejects_broken_documents(cpu_report: dict[str, Any], breakage: str) -> None:
    doc = copy.deepcopy(cpu_report["doc"])
    fig = doc["figures"][0]
    if breakage == "no_version":
        del doc["schema_version"]
    elif breakage == "bad_better":
        fig["better"] = "faster"
    elif breakage == "negative_reps":
        fig["timing"]["reps"] = 0
    else:
        fig["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema())
