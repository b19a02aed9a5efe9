r"""Score-based MH end to end: samples ``[N, d]`` -> score model -> acceptance -> MH chains.

Chains run on the standardised coordinates of the score model, $z = (x - m)/c$, where
the score is $\tilde s_z(z)$ and step sizes are comparable across targets; draws are mapped
back with $x = m + c z$ (a linear bijection, so the stationary law maps exactly).

Proposals (``proposal``): ``"rw"``, ``"mala"``, ``"pcn"``, or ``"ula"`` (a Langevin proposal
with every move accepted). Acceptance rules (``acceptance``): ``"learned"`` (an
`AcceptanceNet` trained by score balance matching),
``"taylor"`` (Taylor-1 with averaging) or ``"quadrature"`` (Gauss-Lobatto path integral).
Default step sizes on the standardised scale: RW $\sigma = 0.1$,
Langevin $h = 0.005$ ($\varepsilon^2 = 2h = 0.01$), pCN $\beta = 0.1$.

References:
    - Score-Based Metropolis-Hastings Algorithms (Aloui et al., 2025)
      <https://arxiv.org/abs/2501.00467>
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..samplers.acceptance import LearnedRule, QuadratureRule, TaylorRule
from ..samplers.mh import Kernel, build_kernel, run
from ..samplers.proposals import LangevinProposal, PCNProposal, RandomWalkProposal
from .acceptance_net import AcceptanceNet
from .sbm import train_acceptance
from .score_matching import fit_score

__all__ = ["PROPOSALS", "ACCEPTANCES", "DEFAULT_STEP_SIZES", "make_proposal", "make_kernel", "score_mh"]

PROPOSALS = ("rw", "mala", "pcn", "ula")
ACCEPTANCES = ("learned", "taylor", "quadrature")
DEFAULT_STEP_SIZES = {"rw": 0.1, "mala": 0.005, "ula": 0.005, "pcn": 0.1}


def make_proposal(name: str, score: Callable[[Tensor], Tensor], step_size: float | None = None) -> Any:
    """The proposal object for ``name`` in `PROPOSALS` (default step from `DEFAULT_STEP_SIZES`)."""
    if name not in PROPOSALS:
        raise ValueError(f"unknown proposal {name!r}; choose one of {PROPOSALS}")
    step = DEFAULT_STEP_SIZES[name] if step_size is None else step_size
    if name == "rw":
        return RandomWalkProposal(step)
    if name == "pcn":
        return PCNProposal(step)
    return LangevinProposal(score, step)


def make_kernel(
    score: Callable[[Tensor], Tensor],
    proposal: Any,
    acceptance: str,
    *,
    data: Tensor | None = None,
    hidden: int = 128,
    num_blocks: int = 3,
    acceptance_epochs: int = 1000,
    batch_size: int = 512,
    lr: float = 5e-4,
    lam: float = 2.0,
    pairing: str = "coupled",
    learned_form: str = "direct",
    quadrature_nodes: int = 3,
    generator: torch.Generator | None = None,
    progress: bool = False,
) -> tuple[Kernel, dict[str, Any]]:
    r"""An MH kernel for ``score`` and ``proposal`` with the named acceptance rule.

    ``"learned"`` trains an acceptance network on ``data [N, d]`` (same coordinates as the
    chains) with [`train_acceptance()`][scorebayes.scoremh.sbm.train_acceptance]; the other rules need no training.

    Returns:
        the kernel and ``{"acceptance_net": net or None, "history": training history}``.
    """
    if acceptance not in ACCEPTANCES:
        raise ValueError(f"unknown acceptance {acceptance!r}; choose one of {ACCEPTANCES}")
    extra: dict[str, Any] = {"acceptance_net": None, "history": []}
    if acceptance == "taylor":
        rule = TaylorRule()
    elif acceptance == "quadrature":
        rule = QuadratureRule(score, quadrature_nodes)
    else:
        if data is None:
            raise ValueError("the learned acceptance needs training data")
        with torch.random.fork_rng():
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
            net = AcceptanceNet(data.shape[1], hidden, num_blocks)
        extra["history"] = train_acceptance(
            net.log_accept, net.parameters(), data.float(), score=score, proposal=proposal,
            n_epochs=acceptance_epochs, batch_size=batch_size, lr=lr, lam=lam, pairing=pairing,
            generator=generator, progress=progress)
        net.eval()
        extra["acceptance_net"] = net
        rule = LearnedRule(net.log_accept, form=learned_form)
    return build_kernel(proposal, rule, score=score), extra


def score_mh(
    data: Tensor,
    *,
    score_model: str = "ism",
    proposal: str = "mala",
    acceptance: str = "learned",
    step_size: float | None = None,
    chains: int = 500,
    steps: int = 300,
    keep: int = 100,
    init: str = "normal",
    score_hidden: int = 64,
    score_epochs: int = 100,
    acceptance_hidden: int = 64,
    acceptance_epochs: int = 400,
    lam: float = 2.0,
    learned_form: str = "direct",
    generator: torch.Generator | None = None,
    progress: bool = False,
) -> tuple[Tensor, dict[str, Any]]:
    r"""Sample a target known through ``data [N, d]``; returns ``draws [chains, keep, d]`` and info.

    Arguments:
        data: samples of the target ``[N, d]``.
        score_model: ``"ism"``, ``"ssm"`` or ``"dsm"`` ([`fit_score()`][scorebayes.scoremh.score_matching.fit_score]).
        proposal: one of `PROPOSALS`; ``"ula"`` ignores ``acceptance``.
        acceptance: one of `ACCEPTANCES`.
        step_size: on the standardised scale (default `DEFAULT_STEP_SIZES`).
        chains, steps, keep: parallel chains, steps per chain, last draws kept per chain.
        init: ``"normal"`` ($\mathcal N(0, I)$ on the standardised scale) or ``"data"``.
        score_hidden, score_epochs: score network width and training passes.
        acceptance_hidden, acceptance_epochs, lam, learned_form: acceptance network settings.

    Returns:
        ``draws [chains, keep, d]`` (original coordinates) and ``{"acceptance_rate", ...}``.
    """
    if init not in ("normal", "data"):
        raise ValueError(f"init must be 'normal' or 'data', got {init!r}")
    if not 1 <= keep <= steps:
        raise ValueError(f"keep must be between 1 and steps={steps}, got {keep}")
    if chains < 1:
        raise ValueError("chains must be >= 1")
    make_proposal(proposal, lambda z: z, step_size)  # validates the name and the step size early
    if acceptance not in ACCEPTANCES:
        raise ValueError(f"unknown acceptance {acceptance!r}; choose one of {ACCEPTANCES}")
    model = fit_score(data, method=score_model, hidden=score_hidden, epochs=score_epochs,
                      batch_size=128, lr=3e-3, generator=generator, progress=progress)
    z_data = model.standardize(torch.as_tensor(data).float())
    prop = make_proposal(proposal, model.score_standardized, step_size)
    if proposal == "ula":
        kernel, extra = build_kernel(prop, None), {"acceptance_net": None, "history": []}
    else:
        kernel, extra = make_kernel(model.score_standardized, prop, acceptance, data=z_data,
                                    hidden=acceptance_hidden, acceptance_epochs=acceptance_epochs,
                                    lam=lam, learned_form=learned_form, generator=generator,
                                    progress=progress)
    if init == "normal":
        z0 = torch.randn(chains, z_data.shape[1], generator=generator)
    else:
        z0 = z_data[torch.randint(0, z_data.shape[0], (chains,), generator=generator)]
    draws, stats = run(kernel, z0, steps, generator=generator, keep=keep, progress=progress,
                       desc=f"score-{proposal}")
    info = {"acceptance_rate": stats["acceptance_rate"],
            "score_loss": model.history[-1] if model.history else None,
            "score_model": model, "acceptance_net": extra["acceptance_net"]}
    return model.unstandardize(draws).double(), info
