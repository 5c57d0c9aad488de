"""A CMake file's commands written out as CMake runs them, in linear time: each foreach() over
literal items once per item, and each call of the package's own function() or macro() as its
body, the call's arguments in place of the parameters (a function's own variables named
apart for each call, as its scope keeps them). ``pkg_set_arches(mylib "${PKG_ARCHS}")`` of
``function(pkg_set_arches tgt archs)`` that sets the target's ``CUDA_ARCHITECTURES`` to
``${archs}`` then sets it to ``${PKG_ARCHS}``, and :mod:`archguard.frontend.cmake` follows
that value to its source; ``pkg_set_arches(mylib "80;90")`` forces a literal list, named
by the call's line.

What cannot be told is left as written: a foreach() over a variable's list, a call whose
arguments' positions a variable decides (``f(${X} 80)``), a name defined twice, a call past
the budget or too deep. Every written-out loop and call is counted, commands and characters,
before it is written out (:class:`Budget`), so the reading stays linear however they nest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from archguard.frontend.cmake_syntax import IDENT, Arg, Invocation

# commands that read the variables they name; any other may write them (list, string,
# foreach, math, a function's out-argument): a value that goes through one is not proved
READ_ONLY = frozenset({"if", "elseif", "else", "endif", "while", "endwhile", "message", "set"})
# a call written out starts with one of these and ends with MARK_END (no CMake name has "(")
MARK_FUNCTION, MARK_MACRO, MARK_END = "(function", "(macro", "(end"
# commands the readers interpret themselves: a package's function of the same name is not
# followed (CMake would run it; archguard reads the command as CMake's own)
_INTERPRETED = READ_ONLY | {
    "foreach", "endforeach", "function", "endfunction", "macro", "endmacro", "return",
    "set_property", "set_target_properties", "cmake_parse_arguments",
}  # fmt: skip
_MAX_ITEMS = 64  # the literal items of one foreach() written out
_MAX_DEPTH = 8  # calls written out within calls
_VAR = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


@dataclass
class Budget:
    """What writing out may add to a tree's commands, all told; and which functions' calls
    were written out (``expanded``), and which had a call left as written (``missed``)."""

    commands: int = 20_000
    chars: int = 4 << 20
    calls: int = 0  # calls written out so far: a function's own variables are named by it
    expanded: set[str] = field(default_factory=set)
    missed: set[str] = field(default_factory=set)

    def take(self, commands: int, chars: int) -> bool:
        """Count ``commands`` and ``chars`` about to be written out (False: past the budget,
        nothing counted)."""
        if commands > self.commands or chars > self.chars:
            return False
        self.commands -= commands
        self.chars -= chars
        return True


@dataclass(frozen=True)
class Definition:
    """A package's function() or macro()."""

    kind: str  # "function" or "macro"
    params: tuple[str, ...]
    body: tuple[Invocation, ...]
    size: int  # its arguments' characters
    refs: int  # its ${} and its arguments: where a value passed or a name of its own may go
    # a function's own variables (set() in its body, no PARENT_SCOPE or CACHE): each with the
    # index of its first set() (-1: a parameter, its own from the start)
    own: Mapping[str, int]
    changed: frozenset[str]  # what other commands of a function's body write (list(APPEND x))


def definitions(files: Iterable[Sequence[Invocation]]) -> dict[str, Definition | None]:
    """The function()s and macro()s the files define at their top level, by name (lower
    case; None: defined more than once, which one runs cannot be told)."""
    out: dict[str, Definition | None] = {}
    for seq in files:
        depth, start = 0, 0
        for i, inv in enumerate(seq):
            if inv.name in ("function", "macro"):
                depth += 1
                start = i if depth == 1 else start
            elif inv.name in ("endfunction", "endmacro") and depth:
                depth -= 1
                found = _definition(seq[start], seq[start + 1 : i]) if depth == 0 else None
                if found is not None:
                    name = seq[start].args[0].text.lower()
                    out[name] = None if name in out else found
    return out


