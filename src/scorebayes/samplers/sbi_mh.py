r"""MH-corrected Langevin for the score-based SBI posterior (beyond the papers).

The Langevin sampler of [`scorebayes.sbi.ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin] is unadjusted: it carries a
discretisation bias that grows with the step size and cannot reweigh separated modes. Here
the same learned posterior score in unconstrained coordinates,

$$
\tilde s(u) = \hat s_{\mathrm{lik}}(u) + \nabla_u\log\pi_u(u),
$$

drives Metropolis-Hastings chains with a MALA proposal
$u' \sim \mathcal N(u + h\tilde s(u), 2hI)$ and one of two acceptance rules that need
only the score ([`scorebayes.samplers.acceptance`][scorebayes.samplers.acceptance]):

- ``"quadrature"``: the path integral
  $\log\pi(u') - \log\pi(u) = \int_0^1 \tilde s(u + t(u'-u))\cdot(u'-u)\,dt$ by ``k``-node
  Gauss-Legendre (or Gauss-Lobatto) quadrature;
- ``"learned"``: an acceptance network $a_\omega(u', u)$ trained by score balance matching
  ([`scorebayes.scoremh.sbm`][scorebayes.scoremh.sbm]) on the states of pilot ULA chains;
- ``"none"``: every move accepted, i.e. ULA with exactly the same proposal (the baseline).

Chains run in standardised coordinates $z = A^{-1}(u - m)$ (``m`` the mean of the
estimator's table proposal, $AA^\top$ the inverse mean curvature of $-\log\pi$ or the
proposal's variances; a linear bijection, so the target maps exactly), where the step
size is $h = \kappa/\lambda_{\max}$ with $\lambda_{\max}$ the largest curvature of
$-\log\pi$ ([`curvature_step_size()`][scorebayes.samplers.langevin.curvature_step_size]). Optionally every
``jump_every``-th step is a pCN move $z' = \sqrt{1-\beta^2}z + \beta\xi$ (nearly an
independence proposal from the table proposal for $\beta\to1$), accepted with the same rule
(the path integral along the long segment uses ``jump_nodes`` nodes): this lets the corrected
chains move between separated modes and weigh them, which no unadjusted chain can do.
Proposals leaving the region the score was trained on are rejected (the target is the posterior
restricted to that region, where the score is meaningful).

The estimator needs only: ``likelihood_score(u [C, d]) -> [C, d]``, ``space``
([`ParameterSpace`][scorebayes.priors.ParameterSpace]), ``proposal_`` (``.sample(num, generator)`` of
constrained ``theta``), and optionally ``chain_box()`` or ``training_region_``
(``(low [d], high [d])``), ``parameter_names``, ``seed`` and, for noise smoothing,
``noise_sd`` and ``noisy_copies()``; [`target_of()`][scorebayes.samplers.sbi_mh.target_of] reads them into a
[`ScoreTarget`][scorebayes.samplers.sbi_mh.ScoreTarget] and
`correct()` runs the chains.

References:
    - Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025)
      <https://arxiv.org/abs/2501.00467>
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang et al., 2025)
      <https://arxiv.org/abs/2509.03853>
    - Exponential convergence of Langevin distributions (Roberts and Tweedie, 1996)
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from ..parallel import derive_seed
from ..posterior import Posterior
from .corrected_chains import MHSettings, ScoreTarget, correct, posterior_score

__all__ = ["ACCEPTANCES", "ScoreTarget", "posterior_score", "target_of", "mh_correct"]

ACCEPTANCES = ("quadrature", "learned", "none")


def target_of(estimator: Any, x_copy: Tensor | None = None) -> ScoreTarget:
    """What the chains need of a fitted estimator, conditioned on its data or on ``x_copy [n, p]``
    (one noisy copy of it): the likelihood score, its chain box, the table proposal and the names."""
    if x_copy is None:
        likelihood_score = estimator.likelihood_score
    else:
        def likelihood_score(u: Tensor) -> Tensor:
            return estimator.likelihood_score(u, x_copy)
    # a ScoreLangevin's chain box: the trained region cut to the data's support (support_fn)
    region = (estimator.chain_box() if hasattr(estimator, "chain_box")
              else getattr(estimator, "training_region_", None))
    return ScoreTarget(estimator.space, estimator.proposal_, likelihood_score, region,
                       getattr(estimator, "parameter_names", None))


def _per_copy(estimator: Any, copies: list[Tensor], num_samples: int, chains: int | None, init: Any,
              seed: int, settings: MHSettings) -> Posterior:
    """[`mh_correct()`][scorebayes.samplers.sbi_mh.mh_correct] run on each noisy copy of the data, the chains of ``init`` (a
    [`Posterior`][scorebayes.posterior.Posterior] of [`sample()`][scorebayes.sbi.estimator.ScoreLangevin.sample]) on the copy they ran on
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
    runs = [(c, correct(target_of(estimator, x_copy), n * per_chain, n, start, derive_seed(seed, "copy", c),
                        settings))
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
        estimator: a fitted [`ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin] (or any object with the
            attributes listed in the module docstring).
        num_samples: total draws over all chains.
        acceptance: ``"quadrature"``, ``"learned"`` or ``"none"`` (ULA, same proposal).
        step_size: MALA $h$ on the standardised scale, or ``"auto"``:
            $h = \kappa/\lambda_{\max}$ with $\kappa$ = ``step_size_factor``
            (ULA is unstable for $\kappa \ge 2$; MALA is not).
        chains: parallel chains (default ``max(4, num_samples // 50)``).
        burn_in, thin: ``"auto"``: 5 and 1 relaxation times $1/(h\lambda_{\min})$, capped so
            that the run has at most ``max_steps`` steps.
        num_nodes, quadrature: ``k`` and ``"legendre"`` or ``"lobatto"`` for the path integral.
        jump_every: every ``jump_every``-th step is a pCN jump with ``jump_beta``
            (``None``: no jumps); ``jump_nodes`` quadrature nodes on the jump segments.
        precondition: ``"curvature"``: $z = A^{-1}(u - m)$ with $AA^\top = H^{-1}$, the
            Hessian of $-\log\pi$ at the table proposal's mean (the localized estimate)
            plus the proposal's precision $\mathrm{diag}(c^{-2})$ (all directions then relax
            at similar rates, none wider than the proposal); ``"proposal"``: $A = \mathrm{diag}(c)$.
        init: ``"proposal"`` (chains start from $\mathcal N(0, I)$ in ``z``), ``"ula"`` (run
            ``estimator.sample``) or a [`Posterior`][scorebayes.posterior.Posterior] of such ULA chains ``[C, S, d]``: the
            chains then start at the ULA chains' last states, $AA^\top$ is the ULA draws'
            covariance (overriding ``precondition``), and the learned acceptance trains on them.
        pilot_steps: ULA steps whose states (all chains, second half) train the acceptance network.
        acceptance_hidden, acceptance_epochs, acceptance_batch, lam, learned_form: settings of
            [`scorebayes.scoremh.pipeline.make_kernel()`][scorebayes.scoremh.pipeline.make_kernel] for ``"learned"``.
        seed: random seed (default the estimator's).
        progress: tqdm bars.

    A noise-smoothed estimator (``noise_sd`` set) is corrected copy by copy: the chains of a
    [`Posterior`][scorebayes.posterior.Posterior] ``init`` stay on the noisy copy of the data they ran on
    (``info["chain_copies"]``; [`noisy_copies()`][scorebayes.sbi.estimator.ScoreLangevin.noisy_copies]), otherwise the
    chains are split evenly over the copies. A [`ScoreLangevin`][scorebayes.sbi.estimator.ScoreLangevin]'s chains
    stay in its [`chain_box()`][scorebayes.sbi.estimator.ScoreLangevin.chain_box] (trained region and ``support_fn``).

    Returns:
        [`Posterior`][scorebayes.posterior.Posterior] of $\theta$ ``[chains, S, d]``; ``info`` has
        ``acceptance_rate`` (MALA moves), ``jump_acceptance_rate``, ``step_size`` ($h$ in
        ``z``), ``step_size_factor`` ($h\lambda_{\max}$), ``burn_in``, ``thin``.
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
    settings = MHSettings(**{k: v for k, v in locals().items() if k in MHSettings._fields})
    seed = getattr(estimator, "seed", 0) if seed is None else seed
    if init == "ula":
        n = chains or max(4, num_samples // 50)
        init = estimator.sample(max(4 * n, 400), chains=n, seed=seed)
    if getattr(estimator, "noise_sd", None) is not None:  # each chain on one noisy copy, as sample() does
        return _per_copy(estimator, estimator.noisy_copies(), num_samples, chains, init, seed, settings)
    return correct(target_of(estimator), num_samples, chains or max(4, num_samples // 50), init, seed, settings)
