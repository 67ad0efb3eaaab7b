#!/usr/bin/env bash
# tests/mutation/run.sh: the mutation check. Each entry of tests/mutation/mutations.txt
# breaks one promise of docs/guarantees.md on purpose (a snippet of code replaced), and the
# test that guarantees.md cites for the promise must then fail. The script copies the tree
# (tracked and untracked files, not ignored ones) to a work directory, builds it once, then
# for each mutation: applies it, rebuilds the cited test's target, runs that one test
# through ctest (STELE_TEST_FILTER), restores the file, and reports the mutation killed (the
# test failed or timed out) or survived (it passed). Before that, each cited test runs once
# on the unmutated copy and must pass, or a failure would prove nothing.
#
# usage: tests/mutation/run.sh [--keep] [--no-baseline] [--list|--check] [NAME...]
#   NAME...        run only these mutations (default: all)
#   --list         print the mutations and exit
#   --check        only check that each snippet occurs exactly once in this tree (no build)
#   --no-baseline  skip the run of each cited test on the unmutated copy
#   --keep         keep the work directory (printed at the end)
# Environment: STELE_MUTATION_DIR (work directory; default a new one under TMPDIR),
# STELE_MUTATION_JOBS (build jobs, default 2), STELE_MUTATION_TIMEOUT (seconds per test run,
# default 900). Exit status: 0 when every mutation was killed, 1 otherwise, 2 on a usage or
# setup error.
set -euo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
list="$src/tests/mutation/mutations.txt"
jobs=${STELE_MUTATION_JOBS:-2}
timeout_s=${STELE_MUTATION_TIMEOUT:-900}
keep=0 baseline=1 list_only=0 check_only=0
wanted=()
for arg in "$@"; do
    case $arg in
    --keep) keep=1 ;;
    --no-baseline) baseline=0 ;;
    --list) list_only=1 ;;
    --check) check_only=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $arg" >&2; exit 2 ;;
    *) wanted+=("$arg") ;;
    esac
done

# ---- the list: blocks of "=== NAME", "file:", "test: BINARY TEST", "promise:", then the
# snippet between "--- find" and "--- replace" and its replacement up to "--- end".
names=() files=() tests=() promises=() finds=() repls=()
parse_list() {
    local mode=head line name='' file='' test='' promise='' find='' repl='' n=0
    while IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        case $mode in
        find)
            if [ "$line" = '--- replace' ]; then mode=repl; else find+="$line"$'\n'; fi ;;
        repl)
            if [ "$line" = '--- end' ]; then
                if [ -z "$name" ] || [ -z "$file" ] || [ -z "$test" ] || [ -z "$find" ]; then
                    echo "run.sh: $list:$n: mutation '$name' lacks file, test or snippet" >&2
                    exit 2
                fi
                names+=("$name") files+=("$file") tests+=("$test") promises+=("$promise")
                finds+=("$find") repls+=("$repl")
                name='' file='' test='' promise='' find='' repl='' mode=head
            else
                repl+="$line"$'\n'
            fi ;;
        head)
            case $line in
            '' | '#'*) ;;
            '=== '*) name=${line#=== } ;;
            'file: '*) file=${line#file: } ;;
            'test: '*) test=${line#test: } ;;
            'promise: '*) promise=${line#promise: } ;;
            '--- find') mode=find find='' ;;
            *) echo "run.sh: $list:$n: unexpected line: $line" >&2; exit 2 ;;
            esac ;;
        esac
    done <"$list"
    [ "$mode" = head ] || { echo "run.sh: $list ends inside a mutation" >&2; exit 2; }
}
parse_list

