#!/usr/bin/env bash
# Runs a command and checks how it ended.
#   expect.sh [--exit N|nonzero] [--stderr RE] [--stdout RE] [--one-line-error] [--stdin FILE] -- CMD ARGS...
# --one-line-error: stderr is exactly one line. A crash (signal, "terminate
# called", a sanitizer report) always fails the check; an exit code of 128 or
# more counts as a signal unless it is the one --exit asks for (Ctrl-C: 130).
set -u
want_exit=0 stderr_re="" stdout_re="" one_line=0 stdin=/dev/null
while [ $# -gt 0 ]; do
  case "$1" in
    --exit) want_exit="$2"; shift 2 ;;
    --stderr) stderr_re="$2"; shift 2 ;;
    --stdout) stdout_re="$2"; shift 2 ;;
    --one-line-error) one_line=1; shift ;;
    --stdin) stdin="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "expect.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err" <"$stdin"
rc=$?
fail() {
  echo "FAIL: $*"
  echo "command: $*"
  echo "exit code: $rc"
  echo "--- stdout ---"; head -c 4000 "$out"
  echo "--- stderr ---"; head -c 4000 "$err"
  exit 1
}
[ "$rc" -ge 128 ] && [ "$rc" != "$want_exit" ] && fail "crashed (signal $((rc - 128)))"
grep -qE "terminate called|Segmentation fault|Aborted|AddressSanitizer|stack trace" "$err" && fail "crash output on stderr"
if [ "$want_exit" = nonzero ]; then
  [ "$rc" -ne 0 ] || fail "expected a non-zero exit"
else
  [ "$rc" -eq "$want_exit" ] || fail "expected exit $want_exit"
fi
if [ -n "$stderr_re" ]; then grep -qE -- "$stderr_re" "$err" || fail "stderr does not match /$stderr_re/"; fi
if [ -n "$stdout_re" ]; then grep -qE -- "$stdout_re" "$out" || fail "stdout does not match /$stdout_re/"; fi
if [ "$one_line" = 1 ]; then
  lines=$(wc -l <"$err")
  [ "$lines" -eq 1 ] || fail "expected exactly one line on stderr, got $lines"
fi
echo "ok"
