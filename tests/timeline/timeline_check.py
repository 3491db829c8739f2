#!/usr/bin/env python3
"""The timeline (ROOST_STATS_INTERVAL) end to end.

  timeline_check.py lines --probe P --preload LIB --work DIR
      timeline_probe.c under LD_PRELOAD with a 20 ms interval: every line a
      strict JSON object with every field, seq and times in order, a first
      and a last line, the figures agreeing with what the probe did (the
      checker waits for the lines to show what the probe holds and its
      trim); a forked child's own file (%p), none under ROOST_STATS_PID; under
      ROOST_SERVICE=0 the last line only and a warning.
  timeline_check.py page --roost-run R --work DIR [--screenshot PNG]
      roost-run --timeline on python3 building and parsing a large JSON
      document; the page refers to nothing outside it, and in a real headless
      browser (chromium-headless-shell or chromium) its script runs without
      an error and draws every series; a screenshot.
  timeline_check.py beside --work DIR -- COMMAND...
      COMMAND (a multithreaded test program of a sanitizer or debug tree) with
      a line every millisecond, so that the service thread writes lines while
      the program's threads allocate, free and send: COMMAND's own status
      (ThreadSanitizer's and AddressSanitizer's reports fail it), then every
      process's file checked as in `lines`, a last line included.

Owns: these checks.  Must never: bet on timing (it waits for what it needs
to see, up to a minute, and asserts only what every schedule gives), or pass
without a browser (it fails, naming the package).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FIELDS = ("seq", "t", "unix_ms", "pid", "last", "interval_ms", "rss_bytes", "bytes_in_use",
          "bytes_committed", "bytes_dirty", "bytes_purged", "allocations", "frees",
          "large_allocations", "remote_frees", "messages_sent", "messages_received",
          "allocators", "purge_delay_ms", "trims", "classes")
WAIT_S = 60
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what, file=sys.stderr)
    return ok


def strict_object(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key in " + repr(keys))
    return dict(pairs)


def reject_constant(name):
    raise ValueError("not JSON: " + name)


def parse_lines(path):
    """Every line of the file, parsed strictly; a line that does not parse fails."""
    with open(path, "rb") as f:
        data = f.read()
    check(data.endswith(b"\n"), path + ": ends with a newline")
    lines = []
    for n, raw in enumerate(data.decode("utf-8").split("\n")[:-1]):
        try:
            lines.append(json.loads(raw, object_pairs_hook=strict_object,
                                    parse_constant=reject_constant))
        except ValueError as e:
            check(False, "%s line %d does not parse (%s): %r" % (path, n + 1, e, raw[:200]))
    return lines


def check_lines(path, lines, pid, interval_ms):
    if not check(len(lines) >= 1, path + ": has lines"):
        return
    for n, line in enumerate(lines):
        missing = [f for f in FIELDS if f not in line]
        check(not missing, "%s line %d has every field (missing %s)" % (path, n + 1, missing))
        if missing:
            return
        for f in FIELDS:
            if f in ("t", "last", "classes"):
                continue
            check(isinstance(line[f], int) and line[f] >= 0,
                  "%s line %d: %s a count (%r)" % (path, n + 1, f, line[f]))
        check(isinstance(line["t"], (int, float)) and line["t"] >= 0, "t is a time")
        check(line["seq"] == n, "%s line %d: seq %d" % (path, n + 1, line["seq"]))
        check(line["pid"] == pid, "%s line %d: pid %d, not %d" % (path, n + 1, line["pid"], pid))
        check(line["interval_ms"] == interval_ms, "interval_ms %d" % line["interval_ms"])
        check(line["last"] == (n == len(lines) - 1),
              "%s line %d: last is %r" % (path, n + 1, line["last"]))
        check(line["bytes_committed"] >= line["bytes_dirty"], "committed >= dirty")
        check(line["rss_bytes"] > 0, "rss_bytes > 0")
        sizes = [c[0] for c in line["classes"]]
        check(sizes == sorted(set(sizes)), "classes in size order")
        check(all(len(c) == 2 and c[1] > 0 for c in line["classes"]), "classes in use only")
        if n > 0:
            before = lines[n - 1]
            check(line["t"] >= before["t"], "%s line %d: t goes back" % (path, n + 1))
            check(line["unix_ms"] >= before["unix_ms"], "unix_ms goes back")
            for f in ("allocations", "frees", "bytes_purged", "allocators", "trims"):
                check(line[f] >= before[f], "%s line %d: %s goes down" % (path, n + 1, f))


def wait_for_line(path, want, what):
    """Waits until a line of the file satisfies want (the probe holds still)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                for raw in f:
                    if raw.endswith("\n") and want(json.loads(raw)):
                        return True
        time.sleep(0.02)
    return check(False, "no line in %d s shows %s" % (WAIT_S, what))


