"""Assembling the inputs of a resolution: policy, package, environment, toolkit, torch.

The one way in: every command (``explain``, ``list``, ``matrix``, ``verify``,
``check-policy``) and the setuptools hook get their inputs here, so a setting means the same
everywhere. :func:`gather_settings` reads what does not depend on the machine (the policy,
the package's ``[tool.archguard]`` and the ``ARCHGUARD_*`` overrides); :func:`gather` adds
the toolkit and the torch, hypothetical (``--cuda``, ``--torch``: the bundled tables;
``--torch-arches``: the command line) or detected live (``archguard.detect``, imported only
when a live input is needed, so nothing here imports torch otherwise).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from archguard.core.arch import ArchEntry, Targets, parse_targets
from archguard.core.bundled import bundled_path
from archguard.core.cuda import CudaVersion
from archguard.core.modes import DEFAULT_ARCH_SPECIFIC
from archguard.core.plain_yaml import load_plain_yaml, read_yaml_text
from archguard.core.platform import Platform, host_platform, platform_or_host
from archguard.core.policy import Policy, load_policy
from archguard.core.resolve import Resolution, resolve
from archguard.core.rows import RowChoice, choose_row
from archguard.core.toolkit import (
    Toolkit,
    ToolkitRow,
    bundled_rows,
    bundled_toolkit,
    compare_with_bundled,
    known_arches,
    parse_rows,
)
from archguard.core.torchbuild import (
    BundledBuild,
    TorchBuild,
    bundled_builds,
    bundled_torch,
    parse_builds,
    parse_torch_version,
)
from archguard.errors import ConfigError, CudaMismatch, TorchNotCuda, TorchNotFound, UnknownToolkit
from archguard.nvcc.flags import arch_specific_mentions, target_mentions
from archguard.settings.config import (
    ENV_CONFIG,
    ENV_POLICY,
    Project,
    env_arch_list,
    load_config_file,
    load_project,
    unknown_env_warnings,
)
from archguard.settings.model import PackageConfig

Override = tuple[tuple[ArchEntry, ...], str]  # (entries, the variable that gave them)


@dataclass(frozen=True)
class Query:
    """What the caller asked about. ``None`` means "detect the real one" (for the toolkit
    and torch) or "no package" (for ``project_dir``)."""

    project_dir: Path | None = Path()
    cuda: str | None = None
    torch: str | None = None
    torch_arches: str | None = None
    policy: str | None = None
    policy_origin: str = "--policy"  # how ``policy`` was given, for messages ("" = plainly)
    platform: str | None = None  # --platform; None: the host's (the installed torch's)


BUILD_FILES = ("setup.py", "CMakeLists.txt")


def build_time_notes(project: Project, package: PackageConfig | None) -> tuple[str, ...]:
    """What explain can say before a build about per-extension targets: the arch-specific
    targets the project's build files mention, and what the build will do with them."""
    if not any((project.root / f).is_file() for f in BUILD_FILES):
        return ()  # no build file here: nothing is built from this directory
    mode = package.hardcoded_arch_specific if package else DEFAULT_ARCH_SPECIFIC
    mentions = []
    named: list[tuple[tuple[int, int], str]] = []
    for name in BUILD_FILES:
        path = project.root / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        except OSError:
            continue
        mentions += [f"{name}:{line} {target}" for line, target in arch_specific_mentions(text)]
        named += [(a.cc, f"{name}:{line} {a.sm}") for line, a in target_mentions(text)]
    lowest = min(named)[1] if named else ""
    doing = {
        "keep": "keeps each that passes the clamps for its extension, in place of its plain "
        "twin, and logs that extension's coverage",
        "drop": "replaces them by the effective list, naming each drop",
        "error": "stops the build",
    }[mode]
    lines = [
        "Per-extension nvcc flags are decided at build time: archguard reads each extension's "
        "hard-coded arch flags when build_ext runs. With the policy's list, nothing below the "
        "lowest target an extension hard-codes is added (its floor), and an extension that "
        "hard-codes only sm_XYa/sm_XYf targets gets exactly those (an explicit arch_list, "
        "ARCHGUARD_CONFIG or ARCHGUARD_ARCH_LIST wins over both). A hard-coded sm_XYa/sm_XYf "
        f"target is a kernel requirement; with hardcoded_arch_specific = '{mode}' the build "
        f"{doing}."
    ]
    if lowest:
        lines.append(
            "Lowest target the build files name: "
            + lowest
            + " (the floor of an extension that hard-codes it)"
        )
    if mentions:
        lines.append("Arch-specific targets in the build files: " + ", ".join(mentions))
    return tuple(lines)


