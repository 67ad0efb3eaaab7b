#!/usr/bin/env python3
"""Every option of every `stele` command is in its --help, in docs/cli.md and in the man
page docs/stele.1, written the same way, so the three cannot drift apart.

Usage: check_options_documented.py STELE_BIN SOURCE_DIR

From each command's --help it reads the options and how each takes its value (the SPEC:
`--wait none|written|durable|shipped`, `-n, --lines N|all`, `--where 'PATH OP VALUE'`,
`--reship-dead-letters[=SEQ]`, `--json` for none), the common options and the knobs. Then:
  - docs/cli.md, section "## stele CMD": a code span `--NAME SPEC` (or `-X, --NAME SPEC`)
    for each option of the command; "## Common options" and "## Knobs" for the others;
  - docs/stele.1, section ".SS CMD": a .TP tag "--NAME SPEC" for each option; ".SH COMMON
    OPTIONS" and ".SH KNOBS" for the others;
  - the other way round: every option row of those tables and every .TP tag names an
    option of that command with the same SPEC;
  - the synopses (the help's usage lines, the code block of the cli.md section, the man
    page's SYNOPSIS) name only options the command has, each with its SPEC;
  - no help says "(default: (", and the tail condition has one spelling.
Prints each difference; exit 0 when there is none, 1 otherwise.
"""
import re
import subprocess
import sys

COMMANDS = ["insert", "tail", "status", "verify", "ship", "serve"]
# "  -o, --output json|short|cat   text": short name, long name, [=SPEC] or " SPEC"
OPTION_LINE = re.compile(
    r"^ {2,6}(?:-(\w), )?--([a-z][a-z-]*)(\[=[A-Z]+\])?(?: ('[^']*'|\S+))?(?: {2,}.*)?$")
SYNOPSIS_LONG = re.compile(r"--([a-z][a-z-]*)(\[=[A-Z]+\])?(?: ('[^']*'|[^\s\[\]|-][^\s\]]*))?")
SYNOPSIS_SHORT = re.compile(r"(?<![\w-])-([a-zA-Z])(?: ('[^']*'|[^\s\[\]|-][^\s\]]*))?")


def spelled(name, spec):
    """How docs write an option: --wait none|..., --reship-dead-letters[=SEQ], --json."""
    if not spec:
        return "--" + name
    return "--" + name + (spec if spec.startswith("[=") else " " + spec)


class Help:
    """The options of one command's --help, by section: command, common, knobs."""

    def __init__(self, text):
        self.text = text
        self.sections = {"command": {}, "common": {}, "knobs": {}}
        self.shorts = {}
        self.usage = []
        section = "command"
        in_usage = True
        for line in text.split("\n"):
            if in_usage:
                if not line.strip():
                    in_usage = False
                else:
                    self.usage.append(line)
                continue
            if line.startswith("Common options:"):
                section = "common"
            elif line.startswith("Knobs"):
                section = "knobs"
            m = OPTION_LINE.match(line)
            if m:
                short, name, attached, spec = m.groups()
                self.sections[section][name] = attached or spec or ""
                if short:
                    self.shorts[short] = name

    def all_options(self):
        merged = {}
        for options in self.sections.values():
            merged.update(options)
        return merged


def code_spans(text):
    return [s.replace("\\|", "|") for s in re.findall(r"`([^`\n]+)`", text)]


