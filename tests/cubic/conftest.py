import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The cubic tests use tiny tensors: one intra-op thread is as fast and immune to CPU
    oversubscription (OpenMP barriers stall when other processes hold the cores). Restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
