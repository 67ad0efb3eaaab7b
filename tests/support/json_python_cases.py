#!/usr/bin/env python3
"""json_python_cases.py: JSON events and what Python's json module reads in them, for
test_json_python.c, which runs each through stele's reader and compares.

Usage: json_python_cases.py --seed N --count C

Prints one line per event: the event's bytes in hex, a space, then either
  ok CANON        Python reads an event stele must accept, CANON its canonical form
  refuse CODE     Python's reading shows the fault stele must refuse it with (STELE_E...)
Events are written by hand (random whitespace, escapes in upper and lower case, surrogate
pairs, numbers in every JSON form) from random values; about a third carry exactly one fault
(a repeated, dotted, '$' or reserved key, a NUL in a key, NaN, a lone surrogate, bad UTF-8, a
number out of range, a trailing comma, a leading zero, a raw control character, a cut).

The verdict is Python's: json.loads(strict) with hooks for the rules JSON itself does not
have. The canonical form, which the C side builds from stele's BSON the same way:
  object  {KEY:VALUE,...}, KEY the hex of its UTF-8 bytes, in the text's order
  array   [VALUE,...]
  string  s<hex of its UTF-8 bytes>
  integer i32:N when it fits 32 bits, else i64:N (libbson's choice)
  number  d<hex of the double's 8 bytes, little-endian>
  true, false, null: t, f, n
"""
import argparse
import json
import math
import random
import re
import struct

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
KEY_CHARS = "abcxyz_-ABZ019 é日本\U0001f600"
STRING_CHARS = KEY_CHARS + '"\\/\b\f\n\r\t\x01\x1f.$\x7f\u2028'
MAX_DEPTH = 98  # stele's limit for JSON input (the test's max_depth is 100)


