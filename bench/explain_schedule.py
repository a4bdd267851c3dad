"""How ``quantformer explain``'s default integration schedule was chosen (bench/RESULTS.md,
"Explanations"): on the TweetEval Abortion TRAINING tweets, never the test tweets.

For a sample of training tweets explained by the model ``bench_explain.py`` fine-tunes (its
``--models`` folder), the integrand of Integrated Gradients along the path,
``g(alpha) = sum over tokens of (x - x') . dF/dx(x' + alpha (x - x'))`` for the predicted class's
logit F, is evaluated on the 65 points ``alpha = k / 64`` and on the Gauss-Legendre nodes of 16
steps. Every rule then needs no further model call: trapezoid rules on 3, 5, 9, 17, 33, 65
points (each the previous one plus the midpoints), midpoint rules on 2 to 32 points, Simpson's
rule from two nested trapezoid rules (and Romberg's next extrapolation from three), and
Gauss-Legendre 16 (what ``explain`` used first
before). For each rule: the share of tweets whose completeness gap (as ``explain`` computes
it) is under 5 %. Then each adaptive schedule (a first level, refinements of the tweets above
5 %) is costed in integrand evaluations per tweet (a nested level costs its point count in all).

Command: ``OMP_NUM_THREADS=1 PYTHONPATH=python python bench/explain_schedule.py --n 200``.

Method notes (run 2026-12-02 on 200 training tweets, seed 1, the ``explain-abortion`` model).
Share of tweets with a completeness gap under 5 % per rule (points = gradient evaluations):
Gauss-Legendre 16 (the old first level) 50.0 %; trapezoid 9 / 17 / 33 / 65: 31.0 / 77.5 / 100 /
100 %; midpoint 8 / 16 / 32: 31.5 / 77.0 / 100 %; Simpson from two nested trapezoid rules
9 / 17 / 33: 15.5 / 50.0 / 95.5 %; Romberg's next step 9 / 17 / 33: 18.0 / 46.0 / 92.5 %.
Adaptive nested schedules, evaluations per training tweet (all end at 100 % under 5 %):
trapezoid 3-65 16.9; 5-65 17.3; **9, 17, 33, 65 (chosen) 18.0**; 17-65 20.6; midpoint 8 then
trapezoid 17.5; trapezoid 9 then Simpson 23.6; the old Gauss-Legendre 16, 48, 128 (not nested)
about 40 on the test tweets. These integrands are not smooth enough for high-order rules to
pay: Simpson's extrapolation (and Romberg's) widens the gap, so none is used. A first level of
3 or 5 points saves about one evaluation per tweet but lets tweets stop on 3 or 5 gradients, so
9 was taken; 65 is the last level (no training tweet needed more than 33). ``--steps N`` still
means N Gauss-Legendre steps for every document.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

GRID = 64  # intervals of the finest trapezoid grid


def integrand(eng, win, target: int, alphas: np.ndarray, chunk: int = 40) -> np.ndarray:
    """g(alpha) of one document (no padding) at ``alphas``, computed as Captum's
    LayerIntegratedGradients does: the word-embedding layer's output is replaced by the
    interpolated embeddings and the target logit differentiated with respect to them."""
    import torch

    ids, base, mask, types = eng.tensors([win])
    layer = eng.model.get_input_embeddings()
    with torch.no_grad():
        e_in, e_base = layer(ids), layer(base)
    delta = e_in - e_base
    out = []
    for a in np.array_split(alphas, max(1, -(-len(alphas) // chunk))):
        x = (e_base + torch.tensor(a, dtype=torch.float32).view(-1, 1, 1) * delta)
        x = x.detach().requires_grad_()
        handle = layer.register_forward_hook(lambda m, i, o: x)
        try:
            k = len(a)
            logits = eng.forward(ids.expand(k, -1), mask.expand(k, -1),
                                 None if types is None else types.expand(k, -1))
        finally:
            handle.remove()
        (grad,) = torch.autograd.grad(logits[:, target].sum(), x)
        out.append((grad * delta).sum(dim=(1, 2)).double().numpy())
    return np.concatenate(out)


def trapezoid(g: np.ndarray, n: int) -> float:
    """Trapezoid rule on ``n`` equally spaced points of [0, 1] (a subset of the grid)."""
    y = g[:: GRID // (n - 1)]
    return float((y.sum() - (y[0] + y[-1]) / 2) / (n - 1))


def midpoint(g: np.ndarray, n: int) -> float:
    """Midpoint rule on ``n`` intervals (points ``(k + 1/2) / n``, a subset of the grid)."""
    return float(g[GRID // (2 * n):: GRID // n].mean())


def sample(args) -> dict:
    """The integrand on the grid and the Gauss-Legendre 16 estimate of the sampled tweets."""
    import torch

    import bench_explain
    from quantformer.audit.explain import windows
    from quantformer.audit.integrate import Integrator
    from quantformer.infer.load import load_model

    torch.set_num_threads(1)
    train, _ = bench_explain.abortion(Path(args.data))
    clf = load_model(str(Path(args.models) / "explain-abortion"), device="cpu")
    rows = np.sort(np.random.default_rng(1).permutation(len(train))[: args.n])
    wins, _ = windows(clf, train["text"].iloc[rows].tolist())
    eng = Integrator(clf)
    targets = eng.all_logits(wins, np.arange(len(wins))).argmax(axis=1)
    x, wt = np.polynomial.legendre.leggauss(16)
    out = {"g": [], "gl16": [], "diff": []}
    t0 = time.time()
    for i, (w, t) in enumerate(zip(wins, targets)):
        ids, base, mask, types = eng.tensors([w])
        out["diff"].append(eng.logits(ids, mask, types)[0, t] - eng.logits(base, mask, types)[0, t])
        out["g"].append(integrand(eng, w, int(t), np.linspace(0, 1, GRID + 1)))
        out["gl16"].append(float((0.5 * wt * integrand(eng, w, int(t), 0.5 * (1 + x))).sum()))
        if (i + 1) % 25 == 0:
            print(f"{i + 1} tweets, {time.time() - t0:.0f} s", flush=True)
    return {k: np.array(v) for k, v in out.items()}


def gap(est, diff) -> np.ndarray:
    """The completeness gap as ``explain`` computes it."""
    from quantformer.audit.integrate import completeness_gap

    return completeness_gap(est, np.asarray(diff), 0.0)


def schedule_cost(gaps: list, counts: list) -> tuple:
    """(mean evaluations, share under 5 % at the end, stops) of an adaptive nested schedule
    whose levels have these gaps (one array per level) and cumulative point counts."""
    todo = np.ones(len(gaps[0]), dtype=bool)
    cost, final = np.zeros(len(gaps[0])), np.zeros(len(gaps[0]))
    for g, c in zip(gaps, counts):
        cost[todo], final[todo] = c, g[todo]
        todo &= g > 0.05
    stops = {int(c): int((cost == c).sum()) for c in counts}
    return cost.mean(), float(np.mean(final <= 0.05)), stops


def report(s: dict) -> None:
    g, diff = s["g"], s["diff"]
    T = {n: np.array([trapezoid(x, n) for x in g]) for n in (3, 5, 9, 17, 33, 65)}
    M = {n: np.array([midpoint(x, n) for x in g]) for n in (2, 4, 8, 16, 32)}
    S = {n: (4 * T[n] - T[(n + 1) // 2]) / 3 for n in (5, 9, 17, 33, 65)}
    R = {n: (16 * S[n] - S[(n + 1) // 2]) / 15 for n in (9, 17, 33, 65)}  # Romberg's next step
    print(f"\n{len(g)} training tweets; share with completeness gap under 5 % (median gap):")
    for name, rule in (("trapezoid", T), ("midpoint", M), ("Simpson", S), ("Romberg", R)):
        for n, est in rule.items():
            v = gap(est, diff)
            print(f"  {name} {n:2d} points: {np.mean(v <= 0.05):6.1%} ({np.median(v):.3f})")
    v = gap(s["gl16"], diff)
    print(f"  Gauss-Legendre 16:     {np.mean(v <= 0.05):6.1%} ({np.median(v):.3f})")
    print("\nadaptive nested schedules: evaluations per tweet, share under 5 % at the end")
    for first in (3, 5, 9, 17):
        for name, rule in (("trapezoid", T), ("Simpson after the first", S)):
            counts = [n for n in T if n >= first]
            gaps = [gap((T if j == 0 else rule)[n], diff) for j, n in enumerate(counts)]
            c, ok, stops = schedule_cost(gaps, counts)
            print(f"  {name} from {first} points: {c:5.1f}, {ok:.1%}; stops {stops}")
    for first in (4, 8, 16):  # midpoint rule first; then its points plus the ends: T(2m + 1)
        counts = [first] + [n for n in T if n > 2 * first]
        gaps = [gap(M[first], diff)] + [gap(T[n], diff) for n in counts[1:]]
        c, ok, stops = schedule_cost(gaps, counts)
        print(f"  midpoint {first}, then trapezoid: {c:5.1f}, {ok:.1%}; stops {stops}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--models", default=str(ROOT.parent / "models"))
    p.add_argument("--n", type=int, default=200, help="training tweets sampled (200)")
    p.add_argument("--save", default=None, help="save the integrand samples (.npz) here, or "
                                                "read them from here when the file exists")
    args = p.parse_args(argv)
    if args.save and Path(args.save).exists():
        s = dict(np.load(args.save))
    else:
        s = sample(args)
        if args.save:
            np.savez(args.save, **s)
    report(s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
