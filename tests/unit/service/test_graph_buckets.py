"""Bucket shapes cover every batch the batcher can form, and a batch gets the bucket that pads it least."""

from __future__ import annotations

import pytest
import torch

from embedperf.errors import DeviceError
from modelcore.graphs import BucketRunner, batch_buckets, bucket_shapes, graph_api


def test_batch_buckets_double_up_to_the_cap() -> None:
    assert batch_buckets(32) == [1, 2, 4, 8, 16, 32]
    assert batch_buckets(100) == [1, 2, 4, 8, 16, 32, 64, 100]
    assert batch_buckets(1) == [1]


def test_shapes_respect_the_token_cap_and_end_at_the_model_limit() -> None:
    shapes = bucket_shapes(max_batch_size=32, max_tokens=256, max_batch_tokens=2048)
    assert (32, 64) in shapes and (32, 128) not in shapes  # 32 x 128 > 2,048 padded tokens
    assert (1, 256) in shapes and (8, 256) in shapes and (16, 256) not in shapes
    assert max(length for _, length in shapes) == 256


def test_the_smallest_holding_bucket_is_chosen_and_none_when_nothing_holds() -> None:
    runner = BucketRunner(
        lambda ids, mask: torch.zeros((ids.shape[0], 4)),
        torch.device("cpu"),
        bucket_shapes(32, 256, 2048),
        pad_token_id=0,
        dimension=4,
        capture=False,
    )
    assert runner.shape_for(3, 20) == (4, 32)
    assert runner.shape_for(1, 256) == (1, 256)
    assert runner.shape_for(32, 100) is None  # over the token cap: runs eagerly
    vectors = runner.run([[1, 2, 3]] * 3)
    assert vectors is not None and vectors.shape == (3, 4)
    assert runner.run([[1] * 100] * 32) is None
    assert (runner.stats.hits, runner.stats.misses) == (1, 1)


def test_graphs_on_cpu_are_refused_with_what_to_do() -> None:
    with pytest.raises(DeviceError, match="--graphs off"):
        graph_api(torch.device("cpu"))
