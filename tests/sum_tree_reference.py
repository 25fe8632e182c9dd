"""docs/dqn.md 6.1-6.2 read literally, in numpy, for the baselines' sampling tests: a
heap-layout sum tree rebuilt from its leaves, then one walk from the root per u."""

import numpy as np


def sum_tree_walk(leaves, us, dtype=np.float64):
    """Leaves reached by walking from the root for every u (left when u < left sum, else
    subtract it and go right), with every sum and difference rounded to ``dtype``."""
    c = len(leaves)
    tree = np.zeros(2 * c, dtype)
    tree[c:] = leaves
    for node in range(c - 1, 0, -1):
        tree[node] = tree[2 * node] + tree[2 * node + 1]
    out = []
    for u in np.asarray(us, dtype):
        node = 1
        while node < c:
            if u < tree[2 * node]:
                node = 2 * node
            else:
                u = dtype(u - tree[2 * node])
                node = 2 * node + 1
        out.append(node - c)
    return out, tree
