r"""Antithetic reference tables: mirrored parameter pairs with common random numbers.

The implicit score-matching loss (eq. 4) on a table drawn from the proposal
$q_u = \mathcal N(\mu, \operatorname{diag} s^2)$ contains the term
$s_\phi(u, X)^\top\nabla\log q_u(u)$, whose variance grows like $1/s^2$: with a
tight localized proposal it dominates the loss's sampling noise and swamps the weak
$u$-dependence the network has to learn. Drawing the table in pairs

$$
u^{(1)} = \mu + s\odot z,\qquad u^{(2)} = \mu - s\odot z = 2\mu - u^{(1)},
$$

and simulating both members with the *same* latent randomness makes
$\nabla\log q_u(u^{(2)}) = -\nabla\log q_u(u^{(1)})$, so the pair's term is
$[s_\phi(u^{(1)}, X^{(1)}) - s_\phi(u^{(2)}, X^{(2)})]^\top\nabla\log q_u(u^{(1)})$. For
location–scale families the true score evaluated at its own simulation,
$s(u, X(u, z))$, depends on the latent $z$ only, and the term cancels exactly;
for smooth models it nearly cancels. Each member is still distributed as
$q_u(u)\,p(x\mid u)$, so the loss stays unbiased; only its variance changes. Pairs must
stay together in minibatches (``pairs=`` of [`scorebayes.scores.training.fit_score_network()`][scorebayes.scores.training.fit_score_network]).

This is not in the paper (Jiang, Wang & Yang, 2025, Sec. 3.2 and App. B use iid tables); it is
the classical antithetic-variates device (Hammersley & Morton, 1956) applied to its loss.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853>
    - Hammersley, Morton (1956). A new Monte Carlo technique: antithetic variates.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..proposal import GaussianProposal
from ..simulators import Simulator

__all__ = ["AntitheticProposal", "CommonRandomPairs", "antithetic_pairs"]


class AntitheticProposal:
    r"""Draws from a `GaussianProposal` in mirrored pairs.

    ``sample(num, generator) -> theta [num, d]``: rows ``2k`` and ``2k + 1`` are
    $T(\mu + s\odot z_k)$ and $T(\mu - s\odot z_k)$; an odd ``num`` ends with an
    unpaired row. Densities and gradients are those of the wrapped proposal (every row is
    marginally $q$). Picklable.
    """

    def __init__(self, proposal: GaussianProposal):
        if not isinstance(proposal, GaussianProposal):
            raise TypeError("antithetic pairs need the symmetric GaussianProposal, "
                            f"got {type(proposal).__name__}")
        self.proposal = proposal
        self.space, self.mean, self.sd = proposal.space, proposal.mean, proposal.sd

    def sample_unconstrained(self, num: int, generator: torch.Generator | None = None) -> Tensor:
        """``u [num, d]`` in interleaved mirrored pairs."""
        half = self.proposal.sample_unconstrained((num + 1) // 2, generator)
        pairs = torch.stack([half, 2 * self.mean - half], dim=1)  # [P, 2, d]
        return pairs.reshape(-1, half.shape[-1])[:num]

    def sample(self, num: int, generator: torch.Generator | None = None) -> Tensor:
        """``theta [num, d]`` (float64)."""
        return self.space.to_constrained(self.sample_unconstrained(num, generator))

    def __getattr__(self, name: str):  # log_prob, grad_log_prob_unconstrained, to_dict, ...
        if name == "proposal":
            raise AttributeError(name)
        return getattr(self.proposal, name)


class CommonRandomPairs:
    r"""Simulate rows ``2k`` and ``2k + 1`` with identical random streams.

    ``__call__(theta [B, d], n, generator) -> x [B, n, p]``: the even rows are simulated with
    the generator as given, the odd rows with a copy of its state taken before, so a batched
    simulator that draws its randomness independently of $\theta$ (every
    ``latent``/``transform`` simulator, and most vectorised ones) gives the pair common latents.
    For a simulator whose random stream depends on $\theta$ the pairs are merely
    independent: the table is still correct, only the variance reduction is lost. Picklable
    when the wrapped simulator is.
    """

    def __init__(self, simulator: Simulator):
        self.simulator = simulator

    def __call__(self, theta: Tensor, n: int, generator: torch.Generator | None = None) -> Tensor:
        if generator is None:
            generator = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,))))
        state = generator.get_state()
        first = self.simulator(theta[0::2], n, generator)
        if len(theta) < 2:
            return first
        twin = torch.Generator(device=generator.device)
        twin.set_state(state)
        second = self.simulator(theta[1::2], n, twin)
        out = torch.empty((len(theta), *first.shape[1:]), dtype=first.dtype)
        out[0::2], out[1::2] = first, second
        return out


def antithetic_pairs(u: Tensor, mean: Tensor, *, tol: float = 1e-6) -> Tensor:
    r"""Row indices ``[P, 2]`` of adjacent rows that are mirror images about ``mean``.

    A table may lose rows (non-finite parameters, failed simulations), so pairs are found from
    the values: rows $i, i + 1$ pair when $u_i + u_{i+1} = 2\mu$ (to ``tol``,
    relative to the scale of $u - \mu$). Unpaired rows are left out.

    Arguments:
        u: table parameters ``[N, d]`` (unconstrained); mean: $\mu$ ``[d]``.
    """
    if len(u) < 2:
        return torch.zeros(0, 2, dtype=torch.long)
    centred = u - mean.to(u)
    scale = centred.abs().max().clamp_min(1.0)
    mirror = ((centred[:-1] + centred[1:]).abs().amax(-1) <= tol * scale)
    taken = torch.zeros(len(u), dtype=torch.bool)
    rows = []
    for i in mirror.nonzero().flatten().tolist():  # greedy, left to right
        if not taken[i] and not taken[i + 1]:
            taken[i] = taken[i + 1] = True
            rows.append((i, i + 1))
    return torch.tensor(rows, dtype=torch.long).reshape(-1, 2)
