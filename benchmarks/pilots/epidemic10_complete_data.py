r"""Pilot (session 63): what would the epidemic's hidden infections say? A floor on Table 6's widths.

The summary matrix :math:`S` is a function of the complete data :math:`C` (every hidden status
and discharge), whose likelihood is explicit: :mod:`scorebayes.models.epidemic_complete` (the
equations, and tests of the score identities). Since :math:`S = f(C)`:

- asymptotically, every regular estimator given :math:`S` has variance at least
  :math:`I_C^{-1}` (Cramér–Rao), so a correct, near-Gaussian posterior given :math:`S` is at least
  :math:`3.92\sqrt{(I_C^{-1})_{jj}}` wide; near the boundary :math:`\theta = 0` (floors 1-3) and
  with the prior's pull the posterior is not near Gaussian, and this bound does not apply;
- averaged over any prior, :math:`\mathbb E\operatorname{Var}(\theta_j \mid S) \ge
  \mathbb E\operatorname{Var}(\theta_j \mid C)`. The exact posterior given :math:`C` can be
  sampled. On the data sets of the reference pilot (``epidemic10_reference_abc.py``, generator
  ``(13, "field-root")``) it is the answer of someone who saw every infection.

Commands (``.venv/bin/python benchmarks/pilots/epidemic10_complete_data.py ...``):

- ``info [B] [--model epidemic5]``: :math:`I_C` at :math:`\theta^*` from ``B`` (default 400)
  trajectories. The check: the complete-data score's mean (0) and its covariance (:math:`I_C`).
  The Cramér–Rao widths are printed beside the paper's rows and ours.
- ``posterior WORKER WORKERS DATA_SETS [--model epidemic5]``: NUTS (``scorebayes.samplers.
  sample_nuts``, 2 chains, 300 warm-up, 600 draws each, dense mass) on the complete-data
  posterior under the model's prior. Appends to
  ``runs/pilots/complete_data/posterior_MODEL.jsonl``.
- ``report [--model epidemic5]``: widths, coverage and errors over those data sets. For
  epidemic10 also, data set by data set, beside the reference ABC (``adaptive_raw.jsonl``) and
  the learned chains (``learned040.pt``).
- ``check DATA_SET``: that data set's NUTS record against random-walk MH on the same posterior.
- ``mle DATA_SETS``: the complete-data maximum-likelihood estimates (theta >= 0) on them.
- ``figure``: ``benchmarks/results/epidemic10_complete_data.png`` from those three.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from scorebayes.models import get_model  # noqa: E402
from scorebayes.models.epidemic_complete import CompleteDataLikelihood, complete_data_score  # noqa: E402
from scorebayes.parallel import make_generator  # noqa: E402
from scorebayes.priors import ParameterSpace  # noqa: E402
from scorebayes.samplers.nuts import sample_nuts  # noqa: E402

F64 = torch.float64
RUNS = ROOT / "runs" / "pilots"
STORE = RUNS / "complete_data"
TRUTH_DATA_SETS = 100  # as epidemic10_reference_abc.py: the first chunk of its data sets


def paper_widths(name: str, names: list[str]) -> torch.Tensor:
    """The paper's n-model CI95 widths (Table 6 or Table 3)."""
    from epidemic5 import TABLE3
    from epidemic10 import TABLE6

    table = TABLE6 if name == "epidemic10" else TABLE3
    return torch.tensor([table[k][2][3] for k in names], dtype=F64)


def trajectories(name: str, num: int, generator: torch.Generator):
    """``num`` runs at theta*: ``(model, S [num, T, J+2], X [num, T, N], discharged [num, T, N])``.

    Draws the latents as ``EpidemicSimulator.simulate`` does for ``num <= chunk_size``, so with the
    reference pilot's generator these are its data sets (checked in :func:`posterior`)."""
    model = get_model(name)
    sim = model.epidemic_simulator
    theta = model.true_parameters.to(F64).expand(num, -1).clone()
    z = sim.latent(num, sim.steps, generator)
    S, X, _ = sim.run(theta, z, return_states=True)
    return model, S, X, z[..., 2] < sim.gamma


