"""The one "does the plan cover this model" check (``gradsched run`` and ``advise
--validate``), on PyTorch's meta device."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from gradsched.errors import InputError
from gradsched.plan import Bucket, Plan
from gradsched.runtime.coverage import check_plan_covers_model, model_parameters


def test_model_parameters_are_built_on_the_meta_device() -> None:
    params = model_parameters("tiny-mlp", 4, None)
    assert list(params) == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    assert params["0.weight"] == 64 * 128


def test_a_covering_plan_passes_and_others_name_the_first_mismatch() -> None:
    params = model_parameters("tiny-mlp", 4, None)
    names = list(params)
    check_plan_covers_model(Plan("x", (Bucket(tuple(names)),)), params, model="tiny-mlp",
                            source="p.json")
    renamed = Plan("x", (Bucket(tuple(n.replace("2.weight", "2.kernel") for n in names)),))
    with pytest.raises(InputError) as exc:
        check_plan_covers_model(renamed, params, model="tiny-mlp", source="p.json",
                                hint=": give --model")
    text = str(exc.value)
    for needle in ("p.json", "not model 'tiny-mlp''s parameters", "first: '2.weight'",
                   "first: '2.kernel'", "that the model does not have", ": give --model"):
        assert needle in text, text
    twice = Plan("x", (Bucket(tuple(names)), Bucket((names[0],))))
    with pytest.raises(InputError, match="is in buckets 0 and 1"):
        check_plan_covers_model(twice, params, model="tiny-mlp", source="p.json")
