#!/usr/bin/env python3
"""What `stele` prints as JSON reads back, in Python's json and in jq, as what went in.

Usage: json_roundtrip.py --inserted FILE [--records FILE]... [--events FILE]...
                         [--objects FILE]... [--test-server]
  --inserted  the events given to `stele insert`, one JSON object per line
  --records   `stele tail` JSON Lines ({"seq":N,...,"event":{...}}): the events, in order,
              must be the inserted ones (seqs increasing)
  --events    `stele tail -o cat` lines (the events alone): the inserted ones, in order
  --objects   JSON Lines that carry no event (`stele status --json`, `stele ship
              --dead-letters`): each line must be one object both readers take
Python: each event equals the inserted one in type and value (a float with the same bits,
-0.0 included; an int as an int, exactly; key order kept); every double's text is the
shortest that reads back (Python's repr); no NaN/Infinity literal appears.
jq: `jq -c` of each event (.event of a record) is `jq -c` of the inserted event, so jq
reads the output as it reads the input (it keeps numbers as doubles, for both).
--test-server: the outputs went through the FerretDB test server, which refuses nested
arrays (those events are dead letters there) and stores -0.0 as 0.0: the events with a
nested array are not expected, and a zero's sign is not compared. A real MongoDB keeps
both, and the tests run without the flag against one (STELE_TEST_MONGO_URI).
Exit 0 when all holds, 1 with the differences on stderr, 77 when jq is not installed.
"""
import argparse
import json
import shutil
import struct
import subprocess
import sys


def refuse_constant(name):
    raise ValueError("non-standard JSON literal " + name)


def same(a, b, zero_sign=True):
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if not zero_sign and a == 0.0 and b == 0.0:
            return True
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k], zero_sign) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y, zero_sign) for x, y in zip(a, b))
    return a == b


def has_nested_array(value, in_array=False):
    if isinstance(value, list):
        return in_array or any(has_nested_array(v, True) for v in value)
    if isinstance(value, dict):
        return any(has_nested_array(v, False) for v in value.values())
    return False


def jq_zero_sign_free(text):
    """jq's line with -0 written 0, as a server without a zero's sign stores it."""
    return text.replace(":-0,", ":0,").replace(":-0}", ":0}").replace("[-0,", "[0,") \
        .replace(",-0,", ",0,").replace(",-0]", ",0]").replace("[-0]", "[0]")


def strict_loads(text):
    texts = []
    value = json.loads(text, parse_constant=refuse_constant,
                       parse_float=lambda t: texts.append(t) or float(t))
    for t in texts:
        if repr(float(t)) != t:
            raise ValueError("double %s is not its shortest form %s" % (t, repr(float(t))))
    return value


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [line for line in f.read().split("\n") if line]


def jq_lines(program, path):
    out = subprocess.run(["jq", "-c", program, path], capture_output=True, check=False)
    if out.returncode != 0:
        raise ValueError("jq %s %s: %s" % (program, path, out.stderr.decode(errors="replace")))
    return out.stdout.decode("utf-8").split("\n")[:-1]


def check_events(kind, path, events, inserted, problems, zero_sign):
    if len(events) != len(inserted):
        problems.append("%s %s: %d events, %d inserted" % (kind, path, len(events), len(inserted)))
    for n, (got, want) in enumerate(zip(events, inserted), start=1):
        if not same(got, want, zero_sign):
            problems.append("%s %s, event %d: read %r, inserted %r" % (kind, path, n, got, want))


def jq_equal(got, want, zero_sign):
    if zero_sign:
        return got == want
    return [jq_zero_sign_free(t) for t in got] == [jq_zero_sign_free(t) for t in want]


def check_records(path, inserted, inserted_jq, problems, zero_sign):
    try:
        records = [strict_loads(line) for line in lines(path)]
    except ValueError as e:
        problems.append("records %s: %s" % (path, e))
        return
    seqs = [r["seq"] for r in records]
    if seqs != sorted(set(seqs)):
        problems.append("records %s: seqs not increasing: %r" % (path, seqs))
    check_events("records", path, [r["event"] for r in records], inserted, problems, zero_sign)
    if not jq_equal(jq_lines(".event", path), inserted_jq, zero_sign):
        problems.append("records %s: jq reads other events than it reads inserted" % path)


def check_cat(path, inserted, inserted_jq, problems, zero_sign):
    try:
        events = [strict_loads(line) for line in lines(path)]
    except ValueError as e:
        problems.append("events %s: %s" % (path, e))
        return
    check_events("events", path, events, inserted, problems, zero_sign)
    if not jq_equal(jq_lines(".", path), inserted_jq, zero_sign):
        problems.append("events %s: jq reads other events than it reads inserted" % path)


def check_objects(path, problems):
    texts = lines(path)
    for n, text in enumerate(texts, start=1):
        try:
            if not isinstance(strict_loads(text), dict):
                problems.append("objects %s, line %d: not an object" % (path, n))
        except ValueError as e:
            problems.append("objects %s, line %d: %s" % (path, n, e))
    if len(jq_lines("type", path)) != len(texts):
        problems.append("objects %s: jq reads another number of values" % path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inserted", required=True)
    parser.add_argument("--records", action="append", default=[])
    parser.add_argument("--events", action="append", default=[])
    parser.add_argument("--objects", action="append", default=[])
    parser.add_argument("--test-server", action="store_true")
    args = parser.parse_args()
    if shutil.which("jq") is None:
        print("json_roundtrip: jq is not installed (tools/setup.sh --test installs it)",
              file=sys.stderr)
        return 77
    problems = []
    inserted = [json.loads(line) for line in lines(args.inserted)]
    inserted_jq = jq_lines(".", args.inserted)
    if args.test_server:
        kept = [i for i, e in enumerate(inserted) if not has_nested_array(e)]
        inserted = [inserted[i] for i in kept]
        inserted_jq = [inserted_jq[i] for i in kept]
    zero_sign = not args.test_server
    try:
        for path in args.records:
            check_records(path, inserted, inserted_jq, problems, zero_sign)
        for path in args.events:
            check_cat(path, inserted, inserted_jq, problems, zero_sign)
        for path in args.objects:
            check_objects(path, problems)
    except ValueError as e:
        problems.append(str(e))
    for p in problems:
        print("json_roundtrip: " + p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
