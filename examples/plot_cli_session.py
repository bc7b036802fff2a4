"""
A command-line session
======================

``kernelpath fit``, ``predict``, ``evaluate`` and ``inspect`` on files, run here as a
user would in a shell (each command a new process). ``inspect --plot`` writes the
validation error along the path as a PNG, shown below.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

folder = Path(tempfile.mkdtemp())
rng = np.random.default_rng(0)
X = rng.standard_normal((3000, 4))
price = np.sin(X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.standard_normal(3000)
frame = pd.DataFrame(X, columns=["a", "b", "c", "d"]).assign(price=price)
frame[:2500].to_csv(folder / "train.csv", index=False)
frame[2500:].to_csv(folder / "test.csv", index=False)

commands = [
    "fit train.csv --target price --output model.kp --n-centers 300 --no-progress",
    "predict model.kp test.csv --output pred.csv --no-progress",
    "evaluate model.kp test.csv --target price --no-progress",
    "inspect model.kp --plot path.png",
]
for command in commands:
    print("$ kernelpath", command)
    run = subprocess.run(
        [sys.executable, "-m", "kernelpath", *command.split()],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    print(run.stdout)

fig, ax = plt.subplots()
ax.imshow(mpimg.imread(folder / "path.png"))
ax.set_axis_off()
plt.show()
