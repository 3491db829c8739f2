# An allocation-heavy Python workload for preload_programs.py: a dict of
# 200k strings, sorts, JSON round trips, small-object churn.  Deterministic:
# prints digests of its results, which must not depend on the allocator.
import hashlib
import json
import random

rng = random.Random(12345)
digest = hashlib.sha256()

words = {}
for i in range(200_000):
    key = "k%06d-%x" % (i, rng.getrandbits(rng.randint(12, 48)))
    words[key] = key[::-1] * rng.randint(1, 4)
digest.update(str(len(words)).encode())

keys = sorted(words)
digest.update("".join(keys[::997]).encode())
by_length = sorted(words.values(), key=lambda s: (len(s), s))
digest.update("".join(by_length[::1009]).encode())

records = [{"id": i, "name": k, "tags": [k[:3], k[-3:]], "score": (i * 7919) % 1000 / 7}
           for i, k in enumerate(keys[:50_000])]
text = json.dumps(records, sort_keys=True)
back = json.loads(text)
assert back == records
digest.update(text.encode())

# Churn: lists, tuples, sets and bytearrays of many sizes created and dropped.
total = 0
for round_ in range(15):
    chunk = [tuple(range(j % 50)) for j in range(5000)]
    s = {x for t in chunk for x in t}
    b = bytearray(round_ * 10_000 + 1)
    total += len(s) + len(b) + sum(len(t) for t in chunk)
digest.update(str(total).encode())

print("entries", len(words))
print("json bytes", len(text))
print("churn", total)
print("digest", digest.hexdigest())
