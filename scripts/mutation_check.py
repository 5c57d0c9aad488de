#!/usr/bin/env python3
"""Break each guarded property on purpose and check that its test fails.

Usage: python scripts/mutation_check.py [--only NAME ...]

Each mutation replaces one snippet of source with a broken version, runs the tests that
guard that property, and restores the file (also on Ctrl-C). A mutation whose tests still
pass is reported as SURVIVED and makes the exit status 1. Run it from a clean checkout; it
refuses to run when the files it edits have uncommitted changes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    also: tuple[tuple[str, str], ...] = ()  # further (old, new) edits in the same file

    def apply(self, text: str) -> str | None:
        for old, new in ((self.old, self.new), *self.also):
            if old not in text:
                return None
            text = text.replace(old, new, 1)
        return text


MUTATIONS = [
    Mutation(
        "launcher-keeps-its-tokens",
        "src/archguard/jobserver.py",
        "        client.give(got)\n        client.close()\n\n\nif __name__",
        "        client.close()\n\n\nif __name__",
        (
            "tests/test_jobserver.py::test_the_launcher_takes_free_tokens_for_threads_and_gives_them_back",
            "tests/test_jobserver.py::test_a_launcher_stopped_by_a_signal_gives_its_tokens_back",
        ),
    ),
    Mutation(
        "launcher-takes-every-token",
        "src/archguard/jobserver.py",
        "        got = client.take(device_compiles(argv) - 1)",
        "        got = client.take(64)",
        (
            "tests/test_jobserver.py::test_the_launcher_takes_free_tokens_for_threads_and_gives_them_back",
        ),
    ),
    Mutation(
        "ninja-given-no-jobserver",
        "src/archguard/_integration/jobserver.py",
        "        jobserver.ninja_shim(shim, where, makeflags)",
        "        jobserver.ninja_shim(shim, where, '-j64')",
        (
            "tests/test_jobserver.py::test_two_concurrent_builds_never_run_more_compiles_than_tokens",
        ),
    ),
    Mutation(
        "cmake-build-outside-the-jobserver",
        "src/archguard/frontend/wheel.py",
        "        environment.update(joined)  # a backend the hook never runs in: the "
        "jobserver's tokens",
        "        environment.update({})  # a backend the hook never runs in: the "
        "jobserver's tokens",
        (
            "tests/test_jobserver_backends.py::test_a_scikit_build_core_build_runs_no_more_compiles_than_the_jobserver_gives",
        ),
    ),
    Mutation(
        "makefiles-given-ninja",
        "src/archguard/frontend/jobserver.py",
        "            chosen = generator_chosen(environ, source, pip_args)"
        " if backend == SKBUILD else None",
        "            chosen = None",
        (
            "tests/test_jobserver_backends.py::test_a_project_that_chooses_makefiles_builds_in_the_jobserver_as_it_did",
        ),
    ),
    Mutation(
        "stale-fifo-kept",
        "src/archguard/jobserver.py",
        "        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):",
        "        if True:",
        ("tests/test_jobserver.py::test_a_killed_holder_leaves_no_stuck_tokens_for_the_next_run",),
    ),
    Mutation(
        "makeflags-fifo-to-old-make",
        "src/archguard/_integration/jobserver.py",
        "        if make_reads_fifo(path):  # make 4.4 and later: its sub-builds take tokens too",
        "        if True:  # make 4.4 and later: its sub-builds take tokens too",
        (
            "tests/test_jobserver.py::test_the_build_picks_a_ninja_that_reads_the_jobserver_else_falls_back",
        ),
    ),
    Mutation(
        "nvcc-temporary-named-by-pid",
        "src/archguard/_integration/reproducible.py",
        '        nvcc.insert(0, "-objtemp")',
        "        pass",
        (
            "tests/test_reproducible.py::test_one_extension_from_two_checkouts_at_two_times_is_the_same_wheel",
        ),
    ),
    Mutation(
        "record-names-the-checkout-path",
        "src/archguard/_integration/build.py",
        "    record = path_free(wheel_record(session.resolution, session), project_root(dist))",
        "    record = wheel_record(session.resolution, session)",
        (
            "tests/test_reproducible.py::test_one_extension_from_two_checkouts_at_two_times_is_the_same_wheel",
        ),
    ),
    Mutation(
        "farm-page-only-at-the-end",
        "src/archguard/farm/run.py",
        "            self.progress(outcome)",
        "            pass",
        ("tests/test_farm_plan.py::test_the_page_follows_a_run_as_it_goes",),
    ),
    Mutation(
        "farm-index-swap-leaves-a-gap",
        "src/archguard/farm/publish.py",
        "    temporary.replace(link)  # rename(2): atomic",
        "    link.unlink(missing_ok=True)\n    time.sleep(0.001)\n    temporary.replace(link)",
        (
            "tests/test_farm_publish.py::test_a_reader_never_sees_an_index_naming_a_missing_or_other_wheel",
        ),
    ),
    Mutation(
        "farm-previous-index-removed-at-once",
        "src/archguard/farm/publish.py",
        "        if old.name not in (fresh.name, previous):",
        "        if old.name != fresh.name:",
        (
            "tests/test_farm_publish.py::test_a_reader_never_sees_an_index_naming_a_missing_or_other_wheel",
        ),
    ),
    Mutation(
        "farm-kept-wheel-bytes-unchecked",
        "src/archguard/farm/ledger.py",
        "        if found != ledger.sha256[name]:",
        "        if False:",
        ("tests/test_farm_publish.py::test_a_kept_ledger_is_checked_not_trusted",),
    ),
    Mutation(
        "farm-index-from-this-run-only",
        "src/archguard/farm/publish.py",
        "    current = [ledgers[j] for j in jobs if j in ledgers]\n"
        "    current = [r for r in current if all(p.is_file() for p in r.stored(site))]",
        "    current = [ledgers[j] for j in list(jobs)[:1] if j in ledgers]\n"
        "    current = [r for r in current if all(p.is_file() for p in r.stored(site))]",
        (
            "tests/test_farm_publish.py::test_the_indexes_come_from_every_ledger_and_a_removed_job_leaves",
        ),
    ),
    Mutation(
        "farm-job-id-digests-the-path",
        "src/archguard/farm/plan.py",
        '        return {"tree": tree_digest(path, cache), "git": git_describe(path)}',
        '        return {"tree": str(path)}',
        (
            "tests/test_farm_publish.py::test_the_same_manifest_at_two_paths_plans_the_same_ids",
            "tests/test_farm_publish.py::test_each_input_changes_exactly_the_jobs_it_touches",
        ),
    ),
    Mutation(
        "farm-policy-by-path",
        "src/archguard/farm/plan.py",
        '        raw["policy"] = {"sha256": file_sha256(package.config.policy)}',
        "        pass",
        ("tests/test_farm_publish.py::test_each_input_changes_exactly_the_jobs_it_touches",),
    ),
    Mutation(
        "farm-lock-not-held",
        "src/archguard/farm/publish.py",
        "        if not held.enter_context(hold_lock(path, wait=False)):",
        "        if not True:",
        (
            "tests/test_farm_publish.py::test_one_run_holds_a_site_and_a_killed_holder_is_taken_over",
        ),
    ),
    Mutation(
        "wheel-version-unchecked",
        "src/archguard/frontend/wheel.py",
        "    if release is not None:\n        problems +=",
        "    if False:\n        problems +=",
        ("tests/test_farm.py::test_a_wheel_that_is_not_the_sources_release_is_refused",),
    ),
    Mutation(
        "wheel-refused-stays-in-the-wheelhouse",
        "src/archguard/frontend/wheel.py",
        "    if built.ok:\n        return built\n",
        "    if True:\n        return built\n",
        ("tests/test_farm.py::test_archguard_wheel_fails_a_cpu_fallback_and_names_the_switch",),
    ),
    Mutation(
        "farm-environment-failure-not-in-its-ledger",
        "src/archguard/farm/run.py",
        "            self.to_ledger(failed, attempted=False)  # --assemble (another runner) names the cause",  # noqa: E501
        "            pass",
        (
            "tests/test_farm_plan.py::test_a_cell_whose_environment_fails_is_in_its_ledgers_for_the_assembly",
        ),
    ),
    Mutation(
        "ptx-entry-ends-at-the-first-brace",
        "src/archguard/detect/sass.py",
        "            if opened and depth == 0:",
        '            if line == "}":',
        ("tests/test_verify.py::test_a_real_kernel_that_asserts_is_real_in_its_ptx",),
    ),
    Mutation(
        "setup-py-gpu-ask-unread",
        "src/archguard/frontend/failures.py",
        "    stopped = _NO_GPU.search(text) or (asks_gpu and _SETUP_RAISED.search(text))",
        "    stopped = _NO_GPU.search(text)",
        (
            "tests/test_farm.py::test_a_setup_py_that_refuses_in_its_own_words_is_named_with_its_line",
        ),
    ),
    Mutation(
        "stub-gate-skips-every-arch",
        "src/archguard/detect/sass.py",
        "    return any(n <= STUB_MAX_BYTES for n in sizes.values())",
        "    return False",
        ("tests/test_verify.py::test_an_arch_is_disassembled_only_where_a_stub_is_possible",),
    ),
    Mutation(
        "stub-gate-disassembles-every-arch",
        "src/archguard/detect/sass.py",
        "        if functions and not stub_possible(functions):",
        "        if False:",
        ("tests/test_verify.py::test_an_arch_is_disassembled_only_where_a_stub_is_possible",),
    ),
    Mutation(
        "lint-own-macros-stay-unknown",
        "src/archguard/lint/expressions.py",
        "        self.absent: set[str] = set(absent) | (set(owned) - set(self.table))",
        "        self.absent: set[str] = set(absent)",
        ("tests/test_lint_corpus.py::test_cutlass_sm90a_wrappers_trap_on_a_plain_sm_90_cubin",),
    ),
    Mutation(
        "lint-undecided-chain-silent",
        "src/archguard/lint/preprocessor.py",
        "            if ev.arch and alive is MAYBE and chain_unknown:",
        "            if False:",
        ("tests/test_lint_corpus.py::test_llama_cpp_tables_once_the_build_says_it_is_not_hip",),
    ),
    Mutation(
        "nvcc-flags-make-a-cuda-extension",
        "src/archguard/_integration/build.py",
        "    direct = [e for e in extensions if _has_cuda_sources(e)]",
        "    direct = [e for e in extensions if _has_cuda_sources(e) or 'nvcc' in "
        "(e.extra_compile_args or {})]",
        ("tests/test_hook.py::test_which_extensions_are_cuda",),
    ),
    Mutation(
        "arch-specific-suffix-dropped",
        "src/archguard/nvcc/plan.py",
        '    if mode == "keep":\n        wanted = ',
        "    if False:\n        wanted = ",
        (
            "tests/test_arch_specific.py::test_a_kernel_that_only_assembles_for_sm_90a_builds"
            "_in_farm_mode_with_the_full_list",
        ),
    ),
    Mutation(
        "no-floor-from-hard-coded-targets",
        "src/archguard/nvcc/plan.py",
        "    if intent.rule is Rule.FLOOR and intent.floor is not None:\n        floor = ",
        "    if False:\n        floor = ",
        ("tests/test_plan.py::test_the_lowest_hard_coded_target_is_the_floor",),
    ),
    Mutation(
        "ptx-net-stays-beside-an-a-only-arch",
        "src/archguard/nvcc/plan.py",
        "        if net in plain or not specific or net not in displaced:",
        "        if True:",
        ("tests/test_plan.py::test_the_net_never_sits_beside_an_a_only_arch",),
    ),
    Mutation(
        "proved-error-targets-kept",
        "src/archguard/nvcc/plan.py",
        "    dropped_by_proof = _apply_proofs(proven or {}, cubins, ptx, kept)",
        "    dropped_by_proof = _apply_proofs({}, cubins, ptx, kept)",
        ("tests/test_plan.py::test_a_proved_error_drops_its_targets_whatever_asked_for_them",),
    ),
    Mutation(
        "lint-family-cubin-against-plain-compile",
        "src/archguard/lint/guards.py",
        "    floor = _RANK[own.suffix] if own is not None else lowest - 1",
        "    floor = _RANK[own.suffix] if own is not None else -1",
        ("tests/test_lint_corpus.py::test_tilelang_family_values_and_toolkit_guards",),
    ),
    Mutation(
        "lint-host-launch-guard-not-a-missing-kernel",
        "src/archguard/lint/guards.py",
        "    if walk.states[key][configs.host] is True and launches(",
        "    if False and launches(",
        (
            "tests/test_lint_corpus.py::test_flashinfer_host_launcher_decides_which_images_have"
            "_the_kernels",
        ),
    ),
    Mutation(
        "lint-unused-value-reported",
        "src/archguard/lint/guards.py",
        "        if holds_nothing(region.body) or reading.uses.get(key, False) is None:",
        "        if holds_nothing(region.body):",
        (
            "tests/test_lint_corpus.py::test_flashinfer_grid_dependency_guard_reads_false_from"
            "_cutlass_family_macros",
        ),
    ),
    Mutation(
        "lint-false-is-unknown",
        "src/archguard/lint/expressions.py",
        '        elif tok in ("true", "false") and tok not in macros.table:',
        '        elif tok == "true" and tok not in macros.table:',
        (
            "tests/test_lint_corpus.py::test_flashinfer_grid_dependency_guard_reads_false_from"
            "_cutlass_family_macros",
        ),
    ),
    Mutation(
        "lint-arch-computed-values-ignored",
        "src/archguard/lint/guards.py",
        "    _value_findings(reading, configs, torch_targets, report)\n",
        "",
        (
            "tests/test_lint_corpus.py::test_vllm_a_constexpr_computed_from_the_arch_is_judged"
            "_where_it_is_used",
        ),
    ),
    Mutation(
        "lint-host-instantiation-not-a-missing-kernel",
        "src/archguard/lint/regions.py",
        "_LAUNCH.search(text) or _INSTANTIATION.search(text):",
        "_LAUNCH.search(text):",
        (
            "tests/test_lint_corpus.py::test_vllm_a_host_dtype_switch_decides_which_images_have"
            "_the_bf16_kernels",
        ),
    ),
    Mutation(
        "lint-walks-guarded-headers-again",
        "src/archguard/lint/preprocessor.py",
        "        if before is not None and _covered(before, active):\n            return True",
        "        if False:\n            return True",
        ("tests/test_lint.py::test_a_guarded_header_is_walked_once_per_state",),
    ),
    Mutation(
        "farm-mode-speaks-to-unrelated-builds",
        "src/archguard/_integration/build.py",
        "        if opted and extensions:",
        "        if extensions:",
        ("tests/test_unrelated.py",),
    ),
    Mutation(
        "in-build-verification-off",
        "src/archguard/_integration/build.py",
        "    verify_build(cmd, session, [e.name for e in cuda], started)",
        "    pass",
        (
            "tests/test_farm.py::test_a_cmake_file_that_hard_codes_its_arches_is_stopped_by_the"
            "_in_build_check",
        ),
    ),
    Mutation(
        "lint-ignores-feature-macros",
        "src/archguard/lint/targets.py",
        '        if arch.suffix == "a":\n            out["__CUDA_ARCH_SPECIFIC__"]',
        '        if False:\n            out["__CUDA_ARCH_SPECIFIC__"]',
        (
            "tests/test_lint.py::test_a_feature_guard_is_reported_for_plain_9_0_and_not_for_9_0a",
            "tests/test_lint.py::test_what_each_target_defines_is_what_nvcc_defines",
        ),
    ),
    Mutation(
        "lint-ptx-devices-see-their-own-arch",
        "src/archguard/lint/guards.py",
        "        index = out.targets.index(Target(image.name, arch))",
        "        index = out.targets.index(Target(image.name, arch)) - 1",
        (
            "tests/test_lint.py::test_a_device_reached_only_through_ptx_is_evaluated_with_that"
            "_ptxs_arch",
        ),
    ),
    Mutation(
        "derive-ignores-the-gap-decision",
        "src/archguard/core/derive.py",
        "            if decided is not None and decided.arch in below:",
        "            if False:",
        ("tests/test_derive.py::test_derive_reproduces_every_policy_row_and_its_exceptions",),
    ),
    Mutation(
        "parallel-ignores-max-jobs",
        "src/archguard/nvcc/parallel.py",
        "    if jobs is not None:\n        n_jobs, jobs_from",
        "    if False:\n        n_jobs, jobs_from",
        ("tests/test_parallel.py::test_the_choice_at_the_edges",),
    ),
    Mutation(
        "parallel-two-threads-per-core",
        "src/archguard/nvcc/parallel.py",
        "        share = min(cores, slots) // cuda_jobs",
        "        share = min(2 * cores, slots) // cuda_jobs",
        ("tests/test_parallel.py::test_the_choice_at_the_edges",),
    ),
    Mutation(
        "yaml-alias-defences-off",
        "src/archguard/core/plain_yaml.py",
        "    def compose_node(",
        "    def _unused_compose_node(",
        ("tests/test_policy.py::test_alias_bomb_is_refused_quickly_in_bounded_memory",),
        also=(("MAX_NODES = 50_000", "MAX_NODES = 10**12"),),
    ),
    Mutation(
        "yaml-reader-error-escapes",
        "src/archguard/core/plain_yaml.py",
        "    loader: _PlainLoader | None = None\n    try:\n        loader = _PlainLoader(text)",
        "    loader: _PlainLoader | None = _PlainLoader(text)\n    try:\n        pass",
        ("tests/test_fuzz.py",),
    ),
    Mutation(
        "yaml-tags-allowed",
        "src/archguard/core/plain_yaml.py",
        "        if node.tag not in _PLAIN_TAGS:",
        "        if False:",
        ("tests/test_policy.py::test_yaml_that_is_not_plain_data_is_refused",),
    ),
    Mutation(
        "yaml-duplicate-keys-allowed",
        "src/archguard/core/plain_yaml.py",
        "                if key.value in seen:",
        "                if False:",
        ("tests/test_policy.py::test_yaml_that_is_not_plain_data_is_refused",),
    ),
    Mutation(
        "env-not-restored",
        "src/archguard/_integration/build.py",
        "    finally:\n        for name, value in before.items():\n"
        "            if value is None:\n                os.environ.pop(name, None)\n"
        "            else:\n                os.environ[name] = value",
        "    finally:\n        pass",
        ("tests/test_side_effects.py::test_environment_and_extension_arguments_restored",),
    ),
    Mutation(
        "network-call",
        "src/archguard/settings/inputs.py",
        "    env = os.environ if environ is None else environ\n",
        "    env = os.environ if environ is None else environ\n"
        "    __import__('socket').create_connection(('127.0.0.1', 9), timeout=1)\n",
        ("tests/test_side_effects.py::test_no_network_and_no_writes",),
    ),
    Mutation(
        "shell-subprocess",
        "src/archguard/detect/tools.py",
        "            argv,\n            input=stdin,",
        "            ' '.join(argv),\n            input=stdin,",
        ("tests/test_side_effects.py::test_only_nvcc_with_fixed_arguments_and_no_shell",),
        (("            shell=False,", "            shell=True,"),),
    ),
    Mutation(
        "writes-a-cache-file",
        "src/archguard/settings/inputs.py",
        "    warnings = [*project.warnings(), *unknown_env_warnings(env)]\n",
        "    warnings = [*project.warnings(), *unknown_env_warnings(env)]\n"
        "    Path(os.environ.get('HOME', '/tmp'), '.archguard-cache').write_text('x')\n",
        ("tests/test_side_effects.py::test_no_network_and_no_writes",),
    ),
    Mutation(
        "unordered-gencode",
        "src/archguard/nvcc/flags.py",
        '    flags = [f"-gencode=arch={a.compute},code={a.sm}" for a in sorted(targets.cubins)]',
        '    flags = [f"-gencode=arch={a.compute},code={a.sm}" for a in targets.cubins]',
        (
            "tests/test_side_effects.py::test_same_inputs_give_byte_identical_output_across_hash_seeds",
        ),
    ),
    Mutation(
        "hook-speaks-to-everyone",
        "src/archguard/_integration/setuptools_hook.py",
        "    root = project_root(dist)\n",
        "    root = project_root(dist)\n"
        "    print('archguard: checking', file=__import__('sys').stderr)\n",
        ("tests/test_hook.py::test_unrelated_project_imports_nothing_heavy_and_is_left_alone",),
    ),
    Mutation(
        "hook-imports-core",
        "src/archguard/_integration/setuptools_hook.py",
        '    if getattr(dist, "_archguard_hooked", False):\n        return\n',
        '    if getattr(dist, "_archguard_hooked", False):\n        return\n'
        "    import archguard.core.resolve  # noqa\n",
        ("tests/test_hook.py::test_unrelated_project_imports_nothing_heavy_and_is_left_alone",),
    ),
    Mutation(
        "no-ptx-gap-net",
        "src/archguard/core/resolve.py",
        "            if chosen_cubin(self.current, device.cc) is not None:\n"
        "                continue",
        "            continue",
        (
            "tests/test_resolve.py::test_resolution_invariants",
            "tests/test_resolve.py::test_role_ii_adds_ptx_below_the_major_gap_when_nobody"
            "_declared_one",
        ),
    ),
    Mutation(
        "torch-clamp-off",
        "src/archguard/core/decisions.py",
        "        runnable = [d for d in served if runs_on(torch.targets, d.cc)]",
        "        runnable = list(served)",
        ("tests/test_resolve.py::test_resolution_invariants",),
    ),
    Mutation(
        "unknown-arch-dropped-silently",
        "src/archguard/core/arch.py",
        "    if arch in known:\n        return arch",
        "    if True:\n        return arch",
        ("tests/test_arch.py::test_bad_entries_name_the_entry_and_where_it_came_from",),
    ),
    Mutation(
        "config-typo-ignored",
        "src/archguard/settings/config.py",
        "        if key not in CONFIG_KEYS:",
        "        if False:",
        ("tests/test_config.py::test_bad_tables_name_file_key_and_fix",),
    ),
    Mutation(
        "traceback-on-error",
        "src/archguard/_cli/__init__.py",
        "    except ArchguardError as exc:\n"
        "        from archguard.reports.text import error_json, render_error",
        "    except KeyError as exc:\n"
        "        from archguard.reports.text import error_json, render_error",
        (
            "tests/test_errors.py::test_reachable_from_the_command_line",
            "tests/test_cli.py::test_under_format_json_an_error_is_one_json_object_on_stdout",
        ),
    ),
    Mutation(
        "lint-reports-a-trap-the-device-would-take",
        "src/archguard/lint/guards.py",
        "        if is_stub(region.body) and not launches(region.body, reading.kernels):",
        "        if False:",
        (
            "tests/test_lint.py::test_a_trap_the_devices_own_compile_would_take_is_not_a_hazard",
            "tests/test_lint_corpus.py::test_cute_traps_the_loaded_image_skips_for_the_real_path_"
            "are_no_finding",
        ),
    ),
    Mutation(
        # issue 33: the precision rule swallowing the first one (a kernel whose loaded image
        # is the trap branch must still be a finding)
        "lint-a-trap-in-the-loaded-image-hides-the-kernel",
        "src/archguard/lint/guards.py",
        "        if is_stub(region.body) and not launches(region.body, reading.kernels):",
        "        if (is_stub(region.body) or (taken is not None and is_stub(taken.body))) and not "
        "launches(region.body, reading.kernels):",
        (
            "tests/test_lint_corpus.py::test_natten_hopper_fmha_traps_on_a_plain_sm_90_cubin",
            "tests/test_lint_corpus.py::test_cutlass_435_cooperative_gemm_needs_sm_90a_or_the_"
            "12x_family",
        ),
    ),
    Mutation(
        "lint-cuda-version-left-unknown",
        "src/archguard/lint/outside.py",
        'OUTSIDE_NAMES = frozenset({"CUDA_VERSION"})',
        "OUTSIDE_NAMES: frozenset[str] = frozenset()",
        (
            "tests/test_lint.py::test_cuda_version_after_headers_that_do_not_reach_cuda_h_is_"
            "undefined",
        ),
    ),
    Mutation(
        "lint-rewalks-under-maybe",
        "src/archguard/lint/preprocessor.py",
        "n is False or b is True or (b is MAYBE and n is MAYBE)",
        "n is False or b is True",
        (
            "tests/test_lint.py::test_guarded_headers_reached_under_an_undecided_branch_are_"
            "walked_once",
        ),
    ),
    Mutation(
        "explain-ignores-setup-py-threads",
        "src/archguard/reports/parallel.py",
        "chosen = asked(environ, settings.package, _setup_py_threads(setup_py))",
        "chosen = asked(environ, settings.package)",
        ("tests/test_parallel.py::test_explain_reads_the_threads_setup_py_writes",),
    ),
    Mutation(
        "why-what-if-outside-the-run",
        "src/archguard/core/resolve.py",
        "        run.steps_2_to_4()\n        found = ",
        "        run.requested()\n        run.toolkit_clamp()\n        run.torch_clamp()\n"
        "        found = ",
        (
            "tests/test_resolve.py::test_why_for_an_arch_nobody_asked_for_is_what_the_resolution_would_do",
        ),
    ),
    Mutation(
        "farm-resume-drops-the-wheels-facts",
        "src/archguard/farm/ledger.py",
        '            [WheelFacts.from_json(d) for d in data.get("details") or []],',
        "            [],",
        ("tests/test_farm_publish.py::test_a_kept_ledger_keeps_its_wheels_facts",),
    ),
    Mutation(
        "failure-cxx-standard-unnamed",
        "src/archguard/frontend/failures.py",
        "    refused = _TORCH_STD.search(text)",
        "    refused = None",
        (
            "tests/test_farm_plan.py::test_a_package_that_compiles_below_torchs_cxx_standard_is_named",
        ),
    ),
    Mutation(
        "line-index-from-one-cell",
        "src/archguard/farm/publish.py",
        "        lines.setdefault(cell.cuda.tag, []).append(wheels)",
        "        lines[cell.cuda.tag] = [wheels]",
        (
            "tests/test_farm_publish.py::test_a_cuda_lines_index_lists_every_cell_with_metadata_beside_each_wheel",
        ),
    ),
    Mutation(
        "stable-abi-wheel-not-preferred-on-the-line",
        "src/archguard/farm/wheelmeta.py",
        "            if any(_serves(s, torch) and _covers(t, tags) for s, t in serving):",
        "            if False:",
        (
            "tests/test_farm_publish.py::test_a_cuda_lines_index_lists_every_cell_with_metadata_beside_each_wheel",
        ),
    ),
    Mutation(
        "no-metadata-beside-the-wheel",
        "src/archguard/farm/publish.py",
        "    if meta is not None:",
        "    if False:",
        (
            "tests/test_farm_publish.py::test_a_cuda_lines_index_lists_every_cell_with_metadata_beside_each_wheel",
            "tests/test_farm_publish.py::test_pip_picks_the_installed_torchs_wheel_from_the_line_reading_only_metadata",
        ),
    ),
    Mutation(
        "variants-json-not-published",
        "src/archguard/farm/publish.py",
        "    wheels = [*wheels, *(store_bytes(site, n, data) for n, data in variants_json(site, wheels))]",  # noqa: E501
        "    wheels = list(wheels)",
        (
            "tests/test_farm_publish.py::test_variants_are_published_beside_their_wheel_and_uv_installs_the_one_that_serves",
        ),
    ),
    Mutation(
        "which-ignores-the-gpu",
        "src/archguard/user/which.py",
        "        tier = device_coverage(held, gpu).tier",
        "        tier = Tier.NATIVE",
        ("tests/test_which.py::test_each_reason_a_wheel_does_not_fit_is_named",),
    ),
    Mutation(
        "which-ignores-the-torch-pin",
        "src/archguard/user/which.py",
        '        out.reasons.append(f"no wheel for this torch: it requires {pin}, you have {here.torch}")',  # noqa: E501
        "        pass",
        ("tests/test_which.py::test_the_command_for_each_torch_pins_the_wheel_built_for_it",),
    ),
    Mutation(
        "cmake-forced-line-not-named",
        "src/archguard/frontend/cmake.py",
        "        yield from _arch_settings([c], cached=True)",
        "        pass",
        (
            "tests/test_cmake_files.py::test_each_line_that_forces_arches_is_named_and_a_guarded_default_is_not",
        ),
    ),
    Mutation(
        "function-argument-not-followed",
        "src/archguard/frontend/cmake_calls.py",
        "            passed[p] = e",
        "            pass",
        (
            "tests/test_cmake_calls.py::test_a_literal_list_passed_to_a_function_is_refused_naming_the_call",
        ),
    ),
    Mutation(
        "toolkit-root-shadows-the-toolkit",
        "src/archguard/detect/cudalibs.py",
        "        if name not in own_include",
        "        if True",
        (
            "tests/test_cudalibs.py::test_an_assembled_root_links_the_toolkit_then_what_the_wheels_add",
        ),
    ),
    Mutation(
        "wrapper-nvcc-taken-as-the-toolkit",
        "src/archguard/detect/nvcc.py",
        "        real = _behind_wrapper(found)",
        "        real = None",
        (
            "tests/test_build_systems.py::test_an_nvcc_on_path_that_is_a_wrapper_script_names_the_toolkit_behind_it",
        ),
    ),
    Mutation(
        "row-is-the-toolkits-own",
        "src/archguard/core/rows.py",
        "    return RowChoice(\n        torch.cuda,\n",
        "    return RowChoice(\n        toolkit.version,\n",
        (
            "tests/test_row_rule.py::test_a_newer_minor_takes_the_torch_builds_row_clamped_by_its_own_facts",
        ),
    ),
    Mutation(
        "rule-cell-pins-a-range",
        "src/archguard/farm/families.py",
        'Requirement(f"torch=={release.version}")',
        'Requirement(f"torch>={release.version}")',
        (
            "tests/test_families.py::test_each_minor_becomes_its_latest_release_for_each_python_it_has",
        ),
    ),
    Mutation(
        "requires-python-not-skipped",
        "src/archguard/farm/plan.py",
        "            excluded = excludes(package.source, python_release(cell.python))",
        "            excluded = None",
        (
            "tests/test_families.py::test_a_package_that_excludes_a_cells_python_is_skipped_at_plan_time",
        ),
    ),
    Mutation(
        "arch-variable-spelled-without-cmake-words",
        "src/archguard/nvcc/flags.py",
        '        if cmake or any("-" in t for t in tokens):',
        '        if any("-" in t for t in tokens):',
        ("tests/test_flags.py::test_the_list_in_a_packages_own_spelling",),
    ),
]


def run_tests(tests: tuple[str, ...], timeout: float = 300) -> int:
    """pytest's exit status; a run past ``timeout`` counts as failed (e.g. a YAML bomb)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return 124
    return proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    dirty = subprocess.run(
        ["git", "status", "--porcelain", *{m.path for m in chosen}],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if dirty.strip():
        print(f"uncommitted changes in files this would edit:\n{dirty}", file=sys.stderr)
        return 2
    survived = 0
    print(f"{'mutation':<32} {'result':<9} tests")
    for m in chosen:
        path = REPO / m.path
        original = path.read_text()
        mutated = m.apply(original)
        if mutated is None:
            print(f"{m.name:<32} {'STALE':<9} snippet not found in {m.path}")
            survived += 1
            continue
        try:
            path.write_text(mutated)
            rc = run_tests(m.tests)
        finally:
            path.write_text(original)
        verdict = "caught" if rc != 0 else "SURVIVED"
        survived += rc == 0
        print(f"{m.name:<32} {verdict:<9} {' '.join(t.split('::')[-1] for t in m.tests)}")
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main())