def _definition(head: Invocation, body: Sequence[Invocation]) -> Definition | None:
    """``head``'s definition (None: a name or parameter that is not a plain name, or a
    command archguard reads as CMake's own)."""
    args = head.args
    if not args or any(a.kind != "bare" or not IDENT.fullmatch(a.text) for a in args):
        return None
    if args[0].text.lower() in _INTERPRETED:
        return None
    params = tuple(a.text for a in args[1:])
    size = sum(len(a.text) for inv in body for a in inv.args)
    refs = sum(a.text.count("${") + 1 for inv in body for a in inv.args)
    own: dict[str, int] = {}
    changed: set[str] = set()
    if head.name == "function":
        for i, inv in enumerate(body):
            first = inv.args[0].text if inv.args else ""
            if inv.name == "set" and IDENT.fullmatch(first) and not first.startswith("CMAKE_"):
                if not any(
                    a.kind == "bare" and a.text in ("PARENT_SCOPE", "CACHE") for a in inv.args
                ):
                    own.setdefault(first, -1 if first in params else i)
            elif inv.name not in READ_ONLY:
                changed.update(a.text for a in inv.args if a.kind == "bare")
    return Definition(head.name, params, tuple(body), size, refs, own, frozenset(changed))


def written(
    seq: Sequence[Invocation],
    defs: Mapping[str, Definition | None],
    budget: Budget,
    depth: int = 0,
) -> Iterator[Invocation]:
    """The commands of ``seq`` as CMake runs them: loops written out, and each call of one of
    ``defs`` as its body between a MARK_FUNCTION (or MARK_MACRO) and a MARK_END. A call
    within a definition is left as written (it runs when that one is called)."""
    if not defs:
        yield from _unrolled(seq, budget)
        return
    nested = 0  # open definitions: what they hold runs only when they are called
    for inv in _unrolled(seq, budget):
        if inv.name in ("function", "macro"):
            nested += 1
        elif inv.name in ("endfunction", "endmacro") and nested:
            nested -= 1
        if nested or inv.name not in defs:
            yield inv
            continue
        found = defs[inv.name]
        body = _called(found, inv, budget) if found and depth < _MAX_DEPTH else None
        if found is None or body is None:
            budget.missed.add(inv.name)
            yield inv
            continue
        budget.expanded.add(inv.name)
        mark = MARK_FUNCTION if found.kind == "function" else MARK_MACRO
        yield Invocation(mark, [], inv.at, inv.file)
        yield from written(body, defs, budget, depth + 1)
        yield Invocation(MARK_END, [], inv.at, inv.file)


def _elements(call: Invocation) -> tuple[list[Arg], int]:
    """The arguments a call passes, as CMake splits them (each marked passed from where it
    is written), and how many lead whose positions are known (a bare ``${X}`` may be any
    number of them)."""
    out: list[Arg] = []
    known: int | None = None
    for a in call.args:
        origin = a.passed or call.file
        if a.kind == "bare" and "$" in a.text and a.refs:
            known = len(out) if known is None else known
            out.append(Arg(a.text, "bare", a.at, origin))
        elif a.kind == "bare" and ";" in a.text:
            out += [Arg(t, "bare", a.at, origin) for t in a.text.split(";") if t]
        else:
            out.append(Arg(a.text, a.kind, a.at, origin))
    return out, len(out) if known is None else known


def _joined(items: Sequence[Arg], call: Invocation) -> Arg:
    """Several arguments as one list (``${ARGN}``)."""
    if len(items) == 1:
        return items[0]
    first = items[0] if items else Arg("", "quoted", call.at, call.file)
    return Arg(";".join(a.text for a in items), "quoted", first.at, first.passed)


