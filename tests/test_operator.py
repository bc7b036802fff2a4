"""The kernel operator against dense products, cached and streamed, one and two threads."""

import numpy as np
import pytest

from kernelpath import Gaussian, KernelOperator, Laplacian, Polynomial


@pytest.fixture
def data(rng):
    X = rng.standard_normal((1003, 5))
    C = rng.standard_normal((61, 5))
    return X, C


@pytest.mark.parametrize("cache", [True, False])
@pytest.mark.parametrize("n_jobs", [1, 2])
@pytest.mark.parametrize("kernel", [Gaussian(1.5), Laplacian(2.0), Polynomial(2)])
def test_products_match_dense(data, rng, cache, n_jobs, kernel):
    X, C = data
    Kd = kernel(X, C)
    # a tiny budget forces many small blocks when streaming
    op = KernelOperator(
        X, C, kernel, memory_budget=2**20 if not cache else "64MB", cache=cache, n_jobs=n_jobs
    )
    assert op.cached == cache
    op.block_rows = 97  # many uneven blocks per worker
    B = rng.standard_normal((61, 3))
    A = rng.standard_normal((1003, 3))
    w = rng.random(1003)
    np.testing.assert_allclose(op.matvec(B), Kd @ B, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(op.matvec(B[:, 0]), Kd @ B[:, 0], rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(op.rmatvec(A), Kd.T @ A, rtol=1e-11, atol=1e-10)
    np.testing.assert_allclose(op.fused(B), Kd.T @ (Kd @ B), rtol=1e-11, atol=1e-9)
    out, KB = op.fused(B, weights=w, return_matvec=True)
    np.testing.assert_allclose(out, Kd.T @ (w[:, None] * (Kd @ B)), rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(KB, Kd @ B, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(op.gram(), Kd.T @ Kd, rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(op.gram(w), Kd.T @ (w[:, None] * Kd), rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(op.center_gram(), kernel(C, C), rtol=1e-12, atol=1e-12)


def test_float32_operator(data, rng):
    X, C = data
    op = KernelOperator(X.astype(np.float32), C.astype(np.float32), Gaussian(1.5))
    B = rng.standard_normal((61, 2)).astype(np.float32)
    out = op.fused(B)
    assert out.dtype == np.float32
    Kd = Gaussian(1.5)(X, C)
    np.testing.assert_allclose(out, Kd.T @ (Kd @ B), rtol=1e-4, atol=1e-3)


def test_cache_respects_budget(data, rng):
    X, _ = data
    C = rng.standard_normal((200, 5))
    big = KernelOperator(X, C, Gaussian(1.0), memory_budget="1GB")
    assert big.cached
    small = KernelOperator(X, C, Gaussian(1.0), memory_budget=2**20)  # K_nm is 1.6 MB
    assert not small.cached
    with pytest.raises(ValueError, match="memory_budget"):
        KernelOperator(X, C, Gaussian(1.0), memory_budget=2**20, cache=True)
    # the streamed blocks of both workers stay inside the budget
    assert small.block_rows * small.m * 8 * 2 * small.n_jobs <= small.budget


def test_streamed_blocks_have_the_rows_the_distances_gemm_needs(rng):
    """Past m = 4,096 in float64 (2,048 for wide data), 4 MB of a row block are too few
    rows for the GEMM of the distances: at least 128 rows (within 24 MiB for narrow data),
    256 for data of 256 features or more; the budget still bounds them, and sparse rows
    keep 4 MB."""
    import scipy.sparse as sp

    from kernelpath.operators import blocks as K

    assert K.streamed_block_rows(2000 * 8, 20) == 4 * 1024**2 // 16000  # 262, as before
    assert K.streamed_block_rows(20_000 * 8, 20) == 128  # 4 MB: 26 rows
    assert K.streamed_block_rows(50_000 * 8, 20) == 24 * 1024**2 // 400_000  # 62
    assert K.streamed_block_rows(50_000 * 8, 784) == 256
    assert K.streamed_block_rows(10**6 * 8, 20) == 16
    X = rng.standard_normal((300, 300))
    C = np.tile(X, (30, 1))[:9000]  # m = 9,000: 4 MB hold 58 rows
    assert KernelOperator(X, C, Gaussian(20.0), memory_budget="1GB").block_rows == 256
    assert KernelOperator(X[:, :20], C[:, :20], Gaussian(5.0), "1GB").block_rows == 128
    tight = KernelOperator(X[:, :20], C[:, :20], Gaussian(5.0), memory_budget="8MB", cache=False)
    assert tight.block_rows * tight.m * 8 * 2 * tight.n_jobs <= tight.budget
    Xs = sp.random(300, 20, density=0.05, format="csr", random_state=0)
    Cs = sp.random(9000, 20, density=0.05, format="csr", random_state=1)
    sparse = KernelOperator(Xs, Cs, Gaussian(5.0), memory_budget="1GB")
    assert sparse.sparse and sparse.block_rows == 4 * 1024**2 // (9000 * 8)
    # stream_bytes (what the layout rule leaves the operators) is these blocks at full size
    for Xo, Co, sp_ in ((X[:, :20], C[:, :20], False), (Xs, Cs, True)):
        full = KernelOperator(Xo, Co, Gaussian(5.0), "1GB", cache=False)
        rows, per_row = K.block_plan(9000, 20, 8, sparse=sp_)
        assert full.block_rows == rows
        assert K.stream_bytes(9000, 20, 8, 2, sparse=sp_) == 2 * rows * per_row
        assert rows * per_row * full.n_jobs <= full.budget
    assert K.stream_bytes(9000, 20, 8, 2) > 2 * 128 * 9000 * 8 * 2  # block and product
    for call, name in (
        (lambda: K.stream_bytes(9000, 20, 8, 0), "n_jobs"),
        (lambda: K.block_plan(-1, 20, 8), "m"),
        (lambda: K.block_plan(9000, -2, 8), "n_features"),
    ):
        with pytest.raises(ValueError, match=name):
            call()
    with pytest.raises(TypeError, match="itemsize"):
        K.block_plan(9000, 20, 8.0)


def test_release_and_recompute(data, rng):
    X, C = data
    op = KernelOperator(X, C, Gaussian(1.0), memory_budget="1GB")
    B = rng.standard_normal(61)
    first = op.matvec(B)
    assert op.cache.K is not None
    op.release()
    assert op.cache.K is None
    np.testing.assert_allclose(op.matvec(B), first)


def test_operator_shape_errors(data):
    X, C = data
    with pytest.raises(ValueError, match="same number of columns"):
        KernelOperator(X, C[:, :3], Gaussian(1.0))
    op = KernelOperator(X, C, Gaussian(1.0))
    with pytest.raises(ValueError, match="B must have 61 rows"):
        op.matvec(np.ones(60))
    with pytest.raises(ValueError, match="A must have 1003 rows"):
        op.rmatvec(np.ones(3))
    with pytest.raises(ValueError, match="expected_passes must be an integer >= 1"):
        KernelOperator(X, C, Gaussian(1.0), expected_passes=0)
    with pytest.raises(TypeError, match="expected_passes"):
        KernelOperator(X, C, Gaussian(1.0), expected_passes=2.5)
    with pytest.raises(ValueError, match="cache must be"):
        KernelOperator(X, C, Gaussian(1.0), cache="yes")


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_partial_cache(rng, n_jobs):
    """When K_nm does not fit, every worker caches the first rows of its chunk and streams
    the rest; products are the same on the pass that fills the cache and the ones after."""
    X = rng.standard_normal((1003, 5))
    C = rng.standard_normal((400, 5))  # K_nm: 3.2 MB; 60% of 2 MiB holds 39% of it
    Kd = Gaussian(1.5)(X, C)
    op = KernelOperator(X, C, Gaussian(1.5), memory_budget=2 * 1024**2, n_jobs=n_jobs)
    assert not op.cached and 0.35 < op.cached_fraction < 0.42
    assert all(c > a for a, _, c, _ in op.cache.chunks)  # every worker caches part of its rows
    assert op.n_cached * 400 * 8 <= 0.6 * op.budget
    op.block_rows = 97
    B = rng.standard_normal((400, 2))
    w = rng.random(1003)
    for _ in range(2):
        np.testing.assert_allclose(op.fused(B, w), Kd.T @ (w[:, None] * (Kd @ B)), rtol=1e-11)
        np.testing.assert_allclose(op.matvec(B), Kd @ B, rtol=1e-11, atol=1e-12)
    assert op.cache.filled


def test_cache_or_stream_decision(rng):
    """With expected_passes the first product times the page faults of the cache; a solve
    that makes one pass cannot gain from a cache and streams after the probe, with the same
    products."""
    X = rng.standard_normal((4000, 5))
    C = rng.standard_normal((300, 5))
    Kd = Gaussian(1.5)(X, C)
    B = rng.standard_normal(300)
    op = KernelOperator(X, C, Gaussian(1.5), memory_budget="1GB", expected_passes=1)
    op.block_rows = 100
    np.testing.assert_allclose(op.fused(B), Kd.T @ (Kd @ B), rtol=1e-11)
    assert all(not p[3] for p in op.cache_probe.values())
    # the probe's warm-up block and its two timed blocks stay cached, the rest is streamed
    assert op.n_cached == len(op.cache.chunks) * 300
    np.testing.assert_allclose(op.fused(B), Kd.T @ (Kd @ B), rtol=1e-11)
    op.release()  # the next product decides again
    assert op.n_cached == 4000 and op.cache_probe == {}


def test_cache_decision_rule(rng):
    """The rule itself: cache when the faults of a row cost less than the passes save."""
    X = rng.standard_normal((100, 3))
    op = KernelOperator(X, X[:50], Gaussian(1.0), memory_budget="1GB", n_jobs=1)
    row_read = 50 * 8 / 8e9
    compute = 10e-6 * 100  # 10 us per row to compute, 100 rows probed
    # saving per row: 19 passes x (10 us - read); faults of 1 us per row: cache
    assert op.cache._decision(0, compute, 1e-6 * 100, 100, 20)[0]
    # faults of 500 us per row, more than 19 passes save: stream
    assert not op.cache._decision(0, compute, 500e-6 * 100, 100, 20)[0]
    # faults of 120 us per row: 19 passes save ~180 us, but not twice the faults: stream
    assert not op.cache._decision(0, compute, 120e-6 * 100, 100, 20)[0]
    # one pass saves nothing
    assert not op.cache._decision(0, compute, 1e-9, 100, 1)[0]
    assert compute / 100 > row_read


def test_dense_stays_inside_the_budget(rng):
    """With K_nm cached only in part, dense() computes the whole matrix without filling the
    partial cache beside it (both together would exceed the budget)."""
    X = rng.standard_normal((1003, 5))
    C = rng.standard_normal((400, 5))  # 3.2 MB: fits the 4 MiB budget, not its cache share
    op = KernelOperator(X, C, Gaussian(1.5), memory_budget=4 * 1024**2)
    assert 0 < op.cached_fraction < 1
    np.testing.assert_allclose(op.dense(), Gaussian(1.5)(X, C), rtol=1e-12, atol=1e-14)
    assert op.cache.K is None
    full = KernelOperator(X, C, Gaussian(1.5), memory_budget="64MB", expected_passes=1)
    K = full.dense()
    assert full.cached and full.cache.K is K  # all of it cached: the dense matrix is the cache
    np.testing.assert_allclose(K, Gaussian(1.5)(X, C), rtol=1e-12, atol=1e-14)


def test_float32_products_widen_pieces_of_at_least_64_rows_inside_the_budget(rng):
    """A float32 operator's float64 products widen its blocks piece by piece; at large m a
    piece has ``PRODUCT_MIN_ROWS`` rows (1 MB would be 6 rows at m = 20,000, a
    memory-bound product), each worker's piece is counted before its blocks
    (``stream_bytes``, the operator's block rows) and the products are those of the
    float32 matrix summed in float64, computed here densely."""
    from kernelpath.operators import blocks as K

    m = 20_000
    assert K.wide_piece_rows(m, 256) == K.PRODUCT_MIN_ROWS == 64
    assert K.wide_piece_rows(m, 40) == 40  # at most a block's rows
    assert K.wide_piece_rows(500, 4096) == K.WIDE_BLOCK_BYTES // (8 * 500)  # small m: 1 MB
    assert K.wide_piece_bytes(m, 8, 256) == 0  # float64 blocks are not widened
    rows, per_row = K.block_plan(m, 20, 4)
    piece = K.wide_piece_rows(m, rows) * m * 8
    assert K.stream_bytes(m, 20, 4, 2) == 2 * (rows * per_row + piece)
    X = rng.standard_normal((700, 20)).astype(np.float32)
    C = rng.standard_normal((m, 20)).astype(np.float32)
    for budget, cache in (("2GB", False), ("2GB", True), ("40MB", False)):
        op = KernelOperator(X, C, Gaussian(5.0), memory_budget=budget, cache=cache)
        pieces = op.n_jobs * K.wide_piece_bytes(m, 4, K.block_plan(m, 20, 4)[0])
        assert op.block_rows * per_row * op.n_jobs + pieces <= op.budget
        seen = []
        B64 = rng.standard_normal((m, 9))
        for _, _, wide in op._product_blocks(0, np.float64, op._cached_rows(9)):
            assert wide.dtype == np.float64
            seen.append(wide.shape[0])
        assert max(seen) == (64 if cache else min(64, op.block_rows))
        Kd = Gaussian(5.0)(X, C).astype(np.float32).astype(np.float64)
        np.testing.assert_allclose(op.matvec(B64), Kd @ B64, rtol=1e-5, atol=1e-4)


def test_the_cache_takes_what_the_budget_holds_beside_the_streamed_blocks(rng):
    """An operator caches as many rows of K_nm as its budget holds beside its workers'
    streamed blocks at full size (``cache_rows``), and never fewer than ``CACHE_FRACTION``
    of the budget: a budget of K_nm plus the blocks caches all of K_nm (60% of it would
    have cached 71%; CUDA keeps the fraction), half of K_nm plus the blocks caches half, a
    small budget keeps the fraction; cache, blocks and pieces stay
    inside every budget, and the products are the dense ones whatever is cached."""
    from kernelpath.operators import blocks as K

    n, m, d = 40_000, 300, 10
    X = rng.standard_normal((n, d))
    C = rng.standard_normal((m, d))
    rows, per_row = K.block_plan(m, d, 8)
    streams = K.stream_bytes(m, d, 8, 2)
    assert streams == 2 * rows * per_row  # float64: no widened pieces
    # what reading a row of a source allocates is held per row of every worker's block
    assert K.stream_bytes(m, d, 8, 2, read_bytes=98) == 2 * rows * (per_row + 98)
    with pytest.raises(ValueError, match="read_bytes"):
        K.stream_bytes(m, d, 8, 2, read_bytes=-1)
    full = n * m * 8
    assert K.cache_rows(full + streams, m * 8, streams) == n
    assert K.cache_rows(full + streams, m * 8, streams) > K.CACHE_FRACTION * (full + streams) / (
        m * 8
    )
    on_cuda = K.cache_rows(full + streams, m * 8, streams, on_cuda=True)
    assert on_cuda == int(K.CACHE_FRACTION * (full + streams)) // (m * 8)  # CUDA: the fraction
    small = streams  # the blocks alone: the fraction's rows
    with pytest.raises(ValueError, match="row_bytes"):
        K.cache_rows(full, 0, streams)
    assert K.cache_rows(small, m * 8, streams) == int(K.CACHE_FRACTION * small) // (m * 8)
    Kd = Gaussian(3.0)(X, C)
    V = rng.standard_normal((m, 3))
    for budget, share in ((full + streams, 1.0), (full // 2 + streams, 0.5), (small, None)):
        op = KernelOperator(X, C, Gaussian(3.0), memory_budget=budget, n_jobs=2)
        if share is not None:  # the rows the blocks leave, spread over the two chunks
            assert abs(op.n_cached - share * n) <= 2
        else:
            assert op.n_cached <= K.CACHE_FRACTION * budget / (m * 8)
            assert op.n_cached >= K.CACHE_FRACTION * budget / (m * 8) - 2
        assert op.n_cached * m * 8 + op.n_jobs * op.block_rows * per_row <= op.budget
        if share is not None:  # the blocks keep their full size
            assert op.block_rows == rows
        np.testing.assert_allclose(op.matvec(V), Kd @ V, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(op.matvec(V), Kd @ V, rtol=1e-10, atol=1e-12)  # cached
