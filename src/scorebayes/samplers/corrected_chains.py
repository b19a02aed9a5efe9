r"""The MH-corrected chains of [`scorebayes.samplers.sbi_mh.mh_correct()`][scorebayes.samplers.sbi_mh.mh_correct] on one target.

A [`ScoreTarget`][scorebayes.samplers.sbi_mh.ScoreTarget] is what one run needs of a fitted score-based SBI estimator: the
parameter space, the table proposal, a likelihood score in ``u`` and the box where it may be
trusted. `correct()` standardises $z = A^{-1}(u - m)$, sets the MALA step from the
curvature, builds the MH kernels (MALA moves, optional pCN jumps, with the chosen acceptance rule)
and runs them on the one driver, [`run_chains()`][scorebayes.samplers.base.run_chains].

References:
    - Score-Based Metropolis-Hastings Algorithms (Aloui, Hasan, Dong, Wu and Tarokh, 2025)
      <https://arxiv.org/abs/2501.00467>
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..parallel import make_generator
from ..posterior import Posterior
from ..priors import ParameterSpace
from ..scoremh.pipeline import make_kernel
from .acceptance import LearnedRule, QuadratureRule
from .base import alternating, run_chains
from .mh import build_kernel
from .proposals import LangevinProposal, PCNProposal
from .step_size import curvature_step_size

__all__ = ["ScoreTarget", "MHSettings", "posterior_score", "correct"]


class ScoreTarget(NamedTuple):
    r"""A learned posterior to correct: ``likelihood_score(u [C, d]) -> [C, d]`` in the
    unconstrained parameters of ``space``, the table ``proposal`` (``sample(num, generator)`` of
    ``theta``), the ``region`` ``(low [d], high [d])`` in ``u`` it may be trusted in (or ``None``)
    and the parameters' ``names``."""

    space: ParameterSpace
    proposal: Any
    likelihood_score: Callable[[Tensor], Tensor]
    region: tuple[Tensor, Tensor] | None
    names: list[str] | None


class MHSettings(NamedTuple):
    """The settings of [`mh_correct()`][scorebayes.samplers.sbi_mh.mh_correct] that shape one run."""

    acceptance: str = "quadrature"
    step_size: float | str = "auto"
    step_size_factor: float = 0.5
    burn_in: int | str = "auto"
    thin: int | str = "auto"
    num_nodes: int = 4
    quadrature: str = "legendre"
    jump_every: int | None = None
    jump_beta: float = 0.95
    jump_nodes: int = 16
    precondition: str = "curvature"
    pilot_steps: int = 200
    acceptance_hidden: int = 64
    acceptance_epochs: int = 400
    acceptance_batch: int = 256
    lam: float = 2.0
    learned_form: str = "ratio"
    max_steps: int = 20_000
    progress: bool = False


def posterior_score(target: Any) -> Callable[[Tensor], Tensor]:
    r"""Posterior score $\hat s_{\mathrm{lik}}(u) + \nabla_u\log\pi_u(u)$, ``[C, d] -> [C, d]``.

    ``target`` has ``space`` and ``likelihood_score``. Differentiable in ``u`` when gradients are
    enabled (the prior part keeps its graph), as score balance matching needs the score's Jacobian.
    """
    space = target.space

    def score(u: Tensor) -> Tensor:
        keep_graph = torch.is_grad_enabled()
        with torch.enable_grad():
            leaf = u if (keep_graph and u.requires_grad) else u.detach().requires_grad_(True)
            (prior,) = torch.autograd.grad(space.log_prob_unconstrained(leaf).sum(), leaf,
                                           create_graph=keep_graph)
        out = target.likelihood_score(u).to(u.dtype) + prior.to(u.dtype)
        return out if keep_graph else out.detach()

    return score


