#!/usr/bin/env python3
"""Checks that every atomic operation in src/ds/ and src/frontend/ states
its memory ordering and why, next to it.

Owns: finding the explicit orderings (`std::memory_order_...` arguments and
`atomic_thread_fence`) of the two layers whose code is shared between
threads, and the comment that goes with each.  Must never: judge whether
the ordering is right (a person does, reading the comment), or change a
file.

  tools/check_orderings.py              check src/ds and src/frontend; exit 1
                                        listing the uses without a comment
  tools/check_orderings.py --root DIR   check DIR/src/ds and DIR/src/frontend
  tools/check_orderings.py --self-test  check the checker on sample text

A use is stated when the comment on its own line, or the comment block
directly above its statement (consecutive `//` lines, possibly above
further lines of the same statement, with no blank line between), names an
ordering: relaxed, acquire, release, acq_rel, seq_cst or a fence.  One
comment may cover a short group of adjacent uses (it names them).  An
accessor that takes the ordering as a parameter (`std::memory_order
order`) has none of its own and is skipped: its callers state theirs.

Each missing comment is printed as `file:line: code`.
"""

import argparse
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = ("src/ds", "src/frontend")

USE = re.compile(r"memory_order_\w+|atomic_thread_fence|atomic_signal_fence")
PARAMETER = re.compile(r"std::memory_order\s+\w+\s*[,)=]")
NAMES_ORDERING = re.compile(r"relaxed|acquire|release|acq_rel|seq_cst|fence", re.IGNORECASE)
# How far above its line a use's comment may sit (the statement's other
# lines and the comment block itself).
REACH = 8


def comment_of(line):
    at = line.find("//")
    return line[at + 2:] if at >= 0 else None


def stated(lines, i):
    """Whether the use on line i has a comment naming an ordering."""
    own = comment_of(lines[i])
    if own is not None and NAMES_ORDERING.search(own):
        return True
    j = i - 1
    while j >= 0 and i - j <= REACH:
        text = lines[j].strip()
        if text == "":
            return False
        if text.startswith("//"):
            if NAMES_ORDERING.search(text):
                return True
        j -= 1
    return False


def missing_in(text):
    """The (line number, code) of each use in `text` without its comment."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        code = line.split("//", 1)[0]
        if not USE.search(code) or PARAMETER.search(code):
            continue
        if not stated(lines, i):
            out.append((i + 1, line.strip()))
    return out


def check(root):
    missing = 0
    uses = 0
    for layer in LAYERS:
        for path in sorted(glob.glob(os.path.join(root, layer, "*"))):
            if not path.endswith((".h", ".cc")):
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            uses += sum(1 for l in text.split("\n") if USE.search(l.split("//", 1)[0]))
            for number, code in missing_in(text):
                print(f"{os.path.relpath(path, root)}:{number}: {code}")
                missing += 1
    if missing:
        print(f"{missing} of {uses} atomic uses in {', '.join(LAYERS)} do not state their "
              "ordering and why in a comment beside or directly above them")
        return 1
    print(f"every one of {uses} atomic uses in {', '.join(LAYERS)} states its ordering")
    return 0


SAMPLE = """\
// acquire: pairs with publish()'s release.
int a = x.load(std::memory_order_acquire);
int b = y.load(std::memory_order_relaxed);  // relaxed: a statistic
// The owner's own word: relaxed.
z.store(
    1,
    std::memory_order_relaxed);
QueueNode* next(std::memory_order order) const { return link.load(order); }

int c = w.load(std::memory_order_relaxed);
// Pairs with nothing written here.

int d = v.load(std::memory_order_acquire);
std::atomic_thread_fence(std::memory_order_seq_cst);  // the handshake's fence
"""


def self_test():
    got = missing_in(SAMPLE)
    want = [(10, "int c = w.load(std::memory_order_relaxed);"),
            (13, "int d = v.load(std::memory_order_acquire);")]
    if got != want:
        print(f"self-test failed: {got} != {want}")
        return 1
    print("self-test passed")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=ROOT)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    return self_test() if args.self_test else check(args.root)


if __name__ == "__main__":
    sys.exit(main())
