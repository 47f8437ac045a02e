"""Turn `envcheck matrix github` entries into GitHub step outputs (stdlib only; runs on any runner)."""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path

# Docker's tag grammar: https://docs.docker.com/reference/cli/docker/image/tag/
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DATED_SUFFIX = "-{{date 'YYYYMMDD'}}"


class EntryError(Exception):
    """Input that cannot become step outputs; printed as one line."""


def multiline_output(name: str, value: str) -> str:
    """A `name<<DELIM ... DELIM` block for $GITHUB_OUTPUT with an unguessable delimiter."""
    delimiter = f"ghadelimiter_{uuid.uuid4()}"
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def metadata_tags(tags_csv: str) -> str:
    """docker/metadata-action `tags:` lines for a comma-separated tag list, plus a dated copy of the first."""
    tags = [tag.strip() for tag in tags_csv.split(",") if tag.strip()]
    if not tags:
        raise EntryError("matrix entry has no tags; check docker/matrix.toml and `envcheck matrix github`")
    for tag in tags:
        if not _TAG.fullmatch(tag):
            raise EntryError(f"matrix entry tag {tag!r} is not a valid Docker tag ([A-Za-z0-9_.-], max 128)")
    lines = [f"type=raw,value={tag}" for tag in tags]
    lines.append(f"type=raw,value={tags[0]}{_DATED_SUFFIX}")
    return multiline_output("tags", "\n".join(lines))


def pick_entry(matrix_json: str) -> str:
    """Step outputs (row, target, tags, build_args) for the `latest-<target>` entry, else the first one."""
    try:
        include = json.loads(matrix_json)["include"]
        latest = [e for e in include if f"latest-{e['target']}" in e["tags"].split(",")]
        entry = (latest or include)[0]
        row, target, tags, build_args = entry["row"], entry["target"], entry["tags"], entry["build_args"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise EntryError(f"not an `envcheck matrix github` document with entries ({exc!r})") from exc
    return f"row={row}\ntarget={target}\ntags={tags}\n" + multiline_output("build_args", build_args)


def main(argv: list[str]) -> int:
    """`metadata-tags TAGS_CSV` or `pick MATRIX_JSON_FILE`; writes step outputs to stdout."""
    try:
        if len(argv) == 2 and argv[0] == "metadata-tags":
            sys.stdout.write(metadata_tags(argv[1]))
        elif len(argv) == 2 and argv[0] == "pick":
            sys.stdout.write(pick_entry(Path(argv[1]).read_text()))
        else:
            raise EntryError("usage: matrix_entry.py metadata-tags TAGS_CSV | pick MATRIX_JSON_FILE")
    except (EntryError, OSError) as exc:
        print(f"matrix_entry.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
