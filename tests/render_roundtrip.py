#!/usr/bin/env python3
"""Checks that Python's json module reads stele's JSON back to the values written.

Reads pairs of lines on stdin (test_render.c writes them): a record line as `stele tail`
prints it, then a Python expression of the event it holds, built from exact forms
(float.fromhex, bytes.fromhex(...).decode()) that owe nothing to stele's JSON. Values must
match in type and value: a double stays a float with the same bits (-0.0 included), an
integer an int, key order is kept. NaN and the infinities are {"$numberDouble": ...};
the non-standard literals NaN/Infinity must never appear. Every double's text must also be
the shortest that reads back, written as Python's repr() writes it. Exit 0 when all match,
1 if not.
"""
import json
import re
import struct
import sys

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
SOURCE = 'src "\u00e9"'


def refuse_constant(name):
    raise ValueError("non-standard JSON literal " + name)


def same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def double_texts(line):
    texts = []
    json.loads(line, parse_float=lambda t: texts.append(t), parse_constant=refuse_constant)
    return texts


def check(number, line, spec):
    got = json.loads(line, parse_constant=refuse_constant)
    for text in double_texts(line):
        if repr(float(text)) != text:
            return "double %s is not its shortest form %s" % (text, repr(float(text)))
    want = eval(spec, {"__builtins__": {}}, {"bytes": bytes, "float": float})
    if list(got) != ["seq", "ts", "src", "event"]:
        return "fields are %r" % list(got)
    if not same(got["seq"], number) or got["src"] != SOURCE or not TS.match(got["ts"]):
        return "seq, ts or src wrong: %r %r %r" % (got["seq"], got["ts"], got["src"])
    if not same(got["event"], want):
        return "event differs:\n  read  %r\n  wrote %r" % (got["event"], want)
    return None


def main():
    lines = sys.stdin.read().split("\n")
    failures = 0
    pairs = 0
    for i in range(0, len(lines) - 1, 2):
        pairs += 1
        try:
            why = check(pairs, lines[i], lines[i + 1])
        except ValueError as e:
            why = "not JSON Python reads: %s" % e
        if why is not None:
            failures += 1
            if failures <= 5:
                print("record %d: %s\n  line: %s" % (pairs, why, lines[i]), file=sys.stderr)
    print("render_roundtrip: %d records, %d differ" % (pairs, failures), file=sys.stderr)
    return 1 if failures or pairs == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
