"""Writes a torchvision ResNet (random weights, fixed seed) as a scripted TorchScript module.

Run with a Python that has torch and torchvision (Debian's /usr/bin/python3 here):
    python3 bench/libtorch/make_resnet.py OUT.pt [resnet18|resnet50]
"""
import sys

import torch
import torchvision

ARCHITECTURES = {"resnet18": torchvision.models.resnet18, "resnet50": torchvision.models.resnet50}

arch = sys.argv[2] if len(sys.argv) > 2 else "resnet18"
torch.manual_seed(0)
model = ARCHITECTURES[arch](weights=None).eval()
torch.jit.script(model).save(sys.argv[1])
