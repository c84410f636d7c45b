#!/usr/bin/env bash
# Runs one step of `make test` and prints what a reader needs from it: a line per test suite
# (an XCTest class, a pytest file), every failure in full, and the runners' own closing lines
# (XCTest's "Executed N tests, with N failures" of the whole run, pytest's "N passed"), which CI
# reads. Everything the step printed, a line per test included, goes to .build/test-logs/STEP.log,
# named in the first line. Exits with the step's exit code.
#
#   bash Tests/summarize.sh STEP COMMAND [ARGS...]
set -uo pipefail

if [ $# -lt 2 ]; then
    echo "usage: bash Tests/summarize.sh STEP COMMAND [ARGS...]" >&2
    exit 2
fi
step="$1"
shift
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$root/.build/test-logs"
log="$root/.build/test-logs/$step.log"
echo "$step: $* (every line: ${log#"$root"/})"

# The filter reads the step's output as it comes, so a long step shows its suites as they end.
"$@" 2>&1 | tee "$log" | awk -v step="$step" '
    function flush_failure() { in_failure = 0 }
    function flush_file() {
        if (pyfile == "") return
        printf "  %s %s: %d passed%s%s%s\n", (py_failed + py_errors > 0 ? "FAIL" : "ok  "), pyfile, py_passed,
               (py_failed ? ", " py_failed " failed" : ""), (py_errors ? ", " py_errors " errors" : ""),
               (py_skipped ? ", " py_skipped " skipped" : "")
        pyfile = ""; py_passed = py_failed = py_errors = py_skipped = 0
    }
    # A failure message may run over several lines: they follow until the next test or suite.
    in_failure && /^(Test Case |Test Suite |\[[0-9]+\/[0-9]+\] )/ { flush_failure() }
    in_failure { print; next }

    # XCTest. A suite line is followed by its "Executed" line; the suite of the whole run ("All
    # tests", or "Selected tests" under --filter) is printed as XCTest writes it.
    /^Test Suite .* started at / { next }
    /^Test Suite .* (passed|failed) at / {
        # The name between the quotes (matched as any character: awk has no portable escape).
        suite = $0
        sub(/^Test Suite ./, "", suite); sub(/. (passed|failed) at .*/, "", suite)
        result = ($0 ~ / failed at /) ? "FAIL" : "ok  "
        closing = (suite == "All tests" || suite == "Selected tests") ? $0 : ""
        awaiting_counts = 1
        next
    }
    awaiting_counts && /^[ \t]*Executed [0-9]+ tests?, with / {
        awaiting_counts = 0
        if (closing != "") { print closing; print; next }
        if (suite ~ /\.xctest$/) next
        n = $0; sub(/^[ \t]*Executed /, "", n); sub(/ tests?, with .*/, "", n)
        f = $0; sub(/.*, with /, "", f); sub(/ failures?.*/, "", f)
        t = $0; sub(/.* in /, "", t); sub(/ \(.*/, "", t)
        printf "  %s %s: %s test%s, %s failure%s, %s s\n", result, suite, n, (n == 1 ? "" : "s"), f, (f == 1 ? "" : "s"), t
        failures += f
        next
    }
    /^Test Case .* started/ || /^Test Case .* passed \(/ { next }
    /^Test Case .* failed \(/ { print; next }
    /: error: / || /Fatal error/ || /fatal error/ { print; in_failure = 1; saw_failure = 1; next }

    # swift build: its progress lines only.
    /^\[[0-9]+\/[0-9]+\] / || /^Building for / || /^Compiling / || /^Write / { next }

    # pytest with -v: "path.py::test PASSED [ 40%]", a line per test (kept in the log), becomes
    # a line per file with its counts, printed when the next file starts or a section begins.
    /^[^ ]+\.py::[^ ]+ (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)( |$)/ {
        file = $1; sub(/::.*/, "", file)
        if (file != pyfile) { flush_file(); pyfile = file }
        if ($2 == "PASSED" || $2 == "XPASS") py_passed++
        else if ($2 == "FAILED") py_failed++
        else if ($2 == "ERROR") py_errors++
        else py_skipped++
        next
    }
    /^=/ { flush_file() }
    /^[.sxXEF]+ *(\[ *[0-9]+%\])?$/ { next }
    /^=+ test session starts =+$/ || /^(platform|rootdir:|configfile:|plugins:|cachedir:) / { next }
    /^=+ (FAILURES|ERRORS) =+$/ { saw_failure = 1 }
    NF == 0 { next }
    { print }
    END { flush_file(); exit (saw_failure ? 3 : 0) }
'
statuses=("${PIPESTATUS[@]}")
status=${statuses[0]}
printed_failure=$(( statuses[2] == 3 ))
if [ "$status" -ne 0 ]; then
    if [ "$printed_failure" -eq 0 ]; then
        # Nothing above says why (a crash, a script error): the end of the step's output does.
        echo "$step: the last 40 lines of ${log#"$root"/}:"
        tail -n 40 "$log"
    fi
    echo "$step: FAILED (exit $status); every line: ${log#"$root"/}"
fi
exit "$status"
