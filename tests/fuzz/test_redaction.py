"""Token-shaped values are redacted wherever they appear (envcheck.core.redact): generated tokens of each known
kind inside paths, through the env map, the bundle, every renderer; the variable's name and the token's kind stay."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from envcheck.core.redact import REDACTED, redact_deep, redact_env, redact_value
from envcheck.core.result import failed
from envcheck.core.run_report import RunReport
from envcheck.core.text import visible
from envcheck.report.json_report import render_json
from envcheck.report.junit import render_junit

ALNUM = st.text(
    st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
    min_size=36,
    max_size=40,
)
# The shapes documented by each issuer (GitHub's "About authentication" token prefixes, HF's hf_, Slack's xox?-,
# AWS access key ids AKIA + 16 upper-case/digits, GitLab glpat-).
TOKENS = st.one_of(
    st.tuples(
        st.sampled_from(["ghp_", "gho_", "ghs_", "github_pat_", "hf_", "xoxb-", "xoxp-", "sk-", "glpat-"]),
        ALNUM,
    ).map("".join),
    st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), min_size=16, max_size=16).map(
        "AKIA".__add__
    ),
)
SAFE = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789._-"), max_size=20)


@settings(max_examples=40)
@given(TOKENS, SAFE, SAFE)
def test_a_token_in_a_path_is_redacted_everywhere(token: str, before: str, after: str) -> None:
    path = f"/opt/{before}/{token}/lib{after}.so"
    env = redact_env({"LD_LIBRARY_PATH": path, "LD_PRELOAD": f"{path}:/x.so"}, ("LD_",))
    assert set(env) == {"LD_LIBRARY_PATH", "LD_PRELOAD"}  # which variable it came from stays
    report = RunReport(
        results=[failed(f"cannot load {path}", measured={"path": path}).named("libs.cuda", 0.1)],
        facts={"env": env},
    )
    for text in (
        json.dumps(env),
        json.dumps(redact_deep({"p": path})),
        render_json(report),
        render_junit(report),
        visible(path),
    ):
        assert token not in text
        assert "redacted" in text


@given(SAFE)
def test_ordinary_paths_and_versions_stay(word: str) -> None:
    for text in (
        f"/usr/local/cuda-12.8/lib64/{word}",
        "torch-2.13.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
        "sha256:" + "0123456789abcdef" * 4,
        "/nix/store/0123456789abcdefghijklmnopqrstuv-python3",
    ):
        assert redact_value(text) == text


def test_high_entropy_component_is_redacted() -> None:
    assert redact_value("/home/u/aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI/lib") == f"/home/u/{REDACTED}/lib"