def _called(d: Definition, call: Invocation, budget: Budget) -> list[Invocation] | None:
    """The body of ``d`` as ``call`` runs it (None: its arguments' places cannot be told, or
    past the budget)."""
    elements, known = _elements(call)
    if known < len(d.params):  # a parameter's value cannot be told (or too few: CMake stops)
        return None
    passed_size = sum(len(a.text) for a in call.args) + 16
    extra = sum(1 for p in d.params if d.own.get(p) == -1)
    if not budget.take(len(d.body) + extra + 2, d.size + d.refs * passed_size):
        return None
    budget.calls += 1
    n = budget.calls
    passed: dict[str, Arg] = {
        "ARGN": _joined(elements[len(d.params) :], call),
        "ARGV": _joined(elements, call),
        **{f"ARGV{i}": e for i, e in enumerate(elements[:known])},
    }
    if known == len(elements):
        passed["ARGC"] = Arg(str(len(elements)), "bare", call.at, call.file)
    out: list[Invocation] = []
    renamed: dict[str, str] = {}
    for p, e in zip(d.params, elements, strict=False):
        if d.kind == "macro" or (p not in d.own and p not in d.changed):
            passed[p] = e
        elif d.own.get(p) == -1:  # a parameter its body set()s: a variable of its own
            renamed[p] = f"{p}@{n}"
            value = Arg(e.text, "quoted", e.at, e.passed)
            out.append(
                Invocation("set", [Arg(renamed[p], "bare", call.at), value], call.at, call.file)
            )
    for name in ("ARGN", "ARGV", "ARGC") if d.kind == "function" else ():
        if name in d.changed or name in d.own:
            passed.pop(name, None)
    for i, inv in enumerate(d.body):
        args = [_put(a, passed, renamed) for a in inv.args]
        first = args[0].text if args and inv.name == "set" else ""
        if d.own.get(first) == i:  # its first set(): a variable of its own from here on
            renamed[first] = f"{first}@{n}"
            args[0] = Arg(renamed[first], "bare", args[0].at, args[0].passed)
        elif inv.name == "cmake_parse_arguments":
            parsed = _parsed(inv.args, args, elements, len(d.params))
            passed.update(
                (k, v) for k, v in parsed.items() if k not in d.own and k not in d.changed
            )
        out.append(Invocation(inv.name, args, inv.at, inv.file))
    return out


def _put(a: Arg, passed: Mapping[str, Arg], renamed: Mapping[str, str]) -> Arg:
    """``a`` in a call written out: each parameter's ``${p}`` replaced by what the call passed
    (the whole argument: passed from the call's line), each own variable named apart."""
    if a.kind == "bracket":
        return a
    if a.kind == "bare" and a.text in renamed:
        return Arg(renamed[a.text], "bare", a.at, a.passed)
    if "${" not in a.text:
        return a
    whole = _VAR.fullmatch(a.text)
    if whole and whole[1] in passed:
        given = passed[whole[1]]
        return Arg(given.text, a.kind, given.at, given.passed)

    def one(m: re.Match[str]) -> str:
        name = m[1]
        if name in passed:
            return passed[name].text
        return "${" + renamed[name] + "}" if name in renamed else m[0]

    text = _VAR.sub(one, a.text)
    return a if text == a.text else Arg(text, a.kind, a.at, a.passed)


def _parsed(
    raw: Sequence[Arg], args: Sequence[Arg], elements: Sequence[Arg], params: int
) -> dict[str, Arg]:
    """What ``cmake_parse_arguments`` sets, where its keywords are literal and it parses the
    call's own arguments (``PARSE_ARGV N``, or ``${ARGN}``): ``PREFIX_KEY`` for each one-value
    or multi-value keyword the call gives a value (vLLM's ``ARCHITECTURES ${ARCHES}``)."""
    words = [a.text for a in raw]
    if words[:1] == ["PARSE_ARGV"] and len(args) == 6 and args[1].text.isdigit():
        given, head = elements[int(args[1].text) :], args[2:6]
    elif len(raw) == 5 and words[4] in ("${ARGN}", "${ARGV}"):
        given, head = elements[params if words[4] == "${ARGN}" else 0 :], args[:4]
    else:
        return {}
    if any(a.refs or a.kind == "bracket" for a in head):
        return {}
    options, one, many = ({t for t in a.text.split(";") if t} for a in head[1:4])
    keywords = options | one | many
    values: dict[str, list[Arg]] = {}
    unsure: set[str] = set()
    key: str | None = None
    for e in given:
        if e.text in keywords and not e.refs:
            key = e.text if e.text not in options else None
            values[e.text] = []
        elif key is not None:
            if key in one and "$" in e.text and e.refs:  # how many it is cannot be told
                unsure.add(key)
            values[key].append(e)
            key = key if key in many else None
    return {
        f"{head[0].text}_{k}": Arg(";".join(a.text for a in v), "quoted", v[0].at, v[0].passed)
        for k, v in values.items()
        if v and k not in unsure
    }


