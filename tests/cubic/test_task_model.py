import numpy as np
import pytest
import torch

from polyinterp.cubic.regressor.model import CubicMLP, build_model
from polyinterp.cubic.regressor.task import generator, sample_inputs, sample_out_of_range, target
from polyinterp.errors import ConfigError, DataError

RANGES = {"x": [-2.0, 2.0], "a": [-1.0, 3.0], "b": [-2.0, 0.5]}


def test_target_matches_numpy_polyval():
    inp = sample_inputs(200, RANGES, generator(0, 0)).double()
    expected = [np.polyval([1.0, a, b, 0.0], x) for x, a, b in inp.numpy()]
    np.testing.assert_allclose(target(inp).numpy(), expected, rtol=1e-12, atol=1e-12)


def test_samples_fill_the_box_and_are_seeded():
    a = sample_inputs(20000, RANGES, generator(3, 1))
    b = sample_inputs(20000, RANGES, generator(3, 1))
    c = sample_inputs(20000, RANGES, generator(3, 2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    for j, name in enumerate(("x", "a", "b")):
        lo, hi = RANGES[name]
        assert a[:, j].min() >= lo and a[:, j].max() <= hi
        # uniform: mean near the middle, spread near the full width
        assert abs(float(a[:, j].mean()) - (lo + hi) / 2) < 0.03 * (hi - lo)
        assert float(a[:, j].max() - a[:, j].min()) > 0.99 * (hi - lo)


def test_out_of_range_samples_leave_the_box_but_stay_in_the_enlarged_one():
    s = sample_out_of_range(5000, RANGES, 1.5, generator(0, 3))
    a, b = s[:, 1], s[:, 2]
    inside = (a >= -1) & (a <= 3) & (b >= -2) & (b <= 0.5)
    assert len(s) == 5000 and not bool(inside.any())
    assert a.min() >= -2.0 and a.max() <= 4.0 and b.min() >= -2.625 and b.max() <= 1.125
    assert s[:, 0].min() >= -2 and s[:, 0].max() <= 2
    with pytest.raises(ConfigError, match="out_of_range_expand"):
        sample_out_of_range(10, RANGES, 1.0, generator(0, 3))


def test_bad_range_names_the_key():
    with pytest.raises(ConfigError, match=r"cubic\.task\.ranges\.a"):
        sample_inputs(10, {"x": [0, 1], "a": [1, 1], "b": [0, 1]}, generator(0, 0))


def test_model_split_at_last_hidden_layer():
    m = build_model((3, 64, 64, 64, 15, 1), seed=1)
    inp = sample_inputs(50, RANGES, generator(0, 0))
    h = m.hidden(inp)
    assert h.shape == (50, 15) and bool((h >= 0).all())
    torch.testing.assert_close(m.head(h), m(inp))
    # independent route: an explicit Sequential with the same weights
    layers = [mod for mod in m.modules() if isinstance(mod, torch.nn.Linear)]
    x = inp
    for lin in layers[:-1]:
        x = torch.relu(x @ lin.weight.T + lin.bias)
    torch.testing.assert_close(x, h)
    torch.testing.assert_close((x @ layers[-1].weight.T + layers[-1].bias).squeeze(-1), m(inp))


def test_init_is_seeded():
    a, b, c = build_model((3, 8, 4, 1), 0), build_model((3, 8, 4, 1), 0), build_model((3, 8, 4, 1), 1)
    for pa, pb, pc in zip(a.parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb) and not torch.equal(pa, pc)


def test_widths_must_start_at_3_and_end_at_1():
    with pytest.raises(DataError):
        CubicMLP((2, 8, 1))
