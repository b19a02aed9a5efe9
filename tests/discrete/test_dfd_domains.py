import math

import pytest
import torch

from scorebayes.discrete import Domain


def test_kinds_and_conventions():
    dom = Domain([["-inf", "inf"], [0, 2], [0, "inf"], ["-inf", 3]])
    assert dom.kinds == ["unbounded", "bounded", "lower", "upper"]
    x = torch.tensor([[5.0, 0.0, 0.0, 3.0], [-2.0, 2.0, 4.0, -1.0]], dtype=torch.float64)
    minus, valid = dom.minus(x)
    plus = dom.plus(x)
    # unbounded: +-1; bounded cyclic: 0^- = 2, 2^+ = 0; lower: 0^- = star; upper: reversed order
    assert minus.tolist() == [[4.0, 2.0, 0.0, 3.0], [-3.0, 1.0, 3.0, 0.0]]
    assert valid.tolist() == [[True, True, False, False], [True, True, True, True]]
    assert plus.tolist() == [[6.0, 1.0, 1.0, 2.0], [-1.0, 0.0, 5.0, -2.0]]


def test_binary_cyclic_is_flip_both_ways():
    dom = Domain.binary(1)
    x = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    assert dom.minus(x)[0].tolist() == [[1.0], [0.0]]
    assert dom.plus(x).tolist() == [[1.0], [0.0]]
    pm = Domain.binary(2, coding="pm1")
    y = torch.tensor([[-1.0, 1.0]], dtype=torch.float64)
    assert pm.minus(y)[0].tolist() == [[1.0, -1.0]] and pm.plus(y).tolist() == [[1.0, -1.0]]
    assert pm.minus(y)[1].all()


def test_neighbours_are_mutual_inverses():
    dom = Domain([["-inf", "inf"], [0, 3], [0, "inf"], ["-inf", 2]])
    g = torch.Generator().manual_seed(0)
    x = torch.stack([torch.randint(-5, 5, (50,), generator=g), torch.randint(0, 4, (50,), generator=g),
                     torch.randint(0, 4, (50,), generator=g), torch.randint(-3, 3, (50,), generator=g)], -1).double()
    nb = dom.neighbours(x)
    for j in range(4):
        back = dom.neighbours(nb.minus[j]).plus[j]
        assert torch.equal(back[nb.valid[:, j]], x[nb.valid[:, j]])
        forth = dom.neighbours(nb.plus[j]).minus[j]
        assert torch.equal(forth, x)
        # only coordinate j changes
        other = [k for k in range(4) if k != j]
        assert torch.equal(nb.minus[j][:, other], x[:, other])


@pytest.mark.parametrize("bad, message", [
    (torch.tensor([[0.5]]), "integers"),
    (torch.tensor([[-1.0]]), "outside the domain"),
    (torch.tensor([[1.0, 2.0]]), "shape"),
    (torch.tensor([[math.nan]]), "non-finite"),
])
def test_check_errors(bad, message):
    with pytest.raises(ValueError, match=message):
        Domain.counts(1).check(bad)


def test_spacing_check_and_bad_bounds():
    with pytest.raises(ValueError, match="outside"):
        Domain.binary(1, coding="pm1").check(torch.tensor([[0.0]]))
    with pytest.raises(ValueError, match="below"):
        Domain([[3, 1]])
    with pytest.raises(ValueError, match="inf"):
        Domain([["zero", 1]])