def _standardisation(target: ScoreTarget, num: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``(m [d], c [d])``: location and scale of ``num`` draws of the table proposal in ``u``."""
    theta = target.proposal.sample(num, generator)
    u = target.space.to_unconstrained(torch.as_tensor(theta, dtype=torch.float64))
    u = u[torch.isfinite(u).all(1)]
    if len(u) < 2:
        raise ValueError("the estimator's proposal gives fewer than 2 finite unconstrained draws")
    return u.mean(0), u.std(0).clamp_min(1e-12)


def _whitening(target: ScoreTarget, score_u: Callable, pilot_u: Tensor | None, chains: int,
               precondition: str, g: torch.Generator) -> tuple[Tensor, Tensor]:
    r"""``(m [d], A [d, d])`` of $u = m + Az$: the pilot chains' mean and covariance, or the
    proposal's mean with $AA^\top = H^{-1}$ (``"curvature"``, floored by the proposal's
    precision) or $A = \mathrm{diag}(c)$ (``"proposal"``)."""
    if pilot_u is not None:
        flat = pilot_u.reshape(-1, pilot_u.shape[-1])
        flat = flat[torch.isfinite(flat).all(1)]
        m, d = flat.mean(0), flat.shape[1]
        cov = torch.cov(flat.T).reshape(d, d) + 1e-10 * torch.eye(d, dtype=flat.dtype)
        return m, torch.linalg.cholesky(cov)
    m, c = _standardisation(target, max(1000, chains), g)
    if precondition != "curvature":
        return m, torch.diag(c)
    hess = -torch.autograd.functional.jacobian(lambda v: score_u(v[None])[0], m)
    # floored by the proposal's precision: no direction wider than the table proposal
    hess = 0.5 * (hess + hess.T).double() + torch.diag(1 / c**2)
    evals, evecs = torch.linalg.eigh(hess)
    evals = evals.clamp_min(float((1 / c**2).min()))
    return m, torch.linalg.cholesky(evecs @ torch.diag(1 / evals) @ evecs.T)


def _learned_kernels(score: Callable, proposal: Any, jump_prop: Any, data: Tensor, s: MHSettings,
                     support: Callable | None, g: torch.Generator, info: dict) -> tuple[Any, Any]:
    """MH kernels whose acceptance networks are trained by score balance matching on ``data``."""
    data = data[torch.isfinite(data).all(1)]
    settings = dict(data=data, hidden=s.acceptance_hidden, acceptance_epochs=s.acceptance_epochs,
                    batch_size=s.acceptance_batch, lam=s.lam, learned_form=s.learned_form, generator=g,
                    progress=s.progress)
    # make_kernel trains the network; the kernel is rebuilt with the support check
    _, extra = make_kernel(score, proposal, "learned", **settings)
    kernel = build_kernel(proposal, LearnedRule(extra["acceptance_net"].log_accept, s.learned_form),
                          support=support)
    info["sbm_final"] = extra["history"][-1] if extra["history"] else None
    if not jump_prop:
        return kernel, None
    _, jextra = make_kernel(score, jump_prop, "learned", **settings)
    jump_rule = LearnedRule(jextra["acceptance_net"].log_accept, s.learned_form)
    return kernel, build_kernel(jump_prop, jump_rule, score=score, support=support)


def _kernels(score: Callable, h: float, z0: Tensor, pilot_z: Tensor | None, s: MHSettings,
             support: Callable | None, g: torch.Generator, info: dict) -> tuple[Any, Any]:
    """``(kernel, jump_kernel or None)`` for the acceptance rule of ``s``."""
    proposal = LangevinProposal(score, h)
    jump_prop = PCNProposal(s.jump_beta) if s.jump_every else None
    if s.acceptance == "none":
        jump = build_kernel(jump_prop, None, score=score, support=support) if jump_prop else None
        return build_kernel(proposal, None, support=support), jump
    if s.acceptance == "quadrature":
        jump = (build_kernel(jump_prop, QuadratureRule(score, s.jump_nodes, s.quadrature), score=score,
                             support=support) if jump_prop else None)
        return build_kernel(proposal, QuadratureRule(score, s.num_nodes, s.quadrature), support=support), jump
    if pilot_z is None:  # pilot ULA chains: their states of the second half train the network
        pilot = build_kernel(proposal, None, support=support)
        kept, _, _ = run_chains(pilot, pilot.init(z0), s.pilot_steps, burn_in=s.pilot_steps // 2,
                                generator=g, progress=s.progress, desc="pilot ULA")
        pilot_z = kept.transpose(0, 1).reshape(-1, z0.shape[-1])  # step by step, as collected
    return _learned_kernels(score, proposal, jump_prop, pilot_z, s, support, g, info)


def correct(target: ScoreTarget, num_samples: int, chains: int, init: str | Posterior, seed: int,
            s: MHSettings) -> Posterior:
    """MH-corrected chains on ``target``: a [`Posterior`][scorebayes.posterior.Posterior] of ``theta [C, S, d]``."""
    g = make_generator(seed, "sbi-mh")
    score_u = posterior_score(target)
    # ULA chains [C, S, d] of a Posterior init: start, scale and SBM training data
    pilot_u = target.space.to_unconstrained(init.samples.double()) if isinstance(init, Posterior) else None
    m, A = _whitening(target, score_u, pilot_u, chains, s.precondition, g)
    d = m.numel()

    def to_u(z: Tensor) -> Tensor:
        return m.to(z.dtype) + z @ A.T.to(z.dtype)

    def score(z: Tensor) -> Tensor:  # s_z(z) = A^T s_u(m + A z)
        return score_u(to_u(z)) @ A.to(z.dtype)

    support = None
    if target.region is not None:
        low, high = target.region

        def support(z: Tensor) -> Tensor:
            u = to_u(z)
            return ((u >= low.to(u.dtype)) & (u <= high.to(u.dtype))).all(-1)

    if pilot_u is not None:  # the pilot chains' last states
        z0 = torch.linalg.solve_triangular(A, (pilot_u[:, -1] - m).T, upper=False).T
    else:  # N(0, I) in z: the proposal's Gaussian fit, or the Laplace-like fit around its mean
        z0 = torch.randn(chains, d, generator=g, dtype=torch.float64)
    if support is not None:
        z0 = z0[support(z0)]
    if len(z0) < 1:
        raise ValueError("no initial state lies in the estimator's training region")
    per_chain = math.ceil(num_samples / len(z0))
    est = curvature_step_size(score, z0[: min(16, len(z0))], kappa=1.0)  # MALA allows kappa >= 2, ULA not
    h = s.step_size_factor / est.max_curvature if s.step_size == "auto" else float(s.step_size)
    relax = 1.0 / max(h * est.min_curvature, 1e-12)
    n_burn = int(min(max(200, math.ceil(5 * relax)), s.max_steps // 2)) if s.burn_in == "auto" else int(s.burn_in)
    n_thin = (int(min(max(1, math.ceil(relax)), max(1, (s.max_steps - n_burn) // per_chain)))
              if s.thin == "auto" else int(s.thin))
    info: dict[str, Any] = {"method": f"score-langevin-mh-{s.acceptance}", "acceptance": s.acceptance}
    pilot_z = (torch.linalg.solve_triangular(A, (pilot_u.reshape(-1, d) - m).T, upper=False).T
               if pilot_u is not None and s.acceptance == "learned" else None)
    kernel, jump_kernel = _kernels(score, h, z0, pilot_z, s, support, g, info)
    if jump_kernel is not None:
        kernel = alternating(kernel, jump_kernel, s.jump_every)
    accepted, tries = torch.zeros(2), torch.zeros(2)

    def count(t: int, state: Any, step_info: Any) -> None:
        is_jump = bool(getattr(step_info, "is_other", False))
        inner = step_info.inner if hasattr(step_info, "is_other") else step_info
        accepted[int(is_jump)] += float(inner.is_accepted.double().mean())
        tries[int(is_jump)] += 1

    draws, _, _ = run_chains(kernel, kernel.init(z0), n_burn + per_chain * n_thin, burn_in=n_burn, thin=n_thin,
                             generator=g, on_step=count, progress=s.progress, desc=info["method"])
    u = to_u(draws.reshape(-1, d)).reshape(draws.shape)
    theta = target.space.to_constrained(u.reshape(-1, d)).reshape(u.shape)
    info.update({
        "acceptance_rate": float(accepted[0] / tries[0].clamp_min(1)),
        "jump_acceptance_rate": float(accepted[1] / tries[1]) if tries[1] > 0 else None,
        "step_size": h, "step_size_factor": h * est.max_curvature,
        "max_curvature": est.max_curvature, "burn_in": n_burn, "thin": n_thin, "chains": len(z0),
        "num_nodes": s.num_nodes if s.acceptance == "quadrature" else None,
    })
    return Posterior(theta, target.names or [f"theta{k}" for k in range(d)], info=info)
