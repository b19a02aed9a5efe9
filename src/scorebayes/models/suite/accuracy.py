r"""Is a posterior right? Its moments against a suite model's exact ones.

For a method's posterior with mean $\hat m$ and SD $\hat s$ and the exact
$m, s$ (``model.exact_moments(x_obs)``), per parameter

$$
e_j = \frac{|\hat m_j - m_j|}{s_j}, \qquad r_j = \frac{\hat s_j}{s_j},
$$

and the posterior passes when $e_j \le 0.3$ and $|r_j - 1| \le 0.25$ for every
$j$ (the tolerances are arguments). The exact moments are themselves accurate to well
under 0.02 SD (conjugate: exact; quadrature: far below; g-and-k MCMC: about
$1/\sqrt{\mathrm{ESS}} \approx 0.007$), so they do not blur the check.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ...posterior import Posterior
from ..base import Model

__all__ = ["PosteriorCheck", "check_moments", "check_posterior"]


class PosteriorCheck(NamedTuple):
    mean_error: Tensor  # [d] |mean - exact mean| / exact sd
    sd_ratio: Tensor  # [d] sd / exact sd
    passed: bool

    def format(self, names: list[str] | None = None) -> str:
        """One line per parameter: mean error in SDs and SD ratio."""
        names = names or [f"theta{j}" for j in range(len(self.mean_error))]
        rows = [f"{n:>12}  mean error {float(e):6.3f} sd   sd ratio {float(r):6.3f}"
                for n, e, r in zip(names, self.mean_error, self.sd_ratio, strict=True)]
        return "\n".join(rows + [f"{'passed' if self.passed else 'FAILED':>12}"])


def check_moments(mean: Tensor, sd: Tensor, exact_mean: Tensor, exact_sd: Tensor, *,
                  mean_tol: float = 0.3, sd_tol: float = 0.25) -> PosteriorCheck:
    """Compare a posterior's mean and SD ``[d]`` with the exact ones (see the module docstring)."""
    mean, sd = torch.as_tensor(mean, dtype=torch.float64), torch.as_tensor(sd, dtype=torch.float64)
    exact_mean = torch.as_tensor(exact_mean, dtype=torch.float64)
    exact_sd = torch.as_tensor(exact_sd, dtype=torch.float64)
    if not mean.shape == sd.shape == exact_mean.shape == exact_sd.shape:
        raise ValueError(f"shapes differ: {tuple(mean.shape)}, {tuple(sd.shape)}, "
                         f"{tuple(exact_mean.shape)}, {tuple(exact_sd.shape)}")
    error = (mean - exact_mean).abs() / exact_sd
    ratio = sd / exact_sd
    passed = bool((error <= mean_tol).all() and ((ratio - 1).abs() <= sd_tol).all())
    return PosteriorCheck(error, ratio, passed)


def check_posterior(model: Model, x_obs: Tensor, posterior: Posterior | Tensor, *,
                    mean_tol: float = 0.3, sd_tol: float = 0.25) -> PosteriorCheck:
    """Check a [`Posterior`][scorebayes.posterior.Posterior] (weights respected) or draws ``[S, d]`` against
    ``model.exact_moments(x_obs)``."""
    if isinstance(posterior, Posterior):
        mean, sd = posterior.mean(), posterior.sd()
    else:
        draws = torch.as_tensor(posterior, dtype=torch.float64).reshape(-1, model.dim)
        mean, sd = draws.mean(0), draws.std(0)
    exact_mean, exact_sd = model.exact_moments(x_obs)
    return check_moments(mean, sd, exact_mean, exact_sd, mean_tol=mean_tol, sd_tol=sd_tol)
