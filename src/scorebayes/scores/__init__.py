"""Learned likelihood scores: networks, losses (implicit / weighted score matching, curvature,
debiasing) and their training loops."""

from .losses import *  # noqa: F403
from .networks import *  # noqa: F403
from .training import *  # noqa: F403
