"""What a package's ``setup.py`` text shows, read once before its build: the environment
variables it reads by name, the lines that ask torch about the GPU, and the conditions a
farm's build does not meet that can leave its CUDA extension out.

The text is read as Python (:mod:`ast`); a text ``ast`` cannot parse (Python 2, nesting past
the parser's limits) token by token (:mod:`tokenize`), and one even the tokenizer refuses
line by line. Each reading takes time linear in the text: none runs a pattern that can
backtrack over it (one that did took minutes on a real 174-line setup.py)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# a variable whose name says it holds CUDA arches (GPU_ARCH, CUDA_ARCH_LIST, NVCC_ARCHS, ...)
_ARCH_NAME = re.compile(r"(?:^|_)(?:ARCH|ARCHS|ARCH_LIST|ARCHITECTURES?|SMS?)(?:_|$)")
# what archguard sets itself (the list's own variables) or reads as its own settings
_ARCHGUARDS = re.compile(r"^(?:TORCH_CUDA_ARCH_LIST|CUDAARCHS|ARCHGUARD_\w+)$")


@dataclass(frozen=True)
class SetupPy:
    """What a package's ``setup.py`` text shows (as far as it shows it): the environment
    variables it reads by name, the lines that ask torch about the GPU (``setup.py:21``),
    and the conditions a farm's build does not meet that can leave its extension out
    (``setup.py:5: 'build_ext' in sys.argv: ...how to meet it``)."""

    reads: list[str]
    asks_gpu: list[str]
    conditions: list[str] = field(default_factory=list)
    defaults: dict[str, str] = field(default_factory=dict)  # variable -> its literal default
    cmake_arches: bool = False  # it passes CMAKE_CUDA_ARCHITECTURES to CMake itself
    reading: str = "ast"  # how the text was read: "ast", "tokens", "lines" (or "unread")
    # its own variables for torch's location that reach CMake: name -> "prefix" (a directory
    # holding share/cmake, as libtorch's root) or "dir" (share/cmake/Torch, as Torch_DIR)
    torch_locations: dict[str, str] = field(default_factory=dict)

    def arch_variables(self) -> list[str]:
        """The variables it reads whose names say they hold CUDA arches, not archguard's."""
        return [n for n in self.reads if _ARCH_NAME.search(n.upper()) and not _ARCHGUARDS.match(n)]


