"""The ``__CUDA_ARCH__`` stub lint (CW-ADR-0013): guarded code that a served device runs
compiled for a different arch than its own.

For every known device the wheel serves, archguard knows the image it loads: its cubin, else
the JIT of the highest PTX at or below it, compiled with *that* image's ``__CUDA_ARCH__``
(11.0 running ``compute_90`` sees 900). Source gated on ``__CUDA_ARCH__ >= 890`` compiles,
for the ``sm_86`` cubin an 8.9 GPU loads, to its fallback; code gated on
``__CUDA_ARCH_FEAT_SM90_ALL`` (CUTLASS's Hopper paths) compiles to its fallback for a plain
``sm_90`` cubin. The lint reads the sources once per configuration
(:mod:`archguard.lint.preprocessor`)
and reports every guarded region that is active for a device's own native target but
compiled out (or compiled in differently) for the image it loads, with the fix: the arch,
or ``a``/``f`` target, to add. It also reports regions no target in the list compiles
(dead for this wheel), ``#error`` directives a target reaches, and conditions it cannot
evaluate. What each target defines is what nvcc 13.0 defines (checked by
``tests/test_lint.py`` against the real nvcc).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from archguard.core.arch import Arch, Targets
from archguard.core.coverage import Device, chosen_cubin, chosen_ptx, known_devices, runs_on
from archguard.core.cuda import CudaVersion
from archguard.core.toolkit import Toolkit
from archguard.lint.preprocessor import Macro, Preprocessor, Region, Walk, file_resolver, tokenize

LINT_SCHEMA = "archguard.lint/1"
CUDA_ROOTS = (".cu",)
HEADER_SUFFIXES = (".cuh", ".h", ".hpp", ".hh", ".inl", ".cuinl")
_SKIP_DIRS = {".git", "build", "dist", ".venv", "venv", "node_modules", "__pycache__"}

_TRAP = re.compile(
    r"__trap\s*\(|\btrap\s*;|__brkpt\s*\(|\bassert\s*\(|__assertfail|\babort\s*\(|"
    r"CUTE_INVALID_CONTROL_PATH|CUTLASS_NOT_IMPLEMENTED|static_assert\s*\(\s*(?:false|0)\b"
)
_PRINT = re.compile(r"\bprintf\s*\(")
_CODE = re.compile(r"[A-Za-z0-9_]")


@dataclass(frozen=True)
class Target:
    """One configuration: an image in the wheel, a device's own native target, or the host."""

    name: str  # "sm_86", "compute_90", "host"
    arch: Arch | None  # None: the host pass

    def macros(self, arch_list: str, cuda: CudaVersion) -> dict[str, Macro]:
        """What nvcc defines for this target (nvcc 13.0, checked by the tests)."""
        out = {
            "__CUDACC__": Macro("__CUDACC__", ("1",)),
            "__NVCC__": Macro("__NVCC__", ("1",)),
            "__CUDACC_VER_MAJOR__": Macro("__CUDACC_VER_MAJOR__", (str(cuda.major),)),
            "__CUDACC_VER_MINOR__": Macro("__CUDACC_VER_MINOR__", (str(cuda.minor),)),
            # nvcc includes cuda_runtime.h in every .cu compile (cuda_runtime_api.h defines it)
            "CUDART_VERSION": Macro("CUDART_VERSION", (str(cuda.major * 1000 + cuda.minor * 10),)),
            "__CUDA_ARCH_LIST__": Macro(
                "__CUDA_ARCH_LIST__", tuple(" , ".join(arch_list.split(",")).split())
            ),
        }
        arch = self.arch
        if arch is None:
            return out
        value = str(arch.major * 100 + arch.minor * 10)
        out["__CUDA_ARCH__"] = Macro("__CUDA_ARCH__", (value,))
        if arch.suffix in ("a", "f"):
            out["__CUDA_ARCH_FAMILY_SPECIFIC__"] = Macro("__CUDA_ARCH_FAMILY_SPECIFIC__", (value,))
        if arch.suffix == "a":
            out["__CUDA_ARCH_SPECIFIC__"] = Macro("__CUDA_ARCH_SPECIFIC__", (value,))
            feat = f"__CUDA_ARCH_FEAT_SM{arch.digits}_ALL"
            out[feat] = Macro(feat, ("1",))
        return out


def image_name(arch: Arch, ptx: bool) -> str:
    return arch.compute if ptx else arch.sm


