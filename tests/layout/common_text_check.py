#!/usr/bin/env python3
"""tests/layout/common_text_check.py — the code a small program runs lies
together at the front of libroost.so's text.

Runs a program (tests/layout/small_program.cc) under callgrind with the
library preloaded and checks:

  1. every function of the library that it ran carries ROOST_COMMON_TEXT
     (platform/text_section.h), that is, sits in section .text.hot.roost of
     the library's objects (read from the static library built from them),
     but for the C runtime's few functions;
  2. in the shared library those functions lie together, no other function
     between them, and end within the first 64 KiB of its executable
     segment: the kernel's first fault-around window there, which the
     library's _init opens.

Each failure names the functions.  Usage:
  common_text_check.py [--valgrind V] --lib libroost.so --archive libroost.a --program P
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

SECTION = ".text.hot.roost"
WINDOW = 64 * 1024
# The C runtime's functions in every shared library (crtbeginS.o), run by
# its constructors and destructors; they follow the block.
C_RUNTIME = {"frame_dummy", "register_tm_clones", "deregister_tm_clones",
             "__do_global_dtors_aux", "_init", "_fini"}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def functions_run(valgrind, program, lib, out):
    """Mangled names of the library's functions that `program` ran, with
    roost's options at their defaults."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROOST_")}
    env["LD_PRELOAD"] = os.path.abspath(lib)
    subprocess.run([valgrind, "--tool=callgrind", "--demangle=no",
                    "--callgrind-out-file=" + out, program],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lib_real = os.path.realpath(lib)
    objects, names, ran, current = {}, {}, set(), None
    entry = re.compile(r"(c?ob|c?fn)=\((\d+)\)(?: (.*))?$")
    with open(out) as f:
        for line in f:
            m = entry.match(line.rstrip("\n"))
            if not m:
                continue
            kind, key, name = m.groups()
            table = objects if kind.endswith("ob") else names
            if name is not None:
                table[key] = name
            if kind == "ob":
                current = objects[key]
            elif kind == "fn" and current and os.path.realpath(current) == lib_real:
                ran.add(names[key].split("'")[0])  # callgrind's 'N: recursion depth
    return ran


def marked_functions(archive):
    """Function symbols in SECTION in the archive's objects."""
    marked = set()
    for line in run(["objdump", "-t", archive]).splitlines():
        # address, flags, section, size, [.hidden], name
        fields = line.split()
        if SECTION in fields and "F" in fields[1:fields.index(SECTION)]:
            marked.add(fields[-1])
    return marked


def text_layout(lib):
    """(start of the executable segment, [(address, size, name)] of the
    functions in .text by address)."""
    segment = None
    for line in run(["readelf", "-lW", lib]).splitlines():
        fields = line.split()  # LOAD offset vaddr paddr filesz memsz flags... align
        if fields and fields[0] == "LOAD" and "E" in fields[-3:-1]:
            segment = int(fields[2], 16)
    functions = []
    for line in run(["nm", "-S", "--defined-only", lib]).splitlines():
        fields = line.split()
        if len(fields) == 3:  # no size: the C runtime's
            fields.insert(1, "0")
        if len(fields) == 4 and fields[2] in "tTwW":
            functions.append((int(fields[0], 16), int(fields[1], 16), fields[3]))
    functions.sort()
    return segment, functions


def demangle(names):
    return run(["c++filt"], input="\n".join(names)).splitlines()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--valgrind", default="valgrind")
    parser.add_argument("--lib", required=True)
    parser.add_argument("--archive", required=True)
    parser.add_argument("--program", required=True)
    args = parser.parse_args()

    marked = marked_functions(args.archive)
    if not marked:
        print(f"no function of {args.archive} is in {SECTION}")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        ran = functions_run(args.valgrind, args.program, args.lib, os.path.join(tmp, "callgrind.out"))
    if len(ran) < 20:
        print(f"callgrind saw only {len(ran)} functions of {args.lib} run: {sorted(ran)}")
        return 1
    failures = 0

    segment, functions = text_layout(args.lib)
    # callgrind names a function without a symbol size by its address.
    by_address = {f"{a:#018x}": name for a, _, name in functions}
    ran = {by_address.get(name, name) for name in ran}
    unmarked = sorted(ran - marked - C_RUNTIME)
    if unmarked:
        failures += 1
        print(f"{len(unmarked)} functions the small program runs are not marked ROOST_COMMON_TEXT:")
        for name in demangle(unmarked):
            print("   ", name)

    positions = [i for i, f in enumerate(functions) if f[2] in marked]
    first, last = positions[0], positions[-1]
    between = [f[2] for f in functions[first:last + 1] if f[2] not in marked]
    if between:
        failures += 1
        print(f"{len(between)} unmarked functions lie among the marked ones in {args.lib}:")
        for name in demangle(between):
            print("   ", name)
    end = functions[last][0] + functions[last][1]
    print(f"{len(ran)} functions run, {len(marked)} marked; the marked code spans "
          f"{functions[first][0]:#x}-{end:#x} ({(end - functions[first][0]) // 1024} KiB), "
          f"ending {(end - segment) // 1024} KiB into the executable segment")
    if end - segment > WINDOW:
        failures += 1
        print(f"the marked code ends beyond the first {WINDOW // 1024} KiB of the executable segment")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
