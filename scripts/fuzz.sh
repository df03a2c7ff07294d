#!/bin/sh
# make fuzz: builds each libFuzzer target (Fuzz/<Target>) with the fuzzer and
# address sanitizers and runs it, from the committed seeds (Fuzz/Corpus) plus
# a working corpus kept in .build/fuzz/corpus. A crash input is written to
# Fuzz/Crashes/<Target>/ (commit it: the tests replay every one) and the run
# fails. Prints the executions of each target.
#
# Usage: scripts/fuzz.sh SECONDS RUNS TARGET...
#   each target stops after SECONDS or, when RUNS is not 0, RUNS executions,
#   whichever comes first; FUZZ_MAX_LEN caps an input (default 4096 bytes:
#   the size limits themselves are tested with megabyte inputs elsewhere);
#   FUZZ_BUILD (default .build/fuzz) holds the build, corpus, logs and summary,
#   so two invocations with different FUZZ_BUILD run side by side.
set -eu
cd "$(dirname "$0")/.."
seconds=$1 runs=$2
shift 2
export SWIFT_BACKTRACE=enable=no
# libFuzzer checks every input for leaks (an input that leaks, twice, is a
# crash); the check at exit would only report OpenSSL's own exit-time state.
export ASAN_OPTIONS=detect_leaks=1
export LSAN_OPTIONS=leak_check_at_exit=0
build=${FUZZ_BUILD:-.build/fuzz}
summary=$build/summary.txt
mkdir -p "$build" && : > "$summary"
failed=""
# --sanitize=fuzzer alone instruments only the target's own module (Swift 6.3
# passes the coverage flags to the main module's compile jobs, not to the
# library modules'), which leaves the fuzzer blind to the parsers: the
# coverage is asked for explicitly, and each binary's counters are checked.
rm -rf "$build"/*-unknown-linux-gnu
for target in "$@"; do
    if ! swift build --build-path "$build" --sanitize=fuzzer --sanitize=address -Xswiftc -DFUZZING \
        -Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp --product "Fuzz$target" > "$build/build-$target.log" 2>&1; then
        grep -E "error:" "$build/build-$target.log" >&2 || true
        echo "fuzz: building Fuzz$target failed (whole output in $build/build-$target.log)" >&2
        exit 1
    fi
done
for target in "$@"; do
    counters=$(printf '%d' "0x$(objdump -h "$build/debug/Fuzz$target" | awk '/__sancov_cntrs/ { print $3 }')")
    if [ "$counters" -lt 3000 ]; then
        echo "fuzz: Fuzz$target has only $counters coverage counters: its modules were not instrumented" >&2
        exit 1
    fi
    mkdir -p "$build/corpus/$target" "Fuzz/Crashes/$target"
    log="$build/$target.log"
    limits="-max_total_time=$seconds"
    [ "$runs" -gt 0 ] && limits="$limits -runs=$runs"
    # shellcheck disable=SC2086
    if "$build/debug/Fuzz$target" $limits -print_final_stats=1 -max_len="${FUZZ_MAX_LEN:-4096}" \
        -artifact_prefix="Fuzz/Crashes/$target/" "$build/corpus/$target" "Fuzz/Corpus/$target" > "$log" 2>&1; then
        outcome=ok
    else
        outcome="FAILED (see $log)"
        failed="$failed $target"
    fi
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    line=$(printf '%-18s %12s executions %8s/s  %5s counters  corpus %5s  %s' "$target" "${executions:-?}" "${speed:-?}" \
        "$counters" "$(ls "$build/corpus/$target" | wc -l)" "$outcome")
    echo "$line" | tee -a "$summary"
done
[ -z "$failed" ] || { echo "fuzz: crashes in:$failed (inputs in Fuzz/Crashes)"; exit 1; }
