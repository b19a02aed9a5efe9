"""Samplers driven by scores or log-densities. Import the modules directly, e.g.
``from scorebayes.samplers.langevin import run_langevin``."""
