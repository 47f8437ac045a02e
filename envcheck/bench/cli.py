"""`envcheck bench` (placeholder until the bench issue lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `bench` subcommand."""
