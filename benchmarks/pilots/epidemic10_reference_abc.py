r"""Pilot (session 61): a reference posterior for epidemic10 at theta*, from a large ABC table.

Every learned row of Table 6 puts the facility rate's posterior above the truth at theta* and
the floors below it (epidemic10 notes of sessions 57-60), and an ABC likelihood along that ridge
suggested the data themselves leave it open upwards. This asks the question without any
Langevin chain: what do posteriors that need no score network make of 100 data sets at theta*?

One table serves them all. Draw :math:`u_i` from the defensive mixture
:math:`q = 0.9\,\mathcal N(u^*, \operatorname{diag} s^2) + 0.1\,\pi_u` (s: the localized
proposal's SDs of the spread row's repetition 9, 2-3 posterior SDs on the identified rates; on
floors 1, 2, 3 and 5, whose localized SD exceeds the prior's, the prior's marginal N(-3, 2^2)),
simulate :math:`x_i`, and keep two 12-dimensional summaries:

- ``score``: :math:`t(x) = s_\phi(u^*, x)`, the spread fit's learned score at the truth (locally
  sufficient near :math:`u^*` if the network is right; here only a fixed function of x);
- ``regression``: Fearnhead & Prangle's semi-automatic summary, a ridge regression of u on
  :math:`(\operatorname{vec} S, \operatorname{vec} S^2)` fitted on the first chunks of the table
  (no network at all).

For each data set :math:`x_k` at theta* and each summary: keep the nearest ``K`` rows in the
Mahalanobis metric of t's covariance at theta* (over the 100 data sets), Epanechnikov weights
(times :math:`\pi_u/q` at the rows, Pareto-smoothed, to reweight to the prior), and Beaumont's
weighted local-linear regression adjustment :math:`u_i - \hat B^\top (t_i - t_k)`. Both ABC
posteriors are posteriors given t (conditioning on less than S), so they may be wider than the
exact one; how far the facility rate's interval
sits from theta* is what Table 6's coverage turns on. Printed under q itself as the prior (q is
centred on theta*, so any pull is towards the truth) and reweighted to the model's prior (its
ESS is printed: low, because q is narrower than the posterior under the prior along the ridge;
:func:`adaptive` fits proposals to each data set instead).

A check that can fail (``--check``): the same ABC on 200 rows of the table taken as pseudo-data,
with q itself as the prior (so the rows' parameters are draws from the prior): every parameter's
interval must cover about 95% of them, or the table, eps and the adjustment are not good enough
to be a reference.

Usage, from the repository root (one core each; chunks of 5,000 simulations in
``runs/pilots/reference_abc/``, kept and skipped on a rerun, so an interrupted run loses nothing):

- ``.venv/bin/python benchmarks/pilots/epidemic10_reference_abc.py simulate WORKER WORKERS CHUNKS``
  (chunks WORKER, WORKER + WORKERS, ... below CHUNKS; about 12 s a chunk);
- ``.venv/bin/python benchmarks/pilots/epidemic10_reference_abc.py abc [K] [--check]``: the table's
  ABC posteriors of the 100 data sets at theta*, under q and reweighted to the prior;
- ``.venv/bin/python benchmarks/pilots/epidemic10_reference_abc.py adaptive WORKER WORKERS DATA_SETS``
  then ``... adaptive-report``: the first DATA_SETS of them under the model's prior, from
  proposals fitted to each (see :func:`adaptive`; about 85 s a data set); with ``--raw`` (both
  commands) six stages whose proposals are fitted to the kept rows themselves (about 115 s a data
  set), the reliable one;
- ``.venv/bin/python benchmarks/pilots/epidemic10_reference_abc.py learned [DATA_SETS] [--under-q]
  [--prior-scale=S]``: the spread fit's Langevin posteriors on the same data sets (default 20)
  against the adaptive ABC's means; with ``--under-q`` the chains' prior is q, as in the table's
  ABC under q; with ``--prior-scale=S`` a lognormal(-3, S) prior on every rate;
- ``.venv/bin/python benchmarks/pilots/epidemic10_reference_abc.py library WORKER WORKERS DATA_SETS
  [--localized] [--spread]`` then ``... library-report [--localized] [--spread]``: the library's
  :func:`scorebayes.baselines.abc_pmc` on the same data sets, from the prior or from q, as a
  check of ``adaptive --raw`` by other code (about 120 s a data set);
- ``.venv/bin/python benchmarks/pilots/epidemic10_reference_abc.py figure``: after ``adaptive ...
  --raw`` and ``learned 40``, ``benchmarks/results/epidemic10_reference.png``, the facility rate's
  intervals from both on each of the 40 data sets.

Result (session 61; epidemic10 note "A REFERENCE WITHOUT THE SCORE NETWORK"; logs
``epidemic10_pilot_logs/reference_abc_*.log``): the check passes (coverage 0.91-0.96, mean z
within +-0.30). Under q, both summaries cover the facility rate in 99 of 100 data sets at width
0.056-0.057, the paper's n-model width; under the model's prior its posterior mean sits about
+0.02 above the truth (0.05), and the spread fit's Langevin posteriors follow it data set by data
set. The learned score agrees with the reference in both regimes: the shift is the posterior's.
Session 62 (``adaptive ... --raw``, log ``reference_abc_adaptive_raw_*.log``): with proposals
fitted to the kept rows, k-hat stays below 0.7 on 32 of 40 data sets (session 61: 14), and the
reference under the model's prior covers the facility rate in 21 of 40 at width 0.051; the other
19 intervals lie wholly above the truth. The library's ``abc_pmc`` started from q (residual
metric) on data sets 0-9: facility covered 6 of 10 (this pilot 5), mean +0.029 above the truth
(+0.028).
"""
import json
import math
import sys
import time
from pathlib import Path

