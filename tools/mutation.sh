#!/usr/bin/env bash
# A mutation pass over the durability-critical code, from any checkout.
#
#   tools/mutation.sh PASS [MUTANT-GLOB...]     PASS: engine | sqlite | postgres | worker
#   tools/mutation.sh results PASS              the survivors of the last PASS
#
# Each pass copies this checkout's committed tree (git archive HEAD, plus the
# uncommitted changes of tracked and new files under tests/) to
# ${MUTATION_DIR:-/tmp/stalwart-mutation}/PASS, writes mutmut's settings into
# that copy, and runs mutmut there with the tests that guard the pass's code.
# mutmut lives in a virtualenv of its own (${MUTMUT_VENV:-/tmp/mutenv}),
# made on first use. See docs/mutation.md.
set -euo pipefail

root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
venv="${MUTMUT_VENV:-/tmp/mutenv}"
base="${MUTATION_DIR:-/tmp/stalwart-mutation}"
children="${MUTATION_CHILDREN:-2}"

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage

if [ "$1" = results ]; then
    [ $# -eq 2 ] || usage
    cd "$base/$2"
    exec "$venv/bin/mutmut" results
fi

pass=$1; shift
E=tests/core; D=tests/durable; S=tests/stores
case "$pass" in
engine)
    files="src/stalwart/core/engine/engine.py"
    tests="$E;$D/test_durable.py;$D/test_hostile_rows.py;$D/test_edge_cases.py;$S/test_sqlite_fencing.py;-k;not postgres"
    globs=(
        "stalwart.core.engine.engine.xǁEngineǁ_full__mutmut_*"
        "stalwart.core.engine.engine.xǁEngineǁ_plain__mutmut_*"
        "stalwart.core.engine.engine.xǁEngineǁ_attempts__mutmut_*"
        "stalwart.core.engine.engine.xǁEngineǁ_failure__mutmut_*"
        "stalwart.core.engine.engine.xǁEngineǁrun_root__mutmut_*"
        "stalwart.core.engine.engine.xǁEngineǁreplayed_value__mutmut_*"
        "stalwart.core.engine.engine.xǁEngineǁrecord_step__mutmut_*"
        "stalwart.core.engine.engine.xǁEngineǁwrite__mutmut_*"
        "stalwart.core.engine.engine.xǁEngineǁrecord_value__mutmut_*"
        "stalwart.core.engine.engine.xǁEngineǁhalt__mutmut_*"
    ) ;;
sqlite)
    Q=src/stalwart/stores/sqlite
    files="$Q/writer.py;$Q/claims.py"
    tests="$S;$D/test_durable.py;$D/test_hostile_rows.py;$D/test_queues.py;$D/test_workers.py;-k;not postgres and not pg_"
    # The write path and the claims; not the connection's set-up (open,
    # close, from_url, __init__) nor the reads, whose mutants cost a pass
    # of every test each and guard no durability rule.
    globs=()
    for f in _begin _flush _write _write_alone _abort _rewrite _insert_all _insert \
             record_step _winner _refuse_lost _end_unless_batched _committed _flush_quietly; do
        globs+=("stalwart.stores.sqlite.writer.xǁSQLiteBaseǁ${f}__mutmut_*")
    done
    for f in claim _claim claim_due _claim_queued _within_limits heartbeat; do
        globs+=("stalwart.stores.sqlite.claims.xǁSQLiteClaimsǁ${f}__mutmut_*")
    done ;;
postgres)
    Q=src/stalwart/stores/postgres
    files="$Q/steps.py;$Q/claims.py"
    tests="$S;$D/test_durable.py;-k;not sqlite and not memory"
    globs=(
        "stalwart.stores.postgres.steps.xǁPostgresStepsǁ_write_together__mutmut_*"
        "stalwart.stores.postgres.steps.xǁPostgresStepsǁ_check_step_fence__mutmut_*"
        "stalwart.stores.postgres.claims.xǁPostgresClaimsǁ_take__mutmut_*"
    ) ;;
worker)
    files="src/stalwart/runner/worker.py"
    # Not tests/schedules/test_cli.py nor test_example.py: their subprocesses
    # drop PYTHONPATH, so they import the work tree, not the mutants.
    tests="$D/test_durable.py;$D/test_hostile_rows.py;$D/test_workers.py;$D/test_queues.py;$D/test_pins.py;$D/test_logging.py;$D/test_edge_cases.py;tests/stores/test_claim_policy_filter.py;tests/schedules/test_ticking.py;tests/schedules/test_workers.py;tests/schedules/test_define.py;tests/runner;-k;not postgres"
    globs=(
        "stalwart.runner.worker.xǁWorkerǁ_claim_own__mutmut_*"
        "stalwart.runner.worker.xǁWorkerǁ_claim_due__mutmut_*"
        "stalwart.runner.worker.xǁWorkerǁ_loop__mutmut_*"
        "stalwart.runner.worker.xǁWorkerǁbeat__mutmut_*"
    ) ;;
*) usage ;;
esac
[ $# -gt 0 ] && globs=("$@")

if [ ! -x "$venv/bin/mutmut" ]; then
    python -m venv --system-site-packages "$venv"
    "$venv/bin/pip" install -q mutmut==3.8.1
fi

dir="$base/$pass"
rm -rf "$dir" && mkdir -p "$dir"
git -C "$root" archive HEAD | tar -x -C "$dir"
# Tests being written for this pass count too (tracked edits and new files).
git -C "$root" ls-files -m -o --exclude-standard -- tests | while read -r f; do
    mkdir -p "$dir/$(dirname "$f")" && cp "$root/$f" "$dir/$f"
done

cd "$dir"
# Test paths that do not exist in this checkout are left out of the selection.
IFS=';' read -r -a parts <<< "$tests"
sel=""
for p in "${parts[@]}"; do
    case "$p" in
    tests/*) [ -e "$p" ] || continue ;;
    esac
    sel+="\"$p\", "
done
IFS=';' read -r -a paths <<< "$files"
only=$(printf '"%s", ' "${paths[@]}")
cat >> pyproject.toml <<TOML

[tool.mutmut]
source_paths = ["src"]
also_copy = ["examples", "README.md", "docs", "benchmarks", "tools"]
only_mutate = [${only%, }]
pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:randomly"]
pytest_add_cli_args_test_selection = [${sel%, }]
use_git_change_detection = false
process_isolation = "forkserver"
timeout_multiplier = 4.0
timeout_constant = 10.0
TOML
mkdir -p mutants/src   # exists before Python starts, so PYTHONPATH can point at it
PYTHONPATH="$dir/mutants/src" "$venv/bin/mutmut" run --max-children "$children" "${globs[@]}" || true
"$venv/bin/mutmut" results > results.txt || true
echo "tools/mutation.sh $pass: $(grep -c ': survived' results.txt || true) survived," \
     "$(grep -c ': timeout' results.txt || true) timed out; list: $dir/results.txt"
