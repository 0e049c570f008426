import pytest
import torch


@pytest.fixture(autouse=True, scope='package')
def one_thread():
    """The models here are tiny: one intra-op thread is faster than several
    (and far faster on a shared, busy machine); restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