import arviz
import torch

torch.set_num_threads(1)
from epidemic10_truth import RUNS, saved_fit_at_truth  # noqa: E402

from scorebayes.parallel import make_generator  # noqa: E402
from scorebayes.proposal import GaussianProposal, MixtureProposal, PriorSampler  # noqa: E402

FIT = "epidemic10_n-model-views-spread_rep9.pt"
CHUNK = 5000
REGRESSION_CHUNKS = 40  # the summary regression's training rows: chunks 0..39 (200,000 rows)
STORE = RUNS / "reference_abc"
PAPER_N_MODEL_WIDTH = [0.055, 0.127, 0.131, 0.128, 0.131, 0.138]  # Table 6, facility + floors 1-5
TRUTH_DATA_SETS = 100
WEAK_SD = 2.0
STAR = [0.05, 0.02, 0.04, 0.06, 0.08, 0.10, 0.12, 0.14, 0.16, 0.18, 0.20, 0.05]  # epidemic10's theta*


def setting():
    model, est, u_star, _ = saved_fit_at_truth(FIT, 1)
    # the weakly identified rates (localized SD above the prior's 2) get the prior's own marginal,
    # N(-3, 2^2) in u, so that pi/q does not vary along them among the accepted rows
    sd, mean = est.proposal_.sd.clone(), u_star.clone()
    weak = sd > WEAK_SD
    sd[weak], mean[weak] = 2.0, -3.0
    local = GaussianProposal(est.space, mean, sd)
    q = MixtureProposal([local, PriorSampler(model.prior)], [0.9, 0.1])
    return model, est, u_star, q


def score_summary(est, u_star, x):
    """``[B, d]``: the fit's learned score at u* for data sets ``x [B, T, J+2]``."""
    view = est._table_view(x.to(est.x_obs_.dtype))
    with torch.no_grad():
        return est.score_net_(u_star.float().expand(len(x), 1, -1), view)[:, 0].double()


def features(S):
    """``[B, 2 T (J+2) + 1]``: the semi-automatic regression's features of ``S [B, T, J+2]``.

    The table keeps S in float16 and the data sets at theta* and the adaptive rounds in float64;
    the rounding moves the regression summary by 0.006 Mahalanobis units (median over the 100
    data sets, at most 0.02), against a median 4.75 between two data sets at theta*."""
    flat = S.reshape(len(S), -1).double()
    return torch.cat([flat, flat**2, torch.ones(len(S), 1, dtype=torch.float64)], 1)


def simulate(worker: int, workers: int, chunks: int) -> None:
    model, est, u_star, q = setting()
    STORE.mkdir(parents=True, exist_ok=True)
    for c in range(worker, chunks, workers):
        path = STORE / f"chunk{c:04d}.pt"
        if path.exists():
            continue
        g = make_generator(61, "reference-abc", c)
        theta = q.sample(CHUNK, g)
        x = est.simulator(theta, est.n_obs_, g)
        torch.save({"u": est.space.to_unconstrained(theta), "score": score_summary(est, u_star, x),
                    "S": x.to(torch.float16)}, path.with_suffix(".tmp"))
        path.with_suffix(".tmp").rename(path)
        print(f"chunk {c} done", flush=True)


def load_table():
    paths = sorted(STORE.glob("chunk*.pt"))
    parts = [torch.load(p) for p in paths]
    return parts, [int(p.stem[5:]) for p in paths]


