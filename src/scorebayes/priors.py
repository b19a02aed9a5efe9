r"""Priors and the bijection to an unconstrained parameter space.

Score matching and Langevin dynamics need a density whose support is all of
$\mathbb R^d$ (the boundary condition of integration by parts, and chains that
cannot leave the support). For a prior $\pi$ on a constrained set we work with
$u = T^{-1}(\theta)$ where $T$ is ``torch.distributions.biject_to(support)``
(log for positive parameters, scaled logit for intervals) and

$$
\log \pi_u(u) = \log \pi(T(u)) + \log |\det \partial T(u) / \partial u|.
$$

A likelihood score transforms by the chain rule,
$\nabla_u \log p(x \mid T(u)) = J_T(u)^\top \nabla_\theta \log p(x \mid \theta)$.

Any ``torch.distributions.Distribution`` with event shape ``[d]`` is a prior (the
``sbi`` package's ``BoxUniform`` included); [`independent()`][scorebayes.priors.independent] builds one from
per-parameter univariate distributions, and [`prior_from_spec()`][scorebayes.priors.prior_from_spec] from the
CLI's ``[[prior]]`` tables.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import torch
from torch import Tensor
from torch.distributions import Distribution, biject_to, constraints, transforms

__all__ = [
    "IndependentPrior",
    "ParameterSpace",
    "PriorError",
    "independent",
    "prior_from_spec",
    "sample",
    "PRIOR_FAMILIES",
]


class PriorError(ValueError):
    """A prior that cannot be used (bad specification, wrong dimension, ...)."""


PRIOR_FAMILIES: dict[str, tuple[type[Distribution], tuple[str, ...]]] = {
    "uniform": (torch.distributions.Uniform, ("low", "high")),
    "normal": (torch.distributions.Normal, ("loc", "scale")),
    "lognormal": (torch.distributions.LogNormal, ("loc", "scale")),
    "gamma": (torch.distributions.Gamma, ("concentration", "rate")),
    "beta": (torch.distributions.Beta, ("concentration1", "concentration0")),
    "halfnormal": (torch.distributions.HalfNormal, ("scale",)),
    "exponential": (torch.distributions.Exponential, ("rate",)),
    "halfcauchy": (torch.distributions.HalfCauchy, ("scale",)),
    "cauchy": (torch.distributions.Cauchy, ("loc", "scale")),
    "laplace": (torch.distributions.Laplace, ("loc", "scale")),
}


class IndependentPrior(Distribution):
    r"""Product of univariate distributions, one per parameter.

    Arguments:
        marginals: ``d`` univariate distributions with scalar batch and event shape.

    The event shape is ``[d]``; ``log_prob(theta [*, d]) -> [*]``. ``support`` is a
    per-coordinate list in `marginal_supports` (mixed supports are allowed).
    """

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, marginals: Sequence[Distribution], validate_args: bool | None = None):
        marginals = list(marginals)
        if not marginals:
            raise PriorError("a prior needs at least one parameter")
        for k, m in enumerate(marginals):
            if tuple(m.batch_shape) != () or tuple(m.event_shape) != ():
                raise PriorError(
                    f"prior marginal {k} must be univariate with scalar parameters, got "
                    f"batch_shape={tuple(m.batch_shape)}, event_shape={tuple(m.event_shape)}"
                )
        self.marginals = marginals
        super().__init__(torch.Size(), torch.Size([len(marginals)]), validate_args=False)

    @property
    def marginal_supports(self) -> list[constraints.Constraint]:
        return [m.support for m in self.marginals]

    @constraints.dependent_property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return _ProductSupport(self)

    def log_prob(self, value: Tensor) -> Tensor:
        value = torch.as_tensor(value)
        out = torch.zeros(value.shape[:-1], dtype=value.dtype, device=value.device)
        for k, m in enumerate(self.marginals):
            v = value[..., k]
            inside = m.support.check(v)
            lp = m.log_prob(torch.where(inside, v, _inside_point(m, v)))
            out = out + torch.where(inside, lp, torch.full_like(lp, -math.inf))
        return out

    def sample(self, sample_shape: torch.Size | Sequence[int] = torch.Size()) -> Tensor:
        return torch.stack([m.sample(sample_shape) for m in self.marginals], dim=-1)

    @property
    def mean(self) -> Tensor:
        return torch.stack([m.mean for m in self.marginals])

    @property
    def variance(self) -> Tensor:
        return torch.stack([m.variance for m in self.marginals])

    def __repr__(self) -> str:
        return f"IndependentPrior({', '.join(repr(m) for m in self.marginals)})"


class _ProductSupport(constraints.Constraint):
    event_dim = 1

    def __init__(self, prior: IndependentPrior):
        self.prior = prior

    def check(self, value: Tensor) -> Tensor:
        ok = torch.ones(value.shape[:-1], dtype=torch.bool, device=value.device)
        for k, m in enumerate(self.prior.marginals):
            ok = ok & m.support.check(value[..., k])
        return ok


def _inside_point(m: Distribution, like: Tensor) -> Tensor:
    """A point inside the support of ``m`` (to evaluate log_prob safely), shaped like ``like``."""
    try:
        point = m.mean
        if not torch.isfinite(point):
            raise ValueError
    except (NotImplementedError, ValueError):
        point = biject_to_support(m.support)(torch.zeros(()))
    return torch.full_like(like, float(point))


def independent(marginals: Sequence[Distribution]) -> IndependentPrior:
    """Product prior from per-parameter univariate distributions (see [`IndependentPrior`][scorebayes.priors.IndependentPrior])."""
    return IndependentPrior(marginals)


def prior_from_spec(specs: Sequence[dict]) -> IndependentPrior:
    r"""Build a prior from the CLI's ``[[prior]]`` tables.

    Arguments:
        specs: one dict per parameter, e.g. ``{"dist": "uniform", "low": 0, "high": 10}``.
            The other keys are the ``torch.distributions`` argument names
            (normal: loc, scale; gamma: concentration, rate; beta: concentration1,
            concentration0; lognormal: loc, scale of log theta).

    Raises:
        PriorError: unknown family, missing or unknown arguments, invalid values.
    """
    marginals = []
    for k, spec in enumerate(specs):
        spec = dict(spec)
        family = str(spec.pop("dist", "")).lower()
        spec.pop("name", None)
        if family not in PRIOR_FAMILIES:
            raise PriorError(
                f"prior {k}: unknown dist {family!r}; choose one of {sorted(PRIOR_FAMILIES)}"
            )
        cls, names = PRIOR_FAMILIES[family]
        unknown = set(spec) - set(names)
        missing = set(names) - set(spec)
        if unknown or missing:
            raise PriorError(
                f"prior {k} ({family}) takes {list(names)}; "
                + (f"missing {sorted(missing)} " if missing else "")
                + (f"unknown {sorted(unknown)}" if unknown else "")
            )
        try:
            args = {a: torch.tensor(float(spec[a]), dtype=torch.float64) for a in names}
            marginals.append(cls(**args, validate_args=True))
        except (ValueError, TypeError) as err:
            raise PriorError(f"prior {k} ({family}): invalid arguments {spec}: {err}") from None
    return IndependentPrior(marginals)


_GLOBAL_RNG_LOCK = threading.Lock()  # fork_rng + manual_seed is not thread-safe


def sample(
    prior: Distribution, num: int, *, generator: torch.Generator | None = None
) -> Tensor:
    r"""Draw ``num`` parameters from any ``Distribution`` reproducibly.

    ``Distribution.sample`` takes no generator, so a seed is drawn from ``generator``
    and the global RNG is used inside `torch.random.fork_rng()` (the caller's
    global state is untouched) under a process-wide lock, so threads do not interleave.

    Returns:
        theta: ``[num, d]``.
    """
    seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
    with _GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        theta = prior.sample((num,))
    if theta.dim() == 1:
        theta = theta.unsqueeze(-1)
    return theta


def biject_to_support(support: constraints.Constraint) -> transforms.Transform:
    """``torch.distributions.biject_to`` with a clear error for unsupported supports."""
    try:
        return biject_to(support)
    except NotImplementedError:
        raise PriorError(f"no bijection to an unconstrained space for support {support}") from None


class ParameterSpace:
    r"""The bijection $\theta = T(u)$ between constrained and unconstrained parameters.

    Arguments:
        prior: a ``Distribution`` with event shape ``[d]``.

    All methods take and return ``[B, d]`` tensors (``[B]`` for log-densities).
    """

    def __init__(self, prior: Distribution):
        if len(prior.event_shape) > 1:
            raise PriorError(f"the prior must have event shape [d], got {tuple(prior.event_shape)}")
        self.prior = prior
        if isinstance(prior, IndependentPrior):
            self._per_coordinate = [biject_to_support(s) for s in prior.marginal_supports]
            self._joint = None
            self.dim = len(prior.marginals)
        else:
            self._per_coordinate = None
            self._joint = biject_to_support(prior.support)
            self.dim = int(prior.event_shape[0]) if prior.event_shape else 1
            if self._joint.event_dim == 1:
                probe = self._joint.inv(prior.sample((1,)).reshape(1, -1))
                if probe.shape[-1] != self.dim:
                    raise PriorError(
                        "priors whose unconstrained space has another dimension "
                        "(e.g. simplex supports) are not supported"
                    )

    def is_elementwise(self) -> bool:
        r"""Whether $\theta_k$ depends on $u_k$ only (a diagonal Jacobian)."""
        if self._joint is None:
            return True
        transform = self._joint
        while isinstance(transform, transforms.IndependentTransform):
            transform = transform.base_transform
        return transform.event_dim == 0

    def to_constrained(self, u: Tensor) -> Tensor:
        r"""$\theta = T(u)$, ``[B, d] -> [B, d]``."""
        if self._joint is not None:
            return self._joint(u)
        return torch.stack([t(u[..., k]) for k, t in enumerate(self._per_coordinate)], dim=-1)

    def to_unconstrained(self, theta: Tensor) -> Tensor:
        r"""$u = T^{-1}(\theta)$, ``[B, d] -> [B, d]``."""
        if self._joint is not None:
            return self._joint.inv(theta)
        return torch.stack(
            [t.inv(theta[..., k]) for k, t in enumerate(self._per_coordinate)], dim=-1
        )

    def log_abs_det_jacobian(self, u: Tensor) -> Tensor:
        r"""$\log|\det \partial T(u)/\partial u|$, ``[B, d] -> [B]``."""
        theta = self.to_constrained(u)
        if self._joint is not None:
            ladj = self._joint.log_abs_det_jacobian(u, theta)
            return ladj if self._joint.event_dim == 1 else ladj.sum(-1)
        return sum(
            t.log_abs_det_jacobian(u[..., k], theta[..., k])
            for k, t in enumerate(self._per_coordinate)
        )

    def log_prob_unconstrained(self, u: Tensor) -> Tensor:
        r"""$\log\pi_u(u) = \log\pi(T(u)) + \log|\det J_T(u)|$, ``[B, d] -> [B]``."""
        theta = self.to_constrained(u)
        return self.prior.log_prob(theta) + self.log_abs_det_jacobian(u)

    def grad_log_prob_unconstrained(self, u: Tensor) -> Tensor:
        r"""$\nabla_u \log \pi_u(u)$, ``[B, d] -> [B, d]`` (autograd, no graph kept)."""
        with torch.enable_grad():
            u = u.detach().requires_grad_(True)
            lp = self.log_prob_unconstrained(u)
            (grad,) = torch.autograd.grad(lp.sum(), u)
        return grad

    def pushforward_score(self, u: Tensor, score_theta: Tensor) -> Tensor:
        r"""Chain rule $J_T(u)^\top s_\theta$, ``[B, d], [B, d] -> [B, d]``.

        No graph is kept: ``u`` is detached, so the result cannot be differentiated in ``u``
        (a drift whose Jacobian is needed, e.g. for the automatic step size, must apply the
        chain rule itself)."""
        with torch.enable_grad():
            u = u.detach().requires_grad_(True)
            theta = self.to_constrained(u)
            (grad,) = torch.autograd.grad(theta, u, grad_outputs=score_theta)
        return grad
