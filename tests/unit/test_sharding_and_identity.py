"""Shards split problems contiguously; a run's identity names what differs."""

import itertools

import pytest

from workbench.engine.identity import identity_diff, identity_hash
from workbench.engine.plan import problem_bounds
from workbench.engine.sharding import Shard, shard_from_env
from workbench.errors import UsageError


@pytest.mark.parametrize(("n", "total"), [(10, 3), (1319, 8), (5, 5), (3, 4), (100, 1)])
def test_shards_cover_every_problem_exactly_once_in_contiguous_ranges(n, total):
    slices = [Shard(i, total).slice(0, n) for i in range(total)]
    assert slices[0][0] == 0 and slices[-1][1] == n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(slices))
    sizes = [hi - lo for lo, hi in slices]
    assert max(sizes) - min(sizes) <= 1


def test_shard_slices_respect_a_problem_range():
    assert Shard(1, 2).slice(100, 200) == (150, 200)


def test_shards_come_from_nel_variables_or_a_slurm_array():
    assert shard_from_env({"NEL_SHARD_IDX": "1", "NEL_TOTAL_SHARDS": "4"}) == Shard(1, 4)
    assert shard_from_env({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3"}) == Shard(2, 3)
    assert shard_from_env({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "2",
                           "SLURM_ARRAY_TASK_MIN": "4"}) == Shard(1, 2)
    assert shard_from_env({}) == Shard(0, 1)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NEL_SHARD_IDX": "1"}, "set both"),
        ({"NEL_SHARD_IDX": "x", "NEL_TOTAL_SHARDS": "2"}, "not an integer"),
        ({"NEL_SHARD_IDX": "2", "NEL_TOTAL_SHARDS": "2"}, "outside"),
        ({"NEL_SHARD_IDX": "0", "NEL_TOTAL_SHARDS": "0"}, "at least 1"),
    ],
)
def test_bad_shard_variables_are_refused_by_name(env, message):
    with pytest.raises(UsageError, match=message):
        shard_from_env(env)


def test_problem_bounds_apply_the_range_then_the_first_n():
    assert problem_bounds(1319, None, None) == (0, 1319)
    assert problem_bounds(1319, 100, None) == (0, 100)
    assert problem_bounds(1319, 10, (50, 60)) == (50, 60)
    assert problem_bounds(1319, 5, (50, 60)) == (50, 55)
    with pytest.raises(UsageError, match="outside"):
        problem_bounds(10, None, (5, 20))


def test_identity_diff_names_each_field_that_differs():
    old = {"temperature": 0.0, "model_id": "a", "seed": 1}
    new = {"temperature": 0.7, "model_id": "a", "seed": None}
    assert identity_diff(old, new) == ["seed: 1 -> None", "temperature: 0.0 -> 0.7"]
    assert identity_hash(old) == identity_hash(dict(reversed(list(old.items()))))
