r"""The No-U-Turn Sampler (through pyro) for a potential function, in an unconstrained parametrisation.

The target is $\log\pi_u(u) = \log\pi(T(u)) + \log|\det J_T(u)|$ (see
[`scorebayes.samplers.rwmh`][scorebayes.samplers.rwmh]); pyro's NUTS receives the potential
$U(u) = -\log\pi_u(u)$ and adapts its step size and a diagonal (or, with ``full_mass``,
dense) mass matrix $M$ during warm-up: momenta $p\sim N(0, M)$, with $M^{-1}$
the warm-up estimate of $\operatorname{Cov}(u)$; a dense $M$ removes linear
correlations between parameters, which a diagonal one cannot (Stan reference manual, "HMC
algorithm parameters").
Chains run one after another (no multiprocessing), each seeded from ``generator`` inside
`torch.random.fork_rng()`, so the global RNG state is untouched and the same seed gives
the same draws.

[`FoldedSquares`][scorebayes.samplers.nuts.FoldedSquares] (re-exported here) is a bijection to pass as
``space`` when the target is invariant under the sign flip of some coordinates (the squared
parameters $\tilde\theta$ of the graphical models).

References:
    - The No-U-Turn Sampler (Hoffman and Gelman, 2014) <https://arxiv.org/abs/1111.4246>
    - Stan Reference Manual, "MCMC sampling: HMC algorithm parameters" (mass matrix adaptation)
    - Pyro: Deep universal probabilistic programming (Bingham et al., 2019)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ..posterior import Posterior
from ..priors import ParameterSpace
from .folded import FoldedSquares

__all__ = ["sample_nuts", "FoldedSquares"]


def sample_nuts(log_prob: Callable[[Tensor], Tensor], init: Tensor, num_samples: int, *,
                space: ParameterSpace | FoldedSquares | None = None, warmup: int = 500, thin: int = 1,
                target_accept: float = 0.8, full_mass: bool = False, init_space: str = "constrained",
                max_tree_depth: int = 10, names: Sequence[str] | None = None,
                generator: torch.Generator | None = None, progress: bool = False) -> Posterior:
    r"""Run ``C`` NUTS chains on ``log_prob`` and return a [`Posterior`][scorebayes.posterior.Posterior].

    Arguments:
        log_prob: differentiable target log-density in the constrained space, ``theta [1, k] -> [1]``.
        init: ``[C, k]`` starting points (constrained space, or unconstrained ``u`` with
            ``init_space="unconstrained"``).
        num_samples: draws kept per chain (``num_samples * thin`` after ``warmup``).
        space: bijection to the unconstrained space (``None``: identity), e.g. a
            [`ParameterSpace`][scorebayes.priors.ParameterSpace] or [`FoldedSquares`][scorebayes.samplers.nuts.FoldedSquares].
        target_accept: pyro's ``target_accept_prob``, in (0, 1): the mean acceptance
            probability the step-size adaptation aims at (higher: smaller steps, fewer divergences).
        full_mass: adapt a dense mass matrix instead of a diagonal one (worth it for correlated
            posteriors of moderate dimension; costs $O(k^2)$ memory and $O(k^3)$ per
            adaptation window).
        init_space: ``"constrained"`` (default) or ``"unconstrained"``: the space of ``init``.
        max_tree_depth: maximum tree depth of NUTS.

    Raises:
        ValueError: on bad arguments (checked before any sampling).

    Returns:
        ``Posterior`` with samples ``[C, num_samples, k]`` and sampler information (step sizes,
        divergences, the adapted inverse mass matrix per chain: ``[k]`` or ``[k, k]``).
    """
    from pyro.infer import MCMC, NUTS

    init = torch.as_tensor(init, dtype=torch.float64)
    if init.dim() != 2 or init.shape[0] < 1 or init.shape[1] < 1:
        raise ValueError(f"init must be [C, k] (chains x parameters), got {tuple(init.shape)}")
    if not bool(torch.isfinite(init).all()):
        raise ValueError("init must be finite")
    if init_space not in ("constrained", "unconstrained"):
        raise ValueError(f"init_space must be 'constrained' or 'unconstrained', got {init_space!r}")
    if not isinstance(full_mass, bool):
        raise ValueError(f"full_mass must be True or False, got {full_mass!r}")
    if isinstance(target_accept, bool) or not isinstance(target_accept, (int, float)) or not 0 < target_accept < 1:
        raise ValueError(f"target_accept must be a probability in (0, 1), got {target_accept!r}")
    for label, value, low in (("num_samples", num_samples, 1), ("warmup", warmup, 0), ("thin", thin, 1),
                              ("max_tree_depth", max_tree_depth, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{label} must be an integer >= {low}, got {value!r}")
    c, k = init.shape
    to_theta = space.to_constrained if space is not None else (lambda u: u)

    def potential(params: dict) -> Tensor:
        u = params["u"].reshape(1, k)
        lp = log_prob(to_theta(u))
        if space is not None:
            lp = lp + space.log_abs_det_jacobian(u)
        return -lp[0]

    u0 = space.to_unconstrained(init) if space is not None and init_space == "constrained" else init
    draws, steps, masses, diverging = [], [], [], 0
    start = time.perf_counter()
    for chain in range(c):
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            kernel = NUTS(potential_fn=potential, target_accept_prob=float(target_accept), full_mass=full_mass,
                          max_tree_depth=max_tree_depth, adapt_step_size=True, adapt_mass_matrix=True)
            mcmc = MCMC(kernel, num_samples=num_samples * thin, warmup_steps=warmup,
                        initial_params={"u": u0[chain].clone()}, disable_progbar=not progress)
            mcmc.run()
        u = mcmc.get_samples()["u"].reshape(-1, k)[thin - 1 :: thin].to(torch.float64)
        draws.append(to_theta(u).detach())
        steps.append(float(kernel.step_size))
        masses.append(next(iter(kernel.inverse_mass_matrix.values())).detach().to(torch.float64).tolist())
        extra = mcmc.diagnostics().get("divergences", {})
        diverging += sum(len(v) for v in extra.values()) if isinstance(extra, dict) else 0
    info = {"sampler": "nuts", "seconds_sampling": time.perf_counter() - start, "step_size": steps,
            "divergences": diverging, "warmup": warmup, "thin": thin, "full_mass": full_mass,
            "target_accept": float(target_accept), "inverse_mass": masses}
    return Posterior(torch.stack(draws), names, info=info)
