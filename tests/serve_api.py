#!/usr/bin/env python3
"""The live lab's API over loopback (tinylm serve), checked against the CLI and against
docs/serve-openapi.json:

  - /api/inspect answers what `inspect --json -` prints, byte for byte; /api/eval what
    `eval --json` prints; /api/sample streams the text `sample` prints, token by token;
  - /api/live follows a run while `tinylm train` writes it (metrics, snapshots, whole
    checkpoints), and the served model moves to the last checkpoint;
  - every bad request is refused with its 4xx (or 503 at a limit) and {"error", "where"}: a
    malformed query, an unknown run, parameter or view, a bad or too-large number, a huge
    body, the wrong method, a file named; the server keeps serving, and writes nothing under
    the run directories;
  - a client that goes away cancels its heavy job; the heavy queue and the streams are
    bounded; SIGTERM stops the server cleanly.

  serve_api.py TINYLM SOURCE_DIR
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import jsonschema

tinylm, src = sys.argv[1], sys.argv[2]
spec = json.load(open(os.path.join(src, "docs", "serve-openapi.json")))
failures = []
requested_paths = set()


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(*args, **kw):
    return subprocess.run([tinylm, *args], check=True, capture_output=True, **kw)


def train(out, *extra):
    """`tinylm train` in the background; its log is out + ".log"."""
    return subprocess.Popen(
        [tinylm, "train", os.path.join(src, "configs", "tiny.toml"), "--out", out, "--threads", "1",
         "--data.cache_dir=" + os.path.join(work, "cache"), *extra],
        stdout=subprocess.DEVNULL, stderr=open(out + ".log", "w"))


def log_of(out):
    return open(out + ".log").read()[-800:]


def validate(path, status, content_type, body):
    """The answer against the OpenAPI description of its path and status."""
    get = spec["paths"][path]["get"]
    response = get["responses"].get(str(status))
    check(response is not None, f"{path}: status {status} is not in the description")
    if response is None:
        return
    if "$ref" in response:
        response = spec["components"]["responses"][response["$ref"].split("/")[-1]]
    media = content_type.split(";")[0].strip()
    check(media in response["content"], f"{path} {status}: {media} is not described")
    if media == "application/json":
        schema = response["content"][media]["schema"]
        resolver = jsonschema.RefResolver.from_schema(spec)
        try:
            jsonschema.Draft202012Validator(schema, resolver=resolver).validate(json.loads(body))
        except jsonschema.ValidationError as e:
            check(False, f"{path} {status}: {e.message}")


def request(path, params=None, method="GET", body=None, raw_target=None, headers=None):
    """(status, content type, body bytes), validated against the description."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    target = raw_target or (path + ("?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
                                    if params is not None else ""))
    conn.request(method, target, body=body, headers=headers or {})
    r = conn.getresponse()
    check(r.getheader("Content-Encoding") is None, f"{target[:80]}: compressed ({r.getheader('Content-Encoding')})")
    data = r.read()
    conn.close()
    ctype = r.getheader("Content-Type", "")
    if method == "GET" and path in spec["paths"]:
        requested_paths.add(path)
        validate(path, r.status, ctype, data)
    return r.status, ctype, data


def api(path, params):
    status, _, data = request(path, params)
    check(status == 200, f"{path} {params}: status {status}: {data[:300]!r}")
    return data


def refused(path, params, status, where, method="GET", body=None, raw_target=None, what=None):
    got, ctype, data = request(path, params, method, body, raw_target)
    check(got == status, f"{what or params}: status {got}, expected {status}: {data[:300]!r}")
    try:
        doc = json.loads(data)
        check(doc.get("where") == where, f"{what or params}: where {doc.get('where')!r}, expected {where!r}")
        check(isinstance(doc.get("error"), str) and doc["error"], f"{what or params}: no error text")
    except ValueError:
        check(False, f"{what or params}: the refusal is not JSON: {data[:200]!r}")


