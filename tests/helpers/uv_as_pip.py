"""Run uv with the package sources pip is configured with: `python tests/helpers/uv_as_pip.py UV ARGS...`.

The Makefile installs the test venv with uv (its CPU torch and the rest in a third of pip's time), but uv reads no
pip.conf and no PIP_* variable, and the test venv's CPU torch comes from what pip is configured with (an index or
find-links of CPU wheels). `pip config list` gives pip's merged settings (its files in their order, then PIP_*); the
`install` section's value wins over `global`'s and a variable over both, as in pip. What is carried over: the index,
the extra indexes, find-links, --no-index, trusted hosts, constraints, pre-releases, binary-only choices, the
network timeout, the CA bundle and the proxy; and pip's choice of the best version across all of them (uv's default
takes the first index that has a package). A source setting uv is not given here is named on stderr. Stdlib only: it
runs before anything is installed.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

# pip's setting -> uv's flag (one per value; pip separates a list's values with whitespace)
FLAGS = {
    "index-url": "--default-index",
    "extra-index-url": "--index",
    "find-links": "--find-links",
    "trusted-host": "--allow-insecure-host",
    "constraint": "--constraint",
    "only-binary": "--only-binary",
    "no-binary": "--no-binary",
}
SECTIONS = ("global", "install", ":env:")  # lowest precedence first
TRUE = ("y", "yes", "t", "true", "on", "1")  # pip's strtobool
ALIASES = {
    "default-timeout": "timeout"
}  # one pip option under two names (PIP_DEFAULT_TIMEOUT, `timeout` in a file)
# settings that change where or what pip installs and that uv is not given: named, so a difference is not silent
NOT_CARRIED = (
    "client-cert",
    "prefer-binary",
    "use-pep517",
    "no-build-isolation",
    "platform",
    "implementation",
)


def pip_settings(listing: str) -> dict[str, str]:
    """`pip config list` output (`section.key='value'` lines) -> key: the value pip's install command would use."""
    found: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        name, sep, raw = line.partition("=")
        section, _, key = name.rpartition(".")
        if not sep or section not in SECTIONS:
            continue
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        key = ALIASES.get(key, key)
        rank = SECTIONS.index(section)
        if key not in found or rank >= found[key][0]:
            found[key] = (rank, str(value))
    return {key: value for key, (_, value) in found.items()}


def uv_flags(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """uv's flags and environment for pip's settings."""
    flags = ["--index-strategy", "unsafe-best-match"]
    for key, flag in FLAGS.items():
        for value in settings.get(key, "").split():
            flags += [flag, value]
    if settings.get("no-index", "").lower() in TRUE:
        flags.append("--no-index")
    if settings.get("pre", "").lower() in TRUE:
        flags += ["--prerelease", "allow"]
    env = {}
    if settings.get("cert"):
        env["SSL_CERT_FILE"] = settings["cert"]
    if settings.get("proxy"):
        env["HTTPS_PROXY"] = env["HTTP_PROXY"] = settings["proxy"]
    if settings.get("timeout"):
        env["UV_HTTP_TIMEOUT"] = settings["timeout"]
    return flags, env


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1:3] != ["pip", "install"]:
        print("usage: python tests/helpers/uv_as_pip.py UV pip install ARGS...", file=sys.stderr)
        return 2
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if listed.returncode != 0:
        said = " ".join(listed.stderr.split())[-300:]
        print(
            f"`pip config list` failed ({said}): install with pip alone: make TEST_INSTALLER=pip",
            file=sys.stderr,
        )
        return 1
    settings = pip_settings(listed.stdout)
    for key in NOT_CARRIED:
        if key in settings:
            print(f"uv_as_pip: pip's {key}={settings[key]!r} is not carried over to uv", file=sys.stderr)
    flags, env = uv_flags(settings)
    command = [argv[0], "pip", "install", *flags, *argv[3:]]
    os.execvpe(command[0], command, {**os.environ, **env})
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
