"""`envcheck image ...` and `envcheck matrix ...` (placeholder until the images issue lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `image` and `matrix` subcommands."""
