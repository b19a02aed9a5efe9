r"""Trust-region table rounds for the single-model (beyond the paper).

The single-model learns the likelihood score from a table drawn from a proposal $q$.
Its accuracy, and that of the debiasing network, is set by how densely $q$ covers the
posterior. On the M/G/1 queue the localized $q$ spreads along a ridge of the
minimum-distance estimates (theta1 against the service width), and nets trained on it carry a
fraction of the information; concentrated near the posterior, the same nets reach the smoothed
model's Bernstein-von Mises widths. This module finds such a
region without knowing the truth.

Round $k$ has a Gaussian region $q_k = \mathcal N(c_k, \operatorname{diag} s_k^2)$
in ``u``. Its networks give the learned posterior score
$g(u) = \hat\nabla_u \log p(\mathbf X \mid T(u)) + \nabla_u \log \pi_u(u)$ and its
Jacobian $J$ at $c_k$ ([`laplace_step()`][scorebayes.sbi.rounds.trust_region.laplace_step]). With $-J_{\mathrm{sym}} =
V \Lambda V^\top$, the Newton step along the directions of positive curvature,

$$
\delta = V \Lambda_+^{-1} V^\top g(c_k), \qquad
\Lambda_+^{-1} = \operatorname{diag}(1/\lambda_i \text{ if } \lambda_i > 0 \text{ else } 0),
$$

is clipped to ``max_step`` region SDs per coordinate, and the Laplace SDs
$\sigma_j = (V \Lambda_+^{-1} V^\top)_{jj}^{1/2}$ (infinite along a coordinate that
touches a direction of non-positive curvature) measure the posterior's scale from the
networks' curvature. They bound how far [`trust_region_fit()`][scorebayes.sbi.rounds.trust_region.trust_region_fit] shrinks the region: it centres each
round on the last round's chains (median in ``u``) and halves the region until it is
$\kappa\sigma$ wide, through [`ScoreLangevin.move_tables()`][scorebayes.sbi.estimator.ScoreLangevin.move_tables]; each round costs one more
pair of tables ($N/n + N_R m_R/n$ data sets).

Status: experimental. On a Gaussian mean it reaches the exact posterior
(``tests/test_trust_region.py``); on M/G/1 it narrows the single-model's intervals 2-6x but
still misses theta1, since networks trained on wide regions are weak and so are the Laplace
SDs that bound the shrinking.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from ..fitted import FittedEstimator

__all__ = ["LaplaceStep", "laplace_step", "trust_region_fit"]


@dataclass(frozen=True)
class LaplaceStep:
    r"""One projected Newton step of [`laplace_step()`][scorebayes.sbi.rounds.trust_region.laplace_step] (all in ``u``, ``[d]`` unless noted).

    Attributes:
        center: where the score was evaluated.
        step: the clipped Newton step.
        sd: Laplace SDs (``inf`` along coordinates touching non-positive curvature).
        score: $g(c)$.
        curvature: the eigenvalues of $-J_{\mathrm{sym}}$, ascending.
    """

    center: Tensor
    step: Tensor
    sd: Tensor
    score: Tensor
    curvature: Tensor


def _posterior_score(estimator: FittedEstimator, u: Tensor) -> Tensor:
    """``u [d] -> g(u) [d]``, differentiable (learned likelihood score + prior score in u)."""
    from ..sampling import prior_score_graph

    return estimator.likelihood_score(u[None])[0] + prior_score_graph(estimator.space, u[None])[0]


def laplace_step(estimator: FittedEstimator, center: Tensor, region_sd: Tensor, *,
                 max_step: float = 2.0) -> LaplaceStep:
    r"""Projected Newton step on the fitted estimator's posterior score at ``center``.

    See the module docstring for the equations; ``region_sd`` (``[d]``) and ``max_step`` bound
    the step to ``max_step`` region SDs per coordinate, since the networks are trained only
    within the region.
    """
    center = torch.as_tensor(center, dtype=torch.float64).reshape(-1).detach()
    region_sd = torch.as_tensor(region_sd, dtype=torch.float64).reshape(-1)
    if not max_step > 0:
        raise ValueError(f"max_step must be > 0, got {max_step}")
    score = _posterior_score(estimator, center).detach()
    jac = torch.autograd.functional.jacobian(lambda u: _posterior_score(estimator, u), center)
    curvature, V = torch.linalg.eigh(-0.5 * (jac + jac.T))
    positive = curvature > 0
    inverse = torch.where(positive, 1.0 / torch.where(positive, curvature, torch.ones_like(curvature)),
                          torch.zeros_like(curvature))
    step = V @ (inverse * (V.T @ score))
    step = torch.maximum(torch.minimum(step, max_step * region_sd), -max_step * region_sd)
    variance = (V**2) @ inverse
    touches_flat = ((V**2) @ (~positive).to(V.dtype)) > 1e-12
    sd = torch.where(touches_flat, torch.full_like(variance, float("inf")), variance.sqrt())
    return LaplaceStep(center=center, step=step, sd=sd, score=score, curvature=curvature)


def trust_region_fit(estimator: FittedEstimator, x_obs: Tensor, *, rounds: int = 4, shrink: float = 0.5,
                     floor: float = 4.0, edge_limit: float = 0.01, draws: int = 300, chains: int = 30,
                     max_steps: int = 20_000) -> FittedEstimator:
    r"""Fit the single-model, then move its tables ``rounds - 1`` times towards the posterior.

    Round 0 is [`ScoreLangevin.fit()`][scorebayes.sbi.estimator.ScoreLangevin.fit] on the localized proposal (``localize=True``). After
    round $k$ the chains draw ``draws`` samples (``chains`` chains); the next region is
    centred on their coordinatewise median $m_k$ in ``u`` (robust to a few stray chains), and

    $$
    s_{k+1} = \begin{cases} s_k & \text{more than } \texttt{edge\_limit}
    \text{ of the draws at the region's edge}\\
    \min\big(s_k,\ \max(\rho\, s_k,\ \kappa\,\sigma_k)\big) & \text{otherwise,}
    \end{cases}
    $$

    with $\rho$ = ``shrink``, $\kappa$ = ``floor`` and $\sigma_k$ the Laplace
    SDs of [`laplace_step()`][scorebayes.sbi.rounds.trust_region.laplace_step] at $m_k$ (0 where undetermined). So the region shrinks
    geometrically until it is $\kappa$ posterior SDs wide, and moves at its size while the
    posterior lies beyond its edge. The floor uses the networks' curvature, not the draws'
    spread: a network trained on too wide a region has weak, biased fields whose chains
    wander along ridges (their spread would keep the region wide), while its Jacobian at the
    centre is already informative (as on the M/G/1 queue).

    Every round is kept in ``estimator.trust_steps_`` (centre, SDs, edge fraction, Laplace
    step). Returns the estimator fitted on the last region; call [`sample()`][scorebayes.sbi.estimator.ScoreLangevin.sample].
    Cost: ``rounds`` pairs of tables (``simulations_["table_S<k>"]``, ``["table_R<k>"]``).
    """
    from ...proposal import GaussianProposal

    if not estimator.view.single_observations:
        raise ValueError("trust_region_fit needs mode='single'")
    if not estimator.localization.enabled:
        raise ValueError("trust_region_fit starts from the localized proposal: use localize=True")
    if int(rounds) != rounds or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds}")
    if not 0 < shrink < 1:
        raise ValueError(f"shrink must be in (0, 1), got {shrink}")
    if not floor >= 0:
        raise ValueError(f"floor must be >= 0, got {floor}")
    if not 0 <= edge_limit < 1:
        raise ValueError(f"edge_limit must be in [0, 1), got {edge_limit}")
    if draws < 2 or chains < 1:
        raise ValueError(f"draws must be >= 2 and chains >= 1, got {draws} and {chains}")
    estimator.fit(x_obs)
    estimator.trust_steps_ = []
    for _ in range(int(rounds) - 1):
        q = estimator.proposal_
        assert isinstance(q, GaussianProposal)
        with warnings.catch_warnings():  # draws at the edge are this loop's signal to move, not a fault
            warnings.filterwarnings("ignore", message=r".*of the draws lie at the edge of the region")
            posterior = estimator.sample(draws, chains=chains, max_steps=max_steps, remedy=False)  # the rounds are the remedy
        u = estimator.posterior_u(posterior)
        center = u.median(0).values
        edge = float(posterior.info.get("edge_fraction", 0.0))
        move = laplace_step(estimator, center, q.sd)
        if edge > edge_limit:
            sd = q.sd
        else:
            sigma = torch.where(torch.isfinite(move.sd), move.sd, torch.zeros_like(move.sd))
            sd = torch.minimum(q.sd, torch.maximum(shrink * q.sd, floor * sigma))
        estimator.trust_steps_.append({"center": center, "sd": sd, "edge_fraction": edge, "laplace": move})
        estimator.move_tables(center, sd)
    return estimator
