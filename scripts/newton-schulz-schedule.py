#!/usr/bin/env python3
"""Derives Muon's Newton-Schulz schedule (train/muon.h, kNewtonSchulzSchedule) and prints it.

Polar Express's greedy construction (Amsel, Persson, Musco and Gower, 2025): singular values
start in [lo, 1] (X = U / |U|_F); step k is the odd quintic p(s) = a s + b s^3 + c s^5 closest
to 1 in the worst case on [l_k, u_k * safety] (minimax, by Remez exchange: the error
equioscillates at the ends and at p's two interior extrema), and [l_{k+1}, u_{k+1}] is p's
image of that interval. The safety factor designs each step for values a little above where
they should be, as rounding puts them. Then it checks what train/muon.h promises: the band
[1e-3, 1] lands in, and values just above 1, with 1% too much at every step, staying bounded.

Usage: scripts/newton-schulz-schedule.py [--steps 4] [--lo 1e-3] [--safety 1.02]
Needs numpy (Debian's python3-numpy).
"""
import argparse

import numpy as np


def minimax_quintic(lo, hi, iterations=100):
    """a, b, c of the odd quintic closest to 1 on [lo, hi], and its error."""
    points = np.array([lo, lo + 0.2 * (hi - lo), lo + 0.6 * (hi - lo), hi])
    for _ in range(iterations):
        rows = [[x, x**3, x**5, (-1) ** i] for i, x in enumerate(points)]
        a, b, c, error = np.linalg.solve(np.array(rows), np.ones(4))
        # p' = a + 3 b s^2 + 5 c s^4 = 0: the interior extrema, a quadratic in s^2.
        squares = np.roots([5 * c, 3 * b, a])
        extrema = sorted(
            np.sqrt(r.real) for r in squares if abs(r.imag) < 1e-12 and lo**2 < r.real < hi**2)
        if len(extrema) != 2:
            raise RuntimeError(f"no equioscillation on [{lo}, {hi}]")
        moved = np.array([lo, extrema[0], extrema[1], hi])
        if np.allclose(moved, points, rtol=1e-14, atol=0):
            break
        points = moved
    return a, b, c, abs(error)


def schedule(steps, lo, safety):
    low, high, out = lo, 1.0, []
    for _ in range(steps):
        a, b, c, _ = minimax_quintic(low, high * safety)
        out.append((round(a, 4), round(b, 4), round(c, 4)))  # as train/muon.h writes them
        s = np.linspace(low, high * safety, 400001)
        p = a * s + b * s**3 + c * s**5
        low, high = p.min(), p.max()
    return out


def through(steps, s, noise=0.0):
    for a, b, c in steps:
        s = s * (1 + noise)
        s = a * s + b * s**3 + c * s**5
    return s


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--lo", type=float, default=1e-3)
    parser.add_argument("--safety", type=float, default=1.02)
    args = parser.parse_args()
    steps = schedule(args.steps, args.lo, args.safety)
    for a, b, c in steps:
        print(f"    {{{a:.4f}, {b:.4f}, {c:.4f}}},")
    band = through(steps, np.logspace(np.log10(args.lo), 0, 30001))
    print(f"[{args.lo:g}, 1] -> [{band.min():.4f}, {band.max():.4f}]")
    for top in (1.0, 1.005, 1.01, 1.02):
        print(f"{top} -> {through(steps, top):.4f}; with 1% too much a step {through(steps, top, 0.01):.4g}")
    product = np.prod([a for a, _, _ in steps])
    print(f"largest gain (the product of the a's, at small values): {product:.1f}")


if __name__ == "__main__":
    main()