def truth_data_sets(name: str = "epidemic10"):
    """The reference pilot's data sets at theta*, as :func:`trajectories` gives them."""
    return trajectories(name, TRUTH_DATA_SETS, make_generator(13, "field-root"))


def others() -> tuple[dict[int, dict], torch.Tensor | None]:
    """The other posteriors on the same data sets: the reference ABC-PMC's round-6 record per data
    set (score summary) and the learned chains' draws ``[40, 500, d]`` (``None`` if not saved)."""
    ref = {r["data_set"]: r["score_stage6"]
           for r in map(json.loads, open(RUNS / "reference_abc" / "adaptive_raw.jsonl"))}
    path = RUNS / "reference_abc" / "learned040.pt"
    return ref, (torch.load(path)["draws"].double() if path.exists() else None)


def info(name: str, num: int) -> None:
    model, _, X, discharged = trajectories(name, num, make_generator(63, "complete-info"))
    score, fisher = complete_data_score(model.epidemic_simulator, model.true_parameters, X, discharged)
    se = score.std(0) / num**0.5
    empirical = torch.cov(score.T)
    width = 3.92 * torch.linalg.inv(fisher).diagonal().sqrt()
    paper = paper_widths(name, model.reported_names)
    ours = json.loads((ROOT / "benchmarks" / "results" / f"{name}.json").read_text())["methods"]
    row = "n-model-views-spread" if name == "epidemic10" else "n-model"
    our = torch.tensor([ours[row]["parameters"][k]["ci_width"] for k in model.reported_names], dtype=F64)
    print(f"{name}, {num} complete-data trajectories at theta*; rates {', '.join(model.reported_names)}")
    print(f"  check: mean score / SE          {fmt(score.mean(0) / se, '+.1f')}")
    print(f"  check: var(score) / I_C (diag)  {fmt(empirical.diagonal() / fisher.diagonal(), '.2f')}"
          f"  (Monte Carlo SE about {(2 / num) ** 0.5:.2f})")
    print(f"  Cramer-Rao CI95 widths 3.92 sqrt(I_C^-1)_jj: {fmt(width, '.3f')}")
    print(f"    over the paper's n-model row:              {fmt(width / paper, '.2f')}")
    print(f"    over ours ({row}):  {fmt(width / our, '.2f')}")


def fmt(values: torch.Tensor, spec: str) -> str:
    return " / ".join(format(v, spec) for v in values.tolist())


def posterior(worker: int, workers: int, data_sets: int, name: str) -> None:
    model, S, X, discharged = truth_data_sets(name)
    check = model.simulator(model.true_parameters.to(F64).expand(TRUTH_DATA_SETS, -1).clone(), S.shape[1],
                            make_generator(13, "field-root"))
    if not torch.equal(check, S):  # the reference pilot's data sets, or its comparison means nothing
        raise SystemExit("the trajectories' S differ from the simulator's data sets")
    space, prior = ParameterSpace(model.prior), model.prior
    truth = model.true_parameters.to(F64)
    STORE.mkdir(parents=True, exist_ok=True)
    out = STORE / f"posterior_{name}.jsonl"
    done = {json.loads(line)["data_set"] for line in open(out)} if out.exists() else set()
    for k in range(worker, data_sets, workers):
        if k in done:
            continue
        start = time.perf_counter()
        likelihood = CompleteDataLikelihood(model.epidemic_simulator, X[k], discharged[k])

        def log_prob(theta, likelihood=likelihood):  # theta [1, d] -> [1]
            return prior.log_prob(theta) + likelihood.log_prob(theta)

        post = sample_nuts(log_prob, truth.expand(2, -1).clone(), 600, space=space, warmup=300,
                           full_mass=True, generator=make_generator(63, "complete-nuts", k))
        draws = post.samples.reshape(-1, len(truth))
        lo, hi = draws.quantile(0.025, 0), draws.quantile(0.975, 0)
        record = {"data_set": k, "infections": len(likelihood.events), "mean": draws.mean(0).tolist(),
                  "lo": lo.tolist(), "hi": hi.tolist(), "divergences": post.info["divergences"],
                  "rhat": max_rhat(post.samples), "seconds": time.perf_counter() - start}
        with open(out, "a") as f:
            f.write(json.dumps(record) + "\n")
        print(f"data set {k}: {len(likelihood.events)} infections; facility {record['mean'][0]:.4f} "
              f"[{lo[0]:.4f}, {hi[0]:.4f}], max R-hat {record['rhat']:.3f}, "
              f"{record['divergences']} divergences, {record['seconds']:.0f} s", flush=True)


