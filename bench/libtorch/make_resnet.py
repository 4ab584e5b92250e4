"""Writes torchvision's ResNet-18 (random weights, fixed seed) as a scripted TorchScript module.

Run with Debian's /usr/bin/python3, which has torch and torchvision:
    /usr/bin/python3 bench/libtorch/make_resnet.py OUT.pt
"""
import sys

import torch
import torchvision

torch.manual_seed(0)
model = torchvision.models.resnet18(weights=None).eval()
torch.jit.script(model).save(sys.argv[1])