@dataclass(frozen=True)
class Settings:
    """The machine-independent inputs: the policy, the package and the overrides."""

    policy: Policy
    project: Project
    package: PackageConfig | None  # the project's table, or ARCHGUARD_CONFIG's instead
    override: Override | None
    shown: tuple[tuple[str, str], ...]  # (input, where it came from), for explain and logs
    warnings: tuple[str, ...]
    build_time: tuple[str, ...] = ()  # per-extension facts known before a build

    def resolve(self, toolkit: Toolkit, torch: TorchBuild) -> Resolution:
        return resolve(self.policy, toolkit, torch, self.package, self.override)


@dataclass
class Gathered:
    """Settings plus a toolkit and a torch: everything one resolution needs."""

    settings: Settings
    toolkit: Toolkit
    torch: TorchBuild
    shown: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def policy(self) -> Policy:
        return self.settings.policy

    @property
    def project(self) -> Project:
        return self.settings.project

    def resolve(self) -> Resolution:
        return self.settings.resolve(self.toolkit, self.torch)


def choose_policy(
    query: Query, package: PackageConfig | None, environ: Mapping[str, str]
) -> Policy:
    """--policy, then ARCHGUARD_POLICY, then [tool.archguard] policy, then the bundled one."""
    if query.policy:
        return load_policy(query.policy, query.policy_origin)
    if environ.get(ENV_POLICY):
        return load_policy(environ[ENV_POLICY], ENV_POLICY)
    if package is not None and package.policy is not None:
        return load_policy(package.policy, f"{package.source} policy")
    return load_policy(None)


def _own_table(project: Project) -> str:
    if project.config:
        return project.config.source
    if project.pyproject:
        return f"no [tool.archguard] in {project.pyproject}"
    return f"no pyproject.toml in {project.root}"


def choose_package(
    project: Project, environ: Mapping[str, str]
) -> tuple[PackageConfig | None, str]:
    """The package's ``[tool.archguard]``, or the farm's ``ARCHGUARD_CONFIG`` in its place;
    with the line that says which (both, when the farm's replaces the package's)."""
    path = environ.get(ENV_CONFIG)
    if not path:
        return project.config, _own_table(project)
    farm = load_config_file(path)
    return farm, f"{farm.source}, in place of the package's own ({_own_table(project)})"


