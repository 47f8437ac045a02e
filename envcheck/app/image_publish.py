"""`envcheck image publish plan|stage|verify|promote|run`: the one publish path `make` and images.yml call."""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from envcheck.app.image_args import matrix_arg, needs_subcommand, run_options, selected_matrix, verify_args
from envcheck.app.output import write_output
from envcheck.core.errors import ExitCode, UsageError


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
    handlers = {
        "plan": cmd_plan,
        "stage": cmd_stage,
        "verify": cmd_verify,
        "promote": cmd_promote,
        "run": cmd_run,
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
    merge.set_defaults(handler=cmd_merge, local=None, date=None)
    sig = psub.add_parser("check-signature", help="does IMAGE pass a containers policy.json (e.g. signedBy)?")
    sig.add_argument("image", metavar="IMAGE", help="registry reference, e.g. ghcr.io/org/envcheck:TAG")
    sig.add_argument("--policy", type=Path, required=True, help="containers-policy.json")
    sig.add_argument("--registries-d", type=Path, metavar="DIR", help="where the simple signatures are read")
    sig.set_defaults(handler=cmd_check_signature)
    publish.set_defaults(handler=needs_subcommand(publish, ", ".join([*steps, "merge", "check-signature"])))


def _day(text: str) -> datetime.date:
    try:
        return datetime.datetime.strptime(text, "%Y%m%d").date()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date as YYYYMMDD") from None


def _state(args: argparse.Namespace) -> Path:
    if args.state is not None:
        return Path(args.state)
    if getattr(args, "row", None):
        return Path("publish-state") / f"{args.row}-{args.target}"
    raise UsageError("give --state DIR (the folder `publish stage` wrote staged.json into)")


def _plan(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from envcheck.images.publish_plan import make_plan

    return make_plan(
        selected_matrix(args),
        args.row,
        args.target,
        args.registry,
        local_image=args.local,
        repo=args.repo,
        day=args.date,
        platform=getattr(args, "platform", None),
    )


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the plan; no engine, registry or file is touched."""
    for line in _plan(args).describe():
        print(line)
    return ExitCode.OK


def cmd_stage(args: argparse.Namespace) -> int:
    """Push under the staging tag; print `repository@digest`."""
    from envcheck.images.publish import stage

    staged = stage(_plan(args), _state(args))
    print(f"staged {staged.ref} ({staged.repository}:{staged.staging_tag})")
    return ExitCode.OK


def cmd_verify(args: argparse.Namespace) -> int:
    """envcheck inside the staged digest; exit 0 only when it passed."""
    from rich.console import Console

    from envcheck.images.publish import verify
    from envcheck.images.verify import aggregate_json, aggregate_junit, image_exit_code, print_matrix

    run, doc = verify(_state(args), run_options(args))
    console = Console(stderr=args.json == "-", highlight=False)
    print_matrix([run], console)
    if run.error:
        print(f"envcheck: error: {run.image}: {run.error}", file=sys.stderr)
    if args.json:
        write_output(args.json, aggregate_json([run]))
    if args.junit:
        write_output(args.junit, aggregate_junit([run]))
    console.print(f"verification of {run.image}: {doc['predicate']['result']}")  # type: ignore[index]
    return image_exit_code(run)


def cmd_promote(args: argparse.Namespace) -> int:
    """Gate, then move every public tag to the verified digest; print each tag."""
    from envcheck.images.publish import promote

    for ref in promote(
        _state(args), sign_by=args.sign_by, registries_d=args.registries_d, attest_key=args.attest_key
    ):
        print(f"promoted {ref}")
    return ExitCode.OK


def cmd_run(args: argparse.Namespace) -> int:
    """stage, verify, promote; stops at the first step that does not succeed."""
    cmd_stage(args)
    code = cmd_verify(args)
    if code != ExitCode.OK:
        print(
            f"envcheck: error: verification did not pass; nothing promoted (state in {_state(args)})",
            file=sys.stderr,
        )
        return code
    return cmd_promote(args)


def cmd_merge(args: argparse.Namespace) -> int:
    """One index under the staging tag from every platform's staged digest; its staged.json for verify/promote."""
    from envcheck.images.publish_merge import merge, parts_of

    given = {}
    for part in args.part:
        platform, sep, folder = part.partition("=")
        if not sep or not folder:
            raise UsageError(f"--part {part!r}: give PLATFORM=DIR, e.g. linux/arm64=staged-arm64")
        given[platform] = Path(folder)
    plan = _plan(args)
    staged = merge(plan, parts_of(selected_matrix(args).row(args.row), given), args.state)
    print(f"staged {staged.ref} ({staged.repository}:{staged.staging_tag}: {', '.join(sorted(given))})")
    return ExitCode.OK


def cmd_check_signature(args: argparse.Namespace) -> int:
    """Exit 0 when the image passes the policy; one line and exit 1 when it is refused."""
    from envcheck.images.skopeo import check_policy

    check_policy(args.image, args.policy, args.registries_d)
    print(f"{args.image} is accepted by {args.policy}")
    return ExitCode.OK