# the commands a setup.py may look for on its own command line (pip's build passes none)
_COMMANDS = frozenset({"build_ext", "bdist_wheel", "install", "develop", "build"})
# torch's questions about the GPU (which fail, or say no, on a farm's builder)
_GPU_CALLS = frozenset({"is_available", "device_count", "get_device_capability", "get_device_name"})
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})
# a module imported only if it can that the build has anyway
_NOT_OPTIONAL = frozenset({"torch", "setuptools", "os", "sys"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The token and line readings match these within one logical or physical line. Each starts
# at a literal and none nests a repetition: linear in the line.
_READS = re.compile(
    r"""(?:os\.environ\.get|os\.getenv|environ\.get|getenv)\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']"""
    r"""|os\.environ\[\s*["']([A-Za-z_][A-Za-z0-9_]*)["']\s*\]"""
    r"""|["']([A-Za-z_][A-Za-z0-9_]*)["']\s+(?:not\s+)?in\s+os\.environ"""
)
# a variable read with a literal default: os.environ.get("GPU_ARCH", "8.0;8.6")
_DEFAULT = re.compile(
    r"""(?:os\.environ\.get|os\.getenv|environ\.get|getenv)\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']"""
    r"""\s*,\s*["']([^"'\n]*)["']"""
)
_ARGV = re.compile(r"""["'](build_ext|bdist_wheel|install|develop|build)["']\s+in\s+sys\.argv""")
_ASKS_GPU = re.compile(r"\bcuda\.(?:is_available|device_count|get_device_(?:capability|name))\(")

Position = tuple[int, int]  # (line, column): orders what a reading found as the text does


@dataclass
class _Found:
    """What one reading of the text found."""

    reads: list[tuple[Position, str]] = field(default_factory=list)
    defaults: list[tuple[Position, str, str]] = field(default_factory=list)
    argv: dict[int, tuple[int, str, str]] = field(default_factory=dict)  # line -> first one
    gpu: set[int] = field(default_factory=set)  # lines that ask torch about the GPU
    optional: list[tuple[int, str]] = field(default_factory=list)  # (import's line, module)
    torch: dict[str, str] = field(default_factory=dict)  # torch-location variable -> how used

    def add_argv(self, where: Position, written: str, command: str) -> None:
        """A ``'build_ext' in sys.argv`` as written; the first on its line counts."""
        line, column = where
        if line not in self.argv or column < self.argv[line][0]:
            self.argv[line] = (column, written, command)


# --- as Python -----------------------------------------------------------------------------


def _dotted(node: ast.AST) -> str:
    """``os.environ.get`` for that chain of attributes on a name; "" for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _variable(node: ast.AST | None) -> str | None:
    value = _string(node)
    return value if value is not None and _NAME.fullmatch(value) else None


def _env_get(dotted: str) -> bool:
    """``os.environ.get``, ``environ.get``, ``os.getenv``, ``getenv`` (on anything)."""
    return dotted in ("getenv", "environ.get") or dotted.endswith((".getenv", ".environ.get"))


def _ast_found(tree: ast.Module, lines: Sequence[str]) -> _Found:
    found = _Found(torch=_ast_torch(tree))
    for node in ast.walk(tree):  # breadth first, without recursion: any depth
        if isinstance(node, ast.Call):
            _ast_call(node, found)
        elif isinstance(node, ast.Subscript) and _dotted(node.value) in ("os.environ", "environ"):
            name = _variable(node.slice)
            if name is not None:
                found.reads.append(((node.lineno, node.col_offset), name))
        elif isinstance(node, ast.Compare):
            _ast_compare(node, lines, found)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            _ast_try(getattr(node, "body", []), getattr(node, "handlers", []), found)
    return found


def _ast_call(node: ast.Call, found: _Found) -> None:
    func = node.func
    if _env_get(_dotted(func)) and node.args:
        name = _variable(node.args[0])
        if name is None:
            return
        where = (node.lineno, node.col_offset)
        found.reads.append((where, name))
        given = node.args[1] if len(node.args) > 1 else None
        given = given or next((k.value for k in node.keywords if k.arg == "default"), None)
        default = _string(given)
        if default is not None:
            found.defaults.append((where, name, default))
    elif isinstance(func, ast.Attribute) and func.attr in _GPU_CALLS:
        owner = func.value
        if (isinstance(owner, ast.Attribute) and owner.attr == "cuda") or (
            isinstance(owner, ast.Name) and owner.id == "cuda"
        ):
            found.gpu.add(func.end_lineno or node.lineno)


def _ast_compare(node: ast.Compare, lines: Sequence[str], found: _Found) -> None:
    """``"X" in os.environ`` (or ``not in``) reads X; ``'build_ext' in sys.argv`` is a
    condition."""
    value = _string(node.left)
    op, right = node.ops[0], node.comparators[0]
    if value is None or not isinstance(op, ast.In | ast.NotIn):
        return
    where = (node.lineno, node.col_offset)
    if _dotted(right) in ("os.environ", "environ") and _NAME.fullmatch(value):
        found.reads.append((where, value))
        return
    target = right.value if isinstance(right, ast.Subscript) else right  # sys.argv[1:]
    if isinstance(op, ast.In) and value in _COMMANDS and _dotted(target) == "sys.argv":
        found.add_argv(where, _as_written(node.left, target, lines, value), value)


def _as_written(left: ast.expr, right: ast.expr, lines: Sequence[str], value: str) -> str:
    """``'build_ext' in sys.argv`` as the line writes it (ast's columns count UTF-8 bytes)."""
    end = right.end_col_offset
    if left.lineno == right.end_lineno and end is not None and left.lineno <= len(lines):
        raw = lines[left.lineno - 1].encode("utf-8", "replace")
        return raw[left.col_offset : end].decode("utf-8", "replace")
    return f"{value!r} in sys.argv"


def _ast_try(body: list[ast.stmt], handlers: list[ast.ExceptHandler], found: _Found) -> None:
    """The modules a ``try:`` body imports when a handler catches ImportError."""
    caught = False
    for handler in handlers:
        kind = handler.type
        kinds = kind.elts if isinstance(kind, ast.Tuple) else [kind] if kind is not None else []
        caught = caught or any(_dotted(k).rsplit(".", 1)[-1] in _IMPORT_ERRORS for k in kinds)
    if not caught:
        return
    for statement in body:
        if isinstance(statement, ast.Import):
            found.optional += [(statement.lineno, alias.name) for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            found.optional.append((statement.lineno, statement.module))


# --- token by token, or line by line -------------------------------------------------------

Chunk = tuple[int, int, str]  # (line, indentation, text): a logical or a physical line


def _token_lines(text: str) -> list[Chunk]:
    """Each logical line: its first line, its depth of indentation, and its tokens joined
    (comments left out; a space only between two words, ``os.environ.get("X")``)."""
    out: list[Chunk] = []
    parts: list[str] = []
    depth = start = 0
    word = False  # the last token was a name, a number or a string
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        kind = token.type
        if kind == tokenize.INDENT:
            depth += 1
        elif kind == tokenize.DEDENT:
            depth -= 1
        elif kind in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if parts:
                out.append((start, depth, "".join(parts)))
            parts, word = [], False
        elif kind not in (tokenize.COMMENT, tokenize.NL):
            start = start if parts else token.start[0]
            this = kind != tokenize.OP
            parts.append(" " + token.string if word and this else token.string)
            word = this
    return out


def _plain_lines(lines: Sequence[str]) -> list[Chunk]:
    """Each physical line that holds more than a comment, with its indentation's width."""
    out: list[Chunk] = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if text and not text.startswith("#"):
            out.append((number, len(line) - len(line.lstrip()), text))
    return out


def _text_found(chunks: Sequence[Chunk]) -> _Found:
    found = _Found(optional=_optional_imports(chunks))
    for number, _, text in chunks:
        for match in _READS.finditer(text):
            name = next(g for g in match.groups() if g)
            found.reads.append(((number, match.start()), name))
        for match in _DEFAULT.finditer(text):
            found.defaults.append(((number, match.start()), match[1], match[2]))
        argv = _ARGV.search(text)
        if argv:
            found.add_argv((number, argv.start()), argv[0], argv[1])
        if _ASKS_GPU.search(text):
            found.gpu.add(number)
        _text_torch(text, found.torch)
    return found


def _keyword(text: str, word: str) -> bool:
    """Does ``text`` start with the keyword ``word`` (not a longer name)?"""
    if not text.startswith(word):
        return False
    after = text[len(word) : len(word) + 1]
    return not (after.isalnum() or after == "_")


def _try_body(text: str) -> str | None:
    """For a ``try:`` line, what follows its colon on the line ("" for nothing); None for
    any other line."""
    if not _keyword(text, "try"):
        return None
    rest = text[3:].lstrip()
    if not rest.startswith(":"):
        return None
    rest = rest[1:].strip()
    return "" if rest.startswith("#") else rest


def _imported(text: str) -> list[str]:
    """The modules an ``import`` / ``from ... import`` statement names (not relative ones)."""
    text = text.split(";", 1)[0]
    if _keyword(text, "import"):
        names = [part.split()[0] for part in text[6:].split(",") if part.split()]
    elif _keyword(text, "from"):
        names = text[4:].split()[:1]
    else:
        return []
    return [n for n in names if all(_NAME.fullmatch(part) for part in n.split("."))]


@dataclass
class _Try:
    """A ``try`` statement still open: its indentation, its body's, the imports its body
    holds directly, and whether the lines now read are its body's."""

    indent: int
    imports: list[tuple[int, str]]
    body: int | None = None
    in_body: bool = True


def _optional_imports(chunks: Iterable[Chunk]) -> list[tuple[int, str]]:
    """The modules imported directly in the body of a ``try:`` one of whose handlers names
    ImportError or ModuleNotFoundError: one pass, with a stack of the open ``try``
    statements (each line pushed or popped once)."""
    out: list[tuple[int, str]] = []
    stack: list[_Try] = []
    for number, indent, text in chunks:
        clause = _keyword(text, "except") or _keyword(text, "else") or _keyword(text, "finally")
        while stack and (indent < stack[-1].indent or (indent == stack[-1].indent and not clause)):
            stack.pop()  # a statement at its level or above: that try is over
        if stack and indent == stack[-1].indent:  # a handler (or else, finally) of the top
            top = stack[-1]
            top.in_body = False
            if _keyword(text, "except") and any(
                name in text.split(":", 1)[0] for name in _IMPORT_ERRORS
            ):
                out += top.imports
                top.imports = []
            continue
        if stack and stack[-1].in_body:
            top = stack[-1]
            top.body = indent if top.body is None else top.body
            if indent == top.body:
                top.imports += [(number, module) for module in _imported(text)]
        inline = _try_body(text)
        if inline is not None:
            stack.append(_Try(indent, [(number, module) for module in _imported(inline)]))
    return out


# --- its own variable for torch's location, handed to CMake --------------------------------

# What marks a statement as one that hands a value to CMake: a string naming CMake's prefix
# path, Torch_DIR or Torch_ROOT ("-DTorch_DIR=", "CMAKE_PREFIX_PATH"), a -D define, the
# cmake command itself; "prefix" and "dir" say which directory the value should be.
_PREFIX_MARK = "CMAKE_PREFIX_PATH"
_DIR_MARKS = ("TORCH_DIR", "TORCH_ROOT")
# a name that reads as a place (LIBTORCH_PATH, TORCH_HOME, MYPKG_TORCH_DIR, LIBTORCH)
_PLACE_WORDS = ("PATH", "DIR", "ROOT", "HOME", "PREFIX", "INSTALL", "LOCATION")
_KEPT_STATEMENTS = 100_000  # the statements of one setup.py looked at for these


def _torch_name(name: str) -> bool:
    """A variable whose name mentions torch and is neither archguard's nor an arch list."""
    upper = name.upper()
    return "TORCH" in upper and not _ARCHGUARDS.match(name) and not _ARCH_NAME.search(upper)


def _marks(text: str) -> str:
    """What a string says about the value beside it: "prefix" (CMake's prefix path), "dir"
    (``Torch_DIR``, ``Torch_ROOT``), "cmake" (a -D define, the cmake command) or ""."""
    upper = text.strip().upper()
    if _PREFIX_MARK in upper:
        return "prefix"
    if any(upper.startswith(m) or f"-D{m}" in upper for m in _DIR_MARKS):
        return "dir"
    if (
        upper.startswith("-D")
        or upper == "CMAKE"
        or upper.startswith("CMAKE ")
        or upper.endswith("/CMAKE")
    ):
        return "cmake"
    return ""


def _kind(name: str, marks: set[str]) -> str | None:
    """Which directory a torch variable handed to CMake should name: by how the statement
    uses it where it says (prefix path, Torch_DIR), else by its name; None for a name that
    does not read as a place (USE_TORCH: a switch, not a location)."""
    if "dir" in marks and "prefix" not in marks:
        return "dir"
    if "prefix" in marks:
        return "prefix"
    upper = name.upper()
    if upper.endswith("_DIR"):
        return "dir"
    if upper in ("LIBTORCH", "TORCH") or any(w in upper for w in _PLACE_WORDS):
        return "prefix"
    return None


_HEADERS: dict[type, tuple[str, ...]] = {  # the expressions of a compound statement's header
    ast.If: ("test",),
    ast.While: ("test",),
    ast.For: ("target", "iter"),
    ast.AsyncFor: ("target", "iter"),
    ast.With: ("items",),
    ast.AsyncWith: ("items",),
    ast.Match: ("subject",),
}
_BODIES = ("body", "orelse", "handlers", "finalbody", "cases")  # what makes one compound


def _units(tree: ast.Module) -> list[tuple[Position, ast.AST, list[ast.AST]]]:
    """Each simple statement (and each compound statement's header) once, in the text's
    order: (where, the statement, the nodes to read). A node belongs to one unit only, so
    reading them all is linear in the tree."""
    out: list[tuple[Position, ast.AST, list[ast.AST]]] = []
    for node in ast.walk(tree):
        if len(out) >= _KEPT_STATEMENTS:
            break
        if not isinstance(node, ast.stmt):
            continue
        where = (node.lineno, node.col_offset)
        if not any(hasattr(node, body) for body in _BODIES):  # a simple statement
            out.append((where, node, [node]))
            continue
        parts: list[ast.AST] = []
        for name in _HEADERS.get(type(node), ()):
            value = getattr(node, name)
            parts += value if isinstance(value, list) else [value]
        if parts:
            out.append((where, node, parts))
    out.sort(key=lambda u: u[0])
    return out


def _ast_torch(tree: ast.Module) -> dict[str, str]:
    """Its torch-location variables (name mentions TORCH) whose value reaches CMake: read
    in a statement that hands something to CMake, or through names assigned from the read
    (``libtorch = os.environ["LIBTORCH_PATH"]``; ``args.append(f"-DTorch_DIR={libtorch}")``;
    a list holding -D defines and what is appended to it). One pass over the statements
    in the text's order: linear."""
    tainted: dict[str, set[str]] = {}  # a Python name -> the torch variables it holds
    cmake_lists: set[str] = set()  # names holding what is handed to CMake
    out: dict[str, str] = {}
    for _, statement, parts in _units(tree):
        seen = _Statement()
        for part in parts:
            for node in ast.walk(part):
                seen.add(node, tainted)
        marks = {m for c in seen.strings if c not in seen.read and (m := _marks(c))}
        marks |= {"cmake" for n in seen.names if n in cmake_lists}
        targets = _assigned(statement)
        if marks:
            cmake_lists.update(targets)
            for name in sorted(seen.sources):
                kind = _kind(name, marks)
                if kind is not None:
                    out.setdefault(name, kind)
        for target in targets:
            if seen.sources:
                tainted[target] = tainted.get(target, set()) | seen.sources
    return out


@dataclass
class _Statement:
    """What one statement holds: the torch variables it reads (directly or through a name),
    the names of every variable it reads, its strings, the Python names it uses."""

    sources: set[str] = field(default_factory=set)
    read: set[str] = field(default_factory=set)
    strings: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)

    def add(self, node: ast.AST, tainted: dict[str, set[str]]) -> None:
        name: str | None = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.strings.append(node.value)
        elif isinstance(node, ast.Name):
            self.names.add(node.id)
            if isinstance(node.ctx, ast.Load):
                self.sources.update(tainted.get(node.id, ()))
        elif isinstance(node, ast.Call) and _env_get(_dotted(node.func)) and node.args:
            name = _variable(node.args[0])
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _dotted(node.value) in ("os.environ", "environ")
        ):
            name = _variable(node.slice)
        if name is not None:
            self.read.add(name)  # its name is no mark (LIBTORCH_DIR is not -DTorch_DIR)
            if _torch_name(name):
                self.sources.add(name)


def _assigned(statement: ast.AST) -> list[str]:
    """The plain names a statement assigns (``x = ...``, ``x: T = ...``, ``x += ...``)."""
    if isinstance(statement, ast.Assign):
        targets: list[ast.expr] = list(statement.targets)
    elif isinstance(statement, ast.AnnAssign | ast.AugAssign):
        targets = [statement.target]
    else:
        return []
    out: list[str] = []
    for target in targets:
        elts = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
        out += [e.id for e in elts if isinstance(e, ast.Name)]
    return out


def _text_torch(text: str, out: dict[str, str]) -> None:
    """The token and line readings: a torch variable read on a line that hands something to
    CMake (no names followed)."""
    read: dict[str, None] = {}
    for match in _READS.finditer(text):
        read[next(g for g in match.groups() if g)] = None
    torch = [name for name in read if _torch_name(name)]
    if not torch:
        return
    parts = text.replace("'", '"').split('"')
    marks = {m for part in parts if part not in read and (m := _marks(part))}
    if marks:
        for name in torch:
            kind = _kind(name, marks)
            if kind is not None:
                out.setdefault(name, kind)


def _torch_locations(found: dict[str, str], reads: Sequence[str]) -> dict[str, str]:
    """Those it reads, in its order."""
    return {name: found[name] for name in reads if name in found}


# --- the answer ----------------------------------------------------------------------------


def _read(text: str, lines: Sequence[str]) -> tuple[_Found, str]:
    """What the text shows, and how it was read: as Python, else token by token, else line
    by line."""
    try:
        with warnings.catch_warnings():  # its invalid escapes are its own business
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
        return _ast_found(tree, lines), "ast"
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass  # Python 2, or nesting past the parser's limits
    try:
        return _text_found(_token_lines(text)), "tokens"
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError, MemoryError):
        return _text_found(_plain_lines(lines)), "lines"


def _conditions(found: _Found, lines: Sequence[str], name: str) -> list[str]:
    out = []
    for number in sorted(found.argv.keys() | found.gpu):
        if number in found.argv:
            _, written, command = found.argv[number]
            out.append(
                f"{name}:{number}: {written!r}: pip's build (PEP 517) never puts "
                f"{command!r} on setup.py's command line; build it with its own command "
                f"(python setup.py {command}) or patch that line"
            )
        else:
            line = lines[number - 1] if number <= len(lines) else ""
            out.append(
                f"{name}:{number}: it asks torch for a GPU ({line.strip()[:80]!r}), and a "
                "farm has none: set the switch it reads to force the CUDA build, or patch "
                "that line"
            )
    for number, module in sorted(dict.fromkeys(found.optional)):
        if module.split(".")[0] in _NOT_OPTIONAL:
            continue
        out.append(
            f"{name}:{number}: it imports {module} only if it can: make {module} importable "
            "in the build (the package's build requirements, or the cell)"
        )
    return out


def parse_setup_py(text: str, name: str = "setup.py") -> SetupPy:
    """What ``text``, a ``setup.py`` called ``name`` in the answer's lines, shows."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # as ast and tokenize count lines
    lines = text.split("\n")
    found, reading = _read(text, lines)
    reads = [n for _, n in sorted(found.reads, key=lambda r: r[0])]
    defaults = {n: v for _, n, v in sorted(found.defaults, key=lambda d: d[0])}
    return SetupPy(
        list(dict.fromkeys(reads)),
        [f"{name}:{number}" for number in sorted(found.gpu)],
        _conditions(found, lines, name),
        defaults,
        "CMAKE_CUDA_ARCHITECTURES" in text,
        reading,
        _torch_locations(found.torch, reads),
    )


def read_setup_py(setup_py: Path) -> SetupPy:
    try:
        text = setup_py.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return SetupPy([], [], reading="unread")
    return parse_setup_py(text, setup_py.name)
