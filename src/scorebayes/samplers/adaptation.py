r"""Warm-up adaptation of Langevin chains, separate from the kernel: windows, whitening, restarts.

The chains run in whitened coordinates $v$, $u = c + Lv$, where scores transform as
$\nabla_v = L^\top\nabla_u$ ([`whitened()`][scorebayes.samplers.adaptation.whitened]). [`adapt_whitening()`][scorebayes.samplers.adaptation.adapt_whitening] refits $(c, L)$
in windows of ratio 1:2:4 ([`adaptation_windows()`][scorebayes.samplers.adaptation.adaptation_windows]) to the chains' own states
([`covariance_preconditioner()`][scorebayes.samplers.langevin.covariance_preconditioner]), each window being ULA
chains (`scorebayes.samplers.ula`) run by the driver ([`run_chains()`][scorebayes.samplers.base.run_chains])
with the step size $\kappa/\lambda_{\max}$ of
[`curvature_step_size()`][scorebayes.samplers.langevin.curvature_step_size], and restarts stragglers
([`reset_stragglers()`][scorebayes.samplers.adaptation.reset_stragglers]) between windows; the draws that follow are ordinary chains from the
adapted state.

References:
    - Stan Reference Manual: HMC algorithm parameters, adaptation windows (Stan Development Team, 2024)
      <https://mc-stan.org/docs/reference-manual/mcmc.html>
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from .acceptance import log_density_difference
from .base import Kernel, run_chains, warn_diverged
from .preconditioning import covariance_preconditioner
from .step_size import curvature_step_size
from .ula import LANGEVIN_DIVERGENCE, build_kernel, reflect_into_box, tempering

__all__ = ["adapt_whitening", "adaptation_windows", "default_straggler_gap", "probes_with_centre",
           "reset_stragglers", "whitened"]


def adaptation_windows(total: int, *, count: int = 3) -> list[int]:
    """Warm-up window lengths of ratio 1 : 2 : 4 ... summing to ``total``: ``count`` windows, fewer
    when ``total`` is short (about 50 steps or more in the first)."""
    if total < 1:
        return []
    count = max(1, min(count, int(math.log2(total / 50 + 1))))
    unit = total / (2**count - 1)
    lengths = [int(round(unit * 2**k)) for k in range(count)]
    lengths[-1] += total - sum(lengths)
    return lengths


def whitened(u_fns: tuple[Callable, Callable, Callable], center: Tensor, L: Tensor,
             bounds: tuple[Tensor, Tensor]) -> tuple[Callable, Callable, Callable, Callable, Callable]:
    r"""The chain's functions in whitened coordinates $v$, $u = c + Lv$.

    ``u_fns``: the likelihood score, prior score and drift (with graph) in u, each
    ``[C, d] -> [C, d]``. Scores transform as $\nabla_v = L^\top\nabla_u$. Returns
    ``(likelihood, prior, drift, to_u, constrain)``; ``constrain`` reflects $u$ into the
    ``bounds`` box and maps back to $v$.
    """
    u_lik, u_prior, u_drift = u_fns
    L_inv = torch.linalg.inv(L)
    low, high = bounds

    def to_u(v: Tensor) -> Tensor:
        return center + v @ L.T

    def lik(v: Tensor) -> Tensor:
        return u_lik(to_u(v)) @ L

    def prior_score(v: Tensor) -> Tensor:
        return u_prior(to_u(v)) @ L

    def drift(v: Tensor) -> Tensor:
        return u_drift(to_u(v)) @ L

    def constrain(v: Tensor) -> Tensor:
        return (reflect_into_box(to_u(v), low, high) - center) @ L_inv.T

    return lik, prior_score, drift, to_u, constrain


def probes_with_centre(v: Tensor) -> Tensor:
    """Curvature probes in whitened coordinates: 15 chain states and the centre ``v = 0``."""
    return torch.cat([v[:15], torch.zeros_like(v[:1])])


def _window(fns: tuple[Callable, Callable, Callable], v: Tensor, tau: float, window: int,
            stages: Sequence[float], *, clip_norm: float | None, generator: torch.Generator,
            progress: bool) -> tuple[Tensor, Tensor, int]:
    """One warm-up window of ULA chains from ``v [C, d]`` with the (likelihood, prior, constrain)
    functions ``fns``: ``stages`` tempering stages, then ``window`` steps at $t = 1$ of which
    at most 50 states per chain (evenly spaced over the second half) are kept.

    Returns:
        ``(draws [C, S, d], diverged [C] bool, steps)``.
    """
    lik, prior_score, constrain = fns
    kept = max(1, min(50, window // 2))
    thin = max(1, (window // 2) // kept)
    n_stage = max(50, window // 10)

    def build(weight: float) -> Kernel:
        return build_kernel(lik, prior_score, tau, weight=weight, clip_norm=clip_norm, constrain=constrain)

    kernel = build(1.0)
    burn_in = len(stages) * n_stage + max(0, window - kept * thin)
    draws, _, info = run_chains(kernel, kernel.init(v), burn_in + kept * thin, burn_in=burn_in, thin=thin,
                                generator=generator, adaptation=tempering(build, stages, n_stage, kernel),
                                divergence=LANGEVIN_DIVERGENCE, progress=progress, desc="langevin")
    warn_diverged(info.diverged, stacklevel=2)
    return draws, info.diverged, info.num_steps


def adapt_whitening(u_fns: tuple[Callable, Callable, Callable], bounds: tuple[Tensor, Tensor],
                    u0: Tensor, center: Tensor, L: Tensor, *, windows: Sequence[int],
                    stages: Sequence[float], kappa: float, clip_norm: float | None,
                    generator: torch.Generator, progress: bool, straggler_gap: float | None = None
                    ) -> tuple[Tensor, Tensor, Tensor, Tensor, int, int]:
    r"""Windowed warm-up of the dense preconditioner (the ``adapt_steps`` of the Langevin-SBI sampler).

    Each window runs the chains whitened by the current ``(center, L)`` with the step size
    $\kappa/\lambda_{\max}$ from the curvature at 15 chains and at the centre, then refits
    ``(center, L)`` to the pooled states of the window's second half (50 per chain). The
    tempering ``stages`` (``max(50, first window / 10)`` steps each) precede the first window.
    With ``straggler_gap``, after each window the chains more than that many nats below the
    median chain are restarted from other chains ([`reset_stragglers()`][scorebayes.samplers.adaptation.reset_stragglers]) and left out of
    the refit. Chains that diverge in a window are dropped (with a warning); more than half
    raise [`ChainsDivergedError`][scorebayes.samplers.base.ChainsDivergedError].

    Arguments:
        u_fns: the likelihood score, prior score and drift (with graph) in $u$, each
            ``[C, d] -> [C, d]``.
        bounds: ``(low [d], high [d])``, the box the chains are reflected into (in $u$).
        u0: ``[C, d]`` initial states; ``center [d]``, ``L [d, d]``: the initial whitening.
        windows: window lengths ([`adaptation_windows()`][scorebayes.samplers.adaptation.adaptation_windows]).
        stages: tempering weights before the first window; ``kappa``: $\tau\lambda_{\max}$.
        clip_norm: clip the likelihood score (in $v$) to this norm.

    Returns:
        ``(u [C', d], alive [C] bool, center, L, steps, resets)``: the last states of the chains
        that did not diverge, which chains those are, the final whitening, the steps run and the
        number of restarts.
    """
    alive = torch.ones(len(u0), dtype=torch.bool)
    u, steps, resets = u0, 0, 0
    for k, window in enumerate(windows):
        lik, prior_score, drift, to_u, constrain = whitened(u_fns, center, L, bounds)
        v = torch.linalg.solve(L, (u - center).T).T
        tau = curvature_step_size(drift, probes_with_centre(v), kappa=kappa).step_size
        draws, diverged, n = _window((lik, prior_score, constrain), v, tau, window,
                                     tuple(stages) if k == 0 else (), clip_norm=clip_norm,
                                     generator=generator, progress=progress)
        steps += n
        alive[alive.nonzero()[:, 0][diverged]] = False
        u_draws = to_u(draws[~diverged])
        u = u_draws[:, -1]
        healthy = torch.ones(len(u), dtype=torch.bool)
        if straggler_gap is not None and len(u) > 2:
            u, healthy = reset_stragglers(lambda x: u_fns[0](x) + u_fns[1](x), u, straggler_gap, generator)
            resets += int((~healthy).sum())
        # fitted to the chains that are not stragglers: a few chains stuck far out would set the scale
        center, L = covariance_preconditioner(u_draws[healthy].reshape(-1, u_draws.shape[-1]))
    return u, alive, center, L, steps, resets


def default_straggler_gap(dim: int) -> float:
    r"""Log-density deficit beyond which a warm-up chain counts as stuck: $\chi^2_{d}(1-10^{-6})/2$.

    For a Gaussian posterior in $d$ dimensions, $\log p(\text{mode}) - \log p(\theta)
    = \chi^2_d/2$, so a chain this far below the median chain lies where a draw falls with
    probability under $10^{-6}$ (25 nats for $d = 11$).
    """
    from scipy.stats import chi2

    return float(chi2.isf(1e-6, dim)) / 2


def reset_stragglers(score_u: Callable[[Tensor], Tensor], u: Tensor, gap: float,
                     generator: torch.Generator) -> tuple[Tensor, Tensor]:
    r"""Restart warm-up chains stuck where the (learned) posterior has no mass.

    With $m$ the coordinate-wise median of the chains' states ``u [C, d]``,
    $\ell_c = \log p(u_c) - \log p(m)$ by the path integral of the drift
    ([`log_density_difference()`][scorebayes.samplers.acceptance.log_density_difference]). Chains with
    $\operatorname{median}_c \ell_c - \ell_c >$ ``gap`` are moved to the state of a random
    other chain. Only during warm-up, whose draws are discarded: the chains that follow are still
    Langevin chains from their (new) starts. Needed where the drift is nearly flat far from the
    posterior (a logit coordinate saturated at its bound, the monotone regression's repetition 1:
    3 of 100 chains 1,800 nats below the others, which 20,000 steps of the posterior-sized step
    could not bring back).

    Returns:
        ``(u [C, d], healthy [C] bool)``: the states after the restarts, and which chains kept theirs.
    """
    centre = u.median(0).values
    with torch.no_grad():
        ell = log_density_difference(lambda x: score_u(x).detach(), centre, u)
    ell = torch.where(torch.isfinite(ell), ell, torch.full_like(ell, -math.inf))
    healthy = (ell.median() - ell) <= gap
    if healthy.all() or not healthy.any():
        return u, torch.ones(len(u), dtype=torch.bool)
    donors = healthy.nonzero()[:, 0]
    pick = donors[torch.randint(len(donors), (int((~healthy).sum()),), generator=generator)]
    u = u.clone()
    u[~healthy] = u[pick]
    return u, healthy
