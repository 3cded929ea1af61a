"""Compiled loss of the optimisers (numba, cached on disk).

The identification loss is a quadratic in theta = (m, c), c_i = mu_i N_i the cells'
friction forces (``N_i`` the normal load under the support model):

    L = |w - Q m - G c|^2 / S = (w.w - 2 b . theta + theta^T H theta) / S

with H = [Q G]^T [Q G] (2n, 2n) and b = [Q G]^T w, formed once per training set. One
evaluation for K hypotheses then costs K (2n)^2 operations, independent of the number of
steps S (the residual form costs K 3S 2n: 15x more for five pushes), in one thread (a
loaded two-core machine made BLAS's threads 14x slower than one on these small products).
The expanded form loses the loss's absolute accuracy near zero (round-off of w.w, about
1e-15 of it); the optimisers only compare losses of nearby hypotheses, and what
identification reports is evaluated from the residuals.
"""

from __future__ import annotations

from numba import njit
import numpy as np


@njit(cache=True)
def quadratic_loss_grad(
    H: np.ndarray,
    b: np.ndarray,
    ww: float,
    S: int,
    m: np.ndarray,
    N: np.ndarray,
    mu: np.ndarray,
    loss: np.ndarray,
    g_m: np.ndarray,
    g_c: np.ndarray,
    want_grad: bool,
) -> None:
    """Losses (K,) into ``loss`` and, with ``want_grad``, the partial derivatives d/dm at
    fixed friction forces and d/dc (K, n) into g_m, g_c, of hypotheses m, mu (K, n) whose
    cells' normal loads are ``N`` (K, n) [N] (friction forces c = mu N). The caller adds
    the loads' dependence on the masses (the support model's dN/dm)."""
    K, n = m.shape
    theta = np.empty(2 * n)
    Ht = np.empty(2 * n)
    for k in range(K):
        for i in range(n):
            theta[i] = m[k, i]
            theta[n + i] = mu[k, i] * N[k, i]
        quad = 0.0
        lin = 0.0
        for i in range(2 * n):
            s = 0.0
            for j in range(2 * n):
                s += H[i, j] * theta[j]
            Ht[i] = s
            quad += theta[i] * s
            lin += b[i] * theta[i]
        loss[k] = (ww - 2.0 * lin + quad) / S
        if not want_grad:
            continue
        for i in range(n):
            d_m = 2.0 * (Ht[i] - b[i]) / S
            d_c = 2.0 * (Ht[n + i] - b[n + i]) / S
            g_m[k, i] = d_m
            g_c[k, i] = d_c


@njit(cache=True)
def gram(A: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """A^T A (p, p), A^T w (p,) and w.w of A (r, p), w (r,): one pass over the rows."""
    r, p = A.shape
    H = np.zeros((p, p))
    b = np.zeros(p)
    ww = 0.0
    for row in range(r):
        wr = w[row]
        ww += wr * wr
        for i in range(p):
            a = A[row, i]
            if a == 0.0:
                continue
            b[i] += a * wr
            for j in range(i, p):
                H[i, j] += a * A[row, j]
    for i in range(p):
        for j in range(i):
            H[i, j] = H[j, i]
    return H, b, ww


def warm_up() -> None:
    """Load the compiled loss (numba's disk cache): a process's first call pays for it."""
    H, b, ww = gram(np.ones((3, 2)), np.ones(3))
    one = np.ones((1, 1))
    quadratic_loss_grad(H, b, ww, 1, one, one, one, np.zeros(1), np.zeros((1, 1)), one, True)
