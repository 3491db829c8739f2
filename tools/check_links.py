#!/usr/bin/env python3
"""Checks that every relative link of the repository's Markdown resolves.

Owns: finding the links of Markdown files and checking their targets against
the tree and the targets' headings.  Must never: fetch anything (external
links are not checked) or change a file.

  tools/check_links.py              check every tracked *.md file (git
                                    ls-files; without git, every *.md under
                                    the root); exit 1 listing the broken links
  tools/check_links.py --root DIR   check the tree under DIR instead
  tools/check_links.py --self-test  check the checker on a sample tree

A link is `[text](path)`, `[text](path#anchor)`, `![alt](path)`, a
reference definition `[label]: path`, or an HTML `src=`/`href=` attribute.
Links with a scheme (http:, https:, mailto:, ...) are external and skipped;
so is anything inside a fenced code block, an inline code span or an HTML
comment.  (Indented code blocks are read as text: the repository fences its
code.)  The path, relative to the linking file (or to the root when it
starts with /), must name a file or folder inside the repository, tracked by
git when the tree is a git checkout.  An #anchor must match a heading of the
target Markdown file (or an `<a name=...>`/`id=` in it) under GitHub's rules:
the heading's text lower-cased, punctuation removed except - and _, each
space turned into -, and the second heading with the same anchor getting -1,
the third -2, and so on.

Each broken link is printed as `file:line: link (why)`.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
COMMENT = re.compile(r"<!--.*?-->", re.S)
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)
ESCAPED = re.compile(r"\\[\\`*_{}\[\]()#+\-.!<>|]")
# [text](destination "title"): the text may hold one level of brackets and
# run over lines (not over a blank one); the destination is <...> or has
# balanced parentheses.
INLINE_LINK = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\n(?![ \t]*\n)|\[[^\[\]\n]*\])*)\]\(\s*"
    r"(<[^<>\n]*>|(?:[^\s()]|\((?:[^\s()])*\))*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[([^\]\n]+)\]:[ \t]*(<[^<>\n]*>|\S+)", re.M)
INLINE_CODE = re.compile(COMMENT.pattern + "|" + CODE_SPAN.pattern, re.S)
HTML_ATTR = re.compile(r"<(?:img|a|source|link)\b[^>]*?\b(?:src|href)\s*=\s*(\"[^\"]*\"|'[^']*')",
                       re.I)
HTML_ANCHOR = re.compile(r"<[a-z][^>]*?\b(?:name|id)\s*=\s*(\"[^\"]*\"|'[^']*')", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def strip_code(text):
    """The text with fenced code blocks, HTML comments and inline code spans blanked
    out, line numbers unchanged; and the fenced blocks' line numbers (1-based)."""
    lines = text.split("\n")
    fence = None
    in_code = set()
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                in_code.add(i + 1)
                lines[i] = ""
        else:
            in_code.add(i + 1)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and line.strip() == m.group(1):
                fence = None
            lines[i] = ""
    text = "\n".join(lines)
    # Left to right, whichever starts first: a comment or a code span.
    text = INLINE_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    return text, in_code


def slug(heading):
    """GitHub's anchor for a heading's Markdown text (without the -N of duplicates)."""
    # The rendered text: code spans keep their content; links and images their text;
    # HTML tags and emphasis markers go.
    parts = re.split(r"(`+)(.+?)\1", heading)
    text = []
    for i, part in enumerate(parts):
        if i % 3 == 2:
            text.append(part)  # inside a code span: as is
        elif i % 3 == 0:
            part = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", part)
            part = re.sub(r"<[^>]+>", "", part)
            part = re.sub(r"(?<!\w)_+|_+(?!\w)", "", part)  # _emphasis_, not snake_case
            text.append(part)
    s = "".join(text).strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(text):
    """Every anchor a Markdown text defines: its headings' (duplicates numbered) and
    the name= / id= attributes of its HTML."""
    stripped, in_code = strip_code(text)
    raw = text.split("\n")
    lines = stripped.split("\n")
    found, seen = set(), {}
    for i, line in enumerate(lines):
        if (i + 1) in in_code:
            continue
        title = None
        m = ATX.match(line)
        if m:
            title = raw[i].strip().lstrip("#").strip()
            title = re.sub(r"[ \t]+#+[ \t]*$", "", title)
        elif i > 0 and SETEXT.match(line) and lines[i - 1].strip() and (i) not in in_code \
                and not ATX.match(lines[i - 1]) and not SETEXT.match(lines[i - 1]) \
                and "|" not in lines[i - 1]:
            title = raw[i - 1].strip()
        if title is None:
            continue
        base = slug(title)
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    for m in HTML_ANCHOR.finditer(COMMENT.sub("", text)):
        found.add(m.group(1)[1:-1])
    return found


