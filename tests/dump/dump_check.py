#!/usr/bin/env python3
"""Dumps on demand (ROOST_DUMP_SIGNAL, roost-run --dump PID) end to end:
runs tests/dump/dump_program, asks it for dumps with roost-run --dump PID
--wait, and reads what it wrote.

  dump_check.py --roost-run PATH --program PATH --work DIR stats
      `roost-run --option dump_signal=USR2 program work`: two dumps, the
      program made to allocate 1000 objects between them; both statistics
      files parse as strict JSON, are the only files of the dump (no .tmp
      left), and their allocations and frees grew by at least 1000; again
      with ROOST_STATS=text: two text reports, every counter present, the
      allocations grown alike.
      A fork child (the program's "fork"), after one dump of its parent:
      its dump is its first (number 1, its own pid), the parent's next is
      its second, and the child ends with status 0.
  ... profile
      the same with ROOST_PROFILE=1: beside each statistics file a heap
      profile, which google-pprof reads, naming the program's work_thread.
  ... storm
      8 threads (more than cores) that do nothing but malloc and free, the
      heap profiler sampling them often: 100 dumps in a row, each waited
      for, its statistics parsed and its heap profile there, numbered 1 to
      100; the program then ends normally (status 0).
  dump_check.py --roost-run PATH --program PATH --work DIR own
      (the program linked to libroost.a, its own SIGUSR2 handler installed
      before roost starts) ROOST_VERBOSE=1 says that roost leaves the
      signal; the dump signal roost-run sends reaches the program's own
      handler, and no dump file is written.

Nothing here bets on time: each wait is for an event (a line, a file) with
a generous bound.  The programs run with this environment less every
ROOST_* variable but ROOST_OFFLOAD (make test-extended's offload pass).
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

WAIT_S = 120
NAME = [""]  # the program's name, as roost's lines give it


def fail(message):
    sys.exit("dump_check: " + message)


def environment(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ROOST_") or k == "ROOST_OFFLOAD"}
    env.pop("LD_PRELOAD", None)
    env.update(extra or {})
    return env


def strict_json(text, where):
    def no_constant(name):
        raise ValueError("not JSON: " + name)

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError("duplicate keys")
        return dict(pairs)
    try:
        return json.loads(text, parse_constant=no_constant, object_pairs_hook=no_duplicates)
    except ValueError as e:
        fail(f"{where}: not strict JSON ({e}): {text[:200]!r}")


class Program:
    """The program under roost-run, driven through its stdin and stdout."""

    def __init__(self, args, command, env, work):
        self.args = args
        self.stderr_path = os.path.join(work, "stderr.txt")
        self.stderr = open(self.stderr_path, "w")
        self.p = subprocess.Popen(command, env=env, cwd=work, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.expect("ready")

    def expect(self, what):
        line = self.p.stdout.readline().strip()
        if line != what:
            self.p.kill()
            fail(f"the program said {line!r}, not {what!r}; stderr:\n{self.errors()}")

    def ask(self, request):
        self.p.stdin.write(request + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def dump(self):
        """roost-run --dump PID --wait: the statistics file it names."""
        r = subprocess.run([self.args.roost_run, "--dump", str(self.p.pid), "--wait"],
                           capture_output=True, text=True, timeout=WAIT_S, env=environment())
        if r.returncode != 0:
            self.p.kill()
            fail(f"roost-run --dump: status {r.returncode}: {r.stderr}\nprogram's stderr:\n"
                 f"{self.errors()}")
        return r.stdout.strip()

    def finish(self):
        self.p.stdin.close()
        try:
            status = self.p.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.p.kill()
            fail(f"the program did not end within {WAIT_S} s after its stdin closed")
        if status != 0:
            fail(f"the program ended with status {status}; stderr:\n{self.errors()}")
        self.stderr.close()
        return self.errors()

    def errors(self):
        with open(self.stderr_path) as f:
            return f.read()


def fresh(work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)


def text_counters(text, where):
    lines = text.splitlines()
    if not lines or not re.match(r"^roost: report of pid \d+ \(" + re.escape(NAME[0]) + r"\) at ", lines[0]):
        fail(f"{where}: no header line: {text[:200]!r}")
    counters = {}
    for line in lines[1:]:
        m = re.match(r"^roost: (\w+) +(\d+)  \S", line)
        if m:
            counters[m.group(1)] = int(m.group(2))
    return counters


def two_dumps(args, work, extra, form):
    """Two dumps of `program work`, 1000 allocations apart: their files."""
    fresh(work)
    env = environment(dict(extra, ROOST_DUMP_SIGNAL="USR2"))
    prog = Program(args, [args.roost_run, args.program, "work"], env, work)
    first = prog.dump()
    if prog.ask("round") != "ok":
        fail("the program did not do its round")
    second = prog.dump()
    stderr = prog.finish()
    pid = prog.p.pid
    suffix = ".stats.txt" if form == "text" else ".stats.json"
    want = [os.path.join(work, f"roost-dump.{pid}.{n}{suffix}") for n in (1, 2)]
    if [first, second] != want:
        fail(f"roost-run --dump --wait named {[first, second]}, not {want}")
    for name in want:
        line = f"roost: statistics of pid {pid} ({NAME[0]}) written to {name}"
        if line not in stderr.splitlines():
            fail(f"stderr does not say {line!r}:\n{stderr}")
    leftovers = glob.glob(os.path.join(work, "*.tmp"))
    if leftovers:
        fail(f"temporary files left: {leftovers}")
    return pid, want, stderr


def check_moved(before, after, where):
    for name in ("allocations", "frees"):
        if after[name] < before[name] + 1000:
            fail(f"{where}: {name} went from {before[name]} to {after[name]}, not up by 1000")


def check_stats(args):
    pid, files, _ = two_dumps(args, args.work + "/json", {}, "json")
    totals = []
    for name in files:
        with open(name) as f:
            text = f.read()
        if not text.endswith("}\n"):
            fail(f"{name}: does not end with the object and a newline")
        d = strict_json(text, name)
        if d["process"]["pid"] != pid or d["process"]["program"] != NAME[0]:
            fail(f"{name}: names {d['process']}, not pid {pid}")
        totals.append(d["totals"])
    check_moved(totals[0], totals[1], "JSON dumps")
    _, files, _ = two_dumps(args, args.work + "/text", {"ROOST_STATS": "text"}, "text")
    counters = []
    for name in files:
        with open(name) as f:
            c = text_counters(f.read(), name)
        missing = set(totals[0]) - set(c)
        if missing:
            fail(f"{name}: counters missing: {sorted(missing)}")
        counters.append(c)
    check_moved(counters[0], counters[1], "text dumps")
    check_fork(args)
    print("dump_check: stats ok")


def check_fork(args):
    work = args.work + "/fork"
    fresh(work)
    prog = Program(args, [args.roost_run, args.program, "work"],
                   environment({"ROOST_DUMP_SIGNAL": "USR2"}), work)
    parent = prog.p.pid
    names = [prog.dump()]
    prog.p.stdin.write("fork\n")
    prog.p.stdin.flush()
    answer = prog.p.stdout.readline().split()
    if len(answer) != 2 or answer[0] != "child":
        prog.p.kill()
        fail(f"fork: the program said {answer}")
    child = int(answer[1])
    r = subprocess.run([args.roost_run, "--dump", str(child), "--wait"], capture_output=True,
                       text=True, timeout=WAIT_S, env=environment())
    names.append(r.stdout.strip())
    names.append(prog.dump())
    open(os.path.join(work, "stop-child"), "w").close()
    reaped = prog.ask("reap")
    prog.finish()
    want = [os.path.join(work, f"roost-dump.{p}.{n}.stats.json")
            for p, n in ((parent, 1), (child, 1), (parent, 2))]
    if r.returncode != 0 or names != want:
        fail(f"fork: dumps named {names}, not {want}; roost-run on the child: {r.stderr}")
    if reaped != "reaped 0":
        fail(f"fork: the child ended with {reaped}")
    d = strict_json(open(want[1]).read(), want[1])
    if d["process"]["pid"] != child:
        fail(f"{want[1]}: names pid {d['process']['pid']}, not the child's {child}")


def check_profile(args):
    tool = shutil.which("google-pprof") or shutil.which("pprof")
    if tool is None:
        fail("google-pprof is not installed (Debian package google-perftools; "
             "tools/test_deps.sh installs it)")
    pid, files, stderr = two_dumps(args, args.work + "/profile",
                                   {"ROOST_PROFILE": "1", "ROOST_PROFILE_RATE": "4k",
                                    "ROOST_PROFILE_FILE": "at-exit.heap"}, "json")
    for n, name in enumerate(files, 1):
        strict_json(open(name).read(), name)
        heap = os.path.join(args.work, "profile", f"roost-dump.{pid}.{n}.heap")
        line = f"roost: heap profile of pid {pid} ({NAME[0]}) written to {heap}"
        if line not in stderr.splitlines():
            fail(f"stderr does not say {line!r}:\n{stderr}")
        r = subprocess.run([tool, "--text", "--show_bytes", "--alloc_space", args.program, heap],
                           capture_output=True, text=True, timeout=WAIT_S, env=environment())
        if r.returncode != 0 or "work_thread" not in r.stdout:
            fail(f"google-pprof on {heap}: status {r.returncode}, no work_thread:\n"
                 f"{r.stdout}\n{r.stderr}")
    print("dump_check: profile ok")


def check_storm(args):
    work = args.work + "/storm"
    fresh(work)
    # The profiler on, sampling often: a dump also reads what threads that
    # were inside the profiler when the signal came are changing.
    env = environment({"ROOST_DUMP_SIGNAL": "SIGUSR2", "ROOST_DUMP_FILE": "storm.%n.%p",
                       "ROOST_PROFILE": "1", "ROOST_PROFILE_RATE": "16k",
                       "ROOST_PROFILE_FILE": "at-exit.heap"})
    prog = Program(args, [args.roost_run, args.program, "storm", "8"], env, work)
    pid = prog.p.pid
    for n in range(1, 101):
        name = prog.dump()
        want = os.path.join(work, f"storm.{n}.{pid}.stats.json")
        if name != want:
            fail(f"dump {n}: roost-run named {name}, not {want}")
        d = strict_json(open(name).read(), name)
        if d["totals"]["allocations"] == 0:
            fail(f"{name}: no allocations")
        heap = os.path.join(work, f"storm.{n}.{pid}.heap")
        with open(heap) as f:
            if not f.readline().startswith("heap profile: "):
                fail(f"{heap}: no heap profile")
    prog.finish()
    print("dump_check: storm ok (100 dumps)")


def check_own(args):
    work = args.work + "/own"
    fresh(work)
    env = environment({"ROOST_DUMP_SIGNAL": "usr2", "ROOST_VERBOSE": "1"})
    prog = Program(args, [args.program, "own"], env, work)
    r = subprocess.run([args.roost_run, "--dump", str(prog.p.pid)], capture_output=True,
                       text=True, timeout=WAIT_S, env=environment())
    if r.returncode != 0:
        prog.p.kill()
        fail(f"roost-run --dump: status {r.returncode}: {r.stderr}")
    # The handler runs before kill() returns in the kernel's view, but on its
    # own schedule here: ask until it says so.
    for _ in range(WAIT_S * 10):
        runs = prog.ask("count")
        if runs != "0":
            break
        subprocess.run(["sleep", "0.1"])
    if runs != "1":
        prog.p.kill()
        fail(f"the program's own handler ran {runs} times, not once")
    stderr = prog.finish()
    line = ("roost: ROOST_DUMP_SIGNAL=SIGUSR2: the program already handles or ignores this "
            "signal: roost leaves it, no dumps")
    if line not in stderr.splitlines():
        fail(f"stderr does not say {line!r}:\n{stderr}")
    written = [f for f in os.listdir(work) if f.startswith("roost-dump")]
    if written:
        fail(f"files written: {written}")
    print("dump_check: own ok")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--roost-run", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("mode", choices=["stats", "profile", "storm", "own"])
    args = ap.parse_args()
    args.roost_run = os.path.abspath(args.roost_run)
    args.program = os.path.abspath(args.program)
    args.work = os.path.abspath(args.work)
    NAME[0] = os.path.basename(args.program)
    {"stats": check_stats, "profile": check_profile, "storm": check_storm,
     "own": check_own}[args.mode](args)


if __name__ == "__main__":
    main()
