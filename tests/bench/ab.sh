#!/usr/bin/env bash
# A/B benchmark of two Strata trees, alternating BEFORE and AFTER runs so that machine load
# hits both equally:  for each round, for each benchmark: BEFORE then AFTER.
#
#   tests/bench/ab.sh BEFORE_TREE AFTER_TREE [ROUNDS] [OUT_DIR]
#   env: BENCHES="edge ai agent"  SECONDS_PER_RUN=5  EDGE_ARGS="--reference --workers 1 2"
#        DEADLINE=HH:MM (UTC; no new BEFORE/AFTER pair starts after it)
#        FIRST_ROUND=1 (to add rounds to an OUT_DIR that has some: ROUNDS more from there)
#        BENCH_FROM=TREE (the benchmark scripts of that tree run on both sides, so that both
#        measure the same way, e.g. an old tree with today's same-window upstream figures;
#        default: each tree its own). The tree measured is STRATA_TREE (edge_proxy.py starts
#        its services there) and cwd.
#
# Each tree runs with its own small "venv alias" (OUT/venv-<label>: the shared venv's
# site-packages and interpreter, with a bin/strata generated from that tree's pyproject entry
# point), because the benchmarks start `strata up` from `$(dirname sys.executable)/strata`
# and the shared venv's script points at the entry point of the tree it was installed from.
# cwd = the tree, PYTHONPATH = TREE:TREE/proto. The AI and agent benchmarks start `strata up`
# on fixed ports (+600, +700; the scripts have no option for the offset), so they run under
# `flock /tmp/strata-stack.lock`. The edge benchmark uses free ports (no lock).
# Every run records `uptime` before and after. Raw output: OUT/raw/<bench>-<label>-<round>.out;
# summary: python tests/bench/ab_summary.py OUT (tests/bench/ab_summary.py).
set -u
BEFORE=$(realpath "$1"); AFTER=$(realpath "$2"); ROUNDS=${3:-3}
OUT=${4:-/tmp/strata-ab}
BENCHES=${BENCHES:-"edge ai agent"}
SECS=${SECONDS_PER_RUN:-5}
EDGE_ARGS=${EDGE_ARGS:-"--reference --workers 1 2"}
VENV=${VENV:-$(pwd)/.venv}
LOCK=/tmp/strata-stack.lock
mkdir -p "$OUT/raw"
LOG="$OUT/runs.tsv"
[ -f "$LOG" ] || printf 'bench\tlabel\tround\tcommit\tstart_utc\tend_utc\trc\tload_before\tload_after\n' >"$LOG"

make_alias() {  # label tree
  local dir="$OUT/venv-$1" tree=$2 exe sp entry
  exe=$(sed -n 's/^executable = //p' "$VENV/pyvenv.cfg")
  sp=$(ls -d "$VENV"/lib/python3*/site-packages)
  rm -rf "$dir"; mkdir -p "$dir/bin" "$dir/lib/$(basename "$(dirname "$sp")")"
  cp "$VENV/pyvenv.cfg" "$dir/pyvenv.cfg"
  ln -s "$exe" "$dir/bin/python"
  ln -s "$sp" "$dir/lib/$(basename "$(dirname "$sp")")/site-packages"
  entry=$(sed -n 's/^strata = "\(.*\)"/\1/p' "$tree/pyproject.toml")
  cat >"$dir/bin/strata" <<EOF
#!$dir/bin/python
import sys
from ${entry%%:*} import ${entry##*:}
sys.exit(${entry##*:}())
EOF
  chmod +x "$dir/bin/strata"
}
make_alias before "$BEFORE"
make_alias after "$AFTER"

load() { cut -d' ' -f1-3 /proc/loadavg; }

BENCH_FROM=${BENCH_FROM:+$(realpath "$BENCH_FROM")}

run() {  # bench label tree round
  local bench=$1 label=$2 tree=$3 round=$4 py="$OUT/venv-$2/bin/python" cmd
  local out="$OUT/raw/$bench-$label-$round.out" scripts="${BENCH_FROM:-$3}/tests/bench"
  case $bench in
    edge)  cmd=("$py" "$scripts/edge_proxy.py" --runs 1 --seconds "$SECS" $EDGE_ARGS) ;;
    ai)    cmd=(flock "$LOCK" "$py" "$scripts/ai_gateway.py" --runs 1 --seconds "$SECS") ;;
    agent) cmd=(flock "$LOCK" "$py" "$scripts/agent_gateway.py" --runs 1 --seconds "$SECS") ;;
  esac
  local commit; commit=$(git -C "$tree" rev-parse --short HEAD)
  local lb la start end rc
  start=$(date -u +%H:%M:%S); lb=$(load)
  echo "[$start] $bench $label round $round ($commit): ${cmd[*]}" >&2
  (cd "$tree" && STRATA_TREE="$tree" PYTHONPATH="$tree:$tree/proto" "${cmd[@]}") >"$out" 2>"$out.err"
  rc=$?
  end=$(date -u +%H:%M:%S); la=$(load)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$bench" "$label" "$round" "$commit" \
    "$start" "$end" "$rc" "$lb" "$la" >>"$LOG"
  echo "[$end] done rc=$rc load $la" >&2
}

FIRST=${FIRST_ROUND:-1}
for round in $(seq "$FIRST" $((FIRST + ROUNDS - 1))); do
  for bench in $BENCHES; do
    if [ -n "${DEADLINE:-}" ] && [ "$(date -u +%H:%M)" \> "$DEADLINE" ]; then
      echo "deadline $DEADLINE passed: stopping before $bench round $round" >&2; break 2
    fi
    if [ $((round % 2)) -eq 1 ]; then  # the order alternates: running second costs a little
      run "$bench" before "$BEFORE" "$round"; run "$bench" after "$AFTER" "$round"
    else
      run "$bench" after "$AFTER" "$round"; run "$bench" before "$BEFORE" "$round"
    fi
  done
done