def links(text):
    """(line, destination) of every link of a Markdown text, code and comments left out."""
    stripped, _ = strip_code(text)
    stripped = ESCAPED.sub("  ", stripped)
    out = []
    for m in INLINE_LINK.finditer(stripped):
        dest = m.group(3)
        out.append((stripped.count("\n", 0, m.start()) + 1, dest))
    for m in REF_DEF.finditer(stripped):
        out.append((stripped.count("\n", 0, m.start()) + 1, m.group(2)))
    for m in HTML_ATTR.finditer(stripped):
        out.append((stripped.count("\n", 0, m.start()) + 1, m.group(1)[1:-1]))
    return [(line, d[1:-1] if d.startswith("<") and d.endswith(">") else d)
            for line, d in out]


class Tree:
    """The files of the repository: from git when it is a checkout, else from disk."""

    def __init__(self, root, use_git=True):
        self.root = os.path.realpath(root)
        self.tracked = None
        if use_git:
            try:
                r = subprocess.run(["git", "-C", self.root, "ls-files", "-z"],
                                   capture_output=True, text=True, check=True)
                top = subprocess.run(["git", "-C", self.root, "rev-parse", "--show-toplevel"],
                                     capture_output=True, text=True, check=True).stdout.strip()
                if os.path.realpath(top) == self.root:
                    self.tracked = {p for p in r.stdout.split("\0") if p}
            except (OSError, subprocess.CalledProcessError):
                self.tracked = None
        if self.tracked is not None:
            self.dirs = {""}
            for p in self.tracked:
                d = os.path.dirname(p)
                while d not in self.dirs:
                    self.dirs.add(d)
                    d = os.path.dirname(d)

    def markdown_files(self):
        if self.tracked is not None:
            return sorted(p for p in self.tracked if p.endswith(".md")
                          and os.path.isfile(os.path.join(self.root, p)))
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            # Hidden folders (.git) and build trees are not the repository's text.
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                                 and not os.path.exists(os.path.join(dirpath, d,
                                                                     "CMakeCache.txt")))
            rel = os.path.relpath(dirpath, self.root)
            out += [os.path.normpath(os.path.join(rel, f)) for f in sorted(filenames)
                    if f.endswith(".md")]
        return out

    def kind(self, rel):
        """'file', 'dir', 'untracked' or None for a path relative to the root."""
        full = os.path.join(self.root, rel)
        if self.tracked is None:
            return "file" if os.path.isfile(full) else "dir" if os.path.isdir(full) else None
        if rel in self.tracked and os.path.isfile(full):
            return "file"
        if rel in self.dirs and os.path.isdir(full):
            return "dir"
        return "untracked" if os.path.exists(full) else None


