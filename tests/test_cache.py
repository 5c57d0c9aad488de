"""archguard's cache as entries: listing (kind, size, last use, in use), pruning by age and by
least recent use down to a size, never an entry another process holds; ``archguard cache``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from archguard.detect.cachestore import (
    budget_line,
    cache_budget,
    entries,
    mark_used,
    parse_size,
    prune,
)
from archguard.errors import ConfigError
from realtools import run_main

DAY = 86400
NOW = time.time()


def _entry(root: Path, name: str, size: int, days_ago: float) -> Path:
    """A directory entry at ``root/name`` holding ``size`` bytes, last used ``days_ago``."""
    where = root / name
    (where / "inner").mkdir(parents=True)
    (where / "inner" / "data.bin").write_bytes(b"x" * size)
    (where / "inner" / "link").symlink_to("/usr")  # never followed, never counted
    when = NOW - days_ago * DAY
    for path in (where / "inner" / "link", where / "inner" / "data.bin", where / "inner", where):
        os.utime(path, (when, when), follow_symlinks=False)
    return where


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    _entry(root, "envs/py312-aaaa", 5000, 30)
    _entry(root, "src/0123abcd", 300, 10)
    _entry(root, "src/0123abcd.2", 200, 2)
    _entry(root, "cuda-root/cuda-12-bbbb", 10, 1)
    _entry(root, "build-env/cccc", 1000, 20)
    _entry(root, "downloads/release/pkg-1.0", 400, 40)
    _entry(root, "uv", 50, 100)
    (root / "envs" / ".py312-aaaa.lock").touch()  # locks are no entries
    return root


def _names(found: object, root: Path) -> list[str]:
    return [e.path.relative_to(root).as_posix() for e in found]  # type: ignore[attr-defined]


def test_lists_each_entry_with_its_kind_size_and_last_use(cache: Path) -> None:
    found = {e.path.relative_to(cache).as_posix(): e for e in entries(cache)}
    assert {name: (e.kind, e.size) for name, e in found.items()} == {
        "envs/py312-aaaa": ("env", 5000),
        "src/0123abcd": ("source", 300),
        "src/0123abcd.2": ("source", 200),
        "cuda-root/cuda-12-bbbb": ("cuda-root", 10),
        "build-env/cccc": ("overlay", 1000),
        "downloads/release/pkg-1.0": ("download", 400),
        "uv": ("other", 50),
    }
    assert found["src/0123abcd"].last_use == pytest.approx(NOW - 10 * DAY, abs=1)
    assert not any(e.in_use for e in found.values())


def test_mark_used_makes_an_entry_recent(cache: Path) -> None:
    env = cache / "envs" / "py312-aaaa"
    mark_used(env)
    (last,) = [e for e in entries(cache) if e.path == env]
    assert last.last_use == pytest.approx(time.time(), abs=60)
    # and this process holds it: a prune from here cannot remove it either
    assert prune(cache, older_than_days=0).in_use[0].path == env
    assert env.is_dir()


def test_prune_by_age_removes_only_the_old_and_never_other(cache: Path) -> None:
    done = prune(cache, older_than_days=15)
    assert sorted(_names(done.removed, cache)) == [
        "build-env/cccc",
        "downloads/release/pkg-1.0",
        "envs/py312-aaaa",
    ]
    assert not (cache / "envs" / "py312-aaaa").exists()
    assert (cache / "uv").is_dir()  # not archguard's: never pruned
    assert not [p for p in (cache / "envs").iterdir() if p.name.endswith(".partial")]
    assert (done.before, done.after) == (6960, 6960 - 6400)


def test_prune_to_a_size_takes_the_least_recently_used_first(cache: Path) -> None:
    dry = prune(cache, max_size=1500, dry_run=True)
    assert _names(dry.removed, cache) == [
        "downloads/release/pkg-1.0",
        "envs/py312-aaaa",
        "build-env/cccc",
    ]
    assert (cache / "envs" / "py312-aaaa").is_dir()  # dry: nothing removed
    done = prune(cache, max_size=1500)
    assert _names(done.removed, cache) == _names(dry.removed, cache)
    assert done.reached and done.after == 560
    assert _names(entries(cache), cache) == [
        "cuda-root/cuda-12-bbbb",
        "src/0123abcd",
        "src/0123abcd.2",
        "uv",
    ]


_HOLDER = """
import sys, time
from pathlib import Path
from archguard._fs import file_lock
with file_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def test_an_entry_another_process_holds_is_never_removed(cache: Path) -> None:
    env = cache / "envs" / "py312-aaaa"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(env)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        listed = {e.path: e.in_use for e in entries(cache)}
        assert listed[env] and not listed[cache / "build-env" / "cccc"]
        done = prune(cache, max_size=0)
        assert [e.path for e in done.in_use] == [env]
        assert env.is_dir() and not done.reached
        out = run_main("cache", "prune", "--max-size", "0", env={"ARCHGUARD_CACHE_DIR": str(cache)})
        assert out.returncode == 1
        assert "kept env envs/py312-aaaa" in out.stdout and "in use" in out.stdout
    finally:
        holder.kill()
        holder.communicate()  # closes its pipe
    assert prune(cache, max_size=0).removed[0].path == env  # let go: removed


