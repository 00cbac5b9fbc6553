"""fast_sources: module attribute sources become dict lookups exactly where lookup ends in the dicts."""
import pytest

torch = pytest.importorskip("torch")

from torch_jit_cache.guard.fast_sources import SourceRewriter  # noqa: E402
from torch_jit_cache.guard.sources import AttrSource, LocalSource, load_source  # noqa: E402

pytestmark = pytest.mark.torch


class M(torch.nn.Module):
    k = 3  # a class attribute: stays an attribute read

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
        self.register_buffer("buf", torch.zeros(1))
        self.scale = 2.0

    @property
    def doubled(self):
        return self.scale * 2


def rewrite(obj, source):
    f_locals = {"self": obj}
    rw = SourceRewriter(lambda s: load_source(s, f_locals, {}, {}))
    out = rw.rewrite(source)
    new, old = load_source(out, f_locals, {}, {}), load_source(source, f_locals, {}, {})
    assert new is old or (not isinstance(old, torch.Tensor) and new == old), "the same value"
    return out.name()


def test_module_attributes_become_dict_lookups():
    m, self_ = M(), LocalSource("self")
    assert rewrite(m, AttrSource(self_, "layers")) == "L['self'].__dict__['_modules']['layers']"
    weight = AttrSource(AttrSource(AttrSource(self_, "layers"), "0"), "weight")
    assert rewrite(m, weight) == ("L['self'].__dict__['_modules']['layers'].__dict__['_modules']['0']"
                                  ".__dict__['_parameters']['weight']")
    assert rewrite(m, AttrSource(self_, "buf")) == "L['self'].__dict__['_buffers']['buf']"
    assert rewrite(m, AttrSource(self_, "training")) == "L['self'].__dict__['training']"
    assert rewrite(m, AttrSource(self_, "scale")) == "L['self'].__dict__['scale']"


def test_class_attributes_properties_and_plain_objects_are_left_alone():
    m, self_ = M(), LocalSource("self")
    assert rewrite(m, AttrSource(self_, "k")) == "L['self'].k"
    assert rewrite(m, AttrSource(self_, "doubled")) == "L['self'].doubled"

    class Plain:
        def __init__(self):
            self.v = 1

    assert rewrite(Plain(), AttrSource(self_, "v")) == "L['self'].v"
