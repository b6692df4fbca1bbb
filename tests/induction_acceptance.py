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
    make up for most of it (about +0.3 nats, printed too);
  - activation patching, on a random sequence repeated (clean) and the same with the token
    before the answer's first occurrence changed (corrupted: the induction heads' key is
    gone), singles out the previous-token head in layer 0 (it restores >= 0.8 of the logit
    difference, every other layer-0 head < 0.1), and layer 1's attention output restores
    >= 0.9. The four induction heads share layer 1's part, so no single one restores much.
    Attribution patching's estimate names the same top induction head as the exact runs;
  - the strongest K-composition pair is that previous-token head into a layer-1 head whose
    induction score on the probe is >= 0.8;
  - in the snapshots taken during training, both that previous-token head and the top
    induction head formed (their scores crossed half their last values), and the steps are
    printed. (Their order is not asserted: on this model the induction score crosses half its
    last one eval before the previous-token score does; docs/INSPECT.md.)
  - the phase-change detector found the change during training (train/run/phase_change.h),
    naming that previous-token head and a layer-1 induction head, and its drop took at most
    half as long as the plateau before it (a plateau, then a sharp drop);
  - a control run (when this script trains): the same config on the same 64 symbols drawn
    with no repeats planted finds no phase change.
Prints the figures either way.
"""
import random
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
            # float32 on every machine: the thresholds below hold for the model float32
            # training grows; bfloat16 autocast (auto's choice on some CPUs) grows another,
            # whose top induction head cost 0.96 nats mean-ablated instead of 1.37.
            train = subprocess.run([tinylm, "train", str(source / "configs/induction.toml"), "--out", str(run),
                                    "--train.dtype=float32"],
                                   capture_output=True, text=True)
            if train.returncode != 0:
                print(train.stdout, train.stderr)
                return 1
        trained = time.monotonic() - start
        inspect = subprocess.run([tinylm, "inspect", str(run), "--all", "--json", "-"],
                                 capture_output=True, text=True)
        if inspect.returncode != 0:
            print(inspect.stderr)
            return 1
        doc = json.loads(inspect.stdout)
        patching = patch_induction(tinylm, run)
        if patching is None:
            return 1
        control = control_run(tinylm, source, Path(tmp)) if len(sys.argv) <= 3 else None
        if control == "":
            return 1

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
    p = patching
    layer0 = p["heads"][0]
    patched_top = max(range(len(layer0)), key=lambda h: layer0[h])
    print(f"patching ({p['clean_answer']} clean, {p['corrupt_answer']} corrupted): layer 0 heads "
          f"{layer0}, layer 1 heads {p['heads'][1]}, attn_out {p['attn_out']}")
    if patched_top != prev_head or layer0[prev_head] < 0.8:
        failures.append(f"patching does not single out previous-token head 0.{prev_head}")
    if any(layer0[h] >= 0.1 for h in range(len(layer0)) if h != prev_head):
        failures.append("another layer-0 head restores >= 0.1 of the logit difference")
    if p["attn_out"][1] < 0.9:
        failures.append("layer 1's attention output restores less than 0.9")
    # Attribution patching (one backward pass) picks the induction head the exact runs pick.
    # It cannot see the previous-token head's part: that head acts through layer 1's
    # attention pattern, which the patch moves far along a saturated softmax, where the
    # first-order estimate is near 0 (printed); the exact runs are there for that.
    est = p["estimate"]["heads"]
    inductive = [h for h in range(len(induction_l1)) if induction_l1[h] >= 0.8]
    exact_top = max(inductive, key=lambda h: p["heads"][1][h])
    estimate_top = max(inductive, key=lambda h: est[1][h])
    print(f"induction heads {inductive}: top patched exactly 1.{exact_top} "
          f"({p['heads'][1][exact_top]:.4f}), by attribution 1.{estimate_top} "
          f"({est[1][estimate_top]:.4f}); previous-token head 0.{prev_head}: exact "
          f"{layer0[prev_head]:.4f}, attribution {est[0][prev_head]:.4f}; heads' Spearman "
          f"{p['agreement']['heads']['spearman']}")
    if exact_top != estimate_top:
        failures.append("attribution and exact patching disagree on the top induction head")
    k = doc["composition"]["strongest"]["k"]
    print(f"strongest K-composition: {k['from']['layer']}.{k['from']['head']} -> "
          f"{k['to']['layer']}.{k['to']['head']}, score {k['score']:.4f}")
    if (k["from"] != {"layer": 0, "head": prev_head} or k["to"]["layer"] != 1 or
            induction_l1[k["to"]["head"]] < 0.8):
        failures.append("the strongest K-composition pair is not previous-token head -> induction head")
    formed = doc["snapshots"]["formed"]
    prev_formed, ind_formed = formed["previous_token"][0][prev_head], formed["induction"][1][top]
    print(f"formed: previous-token head 0.{prev_head} at step {prev_formed}, induction head 1.{top} "
          f"at step {ind_formed} (snapshots at {doc['snapshots']['steps']})")
    if prev_formed is None or ind_formed is None:
        failures.append("the previous-token head or the induction head never formed in the snapshots")
    pc = doc["training"]["phase_change"]
    if pc is None:
        failures.append("training found no phase change")
    else:
        named_prev = (pc["previous_token"]["layer"], pc["previous_token"]["head"])
        named_ind = (pc["induction"]["layer"], pc["induction"]["head"])
        print(f"phase change at step {pc['step']}: the repeat's loss fell {pc['drop']:.2f} nats in "
              f"{pc['end'] - pc['start']} steps ({pc['start']} to {pc['end']}); previous-token head "
              f"{named_prev[0]}.{named_prev[1]}, induction head {named_ind[0]}.{named_ind[1]}")
        if named_prev != (0, prev_head):
            failures.append(f"the phase change names previous-token head {named_prev}, not 0.{prev_head}")
        if named_ind[0] != 1 or induction_l1[named_ind[1]] < 0.8:
            failures.append(f"the phase change names {named_ind}, not a layer-1 induction head")
        if not pc["end"] - pc["start"] <= pc["start"] / 2:
            failures.append("the drop took more than half as long as the plateau: a smooth decline")
    if control is not None:
        print(f"control (no repeats): {control}")
        if not control.startswith("no phase change"):
            failures.append("the control run, with no repeats, found a phase change")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


def control_run(tinylm, source, tmp):
    """The induction config on the same 64 symbols, uniformly random with no repeats planted:
    the detector's line about the phase change ("no phase change ..."), or "" on failure."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    rng = random.Random(2026)
    corpus = tmp / "no_repeats.txt"
    corpus.write_text("".join(rng.choice(alphabet) for _ in range(1_000_000)))
    run = tmp / "control"
    r = subprocess.run([tinylm, "train", str(source / "configs/induction.toml"), "--out", str(run),
                        "--data.source=file", f"--data.path={corpus}",
                        f"--data.cache_dir={tmp / 'cache'}", "--train.snapshots=false"],
                       capture_output=True, text=True)
    said = [line for line in (r.stdout + r.stderr).splitlines() if "phase change" in line]
    if r.returncode != 0 or not said:
        print(r.stdout, r.stderr)
        return ""
    state = json.loads((run / "state.json").read_text())
    line = said[-1].split("info ", 1)[-1]
    return line if state.get("phase_change") is None else "found: " + line


def patch_induction(tinylm, run):
    """`inspect --patch` on the first of a few random sequences where the runs' answers differ."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    for seed in range(1, 11):
        rng = random.Random(seed)
        s = rng.sample(alphabet, 20)
        k = 12  # the clean text ends with s[:k]: its answer is s[k]
        clean = "".join(s) + "".join(s[:k])
        corrupt = list(clean)
        corrupt[k - 1] = next(c for c in alphabet if c not in s)
        r = subprocess.run([tinylm, "inspect", str(run), "--patch", "--clean", clean, "--corrupt",
                            "".join(corrupt), "--json", "-"], capture_output=True, text=True)
        if r.returncode == 0:
            return json.loads(r.stdout)["patching"]
        if "both predict" not in r.stderr:
            print(r.stderr)
            return None
    print("FAILED: every corrupted sequence kept the clean answer")
    return None


if __name__ == "__main__":
    sys.exit(main())
