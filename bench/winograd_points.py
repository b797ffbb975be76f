#!/usr/bin/python3
"""Rounding error of Winograd F(4x4, 3x3) for a choice of interpolation points, in numpy.

    /usr/bin/python3 bench/winograd_points.py

Builds A^T, G and B^T from the points (plus infinity, Lavin and Gray's construction with the
1/N_p factors in G; B^T solved from the identity A^T (G g . B^T d) = the correlation), then
computes 400 tiles of 4x4 outputs summed over 128 channels in float32 (U = G g G^T made in
float64 and rounded, as src/kernels/gemm/conv_winograd.c does; V, the channel sums and the
output transform in float32) and the same outputs as direct float32 sums, both against float64.
Prints the RMS and max error as fractions of the outputs' RMS. Scaling a point's row or column
by a power of two changes no rounding, so only the points matter.
"""
from fractions import Fraction as Fr

import numpy as np

M, R = 4, 3
N = M + R - 1


def matrices(points):
    pts = [Fr(p) for p in points]
    at = np.zeros((M, N))
    g = np.zeros((N, R))
    for j, p in enumerate(pts):
        norm = Fr(1)
        for l, q in enumerate(pts):
            if l != j:
                norm *= p - q
        for i in range(M):
            at[i, j] = float(p ** i)
        for k in range(R):
            g[j, k] = float(p ** k / norm)
    at[M - 1, N - 1] = 1
    g[N - 1, R - 1] = 1
    rows, rhs = [], []
    for i in range(M):
        for k in range(R):
            for j in range(N):
                row = np.zeros((N, N))
                for p in range(N):
                    row[p, j] = at[i, p] * g[p, k]
                rows.append(row.ravel())
                rhs.append(1.0 if j == i + k else 0.0)
    bt = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0].reshape(N, N)
    return at, g, bt


def errors(points, channels=128, tiles=400, seed=0):
    rng = np.random.default_rng(seed)
    at, g, bt = matrices(points)
    d = rng.standard_normal((tiles, channels, N, N))
    w = rng.standard_normal((channels, R, R)) / np.sqrt(9 * channels)
    truth = np.zeros((tiles, M, M))
    for i in range(M):
        for j in range(M):
            truth[:, i, j] = np.einsum("tcab,cab->t", d[:, :, i:i + R, j:j + R], w)
    f = np.float32
    u = np.einsum("pk,ckl,ql->cpq", g, w, g).astype(f)
    d32, bt32, at32 = d.astype(f), bt.astype(f), at.astype(f)
    v = (bt32 @ d32 @ bt32.T).astype(f)
    m = np.zeros((tiles, N, N), dtype=f)
    for c in range(channels):
        m = (m + u[c] * v[:, c]).astype(f)
    y = (at32 @ m @ at32.T).astype(f)
    direct = np.zeros((tiles, M, M), dtype=f)
    w32 = w.astype(f)
    for c in range(channels):
        for a in range(R):
            for b in range(R):
                direct = (direct + d32[:, c, a:a + M, b:b + M] * w32[c, a, b]).astype(f)
    rms = np.sqrt(np.mean(truth ** 2))
    return (np.sqrt(np.mean((y - truth) ** 2)) / rms, np.abs(y - truth).max() / rms,
            np.sqrt(np.mean((direct - truth) ** 2)) / rms)


def main():
    half = Fr(1, 2)
    print("| points (and infinity) | Winograd RMS | Winograd max | direct RMS |")
    print("|---|---|---|---|")
    for pts in [(0, 1, -1, 2, -2), (0, 1, -1, half, -half), (0, 1, -1, half, -2), (0, 1, -1, 2, -half)]:
        e = errors(pts)
        print("| %s | %.3g | %.3g | %.3g |" % (", ".join(str(p) for p in pts), *e))


if __name__ == "__main__":
    main()
