r"""Data views: what the score network sees of a data set.

The learned likelihood score is a sum over *units* of the data,
$\nabla_u\log p(\mathbf X\mid u) \approx \sum_k s_\phi(u, v_k(\mathbf X))$, and the view
says what a unit is:

- [`SingleObservation`][scorebayes.sbi.views.SingleObservation] (mode ``"single"``, Algorithm 3) and [`IIDDataSet`][scorebayes.sbi.views.IIDDataSet] (mode
  ``"n"``, Algorithm 2): a unit is one i.i.d. observation, ``v_k = X_k``;
- [`WholeDataSet`][scorebayes.sbi.views.WholeDataSet] (mode ``"full"``): one unit, the flattened data set ``vec(X)``;
- [`MarkovBlocks`][scorebayes.sbi.views.MarkovBlocks] (mode ``"markov"``, Remark 4): a unit is a transition
  ``[X_{k-1}, X_k]``.

[`WithFeatures`][scorebayes.sbi.views.WithFeatures] appends summaries of each unit (``data_features``) to any view.

Shapes: one data set ``x [n, p]`` -> ``[m, p_net]``; a table ``x [N, n, p]`` -> ``[N, m, p_net]``.

References:
    - Simulation-based Inference via Langevin Dynamics with Score Matching (Jiang, Wang and Yang, 2025)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["DataView", "SingleObservation", "IIDDataSet", "WholeDataSet", "MarkovBlocks",
           "WithFeatures", "VIEWS", "view_for_mode"]


class DataView:
    """Units of a data set for the score network (identity: one observation a unit)."""

    #: the fewest observations a data set needs
    min_observations = 1
    #: trained on single-observation tables with a debiasing network (Algorithm 3), or on tables of
    #: whole data sets (Algorithm 2)
    single_observations = False
    #: whether the curvature penalty applies to its score matching
    curvature_penalty = True

    def table(self, x: Tensor) -> Tensor:
        """Simulated data sets ``[N, n, p]`` -> network inputs ``[N, m, p_net]``."""
        return x

    def observed(self, x_obs: Tensor) -> Tensor:
        """One data set ``[n, p]`` -> its units ``[m, p_net]``."""
        return self.table(x_obs[None])[0]

    def check(self, x_obs: Tensor) -> None:
        """Refuse a data set this view cannot be built on, with a clear error."""
        if len(x_obs) < self.min_observations:
            raise ValueError(f"{type(self).__name__} needs at least {self.min_observations} observations")


class SingleObservation(DataView):
    """Mode ``"single"``: units are observations; trained on single-observation tables."""

    single_observations = True


class IIDDataSet(DataView):
    """Mode ``"n"``: units are observations; trained on tables of whole i.i.d. data sets."""


class WholeDataSet(DataView):
    """Mode ``"full"``: the whole data set (or its summary) is one unit, ``vec(x)``."""

    curvature_penalty = False

    def table(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], 1, -1)


class MarkovBlocks(DataView):
    r"""Mode ``"markov"``: units are transitions $[x_{k-1}, x_k]$, ``[n - 1, 2p]``."""

    min_observations = 2

    def check(self, x_obs: Tensor) -> None:
        if len(x_obs) < 2:
            raise ValueError("mode='markov' needs at least two observations")

    def table(self, x: Tensor) -> Tensor:
        return torch.cat([x[:, :-1], x[:, 1:]], dim=-1)


class WithFeatures(DataView):
    """``base`` with ``features(view [..., p]) -> [..., k]`` appended to every unit.

    Tables are built ``chunk_elements`` input values at a time into a float32 table (the networks
    train in float32): the features of a whole large float64 table at once can exceed memory.
    """

    def __init__(self, base: DataView, features: Callable[[Tensor], Tensor], chunk_elements: int = 1 << 24):
        self.base, self.features, self.chunk_elements = base, features, chunk_elements
        self.min_observations = base.min_observations
        self.single_observations, self.curvature_penalty = base.single_observations, base.curvature_penalty

    def check(self, x_obs: Tensor) -> None:
        self.base.check(x_obs)

    def append(self, view: Tensor) -> Tensor:
        """``view [..., p]`` -> ``[..., p + k]``, checking the features' shape and values."""
        extra = torch.as_tensor(self.features(view))
        if extra.shape[:-1] != view.shape[:-1] or extra.dim() != view.dim():
            raise ValueError(f"data_features must map the network's view [..., p] = {tuple(view.shape)} "
                             f"to [..., k], got {tuple(extra.shape)}")
        if not torch.isfinite(extra).all():
            raise ValueError("data_features returned non-finite values")
        return torch.cat([view, extra.to(view.dtype)], -1)

    def observed(self, x_obs: Tensor) -> Tensor:
        return self.append(self.base.observed(x_obs))

    def table(self, x: Tensor, chunk_elements: int | None = None) -> Tensor:
        chunk_elements = chunk_elements or self.chunk_elements
        rows = max(1, chunk_elements // max(1, x[0].numel()))
        first = self.append(self.base.table(x[:rows]))
        out = torch.empty(len(x), *first.shape[1:], dtype=torch.float32)
        out[:rows] = first
        for start in range(rows, len(x), rows):
            out[start : start + rows] = self.append(self.base.table(x[start : start + rows]))
        return out


#: the string shortcut of ``ScoreLangevin(mode=...)`` -> its data view
VIEWS: dict[str, type[DataView]] = {"single": SingleObservation, "n": IIDDataSet,
                                    "full": WholeDataSet, "markov": MarkovBlocks}


def view_for_mode(mode: str, data_features: Callable[[Tensor], Tensor] | None = None) -> DataView:
    """The data view of ``mode``, with ``data_features`` appended if given."""
    if mode not in VIEWS:
        raise ValueError(f"mode must be one of {tuple(VIEWS)}, got {mode!r}")
    view = VIEWS[mode]()
    return view if data_features is None else WithFeatures(view, data_features)