def check(data_set: int) -> None:
    """The NUTS record of ``data_set`` against random-walk MH (``scorebayes.samplers.rwmh``,
    8 chains of 20,000 burn-in and 40,000 steps thinned by 10) on the same posterior."""
    from scorebayes.samplers.rwmh import sample_rwmh

    model, _, X, discharged = truth_data_sets()
    likelihood = CompleteDataLikelihood(model.epidemic_simulator, X[data_set], discharged[data_set])
    truth = model.true_parameters.to(F64)
    post = sample_rwmh(lambda theta: model.prior.log_prob(theta) + likelihood.log_prob(theta),
                       truth.expand(8, -1).clone(), 4_000, space=ParameterSpace(model.prior), burn_in=20_000,
                       thin=10, generator=make_generator(63, "complete-rwmh", data_set))
    draws = post.samples.reshape(-1, len(truth))
    nuts = next(r for r in map(json.loads, open(STORE / "posterior_epidemic10.jsonl")) if r["data_set"] == data_set)
    print(f"data set {data_set}, random-walk MH (max R-hat {max_rhat(post.samples):.3f}) against NUTS:")
    print(f"  means:  {fmt(draws.mean(0), '.3f')}")
    print(f"          {fmt(torch.tensor(nuts['mean']), '.3f')}")
    print(f"  widths: {fmt(draws.quantile(0.975, 0) - draws.quantile(0.025, 0), '.3f')}")
    print(f"          {fmt(torch.tensor(nuts['hi']) - torch.tensor(nuts['lo']), '.3f')}")


def mle(data_sets: int) -> None:
    """The complete-data maximum-likelihood estimate under theta >= 0 (L-BFGS-B, KKT residual
    printed) on the same data sets: how much of the posterior's shift is the likelihood's."""
    import numpy as np
    from scipy.optimize import minimize

    model, _, X, discharged = truth_data_sets()
    truth = model.true_parameters.to(F64)
    errors = []
    for k in range(data_sets):
        likelihood = CompleteDataLikelihood(model.epidemic_simulator, X[k], discharged[k])

        def objective(x, likelihood=likelihood):
            theta = torch.tensor(x, dtype=F64, requires_grad=True)
            value = -likelihood.log_prob(theta[None])[0]
            if not torch.isfinite(value):
                return 1e10, np.zeros_like(x)
            value.backward()
            return float(value.detach()), theta.grad.numpy()

        result = minimize(objective, truth.numpy(), jac=True, method="L-BFGS-B", bounds=[(0, None)] * len(truth),
                          options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-9})
        grad = objective(result.x)[1]
        kkt = float(np.abs(np.where(result.x > 1e-8, grad, np.minimum(grad, 0))).max())
        errors.append(torch.tensor(result.x) - truth)
        print(f"data set {k}: facility MLE {result.x[0]:.4f}, floors at 0: "
              f"{[j for j in range(1, 11) if result.x[j] < 1e-8]}, KKT residual {kkt:.1e}", flush=True)
    errors = torch.stack(errors)
    print(f"mean error over {data_sets}: {fmt(errors.mean(0), '+.3f')}")
    print(f"its SE:              {fmt(errors.std(0) / data_sets**0.5, '.3f')}")