def fit_regression(parts, ids, ridge=1e-3):
    """Ridge regression of u on features(S) over the regression chunks, ``[F, d]``."""
    XtX, XtU = 0.0, 0.0
    for part, c in zip(parts, ids):
        if c < REGRESSION_CHUNKS:
            F = features(part["S"])
            XtX = XtX + F.T @ F
            XtU = XtU + F.T @ part["u"]
    n_features = XtX.shape[0]
    return torch.linalg.solve(XtX + ridge * torch.trace(XtX) / n_features * torch.eye(n_features, dtype=torch.float64), XtU)


def weighted_quantile(values, weights, probs):
    """``[len(probs), d]`` weighted quantiles of ``values [n, d]`` (weights ``[n]``): the first
    value whose weighted CDF reaches each prob. (The library's ``scorebayes.posterior.
    weighted_quantile`` interpolates the CDF's midpoints instead; the recorded runs used this one.)"""
    out = []
    for j in range(values.shape[1]):
        order = values[:, j].argsort()
        cdf = weights[order].cumsum(0) / weights.sum()
        out.append(torch.stack([values[order[torch.searchsorted(cdf, torch.tensor(p, dtype=cdf.dtype)).clamp_max(len(order) - 1)], j]
                                for p in probs]))
    return torch.stack(out, 1)


def abc_posterior(t_table, u_table, log_ratio, t_obs, metric, K, exclude=None, raw=False):
    r"""ABC with importance weights and regression adjustment -> (u [K, d], w [K], k-hat), with
    ``raw`` also the kept rows' own u ``[K, d]`` before the adjustment.

    The nearest K rows, Epanechnikov kernel weights times :math:`\pi_u/q` at the rows
    (``log_ratio(u)``; None: q itself is the prior), Pareto-smoothed, then Beaumont's
    local-linear adjustment :math:`u_i - \hat B^\top (t_i - t_{obs})` fitted with those weights.
    The ratio belongs at the rows, which are draws from q: evaluated at the adjusted draws (the
    posterior under q, narrower than the target) it would be an importance sampler from a
    narrower density to a wider one, with unbounded variance."""
    diff = t_table - t_obs
    dist = ((diff @ metric) * diff).sum(-1)
    if exclude is not None:
        dist[exclude] = float("inf")
    d_k, idx = torch.topk(dist, K + 1, largest=False)
    eps, idx, d_k = d_k[-1], idx[:-1], d_k[:-1]
    w, k_hat = 1 - d_k / eps, None
    if log_ratio is not None:
        w, k_hat = psis(w.log() + log_ratio(u_table[idx]))
    X = torch.cat([torch.ones(K, 1, dtype=torch.float64), diff[idx]], 1)
    beta = torch.linalg.lstsq(X * w[:, None].sqrt(), u_table[idx] * w[:, None].sqrt()).solution
    adjusted = u_table[idx] - diff[idx] @ beta[1:]
    return (adjusted, w, k_hat, u_table[idx]) if raw else (adjusted, w, k_hat)


def psis(log_w):
    """Pareto-smoothed importance weights (Vehtari et al. 2024, ArviZ's ``psislw``), normalised,
    and the tail's shape k-hat (above 0.7: the weights are unreliable)."""
    smoothed, k_hat = arviz.psislw(log_w.numpy().copy())
    return torch.from_numpy(smoothed).exp(), float(k_hat)


def summarise(space, u, w):
    theta = space.to_constrained(u)
    mean = (w[:, None] * theta).sum(0) / w.sum()
    sd = ((w[:, None] * (theta - mean) ** 2).sum(0) / w.sum()).sqrt()
    lo, hi = weighted_quantile(theta, w, [0.025, 0.975])
    ess = float(w.sum() ** 2 / (w**2).sum())
    return mean, sd, lo, hi, ess


def report(label, rows, theta_true, names):
    mean, sd, lo, hi, ess = (torch.stack([r[i] for r in rows]) if i < 4 else torch.tensor([r[i] for r in rows])
                             for i in range(5))
    cover = ((lo <= theta_true) & (theta_true <= hi)).double().mean(0)
    width = (hi - lo).median(0).values
    z = ((mean - theta_true) / sd).mean(0)
    bias = (mean - theta_true).abs().mean(0)
    print(f"{label}: {len(rows)} data sets, median ESS {float(ess.median()):.0f}")
    print("  " + " ".join(f"{n[5:]:>9}" for n in names))
    for key, vals in [("coverage", cover), ("width", width), ("bias", bias), ("mean z", z)]:
        print(f"  {key:9}" + " ".join(f"{float(v):9.3f}" for v in vals))
    print("  width / paper's n-model (facility, floors 1-5): "
          + " ".join(f"{float(w) / p:.2f}" for w, p in zip(width, PAPER_N_MODEL_WIDTH)), flush=True)


