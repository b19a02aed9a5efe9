r"""Debiasing of the single-observation score: the mean network $h_\psi$ and its corrections.

A score network trained on single observations learns $s_\phi(u, x)$ whose mean under
$p(x\mid u)$ is zero only in the limit; its error enters the posterior score $n$
times. Algorithm 3 regresses the group means of $\mathcal D^R$,

$$
\bar s_l = \frac1{m_R}\sum_{i=1}^{m_R} s_\phi(u_l, X_{l,i}),\qquad
h_\psi = \arg\min_h \sum_l \lVert \bar s_l - h(u_l)\rVert^2 + \lambda_2\,\mathrm{pen}(h),
$$

and the learned likelihood score is $\sum_i [s_\phi(u, X_i) - h_\psi(u)]$. App. B.5 gives
the alternatives ``"a1"`` (a different regression target) and ``"a2"`` (refit
$s_\phi - h_\psi$ jointly, then re-project $h_\psi$).

Beyond the paper, two local corrections fit near a posterior
(`scorebayes.scores.local_debias`): [`add_local_correction()`][scorebayes.sbi.debias.add_local_correction] (new groups around the
posterior, a linear fit in ``u``) and [`add_kernel_correction()`][scorebayes.sbi.debias.add_kernel_correction] (the groups already simulated,
re-weighted by a Gaussian kernel in ``theta``).

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from ..scores.coordinates import theta_and_jacobian
from ..scores.local_debias import (LocalLinearCorrection, ThetaLinearCorrection, fit_kernel_correction,
                                   fit_local_correction)
from ..scores.networks import CrossFitMean, MeanNet, ScoreNet
from ..scores.training import TrainingSchedule, fit_mean_network, fit_score_network, split_indices
from .likelihood import LearnedLikelihoodScore

__all__ = ["DebiasedScore", "DebiasFit", "group_means", "fit_debiasing", "local_region",
           "add_local_correction", "add_kernel_correction"]


class DebiasedScore(nn.Module):
    r"""$\tilde s(u, x) = s_\phi(u, x) - h_\psi(u)$ as one module (App. B.5 alternative 2)."""

    def __init__(self, score: ScoreNet, mean: MeanNet):
        super().__init__()
        self.score, self.mean = score, mean

    def fit_standardisation(self, theta: Tensor, x: Tensor) -> None:  # keep the nets' own statistics
        pass

    def forward(self, theta: Tensor, x: Tensor) -> Tensor:
        return self.score(theta, x) - self.mean(theta)


class DebiasFit(NamedTuple):
    r"""The debiasing fit: each member's training report and $\mathcal D^R$'s group means
    ``(u [N_R, d], s_bar [N_R, d])`` (reused by [`add_kernel_correction()`][scorebayes.sbi.debias.add_kernel_correction])."""

    reports: list
    groups: tuple[Tensor, Tensor]


@torch.no_grad()
def group_means(score_net: nn.Module, u_r: Tensor, x_r: Tensor, *, device: torch.device,
                chunk: int = 64) -> Tensor:
    r"""$\bar s_l$, ``u_r [N_R, d], x_r [N_R, m_R, p] -> [N_R, d]`` (float32).

    Written into one preallocated tensor: appending each chunk's small result to a list leaves
    them scattered between the chunks' large transient activations, which the allocator then
    cannot return (the resident size grew by gigabytes on tables of 1e5 groups)."""
    out = torch.empty(len(u_r), u_r.shape[-1], dtype=torch.float32)
    for start in range(0, len(u_r), chunk):
        u = u_r[start : start + chunk].float().to(device)
        x = x_r[start : start + chunk].float().to(device)
        out[start : start + chunk] = score_net(u[:, None, :], x).mean(1).cpu()
    return out


def fit_debiasing(score_net: nn.Module, mean_net: CrossFitMean, tables: tuple[Tensor, Tensor, Tensor, Tensor],
                  *, debias: str, schedule: TrainingSchedule, mean_schedule: TrainingSchedule,
                  mean_penalties: tuple[float, ...], score_penalty: float, proposal: Any,
                  generator: torch.Generator, progress: bool, device: torch.device) -> DebiasFit:
    r"""Fit ``mean_net`` (its cross-fitted members in place) to $\mathcal D^R$'s group means.

    Arguments:
        tables: ``(u_s, x_s, u_r, x_r)``: $\mathcal D^S$ ``[N, d], [N, 1, p]`` and
            $\mathcal D^R$ ``[N_R, d], [N_R, m_R, p]`` (network views).
        debias: ``"debias"``, ``"a1"`` or ``"a2"``.
        score_penalty: the curvature penalty chosen for the score net (``"a2"``'s joint refit).
        proposal: the tables' sampling density (``grad_log_prob_unconstrained``), for ``"a2"``.
    """
    u_s, x_s, u_r, x_r = tables
    alternative = "a1" if debias == "a1" else "debias"
    rounds = 2 if debias == "a2" else 1
    train, valid = split_indices(len(u_r), mean_schedule.validation_fraction, generator)
    folds = [(train, valid), (valid, train)][: len(mean_net.members)]
    for r in range(rounds):
        s_bar = group_means(score_net, u_r, x_r, device=device)
        reports = [fit_mean_network(member, u_r.float(), s_bar, schedule=mean_schedule, penalties=mean_penalties,
                                    alternative=alternative, split=fold, generator=generator, progress=progress,
                                    desc=f"mean net {k + 1}/{len(folds)}")
                   for k, (member, fold) in enumerate(zip(mean_net.members, folds))]
        if debias == "a2" and r < rounds - 1:
            # alternative 2: jointly refine s - h under SM + curvature, then re-project h
            joint = DebiasedScore(score_net, mean_net)
            fit_score_network(
                joint, u_s.float(), x_s, proposal.grad_log_prob_unconstrained(u_s).float(),
                schedule=TrainingSchedule(epochs=schedule.penalty_epochs, penalty_epochs=0,
                                          batch_size=schedule.batch_size, lr=schedule.lr,
                                          chunk_observations=schedule.chunk_observations,
                                          penalty_groups=schedule.penalty_groups),
                penalties=(score_penalty,) if score_penalty else (0.0,),
                curvature_theta=u_r.float(), curvature_x=x_r, generator=generator, progress=progress,
                desc="joint s-h")
    return DebiasFit(reports, (u_r.float(), s_bar))


def local_region(u: Tensor, *, inflation: float, edge_fraction: float,
                 region: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
    r"""Centre and spread ``([d], [d])`` of a local correction around posterior draws ``u [S, d]``.

    Robust: the draws' median and ``inflation`` x 1.4826 MAD, so a few chains stuck at a boundary
    do not widen it. When over 1% of the draws sat at the edge of the ``region`` that confined
    them, their spread is truncated, not posterior width: the region's size is kept and moved to
    the draws (a moving trust region), so repeated calls walk towards the posterior.
    """
    center = u.median(0).values
    mad = (u - center).abs().median(0).values * 1.4826
    spread = (inflation * torch.where(mad > 0, mad, u.std(0))).clamp_min(1e-6)
    if edge_fraction > 0.01:
        low, high = region
        spread = torch.maximum(spread, (high - low) / 8)
    return center, spread


def add_local_correction(likelihood: LearnedLikelihoodScore, u_r: Tensor, x_r: Tensor, center: Tensor,
                         spread: Tensor, group_size: int) -> None:
    r"""Add the least-squares linear fit of the residual group means of ``(u_r [N, d], x_r [N, m, p])``
    (network views, drawn around ``center`` with ``spread``) to the likelihood's $h_\psi$."""
    device = likelihood.device
    with torch.no_grad():
        residual = (group_means(likelihood.score_net, u_r, x_r, device=device)
                    - likelihood.mean_net(u_r.float().to(device)).cpu())
    intercept, slope, residual_sd = fit_local_correction(u_r, residual, center)
    likelihood.mean_net = LocalLinearCorrection(likelihood.mean_net, intercept, slope, center).to(device)
    likelihood.refinements.append({
        "center": center, "spread": spread, "intercept": intercept, "slope": slope,
        "residual_sd": residual_sd, "groups": len(u_r), "group_size": group_size})


def add_kernel_correction(likelihood: LearnedLikelihoodScore, groups: tuple[Tensor, Tensor],
                          theta_post: Tensor, bandwidth: float) -> None:
    r"""Correct $h_\psi$ near posterior draws ``theta_post [S, d]`` with existing groups.

    Fits $(\bar s_l - h_\psi(u_l))/J(u_l) \approx a + B(\theta_l - c)$ by least squares weighted
    with a Gaussian kernel of ``bandwidth`` posterior SDs around the draws' mean $c$
    (Mahalanobis distance in $\theta$), and adds $J(u)\odot(a + B(T(u) - c))$.
    """
    space, device = likelihood.space, likelihood.device
    center = theta_post.mean(0)
    cov = torch.cov(theta_post.T).reshape(space.dim, space.dim)
    ridge = 1e-9 * cov.diagonal().clamp_min(1e-300).diag_embed()  # keep the factor defined
    scale_tril = torch.linalg.cholesky(cov + ridge)
    u_r, s_bar = groups
    with torch.no_grad():
        h = torch.cat([likelihood.mean_net(u_r[i : i + 10_000].to(device)).cpu()
                       for i in range(0, len(u_r), 10_000)])
    theta_r, jac = theta_and_jacobian(space, u_r.double())
    residual = (s_bar.double() - h.double()) / jac.clamp_min(torch.finfo(torch.float64).tiny)
    intercept, slope, residual_sd, effective = fit_kernel_correction(theta_r, residual, center,
                                                                     scale_tril, bandwidth)
    likelihood.mean_net = ThetaLinearCorrection(likelihood.mean_net, space, intercept, slope,
                                                center).to(device)
    likelihood.refinements.append({
        "kind": "kernel", "center": center, "bandwidth": bandwidth, "intercept": intercept,
        "slope": slope, "residual_sd": residual_sd, "effective_groups": effective})
