"""`envcheck image publish plan|stage|verify|promote|run`: the one publish path `make` and images.yml call."""

from __future__ import annotations

import argparse
import datetime
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envcheck.app.image_args import (
    MatrixRequest,
    VerifyFlags,
    matrix_arg,
    needs_subcommand,
    run_options,
    selected_matrix,
    verify_args,
)
from envcheck.app.output import write_output
from envcheck.app.requests import Handler, Request
from envcheck.core.errors import ExitCode, UsageError


@dataclass(frozen=True, kw_only=True)
class PublishState(Request):
    """--state: where a publish step's staged.json and verified.json live."""

    state: Path | None

    def state_dir(self) -> Path:
        """--state, which a step after `stage` needs."""
        if self.state is None:
            raise UsageError("give --state DIR (the folder `publish stage` wrote staged.json into)")
        return self.state


@dataclass(frozen=True, kw_only=True)
class PlanRequest(PublishState, MatrixRequest):
    """`publish plan` and `publish stage`: one row and target, the registry, the local image and the day."""

    row: str
    target: str
    registry: str
    local: str | None
    date: datetime.date | None
    platform: str | None

    def state_dir(self) -> Path:
        """--state, or publish-state/<row>-<target>."""
        return self.state if self.state is not None else Path("publish-state") / f"{self.row}-{self.target}"


@dataclass(frozen=True, kw_only=True)
class PublishVerifyRequest(PublishState, VerifyFlags):
    """`publish verify`: the staged digest, verified with the flags of any run inside an image."""


@dataclass(frozen=True, kw_only=True)
class PromoteRequest(PublishState):
    """`publish promote`: how each public tag is signed and attested."""

    sign_by: str | None
    registries_d: Path | None
    attest_key: Path | None


@dataclass(frozen=True, kw_only=True)
class PublishRunRequest(PlanRequest, PublishVerifyRequest, PromoteRequest):
    """`publish run`: stage, verify and promote in one go."""


@dataclass(frozen=True, kw_only=True)
class MergeRequest(PublishState, MatrixRequest):
    """`publish merge`: each platform's stage state (PLATFORM=DIR) joined under the row's staging tag."""

    row: str
    target: str
    registry: str
    part: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class SignatureRequest(Request):
    """`publish check-signature IMAGE`."""

    image: str
    policy: Path
    registries_d: Path | None


