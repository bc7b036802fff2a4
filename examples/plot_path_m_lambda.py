"""
The regularization path over (m, λ)
====================================

The number of Nyström centers m and the penalty λ both regularize. With
``n_centers="auto"`` the estimator computes the incremental Nyström path (the thesis's
Algorithm 4.1): every (m, λ) of the grid for about the price of one fit at the largest m,
each scored on the hold-out. The heat map is the validation error over the grid, the
chosen point marked.
"""

import matplotlib.pyplot as plt

from kernelpath import Gaussian, NystromRegressor
from kernelpath.datasets import make_sin_regression

X, y, w = make_sin_regression(4000, 5, noise=0.1, random_state=0)
X_test, y_test, _ = make_sin_regression(1000, 5, noise=0.1, random_state=1, w=w)

est = NystromRegressor(Gaussian(2.0), n_centers="auto", solver="direct", random_state=0)
est.fit(X, y)
print("chosen:", est.best_params_)
print("test RMSE:", float(((est.predict(X_test) - y_test) ** 2).mean() ** 0.5))

ax = est.path_.plot()
ax.set_title("validation error over (m, λ)")
plt.show()
