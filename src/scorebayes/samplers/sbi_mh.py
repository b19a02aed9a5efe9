r"""MH-corrected Langevin for the score-based SBI posterior (beyond the papers).

The Langevin sampler of :class:`scorebayes.sbi.ScoreLangevin` is unadjusted: it carries a
discretisation bias that grows with the step size and cannot reweigh separated modes. Here
the same learned posterior score in unconstrained coordinates,

.. math:: \tilde s(u) = \hat s_{\mathrm{lik}}(u) + \nabla_u\log\pi_u(u),

drives Metropolis-Hastings chains with a MALA proposal
:math:`u' \sim \mathcal N(u + h\tilde s(u), 2hI)` and one of two acceptance rules that need
only the score (:mod:`scorebayes.samplers.acceptance`):

- ``"quadrature"``: the path integral
  :math:`\log\pi(u') - \log\pi(u) = \int_0^1 \tilde s(u + t(u'-u))\cdot(u'-u)\,dt` by ``k``-node
  Gauss-Legendre (or Gauss-Lobatto) quadrature;
- ``"learned"``: an acceptance network :math:`a_\omega(u', u)` trained by score balance matching
  (:mod:`scorebayes.scoremh.sbm`) on the states of pilot ULA chains;
- ``"none"``: every move accepted, i.e. ULA with exactly the same proposal (the baseline).

Chains run in standardised coordinates :math:`z = A^{-1}(u - m)` (``m`` the mean of the
estimator's table proposal, :math:`AA^\top` the inverse mean curvature of :math:`-\log\pi` or the
proposal's variances; a linear bijection, so the target maps exactly), where the step
size is :math:`h = \kappa/\lambda_{\max}` with :math:`\lambda_{\max}` the largest curvature of
:math:`-\log\pi` (:func:`~scorebayes.samplers.langevin.curvature_step_size`). Optionally every
``jump_every``-th step is a pCN move :math:`z' = \sqrt{1-\beta^2}z + \beta\xi` (nearly an
independence proposal from the table proposal for :math:`\beta\to1`), accepted with the same rule
(the path integral along the long segment uses ``jump_nodes`` nodes): this lets the corrected
chains move between separated modes and weigh them, which no unadjusted chain can do.
Proposals leaving the region the score was trained on are rejected (the target is the posterior
restricted to that region, where the score is meaningful).

The estimator needs only: ``likelihood_score(u [C, d]) -> [C, d]``, ``space``
(:class:`~scorebayes.priors.ParameterSpace`), ``proposal_`` (``.sample(num, generator)`` of
constrained ``theta``), and optionally ``training_region_`` (``(low [d], high [d])``),
``parameter_names`` and ``seed``.

References:
    | Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025)
    | https://arxiv.org/abs/2501.00467 (seed file 004_4c01255ce52071c1.txt)
    | Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang et al., 2025)
    | ../shared/seeds/000_1aaaaf87072c12bc.txt
    | Exponential convergence of Langevin distributions (Roberts and Tweedie, 1996)
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..parallel import derive_seed, make_generator
from ..posterior import Posterior
from ..scoremh.pipeline import make_kernel
from .acceptance import LearnedRule, QuadratureRule
from .langevin import curvature_step_size
from .mh import build_kernel
from .proposals import LangevinProposal, PCNProposal

__all__ = ["ACCEPTANCES", "posterior_score", "mh_correct"]

ACCEPTANCES = ("quadrature", "learned", "none")


def posterior_score(estimator: Any) -> Any:
    r"""Posterior score :math:`\hat s_{\mathrm{lik}}(u) + \nabla_u\log\pi_u(u)`, ``[C, d] -> [C, d]``.

    Differentiable in ``u`` when gradients are enabled (the prior part keeps its graph), as the
    MALA gradients of score balance matching need the score's Jacobian.
    """
    space = estimator.space

    def score(u: Tensor) -> Tensor:
        keep_graph = torch.is_grad_enabled()
        with torch.enable_grad():
            leaf = u if (keep_graph and u.requires_grad) else u.detach().requires_grad_(True)
            (prior,) = torch.autograd.grad(space.log_prob_unconstrained(leaf).sum(), leaf,
                                           create_graph=keep_graph)
        out = estimator.likelihood_score(u).to(u.dtype) + prior.to(u.dtype)
        return out if keep_graph else out.detach()

    return score


def _standardisation(estimator: Any, num: int, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """``(m [d], c [d], u [num, d])``: location/scale of the table proposal and draws from it."""
    theta = estimator.proposal_.sample(num, generator)
    u = estimator.space.to_unconstrained(torch.as_tensor(theta, dtype=torch.float64))
    u = u[torch.isfinite(u).all(1)]
    if len(u) < 2:
        raise ValueError("the estimator's proposal gives fewer than 2 finite unconstrained draws")
    return u.mean(0), u.std(0).clamp_min(1e-12), u


#: mh_correct's arguments passed on unchanged to each copy's run
_COPY_OPTIONS = ("acceptance", "step_size", "step_size_factor", "burn_in", "thin", "num_nodes", "quadrature",
                 "jump_every", "jump_beta", "jump_nodes", "precondition", "pilot_steps", "acceptance_hidden",
                 "acceptance_epochs", "acceptance_batch", "lam", "learned_form", "max_steps", "progress")


class _OneCopy:
    """The attributes :func:`mh_correct` uses, for one noisy copy of a noise-smoothed estimator's
    data (:meth:`~scorebayes.sbi.ScoreLangevin.noisy_copies`) and its chain box."""

    def __init__(self, estimator: Any, x_copy: Tensor):
        self.estimator, self.x_copy = estimator, x_copy
        self.space, self.proposal_ = estimator.space, estimator.proposal_
        self.training_region_ = estimator.chain_box()
        self.parameter_names = getattr(estimator, "parameter_names", None)

    def likelihood_score(self, u: Tensor) -> Tensor:
        return self.estimator.likelihood_score(u, self.x_copy)


def _per_copy(estimator: Any, copies: list[Tensor], num_samples: int, chains: int | None, init: Any,
              seed: int, options: dict[str, Any]) -> Posterior:
    """:func:`mh_correct` run on each noisy copy of the data, the chains of ``init`` (a
    :class:`Posterior` of :meth:`~scorebayes.sbi.ScoreLangevin.sample`) on the copy they ran on
    (``info["chain_copies"]``), or ``chains`` split evenly; the draws concatenated in copy order."""
    k = len(copies)
    if isinstance(init, Posterior):
        owner = init.info.get("chain_copies")
        if owner is None or len(owner) != init.samples.shape[0]:
            raise ValueError("init must be a Posterior of the estimator's sample() (info['chain_copies'] "
                             "names each chain's noisy copy of the data)")
        owner = torch.as_tensor(owner)
        inits = [Posterior(init.samples[owner == c], init.names, info={"chain_copies": []}) for c in range(k)]
        counts = [int((owner == c).sum()) for c in range(k)]
    else:
        total = chains or max(4, num_samples // 50)
        counts = [total // k + (c < total % k) for c in range(k)]
        inits = [init] * k
    per_chain = math.ceil(num_samples / max(1, sum(counts)))
    runs = [(c, mh_correct(_OneCopy(estimator, x_copy), n * per_chain, chains=n, init=start,
                           seed=derive_seed(seed, "copy", c), **options))
            for c, (x_copy, n, start) in enumerate(zip(copies, counts, inits)) if n > 0]
    info = dict(runs[0][1].info)
    sizes = [len(out.samples) for _, out in runs]
    for key in ("acceptance_rate", "jump_acceptance_rate"):  # chain-weighted means, and per copy
        rates = [out.info[key] for _, out in runs]
        info[key] = None if rates[0] is None else sum(r * n for r, n in zip(rates, sizes)) / sum(sizes)
        info[f"{key}_per_copy"] = rates
    info["chains"] = sum(sizes)
    info["chain_copies"] = [c for (c, _), n in zip(runs, sizes) for _ in range(n)]
    return Posterior(torch.cat([out.samples for _, out in runs]), runs[0][1].names, info=info)


def mh_correct(
    estimator: Any,
    num_samples: int = 2000,
    *,
    acceptance: str = "quadrature",
    step_size: float | str = "auto",
    step_size_factor: float = 0.5,
    chains: int | None = None,
    burn_in: int | str = "auto",
    thin: int | str = "auto",
    num_nodes: int = 4,
    quadrature: str = "legendre",
    jump_every: int | None = None,
    jump_beta: float = 0.95,
    jump_nodes: int = 16,
    precondition: str = "curvature",
    init: str | Posterior = "proposal",
    pilot_steps: int = 200,
    acceptance_hidden: int = 64,
    acceptance_epochs: int = 400,
    acceptance_batch: int = 256,
    lam: float = 2.0,
    learned_form: str = "ratio",
    max_steps: int = 20_000,
    seed: int | None = None,
    progress: bool = False,
) -> Posterior:
    r"""MH-corrected Langevin chains on a fitted score-based SBI posterior.

    Arguments:
        estimator: a fitted :class:`~scorebayes.sbi.ScoreLangevin` (or any object with the
            attributes listed in the module docstring).
        num_samples: total draws over all chains.
        acceptance: ``"quadrature"``, ``"learned"`` or ``"none"`` (ULA, same proposal).
        step_size: MALA :math:`h` on the standardised scale, or ``"auto"``:
            :math:`h = \kappa/\lambda_{\max}` with :math:`\kappa` = ``step_size_factor``
            (ULA is unstable for :math:`\kappa \ge 2`; MALA is not).
        chains: parallel chains (default ``max(4, num_samples // 50)``).
        burn_in, thin: ``"auto"``: 5 and 1 relaxation times :math:`1/(h\lambda_{\min})`, capped so
            that the run has at most ``max_steps`` steps.
        num_nodes, quadrature: ``k`` and ``"legendre"`` or ``"lobatto"`` for the path integral.
        jump_every: every ``jump_every``-th step is a pCN jump with ``jump_beta``
            (``None``: no jumps); ``jump_nodes`` quadrature nodes on the jump segments.
        precondition: ``"curvature"``: :math:`z = A^{-1}(u - m)` with :math:`AA^\top = H^{-1}`, the
            Hessian of :math:`-\log\pi` at the table proposal's mean (the localized estimate)
            plus the proposal's precision :math:`\mathrm{diag}(c^{-2})` (all directions then relax
            at similar rates, none wider than the proposal); ``"proposal"``: :math:`A = \mathrm{diag}(c)`.
        init: ``"proposal"`` (chains start from :math:`\mathcal N(0, I)` in ``z``), ``"ula"`` (run
            ``estimator.sample``) or a :class:`Posterior` of such ULA chains ``[C, S, d]``: the
            chains then start at the ULA chains' last states, :math:`AA^\top` is the ULA draws'
            covariance (overriding ``precondition``), and the learned acceptance trains on them.
        pilot_steps: ULA steps whose states (all chains, second half) train the acceptance network.
        acceptance_hidden, acceptance_epochs, acceptance_batch, lam, learned_form: settings of
            :func:`scorebayes.scoremh.pipeline.make_kernel` for ``"learned"``.
        seed: random seed (default the estimator's).
        progress: tqdm bars.

    A noise-smoothed estimator (``noise_sd`` set) is corrected copy by copy: the chains of a
    :class:`Posterior` ``init`` stay on the noisy copy of the data they ran on
    (``info["chain_copies"]``; :meth:`~scorebayes.sbi.ScoreLangevin.noisy_copies`), otherwise the
    chains are split evenly over the copies. A :class:`~scorebayes.sbi.ScoreLangevin`'s chains
    stay in its :meth:`~scorebayes.sbi.ScoreLangevin.chain_box` (trained region and ``support_fn``).

    Returns:
        :class:`~scorebayes.posterior.Posterior` of :math:`\theta` ``[chains, S, d]``; ``info`` has
        ``acceptance_rate`` (MALA moves), ``jump_acceptance_rate``, ``step_size`` (:math:`h` in
        ``z``), ``step_size_factor`` (:math:`h\lambda_{\max}`), ``burn_in``, ``thin``.
    """
    if acceptance not in ACCEPTANCES:
        raise ValueError(f"acceptance must be one of {ACCEPTANCES}, got {acceptance!r}")
    if num_samples < 1:
        raise ValueError("num_samples must be >= 1")
    if jump_every is not None and jump_every < 1:
        raise ValueError(f"jump_every must be >= 1 or None, got {jump_every}")
    if precondition not in ("curvature", "proposal"):
        raise ValueError(f"precondition must be 'curvature' or 'proposal', got {precondition!r}")
    if not isinstance(init, Posterior) and init not in ("proposal", "ula"):
        raise ValueError(f"init must be 'proposal', 'ula' or a Posterior, got {init!r}")
    if not hasattr(estimator, "proposal_"):
        raise RuntimeError("call fit(x_obs) on the estimator first")
    if step_size != "auto" and not float(step_size) > 0:
        raise ValueError(f"step_size must be positive or 'auto', got {step_size!r}")
    seed = getattr(estimator, "seed", 0) if seed is None else seed
    if init == "ula":
        n = chains or max(4, num_samples // 50)
        init = estimator.sample(max(4 * n, 400), chains=n, seed=seed)
    if getattr(estimator, "noise_sd", None) is not None:  # each chain on one noisy copy, as sample() does
        options = {k: v for k, v in locals().items() if k in _COPY_OPTIONS}
        return _per_copy(estimator, estimator.noisy_copies(), num_samples, chains, init, seed, options)
    g = make_generator(seed, "sbi-mh")
    chains = chains or max(4, num_samples // 50)
    per_chain = math.ceil(num_samples / chains)
    score_u = posterior_score(estimator)
    pilot_u = None
    if isinstance(init, Posterior):  # ULA chains [C, S, d]: start, scale and SBM training data
        pilot_u = estimator.space.to_unconstrained(init.samples.double())
        flat = pilot_u.reshape(-1, pilot_u.shape[-1])
        flat = flat[torch.isfinite(flat).all(1)]
        m, d = flat.mean(0), flat.shape[1]
        cov = torch.cov(flat.T).reshape(d, d) + 1e-10 * torch.eye(d, dtype=flat.dtype)
        A = torch.linalg.cholesky(cov)
    else:
        m, c, _ = _standardisation(estimator, max(1000, chains), g)
        d = m.numel()
        if precondition == "curvature":  # A = chol(H^-1), H the curvature of -log pi at m
            hess = -torch.autograd.functional.jacobian(lambda v: score_u(v[None])[0], m)
            # floored by the proposal's precision: no direction wider than the table proposal
            hess = 0.5 * (hess + hess.T).double() + torch.diag(1 / c**2)
            evals, evecs = torch.linalg.eigh(hess)
            evals = evals.clamp_min(float((1 / c**2).min()))
            A = torch.linalg.cholesky(evecs @ torch.diag(1 / evals) @ evecs.T)
        else:
            A = torch.diag(c)

    def to_u(z: Tensor) -> Tensor:
        return m.to(z.dtype) + z @ A.T.to(z.dtype)

    def score(z: Tensor) -> Tensor:  # s_z(z) = A^T s_u(m + A z)
        return score_u(to_u(z)) @ A.to(z.dtype)

    # a ScoreLangevin's chain box: the trained region cut to the data's support (support_fn)
    region = (estimator.chain_box() if hasattr(estimator, "chain_box")
              else getattr(estimator, "training_region_", None))
    support = None
    if region is not None:
        low, high = region

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
    probes = z0[: min(16, len(z0))]
    est = curvature_step_size(score, probes, kappa=1.0)  # MALA allows kappa >= 2, ULA does not
    h = step_size_factor / est.max_curvature if step_size == "auto" else float(step_size)
    relax = 1.0 / max(h * est.min_curvature, 1e-12)
    n_burn = int(min(max(200, math.ceil(5 * relax)), max_steps // 2)) if burn_in == "auto" else int(burn_in)
    n_thin = (int(min(max(1, math.ceil(relax)), max(1, (max_steps - n_burn) // per_chain)))
              if thin == "auto" else int(thin))

    proposal = LangevinProposal(score, h)
    jump_prop = PCNProposal(jump_beta) if jump_every else None
    info: dict[str, Any] = {"method": f"score-langevin-mh-{acceptance}", "acceptance": acceptance}
    if acceptance == "none":
        kernel = build_kernel(proposal, None, support=support)
        jump_kernel = build_kernel(jump_prop, None, score=score, support=support) if jump_prop else None
    elif acceptance == "quadrature":
        kernel = build_kernel(proposal, QuadratureRule(score, num_nodes, quadrature), support=support)
        jump_kernel = (build_kernel(jump_prop, QuadratureRule(score, jump_nodes, quadrature), score=score,
                                    support=support) if jump_prop else None)
    else:
        if pilot_u is not None:
            data = torch.linalg.solve_triangular(A, (pilot_u.reshape(-1, d) - m).T, upper=False).T
        else:
            pilot = build_kernel(proposal, None, support=support)
            state, kept = pilot.init(z0), []
            for t in tqdm(range(pilot_steps), disable=not progress, desc="pilot ULA", leave=False):
                state, _ = pilot.step(state, g)
                if t >= pilot_steps // 2:
                    kept.append(state.position)
            data = torch.cat(kept)
        data = data[torch.isfinite(data).all(1)]
        settings = dict(data=data, hidden=acceptance_hidden, acceptance_epochs=acceptance_epochs,
                        batch_size=acceptance_batch, lam=lam, learned_form=learned_form, generator=g,
                        progress=progress)
        # make_kernel trains the network; the kernel is rebuilt with the support check
        _, extra = make_kernel(score, proposal, "learned", **settings)
        kernel = build_kernel(proposal, LearnedRule(extra["acceptance_net"].log_accept, learned_form),
                              support=support)
        info["sbm_final"] = extra["history"][-1] if extra["history"] else None
        jump_kernel = None
        if jump_prop:
            _, jextra = make_kernel(score, jump_prop, "learned", **settings)
            jump_rule = LearnedRule(jextra["acceptance_net"].log_accept, learned_form)
            jump_kernel = build_kernel(jump_prop, jump_rule, score=score, support=support)

    total = n_burn + per_chain * n_thin
    state = kernel.init(z0)
    draws = torch.empty(len(z0), per_chain, d, dtype=z0.dtype)
    acc = torch.zeros(2)
    tries = torch.zeros(2)
    kept_count = 0
    for t in tqdm(range(total), disable=not progress, desc=info["method"], leave=False):
        is_jump = jump_kernel is not None and (t + 1) % jump_every == 0
        state, step_info = (jump_kernel if is_jump else kernel).step(state, g)
        acc[int(is_jump)] += float(step_info.is_accepted.double().mean())
        tries[int(is_jump)] += 1
        if t >= n_burn and (t - n_burn) % n_thin == n_thin - 1:
            draws[:, kept_count] = state.position
            kept_count += 1
    u = to_u(draws.reshape(-1, d)).reshape(draws.shape)
    theta = estimator.space.to_constrained(u.reshape(-1, d)).reshape(u.shape)
    names = getattr(estimator, "parameter_names", None) or [f"theta{k}" for k in range(d)]
    info.update({
        "acceptance_rate": float(acc[0] / tries[0].clamp_min(1)),
        "jump_acceptance_rate": float(acc[1] / tries[1]) if tries[1] > 0 else None,
        "step_size": h, "step_size_factor": h * est.max_curvature,
        "max_curvature": est.max_curvature, "burn_in": n_burn, "thin": n_thin, "chains": len(z0),
        "num_nodes": num_nodes if acceptance == "quadrature" else None,
    })
    return Posterior(theta, names, info=info)
