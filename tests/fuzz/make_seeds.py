#!/usr/bin/env python3
# tests/fuzz/make_seeds.py — writes the seed inputs of tests/fuzz/corpus/:
# ops/ for ops_fuzz.cc and misuse/ for misuse_fuzz.cc, a few hand-made inputs
# each, spelled in the harnesses' input formats (see their decoders), so that
# a short run starts from operations that mean something.
#
#   python3 tests/fuzz/make_seeds.py      # rewrites tests/fuzz/corpus/
#
# Owns: the seeds and their names.  Must never: write anywhere but
# tests/fuzz/corpus/, or produce different bytes from one run to the next.
import pathlib
import shutil

HERE = pathlib.Path(__file__).resolve().parent

# ---- ops_fuzz.cc: head byte (0x80: on the worker, 0x40: a range of slots,
# low nibble: the operation), slot, [count - 1], the operation's arguments.

MALLOC, CALLOC, ALIGNED, FREE, FREE_SIZED, REALLOC, CHECK, TRIM, RESTART, HANDOFF = (
    0, 3, 4, 5, 7, 8, 10, 12, 13, 14)


def op(kind, slot, worker=False, count=None, args=b""):
    head = kind | (0x80 if worker else 0) | (0x40 if count else 0)
    body = bytes([head, slot]) + (bytes([count - 1]) if count else b"")
    return body + args


def tiny(n):  # decode_size: scale 0, n <= 128
    assert n <= 128
    return bytes([0, n])


def sized(n):  # decode_size: scale 7, up to 1 MiB + 4 KiB
    return bytes([7]) + n.to_bytes(3, "little")


def near_large_boundary(offset):  # decode_size: scale 6, 240 KiB + offset
    return bytes([6]) + offset.to_bytes(2, "little")


OPS_SEEDS = {
    "local_malloc_free": op(MALLOC, 0, args=tiny(48)) + op(CHECK, 0) + op(FREE, 0),
    "remote_free": op(MALLOC, 1, args=tiny(64)) + op(FREE, 1, worker=True),
    "remote_free_back": op(MALLOC, 2, worker=True, args=tiny(100)) + op(FREE, 2),
    "batch_handed_over": op(HANDOFF, 0, count=32, args=tiny(80))
    + op(HANDOFF, 32, worker=True, count=32, args=tiny(16)),
    "aligned_64k": op(ALIGNED, 3, args=bytes([12, 2]))
    + op(ALIGNED, 4, worker=True, args=bytes([0x80 | 8]) + (5).to_bytes(2, "little"))
    + op(FREE_SIZED, 3, worker=True) + op(FREE_SIZED, 4),
    "realloc_across_threads": op(MALLOC, 5, args=tiny(100))
    + op(REALLOC, 5, worker=True, args=sized(300000))
    + op(REALLOC, 5, args=tiny(10)) + op(REALLOC, 5, worker=True, args=tiny(0)),
    "calloc_mix": op(CALLOC, 6, count=8, args=bytes([2]) + bytes([4]) + (5000).to_bytes(2, "little"))
    + op(FREE, 6, worker=True, count=8),
    "large_boundary": op(MALLOC, 7, count=4, args=near_large_boundary(16384))
    + op(FREE, 7, worker=True, count=4),
    "worker_restart": op(MALLOC, 10, worker=True, count=16, args=tiny(32))
    + bytes([RESTART, 0]) + op(FREE, 10, count=16),
    "trim_between": op(MALLOC, 20, count=16, args=sized(200000))
    + op(FREE, 20, count=16) + op(TRIM, 0, worker=True) + op(MALLOC, 20, args=tiny(24))
    + op(FREE_SIZED, 20, worker=True),
}

# ---- misuse_fuzz.cc: the first byte picks the case (secure: % 16, 0-6 small,
# 7-9 large, 10 huge, 11-15 corrupted links; default: % 8, 0-3 small at
# once, 4-6 large, 7 huge), the rest drives its plan (see decode_plan()).


def small(n):  # decode_small_size: scale 0, n <= 128
    return bytes([0, n])


def large(extra):  # decode_large_size: 256 KiB + 1 + extra
    return extra.to_bytes(3, "little")


MISUSE_SEEDS = {
    # secure: owner main, no prefix, 48 bytes, 8 siblings, freed twice by main
    # default (kind 0): free(p); free(p) of a 48-byte object in a fresh thread
    "small_at_once": bytes([0, 0, 0]) + small(48) + bytes([8, 0, 0, 0, 0]),
    # secure: owner A, first free by B, churn of the same size, second by A
    "small_remote_then_owner": bytes([1, 1, 0]) + small(96)
    + bytes([8, 0x01, 1, 0x80, 1]) + (900).to_bytes(2, "little") + bytes([1, 0]),
    # secure: 16-byte object freed by a helper that exits, then by main
    "small_16_after_exit": bytes([2, 0, 0]) + small(16)
    + bytes([4, 0x01, 1, 0x03, 1, 0, 0]),
    # secure: first free sized, kept allocations between, second free remote
    "small_keep_between": bytes([3, 0, 1, 1]) + small(120) + small(100)
    + bytes([16, 0x80, 1, 0x81, 0, 40, 0x01, 0]),
    # secure (kind 7) large after other large allocations; default: huge
    "large_after_large": bytes([7, 0, 0]) + large(50000) + bytes([0, 1, 0x01, 0, 8])
    + large(400000) + bytes([0]),
    # default (kind 4): a large double free; secure: small
    "large_default": bytes([4, 0, 0]) + large(700000) + bytes([1, 0, 0]),
    # both builds (kind 10 / 2): huge in the secure build, small in the default
    "huge_or_small": bytes([10, 5, 0]) + small(64) + bytes([0]),
    # secure: a freed 64-byte object's link overwritten
    "corrupted_link": bytes([11, 0, 0]) + small(64) + bytes([16, 0x02, 4, 0])
    + (0x4141414141414141).to_bytes(8, "little"),
    # secure: the mark of an object freed remotely
    "corrupted_mark_remote": bytes([12, 1, 0]) + small(32) + bytes([24, 0x4d, 2, 3])
    + (5).to_bytes(8, "little"),
}


def write(folder, seeds):
    target = HERE / "corpus" / folder
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name, data in sorted(seeds.items()):
        (target / name).write_bytes(data)


write("ops", OPS_SEEDS)
write("misuse", MISUSE_SEEDS)
