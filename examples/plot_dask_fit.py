"""
A fit on a Dask cluster
=======================

A dask array chunked by rows fits on the workers of the active ``distributed.Client``:
one task per chunk and product, the m-vectors summed in a tree, the centers broadcast
once; ``predict`` returns a dask array. Here the cluster is a ``LocalCluster`` in this
process; on SLURM, Kubernetes or a scheduler address only the ``Client`` changes (see
"Running on a cluster"). The plot compares the cluster's predictions with those of the
same fit in memory.
"""

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster

from kernelpath import Gaussian, NystromRegressor
from kernelpath.datasets import make_sin_regression

X, y, _ = make_sin_regression(20_000, 5, noise=0.1, random_state=0)
params = {"kernel": Gaussian(2.0), "n_centers": 300, "random_state": 0}

with LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster:
    with Client(cluster):
        Xd = da.from_array(X, chunks=(5000, -1))
        on_cluster = NystromRegressor(**params).fit(Xd, y)
        pred_cluster = on_cluster.predict(Xd[:2000]).compute()

in_memory = NystromRegressor(**params).fit(X, y)
pred_memory = in_memory.predict(X[:2000])
print("largest difference:", float(np.abs(pred_cluster - pred_memory).max()))

fig, ax = plt.subplots()
ax.plot(pred_memory, pred_cluster, ".", ms=2)
ax.set(
    xlabel="prediction, in memory",
    ylabel="prediction, on the cluster",
    title="the same model, fit on a LocalCluster",
)
plt.show()