def gather_settings(query: Query, environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    project = Project.none(Path()) if query.project_dir is None else load_project(query.project_dir)
    warnings = [*project.warnings(), *unknown_env_warnings(env)]
    package, package_line = choose_package(project, env)
    policy = choose_policy(query, package, env)
    override = env_arch_list(env)
    shown = [("policy", policy.source), ("package", package_line)]
    if override is not None:
        shown.append(
            (
                "override",
                f"{override[1]}={env[override[1]]!r} (wins over the package "
                "and the policy, still clamped)",
            )
        )
    return Settings(
        policy,
        project,
        package,
        override,
        tuple(shown),
        tuple(warnings),
        build_time_notes(project, package) if query.project_dir is not None else (),
    )


def cuda_agreement(toolkit: Toolkit, torch: TorchBuild) -> str | None:
    """None when torch's CUDA is the toolkit's; a warning for a minor mismatch;
    :class:`CudaMismatch` across majors."""
    if torch.cuda is None or torch.cuda == toolkit.version:
        return None
    if torch.cuda.major != toolkit.version.major:
        raise CudaMismatch(
            f"{torch.label} was built for CUDA {torch.cuda.text} but the nvcc that "
            f"would compile is CUDA {toolkit.text} ({toolkit.source}). Extensions built "
            "across CUDA majors fail to load. Point CUDA_HOME at a CUDA "
            f"{torch.cuda.major}.x toolkit, or install the torch built for CUDA "
            f"{toolkit.text}."
        )
    return (
        f"{torch.label} was built for CUDA {torch.cuda.text}, nvcc is CUDA "
        f"{toolkit.text}: same major, so it works; the policy row is the torch build's "
        f"({torch.cuda.tag}), clamped by nvcc {toolkit.text}'s facts."
    )


def gather(query: Query, environ: Mapping[str, str] | None = None) -> Gathered:
    env = os.environ if environ is None else environ
    settings = gather_settings(query, env)
    warnings = list(settings.warnings)

    if query.cuda:
        toolkit = bundled_toolkit(CudaVersion.parse(query.cuda, "--cuda"))
    else:
        from archguard.detect.nvcc import detect_toolkit

        toolkit = detect_toolkit(env)
        disagreement = compare_with_bundled(toolkit)
        if disagreement:
            warnings.append(disagreement)

    platform = platform_or_host(query.platform)
    if query.torch_arches:
        version = parse_torch_version(query.torch) if query.torch else None
        targets = parse_targets(query.torch_arches, "--torch-arches", known=known_arches())
        torch = TorchBuild(version, None, targets, "--torch-arches", platform)
    elif query.torch:
        torch = bundled_torch(toolkit.version, parse_torch_version(query.torch), platform)
    else:
        from archguard.detect.torch import detect_torch

        torch = detect_torch()
        if torch.platform != platform:
            raise ConfigError(
                f"--platform {platform}: the installed {torch.label} is built for "
                f"{torch.platform}, so it says nothing about {platform}. Ask about a "
                f"{platform} torch with --cuda X.Y --torch X.Y (the torch table's "
                f"{platform} rows) or --torch-arches."
            )

    mismatch = cuda_agreement(toolkit, torch)
    if mismatch:
        warnings.append(mismatch)

    policy_line, package_line, *overrides = settings.shown
    shown = [
        policy_line,
        ("platform", platform_line(torch.platform, query.platform)),
        ("toolkit", f"CUDA {toolkit.text}: {toolkit.source}"),
        ("torch", f"{torch.label}: {torch.targets} ({torch.source})"),
        package_line,
        *overrides,
    ]
    return Gathered(settings, toolkit, torch, shown, warnings)


def platform_line(platform: Platform, asked: str | None) -> str:
    """Where the platform came from, for explain and the build log."""
    if asked:
        return f"{platform} (--platform)"
    host = host_platform()
    if host is None:
        return f"{platform} (this machine, {os.uname().machine}, is none torch ships CUDA for)"
    return f"{platform} (this machine)"


def installed_row(environ: Mapping[str, str] | None = None) -> tuple[Toolkit, RowChoice]:
    """The nvcc that would compile (probed live where archguard's table lacks its CUDA) and
    the row a build with it takes: the installed torch's CUDA index where a CUDA build of
    torch is installed (the row rule), else the toolkit's own."""
    from archguard.detect.nvcc import detect_toolkit
    from archguard.detect.torch import detect_torch

    toolkit = detect_toolkit(os.environ if environ is None else environ)
    try:
        torch = detect_torch()
    except (TorchNotFound, TorchNotCuda):  # no CUDA torch: the toolkit's own index
        torch = TorchBuild(None, None, Targets.from_entries(()), "no CUDA build of torch")
    cuda_agreement(toolkit, torch)
    return toolkit, choose_row(toolkit, torch)


def _table(path: str, option: str) -> object:
    source = f"{path} (from {option})"
    text = read_yaml_text(Path(path), source, ConfigError, "table")
    return load_plain_yaml(text, source, ConfigError)


def toolkit_table(toolkits: str | None = None) -> dict[CudaVersion, ToolkitRow]:
    """Every toolkit row: bundled, or a farm's toolkits.yml (``--toolkits``)."""
    if toolkits is None:
        return bundled_rows()
    try:
        return parse_rows(_table(toolkits, "--toolkits"), f"{toolkits} (from --toolkits)")
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{toolkits} (from --toolkits) is not a toolkits.yml table ({exc}); see "
            f"archguard's bundled toolkits.yml ({bundled_path('toolkits.yml')}) for the form."
        ) from None


def toolkit_facts(cuda: CudaVersion, toolkits: str | None = None) -> Toolkit:
    """The toolkit row for ``cuda``: bundled, or from a farm's toolkits.yml (``--toolkits``)."""
    if toolkits is None:
        return bundled_toolkit(cuda)
    rows = toolkit_table(toolkits)
    if cuda not in rows:
        known = ", ".join(v.text for v in sorted(rows)) or "none"
        raise UnknownToolkit(
            f"{toolkits} (from --toolkits) has no CUDA {cuda.text} (it has {known})."
        )
    return rows[cuda].toolkit


def torch_facts(builds: str | None = None) -> tuple[BundledBuild, ...]:
    """PyTorch's builds: the bundled torch_builds.yml, or a farm's (``--torch-builds``)."""
    if builds is None:
        return bundled_builds()
    source = f"{builds} (from --torch-builds)"
    try:
        return parse_builds(_table(builds, "--torch-builds"), source, source)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(
            f"{source} is not a torch_builds.yml table ({exc}); see archguard's bundled "
            f"torch_builds.yml ({bundled_path('torch_builds.yml')}) for the form."
        ) from None