def register(isub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `image publish` and its steps under `envcheck image`."""
    publish = isub.add_parser("publish", help="stage, verify and promote one row/target (docs/publishing.md)")
    psub = publish.add_subparsers(dest="publish_command", parser_class=type(publish))
    steps = {
        "plan": "print what would be pushed, verified and tagged, and where; touch nothing",
        "stage": "push the local image under the staging tag only; record its digest",
        "verify": "pull the staged digest and run envcheck inside it; record the result",
        "promote": "point every public tag at the verified digest (registry-side manifest copy)",
        "run": "stage, verify and promote in one go",
    }
    handlers: dict[str, Handler[Any]] = {
        "plan": Handler(PlanRequest, cmd_plan),
        "stage": Handler(PlanRequest, cmd_stage),
        "verify": Handler(PublishVerifyRequest, cmd_verify),
        "promote": Handler(PromoteRequest, cmd_promote),
        "run": Handler(PublishRunRequest, cmd_run),
    }
    for name, text in steps.items():
        parser = psub.add_parser(name, help=text)
        parser.add_argument(
            "--state",
            type=Path,
            default=None,
            metavar="DIR",
            help="where staged.json/verified.json live (default: publish-state/<row>-<target>)",
        )
        if name in ("plan", "stage", "run"):
            matrix_arg(parser)
            parser.add_argument("--row", required=True, metavar="ID")
            parser.add_argument("--target", default="runtime")
            parser.add_argument("--registry", required=True, help="repository, e.g. ghcr.io/org/envcheck")
            parser.add_argument("--local", metavar="IMAGE", help="local image (default: REPO:<full tag>)")
            parser.add_argument("--date", type=_day, help="YYYYMMDD for the dated tag (default: today, UTC)")
            parser.add_argument(
                "--platform", help="one platform's leg of a multi-platform row: staged as staging-...-<arch>"
            )
        if name in ("verify", "run"):
            verify_args(parser)
        if name in ("promote", "run"):
            parser.add_argument("--sign-by", metavar="FPR", help="GPG-sign each tag (skopeo simple signing)")
            parser.add_argument(
                "--registries-d",
                type=Path,
                metavar="DIR",
                help="skopeo registries.d (where simple signatures are stored)",
            )
            parser.add_argument(
                "--attest-key",
                type=Path,
                metavar="PEM",
                help="sign verified.json as a DSSE envelope and attach it as sha256-<hex>.att",
            )
        parser.set_defaults(handler=handlers[name])
    merge = psub.add_parser(
        "merge",
        help="join the platforms' staged images under the staging tag as one index, checked per platform",
    )
    matrix_arg(merge)
    merge.add_argument("--row", required=True, metavar="ID")
    merge.add_argument("--target", default="runtime")
    merge.add_argument("--registry", required=True, help="repository, e.g. ghcr.io/org/envcheck")
    merge.add_argument(
        "--state", type=Path, required=True, metavar="DIR", help="where the index's staged.json goes"
    )
    merge.add_argument(
        "--part",
        action="append",
        default=[],
        metavar="PLATFORM=DIR",
        help="a platform and its stage's state dir",
    )
    merge.set_defaults(handler=Handler(MergeRequest, cmd_merge))
    sig = psub.add_parser("check-signature", help="does IMAGE pass a containers policy.json (e.g. signedBy)?")
    sig.add_argument("image", metavar="IMAGE", help="registry reference, e.g. ghcr.io/org/envcheck:TAG")
    sig.add_argument("--policy", type=Path, required=True, help="containers-policy.json")
    sig.add_argument("--registries-d", type=Path, metavar="DIR", help="where the simple signatures are read")
    sig.set_defaults(handler=Handler(SignatureRequest, cmd_check_signature))
    publish.set_defaults(handler=needs_subcommand(publish, ", ".join([*steps, "merge", "check-signature"])))


def _day(text: str) -> datetime.date:
    try:
        return datetime.datetime.strptime(text, "%Y%m%d").date()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date as YYYYMMDD") from None


def _plan(request: PlanRequest):  # type: ignore[no-untyped-def]
    from envcheck.images.publish_plan import make_plan

    return make_plan(
        selected_matrix(request),
        request.row,
        request.target,
        request.registry,
        local_image=request.local,
        repo=request.repo,
        day=request.date,
        platform=request.platform,
    )


def cmd_plan(request: PlanRequest) -> int:
    """Print the plan; no engine, registry or file is touched."""
    for line in _plan(request).describe():
        print(line)
    return ExitCode.OK


def cmd_stage(request: PlanRequest) -> int:
    """Push under the staging tag; print `repository@digest`."""
    from envcheck.images.publish import stage

    staged = stage(_plan(request), request.state_dir())
    print(f"staged {staged.ref} ({staged.repository}:{staged.staging_tag})")
    return ExitCode.OK


def cmd_verify(request: PublishVerifyRequest) -> int:
    """envcheck inside the staged digest; exit 0 only when it passed."""
    from rich.console import Console

    from envcheck.images.publish import verify
    from envcheck.images.verify import aggregate_json, aggregate_junit, image_exit_code, print_matrix

    run, doc = verify(request.state_dir(), run_options(request))
    console = Console(stderr=request.json == "-", highlight=False)
    print_matrix([run], console)
    if run.error:
        print(f"envcheck: error: {run.image}: {run.error}", file=sys.stderr)
    if request.json:
        write_output(request.json, aggregate_json([run]))
    if request.junit:
        write_output(request.junit, aggregate_junit([run]))
    console.print(f"verification of {run.image}: {doc['predicate']['result']}")  # type: ignore[index]
    return image_exit_code(run)


def cmd_promote(request: PromoteRequest) -> int:
    """Gate, then move every public tag to the verified digest; print each tag."""
    from envcheck.images.publish import promote

    for ref in promote(
        request.state_dir(),
        sign_by=request.sign_by,
        registries_d=request.registries_d,
        attest_key=request.attest_key,
    ):
        print(f"promoted {ref}")
    return ExitCode.OK


def cmd_run(request: PublishRunRequest) -> int:
    """stage, verify, promote; stops at the first step that does not succeed."""
    cmd_stage(request)
    code = cmd_verify(request)
    if code != ExitCode.OK:
        print(
            f"envcheck: error: verification did not pass; nothing promoted (state in {request.state_dir()})",
            file=sys.stderr,
        )
        return code
    return cmd_promote(request)


def cmd_merge(request: MergeRequest) -> int:
    """One index under the staging tag from every platform's staged digest; its staged.json for verify/promote."""
    from envcheck.images.publish_merge import merge, parts_of

    given = {}
    for part in request.part:
        platform, sep, folder = part.partition("=")
        if not sep or not folder:
            raise UsageError(f"--part {part!r}: give PLATFORM=DIR, e.g. linux/arm64=staged-arm64")
        given[platform] = Path(folder)
    from envcheck.images.publish_plan import make_plan

    matrix = selected_matrix(request)
    plan = make_plan(matrix, request.row, request.target, request.registry, repo=request.repo)
    staged = merge(plan, parts_of(matrix.row(request.row), given), request.state_dir())
    print(f"staged {staged.ref} ({staged.repository}:{staged.staging_tag}: {', '.join(sorted(given))})")
    return ExitCode.OK


def cmd_check_signature(request: SignatureRequest) -> int:
    """Exit 0 when the image passes the policy; one line and exit 1 when it is refused."""
    from envcheck.images.skopeo import check_policy

    check_policy(request.image, request.policy, request.registries_d)
    print(f"{request.image} is accepted by {request.policy}")
    return ExitCode.OK
