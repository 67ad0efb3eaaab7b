#!/usr/bin/env python3
"""Python's json module reads what `stele insert` took back from `stele tail` unchanged.

Usage: json_readback.py INSERTED TAIL PRETTY STATUS
  INSERTED  the events given to `stele insert`, one JSON object per line
  TAIL      `stele tail -n all` output: {"seq":N,...,"event":{...}} per line
  PRETTY    `stele tail -n all -o pretty` output: "TS SRC uid=U #N {...}" per line
  STATUS    `stele status --json` output
Each event must read back equal to the inserted one in type and value (a float with the
same bits, -0.0 included; an int as an int; key order kept), every double's text must be
the shortest that reads back (Python's repr), and nothing may need NaN/Infinity literals.
Exit 0 when all holds, 1 with the differences on stderr.
"""
import json
import struct
import sys


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


def main(inserted_path, tail_path, pretty_path, status_path):
    problems = []
    inserted = [json.loads(line) for line in lines(inserted_path)]
    tail = lines(tail_path)
    pretty = lines(pretty_path)
    if len(tail) != len(inserted) or len(pretty) != len(inserted):
        problems.append("%d inserted, %d tail lines, %d pretty lines"
                        % (len(inserted), len(tail), len(pretty)))
    for n, (want, line, pline) in enumerate(zip(inserted, tail, pretty), start=1):
        try:
            record = strict_loads(line)
            from_pretty = strict_loads(pline.split(" #%d " % n, 1)[1])
        except (ValueError, IndexError) as e:
            problems.append("record %d: %s" % (n, e))
            continue
        if record["seq"] != n or not same(record["event"], want):
            problems.append("record %d: read %r, inserted %r" % (n, record, want))
        if not same(from_pretty, want):
            problems.append("record %d, pretty: read %r, inserted %r" % (n, from_pretty, want))
    with open(status_path, encoding="utf-8") as f:
        status = strict_loads(f.read())
    if status.get("committed_seq") != len(inserted):
        problems.append("status: committed_seq %r" % status.get("committed_seq"))
    for p in problems:
        print("json_readback: " + p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
