"""Gathering the inputs of one resolution: policy, package, toolkit, torch, environment.

Shared by the command line and the setuptools hook. Hypothetical inputs come from the
bundled tables (``--cuda``, ``--torch``) or the command line (``--torch-arches``); the rest
is detected live (``archguard.detect``) only when asked for, so nothing here imports torch
unless a live torch is needed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from archguard.arch import ArchEntry, parse_targets
from archguard.config import (
    ENV_POLICY,
    Project,
    env_arch_list,
    load_project,
    unknown_env_warnings,
)
from archguard.errors import CudaMismatch
from archguard.policy import Policy, load_policy
from archguard.resolve import Resolution, resolve
from archguard.toolkit import (
    Toolkit,
    bundled_rows,
    bundled_toolkit,
    cuda_text,
    parse_cuda_version,
)
from archguard.torchbuild import TorchBuild, bundled_torch, parse_torch_version


@dataclass(frozen=True)
class Query:
    """What the caller asked about. ``None`` means "detect the real one"."""

    project_dir: Path = Path()
    cuda: str | None = None
    torch: str | None = None
    torch_arches: str | None = None
    policy: str | None = None


@dataclass
class Gathered:
    policy: Policy
    project: Project
    toolkit: Toolkit
    torch: TorchBuild
    override: tuple[tuple[ArchEntry, ...], str] | None
    shown: list[tuple[str, str]] = field(default_factory=list)  # inputs, for explain
    warnings: list[str] = field(default_factory=list)

    def resolve(self) -> Resolution:
        return resolve(self.policy, self.toolkit, self.torch, self.project.config, self.override)


def choose_policy(query: Query, project: Project, environ: Mapping[str, str]) -> Policy:
    """--policy, then ARCHGUARD_POLICY, then [tool.archguard] policy, then the bundled one."""
    if query.policy:
        return load_policy(query.policy, "--policy")
    if environ.get(ENV_POLICY):
        return load_policy(environ[ENV_POLICY], ENV_POLICY)
    if project.config is not None and project.config.policy is not None:
        return load_policy(project.config.policy, f"{project.config.source} policy")
    return load_policy(None)


def compare_with_bundled(toolkit: Toolkit) -> str | None:
    """The live toolkit and the bundled table must agree where both exist."""
    row = bundled_rows().get(toolkit.version)
    if row is None:
        return None
    if row.toolkit.sass == toolkit.sass:
        return None
    only_live = sorted(a.sm for a in toolkit.sass - row.toolkit.sass)
    only_table = sorted(a.sm for a in row.toolkit.sass - toolkit.sass)
    return (
        f"the live nvcc {toolkit.text} and archguard's bundled table disagree (only live: "
        f"{' '.join(only_live) or '-'}; only in the table: {' '.join(only_table) or '-'}); "
        "the live nvcc is used. Regenerate the table with scripts/probe_toolkits.py."
    )


def gather(query: Query, environ: Mapping[str, str] | None = None) -> Gathered:
    env = os.environ if environ is None else environ
    project = load_project(query.project_dir)
    warnings = [*project.warnings(), *unknown_env_warnings(env)]
    policy = choose_policy(query, project, env)

    if query.cuda:
        toolkit = bundled_toolkit(parse_cuda_version(query.cuda, "--cuda"))
    else:
        from archguard.detect.nvcc import detect_toolkit  # noqa: PLC0415

        toolkit = detect_toolkit(env)
        disagreement = compare_with_bundled(toolkit)
        if disagreement:
            warnings.append(disagreement)

    if query.torch_arches:
        version = parse_torch_version(query.torch) if query.torch else None
        targets = parse_targets(query.torch_arches, "--torch-arches")
        torch = TorchBuild(version, None, targets, "--torch-arches")
    elif query.torch:
        torch = bundled_torch(toolkit.version, parse_torch_version(query.torch))
    else:
        from archguard.detect.torch import detect_torch  # noqa: PLC0415

        torch = detect_torch()

    if torch.cuda is not None and torch.cuda != toolkit.version:
        if torch.cuda[0] != toolkit.version[0]:
            raise CudaMismatch(
                f"{torch.label} was built for CUDA {cuda_text(torch.cuda)} but the nvcc that "
                f"would compile is CUDA {toolkit.text} ({toolkit.source}). Extensions built "
                "across CUDA majors fail to load. Point CUDA_HOME at a CUDA "
                f"{torch.cuda[0]}.x toolkit, or install the torch built for CUDA {toolkit.text}."
            )
        warnings.append(
            f"{torch.label} was built for CUDA {cuda_text(torch.cuda)}, nvcc is CUDA "
            f"{toolkit.text}: same major, so it works; the policy row is the toolkit's "
            f"({toolkit.tag})."
        )

    override = env_arch_list(env)
    shown = [
        ("policy", policy.source),
        ("toolkit", f"CUDA {toolkit.text} (row {toolkit.tag}): {toolkit.source}"),
        ("torch", f"{torch.label}: {torch.targets} ({torch.source})"),
        (
            "package",
            project.config.source
            if project.config
            else f"no [tool.archguard] in {project.pyproject}"
            if project.pyproject
            else f"no pyproject.toml in {project.root}",
        ),
    ]
    if override is not None:
        shown.append(
            (
                "override",
                f"{override[1]}={env[override[1]]!r} (wins over the package "
                "and the policy, still clamped)",
            )
        )
    return Gathered(policy, project, toolkit, torch, override, shown, warnings)
