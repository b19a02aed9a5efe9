r"""End-to-end generalised Bayes: calibrate $\beta$, then sample $\pi(\theta)e^{-\beta D_n(\theta)}$.

[`dfd_bayes()`][scorebayes.discrete.bayes.dfd_bayes] is DFD-Bayes (Definition 4 of the paper) for a model and integer data;
[`generalised_bayes()`][scorebayes.discrete.bayes.generalised_bayes] does the same for any loss of this package (KSD-Bayes,
pseudo-likelihood Bayes, standard Bayes with ``beta=1``):

1. unless ``beta`` is given, [`calibrate_beta()`][scorebayes.discrete.calibrate.calibrate_beta]
   (full-data minimiser, ``B`` bootstrap minimisers through an executor, eq. 10);
2. MCMC on the generalised posterior in the unconstrained space of the prior: random-walk
   MH (default; the paper's settings: 10 chains, step 0.1, burn-in, thinning) or NUTS.

Chains start from prior draws. With ``fold_squared=True`` the sampler runs
in the sign-folded coordinates $w = \log\tilde\theta^2$ of the model's squared parameters
([`FoldedSquares`][scorebayes.samplers.nuts.FoldedSquares]) and returns the identified $|\tilde\theta|$.

References:
    - Generalised Bayesian Inference for Discrete Intractable Likelihood
      (Matsubara, Knoblauch, Briol and Oates, 2023), Sections 3-4
      <https://arxiv.org/abs/2206.08420>
"""

from __future__ import annotations

import time
from concurrent.futures import Executor
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.distributions import Distribution

from ..parallel import derive_seed, make_generator
from ..posterior import Posterior
from ..priors import ParameterSpace
from ..priors import sample as sample_prior
from .calibrate import calibrate_beta, check_robust_options
from .dfd import DFDLoss
from .models.base import DiscreteModel
from .posterior import GeneralisedPosterior

__all__ = ["generalised_bayes", "dfd_bayes"]