@dataclass(frozen=True)
class Finding:
    """A guarded region a served device runs compiled out (or differently)."""

    file: str
    line: int
    guard: str
    device: Device
    image: str  # the image the device loads: "sm_86", "compute_90 (JIT)"
    kind: str  # "trap", "empty" or "alternative"
    torch_runs: bool | None
    fix: Arch  # the target to add so the device gets its own image


@dataclass(frozen=True)
class Dead:
    file: str
    line: int
    guard: str
    needs: tuple[str, ...]  # the native targets that would compile it ("8.9", "9.0a")


@dataclass(frozen=True)
class ErrorReached:
    file: str
    line: int
    text: str
    images: tuple[str, ...]


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    dead: list[Dead] = field(default_factory=list)
    errors: list[ErrorReached] = field(default_factory=list)
    not_understood: list[tuple[str, int, str]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    not_scanned: list[str] = field(default_factory=list)  # includes outside the scan
    unfinished: list[str] = field(default_factory=list)  # sources the budget left unscanned
    seconds: float = 0.0
    files: int = 0
    targets: str = ""

    @property
    def ok(self) -> bool:
        return not self.findings and not self.errors


def classify(body: Sequence[str]) -> str:
    """What a branch holds: ``trap`` (a trap, an assert, or a print-and-return), ``empty``
    (no code), or ``alternative`` (other code)."""
    text = "\n".join(_code_lines(body))
    if _TRAP.search(text):
        return "trap"
    if not _CODE.search(text.replace("return", "")):
        return "empty"
    statements = [s for s in re.split(r"[;{}]", text) if _CODE.search(s)]
    if _PRINT.search(text) and all(
        _PRINT.search(s) or s.strip().startswith("return") for s in statements
    ):
        return "trap"
    return "alternative"


def _code_lines(body: Sequence[str]) -> list[str]:
    """A branch's lines that are not preprocessor directives."""
    return [line for line in body if not line.lstrip().startswith("#")]


def _has_code(body: Sequence[str]) -> bool:
    return any(_CODE.search(line) for line in _code_lines(body))


def _configuration_only(body: Sequence[str]) -> bool:
    """A branch that only defines macros (no code of its own)."""
    return not _has_code(body) and any(re.match(r"\s*#\s*(define|undef)\b", line) for line in body)


def _variants(device: Device, toolkit: Toolkit) -> list[Arch]:
    """The device's own native targets, least specific first: plain, f, a."""
    out = []
    for suffix in ("", "f", "a"):
        arch = Arch(device.cc[0], device.cc[1], suffix)
        if toolkit.emits_cubin(arch):
            out.append(arch)
    return out


def analyse(
    roots: Sequence[str],
    targets: Targets,
    toolkit: Toolkit,
    torch_targets: Targets | None,
    read: Callable[[str], str],
    resolve: Callable[[str, bool, str], str | None],
    devices: Sequence[Device] | None = None,
    defines: Mapping[str, str | None] | None = None,
    budget: float | None = None,
    forced: Sequence[str] = (),
) -> Report:
    """Lint the translation units ``roots`` for a wheel holding ``targets``. ``defines``:
    the command line's macros (``-DNAME=VALUE``: a string; ``-UNAME``: None). ``budget``:
    seconds for the walk, after which the sources not reached are listed as unscanned."""
    devices = tuple(devices or known_devices())
    images: list[tuple[Target, bool]] = [
        (Target(a.sm, a), False) for a in sorted(targets.cubins)
    ] + [(Target(a.compute, a.plain), True) for a in sorted(targets.ptx)]
    # device, image config index, image label, the image's arch when it is the device's own
    served: list[tuple[Device, int, str, Arch | None]] = []
    natives: dict[Arch, int] = {}
    configs: list[Target] = [t for t, _ in images] + [Target("host", None)]
    host = len(configs) - 1
    for device in devices:
        cubin = chosen_cubin(targets.cubins, device.cc)
        own: Arch | None = None
        if cubin is not None:
            index, label = configs.index(Target(cubin.sm, cubin)), cubin.sm
            own = cubin if cubin.cc == device.cc else None
        else:
            ptx = chosen_ptx(targets.ptx, device.cc)
            if ptx is None:
                continue  # dead: no image to compare
            index, label = configs.index(Target(ptx.compute, ptx.plain)), f"{ptx.compute} (JIT)"
        served.append((device, index, label, own))
        for arch in _variants(device, toolkit):
            if arch not in natives:
                natives[arch] = len(configs)
                configs.append(Target(f"native {arch.sm}", arch))
    arch_list = ",".join(
        sorted({str(a.major * 100 + a.minor * 10) for a in targets.cubins | targets.ptx}, key=int)
    )
    given = {
        name: Macro(name, tuple(tokenize(value)))
        for name, value in (defines or {}).items()
        if value is not None
    }
    tables = [{**given, **c.macros(arch_list, toolkit.version)} for c in configs]
    undefined = [name for name, value in (defines or {}).items() if value is None]
    version = toolkit.version.major * 1000 + toolkit.version.minor * 10
    headers = {  # the toolkit's headers are outside the scan; what they define is known
        name: [Macro("CUDA_VERSION", (str(version),))] for name in ("cuda.h", "cudaTypedefs.h")
    }
    walk = Preprocessor(
        tables,
        read,
        resolve,
        undefined=undefined,
        budget=budget,
        forced=forced,
        toolkit_headers=headers,
    ).walk(roots)
    report = Report(targets=str(targets), files=len(walk.files))
    report.unfinished = list(walk.unfinished)
    report.seconds = walk.seconds
    report.skipped = dict(walk.skipped)
    report.not_scanned = sorted(walk.missing)
    image_indexes = [i for i, (t, _) in enumerate(images)]
    _findings(walk, served, natives, image_indexes, host, torch_targets, report)
    _errors(walk, configs, image_indexes, report)
    report.not_understood = [(f, n, t) for (f, n), t in sorted(walk.not_understood.items())]
    return report


def _arch_dependent(walk: Walk) -> set[tuple[str, int]]:
    chains = {walk.regions[k].chain for k in walk.arch_chains if k in walk.regions}
    varying = {
        walk.regions[k].chain
        for k, states in walk.states.items()
        if len({s for s in states if s is not False}) > 1 or (True in states and False in states)
    }
    return {k for k, r in walk.regions.items() if r.chain in chains or r.chain in varying}


def _image_branch(walk: Walk, region: Region, image: int) -> Region | None:
    """The branch of the same #if chain the image compiles, if any."""
    for key, other in walk.regions.items():
        if other.chain == region.chain and walk.states[key][image] is True:
            return other
    return None


def _findings(
    walk: Walk,
    served: list[tuple[Device, int, str, Arch | None]],
    natives: dict[Arch, int],
    image_indexes: list[int],
    host: int,
    torch_targets: Targets | None,
    report: Report,
) -> None:
    arch_regions = _arch_dependent(walk)
    ordered = sorted(arch_regions, key=lambda k: (k[0], k[1]))
    rank = {"": 0, "f": 1, "a": 2}
    for device, image, label, own in served:
        # A device that loads its own compile is compared only with its more specific
        # targets (plain sm_90 with sm_90a); one that loads a lower image, with all of them.
        floor = rank[own.suffix] if own is not None else -1
        variants = [a for a in natives if a.cc == device.cc and rank[a.suffix] > floor]
        reported: set[tuple[str, int]] = set()
        for key in ordered:
            region = walk.regions[key]
            states = walk.states[key]
            if states[image] is not False:
                continue
            active = [a for a in variants if states[natives[a]] is True]
            if not active:
                continue
            if _ancestor_reported(walk, region, reported):
                continue
            taken = _image_branch(walk, region, image)
            if _configuration_only(region.body) and (taken is None or not _has_code(taken.body)):
                # CUTLASS's `#if defined(__CUDA_ARCH_SPECIFIC__)` / `#define ...`: no code of
                # its own; the hazard is where the macro is used, reported there
                continue
            reported.add(key)
            kind = classify(taken.body) if taken is not None else "empty"
            report.findings.append(
                Finding(
                    region.file,
                    region.line,
                    region.guard,
                    device,
                    label,
                    kind,
                    runs_on(torch_targets, device.cc) if torch_targets is not None else None,
                    active[0],
                )
            )
    needs_by_region: dict[tuple[str, int], list[str]] = {}
    for arch, index in natives.items():
        for key in arch_regions:
            if walk.states[key][index] is True:
                needs_by_region.setdefault(key, []).append(str(arch))
    for key in ordered:
        states = walk.states[key]
        region = walk.regions[key]
        if key not in walk.arch_chains and not region.guard.startswith("#else"):
            continue  # `#elif defined(RDNA3)` in an arch chain: not an arch guard itself
        if all(states[i] is False for i in [*image_indexes, host]):
            if region.parent is not None and region.parent in {
                (d.file, d.line) for d in report.dead
            }:
                continue
            report.dead.append(
                Dead(region.file, region.line, region.guard, tuple(needs_by_region.get(key, ())))
            )


def _ancestor_reported(walk: Walk, region: Region, reported: set[tuple[str, int]]) -> bool:
    parent = region.parent
    seen = 0
    while parent is not None and seen < 256:
        if parent in reported:
            return True
        up = walk.regions.get(parent)
        parent = up.parent if up else None
        seen += 1
    return False


def _errors(walk: Walk, configs: list[Target], image_indexes: list[int], report: Report) -> None:
    for file, line, text, states in walk.errors:
        hit = tuple(configs[i].name for i in image_indexes if states[i] is True)
        if hit:
            report.errors.append(ErrorReached(file, line, text, hit))


# ---------------------------------------------------------------------------------------
# Finding the sources.


def project_sources(root: Path, limit: int = 20000) -> list[str]:
    """Every .cu file under a project (build directories skipped): what its CUDA
    extensions compile, as far as a reading of the tree can tell."""
    out: list[str] = []
    seen = 0
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(CUDA_ROOTS):
                out.append(str(Path(here, name)))
        seen += len(files)
        if seen > limit:
            break
    return out


def path_sources(paths: Sequence[Path]) -> list[str]:
    """Files as given; directories: their .cu files, or, when they hold none, their CUDA
    headers (excerpts of kernels are often headers)."""
    out: list[str] = []
    for path in paths:
        if path.is_dir():
            found = project_sources(path)
            if not found:
                found = [
                    str(p)
                    for p in sorted(path.rglob("*"))
                    if p.is_file() and p.name.endswith((".cuh", ".cu.h", ".h", ".hpp"))
                ]
            out += found
        else:
            out.append(str(path))
    return out


def include_dirs_of(root: Path) -> list[Path]:
    """A project's likely include directories: itself and every ``include`` directory up
    to three levels down."""
    out = [root]
    for depth in range(1, 4):
        out += [p for p in root.glob("/".join(["*"] * depth)) if p.is_dir() and p.name == "include"]
    return out


def lint_paths(
    roots: Sequence[str],
    include_dirs: Sequence[Path],
    inside: Sequence[Path],
    targets: Targets,
    toolkit: Toolkit,
    torch_targets: Targets | None,
    defines: Mapping[str, str | None] | None = None,
    budget: float | None = None,
    forced: Sequence[str] = (),
) -> Report:
    """:func:`analyse` with files read from disk (unreadable ones are skipped, noted)."""

    def read(path: str) -> str:
        return Path(path).read_text(encoding="utf-8", errors="replace")

    return analyse(
        roots,
        targets,
        toolkit,
        torch_targets,
        read,
        file_resolver(include_dirs, inside),
        defines=defines,
        budget=budget,
        forced=forced,
    )


def parse_defines(
    flags: Sequence[str], macros: Sequence[tuple[str, str | None]] = ()
) -> dict[str, str | None]:
    """A compile's macros: setuptools' ``define_macros`` ((name, value), value None: "1")
    and ``undef_macros``-style ``-U`` flags, then ``-D``/``-U`` flags in command-line order
    (``-DX``, ``-D X``, ``-DX=V``); the last word on a name wins."""
    out: dict[str, str | None] = {name: "1" if value is None else value for name, value in macros}
    it = iter(flags)
    for flag in it:
        if flag in ("-D", "-U", "--define-macro", "--undefine-macro"):
            word = next(it, "")
            kind = "D" if flag in ("-D", "--define-macro") else "U"
        elif flag.startswith(("-D", "-U")):
            word, kind = flag[2:], flag[1]
        else:
            continue
        name, eq, value = word.partition("=")
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            continue
        out[name] = (value if eq else "1") if kind == "D" else None
    return out


def include_flags(flags: Sequence[str], root: Path) -> tuple[list[Path], list[str]]:
    """The ``-I`` directories and the ``-include`` / ``--pre-include`` files of a compile's
    flags (relative ones under ``root``): (directories, forced includes that exist)."""
    dirs: list[Path] = []
    forced: list[str] = []
    it = iter(flags)
    for flag in it:
        if flag in ("-I", "--include-path", "-include", "--pre-include"):
            value, kind = next(it, ""), flag
        elif flag.startswith("-I"):
            value, kind = flag[2:], "-I"
        elif flag.startswith(("--include-path=", "--pre-include=", "-include=")):
            kind, _, value = flag.partition("=")
        else:
            continue
        path = Path(value) if Path(value).is_absolute() else root / value
        if kind in ("-I", "--include-path"):
            dirs.append(path)
        elif path.is_file():
            forced.append(str(path.resolve()))
    return dirs, forced


def relative(file: str, base: Path | None) -> str:
    path = Path(file)
    if base is not None and path.resolve().is_relative_to(base.resolve()):
        path = path.resolve().relative_to(base.resolve())
    return str(path)


def _where(file: str, line: int, base: Path | None) -> str:
    return f"{relative(file, base)}:{line}"


def render(report: Report, tag: str, fmt: str = "text", base: Path | None = None) -> str:
    """``archguard lint``'s output (and the build log's lint lines), text or json."""
    if fmt == "json":
        import json  # noqa: PLC0415

        def at(file: str, line: int, **rest: object) -> dict[str, object]:
            return {"file": relative(file, base), "line": line, **rest}

        data = {
            "schema": LINT_SCHEMA,
            "ok": report.ok,
            "targets": report.targets,
            "files": report.files,
            "findings": [
                at(
                    f.file,
                    f.line,
                    guard=f.guard,
                    device=f.device.cc_text,
                    device_name=f.device.name,
                    image=f.image,
                    kind=f.kind,
                    torch_runs=f.torch_runs,
                    fix=str(f.fix),
                )
                for f in report.findings
            ],
            "dead": [at(d.file, d.line, guard=d.guard, needs=list(d.needs)) for d in report.dead],
            "errors_reached": [
                at(e.file, e.line, text=e.text, images=list(e.images)) for e in report.errors
            ],
            "not_understood": [at(f, n, why=t) for f, n, t in report.not_understood],
            "skipped": report.skipped,
            "not_scanned": report.not_scanned,
        }
        return json.dumps(data, indent=2) + "\n"
    return "\n".join(text_lines(report, tag, base)) + "\n"


def text_lines(report: Report, tag: str, base: Path | None = None) -> list[str]:
    out = [f"archguard lint: {report.files} files read, for a wheel holding {report.targets}"]
    groups: dict[tuple[str, int, str], list[Finding]] = {}
    for f in sorted(report.findings, key=lambda f: (f.file, f.line, f.device.cc)):
        groups.setdefault((f.file, f.line, f.guard), []).append(f)
    out += ["", f"Stub hazards ({len(report.findings)}): code a served device runs compiled out"]
    if not groups:
        out.append("  none")
    for (file, line, guard), items in groups.items():
        out.append(f"  {_where(file, line, base)}  {guard}")
        for f in items:
            torch = {True: "torch runs there", False: "torch itself cannot run there", None: ""}[
                f.torch_runs
            ]
            out.append(
                f"    {f.device} loads {f.image}, which compiles it out ({f.kind} instead); "
                f"{torch}; fix: add {f.fix} to [tool.archguard] arch_list_by_cuda.{tag}"
            )
    if report.errors:
        out += ["", "#error reached (that build will fail)"]
        for e in report.errors:
            out.append(f"  {_where(e.file, e.line, base)}  {e.text}  (by {', '.join(e.images)})")
    if report.dead:
        out += ["", "Dead for this wheel (no target in the list compiles it)"]
        for d in report.dead:
            needs = f" (compiled for {', '.join(d.needs)})" if d.needs else ""
            out.append(f"  {_where(d.file, d.line, base)}  {d.guard}{needs}")
    if report.not_understood:
        out += ["", "Not understood (not evaluated; check by hand)"]
        for file, line, why in report.not_understood:
            out.append(f"  {_where(file, line, base)}  {why}")
    if report.skipped:
        out += ["", "Skipped (unreadable)"]
        out += [f"  {path}: {why}" for path, why in sorted(report.skipped.items())]
    if report.unfinished:
        out += [
            "",
            f"Not scanned: the lint's budget ({report.seconds:.1f} s) ran out before "
            + ", ".join(relative(f, base) for f in report.unfinished)
            + " (raise it with ARCHGUARD_LINT_BUDGET=SECONDS)",
        ]
    if report.not_scanned:
        shown = ", ".join(report.not_scanned[:6])
        more = f" and {len(report.not_scanned) - 6} more" if len(report.not_scanned) > 6 else ""
        out += [
            "",
            f"Not scanned: {len(report.not_scanned)} includes outside the package "
            f"(toolkit, torch, system): {shown}{more}",
        ]
    out += [
        "",
        f"result: {'OK' if report.ok else 'FINDINGS'} ({len(report.findings)} stub "
        f"hazard{'s' if len(report.findings) != 1 else ''}, {len(report.errors)} #error "
        "reached)",
    ]
    return out
