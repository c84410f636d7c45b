#!/usr/bin/env bash
# Runs one step of `make test` and prints what a reader needs from it: a line per test suite
# (an XCTest class, a pytest file), every failure in full, and the runners' own closing lines
# (XCTest's "Executed N tests, with N failures" of the whole run, pytest's "N passed"), which CI
# reads. Everything the step printed, a line per test included, goes to .build/test-logs/STEP.log,
# named in the first line. Exits with the step's exit code.
#
# The step's test counts (passed, failed) go to .build/test-logs/STEP.counts; `--verdict` sums
# every step's into the one line `make test` ends with, `N passed, N failed`, and `--reset`
# forgets them (the first thing `make test` does).
#
#   bash Tests/summarize.sh STEP COMMAND [ARGS...]
#   bash Tests/summarize.sh --verdict
#   bash Tests/summarize.sh --reset
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
logs="$root/.build/test-logs"
case "${1:-}" in
--reset)
    rm -f "$logs"/*.counts
    exit 0
    ;;
--verdict)
    cat "$logs"/*.counts 2>/dev/null | awk '{ p += $1; f += $2 } END { printf "%d passed, %d failed\n", p, f }'
    exit 0
    ;;
esac
if [ $# -lt 2 ]; then
    echo "usage: bash Tests/summarize.sh STEP COMMAND [ARGS...] | --verdict | --reset" >&2
    exit 2
fi
step="$1"
shift
mkdir -p "$logs"
log="$logs/$step.log"
counts="$logs/$step.counts"
rm -f "$counts"
echo "$step: $* (every line: ${log#"$root"/})"

# The filter reads the step's output as it comes, so a long step shows its suites as they end.
"$@" 2>&1 | tee "$log" | awk -v step="$step" -v counts="$counts" '
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
        if (closing != "") {
            n = $0; sub(/^[ \t]*Executed /, "", n); sub(/ tests?, with .*/, "", n)
            f = $0; sub(/.*, with /, "", f); sub(/ failures?.*/, "", f)
            total_passed += n - f; total_failed += f
            print closing; print; next
        }
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
    # A parametrized id may hold spaces ("test[Topic=not base64url] PASSED"): the outcome is the
    # first field after the file that is one.
    /^[^ ]+\.py::.* (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)( |$)/ {
        file = $1; sub(/::.*/, "", file)
        if (file != pyfile) { flush_file(); pyfile = file }
        for (i = 2; i <= NF; i++) if ($i ~ /^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)$/) break
        if ($i == "PASSED" || $i == "XPASS") py_passed++
        else if ($i == "FAILED") py_failed++
        else if ($i == "ERROR") py_errors++
        else py_skipped++
        next
    }
    # The closing line of pytest: "==== 223 passed, 1 failed, 10 warnings in 78.36s ====", or without
    # the rules under -q; every run of the step adds to its counts.
    /^(=+ )?[0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?)(, [0-9]+ [a-z]+)* in [0-9.]+s/ {
        line = $0; sub(/^=+ /, "", line); sub(/ in [0-9.]+s.*/, "", line)
        k = split(line, parts, ", ")
        for (j = 1; j <= k; j++) {
            split(parts[j], nw, " ")
            if (nw[2] == "passed" || nw[2] == "xpassed") total_passed += nw[1]
            else if (nw[2] == "failed" || nw[2] == "error" || nw[2] == "errors") total_failed += nw[1]
        }
    }
    /^=/ { flush_file() }
    /^[.sxXEF]+ *(\[ *[0-9]+%\])?$/ { next }
    /^=+ test session starts =+$/ || /^(platform|rootdir:|configfile:|plugins:|cachedir:) / { next }
    /^=+ (FAILURES|ERRORS) =+$/ { saw_failure = 1 }
    NF == 0 { next }
    { print }
    END {
        flush_file()
        printf "%d %d\n", total_passed, total_failed > counts
        exit (saw_failure ? 3 : 0)
    }
'
statuses=("${PIPESTATUS[@]}")
status=${statuses[0]}
printed_failure=$(( statuses[2] == 3 ))
if [ "$status" -ne 0 ]; then
    # A step that failed with no failing test counted (a crash, a build error) counts as one.
    read -r passed failed <"$counts" 2>/dev/null || { passed=0; failed=0; }
    [ "$failed" -gt 0 ] || echo "$passed 1" >"$counts"
    if [ "$printed_failure" -eq 0 ]; then
        # Nothing above says why (a crash, a script error): the end of the step's output does.
        echo "$step: the last 40 lines of ${log#"$root"/}:"
        tail -n 40 "$log"
    fi
    echo "$step: FAILED (exit $status); every line: ${log#"$root"/}"
fi
exit "$status"
