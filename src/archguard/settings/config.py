"""The package's own settings: ``[tool.archguard]`` in ``pyproject.toml``, and the
``ARCHGUARD_*`` environment variables.

Strict: an unknown key is an error with a "did you mean" hint, because a typo must never
silently build the wrong wheel. ``parse_config`` works on parsed data; ``load_project``
does the I/O.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from archguard._fs import ENV_CACHE_DIR, ENV_CACHE_MAX
from archguard.core.arch import Arch, ArchEntry, parse_arch_list
from archguard.core.cuda import CudaVersion
from archguard.core.modes import (
    DEFAULT_ARCH_SPECIFIC,
    ArchSpecific,
    Check,
    CompilerCache,
)
from archguard.core.problems import Problems, closest
from archguard.core.toolkit import known_arches
from archguard.errors import ConfigError, InvalidArch
from archguard.jobserver import fifo_of
from archguard.settings.model import CHOICES, CONFIG_KEYS, COUNTS, PackageConfig
from archguard.settings.optin import (
    DISTRIBUTION,
    ENV_DISABLE,
    ENV_ENABLE,
    OFF_WORDS,
    ON_WORDS,
    OptIn,
    opt_in,
    switch_word,
)

ENV_ARCH_LIST = "ARCHGUARD_ARCH_LIST"
ENV_POLICY = "ARCHGUARD_POLICY"
ENV_CONFIG = "ARCHGUARD_CONFIG"
ENV_VERIFY = "ARCHGUARD_VERIFY"
ENV_LINT = "ARCHGUARD_LINT"
ENV_LINT_BUDGET = "ARCHGUARD_LINT_BUDGET"
ENV_COMPILER_CACHE = "ARCHGUARD_COMPILER_CACHE"
ENV_WHEEL_VARIANT = "ARCHGUARD_WHEEL_VARIANT"
ENV_STUBS = "ARCHGUARD_STUBS"
ENV_JOBSERVER = "ARCHGUARD_JOBSERVER"
ENV_NVCC_STEPS = "ARCHGUARD_NVCC_STEPS"  # 0: the launcher runs nvcc whole (--threads)
ENV_KNOWN = (
    ENV_ARCH_LIST,
    ENV_POLICY,
    ENV_DISABLE,
    ENV_ENABLE,
    ENV_CONFIG,
    ENV_VERIFY,
    ENV_LINT,
    ENV_LINT_BUDGET,
    ENV_COMPILER_CACHE,
    ENV_WHEEL_VARIANT,
    ENV_STUBS,
    ENV_JOBSERVER,
    ENV_NVCC_STEPS,
    ENV_CACHE_DIR,
    ENV_CACHE_MAX,
)


def _did_you_mean(key: str, allowed: Collection[str]) -> str:
    close = closest(key, allowed)
    return f" Did you mean {close!r}?" if close else ""


def parse_config(
    table: object, source: str, root: Path, known: Collection[Arch] | None = None
) -> PackageConfig:
    """Validate a ``[tool.archguard]`` table (already parsed from TOML).

    ``root`` is the directory a relative ``policy`` path is relative to; ``known`` the
    arches that exist (by default those of the bundled toolkit table).
    """
    known = known_arches() if known is None else known
    if not isinstance(table, dict):
        raise ConfigError(f"{source} must be a table, not {type(table).__name__}.")
    problems = Problems()
    allowed = list(CONFIG_KEYS)
    for key in table:
        if key not in CONFIG_KEYS:
            problems.add(
                f"unknown key {key!r}.{_did_you_mean(key, allowed)} The keys: "
                + ", ".join(CONFIG_KEYS)
                + " (docs/configuration.md's [tool.archguard] table says what each does)"
            )
    arch_list = None
    try:
        if "arch_list" in table:
            arch_list = parse_arch_list(table["arch_list"], f"{source} arch_list", known=known)
    except InvalidArch as exc:
        problems.add(str(exc))
    by_cuda = _by_cuda(table.get("arch_list_by_cuda", {}), source, known, problems)
    policy = _policy_path(table, root, problems)
    choices = _choices(table, problems)
    counts = _counts(table, problems)
    local_version = table.get("local_version", "auto")
    if not isinstance(local_version, str) or not local_version.strip():
        problems.add(
            f'local_version = {local_version!r} must be "auto", "off" or a label template '
            'such as "{cuda}torch{torch}"'
        )
        local_version = "auto"
    wheel_variant = table.get("wheel_variant", False)
    if not isinstance(wheel_variant, bool):
        problems.add(f"wheel_variant = {wheel_variant!r} must be true or false")
        wheel_variant = False
    problems.raise_if_any(
        lambda _, lines: ConfigError(f"{source} is invalid; fix each of these:\n{lines}")
    )
    return PackageConfig(
        source,
        arch_list,
        by_cuda,
        policy,
        # each value is one of CHOICES[key], checked by _choices
        verify=cast("Check | None", choices.get("verify")),
        hardcoded_arch_specific=cast(
            "ArchSpecific", choices.get("hardcoded_arch_specific", DEFAULT_ARCH_SPECIFIC)
        ),
        lint=cast("Check | None", choices.get("lint")),
        nvcc_threads=counts.get("nvcc_threads"),
        max_jobs=counts.get("max_jobs"),
        compiler_cache=cast("CompilerCache | None", choices.get("compiler_cache")),
        local_version=local_version,
        wheel_variant=wheel_variant,
    )


def _by_cuda(
    raw: object, source: str, known: Collection[Arch], problems: Problems
) -> dict[str, tuple[ArchEntry, ...]]:
    by_cuda: dict[str, tuple[ArchEntry, ...]] = {}
    if not isinstance(raw, dict):
        problems.add(f'arch_list_by_cuda must be a table of cuXYZ = "list", not {raw!r}')
        return by_cuda
    for tag, value in raw.items():
        if CudaVersion.from_tag(tag) is None:
            hint = ""
            m = re.fullmatch(r"([0-9]{2})\.([0-9])", tag)
            if m:
                hint = f" Did you mean 'cu{m[1]}{m[2]}'?"
            problems.add(
                f"arch_list_by_cuda key {tag!r} is not a CUDA row name; write cuXYZ "
                f"(cu128 for CUDA 12.8).{hint}"
            )
            continue
        try:
            by_cuda[tag] = parse_arch_list(value, f"{source} arch_list_by_cuda.{tag}", known=known)
        except InvalidArch as exc:
            problems.add(str(exc))
    return by_cuda


def _policy_path(table: dict[str, Any], root: Path, problems: Problems) -> Path | None:
    if "policy" not in table:
        return None
    value = table["policy"]
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        problems.add(f"policy must be a path string, not {value!r}")
        return None
    return (root / value).resolve()


def _choices(table: dict[str, Any], problems: Problems) -> dict[str, str]:
    choices: dict[str, str] = {}
    for key, allowed_values in CHOICES.items():
        if key in table:
            value = table[key]
            if value in allowed_values:
                choices[key] = value
            else:
                problems.add(
                    f"{key} = {value!r} is not one of {', '.join(map(repr, allowed_values))}"
                    f"{_did_you_mean(str(value), allowed_values)}"
                )
    return choices


def _counts(table: dict[str, Any], problems: Problems) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key in COUNTS:
        if key in table:
            value = table[key]
            if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1024:
                counts[key] = value
            else:
                problems.add(f"{key} = {value!r} must be a whole number from 1 to 1024")
    return counts


@dataclass(frozen=True)
class Project:
    """What archguard knows about the package being built (or explained)."""

    root: Path
    pyproject: Path | None
    opt_in: OptIn
    config: PackageConfig | None

    @classmethod
    def none(cls, root: Path) -> Project:
        """A directory with no pyproject.toml: no package overrides, not opted in."""
        return cls(root, None, OptIn(False, False, False), None)

    @property
    def active(self) -> bool:
        return self.opt_in.active

    def warnings(self) -> list[str]:
        out = []
        if self.opt_in.lists_unrelated:
            out.append(
                f"{self.pyproject}: build-system.requires names 'archguard', an unrelated "
                f"project on the public index; archguard is distributed as '{DISTRIBUTION}'."
            )
        has_table, lists = self.opt_in.has_table, self.opt_in.lists_archguard
        if has_table and not lists and self.pyproject is not None:
            out.append(
                f"{self.pyproject} has [tool.archguard] but build-system.requires does not "
                f"list '{DISTRIBUTION}': an isolated `pip wheel` would build without archguard."
            )
        return out


def read_toml(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as f:
            data: dict[str, object] = tomllib.load(f)
            return data
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:  # found by the pyproject fuzz target
        raise ConfigError(
            f"{path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}); TOML files are UTF-8."
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read: {exc.strerror}") from None


def project_from_data(root: Path, pyproject: Path | None, data: Mapping[str, object]) -> Project:
    tool = data.get("tool", {})
    table = tool.get("archguard") if isinstance(tool, dict) else None
    config = None
    if table is not None:
        config = parse_config(table, f"{pyproject} [tool.archguard]", root)
    return Project(root=root, pyproject=pyproject, opt_in=opt_in(data), config=config)


def load_project(root: str | Path) -> Project:
    """Read ``root/pyproject.toml``. No file, or no table, means no package overrides."""
    root = Path(root).resolve()
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return Project.none(root)
    return project_from_data(root, pyproject, read_toml(pyproject))


def _env_switch(environ: Mapping[str, str], name: str, fix: str) -> bool:
    value = switch_word(environ, name)
    if value in ON_WORDS:
        return True
    if value in OFF_WORDS:
        return False
    raise ConfigError(
        f"{name}={environ[name]!r} is neither on (1, true, yes, on) nor off "
        f"(0, false, no, off, empty); {fix}."
    )


def env_disabled(environ: Mapping[str, str]) -> bool:
    return _env_switch(environ, ENV_DISABLE, "set it to 1 to turn archguard off")


def env_enabled(environ: Mapping[str, str]) -> bool:
    """``ARCHGUARD_ENABLE``: archguard on for every build with a CUDA extension."""
    return _env_switch(
        environ,
        ENV_ENABLE,
        "set it to 1 to turn archguard on for every build with a CUDA extension",
    )


def env_wheel_variant(environ: Mapping[str, str]) -> bool | None:
    """``ARCHGUARD_WHEEL_VARIANT``: None when unset."""
    if not (environ.get(ENV_WHEEL_VARIANT) or "").strip():
        return None
    return _env_switch(
        environ,
        ENV_WHEEL_VARIANT,
        "set it to 1 to have archguard wheel write a wheel-variant copy of each wheel",
    )


def env_stubs(environ: Mapping[str, str]) -> bool:
    """``ARCHGUARD_STUBS``: False when set to an off word (the build does not disassemble its
    kernels; the lint's recorded hazards stand in for them); True when unset."""
    if not (environ.get(ENV_STUBS) or "").strip():
        return True
    return _env_switch(
        environ,
        ENV_STUBS,
        "set it to 0 to skip the build's per-kernel disassembly (the stub classification)",
    )


HELD = "held:"  # ARCHGUARD_JOBSERVER=held:PATH: the jobserver, a token taken for the build


@dataclass(frozen=True)
class JobserverSetting:
    """The jobserver a build or a farm run joins, read once from its environment
    (:func:`jobserver_setting`).

    ``on``: False where ``ARCHGUARD_JOBSERVER`` is an off word (each build's compiles take
    the static share archguard chose). ``fifo``: the jobserver to join, or None: one of the
    build's (or the run's) own. ``token_held``: the build's first token was taken before it
    started (by ``archguard wheel``: ``held:PATH``; by the make 4.4 whose ``MAKEFLAGS`` names
    the FIFO), so the build must not wait for one of its own; False for ``fifo:PATH`` (a farm
    run's: its jobs hold no token while they fetch, resolve and repair)."""

    on: bool = True
    fifo: str | None = None
    token_held: bool = False


def jobserver_setting(environ: Mapping[str, str]) -> JobserverSetting:
    """``ARCHGUARD_JOBSERVER``, else the ``MAKEFLAGS`` of a make 4.4 caller. Unset or an on
    word: on, a jobserver of the build's own, or the one the caller's ``MAKEFLAGS`` names;
    ``fifo:PATH``: on, that jobserver (what a farm run gives its jobs: ``MAKEFLAGS`` itself
    would stop GNU make before 4.4, which cannot read a FIFO's name, measured with make
    4.3); ``held:PATH``: that jobserver, with the build's first token taken (what
    ``archguard wheel`` gives a build it took one for); an off word: off."""
    value = (environ.get(ENV_JOBSERVER) or "").strip()
    for form in ("fifo:", HELD):
        if value.startswith(form):
            if len(value) == len(form):
                raise ConfigError(
                    f"{ENV_JOBSERVER}={environ[ENV_JOBSERVER]!r} names no FIFO; give "
                    "fifo:/path/to/the/fifo, 1 for a jobserver of the build's own, or 0 for "
                    "none."
                )
            return JobserverSetting(True, value[len(form) :], token_held=form == HELD)
    if value and not _env_switch(
        environ,
        ENV_JOBSERVER,
        "set it to 0 for the static shares (MAX_JOBS per build) instead of the jobserver, "
        "or fifo:PATH to join one",
    ):
        return JobserverSetting(on=False)
    made = fifo_of(environ.get("MAKEFLAGS", ""))  # a make 4.4's: its token came with the build
    return JobserverSetting(True, made, token_held=made is not None)


def env_choice(environ: Mapping[str, str], name: str, key: str) -> str | None:
    """``ARCHGUARD_VERIFY`` / ``ARCHGUARD_LINT`` / ``ARCHGUARD_COMPILER_CACHE``: one of the
    words of ``CHOICES[key]``."""
    value = environ.get(name)
    if value is None or not value.strip():
        return None
    word = value.strip().lower()
    if word not in CHOICES[key]:
        raise ConfigError(
            f"{name}={value!r} is not one of {', '.join(CHOICES[key])} (it overrides "
            f"[tool.archguard] {key}).{_did_you_mean(word, CHOICES[key])}"
        )
    return word


DEFAULT_LINT_BUDGET = 10.0  # seconds of walking per extension


def env_lint_budget(environ: Mapping[str, str]) -> float:
    """``ARCHGUARD_LINT_BUDGET``: seconds of lint walking per extension, else the default."""
    value = environ.get(ENV_LINT_BUDGET, "").strip()
    if not value:
        return DEFAULT_LINT_BUDGET
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ConfigError(
            f"{ENV_LINT_BUDGET}={value!r} is not a positive number of seconds; set it to "
            f"e.g. 30, or unset it for the default ({DEFAULT_LINT_BUDGET:g} s per extension)."
        )
    return seconds


def load_config_file(path: str) -> PackageConfig:
    """``ARCHGUARD_CONFIG=/path/pkg.toml``: a farm's ``[tool.archguard]`` for a package it
    does not own. It holds only that table (same keys, same checks); a relative ``policy``
    in it is relative to the file."""
    origin = f"{ENV_CONFIG}={path}"
    try:
        file = Path(path).resolve()
        if not file.is_file():
            raise ConfigError(
                f"{origin}: no such file; point it at a TOML file holding a "
                "[tool.archguard] table, or unset it."
            )
    except (OSError, ValueError):
        raise ConfigError(f"{origin} is not a usable path; fix it or unset it.") from None
    data = read_toml(file)
    tool = data.get("tool")
    extra = [f"[{k}]" for k in data if k != "tool"]
    if isinstance(tool, dict):
        extra += [f"[tool.{k}]" for k in tool if k != "archguard"]
    if extra or not isinstance(tool, dict) or "archguard" not in tool:
        found = f" It holds {', '.join(extra)}, which archguard does not read." if extra else ""
        raise ConfigError(
            f"{origin}: the file must hold exactly one [tool.archguard] table (the package's "
            f"kernel floors, kept by the farm).{found} Move everything else out of it."
        )
    return parse_config(
        tool["archguard"], f"{file} [tool.archguard] (from {ENV_CONFIG})", file.parent
    )


def env_arch_list(environ: Mapping[str, str]) -> tuple[tuple[ArchEntry, ...], str] | None:
    value = environ.get(ENV_ARCH_LIST)
    if value is None:
        return None
    source = f"environment variable {ENV_ARCH_LIST}"
    return parse_arch_list(value, source, known=known_arches()), ENV_ARCH_LIST


def unknown_env_warnings(environ: Mapping[str, str]) -> list[str]:
    """``ARCHGUARD_*`` variables that archguard does not read (a typo, probably).

    A warning, not an error: the name is also used by an unrelated project.
    """
    out = []
    for name in sorted(environ):
        if name.startswith("ARCHGUARD_") and name not in ENV_KNOWN:
            out.append(
                f"environment variable {name} is not one archguard reads (it reads "
                f"{', '.join(ENV_KNOWN)}).{_did_you_mean(name, list(ENV_KNOWN))}"
            )
    return out
