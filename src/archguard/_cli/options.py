"""Small pieces every argument builder of ``archguard``'s command line uses."""

from __future__ import annotations

import argparse
from typing import TypeAlias, get_args

from archguard.core.formats import Format


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def format_option(p: argparse.ArgumentParser, formats: object = Format) -> None:
    """``--format``, its words from :mod:`archguard.core.formats` (the first the default)."""
    choices = get_args(formats)
    p.add_argument("--format", choices=choices, default=choices[0])


def cuobjdump_option(p: argparse.ArgumentParser, help: str | None = None) -> None:
    p.add_argument("--cuobjdump", metavar="PATH", help=help)
