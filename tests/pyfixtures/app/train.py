# A user's script: cupy first, then torch.
import os
import cupy
import torch

print("imported", cupy.__name__, torch.__name__, os.sep)
