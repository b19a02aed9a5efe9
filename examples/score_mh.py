"""Score-based Metropolis-Hastings on samples of a 2-d target (the two moons of score_mh.toml).

    python examples/score_mh.py

Small settings (short training, 100 chains of 200 steps), so that it runs in seconds. Writes
score_mh_samples.csv (the draws) in the current folder.
"""

from pathlib import Path

import numpy as np
import torch

from scorebayes import score_mh

DATA = Path(__file__).resolve().parent / "moons_samples.csv"


def main() -> None:
    data = torch.tensor(np.loadtxt(DATA, delimiter=",", skiprows=1), dtype=torch.float32)   # [N, 2]
    draws, info = score_mh(data, score_model="ism", proposal="mala", acceptance="learned",
                           step_size=0.05, chains=100, steps=200, keep=20, score_epochs=30,
                           acceptance_epochs=50, generator=torch.Generator().manual_seed(0))
    flat = draws.reshape(-1, data.shape[1]).numpy()               # [chains * keep, d]
    print(f"{len(flat)} draws, acceptance rate {info['acceptance_rate']:.2f}")
    print("mean of the draws", flat.mean(0), "of the data", data.mean(0).numpy())
    np.savetxt("score_mh_samples.csv", flat, delimiter=",", header="x,y", comments="")


if __name__ == "__main__":
    main()
