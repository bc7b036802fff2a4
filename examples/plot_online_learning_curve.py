"""
Learning online: a prequential learning curve
=============================================

``IncrementalRLSClassifier`` learns sample by sample (rank-one Cholesky updates, O(D²)
each) and adds a class the first time it sees its label. ``prequential_errors`` predicts
each batch with the model as it stands, then updates: the curve is the error on data the
model has not seen yet. A class that appears only after 1000 samples is learned on the fly.
"""

import matplotlib.pyplot as plt
import numpy as np

from kernelpath import Gaussian, IncrementalRLSClassifier, RandomFourierFeatures
from kernelpath.plotting import plot_learning_curve, prequential_errors

rng = np.random.default_rng(0)
centers = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
labels = np.concatenate([rng.integers(0, 2, 1000), rng.integers(0, 3, 2000)])
X = centers[labels] + rng.standard_normal((len(labels), 2))

clf = IncrementalRLSClassifier(
    features=RandomFourierFeatures(Gaussian(2.0), n_features=200, random_state=0)
)
curve = prequential_errors(clf, X, labels, batch_size=100)
print("classes seen:", clf.classes_)

ax = plot_learning_curve(curve, label="IncrementalRLSClassifier")
ax.axvline(1000, color="gray", ls=":", label="third class appears")
ax.legend()
plt.show()
