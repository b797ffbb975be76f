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

    /usr/bin/python3 bench/winograd_points.py --stages

takes the standard points' error apart: each stage rounded alone, then all of them with the
channel sums in one run and in blocks of 32, 16 and 8.
"""
import sys
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


def stage_errors(points, channels=64, tiles=400, seed=0, rounded=("v", "u", "sum", "out"), block=0):
    """RMS error (as a fraction of the outputs' RMS) of F(4x4, 3x3) with only the stages in
    `rounded` in float32, the others in float64: v (the input transform), u (the weights'), sum
    (the channel sums: one FMA per channel, added into a running total every `block` channels
    when block > 0, as src/kernels/gemm/conv_winograd.c's FLUSH_CHANNELS) and out (the output
    transform). The input itself is float32 throughout."""
    rng = np.random.default_rng(seed)
    at, g, bt = matrices(points)
    d = rng.standard_normal((tiles, channels, N, N)).astype(np.float32).astype(np.float64)
    w = rng.standard_normal((channels, R, R)) / np.sqrt(9 * channels)
    truth = np.zeros((tiles, M, M))
    for i in range(M):
        for j in range(M):
            truth[:, i, j] = np.einsum("tcab,cab->t", d[:, :, i:i + R, j:j + R], w)
    f, f64 = np.float32, np.float64
    u = np.einsum("pk,ckl,ql->cpq", g, w, g)
    if "u" in rounded:
        u = u.astype(f).astype(f64)
    if "v" in rounded:
        v = (bt.astype(f) @ d.astype(f) @ bt.astype(f).T).astype(f).astype(f64)
    else:
        v = bt @ d @ bt.T
    if "sum" in rounded:
        m = np.zeros((tiles, N, N))
        total = np.zeros((tiles, N, N))
        for c in range(channels):
            m = (m + u[c] * v[:, c]).astype(f).astype(f64)  # an FMA: the product exact, one rounding
            if block and (c + 1) % block == 0:
                total, m = (total + m).astype(f).astype(f64), np.zeros_like(m)
        m = (total + m).astype(f).astype(f64)
    else:
        m = np.einsum("cpq,tcpq->tpq", u, v)
    if "out" in rounded:
        y = (at.astype(f) @ m.astype(f) @ at.astype(f).T).astype(f)
    else:
        y = at @ m @ at.T
    rms = np.sqrt(np.mean(truth ** 2))
    return np.sqrt(np.mean((y - truth) ** 2)) / rms


def main():
    if "--stages" in sys.argv:
        pts = (0, 1, -1, 2, -2)
        print("| F(4x4), 64 channels, float32 in | RMS error |")
        print("|---|---|")
        for stage in ("v", "u", "sum", "out"):
            print("| only %s | %.3g |" % (stage, stage_errors(pts, rounded=(stage,))))
        for block in (0, 32, 16, 8):
            label = "in blocks of %d" % block if block else "in one run"
            print("| all, channel sums %s | %.3g |" % (label, stage_errors(pts, block=block)))
        return
    half = Fr(1, 2)
    print("| points (and infinity) | Winograd RMS | Winograd max | direct RMS |")
    print("|---|---|---|---|")
    for pts in [(0, 1, -1, 2, -2), (0, 1, -1, half, -half), (0, 1, -1, half, -2), (0, 1, -1, 2, -half)]:
        e = errors(pts)
        print("| %s | %.3g | %.3g | %.3g |" % (", ".join(str(p) for p in pts), *e))


if __name__ == "__main__":
    main()
