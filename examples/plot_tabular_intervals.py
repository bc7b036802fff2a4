"""
A table with text columns and missing values, and intervals
===========================================================

The Ames housing table (1,460 houses, 43 text columns, 7,829 empty cells) goes into
``NystromRegressor`` as pandas reads it: the text columns are one-hot encoded inside the model
(target encoded past 32 categories), a numeric column's missing values are filled with its
median beside a missing indicator, and a text column's are a category of their own. The fit's
hold-out residuals then give intervals with a coverage guarantee (``predict_interval``), and
``predict(X, return_std=True)`` the Gaussian-process standard deviation.

Without ``../shared/data`` (the project's data folder) the example makes a frame of the same
kind.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from kernelpath import NystromRegressor

path = Path("../../shared/data/ames/ames.csv.gz")
if path.exists():
    frame = pd.read_csv(path).drop(columns="Id")
    y = np.log(frame.pop("SalePrice").to_numpy(dtype=float))
else:  # a frame like it: a text column with gaps, a numeric one with gaps
    rng = np.random.default_rng(0)
    n = 1460
    hood = rng.choice(["NAmes", "CollgCr", "OldTown", "Edwards", None], size=n)
    area = rng.lognormal(7.3, 0.3, size=n)
    area[rng.uniform(size=n) < 0.1] = np.nan
    frame = pd.DataFrame({"Neighborhood": hood, "GrLivArea": area})
    y = 11 + 0.5 * np.log(np.nan_to_num(area, nan=1500.0)) / 7 + 0.2 * rng.normal(size=n)

rng = np.random.default_rng(0)
test = rng.uniform(size=len(frame)) < 0.2
est = NystromRegressor(random_state=0).fit(frame[~test], y[~test])
print("encoded features:", len(est.encoder_.feature_names_out_), "from", est.n_features_in_)

pred = est.predict(frame[test])
print(f"test RMSE of log price: {np.sqrt(np.mean((pred - y[test]) ** 2)):.4f}")
interval = est.predict_interval(frame[test], coverage=0.9)
inside = (y[test] >= interval[:, 0]) & (y[test] <= interval[:, 1])
print(f"90% intervals cover {inside.mean():.1%} of the test houses")
_, std = est.predict(frame[test], return_std=True)
print(f"posterior standard deviations: median {np.median(std):.3f}, largest {std.max():.3f}")

order = np.argsort(pred)
fig, ax = plt.subplots(figsize=(7, 4))
ax.fill_between(np.arange(len(order)), *interval[order].T, alpha=0.3, label="90% interval")
ax.plot(pred[order], lw=1, label="prediction")
ax.plot(y[test][order], ".", ms=3, label="log sale price")
ax.set_xlabel("test houses, by prediction")
ax.legend()
plt.show()
