#!/usr/bin/env python3
"""A bounded load on the live lab over 127.0.0.1: 8 clients, each on its own keep-alive
connection, 2000 requests each (the run list, a prompt's attention and logit lens, a
refusal), then stop. Every answer must be the one expected (0 errors), and the server's
resident memory must hold still once warm: from a quarter of the way to the end it may grow
by at most 8 MiB (under 700 bytes a request: a leak of one prompt's tensors would be
kilobytes).

  serve_load.py TINYLM SOURCE_DIR [CLIENTS] [REQUESTS]
"""
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

tinylm, src = sys.argv[1], sys.argv[2]
clients = int(sys.argv[3]) if len(sys.argv) > 3 else 8
per_client = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
work = tempfile.mkdtemp()
run = os.path.join(work, "run")
subprocess.run([tinylm, "train", os.path.join(src, "configs", "tiny.toml"), "--out", run,
                "--threads", "1", "--data.cache_dir=" + os.path.join(work, "cache")],
               check=True, capture_output=True)
# Under AddressSanitizer (make sanitize) freed memory waits in its quarantine, hundreds of
# MiB by default, so resident memory grows by design: the server runs with none, and LSan
# still checks for leaks at its exit.
env = dict(os.environ)
if "ASAN_OPTIONS" in env:
    env["ASAN_OPTIONS"] += ":quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
    print("AddressSanitizer: the server runs without its quarantine")
server = subprocess.Popen([tinylm, "serve", run, "--port", "0"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, env=env)
port = int(server.stdout.readline().strip().rsplit(":", 1)[1].strip("/"))


def rss_kib():
    with open(f"/proc/{server.pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


words = ["ROMEO", "JULIET", "the", "king", "What light", "O", "my lord", "First Citizen"]
errors, latencies, done = [], [], [0]
lock = threading.Lock()
marks = {}


def client(c):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(per_client):
        kind = i % 4
        if kind == 0:
            target, expect = "/api/runs", 200
        elif kind == 3:
            target, expect = "/api/inspect?run=nope&prompt=x", 404
        else:
            prompt = words[(c + i) % len(words)] + ":" + " " * (i % 3)
            target = "/api/inspect?" + urllib.parse.urlencode({"run": "run", "prompt": prompt, "logit-lens": ""})
            expect = 200
        start = time.perf_counter()
        try:
            conn.request("GET", target)
            r = conn.getresponse()
            body = r.read()
            json.loads(body)
            if r.status != expect:
                errors.append(f"{target}: {r.status}, expected {expect}")
        except Exception as e:  # a dropped connection is an error too; reconnect and go on
            errors.append(f"{target}: {e!r}")
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        with lock:
            latencies.append(time.perf_counter() - start)
            done[0] += 1
            total = done[0]
            for fraction in (0.25, 0.5, 0.75):
                if total == int(fraction * clients * per_client):
                    marks[fraction] = rss_kib()
    conn.close()


start = time.time()
threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
seconds = time.time() - start
marks[1.0] = rss_kib()
server.terminate()
code = server.wait(timeout=10)

latencies.sort()
n = len(latencies)
print(f"{n} requests from {clients} clients in {seconds:.1f} s ({n / seconds:.0f}/s); "
      f"p50 {1000 * latencies[n // 2]:.1f} ms, p99 {1000 * latencies[int(n * 0.99)]:.1f} ms")
print("resident memory (MiB) at 25/50/75/100%: " +
      ", ".join(f"{marks[f] / 1024:.1f}" for f in (0.25, 0.5, 0.75, 1.0)))
failures = []
if errors:
    failures.append(f"{len(errors)} errors, the first: {errors[:3]}")
if n != clients * per_client:
    failures.append(f"{n} requests answered of {clients * per_client}")
growth = marks[1.0] - marks[0.25]
if growth > 8 * 1024:
    failures.append(f"resident memory grew {growth / 1024:.1f} MiB after warming up")
if code != 0:
    failures.append(f"serve exited {code} on SIGTERM")
for f in failures:
    print("FAIL:", f, file=sys.stderr)
sys.exit(1 if failures else 0)