def max_rhat(samples: torch.Tensor) -> float:
    """Split R-hat (ArviZ), the largest over the parameters, of ``samples [C, S, d]``."""
    import arviz

    return float(arviz.rhat(arviz.convert_to_dataset(samples.numpy())).to_array().max())


def report(name: str) -> None:
    model = get_model(name)
    names = model.reported_names
    truth = model.true_parameters.to(F64)
    rows = sorted(map(json.loads, open(STORE / f"posterior_{name}.jsonl")), key=lambda r: r["data_set"])
    mean, lo, hi = (torch.tensor([r[key] for r in rows], dtype=F64) for key in ("mean", "lo", "hi"))
    width = hi - lo
    covered = (lo <= truth) & (truth <= hi)
    paper = paper_widths(name, names)
    print(f"{name}: complete-data posteriors on {len(rows)} data sets at theta* "
          f"(max R-hat {max(r['rhat'] for r in rows):.3f}, {sum(r['divergences'] for r in rows)} divergences)")
    print(f"  mean CI95 width:            {fmt(width.mean(0), '.3f')}")
    print(f"  SE of that mean:            {fmt(width.std(0) / len(rows) ** 0.5, '.3f')}")
    print(f"  over the paper's n-model:   {fmt(width.mean(0) / paper, '.2f')}")
    print(f"  coverage:                   {fmt(covered.double().mean(0), '.2f')}")
    print(f"  mean error (SE {fmt((mean - truth).std(0) / len(rows) ** 0.5, '.3f')}): "
          f"{fmt((mean - truth).mean(0), '+.3f')}")
    print(f"  mean |error|:               {fmt((mean - truth).abs().mean(0), '.3f')}")
    if name != "epidemic10":
        return
    ref, learned = others()
    print("  the facility rate, data set by data set: complete data | reference ABC (score summary, "
          "round 6) | learned (n-model-views-spread fit)")
    for r in rows:
        k = r["data_set"]
        line = f"    {k:2d}: {r['mean'][0]:.3f} [{r['lo'][0]:.3f}, {r['hi'][0]:.3f}]"
        if k in ref:
            line += f" | {ref[k]['mean'][0]:.3f} [{ref[k]['lo'][0]:.3f}, {ref[k]['hi'][0]:.3f}]"
        if learned is not None and k < len(learned):
            f = learned[k, :, 0]
            line += f" | {f.mean():.3f} [{f.quantile(0.025):.3f}, {f.quantile(0.975):.3f}]"
        print(line)
    shared = [r for r in rows if r["data_set"] in ref]
    if shared:
        mean_c = torch.tensor([r["mean"] for r in shared], dtype=F64)
        mean_r = torch.tensor([ref[r["data_set"]]["mean"] for r in shared], dtype=F64)
        width_r = torch.tensor([[h - l for l, h in zip(ref[r["data_set"]]["lo"], ref[r["data_set"]]["hi"])]
                                for r in shared], dtype=F64)
        width_c = torch.tensor([[h - l for l, h in zip(r["lo"], r["hi"])] for r in shared], dtype=F64)
        print(f"  on the {len(shared)} data sets with a reference: mean width of the reference over the "
              f"complete data's: {fmt(width_r.mean(0) / width_c.mean(0), '.2f')}")
        corr = [float(torch.corrcoef(torch.stack([mean_c[:, j], mean_r[:, j]]))[0, 1]) for j in range(len(names))]
        print(f"  correlation of the posterior means (complete data, reference): {fmt(torch.tensor(corr), '+.2f')}")
        lo_r = torch.tensor([ref[r["data_set"]]["lo"] for r in shared], dtype=F64)
        hi_r = torch.tensor([ref[r["data_set"]]["hi"] for r in shared], dtype=F64)
        print(f"  reference coverage on them: {fmt(((lo_r <= truth) & (truth <= hi_r)).double().mean(0), '.2f')}")
        print(f"  reference mean error:       {fmt((mean_r - truth).mean(0), '+.3f')}")
    if learned is not None:
        ks = [r["data_set"] for r in rows if r["data_set"] < len(learned)]
        draws = learned[ks]
        lo_l, hi_l = draws.quantile(0.025, 1), draws.quantile(0.975, 1)
        print(f"  learned coverage on the {len(ks)} data sets: {fmt(((lo_l <= truth) & (truth <= hi_l)).double().mean(0), '.2f')}")
        print(f"  learned mean width:         {fmt((hi_l - lo_l).mean(0), '.3f')}")
        print(f"  learned mean error:         {fmt((draws.mean(1) - truth).mean(0), '+.3f')}")