def md_section(text, title):
    m = re.search(r"^## " + re.escape(title) + r"\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return m.group(1) if m else ""


def md_table_options(section):
    """The first-cell code spans of table rows that name an option."""
    found = []
    for line in section.split("\n"):
        m = re.match(r"^\| `([^`]+)` \|", line)
        if m and m.group(1).startswith("-"):
            found.append(m.group(1).replace("\\|", "|"))
    return found


def md_synopsis(section):
    m = re.search(r"^```\n(.*?)^```", section, re.M | re.S)
    return m.group(1) if m else ""


# ---- the man page: a line-by-line rendering of the macros it uses -------------------------

def roff_args(rest):
    args, cur, i, quoted, has = [], "", 0, False, False
    while i < len(rest):
        c = rest[i]
        if quoted:
            if c == '"' and rest[i + 1:i + 2] == '"':
                cur += '"'
                i += 1
            elif c == '"':
                quoted = False
            else:
                cur += c
        elif c == '"':
            quoted, has = True, True
        elif c in " \t":
            if cur or has:
                args.append(cur)
            cur, has = "", False
        else:
            cur += c
        i += 1
    if cur or has:
        args.append(cur)
    return args


def roff_unescape(text):
    text = re.sub(r"\\f[BIRP]", "", text)
    return (text.replace("\\-", "-").replace("\\(aq", "'").replace("\\&", "")
            .replace("\\e", "\\").replace("\\\\", "\\"))


def roff_render(line):
    """The text of one source line, or None for a structural macro."""
    if not line.startswith("."):
        return roff_unescape(line)
    m = re.match(r"\.(\w+)\s*(.*)", line)
    if not m:
        return None
    macro, rest = m.groups()
    args = roff_args(rest)
    if macro in ("B", "I"):
        return roff_unescape(" ".join(args))
    if macro in ("BR", "RB", "BI", "IB", "IR", "RI"):
        return roff_unescape("".join(args))
    return None


class ManPage:
    def __init__(self, text):
        self.tags = {}      # ".SS tail" / ".SH KNOBS" -> [tag text]
        self.synopsis = {}  # command -> text
        lines = text.split("\n")
        section, synopsis_cmd = None, None
        for i, line in enumerate(lines):
            m = re.match(r"\.(SH|SS) (.*)", line)
            if m:
                section = "." + m.group(1) + " " + m.group(2).strip('"')
                synopsis_cmd = None
                continue
            if line == ".TP" and i + 1 < len(lines):
                tag = roff_render(lines[i + 1])
                if tag is not None:
                    self.tags.setdefault(section, []).append(tag.strip())
            if section == ".SH SYNOPSIS":
                if line == ".br":
                    synopsis_cmd = None
                    continue
                text = roff_render(line)
                if text is None:
                    continue
                m = re.match(r"stele (\w+)$", text.strip())
                if m:
                    synopsis_cmd = m.group(1)
                    self.synopsis[synopsis_cmd] = ""
                elif synopsis_cmd:
                    self.synopsis[synopsis_cmd] += " " + text


# ---- the checks ------------------------------------------------------------------------------

def has_spelling(texts, name, spec):
    want = spelled(name, spec)
    return any(want in [part.strip() for part in t.split(", ")] for t in texts)


def check_listed(where, texts, options, problems):
    """Each option of `options` is spelled the help's way in one of `texts`."""
    for name, spec in options.items():
        if not has_spelling(texts, name, spec):
            problems.append("%s: no '%s'" % (where, spelled(name, spec)))


def check_known(where, texts, options, problems):
    """Each option named in `texts` is one of `options`, with its SPEC."""
    for text in texts:
        for part in text.split(", "):
            m = re.match(r"^--([a-z][a-z-]*)(\[=[A-Z]+\])?(?: (.+))?$", part.strip())
            if not m:
                continue
            name, attached, spec = m.groups()
            if name not in options:
                problems.append("%s: '%s' is not an option the help lists" % (where, part))
            elif (attached or spec or "") != options[name]:
                problems.append("%s: '%s', but the help says '%s'"
                                % (where, part, spelled(name, options[name])))


def check_synopsis(where, text, options, shorts, problems):
    for name, attached, spec in SYNOPSIS_LONG.findall(text):
        if name not in options:
            problems.append("%s: synopsis names --%s, which the help does not list" % (where, name))
        elif (attached or spec) != options[name]:
            problems.append("%s: synopsis has '%s', the help '%s'"
                            % (where, spelled(name, attached or spec), spelled(name, options[name])))
    for short, spec in SYNOPSIS_SHORT.findall(text):
        if short not in shorts:
            continue
        name = shorts[short]
        if spec != options.get(name, ""):
            problems.append("%s: synopsis has '-%s %s', the help '%s'"
                            % (where, short, spec, spelled(name, options.get(name, ""))))


def main(stele_bin, source_dir):
    problems = []
    helps = {}
    for cmd in COMMANDS:
        out = subprocess.run([stele_bin, cmd, "--help"], capture_output=True, text=True)
        if out.returncode != 0:
            problems.append("stele %s --help: exit %d" % (cmd, out.returncode))
        helps[cmd] = Help(out.stdout)
        if "(default: (" in out.stdout:
            problems.append("stele %s --help: a default in parentheses: '(default: ('" % cmd)
    with open(source_dir + "/docs/cli.md", encoding="utf-8") as f:
        md = f.read()
    with open(source_dir + "/docs/stele.1", encoding="utf-8") as f:
        man = ManPage(f.read())
        f.seek(0)
        man_text = f.read()
    for text, where in ((md, "docs/cli.md"), (man_text, "docs/stele.1"),
                        (helps["tail"].text, "stele tail --help")):
        for old in ("FIELD=VALUE", "PATH=VALUE"):
            if old in text:
                problems.append("%s: the tail condition is spelled %s, not 'PATH OP VALUE'"
                                % (where, old))
    first = helps[COMMANDS[0]]
    for cmd in COMMANDS:
        h = helps[cmd]
        for shared in ("common", "knobs"):
            if h.sections[shared] != first.sections[shared]:
                problems.append("stele %s --help: its %s differ from stele %s's"
                                % (cmd, shared, COMMANDS[0]))
        options = h.sections["command"]
        everything = h.all_options()
        section = md_section(md, "stele " + cmd)
        if not section:
            problems.append("docs/cli.md: no section '## stele %s'" % cmd)
        check_listed("docs/cli.md, stele " + cmd, code_spans(section), options, problems)
        check_known("docs/cli.md, stele %s table" % cmd, md_table_options(section), options,
                    problems)
        check_synopsis("docs/cli.md, stele " + cmd, md_synopsis(section), everything,
                       h.shorts, problems)
        tags = man.tags.get(".SS " + cmd, [])
        check_listed("docs/stele.1, .SS " + cmd, tags, options, problems)
        check_known("docs/stele.1, .SS " + cmd, tags, options, problems)
        check_synopsis("docs/stele.1 SYNOPSIS, stele " + cmd, man.synopsis.get(cmd, ""),
                       everything, h.shorts, problems)
        check_synopsis("stele %s --help usage" % cmd, "\n".join(h.usage), everything, h.shorts,
                       problems)
    for shared, md_title, man_title in (("common", "Common options", ".SH COMMON OPTIONS"),
                                        ("knobs", "Knobs", ".SH KNOBS")):
        options = first.sections[shared]
        if not options:
            problems.append("stele %s --help: no %s found" % (COMMANDS[0], shared))
        section = md_section(md, md_title)
        check_listed("docs/cli.md, " + md_title, code_spans(section), options, problems)
        tags = [t for t in man.tags.get(man_title, []) if not t.startswith("--knob")]
        check_listed("docs/stele.1, " + man_title, tags, options, problems)
        if shared == "knobs":
            check_known("docs/cli.md, Knobs table", md_table_options(section), options, problems)
            check_known("docs/stele.1, .SH KNOBS", tags, options, problems)
    for p in problems:
        print("check_options_documented: " + p, file=sys.stderr)
    n_options = sum(len(h.sections["command"]) for h in helps.values())
    print("check_options_documented: %d command options, %d common, %d knobs; %d differences"
          % (n_options, len(first.sections["common"]), len(first.sections["knobs"]),
             len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
