"""Read YAML that must be plain data: no tags, no anchors or aliases, no duplicate keys.

Policy files come from strangers (a farm's ``ARCHGUARD_POLICY``). ``yaml.safe_load`` alone
would still accept an alias-expansion bomb, silently keep the last of two duplicate keys,
and turn ``2026-08-01`` into a date. This reader refuses all of that before constructing
anything, within a fixed size and node budget.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

MAX_BYTES = 1 << 20  # 1 MiB: the bundled policy is ~5 KB
MAX_NODES = 50_000
MAX_DEPTH = 32

_PLAIN_TAGS = {
    "tag:yaml.org,2002:str": "a string",
    "tag:yaml.org,2002:int": "an integer",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "a boolean",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:seq": "a list",
    "tag:yaml.org,2002:map": "a mapping",
}


class _Refused(Exception):
    def __init__(self, message: str, mark: object) -> None:
        super().__init__(message)
        self.mark = mark


class _PlainLoader(yaml.SafeLoader):
    """A SafeLoader whose composer refuses anchors and aliases outright."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(
                f"alias '*{event.anchor}' (anchors and aliases are not allowed)",
                event.start_mark,
            )
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise _Refused(
                f"anchor '&{anchor}' (anchors and aliases are not allowed)", event.start_mark
            )
        return super().compose_node(parent, index)


def _where(source: str, mark: object) -> str:
    line, column = getattr(mark, "line", None), getattr(mark, "column", None)
    if line is None or column is None:
        return source
    return f"{source}, line {line + 1}, column {column + 1}"


def _check_plain(root: yaml.Node, source: str, fail: Callable[[str], Exception]) -> None:
    stack: list[tuple[yaml.Node, int]] = [(root, 0)]
    count = 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise fail(f"{source}: more than {MAX_NODES} YAML nodes; a policy is far smaller")
        if depth > MAX_DEPTH:
            raise fail(f"{_where(source, node.start_mark)}: nested deeper than {MAX_DEPTH}")
        if node.tag not in _PLAIN_TAGS:
            raise fail(
                f"{_where(source, node.start_mark)}: {node.tag!r} is not plain data "
                f"(value {node.value!r}); write it as a quoted string"
                if isinstance(node, yaml.ScalarNode)
                else f"{_where(source, node.start_mark)}: tag {node.tag!r} is not plain data; "
                "remove the tag"
            )
        if isinstance(node, yaml.MappingNode):
            seen: dict[object, yaml.Mark] = {}
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode):
                    raise fail(f"{_where(source, key.start_mark)}: a mapping key must be text")
                if key.value in seen:
                    first = seen[key.value]
                    raise fail(
                        f"{_where(source, key.start_mark)}: duplicate key {key.value!r} "
                        f"(first at line {first.line + 1}); YAML would silently keep only the "
                        "last one, so remove one of them"
                    )
                seen[key.value] = key.start_mark
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)


def load_plain_yaml(text: str, source: str, fail: Callable[[str], Exception]) -> object:
    """Parse ``text`` into plain Python data or raise ``fail(message)``.

    ``fail`` builds the caller's own error type so that the message names the file.
    """
    if len(text) > MAX_BYTES:
        raise fail(f"{source}: {len(text)} bytes is larger than the {MAX_BYTES}-byte limit")
    loader: _PlainLoader | None = None
    try:
        loader = _PlainLoader(text)  # the reader already rejects non-printable characters
        node = loader.get_single_node()
        if node is None:
            return None
        _check_plain(node, source, fail)
        return loader.construct_document(node)
    except _Refused as exc:
        raise fail(f"{_where(source, exc.mark)}: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        raise fail(f"{_where(source, exc.problem_mark)}: not valid YAML: {exc.problem}") from None
    except yaml.reader.ReaderError as exc:
        raise fail(
            f"{source}: not valid YAML: character {exc.character!r} at position "
            f"{exc.position} is not allowed (binary or control characters)"
        ) from None
    except yaml.YAMLError as exc:
        raise fail(f"{source}: not valid YAML: {exc}") from None
    except RecursionError:
        raise fail(f"{source}: nested too deeply to be a policy file") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml_text(
    path: Path, source: str, fail: Callable[[str], Exception], what: str = "file"
) -> str:
    """Read a YAML file's text within the size limit, or raise ``fail(message)``."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise fail(f"{what} {source} is larger than 1 MiB; a policy is ~5 KB")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise fail(f"{what} {source} does not exist; fix the path") from None
    except IsADirectoryError:
        raise fail(f"{what} {source} is a directory; point at the .yml file") from None
    except UnicodeDecodeError:
        raise fail(f"{what} {source} is not UTF-8 text") from None
    except OSError as exc:
        raise fail(f"{what} {source} cannot be read: {exc.strerror}") from None
    except ValueError:  # e.g. an embedded NUL byte
        raise fail(f"{what} {source!r} is not a usable path") from None