def run_probe(args, env, timeline, waits):
    """Runs the probe, answering its two stops once timeline shows what `waits` asks."""
    p = subprocess.Popen([args.probe], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=args.work)
    said = p.stdout.readline().split()
    held = dict(kv.split("=") for kv in said[1:])
    if waits:
        wait_for_line(timeline(), lambda l: l["bytes_in_use"] >= int(held["bytes"]) and
                      any(c[0] >= int(held["size"]) and c[1] >= int(held["objects"])
                          for c in l["classes"]) and l["allocators"] >= 4,
                      "the objects the probe holds")
    p.stdin.write("go\n")
    p.stdin.flush()
    check(p.stdout.readline().strip() == "trimmed", "the probe trimmed")
    if waits:
        wait_for_line(timeline(), lambda l: l["trims"] >= 1 and not l["last"],
                      "the probe's trim before its exit")
    p.stdin.write("go\n")
    p.stdin.flush()
    out, err = p.communicate(timeout=WAIT_S)
    check(p.returncode == 0, "probe exit status %d; stderr: %s" % (p.returncode, err))
    done = dict(kv.split("=") for kv in out.split()[1:])
    return {k: int(v) for k, v in done.items()}, err


def lines_test(args):
    os.makedirs(args.work, exist_ok=True)
    for f in os.listdir(args.work):
        os.remove(os.path.join(args.work, f))
    base = {k: v for k, v in os.environ.items() if not k.startswith("ROOST_")}
    base.update(LD_PRELOAD=args.preload, ROOST_STATS_INTERVAL="20ms",
                ROOST_TIMELINE_FILE=os.path.join(args.work, "timeline.%p.jsonl"))

    # Every process reports: the probe's file, and its forked child's own.
    proc = {}

    def timeline():
        names = [f for f in os.listdir(args.work) if f.endswith(".jsonl")]
        return os.path.join(args.work, names[0]) if len(names) == 1 else "/nonexistent"
    done, err = run_probe(args, base, timeline, True)
    check(err == "", "nothing on stderr: %r" % err)
    path = os.path.join(args.work, "timeline.%d.jsonl" % done["pid"])
    if not check(os.path.exists(path), "the probe's timeline " + path):
        return
    lines = parse_lines(path)
    check_lines(path, lines, done["pid"], 20)
    check(len(lines) >= 2, "a first line and a last line")
    if lines:
        first, last = lines[0], lines[-1]
        check(not first["last"] and last["last"], "the first line is not the last")
        check(last["allocations"] >= done["allocations"],
              "allocations %d >= the probe's %d" % (last["allocations"], done["allocations"]))
        check(last["frees"] >= done["frees"], "frees >= the probe's")
        check(last["remote_frees"] >= done["remote_frees"],
              "remote_frees %d >= the probe's %d" % (last["remote_frees"], done["remote_frees"]))
        check(last["messages_sent"] >= last["remote_frees"], "messages_sent >= remote_frees")
        check(last["allocators"] >= 4, "allocators: main and 3 threads")
        check(last["trims"] == 1, "trims: the probe's one malloc_trim (%d)" % last["trims"])
        check(last["purge_delay_ms"] >= 10, "the purge delay in force")
        check(max(l["bytes_in_use"] for l in lines) >= done["held_bytes"],
              "a line shows the bytes the probe held")
        check(last["unix_ms"] / 1000 <= time.time() + 1, "unix_ms is the wall clock")
    child = os.path.join(args.work, "timeline.%d.jsonl" % done["child"])
    if check(os.path.exists(child), "the forked child has its own file"):
        child_lines = parse_lines(child)
        check_lines(child, child_lines, done["child"], 20)

    # ROOST_STATS_PID: the probe's own lines only, none of its child's.
    for f in os.listdir(args.work):
        os.remove(os.path.join(args.work, f))
    env = dict(base)
    env.pop("LD_PRELOAD")
    sh = ["sh", "-c", 'ROOST_STATS_PID=$$ LD_PRELOAD="$0" exec "$1"', args.preload, args.probe]
    p = subprocess.Popen(sh, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = p.communicate("go\ngo\n", timeout=WAIT_S)
    check(p.returncode == 0, "ROOST_STATS_PID run: status %d, %s" % (p.returncode, err))
    done = {k: int(v) for k, v in (kv.split("=") for kv in out.split("\n")[2].split()[1:])}
    files = sorted(os.listdir(args.work))
    check(files == ["timeline.%d.jsonl" % done["pid"]],
          "ROOST_STATS_PID: the probe's file only, not its child's: %s" % files)
    if files:
        lines = parse_lines(os.path.join(args.work, files[0]))
        check_lines(files[0], lines, done["pid"], 20)

    # ROOST_SERVICE=0: no thread to write lines; the last one at exit, and a warning.
    for f in os.listdir(args.work):
        os.remove(os.path.join(args.work, f))
    env = dict(base, ROOST_SERVICE="0")
    p = subprocess.Popen([args.probe], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=args.work)
    out, err = p.communicate("go\ngo\n", timeout=WAIT_S)
    check(p.returncode == 0, "ROOST_SERVICE=0 run: status %d" % p.returncode)
    check("ROOST_STATS_INTERVAL needs the service thread" in err,
          "ROOST_SERVICE=0: the warning (%r)" % err)
    done = {k: int(v) for k, v in (kv.split("=") for kv in out.split("\n")[2].split()[1:])}
    path = os.path.join(args.work, "timeline.%d.jsonl" % done["pid"])
    if check(os.path.exists(path), "ROOST_SERVICE=0: the file"):
        lines = parse_lines(path)
        check_lines(path, lines, done["pid"], 20)
        check(len(lines) == 1 and lines[0]["last"], "ROOST_SERVICE=0: the last line only")


def find_browser():
    for name in ("chromium-headless-shell", "chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browser(exe, profile, *extra):
    """A headless run that reaches for no network host (no sync, no updates)."""
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", "--user-data-dir=" + profile] + list(extra),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=120)


def page_test(args):
    exe = find_browser()
    if exe is None:
        print("FAIL: no headless browser: install Debian's chromium-headless-shell "
              "(tools/test_deps.sh does, as root)", file=sys.stderr)
        sys.exit(1)
    os.makedirs(args.work, exist_ok=True)
    page = os.path.join(args.work, "timeline.html")
    if os.path.exists(page):
        os.remove(page)
    # About a second or two of work in 3 threads: build, write and parse JSON.
    program = ("import json, threading\n"
               "def work(n):\n"
               "    doc = [{'id': i, 'name': 'item %d' % i, 'tags': ['a', 'b', str(i)],\n"
               "            'nested': {'x': i * 1.5, 'y': [i] * 5}} for i in range(n)]\n"
               "    text = json.dumps(doc)\n"
               "    assert len(json.loads(text)) == n\n"
               "threads = [threading.Thread(target=work, args=(40000,)) for _ in range(3)]\n"
               "for t in threads: t.start()\n"
               "for t in threads: t.join()\n"
               "work(60000)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROOST_")}
    r = subprocess.run([args.roost_run, "--timeline", page, "--interval", "50ms", "--",
                        "python3", "-c", program], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    check(r.returncode == 0, "roost-run --timeline: status %d, %s" % (r.returncode, r.stderr))
    m = re.search(r"roost-run: timeline of pid (\d+) \(python3, (\d+) lines\) written to (\S+)\n",
                  r.stderr)
    if not check(m is not None, "roost-run says where the page went: %r" % r.stderr):
        return
    check(m.group(3) == os.path.realpath(page), "the page's absolute path")
    recorded = int(m.group(2))
    check(recorded >= 2, "at least a first and a last line (%d)" % recorded)
    html = open(page, encoding="utf-8").read()
    check(not re.search(r"https?:", html, re.I), "the page refers to no http(s) URL")
    check(not re.search(r"<(link|img|iframe|object|embed)\b|\bsrc\s*=|@import|url\(", html, re.I),
          "the page loads nothing from elsewhere")

    profile = tempfile.mkdtemp(prefix="roost-timeline-browser.")
    try:
        r = browser(exe, profile, "--dump-dom", "file://" + os.path.realpath(page))
        check(r.returncode == 0, "the browser's status %d: %s" % (r.returncode, r.stderr[-2000:]))
        root = re.search(r"<html[^>]*>", r.stdout)
        if not check(root is not None, "the DOM after the script ran: %r" % r.stdout[:300]):
            return
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', root.group(0)))
        check(attrs.get("data-errors") == "0",
              "no script error in the page: %s" % attrs.get("data-error-text", attrs))
        drawn = re.fullmatch(r"series=(\d+) points=(\d+) lines=(\d+)", attrs.get("data-drawn", ""))
        if check(drawn is not None, "the script drew (data-drawn=%r)" % attrs.get("data-drawn")):
            series, points, lines = (int(g) for g in drawn.groups())
            check(lines == recorded, "the page holds every line (%d of %d)" % (lines, recorded))
            # Memory: 4 series of every line; activity: 4 (of every two lines
            # apart in time); the size classes: at least one, of every line.
            check(series >= 9, "every chart's series (%d)" % series)
            check(points >= 4 * lines + lines,
                  "every series' points (%d for %d lines)" % (points, lines))
        names = re.findall(r'<polyline class="series" data-name="([^"]*)" data-points="(\d+)"',
                           r.stdout)
        shown = [n for n, _ in names]
        for want in ("resident memory", "in use", "committed", "allocations", "frees",
                     "-byte objects"):
            check(any(want in n for n in shown), "a series named like %r (%s)" % (want, shown))
        check('<section id="events-section"><h2>Events</h2>' in r.stdout, "the events' list")
        if args.screenshot:
            if os.path.exists(args.screenshot):
                os.remove(args.screenshot)
            r = browser(exe, profile, "--hide-scrollbars", "--window-size=1100,2300",
                        "--screenshot=" + args.screenshot, "file://" + os.path.realpath(page))
            check(r.returncode == 0 and os.path.getsize(args.screenshot) > 10000,
                  "a screenshot of the page at " + args.screenshot)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def beside_test(args):
    if os.path.isdir(args.work):
        shutil.rmtree(args.work)
    os.makedirs(args.work)
    env = dict(os.environ, ROOST_STATS_INTERVAL="1",
               ROOST_TIMELINE_FILE=os.path.join(args.work, "t.%p.jsonl"))
    status = subprocess.run(args.command, env=env).returncode
    check(status == 0, "%s exited with %d" % (args.command[0], status))
    files = sorted(os.listdir(args.work))
    check(files, "no timeline file in " + args.work)
    for name in files:
        path = os.path.join(args.work, name)
        lines = parse_lines(path)
        pid = int(name.split(".")[1])
        check_lines(path, lines, pid, 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("lines", "page", "beside"))
    parser.add_argument("--probe")
    parser.add_argument("--preload")
    parser.add_argument("--roost-run")
    parser.add_argument("--work", required=True)
    parser.add_argument("--screenshot")
    argv = sys.argv[1:]
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:len(argv) - len(command) - (1 if command else 0)])
    args.command = command
    for name in ("probe", "preload", "roost_run", "work", "screenshot"):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    if args.what == "lines":
        lines_test(args)
    elif args.what == "page":
        page_test(args)
    else:
        beside_test(args)
    if failures:
        print("%d check(s) failed" % len(failures), file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
