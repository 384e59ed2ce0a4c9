#!/usr/bin/env bash
# Runs one libFuzzer harness: fuzz/run.sh TARGET [EXECS] [libFuzzer options...]
#   TARGET  ptx_parser | ptx_compile | launch_args | gpu_expression | config
#   EXECS   stop after this many executions (-runs); without it, run QGPU_FUZZ_TIME seconds (default 60)
# The build is QGPU_FUZZ_BUILD (default build-fuzz; configure it as fuzz/README.md says). The corpus
# grows in <build>/fuzz-corpus/TARGET, seeded from <build>/fuzz-corpus/seeds/TARGET (fuzz/seeds.sh);
# crashes, leaks and timeouts land in <build>/fuzz-artifacts/TARGET/. Exit status: libFuzzer's (0 = nothing found).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${1:?usage: fuzz/run.sh TARGET [EXECS] [libFuzzer options...]}"
shift
execs=""
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then execs="$1"; shift; fi
build="${QGPU_FUZZ_BUILD:-$root/build-fuzz}"
bin="$build/bin/qgpu_fuzz_$target"
[ -x "$bin" ] || { echo "run.sh: no $bin (cmake --build $build --target qgpu_fuzz_$target)" >&2; exit 2; }
seeds="$build/fuzz-corpus/seeds/$target"
[ -d "$seeds" ] || "$root/fuzz/seeds.sh" "$build/fuzz-corpus/seeds" >/dev/null
corpus="$build/fuzz-corpus/$target"
artifacts="$build/fuzz-artifacts/$target"
mkdir -p "$corpus" "$artifacts"

opts=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/")
case "$target" in
  ptx_parser|ptx_compile) opts+=(-max_len=8192) ;;
  *) opts+=(-max_len=4096) ;;
esac
[ -f "$root/fuzz/dicts/$target.dict" ] && opts+=(-dict="$root/fuzz/dicts/$target.dict")
if [ -n "$execs" ]; then opts+=(-runs="$execs"); else opts+=(-max_total_time="${QGPU_FUZZ_TIME:-60}"); fi

# Leaks are checked at exit of every input that allocated more than it freed (LSan, part of ASan).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
echo "run.sh: $bin ${opts[*]} $* $corpus $seeds" >&2
exec "$bin" "${opts[@]}" "$@" "$corpus" "$seeds"
