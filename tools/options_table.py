#!/usr/bin/env python3
"""docs/OPTIONS.md's table of run-time options, generated from src/options.def.

Owns: reading the option list as text and rendering it as Markdown.  Must
never: hold an option's name, default or range itself (src/options.def is
the one list).

  tools/options_table.py                    print the table
  tools/options_table.py --check docs/OPTIONS.md  exit 1 with a diff if the table
                                            between the markers differs
  tools/options_table.py --write docs/OPTIONS.md  replace the table between the markers
  tools/options_table.py --self-test        check the list reader on a sample

The markers are BEGIN and END below, each on a line of its own.
"""

import argparse
import difflib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEF_FILE = os.path.join(ROOT, "src", "options.def")
BEGIN = "<!-- options table: generated from src/options.def by tools/options_table.py -->"
END = "<!-- end of options table -->"
FIELDS = ("id", "variable", "type", "default", "min", "max", "help")
TYPES = {"kBool": "boolean", "kBytes": "bytes", "kMillis": "milliseconds (or `250ms`, `1s`)",
         "kNumber": "number", "kReport": "boolean, `text` or `json`",
         "kProfileMode": "boolean or `leaks`",
         "kHugePolicy": "`off`, `dense` or `always` (or boolean)", "kPath": "file path",
         "kSignal": "signal name or number"}
RANGED = ("kBytes", "kMillis", "kNumber")  # the types whose values column shows the range

TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)'
                   r'|(?P<punct>[(),]))')


def read_options(text):
    """The ROOST_OPTION entries of `text` as dicts of FIELDS.  Lines that start
    with // are comments; adjacent string literals are concatenated, as the C++
    compiler does; a backslash escapes the next character."""
    options = []
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
    for m in re.finditer(r"\bROOST_OPTION\s*\(", text):
        pos, args, current = m.end(), [], []
        while True:
            t = TOKEN.match(text, pos)
            if t is None:
                raise ValueError("options.def: cannot read the entry at: " + text[pos:pos + 40])
            pos = t.end()
            if t.group("str") is not None:
                current.append(("str", re.sub(r"\\(.)", r"\1", t.group("str")[1:-1])))
            elif t.group("ident") is not None:
                current.append(("ident", t.group("ident")))
            elif t.group("punct") in ",)":
                kinds = {k for k, _ in current}
                if len(kinds) != 1 or (kinds == {"ident"} and len(current) != 1):
                    raise ValueError("options.def: malformed field in " + m.group(0) + "...")
                args.append("".join(v for _, v in current))
                current = []
                if t.group("punct") == ")":
                    break
            else:
                raise ValueError("options.def: unexpected '('")
        if len(args) != len(FIELDS):
            raise ValueError("options.def: %d fields in %s (want %d)" % (len(args), args[:2], len(FIELDS)))
        entry = dict(zip(FIELDS, args))
        if entry["type"] not in TYPES:
            raise ValueError("options.def: unknown type " + entry["type"])
        options.append(entry)
    if not options:
        raise ValueError("options.def: no ROOST_OPTION entries")
    return options


def table(options):
    lines = ["| variable | default | values | meaning |", "|---|---|---|---|"]
    for o in options:
        values = TYPES[o["type"]]
        if o["type"] in RANGED:
            values += ", %s to %s" % (o["min"], o["max"])
        default = o["default"] if o["default"] != "" else "unset"
        lines.append("| `%s` | %s | %s | %s |" % (o["variable"], default, values, o["help"]))
    return "\n".join(lines) + "\n"


def split_readme(text, path):
    """(before, table, after) of the page around the markers."""
    begin, end = text.find(BEGIN + "\n"), text.find("\n" + END)
    if begin < 0 or end < 0 or end < begin:
        raise SystemExit("%s: the markers %r and %r are missing" % (path, BEGIN, END))
    start = begin + len(BEGIN) + 1
    return text[:start], text[start:end + 1], text[end + 1:]


def self_test():
    sample = '''
// ROOST_OPTION(kNot, "ROOST_NOT", kBool, "0", "0", "1", "a comment")
ROOST_OPTION(kA, "ROOST_A", kBytes, "64k", "0", "1t",
             "two " "pieces, (with) commas")
ROOST_OPTION(kB, "ROOST_B", kBool, "1", "0", "1", "`x` \\"quoted\\"")
ROOST_OPTION(kC, "ROOST_C", kReport, "0", "0", "json", "c")
ROOST_OPTION(kD, "ROOST_D", kPath, "", "", "", "d")
'''
    got = read_options(sample)
    assert [o["variable"] for o in got] == ["ROOST_A", "ROOST_B", "ROOST_C", "ROOST_D"], got
    assert got[0]["help"] == "two pieces, (with) commas", got[0]
    assert got[1]["help"] == '`x` "quoted"', got[1]
    rows = table(got).splitlines()
    assert rows[2] == "| `ROOST_A` | 64k | bytes, 0 to 1t | two pieces, (with) commas |", rows
    assert rows[4] == "| `ROOST_C` | 0 | boolean, `text` or `json` | c |", rows
    assert rows[5] == "| `ROOST_D` | unset | file path | d |", rows
    for bad in ('ROOST_OPTION(kA, "ROOST_A", kBytes, "1", "0", "1")',
                'ROOST_OPTION(kA, "ROOST_A", kWords, "1", "0", "1", "h")',
                'ROOST_OPTION(kA "x", "ROOST_A", kBytes, "1", "0", "1", "h")'):
        try:
            read_options(bad)
        except ValueError:
            continue
        raise AssertionError("accepted: " + bad)
    readme = "a\n" + BEGIN + "\nold\n" + END + "\nb\n"
    assert split_readme(readme, "x") == ("a\n" + BEGIN + "\n", "old\n", END + "\nb\n")
    print("options_table.py self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--check", metavar="PAGE")
    g.add_argument("--write", metavar="PAGE")
    g.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return 0
    with open(DEF_FILE) as f:
        want = table(read_options(f.read()))
    path = args.check or args.write
    if path is None:
        sys.stdout.write(want)
        return 0
    with open(path) as f:
        text = f.read()
    before, have, after = split_readme(text, path)
    if args.write:
        if have != want:
            with open(path, "w") as f:
                f.write(before + want + after)
        return 0
    if have == want:
        return 0
    sys.stdout.writelines(difflib.unified_diff(
        have.splitlines(True), want.splitlines(True), path + " (now)",
        "from src/options.def", n=0))
    print("%s: the options table differs from src/options.def; run "
          "tools/options_table.py --write %s" % (path, path))
    return 1


if __name__ == "__main__":
    sys.exit(main())
