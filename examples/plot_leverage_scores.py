"""
Leverage scores and the centers they choose
===========================================

On the one-dimensional design of Alaoui & Mahoney (most points at the borders of [0, 1],
a few in the middle), the ridge leverage scores τ_i(λ) = (K (K + λ n I)⁻¹)_ii are largest
where the points are rare: sampling centers by them covers the middle, where uniform
sampling wastes its centers on the crowded borders. The exact scores are compared with
the two-pass approximation and SQUEAK's estimates.
"""

import matplotlib.pyplot as plt
import numpy as np

from kernelpath import Gaussian, effective_dimension, leverage_scores

rng = np.random.default_rng(0)
n = 1500
middle = rng.random(n) < 0.05
borders = rng.choice([0.0, 1.0], n) + rng.uniform(-0.05, 0.05, n)
x = np.where(middle, rng.uniform(0.3, 0.7, n), borders)
X = np.sort(x)[:, None]
kernel, penalty = Gaussian(0.05), 1e-4

fig, ax = plt.subplots()
for method in ("exact", "approximate", "squeak"):
    tau = leverage_scores(X, kernel, penalty, method=method, random_state=0)
    ax.plot(X[:, 0], tau, ".", ms=3, label=method)
d_eff, d_max = effective_dimension(X, kernel, penalty, method="exact")
ax.set(
    xlabel="x",
    ylabel="ridge leverage score τ_i(λ)",
    yscale="log",
    title=f"ridge leverage scores (d_eff = {d_eff:.0f}, d_max = {d_max:.0f})",
)
ax.legend()
plt.show()