def test_sizes_parse_and_a_bad_one_says_the_fix() -> None:
    assert parse_size("50G", "--max-size") == 50 << 30
    assert parse_size("1.5 TiB", "--max-size") == 3 << 39
    assert parse_size("800m", "--max-size") == 800 << 20
    assert parse_size("1024", "--max-size") == 1024
    with pytest.raises(ConfigError, match=r"--max-size '50 gigs' is not a size.*e\.g\. 50G"):
        parse_size("50 gigs", "--max-size")
    assert cache_budget({}) is None
    assert cache_budget({"ARCHGUARD_CACHE_MAX": "2K"}) == 2048
    with pytest.raises(ConfigError, match="ARCHGUARD_CACHE_MAX 'lots'"):
        cache_budget({"ARCHGUARD_CACHE_MAX": "lots"})


def test_cli_bad_max_size_is_one_clear_error(cache: Path) -> None:
    out = run_main("cache", "prune", "--max-size", "5X", env={"ARCHGUARD_CACHE_DIR": str(cache)})
    assert out.returncode == 2
    assert "archguard error [invalid-config]: --max-size '5X' is not a size" in out.stderr
    assert "Traceback" not in out.stderr
    assert (cache / "envs" / "py312-aaaa").is_dir()


def test_cli_lists_and_prunes(cache: Path) -> None:
    env = {"ARCHGUARD_CACHE_DIR": str(cache)}
    shown = run_main("cache", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "env" in shown.stdout and "envs/py312-aaaa" in shown.stdout
    assert "total" in shown.stdout and "7 entries" in shown.stdout
    data = json.loads(run_main("cache", "--format", "json", env=env).stdout)
    assert data["total"] == 6960 and len(data["entries"]) == 7
    dry = run_main("cache", "prune", "--older-than", "15", "--dry-run", env=env)
    assert dry.returncode == 0 and "would remove env envs/py312-aaaa" in dry.stdout
    assert (cache / "envs" / "py312-aaaa").is_dir()
    done = json.loads(
        run_main("cache", "prune", "--older-than", "15", "--format", "json", env=env).stdout
    )
    assert len(done["removed"]) == 3 and done["after"] == 560
    nothing = run_main("cache", "prune", env=env)
    assert nothing.returncode == 2 and "--older-than DAYS, --max-size SIZE" in nothing.stderr


def test_each_entry_names_the_sites_that_link_it_and_unlinked_prunes_the_rest(
    cache: Path, tmp_path: Path
) -> None:
    """Issue 57: a farm site links its cells' environments (``SITE/.farm/envs/<cell>``) and
    registers itself in the cache (as ``farm run`` does); ``archguard cache`` names each
    entry's sites, and ``cache prune --unlinked`` removes what no site links. A site that is
    gone is forgotten: what only it linked is then unlinked."""
    from archguard.detect.cachestore import register_site

    sites = [tmp_path / "site-a", tmp_path / "site-b"]
    for site in sites:
        (site / ".farm" / "envs").mkdir(parents=True)
        (site / ".farm" / "envs" / "py312").symlink_to(cache / "envs" / "py312-aaaa")
        register_site(cache, site)
        register_site(cache, site)  # once is enough: the same register
    (sites[1] / ".farm" / "envs" / "gone").symlink_to(tmp_path / "elsewhere")  # not the cache's
    assert len(list((cache / "sites").iterdir())) == 2
    linked = {e.path.name: e.sites for e in entries(cache)}
    assert linked["py312-aaaa"] == tuple(str(s.resolve()) for s in sites)
    assert all(not sites for name, sites in linked.items() if name != "py312-aaaa")
    env = {"ARCHGUARD_CACHE_DIR": str(cache)}
    shown = run_main("cache", env=env).stdout
    assert f"envs/py312-aaaa  linked by {sites[0].resolve()}  linked by {sites[1]}" in shown
    assert "sites" not in _names(entries(cache), cache)  # the register is no entry
    done = json.loads(run_main("cache", "prune", "--unlinked", "--format", "json", env=env).stdout)
    assert sorted(Path(e["path"]).name for e in done["removed"]) == [
        "0123abcd",
        "0123abcd.2",
        "cccc",
        "cuda-12-bbbb",
        "pkg-1.0",
    ]  # never uv's
    assert (cache / "envs" / "py312-aaaa").is_dir()
    for site in sites:
        shutil.rmtree(site)
    assert [e.sites for e in entries(cache) if e.path.name == "py312-aaaa"] == [()]
    assert list((cache / "sites").iterdir()) == []
    prune(cache, unlinked=True)
    assert not (cache / "envs" / "py312-aaaa").exists()


def test_budget_line_keeps_the_cache_within_the_budget(cache: Path) -> None:
    assert budget_line(cache, None).startswith("cache: 6.8 KiB in 7 entries")
    line = budget_line(cache, 1500)
    assert "ARCHGUARD_CACHE_MAX 1.5 KiB; 3 entries removed" in line
    assert sum(e.size for e in entries(cache)) <= 1500


def test_the_budget_counts_archguards_own_entries_not_uvs_or_pips(cache: Path) -> None:
    """uv's cache beside archguard's (never pruned) above the budget on its own: archguard's
    entries within the budget are all kept, not removed at every run."""
    _entry(cache, "pip", 9000, 0)
    done = prune(cache, max_size=7000)  # archguard's own: 6,910 bytes
    assert done.removed == [] and done.reached
    assert done.after == sum(e.size for e in entries(cache))  # what it holds, uv's included


_USER = """
import sys, time
from pathlib import Path
from archguard.detect.cachestore import mark_used
mark_used(Path(sys.argv[1]))
print("using", flush=True)
time.sleep(60)
"""


def test_an_entry_a_running_process_marked_used_is_kept_until_it_ends(cache: Path) -> None:
    overlay = cache / "build-env" / "cccc"
    user = subprocess.Popen(
        [sys.executable, "-c", _USER, str(overlay)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert user.stdout is not None and user.stdout.readline() == "using\n"
        done = prune(cache, older_than_days=0)
        assert [e.path for e in done.in_use] == [overlay] and overlay.is_dir()
    finally:
        user.kill()
        user.communicate()  # closes its pipe
    assert [e.path for e in prune(cache, older_than_days=0).removed] == [overlay]


def test_a_leftover_partial_directory_is_listed_and_pruned_unless_its_maker_runs(
    cache: Path,
) -> None:
    left = _entry(cache, "envs/.gone-1234.0123456789ab.partial", 700, 0)
    making = _entry(cache, "build-env/.dddd.ba9876543210.partial", 70, 0)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(cache / "build-env" / "dddd")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        kinds = {e.path: (e.kind, e.in_use) for e in entries(cache)}
        assert kinds[left] == ("partial", False) and kinds[making] == ("partial", True)
        done = prune(cache, older_than_days=1000)  # nothing that old: only the leftover goes
        assert [e.path for e in done.removed] == [left] and not left.exists()
        assert making.is_dir()
    finally:
        holder.kill()
        holder.communicate()  # closes its pipe


FARM = """\
[[cell]]
name = "c1"
python = "3.11"
torch = "torch==2.13.0"
cuda = "13.0"

[[package]]
name = "a"
source = "src/a"
config = { arch_list = "8.0" }
skip = [{ cell = "c1", reason = "not built in this test" }]
"""


def test_farm_run_keeps_the_cache_within_its_budget_and_says_its_size(
    cache: Path, tmp_path: Path
) -> None:
    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "a" / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "farm.toml").write_text(FARM)
    env = {"ARCHGUARD_CACHE_DIR": str(cache), "ARCHGUARD_CACHE_MAX": "lots"}
    refused = run_main("farm", "run", "farm.toml", "-o", "site", env=env, cwd=tmp_path)
    assert refused.returncode == 2 and "ARCHGUARD_CACHE_MAX 'lots'" in refused.stderr
    assert not (tmp_path / "site").exists()  # refused before anything
    env["ARCHGUARD_CACHE_MAX"] = "1500"
    done = run_main("farm", "run", "farm.toml", "-o", "site", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "entries removed" in done.stdout and "ARCHGUARD_CACHE_MAX 1.5 KiB" in done.stdout
    assert sum(e.size for e in entries(cache)) <= 1500
    del env["ARCHGUARD_CACHE_MAX"]
    again = run_main("farm", "run", "farm.toml", "-o", "site", env=env, cwd=tmp_path)
    listed = entries(cache)  # what is left, and what this run wrote
    shown = f"cache: {sum(e.size for e in listed)} B in {len(listed)} entries at {cache}"
    assert shown in again.stdout, again.stdout