def generalised_bayes(loss: Any, prior: Distribution, *, beta: float | None = None, names: list[str] | None = None,
                      num_bootstrap: int = 100, method: str = "newton", init_steps: int = 200,
                      init_lr: float = 0.1, steps: int = 200, lr: float = 0.1, max_step: float = 1.0,
                      max_distance: float = 20.0, max_flagged: float = 0.1, executor: Executor | None = None,
                      sampler: str = "rwmh", num_chains: int = 10, num_samples: int = 500,
                      burn_in: int = 5000, thin: int = 10, step_size: float = 0.1, adapt: bool = True,
                      target_accept: float | None = None, full_mass: bool = False, init: Tensor | None = None,
                      init_from: str = "prior", fold_squared: bool = False, seed: int = 0,
                      progress: bool = False) -> Posterior:
    r"""Calibrate (unless ``beta`` is given) and sample a generalised posterior.

    Arguments:
        loss: a loss ``theta [B, k] -> [B]`` of this package (``D_n``).
        prior: a ``Distribution`` with event shape ``[k]``.
        beta: fix $\beta$ instead of calibrating it.
        num_bootstrap, method, init_steps, init_lr, steps, lr, executor: calibration settings
            ([`calibrate_beta()`][scorebayes.discrete.calibrate.calibrate_beta]).
        max_step, max_distance, max_flagged: robust calibration (same defaults as
            [`calibrate_beta()`][scorebayes.discrete.calibrate.calibrate_beta]): Newton steps of at most
            ``max_step`` per unconstrained coordinate; a bootstrap replicate moving more than
            ``max_distance`` from the full-data minimiser is flagged and left out of eq. (10);
            more than a fraction ``max_flagged`` of flagged replicates raises
            [`CalibrationError`][scorebayes.discrete.calibrate.CalibrationError]. Checked before any work.
        sampler: ``"rwmh"`` or ``"nuts"``.
        num_chains, num_samples, burn_in, thin: MCMC settings (``burn_in`` is NUTS's warm-up).
        step_size, adapt: random-walk scale and whether to adapt it during burn-in.
        target_accept: acceptance rate the adaptation aims at (``None``: NUTS 0.8, random-walk
            MH its dimension-dependent default).
        full_mass: NUTS only: adapt a dense mass matrix (see
            [`sample_nuts()`][scorebayes.samplers.nuts.sample_nuts]).
        init: starting points ``[num_chains, k]`` in the **unconstrained** space of the prior
            (e.g. draws of a Laplace approximation there); overrides ``init_from``.
        init_from: ``"prior"`` (a prior draw per chain) or ``"minimiser"`` (the full-data
            minimiser, needs calibration).
        fold_squared: sample the squared parameters of the model (``loss.model.squared_indices()``,
            e.g. the graphical models) as $w = \log\tilde\theta^2$, folding the mirror copies
            of the sign-symmetric posterior; draws hold $|\tilde\theta|$ and ``init`` is then
            in these coordinates (an exact zero of the minimiser starts at
            $|\tilde\theta| = 10^{-3}$).
        seed: all randomness derives from it.

    Returns:
        ``Posterior [num_chains, num_samples, k]``; ``info`` holds ``beta``, the calibration
        details (minimiser, numerator/denominator of eq. 10, bootstrap minimisers) and timings.
    """
    _check_options(sampler=sampler, init_from=init_from, full_mass=full_mass, target_accept=target_accept,
                   fold_squared=fold_squared, max_step=max_step, max_distance=max_distance, max_flagged=max_flagged)
    space, squared = _sampling_space(loss, prior, fold_squared)
    if init is not None:
        init = _checked_init(init, prior, num_chains)
    names = names if names is not None else getattr(getattr(loss, "model", None), "names", None)
    info: dict[str, Any] = {}
    start = time.perf_counter()
    theta_hat = None
    if beta is None:
        cal = calibrate_beta(loss, prior, num_bootstrap=num_bootstrap, seed=derive_seed(seed, "calibrate"),
                             executor=executor, method=method, init_steps=init_steps, init_lr=init_lr, steps=steps, lr=lr,
                             max_step=max_step, max_distance=max_distance, max_flagged=max_flagged,
                             progress=progress)
        beta, theta_hat = cal.beta, cal.minimiser
        info["calibration"] = _calibration_info(cal, time.perf_counter() - start)
    elif init_from == "minimiser" and init is None:
        raise ValueError("init_from='minimiser' needs calibration (beta=None)")
    target = GeneralisedPosterior(loss, prior, beta)
    generator = make_generator(seed, "mcmc")
    init_space = "constrained" if init is None else "unconstrained"  # a given init is unconstrained
    if init is None:
        init = _default_init(prior, init_from, theta_hat, squared, num_chains, seed)
    if sampler == "rwmh":
        from ..samplers.rwmh import sample_rwmh

        post = sample_rwmh(target.log_prob, init if init_space == "constrained" else space.to_constrained(init),
                           num_samples, space=space, burn_in=burn_in, thin=thin, step_size=step_size, adapt=adapt,
                           target_accept=target_accept, names=names, generator=generator, progress=progress)
    else:
        from ..samplers.nuts import sample_nuts

        post = sample_nuts(target.log_prob, init, num_samples, space=space, warmup=burn_in, thin=thin,
                           target_accept=0.8 if target_accept is None else target_accept, full_mass=full_mass,
                           init_space=init_space, names=names, generator=generator, progress=progress)
    post.info.update(info)
    post.info.update({"beta": float(beta), "seconds": time.perf_counter() - start})
    if squared is not None:
        post.info["folded"] = squared.tolist()
    return post


def _check_options(*, sampler: str, init_from: str, full_mass: Any, target_accept: Any, fold_squared: Any,
                   max_step: float, max_distance: float, max_flagged: float) -> None:
    """Refuse bad sampler, start and robust-calibration options (before any work)."""
    if sampler not in ("rwmh", "nuts"):
        raise ValueError(f"sampler must be 'rwmh' or 'nuts', got {sampler!r}")
    check_robust_options(max_step, max_distance, max_flagged)
    if init_from not in ("prior", "minimiser"):
        raise ValueError(f"init_from must be 'prior' or 'minimiser', got {init_from!r}")
    if not isinstance(full_mass, bool):
        raise ValueError(f"full_mass must be True or False, got {full_mass!r}")
    if full_mass and sampler != "nuts":
        raise ValueError("full_mass=True needs sampler='nuts'")
    if target_accept is not None and (isinstance(target_accept, bool) or not isinstance(target_accept, (int, float))
                                      or not 0 < target_accept < 1):
        raise ValueError(f"target_accept must be a probability in (0, 1) or None, got {target_accept!r}")
    if not isinstance(fold_squared, bool):
        raise ValueError(f"fold_squared must be True or False, got {fold_squared!r}")


