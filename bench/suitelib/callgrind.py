"""Reading valgrind's callgrind output files: the calls one holds, each with the instructions
callgrind charged to it inclusively (call_cost.py and program_costs.py count from them)."""
import re

# "ob=", "fn=", "cob=", "cfn=" lines, with callgrind's name compression: "(id) name" the first
# time a name appears, "(id)" after that.
NAME_LINE = re.compile(r"^(c?ob|c?fn)=(?:\((\d+)\))?\s*(.*)$")


def read(path):
    """One output file (one process, or one thread of it): {"cmd", "total", "calls"}: its
    command, its instructions (Ir) and its calls, each (ob, fn, cob, cfn, count, ir): the
    caller's object and function, the callee's object (the caller's where the file names
    none) and function, how many calls and the instructions charged to them inclusively."""
    out = {"cmd": "?", "total": 0, "calls": []}
    names = {"ob": {}, "fn": {}}
    ob = fn = cob = cfn = None
    pending = None  # the number of calls whose cost line comes next
    ir_index = 0
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("cmd:"):
                out["cmd"] = line[4:].strip()
                continue
            if line.startswith("events:"):
                ir_index = line.split()[1:].index("Ir")
                continue
            if line.startswith(("summary:", "totals:")):
                out["total"] = max(out["total"], int(line.split()[1 + ir_index]))
                continue
            m = NAME_LINE.match(line)
            if m:
                kind, ident, name = m.group(1), m.group(2), m.group(3).strip()
                table = names["ob"] if kind.endswith("ob") else names["fn"]
                if ident is not None and name:
                    table[ident] = name
                value = table.get(ident, name) if ident is not None else name
                if kind == "ob":
                    ob = value
                elif kind == "fn":
                    fn, cob = value, None
                elif kind == "cob":
                    cob = value
                else:
                    cfn = value
                continue
            if line.startswith("calls="):
                pending = int(line.split("=", 1)[1].split()[0])
                continue
            if pending is not None and line[:1] in "0123456789+-*":
                costs = line.split()[1:]
                ir = int(costs[ir_index]) if ir_index < len(costs) else 0
                out["calls"].append((ob, fn, cob if cob is not None else ob, cfn, pending, ir))
                pending, cob = None, None
    return out