def prepare():
    """The table, both summaries on it and on the data sets at theta*, and their metrics."""
    model, est, u_star, q = setting()
    parts, ids = load_table()
    u_table = torch.cat([p["u"] for p in parts])
    B = fit_regression(parts, ids)
    summaries = {"score": torch.cat([p["score"] for p in parts]),
                 "regression": torch.cat([features(p["S"]) @ B for p in parts])}
    star = model.true_parameters.to(torch.float64)
    g = make_generator(13, "field-root")  # the data sets of the session 57-60 pilots
    x = est.simulator(star.expand(TRUTH_DATA_SETS, -1).clone(), est.n_obs_, g)
    observed = {"score": score_summary(est, u_star, x), "regression": features(x) @ B}
    metrics = {kind: torch.linalg.inv(torch.cov(t.T)) for kind, t in observed.items()}
    print(f"table: {len(u_table)} rows from {len(parts)} chunks; regression on chunks < {REGRESSION_CHUNKS}")
    return model, est, u_star, q, u_table, B, summaries, observed, metrics


def abc(K: int, check: bool) -> None:
    model, est, u_star, q, u_table, B, summaries, observed, metrics = prepare()
    space, names, star = est.space, model.parameter_names, model.true_parameters.to(torch.float64)

    def log_ratio(u):
        return space.log_prob_unconstrained(u) - q.log_prob_unconstrained(u)

    print(f"K = {K}")
    for kind, t_table in summaries.items():
        metric = metrics[kind]
        for label, ratio in [("under q (centred on theta*)", None), ("reweighted to the prior", log_ratio)]:
            rows = [summarise(space, *abc_posterior(t_table, u_table, ratio, t, metric, K)[:2]) for t in observed[kind]]
            report(f"ABC on the {kind} summary, {label}, data sets at theta*", rows, star, names)
        if check:  # pseudo-data from the table, q as the prior: calibration of the ABC itself
            gen = make_generator(17, "reference-abc-check")
            pick = torch.randperm(len(u_table), generator=gen)[:200]
            if kind == "regression":  # not the regression's own training rows
                first = REGRESSION_CHUNKS * CHUNK
                pick = torch.randperm(len(u_table) - first, generator=gen)[:200] + first
            checks = []
            for i in pick.tolist():
                u_i, w_i, _ = abc_posterior(t_table, u_table, None, t_table[i], metric, K, exclude=i)
                checks.append(summarise(space, u_i, w_i) + (space.to_constrained(u_table[i]),))
            truths = torch.stack([c[5] for c in checks])
            lo, hi = torch.stack([c[2] for c in checks]), torch.stack([c[3] for c in checks])
            sd, mean = torch.stack([c[1] for c in checks]), torch.stack([c[0] for c in checks])
            print("  check (200 table rows as data, q as prior): coverage "
                  + " ".join(f"{float(v):.2f}" for v in ((lo <= truths) & (truths <= hi)).double().mean(0))
                  + "; mean z " + " ".join(f"{float(v):+.2f}" for v in ((mean - truths) / sd).mean(0)), flush=True)


class StudentProposal:
    r"""A population Monte Carlo proposal: a multivariate Student t in u, 4 degrees of freedom,
    located at the weighted mean of draws ``u_i [n, d]`` with scale twice their weighted
    covariance. Heavier-tailed than the Gaussian prior in u, so pi_u / proposal stays bounded;
    one smooth density rather than a kernel mixture, whose bumps in 12 dimensions make the
    importance weights erratic. (The library's ``scorebayes.baselines.abc_pmc.StudentProposal``
    is this with a scale-relative jitter; this copy stays so the recorded runs reproduce.)"""

    NU = 4

    def __init__(self, draws, weights):
        self.loc, cov = weighted_moments(draws, weights)
        self.tril = torch.linalg.cholesky(2 * cov + 1e-6 * torch.eye(len(self.loc), dtype=torch.float64))

    def sample(self, num, generator):
        z = torch.randn(num, len(self.loc), generator=generator, dtype=torch.float64)
        chi2 = (torch.randn(num, self.NU, generator=generator, dtype=torch.float64) ** 2).sum(1)
        return self.loc + (z @ self.tril.T) / (chi2[:, None] / self.NU).sqrt()

    def log_prob(self, u):
        d, nu = len(self.loc), self.NU
        delta2 = torch.linalg.solve_triangular(self.tril, (u - self.loc).T, upper=False).pow(2).sum(0)
        return (math.lgamma((nu + d) / 2) - math.lgamma(nu / 2) - d / 2 * math.log(nu * math.pi)
                - self.tril.diagonal().log().sum() - (nu + d) / 2 * torch.log1p(delta2 / nu))


