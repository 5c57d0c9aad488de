"""The output formats of the commands, as types: one vocabulary, owned here (the words the
CLI's ``--format`` choices spell). Every command reads ``text`` or ``json``; some add their
own."""

from __future__ import annotations

from typing import Literal

Format = Literal["text", "json"]  # verify, lint, derive, probe-torch
ListFormat = Literal[Format, "torch", "cmake", "gencode"]  # archguard list
EnvFormat = Literal["sh", "github", "json"]  # archguard env: shell lines, $GITHUB_ENV lines
MatrixFormat = Literal[Format, "markdown", "html", "github"]  # archguard matrix
PlanFormat = Literal[Format, "github"]  # archguard farm plan: + a GitHub Actions matrix