class Refused(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


class Obj(list):
    """An object as the (key, value) pairs of the text, in order."""


# -- Python's reading ----------------------------------------------------------------------


def _pairs(pairs):
    keys = [k for k, _ in pairs]
    for k in keys:
        if k.startswith("$"):
            raise Refused("STELE_EDOLLARKEY")
        if "\0" in k:
            raise Refused("STELE_EKEYNUL")
    for k in keys:
        if "." in k:
            raise Refused("STELE_EAMBIGUOUS")
    if len(set(keys)) != len(keys):
        raise Refused("STELE_EAMBIGUOUS")
    return Obj(pairs)


def _constant(_name):
    raise Refused("STELE_EJSON")  # NaN, Infinity, -Infinity are not JSON


def _float(text):
    value = float(text)
    mantissa = re.split("[eE]", text)[0]
    if math.isinf(value) or (value == 0.0 and re.search("[1-9]", mantissa)):
        raise Refused("STELE_ENUMBER")
    return value


def _int(text):
    value = int(text)
    if not INT64[0] <= value <= INT64[1]:
        raise Refused("STELE_ENUMBER")
    return value


def _depth(value):
    if isinstance(value, Obj):
        return 1 + max((_depth(v) for _, v in value), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def canon(value):
    if isinstance(value, Obj):
        return "{" + ",".join(k.encode("utf-8").hex() + ":" + canon(v) for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(canon(v) for v in value) + "]"
    if isinstance(value, str):
        return "s" + value.encode("utf-8").hex()  # a lone surrogate raises here
    if value is True:
        return "t"
    if value is False:
        return "f"
    if value is None:
        return "n"
    if isinstance(value, int):
        return ("i32:%d" if INT32[0] <= value <= INT32[1] else "i64:%d") % value
    return "d" + struct.pack("<d", value).hex()


def python_verdict(data):
    """What Python reads in the event's bytes: ('ok', canon) or ('refuse', code)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "refuse", "STELE_EUTF8"
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant,
                           parse_float=_float, parse_int=_int)
    except Refused as r:
        return "refuse", r.code
    except json.JSONDecodeError:
        return "refuse", "STELE_EJSON"
    if not isinstance(value, Obj):
        return "refuse", "STELE_ENOTOBJECT"
    if len(value) == 0:
        return "refuse", "STELE_EEMPTY"
    if any(k in ("_id", "_stele") for k, _ in value):
        return "refuse", "STELE_ERESERVEDKEY"
    if _depth(value) > MAX_DEPTH:
        return "refuse", "STELE_EDEPTH"
    try:
        return "ok", canon(value)
    except UnicodeEncodeError:
        return "refuse", "STELE_EUTF8"


# -- writing events by hand ----------------------------------------------------------------


class Writer:
    def __init__(self, rng):
        self.rng = rng

    def space(self):
        return self.rng.choice(["", "", "", " ", "\n", " \t", "\r\n  "])

    def char(self, c):
        r = self.rng.random()
        short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                 "\t": "\\t"}
        if c in short:
            return short[c] if r < 0.8 or c in '"\\' else "\\u%04x" % ord(c)
        if ord(c) < 0x20:
            return "\\u%04X" % ord(c)
        if c == "/" and r < 0.5:
            return "\\/"
        if r < 0.2:
            if ord(c) > 0xFFFF:
                hi, lo = divmod(ord(c) - 0x10000, 0x400)
                return "\\u%04x\\u%04X" % (0xD800 + hi, 0xDC00 + lo)
            return ("\\u%04x" if r < 0.1 else "\\u%04X") % ord(c)
        return c

    def string(self, s):
        return '"' + "".join(self.char(c) for c in s) + '"'

    def number(self, v):
        if isinstance(v, int):
            return str(v)
        text = repr(v)
        if self.rng.random() < 0.3 and "e" not in text:
            exponent = self.rng.randint(-5, 5)
            mantissa = repr(v / 10**exponent)
            if "e" not in mantissa:  # the same number, or its neighbour: either is a test
                sign = self.rng.choice(["", "+"]) if exponent >= 0 else ""
                text = "%s%s%s%d" % (mantissa, self.rng.choice("eE"), sign, exponent)
        return text

    def value(self, v):
        if isinstance(v, Obj):
            inner = ",".join(self.space() + self.string(k) + self.space() + ":" + self.space()
                             + self.value(x) + self.space() for k, x in v)
            return "{" + (inner if v else self.space()) + "}"
        if isinstance(v, list):
            inner = ",".join(self.space() + self.value(x) + self.space() for x in v)
            return "[" + (inner if v else self.space()) + "]"
        if isinstance(v, str):
            return self.string(v)
        if v is True or v is False or v is None:
            return {True: "true", False: "false", None: "null"}[v]
        return self.number(v)


def random_key(rng):
    return "".join(rng.choice(KEY_CHARS) for _ in range(rng.randint(0, 6))).replace("$", "")


def random_scalar(rng):
    kind = rng.randint(0, 9)
    if kind <= 2:
        return "".join(rng.choice(STRING_CHARS) for _ in range(rng.randint(0, 12)))
    if kind <= 4:
        edges = [0, 1, -1, INT32[0], INT32[1], INT32[0] - 1, INT32[1] + 1, INT64[0], INT64[1]]
        return rng.choice(edges) if rng.random() < 0.4 else rng.randint(-10**12, 10**12)
    if kind <= 6:
        picks = [0.0, -0.0, 0.5, 1e-300, 5e-324, 1.7976931348623157e308, 2.5e-308, 123.456]
        return rng.choice(picks) if rng.random() < 0.3 else rng.uniform(-1e6, 1e6)
    return rng.choice([True, False, None])


def random_value(rng, depth):
    r = rng.random()
    if depth < 6 and r < 0.2:
        return random_object(rng, depth + 1)
    if depth < 6 and r < 0.35:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return random_scalar(rng)


def random_object(rng, depth, at_least=0):
    keys = []
    while len(keys) < rng.randint(at_least, 5):
        k = random_key(rng)
        if k not in keys and "." not in k and not (depth == 1 and k in ("_id", "_stele")):
            keys.append(k)
    return Obj((k, random_value(rng, depth)) for k in keys)


# -- one fault per faulty event ------------------------------------------------------------


def objects_in(v):
    if isinstance(v, Obj):
        yield v
        for _, x in v:
            yield from objects_in(x)
    elif isinstance(v, list):
        for x in v:
            yield from objects_in(x)


def with_key_fault(rng, event, key_of):
    target = rng.choice([o for o in objects_in(event) if o])  # the event has a field
    target.append((key_of(target), random_scalar(rng)))


FAULTS = {
    "repeat": lambda rng, ev: with_key_fault(rng, ev, lambda o: rng.choice(o)[0]),
    "dotted": lambda rng, ev: with_key_fault(rng, ev, lambda o: "ip.v4"),
    "dollar": lambda rng, ev: with_key_fault(rng, ev, lambda o: "$set"),
    "nul_key": lambda rng, ev: with_key_fault(rng, ev, lambda o: "a\0b"),
    "reserved": lambda rng, ev: ev.append(("_id", 1)),
}

TEXT_FAULTS = [
    ("NaN", "NaN"), ("Infinity", "-Infinity"), ("lone surrogate", '"x\\ud800y"'),
    ("big integer", "99999999999999999999"), ("double overflow", "1e400"),
    ("leading zero", "012"), ("raw control", '"a\x01b"'), ("bad utf-8", '"\xff"'),
]


def faulty_event(rng, w):
    """An event with exactly one fault; returns its bytes."""
    event = random_object(rng, 1, at_least=1)
    kind = rng.randint(0, 9)
    if kind < 5:
        FAULTS[rng.choice(sorted(FAULTS))](rng, event)
        return w.value(event).encode("utf-8", "surrogatepass")
    text = w.value(event)
    if kind < 8:
        _, fault = rng.choice(TEXT_FAULTS)
        data = (text[:-1] + ',"bad":' + fault + "}").encode("utf-8")
        return data.replace(b"\xc3\xbf", b"\xff") if "\xff" in fault else data
    if kind == 8:
        return (text[:-1] + ",}").encode("utf-8")  # a trailing comma
    cut = rng.choice([i for i, c in enumerate(text) if c in ",:{[" and i > 0] or [1])
    return text[:cut].encode("utf-8")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    w = Writer(rng)
    for _ in range(args.count):
        if rng.random() < 0.35:
            data = faulty_event(rng, w)
        else:
            data = w.value(random_object(rng, 1, at_least=1)).encode("utf-8", "surrogatepass")
        verdict, detail = python_verdict(data)
        print(data.hex(), verdict, detail)


if __name__ == "__main__":
    main()
