r"""A local simulation-based calibration of the synthetic likelihood on held-back data sets.

The calibration data sets have known parameters $u_j \sim q$ (the round's proposal). For
each held-back pair $(u_j, T_j)$ the posterior under the proposal as prior,
$p_q(u \mid T_j) \propto q(u)\, \mathcal N(T_j; m(u), \Sigma(u))$, is computed by importance
sampling with $K$ fresh draws $u_k \sim q$ (weights $\propto \mathcal N(T_j; m(u_k), \Sigma(u_k))$).
If the fitted synthetic likelihood describes the summary, then (Talts et al., 2018)

- $z_{ij} = (u_{ij} - \bar u_{ij}) / \mathrm{sd}_{ij}$ has mean 0 and SD about 1: a mean
  $b$ is a shared bias of $b$ posterior SDs, an SD $r$ a posterior $r$ times too narrow;
- the central 90% intervals cover $u_{ij}$ in 90% of the data sets.

Data sets whose importance weights have an effective size below 20 are left out (the
posterior is too narrow for the proposal's draws to resolve).

References:
    - Validating Bayesian Inference Algorithms with Simulation-Based Calibration
      (Talts, Betancourt, Simpson, Vehtari, Gelman, 2018)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .synthetic_likelihood import GaussianSyntheticLikelihood

__all__ = ["held_out_coverage"]

MIN_EFFECTIVE = 20.0


def held_out_coverage(likelihood: GaussianSyntheticLikelihood, u_held: Tensor, summaries_held: Tensor,
                      proposal_draws: Tensor) -> dict[str, list[float] | int]:
    r"""$z$ statistics of held-back data sets ``u_held [H, d]``, ``summaries_held [H, d]``, with
    ``proposal_draws [K, d]`` from the proposal they were drawn from.

    Returns:
        ``{"z_mean": [d], "z_sd": [d], "coverage_90": [d], "num_data_sets": H'}`` over the
        ``H'`` data sets the draws resolve.
    """
    with torch.no_grad():
        log_w = likelihood.log_prob(summaries_held[:, None, :], proposal_draws[None, :, :])  # [H, K]
    log_w = torch.nan_to_num(log_w, nan=-math.inf)
    w = torch.softmax(log_w, dim=1)
    effective = 1.0 / (w**2).sum(1)
    keep = torch.isfinite(log_w).any(1) & (effective >= MIN_EFFECTIVE)
    w, u_held = w[keep], u_held[keep]
    d = proposal_draws.shape[1]
    if len(u_held) < 2:
        return {"z_mean": [math.nan] * d, "z_sd": [math.nan] * d, "coverage_90": [math.nan] * d,
                "num_data_sets": int(len(u_held))}
    mean = w @ proposal_draws  # [H', d]
    sd = (w @ proposal_draws**2 - mean**2).clamp_min(1e-300).sqrt()
    z = (u_held - mean) / sd
    # the weighted CDF of each held-back parameter under its posterior: inside (0.05, 0.95)?
    below = (proposal_draws[None, :, :] < u_held[:, None, :]).to(w.dtype)  # [H', K, d]
    cdf = (w[:, :, None] * below).sum(1)
    covered = ((cdf > 0.05) & (cdf < 0.95)).to(torch.float64).mean(0)
    return {"z_mean": z.mean(0).tolist(), "z_sd": z.std(0).tolist(), "coverage_90": covered.tolist(),
            "num_data_sets": int(len(u_held))}
