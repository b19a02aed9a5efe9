r"""Simulation-based calibration of a fitted [`ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin] where it was trained.

A posterior from a learned score can be checked without the exact posterior (Talts et al. 2018):
draw $\theta_i \sim \pi$, simulate $x_i \sim p(x\mid\theta_i)$ and sample
$\pi(\theta\mid x_i) \propto \pi(\theta)\,p(x_i\mid\theta)$. If the posterior is right, the
rank of $\theta_{ij}$ among the draws of parameter $j$ is uniform on (0, 1), so

- a central $\ell$ interval covers $\theta_{ij}$ with probability $\ell$
  (coverage below $\ell$: posteriors too narrow, or misplaced);
- the standardised error $z_{ij} = (\bar\theta_{ij} - \theta_{ij})/\mathrm{sd}_{ij}$ has
  mean 0 (a mean of one sign: a shared bias of the learned score).

A score learned from a table drawn from $q$ (the localized proposal) is only trusted where
the table put mass, so the default check uses $q$ itself as $\pi$: the chains run on
the learned likelihood score plus $\nabla_u\log q_u$. With ``at=theta`` every data set is
drawn at one parameter and the chains use the model's prior: the frequentist coverage at
$\theta$ that the papers' tables report over repetitions, here with one fit (the networks
are amortised over data sets near the observed one).

The chains are [`sample()`][scorebayes.sbi.estimator.ScoreLangevin.sample]'s: unadjusted Langevin in
$u$, step $\tau_i = \kappa/\lambda_{\max,i}$ per data set
([`curvature_step_size()`][scorebayes.samplers.langevin.curvature_step_size]), reflected into
[`chain_box()`][scorebayes.sbi.estimator.ScoreLangevin.chain_box] of each data set; all data sets run together.

References:
    - Validating Bayesian Inference Algorithms with Simulation-Based Calibration
      (Talts, Betancourt, Simpson, Vehtari, Gelman, 2018), <https://arxiv.org/abs/1804.06788>
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ...parallel import make_generator
from ...proposal import PriorSampler
from ...samplers.langevin import curvature_step_size, reflect_into_box
from .score_mean import ScoreMeanTest, score_mean_test
from .simulated import checked_parameters, simulate_views

__all__ = ["Calibration", "calibrate", "check_options", "OPTIONS", "ScoreMeanTest", "score_mean_test"]


@dataclass
class Calibration:
    r"""The outcome of [`calibrate()`][scorebayes.sbi.checks.calibration.calibrate] for ``M`` data sets and ``d`` parameters.

    Attributes:
        names: the parameters' names, ``d``.
        theta: the parameters the data sets were drawn at, ``[M, d]``.
        ranks: the rank of $\theta_{ij}$ among the ``L`` draws of data set ``i``,
            $(\#\{\text{draws} < \theta_{ij}\} + U)/(L + 1)$, ``U`` uniform, ``[M, d]``
            (Uniform(0, 1) if the draws are exact and independent).
        covered: whether the rank lies in the central ``level`` of (0, 1), i.e. the draws' central
            interval holds $\theta_{ij}$, ``[M, d]``.
        z: $(\bar\theta_{ij} - \theta_{ij})/\mathrm{sd}_{ij}$ in ``u``, ``[M, d]``.
        width: the draws' central ``level`` interval's width in $\theta$, ``[M, d]``.
        posterior_mean: the draws' mean in $\theta$, ``[M, d]``.
        level: the intervals' level.
        step_sizes: the chains' step size per data set, ``[M]``.
        half_shift: $|\bar u_{\text{first half}} - \bar u_{\text{second half}}|/\mathrm{sd}$
            of each data set's draws over time, ``[M, d]`` (large values: burn-in too short).
        settings: the chain settings used.
        draws: every data set's draws in $\theta$, ``[M, L, d]``.
    """

    names: list[str]
    theta: Tensor
    ranks: Tensor
    covered: Tensor
    z: Tensor
    width: Tensor
    posterior_mean: Tensor
    level: float
    step_sizes: Tensor
    half_shift: Tensor
    settings: dict[str, Any] = field(default_factory=dict)
    draws: Tensor | None = None

    @property
    def num_data_sets(self) -> int:
        return self.ranks.shape[0]

    def coverage(self) -> Tensor:
        """Per parameter, the fraction of data sets whose interval covers theta, ``[d]``."""
        return self.covered.double().mean(0)

    def coverage_se(self) -> Tensor:
        r"""Monte Carlo standard error of [`coverage()`][scorebayes.sbi.checks.calibration.Calibration.coverage] if it were ``level``:
        $\sqrt{\ell(1-\ell)/M}$, ``[d]``."""
        return torch.full((self.ranks.shape[1],), math.sqrt(self.level * (1 - self.level) / self.num_data_sets),
                          dtype=torch.float64)

    def mean_z(self) -> Tensor:
        """Per parameter, the mean standardised error, ``[d]`` (0 if calibrated)."""
        return self.z.mean(0)

    def mean_z_se(self) -> Tensor:
        """Standard error of [`mean_z()`][scorebayes.sbi.checks.calibration.Calibration.mean_z], ``[d]``."""
        return self.z.std(0) / math.sqrt(self.num_data_sets)

    def to_dict(self) -> dict[str, Any]:
        return {"names": self.names, "num_data_sets": self.num_data_sets, "level": self.level,
                "coverage": self.coverage().tolist(), "coverage_se": self.coverage_se().tolist(),
                "mean_z": self.mean_z().tolist(), "mean_z_se": self.mean_z_se().tolist(),
                "sd_z": self.z.std(0).tolist(), "mean_width": self.width.mean(0).tolist(),
                "mean_posterior_mean": self.posterior_mean.mean(0).tolist(),
                "half_shift_max": float(self.half_shift.max()), "settings": self.settings}

    def summary(self) -> str:
        """A markdown table: coverage, mean z and mean interval width per parameter."""
        se = float(self.coverage_se()[0])
        lines = [f"| parameter | coverage ({self.level:g}; MC se {se:.3f}) | mean z (se) | sd z | mean width |",
                 "|---|---|---|---|---|"]
        for j, name in enumerate(self.names):
            lines.append(f"| {name} | {float(self.coverage()[j]):.3f} | {float(self.mean_z()[j]):+.2f} "
                         f"({float(self.mean_z_se()[j]):.2f}) | {float(self.z[:, j].std()):.2f} | "
                         f"{float(self.width[:, j].mean()):.3g} |")
        return "\n".join(lines)

    def plot(self, path: str | None = None, *, bins: int = 10):
        """Rank histograms, one panel per parameter, with the 99% band of a uniform histogram."""
        from ...plots import pyplot

        plt = pyplot()
        d = len(self.names)
        cols = min(4, d)
        rows = math.ceil(d / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 2.4 * rows), squeeze=False)
        m = self.num_data_sets
        expected = m / bins
        half = 2.576 * math.sqrt(m * (1 / bins) * (1 - 1 / bins))
        for j, ax in enumerate(axes.flat):
            if j >= d:
                ax.axis("off")
                continue
            ax.axhspan(max(0.0, expected - half), expected + half, color="0.85")
            ax.hist(self.ranks[:, j].numpy(), bins=bins, range=(0, 1), color="C0", edgecolor="white")
            ax.set_title(f"{self.names[j]}: cover {float(self.coverage()[j]):.2f}", fontsize=9)
            ax.set_xlim(0, 1)
        fig.suptitle(f"rank of theta among the posterior draws ({m} data sets)", fontsize=10)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
            plt.close(fig)
        return fig


OPTIONS = ("num_data_sets", "at", "chains", "draws_per_chain", "burn_in", "thin", "step_size_factor", "level")


def check_options(**options: Any) -> None:
    """Check [`calibrate()`][scorebayes.sbi.checks.calibration.calibrate]'s options (names in ``OPTIONS``) before any work: ``ValueError``
    naming the first bad one (the CLI checks a config's ``calibration`` table with it before fitting)."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown calibration option(s) {unknown}; known: {list(OPTIONS)}")
    for name, least in (("num_data_sets", 2), ("chains", 1), ("draws_per_chain", 1), ("thin", 1), ("burn_in", 0)):
        value = options.get(name, least)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    draws = options.get("chains", 25) * options.get("draws_per_chain", 20)
    if draws < 20:
        raise ValueError(f"chains x draws_per_chain = {draws} draws per data set cannot resolve a rank: "
                         "use at least 20")
    level = options.get("level", 0.95)
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    kappa = options.get("step_size_factor", 0.1)
    if isinstance(kappa, bool) or not isinstance(kappa, (int, float)) or not 0 < kappa < 2:
        raise ValueError(f"step_size_factor must be in (0, 2), got {kappa!r}")


def calibrate(
    estimator,
    num_data_sets: int = 100,
    *,
    prior: Any = None,
    at: Tensor | None = None,
    data: Tensor | None = None,
    chains: int = 25,
    draws_per_chain: int = 20,
    burn_in: int = 2000,
    thin: int = 20,
    step_size_factor: float = 0.1,
    level: float = 0.95,
    seed: int | None = None,
    progress: bool | None = None,
) -> Calibration:
    r"""Simulation-based calibration of a fitted ``estimator`` (see the module docstring).

    Arguments:
        estimator: a fitted [`ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin].
        num_data_sets: $M$, data sets simulated at the estimator's data-set size.
        prior: where the parameters come from and the chains' prior: a sampler with ``sample``
            and ``grad_log_prob_unconstrained`` (as ``estimator.proposal_``). Default: the
            table's proposal ($q$, or the model's prior without localization); with
            ``at``, the model's prior.
        at: ``[d]`` one parameter for every data set (frequentist coverage at it), or ``[M, d]``
            one per data set (coverage around a region, e.g. at posterior draws); the chains
            then use the model's prior.
        data: ``[M, n, p]`` data sets to use instead of simulating them, e.g. to set the
            estimator beside a reference posterior on the same data sets; they must have been
            simulated at ``at`` (required with it). A noise-smoothed estimator adds its noise to
            them as to simulated ones.
        chains, draws_per_chain, burn_in, thin: per data set, ``chains`` chains that keep
            every ``thin``-th state after ``burn_in`` steps.
        step_size_factor: $\kappa$ of the per-data-set step size.
        level: the central intervals' level.
        seed: default the estimator's.

    Returns:
        a [`Calibration`][scorebayes.sbi.checks.calibration.Calibration].
    """
    from ..sampling import prior_score_graph as _prior_score_graph

    likelihood = estimator.likelihood_  # raises if the estimator is not fitted
    check_options(num_data_sets=num_data_sets, chains=chains, draws_per_chain=draws_per_chain,
                  burn_in=burn_in, thin=thin, step_size_factor=step_size_factor, level=level)
    space = estimator.space
    d = space.dim
    if at is not None:
        at = checked_parameters(space, at, "at", ((d,), (num_data_sets, d)),
                         f"[{d}] or [num_data_sets = {num_data_sets}, {d}] parameter values")
    if data is not None:
        if at is None:
            raise ValueError("data needs at: the parameter(s) its data sets were simulated at")
        data = torch.as_tensor(data)
        expected = (num_data_sets, *likelihood.x_obs.shape)
        if tuple(data.shape) != expected:
            raise ValueError(f"data must have shape [num_data_sets, n, p] = {list(expected)}, got {list(data.shape)}")
        if not torch.isfinite(data).all():
            raise ValueError("data must be finite")
    if prior is None:
        prior = PriorSampler(estimator.prior) if at is not None else estimator.proposal_
    for method in ("sample", "grad_log_prob_unconstrained"):
        if not callable(getattr(prior, method, None)):
            raise TypeError(f"prior needs a {method}() method (as estimator.proposal_), got {type(prior).__name__}")
    seed = estimator.seed if seed is None else seed
    progress = estimator.progress if progress is None else progress
    g = make_generator(seed, "calibrate")
    names = estimator.parameter_names or [f"theta{j}" for j in range(d)]

    # data sets, and each one's view and chain box
    theta = at.expand(num_data_sets, d).clone() if at is not None else prior.sample(num_data_sets, g).double()
    keep, x, views = simulate_views(estimator, theta, g, "calibration", data)
    theta, num_data_sets = theta[keep], len(views)  # failed simulations are dropped and counted
    u_true = space.to_unconstrained(theta)
    if likelihood.support_fn is None:  # one box for every data set
        lows, highs = (b.expand(num_data_sets, d) for b in likelihood.chain_box())
    else:
        lows, highs = (torch.stack(b) for b in zip(*(likelihood.chain_box(x_m) for x_m in x)))
    score = likelihood.for_data_sets(views)

    def prior_score(u: Tensor) -> Tensor:  # [..., d]
        return prior.grad_log_prob_unconstrained(u.reshape(-1, d)).reshape(u.shape)

    def prior_score_graph(u: Tensor) -> Tensor:  # differentiable in u (for the step size)
        if isinstance(prior, PriorSampler):
            return _prior_score_graph(prior.space, u)
        return prior.grad_log_prob_unconstrained(u)

    def drift(u: Tensor) -> Tensor:  # [M, C, d]
        return score(u) + prior_score(u)

    # starts from the table's proposal, reflected into each data set's box
    u = space.to_unconstrained(estimator.proposal_.sample(num_data_sets * chains, g).double())
    u = reflect_into_box(u.reshape(num_data_sets, chains, d), lows[:, None], highs[:, None])
    tau = torch.empty(num_data_sets, dtype=torch.float64)
    for m in range(num_data_sets):
        one = estimator.likelihood_.for_data_sets([views[m]])
        probes = u[m, : min(2, chains)]
        tau[m] = curvature_step_size(lambda v: one(v[None])[0] + prior_score_graph(v),
                                     probes, kappa=step_size_factor).step_size
    path = _run_chains(drift, u, tau, (lows, highs), burn_in, thin, draws_per_chain, g, progress)
    settings = {"chains": chains, "draws_per_chain": draws_per_chain, "burn_in": burn_in, "thin": thin,
                "step_size_factor": step_size_factor, "seed": seed,
                "at": None if at is None else at.tolist() if at.dim() == 1 else "per data set",
                "prior": type(prior).__name__, "data": "simulated" if data is None else "given"}
    return _result(space, names, theta, u_true, path, tau, level, settings, g)


def _run_chains(drift, u: Tensor, tau: Tensor, box: tuple[Tensor, Tensor], burn_in: int, thin: int,
                draws_per_chain: int, g: torch.Generator, progress: bool) -> Tensor:
    """ULA chains of all data sets at once, ``u [M, C, d]`` with step ``tau [M]``, reflected into
    each data set's box ``([M, d], [M, d])``: the kept states ``[M, C, draws_per_chain, d]``."""
    lows, highs = box
    tau_c = tau[:, None, None]
    noise_scale = (2 * tau_c).sqrt()
    steps = burn_in + draws_per_chain * thin
    draws = []
    bar = tqdm(total=steps, desc="calibration chains", disable=not progress, leave=False)
    with torch.no_grad():
        for step in range(steps):
            u = u + tau_c * drift(u) + noise_scale * torch.randn(u.shape, generator=g, dtype=u.dtype)
            u = reflect_into_box(u, lows[:, None], highs[:, None])
            if step >= burn_in and (step - burn_in + 1) % thin == 0:
                draws.append(u.clone())
            bar.update(1)
    bar.close()
    return torch.stack(draws, 2)


def _result(space, names: list[str], theta: Tensor, u_true: Tensor, path: Tensor, tau: Tensor, level: float,
            settings: dict[str, Any], g: torch.Generator) -> Calibration:
    """Ranks, coverage, z and widths of the true parameters ``u_true [M, d]`` among the chains'
    draws ``path [M, C, D, d]``."""
    num_data_sets, chains, draws_per_chain, d = path.shape
    post = path.reshape(num_data_sets, chains * draws_per_chain, d)
    sd = post.std(1).clamp_min(1e-300)
    half = draws_per_chain // 2
    if half:
        half_shift = (path[:, :, :half].mean((1, 2)) - path[:, :, draws_per_chain - half:].mean((1, 2))).abs() / sd
    else:
        half_shift = torch.zeros(num_data_sets, d, dtype=torch.float64)
    # the rank of theta among the L draws, ties broken at random: (#below + U)/(L + 1) is exactly
    # Uniform(0, 1) for independent exact draws; the interval is the ranks' central ``level``
    # (empirical quantiles of L draws cover only about level - 1/L: 0.90 for L = 40)
    num = post.shape[1]
    below = (post < u_true[:, None]).double().sum(1)
    ranks = (below + torch.rand(below.shape, generator=g, dtype=torch.float64)) / (num + 1)
    tail = (1 - level) / 2
    lo, hi = post.quantile(tail, dim=1), post.quantile(1 - tail, dim=1)
    return Calibration(
        names=names, theta=theta, ranks=ranks, covered=(tail < ranks) & (ranks < 1 - tail),
        z=(post.mean(1) - u_true) / sd,
        width=space.to_constrained(hi) - space.to_constrained(lo),
        posterior_mean=space.to_constrained(post).mean(1), level=level, step_sizes=tau,
        half_shift=half_shift,
        settings=settings,
        draws=space.to_constrained(post))
