"""The package's own suite (run by CTest through the venv's python, PYTHONPATH = the staged package of this build):
the examples' kernels are imported from examples/python; the C++ programs it compares with come from CMake."""
import os
import sys

import torch

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python")
sys.path.insert(0, os.path.abspath(EXAMPLES))
torch.set_num_threads(1)  # as kvconf's libtorch kernels run (kernels/torch/torch_ops.cpp), for bitwise parity
