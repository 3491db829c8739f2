#!/usr/bin/env python3
"""glibc's introspection calls and roost's reports, read with real parsers.

Runs tests/introspection_probe.c (built linked to libroost.a, with -static,
or unlinked and given --preload libroost.so) and checks, against the
roost_stats_json() object the probe printed:
  - malloc_info's document is well-formed XML in glibc's shape, its <size>
    elements are the free objects of each class with slabs, its totals add
    up, and its system and mmap figures are roost's;
  - malloc_stats' text has glibc's layout with roost's figures, then
    roost's text report (the process, then the counters);
  - mallinfo2 is roost's bytes in use, split between arena and mapped blocks;
  - ROOST_STATS=json at exit is one line that Python's json module reads,
    with every counter; ROOST_STATS_FILE writes a file it reads.

Owns: nothing of roost.  Must never: pass on a run where roost is not
serving the probe (the probe fails then).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def run_probe(args, extra_env, info_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ROOST_") and k != "LD_PRELOAD"}
    if args.preload:
        env["LD_PRELOAD"] = args.preload
    env.update(extra_env)
    r = subprocess.run([args.probe, info_path], env=env, capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        print("probe exited %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr))
        sys.exit(1)
    return r


def class_capacity(c):
    # Objects per slab: the slab's bytes over the object size.
    return (c["slab_bytes"] // c["slabs"]) // c["size"] if c["slabs"] else 0


def check_reports(r, info_path):
    lines = r.stdout.splitlines()
    check(len(lines) == 2, "the probe's stdout has two lines: %r" % lines)
    stats = json.loads(lines[0])
    totals, classes = stats["totals"], stats["classes"]
    mi = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", lines[1]))

    # mallinfo2: roost's bytes in use, within arena, beside the mapped blocks.
    check(mi["uordblks"] + mi["hblkhd"] == totals["bytes_in_use"],
          "mallinfo2 uordblks + hblkhd = bytes_in_use: %r %r" % (mi, totals))
    check(mi["uordblks"] >= 10 << 20, "mallinfo2 counts the 10 MiB kept: %r" % mi)
    check(mi["arena"] == totals["bytes_committed"], "mallinfo2 arena = bytes_committed")
    check(mi["fordblks"] == mi["arena"] - mi["uordblks"], "mallinfo2 fordblks = arena - uordblks")
    check(mi["keepcost"] == totals["bytes_dirty"], "mallinfo2 keepcost = bytes_dirty")

    # malloc_info: glibc's shape, roost's figures.
    root = ET.parse(info_path).getroot()
    check(root.tag == "malloc" and root.get("version") == "1", "<malloc version=\"1\">")
    heaps = root.findall("heap")
    check(len(heaps) == 1 and heaps[0].get("nr") == "0", "one <heap nr=\"0\">")
    heap = heaps[0]
    sizes = heap.find("sizes")
    check(sizes is not None, "<sizes> in the heap")
    by_size = {}
    last_to = 0
    for e in sizes:
        check(e.tag == "size", "only <size> in <sizes>: %s" % e.tag)
        lo, hi, total, count = (int(e.get(a)) for a in ("from", "to", "total", "count"))
        check(lo <= hi and lo > last_to, "size ranges ascend without overlap: %d..%d" % (lo, hi))
        check(total == count * hi and count > 0, "total = count x size: %r" % e.attrib)
        last_to = hi
        by_size[hi] = count
    # Each class holding slabs has its free objects listed; no other size is.
    want = {}
    for c in classes:
        free = c["slabs"] * class_capacity(c) - c["objects_in_use"]
        if free > 0:
            want[c["size"]] = free
    check(by_size == want, "<size> elements are the classes' free objects:\n%r\n%r"
          % (by_size, want))
    check(112 in [c["size"] for c in classes if c["objects_in_use"] >= (10 << 20) // 100],
          "the 10 MiB of 100-byte objects are in class 112")

    def totals_of(parent):
        return {(e.tag, e.get("type")): e.attrib for e in parent
                if e.tag in ("total", "system", "aspace")}

    free_count, free_bytes = sum(want.values()), sum(s * n for s, n in want.items())
    ht = totals_of(heap)
    check(ht[("total", "fast")] == {"type": "fast", "count": "0", "size": "0"}, "no fastbins")
    check(int(ht[("total", "rest")]["count"]) == free_count, "heap rest count")
    check(int(ht[("total", "rest")]["size"]) == free_bytes, "heap rest size")
    check(int(ht[("system", "current")]["size"]) == totals["bytes_committed"],
          "heap system current = bytes_committed")
    check(int(ht[("aspace", "total")]["size"]) == totals["bytes_reserved"],
          "heap aspace total = bytes_reserved")
    t = totals_of(root)
    check(int(t[("total", "rest")]["count"]) == free_count, "rest count")
    check(int(t[("total", "mmap")]["count"]) == mi["hblks"], "mmap count = hblks")
    check(int(t[("total", "mmap")]["size"]) == mi["hblkhd"], "mmap size = hblkhd")
    check(int(t[("system", "current")]["size"]) == mi["arena"] + mi["hblkhd"],
          "system current = arena + hblkhd")
    check(int(t[("aspace", "total")]["size"]) == totals["bytes_reserved"] + mi["hblkhd"],
          "aspace total = bytes_reserved + hblkhd")

    # malloc_stats: glibc's layout, then roost's counters.
    err = r.stderr.splitlines()
    layout = ["Arena 0:", "system bytes", "in use bytes", "Total (incl. mmap):", "system bytes",
              "in use bytes", "max mmap regions", "max mmap bytes"]
    # (then the huge-page lines: a heading and six figures)
    check(len(err) == len(layout) + 1 + len(totals) + 7, "malloc_stats' lines: %r" % err)
    check(err[-7] == "roost: huge pages:", "malloc_stats' huge-page lines: %r" % err[-7:])
    values = []
    for label, line in zip(layout, err):
        check(line.startswith(label), "malloc_stats line %r starts with %r" % (line, label))
        if "=" in line:
            check(re.fullmatch(r"[a-z ]{16} = +\d+", line) is not None and len(line) >= 29,
                  "glibc's column layout: %r" % line)
            values.append(int(line.split("=")[1]))
    check(values[:4] == [mi["arena"], mi["uordblks"], mi["arena"] + mi["hblkhd"],
                         totals["bytes_in_use"]], "malloc_stats figures: %r" % values)
    # roost's text report: the line naming the process, then a line per
    # counter ("roost: name value  description").
    roost = err[len(layout):-7]
    check(len(roost) > 0 and re.fullmatch(r"roost: report of pid \d+ \(.*\) at [-0-9]{10} "
                                          r"[:0-9]{8} UTC", roost[0]) is not None,
          "malloc_stats' roost report names the process: %r" % roost[:1])
    counters = [re.match(r"roost: (\w+) +(\d+)  \S", line) for line in roost[1:]]
    got = [(m.group(1), int(m.group(2))) if m else line for m, line in zip(counters, roost[1:])]
    check(got == list(totals.items()), "malloc_stats' roost lines:\n%r\n%r"
          % (got, list(totals.items())))
    return totals


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", required=True)
    ap.add_argument("--preload")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="roost-introspection-") as work:
        info = os.path.join(work, "malloc_info.xml")
        r = run_probe(args, {}, info)
        totals = check_reports(r, info)

        # The report at exit, as JSON on stderr (its last line).
        r = run_probe(args, {"ROOST_STATS": "json"}, info)
        last = r.stderr.splitlines()[-1]
        report = json.loads(last)
        check(list(report["totals"]) == list(totals), "ROOST_STATS=json has every counter")
        check(report["totals"]["allocations"] >= totals["allocations"],
              "the report at exit counts the probe's allocations")

        # ... and to a file.
        path = os.path.join(work, "report.%p.json")
        r = run_probe(args, {"ROOST_STATS_FILE": path}, info)
        reports = [f for f in os.listdir(work) if f.startswith("report.")]
        check(len(reports) == 1 and re.fullmatch(r"report\.\d+\.json", reports[0] or ""),
              "one report file named with the pid: %r" % reports)
        if reports:
            with open(os.path.join(work, reports[0])) as f:
                report = json.load(f)
            check(list(report["totals"]) == list(totals), "ROOST_STATS_FILE has every counter")
            check(any(c["size"] == 112 and c["objects_in_use"] >= (10 << 20) // 100
                      for c in report["classes"]), "the file's classes hold the 10 MiB")
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("introspection checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
