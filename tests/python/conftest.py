"""Shared pytest set-up for the Python tests: markers only."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "torch_backend: needs TENSOR_MATCH/GLOBAL_STATE guards (torch and _C's torch backend)",
    )