is_wanted() {
    [ ${#wanted[@]} -eq 0 ] && return 0
    local w
    for w in "${wanted[@]}"; do [ "$w" = "$1" ] && return 0; done
    return 1
}

# Replaces the unique occurrence of FIND in FILE with REPL (or, with REPL "-", only checks
# it is there); 1 when it is not there exactly once (the list no longer matches the code).
apply_mutation() {
    local file=$1 find=$2 repl=$3 content rest n
    [ -f "$file" ] || return 1
    content=$(cat "$file"; printf x)
    content=${content%x}
    rest=${content//"$find"/}
    n=$(((${#content} - ${#rest}) / ${#find}))
    [ "$n" = 1 ] || return 1
    [ "$repl" = - ] || printf '%s' "${content/"$find"/"$repl"}" >"$file"
}

if [ "$check_only" = 1 ]; then
    n_stale=0
    for i in "${!names[@]}"; do
        is_wanted "${names[$i]}" || continue
        if ! apply_mutation "$src/${files[$i]}" "${finds[$i]}" -; then
            echo "stale: ${names[$i]}: its snippet is not in ${files[$i]} exactly once"
            n_stale=$((n_stale + 1))
        fi
    done
    echo "mutation list: ${#names[@]} mutations, $n_stale stale"
    [ "$n_stale" = 0 ]
    exit
fi
if [ "$list_only" = 1 ]; then
    for i in "${!names[@]}"; do
        printf '%-40s %-28s %s\n' "${names[$i]}" "${files[$i]}" "${tests[$i]}"
    done
    exit 0
fi
for w in "${wanted[@]}"; do
    found=0
    for n in "${names[@]}"; do [ "$n" = "$w" ] && found=1; done
    [ "$found" = 1 ] || { echo "run.sh: no mutation named $w" >&2; exit 2; }
done

# ---- the copy and its build
work=${STELE_MUTATION_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/stele-mutation-XXXXXX")}
mkdir -p "$work/src"
# mktemp makes it 0700; the root-only tests run the built stele as users they make, who
# must reach it (test_status_group).
chmod 755 "$work"
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
echo "mutation check: copying the tree to $work/src"
(cd "$src" && git ls-files -z --cached --others --exclude-standard) |
    while IFS= read -r -d '' path; do
        [ -e "$src/$path" ] || continue # deleted in the work tree, not yet committed
        mkdir -p "$work/src/$(dirname "$path")"
        cp -p "$src/$path" "$work/src/$path"
    done
build="$work/build"
log="$work/log"
mkdir -p "$log"
echo "mutation check: building (log: $log/build.txt)"
if ! { cmake -S "$work/src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSTELE_BUILD_TESTS=ON -DSTELE_WERROR=OFF &&
    cmake --build "$build" -j"$jobs"; } >"$log/build.txt" 2>&1; then
    tail -20 "$log/build.txt" >&2
    echo "run.sh: the unmutated copy does not build" >&2
    exit 2
fi

# Runs "BINARY TEST" through ctest; returns ctest's status (124 on a timeout), and fails
# with 3 when the named test did not run at all (a filter that matches nothing passes).
run_test() {
    local binary=${1%% *} test=${1#* } out=$2 rc=0
    STELE_TEST_FILTER="$test" timeout "$timeout_s" \
        ctest --test-dir "$build" -R "^${binary}\$" -V --no-tests=error >"$out" 2>&1 || rc=$?
    if [ "$rc" = 0 ] && ! grep -qF "[ RUN      ] $test" "$out"; then
        return 3
    fi
    return "$rc"
}

if [ "$baseline" = 1 ]; then
    seen=' '
    for i in "${!names[@]}"; do
        is_wanted "${names[$i]}" || continue
        case $seen in *" ${tests[$i]} "*) continue ;; esac
        seen+="${tests[$i]} "
        echo "mutation check: baseline ${tests[$i]}"
        rc=0
        run_test "${tests[$i]}" "$log/baseline.txt" || rc=$?
        if [ "$rc" != 0 ]; then
            tail -30 "$log/baseline.txt" >&2
            echo "run.sh: ${tests[$i]} fails (status $rc) without a mutation" >&2
            exit 2
        fi
    done
fi

results=()
n_killed=0 n_other=0
for i in "${!names[@]}"; do
    name=${names[$i]}
    is_wanted "$name" || continue
    file="$work/src/${files[$i]}"
    binary=${tests[$i]%% *}
    start=$(date +%s)
    echo "mutation check: $name (${files[$i]}; ${tests[$i]})"
    result=''
    if [ ! -f "$file" ]; then
        result='stale: no such file'
    else
        cp -p "$file" "$work/original"
        if ! apply_mutation "$file" "${finds[$i]}" "${repls[$i]}"; then
            result='stale: snippet not found once'
        elif ! cmake --build "$build" -j"$jobs" --target "$binary" >"$log/$name.build.txt" 2>&1; then
            result='build failed'
        else
            rc=0
            run_test "${tests[$i]}" "$log/$name.txt" || rc=$?
            case $rc in
            0) result='SURVIVED' ;;
            3) result='test did not run' ;;
            124) result='killed (timeout)' ;;
            *) result='killed' ;;
            esac
        fi
        cp -p "$work/original" "$file"
        touch "$file" # newer than the mutated build: the next build recompiles it
    fi
    case $result in killed*) n_killed=$((n_killed + 1)) ;; *) n_other=$((n_other + 1)) ;; esac
    secs=$(($(date +%s) - start))
    echo "mutation check: $name: $result (${secs} s)"
    results+=("| \`$name\` | \`${files[$i]}\` | \`${tests[$i]#* }\` [${binary}] | $result | $secs |")
done
# The last mutation's file was restored after its build: leave the tree built as it is.
cmake --build "$build" -j"$jobs" >/dev/null 2>&1 || true

echo
echo "| mutation | file | cited test | result | s |"
echo "|---|---|---|---|---|"
printf '%s\n' "${results[@]}"
echo
echo "$n_killed killed, $n_other not killed, of $((n_killed + n_other)) mutations"
[ "$keep" = 1 ] && echo "work directory kept: $work"
[ "$n_other" = 0 ]
