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


def non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return value


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def format_option(p: argparse.ArgumentParser, formats: object = Format) -> None:
    """``--format``, its words from :mod:`archguard.core.formats` (the first the default)."""
    choices = get_args(formats)
    p.add_argument("--format", choices=choices, default=choices[0])


def platform_text(text: str) -> str:
    """``--platform``'s type: x86_64 or aarch64, the error naming the fix (arm64 -> aarch64)."""
    from archguard.core.platform import parse_platform
    from archguard.errors import ConfigError

    try:
        return parse_platform(text, "--platform")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def platform_option(p: argparse.ArgumentParser | argparse._ArgumentGroup, what: str) -> None:
    """``--platform``: the machine a question is about (x86_64, aarch64)."""
    p.add_argument("--platform", type=platform_text, metavar="MACHINE", help=what)


def cuobjdump_option(p: argparse.ArgumentParser, help: str | None = None) -> None:
    p.add_argument("--cuobjdump", metavar="PATH", help=help)
