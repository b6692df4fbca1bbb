#!/usr/bin/env python3
"""The task where the answer is known: train configs/induction.toml, then check with
`tinylm inspect` that the model learned induction heads and uses them.

    induction_acceptance.py TINYLM SOURCE_DIR [RUN_DIR]

With RUN_DIR holding a finished run, only the checks run (no training).

Asserts, on the induction probe (random tokens repeated twice) and the val split:
  - the loss on the repeat is at most a tenth of the loss on the first half;
  - the top induction head in layer 1 scores >= 0.8;
  - a layer-0 head scores >= 0.8 as previous-token;
  - ablating that induction head raises the loss on the repeat by more than 1 nat. The
    ablation is the mean ablation (the head's output replaced by its mean over the data):
    the model grows four induction heads in layer 1, and when one is zeroed the other three
    make up for most of it (about +0.3 nats, printed too).
Prints the figures either way.
"""
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    tinylm, source = sys.argv[1], Path(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(tmp) / "induction"
        start = time.monotonic()
        if not (run / "state.json").exists():
            train = subprocess.run([tinylm, "train", str(source / "configs/induction.toml"), "--out", str(run)],
                                   capture_output=True, text=True)
            if train.returncode != 0:
                print(train.stdout, train.stderr)
                return 1
        trained = time.monotonic() - start
        inspect = subprocess.run([tinylm, "inspect", str(run), "--heads", "--ablate", "--json", "-"],
                                 capture_output=True, text=True)
        if inspect.returncode != 0:
            print(inspect.stderr)
            return 1
        doc = json.loads(inspect.stdout)

    probe = doc["heads"]["probe"]
    first, second = probe["loss_first_half"], probe["loss_second_half"]
    induction_l1 = probe["scores"]["induction"][1]
    top = max(range(len(induction_l1)), key=lambda h: induction_l1[h])
    prev_l0 = doc["heads"]["scores"]["previous_token"][0]
    prev_head = max(range(len(prev_l0)), key=lambda h: prev_l0[h])
    ablated = next(r for r in doc["ablation"]["heads"] if r["layer"] == 1 and r["head"] == top)

    print(f"trained in {trained:.0f} s")
    print(f"probe loss: first half {first:.4f}, repeat {second:.4f} (ratio {second / first:.4f})")
    print(f"top induction head in layer 1: 1.{top}, score {induction_l1[top]:.4f}")
    print(f"top previous-token head in layer 0: 0.{prev_head}, score {prev_l0[prev_head]:.4f}")
    print(f"mean-ablating head 1.{top}: repeat loss +{ablated['probe_mean']:.4f} nats; zeroing it: "
          f"+{ablated['probe_zero']:.4f} (val loss +{ablated['mean']:.4f}, +{ablated['zero']:.4f})")
    failures = []
    if not second <= first / 10:
        failures.append("the loss on the repeat is more than a tenth of the first half's")
    if not induction_l1[top] >= 0.8:
        failures.append("no layer-1 head scores >= 0.8 as induction head")
    if not prev_l0[prev_head] >= 0.8:
        failures.append("no layer-0 head scores >= 0.8 as previous-token head")
    if not ablated["probe_mean"] > 1.0:
        failures.append("ablating the top induction head costs no more than 1 nat on the repeat")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
