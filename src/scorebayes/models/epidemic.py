r"""Partially observed stochastic SI model of healthcare-associated infections (Sec. 5.3, App. C.3).

A facility holds $N = 60J$ individuals on $J$ floors (floor $F_i = i \bmod J$)
in rooms of two (room $R_i = i \bmod N/2$). Hidden infection $X_{i,t}$ and observed
status $Y_{i,t}$ evolve for $t = 0..T-1$ as in Chatha et al.'s public simulator:

- $t = 0$: $X_{i,0} \sim \text{Bern}(\alpha)$, $Y_{i,0} = X_{i,0}$ (screening).
- hazard of a susceptible $i$, from $I = X_{\cdot,t-1}$:

  $$
  h_i = \beta_0 \frac{\sum_l I_l}{N} + \beta_{F_i + 1} \frac{\#\{\text{infected on } F_i\}}{60}
  + \beta_{J+1} \frac{\#\{\text{infected in } R_i\}}{c_R},
  $$

  with $c_R = 2$ (room capacity; ``room_normalisation="n"`` uses $c_R = N$, the
  paper's printed $\beta_{J+1}/n$); new infection $\mathbb 1(U^{inf} < 1 - e^{-h_i})$.
- detection: a hidden-infected, not yet observed person becomes observed when
  $U^{obs} < \eta$ (``detection="current"`` uses $X_{\cdot,t}$, as in the code;
  ``"previous"`` uses $X_{\cdot,t-1}$, the paper's prose).
- turnover: if $U^{dis} < \gamma$ the person is replaced, and
  $X = Y = \mathbb 1(U^{scr} < \alpha)$ (perfect admission screening).

The output is the summary matrix $S \in \mathbb R^{T \times (J+2)}$, row $t$ holding the
observed prevalence in the facility, on each floor, and the proportion of rooms whose two
occupants are both observed infected. The SBI pipeline treats $S$ (``x [B, T, J+2]``,
``n = T``) as one data set. All uniforms are latents, so ``transform`` is a deterministic map;
``smooth_transform`` replaces the (only $\theta$-dependent) infection indicator by the
smooth indicator $\sigma(500(p - U^{inf}))$.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
      <https://arxiv.org/abs/2509.03853> (Sec. 5.3, App. C.3)
    - Chatha et al., Neural posterior estimation for stochastic epidemic modeling, 2024;
      code: <https://github.com/epibayes/np-epid> (src/dataset/si_model.py)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.distributions import LogNormal

from ..priors import independent
from ..simulators import Simulator
from ._utils import smooth_indicator
from .base import Model

__all__ = ["Epidemic", "EpidemicSimulator", "epidemic_summaries"]

FLOOR_SIZE = 60


@dataclass(frozen=True)
class EpidemicSimulator:
    r"""The vectorised SI simulator: latents ``[B, T, N, 4]`` and ``transform(theta [B, J+2], z)``.

    Latent channels: 0 infection (at $t = 0$: initial carriage), 1 detection,
    2 discharge, 3 admission screening; all $U(0, 1)$, stored in float32 (half the
    memory and time; the simulation itself runs in ``theta``'s dtype).
    """

    floors: int = 5
    steps: int = 52
    alpha: float = 0.1
    gamma: float = 0.05
    eta: float = 0.1
    room_normalisation: str = "capacity"
    detection: str = "current"
    chunk_size: int = 128

    def __post_init__(self) -> None:
        if self.floors < 1 or self.steps < 1 or self.chunk_size < 1:
            raise ValueError("floors, steps and chunk_size must be >= 1")
        for name in ("alpha", "gamma", "eta"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be a probability, got {getattr(self, name)}")
        if self.room_normalisation not in ("capacity", "n"):
            raise ValueError(f"room_normalisation must be 'capacity' or 'n', "
                             f"got {self.room_normalisation!r}")
        if self.detection not in ("current", "previous"):
            raise ValueError(f"detection must be 'current' or 'previous', got {self.detection!r}")

    @property
    def size(self) -> int:
        return FLOOR_SIZE * self.floors

    def latent(self, B: int, n: int, generator: torch.Generator | None) -> Tensor:
        self._check_steps(n)
        return torch.rand(B, self.steps, self.size, 4, generator=generator, dtype=torch.float32)

    def transform(self, theta: Tensor, z: Tensor) -> Tensor:
        """``theta [B, J+2], z [B, T, N, 4] -> S [B, T, J+2]`` (exact 0/1 draws)."""
        return self.run(theta, z)[0]

    def smooth_transform(self, theta: Tensor, z: Tensor) -> Tensor:
        """As `transform()` with the smooth infection indicator (for localization)."""
        return self.run(theta, z, smooth=True)[0]

    def simulate(self, theta: Tensor, n: int, generator: torch.Generator | None) -> Tensor:
        """Draw ``S [B, T, J+2]`` in chunks of ``chunk_size`` parameters (bounded memory)."""
        self._check_steps(n)
        out = [self.transform(chunk, self.latent(chunk.shape[0], n, generator))
               for chunk in theta.split(self.chunk_size)]
        return torch.cat(out)

    def _check_steps(self, n: int) -> None:
        if n != self.steps:
            raise ValueError(f"the epidemic simulator returns T={self.steps} rows; got n={n}")

    def run(self, theta: Tensor, z: Tensor, smooth: bool = False,
            return_states: bool = False) -> tuple[Tensor, Tensor | None, Tensor | None]:
        r"""Simulate ``S [B, T, J+2]``; with ``return_states`` also the hidden and observed
        statuses ``X, Y [B, T, N]`` (else ``None``). Computes in ``theta``'s dtype."""
        J, N = self.floors, self.size
        if theta.dim() != 2 or theta.shape[1] != J + 2:
            raise ValueError(f"theta must be [B, {J + 2}], got {tuple(theta.shape)}")
        if z.shape[1:] != (self.steps, N, 4) or z.shape[0] != theta.shape[0]:
            raise ValueError(f"latents must be [B, {self.steps}, {N}, 4], got {tuple(z.shape)}")
        B, dtype = theta.shape[0], theta.dtype
        beta0, beta_floor, beta_room = theta[:, :1], theta[:, 1:J + 1], theta[:, J + 1:]
        room_cap = 2.0 if self.room_normalisation == "capacity" else float(N)
        X = (z[:, 0, :, 0] < self.alpha).to(dtype)
        Y = X.clone()
        xs, ys, stats = [X], [Y], [self.summarise(Y)]
        for t in range(1, self.steps):
            u_inf, u_obs, u_dis, u_scr = z[:, t].unbind(-1)
            I = X
            floor_count = I.reshape(B, N // J, J).sum(1)  # individual i is on floor i % J
            room_count = I.reshape(B, 2, N // 2).sum(1)  # individual i is in room i % (N/2)
            hazard = (beta0 * I.sum(-1, keepdim=True) / N
                      + (beta_floor * floor_count / FLOOR_SIZE).repeat(1, N // J)
                      + (beta_room * room_count / room_cap).repeat(1, 2))
            p = 1.0 - torch.exp(-hazard)
            new = smooth_indicator(p - u_inf) if smooth else (u_inf < p).to(dtype)
            X_new = I + (1.0 - I) * new
            infected = X_new if self.detection == "current" else I
            Y_new = Y + (1.0 - Y) * infected * (u_obs < self.eta).to(dtype)
            discharge = u_dis < self.gamma
            screen = (u_scr < self.alpha).to(dtype)
            X = torch.where(discharge, screen, X_new)
            Y = torch.where(discharge, screen, Y_new)
            stats.append(self.summarise(Y))
            if return_states:
                xs.append(X)
                ys.append(Y)
        S = torch.stack(stats, 1)
        if not return_states:
            return S, None, None
        return S, torch.stack(xs, 1), torch.stack(ys, 1)

    def summarise(self, Y: Tensor) -> Tensor:
        r"""Observed statuses at one time ``Y [B, N] -> S_t [B, J+2]``."""
        B, N = Y.shape
        facility = Y.mean(-1, keepdim=True)
        floors = Y.reshape(B, N // self.floors, self.floors).mean(1)
        # proportion of rooms whose two occupants are both observed infected
        rooms = Y.reshape(B, 2, N // 2).prod(1).mean(-1, keepdim=True)
        return torch.cat([facility, floors, rooms], dim=-1)


def epidemic_summaries(x: Tensor) -> Tensor:
    """BSL summaries: mean and element-wise SD of the rows of S, ``[B, T, J+2] -> [B, 2(J+2)]``."""
    return torch.cat([x.mean(1), x.std(1)], dim=-1)


class Epidemic(Model):
    r"""The SI epidemic model; setting 1 (``floors=5``) or setting 2 (``floors=10``).

    Arguments:
        floors: $J$ (5 or 10); $N = 60 J$ individuals, parameters
            $(\beta_0, \beta_1..\beta_J, \beta_{J+1})$.
        steps: $T$ (52).
        alpha, gamma, eta: importation, discharge and detection probabilities.
        prior_loc, prior_scale: log-normal prior on every $\beta$ (mean and SD of
            $\log\beta$); defaults ``(-3, 1)`` for 5 floors, ``(-3, 2)`` for 10.
        true_parameters: $\beta^*$ (defaults of the paper).
        room_normalisation, detection: see `EpidemicSimulator` (defaults follow the
            public code of Chatha et al.; ``"n"`` / ``"previous"`` give the paper's prose).
        chunk_size: parameters per vectorised block in ``simulate``.
    """

    summary_fn = staticmethod(epidemic_summaries)

    def __init__(self, floors: int = 5, steps: int = 52, alpha: float = 0.1, gamma: float = 0.05,
                 eta: float = 0.1, prior_loc: float = -3.0, prior_scale: float | None = None,
                 true_parameters=None, room_normalisation: str = "capacity",
                 detection: str = "current", chunk_size: int = 128):
        sim = EpidemicSimulator(floors, steps, alpha, gamma, eta, room_normalisation, detection,
                                chunk_size)
        if prior_scale is None:
            prior_scale = 1.0 if floors <= 5 else 2.0
        if true_parameters is None:
            true_parameters = [0.05] + [0.02 * (k + 1) for k in range(floors)] + [0.05]
        loc, scale = (torch.tensor(v, dtype=torch.float64) for v in (prior_loc, prior_scale))
        prior = independent([LogNormal(loc, scale) for _ in range(floors + 2)])
        self.floors, self.steps = floors, steps
        super().__init__(
            name=f"epidemic{floors}",
            parameter_names=["beta_facility"] + [f"beta_floor{k + 1}" for k in range(floors)]
            + ["beta_room"],
            prior=prior,
            simulator=Simulator(sim.simulate, latent=sim.latent, transform=sim.transform,
                                smooth_transform=sim.smooth_transform, obs_dim=floors + 2),
            true_parameters=true_parameters, n_obs=steps, obs_dim=floors + 2,
            paper_settings=_paper_settings(floors),
        )
        self.epidemic_simulator = sim

    SPREAD_FEATURES = 4

    def floor_spread(self, view: Tensor) -> Tensor:
        r"""How the observed infections spread across the floors, per time: ``vec(S) [..., T (J+2)]``
        -> ``[..., 4 T]`` (entry ``(t, k)`` at ``4 t + k``), for ``ScoreLangevin(data_features=...)``.

        With $p_j(t)$ floor $j$'s prevalence (column $j$ of $S$) and
        $p_j(0^-) = 0$, the four summaries over the floors are

        $$
        \operatorname{sd}_j p_j(t),\quad \max_j p_j(t),\quad \min_j p_j(t),\quad
        \operatorname{cov}_j\big(p_j(t) - p_j(t-1),\ p_j(t-1)\big).
        $$

        Facility-wide transmission lifts every floor alike, floor transmission grows each floor in
        proportion to its own prevalence: a network that sees only the facility and room columns
        (or one floor's) cannot tell the two apart, these summaries can (beyond the paper).
        """
        width, T, J = self.floors + 2, self.steps, self.floors
        if view.shape[-1] != T * width:
            raise ValueError(f"floor_spread takes vec(S) of length T (J+2) = {T * width}, got {view.shape[-1]}")
        p = view.reshape(*view.shape[:-1], T, width)[..., 1:J + 1]  # [..., T, J]
        prev = torch.cat([torch.zeros_like(p[..., :1, :]), p[..., :-1, :]], -2)
        inc = p - prev
        cov = ((inc - inc.mean(-1, keepdim=True)) * (prev - prev.mean(-1, keepdim=True))).mean(-1)
        return torch.stack([p.std(-1), p.amax(-1), p.amin(-1), cov], -1).reshape(*view.shape[:-1], 4 * T)

    def exchangeable_rates(self) -> list[list[int]]:
        r"""The floor rates $\beta_1, \dots, \beta_J$ as one group of exchangeable parameters,
        for ``ScoreLangevin(tied_views=...)`` with `score_views()`: floors have equal sizes,
        floor $F_i = i \bmod J$ and roommates share a floor, so permuting the floors' rates
        permutes the floors' columns of $S$ (and leaves the facility and room columns and
        `floor_spread()` unchanged). One network then serves every floor rate, on the
        facility column and the floor's own column (beyond the paper)."""
        return [list(range(1, self.floors + 1))]

    def score_views(self, see_all: Sequence[str] = (),
                    spread: bool | Sequence[str] = False) -> list[list[int]]:
        r"""Per-parameter data views for ``ScoreLangevin(mode="full", score_views=...)``.

        Indices into $\text{vec}(S)$ (row-major ``[T, J+2]``, entry ``(t, c)`` at
        ``t (J+2) + c``): every rate sees the facility column and its own column (floor ``j``'s
        prevalence for $\beta_j$, the room column for $\beta_{J+1}$); the facility
        rate $\beta_0$ sees the facility and room columns. ``J+2`` lists of ``2T``.

        ``see_all``: names of parameters whose networks see all of $S$ instead
        (``T (J+2)`` indices), e.g. ``("beta_facility", "beta_room")``: telling facility-wide
        from floor transmission needs how infections spread over the floors.
        ``spread``: ``True`` (every view) or the names of the parameters whose views also see the
        `floor_spread()` summaries, appended after $\text{vec}(S)$ (pass
        ``data_features=model.floor_spread``): ``4T`` more indices.
        """
        if isinstance(spread, str):
            raise TypeError(f"spread must be True, False or a sequence of names, got {spread!r}")
        spread_to = set(self.parameter_names) if spread is True else set(spread or ())
        for option, names in (("see_all", see_all), ("spread", spread_to)):
            unknown = sorted(set(names) - set(self.parameter_names))
            if unknown:
                raise ValueError(f"{option}: unknown parameters {unknown}; choose from {self.parameter_names}")
        width = self.floors + 2
        own = [width - 1] + list(range(1, width))  # beta_0 -> room column, beta_j -> column j
        everything = list(range(self.steps * width))
        extra = list(range(self.steps * width, self.steps * (width + self.SPREAD_FEATURES)))
        return [(everything if name in see_all else [t * width + c for c in (0, col) for t in range(self.steps)])
                + (extra if name in spread_to else []) for name, col in zip(self.parameter_names, own)]


def _paper_settings(floors: int) -> dict:
    d = floors + 2
    setting1 = floors <= 5
    N = 8_000 if setting1 else 20_000
    return {
        "setting": 1 if setting1 else 2,
        "repetitions": 100 if setting1 else 50,
        "prior": {"family": "lognormal", "loc": -3.0, "scale": 1.0 if setting1 else 2.0},
        "localization": None if setting1 else {
            "replicates": 100, "iterations": 100, "lr": 1e-1, "smooth_sharpness": 500.0,
            "point_cloud": "rows of S", "cost": 1e4},
        "n_model": {"N": N, "activation": "elu", "hidden": [512, 256, 128],
                    "input_dim": d + 52 * d, "batch": 5, "lr": (1e-4, 1e-5), "epochs": 100,
                    "regularization": None, "samples": 10_000, "chains": 10_000,
                    "table_from": "prior" if setting1 else "q"},
        "npe": {"N": N, "activation": "relu", "hidden": [32, 32, 32], "lr": 1e-3,
                "batch": 4000 if setting1 else 5000, "epochs": 1000 if setting1 else 5000,
                "summary": "flattened S", "reweight": not setting1},
        "abc": {"N": N, "keep": 100, "distance": "W1 on the rows of S", "reweight": not setting1},
        "bsl": {"summaries": "mean and SD of the rows of S", "chains": 10, "length": 1000,
                "burn_in": 200, "simulations_per_iteration": 100 if setting1 else 200},
        "cost": ({"abc": 8e3, "bsl": 1e6, "npe": 8e3, "n_model": 8e3} if setting1 else
                 {"localization": 1e4, "abc": 2e4, "bsl": 2e6, "npe": 2e4, "n_model": 2e4}),
    }
