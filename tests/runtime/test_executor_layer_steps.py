"""runtime/layer_steps.py: the per-layer optimizer views built once update each layer
exactly as the optimizer's own global step does (bit for bit on CPU), follow the
optimizer's hyper-parameters, state and groups, and never step the wrapped optimizer
through an LR scheduler's instance-level ``step``."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from gradsched.runtime.layer_steps import LayerSteps  # noqa: E402

STEPS = 4


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3),
                               torch.nn.Linear(3, 2))


def _layers(model):
    return [list(m.parameters(recurse=False)) for m in model if list(m.parameters())]


OPTIMIZERS = {
    # two groups with different hyper-parameters, the groups cutting across layers
    "sgd-2groups": lambda ps: torch.optim.SGD(
        [{"params": ps[::2], "lr": 0.05}, {"params": ps[1::2], "lr": 0.01, "nesterov": True}],
        lr=0.05, momentum=0.9, weight_decay=1e-3),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01),
    "adamw-foreach": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.01,
                                                  foreach=True),
    "adamw-amsgrad": lambda ps: torch.optim.AdamW(ps, lr=0.01, amsgrad=True),
}


def _grads(step, params):
    gen = torch.Generator().manual_seed(step)
    return [torch.randn(p.shape, generator=gen) for p in params]


def _global(name):
    model = _model()
    params = list(model.parameters())
    opt = OPTIMIZERS[name](params)
    for step in range(STEPS):
        for p, g in zip(params, _grads(step, params), strict=True):
            p.grad = g
        opt.step()
        opt.zero_grad(set_to_none=True)
    return model, opt


def _per_layer(name, reverse=False):
    model = _model()
    params = list(model.parameters())
    opt = OPTIMIZERS[name](params)
    layers = _layers(model)
    steps = LayerSteps(opt, layers)
    for step in range(STEPS):
        grads = dict(zip(params, _grads(step, params), strict=True))
        steps.record()
        order = range(len(layers))
        for layer in (reversed(order) if reverse else order):
            for p in layers[layer]:
                p.grad = grads[p]
            steps.step(layer)
            for p in layers[layer]:
                p.grad = None
    return model, opt


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_views_update_bit_for_bit_as_the_global_step(name):
    ref, ref_opt = _global(name)
    got, opt = _per_layer(name, reverse=name == "adam")
    for (n, p), q in zip(got.named_parameters(), ref.parameters(), strict=True):
        assert torch.equal(p.detach(), q.detach()), n
    # the state lives in the optimizer itself (a checkpoint sees it)
    for p, q in zip(got.parameters(), ref.parameters(), strict=True):
        for key, value in ref_opt.state[q].items():
            assert torch.equal(torch.as_tensor(opt.state[p][key]), torch.as_tensor(value)), key


def test_hyper_parameters_are_those_recorded():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = LayerSteps(opt, _layers(model))
    first = model[0].weight.detach().clone()
    steps.record()
    opt.param_groups[0]["lr"] = 100.0  # changed after the update became due
    model[0].weight.grad = torch.ones_like(first)
    steps.step(0)
    torch.testing.assert_close(model[0].weight.detach(), first - 0.1)
    assert opt.param_groups[0]["lr"] == 100.0  # the optimizer's own groups untouched


def test_a_changed_optimizer_rebuilds_the_views():
    model = _model()
    layers = _layers(model)
    opt = torch.optim.SGD(list(model[0].parameters()), lr=0.1)
    steps = LayerSteps(opt, layers)
    steps.record()
    model[2].weight.grad = torch.ones_like(model[2].weight)
    before = model[2].weight.detach().clone()
    steps.step(1)  # not in the optimizer: not updated
    assert torch.equal(model[2].weight.detach(), before)
    opt.add_param_group({"params": list(model[2].parameters()), "lr": 0.5})
    steps.record()
    steps.step(1)
    torch.testing.assert_close(model[2].weight.detach(), before - 0.5)


def test_views_follow_load_state_dict():
    """load_state_dict replaces the optimizer's state object and groups."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    steps = LayerSteps(opt, _layers(model))
    w = model[0].weight
    for _ in range(2):
        steps.record()
        w.grad = torch.ones_like(w)
        steps.step(0)
        if not opt.state[w]:
            break
        opt.load_state_dict(opt.state_dict())
    # the second step's buffer (0.9 * 1 + 1) is in the optimizer's replaced state
    torch.testing.assert_close(opt.state[w]["momentum_buffer"], torch.full_like(w, 1.9))


def test_lr_scheduler_wrapper_is_not_called_by_the_views():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    steps = LayerSteps(opt, _layers(model))
    before = [p.detach().clone() for p in model.parameters()]
    steps.record()
    for p in model.parameters():  # the wrapper would step all of them
        p.grad = torch.ones_like(p)
    steps.step(0)
    changed = [not torch.equal(p.detach(), b) for p, b in zip(model.parameters(), before,
                                                               strict=True)]
    assert changed == [True, True, False, False, False, False]  # layer 0: weight, bias
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "lr_scheduler.step() before optimizer.step()"
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)
