"""The kernel's transparent-huge-page and compaction counters (/proc/vmstat), read around a run:
how many huge pages the run's faults got (thp_fault_alloc) or were refused (thp_fault_fallback),
how many ranges were collapsed (thp_collapse_alloc, by khugepaged or MADV_COLLAPSE), and how
often a faulting thread stalled in direct compaction (compact_stall). The counters are the
whole machine's: what other processes do meanwhile counts too, so read them on a quiet machine
and compare allocators over many interleaved runs.

    from suitelib.thp import read_vmstat, delta
    before = read_vmstat(); run(); moved = delta(before, read_vmstat())
"""

# The counters kept, in the order the tables show them.
COUNTERS = ["thp_fault_alloc", "thp_fault_fallback", "thp_collapse_alloc",
            "thp_collapse_alloc_failed", "thp_split_pmd", "compact_stall", "compact_fail",
            "compact_success"]


def read_vmstat(path="/proc/vmstat"):
    """COUNTERS as {name: value} ({} where /proc/vmstat cannot be read; a counter this kernel
    does not have is left out)."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name in COUNTERS:
                    out[name] = int(value)
    except (OSError, ValueError):
        return {}
    return out


def delta(before, after):
    """after - before for each counter both readings have."""
    return {k: after[k] - before[k] for k in COUNTERS if k in before and k in after}