def _loop_items(args: Sequence[Arg]) -> list[str] | None:
    """A foreach()'s literal items (``foreach(X A B C)``, ``foreach(X IN ITEMS A B)``; a
    bare argument is a list: ``A;B``); None where they cannot be read (``RANGE``, ``IN
    LISTS``, an item that expands a variable) or are too many."""
    if not args or not IDENT.fullmatch(args[0].text):
        return None
    rest = list(args[1:])
    if rest and rest[0].kind == "bare" and rest[0].text in ("RANGE", "IN"):
        if rest[0].text == "RANGE" or len(rest) < 2 or rest[1].text != "ITEMS":
            return None
        rest = rest[2:]
    items: list[str] = []
    for a in rest:
        if a.refs or a.kind == "bracket":
            return None
        items += [t for t in a.text.split(";") if t] if a.kind == "bare" else [a.text]
        if len(items) > _MAX_ITEMS:
            return None
    return items


@dataclass(frozen=True)
class _Loops:
    """A sequence of commands, where each of its loops ends, and running totals over it for
    what writing out a span of it costs."""

    seq: Sequence[Invocation]
    ends: Mapping[int, int]  # a foreach()'s index -> its endforeach()'s
    chars: list[int]  # characters of the arguments before each command
    refs: list[int]  # the ${ in them: where an item goes

    @classmethod
    def of(cls, seq: Sequence[Invocation]) -> _Loops:
        ends: dict[int, int] = {}
        open_loops: list[int] = []
        for i, inv in enumerate(seq):
            if inv.name == "foreach":
                open_loops.append(i)
            elif inv.name == "endforeach" and open_loops:
                ends[open_loops.pop()] = i
        if not ends:
            return cls(seq, ends, [], [])
        chars = [0, *accumulate(sum(len(a.text) for a in inv.args) for inv in seq)]
        refs = [0, *accumulate(sum(a.text.count("${") for a in inv.args) for inv in seq)]
        return cls(seq, ends, chars, refs)

    def take(
        self, budget: Budget, looped: Sequence[str], at: int, items: Mapping[str, str]
    ) -> bool:
        """Count the body of the loop at ``at`` written out once per item, each ${} as long
        as the longest item (False: past the budget)."""
        end = self.ends[at]
        longest = max(len(t) for t in (*items.values(), *looped, ""))
        chars = self.chars[end] - self.chars[at + 1]
        chars += (self.refs[end] - self.refs[at + 1]) * longest
        return budget.take(len(looped) * max(1, end - at - 1), len(looped) * chars)


def _unrolled(invocations: Iterable[Invocation], budget: Budget) -> Iterator[Invocation]:
    """The commands with each foreach() over literal items written out once per item, its
    variable's ``${X}`` replaced by the item, as CMake runs it (``foreach(opt A PKG_ARCHS)
    set(${opt} "$ENV{${opt}}")`` reads ``$ENV{PKG_ARCHS}`` into ``PKG_ARCHS``). A foreach()
    that cannot be read, or has no endforeach(), stays as it is (its variable is then written
    by a command other than set(): not followed). Each loop's end is found once, and its cost
    counted before it is written out, so the reading stays linear."""
    loops = _Loops.of(list(invocations))
    if not loops.ends:
        yield from loops.seq
        return
    yield from _written_out(loops, (0, len(loops.seq)), budget, {})


def _written_out(
    loops: _Loops, span: tuple[int, int], budget: Budget, items: Mapping[str, str]
) -> Iterator[Invocation]:
    """The commands of ``loops.seq[span]``, the loop variables ``items`` replaced."""
    i, stop = span
    while i < stop:
        inv = loops.seq[i]
        args = [_replaced(a, items) for a in inv.args] if items else inv.args
        end = loops.ends.get(i, stop) if inv.name == "foreach" else stop
        looped = _loop_items(args) if end < stop else None
        if looped is None or not loops.take(budget, looped, i, items):
            yield inv._replace(args=args)
            i += 1
            continue
        for item in looped:
            yield from _written_out(loops, (i + 1, end), budget, {**items, args[0].text: item})
        i = end + 1


def _replaced(arg: Arg, items: Mapping[str, str]) -> Arg:
    """``arg`` with each loop variable's ``${X}`` replaced by its item (a bracket argument is
    raw: nothing in it expands)."""
    if arg.kind == "bracket" or "${" not in arg.text:
        return arg
    text = _VAR.sub(lambda m: items.get(m[1], m[0]), arg.text)
    return arg if text == arg.text else Arg(text, arg.kind, arg.at, arg.passed)