def weighted_moments(u, w):
    mean = (w[:, None] * u).sum(0) / w.sum()
    centred = u - mean
    return mean, (w[:, None] * centred).T @ centred / w.sum()


def adaptive(worker: int, workers: int, data_sets: int, K: int = 400, sims: int = 10_000, stages: int = 4,
             raw: bool = False) -> None:
    """Per data set, ABC under the model's prior by population Monte Carlo, appended to
    ``STORE/adaptive.jsonl`` (the pooled rows in ``STORE/poolNNN.pt``; with ``raw``,
    ``adaptive_raw.jsonl`` and ``rawNNN.pt``).

    Stage 0 is the table's ABC posterior under q (score summary, K = 500, unweighted). Each of
    ``stages`` stages draws ``sims`` parameters from a Student t fitted to the previous
    stage's weighted draws (:class:`StudentProposal`) and simulates them; all stages' rows are pooled with the
    deterministic-mixture density (the mean of the stages' proposal densities), and each summary's
    ABC posterior (nearest K, Epanechnikov times pi_u / proposal at the rows, Pareto-smoothed with
    k-hat recorded, weighted local-linear adjustment). The score summary's draws seed the next
    stage: the regression-adjusted draws (session 61), or with ``raw`` the kept rows themselves
    before the adjustment (session 62; ABC-PMC as Beaumont et al. 2009 fit it). The adjusted draws
    are narrower than the kept rows, which spread over the eps-ball, so a proposal fitted to them
    puts weights pi_u / proposal ~ 1 / proposal on the rows in its own tails: on data set 4, median
    ESS 11 of 400, k-hat 0.97 (adjusted) against 66 and 0.55 (raw, 5 stages) in a prototype."""
    model, est, u_star, q, u_table, B, summaries, observed, metrics = prepare()
    space, star = est.space, model.true_parameters.to(torch.float64)
    out = STORE / ("adaptive_raw.jsonl" if raw else "adaptive.jsonl")
    done = {json.loads(line)["data_set"] for line in open(out)} if out.exists() else set()
    for k in range(worker, data_sets, workers):
        if k in done:
            continue
        start = time.perf_counter()
        draws, weights, _, rows = abc_posterior(summaries["score"], u_table, None, observed["score"][k],
                                                metrics["score"], 500, raw=True)
        if raw:
            draws = rows
        g = make_generator(62, "reference-adaptive-raw", k) if raw else make_generator(61, "reference-adaptive", k)
        proposals, us, ts = [], [], {kind: [] for kind in summaries}
        record = {"data_set": k, "K": K, "sims_per_stage": sims}
        for stage in range(1, stages + 1):
            proposal = StudentProposal(draws, weights)
            proposals.append(proposal)
            u = proposal.sample(sims, g)
            x = est.simulator(space.to_constrained(u), est.n_obs_, g)
            us.append(u)
            ts["score"].append(score_summary(est, u_star, x))
            ts["regression"].append(features(x) @ B)
            u_pool = torch.cat(us)

            def log_ratio(v):
                log_q = torch.logsumexp(torch.stack([p.log_prob(v) for p in proposals]), 0) - math.log(len(proposals))
                return space.log_prob_unconstrained(v) - log_q

            for kind in summaries:
                for suffix, keep in (("", K), ("_half", K // 2)):  # half the rows kept: eps's share
                    if suffix and stage < stages:
                        continue
                    u_k, w_k, k_hat, rows = abc_posterior(torch.cat(ts[kind]), u_pool, log_ratio, observed[kind][k],
                                                          metrics[kind], keep, raw=True)
                    post_mean, sd, lo, hi, ess = summarise(space, u_k, w_k)
                    record[f"{kind}_stage{stage}{suffix}"] = {"mean": post_mean.tolist(), "sd": sd.tolist(),
                                                              "lo": lo.tolist(), "hi": hi.tolist(), "ess": ess,
                                                              "k_hat": k_hat}
                    if kind == "score" and not suffix:
                        draws, weights = (rows if raw else u_k), w_k
        torch.save({"u": u_pool, "t": {kind: torch.cat(t) for kind, t in ts.items()}},
                   STORE / (f"raw{k:03d}.pt" if raw else f"pool{k:03d}.pt"))
        record["seconds"] = time.perf_counter() - start
        with open(out, "a") as f:
            f.write(json.dumps(record) + "\n")
        last = f"stage{stages}"
        z = [(record[f"{kind}_{last}"]["mean"][0] - float(star[0])) / record[f"{kind}_{last}"]["sd"][0] for kind in summaries]
        print(f"data set {k}: facility z (score, regression) {z[0]:+.2f} {z[1]:+.2f}, ESS "
              f"{record[f'score_{last}']['ess']:.0f} {record[f'regression_{last}']['ess']:.0f}, k-hat "
              f"{record[f'score_{last}']['k_hat']:.2f} {record[f'regression_{last}']['k_hat']:.2f}, "
              f"{record['seconds']:.0f} s", flush=True)


def adaptive_report(raw: bool = False) -> None:
    """Coverage, widths and mean z over the data sets in ``STORE/adaptive.jsonl`` (with ``raw``:
    ``adaptive_raw.jsonl``)."""
    from scorebayes.models import get_model

    model = get_model("epidemic10")
    star, names = model.true_parameters.to(torch.float64), model.parameter_names
    records = [json.loads(line) for line in open(STORE / ("adaptive_raw.jsonl" if raw else "adaptive.jsonl"))]
    records.sort(key=lambda r: r["data_set"])
    print(f"data sets {[r['data_set'] for r in records]}")
    last = max(int(key.split("stage")[1]) for key in records[0] if key.startswith("score_stage") and "half" not in key)
    for key in ("score_stage1", "score_stage2", f"score_stage{last}", f"score_stage{last}_half",
                f"regression_stage{last}", f"regression_stage{last}_half"):
        k_hats = torch.tensor([r[key]["k_hat"] for r in records])
        print(f"{key}: k-hat above 0.7 on {int((k_hats > 0.7).sum())} of {len(records)}, median {float(k_hats.median()):.2f}")
        rows = [tuple(torch.tensor(r[key][f]) for f in ("mean", "sd", "lo", "hi")) + (r[key]["ess"],) for r in records]
        report(f"adaptive ABC under the model's prior, {key}", rows, star, names)


def learned(data_sets: int = 20, under_q: bool = False, prior_scale: float | None = None) -> None:
    """The spread fit's own posteriors (Langevin chains, the settings of ``checks_at_truth``) on
    the first ``data_sets`` data sets at theta*, against the adaptive ABC's posterior means (with
    ``under_q``: the chains' prior is the table's q, to set beside the ABC under q; with
    ``prior_scale``: a lognormal(-3, prior_scale) prior on every rate instead of the model's
    lognormal(-3, 2), to see how the shift up the ridge depends on the prior's width)."""
    from torch.distributions import LogNormal

    from scorebayes.calibration import calibrate
    from scorebayes.priors import independent

    model, est, u_star, q = setting()
    if prior_scale is not None:
        loc, scale = torch.tensor(-3.0, dtype=torch.float64), torch.tensor(prior_scale, dtype=torch.float64)
        q = PriorSampler(independent([LogNormal(loc, scale) for _ in range(len(u_star))]))
    est.progress = False
    star = model.true_parameters.to(torch.float64)
    g = make_generator(13, "field-root")
    x = est.simulator(star.expand(TRUTH_DATA_SETS, -1).clone(), est.n_obs_, g)[:data_sets]
    cal = calibrate(est, data_sets, prior=q if under_q or prior_scale else None, at=star, data=x, chains=25,
                    draws_per_chain=20, burn_in=3000, thin=50, seed=41, progress=False)
    print(f"the spread fit's posteriors on {data_sets} data sets at theta*, chains' prior "
          f"{'q' if under_q else f'lognormal(-3, {prior_scale})' if prior_scale else 'the model prior'}")
    print(cal.summary())
    if not (under_q or prior_scale):  # the draws, for the figure
        torch.save({"draws": cal.draws, "covered": cal.covered, "width": cal.width}, STORE / f"learned{data_sets:03d}.pt")
    print("mean |posterior mean - truth|", [round(v, 4) for v in (cal.posterior_mean - star).abs().mean(0).tolist()])
    records = {r["data_set"]: r for r in map(json.loads, open(STORE / "adaptive.jsonl"))}
    if under_q or prior_scale or data_sets > len(records):
        return
    for key in ("score_stage4", "regression_stage4"):
        abc_means = torch.tensor([records[k][key]["mean"] for k in range(data_sets)])
        for j, name in enumerate(model.parameter_names):
            a, b = abc_means[:, j], cal.posterior_mean[:, j]
            r = float(torch.corrcoef(torch.stack([a, b]))[0, 1])
            print(f"{key:18} {name:14} mean - truth: ABC {float(a.mean() - star[j]):+.4f}, learned "
                  f"{float(b.mean() - star[j]):+.4f}; correlation over data sets {r:+.2f}")
    print("learned facility means", [round(v, 3) for v in cal.posterior_mean[:, 0].tolist()])


def library(worker: int, workers: int, data_sets: int, rounds: int = 6, localized: bool = False,
            metric: str = "residual") -> None:
    """The library's :func:`scorebayes.baselines.abc_pmc` on the first ``data_sets`` data sets at
    theta*, score summary, under the model's prior, appended to ``STORE/library.jsonl`` (with
    ``localized``: round 0 drawn from the table's q, ``library_q_METRIC.jsonl``): a check of
    :func:`adaptive` ``--raw`` by other code. From the prior, 6 rounds do not settle in 12
    dimensions with a summary that is informative only near theta* (session 62: facility means
    0.006 to 0.26 on data sets 0-9, one run in a far mode at 0.006); from q they are the check.
    The recorded runs used the library at commit 0127fc0, whose rounds drew all their simulations
    from one generator; since session 63 every block of a round has its own seed (so an executor
    gives the same draws), and a re-run gives other Monte Carlo draws of the same posteriors."""
    from scorebayes.baselines import abc_pmc

    model, est, u_star, q = setting()
    est.progress = False
    star = model.true_parameters.to(torch.float64)
    g = make_generator(13, "field-root")  # the data sets of prepare()
    x = est.simulator(star.expand(TRUTH_DATA_SETS, -1).clone(), est.n_obs_, g)
    out = STORE / (f"library_q_{metric}.jsonl" if localized else "library.jsonl")
    done = {json.loads(line)["data_set"] for line in open(out)} if out.exists() else set()
    for k in range(worker, data_sets, workers):
        if k in done:
            continue
        post = abc_pmc(x[k], model.prior, est.simulator, lambda S: score_summary(est, u_star, S), rounds=rounds,
                       simulations_per_round=10_000, k=400, sampler=q if localized else None, metric=metric,
                       generator=make_generator(62, "reference-library", k))
        record = {"data_set": k, "mean": post.mean().tolist(), "lo": post.quantile(0.025).tolist(),
                  "hi": post.quantile(0.975).tolist(), "ess": post.info["ess"], "k_hat": post.info["k_hat"],
                  "seconds": post.info["seconds"]}
        with open(out, "a") as f:
            f.write(json.dumps(record) + "\n")
        print(f"data set {k}: facility mean {record['mean'][0]:.4f} [{record['lo'][0]:.4f}, {record['hi'][0]:.4f}], "
              f"ESS {record['ess']:.0f}, k-hat {record['k_hat']:.2f}, {record['seconds']:.0f} s", flush=True)


def library_report(localized: bool = False, metric: str = "residual") -> None:
    """The library's runs beside :func:`adaptive` ``--raw`` on the same data sets."""
    truth = 0.05
    raw = {r["data_set"]: r["score_stage6"] for r in map(json.loads, open(STORE / "adaptive_raw.jsonl"))}
    lib = sorted(map(json.loads, open(STORE / (f"library_q_{metric}.jsonl" if localized else "library.jsonl"))),
                 key=lambda r: r["data_set"])
    for r in lib:
        p = raw[r["data_set"]]
        print(f"data set {r['data_set']:2d}: facility library {r['mean'][0]:.4f} [{r['lo'][0]:.4f}, {r['hi'][0]:.4f}] "
              f"k-hat {r['k_hat']:.2f}; pilot {p['mean'][0]:.4f} [{p['lo'][0]:.4f}, {p['hi'][0]:.4f}] k-hat {p['k_hat']:.2f}")
    for label, rows in (("library", [(r["mean"], r["lo"], r["hi"]) for r in lib]),
                        ("pilot", [(raw[r["data_set"]]["mean"], raw[r["data_set"]]["lo"], raw[r["data_set"]]["hi"]) for r in lib])):
        m, lo, hi = (torch.tensor([row[i] for row in rows]) for i in range(3))
        print(f"{label}: facility covered {int(((lo[:, 0] <= truth) & (truth <= hi[:, 0])).sum())} of {len(rows)}, mean - "
              f"truth {float(m[:, 0].mean()) - truth:+.4f}, median width {float((hi[:, 0] - lo[:, 0]).median()):.4f}; "
              "every rate's coverage " + " ".join(f"{float(c):.2f}" for c in
                                                  ((lo <= torch.tensor(STAR)) & (torch.tensor(STAR) <= hi)).double().mean(0)))


def figure(data_sets: int = 40) -> None:
    """``benchmarks/results/epidemic10_reference.png``: per data set at theta*, the facility rate's
    CI95 from the adaptive ABC under the model's prior (raw-row proposals, score summary) beside
    the spread fit's Langevin chains (``learned DATA_SETS``), sorted by the ABC's posterior mean,
    with the truth and the paper's n-model width for scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scorebayes.models import get_model

    truth = float(get_model("epidemic10").true_parameters[0])
    records = {r["data_set"]: r for r in map(json.loads, open(STORE / "adaptive_raw.jsonl"))}
    last = max(int(key.split("stage")[1]) for key in records[0] if key.startswith("score_stage") and "half" not in key)
    abc_rows = [records[k][f"score_stage{last}"] for k in range(data_sets)]
    draws = torch.load(STORE / f"learned{data_sets:03d}.pt")["draws"][:, :, 0]
    lo, hi = torch.quantile(draws, 0.025, dim=1), torch.quantile(draws, 0.975, dim=1)
    ref_mean = torch.tensor([r["mean"][0] for r in abc_rows], dtype=draws.dtype)
    ref_lo, ref_hi = (torch.tensor([r[key][0] for r in abc_rows], dtype=draws.dtype) for key in ("lo", "hi"))
    print(f"facility rate on {data_sets} data sets: reference covers {int(((ref_lo <= truth) & (truth <= ref_hi)).sum())}"
          f" (intervals wholly above the truth: {int((ref_lo > truth).sum())}), learned covers "
          f"{int(((lo <= truth) & (truth <= hi)).sum())}; median width reference {float((ref_hi - ref_lo).median()):.4f}, "
          f"learned {float((hi - lo).median()):.4f}; mean - truth reference {float(ref_mean.mean()) - truth:+.4f}, learned "
          f"{float(draws.mean(1).mean()) - truth:+.4f}; correlation of the means over data sets "
          f"{float(torch.corrcoef(torch.stack([ref_mean, draws.mean(1)]))[0, 1]):+.2f}; the intervals overlap on "
          f"{int(((ref_lo <= hi) & (lo <= ref_hi)).sum())}")
    order = sorted(range(data_sets), key=lambda k: abc_rows[k]["mean"][0])
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for pos, k in enumerate(order):
        r = abc_rows[k]
        ax.plot([pos - 0.15] * 2, [r["lo"][0], r["hi"][0]], color="tab:blue", lw=2,
                label="ABC-PMC under the model's prior (reference)" if pos == 0 else None)
        ax.plot(pos - 0.15, r["mean"][0], "o", color="tab:blue", ms=3)
        ax.plot([pos + 0.15] * 2, [float(lo[k]), float(hi[k])], color="tab:orange", lw=2,
                label="learned score, Langevin chains (spread fit, repetition 9)" if pos == 0 else None)
        ax.plot(pos + 0.15, float(draws[k].mean()), "o", color="tab:orange", ms=3)
    ax.axhline(truth, color="black", lw=1, label="truth 0.05")
    ax.plot([data_sets + 0.5] * 2, [truth - 0.0275, truth + 0.0275], color="grey", lw=4, alpha=0.6,
            label="the paper's n-model width (0.055)")
    ax.set_xlabel("data set at theta*, sorted by the reference's posterior mean")
    ax.set_ylabel("beta_facility, CI95")
    ax.set_title("epidemic10: the facility rate under the lognormal(-3, 2) prior, 40 data sets at the truth")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    out = Path(__file__).resolve().parents[1] / "results" / "epidemic10_reference.png"
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    if sys.argv[1] == "simulate":
        simulate(*(int(a) for a in sys.argv[2:5]))
    elif sys.argv[1] == "adaptive":
        adaptive(*(int(a) for a in sys.argv[2:5]), **({"raw": True, "stages": 6} if "--raw" in sys.argv else {}))
    elif sys.argv[1] == "library":
        library(*(int(a) for a in sys.argv[2:5]), localized="--localized" in sys.argv,
                metric="spread" if "--spread" in sys.argv else "residual")
    elif sys.argv[1] == "library-report":
        library_report("--localized" in sys.argv, "spread" if "--spread" in sys.argv else "residual")
    elif sys.argv[1] == "figure":
        figure()
    elif sys.argv[1] == "adaptive-report":
        adaptive_report("--raw" in sys.argv)
    elif sys.argv[1] == "learned":
        args = [a for a in sys.argv[2:] if not a.startswith("--")]
        scale = next((float(a.split("=")[1]) for a in sys.argv if a.startswith("--prior-scale=")), None)
        learned(int(args[0]) if args else 20, "--under-q" in sys.argv, scale)
    else:
        args = [a for a in sys.argv[2:] if not a.startswith("--")]
        abc(int(args[0]) if args else 500, "--check" in sys.argv)
