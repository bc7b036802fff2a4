"""
One width per feature (ARD)
===========================

``Gaussian(sigma="ard")`` learns one length scale per feature by L-BFGS on a Nyström
model's validation error. Here only the first two of eight features matter: their widths
come out small, the others large (irrelevant), and the plot ranks the features by their
spread / σ (widths compared in standardized units).
"""

import matplotlib.pyplot as plt
import numpy as np

from kernelpath import Gaussian, NystromRegressor
from kernelpath.plotting import plot_widths

rng = np.random.default_rng(0)
X = rng.standard_normal((1000, 8))
y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.05 * rng.standard_normal(1000)

one = NystromRegressor(n_centers=150, random_state=0).fit(X, y)
ard = NystromRegressor(Gaussian(sigma="ard"), n_centers=150, random_state=0).fit(X, y)
print("widths:", np.round(ard.kernel_.sigma, 2))
print("learned widths kept by the hold-out:", ard.ard_info_["chosen"])

plot_widths(ard, feature_names=[f"x{i}" for i in range(8)])
plt.show()
