"""The compiled loops of ``auditkit.mechanisms.laplace_uniform.pair_log_density_sums`` (numba, parallel over pairs, cached
on disk). Imported on first use only: numba takes a while to import, and most runs never need these loops.

For each pair q of output t = rows[q] and candidate j = columns[q], both return

    sum_i h(min(v_i, r)) - v_i,        v_i = c[j] |ys[t, i] - xs[j, i]|,

with h the centre correction of the Laplace + uniform density (``auditkit.mechanisms.laplace_uniform``).
"""
import math

import numba
import numpy as np


@numba.njit(parallel=True, fastmath=True, cache=True)
def interpolated_sums(ys, xs, rows, columns, c, r, k):
    """h by Horner's rule on the coefficients k (lowest degree first, 25 of them) of its interpolant in
    z = 2u/r - 1, written out so that the compiler vectorises the loop over coordinates."""
    out = np.empty(len(rows))
    d = ys.shape[1]
    s = 2.0 / r
    for q in numba.prange(len(rows)):
        y, x, scale = ys[rows[q]], xs[columns[q]], c[columns[q]]
        total = 0.0
        for i in range(d):
            v = scale * abs(y[i] - x[i])
            z = min(v, r) * s - 1.0
            p = k[24]
            p = p * z + k[23]
            p = p * z + k[22]
            p = p * z + k[21]
            p = p * z + k[20]
            p = p * z + k[19]
            p = p * z + k[18]
            p = p * z + k[17]
            p = p * z + k[16]
            p = p * z + k[15]
            p = p * z + k[14]
            p = p * z + k[13]
            p = p * z + k[12]
            p = p * z + k[11]
            p = p * z + k[10]
            p = p * z + k[9]
            p = p * z + k[8]
            p = p * z + k[7]
            p = p * z + k[6]
            p = p * z + k[5]
            p = p * z + k[4]
            p = p * z + k[3]
            p = p * z + k[2]
            p = p * z + k[1]
            p = p * z + k[0]
            total += p - v
        out[q] = total
    return out


@numba.njit(parallel=True, fastmath=True, cache=True)
def exact_sums(ys, xs, rows, columns, c, r, log_sinh_r):
    """h in closed form, ln(1 - e^-r cosh v) as the sum of two non-negative terms (no cancellation), where the
    interpolant is not accurate enough."""
    out = np.empty(len(rows))
    d = ys.shape[1]
    for q in numba.prange(len(rows)):
        y, x, scale = ys[rows[q]], xs[columns[q]], c[columns[q]]
        total = 0.0
        for i in range(d):
            v = scale * abs(y[i] - x[i])
            total -= v
            if v < r:
                total += math.log(-math.expm1(v - r) - 0.5 * math.exp(v - r) * math.expm1(-2 * v)) + v - log_sinh_r
        out[q] = total
    return out
