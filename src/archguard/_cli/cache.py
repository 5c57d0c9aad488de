"""``archguard cache``: what archguard's cache holds; ``archguard cache prune``: less of it."""

from __future__ import annotations

import argparse
import json
import time

from archguard._cli.common import EXIT_FAIL, EXIT_OK, write
from archguard._cli.options import Subparsers, format_option


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):  # nan, inf and negatives are no number of days
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days >= 0")
    return value


def cache_command(sub: Subparsers) -> None:
    p = sub.add_parser(
        "cache",
        help="what archguard's cache holds (each entry's kind, size, last use, whether in "
        "use, the farm sites that link it); `cache prune --older-than DAYS | --max-size SIZE "
        "| --unlinked [--dry-run]`",
    )
    format_option(p)
    inner = p.add_subparsers(dest="cache_command", metavar="prune")
    q = inner.add_parser(
        "prune",
        help="remove entries last used before DAYS ago, the least recently used down to "
        "SIZE, or those no farm site links; never one another process holds",
    )
    q.add_argument("--older-than", type=_days, metavar="DAYS")
    q.add_argument("--max-size", metavar="SIZE", help="e.g. 50G (K, M, G, T: powers of 1024)")
    q.add_argument(
        "--unlinked",
        action="store_true",
        help="every entry no farm site links (a site links its cells' environments)",
    )
    q.add_argument("--dry-run", action="store_true", help="say what it would remove")
    # after prune, or before it (cache --format json prune): the one given wins
    q.add_argument("--format", choices=("text", "json"), default=argparse.SUPPRESS)


def cmd_cache(args: argparse.Namespace) -> int:
    from archguard.detect.cachestore import count, entries, human
    from archguard.detect.fetch import cache_root

    if getattr(args, "cache_command", None) == "prune":
        return _prune(args)
    root = cache_root()
    listed = entries(root)
    total = sum(e.size for e in listed)
    if args.format == "json":
        data = {"root": str(root), "entries": [e.as_json() for e in listed], "total": total}
        write(json.dumps(data, indent=2) + "\n")
        return EXIT_OK
    lines = [f"archguard cache at {root}", f"  {'kind':<10}{'size':>11}  {'last use':<17}  entry"]
    for e in listed:
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(e.last_use))
        shown = e.path.relative_to(root).as_posix() + ("  (in use)" if e.in_use else "")
        shown += "".join(f"  linked by {site}" for site in e.sites)
        lines.append(f"  {e.kind:<10}{human(e.size):>11}  {when:<17}  {shown}")
    lines.append(f"  {'total':<10}{human(total):>11}  {count(len(listed))} (times UTC)")
    write("\n".join(lines) + "\n")
    return EXIT_OK


def _prune(args: argparse.Namespace) -> int:
    from archguard.detect.cachestore import count, human, parse_size, prune
    from archguard.detect.fetch import cache_root
    from archguard.errors import ConfigError

    if args.older_than is None and args.max_size is None and not args.unlinked:
        raise ConfigError(
            "archguard cache prune: say what to remove: --older-than DAYS, --max-size SIZE "
            "(e.g. 50G), --unlinked, or several."
        )
    limit = parse_size(args.max_size, "--max-size") if args.max_size is not None else None
    root = cache_root()
    done = prune(
        root,
        older_than_days=args.older_than,
        max_size=limit,
        unlinked=args.unlinked,
        dry_run=args.dry_run,
    )
    if args.format == "json":
        data = {
            "root": str(root),
            "dry_run": args.dry_run,
            "removed": [e.as_json() for e in done.removed],
            "in_use": [e.as_json() for e in done.in_use],
            "before": done.before,
            "after": done.after,
            "reached": done.reached,
        }
        write(json.dumps(data, indent=2) + "\n")
        return EXIT_OK if done.reached else EXIT_FAIL
    verb = "would remove" if args.dry_run else "removed"
    lines = [
        f"  {verb} {e.kind} {e.path.relative_to(root)} ({human(e.size)})" for e in done.removed
    ]
    lines += [
        f"  kept {e.kind} {e.path.relative_to(root)} ({human(e.size)}): in use by another "
        "process (a farm run or build); pruned once it ends"
        for e in done.in_use
    ]
    lines.append(
        f"archguard cache prune: {count(len(done.removed))} "
        f"{'would be removed' if args.dry_run else 'removed'}, {human(done.before)} -> "
        f"{human(done.after)}" + ("" if done.reached else f", still over {args.max_size}")
    )
    write("\n".join(lines) + "\n")
    return EXIT_OK if done.reached else EXIT_FAIL