def figure() -> None:
    """``benchmarks/results/epidemic10_complete_data.png``: per data set, the facility rate's CI95
    given the complete data, the reference ABC's and the learned chains'; and every rate's mean
    width from each beside the paper's n-model row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = get_model("epidemic10")
    names, truth = model.reported_names, model.true_parameters.to(F64)
    rows = sorted(map(json.loads, open(STORE / "posterior_epidemic10.jsonl")), key=lambda r: r["data_set"])
    ref, learned = others()
    keys = [r["data_set"] for r in rows if r["data_set"] in ref and r["data_set"] < len(learned)]
    intervals = {
        "complete data, exact (NUTS)": [(r["lo"], r["hi"]) for r in rows if r["data_set"] in keys],
        "reference ABC-PMC (score summary)": [(ref[k]["lo"], ref[k]["hi"]) for k in keys],
        "learned (n-model-views-spread fit)": [(learned[k].quantile(0.025, 0).tolist(),
                                                learned[k].quantile(0.975, 0).tolist()) for k in keys],
    }
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [1.4, 1]})
    for j, (label, ivs) in enumerate(intervals.items()):
        for i, (lo, hi) in enumerate(ivs):
            x = i + (j - 1) * 0.25
            axes[0].plot([x, x], [lo[0], hi[0]], color=f"C{j}", lw=2, label=label if i == 0 else None)
    axes[0].axhline(float(truth[0]), color="k", ls="--", lw=1, label="truth")
    axes[0].set_xticks(range(len(keys)), [str(k) for k in keys], fontsize=7)
    axes[0].set_xlabel("data set at theta*")
    axes[0].set_ylabel("beta_facility")
    axes[0].set_title("facility rate, CI95 per data set (prior lognormal(-3, 2))")
    axes[0].legend(fontsize=7, loc="upper right")
    xs = torch.arange(len(names))
    for j, (label, ivs) in enumerate(intervals.items()):
        width = torch.tensor([[h - lo_ for lo_, h in zip(lo, hi)] for lo, hi in ivs], dtype=F64).mean(0)
        axes[1].plot(xs, width, "o", color=f"C{j}", label=label)
    axes[1].plot(xs, paper_widths("epidemic10", names), "k_", ms=14, mew=2, label="paper, n-model (Table 6)")
    axes[1].set_xticks(xs, [n.replace("beta_", "") for n in names], rotation=45, fontsize=7)
    axes[1].set_ylabel("mean CI95 width")
    axes[1].set_title(f"mean widths over these {len(keys)} data sets")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    out = ROOT / "benchmarks" / "results" / "epidemic10_complete_data.png"
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main(argv: list[str]) -> None:
    name = "epidemic5" if "--model" in argv and argv[argv.index("--model") + 1] == "epidemic5" else "epidemic10"
    args = [a for a in argv if not a.startswith("--") and a not in ("epidemic5", "epidemic10")]
    torch.set_num_threads(1)
    if args and args[0] == "info":
        info(name, int(args[1]) if len(args) > 1 else 400)
    elif args and args[0] == "posterior":
        posterior(*(int(a) for a in args[1:4]), name)
    elif args and args[0] == "report":
        report(name)
    elif args and args[0] == "check":
        check(int(args[1]))
    elif args and args[0] == "mle":
        mle(int(args[1]))
    elif args and args[0] == "figure":
        figure()
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
