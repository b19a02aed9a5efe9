r"""Bayesian monotone regression with Bernstein polynomials (Sec. 5.2, App. C.2).

Observations $X_i = (x_i, y_i)$, $x_i \sim U(0, 1)$, and

$$
y_i = \sum_{k=0}^M \theta_k\, b_M(x_i, k) + \varepsilon_i, \qquad
b_M(x, k) = \sum_{j=k}^M \binom Mj x^j (1-x)^{M-j}, \qquad \varepsilon_i \sim \mathcal N(0, \sigma^2),
$$

with $\sigma = 0.1$ known, $M = 10$ (11 parameters; $\theta_0 = \beta_0$,
$\theta_k = \beta_k - \beta_{k-1} \ge 0$) and the uniform prior on
$[-5, 5] \times [0, 1]^{M}$. The observed data follow the *true* function
$y = \tanh(4x + 2) + \varepsilon$, which is not a Bernstein polynomial; ``true_parameters``
is the pseudo-true value (box-constrained least-squares fit of $\tanh(4x+2)$ under
$x \sim U(0,1)$), and metrics compare with `Monotone.true_function()`.

The exact posterior is the normal $\mathcal N((D^\top D)^{-1}D^\top y, \sigma^2 (D^\top D)^{-1})$
truncated to the box, sampled by `gibbs_truncated_normal()`.
The exact likelihood score of one observation is $(y - D\theta) D / \sigma^2$.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Sec. 5.2, App. C.2)
    - McKay Curtis & Ghosh, J. Appl. Stat. 2011. <https://doi.org/10.1080/02664761003692423>
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from scipy.optimize import lsq_linear
from torch import Tensor
from torch.distributions import Uniform

from ..posterior import Posterior
from ..priors import independent
from ..simulators import Simulator
from .base import Model
from .monotone_gibbs import gibbs_truncated_normal

__all__ = ["Monotone", "bernstein_design", "true_function"]


def bernstein_design(x: Tensor, degree: int) -> Tensor:
    r"""Integrated Bernstein basis $b_M(x, k)$, ``x [...] -> [..., M+1]`` (column 0 is 1)."""
    j = torch.arange(degree + 1, dtype=x.dtype, device=x.device)
    log_binom = torch.tensor(
        [math.lgamma(degree + 1) - math.lgamma(i + 1) - math.lgamma(degree - i + 1)
         for i in range(degree + 1)], dtype=x.dtype, device=x.device)
    xe = x[..., None]
    basis = torch.exp(log_binom) * xe**j * (1 - xe) ** (degree - j)
    tails = torch.flip(torch.cumsum(torch.flip(basis[..., 1:], [-1]), -1), [-1])
    return torch.cat([torch.ones_like(xe), tails], dim=-1)  # b_M(x, 0) = 1 exactly


def true_function(x: Tensor) -> Tensor:
    r"""The data-generating regression function $\tanh(4x + 2)$."""
    return torch.tanh(4 * x + 2)


@dataclass(frozen=True)
class _MonotoneSim:
    degree: int
    sigma: float

    def latent(self, B: int, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        """``(U [B, n] ~ U(0, 1) for x, E [B, n] ~ N(0, 1) for the noise)``."""
        U = torch.rand(B, n, generator=generator, dtype=torch.float64)
        E = torch.randn(B, n, generator=generator, dtype=torch.float64)
        return U, E

    def transform(self, theta: Tensor, z: tuple[Tensor, Tensor]) -> Tensor:
        """``theta [B, M+1] -> X [B, n, 2]`` with columns ``(x, y)``."""
        U, E = z
        mean = (bernstein_design(U, self.degree) * theta[:, None, :]).sum(-1)
        return torch.stack([U, mean + self.sigma * E], dim=-1)


@dataclass(frozen=True)
class DesignSummary:
    r"""NPE/BSL summary $D^\top y$: ``X [B, n, 2] -> [B, M+1]``."""

    degree: int

    def __call__(self, x: Tensor) -> Tensor:
        return (bernstein_design(x[..., 0], self.degree) * x[..., 1:2]).sum(-2)


class Monotone(Model):
    r"""Bernstein monotone regression (``d = M + 1``, ``p = 2``).

    Arguments:
        degree: Bernstein order $M$ (10).
        n_obs: $n$ (1000).
        sigma: known noise SD (0.1).
        theta0_bound: prior box for $\theta_0$ is ``[-b, b]`` (5).
        grid_size: points of the evaluation grid on ``[0, 1]`` (101).
    """

    def __init__(self, degree: int = 10, n_obs: int = 1000, sigma: float = 0.1,
                 theta0_bound: float = 5.0, grid_size: int = 101):
        if degree < 1:
            raise ValueError(f"degree must be >= 1, got {degree}")
        self.degree, self.sigma = int(degree), float(sigma)
        d = self.degree + 1
        self.low = torch.tensor([-theta0_bound] + [0.0] * self.degree, dtype=torch.float64)
        self.high = torch.tensor([theta0_bound] + [1.0] * self.degree, dtype=torch.float64)
        prior = independent([Uniform(lo, hi) for lo, hi in zip(self.low, self.high, strict=True)])
        self._sim = _MonotoneSim(self.degree, self.sigma)
        self.grid = torch.linspace(0.0, 1.0, grid_size, dtype=torch.float64)
        self.summary_fn = DesignSummary(self.degree)
        super().__init__(
            name="monotone", parameter_names=[f"theta{k}" for k in range(d)], prior=prior,
            simulator=Simulator(latent=self._sim.latent, transform=self._sim.transform, obs_dim=2),
            true_parameters=self._pseudo_truth(), n_obs=n_obs, obs_dim=2,
            paper_settings=PAPER_SETTINGS,
        )

    def _pseudo_truth(self) -> Tensor:
        x = torch.linspace(0.0, 1.0, 4001, dtype=torch.float64)
        D = bernstein_design(x, self.degree).numpy()
        fit = lsq_linear(D, true_function(x).numpy(), bounds=(self.low.numpy(), self.high.numpy()))
        return torch.as_tensor(fit.x, dtype=torch.float64)

    def design(self, x: Tensor) -> Tensor:
        """Design matrix ``x [..., n] -> D [..., n, M+1]``."""
        return bernstein_design(x, self.degree)

    def design_features(self, view: Tensor) -> Tensor:
        r"""The design row of each observation, for ``ScoreLangevin(data_features=...)``:
        ``(x, y) [..., 2] -> [..., M]``, $b_M(x, 1), \dots, b_M(x, M)$ ($b_M(x, 0) = 1$
        is left out).

        One observation's score is $(y - \sum_k \theta_k b_M(x, k))\, b_M(x, \cdot) /
        \sigma^2$: a net given $(x, y)$ alone must build the degree-$M$ polynomials
        itself. Given them, a 3 x 64 ELU net trained on 5e5 rows of the paper's table has about half
        the error on the observed data (beyond the paper).
        """
        if view.shape[-1] != 2:
            raise ValueError(f"design_features takes observations (x, y) [..., 2], got {tuple(view.shape)}")
        return bernstein_design(view[..., 0], self.degree)[..., 1:]

    def true_function(self, x: Tensor) -> Tensor:
        r"""$\tanh(4x+2)$, the function the observed data come from."""
        return true_function(x)

    def regression_function(self, theta: Tensor, grid: Tensor | None = None) -> Tensor:
        r"""$B_M(x) = \sum_k \theta_k b_M(x, k)$ on ``grid [G]``: ``theta [S, d] -> [S, G]``."""
        grid = self.grid if grid is None else grid
        return theta.to(torch.float64) @ self.design(grid.to(torch.float64)).T

    def table2_metrics(self, posterior: Posterior, reference: Posterior) -> dict[str, float]:
        r"""Table 2 metrics of one repetition, on $B_M(x)$ over the grid.

        KS and $W_1$ (function units) against the ``reference`` (Gibbs) posterior, and
        the pointwise 95% band's coverage of $\tanh(4x+2)$ and its width, all averaged
        over the grid. Importance weights of either posterior are used.

        Returns:
            ``{"ks", "w1", "cover95", "ci95_width"}``.
        """
        from ..metrics import band_coverage, function_distances

        def flat(p: Posterior):
            w = None if p.weights is None else p.weights.reshape(-1)
            return self.regression_function(p.draws), w

        f, w = flat(posterior)
        f_ref, w_ref = flat(reference)
        dist = function_distances(f, f_ref, w, w_ref)
        band = band_coverage(f, self.true_function(self.grid), w)
        return {"ks": dist["ks"], "w1": dist["w1"], "cover95": band["coverage"],
                "ci95_width": band["width"]}

    def observed(self, generator: torch.Generator | None = None) -> Tensor:
        r"""``x_obs [n, 2]``: $x \sim U(0,1)$, $y = \tanh(4x+2) + \mathcal N(0, \sigma^2)$."""
        U, E = self._sim.latent(1, self.n_obs, generator)
        return torch.stack([U[0], true_function(U[0]) + self.sigma * E[0]], dim=-1)

    def log_likelihood(self, theta: Tensor, x: Tensor) -> Tensor:
        r"""Gaussian log-likelihood of ``y | x``: ``theta [B, d], x [B, n, 2] -> [B]``."""
        resid = x[..., 1] - (self.design(x[..., 0]) * theta[:, None, :]).sum(-1)
        log_norm = math.log(self.sigma * math.sqrt(2 * math.pi))
        return (-0.5 * resid**2 / self.sigma**2 - log_norm).sum(-1)

    def true_score(self, theta: Tensor, x: Tensor) -> Tensor:
        r"""Exact score $\sum_i (y_i - D_i\theta) D_i/\sigma^2$, ``[B, d]``.

        ``x [B, 2]`` is one observation per parameter, ``x [B, n, 2]`` a data set (summed).
        """
        x = x.unsqueeze(1) if x.dim() == 2 else x
        D = self.design(x[..., 0])
        resid = x[..., 1] - (D * theta[:, None, :]).sum(-1)
        return (resid[..., None] * D).sum(1) / self.sigma**2

    def posterior_parameters(self, x_obs: Tensor) -> tuple[Tensor, Tensor]:
        r"""Precision $Q = D^\top D/\sigma^2$ ``[d, d]``, linear term $D^\top y/\sigma^2$ ``[d]``."""
        D = self.design(x_obs[:, 0].to(torch.float64))
        y = x_obs[:, 1].to(torch.float64)
        return D.T @ D / self.sigma**2, D.T @ y / self.sigma**2

    def posterior_mode(self, x_obs: Tensor) -> Tensor:
        """Box-constrained least squares (the mode of the truncated normal), ``[d]``."""
        D = self.design(x_obs[:, 0].to(torch.float64)).numpy()
        y = x_obs[:, 1].double().numpy()
        fit = lsq_linear(D, y, bounds=(self.low.numpy(), self.high.numpy()))
        return torch.as_tensor(fit.x, dtype=torch.float64)

    def reference_posterior(self, x_obs: Tensor, num: int, generator: torch.Generator | None = None,
                            *, num_chains: int = 100, burn_in: int = 2000, thin: int = 10,
                            progress: bool = False) -> Posterior:
        r"""Exact posterior draws by the coordinate-wise Gibbs sampler.

        Chains start at the posterior mode, jittered inside the box, and run ``burn_in``
        sweeps; ``ceil(num / num_chains)`` thinned draws are kept per chain.

        Returns:
            ``Posterior`` with samples ``[num_chains, ceil(num / num_chains), d]``.
        """
        if num < 1 or num_chains < 1:
            raise ValueError("num and num_chains must be >= 1")
        Q, b = self.posterior_parameters(x_obs)
        mode = self.posterior_mode(x_obs)
        # jitter the start by about one conditional SD, then clamp into the box
        sd = torch.diagonal(Q).rsqrt()
        noise = torch.randn(num_chains, self.dim, generator=generator, dtype=torch.float64)
        init = torch.minimum(torch.maximum(mode + sd * noise, self.low), self.high)
        per_chain = -(-num // num_chains)
        draws = gibbs_truncated_normal(Q, b, self.low, self.high, init=init, num_samples=per_chain,
                                       burn_in=burn_in, thin=thin, generator=generator,
                                       progress=progress)
        return Posterior(draws, self.parameter_names,
                         info={"method": "gibbs", "burn_in": burn_in, "thin": thin})


PAPER_SETTINGS = {
    "repetitions": 10,
    "grid_size": 101,
    "localization": {"replicates": 100, "lr": (1e-1, 1e-3), "iterations": 500, "cost": 5e4},
    "single_model": {
        "N": 2_000_000, "N_R": 100_000, "m_R": 1000,
        "score_net": {"activation": "elu", "hidden": [64, 64, 64], "batch": 1000,
                      "lr": (1e-3, 1e-5), "epochs": 100, "penalty_epochs": 50},
        "mean_net": {"activation": "elu", "hidden": [64, 64, 64], "batch": 256,
                     "lr": (1e-3, 1e-5), "epochs": 300, "penalty_epochs": 100},
        "lambda1": 1e-3, "lambda2": 1e-3, "chains": 1000, "samples": 10_000,
        "tempering": [0.1 * k for k in range(1, 11)],
    },
    "n_model": {"N": 200_000, "activation": "elu", "hidden": [64, 64, 64], "batch": 200,
                "lr": (1e-3, 1e-5), "epochs": 300, "penalty_epochs": 50, "lambda": 1.0},
    "n_model_5x": {"N": 1_000_000, "epoch_divisor": 5},
    "npe": {"summary": "D^T y", "N": 200_000, "flow": "maf", "transforms": 5, "hidden": [50, 50],
            "batch": 200, "lr": 5e-4, "epochs": 200, "samples": 10_000},
    "abc": {"N": 1_000_000, "keep": 1000, "proposal": "q"},
    "bsl": {"summary": "D^T y", "chains": 10, "length": 1200, "burn_in": 200,
            "simulations_per_iteration": 100},
    "gibbs": {"samples": 100_000, "runs": 10},
    "true_posterior": {"cover95": 0.965, "ci95_width": 0.035},
}
