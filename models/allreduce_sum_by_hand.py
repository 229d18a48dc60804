"""A user-written golden, the template for your own: the all-reduce sum, by hand.

`--expect models/allreduce_sum_by_hand.py:allreduce_sum` demands the same result as the
built-in `--expect allreduce-sum`; see README.md beside this file for the contract.
"""

import numpy as np


def allreduce_sum(inputs: np.ndarray) -> np.ndarray:
    """Every rank's output row is the element-wise sum of all ranks' input rows."""
    total = inputs.sum(axis=0, dtype=np.float64)
    return np.broadcast_to(total, inputs.shape).copy()