def events(path, params, until, limit_s):
    """Server-Sent Events of a stream until `until(events)` holds or `limit_s` pass."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=limit_s)
    target = path + "?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    buffer, out, deadline = b"", [], time.time() + limit_s
    head_done = False
    while time.time() < deadline and not until(out):
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        buffer += chunk
        if not head_done and b"\r\n\r\n" in buffer:
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            check(b" 200 " in head.split(b"\r\n")[0], f"{path}: {head[:100]!r}")
            head_done = True
        # Chunked transfer: the events are whole in the text once chunk sizes are dropped.
        text = b"\n".join(line for line in buffer.split(b"\r\n")
                          if not all(c in b"0123456789abcdef" for c in line.strip()) or not line.strip())
        out = []
        for block in text.decode("utf-8", "replace").split("\n\n"):
            name = [l[7:] for l in block.split("\n") if l.startswith("event: ")]
            data = [l[6:] for l in block.split("\n") if l.startswith("data: ")]
            if name and data:
                try:
                    out.append((name[0], json.loads(data[0])))
                except ValueError:
                    pass  # a block not yet whole
    sock.close()
    requested_paths.add(path)
    return out


def tree(dirs):
    """Every file under the run directories, with its size and mtime."""
    out = {}
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                p = os.path.join(root, f)
                st = os.stat(p)
                out[p] = (st.st_size, st.st_mtime_ns)
    return out


work = tempfile.mkdtemp()
runs_dir = os.path.join(work, "runs")
os.makedirs(runs_dir)
done_run = os.path.join(runs_dir, "done")
t = train(done_run, "--train.max_iters=100")
check(t.wait() == 0, "training the served run: " + log_of(done_run))
SAE = "blocks.1.attn.hook_z-w64-k4"  # the served run's SAE, which /api/inspect?features= shows
run("features", done_run, "--hook", "blocks.1.attn.hook_z", "--width", "64", "--k", "4",
    "--tokens", "8192", "--eval-windows", "4", "--threads", "1")
# A bigger model, one step trained, whose head sweeps take seconds: the heavy queue's run.
big_run = os.path.join(runs_dir, "big")
t = train(big_run, "--train.max_iters=1", "--train.eval_iters=1", "--model.n_layer=4",
          "--model.n_head=4", "--model.n_embd=128", "--model.block_size=256",
          "--model.pos_encoding=rope")
check(t.wait() == 0, "training the big run: " + log_of(big_run))
server = subprocess.Popen([tinylm, "serve", runs_dir, "--port", "0", "--heavy-jobs", "1",
                           "--heavy-queue", "2", "--max-streams", "3"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
url = server.stdout.readline().strip()
check(url.startswith("http://127.0.0.1:"), f"serve printed {url!r}")
port = int(url.rsplit(":", 1)[1].strip("/"))
stderr_lines = []
threading.Thread(target=lambda: stderr_lines.extend(server.stderr), daemon=True).start()

# The live run begins in the served folder after the server started: the folder is looked
# through again, and the run is served from its train.lock on, before its first checkpoint.
live_run = os.path.join(runs_dir, "live")
live = train(live_run, "--train.max_iters=400", "--train.eval_interval=100")
for _ in range(600):
    if os.path.exists(os.path.join(live_run, "train.lock")):
        break
    time.sleep(0.02)
for _ in range(100):
    listed = [r["id"] for r in json.loads(request("/api/runs", {})[2])["runs"]]
    if "live" in listed:
        break
    time.sleep(0.1)
check(listed == ["big", "done", "live"], f"the runs after the live one began: {listed}")

# The live run, followed from now on while the rest is checked.
live_events = []
watcher = threading.Thread(target=lambda: live_events.extend(events(
    "/api/live", {"run": "live"}, lambda e: any(n == "checkpoint" and d["step"] == 400 for n, d in e),
    300)))
watcher.start()

try:
    before = tree([done_run, big_run])

    # The runs, by id.
    runs = json.loads(api("/api/runs", {}))["runs"]
    check([r["id"] for r in runs] == ["big", "done", "live"], f"runs: {runs}")
    check(runs[1]["step"] == 100, f"the done run's step: {runs[1]['step']}")
    check(runs[1]["saes"] == [SAE] and runs[0]["saes"] == [], f"the runs' SAEs: {runs}")

    # The page and its script.
    status, ctype, page = request("/", None)
    check(status == 200 and b"/lab.js" in page and b"function render(" in page, "the page")
    status, ctype, script = request("/lab.js", None)
    check(status == 200 and ctype.startswith("text/javascript"), f"lab.js: {status} {ctype}")

    # A browser's Accept-Encoding gets the answer as it is: compressing costs on loopback
    # (brotli took 10 s for a run's snapshots).
    status, _, _ = request("/api/inspect", {"run": "done", "training": "", "heatmaps": "packed"},
                           headers={"Accept-Encoding": "gzip, deflate, br"})
    check(status == 200, f"inspect with Accept-Encoding: {status}")

    # /api/inspect is inspect --json, byte for byte.
    for flags in (["--prompt", "ROMEO: what", "--heads", "--logit-lens", "--windows", "4", "--probes", "2"],
                  ["--priors", "--training"],
                  ["--prompt", "ROMEO:", "--ablate-heads", "1.0", "--ablation", "mean", "--windows", "4"],
                  ["--patch", "--clean", "ROMEO:", "--corrupt", "ROMEO "],
                  ["--features", SAE, "--tokens", "2000"]):
        cli = run("inspect", done_run, *flags, "--json", "-", "--threads", "1").stdout
        params, i = {"run": "done"}, 0
        while i < len(flags):
            name = flags[i][2:]
            if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
                params[name] = flags[i + 1]
                i += 2
            else:
                params[name] = ""
                i += 1
        served = api("/api/inspect", params)
        check(served == cli, f"inspect {' '.join(flags)}: the served JSON differs from the CLI's "
                             f"({len(served)} and {len(cli)} bytes)")
    packed = json.loads(api("/api/inspect", {"run": "done", "prompt": "ROMEO:", "heatmaps": "packed"}))
    check("b64" in packed["attention"]["patterns"], "heatmaps=packed packs the patterns")

    # /api/eval is eval --json.
    check(api("/api/eval", {"run": "done"}) == run("eval", done_run, "--json", "--threads", "1").stdout,
          "eval: the served JSON differs from the CLI's")
    check(api("/api/eval", {"run": "done", "ablate": "0.0,1.1"}) ==
          run("eval", done_run, "--json", "--ablate", "0.0,1.1", "--threads", "1").stdout,
          "eval --ablate: the served JSON differs from the CLI's")

    # /api/sample streams what sample prints.
    flags = {"prompt": "ROMEO:", "max-new-tokens": "40", "seed": "7", "num-samples": "1",
             "temperature": "0.9"}
    cli = run("sample", done_run, *[x for k, v in flags.items() for x in ("--" + k, v)],
              "--threads", "1").stdout.decode()
    streamed = events("/api/sample", {"run": "done", **flags}, lambda e: any(n == "done" for n, _ in e), 60)
    text = "".join(d["text"] for n, d in streamed if n in ("prompt", "token") and d["sample"] == 0)
    check(text + "\n" == cli, f"sample: streamed {text!r}, the CLI printed {cli!r}")
    done = [d for n, d in streamed if n == "done"]
    check(len(done) == 1 and done[0]["tokens"] == 40, f"sample's done event: {done}")
    check(sum(1 for n, _ in streamed if n == "token") >= 40, "sample: fewer token events than tokens")

    # Refusals: each with its status and where; the server goes on.
    refused("/api/inspect", {"run": "nope", "prompt": "x"}, 404, "run")
    refused("/api/inspect", {"prompt": "x"}, 400, "run")
    refused("/api/inspect", {"run": "done", "bogus-view": ""}, 400, "bogus-view")
    # An SAE is named, never given as a path; one the run lacks is not found.
    refused("/api/inspect", {"run": "done", "features": "../done/saes/" + SAE}, 400, "features")
    refused("/api/inspect", {"run": "done", "features": "/etc"}, 400, "features")
    refused("/api/inspect", {"run": "big", "features": SAE}, 404, "features")
    refused("/api/inspect", {"run": "done"}, 400, "query", what="no view asked for")
    refused("/api/inspect", {"run": "done", "heads": "", "windows": "abc"}, 400, "windows")
    refused("/api/inspect", {"run": "done", "heads": "", "windows": "1e999"}, 400, "windows")
    refused("/api/inspect", {"run": "done", "heads": "", "windows": "5000"}, 400, "windows",
            what="windows over the server's limit")
    refused("/api/inspect", {"run": "done", "heads": "", "text": "/etc/passwd"}, 400, "text")
    refused("/api/inspect", {"run": "done", "heatmaps": "jpeg", "priors": ""}, 400, "heatmaps")
    refused("/api/inspect", {"run": "done", "prompt": "x" * 5000}, 400, "prompt")
    refused("/api/inspect", {"run": "done", "ablate-heads": "9.9", "prompt": "x"}, 400, "ablate-heads")
    refused("/api/inspect", {"run": "done", "analogy": "\u00e9:\u00e8::\u00ea"}, 422, "analogy",
            what="an analogy of tokens the vocabulary lacks")
    refused(None, None, 400, "prompt", raw_target="/api/inspect?run=done&prompt=a&prompt=b",
            what="a parameter given twice")
    refused(None, None, 400, "query", raw_target="/api/inspect?run=done&Bad%20Name=1",
            what="a malformed parameter name")
    refused(None, None, 414, "query", raw_target="/api/inspect?run=done&prompt=" + "x" * 9000,
            what="a target over the limit")
    refused("/api/sample", {"run": "done", "temperature": "-1"}, 400, "temperature")
    refused("/api/sample", {"run": "done", "max-new-tokens": "100000"}, 400, "max-new-tokens")
    refused("/api/eval", {"run": "done", "context": "0"}, 400, "context")
    refused("/api/eval", {"run": "done", "logits": "/tmp/x"}, 400, "logits")
    refused("/api/live", {"run": "done", "from": "yesterday"}, 400, "from")
    refused("/api/runs", None, 405, "method", method="POST", body=b"{}")
    refused("/api/inspect", None, 405, "method", method="DELETE")
    refused("/api/runs", None, 413, "body", method="GET", body=b"x" * (1 << 20), what="a huge body")
    refused("/nowhere", None, 404, "path")
    check(json.loads(api("/api/runs", {}))["runs"][1]["id"] == "done", "the server stopped serving")

    # Streams are bounded: the server holds 3 (--max-streams); the 4th is refused.
    holders = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    for s in holders:
        s.sendall(b"GET /api/live?run=done HTTP/1.1\r\nHost: x\r\n\r\n")
        s.recv(4096)  # the headers and the hello event: the stream is open
    refused("/api/live", {"run": "done"}, 503, "streams")
    for s in holders:
        s.close()

    # Heavy jobs are bounded: one worker (--heavy-jobs 1), two waiting (--heavy-queue 2);
    # the rest of 8 sent at once are refused.
    heavy = {"run": "big", "heads": "", "windows": "64", "probes": "8"}
    statuses = []
    threads = [threading.Thread(target=lambda: statuses.append(request("/api/inspect", heavy)[0]))
               for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    check(statuses.count(503) >= 1 and statuses.count(200) >= 1,
          f"8 heavy jobs at once: statuses {sorted(statuses)}")

    # A client that goes away cancels its heavy job (the sweep of 16 heads on 256 windows
    # of 256 tokens would take many seconds), and the worker is free again.
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /api/inspect?run=big&ablate&windows=256 HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.5)
    s.close()
    for _ in range(100):
        if any("went away; cancelling" in l for l in stderr_lines):
            break
        time.sleep(0.1)
    check(any("went away; cancelling" in l for l in stderr_lines), "no cancellation logged")
    start = time.time()
    api("/api/inspect", {"run": "done", "heads": "", "windows": "4", "probes": "2"})
    check(time.time() - start < 5, "the heavy worker was still busy after the cancellation")

    # A run while it trains: its metrics, snapshots and checkpoints as they were written
    # (the stream opened when the server started, below).
    watcher.join(timeout=300)
    names = {n for n, _ in live_events}
    check({"hello", "metrics", "snapshot", "checkpoint"} <= names, f"live events: {sorted(names)}")
    steps = [d["step"] for n, d in live_events if n == "metrics"]
    check(steps == sorted(steps) and steps and max(steps) >= 300, f"live metrics' steps: {steps}")
    checkpoints = [d["step"] for n, d in live_events if n == "checkpoint"]
    check(checkpoints and checkpoints[-1] == 400, f"live checkpoints: {checkpoints}")
    check(live.wait() == 0, "the live run's training failed: " + log_of(live_run))
    time.sleep(0.6)  # the served model is looked for again after 0.5 s
    served = json.loads(api("/api/inspect", {"run": "live", "priors": ""}))
    check(served["step"] == 400, f"the live run's served step: {served['step']}")
    check(api("/api/eval", {"run": "live"}) == run("eval", live_run, "--json", "--threads", "1").stdout,
          "the live run's served model is not its last checkpoint")

    check(tree([done_run, big_run]) == before, "files under the served runs changed")
    check(requested_paths == set(spec["paths"]), f"paths not exercised: {set(spec['paths']) - requested_paths}")
finally:
    server.send_signal(signal.SIGTERM)
    try:
        code = server.wait(timeout=10)
        check(code == 0, f"serve exited {code} on SIGTERM")
    except subprocess.TimeoutExpired:
        server.kill()
        check(False, "serve did not stop within 10 s of SIGTERM")
    if live.poll() is None:
        live.kill()

if failures:
    print(f"{len(failures)} failure(s)", file=sys.stderr)
    sys.exit(1)
print("serve API: every endpoint, every refusal, the CLI's answers, a live run: ok")
