"""DeAR's look-ahead reads each layer's buckets from one sort of the (layer, bucket) pairs:
the same buckets, in the same order, as scanning the members layer by layer."""

from __future__ import annotations

import numpy as np

from gradsched.replay.lookahead import layer_buckets


def test_layer_buckets_equal_a_scan_per_layer() -> None:
    rng = np.random.default_rng(5)
    for _ in range(50):
        n_layers, n_buckets = int(rng.integers(1, 40)), int(rng.integers(1, 30))
        members = int(rng.integers(0, 200))
        layer_of = rng.integers(0, n_layers, members)
        bucket_of = rng.integers(0, n_buckets, members)
        want = [sorted(set(bucket_of[layer_of == v].tolist())) for v in range(n_layers)]
        assert layer_buckets(layer_of, bucket_of, n_layers, n_buckets) == want