def check(tree):
    """The broken links of the tree as `file:line: link (why)` lines, and the count of
    links checked."""
    problems, checked = [], 0
    anchor_cache = {}

    def anchors_of(rel):
        if rel not in anchor_cache:
            with open(os.path.join(tree.root, rel), encoding="utf-8", errors="replace") as f:
                anchor_cache[rel] = anchors(f.read())
        return anchor_cache[rel]

    for md in tree.markdown_files():
        with open(os.path.join(tree.root, md), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for line, dest in links(text):
            if not dest or SCHEME.match(dest) or dest.startswith("//"):
                continue  # external (or an empty destination, which goes nowhere)
            checked += 1
            path, _, anchor = dest.partition("#")
            path = urllib.parse.unquote(path.split("?", 1)[0])
            anchor = urllib.parse.unquote(anchor)
            where = f"{md}:{line}: {dest}"
            if path:
                base = "" if path.startswith("/") else os.path.dirname(md)
                target = os.path.normpath(os.path.join(base, path.lstrip("/")))
                if target == ".." or target.startswith("../") or os.path.isabs(target):
                    problems.append(f"{where} (outside the repository)")
                    continue
                target = "" if target == "." else target
                kind = tree.kind(target)
                if kind is None:
                    problems.append(f"{where} (no such file or folder: {target})")
                    continue
                if kind == "untracked":
                    problems.append(f"{where} (not tracked by git: {target})")
                    continue
            else:
                target, kind = md, "file"
            if anchor:
                if kind != "file" or not target.endswith(".md"):
                    problems.append(f"{where} (an anchor into {target or '.'}, "
                                    "which is not a Markdown file)")
                elif anchor not in anchors_of(target):
                    problems.append(f"{where} (no heading with the anchor #{anchor} "
                                    f"in {target})")
    return problems, checked


# ----------------------------------------------------------------------------------------------
# --self-test: a small tree with every kind of link, good and broken.

SAMPLE = {
    "README.md": """# Sample: links (and `code`)

A good link to [the guide](docs/guide.md), one [with an anchor](docs/guide.md#set-up--run),
to a [folder](docs/) and to [this file's section](#sample-links-and-code).
A [missing file](docs/nothere.md) and a [bad anchor](docs/guide.md#no-such-heading).
The duplicate headings: [first](docs/guide.md#notes), [second](docs/guide.md#notes-1),
[third](docs/guide.md#notes-2), [a fourth that is not there](docs/guide.md#notes-3).
External links are skipped: [web](https://example.com/x.md), <https://example.org>,
[mail](mailto:someone@example.com).
Inline code is not a link: `[not a link](gone.md)`, ``[nor `this`](gone2.md)``.
A link whose text runs over
[two
lines](docs/missing-too.md) and an ![image](img/logo.png) that is there.
<!-- [commented out](gone3.md) -->
An escaped \\[bracket](gone4.md) is text.
A [reference][guide] and its definition:

[guide]: docs/guide.md#c-and-c

```sh
cat [inside a fence](gone5.md)
```

~~~
[inside a tilde fence](gone6.md)
~~~

<img src="img/missing.png" alt="missing picture">
Outside the tree: [up](../outside.md). Into a folder with an anchor: [x](docs/#a).
""",
    "docs/guide.md": """# Guide

## Set up & run

## C and C++

Notes
-----

## Notes

### Notes

[back](../README.md#sample-links-and-code), [wrong](../README.md#sample)
""",
    "img/logo.png": "",
}

SAMPLE_BROKEN = {
    ("README.md", 5, "docs/nothere.md"),
    ("README.md", 5, "docs/guide.md#no-such-heading"),
    ("README.md", 7, "docs/guide.md#notes-3"),
    ("README.md", 12, "docs/missing-too.md"),
    ("README.md", 28, "img/missing.png"),
    ("README.md", 29, "../outside.md"),
    ("README.md", 29, "docs/#a"),
    ("docs/guide.md", 14, "../README.md#sample"),
}

SLUGS = {
    "Single-thread fast path (`fastpath.c`, `fastpath.py`)":
        "single-thread-fast-path-fastpathc-fastpathpy",
    "Misuse: roost against glibc, snmalloc's checks build and mimalloc's secure mode":
        "misuse-roost-against-glibc-snmallocs-checks-build-and-mimallocs-secure-mode",
    "Larson server simulation (`bench_larson`)": "larson-server-simulation-bench_larson",
    "Throughput ÷ peak — *what* [it](x.md) means_here": "throughput--peak--what-it-means_here",
    "Étude 2: _emphasis_ and __init__": "étude-2-emphasis-and-init",
}


def self_test():
    ok = True
    for heading, want in SLUGS.items():
        got = slug(heading)
        if got != want:
            print(f"self-test: slug({heading!r}) = {got!r}, want {want!r}")
            ok = False
    with tempfile.TemporaryDirectory() as tmp:
        for rel, body in SAMPLE.items():
            os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(tmp, rel), "w", encoding="utf-8") as f:
                f.write(body)
        problems, checked = check(Tree(tmp, use_git=False))
        got = set()
        for p in problems:
            m = re.match(r"^(.*?):(\d+): (\S+) \(", p)
            got.add((m.group(1), int(m.group(2)), m.group(3)) if m else ("?", 0, p))
        if got != SAMPLE_BROKEN:
            ok = False
            for g in sorted(got - SAMPLE_BROKEN):
                print("self-test: reported but not broken:", g)
            for w in sorted(SAMPLE_BROKEN - got):
                print("self-test: broken but not reported:", w)
        if checked != 18:
            ok = False
            print(f"self-test: {checked} links checked, want 18")
    print("check_links self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=ROOT, help="the repository's root (default: this "
                    "script's repository)")
    ap.add_argument("--self-test", action="store_true", help="check the checker on a sample")
    args = ap.parse_args(argv[1:])
    if args.self_test:
        return self_test()
    tree = Tree(args.root)
    problems, checked = check(tree)
    files = len(tree.markdown_files())
    for p in problems:
        print(p)
    if problems:
        print(f"check_links: {len(problems)} of {checked} relative links in {files} Markdown "
              "files do not resolve", file=sys.stderr)
        return 1
    print(f"check_links: all {checked} relative links in {files} Markdown files resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