def _sampling_space(loss: Any, prior: Distribution, fold_squared: bool) -> tuple[Any, Tensor | None]:
    """The space the sampler moves in (the prior's unconstrained one, or its sign-folded squares)
    and the folded coordinates (``None`` without folding)."""
    space = ParameterSpace(prior)
    if not fold_squared:
        return space, None
    from ..samplers.folded import FoldedSquares

    squared_indices = getattr(getattr(loss, "model", None), "squared_indices", None)
    if squared_indices is None:
        raise ValueError("fold_squared=True needs a loss whose model has squared_indices() "
                         "(e.g. the graphical models)")
    squared = squared_indices()
    return FoldedSquares(space, squared), squared  # checks the indices and their priors' supports


def _checked_init(init: Any, prior: Distribution, num_chains: int) -> Tensor:
    """A given start ``[num_chains, k]`` (unconstrained) as float64, checked."""
    init = torch.as_tensor(init, dtype=torch.float64)
    k = int(torch.Size(prior.event_shape).numel())
    if tuple(init.shape) != (num_chains, k):
        raise ValueError(f"init must be [num_chains, k] = [{num_chains}, {k}] (unconstrained), "
                         f"got {tuple(init.shape)}")
    if not bool(torch.isfinite(init).all()):
        raise ValueError("init must be finite")
    return init


def _calibration_info(cal: Any, seconds: float) -> dict[str, Any]:
    """``info["calibration"]``: the minimiser, eq. (10)'s parts, the bootstrap and its flags."""
    return {"minimiser": cal.minimiser.tolist(), "numerator": cal.numerator,
            "denominator": cal.denominator, "bootstrap": cal.bootstrap.tolist(),
            "escaped": list(cal.escaped), "non_finite": list(cal.non_finite),
            "not_converged": list(cal.not_converged), "seconds": seconds}


def _default_init(prior: Distribution, init_from: str, theta_hat: Tensor | None, squared: Tensor | None,
                  num_chains: int, seed: int) -> Tensor:
    """Constrained starts: a prior draw per chain, or the full-data minimiser for every chain
    (squared coordinates at least 1e-3 from zero: log 0 = -inf in the folded coordinates)."""
    if init_from == "prior":
        return sample_prior(prior, num_chains, generator=make_generator(seed, "chains")).to(torch.float64)
    init = theta_hat.reshape(1, -1).expand(num_chains, -1)
    if squared is not None:
        init = init.clone()
        init[:, squared] = init[:, squared].abs().clamp(min=1e-3)
    return init


def dfd_bayes(model: DiscreteModel, x: Tensor | np.ndarray, prior: Distribution | None = None, *,
              counts: Tensor | np.ndarray | None = None, compress: bool = True, **options: Any) -> Posterior:
    r"""DFD-Bayes for ``model`` and integer data ``x [n, d]`` (or distinct rows with ``counts``).

    ``prior`` defaults to ``model.default_prior()``; ``options`` go to [`generalised_bayes()`][scorebayes.discrete.bayes.generalised_bayes].

    Examples:
        >>> from scorebayes.discrete.models import PoissonModel
        >>> x = torch.poisson(torch.full((200, 1), 3.0), generator=torch.Generator().manual_seed(0))
        >>> post = dfd_bayes(PoissonModel(), x, num_bootstrap=20,
        ...                  num_chains=2, num_samples=50, burn_in=200, thin=2)
        >>> post.samples.shape, 2.5 < float(post.mean()) < 3.5
        (torch.Size([2, 50, 1]), True)
    """
    prior = prior if prior is not None else model.default_prior()
    if prior is None:
        raise ValueError("this model has no default prior: pass one")
    loss = DFDLoss(model, x, counts, compress=compress)
    post = generalised_bayes(loss, prior, **options)
    post.info["method"] = "dfd-bayes"
    return post
