"""How the compile checks set Inductor's compile threads (envcheck.checks.torch_compile.settings): the rule per host
size and Inductor version, on stand-in configs (no compile), and the real config set as the rule says."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from envcheck.checks.torch_compile import settings


@pytest.mark.parametrize(
    ("cores", "has_mode", "expected"),
    [
        (2, True, {"compile_threads": 2, "compile_worker_mode": "thread"}),  # no torch import added
        (2, False, {"compile_threads": 1}),  # a second thread would start Inductor's process pool there
        (7, True, {"compile_threads": 2, "compile_worker_mode": "thread"}),
        (8, True, {"compile_threads": 4}),  # cores to spare: Inductor's own worker processes
        (64, False, {"compile_threads": 8}),
    ],
)
def test_thread_settings_by_host_and_inductor(
    monkeypatch: pytest.MonkeyPatch, cores: int, has_mode: bool, expected: dict[str, object]
) -> None:
    monkeypatch.setattr(settings, "_CORES", cores)
    config = SimpleNamespace(compile_worker_mode="process") if has_mode else SimpleNamespace()
    assert settings.thread_settings(config) == expected


def test_apply_settings_sets_what_it_returns() -> None:
    from torch._inductor import config

    saved = config.save_config()
    try:
        applied = settings.apply_settings(probe_isa=False)
        assert applied["cpp_cache_precompile_headers"] is True
        assert applied == settings.COMPILE_SETTINGS | settings.thread_settings(config)
        assert {key: getattr(config, key) for key in applied} == applied
    finally:
        config.load_config(saved)
